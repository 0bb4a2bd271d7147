"""sources.yaml (model §2.1, §2.2): validated with line and column, kept in the store,
and the pull's own typing (``observe_each``) and the clock-skew rule."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

import factgen
from predicates import encode
from predicates.errors import (
    CaveatError,
    DocumentError,
    EventInFuture,
    Forbidden,
    UnknownAttribute,
)
from tests.conftest import ADMIN, T0, Store

GOOD = """\
sources:
  - name: prom
    kind: prometheus
    url: http://127.0.0.1:9090
    every: 30s
    timeout: 2s
    token_env: PROM_TOKEN
    attributes:
      - attribute: metrics.pool_utilisation
        query: 'max by (service) (db_pool_in_use / db_pool_max)'
        subject_label: service
  - name: deployed-config
    kind: file
    path: /etc/deploy/{subject}.json
    subjects: [payment-api]
    attributes:
      - {attribute: config.connection_pool.max, pointer: /connection_pool/max}
hooks:
  alertmanager: {subject_labels: [service, job]}
  github:
    repositories: {acme/payment-api: [payment-api]}
    secret_env: GITHUB_WEBHOOK_SECRET
"""


def test_a_good_file_is_read_into_typed_sources() -> None:
    config = factgen.load_sources_yaml(GOOD)
    prom, files = config.sources
    assert (prom.name, prom.kind, prom.every, prom.timeout) == (
        "prom",
        "prometheus",
        timedelta(seconds=30),
        timedelta(seconds=2),
    )
    assert prom.attributes[0].subject_label == "service"
    assert files.attributes[0].pointer == "/connection_pool/max" and files.every is None
    assert config.hooks.alertmanager.subject_labels == ["service", "job"]
    assert config.hooks.github.repositories == {"acme/payment-api": ["payment-api"]}
    # what the store keeps reads back as the same configuration
    assert factgen.SourcesConfig.from_json(config.to_json()) == config


@pytest.mark.parametrize(
    ("change", "line", "column", "says"),
    [
        (("    every: 30s", "    every: soon"), 5, 12, "duration"),
        (("    timeout: 2s", "    timeout: 2s\n    tiemout: 3s"), 7, 5, "unknown key 'tiemout'"),
        (("    kind: prometheus", "    kind: graphite"), 3, 11, "prometheus"),
        (("        subject_label: service\n", ""), 9, 9, "subject_label"),
        (
            ("    path: /etc/deploy/{subject}.json", "    path: /etc/deploy/x.json"),
            12,
            5,
            "{subject}",
        ),
        (("  - name: deployed-config", "  - name: prom"), 12, 11, "already declared"),
        (("/connection_pool/max", "connection_pool.max"), 17, 58, "JSON pointer"),
        (("      - attribute: metrics", "      - attribute: 9metrics"), 9, 20, "attribute"),
        (("    subjects: [payment-api]\n", ""), 12, 5, "subjects"),
    ],
)
def test_a_bad_file_says_where(change: tuple[str, str], line: int, column: int, says: str) -> None:
    old, new = change
    assert old in GOOD
    with pytest.raises(DocumentError) as caught:
        factgen.load_sources_yaml(GOOD.replace(old, new, 1), source="sources.yaml")
    error = caught.value
    assert says in error.message and "Value error" not in error.message
    assert error.detail["source"] == "sources.yaml"
    assert error.detail["line"] == line, error.message
    assert error.detail["column"] == column, error.message


def test_a_file_that_is_not_a_mapping_is_refused_at_its_start() -> None:
    with pytest.raises(DocumentError, match="expected a mapping") as caught:
        factgen.load_sources_yaml("- prom\n")
    assert caught.value.detail["line"] == 1
    assert factgen.load_sources_yaml("") == factgen.SourcesConfig()


def _in_store(store: Store, fn: Any, **kw: Any) -> Any:
    with store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=store.tenant)
        return fn(session=s, world=world, **kw)


def test_sources_are_kept_per_tenant_by_admins_and_name_declared_attributes(
    store: Store,
) -> None:
    config = factgen.load_sources_yaml(GOOD)
    with pytest.raises(Forbidden):
        _in_store(
            store,
            factgen.store_sources,
            actor=factgen.Actor("sme-1", "sme"),
            config=config,
            document=GOOD,
            now=T0,
        )
    undeclared = factgen.load_sources_yaml(GOOD.replace("metrics.pool_utilisation", "metrics.nope"))
    with pytest.raises(UnknownAttribute):
        _in_store(
            store, factgen.store_sources, actor=ADMIN, config=undeclared, document="x", now=T0
        )
    with store.sessions.begin() as s:
        assert factgen.loaded_sources(session=s, tenant=store.tenant) is None
    _in_store(store, factgen.store_sources, actor=ADMIN, config=config, document=GOOD, now=T0)
    with store.sessions.begin() as s:
        loaded = factgen.loaded_sources(session=s, tenant=store.tenant)
    assert loaded is not None
    assert (loaded.config, loaded.document, loaded.loaded_by) == (config, GOOD, ADMIN.id)


def test_a_pull_types_each_sample_on_its_own_and_refuses_the_rest(store: Store) -> None:
    source = factgen.Actor("source:prom", "source")
    sample_time = T0 - timedelta(seconds=7)
    provenance = {"source": "prom", "query": "max(x)", "sample_time": sample_time.isoformat()}
    observations = [
        factgen.Observation(
            "paymentapi-prod",
            "metrics.pool_utilisation",
            0.97,
            "prom",
            observed_at=sample_time,
            provenance=provenance,
        ),
        factgen.Observation("no-such-service", "metrics.pool_utilisation", 0.5, "prom"),
        factgen.Observation("payment-api", "config.connection_pool.max", "twenty", "prom"),
        factgen.Observation("payment-api", "metrics.undeclared", 1, "prom"),
        factgen.Observation(
            "payment-api",
            "config.connection_pool.max",
            20,
            "prom",
            observed_at=T0 + timedelta(hours=1),
        ),
    ]
    stored, refused = _in_store(
        store,
        factgen.observe_each,
        actor=source,
        observations=observations,
        observed_at=T0,
        now=T0,
    )
    assert [(f.subject, f.attribute, f.observed_at) for f in stored] == [
        ("payment-api", "metrics.pool_utilisation", sample_time)
    ]
    assert [r.code for r in refused] == [
        "subject_unresolved",
        "fact_type_mismatch",
        "fact_unknown_attribute",
        "event_in_future",
    ]
    with store.engine.connect() as c:
        rows = c.execute(
            sa.text("SELECT subject, observed_at, provenance, source FROM facts_current")
        ).all()
    assert [(r.subject, r.observed_at, r.provenance, r.source) for r in rows] == [
        ("payment-api", sample_time, provenance, "prom")
    ]


def test_status_counts_add_up_over_pulls(store: Store) -> None:
    with store.sessions.begin() as s:
        for at, stored, refused, error in (
            (T0, 3, {"not_finite": 1}, None),
            (T0 + timedelta(seconds=30), 0, {}, "connection refused"),
            (T0 + timedelta(seconds=60), 2, {"not_finite": 2, "subject_unresolved": 1}, None),
        ):
            factgen.record_pull(
                session=s,
                tenant=store.tenant,
                source="prom",
                at=at,
                stored=stored,
                refused=refused,
                error=error,
                latency_ms=12.5,
            )
        [status] = factgen.source_status(session=s, tenant=store.tenant)
    assert (status.pulls, status.samples_stored, status.errors) == (3, 5, 1)
    assert status.refused == {"not_finite": 3, "subject_unresolved": 1}
    assert status.last_error == "connection refused"
    assert status.last_error_at == T0 + timedelta(seconds=30)
    assert status.last_ok_at == T0 + timedelta(seconds=60)
    assert status.consecutive_failures == 0


def test_a_delivery_id_is_claimed_once(store: Store) -> None:
    with store.sessions.begin() as s:
        kw = {"session": s, "tenant": store.tenant, "kind": "github", "delivery_id": "d-1"}
        assert factgen.claim_delivery(now=T0, **kw) is None
        factgen.settle_delivery(outcome={"done": [{"action": "event"}]}, **kw)
        again = factgen.claim_delivery(now=T0 + timedelta(seconds=1), **kw)
    assert again is not None and again["done"] == [{"action": "event"}]
    assert again["received_at"] == T0.isoformat()


def test_an_event_dated_beyond_the_clock_skew_is_refused_and_nothing_is_stored(
    store: Store,
) -> None:
    kw: dict[str, Any] = {
        "actor": ADMIN,
        "type": "deploy",
        "subjects": ["payment-api"],
        "changes": {"config.connection_pool.max": 100},
        "now": T0,
    }
    with pytest.raises(EventInFuture) as caught:
        _in_store(store, factgen.record_event, occurred_at=T0 + timedelta(minutes=6), **kw)
    assert caught.value.code == "event_in_future"
    assert caught.value.detail["tolerance_seconds"] == 300
    with store.engine.connect() as c:
        assert c.execute(sa.text("SELECT count(*) FROM events")).scalar_one() == 0
        assert c.execute(sa.text("SELECT count(*) FROM facts")).scalar_one() == 0
    # within the tolerance, a sender's clock a little ahead is accepted as it says
    event = _in_store(store, factgen.record_event, occurred_at=T0 + timedelta(minutes=4), **kw)
    assert event.occurred_at == T0 + timedelta(minutes=4)


def test_a_pull_stores_every_type_as_encode_writes_it_in_order(world_store: Store) -> None:
    """The batched path of ``observe_each`` (one schema lookup per attribute, values
    written as JSON text, columns sent as arrays) stores, row for row and in order, what
    ``type_observations`` and ``encode`` make of each observation: the aliased name
    resolved, any source and provenance (or none), and refuses what it refuses, in its
    words."""
    source = factgen.Actor("source:prom", "source")
    shared = {"source": "prom", "query": "q", "sample_time": T0.isoformat()}
    observations = [
        factgen.Observation("paymentapi-prod", "metrics.pool_utilisation", 0.1, "prom", T0, shared),
        factgen.Observation("payment_api", "metrics.pool_utilisation", 1e16, "prom", T0, shared),
        factgen.Observation("payments-db", "metrics.pool_utilisation", 3, None),  # int widened
        factgen.Observation("payment-api", "config.connection_pool.max", 2**53 + 1, "prom"),
        factgen.Observation("payment-api", "env.postgres.version", "v15.6", None, T0, {"p": 1}),
        factgen.Observation("payment-api", "config.connection_pool.timeout", "5m", "prom"),
        factgen.Observation("payment-api", "config.debug", True, "prom", T0, shared),
        factgen.Observation("payment-api", "config.owner", 'Zoë "ops" \\ 漢', "prom"),
        factgen.Observation("payment-api", "metrics.started_at", "2026-12-01T10:00:00Z", "x"),
        factgen.Observation("payment-api", "config.pools.main.size", 7, "prom"),
        factgen.Observation("payment-api", "config.pgbouncer.pool_mode", "session", "prom"),
        factgen.Observation("payment-apx", "metrics.pool_utilisation", 0.5, "prom"),
        factgen.Observation("payment-api", "config.debug", "yes", "prom"),
        factgen.Observation("payment-api", "metrics.nope", 1, "prom"),
    ]
    stored, refused = _in_store(
        world_store,
        factgen.observe_each,
        actor=source,
        observations=observations,
        observed_at=T0 - timedelta(minutes=1),
        now=T0,
    )
    with world_store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=world_store.tenant)
    expected = factgen.type_observations(world, observations[:11], T0 - timedelta(minutes=1))
    assert stored == expected
    for obs in observations[11:]:
        with pytest.raises(CaveatError) as caught:
            factgen.type_observations(world, [obs], T0)
        assert (caught.value.code, caught.value.message) in [(r.code, r.message) for r in refused]
    assert [r.observation for r in refused] == observations[11:]
    with world_store.engine.connect() as c:
        rows = c.execute(
            sa.text(
                "SELECT subject, attribute, value, observed_at, recorded_at, source, provenance "
                "FROM facts ORDER BY id"
            )
        ).all()
    assert [tuple(r) for r in rows[-len(expected) :]] == [
        (
            f.subject,
            f.attribute,
            encode(f.value, f.vtype),
            f.observed_at,
            T0,
            f.source,
            None if f.provenance is None else dict(f.provenance),
        )
        for f in expected
    ]


def test_one_alert_label_may_be_given_as_the_scenario_format_spells_it() -> None:
    one = factgen.load_sources_yaml("hooks:\n  alertmanager: {subject_label: job}\n")
    assert one.hooks.alertmanager.subject_labels == ["job"]
    with pytest.raises(DocumentError, match="not both"):
        factgen.load_sources_yaml(
            "hooks:\n  alertmanager: {subject_label: job, subject_labels: [service]}\n"
        )
    with pytest.raises(DocumentError, match="valid"):
        factgen.load_sources_yaml("hooks:\n  alertmanager: {subject_label: 'not a label'}\n")
