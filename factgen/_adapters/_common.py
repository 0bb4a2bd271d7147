"""What every adapter returns, and the typed, atomic store step they share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from factgen._events import Event
from factgen._facts import Observation, TypedFact, store_facts, type_observations
from factgen._world import World
from predicates.errors import ValueTypeError

__all__ = ["ImportResult", "Skipped", "store_observations"]


@dataclass(frozen=True)
class Skipped:
    """An input entry deliberately not stored, and why (``undeclared``, ``null``, ...)."""

    key: str
    reason: str
    line: int | None = None


@dataclass(frozen=True)
class ImportResult:
    """What an adapter stored (facts, events) and what it skipped on purpose."""

    facts: tuple[TypedFact, ...] = ()
    events: tuple[Event, ...] = ()
    skipped: tuple[Skipped, ...] = field(default=())


def store_observations(
    *,
    session: Session,
    world: World,
    batches: Sequence[tuple[datetime, Sequence[Observation]]],
    now: datetime,
    line_of: Callable[[int], int | None] = lambda _: None,
    source_name: str = "<input>",
) -> list[TypedFact]:
    """Type every observation of every batch first, then store them all, in a savepoint.

    One bad value raises ``ValueTypeError`` naming the attribute, expected type,
    value and (via ``line_of``, by position in the concatenated batches) the
    line of the input; nothing is stored then, whatever the caller does with
    its transaction.
    """
    offset = 0
    for observed_at, observations in batches:
        try:
            type_observations(world, observations, observed_at)
        except ValueTypeError as exc:
            index = exc.detail.get("index")
            line = line_of(offset + index) if isinstance(index, int) else None
            where = f"{source_name}:{line}: " if line is not None else f"{source_name}: "
            detail = {k: v for k, v in exc.detail.items() if k != "index"}
            raise ValueTypeError(
                where + exc.message, line=line, source=source_name, **detail
            ) from exc
        offset += len(observations)
    stored: list[TypedFact] = []
    with session.begin_nested():
        for observed_at, observations in batches:
            stored.extend(
                store_facts(
                    session=session,
                    world=world,
                    observations=observations,
                    observed_at=observed_at,
                    now=now,
                )
            )
    return stored
