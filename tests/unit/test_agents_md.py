"""AGENTS.md (tools line and instructions), tool-list precedence, /tools, and `wisp ask` with
run_command: against the fake endpoints on 127.0.0.1, real processes and a real store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wisp.core.agents_md import AgentsMd, AgentsMdError, load_agents_md, parse_agents_md
from wisp.core.commands import run_command
from wisp.core.config import Config
from wisp.core.tokens import estimate_tokens
from wisp.core.session import Session, SessionError, SessionOptions
from wisp.core.toolset import ToolListError, choose_tools
from tests.support.home import write_config
from tests.support.fakes import reply, text, tool_call

WISP = str(Path(sys.executable).parent / "wisp")


def wisp(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([WISP, *args], capture_output=True, text=True, cwd=cwd, timeout=120,
                          env=os.environ.copy())


def audit_events(home: Path, kind: str) -> list[dict]:
    events = []
    for f in sorted((home / "data").rglob("audit-*.jsonl")):
        events += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [e for e in events if e["kind"] == kind]


def tool_messages(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


# --- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize("line,tools", [
    ('tools: ["run_command"]', ["run_command"]),
    ('tools: ["run_command", "read_file"]', ["run_command", "read_file"]),
    ("tools: [run_command, read_file]", ["run_command", "read_file"]),
    ("tools: run_command, read_file", ["run_command", "read_file"]),
    ("tools: run_command read_file run_command", ["run_command", "read_file"]),
    ("- tools: `run_command`", ["run_command"]),
    ("**tools:** read_file", ["read_file"]),
    ("tools: []", []),
    ("tools: none", []),
])
def test_tools_line_forms(line: str, tools: list[str]) -> None:
    parsed = parse_agents_md(f"# Project\n\n{line}\n\nRun the tests with pytest.\n")
    assert parsed.tools == tools and parsed.tools_line == 3
    assert parsed.instructions == "# Project\n\nRun the tests with pytest."


@pytest.mark.parametrize("line", ['tools: ["run_command"', "tools:", 'tools: [1, 2]', "tools: rm -rf"])
def test_unreadable_tools_lines_say_what_to_write(line: str) -> None:
    with pytest.raises(AgentsMdError, match=r"AGENTS.md line 1: .*tools"):
        parse_agents_md(line + "\n")


def test_front_matter_code_fences_and_a_second_line() -> None:
    parsed = parse_agents_md("---\ntools: [read_file]\n---\n# Rules\n\n```yaml\ntools: [run_command]\n```\n"
                             "tools: [system_info]\n")
    assert parsed.tools == ["read_file"]
    assert parsed.instructions == "# Rules\n\n```yaml\ntools: [run_command]\n```"
    assert parsed.problems and "second tools: line" in parsed.problems[0]
    prose = parse_agents_md("Tools: we like pytest and ruff.\n")
    assert prose.tools is None and prose.instructions == "Tools: we like pytest and ruff."
    only = parse_agents_md('tools: ["read_file"]\n')
    assert only.tools == ["read_file"] and only.instructions is None


def test_load_reads_the_working_directory_only(tmp_path: Path) -> None:
    assert load_agents_md(tmp_path) is None
    (tmp_path / "AGENTS.md").write_bytes(b"Use tabs. \xff\n")
    parsed = load_agents_md(tmp_path)
    assert parsed is not None and parsed.instructions == "Use tabs. \ufffd"
    assert parsed.problems and "not valid UTF-8" in parsed.problems[0]
    sub = tmp_path / "sub"
    sub.mkdir()
    assert load_agents_md(sub) is None


def test_a_huge_agents_md_is_cut_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rule\n" * 40000)
    parsed = load_agents_md(tmp_path)
    assert parsed is not None and len(parsed.instructions) < 70000
    assert parsed.instructions.endswith("[AGENTS.md was cut at 65,536 bytes]")
    assert any("longer than" in p for p in parsed.problems)


def test_precedence_command_line_then_agents_md_then_config(tmp_path: Path) -> None:
    cfg = Config(tmp_path / "c.json", {"tools.enabled": ["system_info"]})
    agents = AgentsMd(tools=["run_command", "read_file"], tools_line=4, path=tmp_path / "AGENTS.md")
    assert choose_tools(["read_file"], agents, cfg).names == ["read_file"]
    assert choose_tools([], agents, cfg).names == []
    choice = choose_tools(None, agents, cfg)
    assert choice.names == ["run_command", "read_file"] and choice.source == "AGENTS.md"
    assert choose_tools(None, AgentsMd(tools=None), cfg).names == ["system_info"]
    assert choose_tools(None, None, cfg).source == "config"
    with pytest.raises(ToolListError, match=r"AGENTS.md line 4 names 'shell'.*wisp has read_file"):
        choose_tools(None, AgentsMd(tools=["shell"], tools_line=4, path=Path("AGENTS.md")), cfg)


# --- sessions ------------------------------------------------------------------------------------


async def test_session_takes_tools_and_instructions_from_agents_md(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    write_config(home, {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.timeout_s": 5,
                        "tools.enabled": ["system_info"]})
    (tmp_path / "AGENTS.md").write_text('# Calc\n\ntools: ["run_command"]\n\nAlways run pytest -q before '
                                        "answering.\n")
    async with await Session.open(SessionOptions(workdir=tmp_path)) as s:
        assert s.tool_names == ["run_command"] and s.tool_choice.source == "AGENTS.md"
        assert s.project_instructions == "# Calc\n\nAlways run pytest -q before answering."
        assert await s.connect()
        [_ async for _ in s.run_turn("hello")]
        body = srv.chat_bodies[-1]
        assert [t["function"]["name"] for t in body["tools"]] == ["run_command"]
        system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
        assert "Always run pytest -q before answering." in system and "tools: [" not in system
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["read_file"])) as s:
        assert s.tool_names == ["read_file"] and s.tool_choice.source == "command line"
        assert s.project_instructions is not None  # the instructions still count


async def test_a_resumed_conversation_reads_its_own_directory(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "AGENTS.md").write_text("tools: [read_file]\n\nBe terse.\n")
    async with await Session.open(SessionOptions(workdir=project)) as s:
        assert await s.connect()
        [_ async for _ in s.run_turn("hello")]
        conv = s.conversation_id
    async with await Session.open(SessionOptions(workdir=elsewhere, resume=conv)) as s:
        assert s.workdir == project.resolve() and s.tool_names == ["read_file"]
        assert s.project_instructions == "Be terse."


async def test_a_bad_tools_line_stops_the_session_clearly(wisp_home: Path, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("tools: [shell]\n")
    with pytest.raises(SessionError, match="names 'shell', which is not a wisp tool"):
        await Session.open(SessionOptions(workdir=tmp_path))
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["read_file"])) as s:
        assert s.tool_names == ["read_file"]  # the command line wins, so AGENTS.md's list is not used


async def test_tools_command_lists_tools_with_token_cost(wisp_home: Path, tmp_path: Path) -> None:
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=["run_command", "read_file"])) as s:
        result = await run_command(s, "/tools")
        assert not result.error and result.title == "tools"
        rows = result.data["tools"]
        assert [r["name"] for r in rows] == ["run_command", "read_file"]
        schema = json.dumps(s.agent.tools.schemas()[0], ensure_ascii=False)
        assert rows[0]["tokens"] == estimate_tokens(schema) and rows[0]["read_only"] is False
        assert result.data["total_tokens"] == sum(r["tokens"] for r in rows)
        assert "`run_command`" in result.text and "command line" in result.text
        assert f"**{result.data['total_tokens']:,}**" in result.text
    async with await Session.open(SessionOptions(workdir=tmp_path, tools=[])) as s:
        result = await run_command(s, "/tools")
        assert result.data["tools"] == [] and "no tools" in result.text


# --- wisp ask ---------------------------------------------------------------------------------------


def test_ask_without_an_allow_list_runs_nothing_and_tells_the_model(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    srv.push(reply(tool_call("run_command", {"command": "touch made.txt"}), finish="tool_calls"),
             reply(text("I could not run it; it needs your approval.")))
    r = wisp("ask", "--tool", "run_command", "make the file", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "made.txt").exists()
    assert "needs your approval" in r.stdout and "not run, it needs approval: touch made.txt" in r.stderr
    told = tool_messages(srv.chat_bodies[-1])
    assert told and "did not run: it needs the person's approval" in told[0]
    events = audit_events(home, "approval")
    assert len(events) == 1 and events[0]["payload"]["choice"] == "needs_approval"
    assert events[0]["payload"]["allow_list"] == {"config": [], "workspace": []}
    assert events[0]["payload"]["transport"] == "ask"


def test_ask_with_a_matching_allow_list_runs_it(ollama_home, tmp_path: Path) -> None:
    home, srv = ollama_home
    write_config(home, {"model.provider": "ollama", "model.endpoint": srv.base_url, "model.timeout_s": 5,
                        "tools.run_command.allow": ["cat", "git status"]})
    (tmp_path / "AGENTS.md").write_text('tools: ["run_command"]\n')
    (tmp_path / "notes.txt").write_text("NOTES-TEXT\n")
    srv.push(reply(tool_call("run_command", {"command": "cat notes.txt"}), finish="tool_calls"),
             reply(text("Done.")),
             reply(tool_call("run_command", {"command": "cat other.txt; touch sneaky.txt"}), finish="tool_calls"),
             reply(text("That one needs you.")))
    r = wisp("ask", "read the file", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Done."
    told = tool_messages(srv.chat_bodies[-1])[0]
    assert "NOTES-TEXT" in told and "[exit status 0]" in told
    r = wisp("ask", "--continue", "and the others", cwd=tmp_path)
    assert r.returncode == 0
    assert not (tmp_path / "sneaky.txt").exists()
    choices = [(e["payload"]["choice"], e["payload"]["prefix"]) for e in audit_events(home, "approval")]
    assert choices == [("allow_list", "cat"), ("needs_approval", None)]
    assert audit_events(home, "approval")[0]["payload"]["allow_list"]["config"] == ["cat", "git status"]


def test_ask_says_a_chained_command_is_not_covered_by_any_prefix(ollama_home, tmp_path: Path) -> None:
    """QA: the advice to allow a prefix cannot work for a chained command."""
    home, srv = ollama_home
    srv.push(reply(tool_call("run_command", {"command": "ls; touch sneaky.txt"}), finish="tool_calls"),
             reply(text("Not run.")))
    r = wisp("ask", "--tool", "run_command", "do it", cwd=tmp_path)
    assert r.returncode == 0 and not (tmp_path / "sneaky.txt").exists()
    assert "no allowed prefix covers it" in r.stderr and "tools.run_command.allow" not in r.stderr


# --- confinement (issue "Nothing runs, leaks, hangs or is lost that shouldn't be") ------------------


def test_an_agents_md_leading_outside_the_workdir_is_not_read(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text('tools: ["run_command"]\nthe secret instructions\n')
    (work / "AGENTS.md").symlink_to(secret)
    parsed = load_agents_md(work)
    assert parsed is not None and parsed.instructions is None and parsed.tools is None
    assert len(parsed.problems) == 1 and "leads outside the working directory" in parsed.problems[0]
    assert str(secret) in parsed.problems[0]
    # a path through a linked directory resolves outside too
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "AGENTS.md").write_text("far away\n")
    (work / "AGENTS.md").unlink()
    (work / "agents.md").symlink_to(tmp_path / "elsewhere" / "AGENTS.md")
    parsed = load_agents_md(work)
    assert parsed is not None and parsed.instructions is None and "far away" not in str(parsed)
    # a link inside the working directory is read
    (work / "agents.md").unlink()
    (work / "docs").mkdir()
    (work / "docs" / "agents.md").write_text("inside instructions\n")
    (work / "AGENTS.md").symlink_to(work / "docs" / "agents.md")
    parsed = load_agents_md(work)
    assert parsed is not None and parsed.instructions == "inside instructions" and parsed.problems == []


def test_an_agents_md_that_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "AGENTS.md")
    parsed = load_agents_md(tmp_path)  # would block forever if it were opened for reading
    assert parsed is not None and parsed.instructions is None
    assert parsed.problems == [f"{tmp_path / 'AGENTS.md'} is a FIFO (named pipe), not a regular file; it was not read"]


async def test_the_startup_problems_line_says_it_was_not_read(ollama_home, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret.md").write_text("the secret instructions\n")
    (work / "AGENTS.md").symlink_to(tmp_path / "secret.md")
    async with await Session.open(SessionOptions(workdir=work)) as s:
        assert s.project_instructions is None
        assert any("leads outside the working directory" in p for p in s.startup_problems)
    r = wisp("ask", "hello", cwd=work)
    assert r.returncode == 0
    assert "wisp: " in r.stderr and "leads outside the working directory" in r.stderr
    home, srv = ollama_home
    assert "the secret instructions" not in json.dumps(srv.chat_bodies)
