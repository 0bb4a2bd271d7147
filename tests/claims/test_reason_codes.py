"""One test per reason code, through the public API of claims (and lifecycle's case guard).

``CASES`` maps every code of ``claims.REASON_CODES`` to a scenario that must
produce it; a meta-test keeps the two (and docs/claims.md) in step.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import claims
import factgen
import lifecycle
from predicates.errors import CaveatError
from tests.claims._support import GOOD, count, evidence, request, rows, write
from tests.conftest import ADMIN, T0, Store

ROOT = Path(__file__).resolve().parents[2]
Case = Callable[[Store], Any]


def _policy(store: Store, writes: str) -> None:
    with store.sessions.begin() as s:
        factgen.ensure_tenant(
            actor=ADMIN,
            session=s,
            tenant=store.tenant,
            now=T0,
            policy=factgen.TenantPolicy(writes=writes),  # type: ignore[arg-type]
        )


def _writes_off(store: Store) -> Any:
    _policy(store, "off")
    return write(store)


def _writes_incognito(store: Store) -> Any:
    _policy(store, "incognito")
    return write(store)


def _withdrawn_lineage(how: Callable[..., Any]) -> Case:
    """A write derived (transitively) from an item ``how`` withdrew (revoke, refute)."""

    def case(store: Store) -> Any:
        first = write(store)
        child = write(
            store, attribute="lag_returned_within_s", object=30, derived_from=[first.item_id]
        )
        with store.sessions.begin() as s:
            how(
                session=s,
                tenant=store.tenant,
                item_id=first.item_id,
                reason="wrong evidence",
                actor=store.sme,
                now=T0,
            )
        # transitively: derived from the child, whose parent is withdrawn
        return write(
            store,
            attribute="pool_saturated_at",
            object="E-2",
            evidence=["E-2"],
            derived_from=[child.item_id],
        )

    return case


def _skill(store: Store, **changes: Any) -> claims.WriteResult:
    return write(
        store,
        **{
            "kind": "skill",
            "attribute": "restart_pool",
            "object": "drain, then restart the pool",
            **changes,
        },
    )


def _released_skill(store: Store) -> int:
    evidence(store, "T-pass", test_outcome="passed")
    res = _skill(store, version=1, test="T-pass")
    with store.sessions.begin() as s:
        claims.release_skill(
            session=s, tenant=store.tenant, item_id=res.item_id, actor=store.sme, now=T0
        )
    return res.item_id


def _frozen(store: Store) -> Any:
    _released_skill(store)
    return _skill(store, version=1, test="T-pass", object="restart the pool, then drain")


def _hidden(store: Store) -> Any:
    insider = claims.Actor("agent-p", "agent", frozenset({"payments-restricted"}))
    write(store, insider, evidence=["E-secret"], object="E-secret")
    return write(store, object="E-1")


def _closed_case(store: Store) -> Any:
    with store.sessions.begin() as s:
        lifecycle.open_case(
            session=s, tenant=store.tenant, case_id="INC-1", subjects=[], actor=store.agent, now=T0
        )
        lifecycle.close_case(
            session=s,
            tenant=store.tenant,
            case_id="INC-1",
            outcome="confirmed",
            actor=store.agent,
            now=T0,
        )
    return lifecycle.write(
        sessions=store.sessions, tenant=store.tenant, request=request(), actor=store.agent, now=T0
    )


def _no_test(store: Store) -> Any:
    res = _skill(store)
    with store.sessions.begin() as s:
        return claims.release_skill(
            session=s, tenant=store.tenant, item_id=res.item_id, actor=store.sme, now=T0
        )


def _release_twice(store: Store) -> Any:
    item = _released_skill(store)
    with store.sessions.begin() as s:
        return claims.release_skill(
            session=s, tenant=store.tenant, item_id=item, actor=store.sme, now=T0
        )


def _invalid_proposal(store: Store) -> Any:
    result = claims.consolidate(
        [{**{k: v for k, v in GOOD.items() if k != "scope"}, "confidence": 0.9}],
        sessions=store.sessions,
        tenant=store.tenant,
        actor=store.agent,
        scope=claims.Anchor(axis="case", id="INC-1"),
        now=T0,
    )
    [outcome] = result.outcomes
    assert outcome.error is not None
    raise outcome.error


def _duplicate(store: Store) -> Any:
    write(store)
    result = write(store)
    assert result.outcome == "duplicate"
    return result


CASES: dict[str, list[Case]] = {
    "forbidden": [lambda s: write(s, s.sme)],
    "text_invalid": [
        lambda s: write(s, text="pool\x00exhausted"),
        lambda s: write(s, subject="payment\x00api"),
        lambda s: write(s, required=["config.connection_pool.max eq 20", "x\x00 eq 1"]),
        lambda s: write(s, scope={"axis": "case", "id": "INC\x001"}),
    ],
    "writes_disabled": [_writes_off, _writes_incognito],
    "axis_not_writable": [
        lambda s: write(s, scope={"axis": "tenant", "id": "*"}),
        lambda s: write(s, scope={"axis": "galaxy", "id": "andromeda"}),
        lambda s: write(s, facets=[{"axis": "tenant", "id": "*"}]),
        lambda s: write(s, facets=[{"axis": "galaxy", "id": "andromeda"}]),
        lambda s: write(s, claims.Actor("root", "admin"), scope={"axis": "tenant", "id": "acme"}),
    ],
    "content_type_unknown": [lambda s: write(s, content_type="weather")],
    "not_found": [
        lambda s: write(s, derived_from=[424242]),
        lambda s: lifecycle.write(
            sessions=s.sessions, tenant=s.tenant, request=request(), actor=s.agent, now=T0
        ),
    ],
    "case_not_open": [_closed_case],
    "subject_unresolved": [lambda s: write(s, subject="billing-gateway")],
    "anchor_unresolved": [lambda s: write(s, facets=[{"axis": "service", "id": "billing-gw"}])],
    "condition_unparsable": [lambda s: write(s, required=["when the pool is busy"])],
    "condition_unknown_attribute": [lambda s: write(s, required=["config.thread_pool.max eq 2"])],
    "condition_type_mismatch": [
        lambda s: write(s, required=['config.connection_pool.max eq "twenty"'])
    ],
    "condition_unresolved_entity": [
        lambda s: write(s, excluded=["@billing-gw:config.connection_pool.max eq 20"])
    ],
    "evidence_missing": [lambda s: write(s, evidence=[])],
    "evidence_unresolved": [
        lambda s: write(s, evidence=["E-9999"]),
        lambda s: write(s, evidence=["E-secret"], object="E-secret"),
        lambda s: _skill(s, test="T-none"),
    ],
    "object_is_rule": [
        lambda s: write(s, attribute="fix_method", object="E-1"),
        lambda s: write(s, object="restart"),
        lambda s: write(s, object="you should always drain first"),
    ],
    "object_type_mismatch": [
        lambda s: write(s, attribute="lag_returned_within_s", object="fifteen"),
        lambda s: write(s, object=["E-1"]),
        lambda s: write(s, object=float("nan")),
    ],
    "valid_time_empty": [lambda s: write(s, valid_to=(T0 - timedelta(hours=1)).isoformat())],
    "lineage_revoked": [_withdrawn_lineage(lifecycle.revoke)],
    "lineage_refuted": [_withdrawn_lineage(lifecycle.refute)],
    "duplicate_no_change": [_duplicate],
    "skill_version_frozen": [_frozen],
    "conflict": [_hidden],
    "proposal_invalid": [_invalid_proposal],
    "skill_test_required": [_no_test],
    "illegal_transition": [_release_twice],
}

_WRITE_PATH = set(CASES) - {
    "duplicate_no_change",
    "skill_test_required",
    "illegal_transition",
    "case_not_open",
}


def test_every_reason_code_has_a_case_and_is_documented() -> None:
    assert set(CASES) == set(claims.REASON_CODES)
    doc = (ROOT / "docs" / "claims.md").read_text()
    missing = [c for c in claims.REASON_CODES if f"`{c}`" not in doc]
    assert missing == []


@pytest.mark.parametrize(
    ("code", "case"),
    [(code, case) for code, cases in CASES.items() for case in cases],
    ids=[f"{code}-{i}" for code, cases in CASES.items() for i in range(len(cases))],
)
def test_reason_code(tstore: Store, code: str, case: Case) -> None:
    store = tstore
    before = count(store, "SELECT count(*) FROM items WHERE tenant_id = :t")
    if code == "duplicate_no_change":
        case(store)
        assert count(store, "SELECT count(*) FROM items WHERE tenant_id = :t") == before + 1
        audited = rows(
            store, "SELECT code FROM audit_log WHERE tenant_id = :t AND action = 'duplicate'"
        )
        assert [r.code for r in audited] == [code]
        return
    with pytest.raises(CaveatError) as err:
        case(store)
    assert err.value.code == code, err.value.message
    assert err.value.detail.get("gate") == claims.REASON_GATES[code]
    if code in _WRITE_PATH:
        audited = rows(
            store,
            "SELECT code, detail FROM audit_log WHERE tenant_id = :t "
            "AND action IN ('reject', 'rejected') ORDER BY seq DESC LIMIT 1",
        )
        assert [r.code for r in audited] == [code]
        assert audited[0].detail["message"] == err.value.message


def test_a_nul_byte_refusal_is_audited_with_the_byte_spelled_out(tstore: Store) -> None:
    with pytest.raises(CaveatError) as err:
        write(tstore, required=["config.connection_pool.max eq 20", "x\x00 eq 1"])
    assert err.value.code == "text_invalid"
    assert err.value.detail["attribute"] == "required[1]"
    audited = rows(
        tstore,
        "SELECT detail FROM audit_log WHERE tenant_id = :t AND code = 'text_invalid'",
    )
    assert audited[0].detail["request"]["required"][1] == "x\\x00 eq 1"
    with tstore.sessions.begin() as s:
        assert claims.verify_chain(session=s, tenant=tstore.tenant).ok


def test_object_is_rule_points_to_the_skill_path(tstore: Store) -> None:
    store = tstore
    with pytest.raises(CaveatError) as err:
        write(store, attribute="recommended_action", object="E-1")
    assert "kind: skill" in err.value.message and "docs/claims.md#skills" in err.value.message
    assert err.value.detail["file_as"] == "skill"
    # filed as a skill, the same procedure is accepted
    assert write(store, kind="skill", attribute="recommended_action", object="E-1").outcome == (
        "accepted"
    )


def test_a_hidden_collision_says_nothing_about_the_hidden_row(tstore: Store) -> None:
    store = tstore
    with pytest.raises(CaveatError) as err:
        _hidden(store)
    assert err.value.detail == {}
    assert "E-secret" not in err.value.message and "payments" not in err.value.message
    [audit] = rows(store, "SELECT detail FROM audit_log WHERE tenant_id = :t AND code = 'conflict'")
    # every role reads the audit log: the row names the key by its digest, never the row
    [hidden] = rows(store, "SELECT id, key_digest FROM items WHERE tenant_id = :t")
    assert audit.detail["key_digest"] == hidden.key_digest  # the writer's own key's digest
    assert "existing" not in audit.detail and hidden.id not in audit.detail.values()
