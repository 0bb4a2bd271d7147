"""The typed world model: schema registry, entities and aliases, topology, facts, snapshots.

Nothing here decides whether a claim applies; it answers what is observed.
"""

from factgen._entities import EntitySpec, Resolver, normalise
from factgen._facts import Observation, TypedFact, observe, type_observations
from factgen._policy import ShadowPolicy, TenantPolicy
from factgen._schema import AttributeSpec, SchemaRegistry
from factgen._snapshot import Snapshot, SnapshotEntry, build_snapshot
from factgen._topology import Topology
from factgen._world import World, declare_attributes, ensure_tenant, import_entities, load_world

__all__ = [
    "AttributeSpec",
    "EntitySpec",
    "Observation",
    "Resolver",
    "SchemaRegistry",
    "ShadowPolicy",
    "Snapshot",
    "SnapshotEntry",
    "TenantPolicy",
    "Topology",
    "TypedFact",
    "World",
    "build_snapshot",
    "declare_attributes",
    "ensure_tenant",
    "import_entities",
    "load_world",
    "normalise",
    "observe",
    "type_observations",
]
