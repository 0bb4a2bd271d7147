"""Skills: versioned procedures, released by an SME on a passing test (model §1.3).

A skill is written like any item (``kind: skill``) and starts as a ``draft``;
each version is a row of its own. ``release_skill`` makes one version the
released one (the only one recall returns) and retires the version released
before it; ``retire_skill`` takes a version out of use. Release state is
separate from the lifecycle state: a released skill is still recalled only
where its lifecycle state lets it be.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy.exc
from sqlalchemy.orm import Session

from claims import _audit
from claims import _queries as q
from claims._access import Actor
from claims._items import ItemRecord, get_item
from factgen._classification import level_rank
from predicates.errors import CaveatError, Conflict, IllegalTransition

__all__ = ["SkillTestRequired", "release_skill", "retire_skill"]


class SkillTestRequired(CaveatError):
    """Releasing a skill without a passing test run the SME may cite."""

    code = "skill_test_required"


def release_skill(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    actor: Actor,
    now: datetime,
    test: str | None = None,
) -> ItemRecord:
    """Release a draft (or retired) version of a skill; the released one before it retires.

    Needs the ``release`` right (SME, admin) and a passing test run: ``test``
    names one (registered with ``test_outcome="passed"``), or the skill was
    written with one. The test must be evidence the SME can read and no more
    restricted than the skill itself. Audited (``release``, and ``retire``
    for the version it replaces). ``Conflict`` if a concurrent release won.
    """
    actor.require("release")
    item = _skill(session, tenant, item_id, actor)
    family = q.skill_family(session=session, tenant=tenant, item_id=item_id)
    item = _skill(session, tenant, item_id, actor)  # as it is now that the family is locked
    if item.release_state == "released":
        raise IllegalTransition(
            f"version {item.version} of skill {item_id} is already released",
            action="release",
            state="released",
        )
    if item.state in {"revoked", "refuted", "superseded", "archived"}:
        raise IllegalTransition(
            f"cannot release an item in state {item.state!r}", action="release", state=item.state
        )
    ref = test or item.test_evidence
    if ref is None:
        raise SkillTestRequired(
            f"skill {item_id} cites no test run; release it with a passing test reference",
            item=item_id,
        )
    row = q.evidence_row(session=session, tenant=tenant, evidence_id=ref)
    if row is None or not actor.can_read(
        list(row.readers), deny=row.deny, classification=row.classification
    ):
        raise SkillTestRequired(f"test run {ref!r} does not resolve", item=item_id, test=ref)
    if row.test_outcome != "passed":
        outcome = row.test_outcome or "not a test run"
        raise SkillTestRequired(
            f"test run {ref!r} did not pass ({outcome})", item=item_id, test=ref
        )
    readers = sorted(set(row.readers))
    narrower = (readers and readers not in [sorted(set(r)) for r in item.acl]) or (
        not set(row.deny) <= set(item.deny)
        or level_rank(row.classification, actor.levels)
        > level_rank(item.classification, actor.levels)
    )
    if narrower:
        raise SkillTestRequired(
            f"test run {ref!r} is more restricted than the skill; cite a run its readers can see",
            item=item_id,
            test=ref,
        )
    retired: list[int] = []
    for other in family:
        if int(other.id) != item_id and other.release_state == "released":
            q.set_release(
                session=session,
                tenant=tenant,
                item_id=int(other.id),
                release_state="retired",
                test_evidence=None,
            )
            retired.append(int(other.id))
            _audit.append(
                session=session,
                tenant=tenant,
                actor=actor.id,
                action="retire",
                at=now,
                item_id=int(other.id),
                code="retired",
                detail={"version": other.version, "replaced_by": item_id},
            )
    try:
        with session.begin_nested():
            q.set_release(
                session=session,
                tenant=tenant,
                item_id=item_id,
                release_state="released",
                test_evidence=ref,
            )
    except sqlalchemy.exc.IntegrityError as exc:
        raise Conflict("another version of this skill was released concurrently") from exc
    _audit.append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="release",
        at=now,
        item_id=item_id,
        code="released",
        detail={"version": item.version, "test": ref, "retired": retired},
    )
    return get_item(session=session, tenant=tenant, item_id=item_id, actor=actor)


def retire_skill(
    *,
    session: Session,
    tenant: str,
    item_id: int,
    actor: Actor,
    now: datetime,
    reason: str | None = None,
) -> ItemRecord:
    """Retire a draft or released version of a skill (no version is then released). Audited."""
    actor.require("release")
    q.skill_family(session=session, tenant=tenant, item_id=item_id)
    item = _skill(session, tenant, item_id, actor)
    if item.release_state == "retired":
        raise IllegalTransition(
            f"version {item.version} of skill {item_id} is already retired",
            action="retire",
            state="retired",
        )
    q.set_release(
        session=session, tenant=tenant, item_id=item_id, release_state="retired", test_evidence=None
    )
    _audit.append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="retire",
        at=now,
        item_id=item_id,
        code="retired",
        detail={"version": item.version, "reason": reason},
    )
    return get_item(session=session, tenant=tenant, item_id=item_id, actor=actor)


def _skill(session: Session, tenant: str, item_id: int, actor: Actor) -> ItemRecord:
    item = get_item(session=session, tenant=tenant, item_id=item_id, actor=actor)
    if item.kind != "skill":
        raise IllegalTransition(
            f"item {item_id} is a {item.kind}, not a skill; only skills are released",
            action="release",
            state=item.state,
        )
    return item
