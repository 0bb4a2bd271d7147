"""Helpers shared by the claims tests: a well-formed write and raw reads of the store."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

import claims
from tests.conftest import T0, Store

GOOD: dict[str, Any] = {
    "kind": "fact",
    "subject": "payment_api",
    "attribute": "restart_restored_service_at",
    "object": "E-1",
    "required": ["config.connection_pool.max eq 20", "metrics.pool_utilisation gte 0.8"],
    "evidence": ["E-1"],
    "scope": {"axis": "case", "id": "INC-1"},
    "text": "restart restored service",
}


def request(**changes: Any) -> claims.ItemWrite:
    return claims.ItemWrite.model_validate({**GOOD, **changes})


def write(
    store: Store,
    actor: claims.Actor | None = None,
    *,
    now: Any = T0,
    registry: claims.ItemRegistry = claims.DEFAULT_REGISTRY,
    **changes: Any,
) -> claims.WriteResult:
    return claims.write_item(
        sessions=store.sessions,
        tenant=store.tenant,
        request=request(**changes),
        actor=actor or store.agent,
        now=now,
        registry=registry,
    )


def rows(store: Store, sql: str, **params: Any) -> list[sa.Row[Any]]:
    """Raw rows; ``:t`` is the store's tenant (stores may share a database)."""
    with store.engine.connect() as c:
        return list(c.execute(sa.text(sql), {"t": store.tenant, **params}).all())


def count(store: Store, sql: str, **params: Any) -> int:
    with store.engine.connect() as c:
        return int(c.execute(sa.text(sql), {"t": store.tenant, **params}).scalar_one())


def current_per_key(store: Store) -> int:
    """The largest number of current rows any supersession key has (must be <= 1)."""
    return count(
        store,
        "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM items "
        "WHERE tenant_id = :t AND superseded_at IS NULL GROUP BY scope_axis, scope_id, "
        "subject, attribute, kind, cond_key, evidence_key) k",
    )


def chain_ok(store: Store) -> bool:
    with store.sessions.begin() as s:
        return claims.verify_chain(session=s, tenant=store.tenant).ok


def evidence(store: Store, evidence_id: str, **kw: Any) -> None:
    with store.sessions.begin() as s:
        claims.register_evidence(
            session=s, tenant=store.tenant, evidence_id=evidence_id, actor=store.sme, now=T0, **kw
        )
