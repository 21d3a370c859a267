"""The held-out replay (benchmarks/replay_heldout.py): conversations made by
seed, 20 questions about turns 1–20 of each, in three settings (a faithful
summariser at 8,192 tokens; a small model's summaries at 4,096; those on a
server like an older llama.cpp). In every setting and seed: at least 95 % of
the answers in the last request or an entry it names, the last request at
most a quarter of the full history's tokens (wisp's estimate), and no turn
failing; and at least 98 % (``BY_SEARCH``) of the answers found by one
search of the question's own words (in the result, or in an entry it names).

The generator is checked first: the same seed gives the same conversation,
different seeds differ, every kind of fact is asked about, each answer is
established in its early turn and repeated by no later one.
The reports are printed (``pytest -s``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.replay_heldout import (BY_SEARCH, EARLY, IN_REACH, QUESTIONS, RATIO, TURNS, Conversation,
                                       Question, generate, run_heldout)

SEEDS = (1, 2, 3)
#: Seeds and settings known to miss a bar, and why: they are expected to fail (strictly, so that one
#: that starts passing is seen).
KNOWN_SHORT: dict[tuple[int, str], str] = {}  # every setting of every seed run here reaches its figures
SLOW_SEEDS = (4, 5, 6, 7, 8)


def _turn_text(convo: Conversation, n: int) -> str:
    """Everything turn ``n`` puts on record: prompt, reply, commands, outputs and the files it reads."""
    t = convo.turns[n]
    parts = [t.prompt, t.reply]
    for s in t.steps:
        parts += [s.path, s.command, s.output, convo.files.get(s.path, "")]
    return "\n".join(parts)


@pytest.mark.parametrize("seed", [*SEEDS, *SLOW_SEEDS])
def test_the_generator_writes_conversations_of_the_kind(seed: int) -> None:
    convo = generate(seed)
    assert len(convo.turns) == TURNS and sorted(convo.turns) == list(range(1, TURNS + 1))
    assert len(convo.questions) == QUESTIONS
    assert len({q.text for q in convo.questions}) == QUESTIONS  # no question asked twice
    assert {"stated", "corrected", "read", "output", "reply"} <= {q.kind for q in convo.questions}
    for q in convo.questions:
        assert 1 <= q.turn <= EARLY, q
        assert q.found_in(_turn_text(convo, q.turn)), q  # established where it says
        later = [n for n in range(q.turn + 1, TURNS + 1) if q.found_in(_turn_text(convo, n))]
        # only a correction's first value may come back, in the turn that corrects it
        assert not [n for n in later if n > EARLY], (q, later)
        assert q.search_words() and all(w == w.lower() for w in q.search_words())
    # the facts are in the early turns, and the rest is long: reads and runs beside prose
    steps = [s for n in range(EARLY + 1, TURNS + 1) for s in convo.turns[n].steps]
    assert {s.kind for s in steps} == {"read", "run"}
    assert sum(len(_turn_text(convo, n)) for n in range(1, TURNS + 1)) > 120_000  # characters


def test_the_same_seed_gives_the_same_conversation_and_others_differ() -> None:
    a, b, c = generate(11), generate(11), generate(12)
    assert [t.prompt for t in a.turns.values()] == [t.prompt for t in b.turns.values()]
    assert [(q.text, q.answer, q.turn) for q in a.questions] == [(q.text, q.answer, q.turn) for q in b.questions]
    assert a.files == b.files
    assert [q.answer for q in a.questions] != [q.answer for q in c.questions]
    assert [t.prompt for t in a.turns.values()] != [t.prompt for t in c.turns.values()]
    assert [q.kind for q in a.questions] != [q.kind for q in c.questions] or \
        [q.turn for q in a.questions] != [q.turn for q in c.questions]


def test_an_answer_is_judged_as_a_whole_phrase() -> None:
    q = Question("How many workers do we run in production?", "12 workers", "stated")
    assert q.found_in("We run 12 workers in production.")
    assert not q.found_in("We run 112 workers in production.")
    assert not q.found_in("workers: 12")
    assert Question("Which host?", "bravo-3.internal", "stated").found_in("on bravo-3.internal.")
    assert not Question("Which host?", "bravo-3.internal", "stated").found_in("on bravo-3.internal-old")
    assert q.search_words() == ["workers", "run", "production"]


async def _check(wisp_home: Path, tmp_path: Path, seed: int, setting: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    result = await run_heldout(wisp_home, work, seed=seed, setting_name=setting)
    print()
    print(result.report())
    assert len(result.found) == QUESTIONS
    assert result.requests > TURNS  # every turn was asked, tool steps too
    assert result.summary_versions >= 2  # the running summary was written several times
    assert not result.failed_turns, result.report()
    assert result.ratio <= RATIO, result.report()
    assert result.in_reach >= IN_REACH, result.report()
    assert result.by_search >= BY_SEARCH, result.report()


@pytest.mark.parametrize("setting", ["faithful", "small", "old-llama"])
@pytest.mark.parametrize("seed", SEEDS)
async def test_heldout_replay(wisp_home: Path, tmp_path: Path, seed: int, setting: str) -> None:
    await _check(wisp_home, tmp_path, seed, setting)


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["faithful", "small", "old-llama"])
@pytest.mark.parametrize("seed", SLOW_SEEDS)
async def test_heldout_replay_more_seeds(wisp_home: Path, tmp_path: Path, seed: int, setting: str) -> None:
    if (seed, setting) in KNOWN_SHORT:
        try:
            await _check(wisp_home, tmp_path, seed, setting)
        except AssertionError:
            pytest.xfail(KNOWN_SHORT[seed, setting])
        pytest.fail(f"seed {seed} {setting} now passes: take it out of KNOWN_SHORT")
    await _check(wisp_home, tmp_path, seed, setting)
