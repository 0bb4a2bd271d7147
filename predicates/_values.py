"""Value classes and literal helpers shared by the parser, printer and evaluator.

Everything here is exact: durations are integer microseconds, versions are
integer tuples with trailing zeros removed, timestamps are aware UTC datetimes
with microsecond resolution, decimals are printed without exponent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta, timezone
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any, NoReturn

from predicates.errors import ValueTypeError

__all__ = [
    "DURATION_UNITS",
    "EPOCH",
    "MAX_DURATION_SECONDS",
    "MAX_NUMBER_DIGITS",
    "MAX_PREDICATE_LENGTH",
    "Duration",
    "Version",
    "check_string",
    "format_decimal",
    "format_timestamp",
    "number_fits",
    "parse_duration_literal",
    "parse_timestamp_literal",
    "quote_body",
    "quote_string",
    "timestamp_from_micros",
    "timestamp_micros",
]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_DURATION_SECONDS = 10**9
MAX_NUMBER_DIGITS = 1000
MAX_PREDICATE_LENGTH = 10_000
_INT_LIMIT: int = 10**MAX_NUMBER_DIGITS
_MAX_VERSION_SEGMENT = 10**18
_MAX_VERSION_SEGMENTS = 64

# Largest unit first: the printer picks the largest one that divides exactly.
DURATION_UNITS: tuple[tuple[str, int], ...] = (
    ("d", 86_400_000_000),
    ("h", 3_600_000_000),
    ("m", 60_000_000),
    ("s", 1_000_000),
    ("ms", 1_000),
    ("us", 1),
)
_UNIT_MICROS = dict(DURATION_UNITS)
_DURATION_RE = re.compile(r"([0-9]+)(us|ms|s|m|h|d)")
_VERSION_RE = re.compile(r"v?([0-9]+(?:\.[0-9]+)*)")
_TIMESTAMP_RE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]+))?(Z|[+-][0-9]{2}:[0-9]{2})"
)


def _refuse(expected: str, raw: object, why: str) -> NoReturn:
    text = repr(raw)
    if len(text) > 200:
        text = text[:197] + "..."
    raise ValueTypeError(f"{why}: {text}", expected=expected, value=text)


class Duration:
    """A non-negative span of time, exact to the microsecond.

    ``Duration(seconds)`` takes an int, float or Decimal number of seconds
    (rounded half-even to the microsecond); the span must lie in
    ``0 .. MAX_DURATION_SECONDS``. Instances are immutable, hashable and
    totally ordered.
    """

    __slots__ = ("micros",)
    micros: int

    def __init__(self, seconds: int | float | Decimal) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float | Decimal):
            _refuse("duration", seconds, "a duration is a number of seconds")
        if isinstance(seconds, int):
            micros = seconds * 1_000_000
        else:
            try:
                exact = Decimal(seconds)
                if not exact.is_finite():
                    _refuse("duration", seconds, "a duration must be finite")
                micros = int(exact.scaleb(6).to_integral_value(ROUND_HALF_EVEN))
            except (InvalidOperation, OverflowError, ValueError):
                _refuse("duration", seconds, "not a representable duration")
        _check_duration_micros(micros, seconds)
        object.__setattr__(self, "micros", micros)

    @classmethod
    def from_micros(cls, micros: int) -> Duration:
        """The duration of exactly ``micros`` microseconds (validated like the constructor)."""
        if isinstance(micros, bool) or not isinstance(micros, int):
            _refuse("duration", micros, "microseconds must be an int")
        _check_duration_micros(micros, micros)
        obj = cls.__new__(cls)
        object.__setattr__(obj, "micros", micros)
        return obj

    @property
    def seconds(self) -> int | Decimal:
        """Seconds: an int when whole, else an exact Decimal."""
        whole, frac = divmod(self.micros, 1_000_000)
        if frac == 0:
            return whole
        return Decimal(self.micros).scaleb(-6)

    def literal(self) -> str:
        """The canonical literal: the largest unit that divides exactly (``90m``, ``1500ms``)."""
        if self.micros == 0:
            return "0s"
        for unit, size in DURATION_UNITS:
            if self.micros % size == 0:
                return f"{self.micros // size}{unit}"
        raise AssertionError("unreachable: 'us' divides everything")  # pragma: no cover

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Duration is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Duration is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Duration.from_micros, (self.micros,))

    def __repr__(self) -> str:
        return f"Duration({self.literal()})"

    def __str__(self) -> str:
        return self.literal()

    def __hash__(self) -> int:
        return hash(("Duration", self.micros))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Duration):
            return self.micros == other.micros
        return NotImplemented

    def __lt__(self, other: object) -> bool:
        if isinstance(other, Duration):
            return self.micros < other.micros
        return NotImplemented

    def __le__(self, other: object) -> bool:
        if isinstance(other, Duration):
            return self.micros <= other.micros
        return NotImplemented

    def __gt__(self, other: object) -> bool:
        if isinstance(other, Duration):
            return self.micros > other.micros
        return NotImplemented

    def __ge__(self, other: object) -> bool:
        if isinstance(other, Duration):
            return self.micros >= other.micros
        return NotImplemented


def _check_duration_micros(micros: int, raw: object) -> None:
    if micros < 0:
        _refuse("duration", raw, "a duration cannot be negative")
    if micros > MAX_DURATION_SECONDS * 1_000_000:
        _refuse("duration", raw, f"a duration is at most {MAX_DURATION_SECONDS} seconds")


def parse_duration_literal(text: str) -> Duration:
    """``30s``, ``5m``, ``1500ms``... -> Duration; ValueTypeError otherwise."""
    m = _DURATION_RE.fullmatch(text)
    if m is None or len(m.group(1)) > 30:
        _refuse("duration", text, "not a duration literal (like 30s, 5m, 2h, 7d, 250ms)")
    micros = int(m.group(1)) * _UNIT_MICROS[m.group(2)]
    _check_duration_micros(micros, text)
    return Duration.from_micros(micros)


class Version:
    """A dotted numeric version, ``Version((15, 10, 2))`` printed ``v15.10.2``.

    Segments are non-negative ints; trailing zero segments are dropped, so
    ``Version((15,)) == Version((15, 0))`` and ordering is numeric per segment
    with missing segments read as 0 (``v15.10 > v15.9``).
    """

    __slots__ = ("parts",)
    parts: tuple[int, ...]

    def __init__(self, parts: Iterable[int]) -> None:
        if isinstance(parts, str | bytes):
            _refuse("version", parts, "Version takes a tuple of ints; use Version.parse for text")
        try:
            items = tuple(parts)
        except TypeError:
            _refuse("version", parts, "Version takes a tuple of ints")
        if not items or len(items) > _MAX_VERSION_SEGMENTS:
            _refuse("version", parts, f"a version has 1 to {_MAX_VERSION_SEGMENTS} segments")
        for seg in items:
            if isinstance(seg, bool) or not isinstance(seg, int):
                _refuse("version", parts, "version segments are ints")
            if not 0 <= seg < _MAX_VERSION_SEGMENT:
                _refuse("version", parts, "version segments are between 0 and 10**18")
        norm = [int(seg) for seg in items]
        while len(norm) > 1 and norm[-1] == 0:
            norm.pop()
        object.__setattr__(self, "parts", tuple(norm))

    @classmethod
    def parse(cls, text: str) -> Version:
        """``"v15.6"`` or ``"15.6"`` -> Version; ValueTypeError for anything else."""
        if not isinstance(text, str):
            _refuse("version", text, "not a version string")
        m = _VERSION_RE.fullmatch(text)
        if m is None or any(len(seg) > 18 for seg in m.group(1).split(".")):
            _refuse("version", text, "not a version (like v15.4 or 15.4)")
        return cls(int(seg) for seg in m.group(1).split("."))

    def literal(self) -> str:
        """The canonical literal, ``v`` and dotted segments without trailing zeros."""
        return "v" + ".".join(str(seg) for seg in self.parts)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Version is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Version is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Version, (self.parts,))

    def __repr__(self) -> str:
        return f"Version({self.parts!r})"

    def __str__(self) -> str:
        return self.literal()

    def __hash__(self) -> int:
        return hash(("Version", self.parts))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Version):
            return self.parts == other.parts
        return NotImplemented

    def __lt__(self, other: object) -> bool:
        if isinstance(other, Version):
            return self.parts < other.parts
        return NotImplemented

    def __le__(self, other: object) -> bool:
        if isinstance(other, Version):
            return self.parts <= other.parts
        return NotImplemented

    def __gt__(self, other: object) -> bool:
        if isinstance(other, Version):
            return self.parts > other.parts
        return NotImplemented

    def __ge__(self, other: object) -> bool:
        if isinstance(other, Version):
            return self.parts >= other.parts
        return NotImplemented


# Timestamps -----------------------------------------------------------------


def parse_timestamp_literal(text: str) -> datetime:
    """ISO-8601 ``YYYY-MM-DDTHH:MM:SS[.ffffff](Z|+HH:MM)`` -> aware UTC datetime.

    At most six fractional digits; any explicit offset is converted to UTC;
    ValueTypeError for anything else (naive text, dates alone, bad fields).
    """
    if not isinstance(text, str):
        _refuse("timestamp", text, "not a timestamp string")
    m = _TIMESTAMP_RE.fullmatch(text)
    if m is None:
        _refuse("timestamp", text, "not an ISO-8601 timestamp with Z or an offset")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    if frac is not None and len(frac) > 6:
        _refuse("timestamp", text, "timestamps have at most 6 fractional digits")
    micros = int(frac.ljust(6, "0")) if frac else 0
    try:
        if zone == "Z":
            tz = UTC
        else:
            sign = -1 if zone[0] == "-" else 1
            hh, mm = int(zone[1:3]), int(zone[4:6])
            if hh > 23 or mm > 59:
                _refuse("timestamp", text, "invalid UTC offset")
            tz = timezone(sign * timedelta(hours=hh, minutes=mm))
        dt = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micros, tz
        )
        return dt.astimezone(UTC)
    except (ValueError, OverflowError):
        _refuse("timestamp", text, "not a valid UTC instant")


def format_timestamp(dt: datetime) -> str:
    """Canonical literal: UTC, ``Z``, fractional seconds without trailing zeros."""
    u = dt.astimezone(UTC)
    out = f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
    if u.microsecond:
        out += "." + f"{u.microsecond:06d}".rstrip("0")
    return out + "Z"


def timestamp_micros(dt: datetime) -> int:
    """Exact microseconds since the Unix epoch of an aware datetime."""
    return (dt - EPOCH) // timedelta(microseconds=1)


def timestamp_from_micros(micros: int) -> datetime:
    """Inverse of ``timestamp_micros``; ValueTypeError when out of datetime's range."""
    try:
        return EPOCH + timedelta(microseconds=micros)
    except (OverflowError, ValueError):
        _refuse("timestamp", micros, "timestamp out of range")


# Decimals and strings ---------------------------------------------------------


def format_decimal(d: Decimal) -> str:
    """Exact positional form with at least one fractional digit: ``0.8``, ``2.0``."""
    if d.is_zero():
        return "0.0"
    s = format(d, "f")
    if "." in s:
        s = s.rstrip("0")
        if s.endswith("."):
            s += "0"
    else:
        s += ".0"
    return s


def number_fits(n: int | Decimal) -> bool:
    """True when a number literal has at most MAX_NUMBER_DIGITS digits and exponent."""
    if isinstance(n, int):
        return -_INT_LIMIT < n < _INT_LIMIT
    digits: int = len(n.as_tuple().digits)
    exponent: int = n.adjusted()
    return digits <= MAX_NUMBER_DIGITS and abs(exponent) <= MAX_NUMBER_DIGITS


def check_string(s: str) -> str | None:
    """Why ``s`` cannot be stored (NUL or a lone surrogate), or None when it can."""
    if "\x00" in s:
        return "strings cannot contain NUL (U+0000)"
    for ch in s:
        if "\ud800" <= ch <= "\udfff":
            return "strings cannot contain lone surrogates"
    return None


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
_SHORT_ESCAPES.update({"\b": "\\b", "\f": "\\f"})


def _needs_u_escape(code: int) -> bool:
    # A fixed set, independent of the Unicode database: C0/C1 controls, DEL,
    # soft hyphen, zero-width and bidi controls, line/paragraph separators, BOM.
    return (
        code < 0x20
        or 0x7F <= code <= 0x9F
        or code == 0xAD
        or 0x200B <= code <= 0x200F
        or 0x2028 <= code <= 0x202E
        or 0x2060 <= code <= 0x206F
        or code == 0xFEFF
        or 0xFFF9 <= code <= 0xFFFB
    )


def quote_string(s: str) -> str:
    """``s`` as a canonical double-quoted literal (JSON escapes, invisible chars as \\uXXXX)."""
    return '"' + quote_body(s) + '"'


def quote_body(s: str) -> str:
    """The escaped text between the quotes of ``quote_string(s)``."""
    out: list[str] = []
    for ch in s:
        esc = _SHORT_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif _needs_u_escape(ord(ch)):
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)
