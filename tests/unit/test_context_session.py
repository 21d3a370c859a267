"""The layered context in a running session against a fake Ollama on 127.0.0.1:
workdir and branch facts, tests facts, calibration, the running summary
(side call, coverage check, retry, failures), model notes. Real SQLite and
audit log."""

from __future__ import annotations

import asyncio

from pathlib import Path
from typing import Any

import pytest

from wisp.core import events as ev
from wisp.core.session import Session, SessionOptions
from wisp.core.tools import ToolRegistry
from wisp.core.tools.base import ToolResult
from wisp.core.tools.read_file import ReadFile
from tests.support.home import write_config
from tests.support.context_fakes import CountingOllama
from tests.support.sidecalls import SummarisingSideCall
from tests.support.fakes import reply, text, tool_call

PYTEST_FAIL = ("collected 3 items\n\nFAILED tests/test_x.py::test_b - assert 1 == 2\n"
               "========================= 1 failed, 2 passed in 0.05s =========================\n")
PYTEST_PASS = "collected 3 items\n\n========================= 3 passed in 0.05s =========================\n"


class Shell:
    """A stub command tool (not read-only) with canned outputs."""

    name = "shell"
    read_only = False
    description = "Run a command."
    parameters: dict[str, Any] = {"type": "object", "properties": {"command": {"type": "string"}},
                                  "required": ["command"]}

    def __init__(self) -> None:
        self.outputs: list[tuple[str, int]] = []

    async def run(self, arguments: dict[str, Any], ctx: Any) -> ToolResult:
        out, status = self.outputs.pop(0)
        return ToolResult(out, ok=status == 0, meta={"exit_status": status})


def make_home(home: Path, srv: CountingOllama, **config: Any) -> None:
    values = {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.name": "wisp-fake:latest",
              "model.timeout_s": 5, "model.load_wait_s": 1}
    values.update(config)
    write_config(home, values)


@pytest.fixture
def srv():
    with CountingOllama() as s:
        yield s


@pytest.fixture
def side() -> SummarisingSideCall:
    return SummarisingSideCall()


async def open_session(workdir: Path, tools: list[str] | None = None,
                       side_call: SummarisingSideCall | None = None) -> Session:
    s = await Session.open(SessionOptions(workdir=workdir, tools=tools if tools is not None else ["read_file"],
                                          side_call=side_call or SummarisingSideCall()))
    assert await s.connect(), s.endpoint_error
    return s


async def run(s: Session, prompt: str) -> list:
    return [e async for e in s.run_turn(prompt)]


def git_head(workdir: Path, branch: str) -> None:
    (workdir / ".git").mkdir(exist_ok=True)
    (workdir / ".git" / "HEAD").write_text(f"ref: refs/heads/{branch}\n")


def system_of(body: dict) -> str:
    return body["messages"][0]["content"]


def facts_of(body: dict) -> str:
    """The facts and the task as a request gives them: at the end of the prompt's message, after its words."""
    from wisp.core.context.composer import FACTS_HEADING, context_part, person_part

    texts = [str(m["content"]) for m in body["messages"] if m["role"] == "user"]
    return "\n\n".join(context_part(t) or t for t in texts
                       if context_part(t) or t.startswith((FACTS_HEADING, "Task (")))


async def test_workdir_and_branch_facts_before_each_request(wisp_home: Path, srv, tmp_path: Path) -> None:
    make_home(wisp_home, srv)
    work = tmp_path / "proj"
    work.mkdir()
    git_head(work, "main")
    async with await open_session(work) as s:
        events = await run(s, "hello")
        changed = [e for e in events if isinstance(e, ev.FactChanged)]
        assert [(e.subject, e.value, e.source) for e in changed] == [("workdir", str(work.resolve()), "tool"),
                                                                     ("branch", "main", "tool")]
        assert '- branch = "main" [tool git, turn 1; c2]' in facts_of(srv.chat_bodies[0])
        events = await run(s, "again")
        assert not [e for e in events if isinstance(e, ev.FactChanged)]  # unchanged: no new version
        git_head(work, "feature/login")
        events = await run(s, "and now?")
        changed = [e for e in events if isinstance(e, ev.FactChanged)]
        assert [(e.fact, e.value) for e in changed] == [("c3", "feature/login")]
        assert '- branch = "feature/login" [tool git, turn 3; c3] (before: "main")' in facts_of(srv.chat_bodies[-1])
        history = await s.context.facts.history(s.conversation_id, "branch")
        assert [f.value for f in history[0][1]] == ["main", "feature/login"]
    recorded = [e for e in s.audit.iter_events() if e["kind"] == "fact.recorded"]
    assert [e["payload"]["value"] for e in recorded][-1] == "feature/login"


async def test_tests_fact_from_a_command_output(wisp_home: Path, srv, tmp_path: Path) -> None:
    make_home(wisp_home, srv)
    async with await open_session(tmp_path) as s:
        shell = Shell()
        s.agent.tools = ToolRegistry([ReadFile(), shell])
        shell.outputs += [(PYTEST_FAIL, 1), (PYTEST_PASS, 0)]
        srv.push(reply(tool_call("shell", {"command": "pytest -q"}), finish="tool_calls"), reply(text("One fails.")))
        events = await run(s, "run the tests")
        tests = [e for e in events if isinstance(e, ev.FactChanged) and e.subject == "tests"]
        assert len(tests) == 1 and tests[0].name == "pytest"
        assert tests[0].value == "failed (exit status 1): 1 failed, 2 passed; failing: tests/test_x.py::test_b"
        # recorded before the next request of the same turn: the model sees it at once
        assert 'tests pytest = "failed (exit status 1)' in facts_of(srv.chat_bodies[1])
        fact = await s.context.facts.current_of(s.conversation_id, "tests", "pytest")
        assert fact.source == "tool" and fact.tool == "shell" and fact.entries == (3,) and fact.turn == 1
        srv.push(reply(tool_call("shell", {"command": "pytest -q"}), finish="tool_calls"), reply(text("Green.")))
        await run(s, "again")
        history = (await s.context.facts.history(s.conversation_id, "pytest"))[0][1]
        assert [f.value.split(":")[0] for f in history] == ["failed (exit status 1)", "passed (exit status 0)"]
        # a read-only tool's output is never read as a test run
        (tmp_path / "log.txt").write_text(PYTEST_FAIL)
        srv.push(reply(tool_call("read_file", {"path": "log.txt"}), finish="tool_calls"), reply(text("ok")))
        events = await run(s, "read the log")
        assert not [e for e in events if isinstance(e, ev.FactChanged) and e.subject == "tests"]


async def test_tests_fact_from_run_commands_own_reading(wisp_home: Path, srv, tmp_path: Path) -> None:
    """run_command puts its reading of a test run in meta["tests"]; the fact is made from it."""
    make_home(wisp_home, srv)

    class Cmd(Shell):
        name = "run_command"

        async def run(self, arguments: dict[str, Any], ctx: Any) -> ToolResult:
            return ToolResult("…", ok=False, meta={"exit_status": 1, "command": "go test ./...", "tests": {
                "framework": "go", "outcome": "failed", "summary": "failed (go): 1 failed; failing: TestParse"}})

    async with await open_session(tmp_path) as s:
        s.agent.tools = ToolRegistry([Cmd()])
        srv.push(reply(tool_call("run_command", {"command": "go test ./..."}), finish="tool_calls"), reply(text("x")))
        await run(s, "go")
        fact = await s.context.facts.current_of(s.conversation_id, "tests", "go test ./...")
        assert fact.value == "failed (go, exit status 1): 1 failed; failing: TestParse"


async def test_calibration_is_kept_per_model(wisp_home: Path, srv, tmp_path: Path) -> None:
    make_home(wisp_home, srv)
    async with await open_session(tmp_path) as s:
        srv.push(reply(text("ok"), usage=(10, 1)))
        await run(s, "word " * 1000)  # the reported count is far below the estimate: ignored (truncation)
        state = await s.context.calibration.get("wisp-fake:latest")
        assert state.samples == 0
        srv.push(reply(text("ok"), usage=(3000, 1)))
        await run(s, "word " * 1000)
        state = await s.context.calibration.get("wisp-fake:latest")
        assert state.samples == 1 and state.context_window == s.context_window
        estimate = s.agent.last_usage.estimated_prompt  # the second request's, as the agent counted it
        assert state.ratio == pytest.approx(3000 / estimate) and 1.0 < state.ratio < 2.0
        ctx = await s.context.compose(s.conversation_id)
        # one sample is trusted a fifth of the way (QA: one odd count made wisp plan with half the size)
        assert ctx.ratio == pytest.approx(state.effective) and ctx.calibration_samples == 1
        assert ctx.ratio == pytest.approx(1 + (state.ratio - 1) / 5)
        assert (await s.context.calibration.get("another-model")).samples == 0
        # a second sample moves the ratio part of the way (a moving average)
        srv.push(reply(text("ok"), usage=(int(s.agent.last_usage.estimated_prompt * 2), 1)))
        await run(s, "y" * 40)
        after = await s.context.calibration.get("wisp-fake:latest")
        assert after.samples == 2 and after.ratio != state.ratio


#: A long reply whose words vary (one phrase over and over is a loop: the agent stops it, model.repeat_stop_chars).
LONG_REPLY = " ".join(f"word {k} of a long reply" for k in range(27))

async def test_running_summary_lets_old_turns_leave(wisp_home: Path, srv, side, tmp_path: Path) -> None:
    make_home(wisp_home, srv, **{"model.context_window": 1500, "context.reserve": 300})
    async with await open_session(tmp_path, tools=[], side_call=side) as s:
        summaries: list[ev.SummaryChanged] = []
        usage: list[ev.Usage] = []
        for n in range(1, 13):
            srv.push(reply(text(f"answer {n}: " + LONG_REPLY)))
            events = await run(s, f"question {n} about src/mod{n}.py " + "padding " * 20)
            summaries += [e for e in events if isinstance(e, ev.SummaryChanged)]
            usage += [e for e in events if isinstance(e, ev.Usage)]
        assert summaries, "no summary was written"
        latest = await s.context.summaries.latest(s.conversation_id)
        assert latest.version == len(await s.context.summaries.versions(s.conversation_id))
        covered = set(latest.covers)
        assert covered and max(covered) < 12
        last = srv.chat_bodies[-1]
        from wisp.core.context.composer import context_part, person_part

        users = [person_part(m["content"]) for m in last["messages"] if m["role"] == "user"]
        # covered turns left the window; the summary layer stands for them
        assert not any(u.startswith(f"question {n} ") for u in users for n in covered)
        assert users[-1].startswith("question 12 ")
        assert "Running summary of turns" in system_of(last)
        # every src/modN.py of the covered turns is in the summary (the coverage check)
        for n in covered:
            assert f"src/mod{n}.py" in latest.text
        # every request sent fit; the next one, with turn 12 ended, fits or names the turns that leave first
        assert all(body_tokens <= 1200 for body_tokens in (e.calibrated_prompt for e in usage))
        ctx = await s.context.compose(s.conversation_id)
        assert not ctx.over_budget or ctx.must_leave
        versions = await s.context.summaries.versions(s.conversation_id)
    events = [e for e in s.audit.iter_events() if e["kind"] == "summary.recorded"]
    assert [e["payload"]["version"] for e in events] == [v.version for v in versions]
    assert events[-1]["payload"]["covers"] == sorted(covered)
    assert events[0]["payload"]["new_turns"] and versions[-1].audit_event_id == events[-1]["id"]


async def test_summary_goes_through_the_side_call_handed_in(wisp_home: Path, srv, side, tmp_path: Path) -> None:
    make_home(wisp_home, srv, **{"model.context_window": 1200, "context.reserve": 200})
    async with await open_session(tmp_path, side_call=side) as s:  # read_file is given to the conversation
        for n in range(8):
            await run(s, f"question {n} " + "padding " * 60)
        assert side.calls
        call = side.calls[0]
        assert [m["role"] for m in call.messages] == ["system", "user"]
        assert "New turns to add:\nTurn 1:\nperson (entry 1): question 0" in call.prompt
        # the endpoint got only the conversation's requests, each with its tools
        assert srv.chat_bodies and all("tools" in b for b in srv.chat_bodies)


async def test_coverage_check_retries_once_naming_the_missing_items(wisp_home: Path, srv, side, tmp_path: Path) -> None:
    make_home(wisp_home, srv, **{"model.context_window": 1500, "context.reserve": 300})
    async with await open_session(tmp_path, tools=[], side_call=side) as s:
        srv.push(reply(text("The bug came with commit 3f9a2c1b; tests/test_api.py::test_retry fails with E1102.")))
        await run(s, "Why does the retry fail? " + "context " * 100)
        for n in range(10):
            await run(s, f"next {n} " + "padding " * 80)
        assert len(side.calls) >= 2
        first, retry = side.calls[0].prompt, side.calls[1].prompt
        assert "left out" not in first
        assert "Your last summary left out: " in retry
        for item in ("3f9a2c1b", "tests/test_api.py::test_retry", "E1102"):
            assert item in retry.split("left out:")[1]
        first_version = (await s.context.summaries.versions(s.conversation_id))[0]
        assert 1 in first_version.covers and "3f9a2c1b" in first_version.text and first_version.attempts == 2
        latest = await s.context.summaries.latest(s.conversation_id)
        assert "3f9a2c1b" in latest.text  # later versions keep it too (checked again each time)


async def test_wisp_completes_a_summary_that_misses_items(wisp_home: Path, tmp_path: Path) -> None:
    """Issue "Compaction you can see and trust": what the model's summary still leaves out after its
    retry, wisp keeps itself, naming the entry each came from; the turn leaves the window."""
    with CountingOllama() as srv:
        make_home(wisp_home, srv, **{"model.context_window": 1500, "context.reserve": 300})
        async with await open_session(tmp_path, tools=[], side_call=SummarisingSideCall("forgetful")) as s:
            srv.push(reply(text("See src/app/core.py and commit 3f9a2c1b.")))
            await run(s, "Where is it? We'll keep invoices in SQLite. " + "context " * 100)
            notices = []
            for n in range(10):
                notices += [e for e in await run(s, f"next {n} " + "padding " * 80) if isinstance(e, ev.Notice)]
            versions = await s.context.summaries.versions(s.conversation_id)
            first = next(v for v in versions if 1 in v.covers)
            assert first.kept_whole == ()
            assert "turn 1, entry 2: 3f9a2c1b, src/app/core.py" in first.completion  # the reply, entry 2
            assert "We'll keep invoices in SQLite." in first.completion  # the person's own words
            assert "3f9a2c1b" not in first.model_part  # which part the model wrote, and which wisp
            assert {"3f9a2c1b", "src/app/core.py"} <= set(versions[-1].kept)
            users = [m["content"] for m in srv.chat_bodies[-1]["messages"] if m["role"] == "user"]
            assert not any(u.startswith("Where is it?") for u in users)  # turn 1 left the window
            assert any("wisp kept" in n.text and "3f9a2c1b" in n.text for n in notices), [n.text for n in notices]
            for v in await s.context.summaries.versions(s.conversation_id):  # every version passes the check
                assert "3f9a2c1b" in v.text or 1 not in v.covers
        assert not [e for e in s.audit.iter_events() if e["kind"] == "summary.failed"]


async def test_a_failed_side_call_still_lets_turns_leave(wisp_home: Path, tmp_path: Path) -> None:
    """No dead conversation (issue "Real models, real work"): the side call fails, wisp writes the
    summary from the turns alone, and every request still fits."""
    side = SummarisingSideCall()
    with CountingOllama() as srv:
        make_home(wisp_home, srv, **{"model.context_window": 1500, "context.reserve": 300})
        async with await open_session(tmp_path, tools=[], side_call=side) as s:
            n = 0
            while await s.context.summaries.latest(s.conversation_id or 0) is None and n < 15:
                await run(s, f"q {n} " + "padding " * 80)
                n += 1
            before = await s.context.summaries.latest(s.conversation_id)
            assert before is not None
            side.mode = "fail"
            notices = []
            for _ in range(8):
                events = await run(s, f"q {n} " + "padding " * 80)
                n += 1
                notices += [e for e in events if isinstance(e, ev.Notice)]
                assert events[-1].state == "done"  # the turn itself goes on
                sent = [e.calibrated_prompt for e in events if isinstance(e, ev.Usage)]
                assert sent and max(sent) <= 1200  # every request fits the budget
            after = await s.context.summaries.latest(s.conversation_id)
            assert after.version > before.version and set(before.covers) < set(after.covers)
            assert after.model is None and "Written by wisp" in after.completion
            assert any("could not write the running summary" in x.text for x in notices)
        assert [e for e in s.audit.iter_events() if e["kind"] == "summary.failed"]


async def test_a_summary_too_long_is_cut_and_completed(wisp_home: Path, tmp_path: Path) -> None:
    side = SummarisingSideCall("verbose")
    with CountingOllama() as srv:
        make_home(wisp_home, srv, **{"model.context_window": 1500, "context.reserve": 300})
        async with await open_session(tmp_path, tools=[], side_call=side) as s:
            sent = []
            for n in range(10):
                sent += [e.calibrated_prompt for e in await run(s, f"q {n} " + "padding " * 80)
                         if isinstance(e, ev.Usage)]
            assert side.calls and "too long" in side.calls[1].prompt  # it was asked once more
            versions = await s.context.summaries.versions(s.conversation_id)
            assert versions and "cut by wisp to fit" in versions[0].model_part
            assert max(sent) <= 1200  # every request fits the budget


async def test_model_notes_are_proposals_recorded_when_the_turn_ends(wisp_home: Path, srv, tmp_path: Path) -> None:
    make_home(wisp_home, srv)
    async with await open_session(tmp_path) as s:
        await run(s, "hello")
        c = s.conversation_id
        m = s.context
        n = s.notes
        assert (await n.note(c, 2, "entity", "release codename", "BLUE HERON")).line == \
            "noted: entity release codename = BLUE HERON (a proposal until the person keeps it)"
        assert (await n.note(c, 2, "weather", "today", "sunny")).line == (
            "error: no subject weather to note; use one of task, decision, preference, entity, tests, workdir, "
            "branch, such as note entity release codename = BLUE HERON")
        assert await m.facts.current_of(c, "entity", "release codename") is None  # not until the turn ends
        assert (await n.propose_task(c, 2, "add a flag; objective: it prints the plan")).line == \
            "noted the task: add a flag; objective: it prints the plan"
        events = [e async for e in _after_turn(s, 2)]
        kinds = {(e.subject, e.proposal) for e in events if isinstance(e, ev.FactChanged)}
        assert kinds == {("entity", True), ("task", True)}
        fact = await m.facts.current_of(c, "entity", "release codename")
        assert fact.source_label() == "model, noted, turn 2" and fact.proposal
        from wisp.core.commands import run_command

        await run_command(s, "/task fix the CI build")
        assert (await n.propose_task(c, 3, "something else")).line == \
            "error: the person set the task, and it stays: fix the CI build"
        for i in range(12):
            assert (await n.note(c, 3, "entity", f"n{i}", "v")).line.startswith("noted:")
        assert (await n.note(c, 3, "entity", "x", "y")).line.startswith("error: at most 12 notes a turn")
        assert (await m.recall_fact(c, "weather")).startswith('memory: no fact "weather"; the conversation knows:')


async def _after_turn(s: Session, turn: int):
    from wisp.core.agent import TurnRecord

    for e in await s.context.after_turn(TurnRecord(s.conversation_id, turn, 0, "", "", "done", "", "")):
        yield e


async def test_project_instructions_get_their_layer(wisp_home: Path, srv, tmp_path: Path) -> None:
    make_home(wisp_home, srv)
    (tmp_path / "AGENTS.md").write_text("Always answer in French.\n")
    async with await open_session(tmp_path) as s:
        await run(s, "hello")
        system = system_of(srv.chat_bodies[0])
        assert system.count("Always answer in French.") == 1
        assert system.index("Always answer in French.") > system.index("Earlier tool outputs may stand")
        assert "Always answer in French." not in facts_of(srv.chat_bodies[0])
        ctx = await s.context.compose(s.conversation_id)
        assert ctx.layer("instructions").tokens > 0 and "AGENTS.md" in ctx.layer("instructions").text


async def test_while_the_running_summary_is_written_the_turn_says_so(wisp_home: Path, srv, tmp_path: Path,
                                                                      monkeypatch) -> None:
    """Found by a new user: minutes of 'streaming' with no sign while the model wrote the summary.
    The notice comes before the side call ends, and gives its seconds while it works (the side call
    here waits until a notice with its seconds has been seen)."""
    from wisp.core.context import manager

    monkeypatch.setattr(manager, "SUMMARY_TICK_S", 0.05)
    seen = asyncio.Event()

    class Waiting(SummarisingSideCall):
        async def complete(self, messages, **kw):  # type: ignore[override]
            await asyncio.wait_for(seen.wait(), 30)  # answers only once the notice reached the caller
            return await super().complete(messages, **kw)

    make_home(wisp_home, srv, **{"model.context_window": 1500, "context.reserve": 300})
    async with await open_session(tmp_path, tools=[], side_call=Waiting()) as s:
        writing: list[ev.Notice] = []
        for n in range(1, 13):
            srv.push(reply(text(f"answer {n}: " + LONG_REPLY)))
            changed: list[ev.SummaryChanged] = []
            async for e in s.run_turn(f"question {n} about src/mod{n}.py " + "padding " * 20):
                if isinstance(e, ev.Notice) and e.key == "summary-writing":
                    writing.append(e)
                    if "s so far." in e.text:
                        seen.set()
                if isinstance(e, ev.SummaryChanged):
                    changed.append(e)
            if writing:
                break
    assert writing and writing[0].transient and "running summary of turns" in writing[0].text
    assert writing[-1].text.startswith(writing[0].text[:-1] + ": ") and writing[-1].text.endswith(" s so far.")
    assert all(w.key == "summary-writing" and w.transient for w in writing)
    # it names the turns the summary then takes over (a new user saw "turns 13–22" then "turns 1–19")
    from wisp.core.context.summary import turn_ranges

    assert changed and f"of turns {turn_ranges(sorted(changed[-1].covers))}," in writing[0].text


def test_turns_named_says_turn_for_one_and_turns_for_more() -> None:
    """The person's sentences name turns with the right noun (a new user read "turns 1 wait")."""
    from wisp.core.context.summary import turns_named

    assert turns_named([5]) == "turn 5" and turns_named({7, 7}) == "turn 7"
    assert turns_named([3, 1, 2, 6]) == "turns 1–3, 6" and turns_named([]) == ""
