"""Prometheus exposition: the parser, the mapping, typed samples, atomicity."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import factgen
from predicates import Duration, Version
from predicates.errors import (
    DocumentError,
    SubjectUnresolved,
    UnknownAttribute,
    ValueTypeError,
)
from tests.conftest import T0, Store
from tests.factgen.conftest import count

EXPOSITION = """\
# HELP pool_util Pool utilisation.
# TYPE pool_util gauge
pool_util{service="payment_api",pool="main"} 0.93
pool_util{service="payment_api",pool="aux"} 0.12
pool_util{service="orders-db",pool="main"} 0.5

# TYPE http_requests_total counter
http_requests_total{code="200"} 1027
pg_static{short_version="15.10",server="db"} 1
up{service="payments-db"} 1
process_start_time_seconds 1772355600
pool_max{service="payment-api"} 20
p99_latency_seconds{service="payment-api"} 0.25 1772355600000
"""

MAPPING = """\
rules:
  - metric: pool_util
    labels: {pool: main}
    subject_label: service
    attribute: metrics.pool_utilisation
  - {metric: pg_static, subject: payments-db, attribute: env.postgres.version,
     value_label: short_version}
  - {metric: up, subject_label: service, attribute: metrics.up}
  - {metric: process_start_time_seconds, attribute: metrics.started_at}
  - {metric: pool_max, subject_label: service, attribute: config.connection_pool.max}
  - {metric: p99_latency_seconds, subject_label: service, attribute: metrics.p99_latency}
"""


def _import(run: Callable[..., Any], text: str, mapping: str = MAPPING, **kw: Any) -> Any:
    rules = factgen.load_prometheus_mapping(mapping, source="map.yaml")
    kw.setdefault("subject", "payment-api")
    return run(
        factgen.import_prometheus,
        text=text,
        rules=rules,
        observed_at=T0,
        source_name="metrics.txt",
        **kw,
    )


def test_samples_are_mapped_typed_and_stored(run: Callable[..., Any], world_store: Store) -> None:
    result = _import(run, EXPOSITION)
    got = {(f.subject, f.attribute): f.value for f in result.facts}
    assert got == {
        ("payment-api", "metrics.pool_utilisation"): 0.93,
        ("orders-db", "metrics.pool_utilisation"): 0.5,
        ("payments-db", "env.postgres.version"): Version((15, 10)),
        ("payments-db", "metrics.up"): True,
        ("payment-api", "metrics.started_at"): datetime(2026, 3, 1, 9, 0, tzinfo=UTC),
        ("payment-api", "config.connection_pool.max"): 20,
        ("payment-api", "metrics.p99_latency"): Duration.from_micros(250_000),
    }
    assert type(got["payment-api", "config.connection_pool.max"]) is int
    stamped = next(f for f in result.facts if f.attribute == "metrics.p99_latency")
    assert stamped.observed_at == datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    assert {f.observed_at for f in result.facts if f is not stamped} == {T0}
    assert [(s.key, s.reason, s.line) for s in result.skipped] == [
        ("pool_util", "unmapped", 4),
        ("http_requests_total", "unmapped", 8),
    ]
    assert {f.source for f in result.facts} == {"prometheus:metrics.txt"}
    assert count(world_store, "facts") == 7


def test_parse_exposition_keeps_lines_and_reports_malformed_ones() -> None:
    samples = factgen.parse_exposition(EXPOSITION)
    assert [s.line for s in samples][:3] == [3, 4, 5]
    assert samples[-1].timestamp == 1772355600.0
    with pytest.raises(DocumentError) as err:
        factgen.parse_exposition('a 1\n# HELP b x\nb{x="1" 2\nc 3\n', source="m.txt")
    assert err.value.line == 3 and err.value.source == "m.txt"
    assert "b{x=" in err.value.message
    with pytest.raises(DocumentError) as err:
        factgen.parse_exposition("a 1\nb one\n")
    assert err.value.line == 2


BAD_SAMPLES = (
    ('pool_max{service="payment-api"} 20.5', "config.connection_pool.max", "int"),
    ('up{service="payments-db"} 2', "metrics.up", "bool"),
    ('pool_util{service="orders-db",pool="main"} NaN', "metrics.pool_utilisation", "float"),
    ('pg_static{server="db"} 1', "env.postgres.version", "version"),
    ('pg_static{short_version="15.6-rc1"} 1', "env.postgres.version", "version"),
)


def test_one_bad_sample_rejects_the_whole_exposition(
    run: Callable[..., Any], world_store: Store
) -> None:
    for line, attribute, expected in BAD_SAMPLES:
        text = 'pool_util{service="payment-api",pool="main"} 0.5\n' + line + "\n"
        with pytest.raises(ValueTypeError) as err:
            _import(run, text)
        assert err.value.detail["attribute"] == attribute
        assert err.value.detail["expected"] == expected
        assert err.value.detail["line"] == 2
        assert count(world_store, "facts") == 0


def test_mapping_problems_are_refused(run: Callable[..., Any], world_store: Store) -> None:
    with pytest.raises(UnknownAttribute, match="line 1"):
        _import(run, "x 1\n", mapping="- {metric: x, attribute: metrics.nope}\n")
    with pytest.raises(SubjectUnresolved) as err:
        _import(run, 'up{service="paymnts-db"} 1\n')
    assert "payments-db" in err.value.detail["suggestions"]
    with pytest.raises(DocumentError, match="no label 'service'"):
        _import(run, "up 1\n")
    with pytest.raises(DocumentError, match="first set at line 1"):
        _import(run, 'up{service="payments-db"} 1\nup{service="payments_db"} 0\n')
    with pytest.raises(DocumentError, match="no default"):
        _import(run, "process_start_time_seconds 1\n", subject=None)
    assert count(world_store, "facts") == 0


@pytest.mark.parametrize(
    ("mapping", "line", "needle"),
    [
        ("- {metric: x}\n", 1, "missing required key 'attribute'"),
        ("- {metric: x, attribute: a, subject: s, subject_label: l}\n", 1, "not both"),
        ("- {metric: x, attribute: a}\n- {metric: 'x y', attribute: a}\n", 2, "not a valid name"),
        ("- {metric: x, attribute: a, labels: {pool: 1}}\n", 1, "quoted strings"),
        ("- {metric: x, attribute: a, label: {}}\n", 1, "unknown key"),
        ("rules: []\n", 1, "non-empty"),
    ],
)
def test_mapping_file_errors_say_where(mapping: str, line: int, needle: str) -> None:
    with pytest.raises(DocumentError) as err:
        factgen.load_prometheus_mapping(mapping, source="m.yaml")
    assert needle in err.value.message and err.value.line == line


def test_first_matching_rule_wins_and_labels_must_all_match() -> None:
    rules = factgen.load_prometheus_mapping(
        "- {metric: m, labels: {a: '1', b: '2'}, attribute: x}\n- {metric: m, attribute: y}\n"
    )
    assert rules[0].matches("m", {"a": "1", "b": "2", "c": "3"})
    assert not rules[0].matches("m", {"a": "1"})
    assert rules[1].matches("m", {}) and not rules[1].matches("n", {})
    assert rules[0].line == 1 and rules[1].line == 2


def test_the_snapshot_sees_imported_metrics_until_max_age(
    run: Callable[..., Any], world_store: Store
) -> None:
    _import(run, 'p99_latency_seconds{service="payment-api"} 0.3\n')
    with world_store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=world_store.tenant)
        fresh = factgen.build_snapshot(
            session=s, world=world, subjects=["payment-api"], at=T0 + timedelta(minutes=4)
        )
        stale = factgen.build_snapshot(
            session=s, world=world, subjects=["payment-api"], at=T0 + timedelta(minutes=6)
        )
    assert fresh.get("payment-api", "metrics.p99_latency") is not None
    assert stale.get("payment-api", "metrics.p99_latency") is None
