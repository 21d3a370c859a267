"""Capture: every exchange of a conversation is saved for episodic memory.

Rules (issue "Episodic memory across conversations", "Capture"; the reference
``enso-episodic-memory.txt``, "How it works" and "What gets captured"):

- An exchange is the person's request (the prompt as typed) and the model's
  readable final reply (the text of the turn's last step). Tool calls and
  results, reasoning and injected instructions are not captured; neither
  are slash commands, which never become turns.
- It keeps its origin: the workspace (config ``memory.workspace``, else the
  working directory's project: the git top-level's name, else the
  directory's name), the transport (``tui``, ``ask``, ``mcp``: the session's
  ``options.transport``), the channel (the conversation id, unless the
  transport gives one), the thread (``""`` when the transport has none),
  the sender (the transport's, else the local user), the model and endpoint
  that answered, the outcome, and when the request arrived and when
  processing finished.
- Outcomes (:data:`OUTCOMES`): a turn ``done`` or ``cut`` is ``completed``
  (a cut one notes it), ``error`` is ``failed`` except an endpoint timeout,
  which is ``timed out``; ``stopped`` is ``stopped``. A turn interrupted by
  a crash or a restart is recorded as ``stopped``: the exchange is written
  as pending when the turn's first request goes out, and a pending exchange
  whose turn was recovered (:meth:`wisp.core.store.Store.recover_open_turns`)
  becomes ``stopped`` (:func:`finalize_pending`).
- Request and reply are each capped at :data:`MAX_TEXT_BYTES` (64 KiB) of
  UTF-8, with the truncation marked in the text and flagged in its row.
- ``memory.enabled`` false stops capture, read from the config file at each
  turn so that a change applies from the next turn without a restart.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..store import RECOVERED_ERROR
from .dates import parse_utc, utc_text
from ..clock import utc_now

__all__ = [
    "MAX_TEXT_BYTES", "OUTCOMES", "Exchange", "cap_text", "outcome_for", "project_name",
    "workspace_for", "memory_enabled", "local_sender", "save_exchange", "finalize_pending",
    "Capture", "Origin",
]

#: Cap of a stored request or reply, bytes of UTF-8 (the reference: 64 KiB).
MAX_TEXT_BYTES = 64 * 1024
#: The outcomes an exchange can have (issue, "Capture").
OUTCOMES = ("completed", "failed", "timed out", "stopped")
#: A pending exchange whose turn ended this long ago without its hook
#: running (the process died in between) is finalized from the turn.
PENDING_GRACE = timedelta(minutes=10)

_MARK = "\n[… truncated by wisp: {kept} of {total} bytes kept]"


@dataclass
class Exchange:
    """One exchange to save (see the module docstring for each field).

    Times are UTC ISO 8601 text; ``outcome`` is one of :data:`OUTCOMES`, or
    ``None`` for a pending exchange whose turn still runs.
    """

    workspace: str
    transport: str
    channel: str
    request: str
    requested_at: str
    reply: str = ""
    thread: str = ""
    sender: str = ""
    conversation_id: int | None = None
    turn_id: int | None = None
    turn_number: int | None = None
    model: str | None = None
    endpoint: str | None = None
    outcome: str | None = None
    error: str | None = None
    finished_at: str | None = None


def _now() -> str:
    return utc_now()


def cap_text(text: str, limit: int = MAX_TEXT_BYTES) -> tuple[str, int, bool]:
    """``(stored, original_bytes, truncated)``: ``text`` cut to at most
    ``limit`` bytes of UTF-8 *including* the truncation mark, on a character
    boundary, when it is longer."""
    text = text or ""
    data = text.encode("utf-8", "surrogatepass")
    total = len(data)
    if total <= limit:
        return text.encode("utf-8", "replace").decode("utf-8") if _has_surrogates(text) else text, total, False
    room = limit - len(_MARK.format(kept=limit, total=total).encode("utf-8"))
    kept = data[:max(0, room)].decode("utf-8", "ignore")
    kept_bytes = len(kept.encode("utf-8"))
    return kept + _MARK.format(kept=kept_bytes, total=total), total, True


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def outcome_for(state: str, error_kind: str | None = None) -> str:
    """The exchange outcome of a turn's end state (see the module docstring)."""
    if state in ("done", "cut"):
        return "completed"
    if state == "stopped":
        return "stopped"
    if error_kind == "timeout":
        return "timed out"
    return "failed"


def project_name(workdir: str | os.PathLike[str]) -> str:
    """The project of a working directory: the name of the nearest directory
    upwards holding ``.git`` (a repository or a worktree), else the
    directory's own name (``"/"`` for the root)."""
    p = Path(workdir).expanduser()
    try:
        p = p.resolve()
    except OSError:
        pass
    for d in (p, *p.parents):
        if (d / ".git").exists():
            return d.name or str(d)
    return p.name or str(p)


def workspace_for(workdir: str | os.PathLike[str], config: Any = None) -> str:
    """The workspace exchanges from ``workdir`` are captured under: config
    ``memory.workspace`` when set (a path there counts as its last part),
    else :func:`project_name`."""
    name = config.get("memory.workspace") if config is not None else None
    if name:
        name = str(name).strip()
        if "/" in name or name.startswith("~") or os.sep in name:
            return Path(name).expanduser().name or name
        return name
    return project_name(workdir)


def memory_enabled(config: Any) -> bool:
    """``memory.enabled``, read from the config file as it is now (so a change
    made by another wisp applies without a restart); the in-memory value when
    there is no file or it cannot be read."""
    if config is None:
        return True
    path = getattr(config, "path", None)
    if path is not None and Path(path).exists():
        try:
            return bool(type(config).load(path, strict=False).get("memory.enabled"))
        except Exception:
            pass
    return bool(config.get("memory.enabled"))


def local_sender() -> str:
    """The local user's name, the sender of ``tui`` and ``ask`` exchanges."""
    try:
        return getpass.getuser()
    except Exception:
        return "local user"


async def save_exchange(store: Any, ex: Exchange) -> int:
    """Write ``ex`` (request and reply capped) and return its id.

    An exchange with a ``turn_id`` already saved (its pending row) is
    updated in place, unless a refiner already holds it. ``store`` is a
    :class:`wisp.core.store.Store`.
    """
    request, request_bytes, request_cut = cap_text(ex.request)
    reply, reply_bytes, reply_cut = cap_text(ex.reply)
    now = _now()
    async with store.transaction() as db:
        rows = await db.execute_fetchall(
            "INSERT INTO episode_exchanges (workspace, transport, channel, thread, sender,"
            " conversation_id, turn_id, turn_number, model, endpoint, outcome, error,"
            " request, request_bytes, request_truncated, reply, reply_bytes, reply_truncated,"
            " requested_at, finished_at, captured_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (turn_id) DO UPDATE SET"
            "  model = COALESCE(excluded.model, model), endpoint = COALESCE(excluded.endpoint, endpoint),"
            "  outcome = excluded.outcome, error = excluded.error,"
            "  reply = excluded.reply, reply_bytes = excluded.reply_bytes,"
            "  reply_truncated = excluded.reply_truncated, finished_at = excluded.finished_at"
            " WHERE batch_id IS NULL"
            " RETURNING id",
            (ex.workspace, ex.transport, ex.channel, ex.thread or "", ex.sender or "",
             ex.conversation_id, ex.turn_id, ex.turn_number, ex.model, ex.endpoint, ex.outcome,
             ex.error, request, request_bytes, int(request_cut), reply, reply_bytes, int(reply_cut),
             ex.requested_at, ex.finished_at, now),
        )
        row = next(iter(rows), None)
        if row is None:  # held by a refiner: leave it as it is
            (row,) = await db.execute_fetchall("SELECT id FROM episode_exchanges WHERE turn_id = ?", (ex.turn_id,))
    return int(row[0])


async def finalize_pending(store: Any, now: datetime | None = None) -> int:
    """Give an outcome to pending exchanges whose turn is over without their
    hook having run (a crash, a restart, a killed process): ``stopped`` when
    the turn was recovered or is gone, else the turn's own end state once it
    ended more than :data:`PENDING_GRACE` ago. Returns how many changed."""

    now = now or datetime.now(timezone.utc)
    cutoff = utc_text(now - PENDING_GRACE)
    async with store.db.execute("SELECT id, turn_id FROM episode_exchanges WHERE outcome IS NULL") as cur:
        pending = list(await cur.fetchall())
    endings = await store.turn_endings(t for _, t in pending if t is not None)
    updates: list[tuple[str, str | None, str, int]] = []
    for xid, tid in pending:
        ending = endings.get(tid) if tid is not None else None
        if ending is None:
            updates.append(("stopped", "the turn is gone", _now(), xid))
            continue
        state, ended_at, error, last_entry = ending
        if state == "open":
            continue
        elif error == RECOVERED_ERROR:
            updates.append(("stopped", error, last_entry or ended_at or _now(), xid))
        elif ended_at and ended_at < cutoff:
            updates.append((outcome_for(state), error, ended_at, xid))
    if not updates:
        return 0
    async with store.transaction() as db:
        await db.executemany(
            "UPDATE episode_exchanges SET outcome = ?, error = ?, finished_at = ?"
            " WHERE id = ? AND outcome IS NULL", updates)
    return len(updates)


@dataclass(frozen=True)
class Origin:
    """Where a session's exchanges come from: ``transport`` (``tui``,
    ``ask``, ``mcp``), ``channel`` (``None``: the conversation id),
    ``thread`` (``""`` when the transport has none) and ``sender`` (``None``:
    the local user)."""

    transport: str = "tui"
    channel: str | None = None
    thread: str | None = None
    sender: str | None = None


class Capture:
    """The capture hooks of one session.

    ``Capture(store, config, workdir, origin, model)``: the session's store
    and config, its conversation's working directory, its :class:`Origin`,
    and its model link (anything with ``endpoint``, ``model`` and
    ``label``: :class:`wisp.core.model.link.ModelLink`), read at each
    exchange. :meth:`before_request` writes the pending exchange at a
    turn's first request; :meth:`after_turn` completes it with the reply and
    outcome. Both return no events, and a failure never reaches the turn
    (the agent turns a hook's exception into a warning).
    """

    def __init__(self, store: Any, config: Any, workdir: Path, origin: Origin, model: Any) -> None:
        self.store = store
        self.config = config
        self.workdir = Path(workdir)
        self.origin = origin
        self.model = model
        self._pending: dict[int, int] = {}  # turn id -> exchange id
        self._seen: set[tuple[int, int]] = set()

    # -- origin ------------------------------------------------------------

    def _origin(self, conversation: int) -> dict[str, Any]:
        o = self.origin
        endpoint = getattr(self.model, "endpoint", None)
        model = getattr(self.model, "model", None) or (getattr(endpoint, "model", None) if endpoint else None)
        label = getattr(self.model, "label", None) if endpoint is not None else None
        return {
            "workspace": workspace_for(self.workdir, self.config),
            "transport": o.transport or "tui",
            "channel": str(o.channel) if o.channel else str(conversation),
            "thread": str(o.thread or ""),
            "sender": str(o.sender) if o.sender else local_sender(),
            "model": model or None,
            "endpoint": label or (getattr(endpoint, "base_url", None) if endpoint else None),
        }

    def _enabled(self) -> bool:
        return memory_enabled(self.config)

    # -- hooks ---------------------------------------------------------------

    async def before_request(self, conversation: int, turn_number: int) -> list[Any]:
        """Before each request: at a turn's first, save it as pending."""
        key = (conversation, turn_number)
        if key in self._seen:
            return []
        self._seen.add(key)
        if not self._enabled():
            return []
        store = self.store
        turn = await store.get_turn(conversation, turn_number)
        if turn is None:
            return []
        prompt = next((e.content for e in await store.entries(conversation, turn.id) if e.kind == "prompt"), None)
        if prompt is None:
            return []
        ex = Exchange(request=prompt, requested_at=turn.started_at, conversation_id=conversation,
                      turn_id=turn.id, turn_number=turn.number, **self._origin(conversation))
        self._pending[turn.id] = await save_exchange(store, ex)
        return []

    async def after_turn(self, record: Any) -> list[Any]:
        """When a turn ends: save the exchange with its reply and outcome."""
        self._seen.discard((record.conversation, record.turn))
        pending = self._pending.pop(record.turn_id, None)
        if pending is None and not self._enabled():
            return []
        store = self.store
        turn = await store.turn_by_id(record.turn_id)
        requested_at = turn.started_at if turn is not None else record.started_at
        state = record.state
        error = record.error
        if state == "cut":
            error = "the reply was cut at the model's output limit"
        ex = Exchange(request=record.prompt, reply=record.reply or "", requested_at=_store_time(requested_at),
                      conversation_id=record.conversation, turn_id=record.turn_id, turn_number=record.turn,
                      outcome=outcome_for(state, getattr(record, "error_kind", None)), error=error,
                      finished_at=_store_time(record.ended_at), **self._origin(record.conversation))
        await save_exchange(store, ex)
        return []


def _store_time(text: str) -> str:
    """Any ISO time with an offset or ``Z`` → the store's form (µs, ``Z``)."""
    try:
        return utc_text(parse_utc(text))
    except (TypeError, ValueError):
        return _now()
