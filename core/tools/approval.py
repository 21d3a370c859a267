"""Approval of commands: nothing runs without the person's say.

Rules (issue "Tools that act", "Approval"):

- Before ``run_command`` runs anything, it asks the conversation's
  :class:`Approvals` (``ToolContext.approve``). With no ``approve`` at all
  it runs nothing.
- A command runs without asking when it begins with a prefix that config
  ``tools.run_command.allow`` lists, or (in the TUI only) a prefix the person
  chose "always allow" for in this workspace (the conversation's working
  directory), kept in ``<WISP_HOME>/approvals.json`` (mode 0600).
- Otherwise the TUI asks the person (``Approvals.ask``): allow once, always
  allow commands that begin with a prefix in this workspace, or deny.
  ``wisp ask`` has no one to ask: the command does not run and the model is
  told it needs approval.
- Every decision is written to the audit log as an ``approval`` audit event
  with the command, the directory, the choice, who made it (``person``,
  ``config`` or ``workspace``) and the allow lists in force.
- An MCP server's tool that acts (issue 15, "MCP both ways", "Approval") is
  asked about the same way, with the same choices and audit events: its
  request names the ``server`` and the ``arguments``. It runs without asking
  when config ``tools.mcp.allow`` names it (``mcp__git__commit``) or its
  server (``mcp__git``), or (in the TUI only) when the person chose "always"
  for that tool in this workspace, kept in the same ``approvals.json``.

A prefix matches whole words (``git status`` matches ``git status -s``, not
``git statusx``), and only a *simple* command, as :mod:`wisp.core.tools.shell`
decides with ``/bin/sh``'s own grammar: one program with plain words. A
command that chains, pipes, redirects, expands or comments (``;``, ``&&``,
``|``, ``>``, ``$X``, ``$(…)``, backquotes, ``#``, ``*``, ``~``, a newline,
a character beyond ASCII …) is always asked about, since ``pytest; rm -rf ~``
begins with ``pytest`` too (issue "Nothing runs, leaks, hangs or is lost
that shouldn't be"). Beware that a prefix such as ``sh``, ``env``, ``eval``,
``xargs`` or ``find`` allows whatever its words say to run.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable

from ..paths import atomic_write_private, wisp_home
from .shell import NotSimple, is_simple_command, simple_command_words, simple_words

__all__ = ["ApprovalRequest", "Approval", "Approvals", "WorkspaceAllowList", "suggest_prefix",
           "prefix_matches", "is_simple_command", "simple_words", "NotSimple", "CHOICES"]

#: The choices a decision can record. ``once``, ``always`` and ``deny`` are
#: the person's; ``allow_list`` is a standing allow (config or workspace);
#: ``needs_approval`` is no one to ask; ``stopped`` is a turn stopped while asking.
CHOICES = ("once", "always", "deny", "allow_list", "needs_approval", "stopped")

#: Programs whose second word names what they do (``git status``), so the
#: suggested prefix keeps it.
_SUBCOMMAND_PROGRAMS = {
    "git", "cargo", "go", "npm", "pnpm", "yarn", "npx", "uv", "pip", "pip3", "docker", "podman",
    "kubectl", "swift", "make", "poetry", "hatch", "tox", "nox", "bun", "deno", "dotnet", "gradle",
    "mvn", "brew", "apt", "apt-get", "systemctl", "gh", "hg", "svn", "rustup", "conda", "mix",
}


@dataclass(frozen=True)
class ApprovalRequest:
    """One command to approve: ``tool`` (``run_command``), the ``command``
    line, the ``workdir`` it would run in, and the conversation and turn.
    For an MCP tool, ``tool`` is its wisp name (``mcp__git__commit``),
    ``server`` its server, ``arguments`` what the model gave it, and
    ``command`` a one-line rendering of the call for lists and logs."""

    tool: str
    command: str
    workdir: Path
    conversation_id: int | None = None
    turn: int | None = None
    server: str | None = None
    arguments: dict[str, Any] | None = None

    @property
    def is_mcp(self) -> bool:
        """True for an MCP server's tool (matched by name, not by prefix)."""
        return self.server is not None

    @property
    def suggested_prefix(self) -> str:
        """The prefix an "always allow" would use (see :func:`suggest_prefix`);
        for an MCP tool, its name."""
        return self.tool if self.is_mcp else suggest_prefix(self.command)


@dataclass(frozen=True)
class Approval:
    """A decision. ``allowed``; ``choice`` (one of :data:`CHOICES`);
    ``source``: ``person``, ``config``, ``workspace`` or ``none``;
    ``prefix``: the prefix that matched or was allowed, if any."""

    allowed: bool
    choice: str
    source: str
    prefix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as stored in a tool result's ``meta["approval"]``."""
        return {"allowed": self.allowed, "choice": self.choice, "source": self.source,
                "prefix": self.prefix}


#: What the TUI's ask function returns: ``("once", None)``, ``("always",
#: prefix)`` or ``("deny", None)``.
AskReply = tuple[str, str | None]
AskFunction = Callable[[ApprovalRequest], Awaitable[AskReply]]


def suggest_prefix(command: str) -> str:
    """The prefix an "always allow" suggests for the simple command
    ``command``: its program, plus the subcommand for programs that have them
    (``git status -s`` → ``git status``; ``python -m pytest -q`` → ``python -m
    pytest``; ``pytest -q tests`` → ``pytest``). Empty when ``command`` is
    not simple (no prefix can allow it; see :mod:`wisp.core.tools.shell`)."""
    words = simple_command_words(command)
    if not words:
        return ""
    program = words[0]
    base = program.rsplit("/", 1)[-1]
    if re.match(r"^python(\d(\.\d+)?)?$", base) and len(words) >= 3 and words[1] == "-m":
        return shlex.join(words[:3])
    if base in _SUBCOMMAND_PROGRAMS and len(words) >= 2 and not words[1].startswith("-") \
            and "/" not in words[1] and "=" not in words[1]:
        return shlex.join(words[:2])
    return shlex.join(words[:1])


def prefix_matches(command: str, prefix: str) -> bool:
    """True when ``command`` is simple and its words begin with the words of
    ``prefix`` (whole words: ``make`` matches ``make test``, not ``makefoo``).
    Both are read by :func:`~wisp.core.tools.shell.simple_words`, the one
    check that agrees with ``/bin/sh``; a command that is not simple never
    matches, and neither does a prefix that is not."""
    want = simple_command_words(prefix)
    have = simple_command_words(command)
    return bool(want) and have is not None and have[:len(want)] == want


class WorkspaceAllowList:
    """The prefixes the person chose "always allow" for, per workspace.

    Stored in ``path`` (default ``<WISP_HOME>/approvals.json``, mode 0600)
    as ``{"version": 1, "workspaces": {"/abs/dir": [{"prefix": "pytest",
    "added": ISO time, "conversation": 3}]}}``. The file is read again on
    every look-up, so two wisp windows share it. A malformed file is not
    overwritten: :meth:`add` raises ``ValueError`` saying so and nothing is
    allowed from it.
    """

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else wisp_home() / "approvals.json"

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"version": 1, "workspaces": {}}
        except (OSError, ValueError) as exc:
            raise ValueError(f"{self.path}: cannot read the allow list ({exc}); fix or remove the file") \
                from None
        if not isinstance(data, dict) or not isinstance(data.get("workspaces"), dict):
            raise ValueError(f"{self.path}: not a wisp allow list; fix or remove the file")
        return data

    def prefixes(self, workspace: Path) -> list[str]:
        """The prefixes allowed in ``workspace`` (empty when the file is missing or unreadable)."""
        try:
            data = self._read()
        except ValueError:
            return []
        rows = data["workspaces"].get(str(Path(workspace).resolve()), [])
        return [r["prefix"] for r in rows if isinstance(r, dict) and isinstance(r.get("prefix"), str)]

    def tools(self, workspace: Path) -> list[str]:
        """The MCP tools always allowed in ``workspace`` (rows ``{"tool": name}``
        beside the prefixes; empty when the file is missing or unreadable)."""
        try:
            data = self._read()
        except ValueError:
            return []
        rows = data["workspaces"].get(str(Path(workspace).resolve()), [])
        return [r["tool"] for r in rows if isinstance(r, dict) and isinstance(r.get("tool"), str)]

    def add_tool(self, workspace: Path, tool: str, conversation: int | None = None) -> None:
        """Always allow the MCP tool ``tool`` in ``workspace`` from now on.
        Raises ``ValueError`` for a malformed file; ``OSError`` when it cannot write."""
        data = self._read()
        rows = data["workspaces"].setdefault(str(Path(workspace).resolve()), [])
        if any(isinstance(r, dict) and r.get("tool") == tool for r in rows):
            return
        rows.append({"tool": tool, "added": _now(), "conversation": conversation})
        atomic_write_private(self.path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode())

    def add(self, workspace: Path, prefix: str, conversation: int | None = None) -> None:
        """Allow ``prefix`` in ``workspace`` from now on. Raises ``ValueError``
        for an empty prefix or a malformed file; ``OSError`` when it cannot write."""
        prefix = " ".join(prefix.split())
        if not prefix:
            raise ValueError("the prefix is empty")
        data = self._read()
        rows = data["workspaces"].setdefault(str(Path(workspace).resolve()), [])
        if any(isinstance(r, dict) and r.get("prefix") == prefix for r in rows):
            return
        rows.append({"prefix": prefix, "added": _now(), "conversation": conversation})
        atomic_write_private(self.path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode())

    def remove(self, workspace: Path, prefix: str) -> bool:
        """Stop allowing ``prefix`` in ``workspace``; True if it was there."""
        data = self._read()
        key = str(Path(workspace).resolve())
        rows = data["workspaces"].get(key, [])
        kept = [r for r in rows if not (isinstance(r, dict) and r.get("prefix") == prefix)]
        if len(kept) == len(rows):
            return False
        data["workspaces"][key] = kept
        atomic_write_private(self.path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode())
        return True


@dataclass
class Approvals:
    """A session's approval policy; call it with an :class:`ApprovalRequest`.

    ``config`` (a :class:`wisp.core.config.Config`) gives
    ``tools.run_command.allow``; ``audit`` (an :class:`wisp.core.audit.AuditLog`
    or None) records each decision; ``workspace`` is the per-workspace allow
    list; ``ask`` is the TUI's question to the person (None in ``wisp ask``,
    where only the config allow list counts); ``transport`` is ``tui`` or
    ``ask``, recorded in the audit event.
    """

    config: Any
    audit: Any = None
    workspace: WorkspaceAllowList = field(default_factory=WorkspaceAllowList)
    ask: AskFunction | None = None
    transport: str = "tui"

    def config_allow(self, key: str = "tools.run_command.allow") -> list[str]:
        """Config ``key`` (``tools.run_command.allow``, or ``tools.mcp.allow``
        for MCP tools); empty when unset or unreadable."""
        try:
            return [p for p in (self.config.get(key) or []) if p.strip()]
        except Exception:
            return []

    async def __call__(self, request: ApprovalRequest) -> Approval:
        """Decide whether ``request`` may run; never raises except
        ``CancelledError`` (which is audited as ``stopped`` first)."""
        if request.is_mcp:
            config_list = self.config_allow("tools.mcp.allow")
            workspace_list = self.workspace.tools(request.workdir) if self.ask is not None else []
            matches: Callable[[str], bool] = lambda allowed: allowed in (request.tool, f"mcp__{request.server}")
        else:
            config_list = self.config_allow()
            workspace_list = self.workspace.prefixes(request.workdir) if self.ask is not None else []
            matches = lambda prefix: prefix_matches(request.command, prefix)  # noqa: E731
        lists = {"config": config_list, "workspace": workspace_list}
        decision: Approval | None = None
        for source, prefixes in (("config", config_list), ("workspace", workspace_list)):
            hit = next((p for p in prefixes if matches(p)), None)
            if hit is not None:
                decision = Approval(True, "allow_list", source, hit)
                break
        error = None
        if decision is None and self.ask is None:
            decision = Approval(False, "needs_approval", "none")
        if decision is None:
            try:
                choice, prefix = await self.ask(request)  # type: ignore[misc]
            except asyncio.CancelledError:
                self._audit(request, Approval(False, "stopped", "person"), lists)
                raise
            except Exception as exc:  # the question itself failed: deny, say why
                choice, prefix, error = "deny", None, f"asking failed: {exc}"
            if choice == "once":
                decision = Approval(True, "once", "person")
            elif choice == "always" and request.is_mcp:  # always this tool, in this workspace
                try:
                    self.workspace.add_tool(request.workdir, request.tool, request.conversation_id)
                except (OSError, ValueError) as exc:
                    error = f"allowed once; the choice was not saved: {exc}"
                decision = Approval(True, "always", "person", request.tool)
            elif choice == "always" and prefix and prefix_matches(request.command, prefix):
                try:
                    self.workspace.add(request.workdir, prefix, request.conversation_id)
                except (OSError, ValueError) as exc:
                    error = f"allowed once; the prefix was not saved: {exc}"
                decision = Approval(True, "always", "person", " ".join(prefix.split()))
            elif choice == "always":  # a prefix that does not fit the command: it runs this once only
                error = f"the prefix {prefix!r} does not match the command; allowed once, nothing saved"
                decision = Approval(True, "once", "person")
            else:
                decision = Approval(False, "deny", "person")
        self._audit(request, decision, lists, error)
        return decision

    def _audit(self, request: ApprovalRequest, decision: Approval, lists: dict[str, list[str]],
               error: str | None = None) -> None:
        if self.audit is None:
            return
        payload = {"tool": request.tool, "command": request.command, "workdir": str(request.workdir),
                   **decision.to_dict(), "allow_list": lists, "transport": self.transport}
        if request.is_mcp:
            payload["server"] = request.server
            payload["arguments"] = request.arguments
        if error:
            payload["error"] = error
        self.audit.write("approval", payload, conversation=request.conversation_id, turn=request.turn)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
