"""Every reason code a write, a proposal or a skill release can be refused with.

The codes are stable strings (model §3.2 and §8); docs/claims.md lists them
with the same words, and a test checks that each one is produced somewhere.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["REASON_CODES", "REASON_GATES"]

#: code -> when it is given, in the order the write path checks.
REASON_CODES = MappingProxyType(
    {
        "forbidden": "the principal's role may not write (SMEs verify, they do not write)",
        "text_invalid": "a string of the write holds a NUL byte, which no text column can store",
        "writes_disabled": "the tenant's policy has writes off or incognito",
        "axis_not_writable": (
            "the scope's axis is unregistered or not writable by the principal (agents: "
            "case, agent, session), a fixed-id axis got another id, or a facet names "
            "an unregistered axis or the tenant"
        ),
        "content_type_unknown": "the content type is neither built in nor registered",
        "not_found": "the case of the scope, or a derived_from item, does not exist",
        "case_not_open": "the scope's case is closed",
        "subject_unresolved": "G1: the subject resolves to no canonical entity",
        "anchor_unresolved": "G1: an anchor on an entity axis resolves to no entity",
        "condition_unparsable": "G2: a condition is not a predicate",
        "condition_unknown_attribute": "G2: a condition's attribute is not declared",
        "condition_type_mismatch": "G2: a condition's value or operator does not fit its type",
        "condition_unresolved_entity": "G2: an @entity: in a condition does not resolve",
        "evidence_missing": "G3: no evidence",
        "evidence_unresolved": "G3: evidence (or a skill's test) the writer cannot resolve",
        "object_is_rule": "G4: the attribute or object is a rule; file it as a skill",
        "object_type_mismatch": "G4: the object is not a typed literal of the declared type",
        "valid_time_empty": "the validity window ends before it starts",
        "lineage_revoked": "a derived_from ancestor (transitively) is revoked",
        "lineage_refuted": (
            "a derived_from ancestor (transitively) is refuted, and none is revoked"
        ),
        "duplicate_no_change": "same key, same object: nothing written (not an error)",
        "skill_version_frozen": "a released or retired skill version cannot change",
        "conflict": (
            "a concurrent write took the key, or the current row is one the writer may not read"
        ),
        "proposal_invalid": "a proposal that does not match the proposal schema",
        "skill_test_required": "releasing a skill needs a passing test run it may cite",
        "illegal_transition": "releasing or retiring from a release state that does not allow it",
    }
)

#: The gate (``G1``..``G4``) that raises each reason code, as its line above says;
#: None for a code raised around the four gates (policy, scope, lineage, the key,
#: proposals, skills). Replay's ``gate:`` expectations are derived from this table;
#: tests/claims/test_reason_codes.py checks that every refusal carries its gate.
REASON_GATES = MappingProxyType(
    {
        code: when[:2] if when[:3] in ("G1:", "G2:", "G3:", "G4:") else None
        for code, when in REASON_CODES.items()
    }
)
