"""Configuration documents: flattening, strict typing of declared keys, atomicity."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import factgen
from factgen._adapters import normalise_prefix
from predicates import Duration
from predicates.errors import DocumentError, InputError, SubjectUnresolved, ValueTypeError
from tests.conftest import ADMIN, T0, Store
from tests.factgen.conftest import count

CONFIG = """\
connection_pool:
  max: 20
  timeout: 30s
  idle: 5          # not declared
pgbouncer:
  pool_mode: transaction
pools:
  main: {size: 10}
  aux: {size: null}
hosts: [db1, db2]
max-conn: 3
debug: false
owner: team-payments
"""


def test_a_yaml_config_is_flattened_typed_and_stored(
    run: Callable[..., Any], world_store: Store
) -> None:
    result = run(
        factgen.import_config,
        text=CONFIG,
        subject="paymentapi-prod",
        observed_at=T0,
        source_name="app.yaml",
    )
    stored = {f.attribute: f.value for f in result.facts}
    assert stored == {
        "config.connection_pool.max": 20,
        "config.connection_pool.timeout": Duration(30),
        "config.pgbouncer.pool_mode": "transaction",
        "config.pools.main.size": 10,
        "config.debug": False,
        "config.owner": "team-payments",
    }
    assert {f.subject for f in result.facts} == {"payment-api"}
    assert {f.source for f in result.facts} == {"config:app.yaml"}
    assert [(s.key, s.reason, s.line) for s in result.skipped] == [
        ("config.connection_pool.idle", "undeclared", 4),
        ("config.pools.aux.size", "null", 9),
        ("config.hosts", "undeclared", 10),
        ("max-conn", "invalid_name", 11),
    ]
    assert count(world_store, "facts") == 6


def test_a_json_config_under_another_prefix(run: Callable[..., Any], world_store: Store) -> None:
    doc = {"connection_pool": {"max": 25}, "pool_utilisation": 0.5}
    result = run(
        factgen.import_config,
        text=json.dumps({"config": doc}),
        subject="payment-api",
        prefix="",
        observed_at=T0,
    )
    assert [(f.attribute, f.value) for f in result.facts] == [("config.connection_pool.max", 25)]
    assert [s.key for s in result.skipped] == ["config.pool_utilisation"]
    result = run(
        factgen.import_config,
        text=json.dumps({"pool_utilisation": 0.5}),
        subject="payment-api",
        prefix="metrics",
        observed_at=T0,
    )
    assert [(f.attribute, f.value) for f in result.facts] == [("metrics.pool_utilisation", 0.5)]


BAD_CONFIGS = (
    ("connection_pool:\n  max: '20'\n", "config.connection_pool.max", "int", 2),
    ("connection_pool:\n  max: 20.0\n", "config.connection_pool.max", "int", 2),
    ("connection_pool:\n  max: true\n", "config.connection_pool.max", "int", 2),
    ("debug: [true]\n", "config.debug", "bool", 1),
    ("pgbouncer: {pool_mode: txn}\n", "config.pgbouncer.pool_mode", "enum", 1),
    ('{"connection_pool": {"max": 1.5}}', "config.connection_pool.max", "int", None),
)


def test_one_bad_value_rejects_the_whole_document(
    run: Callable[..., Any], world_store: Store
) -> None:
    for text, attribute, expected, line in BAD_CONFIGS:
        json_doc = text.startswith("{")
        with pytest.raises(ValueTypeError) as err:
            run(
                factgen.import_config,
                text=text if json_doc else "owner: fine\n" + text,
                subject="payment-api",
                observed_at=T0,
                source_name="c.yaml",
            )
        detail = err.value.detail
        assert detail["attribute"] == attribute
        assert detail["expected"].startswith(expected)
        assert "value" in detail
        if line is not None:
            assert detail["line"] == line + 1
            assert err.value.message.startswith(f"c.yaml:{line + 1}: ")
        assert count(world_store, "facts") == 0


def test_structural_problems_are_document_errors(run: Callable[..., Any]) -> None:
    with pytest.raises(DocumentError, match="like the key at line 1"):
        run(
            factgen.import_config,
            text="connection_pool.max: 1\nconnection_pool:\n  max: 2\n",
            subject="payment-api",
            observed_at=T0,
        )
    with pytest.raises(DocumentError, match="is a mapping"):
        run(factgen.import_config, text="- 1\n", subject="payment-api", observed_at=T0)
    with pytest.raises(DocumentError) as err:
        run(factgen.import_config, text="a: [1,\n", subject="payment-api", observed_at=T0)
    assert err.value.line == 2
    with pytest.raises(InputError, match="invalid prefix"):
        run(factgen.import_config, text="a: 1", subject="payment-api", prefix="a b", observed_at=T0)


def test_an_unresolved_subject_stores_nothing(run: Callable[..., Any], world_store: Store) -> None:
    with pytest.raises(SubjectUnresolved) as err:
        run(factgen.import_config, text="owner: x", subject="payment-apj", observed_at=T0)
    assert "payment-api" in err.value.detail["suggestions"]
    assert count(world_store, "facts") == 0


def test_a_failed_import_leaves_the_callers_transaction_usable(world_store: Store) -> None:
    with world_store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=world_store.tenant)
        factgen.import_config(
            actor=ADMIN,
            session=s,
            world=world,
            text="owner: a",
            subject="payment-api",
            observed_at=T0,
            now=T0,
        )
        with pytest.raises(ValueTypeError):
            factgen.import_config(
                actor=ADMIN,
                session=s,
                world=world,
                text="owner: b\ndebug: 1",
                subject="payment-api",
                observed_at=T0,
                now=T0,
            )
    assert count(world_store, "facts") == 1
    with world_store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=world_store.tenant)
        snap = factgen.build_snapshot(
            session=s, world=world, subjects=None, at=T0 + timedelta(seconds=1)
        )
    entry = snap.get("payment-api", "config.owner")
    assert entry is not None and entry.value == "a"


# --- flatten / unflatten: laws --------------------------------------------------

_keys = st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True)
_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=3),
)
_documents = st.recursive(
    st.dictionaries(_keys, _leaves, min_size=1, max_size=4),
    lambda inner: st.dictionaries(_keys, st.one_of(_leaves, inner), min_size=1, max_size=4),
    max_leaves=20,
)
_prefixes = st.sampled_from(["config.", "", "app.db."])


@given(_documents, _prefixes)
def test_unflatten_inverts_flatten(doc: dict[str, Any], prefix: str) -> None:
    flat = factgen.flatten_config(doc, prefix)
    assert factgen.unflatten_config(flat, prefix) == doc
    assert all(a.startswith(prefix) for a in flat)


@given(_documents, _prefixes)
def test_flatten_keeps_every_leaf_and_only_leaves(doc: dict[str, Any], prefix: str) -> None:
    flat = factgen.flatten_config(doc, prefix)

    def leaves(node: Any) -> int:
        return sum(leaves(v) for v in node.values()) if isinstance(node, dict) else 1

    assert len(flat) == leaves(doc)
    assert not any(isinstance(v, dict) for v in flat.values())
    assert factgen.flatten_config(factgen.unflatten_config(flat, prefix), prefix) == flat


def test_flatten_of_dotted_keys_and_collisions() -> None:
    assert factgen.flatten_config({"pool.max": 1, "x": {}}) == {"config.pool.max": 1}
    with pytest.raises(InputError, match="two keys"):
        factgen.flatten_config({"pool.max": 1, "pool": {"max": 2}})
    with pytest.raises(InputError):
        factgen.unflatten_config({"other.x": 1})
    with pytest.raises(InputError):
        factgen.unflatten_config({"config.a": 1, "config.a.b": 2})
    assert normalise_prefix("config") == "config." and normalise_prefix("") == ""
