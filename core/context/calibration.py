"""Per-model calibration of wisp's token estimate against the endpoint's counts.

Issue "Layered context", "Token budget": count tokens per layer, calibrate
the estimate against the prompt token counts the endpoint reports, and keep
the calibration per model.

wisp estimates tokens at about four characters a token
(:mod:`wisp.core.tokens`). After each request the endpoint reports
the prompt tokens it counted; :meth:`Calibration.observe` folds the ratio
``reported / estimated`` into the model's stored ratio (an exponential
moving average, weight :data:`ALPHA` for the new sample), and
:meth:`Calibration.ratio` gives the factor the composer multiplies its
estimates by. A sample is ignored when:

- either count is missing or the estimate is below :data:`MIN_ESTIMATE`
  tokens (chat templates dominate tiny prompts);
- the ratio is outside ``[MIN_RATIO, MAX_RATIO]``, which means the endpoint
  truncated the prompt or reported something else, not a tokenizer
  difference (the agent warns about truncation separately).

The table also keeps the last context window seen for the model (tokens), so
``wisp inspect context`` can compose without asking the endpoint.

A server that gives no count at all (an older llama.cpp: no usage in its
stream, no ``/tokenize``, a refusal for size that says only "the request
exceeds the available context size") still teaches something: each such
refusal, and the refit it then accepted, say that its tokenizer counts at
least so many times wisp's estimate. :meth:`Calibration.observe_floor`
keeps the highest such ratio as the model's ``floor``, and
:attr:`CalibrationState.effective` never plans below it, so the next
request is not refused again. It needs no trust ramp: it is not one odd
count but a request the server refused. A count the server does give
later is the better witness: :meth:`Calibration.observe` lowers the floor
to that count's ratio (and the moving average goes on as before).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from ..clock import utc_now

__all__ = ["Calibration", "CalibrationState", "ALPHA", "MIN_ESTIMATE", "MIN_RATIO", "MAX_RATIO"]

ALPHA = 0.3
MIN_ESTIMATE = 64  # tokens
MIN_RATIO = 0.4
MAX_RATIO = 2.5
#: Requests after which the calibration is trusted in full.
TRUST_SAMPLES = 5


def _now() -> str:
    return utc_now()


@dataclass(frozen=True)
class CalibrationState:
    """A model's calibration: ``ratio`` (reported ÷ estimated; 1.0 when
    uncalibrated), ``samples`` (requests folded in), ``context_window`` (the
    last window seen, tokens, or ``None``), ``floor`` (the least ratio to
    plan with, learned from refusals that gave no count, or ``None``)."""

    model: str
    ratio: float = 1.0
    samples: int = 0
    context_window: int | None = None
    floor: float | None = None

    @property
    def effective(self) -> float:
        """The factor to plan with: the stored ratio, trusted in proportion to
        the samples behind it up to :data:`TRUST_SAMPLES` (one odd count must
        not make wisp think a request is half its size), and never below
        :attr:`floor` (a server refused requests planned below it)."""
        trust = min(1.0, self.samples / TRUST_SAMPLES)
        return max(1.0 + (self.ratio - 1.0) * trust, self.floor or 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "ratio": round(self.ratio, 4), "samples": self.samples,
                "effective": round(self.effective, 4), "context_window": self.context_window,
                "floor": round(self.floor, 4) if self.floor is not None else None}


class Calibration:
    """The ``token_calibration`` table of a :class:`wisp.core.store.Store`."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def get(self, model: str | None) -> CalibrationState:
        """The model's calibration (ratio 1.0 and no samples when none is stored)."""
        name = model or ""
        row = next(iter(await self.store.db.execute_fetchall(
            "SELECT ratio, samples, context_window, floor FROM token_calibration WHERE model = ?", (name,))), None)
        if row is None:
            return CalibrationState(name)
        return CalibrationState(name, float(row[0]), int(row[1]), row[2],
                                float(row[3]) if row[3] is not None else None)

    async def ratio(self, model: str | None) -> float:
        """The factor for the model's estimates (1.0 when uncalibrated)."""
        return (await self.get(model)).ratio

    async def observe(self, model: str | None, reported: int | None, estimated: int | None) -> CalibrationState | None:
        """Fold one request's counts (tokens) into the model's ratio; returns
        the new state, or ``None`` when the sample was ignored (see the module doc).
        A floor above this sample is lowered to it: the server's own count of a
        request it took outweighs a bound learned from one it refused."""
        if not model or reported is None or estimated is None or estimated < MIN_ESTIMATE or reported <= 0:
            return None
        sample = reported / estimated
        if not (MIN_RATIO <= sample <= MAX_RATIO):
            return None
        state = await self.get(model)
        ratio = sample if state.samples == 0 else (1 - ALPHA) * state.ratio + ALPHA * sample
        floor = min(state.floor, sample) if state.floor is not None else None
        async with self.store.transaction() as db:
            await db.execute(
                "INSERT INTO token_calibration (model, ratio, samples, context_window, updated_at)"
                " VALUES (?, ?, 1, ?, ?) ON CONFLICT (model) DO UPDATE SET ratio = excluded.ratio,"
                " samples = token_calibration.samples + 1, updated_at = excluded.updated_at",
                (model, ratio, state.context_window, _now()),
            )
            if floor != state.floor:
                await db.execute("UPDATE token_calibration SET floor = ? WHERE model = ?", (floor, model))
        return CalibrationState(model, ratio, state.samples + 1, state.context_window, floor)

    async def observe_floor(self, model: str | None, floor: float | None) -> CalibrationState | None:
        """Raise the model's :attr:`~CalibrationState.floor` to ``floor`` (a ratio
        of the server's tokens to wisp's estimate that a request refused without
        a count, or the refit it then took, showed; see the module doc); a lower
        floor changes nothing. Returns the new state, or ``None`` when nothing
        changed or ``floor`` is outside ``(1.0, MAX_RATIO]`` (at or below 1 a
        refusal says nothing about the tokenizer: the server runs a smaller
        window than planned; above, it counted something else)."""
        if not model or floor is None or not (1.0 < floor <= MAX_RATIO):
            return None
        state = await self.get(model)
        if state.floor is not None and state.floor >= floor:
            return None
        async with self.store.transaction() as db:
            await db.execute(
                "INSERT INTO token_calibration (model, ratio, samples, context_window, floor, updated_at)"
                " VALUES (?, 1.0, 0, ?, ?, ?) ON CONFLICT (model) DO UPDATE SET floor = excluded.floor,"
                " updated_at = excluded.updated_at",
                (model, state.context_window, floor, _now()),
            )
        return CalibrationState(model, state.ratio, state.samples, state.context_window, floor)

    async def remember_window(self, model: str | None, window: int | None) -> None:
        """Keep the last context window (tokens) seen for the model."""
        if not model or not window:
            return
        async with self.store.transaction() as db:
            await db.execute(
                "INSERT INTO token_calibration (model, ratio, samples, context_window, updated_at)"
                " VALUES (?, 1.0, 0, ?, ?) ON CONFLICT (model) DO UPDATE SET"
                " context_window = excluded.context_window, updated_at = excluded.updated_at",
                (model, int(window), _now()),
            )
