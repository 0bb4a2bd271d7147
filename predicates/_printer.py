"""The canonical printer: one spelling per predicate, used as a deduplication key."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from predicates._ast import Predicate, Scalar
from predicates._types import TypedValue
from predicates._values import Duration, Version, format_decimal, format_timestamp, quote_string

__all__ = ["duration_literal", "literal_text", "render", "to_text", "typed_literal", "value_text"]


def literal_text(value: Scalar) -> str:
    """The canonical literal of one scalar value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format_decimal(value)
    if isinstance(value, str):
        return quote_string(value)
    if isinstance(value, Duration | Version):
        return value.literal()
    if isinstance(value, datetime):
        return format_timestamp(value)
    raise AssertionError(f"not a literal: {value!r}")  # pragma: no cover


def typed_literal(value: TypedValue) -> str:
    """The canonical literal of a typed value (what ``coerce`` returns), as a condition
    would spell it: ``0.12``, ``v3.1``, ``15m``, ``true``, ``"canary"``, ``2026-12-03T10:00:00Z``.
    A float prints as the shortest decimal that reads back as the same double."""
    if isinstance(value, float):
        return format_decimal(Decimal(repr(value)))
    return literal_text(value)


def duration_literal(span: timedelta) -> str:
    """A non-negative ``timedelta`` as a duration literal (``15m``, ``36h``, ``1500ms``)."""
    return Duration.from_micros(span // timedelta(microseconds=1)).literal()


def to_text(p: Predicate) -> str:
    """The canonical text of ``p``.

    Guarantees ``parse(to_text(p)) == p`` and determinism: equal predicates
    print identically (single spaces, ``@entity:`` prefix, lists ``[a, b]``
    sorted and de-duplicated, decimals positional, strings double-quoted
    with escapes, timestamps in UTC with ``Z``).
    """
    cached = p.__dict__.get("_text")
    return cached if isinstance(cached, str) else render(p)


def render(p: Predicate) -> str:
    """Print ``p`` canonically (uncached; ``to_text`` returns the cached result)."""
    head = f"{p.attribute} {p.op.value}"
    if p.value is None:
        return head
    return f"{head} {value_text(p)}"


def value_text(p: Predicate) -> str:
    """The canonical text of ``p``'s value (a literal or a list), ``""`` for ``exists``."""
    if p.value is None:
        return ""
    if isinstance(p.value, tuple):
        return f"[{', '.join(literal_text(v) for v in p.value)}]"
    return literal_text(p.value)
