"""`wisp` on the command line, run as a real process against fake endpoints on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from wisp.core import __version__
from tests.support.home import write_config
from tests.support.fakes import FakeOllama, fault, reply, text, tool_call

WISP = str(Path(sys.executable).parent / "wisp")


def wisp(*args: str, cwd: Path | None = None, input: str | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess:
    """The real ``wisp`` with ``args``; its stdin is ``input``, else empty (never the test run's own:
    ``wisp ask`` with no prompt reads a stdin that is not a terminal)."""
    return subprocess.run([WISP, *args], capture_output=True, text=True, cwd=cwd, input=input if input is not None
                          else "", timeout=timeout, env=os.environ.copy())


def audit_events(home: Path) -> list[dict]:
    events = []
    for f in sorted((home / "data").rglob("audit-*.jsonl")):
        events += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return events


def test_version() -> None:
    r = wisp("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"wisp {__version__}"


@pytest.mark.parametrize("home_fixture", ["ollama_home", "openai_home"])
def test_ask_prints_reply_and_stores_it(request, home_fixture: str, tmp_path: Path) -> None:
    home, srv = request.getfixturevalue(home_fixture)
    r = wisp("ask", "hello", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "You said: hello\n"
    listing = json.loads(wisp("conversations", "--json").stdout)
    assert listing["total"] == 1
    conv = listing["conversations"][0]
    assert conv["turn_count"] == 1 and conv["workdir"] == str(tmp_path)
    kinds = [e["kind"] for e in audit_events(home)]
    assert "prompt" in kinds and "response" in kinds
    prompt = next(e for e in audit_events(home) if e["kind"] == "prompt")
    assert prompt["payload"]["content"] == "hello" and prompt["conversation"] == conv["id"]


def test_ask_continue_keeps_the_conversation(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    assert wisp("ask", "one", cwd=tmp_path).returncode == 0
    assert wisp("ask", "two", "--continue", cwd=tmp_path).returncode == 0
    listing = json.loads(wisp("conversations", "--json").stdout)
    assert listing["total"] == 1 and listing["conversations"][0]["turn_count"] == 2
    assert "one" in json.dumps(srv.chat_bodies[-1]["messages"])


def test_ask_json_streams_events(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    (tmp_path / "a.txt").write_text("apples\n")
    srv.push(reply(tool_call("read_file", {"path": "a.txt"}), finish="tool_calls"), reply(text("Apples.")))
    r = wisp("ask", "read a.txt", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    names = [e["event"] for e in events]
    assert names[0] == "turn_started" and names[-1] == "turn_ended"
    assert "tool_call" in names and "tool_result" in names
    result = next(e for e in events if e["event"] == "tool_result")
    assert "1\tapples" in result["content"]


def test_ask_endpoint_down_exits_3_with_one_line(wisp_home: Path, tmp_path: Path) -> None:
    srv = FakeOllama().start()
    url = srv.base_url
    srv.stop()
    write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": url})
    r = wisp("ask", "hello", cwd=tmp_path)
    assert r.returncode == 3
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and url in lines[0] and "Traceback" not in r.stderr


def test_ask_fault_mid_stream_exits_3_keeping_partial(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(fault.disconnect(text("half an ans")))
    r = wisp("ask", "hello", cwd=tmp_path)
    assert r.returncode == 3
    assert r.stdout.startswith("half an ans")
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_bad_usage_exits_2() -> None:
    assert wisp("ask").returncode == 2
    assert wisp("frobnicate").returncode == 2
    r = wisp("ask", "   ")
    assert r.returncode == 2 and "empty" in r.stderr


def test_config_commands(wisp_home: Path) -> None:
    r = wisp("config", "set", "context.memory", "on")
    assert r.returncode == 0
    assert wisp("config", "get", "context.memory").stdout.strip() == "true"
    cfg = json.loads((wisp_home / "config.json").read_text())
    assert cfg["context"]["memory"] is True
    assert (wisp_home / "config.json").stat().st_mode & 0o777 == 0o600
    listing = json.loads(wisp("config", "list", "--json").stdout)
    assert listing["context.memory"] is True and listing["agent.max_steps"] == 20
    r = wisp("config", "set", "context.memroy", "on")
    assert r.returncode == 2 and "context.memory" in r.stderr
    r = wisp("config", "set", "agent.max_steps", "many")
    assert r.returncode == 2 and "integer" in r.stderr


def test_config_set_of_what_the_embedded_server_takes_at_its_start_says_a_running_one_keeps_it(
        wisp_home: Path, tmp_path: Path) -> None:
    """The shared embedded server keeps its threads, window and file until it stops (it stops by
    itself, model.embedded_idle_s unused): setting one says so; other keys say nothing more."""
    r = wisp("config", "set", "model.embedded_idle_s", "120")
    assert r.returncode == 0
    r = wisp("config", "set", "model.embedded_threads", "1")
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0] == "model.embedded_threads = 1" and len(lines) == 2, r.stdout
    assert "running keeps its old model.embedded_threads until it stops by itself" in lines[1]
    assert "model.embedded_idle_s (120 s) unused" in lines[1] and "no command to stop it" in lines[1]
    assert "uses it, with the old value" in lines[1]
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    for key, value in (("model.context_window", "8192"), ("model.gguf", str(gguf))):
        r = wisp("config", "set", key, value)
        assert r.returncode == 0 and len(r.stdout.splitlines()) == 2, r.stdout
        assert f"keeps its old {key}" in r.stdout and "another one, with the new value" in r.stdout
    r = wisp("config", "unset", "model.embedded_threads")
    assert r.returncode == 0 and "keeps its old model.embedded_threads" in r.stdout
    r = wisp("config", "set", "agent.max_steps", "12")
    assert r.returncode == 0 and r.stdout.splitlines() == ["agent.max_steps = 12"]


async def test_slash_config_set_of_the_embedded_threads_says_the_same(wisp_home: Path) -> None:
    from types import SimpleNamespace

    from wisp.core.commands import run_command
    from wisp.core.config import Config

    session = SimpleNamespace(config=Config.load())
    result = await run_command(session, "/config set model.embedded_threads 1")
    assert not result.error and "keeps its old model.embedded_threads until it stops by itself" in result.text
    result = await run_command(session, "/config set agent.max_steps 12")
    assert "embedded" not in result.text


def test_malformed_config_is_reported_and_kept(wisp_home: Path) -> None:
    path = wisp_home / "config.json"
    path.write_text('{\n  "model": {\n    "name": "x",\n  }\n}\n')
    before = path.read_bytes()
    r = wisp("config", "set", "model.name", "y")
    assert r.returncode == 2 and "line 4" in r.stderr and "column" in r.stderr
    r = wisp("ask", "hello")
    assert r.returncode == 2 and "line 4" in r.stderr
    assert path.read_bytes() == before


def test_conversations_empty(wisp_home: Path) -> None:
    r = wisp("conversations")
    assert r.returncode == 0 and "No conversations yet" in r.stdout
    assert json.loads(wisp("conversations", "--json").stdout) == {"total": 0, "conversations": []}


def test_unknown_resume_is_a_usage_error(ollama_home) -> None:
    r = wisp("ask", "hi", "--resume", "999")
    assert r.returncode == 2 and "no conversation 999" in r.stderr


def test_stdin_prompt_with_bytes_that_are_not_utf8(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    r = subprocess.run([WISP, "ask", "-"], input=b"bad bytes \xff\xfe here\n", capture_output=True,
                       cwd=tmp_path, timeout=60, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    assert "bad bytes \ufffd\ufffd here" in r.stdout.decode()
    from wisp.core.context.composer import person_part

    assert person_part(srv.chat_bodies[0]["messages"][-1]["content"]) == "bad bytes \ufffd\ufffd here\n"


def test_unusable_home_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "WISP_HOME": "/proc/wisp-cannot-be-here"}
    r = subprocess.run([WISP, "ask", "hi"], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "WISP_HOME" in r.stderr


def test_listing_into_a_closed_pipe_is_quiet(wisp_home: Path, tmp_path: Path) -> None:
    import asyncio

    from wisp.core.session import Session, SessionOptions

    async def many() -> None:
        async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
            for i in range(3000):
                conv = await s.store.create_conversation(str(tmp_path), title=f"conversation {i}")
    asyncio.run(many())
    r = subprocess.run(f"{WISP} conversations | head -1", shell=True, capture_output=True, text=True,
                       env=os.environ.copy(), timeout=60)
    assert "ID" in r.stdout and "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr


@pytest.mark.parametrize("args,words", [
    (["--resume", "9999"], "no conversation 9999"),
    (["--tool", "bogus"], "'bogus'"),
    (["--continue", "--resume", "1"], "not both"),
    (["--workdir", "/nonexistent/dir"], "not a directory"),
    (["ask", "--model", " ", "hi"], "--model needs a model's name"),
])
def test_bad_tui_options_stop_before_the_screen_opens(wisp_home: Path, args, words) -> None:
    r = wisp(*args, timeout=30)
    assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr


def test_the_chats_flags_before_another_command_are_used_or_refused_never_ignored(ollama_home,
                                                                                   tmp_path: Path) -> None:
    """A new user's `wisp --resume 6 inspect context` showed the newest conversation, not 6."""
    assert wisp("ask", "first", cwd=tmp_path).returncode == 0
    assert wisp("ask", "second", cwd=tmp_path).returncode == 0  # the newest: conversation 2
    shown = json.loads(wisp("--resume", "1", "inspect", "context", "--json", cwd=tmp_path).stdout)
    assert shown["conversation"] == 1
    newest = json.loads(wisp("--continue", "inspect", "context", "--json", cwd=tmp_path).stdout)
    assert newest["conversation"] == 2  # --continue is inspect's default
    for args, words in ((["--resume", "1", "inspect", "context", "--conversation", "2"], "name two conversations"),
                        (["--resume", "1", "conversations"], "`wisp conversations` does not take it"),
                        (["--tool", "read_file", "inspect", "context"], "--tool belongs to the chat"),
                        (["--workdir", str(tmp_path), "--profile", "x", "export", "1"],
                         "--profile, --workdir belong to the chat"),):
        r = wisp(*args, cwd=tmp_path)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_ask_json_reports_a_refused_connection_as_an_event(wisp_home: Path, tmp_path: Path) -> None:
    srv = FakeOllama().start()
    url = srv.base_url
    srv.stop()
    write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": url})
    r = wisp("ask", "hello", "--json", cwd=tmp_path)
    assert r.returncode == 3
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert events[-1]["event"] == "error" and url in events[-1]["message"]
    assert len(r.stderr.strip().splitlines()) == 1


def test_ask_json_mid_stream_fault_also_says_it_on_stderr(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(fault.disconnect(text("half an ans")))
    r = wisp("ask", "hello", "--json", cwd=tmp_path)
    assert r.returncode == 3
    names = [json.loads(line)["event"] for line in r.stdout.splitlines()]
    assert "reply_recorded" in names and "error" in names  # the partial reply is recorded and said so
    assert len(r.stderr.strip().splitlines()) == 1


def test_wait_for_a_loading_model_is_one_line(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(fault.unavailable(times=4))
    r = wisp("ask", "hello", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "You said: hello\n"
    assert len([l for l in r.stderr.splitlines() if "load the model" in l]) == 1


def test_a_conversation_keeps_its_tool_list_for_resume_and_inspect(ollama_home, tmp_path: Path) -> None:
    """QA: `wisp inspect context` and `--resume` fell back to tools.enabled for a --tool conversation."""
    home, srv = ollama_home
    assert wisp("ask", "hi", "--tool", "read_file", "--tool", "memory", cwd=tmp_path).returncode == 0
    conv = json.loads(wisp("conversations", "--json").stdout)["conversations"][0]["id"]
    data = json.loads(wisp("inspect", "context", "--conversation", str(conv), "--json").stdout)
    assert [t["function"]["name"] for t in data["request"]["tools"]] == ["read_file", "memory"]
    requests = len(srv.chat_bodies)
    assert wisp("ask", "again", "--resume", str(conv), cwd=tmp_path).returncode == 0
    assert [t["function"]["name"] for t in srv.chat_bodies[-1]["tools"]] == ["read_file", "memory"]
    assert len(srv.chat_bodies) == requests + 1


def test_the_api_key_is_used_but_never_written_anywhere(wisp_home: Path, tmp_path: Path) -> None:
    """Issue 2: the key is read from the variable model.api_key_env names, never stored."""
    from tests.support.fakes import FakeOpenAI

    key = "sk-wisp-test-4f1c9a77e0"
    with FakeOpenAI(api_key=key) as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake", "model.api_key_env": "WISP_TEST_KEY"})
        env = {**os.environ, "WISP_TEST_KEY": key}
        r = subprocess.run([WISP, "ask", "hello"], capture_output=True, text=True, cwd=tmp_path, env=env)
        assert r.returncode == 0 and r.stdout == "You said: hello\n", r.stderr
        # without the variable: one line saying exactly that
        env.pop("WISP_TEST_KEY")
        r = subprocess.run([WISP, "ask", "hello"], capture_output=True, text=True, cwd=tmp_path, env=env)
        assert r.returncode == 3 and "WISP_TEST_KEY, which is not set" in r.stderr
    for path in wisp_home.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), f"the key was written to {path}"


def test_help_names_the_config_file_wisp_home_points_at(tmp_path) -> None:
    """Found by a new user: `wisp --help` said ~/.wisp/config.json while WISP_HOME moved it."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    wisp = str(Path(sys.executable).parent / "wisp")
    r = subprocess.run([wisp, "--help"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "WISP_HOME": str(tmp_path), "COLUMNS": "400"})
    assert r.returncode == 0 and "~/.wisp" not in r.stdout
    assert f"show or change settings in {tmp_path / 'config.json'}" in " ".join(r.stdout.split())


def stop_ask_midway(srv, cwd: Path, signum: int) -> tuple[int, str, str]:
    """Run `wisp ask` against a reply that pauses after its first words, send ``signum`` once those
    words are out (read from its stdout, not timed), and give its exit code, stdout and stderr."""
    import select

    from tests.support.fakes import pause

    srv.script.append(reply("first words ", pause(30), "never sent"))
    proc = subprocess.Popen([WISP, "ask", "tell me a long story"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=cwd, env=os.environ.copy())
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no reply text within 60 s"
        first = os.read(proc.stdout.fileno(), 4096)
        proc.send_signal(signum)
        rest, errb = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, (first + rest).decode(), errb.decode()


def test_ctrl_c_in_ask_says_the_reply_so_far_is_kept_and_it_is(ollama_home, tmp_path: Path) -> None:
    """A new user pressed Ctrl+C in `wisp ask`: the partial reply was kept, but nothing said so."""
    import signal

    home, srv = ollama_home
    code, out, err = stop_ask_midway(srv, tmp_path, signal.SIGINT)
    assert code == 130, err
    assert out.startswith("first words")
    assert "stopped (Ctrl+C)" in err and "wisp ask --continue" in err
    exported = json.loads(wisp("export", "1", "--format", "json").stdout)
    replies = [e for e in exported["entries"] if e["kind"] == "reply"]
    assert replies and replies[-1]["content"].startswith("first words")


def test_sigterm_in_ask_records_the_turn_as_stopped_with_the_reply_so_far(ollama_home, tmp_path: Path) -> None:
    """A new user's SIGTERM (a terminal closed, `timeout`, a supervisor) left the turn "open" until the
    next run; now it ends the turn as Ctrl+C does."""
    import signal

    home, srv = ollama_home
    code, out, err = stop_ask_midway(srv, tmp_path, signal.SIGTERM)
    assert code == 143, err
    assert out.startswith("first words") and "stopped (SIGTERM)" in err
    exported = json.loads(wisp("export", "1", "--format", "json").stdout)
    assert exported["turns"][-1]["state"] == "stopped", exported["turns"]
    replies = [e for e in exported["entries"] if e["kind"] == "reply"]
    assert replies and replies[-1]["content"].startswith("first words")



def test_a_prompt_piped_in_needs_no_dash(ollama_home, tmp_path: Path) -> None:
    """`echo q | wisp ask` reads the prompt from stdin, as `-` does (a new user expected it to)."""
    home, srv = ollama_home
    r = subprocess.run([WISP, "ask"], input=b"what is 2+2?\n", capture_output=True, cwd=tmp_path,
                       env=os.environ.copy(), timeout=60)
    assert r.returncode == 0 and r.stdout.decode() == "You said: what is 2+2?\n\n", r.stderr


def test_a_prompt_of_control_characters_only_is_refused_and_nothing_is_sent(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    r = subprocess.run([WISP, "ask", "-"], input=b"\x01\x02\x1b\x00\x7f\r\n\t", capture_output=True, cwd=tmp_path,
                       env=os.environ.copy(), timeout=60)
    assert r.returncode == 2 and b"only control characters" in r.stderr and srv.chat_bodies == []
    assert json.loads(wisp("conversations", "--json").stdout)["conversations"] == []


@settings(max_examples=300, deadline=None)
@given(noise=st.text(alphabet=st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp"])),
       word=st.characters(categories=["L", "N", "P", "S"]), at=st.integers(min_value=0))
def test_a_prompt_has_words_when_any_character_is_not_space_or_control(noise: str, word: str, at: int) -> None:
    from wisp.core.cli import _has_words

    assert not _has_words(noise)
    i = at % (len(noise) + 1)
    assert _has_words(noise[:i] + word + noise[i:])


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_ask_whose_reader_leaves_ends_its_turn_stopped_and_says_so(ollama_home, tmp_path: Path, json_flag) -> None:
    """A new user's `wisp ask --continue --json … | head -20` exited 0 and left its turn open: the TUI on
    that conversation then refused every prompt for it. Now the turn ends stopped, with what had
    streamed, the exit is 141 (as a shell shows a process a closed pipe ended) and stderr says why."""
    import sqlite3

    home, srv = ollama_home
    srv.push(reply(text(" ".join(f"word{i}" for i in range(20000)))))
    wisp = " ".join([WISP, "ask", *json_flag, "hi"])
    r = subprocess.run(["bash", "-c", f"{wisp} | head -c 100 >/dev/null; echo \"rc=${{PIPESTATUS[0]}}\" >&2"],
                       cwd=tmp_path, env=os.environ.copy(), capture_output=True, text=True, timeout=60)
    assert "rc=141" in r.stderr and "the output's reader left" in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    [db] = list(home.rglob("wisp.db"))
    with sqlite3.connect(db) as conn:
        # ended, never left open: stopped where the reader left, or done when only the last write failed
        [(number, state)] = conn.execute("SELECT number, state FROM turns").fetchall()
        replies = [c for (c,) in conn.execute("SELECT content FROM entries WHERE kind = 'reply'")]
    assert number == 1 and state in ("stopped", "done"), state
    assert all(c.startswith("word0 word1") for c in replies) and len(replies) <= 1
