"""IANA time zone names: the one check of a zone's name, for config validation and episodic memory's dates.

A leaf (issue "One core, built once": config validation must not pull in a
feature): :mod:`wisp.core.config` checks ``memory.timezone`` with
:func:`check_timezone`, and :mod:`wisp.core.episodes.dates` resolves zones
with :func:`zone`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

__all__ = ["TimezoneError", "zone", "check_timezone"]


class TimezoneError(ValueError):
    """A time zone name that cannot be used; the message says what to write."""


def zone(name: str) -> ZoneInfo:
    """The zone called ``name`` (``Europe/London``). Raises
    :class:`TimezoneError` for an empty name, a path, or a zone this machine
    does not know. :mod:`zoneinfo` (which reads the tz database's paths) is
    imported at the first zone wisp resolves, not with this module (issue 12)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    text = str(name or "").strip()
    if not text or text.startswith(("/", ".")) or ".." in text:
        raise TimezoneError(f"an IANA time zone name such as Europe/London or America/New_York, not {name!r}")
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise TimezoneError(
            f"an IANA time zone name such as Europe/London or America/New_York; "
            f"{text!r} is not one this machine knows") from None


def check_timezone(name: str) -> str | None:
    """``None`` when ``name`` is an IANA time zone this machine knows, else the
    error text (for config ``memory.timezone``)."""
    try:
        zone(name)
    except TimezoneError:
        return "an IANA time zone name this machine knows (such as Europe/London or America/New_York)"
    return None
