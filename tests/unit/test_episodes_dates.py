"""Dates and time zones of episodic memory: --since/--until across DST changes, in several zones."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from wisp.core.database import open_store
from wisp.core.config import Config, ConfigError
from wisp.core.episodes.dates import (DateError, check_timezone, format_local, memory_timezone, parse_bound,
                                      start_of_day)
from wisp.core.episodes.query import MemoryFilter, find_memories, make_filter
from wisp.core.store import Store
from tests.support.episodes_util import add_exchange, add_memory

UTC = timezone.utc
LONDON = ZoneInfo("Europe/London")  # BST from 2025-03-30 01:00 UTC; GMT from 2025-10-26 01:00 UTC
NEW_YORK = ZoneInfo("America/New_York")  # EDT from 2025-03-09 07:00 UTC; EST from 2025-11-02 06:00 UTC


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize("tz, day, expected", [
    (LONDON, "2025-03-30", utc(2025, 3, 30, 0, 0)),      # the DST day starts in GMT
    (LONDON, "2025-03-31", utc(2025, 3, 30, 23, 0)),     # the next starts in BST
    (LONDON, "2025-10-26", utc(2025, 10, 25, 23, 0)),    # the fall-back day starts in BST
    (LONDON, "2025-10-27", utc(2025, 10, 27, 0, 0)),
    (NEW_YORK, "2025-03-09", utc(2025, 3, 9, 5, 0)),     # EST midnight
    (NEW_YORK, "2025-03-10", utc(2025, 3, 10, 4, 0)),    # EDT midnight
    (NEW_YORK, "2025-11-02", utc(2025, 11, 2, 4, 0)),
    (NEW_YORK, "2025-11-03", utc(2025, 11, 3, 5, 0)),
])
def test_plain_date_is_local_midnight_across_dst(tz, day, expected) -> None:
    assert parse_bound(day, tz) == expected


def test_day_lengths_across_dst_in_two_zones() -> None:
    def hours(tz, a, b):
        return (parse_bound(b, tz) - parse_bound(a, tz)) / timedelta(hours=1)

    assert hours(LONDON, "2025-03-30", "2025-03-31") == 23
    assert hours(LONDON, "2025-10-26", "2025-10-27") == 25
    assert hours(NEW_YORK, "2025-03-09", "2025-03-10") == 23
    assert hours(NEW_YORK, "2025-11-02", "2025-11-03") == 25
    assert hours(LONDON, "2025-03-10", "2025-03-11") == 24


def test_midnight_in_a_dst_gap_starts_the_day_at_the_change() -> None:
    sao_paulo = ZoneInfo("America/Sao_Paulo")  # 2018-11-04: clocks jumped from 00:00 to 01:00
    start = start_of_day(datetime(2018, 11, 4).date(), sao_paulo)
    assert start == utc(2018, 11, 4, 3, 0)
    assert start.astimezone(sao_paulo).strftime("%Y-%m-%d %H:%M") == "2018-11-04 01:00"


@pytest.mark.parametrize("tz, now, expected", [
    # now is Monday 2025-03-31 12:00 BST (11:00 UTC): yesterday (the DST day) began at 00:00 GMT
    (LONDON, utc(2025, 3, 31, 11, 0), {"today": utc(2025, 3, 30, 23), "yesterday": utc(2025, 3, 30, 0),
                                       "week": utc(2025, 3, 30, 23), "month": utc(2025, 3, 1, 0)}),
    # now is Monday 2025-03-10 12:00 EDT (16:00 UTC)
    (NEW_YORK, utc(2025, 3, 10, 16, 0), {"today": utc(2025, 3, 10, 4), "yesterday": utc(2025, 3, 9, 5),
                                         "week": utc(2025, 3, 10, 4), "month": utc(2025, 3, 1, 5)}),
])
def test_calendar_words_across_dst(tz, now, expected) -> None:
    for word, want in expected.items():
        assert parse_bound(word, tz, now) == want, word


def test_durations_across_dst() -> None:
    now = utc(2025, 4, 2, 11, 0)  # Wednesday 12:00 BST
    # 7d is the same wall-clock time seven calendar days back: 12:00 GMT on 26 March, 167 hours ago
    assert parse_bound("7d", LONDON, now) == utc(2025, 3, 26, 12, 0)
    assert (now - parse_bound("7d", LONDON, now)) == timedelta(hours=167)
    assert parse_bound("7 days", LONDON, now) == parse_bound("7d", LONDON, now)
    assert parse_bound("1w", LONDON, now) == parse_bound("7d", LONDON, now)
    # 24h is exact hours, whatever the zone
    assert parse_bound("24h", LONDON, now) == now - timedelta(hours=24)
    assert parse_bound("24h", NEW_YORK, now) == now - timedelta(hours=24)
    ny_now = utc(2025, 3, 12, 16, 0)  # Wednesday 12:00 EDT
    assert parse_bound("7d", NEW_YORK, ny_now) == utc(2025, 3, 5, 17, 0)  # 12:00 EST: 167 hours


def test_exact_times_must_carry_their_offset() -> None:
    assert parse_bound("2025-03-30T14:00:00+01:00", LONDON) == utc(2025, 3, 30, 13, 0)
    assert parse_bound("2025-03-30T13:00:00Z", NEW_YORK) == utc(2025, 3, 30, 13, 0)
    assert parse_bound("2025-03-30 13:00:00+00:00", NEW_YORK) == utc(2025, 3, 30, 13, 0)
    for bad in ("2025-03-30T14:00:00", "2025-03-30T14:00", "2025-03-30 14:00"):
        with pytest.raises(DateError, match="must carry its UTC offset"):
            parse_bound(bad, LONDON, flag="--until")
    for bad in ("tomorrowish", "2025-02-30", "", "7x", "2025-13-01T00:00:00Z"):
        with pytest.raises(DateError):
            parse_bound(bad, LONDON)


def test_since_must_come_before_until() -> None:
    with pytest.raises(DateError, match="before --until"):
        make_filter(LONDON, since="2025-03-31", until="2025-03-30", env={})


def test_display_uses_the_memory_timezone() -> None:
    stored = "2025-03-30T23:30:00.000000Z"
    assert format_local(stored, LONDON) == "2025-03-31 00:30 BST"
    assert format_local(stored, NEW_YORK) == "2025-03-30 19:30 EDT"


async def test_date_filters_on_stored_memories_in_two_zones(tmp_path: Path) -> None:
    """A memory whose earliest request is 23:30 UTC on 30 March is on 31 March in
    London (BST) and on 30 March in New York; the filters follow the zone."""
    async with await open_store(tmp_path / "w.db") as store:
        late = await add_exchange(store, "late request", requested_at="2025-03-30T23:30:00.000000Z",
                                  finished_at="2025-03-31T00:10:00.000000Z")
        early = await add_exchange(store, "early request", requested_at="2025-03-30T00:30:00.000000Z")
        m_late = await add_memory(store, "late memory", [late])
        m_early = await add_memory(store, "early memory", [early])

        async def numbers(tz, since, until):
            f = make_filter(tz, since=since, until=until, env={})
            return [m.number for m in (await find_memories(store.db, f)).memories]

        assert await numbers(LONDON, "2025-03-31", "2025-04-01") == [m_late]
        assert await numbers(LONDON, "2025-03-30", "2025-03-31") == [m_early]
        assert await numbers(NEW_YORK, "2025-03-30", "2025-03-31") == [m_late]
        assert await numbers(NEW_YORK, "2025-03-29", "2025-03-30") == [m_early]  # 20:30 EDT on the 29th
        # the start is included, the end excluded, to the microsecond
        exact = "2025-03-30T23:30:00Z"
        assert await numbers(LONDON, exact, None) == [m_late]
        assert await numbers(LONDON, None, exact) == [m_early]


def test_config_timezone_is_validated_and_used(tmp_path: Path) -> None:
    cfg = Config.load(tmp_path / "config.json")
    with pytest.raises(ConfigError, match="IANA time zone"):
        cfg.set("memory.timezone", "Mars/Olympus_Mons")
    cfg.set("memory.timezone", "America/New_York")
    assert getattr(memory_timezone(Config.load(tmp_path / "config.json")), "key") == "America/New_York"
    assert check_timezone("Europe/London") is None and check_timezone("../etc/passwd")
    # unset: the machine's own zone
    cfg.unset("memory.timezone")
    assert memory_timezone(Config.load(tmp_path / "config.json")) is not None


def test_a_hand_edited_bad_timezone_is_a_clear_error(tmp_path: Path) -> None:
    cfg = Config(tmp_path / "c.json")
    cfg._values["memory.timezone"] = "Nowhere/Land"  # as if the file was edited on another machine
    with pytest.raises(DateError, match="memory.timezone"):
        memory_timezone(cfg)
