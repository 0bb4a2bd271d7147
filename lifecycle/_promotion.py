"""Promotion across cases (model §4.2): candidates and contested keys.

Items from several cases with the same key (subject, attribute, kind and
normalised conditions; episodes are traces, not claims, and are left out)
are promotion candidates when they agree on the object. When they disagree
the key is *contested*: it is listed with every distinct value and the cases
that hold it, and logged (an audit row, when a write makes it contested or
adds a value). Nothing is ever decided by majority: a contested item is not
graduated from the shadow period by the thresholds; an SME decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import Any

from sqlalchemy.orm import Session

from claims import Access, Actor, append, object_text
from lifecycle import _queries as q

__all__ = [
    "KeyedItem",
    "PromotionKey",
    "candidates",
    "contested",
    "is_contested",
    "log_if_contested",
]


@dataclass(frozen=True)
class KeyedItem:
    """One item of a key: where it comes from, its state and its object."""

    id: int
    case_id: str
    state: str
    value: str


@dataclass(frozen=True)
class PromotionKey:
    """Items of several cases sharing a key; ``values`` maps each distinct object to its items."""

    subject: str
    attribute: str
    kind: str
    required: tuple[str, ...]
    excluded: tuple[str, ...]
    items: tuple[KeyedItem, ...]
    values: dict[str, tuple[int, ...]]

    @property
    def cases(self) -> tuple[str, ...]:
        """The distinct cases, sorted."""
        return tuple(sorted({i.case_id for i in self.items}))

    @property
    def is_contested(self) -> bool:
        """More than one distinct object."""
        return len(self.values) > 1


def _keys(rows: Sequence[Any], actor: Actor | None) -> list[PromotionKey]:
    out = []
    for _, group in groupby(rows, key=lambda r: (r.subject, r.attribute, r.kind, r.cond_key)):
        members = [r for r in group if actor is None or Access.of(r).readable_by(actor)]
        if len({r.scope_id for r in members}) < 2:
            continue
        values: dict[str, list[int]] = {}
        for r in members:
            values.setdefault(object_text(r.object), []).append(int(r.id))
        first = members[0]
        out.append(
            PromotionKey(
                first.subject,
                first.attribute,
                first.kind,
                tuple(first.required),
                tuple(first.excluded),
                tuple(
                    KeyedItem(int(r.id), r.scope_id, r.state, object_text(r.object))
                    for r in members
                ),
                {v: tuple(ids) for v, ids in sorted(values.items())},
            )
        )
    return out


def candidates(*, session: Session, tenant: str, actor: Actor) -> list[PromotionKey]:
    """Keys held by items of two or more cases that agree on the object."""
    rows = q.keyed_case_items(session=session, tenant=tenant)
    return [k for k in _keys(rows, actor) if not k.is_contested]


def contested(*, session: Session, tenant: str, actor: Actor) -> list[PromotionKey]:
    """Keys held by items of two or more cases that disagree on the object, with every value."""
    rows = q.keyed_case_items(session=session, tenant=tenant)
    return [k for k in _keys(rows, actor) if k.is_contested]


def _key_of(session: Session, tenant: str, item_id: int) -> PromotionKey | None:
    key = q.key_of(session=session, tenant=tenant, item_id=item_id)
    if key is None:
        return None
    found = _keys(q.keyed_case_items(session=session, tenant=tenant, key=key), None)
    return found[0] if found else None


def is_contested(*, session: Session, tenant: str, item_id: int) -> bool:
    """Whether the item's key is contested across cases."""
    key = _key_of(session, tenant, item_id)
    return key is not None and key.is_contested and item_id in {i.id for i in key.items}


def log_if_contested(
    *, session: Session, tenant: str, item_id: int, actor: str, now: datetime
) -> PromotionKey | None:
    """After a write: when the item's key is now contested, append a ``contested`` audit row."""
    key = _key_of(session, tenant, item_id)
    if key is None or not key.is_contested or item_id not in {i.id for i in key.items}:
        return None
    append(
        session=session,
        tenant=tenant,
        actor=actor,
        action="contested",
        at=now,
        item_id=item_id,
        code="contested",
        detail={
            "subject": key.subject,
            "attribute": key.attribute,
            "kind": key.kind,
            "required": list(key.required),
            "excluded": list(key.excluded),
            "values": {v: list(ids) for v, ids in key.values.items()},
            "cases": list(key.cases),
        },
    )
    return key
