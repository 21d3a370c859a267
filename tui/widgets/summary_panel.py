"""The running summary panel (F4): the summary's versions, which turns each covers, who wrote what.

Issue "Compaction you can see and trust", "A summary that always covers":
the panel shows the summary's versions. The version in effect comes first,
whole: the turns it covers, what made it (the window filling, ``/compact``
with its focus, ``/compact undo``), the identifiers it keeps, the part the
model wrote and the part wisp completed, each under its own heading. Older
versions follow, one line each (turns, origin, identifiers, who wrote
them), newest first, up to :data:`OLDER_SHOWN`.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text

from .context_panel import ContextPanel

__all__ = ["SummaryPanel", "OLDER_SHOWN", "KEPT_SHOWN"]

#: Older versions listed under the one in effect.
OLDER_SHOWN = 8
#: Identifiers named in the panel at most (the rest are counted).
KEPT_SHOWN = 24


def _origin(v: Any) -> str:
    if v.origin == "compact":
        return "/compact" + (f" (focus: {v.focus})" if v.focus else "")
    if v.origin == "undo":
        return f"/compact undo → version {v.restores}" if v.restores else "/compact undo → no summary"
    return "the window filled"


def _writers(v: Any) -> str:
    if v.empty:
        return "cleared"
    if not v.model:
        return "written by wisp alone"
    if v.completion:
        return f"{v.model} + wisp"
    return f"{v.model}"


class SummaryPanel(ContextPanel):
    """The running summary's versions (see the module doc)."""

    DEFAULT_CSS = """
    SummaryPanel {
        height: 1fr;
    }
    """

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("Running summary", "f4", name=name, id=id, classes=classes)

    def show(self, summary: Any, versions: list[Any] | None = None) -> None:
        """Draw the version in effect (a
        :class:`~wisp.core.context.summary.SummaryVersion`, or ``None``) and
        every version (``versions``, newest first; only the one in effect
        when not given)."""
        from wisp.core.context.summary import turn_ranges, turns_named  # the context loads after the first frame

        versions = list(versions if versions is not None else ([summary] if summary is not None else []))
        if summary is None and not versions:
            self.set_body(Text("None yet: every turn fits in the window.", style="dim"), empty=True)
            return
        out = Text()
        if summary is None:
            out.append("None in effect: every turn is in the window whole.", style="bold")
        else:
            out.append(f"version {summary.version} · {turns_named(summary.covers)}", style="bold")
            out.append(f"\n{_origin(summary)} · {_writers(summary)}", style="dim")
            if summary.kept_whole:
                out.append(f"\nkept whole: {turns_named(summary.kept_whole)}", style="yellow")
            if summary.kept:
                shown = ", ".join(summary.kept[:KEPT_SHOWN])
                more = f" and {len(summary.kept) - KEPT_SHOWN} more" if len(summary.kept) > KEPT_SHOWN else ""
                noun = "identifier" if len(summary.kept) == 1 else "identifiers"
                out.append(f"\nkeeps {len(summary.kept)} {noun}: ", style="bold")
                out.append(shown + more, style="cyan")
            model_part = summary.model_part if summary.model else ""
            if model_part:
                out.append(f"\n\nwritten by the model ({summary.model}):", style="bold magenta")
                out.append("\n" + model_part)
            if summary.completion:
                head = ("completed by wisp" if summary.model else
                        "written by wisp (the model's summary was not used)"
                        if "the model's summary was not used" in summary.completion else
                        "written by wisp (the model wrote none)")
                missed = summary.missed
                if missed:
                    head += f", keeping {len(missed)} the model left out"
                out.append(f"\n\n{head}:", style="bold green")
                out.append("\n" + summary.completion)
            if summary.refs:
                out.append(f"\n{len(summary.refs)} tool outputs stand as references", style="dim")
        older = [v for v in versions if summary is None or v.version != summary.version][:OLDER_SHOWN]
        if older:
            out.append("\n\nversions", style="bold")
            for v in older:
                turns = turns_named(v.covers) if v.covers else "no turns"
                out.append(f"\nv{v.version} · {turns} · {_origin(v)} · {len(v.kept)} ids · {_writers(v)}",
                           style="dim")
            if len(versions) - 1 > OLDER_SHOWN:
                out.append(f"\n… {len(versions) - 1 - OLDER_SHOWN} older", style="dim")
        self.set_body(out)
