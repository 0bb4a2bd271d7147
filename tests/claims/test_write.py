"""The write path on the real store: gates, dedup, supersession, ACL, audit of refusals.

Every reason code has its own test in test_reason_codes.py; tampering with
the audit log is in test_audit.py.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import claims
from claims._queries import TRANSITIONS
from predicates.errors import Conflict, Forbidden, GateRejection
from tests.claims._support import GOOD, count, rows, write
from tests.conftest import T0, Store

#: Items with their current state (migration 0007).
J = "items i JOIN item_states s ON s.item_id = i.id"


def item_count(store: Store) -> int:
    return count(store, "SELECT count(*) FROM items WHERE tenant_id = :t")


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
def test_each_gate_refuses_and_records(
    tstore: Store, changes: dict[str, Any], gate: str, code: str
) -> None:
    with pytest.raises(GateRejection) as err:
        write(tstore, **changes)
    assert (err.value.gate, err.value.code) == (gate, code)
    assert item_count(tstore) == 0
    audit = rows(
        tstore, "SELECT action, code FROM audit_log WHERE tenant_id = :t AND action = 'reject'"
    )
    assert [(r.action, r.code) for r in audit] == [("reject", code)]


def test_the_first_failing_gate_wins(tstore: Store) -> None:
    with pytest.raises(GateRejection) as err:
        write(tstore, subject="nobody", required=["prose here"], evidence=[])
    assert err.value.gate == "G1"


def test_smes_do_not_write_items(tstore: Store) -> None:
    with pytest.raises(Forbidden):
        write(tstore, tstore.sme)


def test_accepted_write_is_case_state_with_acl_from_evidence(tstore: Store) -> None:
    res = write(tstore)
    assert (res.outcome, res.state) == ("accepted", "case")
    [row] = rows(tstore, "SELECT subject, acl, required, object FROM items WHERE tenant_id = :t")
    assert row.subject == "payment-api"
    assert row.acl == []
    assert row.required == [
        "config.connection_pool.max eq 20",
        "metrics.pool_utilisation gte 0.8",
    ]
    assert row.object == {"evidence": "E-1"}
    history = rows(
        tstore,
        f"SELECT from_state, to_state, reason FROM {TRANSITIONS} h WHERE item_id = :i",
        i=res.item_id,
    )
    assert [tuple(r) for r in history] == [(None, "case", "written")]


def test_restricted_evidence_gives_a_restricted_acl(tstore: Store, insider: claims.Actor) -> None:
    write(tstore, insider, evidence=["E-1", "E-secret"])
    [row] = rows(tstore, "SELECT acl FROM items WHERE tenant_id = :t")
    assert row.acl == [["payments-restricted"]]


def test_same_claim_in_another_order_is_a_duplicate(tstore: Store) -> None:
    first = write(tstore)
    again = write(tstore, subject="paymentapi-prod", required=list(reversed(GOOD["required"])))
    assert again.outcome == "duplicate" and again.item_id == first.item_id
    assert again.state == "case"
    assert item_count(tstore) == 1
    [dup] = rows(tstore, "SELECT code FROM audit_log WHERE tenant_id = :t AND action = 'duplicate'")
    assert dup.code == "duplicate_no_change"


def test_new_object_supersedes_and_keeps_the_old_row(tstore: Store) -> None:
    first = write(tstore, attribute="lag_returned_within_s", object=900)
    second = write(
        tstore, attribute="lag_returned_within_s", object=600, now=T0 + timedelta(minutes=1)
    )
    assert second.superseded == first.item_id
    old, new = rows(
        tstore,
        "SELECT i.id, s.state, i.superseded_at, i.superseded_by, i.object "
        f"FROM {J} WHERE i.tenant_id = :t ORDER BY i.id",
    )
    assert old.state == "superseded" and old.superseded_by == new.id
    assert old.superseded_at == T0 + timedelta(minutes=1) and new.superseded_at is None
    assert old.object == {"value": {"t": "int", "v": 900}}
    history = rows(
        tstore,
        f"SELECT from_state, to_state, cause FROM {TRANSITIONS} h WHERE item_id = :i ORDER BY seq",
        i=first.item_id,
    )
    assert [(r.from_state, r.to_state) for r in history] == [(None, "case"), ("case", "superseded")]
    assert history[1].cause == {"successor": second.item_id}


def test_a_revoked_row_stays_revoked_when_superseded(tstore: Store) -> None:
    import lifecycle

    first = write(tstore, attribute="lag_returned_within_s", object=900)
    with tstore.sessions.begin() as s:
        lifecycle.revoke(
            session=s,
            tenant=tstore.tenant,
            item_id=first.item_id,
            reason="wrong dashboard",
            actor=tstore.sme,
            now=T0,
        )
    again = write(tstore, attribute="lag_returned_within_s", object=900)
    assert (again.outcome, again.state) == ("duplicate", "revoked")  # not revived
    second = write(tstore, attribute="lag_returned_within_s", object=600)
    assert second.superseded == first.item_id
    [old] = rows(
        tstore, f"SELECT s.state, i.superseded_by FROM {J} WHERE i.id = :i", i=first.item_id
    )
    assert (old.state, old.superseded_by) == ("revoked", second.item_id)
    with pytest.raises(GateRejection) as err:  # its lineage still counts as revoked
        write(tstore, attribute="pool_saturated_at", derived_from=[first.item_id])
    assert err.value.code == "lineage_revoked"


def test_a_write_derived_from_a_refuted_item_is_refused_lineage_refuted(tstore: Store) -> None:
    """Refutation is enforced at the write like revocation (model §3.2, §4.4): a new item
    whose lineage (transitively) holds a refuted item is refused ``lineage_refuted``,
    stores nothing and leaves its refusal in the audit log; the refuted row superseded
    still counts; a lineage holding a revoked item too is refused ``lineage_revoked``."""
    import lifecycle

    def withdraw(how: Any, item_id: int) -> None:
        with tstore.sessions.begin() as s:
            how(
                session=s,
                tenant=tstore.tenant,
                item_id=item_id,
                reason="shown false",
                actor=tstore.sme,
                now=T0,
            )

    base = write(tstore, attribute="lag_returned_within_s", object=900).item_id
    child = write(tstore, attribute="pool_saturated_at", derived_from=[base]).item_id
    withdraw(lifecycle.refute, base)
    before = item_count(tstore)
    for parent in (base, child):  # directly and transitively
        with pytest.raises(GateRejection) as err:
            write(tstore, attribute="vacuum_duration_s", object="E-1", derived_from=[parent])
        assert err.value.code == "lineage_refuted", err.value.message
        assert err.value.detail["refuted"] == [base]
        assert err.value.detail.get("gate") is None
    assert item_count(tstore) == before
    [audited] = rows(
        tstore,
        "SELECT code FROM audit_log WHERE tenant_id = :t AND action IN ('reject', 'rejected') "
        "ORDER BY seq DESC LIMIT 1",
    )
    assert audited.code == "lineage_refuted"
    # superseded, the refuted row keeps its state and its lineage still counts
    again = write(tstore, attribute="lag_returned_within_s", object=600)
    assert again.superseded == base
    with pytest.raises(GateRejection) as err:
        write(tstore, attribute="vacuum_duration_s", object="E-1", derived_from=[base])
    assert err.value.code == "lineage_refuted"
    # a revoked ancestor beside the refuted one: the revocation is named
    other = write(tstore, attribute="disk_full_at").item_id
    withdraw(lifecycle.revoke, other)
    with pytest.raises(GateRejection) as err:
        write(tstore, attribute="vacuum_duration_s", object="E-1", derived_from=[base, other])
    assert (err.value.code, err.value.detail["revoked"]) == ("lineage_revoked", [other])


def test_different_conditions_are_different_keys(tstore: Store) -> None:
    write(tstore)
    res = write(tstore, required=["config.connection_pool.max eq 50"])
    assert res.outcome == "accepted" and res.superseded is None
    assert item_count(tstore) == 2


def test_two_episodes_with_different_evidence_are_two_records(tstore: Store) -> None:
    write(tstore, kind="episode")
    res = write(tstore, kind="episode", evidence=["E-2"], object="E-2")
    assert res.superseded is None and item_count(tstore) == 2


def test_collision_with_a_row_the_writer_cannot_read_is_a_generic_conflict(
    tstore: Store, insider: claims.Actor
) -> None:
    write(
        tstore,
        insider,
        evidence=["E-secret"],
        object="E-secret",
        attribute="lag_returned_within_s",
    )
    with pytest.raises(Conflict) as err:
        write(tstore, attribute="lag_returned_within_s", object=5, evidence=["E-1"])
    assert "E-secret" not in str(err.value) and "payments" not in str(err.value)
    [audit] = rows(
        tstore, "SELECT code, detail FROM audit_log WHERE tenant_id = :t AND action = 'reject'"
    )
    # every role reads the audit log: the row names the key (its digest), not the hidden row
    assert audit.code == "conflict" and audit.detail["key_digest"]
    assert "existing" not in audit.detail
    # the insider, who can read the row, supersedes it
    assert write(
        tstore, insider, attribute="lag_returned_within_s", object=5, evidence=["E-secret"]
    ).superseded


def test_valid_time_defaults_to_now_and_is_kept(tstore: Store) -> None:
    write(tstore, valid_to=(T0 + timedelta(days=1)).isoformat())
    [row] = rows(tstore, "SELECT valid_from, valid_to, recorded_at FROM items WHERE tenant_id = :t")
    assert row.valid_from == T0 == row.recorded_at
    assert row.valid_to == T0 + timedelta(days=1)


def test_every_write_and_refusal_is_on_a_chain_that_holds(tstore: Store) -> None:
    write(tstore)
    with pytest.raises(GateRejection):
        write(tstore, evidence=[])
    write(tstore)
    with tstore.sessions.begin() as s:
        report = claims.verify_chain(session=s, tenant=tstore.tenant)
    actions = [
        r.action
        for r in rows(tstore, "SELECT action FROM audit_log WHERE tenant_id = :t ORDER BY seq")
    ]
    assert report.ok and report.checked == len(actions)
    assert actions[-4:] == ["write", "transition", "reject", "duplicate"]
