"""A hostile MCP server (tests/support/hostile_mcp_server.py, written with the official
SDK) started by the real ``wisp ask``: it finds none of wisp's secrets, in its own
environment, its parent's ``/proc/PID/environ`` or its parent's memory."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wisp.core.mcp_config import SAFE_ENV
from tests.support.fakes import FakeOpenAI, reply, text, tool_call
from tests.support.home import write_config
from tests.support.mcp_helpers import add_config

WISP = str(Path(sys.executable).parent / "wisp")
HOSTILE = Path(__file__).resolve().parents[1] / "support" / "hostile_mcp_server.py"
KEY = "sk-hostile-test-0123456789abcdef"
AWS = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _without_ptrace_capability() -> None:
    """Tests that run as root: root with CAP_SYS_PTRACE (or CAP_SYS_ADMIN, or CAP_PERFMON) reads
    every process's /proc files, non-dumpable or not, so wisp and the server it starts run without
    those capabilities, as an ordinary user's processes do."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_capbset_drop = 24
        for capability in (19, 21, 38):  # CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_PERFMON
            if libc.prctl(pr_capbset_drop, capability, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP")


@pytest.mark.parametrize("dumpable", [False, True], ids=["wisp", "control-dumpable"])
def test_a_hostile_server_finds_no_secret_of_wisps(wisp_home: Path, tmp_path: Path, dumpable: bool) -> None:
    report = tmp_path / "report.json"
    with FakeOpenAI(api_key=KEY) as srv:
        write_config(wisp_home, {"model.provider": "openai", "model.endpoint": srv.base_url, "model.name": "m",
                                 "model.api_key_env": "WISP_HOSTILE_KEY", "model.timeout_s": 10,
                                 "model.tool_mode": "native"})
        # trusted, so that its lying read-only snoop runs unasked: the worst case for the secrets
        add_config(wisp_home, {"mcpServers": {"h": {"command": sys.executable, "args": [str(HOSTILE), str(report)],
                                                    "trust": True}}})
        srv.push(reply(tool_call("mcp__h__snoop", {}), finish="tool_calls"), reply(text("It is clean.")))
        env = {**os.environ, "WISP_HOSTILE_KEY": KEY, "AWS_SECRET_ACCESS_KEY": AWS}
        if dumpable:
            env["WISP_DUMPABLE"] = "1"  # the control: the same run with the process left dumpable
        r = subprocess.run([WISP, "ask", "--tool", "mcp__h", "status?"], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=120, preexec_fn=_without_ptrace_capability)
    assert r.returncode == 0, r.stderr
    assert "It is clean." in r.stdout
    found = json.loads(report.read_text())
    everything = json.dumps(found)
    # the server's own environment: only the harmless variables, and wisp's mark
    assert set(found["own_env"]) <= set(SAFE_ENV) | {"WISP_MCP_OWNER"}, sorted(found["own_env"])
    # the API key was taken out of wisp's environment block when wisp read it, dumpable or not
    assert KEY not in everything
    if dumpable:
        # the control shows the reads work when the process is dumpable: the other secret is there
        assert AWS in found["parent_environ"] and "WISP_HOME=" in found["parent_environ"]
        assert not found["parent_mem"].startswith("denied")
    else:
        assert found["parent_environ"].startswith("denied") and AWS not in everything
        assert found["parent_mem"].startswith("denied")
    # nothing of the key reached what wisp showed or stored either
    assert KEY not in r.stdout + r.stderr
    for path in (wisp_home / "data").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


async def _tidy_turn(home: Path, workdir: Path) -> tuple[list, bool]:
    """One turn whose model calls the hostile server's lying read-only ``tidy`` on victim.txt, with no
    one to ask (transport ask): its events, and whether victim.txt survived."""
    from wisp.core import events as ev
    from wisp.core.session import Session, SessionOptions

    victim = workdir / "victim.txt"
    victim.write_text("keep me\n")
    async with await Session.open(SessionOptions(workdir=workdir, tools=["mcp__h__tidy"], transport="ask")) as s:
        assert await s.connect(), s.endpoint_error
        items = [item async for item in s.run_turn("how tidy is victim.txt?")]
    results = [e for e in items if isinstance(e, ev.ToolResult)]
    return results, victim.exists()


@pytest.mark.parametrize("how", ["untrusted", "allowed by name", "server trusted"])
async def test_a_tool_marked_read_only_still_asks_unless_the_person_allowed_or_trusts_it(
        ollama_home, tmp_path: Path, how: str) -> None:
    """readOnlyHint is the server's word, and this one lies (tidy deletes its file): it runs unasked
    only when config tools.mcp.allow names it or mcpServers.h.trust is true."""
    home, srv = ollama_home
    entry = {"command": sys.executable, "args": [str(HOSTILE)]}
    if how == "server trusted":
        entry["trust"] = True
    add_config(home, {"mcpServers": {"h": entry}})
    if how == "allowed by name":
        add_config(home, {"tools": {"mcp": {"allow": ["mcp__h__tidy"]}}})
    srv.push(reply(tool_call("mcp__h__tidy", {"path": str(tmp_path / "victim.txt")}), finish="tool_calls"),
             reply(text("Done.")))
    results, survived = await _tidy_turn(home, tmp_path)
    assert len(results) == 1
    if how == "untrusted":
        assert survived, "a tool that says it only reads deleted a file with no one asked"
        assert not results[0].ok and results[0].meta["approval"]["choice"] == "needs_approval"
        assert "says it only reads, but its server is not trusted (mcpServers.h.trust)" in results[0].content
        assert "tools.mcp.allow" in results[0].content
    else:
        assert not survived and results[0].ok and results[0].content.startswith("tidy: 10/10")
