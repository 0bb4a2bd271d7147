"""Durations, offsets and instants of the virtual clock."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caveat.replay import format_duration, parse_duration
from caveat.replay._time import parse_instant

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("15m", timedelta(minutes=15)),
        ("1h", timedelta(hours=1)),
        ("12d", timedelta(days=12)),
        ("0s", timedelta(0)),
        ("007m", timedelta(minutes=7)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    # the last is an Arabic-Indic digit one: only ASCII digits count
    ["", "15", "m", "15 m", "1.5h", "-5m", "+5m", "15M", "1w", "1h30m", " 1h", "\u0661h"],
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text)


def test_parse_duration_out_of_range_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_duration("999999999999d")


@given(st.integers(min_value=0, max_value=10**12), st.sampled_from(sorted(UNITS)))
def test_duration_text_round_trips(amount: int, unit: str) -> None:
    try:
        parsed = parse_duration(f"{amount}{unit}")
    except ValueError:
        assert amount * UNITS[unit] > timedelta.max // timedelta(seconds=1)
        return
    assert parsed == timedelta(seconds=amount * UNITS[unit])
    assert parse_duration(format_duration(parsed)) == parsed


@given(st.integers(min_value=0, max_value=999_999_999 * 86_400))
def test_duration_value_round_trips(seconds: int) -> None:
    value = timedelta(seconds=seconds)
    text = format_duration(value)
    assert parse_duration(text) == value
    amount, unit = int(text[:-1]), text[-1]
    # the largest unit that is exact: the next one up would not be
    bigger = [u for u in UNITS if UNITS[u] > UNITS[unit]]
    assert all(seconds % UNITS[u] for u in bigger) or seconds == 0
    assert amount * UNITS[unit] == seconds


def test_format_duration_examples_and_refusals() -> None:
    assert format_duration(timedelta(hours=36)) == "36h"
    assert format_duration(timedelta(days=2)) == "2d"
    assert format_duration(timedelta(seconds=90)) == "90s"
    assert format_duration(timedelta(0)) == "0d"
    with pytest.raises(ValueError):
        format_duration(timedelta(milliseconds=5))
    with pytest.raises(ValueError):
        format_duration(timedelta(seconds=-1))


def test_parse_instant() -> None:
    nine = datetime(2026, 3, 1, 9, tzinfo=UTC)
    assert parse_instant("2026-03-01T09:00:00Z") == nine
    assert parse_instant("2026-03-01T10:00:00+01:00") == nine
    assert parse_instant(datetime(2026, 3, 1, 4, tzinfo=timezone(timedelta(hours=-5)))) == nine
    assert parse_instant("2026-03-01T10:00:00+01:00").tzinfo is UTC
    with pytest.raises(ValueError, match="no timezone"):
        parse_instant("2026-03-01T09:00:00")
    with pytest.raises(ValueError, match="no timezone"):
        parse_instant(datetime(2026, 3, 1, 9))
    with pytest.raises(ValueError, match="date without a time"):
        parse_instant(date(2026, 3, 1))
    with pytest.raises(ValueError, match="is not a time"):
        parse_instant("next tuesday")
    with pytest.raises(ValueError, match="expected a UTC time"):
        parse_instant(12)
    with pytest.raises(ValueError, match="out of range"):
        parse_instant("0001-01-01T00:00:00+05:00")
