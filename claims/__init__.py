"""Items, evidence, the write gate (G1-G4), supersession, proposals, skills and the audit log.

Every write an agent or a model can attempt is stored as model.md §1 says or
refused with a stable reason code (``REASON_CODES``), and every attempt is
on the hash-chained audit record. See docs/claims.md.
"""

from claims._access import (
    AGENT_WRITABLE_AXES,
    ROLE_ACTIONS,
    Access,
    Actor,
    Role,
    acl_from_readers,
)
from claims._anchors import (
    BUILTIN_AXES,
    BUILTIN_CONTENT_TYPES,
    DEFAULT_REGISTRY,
    AxisType,
    ItemRegistry,
)
from claims._audit import (
    ERASURE_ACTION,
    AuditEntryRecord,
    AuditReport,
    PendingAudit,
    append,
    append_many,
    audit_entries,
    detail_digest,
    erase_details,
    verify_chain,
)
from claims._codes import REASON_CODES, REASON_GATES
from claims._consolidate import Proposal, ProposalSet, consolidate, proposal_json_schema
from claims._extractor import AgentTurn, Extractor, RecordedExtractor, parse_model_output
from claims._gate import (
    PreparedItem,
    check_shape,
    compile_conditions,
    derive_content_type,
    is_rule_attribute,
    is_rule_text,
)
from claims._items import (
    ItemRecord,
    get_item,
    get_items,
    items_as_of,
    object_text,
    record_from_mapping,
    record_from_row,
)
from claims._proposal import Anchor, ItemWrite, Kind, error_path, split_anchor
from claims._registry import get_actor, register_evidence, register_principal
from claims._skills import SkillTestRequired, release_skill, retire_skill
from claims._tenant_registry import (
    REACHES,
    AxisDecl,
    ContentTypeDecl,
    DeclaredRegistry,
    LoadedRegistry,
    load_registry_yaml,
    loaded_registry,
    registry_of_document,
    store_registry,
)
from claims._tokens import (
    IssuedToken,
    TokenInfo,
    authenticate,
    create_token,
    list_tokens,
    revoke_token,
    token_tenant,
)
from claims._transitions import record_transition
from claims._write import (
    BatchResult,
    HiddenItems,
    ItemOutcome,
    ScopeGuard,
    WriteResult,
    write_batch,
    write_item,
)

__all__ = [
    "AGENT_WRITABLE_AXES",
    "BUILTIN_AXES",
    "BUILTIN_CONTENT_TYPES",
    "DEFAULT_REGISTRY",
    "ERASURE_ACTION",
    "REACHES",
    "REASON_CODES",
    "REASON_GATES",
    "ROLE_ACTIONS",
    "Access",
    "Actor",
    "AgentTurn",
    "Anchor",
    "AuditEntryRecord",
    "AuditReport",
    "AxisDecl",
    "AxisType",
    "BatchResult",
    "ContentTypeDecl",
    "DeclaredRegistry",
    "Extractor",
    "HiddenItems",
    "IssuedToken",
    "ItemOutcome",
    "ItemRecord",
    "ItemRegistry",
    "ItemWrite",
    "Kind",
    "LoadedRegistry",
    "PendingAudit",
    "PreparedItem",
    "Proposal",
    "ProposalSet",
    "RecordedExtractor",
    "Role",
    "ScopeGuard",
    "SkillTestRequired",
    "TokenInfo",
    "WriteResult",
    "acl_from_readers",
    "append",
    "append_many",
    "audit_entries",
    "authenticate",
    "check_shape",
    "compile_conditions",
    "consolidate",
    "create_token",
    "derive_content_type",
    "detail_digest",
    "erase_details",
    "error_path",
    "get_actor",
    "get_item",
    "get_items",
    "is_rule_attribute",
    "is_rule_text",
    "items_as_of",
    "list_tokens",
    "load_registry_yaml",
    "loaded_registry",
    "object_text",
    "parse_model_output",
    "proposal_json_schema",
    "record_from_mapping",
    "record_from_row",
    "record_transition",
    "register_evidence",
    "register_principal",
    "registry_of_document",
    "release_skill",
    "retire_skill",
    "revoke_token",
    "split_anchor",
    "store_registry",
    "token_tenant",
    "verify_chain",
    "write_batch",
    "write_item",
]
