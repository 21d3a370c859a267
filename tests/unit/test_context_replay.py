"""The replay check (issue "Layered context", "Tests and what this must show"):
a scripted 60-turn session against the fake endpoint (file reads, test runs,
decisions, a branch change, a task), then 20 questions whose answers lie in
early turns. Each answer must be in the last request's composed context or
one named recall away, and the last request must use at most a quarter of
the tokens of the full history. The same check runs as
``python benchmarks/replay_context.py``; the report is printed (``pytest -s``)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.replay_context import QUESTIONS, TURNS, run_replay


async def test_replay_of_a_long_session(wisp_home: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    result = await run_replay(wisp_home, work)
    print()
    print(result.report())
    assert len(result.answers) == len(QUESTIONS) == 20
    missing = [q.text for q, where in result.answers if where == "missing"]
    assert not missing, missing
    assert result.ratio <= 0.25, result.report()
    # the window did fill: older turns left it under a running summary, and references stood for outputs
    assert result.summary_versions >= 2 and result.side_calls >= result.summary_versions
    assert result.requests > TURNS
    assert result.requests_with_references >= 10  # ended turns' outputs went as references
    assert "Running summary of turns 1–" in result.last_text
    assert 'branch = "feature/retry-backoff" [tool git, turn 30' in result.last_text
    assert '(before: "main")' in result.last_text
    # the facts the session set are the person's and the tools'
    assert "decision http library = httpx [person]" in result.facts
    assert any(f.startswith("tests pytest = passed") and f.endswith("[tool]") for f in result.facts)
    # an answer reached by recall names its entry in the context
    for q, where in result.answers:
        if where.startswith("recall entry "):
            assert f"entry {where.split()[-1]}" in result.last_text


async def test_replay_with_a_small_model_keeps_coverage(wisp_home: Path, tmp_path: Path) -> None:
    """Issue "Compaction you can see and trust": the fake's summaries miss half the identifiers (first
    time and when asked again); wisp completes every version, and the coverage stays at 98 % or more."""
    work = tmp_path / "work"
    work.mkdir()
    result = await run_replay(wisp_home, work, small_model=True)
    print()
    print(result.report())
    assert result.covered / len(result.answers) >= 0.98, result.report()
    assert result.identifier_coverage >= 0.98, result.report()
    # the small model did miss identifiers, and wisp completed the versions that missed them
    assert result.model_missed > 0 and result.completed_versions >= result.summary_versions // 2
    assert result.ratio <= 0.25
