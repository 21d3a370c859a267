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
- An edit (``edit_file``) is asked about with its change: the request
  carries the file's path, the unified diff and the lines added and
  removed, which the TUI's modal shows. Nothing allows an edit by default.
  It is made without asking when config ``tools.edit_file.allow`` is on or
  the session was opened with ``--allow-edits`` (``wisp ask``: there is no
  one to ask there), or (in the TUI only) when the person chose to allow
  edits to that file for this conversation: that choice is kept in memory
  for the session, never saved, since a file's next change is another
  change. Otherwise the TUI asks (allow once, allow this file for this
  conversation, deny) and ``wisp ask`` does not edit.
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
that shouldn't be").

An allow-list entry vouches only for what its words say: a command under an
allowed prefix whose options run another program, write or pipe to a pager
still asks (:func:`wisp.core.tools.command_rules.needs_approval`, one table
per program), and so does a git command in a repository whose config names
an external diff. "Always allow" never offers, nor saves, a prefix for an
interpreter, a shell or a wrapper (:func:`wisp.core.tools.command_rules.standing_refusal`).

Where commands have no sandbox (:func:`wisp.core.tools.sandbox.probe`), no
allow list is used: every command is asked about (and ``wisp ask`` runs none).
The question says so: the request handed to ``ask`` carries
:func:`wisp.core.tools.sandbox.approval_notice` as its ``notice``, which the
TUI's modal shows (``wisp ask`` prints the same line once).
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Awaitable, Callable

from ..paths import atomic_write_private, wisp_home
from . import command_rules
from .shell import NotSimple, is_simple_command, simple_command_words, simple_words
from ..clock import utc_now

__all__ = ["ApprovalRequest", "Approval", "Approvals", "WorkspaceAllowList", "suggest_prefix",
           "prefix_matches", "is_simple_command", "simple_words", "NotSimple", "CHOICES"]

#: The choices a decision can record. ``once``, ``always`` and ``deny`` are
#: the person's; ``allow_list`` is a standing allow (config, workspace, the
#: ``--allow-edits`` flag, or an edit's file allowed for the conversation);
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
    ``command`` a one-line rendering of the call for lists and logs.
    ``notice`` is a line the question shows with the command, or ``None``:
    that commands have no sandbox here (set by :class:`Approvals`).
    For an edit (``edit_file``), ``path`` is the file relative to
    ``workdir``, ``diff`` the unified diff of the change, ``added`` and
    ``removed`` its lines, ``new_file`` true when it creates the file, and
    ``command`` a one-line rendering (``edit a.py (+2 -1)``)."""

    tool: str
    command: str
    workdir: Path
    conversation_id: int | None = None
    turn: int | None = None
    server: str | None = None
    arguments: dict[str, Any] | None = None
    notice: str | None = None
    path: str | None = None
    diff: str | None = None
    added: int = 0
    removed: int = 0
    new_file: bool = False

    @property
    def is_mcp(self) -> bool:
        """True for an MCP server's tool (matched by name, not by prefix)."""
        return self.server is not None

    @property
    def is_edit(self) -> bool:
        """True for a file edit (``edit_file``), asked about with its diff."""
        return self.tool == "edit_file" and self.path is not None

    @property
    def suggested_prefix(self) -> str:
        """The prefix an "always allow" would use (see :func:`suggest_prefix`);
        for an MCP tool, its name; ``""`` (no "always" is offered) for a
        command asked about because there is no sandbox, since no allow list
        is used then and a saved prefix would do nothing."""
        if self.is_mcp:
            return self.tool
        return "" if self.notice else suggest_prefix(self.command)


@dataclass(frozen=True)
class Approval:
    """A decision. ``allowed``; ``choice`` (one of :data:`CHOICES`);
    ``source``: ``person``, ``config``, ``workspace`` or ``none``;
    ``prefix``: the prefix that matched or was allowed, if any."""

    allowed: bool
    choice: str
    source: str
    prefix: str | None = None
    #: Why an allow-list entry that matched did not vouch for the command
    #: (its options run, write or pipe; or there is no sandbox), if so.
    reason: str | None = None

    @property
    def read_only(self) -> bool:
        """True when the command runs on the allow list's word alone: it sees the
        file system read-only, its working directory too. A command the person
        approved may write its working directory."""
        return self.choice == "allow_list"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, as stored in a tool result's ``meta["approval"]``."""
        out = {"allowed": self.allowed, "choice": self.choice, "source": self.source,
               "prefix": self.prefix}
        if self.reason:
            out["reason"] = self.reason
        return out


async def ask_approver(ctx: Any, request: "ApprovalRequest", meta: dict[str, Any], *, nobody: str,
                       stopped: str) -> "Approval | str":
    """Ask ``ctx.approve`` (a :class:`~wisp.core.tools.base.ToolContext`'s) about
    ``request``: the one way a tool that acts asks. The decision goes into
    ``meta["approval"]``. Returns the :class:`Approval`, or, when nothing can
    be allowed, the line the tool's result gives: ``nobody`` when there is no
    one to ask (``wisp ask``, a test calling the tool directly), ``stopped``
    when the turn was stopped while the person was being asked (``meta``
    then says ``stopped``)."""
    approve = getattr(ctx, "approve", None)
    if approve is None:
        meta["approval"] = {"allowed": False, "choice": "needs_approval", "source": "none"}
        return nobody
    try:
        decision = await approve(request)
    except asyncio.CancelledError:
        meta.update(stopped=True, approval={"allowed": False, "choice": "stopped", "source": "person"})
        return stopped
    meta["approval"] = decision.to_dict()
    return decision


#: What the TUI's ask function returns: ``("once", None)``, ``("always",
#: prefix)`` or ``("deny", None)``.
AskReply = tuple[str, str | None]
AskFunction = Callable[[ApprovalRequest], Awaitable[AskReply]]


def suggest_prefix(command: str) -> str:
    """The prefix an "always allow" suggests for the simple command
    ``command``: its program, plus the subcommand for programs that have them
    (``git status -s`` → ``git status``; ``python -m pytest -q`` → ``python -m
    pytest``; ``pytest -q tests`` → ``pytest``). Empty when ``command`` is
    not simple (no prefix can allow it; see :mod:`wisp.core.tools.shell`), and
    when no standing prefix may hold it: an interpreter, shell or wrapper
    (``python3 -c …``, ``sh``, ``env``, ``xargs``), ``git`` or ``find`` alone, a
    program that always asks (``rm``, ``vim``), or a command whose own options
    would ask under the prefix (:func:`wisp.core.tools.command_rules.offered_prefix`)."""
    words = simple_command_words(command)
    if not words:
        return ""
    program = words[0]
    base = program.rsplit("/", 1)[-1]
    if re.match(r"^python(\d(\.\d+)?)?$", base) and len(words) >= 3 and words[1] == "-m":
        suggested = words[:3]
    elif base in _SUBCOMMAND_PROGRAMS and len(words) >= 2 and not words[1].startswith("-") \
            and "/" not in words[1] and "=" not in words[1]:
        suggested = words[:2]
    else:
        suggested = words[:1]
    return shlex.join(command_rules.offered_prefix(words, suggested))


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
    ``ask``, recorded in the audit event; ``allow_edits`` is ``wisp ask
    --allow-edits`` (edits are made without asking).
    """

    config: Any
    audit: Any = None
    workspace: WorkspaceAllowList = field(default_factory=WorkspaceAllowList)
    ask: AskFunction | None = None
    transport: str = "tui"
    allow_edits: bool = False
    #: The files the person allowed edits to for a conversation: ``(conversation, workdir, path)``.
    edit_grants: set[tuple[int | None, str, str]] = field(default_factory=set)

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
        if request.is_edit:
            return await self._decide_edit(request)
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
        reason: str | None = None
        if not request.is_mcp and not self.sandboxed():
            from . import sandbox

            request = replace(request, notice=sandbox.approval_notice())  # the question says so
            if any(matches(p) for p in (*config_list, *workspace_list)):
                reason = "commands have no sandbox here, so no allow list is used"
        else:
            for source, prefixes in (("config", config_list), ("workspace", workspace_list)):
                for hit in (p for p in prefixes if matches(p)):
                    why = None if request.is_mcp else self._vouches(request, hit, config_list + workspace_list)
                    if why is None:
                        decision = Approval(True, "allow_list", source, hit)
                        break
                    reason = reason or why
                if decision is not None:
                    break
        error = None
        if decision is None and self.ask is None:
            decision = Approval(False, "needs_approval", "none", reason=reason)
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
            elif choice == "always" and prefix and prefix_matches(request.command, prefix) \
                    and (refused := self._refuse_standing(request, prefix)):
                error = f"allowed once; the prefix {prefix!r} was not saved: {refused}"
                decision = Approval(True, "once", "person")
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
        if reason and decision.reason is None and decision.choice != "allow_list":
            decision = Approval(decision.allowed, decision.choice, decision.source, decision.prefix, reason)
        self._audit(request, decision, lists, error)
        return decision

    def edit_allowed_by(self) -> str | None:
        """What allows every edit without asking: ``flag`` (``--allow-edits``),
        ``config`` (``tools.edit_file.allow``), or ``None``."""
        if self.allow_edits:
            return "flag"
        try:
            return "config" if self.config is not None and self.config.get("tools.edit_file.allow") else None
        except Exception:
            return None

    async def _decide_edit(self, request: ApprovalRequest) -> Approval:
        """The decision on an edit (see the module doc); audited like a command's."""
        grant = (request.conversation_id, str(request.workdir), request.path or "")
        standing = self.edit_allowed_by()
        lists = {"edits": [standing] if standing else [],
                 "files": sorted(p for c, w, p in self.edit_grants if (c, w) == grant[:2])}
        error = None
        if standing is not None:
            decision = Approval(True, "allow_list", standing, request.path)
        elif self.ask is not None and grant in self.edit_grants:
            decision = Approval(True, "allow_list", "conversation", request.path)
        elif self.ask is None:
            decision = Approval(False, "needs_approval", "none")
        else:
            try:
                choice, _ = await self.ask(request)
            except asyncio.CancelledError:
                self._audit(request, Approval(False, "stopped", "person"), lists)
                raise
            except Exception as exc:  # the question itself failed: deny, say why
                choice, error = "deny", f"asking failed: {exc}"
            if choice == "once":
                decision = Approval(True, "once", "person")
            elif choice == "always":  # this file, for the rest of this conversation
                self.edit_grants.add(grant)
                decision = Approval(True, "always", "person", request.path)
            else:
                decision = Approval(False, "deny", "person")
        self._audit(request, decision, lists, error)
        return decision

    def sandboxed(self) -> bool:
        """True when commands run in the sandbox (:func:`wisp.core.tools.sandbox.probe`).
        Without it no allow list is used; the TUI's question and ``wisp ask``'s
        line say so (the request's ``notice``), and elsewhere (``wisp mcp
        serve``) the notice goes to standard error once."""
        from . import sandbox

        if sandbox.probe().available:
            return True
        if self.transport not in ("tui", "ask"):
            sandbox.notice_once()
        return False

    @staticmethod
    def _vouches(request: ApprovalRequest, hit: str, prefixes: list[str]) -> str | None:
        """Why the allow-list entry ``hit`` does not vouch for ``request``'s
        command (:func:`~wisp.core.tools.command_rules.needs_approval`; for git,
        also its repository's config), or None when it does."""
        words = simple_command_words(request.command) or []
        entries = [w for w in (simple_command_words(p) for p in prefixes) if w]

        def allowed(inner: list[str]) -> list[str] | None:
            return max((e for e in entries if inner[:len(e)] == e), key=len, default=None)

        why = command_rules.needs_approval(words, simple_command_words(hit) or [], allowed)
        if why is None and "git" in (command_rules.program_name(w) for w in words[:3]):
            names = command_rules.repository_config_names(str(request.workdir))
            why = command_rules.git_repository_asks(names)
        return why

    @staticmethod
    def _refuse_standing(request: ApprovalRequest, prefix: str) -> str | None:
        """Why ``prefix`` may not be saved for "always" (an interpreter, shell
        or wrapper; or a prefix under which this very command would still ask)."""
        words = simple_command_words(prefix) or []
        why = command_rules.standing_refusal(words)
        if why is None:
            why = command_rules.needs_approval(simple_command_words(request.command) or [], words)
        return why

    def _audit(self, request: ApprovalRequest, decision: Approval, lists: dict[str, list[str]],
               error: str | None = None) -> None:
        if self.audit is None:
            return
        payload = {"tool": request.tool, "command": request.command, "workdir": str(request.workdir),
                   **decision.to_dict(), "allow_list": lists, "transport": self.transport}
        if request.is_mcp:
            payload["server"] = request.server
            payload["arguments"] = request.arguments
        if request.is_edit:
            payload.update(path=request.path, added=request.added, removed=request.removed,
                           new_file=request.new_file)
        if request.notice:  # asked without a sandbox
            payload["sandbox"] = "none"
        if error:
            payload["error"] = error
        self.audit.write("approval", payload, conversation=request.conversation_id, turn=request.turn)


def _now() -> str:
    return utc_now("seconds")
