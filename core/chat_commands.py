"""The slash commands of issue 16: conversations and models at hand; and ``/undo`` of the model's edits.

``/title``, ``/export``, ``/fork``, ``/search``, ``/retry``, ``/edit``,
``/copy``, ``/model``, ``/profile``, ``/new``, ``/clear``, ``/quit`` and
``/undo`` (the files of a turn's edits put back: :mod:`wisp.core.tools.edit_store`).
Each is listed in :data:`wisp.core.commands.COMMANDS` (so ``/help`` and F1
list them) and returns a :class:`~wisp.core.command_base.CommandResult`;
what only a front end can do (run a turn again, fill the input, copy to the
clipboard, open another conversation, quit) is named by its ``action``,
with what it needs in ``data``. No command here costs the model anything:
``/model`` asks the endpoint for its list of models, never for a reply.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .command_base import CommandResult
from .config import ConfigError
from .conversations import (
    ArchiveError,
    code_blocks,
    count_turns,
    export_format,
    export_path,
    export_target_problem,
    fork,
    gather,
    last_reply,
    retry_target,
    to_json,
    to_markdown,
    turns_phrase,
)
from .model.base import EndpointError
from .paths import atomic_write_private

__all__ = [
    "title_command", "export_command", "fork_command", "search_command", "retry_command", "edit_command",
    "copy_command", "model_command", "profile_command", "new_command", "clear_command", "quit_command",
    "undo_command", "UNDO_USAGE", "switch_model", "TITLE_MAX",
]

#: A title is cut to this many characters.
TITLE_MAX = 80


def _error(text: str) -> CommandResult:
    return CommandResult(text, error=True)


def _number(text: str, digits: int = 18) -> int | None:
    """``text`` as a whole number when it is 1 to ``digits`` ASCII digits
    (``²`` and other Unicode digits are not numbers here), else ``None``."""
    return int(text) if re.fullmatch(rf"[0-9]{{1,{digits}}}", text or "") else None


async def title_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/title`` shows the conversation's title; ``/title TEXT`` renames it
    (the first prompt gave it one)."""
    cid = session.conversation_id
    text = " ".join(rest.split())
    if not text:
        if cid is None:
            return CommandResult("This conversation has no title yet: its first prompt gives it one, "
                                 "or /title TEXT names it.")
        conv = await session.store.get_conversation(cid)
        return CommandResult(f"Conversation {cid} is titled: {conv.title or '(none)'}. /title TEXT renames it.",
                             data={"conversation": cid, "title": conv.title})
    title = text if len(text) <= TITLE_MAX else text[: TITLE_MAX - 1].rstrip() + "…"
    cid = await session.ensure_conversation()
    await session.store.set_conversation_title(cid, title)
    session.audit.write("conversation.titled", {"title": title}, conversation=cid)
    return CommandResult(f"Conversation {cid} is now titled: {title}", data={"conversation": cid, "title": title},
                         action="title")


async def export_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/export [md|json] [FILE]``: write the conversation to FILE (default
    ``wisp-conversation-ID.md`` in its working directory)."""
    cid = session.conversation_id
    if cid is None:
        return _error("Nothing to export yet: send a prompt first.")
    asked = None
    if words and words[0].lower() in ("md", "markdown", "json"):
        asked = "json" if words[0].lower() == "json" else "md"
        words = words[1:]
    if len(words) > 1:
        return _error("Usage: /export [md|json] [FILE]")
    try:
        named = Path(words[0]).expanduser() if words else None
    except RuntimeError:  # ~name of no user on this machine
        return _error(f"Cannot write {words[0]!r}: no user's home is named so. Name the file with a path: "
                      "/export FILE")
    fmt = export_format(asked, named)
    path = named if named is not None else export_path(cid, fmt, session.workdir)
    if not path.is_absolute():
        path = Path(session.workdir) / path
    if problem := export_target_problem(path):
        return _error(f"Cannot write {str(path)!r}: {problem}. Name another file: /export {fmt} FILE")
    data = await gather(session.store, session.audit, cid)
    text = to_json(data) if fmt == "json" else to_markdown(data)
    try:
        atomic_write_private(path, text.encode("utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name (found by the command fuzz)
        reason = getattr(exc, "strerror", None) or exc
        return _error(f"Cannot write {str(path)!r}: {reason}. Name another file: /export {fmt} FILE")
    what = "JSON" if fmt == "json" else "Markdown"
    return CommandResult(f"Exported conversation {cid} ({turns_phrase(*count_turns(data['turns']))}) as {what} "
                         f"to `{path}`.",
                         data={"path": str(path), "format": fmt, "conversation": cid})


async def fork_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/fork [TURN]``: a new conversation holding this one's turns up to
    TURN (all of them by default), with its facts and summary as they stood
    then; the front end opens it."""
    cid = session.conversation_id
    if cid is None:
        return _error("Nothing to fork yet: send a prompt first.")
    turn = None
    if words:
        turn = _number(words[0]) if len(words) == 1 else None
        if turn is None:
            return _error("Usage: /fork [TURN], such as /fork 3")
    try:
        new = await fork(session.store, session.audit, cid, turn)
    except ArchiveError as exc:
        return _error(f"{exc}.")
    at = f" up to turn {turn}" if turn is not None else ""
    held = turns_phrase(*count_turns(await session.store.turns(new, versions=True)))
    return CommandResult(f"Forked conversation {cid}{at} as conversation {new} ({held}), with its facts and summary "
                         f"as they stood then; `wisp --resume {new}` opens it again.",
                         data={"conversation": new, "from": cid, "turn": turn}, action="open")


def hit_label(kind: str, tool_name: str | None) -> str:
    """Who or what a search hit is, as the person reads it: ``you``,
    ``reply``, ``read_file call``, ``read_file output``."""
    if kind == "prompt":
        return "you"
    if kind == "reply":
        return "reply"
    return f"{tool_name or 'tool'} {'call' if kind == 'tool_call' else 'output'}"


async def search_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/search TEXT``: the entries of this conversation holding every word
    of TEXT (prompts, replies, tool calls and their arguments, tool
    outputs), newest first, by the same index and rules as the memory tool's
    search (:meth:`wisp.core.store.Store.search`): earlier versions of a
    turn a /retry or /edit replaced are found too, marked; the front end
    jumps to one."""
    text = rest.strip()
    if not text:
        return _error("Usage: /search TEXT (every conversation: wisp conversations search TEXT)")
    cid = session.conversation_id
    hits = [] if cid is None else await session.store.search(text, conversation_id=cid, marks=("**", "**"))
    if not hits:
        return CommandResult(f"Nothing in this conversation holds {text!r}.", data={"hits": []}, action="search")
    lines = [f"{len(hits)} {'hit' if len(hits) == 1 else 'hits'} for {text!r}:", ""]
    for h in hits:
        old = f", an earlier version (turn {h.superseded_by} asked it again)" if not h.current else ""
        lines.append(f"- turn {h.turn}{old} ({hit_label(h.kind, h.tool_name)}): {h.snippet}")
    return CommandResult("\n".join(lines), data={"hits": [h.to_dict() for h in hits], "text": text},
                         action="search")


async def retry_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/retry``: ask the last prompt again. The old reply stays, its turn
    marked superseded; the front end runs the new turn."""
    try:
        turn, prompt = await retry_target(session.store, session.conversation_id)
    except ArchiveError as exc:
        return _error(f"{exc}.")
    return CommandResult(f"Asking turn {turn} again; its reply stays as an earlier version.",
                         data={"turn": turn, "prompt": prompt}, action="retry")


async def edit_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/edit``: put the last prompt back in the input; sending it replaces
    that turn (which stays, marked superseded)."""
    try:
        turn, prompt = await retry_target(session.store, session.conversation_id)
    except ArchiveError as exc:
        return _error(f"{exc}.")
    return CommandResult(f"Turn {turn}'s prompt is back in the input: change it and send it to ask again in its "
                         "place (the old turn stays as an earlier version). Esc with the input empty keeps it.",
                         data={"turn": turn, "prompt": prompt}, action="edit")


async def copy_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/copy`` copies the last reply; ``/copy code [N]`` its code block N
    (the last one by default). The front end puts ``data["text"]`` on the
    clipboard."""
    found = await last_reply(session.store, session.conversation_id)
    if found is None:
        return _error("No reply to copy yet.")
    turn, reply = found
    if not words:
        return CommandResult(f"Copied the reply of turn {turn} ({len(reply):,} characters).",
                             data={"text": reply, "what": f"the reply of turn {turn}"}, action="copy")
    wanted = _number(words[1], 6) if len(words) == 2 else None
    if words[0] != "code" or len(words) > 2 or (len(words) == 2 and wanted is None):
        return _error("Usage: /copy (the last reply) or /copy code [N] (its code block N, the last by default)")
    blocks = code_blocks(reply)
    if not blocks:
        return _error(f"The reply of turn {turn} has no code block; /copy copies all of it.")
    n = wanted if wanted is not None else len(blocks)
    if not 1 <= n <= len(blocks):
        return _error(f"The reply of turn {turn} has {len(blocks)} code block{'s' if len(blocks) > 1 else ''}; "
                      f"/copy code 1 to {len(blocks)}.")
    lang, code = blocks[n - 1]
    what = f"code block {n} of {len(blocks)}" + (f" ({lang})" if lang else "") + f" of turn {turn}"
    return CommandResult(f"Copied {what}: {len(code.splitlines())} lines.", data={"text": code, "what": what},
                         action="copy")


async def switch_model(session: Any, name: str) -> CommandResult:
    """Switch the session's model to ``name`` from its next request (the
    link re-reads the window); the switch is an audit event
    (``model.switched``) and the conversation keeps the new name. Never
    raises for a bad name: the result says which models there are."""
    try:
        switch = await session.link.switch_model(name)
    except EndpointError as exc:
        return _error(f"{exc}.")
    cid = session.conversation_id
    session.audit.write("model.switched", {"from": switch.before, "to": switch.after, "window": switch.window,
                                           "reported_window": switch.reported, "endpoint": session.link.label},
                        conversation=cid)
    if cid is not None:
        await session.store.set_conversation_model(cid, switch.after)
    window = f" (window {switch.window:,} tokens)" if switch.window else ""
    if switch.before == switch.after:
        return CommandResult(f"The model is {switch.after} already{window}.", data={"model": switch.after},
                             action="model")
    return CommandResult(f"Model: {switch.before or 'none'} → {switch.after}, from the next request{window}.",
                         data={"from": switch.before, "model": switch.after, "window": switch.window},
                         action="model")


async def model_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/model`` lists the endpoint's models (the TUI opens a picker);
    ``/model NAME`` switches to one from the next request."""
    if words:
        return await switch_model(session, rest.strip())
    try:
        models = await session.link.list_models()
    except EndpointError as exc:
        return _error(f"{exc}.")
    current = session.link.model
    rows = [f"- {'●' if m == current else '○'} {m}" for m in models] or ["(none)"]
    return CommandResult(f"Models at {session.link.label} (● in use; /model NAME switches):\n\n" + "\n".join(rows),
                         data={"models": models, "current": current}, action="pick-model", title="models")


async def profile_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/profile`` lists config ``profiles``; ``/profile NAME`` uses one
    (``/profile off`` goes back to ``model.*``), reconnecting."""
    config = session.config
    profiles = config.profiles
    if not words:
        if not profiles:
            return CommandResult('No profiles yet. Add some to config.json under "profiles", such as '
                                 '`{"profiles": {"work": {"provider": "openai", "endpoint": "http://127.0.0.1:8000", '
                                 f'"model": "qwen3"}}}}}}` (in `{config.path}`).', data={"profiles": {}})
        rows = [f"- {'●' if name == config.profile else '○'} **{name}**: {p.describe()}"
                for name, p in sorted(profiles.items())]
        now = f"in use: {config.profile}" if config.profile else "none in use: model.* applies"
        return CommandResult(f"Profiles ({now}; /profile NAME uses one, /profile off leaves it):\n\n"
                             + "\n".join(rows), data={"profiles": {n: p.to_dict() for n, p in profiles.items()},
                                                      "current": config.profile})
    name = rest.strip()
    if name.lower() in ("off", "none"):
        config.use_profile(None)
        session.link.choose_model(None)
        session.audit.write("profile.used", {"profile": None}, conversation=session.conversation_id)
        return CommandResult("No profile: model.* applies again (reconnecting).", reconnect=True, action="profile",
                             data={"profile": None})
    try:
        profile = config.use_profile(name)
    except ConfigError as exc:
        return _error(str(exc))
    session.link.choose_model(None)  # the profile's model, not one picked before
    session.audit.write("profile.used", {"profile": name, **profile.to_dict()}, conversation=session.conversation_id)
    return CommandResult(f"Profile {name}: {profile.describe()} (reconnecting).", reconnect=True, action="profile",
                         data={"profile": name})


async def new_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/new``: the front end starts a new conversation (this one stays stored)."""
    return CommandResult("Starting a new conversation; this one stays stored (`wisp conversations`).",
                         action="new")


async def clear_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/clear``: the front end clears the screen; the record stays."""
    return CommandResult("Cleared the screen; the conversation and its record stay.", action="clear")


async def quit_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/quit``: the front end quits."""
    return CommandResult("Bye.", action="quit")


#: ``/undo``'s usage line (``/help`` lists it).
UNDO_USAGE = "/undo [N] | /undo list | /undo diff [N]"


async def undo_command(session: Any, words: list[str], rest: str) -> CommandResult:
    """``/undo`` puts back the files of the latest turn whose edits still
    stand, ``/undo N`` those of turn N: all of them or none, refused with
    the reason (a file changed since; a later turn edited it again) and how
    to see both versions. ``/undo list`` lists the conversation's edits;
    ``/undo diff [N]`` shows how each file of turn N differs now from what
    its edits left. The undo is recorded (an entry and an audit event), and
    the ``workdir`` fact says it at once: the model reads it with its next
    request."""
    from .tools.edit_store import UndoRefused

    cid = session.conversation_id
    edits = getattr(session, "edits", None)
    verb = words[0].lower() if words else ""
    if verb in ("list", "diff"):
        words = words[1:]
    turn = None
    if len(words) > 1 or (words and _number(words[0]) is None):
        return _error(f"Usage: {UNDO_USAGE}, such as /undo 3")
    if words:
        turn = _number(words[0])
    if cid is None or edits is None:
        return _error("Nothing to undo: the model has made no edit in this conversation.")
    if verb == "list":
        return await _undo_list(session, cid)
    try:
        if verb == "diff":
            turn, diffs = await edits.diff_since(cid, turn, session.workdir)
            parts = [f"Turn {turn}'s files, against what its edits left:"]
            for path, diff in diffs:
                parts.append(f"- `{path}`: unchanged since the edit (/undo {turn} puts it back)" if not diff
                             else f"- `{path}` has changed since:\n\n```diff\n{diff}\n```")
            return CommandResult("\n".join(parts), title="undo diff",
                                 data={"turn": turn, "files": [{"path": p, "diff": d} for p, d in diffs]})
        last = await session.store.turns(cid, limit=1)
        if last and last[-1].state == "open":  # its model may be editing: here, or in another wisp
            return _error(f"Turn {last[-1].number} is still running; /undo once it has ended (Esc stops it).")
        done = await edits.undo(cid, turn, session.workdir)
    except UndoRefused as exc:
        return _error(str(exc))
    context = getattr(session, "context", None)
    if context is not None:  # the workdir fact says it now, in the panel and the record, not at the next request
        last = await session.store.turns(cid, limit=1)
        await context.observe_workspace(cid, last[-1].number if last else None)
    return CommandResult(done.text(), action="undo",
                         data={"turn": done.turn, "files": done.files, "removed": done.removed, "edits": done.edits,
                               "entry": done.entry})


async def _undo_list(session: Any, cid: int) -> CommandResult:
    """``/undo list``: the conversation's edits by turn, newest last, each standing, undone or failed."""
    rows = await session.edits.edits(cid)
    if not rows:
        return CommandResult("The model has made no edit in this conversation.", data={"edits": []})
    lines = ["| turn | file | what | state |", "|---:|---|---|---|"]
    data = []
    for e in rows:
        what = "created" if e.before is None else "edited"
        state = ("undone" if e.undone_at else "failed: " + (e.error or "") if e.state == "failed"
                 else "standing")
        lines.append(f"| {e.turn if e.turn is not None else ''} | `{e.shown_path}` | {what} | {state} |")
        data.append({"turn": e.turn, "path": e.shown_path, "created": e.before is None, "state": state,
                     "edit": e.id, "call_entry": e.call_entry})
    return CommandResult("Edits in this conversation (/undo N puts back turn N's):\n\n" + "\n".join(lines),
                         title="edits", data={"edits": data})
