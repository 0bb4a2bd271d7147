"""Promotion across scopes (model §4.2): candidates and contested keys.

Items of several scopes with the same key (subject, attribute, kind and
normalised conditions; episodes are traces, not claims, and are left out)
are promotion candidates when at least ``promotion.min_subjects`` distinct
scope anchors (tenant policy, default 3: cases, agents, sessions, teams, ...;
every axis but the tenant's own) hold them and they agree on the object. When
items of two or more scopes disagree the key is *contested*: it is listed with
every distinct value and the scopes that hold it, and logged (an audit row,
when a write makes it contested or adds a value). Nothing is ever decided by
majority: a contested item is not graduated from the shadow period by the
thresholds, nor promoted by the policy; an SME decides.

With ``promotion.auto_apply`` on, ``auto_promote`` (run when a case closes and
at every sweep) promotes each candidate's items still in ``case`` that state a
required condition to ``shadow``, with the policy as the actor
(``POLICY_ACTOR``); off (the default) a candidate waits for an SME.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import groupby
from typing import Any

from sqlalchemy.orm import Session

from claims import Access, Actor, append, object_text, record_transition
from factgen import PromotionPolicy, current_policy
from lifecycle import _queries as q
from lifecycle._states import decide

__all__ = [
    "POLICY_ACTOR",
    "KeyedItem",
    "PromotionKey",
    "auto_promote",
    "candidates",
    "contested",
    "eligible_for_promotion",
    "is_contested",
    "log_if_contested",
]

#: Who promotes a candidate when the tenant's ``promotion.auto_apply`` is on.
POLICY_ACTOR = "policy:promotion.auto_apply"


@dataclass(frozen=True)
class KeyedItem:
    """One item of a key: where it comes from (a case's id, or ``axis:id`` for another
    scope), its state and its object."""

    id: int
    case_id: str
    state: str
    value: str
    required: bool = True  # it states a required condition (promotion needs one)


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
        """The distinct scopes (a case's id, ``axis:id`` otherwise), sorted."""
        return tuple(sorted({i.case_id for i in self.items}))

    @property
    def is_contested(self) -> bool:
        """More than one distinct object."""
        return len(self.values) > 1


def _scope(row: Any) -> str:
    return str(row.scope_id) if row.scope_axis == "case" else f"{row.scope_axis}:{row.scope_id}"


def _keys(rows: Sequence[Any], actor: Actor | None, min_scopes: int = 2) -> list[PromotionKey]:
    out = []
    for _, group in groupby(rows, key=lambda r: (r.subject, r.attribute, r.kind, r.cond_key)):
        members = [r for r in group if actor is None or Access.of(r).readable_by(actor)]
        if len({_scope(r) for r in members}) < min_scopes:
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
                    KeyedItem(
                        int(r.id), _scope(r), r.state, object_text(r.object), bool(r.required)
                    )
                    for r in members
                ),
                {v: tuple(ids) for v, ids in sorted(values.items())},
            )
        )
    return out


def candidates(
    *, session: Session, tenant: str, actor: Actor, min_subjects: int | None = None
) -> list[PromotionKey]:
    """Keys held by items of at least ``min_subjects`` distinct scopes (None: the tenant
    policy's ``promotion.min_subjects``) that agree on the object."""
    if min_subjects is None:
        min_subjects = current_policy(session=session, tenant=tenant).promotion.min_subjects
    rows = q.keyed_items(session=session, tenant=tenant)
    return [k for k in _keys(rows, actor, min_subjects) if not k.is_contested]


def contested(*, session: Session, tenant: str, actor: Actor) -> list[PromotionKey]:
    """Keys held by items of two or more scopes that disagree on the object, with every
    value."""
    rows = q.keyed_items(session=session, tenant=tenant)
    return [k for k in _keys(rows, actor) if k.is_contested]


def eligible_for_promotion(
    *, session: Session, tenant: str, policy: PromotionPolicy, actor: Actor | None = None
) -> list[int]:
    """The items ``auto_promote`` would promote under ``policy`` (whatever its
    ``auto_apply``): of every uncontested candidate, those still in ``case`` that state a
    required condition and were never dropped from shadow, as ``actor`` may read them
    (None: all)."""
    rows = q.keyed_items(session=session, tenant=tenant)
    eligible = [
        member.id
        for key in _keys(rows, actor, policy.min_subjects)
        if not key.is_contested
        for member in key.items
        if member.state == "case" and member.required
    ]
    # an SME's drop is a decision the policy does not overturn: a dropped item waits for
    # an SME to promote it again
    dropped = q.dropped_items(session=session, tenant=tenant, ids=eligible)
    return [i for i in eligible if i not in dropped]


def auto_promote(*, session: Session, tenant: str, now: datetime) -> list[int]:
    """With the tenant's ``promotion.auto_apply`` on: every uncontested candidate's items
    in ``case`` that state a required condition go to ``shadow``, each one transition
    by ``POLICY_ACTOR`` with the policy in its cause. Returns the items promoted (none
    when the policy is off)."""
    policy = current_policy(session=session, tenant=tenant).promotion
    if not policy.auto_apply:
        return []
    promoted = eligible_for_promotion(session=session, tenant=tenant, policy=policy)
    for item_id in promoted:
        record_transition(
            session=session,
            tenant=tenant,
            item_id=item_id,
            from_state="case",
            to_state=decide("promote_shadow", "case"),
            at=now,
            actor=POLICY_ACTOR,
            reason=(
                f"promotion candidate held by at least {policy.min_subjects} scopes "
                "(tenant policy promotion.auto_apply)"
            ),
            cause={"policy": policy.model_dump()},
        )
    if promoted:
        q.drop_expiry_checks(session=session, tenant=tenant, ids=promoted)
    return promoted


def _key_of(session: Session, tenant: str, item_id: int) -> PromotionKey | None:
    key = q.key_of(session=session, tenant=tenant, item_id=item_id)
    if key is None:
        return None
    found = _keys(q.keyed_items(session=session, tenant=tenant, key=key), None)
    return found[0] if found else None


def is_contested(*, session: Session, tenant: str, item_id: int) -> bool:
    """Whether the item's key is contested across scopes."""
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
