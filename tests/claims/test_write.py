"""The write path on the real store: every reason code, dedup, supersession, audit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

import claims
import factgen
from predicates.errors import Conflict, Forbidden, GateRejection
from tests.conftest import T0, Store

GOOD: dict[str, Any] = {
    "kind": "fact",
    "subject": "payment_api",
    "attribute": "restart_restored_service_at",
    "object": "E-1",
    "required": ["config.connection_pool.max eq 20", "metrics.pool_utilisation gte 0.8"],
    "evidence": ["E-1"],
    "scope": {"axis": "case", "id": "INC-1"},
    "text": "restart restored service",
}


def write(store: Store, actor: claims.Actor | None = None, **changes: Any) -> claims.WriteResult:
    return claims.write_item(
        sessions=store.sessions,
        tenant=store.tenant,
        request=claims.ItemWrite.model_validate({**GOOD, **changes}),
        actor=actor or store.agent,
        now=T0,
    )


def rows(store: Store, sql: str) -> list[sa.Row[Any]]:
    with store.engine.connect() as c:
        return list(c.execute(sa.text(sql)).all())


def item_count(store: Store) -> int:
    return len(rows(store, "SELECT id FROM items"))


@pytest.mark.parametrize(
    ("changes", "gate", "code"),
    [
        ({"subject": "billing-gateway"}, "G1", "subject_unresolved"),
        ({"required": ["when the pool is busy"]}, "G2", "condition_unparsable"),
        ({"required": ["config.thread_pool.max eq 20"]}, "G2", "condition_unknown_attribute"),
        ({"required": ['config.connection_pool.max eq "twenty"']}, "G2", "condition_type_mismatch"),
        (
            {"excluded": ["@billing-gw:config.connection_pool.max eq 20"]},
            "G2",
            "condition_unresolved_entity",
        ),
        ({"evidence": []}, "G3", "evidence_missing"),
        ({"evidence": ["E-9999"]}, "G3", "evidence_unresolved"),
        ({"evidence": ["E-secret"], "object": "E-secret"}, "G3", "evidence_unresolved"),
        ({"attribute": "fix_method", "object": "restart"}, "G4", "object_is_rule"),
        ({"object": "restart"}, "G4", "object_is_rule"),
        ({"attribute": "lag_returned_within_s", "object": "fifteen"}, "G4", "object_type_mismatch"),
    ],
)
def test_each_gate_refuses_and_records(store: Store, changes, gate, code) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(GateRejection) as err:
        write(store, **changes)
    assert (err.value.gate, err.value.code) == (gate, code)
    assert item_count(store) == 0
    audit = rows(store, "SELECT action, code FROM audit_log WHERE action = 'reject'")
    assert [(r.action, r.code) for r in audit] == [("reject", code)]


def test_the_first_failing_gate_wins(store: Store) -> None:
    with pytest.raises(GateRejection) as err:
        write(store, subject="nobody", required=["prose here"], evidence=[])
    assert err.value.gate == "G1"


def test_agents_may_not_write_tenant_scope(store: Store) -> None:
    with pytest.raises(GateRejection) as err:
        write(store, scope={"axis": "tenant", "id": "*"})
    assert err.value.code == "axis_not_writable"


def test_writes_disabled_by_policy(store: Store) -> None:
    with store.sessions.begin() as s:
        factgen.ensure_tenant(
            session=s, tenant=store.tenant, now=T0, policy=factgen.TenantPolicy(writes="off")
        )
    with pytest.raises(GateRejection) as err:
        write(store)
    assert err.value.code == "writes_disabled"


def test_smes_do_not_write_items(store: Store) -> None:
    with pytest.raises(Forbidden):
        write(store, actor=store.sme)


def test_accepted_write_is_case_state_with_acl_from_evidence(store: Store) -> None:
    res = write(store)
    assert (res.outcome, res.state) == ("accepted", "case")
    [row] = rows(store, "SELECT subject, acl, required, object FROM items")
    assert row.subject == "payment-api"
    assert row.acl == []
    assert row.required == [
        "config.connection_pool.max eq 20",
        "metrics.pool_utilisation gte 0.8",
    ]
    assert row.object == {"evidence": "E-1"}


def test_restricted_evidence_gives_a_restricted_acl(store: Store) -> None:
    sme_agent = claims.Actor("agent-p", "agent", frozenset({"payments-restricted"}))
    write(store, actor=sme_agent, evidence=["E-1", "E-secret"])
    [row] = rows(store, "SELECT acl FROM items")
    assert row.acl == [["payments-restricted"]]


def test_same_claim_in_another_order_is_a_duplicate(store: Store) -> None:
    first = write(store)
    again = write(store, subject="paymentapi-prod", required=list(reversed(GOOD["required"])))
    assert again.outcome == "duplicate" and again.item_id == first.item_id
    assert item_count(store) == 1
    [dup] = rows(store, "SELECT code FROM audit_log WHERE action = 'duplicate'")
    assert dup.code == "duplicate_no_change"


def test_new_object_supersedes_and_keeps_the_old_row(store: Store) -> None:
    first = write(store, attribute="lag_returned_within_s", object=900)
    second = write(store, attribute="lag_returned_within_s", object=600)
    assert second.superseded == first.item_id
    old, new = rows(
        store, "SELECT id, state, superseded_at, superseded_by, object FROM items ORDER BY id"
    )
    assert old.state == "superseded" and old.superseded_by == new.id
    assert old.superseded_at is not None and new.superseded_at is None
    assert old.object == {"value": {"t": "int", "v": 900}} or old.object["value"]["v"] == 900


def test_different_conditions_are_different_keys(store: Store) -> None:
    write(store)
    res = write(store, required=["config.connection_pool.max eq 50"])
    assert res.outcome == "accepted" and res.superseded is None
    assert item_count(store) == 2


def test_two_episodes_with_different_evidence_are_two_records(store: Store) -> None:
    write(store, kind="episode")
    res = write(store, kind="episode", evidence=["E-2"], object="E-2")
    assert res.superseded is None and item_count(store) == 2


def test_collision_with_a_row_the_writer_cannot_read_is_a_generic_conflict(store: Store) -> None:
    insider = claims.Actor("agent-p", "agent", frozenset({"payments-restricted"}))
    write(
        store,
        actor=insider,
        evidence=["E-secret"],
        object="E-secret",
        attribute="lag_returned_within_s",
    )
    with pytest.raises(Conflict) as err:
        write(store, attribute="lag_returned_within_s", object=5, evidence=["E-1"])
    assert "E-secret" not in str(err.value) and "payments" not in str(err.value)
    [audit] = rows(store, "SELECT code, detail FROM audit_log WHERE action = 'reject'")
    assert audit.code == "conflict" and audit.detail["existing"] > 0


def test_lineage_on_a_missing_item_is_refused(store: Store) -> None:
    with pytest.raises(GateRejection) as err:
        write(store, derived_from=[424242])
    assert err.value.code == "not_found"


def test_audit_chain_verifies_and_detects_tampering(store: Store) -> None:
    write(store)
    with pytest.raises(GateRejection):
        write(store, evidence=[])
    with store.sessions.begin() as s:
        assert claims.verify_chain(session=s, tenant=store.tenant).ok
    with store.engine.begin() as c:  # the owner bypasses the append-only trigger
        c.execute(sa.text("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update"))
        c.execute(sa.text("UPDATE audit_log SET actor = 'mallory' WHERE seq = 2"))
    with store.sessions.begin() as s:
        report = claims.verify_chain(session=s, tenant=store.tenant)
    assert not report.ok and report.broken_at == 2


def test_audit_truncation_at_the_end_is_detected(store: Store) -> None:
    write(store)
    with store.engine.begin() as c:
        c.execute(sa.text("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update"))
        c.execute(sa.text("DELETE FROM audit_log WHERE seq = (SELECT max(seq) FROM audit_log)"))
    with store.sessions.begin() as s:
        assert not claims.verify_chain(session=s, tenant=store.tenant).ok


def test_audit_log_refuses_update_and_delete(store: Store) -> None:
    write(store)
    for stmt in ("UPDATE audit_log SET actor = 'x'", "DELETE FROM audit_log", "TRUNCATE audit_log"):
        with pytest.raises(sa.exc.DBAPIError, match="append-only"), store.engine.begin() as c:
            c.execute(sa.text(stmt))


def test_valid_time_defaults_to_now_and_is_kept(store: Store) -> None:
    write(store, valid_to=(T0 + timedelta(days=1)).isoformat())
    [row] = rows(store, "SELECT valid_from, valid_to, recorded_at FROM items")
    assert row.valid_from == T0 == row.recorded_at
    assert row.valid_to == T0 + timedelta(days=1)
