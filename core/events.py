"""Typed events that one turn of the agent loop yields.

The agent (:mod:`wisp.core.agent`) yields these in order; the TUI only
renders them and ``wisp ask`` only prints them (DESIGN.md, "How data flows").
Every event that stands for something recorded carries the entry number it
was stored under, so a view can link back to ``/show entry N``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Union


@dataclass(frozen=True)
class TurnStarted:
    """The prompt was recorded (store and audit) as entry ``entry`` of turn
    ``turn``. ``supersedes`` is the number of the turn this one asks again
    in place of (``/retry``, ``/edit``: issue 16), or ``None``."""

    conversation: int
    turn: int
    entry: int
    prompt: str
    supersedes: int | None = None


@dataclass(frozen=True)
class TextDelta:
    """A piece of the reply's visible text, as it streams."""

    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    """A piece of the model's reasoning; shown apart, never part of the reply."""

    text: str


@dataclass(frozen=True)
class ReplyRecorded:
    """A reply (or the text before a tool call) was stored as entry ``entry``.

    ``cut`` is true when the model stopped at the output limit
    (``done_reason``/``finish_reason`` ``length``) or wisp stopped it for
    repeating itself, and ``repeated`` then says it was the repetition
    (:mod:`wisp.core.model.repetition`); ``partial`` when an error or a stop
    ended the stream early.
    """

    entry: int
    text: str
    cut: bool = False
    partial: bool = False
    repeated: bool = False


@dataclass(frozen=True)
class ToolCall:
    """The model called a tool; recorded as entry ``entry`` before it runs."""

    entry: int
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolOutput:
    """A piece of a running tool's output, as it streams (e.g. a command's stdout)."""

    call_id: str
    text: str


@dataclass(frozen=True)
class ToolResult:
    """A tool's result, recorded as entry ``entry``. ``ok`` is false for an error."""

    entry: int
    call_id: str
    name: str
    content: str
    ok: bool = True
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """Tokens the endpoint reported for one request (``prompt``, ``completion``),
    and wisp's own estimate of the prompt it sent (``estimated_prompt``, tokens)."""

    prompt: int | None
    completion: int | None
    estimated_prompt: int
    #: The estimate times the model's calibration (tokens): what wisp plans with.
    calibrated_prompt: int | None = None
    #: Prompt tokens the server took from its prompt cache (``None`` when it does not say).
    cached: int | None = None
    #: Prompt tokens the server had to evaluate for this request: ``prompt − cached``
    #: (issue "Real models, real work": "the prompt-eval tokens per turn in --json usage").
    evaluated: int | None = None


@dataclass(frozen=True)
class Notice:
    """Something the person should know that is not an error: a wait while the
    server loads the model, a prompt the endpoint silently truncated, a reply
    cut at the output limit. ``level`` is ``"info"`` or ``"warning"``."""

    text: str
    level: str = "info"
    #: Notices with the same key stand for one changing state (e.g. ``"wait"``
    #: while a server loads the model): a view shows only the latest.
    key: str | None = None
    #: A state that is over once the reply goes on (a wait): a view that can
    #: takes it away when the next text, tool call or ending comes.
    transient: bool = False


@dataclass(frozen=True)
class Error:
    """The turn could not go on. ``kind`` is the endpoint error's kind
    (``unreachable``, ``timeout``, ``model_not_found``, ``bad_request``,
    ``server_error``, ``malformed``, ``stream_error``, ``disconnected``),
    ``agent``, ``busy`` (another wisp runs a turn of the conversation) or
    ``moved`` (another wisp added turns since the view last showed it);
    ``message`` is one line saying what to do."""

    kind: str
    message: str


@dataclass(frozen=True)
class FactChanged:
    """A fact changed (issue "Layered context"): ``action`` is ``recorded``,
    ``forgotten`` or ``kept``; ``fact`` its version id (``c3``); ``source``
    ``person``, ``tool`` or ``model``; ``proposal`` for a model's note not
    yet kept. Views refresh their facts and task from the store."""

    conversation: int
    fact: str
    subject: str
    name: str
    value: str
    source: str
    action: str = "recorded"
    proposal: bool = False


@dataclass(frozen=True)
class SummaryChanged:
    """A running summary version was recorded: ``version`` and the turns it
    ``covers`` (they may leave the window)."""

    conversation: int
    version: int
    covers: tuple[int, ...] = ()


@dataclass(frozen=True)
class SideCallCost:
    """What wisp's own side calls of one kind cost around this turn (issue
    "The model's own bookkeeping"): ``kind`` (``distiller``, ``assessment``),
    ``calls``, ``tokens`` (estimated, prompt and answer) and ``seconds``."""

    kind: str
    calls: int
    tokens: int
    seconds: float


@dataclass(frozen=True)
class McpServerFailed:
    """An MCP server could not answer a tool call: it is missing, crashed,
    timed out or sent something the protocol does not allow (issue 15,
    "Lifecycle"). The model got a tool result saying so and the turn goes
    on; a view shows ``server`` and ``message`` (one line) in its status."""

    server: str
    message: str


@dataclass(frozen=True)
class TurnEnded:
    """The turn is over. ``state`` is ``done``, ``stopped``, ``error`` or ``cut``."""

    turn: int
    state: str


AgentEvent = Union[
    TurnStarted, TextDelta, ThinkingDelta, ReplyRecorded, ToolCall, ToolOutput,
    ToolResult, Usage, Notice, Error, TurnEnded, FactChanged, SummaryChanged, SideCallCost, McpServerFailed,
]


def event_to_dict(event: AgentEvent) -> dict[str, Any]:
    """The event as a JSON-ready dict with its type under ``"event"``
    (snake case of the class name), as ``wisp ask --json`` prints it."""
    name = type(event).__name__
    snake = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    return {"event": snake, **asdict(event)}
