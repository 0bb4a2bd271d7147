"""Virtual-clock values in scenario files: durations, offsets and instants.

A duration is a whole number and one unit, ``s``, ``m``, ``h`` or ``d``
(``30s``, ``15m``, ``1h``, ``12d``), as in the predicate language. An instant
is an ISO 8601 time that carries its timezone; it is normalised to UTC.
Every parser here raises ``ValueError`` only, with a message fit for a user.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

__all__ = ["format_duration", "parse_duration", "parse_instant"]

_UNITS: dict[str, int] = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
_DURATION = re.compile(r"([0-9]{1,15})([smhd])")
_EXAMPLE_TIME = "2026-03-01T09:00:00Z"


def parse_duration(text: str) -> timedelta:
    """Parse ``<digits><unit>`` into a non-negative ``timedelta``; else ``ValueError``."""
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not a duration; write a whole number and a unit s, m, h or d,"
            " e.g. 30s, 15m, 1h, 12d"
        )
    try:
        return timedelta(seconds=int(match[1]) * _UNITS[match[2]])
    except OverflowError:
        raise ValueError(f"duration {text!r} is out of range") from None


def format_duration(value: timedelta) -> str:
    """Render a whole-second, non-negative ``timedelta`` in the largest exact unit.

    ``parse_duration(format_duration(td)) == td`` for every such value.
    """
    if value < timedelta(0) or value.microseconds:
        raise ValueError(f"{value!r} is not a whole, non-negative number of seconds")
    seconds = value.days * 86_400 + value.seconds
    for unit, size in _UNITS.items():
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    raise AssertionError("unreachable: every whole number of seconds is a multiple of 1s")


def parse_instant(value: object) -> datetime:
    """Turn a timezone-aware datetime or ISO 8601 string into an aware UTC datetime.

    A naive time, a bare date or anything else is a ``ValueError``.
    """
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(
                f"{value!r} is not a time; write an ISO 8601 UTC time such as {_EXAMPLE_TIME}"
            ) from None
        return _to_utc(parsed, shown=repr(value))
    if isinstance(value, datetime):
        return _to_utc(value, shown=value.isoformat())
    if isinstance(value, date):
        raise ValueError(
            f"{value.isoformat()} is a date without a time; write e.g. {_EXAMPLE_TIME}"
        )
    raise ValueError(f"expected a UTC time such as {_EXAMPLE_TIME}, got {type(value).__name__}")


def _to_utc(value: datetime, *, shown: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{shown} has no timezone; write times in UTC with a Z, e.g. {_EXAMPLE_TIME}"
        )
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{shown} is out of range") from None
    # Rebuild as a plain datetime: YAML libraries hand out subclasses.
    return datetime(
        utc.year,
        utc.month,
        utc.day,
        utc.hour,
        utc.minute,
        utc.second,
        utc.microsecond,
        tzinfo=UTC,
    )
