"""The verify-on-next-use check at context entry, and the secondary TTL (model §4.3).

An item in ``verify_on_next_use`` is checked when it would enter a context
(recall, before the top-k cut; the context guard): its conditions are
evaluated against observations made at or after the instant that put it
there (the event's ``occurred_at``, or the moment its TTL ran out). The
latest observation of each attribute is the only one that counts, so an
attribute last observed before that instant is UNKNOWN. TRUE on every
required and FALSE on every excluded condition: the item is used and goes
back to ``active``; anything else: it is withheld and goes to
``needs_reverification``. Both are recorded transitions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from claims import DeclaredRegistry, ItemRecord
from factgen import Snapshot, World
from lifecycle import _queries as q
from lifecycle._bulk import transition_many
from lifecycle._conditions import ConditionValue, applies, condition_values
from predicates import Truth, duration_literal

__all__ = [
    "TTL_CONTENT_TYPES",
    "CheckOutcome",
    "check_item",
    "expire_ttl",
    "observed_since",
    "record_checks",
    "run_checks",
    "ttl_seconds",
    "ttls",
]

#: Content types with a secondary TTL, and the policy field that holds it.
TTL_CONTENT_TYPES = {"permission_refusal": "permission_refusal_ttl"}


def ttls(world: World) -> dict[str, timedelta]:
    """``{content type: secondary TTL}``: the built-in ones under the tenant's policy,
    and those its registry declares (``claims.DeclaredRegistry``)."""
    out = {ct: getattr(world.policy, name) for ct, name in TTL_CONTENT_TYPES.items()}
    out.update(DeclaredRegistry.of(world).ttls())
    return out


def ttl_seconds(world: World) -> dict[str, float]:
    """``{content type: secondary TTL in seconds}`` (``ttls``)."""
    return {ct: ttl.total_seconds() for ct, ttl in ttls(world).items()}


@dataclass(frozen=True)
class CheckOutcome:
    """The verify-on-next-use check of one item."""

    item_id: int
    passed: bool
    since: datetime
    values: tuple[ConditionValue, ...]


def observed_since(snapshot: Snapshot, since: datetime) -> Snapshot:
    """``snapshot`` without observations made before ``since`` (inline ones are made now)."""
    return Snapshot(
        at=snapshot.at,
        entries={k: e for k, e in snapshot.entries.items() if e.inline or e.observed_at >= since},
    )


def check_item(item: ItemRecord, world: World, snapshot: Snapshot, since: datetime) -> CheckOutcome:
    """The check as a pure function of the item, the snapshot and the instant: a
    condition whose attribute was last observed before ``since`` is UNKNOWN, ``exists``
    included (it was observed, just not since: not an absence)."""
    values = tuple(
        replace(v, value=Truth.UNKNOWN)
        if v.observed is None and snapshot.get(v.subject, v.attribute) is not None
        else v
        for v in condition_values(item, world, observed_since(snapshot, since))
    )
    return CheckOutcome(item.id, applies(values), since, values)


def run_checks(
    *,
    session: Session,
    tenant: str,
    items: Sequence[ItemRecord],
    world: World,
    snapshot: Snapshot,
    now: datetime,
    actor: str,
    record: bool = True,
) -> dict[int, CheckOutcome]:
    """Check every item (all in ``verify_on_next_use``); with ``record``, move each.

    Passed -> ``active`` (``check_passed``), failed -> ``needs_reverification``
    (``check_failed``), each with one transition and one audit row; the
    pending check is then forgotten.
    """
    if not items:
        return {}
    since = q.pending_checks(session=session, tenant=tenant, ids=[i.id for i in items])
    out = {i.id: check_item(i, world, snapshot, since.get(i.id, now)) for i in items}
    if record:
        record_checks(
            session=session,
            tenant=tenant,
            outcomes={i: c.passed for i, c in out.items()},
            now=now,
            actor=actor,
        )
    return out


def record_checks(
    *,
    session: Session,
    tenant: str,
    outcomes: Mapping[int, bool],
    now: datetime,
    actor: str,
) -> None:
    """Record verify-on-next-use checks already run (``{item: passed}``): passed ->
    ``active`` (``check_passed``), failed -> ``needs_reverification``
    (``check_failed``), each with one transition and one audit row; the pending
    checks are then forgotten."""
    if not outcomes:
        return
    cause = {"check": "verify_on_next_use"}
    transition_many(
        session=session,
        tenant=tenant,
        item_ids=sorted(i for i, ok in outcomes.items() if ok),
        action="check_passed",
        at=now,
        actor=actor,
        reason="verify-on-next-use check passed on observations made since",
        cause=cause,
    )
    transition_many(
        session=session,
        tenant=tenant,
        item_ids=sorted(i for i, ok in outcomes.items() if not ok),
        action="check_failed",
        at=now,
        actor=actor,
        reason="verify-on-next-use check failed: a condition undecided or false since",
        cause=cause,
    )
    q.drop_expiry_checks(session=session, tenant=tenant, ids=sorted(outcomes))


def expire_ttl(
    *,
    session: Session,
    tenant: str,
    world: World,
    now: datetime,
    actor: str,
    ids: Sequence[int] | None = None,
) -> list[int]:
    """Active items whose secondary TTL ran out go to ``verify_on_next_use``.

    The TTL counts from the item's last transition into ``active``; its check
    then needs observations made since the TTL ran out. ``ids`` limits the
    sweep to those items. Returns the items moved.
    """
    moved_all: list[int] = []
    for content_type, ttl in sorted(ttls(world).items()):
        due = q.ttl_due(
            session=session, tenant=tenant, content_type=content_type, ttl=ttl, now=now, ids=ids
        )
        if not due:
            continue
        when = dict(due)
        moved = transition_many(
            session=session,
            tenant=tenant,
            item_ids=list(when),
            action="expire_ttl",
            at=now,
            actor=actor,
            reason=f"secondary TTL of {content_type} items ({duration_literal(ttl)}) ran out",
            cause={"ttl": content_type},
        )
        ids_moved = [m[0] for m in moved]
        q.upsert_expiry_checks(
            session=session,
            tenant=tenant,
            ids=ids_moved,
            since=[when[i] for i in ids_moved],
            event_id=None,
            cause={"ttl": content_type},
        )
        moved_all.extend(ids_moved)
    return moved_all
