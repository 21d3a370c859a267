"""The memory tool in a session: off by default, when a conversation has it, and end to end over a fake endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.home import DATA

from wisp.core import events as ev
from wisp.core.context.facts import FactBook
from wisp.core.memory.verbs import DESCRIPTION, REQUEST_GUIDE
from wisp.core.tools.memory import MemoryTool
from wisp.core.session import Session, SessionOptions
from wisp.core.tools.registry import AVAILABLE
from tests.support.memory_harness import make_harness
from tests.support.home import require_local, write_config
from tests.support.fakes import FakeOllama, reply, text, tool_call


async def open_session(workdir: Path, **opts) -> Session:
    session = await Session.open(SessionOptions(workdir=workdir, **opts))
    assert await session.connect(), session.endpoint_error
    return session


async def run(session: Session, prompt: str) -> list:
    return [item async for item in session.run_turn(prompt)]


@pytest.fixture
def home(wisp_home: Path):
    with FakeOllama() as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.timeout_s": 5, "model.load_wait_s": 2})
        yield wisp_home, srv


def set_memory(home: Path, srv: FakeOllama, on: bool) -> None:
    write_config(home, {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.timeout_s": 5,
                        "model.load_wait_s": 2, "context.memory": on})


def tool_names(body: dict) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


async def test_registered_with_one_string_argument(tmp_path: Path) -> None:
    assert AVAILABLE["memory"] is MemoryTool
    h = await make_harness(tmp_path)
    tool = h.tool
    assert tool.parameters["required"] == ["request"]
    assert list(tool.parameters["properties"]) == ["request"]
    assert tool.parameters["properties"]["request"]["type"] == "string"
    assert tool.description == DESCRIPTION and "system_info" in DESCRIPTION and "RAM" in DESCRIPTION
    assert tool.parameters["properties"]["request"]["description"] == REQUEST_GUIDE
    await h.close()


async def test_off_by_default_and_no_rule_about_it(home, tmp_path: Path) -> None:
    _, srv = home
    async with await open_session(tmp_path) as s:
        assert "memory" not in s.tool_names
        await run(s, "hi")
    body = srv.chat_bodies[-1]
    assert "memory" not in tool_names(body)
    assert "memory tool" not in body["messages"][0]["content"]


async def test_context_memory_gives_it_with_the_rule(home, tmp_path: Path) -> None:
    wisp_home, srv = home
    set_memory(wisp_home, srv, True)
    async with await open_session(tmp_path) as s:
        assert s.tool_names[-1] == "memory" and "read_file" in s.tool_names
        await run(s, "hi")
    body = srv.chat_bodies[-1]
    assert "memory" in tool_names(body)
    assert '"recall entry N" shows an output' in body["messages"][0]["content"]


async def test_an_explicit_list_is_exactly_that_list(home, tmp_path: Path) -> None:
    wisp_home, srv = home
    set_memory(wisp_home, srv, True)
    async with await open_session(tmp_path, tools=["read_file"]) as s:
        assert s.tool_names == ["read_file"]
    set_memory(wisp_home, srv, False)
    async with await open_session(tmp_path, tools=["read_file", "memory"]) as s:
        assert s.tool_names == ["read_file", "memory"]
        await run(s, "hi")
    assert tool_names(srv.chat_bodies[-1]) == ["read_file", "memory"]
    # AGENTS.md's list is explicit too: the MCP git thread stays run_command alone
    set_memory(wisp_home, srv, True)
    (tmp_path / "AGENTS.md").write_text('tools: ["run_command"]\n\nBe careful.\n')
    async with await open_session(tmp_path) as s:
        assert s.tool_names == ["run_command"]


async def test_a_conversation_notes_recalls_and_summarises_end_to_end(home, tmp_path: Path) -> None:
    wisp_home, srv = home
    set_memory(wisp_home, srv, True)
    (tmp_path / "overview.md").write_text("# harbour sync: design overview\n" + "\n".join(
        f"paragraph {i}" for i in range(2, 78)) + "\n")
    srv.push(reply(tool_call("read_file", {"path": "overview.md"}), finish="tool_calls"),
             reply(tool_call("memory", {"request": "note entity release codename = BLUE HERON"}), finish="tool_calls"),
             reply(text("Read it and noted the codename.")))
    async with await open_session(tmp_path) as s:
        first = await run(s, "read overview.md and keep the codename BLUE HERON")
        noted = [e for e in first if isinstance(e, ev.ToolResult) and e.name == "memory"]
        assert noted[0].content == "noted: entity release codename = BLUE HERON (a proposal until the person keeps it)"
        facts = {f.label: f for f in await FactBook(s.store, s.audit).current(s.conversation_id)}
        # the noted fact names the entry of the call that noted it, so its history has something to recall
        call = next(e for e in first if isinstance(e, ev.ToolCall) and e.name == "memory")
        assert facts["entity release codename"].source_label() == f"model, noted, turn 1, entry {call.entry}"
        read = next(e for e in first if isinstance(e, ev.ToolResult) and e.name == "read_file")
        srv.push(reply(tool_call("memory", {"request": f"recall entry {read.entry}"}), finish="tool_calls"),
                 reply(tool_call("memory", {"request": f"summarise entry {read.entry} overview"}), finish="tool_calls"),
                 reply(text("Done.")))
        second = await run(s, "what did the overview say?")
        results = [e for e in second if isinstance(e, ev.ToolResult)]
        recall = results[0].content.splitlines()
        assert recall[0].startswith(f"entry {read.entry}: read_file output, turn 1 at ")
        assert recall[0].endswith(", from the audit log")
        assert recall[1] == 'arguments: {"path": "overview.md"}'
        assert recall[2] == "1\t# harbour sync: design overview"
        assert recall[-2:] == ["[end of file]", "[end of what recall found]"]
        assert results[1].content.startswith("overview (exact readers, no model): 78 lines")
        kinds = [e["kind"] for e in s.audit.iter_events()]
        assert kinds.count("context.memory") == 3
        recorded = [e["payload"] for e in s.audit.iter_events() if e["kind"] == "fact.recorded"
                    and e["payload"]["method"] == "noted"]
        assert [(p["subject"], p["name"], p["value"], p["entries"]) for p in recorded] == [
            ("entity", "release codename", "BLUE HERON", [call.entry])]
        # each call is a tool.call and a tool.result too, with the context.memory event between them
        seq = [e["kind"] for e in s.audit.iter_events() if e["kind"] in ("tool.call", "tool.result", "context.memory")]
        assert seq[-6:] == ["tool.call", "context.memory", "tool.result"] * 2
        # what a recall returned is whole in its own turn, and a reference from the next turn on
        await run(s, "thanks")
        sent = json.dumps(srv.chat_bodies[-1]["messages"], ensure_ascii=False)
        assert "# harbour sync: design overview" not in sent
        assert f'output of entry {results[0].entry} not repeated' in sent
        assert f'memory \\"recall entry {results[0].entry}\\"' in sent


def test_description_and_guide_cost_at_most_110_tokens_on_smollm2() -> None:
    require_local()
    import llama_cpp

    from wisp.core.model.embedded import default_gguf_path

    llm = llama_cpp.Llama(model_path=str(default_gguf_path()), vocab_only=True, verbose=False)
    tokens = len(llm.tokenize(DESCRIPTION.encode(), add_bos=False)) + \
        len(llm.tokenize(REQUEST_GUIDE.encode(), add_bos=False))
    assert tokens <= 110, tokens


async def test_memory_tool_schema_is_valid_json(tmp_path: Path) -> None:
    from wisp.core.tools.base import tool_schema

    h = await make_harness(tmp_path)
    schema = tool_schema(h.tool)
    assert json.loads(json.dumps(schema))["function"]["name"] == "memory"
    await h.close()


async def test_tui_shows_a_summarise_call_and_its_result(home, tmp_path: Path) -> None:
    from wisp.tui.app import WispApp
    from wisp.tui.widgets import ToolBlock
    from tests.support.pilot import SIZE, screenshot, send, started

    wisp_home, srv = home
    set_memory(wisp_home, srv, True)
    log = (DATA / "summarise" / "gcc_make_errors.txt").read_text()
    (tmp_path / "build.log").write_text(log)
    srv.push(reply(tool_call("read_file", {"path": "build.log"}), finish="tool_calls", usage=None),
             reply(text("Read it."), usage=None))
    srv.push(reply(tool_call("memory", {"request": "summarise entry 3"}), finish="tool_calls", usage=None),
             reply(text("The first error is at **request.c:77**: `struct request` has no member `uri_len`."),
                   usage=None))
    app = WispApp(SessionOptions(workdir=tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await send(pilot, app, "read build.log")
        await send(pilot, app, "why did the build fail?")
        block = list(app.query(ToolBlock))[-1]
        assert "memory" in str(block.title) and "notable lines (exact readers, no model)" in block.output
        assert "request.c:77:17" in block.output
        block.collapsed = False
        await pilot.pause()
        screenshot(app, "memory-summarise")


async def test_a_recall_that_finds_nothing_is_not_marked_as_a_success(ollama_home, tmp_path) -> None:
    """QA: `recall entry 999` showed ✓ in the chat although it found nothing."""
    from wisp.core import events as ev
    from wisp.core.session import Session, SessionOptions
    from tests.support.fakes import reply, text, tool_call

    home, srv = ollama_home
    srv.push(reply(tool_call("memory", {"request": "recall entry 999"}), finish="tool_calls"), reply(text("ok")))
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["memory"])) as s:
        assert await s.connect()
        events = [e async for e in s.run_turn("what was entry 999?")]
    result = next(e for e in events if isinstance(e, ev.ToolResult))
    assert result.content.startswith("memory:") and not result.ok
