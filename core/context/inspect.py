"""``/inspect context`` and ``wisp inspect context``: the next request, layer by layer.

Issue "Layered context", "Seeing it, at no model cost": one row per layer
with its tokens, its share of the window, its items and a hint where one
helps (``/task clear frees 40 tokens``); the tokens left; and the exact
messages of the next request, as sent: in the prompted tool protocol, with
the tools written into the messages (issue "Real models, real work": "shows
the tool layer as it was actually sent"). Building the report composes the
context from the store and makes no model request; where the server can count
(llama.cpp's tokenizer), the layers with a text of their own are counted
exactly, and each figure says how it was got: ``exact``, ``calibrated`` or
``estimated`` (same issue, "Exact tokens").
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from .composer import ComposedContext
from .facts import fact_line
from .summary import turn_ranges, turns_named
from .usage import TurnUsage
from ..tokens import estimate_tokens

__all__ = ["LayerRow", "ContextReport", "report_from", "inspect_context"]


@dataclass(frozen=True)
class LayerRow:
    """One layer in the report: ``number`` (1–8 in the order of the request;
    ``None`` for the project instructions, which sit with the rules),
    ``key``, ``name``, ``tokens``, ``share`` (of the window, 0–1),
    ``items``, ``hint`` and ``how`` the tokens were got: ``exact`` (the
    server's tokenizer), ``calibrated`` (wisp's estimate times the model's
    calibration) or ``estimated``."""

    number: int | None
    key: str
    name: str
    tokens: int
    share: float
    items: int
    hint: str = ""
    how: str = "estimated"

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "key": self.key, "name": self.name, "tokens": self.tokens,
                "share": round(self.share, 4), "items": self.items, "hint": self.hint, "how": self.how}


#: Subjects observed again before every request: forgetting them frees nothing for long.
OBSERVED_SUBJECTS = ("workdir", "branch")

_NUMBERS = {"system": 1, "instructions": None, "tools": 2, "summary": 3, "older": 4, "recent": 5, "facts": 6,
            "task": 7, "current": 8}


@dataclass
class ContextReport:
    """The report of a conversation's next request (see the module doc).

    ``rows`` (:class:`LayerRow`), ``window``, ``reserve``, ``budget``,
    ``total``, ``tokens_left`` in tokens; ``messages`` and ``tools`` exactly
    as the next request sends them; ``calibration`` (ratio and samples);
    ``left`` (turns out of the window, covered by the summary) and
    ``must_leave`` (turns that should leave but have no summary yet);
    ``last_turn``, what the server evaluated on the conversation's last turn
    (:class:`~wisp.core.context.usage.TurnUsage`; ``None`` before any), so
    the next request's size can be read beside what its cache saved.
    """

    conversation: int | None
    model: str | None
    window: int
    window_source: str
    reserve: int
    budget: int
    total: int
    tokens_left: int
    ratio: float
    samples: int
    rows: list[LayerRow]
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    must_leave: list[int] = field(default_factory=list)
    #: wisp's own side calls around the last turn (the fact distiller, the assessment), one line each.
    side_calls: list[str] = field(default_factory=list)
    #: How the request gives the tools to the model: ``native`` (the ``tools`` field) or ``prompted``.
    tool_mode: str = "native"
    #: ``context.reserve`` as configured when it was capped at a quarter of the window, else ``None``.
    reserve_asked: int | None = None
    #: The prompt tokens the server evaluated on the last turn, and its cache's part.
    last_turn: TurnUsage | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``wisp inspect context --json``)."""
        return {
            "conversation": self.conversation, "model": self.model, "window": self.window,
            "window_source": self.window_source, "reserve": self.reserve, "reserve_asked": self.reserve_asked,
            "budget": self.budget,
            "total": self.total, "tokens_left": self.tokens_left,
            "calibration": {"ratio": round(self.ratio, 4), "samples": self.samples},
            "layers": [r.to_dict() for r in self.rows], "left_window": self.left,
            "must_leave": self.must_leave, "side_calls": self.side_calls, "tool_mode": self.tool_mode,
            "counted": self.counted(), "fitting": self.fitting() or None,
            "last_turn": self.last_turn.to_dict() if self.last_turn is not None else None,
            "request": {"messages": self.messages, "tools": self.tools},
        }

    def request_json(self) -> str:
        """The next request's messages and tools as indented JSON."""
        return json.dumps({"messages": self.messages, "tools": self.tools}, ensure_ascii=False, indent=2)

    def counted(self) -> str:
        """How the total was got: ``exact`` when every layer was counted by the
        server's tokenizer, ``calibrated`` or ``estimated`` when none was, else
        ``partly exact``."""
        hows = {r.how for r in self.rows if r.tokens}
        if hows == {"exact"}:
            return "exact"
        if "exact" in hows:
            return "partly exact"
        return "calibrated" if "calibrated" in hows else "estimated"

    def headline(self) -> str:
        """One line: window, reserve, budget, used and left, and how they were counted."""
        cal = f"calibration ×{self.ratio:.2f} from {self.samples} requests" if self.samples else "not calibrated yet"
        exact = [r.name for r in self.rows if r.how == "exact" and r.tokens]
        if exact:
            cal = f"exact (the server's tokenizer): {', '.join(exact)}; the others: {cal}"
        side = f"; side calls around the last turn: {'; '.join(self.side_calls)}" if self.side_calls else ""
        last = f"; {self.last_turn.line()}" if self.last_turn is not None else ""
        capped = (f" (context.reserve {self.reserve_asked:,} is capped at a quarter of the window)"
                  if self.reserve_asked else "")
        return (f"window {self.window:,} tokens ({self.window_source}) − reserve {self.reserve:,}{capped} = budget "
                f"{self.budget:,}; next request ≈ {self.total:,} tokens; {self.tokens_left:,} left{last}; {cal}{side}"
                + (f"; {self.fitting()}" if self.fitting() else ""))

    def fitting(self) -> str:
        """What sending will do first when the record as it stands is over the
        budget (``""`` when it fits): the request shown here is not the one
        sent then, and the person is told so rather than shown a request that
        never goes (a 25 KB paste showed "-7,592 left" while the request sent
        held 1,066 tokens)."""
        if self.tokens_left >= 0 and not self.must_leave:
            return ""
        over = f"over the budget by {-self.tokens_left:,} tokens: " if self.tokens_left < 0 else ""
        leave = (f"{turns_named(self.must_leave)} leave the window under a running summary (a side call; "
                 "/compact previews it), then " if self.must_leave else "")
        return (f"{over}when you send, wisp fits this first: {leave}what is still over its share (a paste, an "
                "output) keeps its head and tail only")

    def table_rows(self) -> list[tuple[str, str, str, str, str]]:
        """Rows of text: (layer, tokens, share, items, hint)."""
        out = []
        for r in self.rows:
            label = f"{r.number}. {r.name}" if r.number else f"   {r.name}"
            out.append((label, f"{r.tokens:,}", f"{r.share * 100:.1f}%", f"{r.items}", r.hint))
        return out

    def to_text(self) -> str:
        """The report for a terminal (``wisp inspect context``)."""
        head = ("layer", "tokens", "window", "items", "hint")
        rows = self.table_rows()
        widths = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(4)]
        lines = [f"conversation {self.conversation} · model {self.model or 'unknown'}", self.headline(), ""]
        fmt = f"{{:<{widths[0]}}}  {{:>{widths[1]}}}  {{:>{widths[2]}}}  {{:>{widths[3]}}}  {{}}"
        lines.append(fmt.format(*head))
        for r in rows:
            lines.append(fmt.format(*r).rstrip())
        lines.append(fmt.format("total", f"{self.total:,}", f"{self.total / self.window * 100:.1f}%"
                                if self.window else "", "", "").rstrip())
        lines.append(fmt.format("tokens left", f"{self.tokens_left:,}", "", "", "").rstrip())
        lines += ["", "next request:", self.request_json()]
        return "\n".join(lines)

    def to_markdown(self) -> str:
        """The report as Markdown (where no view opens, e.g. a test)."""
        lines = [self.headline(), "", "| layer | tokens | window | items | hint |", "|---|---:|---:|---:|---|"]
        for r in self.table_rows():
            lines.append("| " + " | ".join(c.strip().replace("|", "\\|") for c in r) + " |")
        lines += [f"| **tokens left** | {self.tokens_left:,} | | | |", "", "```json", self.request_json(), "```"]
        return "\n".join(lines)


def _hints(ctx: ComposedContext) -> dict[str, str]:
    h: dict[str, str] = {}
    inst = ctx.layer("instructions")
    h["instructions"] = "" if inst.text else "no AGENTS.md in the working directory"
    names = ctx.layer("tools").detail.get("names") or []
    h["tools"] = (", ".join(n for n in names if n) + "; --tool NAME gives only the tools named") if names \
        else "no tools"
    if names and ctx.layer("tools").detail.get("mode") == "prompted":
        h["tools"] = "written into the system message (the server drops `tools`): " + h["tools"]
    forgettable = [v for v in ctx.facts if v.fact.subject not in OBSERVED_SUBJECTS]
    if forgettable:
        biggest = max(forgettable, key=lambda v: len(fact_line(v.fact)))
        cost = round(estimate_tokens("- " + fact_line(biggest.fact)) * ctx.ratio)
        proposals = sum(1 for v in forgettable if v.fact.proposal)
        h["facts"] = f"/fact forget {biggest.fact.vid} frees {cost} tokens"
        if proposals:
            h["facts"] += f"; {proposals} proposal{'s' if proposals != 1 else ''} (/fact keep ID)"
    elif ctx.facts:
        h["facts"] = "workdir and branch are read again before each request"
    else:
        h["facts"] = "/fact SUBJECT NAME = VALUE adds one"
    task = ctx.layer("task")
    h["task"] = f"/task clear frees {task.tokens} tokens" if task.tokens else "/task THE TASK; objective: … sets one"
    if ctx.summary is not None:
        refs = ctx.layer("summary").detail.get("references", 0)
        h["summary"] = (f"covers {turns_named(ctx.summary.covers)} (version {ctx.summary.version}); "
                        f"{refs} output reference{'s' if refs != 1 else ''}")
    else:
        h["summary"] = "none yet: every turn fits" if not ctx.must_leave else ""
    if ctx.must_leave:
        h["summary"] = (h["summary"] + "; " if h["summary"] else "") + \
            f"{turns_named(ctx.must_leave)} wait{'s' if len(set(ctx.must_leave)) == 1 else ''} for a summary to leave"
    older = ctx.layer("older")
    nrefs = len(older.detail.get("references") or [])
    h["older"] = (f"{nrefs} reference{'s' if nrefs != 1 else ''} to tool outputs; /show entry N shows one in full"
                  if nrefs else ("" if not older.items else "no tool outputs"))
    recent = ctx.layer("recent")
    n = len(recent.detail.get("turns") or [])
    h["recent"] = (f"context.recent_turns keeps {n} turn{'s' if n != 1 else ''} whole" if n else
                   "/config set context.recent_turns 1 keeps the last turn's outputs whole")
    h["current"] = "" if ctx.layer("current").items else "the next prompt"
    return h


def report_from(ctx: ComposedContext) -> ContextReport:
    """The :class:`ContextReport` of a composed context."""
    hints = _hints(ctx)
    how = "calibrated" if ctx.calibration_samples else "estimated"
    rows = [LayerRow(_NUMBERS[layer.key], layer.key, layer.name, layer.tokens,
                     (layer.tokens / ctx.window) if ctx.window else 0.0, layer.items, hints.get(layer.key, ""), how)
            for layer in ctx.layers]
    return ContextReport(
        conversation=ctx.conversation, model=ctx.model, window=ctx.window, window_source=ctx.window_source,
        reserve=ctx.reserve, budget=ctx.budget, total=ctx.total, tokens_left=ctx.tokens_left, ratio=ctx.ratio,
        samples=ctx.calibration_samples, rows=rows, messages=ctx.messages, tools=ctx.tools, left=list(ctx.left),
        must_leave=list(ctx.must_leave), tool_mode=str(ctx.layer("tools").detail.get("mode") or "native"),
        reserve_asked=ctx.reserve_asked)


async def count_exactly(report: ContextReport, ctx: ComposedContext, count: Any) -> None:
    """Count again, with ``count`` (the endpoint's ``count_tokens(text)``:
    tokens by the server's tokenizer, or ``None`` when it cannot), every layer
    that has a text of its own (rules, instructions, tools, facts, task,
    summary), and mark those rows ``exact``; the total follows. A server that
    cannot count, or fails to, leaves the report as it was. Raises nothing."""
    if count is None:
        return
    texts = {layer.key: layer.text for layer in ctx.layers if layer.text}
    for i, row in enumerate(report.rows):
        text = texts.get(row.key)
        if not text:
            continue
        try:
            n = await count(text)
        except Exception:  # a tokenizer that fails is only a worse figure, never a failed report
            return
        if n is None:
            return
        report.rows[i] = dataclasses.replace(row, tokens=int(n), share=(n / report.window) if report.window else 0.0,
                                             how="exact")
    total = sum(r.tokens for r in report.rows)
    report.tokens_left += report.total - total
    report.total = total


async def inspect_context(manager: Any, conversation: int) -> ContextReport:
    """Compose ``conversation``'s next request through ``manager`` (a
    :class:`~wisp.core.context.manager.ContextManager`) and report it, with
    the messages and tools as the link would send them and, where the server
    can count, exact figures (:func:`count_exactly`). No model request is
    made."""
    ctx = await manager.compose(conversation)
    report = report_from(ctx)
    link = getattr(manager, "model_state", None)
    if link is not None and hasattr(link, "as_sent"):
        report.tool_mode, report.messages, report.tools = link.as_sent(report.messages, report.tools)
        if report.tools and getattr(link, "tool_mode_known", True) is False:
            # from a shell nothing is connected, so how the server takes tools is not known yet (a new
            # user saw native here and prompted in the TUI: issue "Real models, real work")
            report.tool_mode = "unknown"
            report.rows = [dataclasses.replace(row, hint=(
                "not connected, so counted as schemas; a server that drops `tools` (the embedded one) gets "
                "them in the system message, as /inspect context in wisp shows: " + row.hint))
                if row.key == "tools" else row for row in report.rows]
    endpoint = getattr(link, "endpoint", None)
    await count_exactly(report, ctx, getattr(endpoint, "count_tokens", None))
    usage = getattr(manager, "usage", None)
    if usage is not None:
        report.last_turn = await usage.last(conversation)
    costs = getattr(manager, "costs", {}).get(conversation, {})
    report.side_calls = [cost.line() for cost in costs.values()]
    return report
