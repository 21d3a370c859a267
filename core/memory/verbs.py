"""The memory tool's verbs: the conversation's memory, for the model (issue 4; wisp-memory-tool.txt).

One text argument, ``request``, whose first word is the verb (see
:mod:`.request`): ``recall`` (entries, turns, the task, facts, the running
summary, and words that name none of them: a search of the conversation's
record, :mod:`.search`), ``note``/``remember``, ``task``, ``summarise`` (exact readers, no
model), ``condense`` (the conversation's own model, chunk by chunk), and the
episodic ``memories`` / ``recall MEM-000001`` (issue "Episodic memory",
:mod:`wisp.core.episodes.tool_verbs`).

It reads only the conversation's own record and the audit log it refers
to, writes only the conversation's facts (as the model's proposals, when
the turn ends), runs no command and needs no approval. Every call is a
``tool.call`` and ``tool.result`` (the agent writes those) plus one
``context.memory`` audit event naming the request, the action and what it
touched (:meth:`MemoryTool.run`).

Off by default: a conversation gets it when config ``context.memory`` is
true or an explicit tool list names it (:mod:`wisp.core.session`). The
tool the model calls is :class:`wisp.core.tools.memory.MemoryTool`, made by
the session with its :class:`MemoryBinding` once the session knows its
conversation (issue "One core, built once"): it is never unbound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ..context.notes import ModelNotes
    from ..sidecall import SideCall
    from .request import Request, Target

# The verbs' readers (recall, condense, the request parser, the output summaries, episodic memory) load
# when the model first calls the tool: a session that never does, never loads them (issue 12).

__all__ = ["Memory", "MemoryAnswer", "MemoryBinding", "DESCRIPTION", "REQUEST_GUIDE", "PARAMETERS"]

#: The tool's description as the model sees it (wisp-memory-tool.txt, "Arguments";
#: "the Mac's RAM" becomes "the machine's RAM", since wisp is not only for Macs).
DESCRIPTION = ("This conversation's memory, not the machine's RAM (that is system_info): recall earlier "
               "material in full, or note a fact to keep.")
#: The guide of its one argument, word for word from the reference document.
REQUEST_GUIDE = ('"recall entry 7", "recall turn 3", "recall task", "recall fact codename", or '
                 '"note entity release codename = BLUE HERON".')


#: The JSON schema of the tool's one argument.
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"request": {"type": "string", "description": REQUEST_GUIDE}},
    "required": ["request"],
}


@dataclass
class MemoryBinding:
    """What the verbs read and write, given once by the session: the
    ``store`` and ``audit`` log, the model's ``notes`` (facts, the task and
    the running summary: :class:`~wisp.core.context.notes.ModelNotes`), the
    ``side_call`` condense asks the model through (``None``: no model),
    ``window()`` (the context window in tokens, or ``None``; read at call
    time, since the endpoint connects after the session is built) and the
    ``config``."""

    store: Any
    audit: Any
    notes: ModelNotes
    side_call: SideCall | None = None
    window: Callable[[], int | None] = field(default=lambda: None)
    config: Any = None
    #: The room the last composed request left (tokens), kept by the context
    #: (:class:`wisp.core.context.composer.Room`); ``None``: not known.
    room: Any = None

    @property
    def context_window(self) -> int | None:
        return self.window()


@dataclass(frozen=True)
class MemoryAnswer:
    """A request's answer: ``content`` (for the model), ``ok`` (false for an
    ``error:`` or ``memory:`` line) and ``meta`` (stored with the entry)."""

    content: str
    ok: bool
    meta: dict[str, Any]


class Memory:
    """The verbs over one session's record (see the module doc)."""

    def __init__(self, binding: MemoryBinding) -> None:
        self.binding = binding

    async def answer(self, request: str, conversation: int | None, turn: int | None, *,
                     entry: int | None = None) -> MemoryAnswer:
        """Act on ``request`` in ``conversation`` (turn ``turn``; ``entry`` the
        entry that records the tool call, which a note or task names as where
        its fact came from, so that its history has something to recall).
        Never raises for a bad request: the answer is then one line starting
        ``error:`` (what to write) or ``memory:`` (nothing matches, and what
        there is)."""
        b = self.binding
        if conversation is None:
            return MemoryAnswer("memory: no conversation is open yet; nothing can be recalled or noted", False,
                                {"memory": "none"})
        from .request import SUBJECTS, RequestError, parse_request

        ctx = _Call(conversation, turn, entry)
        event: dict[str, Any] = {"request": request}
        try:
            req = parse_request(request, SUBJECTS)
        except RequestError as exc:
            event.update(action=exc.verb or "none", failure=exc.failure or exc.line)
            if exc.target is not None:
                # a condense that names its output but asks nothing: the event names the output
                # and that no chunk was read (wisp-memory-tool.txt, "Audit": a condense names its target)
                what: dict[str, Any] = {"kind": exc.target.kind}
                if exc.target.kind == "output":
                    what["output"] = exc.target.name
                else:
                    what["entry"] = exc.target.number
                event.update(target=what, chunks_read=0, chunks_failed=0)
            return self._finish(b, ctx, exc.line, event)
        event["action"] = req.verb
        try:
            content = await self._dispatch(b, ctx, req, event)
        except Exception as exc:  # a store or audit problem must reach the model as a line, not a crash
            content = f"memory: the request could not be carried out: {exc}"
            event["failure"] = content
        return self._finish(b, ctx, content, event)

    def _finish(self, b: MemoryBinding, ctx: "_Call", content: str, event: dict[str, Any]) -> MemoryAnswer:
        if b.audit is not None:
            try:
                b.audit.write("context.memory", event, conversation=ctx.conversation_id, turn=ctx.turn)
            except OSError:
                pass
        meta: dict[str, Any] = {"memory": event.get("action", "none")}
        target = event.get("target")
        if isinstance(target, dict) and target.get("entry") is not None:
            meta["target_entry"] = target["entry"]
        return MemoryAnswer(content, not content.startswith(("error:", "memory:")), meta)

    async def _dispatch(self, b: MemoryBinding, ctx: "_Call", req: Request, event: dict[str, Any]) -> str:
        from .limits import page_budget

        conv = int(ctx.conversation_id)  # type: ignore[arg-type]
        budget = page_budget(b.context_window, getattr(b.room, "left", None))
        if req.verb == "memories" or (req.verb == "recall" and req.target and req.target.kind == "episode"):
            return await self._episodic(b, req, event)
        if req.verb == "recall":
            assert req.target is not None
            return await self._recall(b, conv, ctx.turn, req.target, budget, event)
        if req.verb == "note":
            entries = [ctx.entry] if ctx.entry is not None else []
            outcome = await b.notes.note(conv, ctx.turn, req.subject or "", req.name or "", req.value or "",
                                         entries=entries)
            event.update(subject=req.subject, name=req.name, value=req.value, **{"class": "model"})
            event["kept"] = outcome.kept
            if not outcome.kept:
                event["failure"] = outcome.line
            return outcome.line
        if req.verb == "task":
            outcome = await b.notes.propose_task(conv, ctx.turn, req.value or "",
                                                 entries=[ctx.entry] if ctx.entry is not None else [])
            event["value"] = req.value
            event["kept"] = outcome.kept
            if not outcome.kept:
                event["failure"] = outcome.line
                event["pinned"] = "set the task, and it stays" in outcome.line
            return outcome.line
        if req.verb in ("summarise", "condense"):
            assert req.target is not None
            return await self._read_output(b, conv, req, budget, event, ctx.turn)
        return "error: write recall entry N, or note SUBJECT NAME = VALUE"

    async def _recall(self, b: MemoryBinding, conv: int, turn: int | None, target: Target, budget: int,
                      event: dict[str, Any]) -> str:
        from . import recall as rc
        from .request import Target

        if target.kind == "output":
            number = await rc.find_output(b.store, conv, target.name or "")
            if number is None:
                event["target"] = {"kind": "output", "output": target.name}
                event["found"] = False
                return f"memory: no stored output {target.name}; recall entry N names an output by its entry"
            target = Target("entry", number=number, from_line=target.from_line, name=target.name)
        if target.kind == "entry":
            r = await rc.recall_entry(b.store, b.audit, conv, target, current_turn=turn, budget_tokens=budget)
            if target.name:
                r.target["output"] = target.name
        elif target.kind == "turn":
            r = await rc.recall_turn(b.store, b.audit, conv, target, current_turn=turn, budget_tokens=budget)
        elif target.kind == "search":
            from .search import search

            r = await search(b.store, b.audit, conv, target, current_turn=turn, budget_tokens=budget)
        elif target.kind == "task":
            r = await rc.recall_task(b.notes, conv)
        elif target.kind == "fact":
            r = await rc.recall_fact(b.notes, conv, target.name or "")
        else:
            r = await rc.recall_summary(b.notes, conv, target.number, budget_tokens=budget,
                                        from_line=target.from_line)
        event.update(target=r.target, entries=r.entries, facts=r.facts, summary_versions=r.summaries,
                     audit_events=r.audit_events, source=r.source, filter=None, found=r.found)
        if r.next_line is not None:
            event["next_line"] = r.next_line
        return r.text

    async def _episodic(self, b: MemoryBinding, req: Request, event: dict[str, Any]) -> str:
        if req.verb == "memories":
            text = f"memories {req.query or ''}".strip()
            event["target"] = {"kind": "memories", "query": req.query}
        else:
            assert req.target is not None
            text = f"recall {req.target.name}"
            event["target"] = {"kind": "memory", "memory": req.target.name}
        from ..episodes.tool_verbs import run_episodic_verb  # episodic memory loads when first asked

        answer = await run_episodic_verb(b.store, b.config, text)
        event["found"] = bool(answer) and not answer.startswith(("memory:", "error:"))
        return answer or "memory: episodic memory had nothing for that request"

    async def _read_output(self, b: MemoryBinding, conv: int, req: Request, budget: int,
                           event: dict[str, Any], turn: int | None = None) -> str:
        from ..context.recall import describe_entry, stored_range
        from . import recall as rc
        from .condense import condense
        from .limits import chunk_budget

        target = req.target
        assert target is not None
        what: dict[str, Any] = {"kind": "entry"}
        if target.kind == "output":
            what = {"kind": "output", "output": target.name}
            number = await rc.find_output(b.store, conv, target.name or "")
            if number is None:
                event.update(target=what, chunks_read=0, chunks_failed=0, failure="no such output")
                return f"memory: no stored output {target.name}; {req.verb} entry N names an output by its entry"
        else:
            number = int(target.number or 0)
        what["entry"] = number
        event["target"] = what
        got = await rc.load_entry(b.store, b.audit, conv, number)
        if got is None:
            event.update(chunks_read=0, chunks_failed=0, failure="no such entry")
            return f"memory: no entry {number}; {await stored_range(b.store, conv, turn)}"
        event["source"] = "audit" if got.source.endswith("audit log") else "store"
        if got.source.endswith("audit log") and got.entry.audit_event_id:
            event["audit_events"] = [got.entry.audit_event_id]
        label = f"entry {number} ({describe_entry(got.entry)})"
        if req.verb == "summarise":
            from ..outputs import summarise  # the output readers load when an output is first summarised

            s = summarise(got.content, got.entry.meta, overview=req.overview, budget_tokens=budget,
                          hint=f"condense entry {number}: QUESTION can read them")
            event.update(summary="overview" if req.overview else "notable", mode=s.mode, readers=s.readers,
                         first_cited=s.first_cited, unexplained=s.unexplained, chunks_read=0, chunks_failed=0)
            return s.text
        window = b.context_window
        result = await condense(b.side_call, got.content, req.question or "", label=label,
                                chunk_tokens=chunk_budget(window), result_tokens=budget,
                                summarise_hint=f"summarise entry {number}")
        event.update(question=req.question, model=result.model, chunks_total=result.chunks_total,
                     chunks_read=result.chunks_read, chunks_failed=len(result.failed),
                     failed_chunks=[{"chunk": i, "lines": [a, c], "why": w} for i, a, c, w in result.failed],
                     lines_read=list(result.lines_read), combined=result.combined)
        if not result.model:
            event["failure"] = "no model"
        elif result.failed:
            event["failure"] = f"{len(result.failed)} chunks failed"
        return result.text


@dataclass(frozen=True)
class _Call:
    """Where a request is made: the conversation id, the turn number and the
    entry recording the tool call (``None`` when it is not recorded)."""

    conversation_id: int
    turn: int | None
    entry: int | None = None
