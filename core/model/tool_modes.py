"""How tools reach the model: natively (the request's ``tools``) or by wisp's prompted protocol.

Some servers drop ``tools`` from the request without a word: llama-cpp-python's
server without a function-calling chat format, which is what the embedded
default runs (issue 10, "Tools reach the model, on every server"). There the
tools must travel in the prompt. :class:`ToolModeEndpoint` wraps any endpoint
and does that when it has to; the agent keeps sending neutral messages and
tool schemas, and keeps receiving ``StreamText`` and ``ToolCallRequest`` events.

Modes (config ``model.tool_mode``):

* ``native``: the schemas go in the request's ``tools``, as before.
* ``prompted``: the schemas are described in the system prompt, with worked
  exchanges (:func:`wisp.core.model.prompted.to_prompted_messages`); the
  request carries no ``tools``; earlier calls and results travel as text; the
  reply is read by :class:`~wisp.core.model.prompted.PromptedParser`, which
  keeps ``<tool_call>`` blocks out of the shown text and turns them into
  ordinary tool calls. On a server that takes llama.cpp's ``grammar`` (the
  embedded one), a block that came out malformed (not JSON, a tool that was
  not offered, a required argument missing) is written again at once under
  :func:`~wisp.core.model.prompted.tool_grammar` (``allow_text=False``), which
  only allows a well-formed call: the server has the prompt in its cache, so
  this costs the few tokens of the call. (Sending the grammar with every
  request gives the same calls but makes every text reply about 1.3 times
  slower: llama.cpp checks each token against it. Text replies are most
  replies; a malformed block is the rarer case.)
* ``auto`` (the default): prompted where the server drops tools, native
  elsewhere. The embedded server knows its own (its template drops them);
  another OpenAI-compatible server is asked once (:meth:`probe_tools`: the
  prompt tokens it counts with and without one tool); Ollama is taken as
  native, and a model it says "does not support tools" switches to prompted.

Measured on SmolLM2-135M (benchmarks/tool_calls_smollm2.py, 30 prompts that
call for a tool, 6 that do not): the function-calling chat format gave 29/30
well-formed calls but answered after a tool result 0 times in 29 and called a
tool for 5 of the 6 prompts that needed none (its grammar forces a call or an
empty message); the prompted protocol gave 7/30 well-formed calls as written,
16/30 with the rewrite, answered after every result and made no false call.
So the embedded server runs the prompted protocol.

Usage (the session does this)::

    endpoint = ToolModeEndpoint(resolved.endpoint, config.get("model.tool_mode"))
    mode = await endpoint.mode()                # "native" | "prompted"
    layer = await endpoint.tool_layer(schemas)  # what the model is given for the tools
    async for event in endpoint.stream_chat(messages, schemas, options): ...
    endpoint.last_layer                         # the tool layer as the last request sent it
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from .base import (
    BadRequest, ChatOptions, Done, EndpointError, Message, StreamEvent, StreamText, ToolCallRequest, ToolSchema,
)
from .prompted import (
    PromptedCall, PromptedParser, call_key, call_problem, example_messages, parse_reply, quoted_calls, render_call,
    render_tools, to_prompted_messages,
    tool_grammar,
)

MODES = ("native", "prompted", "auto")


@dataclass(frozen=True)
class ToolLayer:
    """The tools as a request gives them to the model.

    ``mode`` is ``"native"`` or ``"prompted"``; ``text`` is what the model
    reads of them: the schemas as JSON (native; the server's template renders
    them in its own way) or the text added to the system message (prompted);
    ``messages`` are the worked exchanges the prompted protocol puts before
    the conversation (``[]`` for native); ``grammar`` is the GBNF grammar a
    malformed block is rewritten under, on servers that take one (it is not
    part of the prompt, and not sent with the request itself).
    """

    mode: str
    text: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    grammar: str | None = None

    @property
    def prompt_text(self) -> str:
        """Everything of the layer that is in the prompt, as one text (for counting)."""
        return "\n".join([self.text] + [str(m.get("content") or "") for m in self.messages])


class ToolModeEndpoint:
    """An endpoint that gives the tools to the model the way ``setting`` says
    (``native``, ``prompted`` or ``auto``; see the module doc). Everything else
    is the wrapped endpoint's: attributes and methods not defined here are
    read from ``inner``. ``setting`` may be changed between requests
    (``/config set model.tool_mode``). ``last_layer`` is the tool layer of the
    last request (``None`` before one, or when it offered no tools)."""

    def __init__(self, inner: Any, setting: str | None = "auto") -> None:
        self.inner = inner
        self.setting = setting if setting in MODES else "auto"
        self._auto: str | None = None
        self.last_layer: ToolLayer | None = None
        #: How many malformed blocks were written again under the grammar (for measuring).
        self.rewrites = 0
        self.rewritten: list[PromptedCall] = []

    # -- the wrapped endpoint's identity ---------------------------------------

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def base_url(self) -> str:
        return self.inner.base_url

    @property
    def model(self) -> str:
        return self.inner.model

    @model.setter
    def model(self, value: str) -> None:
        self.inner.model = value

    def __repr__(self) -> str:
        return f"ToolModeEndpoint({self.inner!r}, {self.setting!r})"

    async def aclose(self) -> None:
        await self.inner.aclose()

    # -- the mode ---------------------------------------------------------------

    @property
    def known_mode(self) -> str | None:
        """The mode when it is known without asking the server, else ``None``."""
        if self.setting != "auto":
            return self.setting
        if self._auto:
            return self._auto
        dropped = getattr(self.inner, "tools_dropped", None)
        if dropped is not None:
            return "prompted" if dropped else "native"
        if self.inner.provider != "openai":
            return "native"
        return None

    async def mode(self) -> str:
        """``"native"`` or ``"prompted"``: the setting, or for ``auto`` what the
        server needs (an OpenAI-compatible server that has not said is probed
        once; one that cannot tell is taken as native)."""
        known = self.known_mode
        if known is not None:
            return known
        reached = await self.inner.probe_tools()
        self._auto = "prompted" if reached is False else "native"
        return self._auto

    async def tool_layer(self, schemas: list[ToolSchema] | None) -> ToolLayer | None:
        """The tool layer a request offering ``schemas`` would carry (``None`` for no tools)."""
        if not schemas:
            return None
        return self._layer(await self.mode(), schemas)

    def layer_now(self, schemas: list[ToolSchema] | None) -> ToolLayer | None:
        """The tool layer the next request offering ``schemas`` carries, without
        asking the server: the known mode (:attr:`known_mode`), or ``native``
        while an OpenAI-compatible server has not been probed yet (the first
        request probes it). ``None`` for no tools. For ``/inspect context`` and
        the fitting of each request (issue "Real models, real work": "shows the
        tool layer as it was actually sent")."""
        if not schemas:
            return None
        return self._layer(self.known_mode or "native", schemas)

    def _layer(self, mode: str, schemas: list[ToolSchema]) -> ToolLayer:
        return make_layer(mode, schemas, accepts_grammar=bool(getattr(self.inner, "accepts_grammar", False)))

    # -- streaming ----------------------------------------------------------------

    async def stream_chat(
        self, messages: list[Message], tools: list[ToolSchema] | None, options: ChatOptions | None = None
    ) -> AsyncIterator[StreamEvent]:
        """Stream one reply with the tools given the chosen way. Events are the
        wrapped endpoint's; in prompted mode, ``StreamText`` holds only the shown
        text, each block becomes a ``ToolCallRequest`` right before ``Done``
        (after a malformed one was rewritten, where the server allows;
        ``raw_arguments`` is set when it is still malformed), and ``Done`` says
        ``tool_calls`` when the reply made a call. Raises what the wrapped
        endpoint raises."""
        mode = await self.mode()
        self.last_layer = self._layer(mode, tools) if tools else None
        if mode == "native":
            sent_any = False
            try:
                async for event in self.inner.stream_chat(messages, tools, options):
                    sent_any = True
                    yield event
                return
            except BadRequest as exc:
                # Ollama: a model whose template has no tools refuses them outright
                if sent_any or not tools or self.setting != "auto" or "support tools" not in str(exc).lower():
                    raise
            self._auto = "prompted"
            self.last_layer = self._layer("prompted", tools)
        async for event in self._prompted(messages, tools, options):
            yield event

    async def _prompted(
        self, messages: list[Message], tools: list[ToolSchema] | None, options: ChatOptions | None
    ) -> AsyncIterator[StreamEvent]:
        options = options or ChatOptions()
        sent = to_prompted_messages(messages, tools)
        parser = PromptedParser()
        calls: list[PromptedCall] = []
        async for event in self.inner.stream_chat(sent, None, options):
            if isinstance(event, StreamText):
                items = parser.feed(event.text)
            elif isinstance(event, Done):
                items = parser.flush()
            else:
                yield event
                continue
            for item in items:
                if isinstance(item, PromptedCall):
                    calls.append(item)
                else:
                    yield StreamText(item.text)
            if isinstance(event, Done):
                # a reply cut by its output limit is not run (the agent shows it), so its cut block is not
                # written again: the rewrite would be cut at the same limit
                if tools and event.reason != "length" and any(call_problem(c, tools) for c in calls):
                    calls = await self._rewrite(sent, tools, options, calls)
                self.rewritten = calls
                echoed = quoted_calls(messages) if calls else set()
                for call in [c for c in calls if call_key(c.name, c.arguments) in echoed]:
                    # copied from a tool result, not the model's own call: shown as text, never run
                    yield StreamText(f"\n{render_call(call.name, call.arguments)}\n[wisp did not run this call: "
                                    "it is copied from a tool result, not one the model made]\n")
                calls = [c for c in calls if call_key(c.name, c.arguments) not in echoed]
                for call in calls:
                    yield ToolCallRequest(id="call_" + uuid.uuid4().hex[:12], name=call.name,
                                          arguments=dict(call.arguments), raw_arguments=call.raw)
                yield Done("tool_calls" if calls and event.reason == "stop" else event.reason)

    async def _rewrite(self, sent: list[Message], tools: list[ToolSchema], options: ChatOptions,
                       calls: list[PromptedCall]) -> list[PromptedCall]:
        """The calls with each malformed one written again under the call-only grammar
        (one request, on the prompt the server just cached); unchanged when the
        server takes no grammar or the rewrite fails."""
        layer = self.last_layer
        if layer is None or not layer.grammar:
            return calls
        fixed = dataclasses.replace(options, extra={**(options.extra or {}), "grammar": layer.grammar})
        text = ""
        try:
            async for event in self.inner.stream_chat(sent, None, fixed):
                if isinstance(event, StreamText):
                    text += event.text
        except EndpointError:
            return calls
        again = [c for c in parse_reply(text)[1] if call_problem(c, tools) is None]
        if not again:
            return calls
        self.rewrites += 1
        out, used = [], False
        for call in calls:  # the first malformed call takes the rewritten one; others are dropped
            if call_problem(call, tools) is None:
                out.append(call)
            elif not used:
                out.append(again[0])
                used = True
        return out


def make_layer(mode: str, schemas: list[ToolSchema], *, accepts_grammar: bool = False) -> ToolLayer:
    """The :class:`ToolLayer` of ``schemas`` in ``mode`` (``native`` or
    ``prompted``); ``accepts_grammar`` adds the call-only grammar a malformed
    prompted block is rewritten under."""
    if mode == "prompted":
        grammar = tool_grammar(schemas, allow_text=False) if accepts_grammar else None
        return ToolLayer("prompted", render_tools(schemas), example_messages(schemas), grammar)
    return ToolLayer("native", json.dumps(schemas, ensure_ascii=False))


def apply_tool_mode(endpoint: Any, setting: str | None) -> ToolModeEndpoint:
    """``endpoint`` wrapped so that tools reach the model the way ``setting`` says
    (an endpoint already wrapped gets the new setting)."""
    if isinstance(endpoint, ToolModeEndpoint):
        endpoint.setting = setting if setting in MODES else "auto"
        return endpoint
    return ToolModeEndpoint(endpoint, setting)


__all__ = ["MODES", "ToolLayer", "ToolModeEndpoint", "apply_tool_mode", "make_layer"]
