"""/fact, /task, /show, /inspect context and `wisp inspect context` (issue
"Layered context"). None of them costs the model anything: the fake endpoint
must get no request from them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wisp.core.commands import help_text, run_command
from wisp.core.context.composer import context_part, person_part
from wisp.core.context.inspect import ContextReport
from wisp.core.context.show import ShowMaterial
from wisp.core.session import Session, SessionOptions
from tests.support.home import write_config
from tests.support.fakes import FakeOllama, reply, text, tool_call

WISP = str(Path(sys.executable).parent / "wisp")


async def session_with_turns(tmp_path: Path, srv) -> Session:
    (tmp_path / "notes.py").write_text("def f():\n    return 42\n")
    s = await Session.open(SessionOptions(workdir=tmp_path, tools=["read_file"]))
    assert await s.connect()
    srv.push(reply(text("Reading."), tool_call("read_file", {"path": "notes.py"}), finish="tool_calls"),
             reply(text("It returns 42.")))
    async for _ in s.run_turn("what does notes.py return?"):
        pass
    return s


async def test_fact_set_list_history_forget_keep(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    async with await session_with_turns(tmp_path, srv) as s:
        asked = len(srv.chat_bodies)
        r = await run_command(s, "/fact decision http library = httpx")
        assert not r.error and r.text.startswith("Set c2: decision http library = httpx")
        r = await run_command(s, "/fact decision http library = requests")
        assert "It supersedes c2 (httpx)" in r.text
        r = await run_command(s, "/fact decision http library = requests")
        assert r.text.startswith("Already so")
        listing = await run_command(s, "/fact")
        assert "| c3 | decision | http library | requests | you |" in listing.text
        assert "| c1 | workdir |" in listing.text and "tool workdir" in listing.text
        assert {d["id"] for d in listing.data} == {"c1", "c3"}
        history = await run_command(s, "/fact history http library")
        assert 'fact "http library": 1 subject' in history.text
        assert "decision http library: 2 versions, oldest first:" in history.text
        assert "- c2 [person, turn 1] at " in history.text and "httpx; superseded by c3" in history.text
        assert "[end of what recall found]" not in history.text  # that ends a recall, not the person's view
        missing = await run_command(s, "/fact history weather")
        assert missing.error and 'no fact "weather"' in missing.text and "decision http library" in missing.text
        # a model's note, kept by the person
        await s.context.facts.record(s.conversation_id, "entity", "codename", "BLUE HERON", source="model",
                                     method="noted", turn=1)
        listing = await run_command(s, "/fact")
        assert "model, **proposal**" in listing.text and "Proposals wait for `/fact keep ID`: c4" in listing.text
        kept = await run_command(s, "/fact keep c4")
        assert not kept.error and "Kept c4" in kept.text
        assert (await run_command(s, "/fact keep c4")).error
        gone = await run_command(s, "/fact forget c3")
        assert not gone.error and "Forgot c3" in gone.text
        assert "requests" not in (await run_command(s, "/fact")).text
        bad = await run_command(s, "/fact weather today = sunny")
        assert bad.error and "no subject weather" in bad.text and "Usage: /fact" in bad.text
        assert (await run_command(s, "/fact forget")).error
        assert (await run_command(s, "/fact entity = x")).error
        assert len(srv.chat_bodies) == asked  # no command asked the model anything
    recorded = [e["payload"]["action"] for e in s.audit.iter_events() if e["kind"] == "fact.recorded"]
    assert recorded.count("forgotten") == 1 and recorded.count("kept") == 1


async def test_task_set_show_clear(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    async with await session_with_turns(tmp_path, srv) as s:
        assert "No task" in (await run_command(s, "/task")).text
        r = await run_command(s, "/task fix the CI build. Objective: the tests pass")
        assert not r.error and "fix the CI build; objective: the tests pass" in r.text
        assert "from the next turn on" in r.text
        shown = await run_command(s, "/task")
        assert "set by you" in shown.text and "fix the CI build; objective: the tests pass" in shown.text
        long = await run_command(s, "/task " + "word " * 100)
        assert "cut to 300 characters" in long.text and len(long.data["value"]) == 300
        # shown next to the next request
        srv.push(reply(text("ok")))
        async for _ in s.run_turn("go on"):
            pass
        last = srv.chat_bodies[-1]["messages"][-1]["content"]  # at the start of the prompt's message, before it
        assert "Task (set by the person): word word" in context_part(last) and person_part(last) == "go on"
        cleared = await run_command(s, "/task clear")
        assert "Cleared the task" in cleared.text
        assert "There is no task to clear." in (await run_command(s, "/task clear")).text
        assert (await run_command(s, "/task objective: only")).error


@pytest.mark.parametrize("line", ["/fact task x = objective:", "/fact task x = ; objective: y",
                                  "/fact task x = objective: only"])
async def test_a_task_set_through_fact_without_its_parts_is_a_clear_error(ollama_home, tmp_path: Path,
                                                                          line: str) -> None:
    home, srv = ollama_home
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        r = await run_command(s, line)  # raised FactError out of the command before
        assert r.error and "write /task THE TASK; objective: WHAT DONE LOOKS LIKE" in r.text
        assert "Usage: /task" in r.text and "\n" not in r.text


async def test_task_before_any_turn_creates_the_conversation(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        assert await s.connect()
        r = await run_command(s, "/task write the docs")
        assert not r.error and s.conversation_id is not None
        srv.push(reply(text("ok")))
        async for _ in s.run_turn("start"):
            pass
        assert "Task (set by the person): write the docs" in srv.chat_bodies[-1]["messages"][-1]["content"]


async def test_show_entry_turn_and_fact(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    async with await session_with_turns(tmp_path, srv) as s:
        asked = len(srv.chat_bodies)
        r = await run_command(s, "/show entry 4")
        assert not r.error and isinstance(r.data, ShowMaterial)
        section = r.data.sections[0]
        assert section.heading.startswith("entry 4: read_file output, turn 1 at ")
        assert "from the audit log" in section.heading and 'arguments: {"path": "notes.py"}' in section.heading
        assert "return 42" in section.text and section.lexer == "python"
        assert "```python" in r.text
        turn = await run_command(s, "/show turn 1")
        kinds = [x.heading.split(":")[1].split(",")[0].strip() for x in turn.data.sections]
        assert kinds == ["prompt", "reply", "read_file call", "read_file output", "reply"]
        assert turn.data.sections[2].lexer == "json"
        fact = await run_command(s, "/show fact workdir")
        assert "workdir: 1 version, oldest first:" in fact.data.sections[0].text
        assert (await run_command(s, "/show entry 99")).error
        assert "entries 1–5 and turns 1–1 are stored" in (await run_command(s, "/show entry 99")).text
        assert (await run_command(s, "/show turn x")).error and (await run_command(s, "/show")).error
        assert (await run_command(s, "/show fact nothing")).error
        assert len(srv.chat_bodies) == asked


async def test_show_falls_back_to_the_store_without_an_audit_event(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    async with await session_with_turns(tmp_path, srv) as s:
        for f in s.audit.files():
            f.unlink()  # the audit files rotated away
        r = await run_command(s, "/show entry 4")
        assert "from the conversation's store" in r.data.sections[0].heading and "return 42" in r.data.sections[0].text


async def test_inspect_context_lists_the_layers(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    async with await session_with_turns(tmp_path, srv) as s:
        await run_command(s, "/task fix it")
        asked = len(srv.chat_bodies)
        r = await run_command(s, "/inspect context")
        assert isinstance(r.data, ContextReport) and not r.error
        report = r.data
        assert [row.key for row in report.rows] == ["system", "instructions", "tools", "summary", "older", "recent",
                                                    "facts", "task", "current"]
        rows = {row.key: row for row in report.rows}
        assert rows["task"].tokens > 0 and rows["task"].hint == f"/task clear frees {rows['task'].tokens} tokens"
        assert rows["older"].items == 1 and "1 reference to tool outputs" in rows["older"].hint
        assert report.total == sum(row.tokens for row in report.rows)
        assert report.tokens_left == report.budget - report.total
        assert report.budget == s.context_window - 1024
        assert rows["tools"].share == pytest.approx(rows["tools"].tokens / report.window)
        assert report.messages[0]["role"] == "system" and report.tools
        assert "| **tokens left** |" in r.text and "```json" in r.text
        assert len(srv.chat_bodies) == asked
        empty = await run_command(s, "/inspect nothing")
        assert empty.error


async def test_inspect_before_any_conversation(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        r = await run_command(s, "/inspect context")
        assert not r.error and r.data.conversation is None and r.data.total > 0


def test_help_lists_the_commands_and_panel_keys() -> None:
    text = help_text()
    for word in ("/fact", "/task", "/show entry N", "/inspect context", "F2 / F3 / F4", "F5"):
        assert word in text


def test_wisp_inspect_context_json_makes_no_request(wisp_home: Path, tmp_path: Path) -> None:
    with FakeOllama() as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "model.timeout_s": 5})
        (tmp_path / "a.txt").write_text("alpha\n")
        srv.push(reply(text("Reading."), tool_call("read_file", {"path": "a.txt"}), finish="tool_calls"),
                 reply(text("It says alpha.")))
        env = os.environ.copy()
        r = subprocess.run([WISP, "ask", "what is in a.txt?"], capture_output=True, text=True, cwd=tmp_path,
                           env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        requests_before = len(srv.requests)
        r = subprocess.run([WISP, "inspect", "context", "--json"], capture_output=True, text=True, cwd=tmp_path,
                           env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        assert len(srv.requests) == requests_before  # not one request, not even a model list
        data = json.loads(r.stdout)
        layers = {layer["key"]: layer for layer in data["layers"]}
        assert list(layers) == ["system", "instructions", "tools", "summary", "older", "recent", "facts", "task",
                                "current"]
        assert all(isinstance(layer["tokens"], int) for layer in layers.values())
        assert layers["system"]["tokens"] > 0 and layers["older"]["items"] == 1
        assert data["window"] == 8192 and data["window_source"] == "last seen for this model"
        assert data["total"] == sum(layer["tokens"] for layer in layers.values())
        assert data["request"]["messages"][0]["role"] == "system"
        tool_msgs = [m for m in data["request"]["messages"] if m["role"] == "tool"]
        assert tool_msgs[0]["content"].startswith("[output of entry 4 not repeated: read_file, turn 1;")
        plain = subprocess.run([WISP, "inspect", "context", "--conversation", str(data["conversation"])],
                               capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
        assert plain.returncode == 0 and "tokens left" in plain.stdout and "6. facts" in plain.stdout
        assert len(srv.requests) == requests_before
        bad = subprocess.run([WISP, "inspect", "context", "--conversation", "999"], capture_output=True,
                             text=True, cwd=tmp_path, env=env, timeout=60)
        assert bad.returncode == 2 and "no conversation 999" in bad.stderr


def test_wisp_inspect_context_with_nothing_stored(wisp_home: Path, tmp_path: Path) -> None:
    r = subprocess.run([WISP, "inspect", "context"], capture_output=True, text=True, cwd=tmp_path,
                       env=os.environ.copy(), timeout=60)
    assert r.returncode == 2 and "no conversation is stored yet" in r.stderr
