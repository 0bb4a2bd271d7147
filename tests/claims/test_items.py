"""Every field of an item (model §1) as stored, with the defaults docs/claims.md names."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

import claims
from predicates.errors import GateRejection, InputError
from tests.claims._support import request, rows, write
from tests.conftest import T0, Store


def _row(store: Store, item_id: int) -> Any:
    [row] = rows(
        store,
        "SELECT i.*, s.state FROM items i JOIN item_states s ON s.item_id = i.id "
        "WHERE i.tenant_id = :t AND i.id = :i",
        i=item_id,
    )
    return row


def test_defaults(tstore: Store) -> None:
    res = write(tstore)
    row = _row(tstore, res.item_id)
    assert row.epistemic == "observation"
    assert row.salience == 0.5
    assert row.purposes == [] and row.facets == []
    assert row.valid_from == T0 == row.recorded_at and row.valid_to is None
    assert row.state == "case" and row.superseded_at is None
    assert (row.version, row.release_state, row.test_evidence) == (None, None, None)
    assert row.created_by == tstore.agent.id
    # both conditions' attributes: one declares `configuration`, the other nothing
    assert row.content_type == "configuration"


def test_every_field_is_kept(tstore: Store) -> None:
    res = write(
        tstore,
        epistemic="hypothesis",
        content_type="failure_mechanism",
        facets=[{"axis": "service", "id": "paymentapi-prod"}, {"axis": "team", "id": "payments"}],
        purposes=[" Incident_Diagnosis ", "postmortem", "postmortem"],
        text="pool exhausted; restart restored service",
        entities=["payments_db", "pgbouncer"],
        salience=0.9,
        valid_from=(T0 - timedelta(days=1)).isoformat(),
        valid_to=(T0 + timedelta(days=30)).isoformat(),
    )
    row = _row(tstore, res.item_id)
    assert row.epistemic == "hypothesis" and row.content_type == "failure_mechanism"
    assert row.facets == [
        {"axis": "service", "id": "payment-api"},
        {"axis": "team", "id": "payments"},
    ]
    assert row.purposes == ["incident_diagnosis", "postmortem"]
    assert row.text == "pool exhausted; restart restored service"
    # canonical ids for names that resolve, the folded name for one that does not
    assert row.entities == ["payment-api", "payments-db", "pgbouncer"]
    assert row.salience == 0.9
    assert row.valid_from == T0 - timedelta(days=1)
    assert row.valid_to == T0 + timedelta(days=30)
    with tstore.sessions.begin() as s:
        rec = claims.get_item(
            session=s, tenant=tstore.tenant, item_id=res.item_id, actor=tstore.agent
        )
    assert rec.facets == (("service", "payment-api"), ("team", "payments"))
    assert rec.purposes == ("incident_diagnosis", "postmortem")


def test_entities_from_conditions_on_other_entities(tstore: Store) -> None:
    res = write(tstore, required=["@payments-db:config.connection_pool.max gte 100"])
    assert _row(tstore, res.item_id).entities == ["payment-api", "payments-db"]


def test_content_type_is_not_derived_when_conditions_disagree_or_say_nothing(
    tstore: Store,
) -> None:
    assert _row(tstore, write(tstore, required=[]).item_id).content_type is None
    mixed = write(
        tstore,
        required=["config.connection_pool.max eq 20", "env.postgres.version gte v15"],
    )
    assert _row(tstore, mixed.item_id).content_type == "configuration"  # version has none


def test_axes_and_content_types_register_at_start_up_without_a_migration(
    tstore: Store,
) -> None:
    registry = claims.ItemRegistry.build(
        axes=[claims.AxisType("runbook", agent_writable=True), claims.AxisType("region")],
        content_types=["capacity"],
    )
    res = write(
        tstore,
        registry=registry,
        scope={"axis": "runbook", "id": "rb-7"},
        facets=[{"axis": "region", "id": "eu-west-1"}],
        content_type="capacity",
    )
    row = _row(tstore, res.item_id)
    assert (row.scope_axis, row.scope_id, row.content_type) == ("runbook", "rb-7", "capacity")
    assert row.facets == [{"axis": "region", "id": "eu-west-1"}]
    # the default registry still refuses both
    with pytest.raises(GateRejection) as err:
        write(tstore, scope={"axis": "runbook", "id": "rb-7"})
    assert err.value.code == "axis_not_writable"
    with pytest.raises(GateRejection) as err:
        write(tstore, content_type="capacity")
    assert err.value.code == "content_type_unknown"


def test_registry_rejects_bad_names() -> None:
    with pytest.raises(InputError):
        claims.AxisType("Bad Axis")
    with pytest.raises(InputError):
        claims.DEFAULT_REGISTRY.with_content_types("Weather!")
    assert claims.DEFAULT_REGISTRY.writable_axes() == ["agent", "case", "session"]
    assert claims.DEFAULT_REGISTRY.writable_axes() == sorted(claims.AGENT_WRITABLE_AXES)


def test_admins_write_tenant_wide_and_to_entity_anchors(tstore: Store, admin: claims.Actor) -> None:
    tenant = write(tstore, admin, scope={"axis": "tenant", "id": "*"})
    service = write(tstore, admin, scope={"axis": "service", "id": "payment_api"})
    assert _row(tstore, tenant.item_id).scope_axis == "tenant"
    assert _row(tstore, service.item_id).scope_id == "payment-api"
    # the scope is part of the key: the same claim under another anchor is another row
    assert service.item_id != tenant.item_id and service.superseded is None


def test_facets_are_not_part_of_the_key(tstore: Store) -> None:
    first = write(tstore)
    again = write(tstore, facets=[{"axis": "team", "id": "payments"}])
    assert again.outcome == "duplicate" and again.item_id == first.item_id


def test_the_writer_cannot_set_the_acl(tstore: Store) -> None:
    with pytest.raises(ValidationError):
        request(acl=[["everyone"]])
    with pytest.raises(ValidationError):
        request(state="active")


@pytest.mark.parametrize(
    "changes",
    [
        {"version": 2},  # skills only
        {"test": "T-1"},
        {"valid_from": "2026-03-02T00:00:00Z", "valid_to": "2026-03-01T00:00:00Z"},
        {"valid_from": "2026-03-01T00:00:00"},  # no timezone
        {"salience": 1.5},
        {"purposes": ["not a purpose!"]},
        {"text": "x" * 4001},
    ],
)
def test_malformed_writes_fail_before_the_gate(changes: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        request(**changes)


def test_items_as_of_reads_what_the_store_believed(tstore: Store) -> None:
    first = write(tstore, attribute="lag_returned_within_s", object=900)
    later = T0 + timedelta(hours=1)
    second = write(tstore, attribute="lag_returned_within_s", object=600, now=later)

    def believed(at: Any) -> list[tuple[int, str, Any]]:
        with tstore.sessions.begin() as s:
            found = claims.items_as_of(
                session=s,
                tenant=tstore.tenant,
                actor=tstore.agent,
                at=at,
                attribute="lag_returned_within_s",
            )
        return [(r.id, r.state, r.object["value"]["v"]) for r in found]

    assert believed(T0 - timedelta(seconds=1)) == []
    assert believed(T0) == [(first.item_id, "case", 900)]
    assert believed(later - timedelta(seconds=1)) == [(first.item_id, "case", 900)]
    assert believed(later) == [(second.item_id, "case", 600)]


def test_items_as_of_hides_rows_the_reader_cannot_read(
    tstore: Store, insider: claims.Actor
) -> None:
    write(tstore, insider, evidence=["E-secret"], object="E-secret")
    with tstore.sessions.begin() as s:
        seen_by_insider = claims.items_as_of(session=s, tenant=tstore.tenant, actor=insider, at=T0)
        seen_by_agent = claims.items_as_of(
            session=s, tenant=tstore.tenant, actor=tstore.agent, at=T0
        )
    assert len(seen_by_insider) == 1 and seen_by_agent == []


def test_the_key_digest_is_computed_by_the_database_as_the_write_path_computes_it(
    tstore: Store,
) -> None:
    from claims import _queries

    res = write(tstore, subject="paymentapi-prod", text="tab\there é")
    row = _row(tstore, res.item_id)
    key = [getattr(row, c) for c in _queries._KEY]
    assert row.key_digest == _queries.key_digest(tstore.tenant, key)
