"""The factgen commands through the CLI, checked against the database afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from caveat import db
from caveat.cli import app

runner = CliRunner()

SCHEMA = """\
attributes:
  - {attribute: config.connection_pool.max, type: int, content_type: configuration}
  - {attribute: metrics.pool_utilisation, type: float, max_age: 15m}
  - {attribute: env.postgres.version, type: version}
"""

ENTITIES = """\
entities:
  - {id: payment-api, kind: service, aliases: [payment_api], depends_on: [payments-db]}
  - {id: payments-db, kind: database}
"""


@pytest.fixture
def cli(db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """DATABASE_URL on a fresh migrated database; returns a directory for input files."""
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    return tmp_path


def _rows(db_url: str, sql: str) -> list[tuple[object, ...]]:
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql)).all()]
    finally:
        engine.dispose()


def _setup(cli: Path) -> None:
    (cli / "schema.yaml").write_text(SCHEMA)
    (cli / "entities.yaml").write_text(ENTITIES)
    res = runner.invoke(app, ["schema", "load", str(cli / "schema.yaml")])
    assert res.exit_code == 0, res.output
    assert "declared 3 attributes in tenant acme" in res.output
    assert "max_age 15m" in res.output
    res = runner.invoke(app, ["entities", "import", str(cli / "entities.yaml")])
    assert res.exit_code == 0, res.output
    assert "imported 2 entities and 1 edges" in res.output


def test_schema_entities_facts_and_a_check(cli: Path, db_url: str) -> None:
    _setup(cli)
    assert _rows(db_url, "SELECT id FROM tenants") == [("acme",)]
    assert _rows(db_url, "SELECT src, relation, dst FROM entity_edges") == [
        ("payment-api", "depends_on", "payments-db")
    ]
    (cli / "app.json").write_text('{"connection_pool": {"max": 20, "idle": 3}}')
    res = runner.invoke(
        app,
        [
            "facts",
            "import",
            str(cli / "app.json"),
            "--format",
            "config",
            "--subject",
            "payment_api",
        ],
    )
    assert res.exit_code == 0, res.output
    assert (
        "stored 1 facts" in res.output and "config.connection_pool.idle: undeclared" in res.output
    )
    res = runner.invoke(
        app,
        ["predicate", "check", "config.connection_pool.max  gte 200", "--subject", "payment_api"],
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0] == "parse    config.connection_pool.max gte 200"
    assert lines[1].startswith("type     config.connection_pool.max is int")
    assert "value    FALSE" in lines
    assert lines[-1].startswith("fact     20 observed ") and "ago), source config:" in lines[-1]
    res = runner.invoke(
        app,
        [
            "predicate",
            "check",
            "metrics.pool_utilisation gt 0.8",
            "--subject",
            "payment-api",
            "--json",
        ],
    )
    out = json.loads(res.output)
    assert res.exit_code == 0
    assert out["value"] == "UNKNOWN" and out["fact"] is None
    assert "no observation" in out["note"]


def test_prometheus_and_cloudevents_through_the_cli(cli: Path, db_url: str) -> None:
    _setup(cli)
    (cli / "m.txt").write_text('pool_util{service="payment_api"} 0.93\nother 1\n')
    (cli / "map.yaml").write_text(
        "- {metric: pool_util, subject_label: service, attribute: metrics.pool_utilisation}\n"
    )
    res = runner.invoke(
        app,
        [
            "facts",
            "import",
            str(cli / "m.txt"),
            "--format",
            "prometheus",
            "--mapping",
            str(cli / "map.yaml"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert (out["facts"][0]["value"], out["facts"][0]["literal"]) == (0.93, "0.93")
    assert out["skipped"] == [{"key": "other", "reason": "unmapped", "line": 2}]
    event = {
        "specversion": "1.0",
        "id": "1",
        "source": "ci",
        "type": "com.example.version-change",
        "subject": "payments-db",
        "data": {"changes": {"env.postgres.version": "v15.10"}},
    }
    res = runner.invoke(
        app, ["facts", "import", "-", "--format", "cloudevents"], input=json.dumps(event)
    )
    assert res.exit_code == 0, res.output
    assert "recorded 1 events" in res.output
    assert _rows(db_url, "SELECT type, subjects, external_id FROM events") == [
        ("version_change", ["payments-db"], "ci 1")
    ]
    res = runner.invoke(app, ["predicate", "check", "@payments-db:env.postgres.version gt v15.9"])
    assert res.exit_code == 0, res.output
    assert "value    TRUE" in res.output and "source event:version_change" in res.output
    again = runner.invoke(
        app, ["facts", "import", "-", "--format", "cloudevents"], input=json.dumps(event)
    )
    assert again.exit_code == 1 and "conflict" in again.output


REFUSALS: list[tuple[list[str], int, str]] = [
    (
        ["predicate", "check", "config.connection_pool.max gte", "--subject", "payment-api"],
        2,
        "condition_unparsable",
    ),
    (
        ["predicate", "check", "config.conection_pool.max gte 1", "--subject", "payment-api"],
        2,
        "did you mean config.connection_pool.max",
    ),
    (
        [
            "predicate",
            "check",
            'config.connection_pool.max matches "a"',
            "--subject",
            "payment-api",
        ],
        2,
        "condition_type_mismatch",
    ),
    (["predicate", "check", "config.connection_pool.max gte 1"], 2, "--subject"),
    (
        ["predicate", "check", "config.connection_pool.max gte 1", "--subject", "paymnt-api"],
        1,
        "subject_unresolved",
    ),
    (
        ["facts", "import", "BAD", "--format", "config", "--subject", "payment-api"],
        2,
        "fact_type_mismatch",
    ),
    (["facts", "import", "BAD", "--format", "config"], 2, "needs --subject"),
    (["facts", "import", "BAD", "--format", "prometheus"], 2, "needs --mapping"),
    (
        ["facts", "import", "nope.yaml", "--format", "config", "--subject", "x"],
        2,
        "no such file",
    ),
    (["facts", "import", "BAD", "--format", "yaml"], 2, ""),
    (["schema", "load", "BADSCHEMA"], 2, ":2:"),
    (["predicate", "check", "x eq 1", "--subject", "a", "--tenant", "nobody"], 1, "not_found"),
]


def test_refusals_are_one_line_with_the_right_status(cli: Path, db_url: str) -> None:
    _setup(cli)
    (cli / "bad.yaml").write_text("connection_pool:\n  max: twenty\n")
    (cli / "badschema.yaml").write_text("- {attribute: a, type: int}\n- {attribute: b}\n")
    files = {"BAD": str(cli / "bad.yaml"), "BADSCHEMA": str(cli / "badschema.yaml")}
    for args, status, needle in REFUSALS:
        res = runner.invoke(app, [files.get(a, a) for a in args])
        assert res.exit_code == status, (args, res.output)
        assert needle in res.output, (args, res.output)
        assert "Traceback" not in res.output
        if res.output.startswith("caveat:"):  # ours; usage errors are typer's own box
            assert len(res.output.strip().splitlines()) <= 3, res.output  # one line (+ a caret)
    assert _rows(db_url, "SELECT count(*) FROM facts") == [(0,)]


def test_json_errors_and_a_schema_load_that_fails_creates_no_tenant(cli: Path, db_url: str) -> None:
    (cli / "s.yaml").write_text("- {attribute: a, type: integer}\n")
    res = runner.invoke(app, ["schema", "load", str(cli / "s.yaml"), "--json"])
    assert res.exit_code == 2
    err = json.loads(res.output)["error"]
    assert err["code"] == "document_invalid" and err["line"] == 1
    (cli / "s.yaml").write_text("- {attribute: a, type: int}\n")
    res = runner.invoke(app, ["schema", "load", str(cli / "s.yaml"), "--as", "mallory"])
    assert res.exit_code == 1 and "not_found" in res.output
    assert _rows(db_url, "SELECT count(*) FROM tenants") == [(0,)]
