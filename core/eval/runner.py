"""The runner: each scenario, with the memory tool off and on, in runs of real sessions.

Issue "``wisp eval``", "The command":

- The endpoint is resolved once, from the person's config (``--model``
  replaces ``model.name``): that is what is measured, and an embedded
  server is started once for the whole evaluation. Nothing answering is
  an :class:`EvalEndpointError` before any run.
- Each run has a fresh wisp home under a temporary directory (its own
  config, database and audit log) and a scratch working directory holding
  the scenario's files, so the person's own conversations and memories
  are never touched; both are removed after the run.
- A run's config is wisp's defaults, the person's ``model.*`` settings,
  the resolved endpoint, then the scenario's ``config`` (and its
  ``quick`` config with ``--quick``), then the evaluation's settings
  (``wisp eval --set KEY=VALUE``, the same for every run, so that one
  setting such as ``context.distill`` can be compared across two
  evaluations), and ``context.memory`` off or on.
  With ``--quick`` replies are capped at :data:`QUICK_MAX_TOKENS` tokens
  and turns at :data:`QUICK_MAX_STEPS` requests unless the scenario says
  otherwise.
- The earlier conversations of a scenario (``earlier``) are saved as
  captured exchanges at their dates and refined into episodic memories by
  the model under test (:func:`wisp.core.episodes.refine.refine_with`)
  before the first turn.
- Each turn runs through :meth:`wisp.core.session.Session.run_turn`, as
  ``wisp ask`` does. The model calls are the agent's requests (one
  :class:`~wisp.core.events.Usage` event each) and wisp's side calls (the
  running summary, condense, refinement, the fact distiller, the
  assessment: counted by :class:`CountingSideCall`);
  the tokens per request are the prompt tokens the endpoint reported for
  each agent request (wisp's estimate where it reported none).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from .. import events as ev
from ..config import SCHEMA, Config
from ..episodes.capture import Exchange as CapturedExchange, save_exchange
from ..episodes.dates import memory_timezone, utc_text
from ..episodes.refine import refine_with
from ..model.link import ModelLink
from ..model.sidecall import LinkSideCall
from ..paths import atomic_write_private, ensure_private_dir
from ..session import Session, SessionOptions
from ..sidecall import Message, SideCall, SideCallError, SideCallInfo
from ..tokens import estimate_messages
from .scenario import Scenario, parse_when
from .scoring import Check, check_question, mean_and_spread, run_score

__all__ = ["EvalOptions", "EvalEndpointError", "Progress", "RunResult", "Cell", "EvalReport", "CountingSideCall",
           "run_eval", "QUICK_MAX_TOKENS", "QUICK_MAX_STEPS", "WORKSPACE"]

#: Reply cap with ``--quick`` (tokens), unless the scenario sets ``model.max_tokens``.
QUICK_MAX_TOKENS = 64
#: Model requests a turn may make with ``--quick``, unless the scenario sets ``agent.max_steps``.
QUICK_MAX_STEPS = 8
#: The workspace the runs' exchanges and earlier conversations are captured under
#: (``$WISP_WORKSPACE`` when set, since the memory verbs default to it).
WORKSPACE = "wisp-eval"
#: Endpoint error kinds after which no run can go on.
_FATAL = {"unreachable", "no_endpoint", "model_not_found", "embedded"}


class EvalEndpointError(Exception):
    """No endpoint answered, or it went away during the evaluation; the
    message is one line saying what to do."""


@dataclass(frozen=True)
class EvalOptions:
    """What to run: ``scenarios``; ``runs`` of each (at least 1);
    ``memory``, the settings of ``context.memory`` to compare, in order;
    ``model``, a model name replacing config ``model.name``; ``quick``, the
    short variants; ``settings``, config keys applied over every scenario's
    config in every run (``--set``; dotted key → value as
    :func:`~wisp.core.eval.scenario.parse_setting` gives it, ``None``
    meaning the key's default), in the order given."""

    scenarios: list[Scenario]
    runs: int = 3
    memory: tuple[bool, ...] = (False, True)
    model: str | None = None
    quick: bool = False
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Progress:
    """Where the evaluation is: ``scenario``, ``memory``, ``run`` of
    ``runs`` (1-based), ``turn`` of ``turns`` (1-based; 0 before the first),
    ``stage`` (``refine``, ``turn`` or ``done``) and, when done, ``score``."""

    scenario: str
    memory: bool
    run: int
    runs: int
    turn: int
    turns: int
    stage: str = "turn"
    score: float | None = None


@dataclass
class RunResult:
    """One run: its ``score`` (of 10), the ``checks``, the agent's
    requests and their ``prompt_tokens`` (one number a request),
    ``completion_tokens`` (total reported), ``side_calls``, ``errors`` (one
    line each), ``refine`` (what refinement did, for earlier
    conversations) and ``seconds``."""

    scenario: str
    memory: bool
    run: int
    score: float = 0.0
    checks: list[Check] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    completion_tokens: int = 0
    side_calls: int = 0
    side_call_tokens: int = 0
    errors: list[str] = field(default_factory=list)
    refine: dict[str, Any] | None = None
    seconds: float = 0.0

    @property
    def agent_requests(self) -> int:
        return len(self.prompt_tokens)

    @property
    def model_calls(self) -> int:
        """Agent requests and side calls."""
        return self.agent_requests + self.side_calls

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"run": self.run, "score": round(self.score, 3), "checks": [c.to_dict() for c in self.checks],
                "agent_requests": self.agent_requests, "side_calls": self.side_calls,
                "model_calls": self.model_calls, "prompt_tokens": list(self.prompt_tokens),
                "completion_tokens": self.completion_tokens, "side_call_tokens": self.side_call_tokens,
                "errors": list(self.errors), "refine": self.refine, "seconds": round(self.seconds, 2)}


@dataclass
class Cell:
    """A cell of the table: one scenario with memory off or on, over its runs."""

    scenario: str
    memory: bool
    runs: list[RunResult] = field(default_factory=list)

    @property
    def scores(self) -> list[float]:
        return [r.score for r in self.runs]

    @property
    def mean(self) -> float | None:
        return mean_and_spread(self.scores)[0]

    @property
    def spread(self) -> float | None:
        return mean_and_spread(self.scores)[1]

    @property
    def tokens_per_request(self) -> float | None:
        """Mean prompt tokens of the agent's requests over every run (``None`` when there were none)."""
        every = [t for r in self.runs for t in r.prompt_tokens]
        return sum(every) / len(every) if every else None

    @property
    def model_calls(self) -> float | None:
        """Mean model calls a run (agent requests and side calls)."""
        return sum(r.model_calls for r in self.runs) / len(self.runs) if self.runs else None

    @property
    def wrong_calls(self) -> int:
        """Questions, over every run, that called a tool they must not (routing: memory)."""
        return sum(1 for r in self.runs for c in r.checks if c.wrong)

    def to_dict(self, detail: bool = True) -> dict[str, Any]:
        """JSON-ready; ``detail`` adds each run."""
        out: dict[str, Any] = {
            "memory": "on" if self.memory else "off",
            "mean": None if self.mean is None else round(self.mean, 3),
            "spread": None if self.spread is None else round(self.spread, 3),
            "scores": [round(s, 3) for s in self.scores],
            "tokens_per_request": None if self.tokens_per_request is None else round(self.tokens_per_request, 1),
            "model_calls": None if self.model_calls is None else round(self.model_calls, 2),
            "wrong_calls": self.wrong_calls,
        }
        if detail:
            out["runs"] = [r.to_dict() for r in self.runs]
        return out


@dataclass
class EvalReport:
    """A whole evaluation: when, with what (``model``, ``endpoint``,
    ``wisp``), how (``runs``, ``quick``, ``memory`` settings, the
    ``settings`` applied over every run's config) and the ``results``: per
    scenario (name, title), a :class:`Cell` per memory setting."""

    started_at: str
    model: str
    endpoint: str
    runs: int
    quick: bool
    memory: tuple[bool, ...]
    wisp: str = __version__
    settings: dict[str, Any] = field(default_factory=dict)
    finished_at: str = ""
    results: list[tuple[str, str, dict[bool, Cell]]] = field(default_factory=list)

    def to_dict(self, detail: bool = True) -> dict[str, Any]:
        """JSON-ready (``wisp eval --json``; without ``detail``, what the history keeps)."""
        return {
            "date": self.started_at, "finished": self.finished_at, "wisp": self.wisp, "model": self.model,
            "endpoint": self.endpoint, "runs": self.runs, "quick": self.quick,
            "memory": ["on" if m else "off" for m in self.memory], "settings": dict(self.settings),
            "scenarios": [{"name": name, "title": title,
                           **{("on" if m else "off"): cell.to_dict(detail) for m, cell in cells.items()}}
                          for name, title, cells in self.results],
        }


class CountingSideCall:
    """A :class:`~wisp.core.sidecall.SideCall` that counts the calls (and
    wisp's estimate of their prompt tokens) made through ``inner``, which
    is the session's own side call, given once the session is open."""

    def __init__(self, inner: SideCall | None = None) -> None:
        self.inner = inner
        self.calls = 0
        self.prompt_tokens = 0

    def _target(self) -> SideCall:
        if self.inner is None:
            raise SideCallError("the evaluation's side call is not connected yet", "no_endpoint")
        return self.inner

    async def info(self) -> SideCallInfo:
        return await self._target().info()

    async def complete(self, messages: list[Message], *, max_tokens: int, schema: dict[str, Any] | None = None,
                       temperature: float | None = None) -> str:
        target = self._target()
        self.calls += 1
        self.prompt_tokens += estimate_messages(messages)
        return await target.complete(messages, max_tokens=max_tokens, schema=schema, temperature=temperature)


def _now_text() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


def _person_config(base: Config, model: str | None) -> Config:
    """The person's settings with ``--model`` applied, not written anywhere."""
    values = {k: v for k, v, is_default in base.items() if not is_default}
    if model:
        values["model.name"] = model
    return Config(base.path, values)


def _workspace() -> str:
    return (os.environ.get("WISP_WORKSPACE") or "").strip() or WORKSPACE


def run_values(scenario: Scenario, memory: bool, person: Config, link: ModelLink, home: Path, *,
               quick: bool, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's config (see the module doc): dotted keys and values.
    ``settings`` (``--set``) go over the scenario's config; one whose value
    is ``None`` leaves its key at wisp's default."""
    values: dict[str, Any] = {k: v for k, v, is_default in person.items()
                              if k.startswith("model.") and not is_default}
    endpoint = link.endpoint
    assert endpoint is not None, "connect the link first"
    values.update({"model.provider": endpoint.provider, "model.endpoint": endpoint.base_url,
                   "model.name": link.model})
    values.pop("model.gguf", None)
    if quick:
        values["model.max_tokens"] = QUICK_MAX_TOKENS
        values["agent.max_steps"] = QUICK_MAX_STEPS
    # commands the scenario allows may write its scratch directory (a build keeps its counter there,
    # as a person's would); a scenario or --set may say otherwise
    values["tools.run_command.allow_writes"] = True
    chosen = {**scenario.config, **(settings or {})}
    values.update(chosen)
    for key in [k for k, v in chosen.items() if v is None]:
        values.pop(key)
    window = chosen.get("model.context_window")
    if window and link.reported_window:
        values["model.context_window"] = min(int(window), int(link.reported_window))
    elif not window and link.context_window:
        values["model.context_window"] = link.context_window
    values.update({"context.memory": memory, "store.path": str(home / "data" / "wisp.db"),
                   "audit.dir": str(home / "data" / "audit"), "memory.workspace": _workspace()})
    return values


def _write_config(home: Path, values: dict[str, Any]) -> Path:
    nested: dict[str, Any] = {}
    for key, value in values.items():
        node = nested
        *groups, last = key.split(".")
        for g in groups:
            node = node.setdefault(g, {})
        node[last] = value
    path = home / "config.json"
    atomic_write_private(path, json.dumps(nested, indent=2).encode("utf-8"))
    return path


def _write_files(workdir: Path, files: dict[str, str]) -> None:
    ensure_private_dir(workdir)
    for rel, text in files.items():
        target = workdir.joinpath(*rel.split("/"))
        ensure_private_dir(target.parent)
        atomic_write_private(target, text.encode("utf-8"))


async def _seed_earlier(session: Session, scenario: Scenario, side: SideCall) -> dict[str, Any]:
    """Save the earlier conversations as captured exchanges at their dates,
    then refine them through the model: what refinement reported."""
    tz = memory_timezone(session.config)
    now = datetime.now(tz)
    for k, conv in enumerate(scenario.earlier, 1):
        start = parse_when(conv.when, now, tz)
        for j, ex in enumerate(conv.exchanges):
            at = start + timedelta(minutes=2 * j)
            await save_exchange(session.store, CapturedExchange(
                workspace=_workspace(), transport="tui", channel=f"earlier-{k}", request=ex.request,
                reply=ex.reply, requested_at=utc_text(at), finished_at=utc_text(at + timedelta(seconds=20)),
                sender="eval", model=session.model_name or None, endpoint=session.endpoint_label,
                outcome="completed"))
    report = await refine_with(session.store, session.config, side, trigger="eval")
    return report.to_dict() if report is not None else {"outcome": "failed", "errors": ["refinement crashed"]}


@dataclass
class _TurnOutcome:
    reply: str = ""
    calls: list[str] = field(default_factory=list)
    error: str | None = None


async def _run_turn(session: Session, prompt: str, result: RunResult) -> _TurnOutcome:
    out = _TurnOutcome()
    async for item in session.run_turn(prompt):
        if isinstance(item, ev.ReplyRecorded):
            out.reply = item.text
        elif isinstance(item, ev.ToolCall):
            out.calls.append(item.name)
        elif isinstance(item, ev.Usage):
            result.prompt_tokens.append(int(item.prompt if item.prompt is not None else item.estimated_prompt))
            result.completion_tokens += int(item.completion or 0)
        elif isinstance(item, ev.Error):
            line = f"{item.kind}: {' '.join(item.message.split())}"
            if item.kind in _FATAL:
                raise EvalEndpointError(f"the endpoint stopped answering: {line}")
            out.error = line
            result.errors.append(line)
    return out


async def run_once(scenario: Scenario, memory: bool, run: int, runs: int, person: Config, link: ModelLink, *,
                   quick: bool, progress: Callable[[Progress], Any] | None = None,
                   settings: dict[str, Any] | None = None) -> RunResult:
    """One run of ``scenario`` in a fresh home and working directory (both
    removed afterwards). Raises :class:`EvalEndpointError` when the
    endpoint goes away."""
    result = RunResult(scenario.name, memory, run)
    started = time.monotonic()
    tell = lambda p: progress(p) if progress is not None else None  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="wisp-eval-", ignore_cleanup_errors=True) as tmp:
        root = Path(tmp)
        home = ensure_private_dir(root / "home")
        workdir = root / "work" / scenario.name
        _write_files(workdir, scenario.files)
        values = run_values(scenario, memory, person, link, home, quick=quick, settings=settings)
        config = Config.load(_write_config(home, values))
        side = CountingSideCall()
        session = await Session.open(SessionOptions(workdir=workdir, transport="eval", side_call=side), config)
        async with session:
            side.inner = LinkSideCall(session.link)
            if not await session.connect():
                raise EvalEndpointError(f"no model endpoint: {session.endpoint_error}")
            turns = scenario.turns
            if scenario.earlier:
                tell(Progress(scenario.name, memory, run, runs, 0, len(turns), "refine"))
                result.refine = await _seed_earlier(session, scenario, side)
                for line in result.refine.get("errors") or []:
                    result.errors.append(f"refine: {line}")
            for k, turn in enumerate(turns):
                tell(Progress(scenario.name, memory, run, runs, k + 1, len(turns)))
                outcome = await _run_turn(session, turn.prompt, result)
                if turn.question is not None:
                    result.checks.append(check_question(k, turn.prompt, turn.question, outcome.reply,
                                                        outcome.calls, outcome.error))
    result.side_calls = side.calls
    result.side_call_tokens = side.prompt_tokens
    result.score = run_score(result.checks)
    result.seconds = time.monotonic() - started
    tell(Progress(scenario.name, memory, run, runs, len(scenario.turns), len(scenario.turns), "done",
                    result.score))
    return result


async def run_eval(options: EvalOptions, config: Config | None = None,
                   progress: Callable[[Progress], Any] | None = None) -> EvalReport:
    """Run every scenario of ``options`` with each memory setting, ``runs``
    times (see the module doc). ``config`` is the person's (default: loaded
    from their home). Raises :class:`EvalEndpointError` when no endpoint
    answers or it goes away, and :class:`wisp.core.config.ConfigError` for
    a bad config."""
    if options.runs < 1:
        raise ValueError("runs must be at least 1")
    person = _person_config(config or Config.load(), options.model)
    link = ModelLink(person)
    try:
        if not await link.connect():
            raise EvalEndpointError(f"no model endpoint: {link.error}")
        report = EvalReport(_now_text(), link.model, link.label, options.runs, options.quick,
                            tuple(options.memory), settings=dict(options.settings))
        for scenario in options.scenarios:
            chosen = scenario.quick() if options.quick else scenario
            cells = {m: Cell(chosen.name, m) for m in options.memory}
            for memory in options.memory:
                for run in range(1, options.runs + 1):
                    cells[memory].runs.append(await run_once(chosen, memory, run, options.runs, person, link,
                                                             quick=options.quick, progress=progress,
                                                             settings=options.settings))
            report.results.append((chosen.name, chosen.title, cells))
        report.finished_at = _now_text()
        return report
    finally:
        await asyncio.shield(link.close())
