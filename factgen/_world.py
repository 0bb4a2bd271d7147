"""A tenant's world model: policy, schema, entity resolver and topology, loaded together."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from factgen import _queries as q
from factgen._access import Actor
from factgen._entities import EntitySpec, Resolver, alias_table
from factgen._policy import TenantPolicy, check_levels_kept
from factgen._schema import AttributeSpec, SchemaRegistry
from factgen._topology import Topology
from predicates import ValueType
from predicates.errors import InputError, NotFound

__all__ = [
    "World",
    "WorldCache",
    "declare_attributes",
    "ensure_tenant",
    "import_entities",
    "load_world",
]


@dataclass(frozen=True)
class World:
    """What a tenant has declared: the frame every write and recall is judged in."""

    tenant: str
    policy: TenantPolicy
    schema: SchemaRegistry
    resolver: Resolver
    topology: Topology
    #: the tenant's own axes and content types as stored (``claims.DeclaredRegistry``
    #: reads them; migration 0022), ``{}`` when it declared none
    registry: dict[str, Any] = field(default_factory=dict)


def ensure_tenant(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    now: datetime,
    policy: TenantPolicy | None = None,
) -> TenantPolicy:
    """Create the tenant if missing; with ``policy``, replace its policy (``policy``
    action: admins; ``check_levels_kept``: the levels in use stay, in their order).
    Returns the policy."""
    actor.require("policy")
    current = q.tenant_policy(session=session, tenant=tenant)
    if policy is None:
        if current is not None:
            return TenantPolicy.model_validate(current)
        policy = TenantPolicy()
    document = policy.model_dump(mode="json")
    if current is not None:
        before = TenantPolicy.model_validate(current)
        if before == policy:
            return policy
        check_levels_kept(session=session, tenant=tenant, old=before, new=policy)
    q.upsert_tenant(session=session, tenant=tenant, policy=document, now=now)
    # every policy the tenant has had is a version (docs/policy.md): as-of reads see it
    q.add_policy_version(session=session, tenant=tenant, policy=document, at=now, by=actor.id)
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
    registry = q.registry_declared(session=session, tenant=tenant)
    return World(tenant, policy, schema, resolver, topology, registry)


class WorldCache:
    """Worlds kept for the life of a process, each checked against its tenant's
    ``world_version`` (migration 0008) in one read per use.

    The version is drawn from a sequence whenever the tenant's schema,
    entities, aliases, edges, policy or registry change, and a sequence never hands out a
    value twice, so a cached world is used exactly while the transaction
    reading it sees the same declarations (its own uncommitted changes
    included: they carry a version of their own).
    """

    def __init__(self, maxsize: int = 256) -> None:
        self._worlds: dict[str, tuple[int, World]] = {}
        self._maxsize = maxsize

    def get(self, *, session: Session, tenant: str) -> World:
        """The tenant's world as this session sees it; ``NotFound`` for an unknown tenant."""
        version = q.world_version(session=session, tenant=tenant)
        if version is None:
            raise NotFound(f"no tenant {tenant!r}", tenant=tenant)
        cached = self._worlds.get(tenant)
        if cached is not None and cached[0] == version:
            return cached[1]
        world = load_world(session=session, tenant=tenant)
        if len(self._worlds) >= self._maxsize:
            self._worlds.pop(next(iter(self._worlds)))
        self._worlds[tenant] = (version, world)
        return world

    def clear(self) -> None:
        """Forget every cached world."""
        self._worlds.clear()


def declare_attributes(
    *, session: Session, tenant: str, actor: Actor, specs: Iterable[AttributeSpec]
) -> int:
    """Declare (or redeclare) fact attributes (``schema`` action); returns how many."""
    actor.require("schema")
    rows = [(s.attribute, str(s.vtype), s.unit, s.max_age, s.content_type) for s in specs]
    q.upsert_attributes(session=session, tenant=tenant, rows=rows)
    return len(rows)


def import_entities(
    *, session: Session, world: World, actor: Actor, entities: Iterable[EntitySpec]
) -> int:
    """Add entities, aliases and edges (``entities`` action); returns how many entities.

    Refuses (``InputError``) an alias that collides with another entity's, and
    an edge whose target does not resolve, through aliases, to an entity
    already known or imported in the same call (with suggestions); nothing is
    stored then.
    """
    actor.require("entities")
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
