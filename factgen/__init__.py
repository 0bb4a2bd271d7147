"""The typed world model: schema registry, entities and aliases, topology, facts,
events, input adapters and snapshots.

Nothing here decides whether a claim applies; it answers what is observed.
docs/factgen.md describes the files and documents it reads.
"""

from factgen._access import ROLE_ACTIONS, Actor, Role
from factgen._adapters import (
    CloudEvent,
    ImportResult,
    MetricRule,
    Skipped,
    event_type_of,
    flatten_config,
    import_cloudevents,
    import_config,
    import_prometheus,
    load_prometheus_mapping,
    parse_cloudevent,
    parse_exposition,
    sample_number,
    unflatten_config,
)
from factgen._check import PredicateCheck, check_predicate
from factgen._classification import parse_deny
from factgen._document import Document
from factgen._document import load_text as load_document
from factgen._document import load_yaml as load_yaml_document
from factgen._entities import EntitySpec, Resolver, normalise
from factgen._events import EVENT_TYPES, FACT_EVENT_TYPES, Event, events_between, record_event
from factgen._facts import (
    Observation,
    Refusal,
    TypedFact,
    observe,
    observe_each,
    type_observations,
)
from factgen._loaders import load_entities_yaml, load_schema_yaml
from factgen._policy import ShadowPolicy, TenantPolicy
from factgen._schema import AttributeSpec, SchemaRegistry
from factgen._snapshot import Snapshot, SnapshotEntry, build_snapshot, decode_text
from factgen._sources import (
    AlertmanagerHook,
    CloudEventsHook,
    GitHubHook,
    HooksConfig,
    LoadedSources,
    PagerDutyHook,
    SourceAttribute,
    SourceKind,
    SourcesConfig,
    SourceSpec,
    SourceStatus,
    Span,
    claim_delivery,
    first_problem,
    load_sources_yaml,
    loaded_sources,
    record_pull,
    settle_delivery,
    source_status,
    store_sources,
)
from factgen._topology import Topology
from factgen._world import (
    World,
    WorldCache,
    declare_attributes,
    ensure_tenant,
    import_entities,
    load_world,
)

__all__ = [
    "EVENT_TYPES",
    "FACT_EVENT_TYPES",
    "ROLE_ACTIONS",
    "Actor",
    "AlertmanagerHook",
    "AttributeSpec",
    "CloudEvent",
    "CloudEventsHook",
    "Document",
    "EntitySpec",
    "Event",
    "GitHubHook",
    "HooksConfig",
    "ImportResult",
    "LoadedSources",
    "MetricRule",
    "Observation",
    "PagerDutyHook",
    "PredicateCheck",
    "Refusal",
    "Resolver",
    "Role",
    "SchemaRegistry",
    "ShadowPolicy",
    "Skipped",
    "Snapshot",
    "SnapshotEntry",
    "SourceAttribute",
    "SourceKind",
    "SourceSpec",
    "SourceStatus",
    "SourcesConfig",
    "Span",
    "TenantPolicy",
    "Topology",
    "TypedFact",
    "World",
    "WorldCache",
    "build_snapshot",
    "check_predicate",
    "claim_delivery",
    "declare_attributes",
    "decode_text",
    "ensure_tenant",
    "event_type_of",
    "events_between",
    "first_problem",
    "flatten_config",
    "import_cloudevents",
    "import_config",
    "import_entities",
    "import_prometheus",
    "load_document",
    "load_entities_yaml",
    "load_prometheus_mapping",
    "load_schema_yaml",
    "load_sources_yaml",
    "load_world",
    "load_yaml_document",
    "loaded_sources",
    "normalise",
    "observe",
    "observe_each",
    "parse_cloudevent",
    "parse_deny",
    "parse_exposition",
    "record_event",
    "record_pull",
    "sample_number",
    "settle_delivery",
    "source_status",
    "store_sources",
    "type_observations",
    "unflatten_config",
]
