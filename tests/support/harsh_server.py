"""A fake OpenAI-compatible server that behaves like an older llama.cpp ``llama-server``.

wisp estimates tokens itself (:mod:`wisp.core.tokens`) and corrects the
estimate with the server's counts: the usage in the stream, ``/tokenize``,
or the ``n_prompt_tokens`` of a refusal for size. An older llama.cpp gives
none of them, and :class:`OldLlamaCpp` is that harsh case:

- it counts a request's prompt with a tokenizer denser than wisp's estimate:
  ``ceil(characters / chars_per_token)`` tokens a message's text (its
  content, and the JSON of its tool calls), plus ``template_tokens`` a
  message for the chat template, plus the tools' JSON at the same rate. At
  the default 2.7 characters a token that is about 1.5-1.7 × wisp's estimate
  of prose and code;
- it refuses a request whose counted prompt does not leave room in its
  ``window`` (tokens) for the ``max_tokens`` the request asks (none asked:
  no room held back, as llama.cpp refuses a prompt of ``n_ctx`` tokens or
  more) plus ``reserve`` (extra tokens it holds back, for a server harsher
  still). The refusal is HTTP 400 with only
  ``{"error": {"code": 400, "message": "the request exceeds the available
  context size, try increasing it", "type": "exceed_context_size_error"}}``:
  no ``n_prompt_tokens``, no ``n_ctx``. A refused request takes no script
  entry, so a test pushes one reply for each request it expects answered;
- it sends no usage, in a stream (even when ``stream_options.include_usage``
  asks) or in a whole reply, and answers wisp's tool probe without usage too
  (wisp then takes tools as reaching the model);
- it has no count endpoint: ``/tokenize`` and ``/extras/tokenize/count``
  answer 404 (as any path it does not serve).

So wisp cannot count exactly against it; only a refusal tells it that it
planned too much.

    with OldLlamaCpp(window=4096, chars_per_token=2.7) as srv:
        srv.push(reply(text("Hello.")))
        ...
        srv.chat_bodies      # every chat request, refused ones included
        srv.refusals         # [{"counted": 4512, "asked": 0, "window": 4096}, …]
        srv.counted          # the counted prompt tokens of every chat request, in order
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable

from .fakes.servers import FakeOpenAI, _Handler

__all__ = ["OldLlamaCpp", "REFUSAL", "REFUSAL_MESSAGE"]

REFUSAL_MESSAGE = "the request exceeds the available context size, try increasing it"
#: The whole body of the refusal (HTTP 400), as an older llama.cpp sends it.
REFUSAL = {"error": {"code": 400, "message": REFUSAL_MESSAGE, "type": "exceed_context_size_error"}}


class OldLlamaCpp(FakeOpenAI):
    """An older llama.cpp server (see the module doc). ``window`` is its
    ``n_ctx`` (tokens); ``chars_per_token`` its tokenizer's density;
    ``template_tokens`` what its chat template adds a message (tokens);
    ``reserve`` tokens it holds back beyond the request's ``max_tokens``.
    Everything else (``push``, ``chat_bodies``, the script entries) is
    :class:`~tests.support.fakes.servers.FakeOpenAI`'s."""

    def __init__(self, script: Iterable[dict] | None = None, *, window: int = 4096,
                 chars_per_token: float = 2.7, template_tokens: int = 5, reserve: int = 0, **kw: Any) -> None:
        kw.setdefault("context_length", window)
        super().__init__(script, tokenize=None, **kw)
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be positive")
        self.window = window
        self.chars_per_token = chars_per_token
        self.template_tokens = template_tokens
        self.reserve = reserve
        #: Every refused chat request: ``{"counted", "asked", "window"}`` (tokens; ``asked`` its max_tokens).
        self.refusals: list[dict[str, int]] = []
        #: The prompt tokens this server counted for each chat request, refused or not, in order.
        self.counted: list[int] = []

    # counting
    def _tokens(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token) if text else 0

    def count(self, body: Any) -> int:
        """The prompt tokens of a chat request ``body`` by this server's tokenizer."""
        if not isinstance(body, dict):
            return 0
        total = 0
        for message in body.get("messages") or []:
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            if isinstance(content, list):  # parts: count their text
                content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            text = str(content or "")
            if message.get("tool_calls"):
                text += json.dumps(message["tool_calls"])
            total += self._tokens(text) + self.template_tokens
        if body.get("tools"):
            total += self._tokens(json.dumps(body["tools"]))
        return total

    def refuses(self, counted: int, asked: int) -> bool:
        """Whether a prompt of ``counted`` tokens asking ``asked`` for its reply is refused."""
        return counted >= self.window or counted + asked + self.reserve > self.window

    # requests
    def _handle(self, h: _Handler, method: str, path: str, body: Any) -> None:
        if method == "POST" and path == self.chat_path and isinstance(body, dict):
            counted = self.count(body)
            asked = int(body.get("max_tokens") or 0)
            probe = body.get("user") == "wisp-probe"
            with self._lock:
                if not probe:
                    self.counted.append(counted)
            if self.refuses(counted, asked):
                with self._lock:
                    if probe:  # a probe is kept apart, as FakeOpenAI keeps it
                        self.requests = [r for r in self.requests if r["body"] is not body]
                        self.probes.append(body)
                    else:
                        self.refusals.append({"counted": counted, "asked": asked, "window": self.window})
                h._send_json(400, REFUSAL)
                return
        super()._handle(h, method, path, body)

    @property
    def accepted_bodies(self) -> list[Any]:
        """The chat requests it answered (``chat_bodies`` less the refused ones)."""
        with self._lock:
            bodies = [r["body"] for r in self.requests if r["path"].split("?")[0] == self.chat_path]
            counted = list(self.counted)
        return [b for b, n in zip(bodies, counted) if not self.refuses(n, int(b.get("max_tokens") or 0))]

    # no usage anywhere
    def probe_reply(self, body: dict) -> dict:
        answer = super().probe_reply(body)
        answer.pop("usage", None)
        return answer

    def send_finish(self, h: _Handler, entry: dict, body: Any) -> None:
        super().send_finish(h, {k: v for k, v in entry.items() if k != "usage"}, body)

    def whole_reply(self, entry: dict, body: Any) -> Any:
        answer = super().whole_reply(entry, body)
        answer.pop("usage", None)
        return answer
