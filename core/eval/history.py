"""The results store: past evaluations, one JSON line each, in the data dir.

Issue "``wisp eval``": results are kept, and ``wisp eval history [--json]``
lists past runs (date, model, endpoint, scores), so a person can compare
models and wisp versions.

The file is ``eval-history.jsonl`` beside the database (config
``store.path``'s folder, by default the data dir), created with mode 0600
and only ever appended to: one line per finished ``wisp eval``, written
in one ``write`` to a file opened with ``O_APPEND``, so two evaluations
ending together do not interleave their lines. A line holds
:meth:`wisp.core.eval.runner.EvalReport.to_dict` without the per-run
detail, under ``"format": 1``.

Reading is forgiving (the file is outside input: it may be edited, cut
short by a full disk, or written by a later wisp): a line that is not a
record this wisp reads is skipped and counted, never a crash.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ..paths import ensure_private_dir, open_private

__all__ = ["HISTORY_FILE", "RECORD_FORMAT", "history_path", "append_record", "read_history", "parse_record"]

HISTORY_FILE = "eval-history.jsonl"
RECORD_FORMAT = 1
#: A line longer than this (bytes) is skipped unread.
MAX_LINE_BYTES = 1024 * 1024


def history_path(config: Any) -> Path:
    """Where the history lives for ``config`` (a :class:`wisp.core.config.Config`)."""
    return Path(config.db_path).parent / HISTORY_FILE


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one evaluation (a JSON-ready dict) as a line. Raises ``OSError``."""
    line = json.dumps({"format": RECORD_FORMAT, **record}, ensure_ascii=False, separators=(",", ":")) + "\n"
    data = line.encode("utf-8")
    ensure_private_dir(Path(path).parent)
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


def _number(value: Any) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _text(value: Any, limit: int = 500) -> str | None:
    if not isinstance(value, str):
        return None
    return value[:limit]


def _cell(obj: Any) -> dict[str, Any] | None:
    if not isinstance(obj, dict):
        return None
    scores = obj.get("scores")
    return {
        "mean": _number(obj.get("mean")),
        "spread": _number(obj.get("spread")),
        "scores": [s for s in (_number(x) for x in scores) if s is not None][:1000] if isinstance(scores, list)
        else [],
        "tokens_per_request": _number(obj.get("tokens_per_request")),
        "model_calls": _number(obj.get("model_calls")),
        "wrong_calls": int(_number(obj.get("wrong_calls")) or 0),
    }


#: A setting kept in the history: at most this many, each key and text value at most 200 characters.
MAX_SETTINGS = 50


def _settings(obj: Any) -> dict[str, Any]:
    """The ``--set`` settings of a record: string keys to JSON scalars
    (``null`` included) or lists of strings; anything else is dropped."""
    if not isinstance(obj, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in list(obj.items())[:MAX_SETTINGS]:
        if not isinstance(key, str) or not key or len(key) > 200:
            continue
        if value is None or isinstance(value, bool):
            out[key] = value
        elif isinstance(value, (int, float)):
            number = _number(value)
            if number is not None:
                out[key] = value if isinstance(value, int) else number
        elif isinstance(value, str):
            out[key] = value[:200]
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[key] = [v[:200] for v in value[:100]]
    return out


def parse_record(obj: Any) -> dict[str, Any] | None:
    """A history record in the shape this wisp reads, or ``None`` when
    ``obj`` is not one (another format, a missing date or model, no
    scenarios). Unknown fields are dropped; numbers that are not finite
    become ``None``; ``settings`` (``wisp eval --set``) is ``{}`` when the
    record has none."""
    if not isinstance(obj, dict) or obj.get("format") != RECORD_FORMAT:
        return None
    date, model = _text(obj.get("date"), 64), _text(obj.get("model"))
    scenarios = obj.get("scenarios")
    if not date or model is None or not isinstance(scenarios, list):
        return None
    runs = obj.get("runs")
    rows = []
    for item in scenarios[:1000]:
        if not isinstance(item, dict) or not _text(item.get("name"), 100):
            continue
        row: dict[str, Any] = {"name": _text(item.get("name"), 100), "title": _text(item.get("title")) or ""}
        for key in ("off", "on"):
            cell = _cell(item.get(key))
            if cell is not None:
                row[key] = cell
        rows.append(row)
    return {
        "date": date, "finished": _text(obj.get("finished"), 64) or "", "wisp": _text(obj.get("wisp"), 64) or "?",
        "model": model, "endpoint": _text(obj.get("endpoint")) or "",
        "runs": runs if isinstance(runs, int) and not isinstance(runs, bool) else None,
        "quick": obj.get("quick") is True, "settings": _settings(obj.get("settings")), "scenarios": rows,
    }


def read_history(path: Path) -> tuple[list[dict[str, Any]], int]:
    """``(records, skipped)``: the readable records, oldest first, and how
    many lines were skipped. A missing file is no history. Raises
    ``OSError`` only for a file that exists and cannot be read."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return [], 0
    records: list[dict[str, Any]] = []
    skipped = 0
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            skipped += 1
            continue
        try:
            obj = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            skipped += 1
            continue
        record = parse_record(obj)
        if record is None:
            skipped += 1
        else:
            records.append(record)
    return records, skipped
