"""The table ``wisp eval`` prints, and the listing of ``wisp eval history``.

Issue "``wisp eval``", "The command": one row per scenario, a column each
for memory off and on, holding the mean score out of 10 and its spread
over the runs, the tokens per request and the model calls. The table is
Markdown, so it reads in a terminal and pastes into a README as it is.
"""

from __future__ import annotations

from typing import Any

from ..config import format_value
from .runner import Cell, EvalReport

__all__ = ["format_table", "format_history", "format_score", "format_settings"]


def format_score(mean: float | None, spread: float | None) -> str:
    """``7.3 ± 0.6`` (``–`` when nothing was scored)."""
    if mean is None:
        return "–"
    return f"{mean:.1f} ± {spread or 0.0:.1f}"


def format_settings(settings: dict[str, Any]) -> str:
    """``context.distill=true, model.context_window=2048`` (``wisp eval
    --set``, as ``wisp config get`` prints values; ``null`` for a key left
    at its default); ``""`` when there are none."""
    return ", ".join(f"{key}={format_value(value)}" for key, value in settings.items())


def _number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _cell_columns(cell: Cell | None) -> list[str]:
    if cell is None:
        return ["–", "–", "–"]
    return [format_score(cell.mean, cell.spread), _number(cell.tokens_per_request), _number(cell.model_calls, 1)]


def format_table(report: EvalReport) -> str:
    """The results as a Markdown table with a line above saying what was
    measured and notes below saying how to read it."""
    settings = list(report.memory)
    runs = f"{report.runs} run{'s' if report.runs != 1 else ''} each" + (", --quick" if report.quick else "")
    head_line = f"wisp eval: {report.model or 'the model'} at {report.endpoint}; {runs}; wisp {report.wisp}"
    if report.settings:
        head_line += f"; set over every scenario: {format_settings(report.settings)}"
    lines = [head_line, ""]
    head = ["scenario"]
    for m in settings:
        word = "on" if m else "off"
        head += [f"memory {word}: score", "tokens/request", "model calls"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|---" + "|---:" * (len(head) - 1) + "|")
    wrong: list[str] = []
    for name, _title, cells in report.results:
        row = [name]
        for m in settings:
            row += _cell_columns(cells.get(m))
        lines.append("| " + " | ".join(row) + " |")
        for m in settings:
            cell = cells.get(m)
            if cell is not None and cell.wrong_calls:
                turns = sum(len(r.checks) for r in cell.runs)
                wrong.append(f"{name} with memory {'on' if m else 'off'}: {cell.wrong_calls} of {turns} "
                             "questions called a tool they must not")
    lines.append("")
    lines.append("Score: the mean of 10 over the runs ± the spread (sample standard deviation). Tokens/request: "
                 "the mean prompt tokens of the model's requests (the endpoint's count, or wisp's estimate where it "
                 "gives none). Model calls: per run, the agent's requests "
                 "and wisp's side calls (running summary, refinement, condense, fact distiller, assessment).")
    lines.extend(wrong)
    return "\n".join(lines)


def _short(cell: dict[str, Any] | None) -> str:
    if not cell or cell.get("mean") is None:
        return "–"
    return f"{cell['mean']:.1f}"


def format_history(records: list[dict[str, Any]]) -> str:
    """Past evaluations, newest first: date, model, endpoint, wisp version,
    runs, and each scenario's mean score with memory off / on."""
    if not records:
        return "No evaluations yet. Run one with `wisp eval` (or `wisp eval --quick --runs 1` for a short one)."
    lines = []
    for r in reversed(records):
        runs = r.get("runs")
        how = f"{runs} run{'s' if runs != 1 else ''}" if isinstance(runs, int) else "? runs"
        if r.get("quick"):
            how += ", quick"
        if r.get("settings"):
            how += f", set {format_settings(r['settings'])}"
        lines.append(f"{str(r['date'])[:16].replace('T', ' ')}  {r['model']}  ({r['endpoint']})  wisp {r['wisp']}  "
                     f"{how}")
        scores = ", ".join(f"{s['name']} {_short(s.get('off'))}/{_short(s.get('on'))}" for s in r["scenarios"])
        lines.append(f"  memory off/on: {scores}" if scores else "  (no scenarios)")
    return "\n".join(lines)
