"""One rule for the times wisp records (core/clock.py): UTC, ISO 8601, ``Z``, in three precisions."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wisp.core.clock import utc_now, utc_text

MOMENTS = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2999, 12, 30),
                       timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)),
                                                  timezone(timedelta(hours=-8))]))


def test_the_three_precisions() -> None:
    moment = datetime(2026, 12, 7, 23, 13, 5, 123456, tzinfo=timezone.utc)
    assert utc_text(moment) == "2026-12-07T23:13:05.123456Z"
    assert utc_text(moment, "milliseconds") == "2026-12-07T23:13:05.123Z"
    assert utc_text(moment, "seconds") == "2026-12-07T23:13:05Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", utc_now())


def test_another_zone_is_written_as_its_instant_in_utc() -> None:
    moment = datetime(2026, 12, 8, 4, 43, 5, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    assert utc_text(moment, "seconds") == "2026-12-07T23:13:05Z"


def test_a_naive_time_or_an_unknown_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        utc_text(datetime(2026, 12, 7))
    with pytest.raises(ValueError, match="timespec"):
        utc_text(datetime(2026, 12, 7, tzinfo=timezone.utc), "minutes")


@given(MOMENTS, MOMENTS)
def test_texts_compare_as_their_instants_do(a: datetime, b: datetime) -> None:
    """Stored times are compared as text (ORDER BY, cut-offs): the text's order is the instants'."""
    if a != b:
        assert (utc_text(a) < utc_text(b)) == (a < b)
    else:
        assert utc_text(a) == utc_text(b)
