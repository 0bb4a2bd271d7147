"""Principals and evidence sources."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from sqlalchemy.orm import Session

from claims import _audit
from claims import _queries as q
from claims._access import Actor, Role
from predicates.errors import Conflict, InputError, NotFound

__all__ = ["get_actor", "register_evidence", "register_principal"]

_ROLES: tuple[Role, ...] = ("agent", "sme", "admin", "source")


def register_principal(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    principal: str,
    role: str,
    capabilities: Sequence[str],
) -> Actor:
    """Create or update a principal of the tenant: the role table's writer (``policy``
    action: admins)."""
    actor.require("policy")
    if role not in _ROLES:
        raise InputError(f"unknown role {role!r}; expected one of {', '.join(_ROLES)}")
    q.upsert_principal(
        session=session, tenant=tenant, principal=principal, role=role, capabilities=capabilities
    )
    return Actor(principal, role, frozenset(capabilities))


def get_actor(*, session: Session, tenant: str, principal: str) -> Actor:
    """The stored principal as an ``Actor``; ``NotFound`` otherwise."""
    row = q.principal(session=session, tenant=tenant, principal=principal)
    if row is None:
        raise NotFound(f"no principal {principal!r} in tenant {tenant!r}", principal=principal)
    return Actor(row.id, row.role, frozenset(row.capabilities))


def register_evidence(
    *,
    session: Session,
    tenant: str,
    evidence_id: str,
    actor: Actor,
    now: datetime,
    title: str | None = None,
    uri: str | None = None,
    readers: Sequence[str] = (),
    test_outcome: Literal["passed", "failed"] | None = None,
) -> None:
    """Register an evidence source; ``readers`` empty means tenant-readable. Audited.

    A test run of a skill's procedure carries its ``test_outcome``; only a
    ``passed`` run lets an SME release the skill.
    """
    actor.require("evidence")
    if not evidence_id.strip():
        raise InputError("an evidence id must not be empty")
    if test_outcome not in (None, "passed", "failed"):
        raise InputError(f"test_outcome must be passed or failed, not {test_outcome!r}")
    if not q.insert_evidence(
        session=session,
        tenant=tenant,
        evidence_id=evidence_id,
        title=title,
        uri=uri,
        readers=sorted(set(readers)),
        at=now,
        actor=actor.id,
        test_outcome=test_outcome,
    ):
        raise Conflict(f"evidence {evidence_id!r} is already registered", evidence=evidence_id)
    _audit.append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="evidence",
        at=now,
        detail={
            "evidence": evidence_id,
            "readers": sorted(set(readers)),
            **({"test_outcome": test_outcome} if test_outcome else {}),
        },
    )
