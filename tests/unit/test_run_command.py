"""run_command as a tool: approval first, timeouts that end the whole process group, the
output cap held in memory, non-UTF-8 output, streaming, Esc; and the approval policy.

Real processes under /bin/sh; no fixed sleeps as synchronisation (conditions are polled).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wisp.core.audit import AuditLog
from wisp.core.config import Config
from wisp.core.tools.registry import AVAILABLE, build_registry
from wisp.core.tools.approval import (
    Approval, ApprovalRequest, Approvals, WorkspaceAllowList, is_simple_command, prefix_matches,
    suggest_prefix,
)
from wisp.core.tools.base import ToolContext
from wisp.core.tools.run_command import OutputCapture, RunCommand


def config(tmp_path: Path, **values) -> Config:
    keys = {"timeout_s": "tools.run_command.timeout_s", "cap": "tools.run_command.max_output_bytes",
            "allow": "tools.run_command.allow"}
    return Config(tmp_path / "config.json", {keys[k]: v for k, v in values.items()})


async def allow(request: ApprovalRequest) -> Approval:
    return Approval(True, "once", "person")


async def deny(request: ApprovalRequest) -> Approval:
    return Approval(False, "deny", "person")


def ctx(workdir: Path, cfg: Config, approve=allow, emit=None) -> ToolContext:
    return ToolContext(workdir=workdir, config=cfg, conversation_id=1, turn=1, emit=emit, approve=approve)


from tests.support.processes import alive, pids_of, unique_seconds, wait_argv_gone, wait_gone  # noqa: E402,F401


def test_registered_and_acts() -> None:
    assert AVAILABLE["run_command"] is RunCommand
    tool = build_registry(["run_command"]).get("run_command")
    assert tool is not None and tool.read_only is False


async def test_runs_in_the_workdir_with_exit_status(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("x")
    result = await RunCommand().run({"command": "pwd; ls; echo oops >&2; exit 3"}, ctx(tmp_path, config(tmp_path)))
    assert not result.ok and result.meta["exit_status"] == 3
    assert str(tmp_path.resolve()) in result.content and "marker.txt" in result.content
    assert "oops" in result.content and result.content.endswith("[exit status 3]")
    ok = await RunCommand().run({"command": "true"}, ctx(tmp_path, config(tmp_path)))
    assert ok.ok and ok.meta["exit_status"] == 0 and "(no output)" in ok.content


async def test_a_denied_command_never_starts(tmp_path: Path) -> None:
    result = await RunCommand().run({"command": "touch made.txt"}, ctx(tmp_path, config(tmp_path), approve=deny))
    assert not (tmp_path / "made.txt").exists()
    assert not result.ok and "denied" in result.content and result.meta["approval"]["choice"] == "deny"
    assert "exit_status" not in result.meta


async def test_no_approver_means_nothing_runs(tmp_path: Path) -> None:
    result = await RunCommand().run({"command": "touch made.txt"}, ctx(tmp_path, config(tmp_path), approve=None))
    assert not (tmp_path / "made.txt").exists() and not result.ok


async def test_timeout_ends_the_command_and_its_children(tmp_path: Path) -> None:
    # the child ignores SIGTERM, so only the SIGKILL to the whole group ends it; the pids the
    # command prints are its sandbox's, so the children are found by their argv
    t = unique_seconds()
    cmd = f"sh -c 'trap \"\" TERM; sleep {t} & echo child $!; sleep {t} & echo child $!; wait'"
    started = time.monotonic()
    result = await RunCommand().run({"command": cmd}, ctx(tmp_path, config(tmp_path, timeout_s=1)))
    took = time.monotonic() - started
    pids = [int(p) for p in re.findall(r"child (\d+)", result.content)]
    assert len(pids) == 2, result.content
    assert wait_argv_gone(["sleep", t]) == [], "a child outlived the timeout"
    assert result.meta["timed_out"] and not result.ok
    assert "timed out after 1 s" in result.content and "were ended" in result.content
    assert took < 10


async def test_background_children_holding_the_output_are_ended(tmp_path: Path) -> None:
    t = unique_seconds(1)
    result = await RunCommand().run({"command": f"sleep {t} & echo bg $!"},
                                    ctx(tmp_path, config(tmp_path, timeout_s=30)))
    assert re.search(r"bg (\d+)", result.content)
    assert wait_argv_gone(["sleep", t]) == []
    assert result.meta["exit_status"] == 0 and result.meta["duration_s"] < 10
    if result.meta["sandbox"] == "none":  # wisp ends them after DRAIN_S, and says so
        assert result.meta["background_ended"] and "background" in result.content
    else:  # the sandbox's PID namespace ends with the shell, and everything in it
        assert not result.meta["background_ended"]


async def test_100_mb_of_output_stays_within_the_cap(tmp_path: Path) -> None:
    cap = 65536
    result = await RunCommand().run({"command": "yes 'a line of output text' | head -c 100000000"},
                                    ctx(tmp_path, config(tmp_path, cap=cap)))
    assert result.ok and result.meta["output_bytes"] == 100_000_000
    assert result.meta["dropped_bytes"] == 100_000_000 - cap
    assert len(result.content.encode()) < cap + 1000
    assert f"[… {100_000_000 - cap:,} bytes dropped from the middle of the output …]" in result.content
    assert result.content.startswith("a line of output text\n")
    tail = result.content.split("bytes dropped from the middle of the output …]\n")[1]
    assert tail.count("a line of output text\n") > 1000 and "\n[the output was 100,000,000 bytes" in tail


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_100_mb_peak_memory_stays_near_the_cap(tmp_path: Path) -> None:
    """Peak RSS (VmHWM, which an exec resets, unlike ru_maxrss) of a fresh process running the
    tool grows by far less than the 100 MB the command prints."""
    script = tmp_path / "peak.py"
    script.write_text(
        "import asyncio, re, sys\n"
        "from pathlib import Path\n"
        "from wisp.core.config import Config\n"
        "from wisp.core.tools.base import ToolContext\n"
        "from wisp.core.tools.approval import Approval\n"
        "from wisp.core.tools.run_command import RunCommand\n"
        "def hwm():\n"
        "    return int(re.search(r'VmHWM:\\s+(\\d+) kB', Path('/proc/self/status').read_text()).group(1))\n"
        "async def ok(r): return Approval(True, 'once', 'person')\n"
        "async def main():\n"
        "    c = Config(Path(sys.argv[1]) / 'c.json', {'tools.run_command.max_output_bytes': 1048576})\n"
        "    ctx = ToolContext(workdir=Path(sys.argv[1]), config=c, approve=ok)\n"
        "    await RunCommand().run({'command': 'yes x | head -c 2000000'}, ctx)\n"
        "    before = hwm()\n"
        "    r = await RunCommand().run({'command': \"yes 'line of text' | head -c 100000000\"}, ctx)\n"
        "    print(before, hwm(), r.meta['output_bytes'])\n"
        "asyncio.run(main())\n")
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after, total = (int(x) for x in out.stdout.split())
    assert total == 100_000_000
    assert before > 0 and (after - before) < 20 * 1024, f"peak RSS grew by {(after - before) / 1024:.1f} MB"


async def test_non_utf8_output_is_flagged(tmp_path: Path) -> None:
    result = await RunCommand().run({"command": r"printf 'ok \377\376 done\n'"}, ctx(tmp_path, config(tmp_path)))
    assert result.meta["non_utf8"] is True
    assert "ok \ufffd\ufffd done" in result.content and "not valid UTF-8" in result.content
    clean = await RunCommand().run({"command": "printf 'caf\\303\\251\\n'"}, ctx(tmp_path, config(tmp_path)))
    assert clean.meta["non_utf8"] is False and "café" in clean.content


def test_a_character_cut_by_the_cap_is_not_called_invalid() -> None:
    capture = OutputCapture(101)
    for _ in range(1000):
        capture.add("é".encode())  # two bytes each; the head ends mid-character
    text = capture.text()
    assert not capture.non_utf8 and "\ufffd" not in text and "bytes dropped" in text


async def test_output_streams_while_the_command_runs(tmp_path: Path) -> None:
    pieces: list[str] = []
    cmd = "echo first; while [ ! -f go ]; do sleep 0.02; done; echo second"
    task = asyncio.ensure_future(RunCommand().run({"command": cmd},
                                                  ctx(tmp_path, config(tmp_path), emit=pieces.append)))
    for _ in range(500):
        if "first" in "".join(pieces):
            break
        await asyncio.sleep(0.01)
    assert "first" in "".join(pieces) and not task.done()
    (tmp_path / "go").write_text("")
    result = await asyncio.wait_for(task, 30)
    assert "second" in "".join(pieces) and result.content.startswith("first\nsecond")


async def test_cancelling_ends_the_group_and_says_stopped(tmp_path: Path) -> None:
    pieces: list[str] = []
    t = unique_seconds(2)
    task = asyncio.ensure_future(RunCommand().run({"command": f"sleep {t} & echo child $!; wait"},
                                                  ctx(tmp_path, config(tmp_path), emit=pieces.append)))
    for _ in range(500):
        if "child" in "".join(pieces):
            break
        await asyncio.sleep(0.01)
    assert re.search(r"child (\d+)", "".join(pieces)) and pids_of(["sleep", t])
    task.cancel()
    result = await asyncio.wait_for(task, 30)
    assert result.meta["stopped"] and not result.ok and "stopped by the person" in result.content
    assert wait_argv_gone(["sleep", t]) == []


async def test_test_runs_go_into_meta(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text("def test_good():\n    assert True\n\ndef test_bad():\n    assert 1 == 2\n")
    cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider test_one.py"
    result = await RunCommand().run({"command": cmd}, ctx(tmp_path, config(tmp_path, timeout_s=120)))
    tests = result.meta["tests"]
    assert tests["framework"] == "pytest" and tests["outcome"] == "failed"
    assert tests["failing"] == ["test_one.py::test_bad"] and (tests["passed"], tests["failed"]) == (1, 1)
    assert tests["summary"].startswith("failed (pytest): 1 failed, 1 passed")


# --- the approval policy -------------------------------------------------------------------------


@pytest.mark.parametrize("command,simple", [
    ("pytest -q tests", True), ("git status -s", True), ("pytest -q 2>&1", True), ("echo 'a;b|c'", True),
    ("pytest; rm -rf ~", False), ("make && make install", False), ("ls | wc -l", False),
    ("echo $(whoami)", False), ("echo `id`", False), ("cat < /etc/passwd", False), ("echo x > f", False),
    ("sleep 1 &", False), ("echo \"$(id)\"", False), ("echo 'unclosed", False), ("a\nb", False),
])
def test_simple_commands(command: str, simple: bool) -> None:
    assert is_simple_command(command) is simple


@pytest.mark.parametrize("command,prefix", [
    ("pytest -q tests", "pytest"), ("git status -s", "git status"), ("python -m pytest -x", "python -m pytest"),
    ("FOO=1 make test", ""), ("ls; rm x", ""), ("./run.sh --fast", "./run.sh"), ("cargo test --all", "cargo test"),
    ("git -C x log", ""), ("", ""), ("python3 -c 'print(1)'", ""), ("sh -c ls", ""), ("bash x.sh", ""),
    ("env ls", ""), ("node a.js", ""), ("find . -name x", ""), ("xargs ls", ""), ("sudo ls", ""),
    ("touch a", ""), ("git push", ""), ("ls -la", "ls"), ("git diff --output=x", ""),
])
def test_suggested_prefixes(command: str, prefix: str) -> None:
    assert suggest_prefix(command) == prefix


def test_prefixes_match_whole_words_of_simple_commands() -> None:
    assert prefix_matches("pytest -q", "pytest") and prefix_matches("git status -s", "git status")
    assert not prefix_matches("pytestx -q", "pytest") and not prefix_matches("git stash", "git status")
    assert not prefix_matches("pytest; rm -rf ~", "pytest") and not prefix_matches("pytest -q | tee x", "pytest")
    assert prefix_matches("pytest -q 2>&1", "pytest")


def audit_events(audit_dir: Path, kind: str) -> list[dict]:
    out = []
    for f in sorted(audit_dir.glob("audit-*.jsonl")):
        out += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return [e for e in out if e["kind"] == kind]


async def test_approvals_policy_and_audit(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit")
    allow_file = tmp_path / "home" / "approvals.json"
    work = tmp_path / "work"
    work.mkdir()
    asked: list[str] = []
    answers = iter([("deny", None), ("always", "wc"), ("once", None), ("always", "touch"),
                    ("always", "python3"), ("always", "python3 -c 'print(1)'"), ("once", None)])

    async def ask(request: ApprovalRequest):
        asked.append(request.command)
        return next(answers)

    policy = Approvals(config(tmp_path, allow=["ls"]), audit, WorkspaceAllowList(allow_file), ask=ask)
    req = lambda c: ApprovalRequest("run_command", c, work, 7, 2)  # noqa: E731
    assert (await policy(req("ls -la"))).choice == "allow_list"          # config allow list: not asked
    assert (await policy(req("wc a"))).choice == "deny"                  # asked: denied
    d = await policy(req("wc b"))                                         # asked: always allow "wc"
    assert d.allowed and d.choice == "always" and d.prefix == "wc"
    d = await policy(req("wc c"))                                         # the workspace list: not asked
    assert d.allowed and d.source == "workspace" and d.prefix == "wc" and d.read_only
    assert (await policy(req("wc d; rm -rf x"))).choice == "once"       # compound: asked again
    # a writer, an interpreter, and an interpreter's code are never saved: allowed once only
    for command in ("touch a", "python3 -c 'print(1)'", "python3 -c 'print(1)'"):
        d = await policy(req(command))
        assert d.allowed and d.choice == "once" and not d.read_only, command
    d = await policy(req("python3 -c 'import os; os.system(\"touch x\")'"))  # still asked
    assert d.choice == "once"
    assert asked == ["wc a", "wc b", "wc d; rm -rf x", "touch a", "python3 -c 'print(1)'",
                     "python3 -c 'print(1)'", "python3 -c 'import os; os.system(\"touch x\")'"]
    assert stat.S_IMODE(allow_file.stat().st_mode) == 0o600
    assert WorkspaceAllowList(allow_file).prefixes(work) == ["wc"]
    assert WorkspaceAllowList(allow_file).prefixes(tmp_path) == []       # only in this workspace
    events = audit_events(tmp_path / "audit", "approval")
    assert [e["payload"]["choice"] for e in events] == ["allow_list", "deny", "always", "allow_list", "once",
                                                         "once", "once", "once", "once"]
    assert "was not saved" in events[5]["payload"]["error"]
    assert events[0]["payload"]["allow_list"]["config"] == ["ls"] and events[0]["payload"]["source"] == "config"
    assert events[3]["payload"]["allow_list"]["workspace"] == ["wc"]
    assert all(e["conversation"] == 7 and e["turn"] == 2 and e["payload"]["workdir"] == str(work) for e in events)


async def test_without_anyone_to_ask_only_the_config_list_counts(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit")
    allow_file = tmp_path / "approvals.json"
    WorkspaceAllowList(allow_file).add(tmp_path, "touch")  # chosen in the TUI earlier
    policy = Approvals(config(tmp_path, allow=["echo"]), audit, WorkspaceAllowList(allow_file), ask=None,
                       transport="ask")
    d = await policy(ApprovalRequest("run_command", "touch x", tmp_path))
    assert not d.allowed and d.choice == "needs_approval"
    result = await RunCommand().run({"command": "touch x"}, ctx(tmp_path, config(tmp_path, allow=["echo"]), policy))
    assert not (tmp_path / "x").exists() and "needs the person's approval" in result.content
    assert "tools.run_command.allow" in result.content
    ok = await RunCommand().run({"command": "echo hi"}, ctx(tmp_path, config(tmp_path, allow=["echo"]), policy))
    assert ok.ok and ok.content.startswith("hi")
    kinds = [e["payload"]["choice"] for e in audit_events(tmp_path / "audit", "approval")]
    assert kinds == ["needs_approval", "needs_approval", "allow_list"]


def test_a_malformed_allow_list_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "approvals.json"
    path.write_text("{not json")
    wal = WorkspaceAllowList(path)
    assert wal.prefixes(tmp_path) == []
    with pytest.raises(ValueError, match="fix or remove the file"):
        wal.add(tmp_path, "pytest")
    assert path.read_text() == "{not json"
