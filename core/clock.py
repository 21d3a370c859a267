"""The time as wisp writes it: one rule for every timestamp it records.

A leaf: it imports nothing of wisp's, so every layer can use it.

Every stored or logged time is UTC in ISO 8601 with a ``Z`` (never
``+00:00``), so that two of them compare as text in the order they happened
and a reader in any time zone reads the same instant. Microseconds are the
default: the store, the audit log and episodic memory order rows written
within one millisecond by them. A coarser precision is for what a person
reads in a file (the approvals file: seconds) or a record that never needs
more (a turn's start and end: milliseconds).
"""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["utc_now", "utc_text"]

_FORMATS = {
    "microseconds": "%Y-%m-%dT%H:%M:%S.%fZ",
    "seconds": "%Y-%m-%dT%H:%M:%SZ",
}


def utc_text(moment: datetime, timespec: str = "microseconds") -> str:
    """``moment`` (an aware datetime) as wisp writes times:
    ``2026-12-07T23:13:05.123456Z`` (``timespec`` ``"microseconds"``),
    ``…05.123Z`` (``"milliseconds"``) or ``…05Z`` (``"seconds"``). Raises
    ``ValueError`` for a naive datetime (it names no instant: attach its
    zone first) and for another ``timespec``."""
    if moment.tzinfo is None:
        raise ValueError("a naive datetime has no instant; attach its zone first")
    moment = moment.astimezone(timezone.utc)
    if timespec == "milliseconds":
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    try:
        return moment.strftime(_FORMATS[timespec])
    except KeyError:
        raise ValueError(f"timespec must be microseconds, milliseconds or seconds, not {timespec!r}") from None


def utc_now(timespec: str = "microseconds") -> str:
    """Now, as :func:`utc_text` writes it."""
    return utc_text(datetime.now(timezone.utc), timespec)
