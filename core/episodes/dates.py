"""Dates and time zones of episodic memory: the memory time zone, ``--since``/``--until``.

Rules (issue "Episodic memory across conversations", "Filters" and
"Settings"; the reference ``enso-episodic-memory.txt``, "Dates and
timezones"):

- Stored times are UTC (ISO 8601 text with ``Z``). Displayed dates and
  calendar boundaries use the memory time zone: config ``memory.timezone``
  (an IANA name such as ``Europe/London``), else the machine's own zone.
- ``--since`` is included and ``--until`` excluded. Each value names one
  instant:

  ``today`` / ``yesterday``
      the start (local midnight) of that day;
  ``week`` / ``month``
      the start of the current calendar week (Monday) / month;
  ``7d``, ``2w``, ``24h`` (also ``7 days``, ``24 hours``)
      that long before now: days and weeks count calendar days in the
      memory time zone (the same wall-clock time, so ``7d`` across a DST
      change is 167 or 169 hours), hours count exact hours;
  ``2025-03-30``
      a plain date: its local midnight in the memory time zone (on a day
      that starts inside a DST gap, the first instant of the day);
  ``2025-03-30T14:00:00+01:00`` / ``…Z``
      an exact timestamp, which must carry its offset: one without is
      refused, since it could name two instants.

Python's :mod:`zoneinfo` reads the system's tz database; on a system
without one it falls back to the ``tzdata`` package (see pyproject.toml).
"""

from __future__ import annotations

import os
import re
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

from ..timezones import TimezoneError, check_timezone, zone
from ..clock import utc_text  # an aware datetime as the store writes times (re-exported)

__all__ = [
    "DateError", "UTC", "check_timezone", "memory_timezone", "local_timezone", "zone_name",
    "parse_bound", "utc_text", "parse_utc", "local", "format_local", "local_date",
    "start_of_day",
]

UTC = timezone.utc

_DURATION = re.compile(r"^(\d{1,5})\s*(h|hr|hrs|hours?|d|days?|w|wk|wks|weeks?)$", re.IGNORECASE)
_PLAIN_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_WORDS = ("today", "yesterday", "week", "month")
FORMS = ("today, yesterday, week, month, 7d, 24h, a date such as 2025-03-30, "
         "or an exact time with its offset such as 2025-03-30T14:00:00+01:00")


class DateError(ValueError):
    """A ``--since``/``--until`` value or a time zone that cannot be used; the
    message says what to write instead."""


# --- time zones ----------------------------------------------------------------


def _zone(name: str) -> ZoneInfo:
    try:
        return zone(name)
    except TimezoneError as exc:
        raise DateError(str(exc)) from None


def local_timezone() -> tzinfo:
    """The machine's own time zone: ``$TZ`` when it names a zone, else
    ``/etc/timezone``, else the zone ``/etc/localtime`` links to or holds,
    else the current fixed UTC offset (no DST rules then)."""
    tz_env = os.environ.get("TZ", "").strip().lstrip(":")
    if tz_env:
        try:
            return _zone(tz_env)
        except DateError:
            pass
    try:
        name = Path("/etc/timezone").read_text(encoding="utf-8").strip()
        if name:
            return _zone(name)
    except (OSError, DateError, UnicodeDecodeError):
        pass
    localtime = Path("/etc/localtime")
    try:
        target = os.path.realpath(localtime)
        if "zoneinfo/" in target:
            return _zone(target.split("zoneinfo/", 1)[1])
    except (OSError, DateError):
        pass
    from zoneinfo import ZoneInfo

    try:
        with open(localtime, "rb") as fh:
            return ZoneInfo.from_file(fh, key="localtime")
    except (OSError, ValueError):
        pass
    return datetime.now().astimezone().tzinfo or UTC


def memory_timezone(config: Any) -> tzinfo:
    """The memory time zone from config ``memory.timezone``, else the
    machine's (:func:`local_timezone`). Raises :class:`DateError` for a name
    this machine does not know (config validates it when set, but the file
    can be edited by hand, or moved to a machine without that zone)."""
    name = config.get("memory.timezone") if config is not None else None
    if name:
        try:
            return _zone(name)
        except DateError as exc:
            raise DateError(f"config memory.timezone: {exc}; fix it with "
                            "`wisp config set memory.timezone Europe/London`") from None
    return local_timezone()


def zone_name(tz: tzinfo) -> str:
    """A zone's name for display: its IANA key, else its UTC offset."""
    key = getattr(tz, "key", None)
    if key and key != "localtime":
        return str(key)
    off = datetime.now(tz).utcoffset() or timedelta(0)
    return _offset_text(off) if key != "localtime" else f"local ({_offset_text(off)})"


def _offset_text(off: timedelta) -> str:
    minutes = int(off.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


# --- instants ------------------------------------------------------------------


def parse_utc(text: str) -> datetime:
    """A stored time (``2025-01-31T14:05:12.123456Z``, or any ISO text with an
    offset) as an aware UTC datetime."""
    s = str(text).strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    dt = datetime.fromisoformat(s)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def local(text_or_dt: str | datetime, tz: tzinfo) -> datetime:
    """A stored time (or an aware datetime) in the zone ``tz``."""
    dt = parse_utc(text_or_dt) if isinstance(text_or_dt, str) else text_or_dt
    return dt.astimezone(tz)


def local_date(text: str, tz: tzinfo) -> date:
    """The calendar date, in ``tz``, of a stored time."""
    return local(text, tz).date()


def format_local(text: str | None, tz: tzinfo, *, seconds: bool = False, weekday: bool = False) -> str:
    """A stored time for people: ``2025-03-04 14:05 GMT`` in ``tz`` (with
    ``seconds``, ``14:05:12``; with ``weekday``, a leading ``Tue``). ``—``
    for ``None``."""
    if not text:
        return "—"
    dt = local(text, tz)
    fmt = ("%a " if weekday else "") + "%Y-%m-%d %H:%M" + (":%S" if seconds else "")
    abbrev = dt.tzname() or _offset_text(dt.utcoffset() or timedelta(0))
    return f"{dt.strftime(fmt)} {abbrev}"


def start_of_day(day: date, tz: tzinfo) -> datetime:
    """The first instant of ``day`` in ``tz``, in UTC.

    Local midnight, or when midnight falls in a DST gap (the clocks jumped
    over it), the instant the day began: :mod:`zoneinfo` reads a time in a gap
    with the offset before the change, which lands exactly on the change.
    """
    return datetime.combine(day, time(0, 0), tzinfo=tz).astimezone(UTC)


def _wall_back(now_local: datetime, days: int, tz: tzinfo) -> datetime:
    naive = now_local.replace(tzinfo=None) - timedelta(days=days)
    return naive.replace(tzinfo=tz).astimezone(UTC)


def parse_bound(value: str, tz: tzinfo, now: datetime | None = None, *, flag: str = "--since") -> datetime:
    """One ``--since``/``--until`` value as an aware UTC instant (see the
    module docstring for the forms). ``now`` (aware; default the current
    time) anchors the relative forms. Raises :class:`DateError` naming the
    flag and the accepted forms."""
    raw = str(value or "").strip()
    text = raw.lower()
    now = (now or datetime.now(UTC)).astimezone(UTC)
    now_local = now.astimezone(tz)
    today = now_local.date()
    if not text:
        raise DateError(f"{flag} needs a value: {FORMS}")
    if text in ("today",):
        return start_of_day(today, tz)
    if text == "yesterday":
        return start_of_day(today - timedelta(days=1), tz)
    if text in ("week", "this week"):
        return start_of_day(today - timedelta(days=today.weekday()), tz)
    if text in ("month", "this month"):
        return start_of_day(today.replace(day=1), tz)
    if text == "now":
        return now
    m = _DURATION.match(text)
    if m:
        n, unit = int(m.group(1)), m.group(2)[0]
        if unit == "h":
            return now - timedelta(hours=n)
        days = n * 7 if unit == "w" else n
        try:
            return _wall_back(now_local, days, tz)
        except OverflowError:
            raise DateError(f"{flag} {raw}: too far back") from None
    if _PLAIN_DATE.match(text):
        try:
            day = date.fromisoformat(text)
        except ValueError:
            raise DateError(f"{flag} {raw}: not a real date; write it as YYYY-MM-DD, such as 2025-03-30") from None
        return start_of_day(day, tz)
    iso = raw.replace(" ", "T", 1) if re.match(r"^\d{4}-\d{2}-\d{2} \d", raw) else raw
    if re.match(r"^\d{4}-\d{2}-\d{2}T", iso, re.IGNORECASE):
        try:
            dt = datetime.fromisoformat(iso[:-1] + "+00:00" if iso[-1:] in "zZ" else iso)
        except ValueError:
            raise DateError(f"{flag} {raw}: not a timestamp wisp can read; write it like "
                            "2025-03-30T14:00:00+01:00 or 2025-03-30T13:00:00Z") from None
        if dt.tzinfo is None or dt.utcoffset() is None:
            raise DateError(
                f"{flag} {raw}: an exact time must carry its UTC offset, such as {iso}+01:00 "
                f"or {iso}Z; or give a plain date (read in the memory time zone)")
        return dt.astimezone(UTC)
    raise DateError(f"{flag} {raw!r} is not a date wisp knows; use {FORMS}")


def bound_words() -> tuple[str, ...]:
    """The calendar words :func:`parse_bound` takes."""
    return _WORDS
