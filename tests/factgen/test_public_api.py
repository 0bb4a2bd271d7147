"""The public surface of factgen is pinned, documented, and imports only predicates."""

from __future__ import annotations

import inspect
from pathlib import Path

import factgen

PUBLIC = {
    "ROLE_ACTIONS",
    "Actor",
    "AnchorDefaults",
    "Role",
    "EVENT_TYPES",
    "FACT_EVENT_TYPES",
    "AttributeSpec",
    "Document",
    "EntitySpec",
    "load_yaml_document",
    "load_document",
    "Event",
    "ImportResult",
    "CloudEvent",
    "parse_cloudevent",
    "MetricRule",
    "Observation",
    "PredicateCheck",
    "Resolver",
    "SchemaRegistry",
    "ShadowPolicy",
    "Skipped",
    "Snapshot",
    "SnapshotEntry",
    "TenantPolicy",
    "Topology",
    "TypedFact",
    "World",
    "WorldCache",
    "build_snapshot",
    "decode_text",
    "check_predicate",
    "declare_attributes",
    "ensure_tenant",
    "event_type_of",
    "events_between",
    "flatten_config",
    "import_cloudevents",
    "import_config",
    "import_entities",
    "import_prometheus",
    "load_entities_yaml",
    "load_prometheus_mapping",
    "load_schema_yaml",
    "load_world",
    "normalise",
    "observe",
    "parse_exposition",
    "sample_number",
    "record_event",
    "type_observations",
    "unflatten_config",
    "AlertmanagerHook",
    "CloudEventsHook",
    "GitHubHook",
    "HooksConfig",
    "LoadedSources",
    "PagerDutyHook",
    "SourceAttribute",
    "SourceKind",
    "SourceSpec",
    "SourceStatus",
    "SourcesConfig",
    "claim_delivery",
    "load_sources_yaml",
    "loaded_sources",
    "record_pull",
    "settle_delivery",
    "source_status",
    "store_sources",
    "Refusal",
    "observe_each",
    "parse_deny",
    # what the registry file's loader (claims) shares with sources.yaml's
    "Span",
    "first_problem",
    # tenant policy (docs/policy.md): its keys, their changes and versions
    "AnchorPolicy",
    "ConfidenceSettings",
    "KeySpec",
    "PolicyVersion",
    "PromotionPolicy",
    "RecallPolicy",
    "changed_policy",
    "check_levels_kept",
    "current_policy",
    "lock_policy",
    "policy_as_of",
    "policy_keys",
    "policy_value",
    "store_policy",
}


def test_public_surface_is_pinned_and_documented() -> None:
    assert set(factgen.__all__) == PUBLIC
    for name in PUBLIC:
        obj = getattr(factgen, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj), name
    docs = (Path(__file__).resolve().parents[2] / "docs" / "factgen.md").read_text()
    for name in PUBLIC - {"ShadowPolicy"}:
        assert name in docs, f"{name} is not in docs/factgen.md"


def test_factgen_imports_nothing_to_its_right() -> None:
    package = Path(factgen.__file__).parent
    for source in package.rglob("*.py"):
        text = source.read_text()
        for other in ("claims", "lifecycle", "recall", "caveat"):
            assert f"import {other}" not in text and f"from {other}" not in text, source
