"""The model's own bookkeeping (issue "The model's own bookkeeping"): the fact distiller after a turn and
the assessment per request, on a real session against a fake Ollama, with the side call handed in."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from wisp.core import events as ev
from wisp.core.commands import run_command
from wisp.core.context.bookkeeping import parse_proposals
from wisp.core.session import Session, SessionOptions
from wisp.core.sidecall import SideCallError
from tests.support.fakes import reply, text
from tests.support.home import write_config
from tests.support.sidecalls import ScriptedSideCall


def facts_answer(*facts: tuple[str, str, str]) -> str:
    return json.dumps({"facts": [{"subject": s, "name": n, "value": v} for s, n, v in facts]})


def configure(home: Path, srv, **more) -> None:
    values = {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.name": "wisp-fake:latest",
              "model.timeout_s": 5, "model.load_wait_s": 1, "context.distill": True}
    values.update(more)
    write_config(home, values)


async def run(s: Session, prompt: str) -> list:
    return [e async for e in s.run_turn(prompt)]


async def test_a_decision_yields_one_proposal_with_its_source_entry(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    configure(home, srv)
    side = ScriptedSideCall([facts_answer(("decision", "csv export separator", "semicolons"))])
    srv.push(reply(text("Noted: semicolons it is.")))
    async with await Session.open(SessionOptions(workdir=tmp_path, side_call=side)) as s:
        await s.connect()
        events = await run(s, "We decided the CSV export uses semicolons.")
        fact = await s.context.facts.current_of(s.conversation_id, "decision", "csv export separator")
        report = (await run_command(s, "/inspect context")).data
    assert len(side.calls) == 1 and side.calls[0].schema is not None  # asked for the shape
    assert "We decided the CSV export uses semicolons." in side.calls[0].prompt
    assert fact is not None and fact.value == "semicolons" and fact.proposal and fact.source == "model"
    assert fact.method == "inferred" and fact.entries == (1,)  # the prompt, entry 1
    changed = [e for e in events if isinstance(e, ev.FactChanged)]
    assert [(c.subject, c.proposal) for c in changed if c.subject == "decision"] == [("decision", True)]
    cost = next(e for e in events if isinstance(e, ev.SideCallCost))
    assert cost.kind == "distiller" and cost.calls == 1 and cost.tokens > 0
    assert any(line.startswith("distiller: 1 call, about") for line in report.side_calls)


async def test_a_turn_with_nothing_to_keep_makes_no_side_call(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    configure(home, srv)
    side = ScriptedSideCall()  # any call would fail the test: it has no answer
    srv.push(reply(text("It is 4.")))
    async with await Session.open(SessionOptions(workdir=tmp_path, side_call=side)) as s:
        await s.connect()
        events = await run(s, "What is 2 + 2?")
    assert side.calls == [] and events[-1].state == "done"
    assert not [e for e in events if isinstance(e, ev.SideCallCost)]


async def test_the_persons_fact_is_not_replaced_and_at_most_12_a_turn(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    configure(home, srv)
    many = [("entity", f"service {i}", f"svc-{i}") for i in range(15)]
    side = ScriptedSideCall([facts_answer(("decision", "db", "postgres"), *many)])
    async with await Session.open(SessionOptions(workdir=tmp_path, side_call=side)) as s:
        await s.connect()
        await run_command(s, "/fact decision db = sqlite")
        srv.push(reply(text("ok")))
        await run(s, "We'll use postgres, and the services are called svc-0 to svc-14.")
        db = await s.context.facts.current_of(s.conversation_id, "decision", "db")
        services = [f for f in await s.context.facts.current(s.conversation_id) if f.subject == "entity"]
    assert db.value == "sqlite" and db.source == "person"  # the person's stays
    assert len(services) == 12  # the limit of 12 a turn, as for notes


async def test_a_failed_side_call_and_a_prose_answer(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    configure(home, srv)
    side = ScriptedSideCall([SideCallError("the server is busy", "server_error"),
                             "Sure! decision deploy day = Friday"])
    async with await Session.open(SessionOptions(workdir=tmp_path, side_call=side)) as s:
        await s.connect()
        srv.push(reply(text("ok")), reply(text("ok")))
        first = await run(s, "Let's deploy on Thursday.")
        second = await run(s, "Actually we'll deploy on Friday.")
        day = await s.context.facts.current_of(s.conversation_id, "decision", "deploy day")
    assert first[-1].state == "done" and second[-1].state == "done"  # the turn completes either way
    assert day is not None and day.value == "Friday" and day.method == "inferred"


async def test_the_assessment_infers_a_task_and_never_replaces_the_persons(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    configure(home, srv, **{"context.distill": False, "context.assess": True})
    side = ScriptedSideCall(default=lambda r: json.dumps({"task": "fix the flaky login test",
                                                          "objective": "it passes ten times in a row"}))
    async with await Session.open(SessionOptions(workdir=tmp_path, side_call=side)) as s:
        await s.connect()
        srv.push(reply(text("Looking.")), reply(text("Still looking.")), reply(text("ok")))
        await run(s, "The login test fails now and then.")
        calls = len(side.calls)
        events = await run(s, "It fails on CI mostly.")
        task = await s.context.tasks.current(s.conversation_id)
        assert task.value == "fix the flaky login test; objective: it passes ten times in a row"
        assert task.source == "model" and task.method == "inferred"
        assert any(isinstance(e, ev.SideCallCost) and e.kind == "assessment" for e in events)
        assert len(side.calls) > calls
        await run_command(s, "/task make the CI green; objective: every job passes")
        before = len(side.calls)
        await run(s, "What next?")
        task = await s.context.tasks.current(s.conversation_id)
    assert task.value == "make the CI green; objective: every job passes" and task.source == "person"
    assert len(side.calls) == before  # the person set it: no assessment is asked for


async def test_the_assessment_is_skipped_when_nothing_changed(ollama_home, tmp_path: Path) -> None:
    from wisp.core.context.bookkeeping import TaskAssessor
    from wisp.core.context.notes import ModelNotes

    home, srv = ollama_home
    configure(home, srv)
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        conv = await s.ensure_conversation()
        side = ScriptedSideCall(default=lambda r: "NONE")
        assessor = TaskAssessor(side, ModelNotes.over(s.store))
        recent = [(1, "hi", "hello")]
        await assessor.assess(conv, 2, recent)
        await assessor.assess(conv, 2, recent)  # same turns, same task
        assert len(side.calls) == 1
        await assessor.assess(conv, 3, [*recent, (2, "and now?", "now this")])
        assert len(side.calls) == 2


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_parse_proposals_never_raises(answer: str) -> None:
    for subject, name, value in parse_proposals(answer):
        assert subject in ("decision", "preference", "entity", "task") and value
