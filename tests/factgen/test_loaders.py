"""YAML loaders: schema and entities files, with file, line and column on every error."""

from __future__ import annotations

from datetime import timedelta

import pytest

from factgen import EntitySpec, load_entities_yaml, load_schema_yaml
from factgen._document import load_json, load_text, load_yaml
from predicates import ValueType
from predicates.errors import DocumentError

SCHEMA = """\
# the payments schema
attributes:
  - attribute: config.connection_pool.max
    type: int
    unit: connections
    content_type: configuration
  - {attribute: metrics.pool_utilisation, type: float, max_age: 15m}
  - {attribute: "metrics.*.p99_ms", type: float, max_age: 300}
  - {attribute: pgbouncer.pool_mode, type: "enum[session, transaction]"}
"""


def test_a_schema_file_declares_every_attribute_in_order() -> None:
    specs = load_schema_yaml(SCHEMA, source="schema.yaml")
    assert [s.attribute for s in specs] == [
        "config.connection_pool.max",
        "metrics.pool_utilisation",
        "metrics.*.p99_ms",
        "pgbouncer.pool_mode",
    ]
    first, second, third, fourth = specs
    assert first.vtype == ValueType("int") and first.unit == "connections"
    assert first.content_type == "configuration" and first.max_age is None
    assert second.max_age == timedelta(minutes=15)
    assert third.max_age == timedelta(seconds=300)
    assert fourth.vtype == ValueType("enum", ("session", "transaction"))


def test_a_bare_list_and_an_empty_file_are_schema_files_too() -> None:
    assert [s.attribute for s in load_schema_yaml("- {attribute: a.b, type: bool}\n")] == ["a.b"]
    assert load_schema_yaml("") == []


@pytest.mark.parametrize(
    ("text", "line", "column", "needle"),
    [
        ("- {attribute: a, type: int, unitt: x}\n", 1, 29, "did you mean 'unit'"),
        ("- {attribute: a}\n", 1, 3, "missing required key 'type'"),
        ("- {attribute: a, type: integer}\n", 1, 24, "unknown value type"),
        ("- {attribute: a, type: int}\n- {attribute: a, type: float}\n", 2, 15, "already"),
        ("- {attribute: config.max-pool, type: int}\n", 1, 15, "invalid attribute name"),
        ("- {attribute: a, type: int, max_age: 15 minutes}\n", 1, 38, "not a duration"),
        ("- {attribute: a, type: int, max_age: 0s}\n", 1, 38, "longer than zero"),
        ("- {attribute: a, type: int, max_age: true}\n", 1, 38, "max_age"),
        ("- {attribute: a, type: int, content_type: Config Changes}\n", 1, 43, "content_type"),
        ("attributes:\n  - attribute: a\n    type: [int]\n", 3, 11, "type must be"),
        ("attribute: a\n", 1, 1, "unknown key 'attribute'"),
        ("- a: [1, 2\n", 2, 1, "invalid YAML"),
        (
            "- {attribute: a, type: int}\n- {attribute: a, type: int, attribute: b}\n",
            2,
            29,
            "duplicate",
        ),
    ],
)
def test_schema_errors_say_file_line_and_column(
    text: str, line: int, column: int, needle: str
) -> None:
    with pytest.raises(DocumentError) as err:
        load_schema_yaml(text, source="s.yaml")
    assert needle in err.value.message
    assert (err.value.line, err.value.column) == (line, column), err.value
    assert str(err.value).startswith(f"s.yaml:{line}:{column}: ")
    assert err.value.code == "document_invalid"


ENTITIES = """\
entities:
  - id: payment-api
    kind: service
    aliases: [payment_api, paymentapi-prod]
    depends_on: [payments-db]
    edges: [{relation: calls, to: ledger}]
  - {id: payments-db, kind: database, runs_on: [node-7]}
  - {id: ledger, kind: service}
  - {id: node-7, kind: host}
edges:
  - {from: ledger, relation: depends_on, to: payments_db}
"""


def test_an_entities_file_gives_entities_with_aliases_and_edges() -> None:
    entities = load_entities_yaml(ENTITIES)
    assert entities[0] == EntitySpec(
        "payment-api",
        "service",
        ("payment_api", "paymentapi-prod"),
        (("depends_on", "payments-db"), ("calls", "ledger")),
    )
    assert entities[1].edges == (("runs_on", "node-7"),)
    assert entities[2].edges == (("depends_on", "payments_db"),)


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("- {id: a, kind: service}\n- {id: a, kind: db}\n", 2, "declared twice"),
        ("- {id: a}\n", 1, "missing required key 'kind'"),
        ("- {id: a, kind: s, depends: [b]}\n", 1, "did you mean 'depends_on'"),
        ("- {id: a, kind: s, aliases: [1]}\n", 1, "not an entity name"),
        ("- {id: a, kind: s, edges: [{relation: Calls, to: b}]}\n", 1, "relation"),
        (
            "entities:\n  - {id: a, kind: s}\nedges:\n  - {from: x, relation: r, to: a}\n",
            4,
            "not declared in this file",
        ),
        ("entities: {id: a}\n", 1, "must be a list"),
    ],
)
def test_entities_errors_say_where(text: str, line: int, needle: str) -> None:
    with pytest.raises(DocumentError) as err:
        load_entities_yaml(text, source="e.yaml")
    assert needle in err.value.message
    assert err.value.line == line


def test_yaml_booleans_and_timestamps_become_plain_python_values() -> None:
    doc = load_yaml("a: true\nb: 1\nc: 2026-03-01T09:00:00Z\nd: yes\n", source="x")
    assert doc.data == {"a": True, "b": 1, "c": doc.data["c"], "d": "yes"}  # type: ignore[index]
    data = doc.data
    assert isinstance(data, dict)
    assert type(data["a"]) is bool and type(data["b"]) is int
    assert data["c"].tzinfo is not None and type(data["c"]).__name__ == "datetime"
    assert doc.where(("b",)) == (2, 4)


def test_json_is_strict_and_positions_come_when_needed() -> None:
    with pytest.raises(DocumentError) as err:
        load_json('{"a": 1,\n "a": 2}', source="x.json")
    assert "duplicate key" in err.value.message
    with pytest.raises(DocumentError) as err:
        load_json('{"a": NaN}', source="x.json")
    with pytest.raises(DocumentError) as err:
        load_json('{"a": 1,\n  "b": }', source="x.json")
    assert (err.value.line, err.value.column) == (2, 8)
    doc = load_json('{"a": {\n  "b": [1,\n    2]}}', source="x.json")
    assert doc.error(("a", "b", 1), "bad").line == 3


def test_load_text_guesses_json_or_yaml() -> None:
    assert load_text('{"a": 1}', source="x").data == {"a": 1}
    assert load_text("a: 1", source="x").data == {"a": 1}
    assert load_text("[1]", source="x.json").data == [1]
    with pytest.raises(DocumentError):
        load_text("a: 1", source="x", syntax="toml")
