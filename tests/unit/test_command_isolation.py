"""What a command gets from wisp and what it leaves behind (issue "Nothing runs, leaks, hangs or is
lost that shouldn't be"): no secrets in its environment, and nothing left running after wisp is
killed with kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wisp.core.config import Config, ConfigError
from wisp.core.tools.approval import Approval
from wisp.core.tools.base import ToolContext
from wisp.core.tools.run_command import RunCommand, command_environment
from tests.support.fakes import FakeOllama, reply, tool_call
from tests.support.home import write_config
from tests.support.processes import alive, wait_gone

WISP = str(Path(sys.executable).parent / "wisp")


async def allow(request) -> Approval:
    return Approval(True, "once", "person")


SECRETS = {"MY_API_KEY": "k1", "GITHUB_TOKEN": "k2", "AWS_REGION": "k3", "DB_PASSWORD": "k4",
           "CLIENT_SECRET_VALUE": "k5", "openai_api_key": "k6", "GOOGLE_APPLICATION_CREDENTIALS": "k7",
           "THE_KEY_NAMED_BY_CONFIG": "k8", "NPM_TOKEN_X": "k9"}


async def test_commands_run_with_a_clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command gets PATH, HOME, LANG, LC_*, TERM, TZ and the settings wisp adds: nothing else of
    wisp's environment, secrets or not, unless tools.run_command.env_pass names it."""
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    monkeypatch.setenv("LC_TIME", "C")
    monkeypatch.setenv("TZ", "UTC")
    cfg = Config(tmp_path / "c.json", {"model.api_key_env": "THE_KEY_NAMED_BY_CONFIG"})
    ctx = ToolContext(workdir=tmp_path, config=cfg, approve=allow)
    result = await RunCommand().run({"command": "env"}, ctx)
    assert result.ok
    names = {line.split("=", 1)[0] for line in result.content.splitlines() if "=" in line}
    assert {"PATH", "HOME", "LC_TIME", "TZ", "TERM"} <= names
    assert "PLAIN_SETTING" not in names and not names & set(SECRETS), names
    assert not names - {"PATH", "HOME", "LANG", "LC_TIME", "TZ", "TERM", "PAGER", "PYTHONUNBUFFERED",
                        "NO_COLOR", "PWD", "SHLVL", "_", "OLDPWD"} - {n for n in names if n.startswith("GIT_")}
    assert not any(f"={v}\n" in result.content for v in SECRETS.values())
    cfg = Config(tmp_path / "c.json", {"model.api_key_env": "THE_KEY_NAMED_BY_CONFIG",
                                       "tools.run_command.env_pass": ["PLAIN_SETTING", "MY_API_KEY",
                                                                      "THE_KEY_NAMED_BY_CONFIG"]})
    result = await RunCommand().run({"command": "env"}, ToolContext(workdir=tmp_path, config=cfg, approve=allow))
    names = {line.split("=", 1)[0] for line in result.content.splitlines() if "=" in line}
    assert "PLAIN_SETTING=visible" in result.content.splitlines()
    assert "MY_API_KEY" not in names and "THE_KEY_NAMED_BY_CONFIG" not in names  # env_drop still holds


def test_relative_and_empty_path_entries_are_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f".:bin::/usr/bin:{tmp_path}:relative/dir:/bin:")
    env = command_environment(Config(tmp_path / "c.json"))
    assert env["PATH"] == f"/usr/bin:{tmp_path}:/bin"
    monkeypatch.setenv("PATH", ".:")
    assert command_environment(Config(tmp_path / "c.json"))["PATH"] == "/usr/local/bin:/usr/bin:/bin"


async def test_an_allowed_name_never_runs_the_repositorys_own_file(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """With `.` and an empty entry on wisp's PATH, an allow-listed `ls` is /bin/ls, not ./ls."""
    from wisp.core.tools.approval import Approvals, WorkspaceAllowList

    fake = tmp_path / "ls"
    fake.write_text("#!/bin/sh\necho REPOSITORY-LS-RAN\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f".::{os.environ['PATH']}")
    cfg = Config(tmp_path / "c.json", {"tools.run_command.allow": ["ls"]})
    policy = Approvals(cfg, None, WorkspaceAllowList(tmp_path / "a.json"), ask=None, transport="ask")
    result = await RunCommand().run({"command": "ls"}, ToolContext(workdir=tmp_path, config=cfg, approve=policy))
    if result.meta["approval"]["choice"] == "allow_list":
        assert "REPOSITORY-LS-RAN" not in result.content and "ls" in result.content
    else:  # no sandbox here: nothing runs unasked at all
        assert "exit_status" not in result.meta
    assert "REPOSITORY-LS-RAN" in subprocess.run("ls", shell=True, cwd=tmp_path, capture_output=True,
                                                 text=True).stdout  # the trap is real


async def test_the_named_key_is_dropped_even_with_an_empty_drop_list(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_API_KEY", "k1")
    monkeypatch.setenv("ODD_NAME", "the key")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    passed = ["MY_API_KEY", "ODD_NAME", "PLAIN_SETTING"]
    cfg = Config(tmp_path / "c.json", {"model.api_key_env": "ODD_NAME", "tools.run_command.env_drop": [],
                                       "tools.run_command.env_pass": passed})
    env = command_environment(cfg)
    assert "ODD_NAME" not in env and env["MY_API_KEY"] == "k1"  # the person emptied the list
    cfg = Config(tmp_path / "c.json", {"tools.run_command.env_drop": ["PLAIN_*", "odd_?ame"],
                                       "tools.run_command.env_pass": passed})
    env = command_environment(cfg)
    assert "PLAIN_SETTING" not in env and "ODD_NAME" not in env and env["MY_API_KEY"] == "k1"
    assert "PATH" in command_environment(Config(tmp_path / "c.json", {"tools.run_command.env_drop": ["*"]}))


def test_the_drop_list_is_validated(tmp_path: Path) -> None:
    cfg = Config(tmp_path / "c.json")
    assert cfg.set("tools.run_command.env_drop", '["*_TOKEN","MY_SECRET"]') == ["*_TOKEN", "MY_SECRET"]
    for bad in ('["has space"]', '["A=B"]', '["$X"]', "[1]", '[""]'):
        with pytest.raises(ConfigError, match="tools.run_command.env_drop expects"):
            cfg.set("tools.run_command.env_drop", bad)
    with pytest.raises(ConfigError, match="glob patterns of environment variable names"):
        cfg.set("tools.run_command.env_drop", '["has space"]')
    assert "*_KEY" in Config(tmp_path / "d.json").get("tools.run_command.env_drop")


# --- nothing outlives a killed wisp ----------------------------------------------------------------


def _processes() -> list[tuple[int, int, list[str]]]:
    """(pid, parent pid, argv) of every process this user can see."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")[:-1]
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.append((int(entry.name), ppid, [a.decode("utf-8", "replace") for a in argv]))
    return out


def _find(argv: list[str], limit_s: float = 30.0) -> int:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for pid, _, have in _processes():
            if have == argv and alive(pid):
                return pid
        time.sleep(0.05)
    raise AssertionError(f"no process {argv} appeared")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("command,sleepers", [
    ("sleep {a}", ["{a}"]),                                         # sh execs sleep itself
    ("sh -c 'sleep {b} & sleep {a}'", ["{a}", "{b}"]),               # a grandchild too
])
def test_kill_9_of_wisp_leaves_no_command_running(command: str, sleepers: list[str], wisp_home: Path,
                                                  tmp_path: Path) -> None:
    base = 900000 + os.getpid() % 50000 * 2  # durations no other process on the machine uses
    values = {"a": str(base), "b": str(base + 1)}
    command = command.format(**values)
    wanted = [["sleep", s.format(**values)] for s in sleepers]
    with FakeOllama([reply(tool_call("run_command", {"command": command}), finish="tool_calls")]) as srv:
        write_config(wisp_home, {"model.provider": "ollama", "model.endpoint": srv.base_url,
                                 "model.name": "wisp-fake:latest", "tools.enabled": ["run_command"],
                                 "tools.run_command.allow": ["sleep", command]})
        proc = subprocess.Popen([WISP, "ask", "sleep for me"], cwd=tmp_path, env=os.environ.copy(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            pids = [_find(argv) for argv in wanted]
            watchdogs = [pid for pid, ppid, argv in _processes()
                         if ppid == proc.pid and len(argv) == 3 and "read -r pg" in argv[2]]
            assert len(watchdogs) == 1
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            assert wait_gone(pids + watchdogs) == [], "a command outlived wisp"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pid, _, argv in _processes():
                if argv in wanted:
                    os.kill(pid, signal.SIGKILL)
