"""Items, evidence, the write gate (G1-G4), supersession, proposals and the audit log."""

from claims._access import AGENT_WRITABLE_AXES, ROLE_ACTIONS, Actor, Role, acl_from_readers
from claims._audit import AuditReport, append, verify_chain
from claims._gate import (
    PreparedItem,
    check_shape,
    compile_conditions,
    is_rule_attribute,
    is_rule_text,
)
from claims._items import ItemRecord, get_item, get_items, record_from_row
from claims._proposal import Anchor, ItemWrite, Kind
from claims._registry import get_actor, register_evidence, register_principal
from claims._transitions import record_transition
from claims._write import ScopeGuard, WriteResult, write_item

__all__ = [
    "AGENT_WRITABLE_AXES",
    "ROLE_ACTIONS",
    "Actor",
    "Anchor",
    "AuditReport",
    "ItemRecord",
    "ItemWrite",
    "Kind",
    "PreparedItem",
    "Role",
    "ScopeGuard",
    "WriteResult",
    "acl_from_readers",
    "append",
    "check_shape",
    "compile_conditions",
    "get_actor",
    "get_item",
    "get_items",
    "is_rule_attribute",
    "is_rule_text",
    "record_from_row",
    "record_transition",
    "register_evidence",
    "register_principal",
    "verify_chain",
    "write_item",
]
