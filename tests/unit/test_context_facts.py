"""Facts and the task (issue "Layered context", "Facts" and "Task"): precedence,
proposals, versions, forgetting, keeping, audit events, parsing. Real SQLite
files and a real audit log."""

from __future__ import annotations

from pathlib import Path

import pytest

from wisp.core.database import open_store
from wisp.core.audit import AuditLog
from wisp.core.context.facts import (FactBook, FactError, fact_line, history_text, local_time,
                                     parse_assignment, parse_fact_id)
from wisp.core.context.task import TaskBook, parse_task, task_visible
from wisp.core.store import Store


@pytest.fixture
async def book(tmp_path: Path):
    store = await open_store(tmp_path / "w.db")
    audit = AuditLog(tmp_path / "audit")
    conv = await store.create_conversation(str(tmp_path))
    yield FactBook(store, audit), conv.id, audit
    await store.close()


def fact_events(audit: AuditLog) -> list[dict]:
    return [e for e in audit.iter_events() if e["kind"] == "fact.recorded"]


async def test_versions_are_numbered_per_conversation_and_supersede(book) -> None:
    facts, c, audit = book
    a = await facts.record(c, "branch", "", "main", source="tool", tool="git", turn=1)
    b = await facts.record(c, "decision", "http library", "requests", source="person", turn=1)
    d = await facts.record(c, "branch", "", "feature/x", source="tool", tool="git", turn=4)
    assert (a.fact.vid, b.fact.vid, d.fact.vid) == ("c1", "c2", "c3")
    assert d.superseded is not None and d.superseded.vid == "c1"
    old = await facts.get(c, 1)
    assert old.state == "superseded" and old.superseded_by == 3
    current = await facts.current(c)
    assert [f.vid for f in current] == ["c2", "c3"]  # decision before branch, in subject order
    # another conversation counts from c1 again
    other = await facts.store.create_conversation("/elsewhere")
    e = await facts.record(other.id, "branch", "", "main", source="tool")
    assert e.fact.vid == "c1"


async def test_same_value_from_same_source_changes_nothing(book) -> None:
    facts, c, audit = book
    await facts.record(c, "branch", "", "main", source="tool", tool="git")
    again = await facts.record(c, "branch", "", "main", source="tool", tool="git")
    assert again.unchanged and not again.recorded and again.fact.vid == "c1"
    assert len(await facts.all(c)) == 1
    assert len(fact_events(audit)) == 1


async def test_precedence_person_over_tool_over_model(book) -> None:
    facts, c, audit = book
    person = await facts.record(c, "tests", "ci", "green", source="person")
    by_tool = await facts.record(c, "tests", "ci", "failed", source="tool", tool="run_command")
    assert by_tool.refused_by is not None and by_tool.refused_by.vid == person.fact.vid
    assert not by_tool.recorded
    by_model = await facts.record(c, "tests", "ci", "flaky", source="model", method="noted")
    assert by_model.refused_by.vid == person.fact.vid
    assert (await facts.current_of(c, "tests", "ci")).value == "green"
    # a tool's fact is above the model's, and replaces it
    m = await facts.record(c, "entity", "db", "postgres", source="model", method="noted")
    t = await facts.record(c, "entity", "db", "sqlite", source="tool", tool="read_file")
    assert t.recorded and t.superseded.vid == m.fact.vid
    again = await facts.record(c, "entity", "db", "postgres", source="model", method="noted")
    assert again.refused_by.vid == t.fact.vid
    # the person replaces anyone
    p = await facts.record(c, "entity", "db", "duckdb", source="person")
    assert p.recorded and p.superseded.vid == t.fact.vid


async def test_model_note_is_a_proposal_until_kept(book) -> None:
    facts, c, audit = book
    note = await facts.record(c, "entity", "release codename", "BLUE HERON", source="model", method="noted", turn=4)
    assert note.fact.proposal and note.fact.current
    assert "a proposal" in note.fact.state_label() and "model, noted, turn 4" == note.fact.source_label()
    kept = await facts.keep(c, note.fact.vid)
    assert not kept.proposal and kept.kept_at
    # once kept it ranks as the person's: a tool cannot replace it
    t = await facts.record(c, "entity", "release codename", "GREY HERON", source="tool", tool="x")
    assert t.refused_by is not None and t.refused_by.vid == kept.vid
    with pytest.raises(FactError, match="not a proposal"):
        await facts.keep(c, kept.vid)
    actions = [e["payload"]["action"] for e in fact_events(audit)]
    assert actions == ["recorded", "kept"]


async def test_forget_supersedes_without_replacing(book) -> None:
    facts, c, audit = book
    f = await facts.record(c, "preference", "", "terse", source="person")
    gone = await facts.forget(c, "C1")
    assert gone.forgotten and gone.state == "superseded" and gone.superseded_by is None
    assert await facts.current_of(c, "preference", "") is None
    assert [e["payload"]["action"] for e in fact_events(audit)] == ["recorded", "forgotten"]
    with pytest.raises(FactError, match="already forgotten"):
        await facts.forget(c, f.fact.vid)
    with pytest.raises(FactError, match="no fact c9"):
        await facts.forget(c, "c9")
    first = await facts.record(c, "preference", "", "verbose", source="person")
    second = await facts.record(c, "preference", "", "plain", source="person")
    assert (first.fact.vid, second.fact.vid) == ("c2", "c3")
    with pytest.raises(FactError, match="c2 is superseded by c3; use that id"):
        await facts.forget(c, first.fact.vid)


async def test_every_change_writes_fact_recorded(book) -> None:
    facts, c, audit = book
    await facts.record(c, "branch", "", "main", source="tool", tool="git", turn=1)
    await facts.record(c, "branch", "", "dev", source="tool", tool="git", turn=2)
    events = fact_events(audit)
    assert len(events) == 2
    second = events[1]
    assert second["conversation"] == c and second["turn"] == 2
    assert second["payload"]["id"] == "c2" and second["payload"]["supersedes"] == "c1"
    assert second["payload"]["value"] == "dev" and second["payload"]["source"] == "tool"
    stored = await facts.get(c, 2)
    assert stored.audit_event_id == second["id"]


async def test_history_format_is_the_reference_documents(book) -> None:
    facts, c, audit = book
    await facts.record(c, "branch", "", "main", source="tool", tool="git")
    await facts.record(c, "tests", "ci", "failed (exit status 1)", source="tool", tool="run_command", turn=2,
                       entries=[9])
    await facts.record(c, "tests", "ci", "passed", source="tool", tool="run_command", turn=11, entries=[30])
    groups = await facts.history(c, "ci")
    text = history_text("ci", groups)
    lines = text.splitlines()
    assert lines[0] == 'fact "ci": 1 subject'
    assert lines[1] == "tests ci: 2 versions, oldest first:"
    assert lines[2].startswith("- c2 [tool run_command, turn 2, entry 9] at ")
    assert lines[2].endswith(": failed (exit status 1); superseded by c3")
    assert lines[3].startswith("- c3 [tool run_command, turn 11, entry 30] at ") and lines[3].endswith(": passed; current")
    assert lines[4] == 'memory "recall entry N" shows what a fact came from.'
    assert lines[5] == "[end of what recall found]"
    # by subject for an unnamed fact, by id, and nothing for an unknown name
    assert (await facts.history(c, "branch"))[0][0] == ("branch", "")
    assert (await facts.history(c, "c3"))[0][0] == ("tests", "ci")
    assert await facts.history(c, "weather") == []
    assert history_text("x", []) == ""


def test_parse_assignment_forms() -> None:
    assert parse_assignment("entity release codename = BLUE HERON") == ("entity", "release codename", "BLUE HERON")
    assert parse_assignment("entity: release codename = 'BLUE HERON'") == ("entity", "release codename", "BLUE HERON")
    assert parse_assignment("entity release codename: BLUE HERON") == ("entity", "release codename", "BLUE HERON")
    assert parse_assignment('Decision http library = "httpx"') == ("decision", "http library", "httpx")
    assert parse_assignment("preference = short answers") == ("preference", "", "short answers")
    assert parse_assignment("branch whatever = main") == ("branch", "", "main")
    with pytest.raises(FactError, match="no subject weather to note; use one of task, decision"):
        parse_assignment("weather today = sunny", command="note")
    with pytest.raises(FactError, match="say which entity it is before the ="):
        parse_assignment("entity = BLUE HERON", command="note")
    with pytest.raises(FactError, match="write note SUBJECT NAME = VALUE"):
        parse_assignment("entity codename", command="note")
    with pytest.raises(FactError, match="give decision a value"):
        parse_assignment("decision db =")


def test_parse_fact_id() -> None:
    assert parse_fact_id("c7") == 7 and parse_fact_id("C12") == 12 and parse_fact_id(" 3 ") == 3
    with pytest.raises(FactError, match="fact ids look like c7"):
        parse_fact_id("seven")


async def test_value_limits(book) -> None:
    facts, c, audit = book
    long = await facts.record(c, "entity", "blob", "x" * 2000, source="person")
    assert len(long.fact.value) == 500 and long.fact.value.endswith("…")
    with pytest.raises(FactError):
        await facts.record(c, "entity", "blob", "   ", source="person")
    with pytest.raises(FactError, match="no subject"):
        await facts.record(c, "weather", "", "sunny", source="person")
    with pytest.raises(FactError, match="no source"):
        await facts.record(c, "entity", "x", "y", source="oracle")


def test_fact_line_marks_sources_and_proposals() -> None:
    from wisp.core.context.facts import Fact

    f = Fact(1, 1, 7, "entity", "codename", "BLUE HERON", "model", "noted", None, "current", True, turn=4)
    assert fact_line(f) == "entity codename = BLUE HERON [model, noted, turn 4; a proposal; c7]"
    t = Fact(1, 1, 2, "branch", "", "main", "tool", "observed", "git", turn=1)
    assert fact_line(t) == "branch = main [tool git, turn 1; c2]"
    assert local_time("2025-01-31T14:05:12.123456Z").count(":") == 2


# --- the task -----------------------------------------------------------------


def test_parse_task_keeps_the_objective_with_it() -> None:
    assert parse_task("fix the CI build; objective: swift test passes") == "fix the CI build; objective: swift test passes"
    assert parse_task("fix the CI build. Objective: it passes") == "fix the CI build; objective: it passes"
    assert parse_task("fix the CI build, objective: green") == "fix the CI build; objective: green"
    assert parse_task("  just   a task ") == "just a task"
    cut = parse_task("t" * 400)
    assert len(cut) == 300 and cut.endswith("…")
    with pytest.raises(FactError, match="/task THE TASK; objective"):
        parse_task("objective: nothing")
    with pytest.raises(FactError):
        parse_task("   ")


async def test_the_persons_task_is_never_replaced_by_the_models(book) -> None:
    facts, c, audit = book
    tasks = TaskBook(facts)
    set_ = await tasks.set(c, "fix the CI build; objective: tests pass", turn=2)
    assert set_.ok and set_.fact.source == "person"
    proposal = await tasks.set(c, "rewrite everything", source="model", method="noted", turn=3)
    assert not proposal.ok
    assert proposal.text == "error: the person set the task, and it stays: fix the CI build; objective: tests pass"
    assert (await tasks.current(c)).value.startswith("fix the CI build")
    cleared = await tasks.clear(c)
    assert cleared.forgotten and await tasks.current(c) is None
    assert await tasks.clear(c) is None
    model = await tasks.set(c, "add a flag; objective: it prints the plan", source="model", method="noted", turn=5)
    assert model.ok and model.text == "noted the task: add a flag; objective: it prints the plan"
    assert model.fact.proposal


def test_task_shows_from_the_next_turn_on() -> None:
    from wisp.core.context.facts import Fact

    task = Fact(1, 1, 1, "task", "", "x", "person", turn=3)
    assert not task_visible(task, 3)  # set during (or after) turn 3: not in turn 3's requests
    assert task_visible(task, 4)
    assert task_visible(task, None)
    assert not task_visible(None, 4)
    before_any = Fact(1, 1, 1, "task", "", "x", "person", turn=0)
    assert task_visible(before_any, 1)
