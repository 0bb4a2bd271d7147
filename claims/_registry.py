"""Principals and evidence sources."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.orm import Session

from claims import _audit
from claims import _queries as q
from claims._access import Actor, Role
from factgen._access import Unread
from factgen._classification import (
    CLASSIFICATION_LEVELS,
    check_level,
    default_clearance,
    parse_deny,
)
from predicates.errors import Conflict, InputError, NotFound

__all__ = [
    "get_actor",
    "principal_team",
    "register_evidence",
    "register_principal",
    "team_of",
    "tenant_levels",
]

_ROLES: tuple[Role, ...] = ("agent", "sme", "admin", "source")


def register_principal(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    principal: str,
    role: str,
    capabilities: Sequence[str],
    clearance: str | None = None,
    team: str | None = None,
) -> Actor:
    """Create or update a principal of the tenant: the role table's writer (``policy``
    action: admins). ``clearance`` is one of the tenant's classification levels; None
    keeps an existing principal's and gives a new one the default (``internal``: the
    level above the lowest). ``team``: the team it belongs to (recall's default
    ``team:<id>`` anchor); None keeps an existing principal's (a new one has none)."""
    actor.require("policy")
    if role not in _ROLES:
        raise InputError(f"unknown role {role!r}; expected one of {', '.join(_ROLES)}")
    check_team(team)
    existing = q.principal(session=session, tenant=tenant, principal=principal)
    levels = _levels(
        existing.levels
        if existing is not None
        else q.classification_levels(session=session, tenant=tenant)
    )
    if clearance is not None:
        cleared = check_level(clearance, levels, field="clearance")
    else:
        cleared = existing.clearance if existing is not None else default_clearance(levels)
    q.upsert_principal(
        session=session,
        tenant=tenant,
        principal=principal,
        role=role,
        capabilities=capabilities,
        clearance=cleared,
        team=team,
    )
    return Actor(principal, role, frozenset(capabilities), cleared, levels)


def check_team(team: str | None) -> None:
    """A team id is a non-empty anchor id without surrounding whitespace."""
    if team is not None and (not team.strip() or team != team.strip()):
        raise InputError(
            f"team must be a non-empty id without surrounding spaces, got {team!r}",
            attribute="team",
        )


def principal_team(*, session: Session, tenant: str, principal: str) -> str | None:
    """The team of a stored principal; None when it has none or is not stored (the local
    admin, a hook source)."""
    row = q.principal(session=session, tenant=tenant, principal=principal)
    return None if row is None else row.team


def team_of(*, session: Session, tenant: str, actor: Actor) -> str | None:
    """``actor``'s team: the one read with its principal (an authenticated actor, one from
    ``get_actor``), else read now (``principal_team``)."""
    if isinstance(actor.team, Unread):
        return principal_team(session=session, tenant=tenant, principal=actor.id)
    return actor.team


def _levels(raw: Any) -> tuple[str, ...]:
    """The level names of a stored policy's ``classification_levels`` (None: default)."""
    return CLASSIFICATION_LEVELS if not raw else tuple(str(n) for n in raw)


def tenant_levels(*, session: Session, tenant: str) -> tuple[str, ...]:
    """The tenant's classification levels, lowest first."""
    return _levels(q.classification_levels(session=session, tenant=tenant))


def get_actor(*, session: Session, tenant: str, principal: str) -> Actor:
    """The stored principal as an ``Actor`` (with its clearance among the tenant's
    levels); ``NotFound`` otherwise."""
    row = q.principal(session=session, tenant=tenant, principal=principal)
    if row is None:
        raise NotFound(f"no principal {principal!r} in tenant {tenant!r}", principal=principal)
    return Actor(
        row.id,
        row.role,
        frozenset(row.capabilities),
        row.clearance,
        _levels(row.levels),
        team=row.team,
    )


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
    deny: Sequence[str] = (),
    classification: str | None = None,
) -> None:
    """Register an evidence source; ``readers`` empty means tenant-readable. Audited.

    ``deny`` entries (``principal:<id>``, ``cap:<capability>``) may never read it, nor
    any item formed from it, whatever grants them; ``classification`` is one of the
    tenant's levels (None: unclassified, the lowest), read only by a clearance at least
    as high. Ids beginning ``doc:`` are reserved for the passages of imported documents
    (``import_documents``). A test run of a skill's procedure carries its ``test_outcome``; only a
    ``passed`` run lets an SME release the skill.
    """
    actor.require("evidence")
    if not evidence_id.strip():
        raise InputError("an evidence id must not be empty")
    if evidence_id.startswith("doc:"):
        raise InputError(
            f"evidence id {evidence_id!r}: ids beginning doc: are the passages of imported "
            "documents (caveat docs import; docs/knowledge.md)",
            evidence=evidence_id,
        )
    if test_outcome not in (None, "passed", "failed"):
        raise InputError(f"test_outcome must be passed or failed, not {test_outcome!r}")
    denied = parse_deny(deny)
    if classification is not None:
        check_level(classification, tenant_levels(session=session, tenant=tenant))
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
        deny=denied,
        classification=classification,
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
            **({"deny": denied} if denied else {}),
            **({"classification": classification} if classification else {}),
        },
    )
