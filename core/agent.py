"""The turn loop: compose, stream, run tool calls, record, yield events.

:meth:`Agent.run_turn` is an async iterator of :mod:`wisp.core.events`. It
records the prompt (store, then audit), composes the request, streams the
reply, runs every tool call the model asks for (recording each call and
result as entries with their audit events), and loops until the model
answers without a tool call, at most ``agent.max_steps`` requests (issue
"wisp runs end to end", "Agent loop").

Faults never escape: an :class:`~wisp.core.model.base.EndpointError` ends
the turn in state ``error`` with the partial reply kept and marked. A
cancelled task (Esc in the TUI) ends it in state ``stopped``, with what had
arrived, and re-raises :class:`asyncio.CancelledError`.

Nothing shown is lost to a crash (issue "Nothing runs, leaks, hangs or is
lost that shouldn't be", "Nothing is lost"): the reply, its thinking and a
tool's streamed output (a command's) are written to the store as they
arrive (:class:`~wisp.core.streamed.StreamedEntry`: the entry is created at
the first piece, then rewritten at most once a second), so a ``kill -9``
leaves what had arrived, up to the last second of it. Each such entry's
audit event is still written once, when it ends, with its whole content;
an entry a crash cut short gets its audit event from the next wisp that
starts (:func:`wisp.core.streamed.recover_open_turns`). A
turn begins by claiming its conversation (:meth:`wisp.core.store.Store.begin_turn`):
when another live wisp process is running a turn of it, the turn yields one
:class:`~wisp.core.events.Error` of kind ``busy`` and nothing is recorded.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol

from . import events as ev
from .context.composer import ContextTooBig
from .context.loops import call_key, call_text
from .tokens import estimate_messages
from .transcript import cut_calls_text
from .model import base as mb
from .model.repetition import DEFAULT_MIN_CHARS, Repeat, RepeatWatch
from .store import ConversationBusy, ConversationMoved
from .transactions import to_the_end
from .streamed import StreamedEntry
from .tools import ToolContext, ToolRegistry
from .tools.base import check_arguments
from .clock import utc_now

#: Below this share of wisp's estimate, a reported prompt count means the
#: endpoint dropped part of the prompt (issue "wisp runs end to end", "Silent truncation").
TRUNCATION_RATIO = 0.6
#: The gap (tokens) between wisp's estimate and the reported count below
#: which no warning is given: chat templates and tokenizers differ too much
#: on short text for a smaller gap to mean anything.
TRUNCATION_MIN_GAP = 512


@dataclass
class AgentSettings:
    """Settings for the loop: ``max_steps`` (requests a turn), ``think``
    (``on``/``off``/``auto``), ``max_tokens`` (the reply's cap, tokens;
    ``None`` caps it at the reserve its request was planned with, see
    :func:`reply_cap`) and ``repeat_stop_chars`` (a reply whose end repeats
    one span over this many characters is stopped; 0 never:
    :mod:`wisp.core.model.repetition`)."""

    max_steps: int = 20
    think: str = "auto"
    max_tokens: int | None = None
    repeat_stop_chars: int = DEFAULT_MIN_CHARS


def reply_cap(max_tokens: int | None, reserve: int | None) -> int | None:
    """The most tokens a reply may have (sent as Ollama's ``num_predict``,
    OpenAI's and llama.cpp's ``max_tokens``): ``model.max_tokens`` when set,
    else the reserve the request was planned with (``reserve``, tokens: the
    room the composer left for the reply), so that a reply that runs away
    stops where its room ends instead of running for minutes and filling
    every later request. ``None`` (no cap) only when neither is set or the
    reserve is 0."""
    if max_tokens:
        return int(max_tokens)
    return int(reserve) if reserve and reserve > 0 else None


#: How many times a turn may ask for the same failed call (:func:`wisp.core.context.loops.call_key`):
#: the first runs, the second is not run and is told it already failed, the third ends the turn.
FAILED_CALL_LIMIT = 3


@dataclass
class _Failed:
    """A call that failed in this turn: its first result's ``entry`` number, its ``error`` text, ``times`` asked."""

    entry: int
    error: str
    times: int = 1


@dataclass
class TurnRecord:
    """What the after-turn hooks (the context, the observers) are told when a turn ends.

    ``reply`` is the model's final readable reply (the text of the last
    step; thinking and tool calls excluded); ``state`` is ``done``, ``cut``,
    ``error`` or ``stopped``; times are UTC ISO 8601 strings.
    """

    conversation: int
    turn: int
    turn_id: int
    prompt: str
    reply: str
    state: str
    started_at: str
    ended_at: str
    error: str | None = None
    #: The endpoint error's kind (``timeout``, ``unreachable``, …) for state
    #: ``error``; episodic capture maps ``timeout`` to "timed out".
    error_kind: str | None = None


class TurnObserver(Protocol):
    """Something told of each request and each ended turn (episodic capture).
    Each returns events to yield; a failure becomes a warning."""

    async def before_request(self, conversation: int, turn: int) -> list[ev.AgentEvent]: ...

    async def after_turn(self, record: TurnRecord) -> list[ev.AgentEvent]: ...


class TurnContext(Protocol):
    """The layered context as the agent uses it
    (:class:`wisp.core.context.manager.ContextManager`)."""

    async def prepare(self, conversation: int, turn: int,
                      progress: Callable[[ev.AgentEvent], None] | None = None, *, squeeze: float = 1.0) -> Any:
        """Before each request: ``.context`` (the composed request: ``messages``,
        ``tools``, ``total``, ``window``) and ``.events``; ``progress`` gets
        events to show while it works (a running summary being written);
        ``squeeze`` counts every layer that many times larger (a second try
        after the server counted the request over the window)."""
        ...

    async def record_usage(self, conversation: int, reported: int | None, estimated: int | None,
                           turn: int | None = None, cached: int | None = None) -> None: ...

    async def record_floor(self, conversation: int, floor: float | None) -> Any:
        """Raise the model's planning floor (server tokens ÷ wisp's estimate) after
        a refusal for size without a count; returns the calibration (``.effective``)
        the next request is planned with."""
        ...

    def overflow_message(self, composed: Any) -> str: ...

    async def after_turn(self, record: TurnRecord) -> list[ev.AgentEvent]: ...


class ModelSource(Protocol):
    """Where the agent streams from (:class:`wisp.core.model.link.ModelLink`):
    ``endpoint`` (``None`` while not connected) and ``context_window``."""

    endpoint: mb.Endpoint | None
    context_window: int | None

    def window_advice(self, tokens: int) -> str: ...


@dataclass
class _Step:
    text: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)
    calls: list[mb.ToolCallRequest] = field(default_factory=list)
    done_reason: str | None = None
    usage: mb.StreamUsage | None = None
    #: The step's reply and thinking entries, written as they stream (None before their first piece).
    reply: StreamedEntry | None = None
    thought: StreamedEntry | None = None
    #: The repetition the reply (or its thinking, ``repeat_in``) ended with when it was stopped for it.
    repeat: Repeat | None = None
    repeat_in: str = "reply"

    def streams(self) -> list[StreamedEntry]:
        return [s for s in (self.thought, self.reply) if s is not None]

    async def take(self, kind: str, text: str, store: Any, conversation: int, turn_id: int) -> None:
        """The next piece of the step's ``reply`` or ``thinking`` (``kind``):
        kept, and written to its entry as it streams (the entry is made at
        the first piece that is not empty)."""
        (self.text if kind == "reply" else self.thinking).append(text)
        if not text:
            return
        stream = self.reply if kind == "reply" else self.thought
        if stream is None:
            stream = StreamedEntry(store, conversation, turn_id, kind)
            if kind == "reply":
                self.reply = stream
            else:
                self.thought = stream
        await stream.add(text)

    def has_output(self) -> bool:
        """True once the model's reply, thinking or a call has come in this step."""
        return bool(self.text or self.thinking or self.calls)


class Agent:
    """Runs turns of one conversation's session against its model.

    Made once by :class:`wisp.core.session.Session` (issue "One core, built
    once"): ``store`` a :class:`wisp.core.store.Store`, ``audit`` a
    :class:`wisp.core.audit.AuditLog`, ``model`` a :class:`ModelSource`
    (the session's link: its endpoint may change on reconnect), ``tools`` a
    :class:`~wisp.core.tools.ToolRegistry`, ``context`` a
    :class:`TurnContext` (composes every request), ``workdir`` the
    conversation's directory, ``config`` (read by tools), ``approver`` an
    async fn ``(ApprovalRequest) -> Approval`` handed to tools as
    ``ToolContext.approve`` (``None`` approves nothing: issue "Tools that
    act"), ``observers`` told of each request and ended turn.
    """

    def __init__(self, *, store: Any, audit: Any, model: ModelSource, tools: ToolRegistry, context: TurnContext,
                 workdir: Path, config: Any = None, approver: Callable[[Any], Awaitable[Any]] | None = None,
                 observers: list[TurnObserver] | tuple[TurnObserver, ...] = (),
                 settings: AgentSettings | None = None):
        self.store = store
        self.audit = audit
        self.model = model
        self.tools = tools
        self.context = context
        self.workdir = Path(workdir)
        self.config = config
        self.approver = approver
        self.observers = tuple(observers)
        self.settings = settings or AgentSettings()
        self.last_usage: ev.Usage | None = None

    @property
    def endpoint(self) -> mb.Endpoint | None:
        """The endpoint requests go to now (``None`` while not connected)."""
        return self.model.endpoint

    # --- recording helpers ------------------------------------------------

    async def _record(self, conversation: int, turn: Any, kind: str, content: str, *,
                      audit_kind: str, payload: dict[str, Any] | None = None,
                      stream: StreamedEntry | None = None, **fields: Any) -> Any:
        """Store an entry (or finish the ``stream`` that has been writing it),
        write its audit event, link the two; returns the Entry."""
        if stream is not None:
            entry = await stream.finish(content, fields.get("meta"))
        else:
            entry = await self.store.add_entry(conversation, turn.id, kind, content, **fields)
        body = {"content": content, **{k: v for k, v in fields.items() if v is not None}}
        if payload:
            body.update(payload)
        ref = self.audit.write(audit_kind, body, conversation=conversation,
                               turn=turn.number, entry=entry.number) if self.audit else None
        if ref is not None:
            await self.store.set_entry_audit(entry.id, ref)
        return entry

    async def _after_turn(self, record: TurnRecord) -> list[ev.AgentEvent]:
        """The context's and the observers' after-turn events, in that order."""
        out = await self._safe_hook(self.context.after_turn, record)
        for observer in self.observers:
            out += await self._safe_hook(observer.after_turn, record)
        return out

    # --- the loop -----------------------------------------------------------

    async def run_turn(self, conversation: int, prompt: str, supersedes: int | None = None, *,
                       seen: int | None = None) -> AsyncIterator[ev.AgentEvent]:
        """Run one turn for ``prompt``; yields :mod:`wisp.core.events` in order,
        ending with :class:`~wisp.core.events.TurnEnded`. Never raises an
        endpoint error; re-raises ``CancelledError`` after recording the stop.
        A conversation another live process is running a turn of gives one
        ``Error`` of kind ``busy`` and nothing else (the claim is atomic:
        :meth:`wisp.core.store.Store.begin_turn`). With ``supersedes`` (a
        turn number: ``/retry``, ``/edit``), the new turn takes that one's
        place in the same claim, before the request is composed, so the
        request holds only the current versions (issue 16); the old turn
        stays in the record. With ``seen`` (the last turn number a view has
        shown), a conversation another wisp has added turns to since gives
        one ``Error`` of kind ``moved`` and nothing else (the same claim)."""
        try:
            turn = await self.store.begin_turn(conversation, supersedes=supersedes, seen=seen)
        except ConversationBusy as exc:
            yield ev.Error("busy", str(exc))
            return
        except ConversationMoved as exc:
            yield ev.Error("moved", str(exc))
            return
        try:  # from the claim on, every way out ends the turn (Esc right after Enter included)
            if supersedes is not None:
                self._audit_event("turn.superseded", {"turn": supersedes, "by": turn.number}, conversation,
                                  turn.number)
            entry = await self._record(conversation, turn, "prompt", prompt, audit_kind="prompt")
            yield ev.TurnStarted(conversation=conversation, turn=turn.number, entry=entry.number, prompt=prompt,
                                 supersedes=supersedes)
        except BaseException as exc:
            await self._end_abandoned(conversation, turn, exc)
            raise

        state = "done"
        step = _Step()
        failed: dict[str, _Failed] = {}  # the calls that failed in this turn, by call_key
        prompt_tokens = completion_tokens = None
        final_reply = ""
        started_at = _now()
        try:
            if self.model.endpoint is None:
                raise mb.NoEndpoint("no model endpoint is connected; start Ollama "
                                    "(ollama serve) or install the local extra (pip install 'wisp[local]')")
            for step_no in range(self.settings.max_steps):
                step = _Step()
                endpoint = self.model.endpoint
                if endpoint is None:
                    raise mb.NoEndpoint("the model endpoint was disconnected; /config set model.* reconnects")
                for observer in self.observers:
                    for item in await self._safe_hook(observer.before_request, conversation, turn.number):
                        yield item
                squeeze = 1.0  # > 1 on a refit, after the server refused the request as over its window
                refits = _Refits()
                while True:
                    shown: asyncio.Queue[ev.AgentEvent] = asyncio.Queue()
                    preparing = asyncio.ensure_future(self.context.prepare(
                        conversation, turn.number, progress=shown.put_nowait, squeeze=squeeze))
                    try:  # what preparing says while it works (a summary can take the model minutes) shows at once
                        while not preparing.done():
                            getting = asyncio.ensure_future(shown.get())
                            await asyncio.wait({preparing, getting}, return_when=asyncio.FIRST_COMPLETED)
                            if getting.done():
                                yield getting.result()
                            else:
                                getting.cancel()
                    finally:
                        if not preparing.done():
                            preparing.cancel()
                    while not shown.empty():
                        yield shown.get_nowait()
                    prepared = preparing.result()
                    for item in prepared.events:
                        yield item
                    composed = prepared.context
                    messages = composed.messages
                    schemas = composed.tools or None
                    estimate = getattr(composed, "estimated", None)  # summed while composing (issue 12)
                    if estimate is None:
                        estimate = estimate_messages(messages, schemas)
                    planned = composed.total
                    if refits.first_ratio is None:
                        refits.first_ratio = composed.ratio
                    # even fitted, it cannot fit: never send it (issue "Real models, real work")
                    if composed.over_budget:
                        raise ContextTooBig(self.context.overflow_message(composed))
                    cap = reply_cap(self.settings.max_tokens, getattr(composed, "reserve", None))
                    options = mb.ChatOptions(context_window=self.model.context_window,
                                             think=self.settings.think,  # type: ignore[arg-type]
                                             max_tokens=cap)
                    quoted = _given_text(messages) if self.settings.repeat_stop_chars > 0 else ""
                    watches = {"reply": RepeatWatch(self.settings.repeat_stop_chars, quoted),
                               "thinking": RepeatWatch(self.settings.repeat_stop_chars, quoted)}
                    stream = endpoint.stream_chat(messages, schemas, options)
                    try:
                        async for item in stream:
                            if isinstance(item, (mb.StreamText, mb.StreamThinking)):
                                kind = "reply" if isinstance(item, mb.StreamText) else "thinking"
                                await step.take(kind, item.text, self.store, conversation, turn.id)
                                yield ev.TextDelta(item.text) if kind == "reply" else ev.ThinkingDelta(item.text)
                                found = watches[kind].feed(item.text)
                                if found is not None:  # a loop: stop the stream here (closing it ends the request)
                                    step.repeat, step.repeat_in = found, kind
                                    break
                            elif isinstance(item, mb.ToolCallRequest):
                                step.calls.append(item)
                            elif isinstance(item, mb.StreamUsage):
                                step.usage = item
                                prompt_tokens = item.prompt_tokens
                                completion_tokens = item.completion_tokens
                                usage = ev.Usage(item.prompt_tokens, item.completion_tokens, estimate, planned,
                                                 cached=item.cached_tokens, evaluated=item.evaluated_tokens)
                                self.last_usage = usage
                                yield usage
                                warning = truncation_warning(item.prompt_tokens, estimate, self.model.window_advice,
                                                             window=self.model.context_window)
                                if warning:
                                    self._audit_event("notice", {"text": warning}, conversation, turn.number)
                                    yield ev.Notice(warning, level="warning")
                            elif isinstance(item, mb.Waiting):
                                # a loading model's wait is one changing line; each retry after HTTP 429 is its own
                                yield ev.Notice(item.notice, key=None if item.why == "rate_limited" else "wait")
                            elif isinstance(item, mb.KeepAlive):  # the server keeps the line open but sends nothing
                                yield ev.Notice(
                                    f"Waiting for the reply: {item.waited_s:.0f} s of at most {item.limit_s:g} s "
                                    "(model.reply_timeout_s); Esc in the TUI or Ctrl+C in wisp ask stops it.",
                                    key="reply-wait", transient=True)
                            elif isinstance(item, mb.Done):
                                step.done_reason = item.reason
                    except mb.BadRequest as exc:
                        again = refit_squeeze(exc, planned, squeeze, step.has_output())
                        if again is not None:
                            squeeze = again
                            refits.tries += 1
                            yield ev.Notice(
                                f"The server counted {exc.prompt_tokens:,} tokens where wisp estimated {planned:,} "
                                f"(its window {exc.window or composed.window:,}): fitting the request again to "
                                "the server's count.", key="fit")
                            continue
                        if not uncounted_refusal(exc, composed.window):
                            raise
                        # refused for size without a count: what it says about the tokenizer is kept at once
                        calibrated = await self._record_floor(conversation, refusal_floor(composed.budget, estimate))
                        target = None if step.has_output() else uncounted_refit_ratio(
                            refits, composed.window, estimate, cap)
                        if target is None:
                            raise mb.BadRequest(
                                uncounted_refusal_message(exc.detail, composed.window, planned, refits.uncounted,
                                                          composed.ratio, entry.number, self.model.window_advice),
                                context_overflow=True, window=exc.window, detail=exc.detail) from exc
                        base = calibrated.effective if calibrated is not None else composed.ratio / squeeze
                        squeeze = max(1.0, target / base)
                        refits.tries += 1
                        refits.uncounted += 1
                        yield ev.Notice(
                            f"The server refused the request as over its window without saying how many tokens "
                            f"it counted (wisp planned about {planned:,} of its {composed.window:,}): fitting it "
                            f"again with every layer counted {target:.2f} × wisp's estimate "
                            f"(refit {refits.uncounted} of {len(REFIT_STEPS)}).", key="fit")
                        continue
                    finally:
                        await _close(stream)
                    if refits.uncounted:  # the ratio the server took after refusing without a count
                        await self._record_floor(conversation, composed.ratio)
                    break

                if step.usage is None:  # the endpoint reported none: give wisp's estimate
                    usage = ev.Usage(None, None, estimate, planned)
                    self.last_usage = usage
                    yield usage
                else:
                    await self._safe_hook(self.context.record_usage, conversation, step.usage.prompt_tokens,
                                          estimate, turn.number, step.usage.cached_tokens)
                step_thinking = bool(step.thinking)
                repeat, repeat_in = step.repeat, step.repeat_in
                cut = step.done_reason == "length" or repeat is not None
                recorded = await self._record_step_text(conversation, turn, step, cut=cut)
                for r in recorded:
                    final_reply = r.text
                    yield r
                if cut:
                    state = "cut"
                    calls = cut_calls_text([call_as_written(c) for c in step.calls])
                    if repeat is not None:
                        text = repeat_notice(repeat, repeat_in, self.settings.repeat_stop_chars, calls)
                    else:
                        text = cap_notice(self.settings.max_tokens, cap, calls)
                    self._audit_event("notice", {"text": text}, conversation, turn.number)
                    yield ev.Notice(text, level="warning")
                    break
                if not step.calls:
                    if not final_reply.strip() and step_thinking:
                        yield ev.Notice("The model only thought and gave no answer (its thinking is "
                                        "shown apart). Ask again, or turn thinking off: "
                                        "/config set model.think off.", level="warning")
                    break
                looping: str | None = None
                for call in step.calls:
                    async for item in self._run_tool_call(conversation, turn, call, failed):
                        if isinstance(item, _Loop):
                            looping = item.notice
                        else:
                            yield item
                    if looping:
                        break
                if looping:
                    self._audit_event("notice", {"text": looping}, conversation, turn.number)
                    yield ev.Notice(looping, level="warning")
                    break
            else:
                state = "done"
                yield ev.Notice(f"Stopped after {self.settings.max_steps} model requests in one turn "
                                "(config agent.max_steps).", level="warning")
        except asyncio.CancelledError:
            partial = "".join(step.text)
            try:
                await self._record_partial(conversation, turn, step, reason="stopped")
            finally:  # a second Esc while the partial is kept still ends the turn
                await to_the_end(self.store.end_turn(turn.id, "stopped", prompt_tokens, completion_tokens))
            self._audit_event("turn.ended", {"state": "stopped"}, conversation, turn.number)
            record = TurnRecord(conversation, turn.number, turn.id, prompt, partial or final_reply,
                                "stopped", started_at, _now())
            await self._after_turn(record)
            raise
        except (mb.EndpointError, ContextTooBig) as exc:
            partial = "".join(step.text)  # before _record_partial clears it: the after_turn record needs it
            for item in await self._record_partial(conversation, turn, step, reason=exc.kind):
                yield item
            message = str(exc) or exc.kind
            self._audit_event("error", {"kind": exc.kind, "message": message}, conversation, turn.number)
            await to_the_end(self.store.end_turn(turn.id, "error", prompt_tokens, completion_tokens, error=message))
            yield ev.Error(exc.kind, message)
            record = TurnRecord(conversation, turn.number, turn.id, prompt, partial or final_reply,
                                "error", started_at, _now(), error=message,
                                error_kind=exc.kind)
            for item in await self._after_turn(record):
                yield item
            yield ev.TurnEnded(turn.number, "error")
            return
        except BaseException as exc:  # the events abandoned at a yield (GeneratorExit), or a fault of wisp's
            await self._keep_partial(conversation, turn, step, exc)
            await self._end_abandoned(conversation, turn, exc)
            raise
        finally:
            for stream in step.streams():  # left unfinished (the events were abandoned): stop its writes
                await stream.abandon()
        # Esc as it ends: it still ends
        await to_the_end(self.store.end_turn(turn.id, state, prompt_tokens, completion_tokens))
        self._audit_event("turn.ended", {"state": state}, conversation, turn.number)
        record = TurnRecord(conversation, turn.number, turn.id, prompt, final_reply, state, started_at, _now())
        for item in await self._after_turn(record):
            yield item
        yield ev.TurnEnded(turn.number, state)

    async def _keep_partial(self, conversation: int, turn: Any, step: _Step, exc: BaseException) -> None:
        """Record what ``step`` had streamed when the turn was left by a way
        that records nothing else (its events abandoned at a yield, or a
        fault of wisp's), marked partial, with its audit event, as Esc
        records it. Never raises: a store that cannot write leaves the
        entries streaming, for the next start's recovery."""
        stopped = isinstance(exc, (asyncio.CancelledError, GeneratorExit, KeyboardInterrupt))
        try:
            await to_the_end(self._record_partial(conversation, turn, step, reason="stopped" if stopped else "error"))
        except BaseException:  # the write failed, or a second cancellation came when it had ended
            pass

    async def _end_abandoned(self, conversation: int, turn: Any, exc: BaseException) -> None:
        """End ``turn`` when the turn is left by a way that records nothing
        else: cancelled before the loop began, its events abandoned at a
        yield (``GeneratorExit``: a view that stopped reading), or a fault
        of wisp's own. The state is ``stopped``, or ``error`` with the
        fault's one line. The turn's entries so far stay. Never raises (the
        caller raises ``exc`` again): a store that cannot write (a damaged
        file) leaves the turn ``open`` for the next start's recovery; a
        second cancellation meanwhile still lets the write finish."""
        stopped = isinstance(exc, (asyncio.CancelledError, GeneratorExit, KeyboardInterrupt))
        state = "stopped" if stopped else "error"
        error = None if stopped else f"{type(exc).__name__}: {exc}"
        try:
            await to_the_end(self.store.end_turn(turn.id, state, error=error))
        except BaseException:  # the write failed, or a second cancellation came when it had ended
            pass
        try:
            self._audit_event("turn.ended", {"state": state}, conversation, turn.number)
        except Exception:
            pass

    async def _record_floor(self, conversation: int, floor: float | None) -> Any:
        """Raise the model's planning floor (:meth:`TurnContext.record_floor`); the
        calibration the next request is planned with, or ``None`` when the
        context cannot say (a failure here must not end the turn)."""
        record = getattr(self.context, "record_floor", None)
        if record is None:
            return None
        try:
            return await record(conversation, floor)
        except asyncio.CancelledError:
            raise
        except Exception:
            return None

    async def _safe_hook(self, hook: Callable[..., Awaitable[list[ev.AgentEvent]]],
                         *args: Any) -> list[ev.AgentEvent]:
        """Run a hook; a hook's failure becomes a warning, never a crash."""
        try:
            return list(await hook(*args) or [])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            name = getattr(hook, "__qualname__", repr(hook))
            return [ev.Notice(f"wisp: {name} failed: {exc}", level="warning")]

    def _audit_event(self, kind: str, payload: dict[str, Any], conversation: int, turn: int) -> None:
        if self.audit is not None:
            self.audit.write(kind, payload, conversation=conversation, turn=turn)

    async def _record_step_text(self, conversation: int, turn: Any, step: _Step, *,
                                cut: bool = False, partial: bool = False,
                                reason: str | None = None) -> list[ev.AgentEvent]:
        out: list[ev.AgentEvent] = []
        if step.thinking:
            await self._record(conversation, turn, "thinking", "".join(step.thinking),
                               audit_kind="thinking", stream=step.thought)
        text = "".join(step.text)
        if text or partial or cut or not step.calls:
            meta: dict[str, Any] = {}
            if cut:
                meta["cut"] = True
                if step.repeat is not None and step.repeat_in == "reply":
                    # where the repetition began, so that later requests send one copy (context.loops)
                    meta["repeat"] = {"start": max(0, len(text) - step.repeat.chars),
                                      "span": len(step.repeat.span), "copies": step.repeat.copies}
                if step.calls:  # never run: kept as the model wrote them, so nothing it said is hidden
                    meta["cut_calls"] = [call_as_written(c) for c in step.calls]
            if partial:
                meta["partial"] = True
                meta["reason"] = reason
            if step.calls and not cut:
                meta["before_tool_call"] = True
            entry = await self._record(conversation, turn, "reply", text, audit_kind="response",
                                       meta=meta or None, stream=step.reply)
            out.append(ev.ReplyRecorded(entry.number, text, cut=cut, partial=partial,
                                        repeated=cut and step.repeat is not None))
        step.text.clear()
        step.thinking.clear()
        step.reply = step.thought = None
        return out

    async def _record_partial(self, conversation: int, turn: Any, step: _Step,
                              reason: str) -> list[ev.AgentEvent]:
        if step.text or step.thinking:
            return await self._record_step_text(conversation, turn, step, partial=True, reason=reason)
        return []

    async def _run_tool_call(self, conversation: int, turn: Any, call: mb.ToolCallRequest,
                             failed: dict[str, _Failed] | None = None) -> AsyncIterator[Any]:
        """Record ``call``, run it, record its result; yields its events.

        ``failed`` holds the calls that failed in this turn (by
        :func:`wisp.core.context.loops.call_key`): the same call asked again
        is not run; its result says it already failed, and why (the model is
        told once); asked a third time (:data:`FAILED_CALL_LIMIT`), it is
        recorded with a result saying it was not run, and a :class:`_Loop`
        is yielded last: the turn ends with its notice. A small model
        otherwise repeats one failing call until ``agent.max_steps``."""
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        entry = await self._record(conversation, turn, "tool_call",
                                   json.dumps(arguments, ensure_ascii=False),
                                   audit_kind="tool.call", tool_name=call.name,
                                   tool_call_id=call.id, arguments=arguments)
        yield ev.ToolCall(entry.number, call.id, call.name, arguments)
        key = call_key(call.name, arguments, call.raw_arguments)
        before = failed.get(key) if failed is not None else None
        tool = self.tools.get(call.name)
        queue: asyncio.Queue[str] = asyncio.Queue()
        # the tool's streamed output (a command's) is written into its result entry as it comes
        output = StreamedEntry(self.store, conversation, turn.id, "tool_result",
                               tool_name=call.name, tool_call_id=call.id)
        loop_notice: str | None = None
        if before is not None:
            before.times += 1
            shown = call_text(call.name, arguments)
            if before.times >= FAILED_CALL_LIMIT:
                content = (f"error: not run: this same call failed earlier in this turn (entry {before.entry}) "
                           f"and was asked for {before.times} times; the turn ends here.")
                loop_notice = (f"The turn was ended: the model asked {before.times} times for the same call, "
                               f"{shown}, which failed the first time ({_short(before.error)}); wisp does not "
                               "run a failed call again in one turn. Say what to do instead, or ask differently.")
            else:
                content = (f"error: not run again: this same call already failed in this turn (entry "
                           f"{before.entry}): {_short(before.error)}. Change the arguments, use another tool, "
                           "or answer without it.")
            ok, meta = False, {"repeated_failure": before.entry}
        elif tool is None:
            names = ", ".join(self.tools.names) or "none"
            content, ok, meta = f"error: no tool named {call.name!r}; the tools are: {names}", False, {}
        elif call.raw_arguments is not None and not arguments:
            content, ok, meta = (f"error: the arguments were not valid JSON: {call.raw_arguments[:200]}; "
                                 "send a JSON object"), False, {}
        else:
            problem = check_arguments(tool, arguments)
            if problem:
                content, ok, meta = problem, False, {}
            else:
                ctx = ToolContext(workdir=self.workdir, config=self.config,
                                  conversation_id=conversation, turn=turn.number,
                                  emit=queue.put_nowait, approve=self.approver, call_entry=entry.number)
                task = asyncio.ensure_future(tool.run(arguments, ctx))
                try:
                    while not task.done():
                        getter = asyncio.ensure_future(queue.get())
                        finished, _ = await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
                        if getter in finished:
                            piece = getter.result()
                            await output.add(piece)
                            yield ev.ToolOutput(call.id, piece)
                        else:
                            getter.cancel()
                    while not queue.empty():
                        piece = queue.get_nowait()
                        await output.add(piece)
                        yield ev.ToolOutput(call.id, piece)
                    result = task.result()
                    content, ok, meta = result.content, result.ok, dict(result.meta)
                except (asyncio.CancelledError, GeneratorExit):
                    # Esc, or the turn's events abandoned: end the tool (run_command
                    # ends its process group) and record what it says
                    task.cancel()
                    await self._record_stopped_tool(conversation, turn, call, task, output)
                    raise
                except Exception as exc:  # a tool's own bug must not end the turn
                    content, ok, meta = f"error: {call.name} failed: {exc}", False, {}
        if not ok:
            meta["error"] = True
        result_entry = await self._record(conversation, turn, "tool_result", content,
                                          audit_kind="tool.result", tool_name=call.name,
                                          tool_call_id=call.id, meta=meta or None, stream=output)
        yield ev.ToolResult(result_entry.number, call.id, call.name, content, ok, meta)
        if not ok and before is None and failed is not None and not meta.get("stopped"):
            failed[key] = _Failed(result_entry.number, content)
        if loop_notice is not None:
            yield _Loop(loop_notice)

    async def _record_stopped_tool(self, conversation: int, turn: Any, call: mb.ToolCallRequest,
                                   task: "asyncio.Future[Any]", output: StreamedEntry) -> None:
        """Record the result of a tool call stopped by Esc: the tool's own
        result if it ends itself within 5 s of being cancelled (run_command
        ends its process group and says so), else the output it had streamed
        and a line saying it was stopped."""
        try:
            await asyncio.wait({task}, timeout=5.0)
        except asyncio.CancelledError:
            pass
        result = None
        if task.done() and not task.cancelled() and task.exception() is None:
            result = task.result()
        stopped = f"[{call.name} was stopped by the person (Esc)]"
        content = result.content if result is not None else "\n".join(filter(None, [output.text, stopped]))
        meta = dict(result.meta) if result is not None else {}
        meta.update(stopped=True, error=True)
        try:
            await self._record(conversation, turn, "tool_result", content, audit_kind="tool.result",
                               tool_name=call.name, tool_call_id=call.id, meta=meta, stream=output)
        except Exception:  # the store is closing with the app: the stop itself must still go through
            await output.abandon()


#: How much more than the server's own count a second try counts every layer (a margin: the
#: layers the server counted are not all the text wisp squeezes).
REFIT_MARGIN = 1.05


def refit_squeeze(exc: mb.BadRequest, planned: int | None, squeeze: float | None,
                  streamed: bool) -> float | None:
    """The factor a second try of a request counts every layer by, or ``None``
    for no second try. A request is tried again once, when the server refused
    it as over its window before anything was streamed, said how many tokens
    it counted (``exc.prompt_tokens``) and that is more than wisp's estimate
    (``planned``, tokens): the estimate undercounted this text (base64 runs
    about 1.45 × the estimate on SmolLM2's tokenizer). Issue "Real models, real
    work": "no request that cannot fit"."""
    if (streamed or squeeze != 1.0 or not exc.context_overflow or not exc.prompt_tokens or not planned
            or exc.prompt_tokens <= planned):
        return None
    return exc.prompt_tokens / planned * REFIT_MARGIN


#: The ratios a refit after a refusal for size without a count plans with, as multiples of the
#: first try's ratio: 1.5, then 2. wisp's estimate is within about 6 % on prose and code with
#: a common BPE tokenizer, but code with dense punctuation runs 1.1-1.3 × it, base64 about 1.45 ×
#: on SmolLM2's: two steps cover those even when the refusal bounds nothing. The first step is 1.5,
#: not less, because the request asks the reply's cap (``max_tokens``, by default the reserve) and a
#: server that counts it leaves the reserve no slack for a denser tokenizer: at 1.25 a 1.5 × server
#: refused the first refit too. Where the refusal bounds the count, the bound with :data:`REFIT_MARGIN` is
#: taken when larger (a tokenizer at 2.7 characters a token counts prose about 1.7 × the estimate).
REFIT_STEPS = (1.5, 2.0)


@dataclass
class _Refits:
    """One request's refits: ``tries`` (all of them), ``uncounted`` (after a
    refusal that gave no count) and ``first_ratio`` (the calibration ratio the
    first try was planned with)."""

    tries: int = 0
    uncounted: int = 0
    first_ratio: float | None = None


def uncounted_refusal(exc: mb.BadRequest, window: int) -> bool:
    """Whether ``exc`` refused a request for size without the server's count
    (an older llama.cpp says only "the request exceeds the available context
    size"): no ``prompt_tokens``, and no ``window`` smaller than the one wisp
    planned for (``window``, tokens; a smaller one is a window to fix, and the
    endpoint's own message says how)."""
    return bool(exc.context_overflow and not exc.prompt_tokens and not (exc.window and exc.window < window))


def refusal_floor(budget: int, estimate: int | None) -> float | None:
    """The least ratio of server tokens to wisp's estimate that a refusal for
    size shows: the request (``estimate`` tokens by wisp's uncalibrated count)
    did not fit ``budget`` (the window less wisp's reserve for the reply,
    tokens), as long as the server holds back no more than that reserve.
    ``None`` when there is no estimate."""
    if not estimate or budget <= 0:
        return None
    return budget / estimate


def uncounted_refit_ratio(refits: _Refits, window: int, estimate: int | None,
                          max_tokens: int | None) -> float | None:
    """The calibration ratio a refit after a refusal without a count plans
    with, or ``None`` after :data:`REFIT_STEPS` refits: the next step over the
    first try's ratio, or, when larger, the least ratio the refusal shows for
    a server that holds back only the ``max_tokens`` wisp asked (``window``
    and ``estimate`` in tokens) with :data:`REFIT_MARGIN`, that bound capped at
    the calibration's largest ratio (past it the server counts something else)."""
    from .context.calibration import MAX_RATIO

    if refits.tries >= len(REFIT_STEPS):
        return None
    first = refits.first_ratio or 1.0
    target = first * REFIT_STEPS[refits.tries]
    if estimate:
        bound = (window - (max_tokens or 0)) / estimate * REFIT_MARGIN
        target = max(target, min(bound, MAX_RATIO))
    return target


def uncounted_refusal_message(detail: str | None, window: int, planned: int, refits: int, ratio: float,
                              entry: int, advice: Callable[[int], str]) -> str:
    """What ends a turn whose request the server refused for size without
    saying its count, after ``refits`` refits: what happened (``window`` the
    window wisp planned for, ``planned`` the last try in tokens by wisp's
    count, ``ratio`` the last try's calibration ratio), that the prompt is kept
    (``entry``), and what the person can do. It never advises the window the
    endpoint already has: the advice is for a window larger than ``window``
    (``advice(tokens)`` as :meth:`wisp.core.model.link.ModelLink.window_advice`)."""
    said = f" (\"{detail}\")" if detail else ""
    tried = (f", and wisp fitted it again {refits} time{'s' if refits != 1 else ''} with a larger margin, the "
             f"last counting {ratio:.2f} × its estimate" if refits else "")
    return (f"The server refused the request as larger than its context window{said} without saying how many "
            f"tokens it counted, though wisp planned it to fit the {window:,}-token window (about {planned:,} "
            f"tokens){tried}: the server counts more tokens than wisp estimates, or runs a smaller window than "
            f"{window:,}. Your prompt is kept (/show entry {entry}), and this model's next requests are planned "
            "with the denser count. To go on: /compact (wisp compact in a shell) to summarise older turns, send "
            f"a shorter prompt, or give the server a larger window than {window:,} tokens: "
            f"{advice(window + 1)}.")


@dataclass(frozen=True)
class _Loop:
    """Yielded by :meth:`Agent._run_tool_call` (never past the agent): the turn ends with ``notice``."""

    notice: str


def _given_text(messages: list[dict[str, Any]]) -> str:
    """What a request gives the model to quote: its user and tool messages' text, one string (a
    repetition found there is the model quoting it: :class:`~wisp.core.model.repetition.RepeatWatch`)."""
    parts: list[str] = []
    for m in messages:
        if m.get("role") in ("user", "tool"):
            content = m.get("content")
            if isinstance(content, list):
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            parts.append(str(content or ""))
    return "\n".join(parts)


def _short(text: str, limit: int = 200) -> str:
    """``text`` on one line, at most ``limit`` characters."""
    one = " ".join((text or "").split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


async def _close(stream: Any) -> None:
    """Close an endpoint's stream (an async generator) left before its end: its
    HTTP response is closed, so the server stops generating."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        try:
            await aclose()
        except (mb.EndpointError, RuntimeError):
            pass


def cap_notice(max_tokens: int | None, cap: int | None, calls: str = "") -> str:
    """What a reply that ended at its output limit says: which limit (``cap``
    tokens, from ``model.max_tokens`` when set, else the request's reserve:
    :func:`reply_cap`), that it is kept cut, and the key that raises it."""
    if max_tokens:
        which = (f"model.max_tokens ({max_tokens:,} tokens; raise it with `wisp config set model.max_tokens N`, "
                 "in chat /config set model.max_tokens N)")
    elif cap:
        which = (f"the {cap:,} tokens the request kept for the reply (context.reserve; model.max_tokens is "
                 "not set: raise the cap with `wisp config set model.max_tokens N`, in chat "
                 "/config set model.max_tokens N)")
    else:
        which = ("the server's own cap, or the end of the model's window (model.max_tokens is not set; "
                 "`wisp config set model.max_tokens N` sets one)")
    return f"The reply stopped at its output limit, {which}: it is kept, cut, not finished. {calls}Ask it to go on."


def repeat_notice(repeat: Repeat, where: str, min_chars: int, calls: str = "") -> str:
    """What a reply stopped for repeating itself says: what repeated, that
    it is kept, and the key that sets the rule (``model.repeat_stop_chars``,
    ``min_chars`` characters)."""
    part = "its thinking" if where == "thinking" else "its end"
    return (f"The reply was stopped: {part} repeated a {repeat.describe()}, the sign of a model in a loop. "
            f"It is kept, cut, up to there. {calls}Ask again or rephrase; a repetition over "
            f"model.repeat_stop_chars ({min_chars:,} characters) stops a reply (0 never stops one: "
            "`wisp config set model.repeat_stop_chars 0`).")


def call_as_written(call: mb.ToolCallRequest) -> str:
    """A tool call as the model wrote it: its raw text when it did not decode
    (a block cut by the output limit), else ``name(arguments as JSON)``."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return f"{call.name}({json.dumps(call.arguments, ensure_ascii=False)})"


def _now() -> str:
    return utc_now("milliseconds")


def truncation_warning(reported: int | None, estimated: int, advice: Callable[[int], str], *,
                       window: int | None = None) -> str | None:
    """A warning when the endpoint counted far fewer prompt tokens than wisp
    sent (it silently dropped the start of the prompt), else None.

    ``reported`` and ``estimated`` in tokens; ``advice(tokens)`` says how to
    raise the window for the endpoint in use
    (:meth:`wisp.core.model.link.ModelLink.window_advice`). Source: issue
    "wisp runs end to end", "Silent truncation".
    """
    if reported is None or reported <= 0:
        return None
    if reported >= estimated * TRUNCATION_RATIO or estimated - reported < TRUNCATION_MIN_GAP:
        return None
    if window and estimated <= window:  # wisp sent a window that holds it: the server must be running smaller
        fix = (f"wisp asked for a window of {window:,} tokens; the server may be running with a smaller one. "
               f"{advice(estimated)}")
    else:
        fix = advice(estimated)
    return (f"The endpoint counted {reported:,} prompt tokens but wisp sent about {estimated:,}: "
            f"it probably dropped the start of the conversation. {fix}.")
