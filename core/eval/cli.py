"""``wisp eval`` and ``wisp eval history``: the command line of the evaluation.

Registered on wisp's parser by :func:`add_eval_parser` and run by
:func:`run_eval_command` (both called from :mod:`wisp.core.cli`). Exit
codes as the rest of wisp (issue "wisp runs end to end", "Headless"): 0
done; 2 bad usage (an unknown scenario, a scenario file that cannot be
used, a bad config); 3 no endpoint answered, or it went away.

Behaviour: issue "``wisp eval``: does the context help on your model?
Measure it". While it runs, one progress line per step goes to stderr
(scenario, memory setting, run, turn; a single line rewritten in place on
a terminal). The table goes to stdout, or with ``--json`` the results go
to stdout as JSON and the table to stderr. ``--set KEY=VALUE`` (repeatable)
applies a config key over every scenario's config in every run, so that one
setting can be measured off and on (``--set context.distill=off``, then
``=on``); it is refused, with exit 2, as a scenario's ``config`` would be. A finished evaluation is
appended to the history (:mod:`wisp.core.eval.history`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any, TextIO

from ..config import Config
from .history import append_record, history_path, read_history
from .report import format_history, format_table
from .runner import EvalEndpointError, EvalOptions, Progress, run_eval
from .scenario import (Scenario, ScenarioError, SettingError, builtin_names, builtin_scenario, builtin_scenarios,
                       load_scenario_file, parse_setting, scenario_format_path)

__all__ = ["add_eval_parser", "run_eval_command", "parse_settings", "ProgressPrinter", "MAX_RUNS"]

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_ENDPOINT = 3
MAX_RUNS = 100


def add_eval_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``eval`` to wisp's subparsers ``sub``."""
    p = sub.add_parser(
        "eval", help="measure whether wisp's context and memory tool help on your model",
        description="Run scripted scenarios against the configured endpoint (or --model), with the memory "
                    "tool off and on, and score them with no model judge. Each run uses a fresh temporary "
                    "wisp home and working directory: your conversations and memories are never touched. "
                    "`wisp eval history` lists past evaluations.")
    p.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                   help="scenarios to run (default: every built-in one; --list shows them), "
                        "or `history` to list past evaluations")
    p.add_argument("--runs", type=int, default=3, metavar="N", help="runs of each scenario and setting (default 3)")
    p.add_argument("--memory", choices=("on", "off", "both"), default="both",
                   help="the memory tool off, on, or both (default both)")
    p.add_argument("--model", metavar="NAME", help="the model to measure (default: config model.name)")
    p.add_argument("--file", action="append", default=[], metavar="PATH",
                   help="a scenario file of your own (repeatable; see the format with --list)")
    p.add_argument("--quick", action="store_true",
                   help="short variants: fewer turns, replies capped at a few dozen tokens")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                   help="a config key for every run, over each scenario's own config (repeatable; as "
                        "`wisp config set` reads values), such as --set context.distill=on; the endpoint, "
                        "where data lives and context.memory (see --memory) are the run's own")
    p.add_argument("--list", action="store_true", help="list the scenarios and where their format is described")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="with history: the newest N (default 20)")
    p.add_argument("--json", action="store_true", help="JSON on stdout (the table then goes to stderr)")
    return p


class ProgressPrinter:
    """Writes :class:`~wisp.core.eval.runner.Progress` to ``stream``: on a
    terminal one line rewritten in place, else one line per step.

    On a terminal the line goes straight to the stream's file descriptor:
    wisp's terminal-safe wrapper (:class:`wisp.core.text.TerminalText`)
    drops a lone carriage return, which is what rewrites the line. The line
    holds only wisp's own words, numbers and a scenario's name (lowercase
    letters, digits and ``-``), so nothing in it can act on the terminal."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self._width = 0

    def __call__(self, p: Progress) -> None:
        where = f"{p.scenario} · memory {'on' if p.memory else 'off'} · run {p.run}/{p.runs}"
        if p.stage == "refine":
            text = f"{where} · refining earlier conversations"
        elif p.stage == "done":
            text = f"{where} · done: {p.score:.1f} of 10"
        else:
            filled = round(20 * (p.turn - 1) / max(1, p.turns))
            text = f"{where} · turn {p.turn}/{p.turns} [{'#' * filled}{'.' * (20 - filled)}]"
        line = f"wisp eval: {text}"
        if self.tty:
            pad = " " * max(0, self._width - len(line))
            self._raw("\r" + line + pad + ("\n" if p.stage == "done" else ""))
            self._width = 0 if p.stage == "done" else len(line)
        else:
            self.stream.write(line + "\n")
            self.stream.flush()

    def _raw(self, text: str) -> None:
        self.stream.flush()
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
            self.stream.write(text)
            self.stream.flush()
            return
        data = text.encode(getattr(self.stream, "encoding", None) or "utf-8", "replace")
        while data:
            data = data[os.write(fd, data):]


def parse_settings(texts: list[str]) -> dict[str, Any]:
    """The ``--set KEY=VALUE`` texts as dotted key → value, in the order
    given (a key given twice keeps its last value). Raises
    :class:`~wisp.core.eval.scenario.SettingError` for the first that
    cannot be used."""
    out: dict[str, Any] = {}
    for text in texts:
        key, value = parse_setting(text)
        out.pop(key, None)
        out[key] = value
    return out


def _choose(args: argparse.Namespace) -> list[Scenario]:
    names = list(args.scenarios)
    files = [load_scenario_file(f) for f in args.file]
    if not names and not files:
        return builtin_scenarios()
    chosen = [builtin_scenario(n) for n in dict.fromkeys(names)]
    return chosen + files


def _list(args: argparse.Namespace) -> int:
    items = [builtin_scenario(n) for n in builtin_names()] + [load_scenario_file(f) for f in args.file]
    if args.json:
        print(json.dumps({"total": len(items), "scenarios": [
            {"name": s.name, "title": s.title, "about": s.about, "turns": len(s.turns),
             "questions": len(s.questions), "quick_turns": len(s.quick().turns),
             "earlier": len(s.earlier), "source": s.source} for s in items]}, ensure_ascii=False, indent=2))
        return EXIT_OK
    for s in items:
        print(f"{s.name}: {s.title} ({len(s.turns)} turns, {len(s.questions)} questions; "
              f"--quick: {len(s.quick().turns)} turns)")
        if s.about:
            print(f"  {s.about}")
    print(f"\nThe scenario format is described in {scenario_format_path()}; add your own with "
          "wisp eval --file my.json.")
    return EXIT_OK


def _history(args: argparse.Namespace) -> int:
    if len(args.scenarios) > 1:
        print("wisp: error: `wisp eval history` takes no scenario names", file=sys.stderr)
        return EXIT_USAGE
    if args.limit < 1:
        print("wisp: error: --limit must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    path = history_path(Config.load())
    records, skipped = read_history(path)
    total = len(records)
    records = records[-args.limit:]
    if skipped:
        print(f"wisp: {skipped} line{'s' if skipped != 1 else ''} of {path} could not be read and "
              f"{'were' if skipped != 1 else 'was'} skipped", file=sys.stderr)
    if args.json:
        print(json.dumps({"total": total, "path": str(path), "skipped": skipped,
                          "evaluations": list(reversed(records))}, ensure_ascii=False, indent=2))
    else:
        print(format_history(records))
    return EXIT_OK


def run_eval_command(args: argparse.Namespace) -> int:
    """Run ``wisp eval …`` from parsed ``args``; returns the exit code.
    Raises :class:`wisp.core.config.ConfigError` for a bad config (the
    caller prints it and exits 2)."""
    if args.scenarios[:1] == ["history"]:
        return _history(args)
    try:
        if args.list:
            return _list(args)
        if not 1 <= args.runs <= MAX_RUNS:
            print(f"wisp: error: --runs must be from 1 to {MAX_RUNS}", file=sys.stderr)
            return EXIT_USAGE
        settings = parse_settings(args.settings)
        scenarios = _choose(args)
    except (ScenarioError, SettingError) as exc:
        print(f"wisp: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    memory = {"on": (True,), "off": (False,), "both": (False, True)}[args.memory]
    config = Config.load()
    options = EvalOptions(scenarios, runs=args.runs, memory=memory, model=args.model, quick=args.quick,
                          settings=settings)
    try:
        report = asyncio.run(run_eval(options, config, progress=ProgressPrinter(sys.stderr)))
    except EvalEndpointError as exc:
        print(f"wisp: error: {exc}", file=sys.stderr)
        return EXIT_ENDPOINT
    table = format_table(report)
    if args.json:
        print(json.dumps(report.to_dict(detail=True), ensure_ascii=False, indent=2))
        print(table, file=sys.stderr)
    else:
        print(table)
    path = history_path(config)
    try:
        append_record(path, report.to_dict(detail=False))
    except OSError as exc:
        print(f"wisp: the results could not be kept in {path}: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_OK
