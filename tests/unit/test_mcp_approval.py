"""Approval of MCP tools that act (issue 15, "Approval"): the same choices and
audit events as run_command, matched by tool name, never by a command prefix."""

from __future__ import annotations

from pathlib import Path

from wisp.core.audit import AuditLog
from wisp.core.config import Config
from wisp.core.tools.approval import ApprovalRequest, Approvals, WorkspaceAllowList


def request(tmp_path: Path, tool: str = "mcp__git__commit") -> ApprovalRequest:
    return ApprovalRequest(tool=tool, command='git: commit {"message": "x"}', workdir=tmp_path, conversation_id=1,
                           turn=2, server="git", arguments={"message": "x"})


async def test_choices_match_by_name_and_are_audited(tmp_path: Path) -> None:
    cfg = Config(tmp_path / "config.json", {"tools.mcp.allow": ["mcp__notes"],
                                            "tools.run_command.allow": ["git"]})
    audit = AuditLog(tmp_path / "audit")
    allow = WorkspaceAllowList(tmp_path / "approvals.json")
    answers = iter([("deny", None), ("always", None), ("once", None)])
    asked: list[ApprovalRequest] = []

    async def ask(req: ApprovalRequest):
        asked.append(req)
        return next(answers)

    approvals = Approvals(cfg, audit, allow, ask=ask, transport="tui")
    # a run_command prefix ("git") does not allow an MCP tool whose call begins with "git"
    denied = await approvals(request(tmp_path))
    assert (denied.allowed, denied.choice) == (False, "deny") and len(asked) == 1
    always = await approvals(request(tmp_path))
    assert (always.allowed, always.choice, always.prefix) == (True, "always", "mcp__git__commit")
    assert allow.tools(tmp_path) == ["mcp__git__commit"] and allow.prefixes(tmp_path) == []
    again = await approvals(request(tmp_path))
    assert (again.choice, again.source) == ("allow_list", "workspace") and len(asked) == 2
    other = await approvals(request(tmp_path, "mcp__git__push"))  # "always" was for one tool only
    assert other.choice == "once" and len(asked) == 3
    whole = await approvals(ApprovalRequest(tool="mcp__notes__add", command="notes: add {}", workdir=tmp_path,
                                            server="notes", arguments={}))
    assert (whole.choice, whole.source, whole.prefix) == ("allow_list", "config", "mcp__notes")
    events = [e["payload"] for e in audit.iter_events() if e["kind"] == "approval"]
    assert [(e["server"], e["choice"]) for e in events] == [
        ("git", "deny"), ("git", "always"), ("git", "allow_list"), ("git", "once"), ("notes", "allow_list")]
    assert events[0]["arguments"] == {"message": "x"} and events[0]["tool"] == "mcp__git__commit"


async def test_no_one_to_ask_only_the_config_list_counts(tmp_path: Path) -> None:
    allow = WorkspaceAllowList(tmp_path / "approvals.json")
    allow.add_tool(tmp_path, "mcp__git__commit")
    approvals = Approvals(Config(tmp_path / "config.json"), None, allow, ask=None, transport="mcp")
    decision = await approvals(request(tmp_path))
    assert (decision.allowed, decision.choice) == (False, "needs_approval")  # the TUI's "always" is not for ask/mcp
