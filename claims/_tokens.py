"""API tokens: who a bearer is, stored hashed (docs/claims.md, "Tokens").

A token is ``cvt1.<tenant>.<id>.<secret>``: the tenant (URL-safe base64) lets a
server set the tenant for row-level security before it reads anything, the id
finds the row, and only the secret's SHA-256 is stored, compared in constant time.
The principal's stored role and capabilities win: a token never carries more than
its principal has (a token's capabilities are a subset, checked when it is made
and intersected again when it is used), and a token for an existing principal
with another role is refused. A token's clearance is at most its principal's (lower:
a token for an outsider's session; docs/claims.md, "Access control"), and the lower of
the two is used. A token naming a principal that does not exist yet creates it with the
token's role, capabilities and clearance. Creating and revoking a token
are audited; the secret never reaches the audit log.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from claims import _audit
from claims import _queries as q
from claims._access import Actor
from claims._registry import _levels, check_team, register_principal
from factgen._classification import check_level, cleared_levels
from predicates.errors import Conflict, Forbidden, NotFound, Unauthenticated

__all__ = [
    "IssuedToken",
    "TokenCache",
    "TokenInfo",
    "authenticate",
    "create_token",
    "credentials_version",
    "list_tokens",
    "revoke_token",
    "token_tenant",
]

_PREFIX = "cvt1"


@dataclass(frozen=True)
class TokenInfo:
    """A token as listed: never its secret."""

    id: str
    principal: str
    role: str
    capabilities: tuple[str, ...]
    created_at: datetime
    created_by: str
    revoked_at: datetime | None
    #: The clearance it reads with (its own, else its principal's).
    clearance: str = "internal"


@dataclass(frozen=True)
class IssuedToken:
    """A new token: ``token`` is the bearer string, shown once."""

    token: str
    info: TokenInfo


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _parts(token: str) -> tuple[str, str, str]:
    """``(tenant, id, secret)`` of a well-formed token; ``Unauthenticated`` otherwise."""
    pieces = token.strip().split(".")
    if len(pieces) != 4 or pieces[0] != _PREFIX or not all(pieces[1:]):
        raise Unauthenticated("not a caveat API token")
    try:
        tenant = base64.urlsafe_b64decode(pieces[1] + "=" * (-len(pieces[1]) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise Unauthenticated("not a caveat API token") from exc
    return tenant, pieces[2], pieces[3]


def token_tenant(token: str) -> str:
    """The tenant a token names (before anything is read: a server sets it for the
    transaction that then authenticates the token under row-level security)."""
    return _parts(token)[0]


def create_token(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    principal: str,
    role: str,
    capabilities: Sequence[str] | None,
    now: datetime,
    clearance: str | None = None,
    team: str | None = None,
) -> IssuedToken:
    """A token for ``principal`` with ``role`` (admin only).

    An existing principal keeps its role and capabilities: another ``role`` is a
    ``conflict``, and ``capabilities`` beyond its own are ``forbidden`` (None: all of
    its own), and a ``clearance`` above its own is ``forbidden`` (None: its own). A
    principal that does not exist yet is created with ``role``, ``capabilities`` and
    ``clearance`` (None: the default, ``internal``). ``team`` sets the principal's team,
    new or existing (None: an existing one keeps its own): it only weights recall's
    ``team:<id>`` anchor, it grants nothing."""
    actor.require("tokens")
    check_team(team)
    existing = q.principal(session=session, tenant=tenant, principal=principal)
    if existing is None:
        owner = register_principal(
            session=session,
            tenant=tenant,
            actor=actor,
            principal=principal,
            role=role,
            capabilities=list(capabilities or ()),
            clearance=clearance,
            team=team,
        )
    else:
        levels = _levels(existing.levels)
        owner = Actor(
            existing.id, existing.role, frozenset(existing.capabilities), existing.clearance, levels
        )
        if owner.role != role:
            raise Conflict(
                f"principal {principal!r} is a {owner.role}; a token cannot make it a {role}",
                principal=principal,
                role=owner.role,
            )
        extra = sorted(set(capabilities or ()) - owner.capabilities)
        if extra:
            raise Forbidden(
                f"principal {principal!r} lacks {', '.join(extra)}; a token never carries more "
                "than its principal",
                principal=principal,
                capabilities=extra,
            )
        if clearance is not None:
            check_level(clearance, levels, field="clearance")
            if clearance not in owner.cleared:
                raise Forbidden(
                    f"principal {principal!r} is cleared for {owner.clearance}, not "
                    f"{clearance}; a token never carries more than its principal",
                    principal=principal,
                    clearance=owner.clearance,
                )
        if team is not None:
            q.set_team(session=session, tenant=tenant, principal=principal, team=team)
    carried = sorted(owner.capabilities if capabilities is None else set(capabilities))
    token_id = secrets.token_hex(6)
    secret = secrets.token_urlsafe(32)
    q.insert_token(
        session=session,
        tenant=tenant,
        token_id=token_id,
        principal=principal,
        capabilities=carried,
        secret_sha256=_digest(secret),
        at=now,
        actor=actor.id,
        clearance=clearance if existing is not None else None,
    )
    _audit.append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="token_create",
        at=now,
        detail={
            "token": token_id,
            "principal": principal,
            "capabilities": carried,
            **({"clearance": clearance} if clearance else {}),
            **({"team": team} if team else {}),
        },
    )
    info = TokenInfo(
        token_id,
        principal,
        owner.role,
        tuple(carried),
        now,
        actor.id,
        None,
        clearance or owner.clearance,
    )
    return IssuedToken(f"{_PREFIX}.{_b64(tenant)}.{token_id}.{secret}", info)


def list_tokens(*, session: Session, tenant: str, actor: Actor) -> list[TokenInfo]:
    """The tenant's tokens, newest first, revoked ones included (admin only)."""
    actor.require("tokens")
    return [
        TokenInfo(
            r.id,
            r.principal,
            r.role,
            tuple(r.capabilities),
            r.created_at,
            r.created_by,
            r.revoked_at,
            r.clearance,
        )
        for r in q.tokens(session=session, tenant=tenant)
    ]


def revoke_token(
    *, session: Session, tenant: str, actor: Actor, token_id: str, now: datetime
) -> TokenInfo:
    """Revoke a token: it authenticates no more (admin only; audited). Revoking a
    revoked token changes nothing."""
    actor.require("tokens")
    if not q.revoke_token(
        session=session, tenant=tenant, token_id=token_id, at=now, actor=actor.id
    ):
        if not any(t.id == token_id for t in q.tokens(session=session, tenant=tenant)):
            raise NotFound(f"no token {token_id!r}", token=token_id)
    else:
        _audit.append(
            session=session,
            tenant=tenant,
            actor=actor.id,
            action="token_revoke",
            at=now,
            detail={"token": token_id},
        )
    [info] = [
        t for t in list_tokens(session=session, tenant=tenant, actor=actor) if t.id == token_id
    ]
    return info


def authenticate(*, session: Session, tenant: str, token: str) -> Actor:
    """The actor a bearer token stands for, in ``tenant`` (the transaction's): the
    principal's stored role, the capabilities both it and the token carry (a deny naming
    one the principal holds binds the token too), and the lower of their clearances.
    ``Unauthenticated`` for a malformed, unknown, revoked or foreign token."""
    named, token_id, secret = _parts(token)
    if named != tenant:
        raise Unauthenticated("the token belongs to another tenant")
    row = q.token(session=session, tenant=tenant, token_id=token_id)
    if row is None or not hmac.compare_digest(row.secret_sha256, _digest(secret)):
        raise Unauthenticated("unknown token")
    if row.revoked_at is not None:
        raise Unauthenticated("the token was revoked")
    owner = frozenset(row.owner_capabilities)
    levels = _levels(row.levels)
    cleared = cleared_levels(row.owner_clearance, levels)
    if row.clearance is not None:
        cleared = tuple(n for n in cleared if n in cleared_levels(row.clearance, levels))
    return Actor(
        row.principal,
        row.role,
        frozenset(row.capabilities) & owner,
        cleared[-1] if cleared else levels[0],
        levels,
        held=owner,
        team=row.team,
    )


def credentials_version(*, connection: Connection, tenant: str) -> int:
    """The tenant's credentials version now (migration 0029; -1: no such tenant), in one
    statement: ``connection`` may be in autocommit (``TokenCache``)."""
    return q.credentials_version(connection=connection, tenant=tenant)


class TokenCache:
    """The actors tokens recently authenticated as, for the life of a process, each with
    the tenant's credentials version (migration 0029) read before its token was.

    A server reads the version in one statement per request (``credentials_version``)
    and uses a cached actor only while it is unchanged: any change of the tenant's
    principals or tokens (a revocation included) or of its policy commits a new value,
    so the next request, in whichever process, authenticates against the rows again.
    Only the secret's SHA-256 is kept, compared in constant time; a refusal is never
    cached. At most ``maxsize`` tokens, the least recently used forgotten first."""

    def __init__(self, maxsize: int = 4096) -> None:
        self._actors: OrderedDict[tuple[str, str], tuple[str, int, Actor]] = OrderedDict()
        self._maxsize = maxsize
        # a server's request threads share it: a lookup's move to the end and another's
        # eviction must not interleave
        self._lock = threading.Lock()

    def get(self, token: str, version: int) -> Actor | None:
        """The actor ``token`` authenticated as under ``version``, or None."""
        tenant, token_id, secret = _parts(token)
        with self._lock:
            hit = self._actors.get((tenant, token_id))
            if hit is None or hit[1] != version:
                return None
            if not hmac.compare_digest(hit[0], _digest(secret)):
                return None
            self._actors.move_to_end((tenant, token_id))
            return hit[2]

    def put(self, token: str, version: int, actor: Actor) -> None:
        """Keep what ``token`` authenticated as, read after ``version`` was."""
        tenant, token_id, secret = _parts(token)
        with self._lock:
            self._actors[(tenant, token_id)] = (_digest(secret), version, actor)
            self._actors.move_to_end((tenant, token_id))
            while len(self._actors) > self._maxsize:
                self._actors.popitem(last=False)

    def __len__(self) -> int:
        return len(self._actors)
