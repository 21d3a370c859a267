"""The sandbox commands run in (real bubblewrap), what it allows, its absence, and read_file's
hard links. Skipped without bwrap only when WISP_REQUIRE_E2E is unset (CI sets it: a missing
sandbox fails there)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from wisp.core.config import Config
from wisp.core.tools import sandbox
from wisp.core.tools.approval import Approval, ApprovalRequest, Approvals, WorkspaceAllowList
from wisp.core.tools.base import ToolContext
from wisp.core.tools.read_file import ReadFile
from wisp.core.tools.run_command import RunCommand


@pytest.fixture(autouse=True)
def _fresh_probe():
    sandbox.reset()
    yield
    sandbox.reset()


@pytest.fixture
def bwrap() -> str:
    """The real bubblewrap: skipped where it is missing, unless WISP_REQUIRE_E2E=1 (CI), where a
    missing sandbox is a failure."""
    sandbox.reset()
    found = sandbox.probe()
    if not found.available:
        if os.environ.get("WISP_REQUIRE_E2E") == "1":
            pytest.fail(f"WISP_REQUIRE_E2E=1 and no sandbox: {found.reason}")
        pytest.skip(found.reason)
    return found.bwrap or ""


def approver(choice: str):
    async def approve(request: ApprovalRequest) -> Approval:
        return Approval(True, choice, "config" if choice == "allow_list" else "person",
                        "x" if choice == "allow_list" else None)
    return approve


async def run(command: str, work: Path, choice: str = "once", **config) -> tuple[str, dict]:
    cfg = Config(work.parent / "sandbox-config.json", config)
    result = await RunCommand().run({"command": command},
                                    ToolContext(workdir=work, config=cfg, approve=approver(choice)))
    return result.content, result.meta


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "a.txt").write_text("alpha\n")
    return path


async def test_an_allowed_command_writes_nothing_an_approved_one_writes_the_workdir(bwrap: str, work: Path) -> None:
    out, meta = await run("touch made.txt; echo x > /tmp/own && cat /tmp/own", work, "allow_list")
    assert meta["sandbox"] == "read-only" and not (work / "made.txt").exists()
    assert "Read-only file system" in out and "\nx\n" in f"\n{out}"  # its own /tmp it may write
    out, meta = await run("touch made.txt; touch /etc/wisp-sandbox-test", work, "once")
    assert meta["sandbox"] == "workdir writable" and (work / "made.txt").exists()
    assert not Path("/etc/wisp-sandbox-test").exists() and "Read-only file system" in out
    assert not Path("/tmp/own").exists()  # the command's /tmp was its own


async def test_allow_writes_lets_an_allowed_command_write_the_workdir_only(bwrap: str, work: Path) -> None:
    out, meta = await run("touch made.txt; touch /etc/wisp-sandbox-test", work, "allow_list",
                          **{"tools.run_command.allow_writes": True})
    assert meta["sandbox"] == "workdir writable" and (work / "made.txt").exists()
    assert not Path("/etc/wisp-sandbox-test").exists()


async def test_an_approved_git_keeps_the_persons_config_an_allowed_one_none(
        bwrap: str, work: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An approved `git commit` needs the person's identity (and LFS its filters); an allowed
    command reads neither the person's dotfiles nor git's global config."""
    home = work / "person"  # inside the working directory: the sandbox's /tmp hides tmp_path
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Person Of The Home\n")
    monkeypatch.setenv("HOME", str(home))
    out, _ = await run("git config user.name", work, "once")
    assert "Person Of The Home" in out
    out, _ = await run("git config user.name; echo HOME=$HOME", work, "allow_list")
    assert "Person Of The Home" not in out and "HOME=/tmp/home" in out


async def test_wisps_home_store_and_audit_log_are_hidden(bwrap: str, wisp_home: Path, tmp_path: Path) -> None:
    (wisp_home / "config.json").write_text('{"secret": "HOME-SECRET"}')
    (wisp_home / "data").mkdir()
    (wisp_home / "data" / "wisp.db").write_text("STORE-SECRET")
    outside = tmp_path / "elsewhere-audit"
    outside.mkdir()
    (outside / "audit-1.jsonl").write_text("AUDIT-SECRET")
    # the working directory holds wisp's home (the hidden part is covered after the bind)
    out, meta = await run(f"cat wisp-home/config.json wisp-home/data/wisp.db {outside}/audit-1.jsonl; ls -a wisp-home",
                          tmp_path, "once", **{"audit.dir": str(outside)})
    assert meta["sandbox"] == "workdir writable"
    for secret in ("HOME-SECRET", "STORE-SECRET", "AUDIT-SECRET"):
        assert secret not in out, out
    assert (wisp_home / "config.json").read_text() == '{"secret": "HOME-SECRET"}'
    # and a working directory inside wisp's home still shows its own files
    inner = wisp_home / "project"
    inner.mkdir()
    (inner / "mine.txt").write_text("MINE")
    out, _ = await run("cat mine.txt ../config.json", inner, "allow_list")
    assert "MINE" in out and "HOME-SECRET" not in out


async def test_no_network_unless_the_person_allows_it(bwrap: str, work: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    port = server.getsockname()[1]
    accepted: list[bool] = []

    def serve() -> None:
        server.settimeout(30)
        try:
            conn, _ = server.accept()
            accepted.append(True)
            conn.sendall(b"HELLO-FROM-HOST\n")
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    probe = (f"python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', {port}), 5); "
             "print(s.recv(100).decode())\"")
    try:
        out, _ = await run(probe, work, "once")
        assert "HELLO-FROM-HOST" not in out and not accepted
        out, _ = await run(probe, work, "once", **{"tools.run_command.network": True})
        assert "HELLO-FROM-HOST" in out and accepted
    finally:
        server.close()
        thread.join(5)


async def test_wisps_processes_are_not_there(bwrap: str, work: Path) -> None:
    out, _ = await run("ls /proc", work, "allow_list")
    pids = {int(w) for w in out.split() if w.isdigit()}
    assert pids and os.getpid() not in pids and max(pids) < 100  # a PID namespace of its own


SECRET_NAMES = ["WISP_TEST_API_KEY", "PLAIN_LOOKING_NAME", "AWS_SECRET_ACCESS_KEY"]
READERS = ["env", "cat /proc/1/environ", "cat /proc/{pid}/environ", "cat /proc/self/environ",
           "head -c 100000 /proc/1/environ", "grep -a -r -s -h -o --include=environ '{head}[^[:cntrl:]]*' /proc",
           "cat /proc/{ppid}/environ", "grep -a -s -o '{head}' /proc/1/environ /proc/2/environ /proc/3/environ",
           "cat /proc/*/environ", "grep -a -s -o '{head}[^[:cntrl:]]*' /proc/*/environ /proc/*/task/*/environ",
           "cat /proc/{helper}/environ"]


@pytest.mark.parametrize("reader", READERS)
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(secret=st.text("ABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=16, max_size=40),
       name=st.sampled_from(SECRET_NAMES), choice=st.sampled_from(["allow_list", "once"]))
def test_no_command_reads_wisps_environment(bwrap: str, work: Path, secret: str, name: str, reader: str,
                                            choice: str) -> None:
    """Whatever an allowed (or approved) command reads of /proc or its environment, wisp's
    secret is not in it: not in the command's environment, not in bwrap's (PID 1 there), and no
    process of wisp's, such as a helper started with the secret in its environment block (what
    /proc/PID/environ shows), is in its PID namespace."""
    value = "S" + secret
    old = os.environ.get(name)
    os.environ[name] = value
    helper = subprocess.Popen(["sleep", "120"], env=dict(os.environ))
    command = reader.format(pid=os.getpid(), ppid=os.getppid(), head=value[:8], helper=helper.pid)
    try:
        deadline = time.monotonic() + 10  # polled: the helper shows its environment once it has exec'd
        while value.encode() not in Path(f"/proc/{helper.pid}/environ").read_bytes():
            assert time.monotonic() < deadline, "the helper never showed its environment"
        out, meta = asyncio.run(run(command, work, choice, **{"model.api_key_env": "WISP_TEST_API_KEY"}))
    finally:
        helper.kill()
        helper.wait()
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
    assert meta["sandbox"] != "none"
    assert value not in out and value[:8] not in out, (command, out[-400:])


def test_the_readers_can_see_a_secret_where_there_is_one(bwrap: str, work: Path) -> None:
    """The property test's readers are real: through env_pass the same readers print the value."""
    os.environ["PLAIN_LOOKING_NAME"] = "SVISIBLEVALUE12345"
    try:
        out, _ = asyncio.run(run("cat /proc/1/environ", work, "allow_list",
                                 **{"tools.run_command.env_pass": ["PLAIN_LOOKING_NAME"]}))
    finally:
        os.environ.pop("PLAIN_LOOKING_NAME", None)
    assert "SVISIBLEVALUE12345" in out


# --- without a sandbox ----------------------------------------------------------------------------


async def test_without_bwrap_every_command_asks_and_the_notice_comes_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sandbox, "BWRAP_CANDIDATES", (str(tmp_path / "no-such-bwrap"),))
    sandbox.reset()
    assert not sandbox.probe().available and "not installed" in sandbox.probe().reason
    work = tmp_path / "work"
    work.mkdir()
    cfg = Config(tmp_path / "config.json", {"tools.run_command.allow": ["ls", "echo"]})
    # wisp ask: no one to ask, so nothing runs, allow list or not
    policy = Approvals(cfg, None, WorkspaceAllowList(tmp_path / "a.json"), ask=None, transport="ask")
    ctx = ToolContext(workdir=work, config=cfg, approve=policy)
    for command in ("ls", "echo hi", "ls -la"):
        result = await RunCommand().run({"command": command}, ctx)
        assert result.meta["approval"]["choice"] == "needs_approval" and "exit_status" not in result.meta
        assert "no sandbox" in result.content and "apt-get install bubblewrap" in result.content
    # wisp ask says it with the first command it did not run (test_wisp_ask_says_once_...), not apart
    assert "no sandbox" not in capsys.readouterr().err
    # the TUI: every command is put to the person, the allow list and "always" prefixes unused, and
    # the question says there is no sandbox, in the core's words
    asked: list[str] = []
    notices: list[str | None] = []

    async def ask(request: ApprovalRequest):
        asked.append(request.command)
        notices.append(request.notice)
        return ("once", None)

    allow_file = tmp_path / "b.json"
    WorkspaceAllowList(allow_file).add(work, "echo")
    policy = Approvals(cfg, None, WorkspaceAllowList(allow_file), ask=ask)
    result = await RunCommand().run({"command": "echo hi"}, ToolContext(workdir=work, config=cfg, approve=policy))
    assert asked == ["echo hi"] and result.ok and result.meta["sandbox"] == "none"
    assert result.meta["approval"]["choice"] == "once"
    assert notices == [sandbox.approval_notice()] and notices[0].startswith("No sandbox (bubblewrap not found): ")
    assert "apt-get install bubblewrap" in notices[0]
    assert result.content.count("commands have no sandbox here") == 1  # and once in the output it ran with
    assert "no sandbox" not in capsys.readouterr().err  # the TUI's stderr is no one's screen


def test_wisp_ask_says_once_that_commands_have_no_sandbox(
        ollama_home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`wisp ask` with bwrap absent: the line about the first command it did not run is followed by the
    core's no-sandbox line, once; the second command's line does not repeat it, nor advises an allow list."""
    from tests.support.fakes import reply, text, tool_call
    from tests.support.mcp_helpers import add_config
    from wisp.core.cli import main

    home, srv = ollama_home
    monkeypatch.setattr(sandbox, "BWRAP_CANDIDATES", (str(tmp_path / "no-such-bwrap"),))
    sandbox.reset()
    add_config(home, {"tools": {"enabled": ["run_command"], "run_command": {"allow": ["ls"]}}})
    srv.push(reply(tool_call("run_command", {"command": "ls"}), finish="tool_calls"),
             reply(tool_call("run_command", {"command": "echo hi"}), finish="tool_calls"),
             reply(text("Nothing ran.")))
    monkeypatch.chdir(tmp_path)
    assert main(["ask", "list the files"]) == 0
    out = capsys.readouterr()
    lines = [line for line in out.err.splitlines() if line.startswith("wisp: ")]
    refusals = [i for i, line in enumerate(lines) if line.startswith("wisp: not run, it needs approval: ")]
    said = [i for i, line in enumerate(lines) if "No sandbox (" in line]
    assert len(refusals) == 2 and said == [refusals[0] + 1], out.err
    assert lines[said[0]] == f"wisp: {sandbox.approval_notice()}"
    assert "tools.run_command.allow" not in out.err and "only the TUI can allow it" in lines[refusals[1]]
    assert "commands have no sandbox here" not in out.err  # no second, free-standing notice
    assert "Nothing ran." in out.out


# --- read_file and hard links --------------------------------------------------------------------


async def test_read_file_does_not_follow_a_hard_link_out_of_the_workdir(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("OUTSIDE-SECRET\n")
    os.link(outside, work / "innocent.txt")
    (work / "plain.txt").write_text("plain\n")
    cfg = Config(tmp_path / "c.json")
    ctx = ToolContext(workdir=work, config=cfg)
    result = await ReadFile().run({"path": "innocent.txt"}, ctx)
    assert not result.ok and "OUTSIDE-SECRET" not in result.content and "2 hard links" in result.content
    assert (await ReadFile().run({"path": "plain.txt"}, ctx)).ok
    cfg = Config(tmp_path / "c.json", {"tools.read_file.allow_outside_workdir": True})
    result = await ReadFile().run({"path": "innocent.txt"}, ToolContext(workdir=work, config=cfg))
    assert result.ok and "OUTSIDE-SECRET" in result.content
