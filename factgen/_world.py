"""A tenant's world model: policy, schema, entity resolver and topology, loaded together."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from factgen import _queries as q
from factgen._entities import EntitySpec, Resolver, alias_table
from factgen._policy import TenantPolicy
from factgen._schema import AttributeSpec, SchemaRegistry
from factgen._topology import Topology
from predicates import ValueType
from predicates.errors import InputError, NotFound

__all__ = ["World", "declare_attributes", "ensure_tenant", "import_entities", "load_world"]


@dataclass(frozen=True)
class World:
    """What a tenant has declared: the frame every write and recall is judged in."""

    tenant: str
    policy: TenantPolicy
    schema: SchemaRegistry
    resolver: Resolver
    topology: Topology


def ensure_tenant(
    *, session: Session, tenant: str, now: datetime, policy: TenantPolicy | None = None
) -> TenantPolicy:
    """Create the tenant if missing; with ``policy``, replace its policy. Returns the policy."""
    current = q.tenant_policy(session=session, tenant=tenant)
    if policy is None:
        if current is not None:
            return TenantPolicy.model_validate(current)
        policy = TenantPolicy()
    q.upsert_tenant(session=session, tenant=tenant, policy=policy.model_dump(mode="json"), now=now)
    return policy


def load_world(*, session: Session, tenant: str) -> World:
    """The tenant's world as stored now; ``NotFound`` for an unknown tenant."""
    raw = q.tenant_policy(session=session, tenant=tenant)
    if raw is None:
        raise NotFound(f"no tenant {tenant!r}", tenant=tenant)
    policy = TenantPolicy.model_validate(raw)
    schema = SchemaRegistry(
        AttributeSpec(
            attribute=r.attribute,
            vtype=ValueType.parse(r.type),
            unit=r.unit,
            max_age=r.max_age,
            content_type=r.content_type,
        )
        for r in q.schema_rows(session=session, tenant=tenant)
    )
    resolver = Resolver(
        {r.alias: r.entity_id for r in q.alias_rows(session=session, tenant=tenant)},
        policy.entity_suffixes,
    )
    topology = Topology(
        (r.src, r.relation, r.dst) for r in q.edge_rows(session=session, tenant=tenant)
    )
    return World(tenant, policy, schema, resolver, topology)


def declare_attributes(*, session: Session, tenant: str, specs: Iterable[AttributeSpec]) -> int:
    """Declare (or redeclare) fact attributes; returns how many."""
    rows = [(s.attribute, str(s.vtype), s.unit, s.max_age, s.content_type) for s in specs]
    q.upsert_attributes(session=session, tenant=tenant, rows=rows)
    return len(rows)


def import_entities(*, session: Session, world: World, entities: Iterable[EntitySpec]) -> int:
    """Add entities, aliases and edges; returns how many entities.

    Refuses (``InputError``) an alias that collides with another entity's, and
    an edge whose target does not resolve, through aliases, to an entity
    already known or imported in the same call (with suggestions); nothing is
    stored then.
    """
    entities = list(entities)
    existing = world.resolver.aliases()
    table = alias_table(entities, world.resolver.suffixes)
    for key, eid in table.items():
        other = existing.get(key)
        if other is not None and other != eid:
            raise InputError(
                f"alias {key!r} of {eid!r} already names {other!r}", alias=key, entity=eid
            )
    combined = Resolver({**existing, **table}, world.resolver.suffixes)
    edges: list[tuple[str, str, str]] = []
    for e in entities:
        for relation, target in e.edges:
            canonical = combined.lookup(target)
            if canonical is None:
                hints = combined.suggest(target)
                hint = f"; did you mean {', '.join(hints)}?" if hints else ""
                raise InputError(
                    f"{e.id!r} {relation} {target!r}: no such entity{hint}",
                    entity=e.id,
                    target=target,
                    suggestions=hints,
                )
            edges.append((e.id, relation, canonical))
    q.upsert_entities(
        session=session,
        tenant=world.tenant,
        entities=[(e.id, e.kind) for e in entities],
        aliases=list(table.items()),
        edges=edges,
    )
    return len(entities)
