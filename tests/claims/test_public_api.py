"""The public surface of claims is pinned: changing it is a decision."""

from __future__ import annotations

import inspect

import claims

EXPECTED = {
    "AGENT_WRITABLE_AXES",
    "BUILTIN_AXES",
    "BUILTIN_CONTENT_TYPES",
    "DEFAULT_REGISTRY",
    "ERASURE_ACTION",
    "REASON_CODES",
    "REASON_GATES",
    "ROLE_ACTIONS",
    "Access",
    "Actor",
    "AgentTurn",
    "Anchor",
    "AuditEntryRecord",
    "AuditReport",
    "AxisType",
    "BatchResult",
    "Extractor",
    "HiddenItems",
    "ItemOutcome",
    "ItemRecord",
    "ItemRegistry",
    "ItemWrite",
    "Kind",
    "PendingAudit",
    "PreparedItem",
    "Proposal",
    "ProposalSet",
    "RecordedExtractor",
    "Role",
    "ScopeGuard",
    "SkillTestRequired",
    "WriteResult",
    "acl_from_readers",
    "append",
    "append_many",
    "audit_entries",
    "check_shape",
    "compile_conditions",
    "consolidate",
    "derive_content_type",
    "detail_digest",
    "erase_details",
    "get_actor",
    "get_item",
    "get_items",
    "is_rule_attribute",
    "is_rule_text",
    "items_as_of",
    "parse_model_output",
    "proposal_json_schema",
    "record_from_mapping",
    "record_from_row",
    "record_transition",
    "register_evidence",
    "register_principal",
    "release_skill",
    "retire_skill",
    "verify_chain",
    "write_batch",
    "write_item",
    "token_tenant",
    "revoke_token",
    "split_anchor",
    "object_text",
    "error_path",
    "list_tokens",
    "create_token",
    "authenticate",
    "TokenInfo",
    "IssuedToken",
    # the tenant's registry, from configuration
    "REACHES",
    "AxisDecl",
    "ContentTypeDecl",
    "DeclaredRegistry",
    "LoadedRegistry",
    "load_registry_yaml",
    "loaded_registry",
    "registry_of_document",
    "store_registry",
}


def test_public_surface() -> None:
    assert set(claims.__all__) == EXPECTED
    for name in claims.__all__:
        obj = getattr(claims, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert obj.__doc__, f"{name} has no docstring"
