"""Scoring with no model judge: exact answers and the tools a turn called.

Issue "``wisp eval``", "The command" and "Scenarios": each question has an
exact answer (a string or a regex, :class:`~wisp.core.eval.scenario.Answer`)
and may name tools the turn must or must not call (the routing
scenario's score counts the turns that wrongly call ``memory``). A
question passes when every check it has passes; a run's score is the
passed questions' share of 10, by weight. Over several runs a cell of the
table shows the mean and the spread (the sample standard deviation; 0
for one run).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .scenario import Question

__all__ = ["Check", "check_question", "run_score", "mean_and_spread"]


@dataclass
class Check:
    """One question's outcome: ``turn`` (its index in the script),
    ``kind``, ``prompt``, ``expected`` (the answer as shown), ``reply``
    (the turn's final reply), ``calls`` (tool names called in the turn, in
    order), ``matched`` (the text the answer matched, or ``None``),
    ``passed``, ``why`` (one line when it failed), ``weight`` and
    ``wrong`` (the tools it called that it must not)."""

    turn: int
    kind: str
    prompt: str
    expected: str
    reply: str
    calls: list[str] = field(default_factory=list)
    matched: str | None = None
    passed: bool = False
    why: str = ""
    weight: float = 1.0
    wrong: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"turn": self.turn + 1, "kind": self.kind, "prompt": self.prompt, "expected": self.expected,
                "reply": self.reply, "calls": list(self.calls), "matched": self.matched, "passed": self.passed,
                "why": self.why, "weight": self.weight, "wrong": list(self.wrong)}


def check_question(turn: int, prompt: str, question: Question, reply: str, calls: Sequence[str],
                   error: str | None = None) -> Check:
    """Check one question turn: ``reply`` is the turn's final reply,
    ``calls`` the names of the tools it called, ``error`` the endpoint
    error that ended it (a turn that failed is a failed question)."""
    expected_parts = []
    if question.answer is not None:
        expected_parts.append(question.answer.shown)
    if question.require:
        expected_parts.append("calls " + ", ".join(question.require))
    if question.forbid:
        expected_parts.append("never " + ", ".join(question.forbid))
    check = Check(turn, question.kind, prompt, "; ".join(expected_parts), reply or "", list(calls),
                  weight=question.weight)
    problems: list[str] = []
    if error:
        problems.append(f"the turn failed: {error}")
    missing = [t for t in question.require if t not in calls]
    if missing:
        problems.append("did not call " + ", ".join(missing))
    wrong = [t for t in question.forbid if t in calls]
    check.wrong = wrong
    if wrong:
        problems.append("called " + ", ".join(wrong))
    if question.answer is not None:
        check.matched = question.answer.matches(reply or "")
        if check.matched is None:
            problems.append("the reply does not give the answer")
    check.passed = not problems
    check.why = "; ".join(problems)
    return check


def run_score(checks: Iterable[Check]) -> float:
    """The passed questions' share of 10 by weight (0 with no questions)."""
    items = list(checks)
    total = sum(c.weight for c in items)
    if total <= 0:
        return 0.0
    return 10.0 * sum(c.weight for c in items if c.passed) / total


def mean_and_spread(scores: Sequence[float]) -> tuple[float | None, float | None]:
    """``(mean, spread)`` of run scores: the spread is the sample standard
    deviation, 0 for a single run; ``(None, None)`` for none."""
    if not scores:
        return None, None
    mean = statistics.fmean(scores)
    spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
    return mean, spread
