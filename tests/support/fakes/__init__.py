"""Fake model endpoints for tests: real HTTP servers on 127.0.0.1 (see :mod:`tests.support.fakes.servers`)."""

from .servers import (
    FakeOllama,
    FakeOpenAI,
    FakeServer,
    fault,
    make_server,
    pause,
    raw,
    reply,
    text,
    thinking,
    tool_call,
    tool_calls,
    trickled,
)

__all__ = [
    "FakeOllama",
    "FakeOpenAI",
    "FakeServer",
    "fault",
    "make_server",
    "pause",
    "raw",
    "reply",
    "text",
    "thinking",
    "tool_call",
    "tool_calls",
    "trickled",
]
