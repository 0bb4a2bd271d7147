"""Batch writes: each item decided on its own, one outcome per item, nothing half-written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
import pytest

import claims
from claims import _queries
from claims._queries import TRANSITIONS
from tests.claims._support import chain_ok, count, current_per_key, request, rows
from tests.claims.conftest import new_tenant_store
from tests.conftest import T0, Store

#: Items with their current state (migration 0007).
J = "items i JOIN item_states s ON s.item_id = i.id"

MIXED: list[dict[str, Any]] = [
    {},  # 0 accepted
    {"subject": "nobody"},  # 1 rejected G1
    {"subject": "paymentapi-prod"},  # 2 duplicate of 0 (same key, same object)
    {"attribute": "lag_returned_within_s", "object": 900},  # 3 accepted
    {"attribute": "lag_returned_within_s", "object": 600},  # 4 supersedes 3
    {"required": ["prose, not a predicate"]},  # 5 rejected G2
    {"object": "restart"},  # 6 rejected G4
    {"attribute": "lag_returned_within_s", "object": 600},  # 7 duplicate of 4
]


def batch(
    store: Store, changes: Sequence[dict[str, Any]], chunk_size: int = 1000
) -> claims.BatchResult:
    return claims.write_batch(
        sessions=store.sessions,
        tenant=store.tenant,
        requests=[request(**c) for c in changes],
        actor=store.agent,
        now=T0,
        chunk_size=chunk_size,
    )


def _shape(result: claims.BatchResult) -> list[tuple[str, str | None]]:
    return [(o.outcome, o.code) for o in result.outcomes]


def test_each_item_is_decided_on_its_own(tstore: Store) -> None:
    result = batch(tstore, MIXED)
    assert _shape(result) == [
        ("accepted", None),
        ("rejected", "subject_unresolved"),
        ("duplicate", "duplicate_no_change"),
        ("accepted", None),
        ("accepted", None),
        ("rejected", "condition_unparsable"),
        ("rejected", "object_is_rule"),
        ("duplicate", "duplicate_no_change"),
    ]
    o = result.outcomes
    assert [x.index for x in o] == list(range(len(MIXED)))
    assert o[2].item_id == o[0].item_id and o[7].item_id == o[4].item_id
    assert o[4].superseded == o[3].item_id
    assert (result.count("accepted"), result.count("duplicate"), result.count("rejected")) == (
        3,
        2,
        3,
    )
    assert result.codes() == {
        "subject_unresolved": 1,
        "condition_unparsable": 1,
        "object_is_rule": 1,
    }
    assert o[1].gate == "G1" and o[1].error is not None
    old = rows(tstore, f"SELECT s.state, i.superseded_by FROM {J} WHERE i.id = :i", i=o[3].item_id)
    assert [(r.state, r.superseded_by) for r in old] == [("superseded", o[4].item_id)]
    history = rows(
        tstore,
        f"SELECT from_state, to_state FROM {TRANSITIONS} h WHERE item_id = :i ORDER BY seq",
        i=o[3].item_id,
    )
    assert [tuple(r) for r in history] == [(None, "case"), ("case", "superseded")]
    assert count(tstore, "SELECT count(*) FROM items WHERE tenant_id = :t") == 3
    audit = rows(
        tstore,
        "SELECT action, code FROM audit_log WHERE tenant_id = :t AND action IN "
        "('write', 'reject', 'duplicate', 'supersede') ORDER BY seq",
    )
    assert sorted((r.action, r.code) for r in audit) == sorted(
        [("write", "accepted")] * 3
        + [("duplicate", "duplicate_no_change")] * 2
        + [("supersede", "superseded")]
        + [
            ("reject", "subject_unresolved"),
            ("reject", "condition_unparsable"),
            ("reject", "object_is_rule"),
        ]
    )
    assert current_per_key(tstore) == 1 and chain_ok(tstore)


def test_chunking_does_not_change_any_outcome(tstore: Store, shared_engine: Any) -> None:
    whole = batch(tstore, MIXED)
    other = new_tenant_store(shared_engine)
    chunked = batch(other, MIXED, chunk_size=3)
    assert _shape(chunked) == _shape(whole)
    assert [o.superseded is not None for o in chunked.outcomes] == [
        o.superseded is not None for o in whole.outcomes
    ]
    assert chain_ok(other)


def test_a_failure_while_storing_leaves_nothing_of_the_chunk(
    tstore: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _queries.copy_rows

    def failing(*, table: str, **kw: Any) -> None:
        if table == "item_states":  # after the items, before the audit rows
            raise RuntimeError("disk on fire")
        real(table=table, **kw)

    monkeypatch.setattr(_queries, "copy_rows", failing)
    with pytest.raises(RuntimeError):
        batch(tstore, MIXED[:4])
    monkeypatch.undo()
    assert count(tstore, "SELECT count(*) FROM items WHERE tenant_id = :t") == 0
    assert count(tstore, "SELECT count(*) FROM item_states WHERE tenant_id = :t") == 0
    assert count(tstore, f"SELECT count(*) FROM {TRANSITIONS} h WHERE tenant_id = :t") == 0
    assert (
        count(tstore, "SELECT count(*) FROM audit_log WHERE tenant_id = :t AND action = 'write'")
        == 0
    )
    assert chain_ok(tstore)


def test_a_race_replays_the_chunk_item_by_item(
    tstore: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _queries.copy_rows

    def racing(*, table: str, rows: Sequence[Sequence[Any]], **kw: Any) -> None:
        # the whole chunk, and later the single item 3, lose a race
        if table == "items" and (len(rows) > 1 or (rows and rows[0][4] == "lag_returned_within_s")):
            raise psycopg.errors.UniqueViolation("duplicate key value")
        real(table=table, rows=rows, **kw)

    monkeypatch.setattr(_queries, "copy_rows", racing)
    result = batch(
        tstore,
        [
            {},
            {"subject": "nobody"},
            {"object": "E-2", "evidence": ["E-2"]},
            {"attribute": "lag_returned_within_s", "object": 5},
        ],
    )
    monkeypatch.undo()
    assert _shape(result) == [
        ("accepted", None),
        ("rejected", "subject_unresolved"),
        ("accepted", None),
        ("rejected", "conflict"),
    ]
    assert result.outcomes[3].message == "the item collided with another write of the same key"
    assert count(tstore, "SELECT count(*) FROM items WHERE tenant_id = :t") == 2
    audit = rows(
        tstore,
        "SELECT code, detail FROM audit_log WHERE tenant_id = :t AND action = 'reject' "
        "ORDER BY seq",
    )
    assert [r.code for r in audit] == ["subject_unresolved", "conflict"]
    assert "duplicate key" in audit[1].detail["db"]
    assert chain_ok(tstore)


def test_a_forbidden_batch_refuses_every_item(tstore: Store) -> None:
    result = claims.write_batch(
        sessions=tstore.sessions,
        tenant=tstore.tenant,
        requests=[request(), request(subject="nobody")],
        actor=tstore.sme,
        now=T0,
    )
    assert _shape(result) == [("rejected", "forbidden")] * 2
    assert count(tstore, "SELECT count(*) FROM items WHERE tenant_id = :t") == 0
    assert count(tstore, "SELECT count(*) FROM item_states WHERE tenant_id = :t") == 0


def test_unversioned_skills_in_one_batch_get_successive_versions(tstore: Store) -> None:
    skill = {"kind": "skill", "attribute": "restart_pool", "required": []}
    result = batch(
        tstore,
        [
            {**skill, "object": "drain, then restart"},
            {**skill, "object": "drain, then restart"},
            {**skill, "object": "restart, then drain"},
        ],
    )
    assert _shape(result) == [
        ("accepted", None),
        ("duplicate", "duplicate_no_change"),
        ("accepted", None),
    ]
    versions = rows(
        tstore, "SELECT version, release_state FROM items WHERE tenant_id = :t ORDER BY id"
    )
    assert [tuple(r) for r in versions] == [(1, "draft"), (2, "draft")]


def test_an_empty_batch(tstore: Store) -> None:
    assert batch(tstore, []).outcomes == ()


def test_text_survives_the_bulk_path_byte_for_byte(tstore: Store) -> None:
    tricky = 'tab\there, back\\slash, "quotes", new\nline, crlf\r\n, {braces}, NULL, \\N, é ✓'
    changes = [
        {
            "attribute": f"observed_{i}",
            "object": tricky if i % 2 else i + 0.25,
            "text": tricky,
            "entities": [tricky, "payments_db"],
            "purposes": ["postmortem"],
        }
        for i in range(40)  # enough for COPY rather than INSERT
    ]
    result = batch(tstore, changes)
    assert result.count("accepted") == 40
    stored = rows(
        tstore,
        "SELECT attribute, object, text, entities, purposes FROM items WHERE tenant_id = :t "
        "ORDER BY id",
    )
    for i, r in enumerate(stored):
        assert r.text == tricky
        assert r.object == {"value": tricky if i % 2 else i + 0.25}
        assert tricky.lower().replace(" ", "") not in r.entities  # folded, not raw
        assert "payments-db" in r.entities and r.purposes == ["postmortem"]
    assert chain_ok(tstore)
