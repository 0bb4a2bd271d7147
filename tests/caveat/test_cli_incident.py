"""An incident's loop and an SME's review through the CLI, as a user meets them.

The CLI connects as the application's login role under row-level security (never
as the owner): the first test checks who the commands' sessions are. Every step
is one command; the database is checked after, as the owner.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner, Result

from caveat import app as use
from caveat import db
from caveat.cli import app

runner = CliRunner()

SCHEMA = """\
attributes:
  - {attribute: config.connection_pool.max, type: int, content_type: configuration}
  - {attribute: metrics.pool_utilisation, type: float, max_age: 15m}
"""
ENTITIES = """\
entities:
  - {id: payment-api, kind: service, aliases: [payment_api, paymentapi-prod]}
  - {id: ledger, kind: service}
"""
QUERY = "checkout slow, payment api connection pool exhausted"
ITEM = {
    "kind": "episode",
    "subject": "paymentapi-prod",
    "attribute": "restart_restored_service_at",
    "object": "E-1",
    "required": ["config.connection_pool.max eq 20", "metrics.pool_utilisation gte 0.8"],
    "evidence": ["E-1"],
    "content_type": "configuration",
    "scope": {"axis": "case", "id": "INC-1"},
    "text": "Tail latency on payment-api: pool exhausted at max 20; a restart restored it.",
}


def run(*args: str, ok: int = 0, stdin: str | None = None) -> Result:
    res = runner.invoke(app, list(args), input=stdin)
    assert res.exit_code == ok, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res


def as_json(*args: str, ok: int = 0) -> Any:
    return json.loads(run(*args, "--json", ok=ok).output)


@pytest.fixture
def world(db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A tenant with a schema, entities, an agent, an SME and evidence E-1."""
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "entities.yaml").write_text(ENTITIES)
    run("schema", "load", str(tmp_path / "schema.yaml"))
    run("entities", "import", str(tmp_path / "entities.yaml"))
    with use.serving("acme", None) as (rt, admin):
        use.register_principal(rt, admin, "agent-ir", role="agent", capabilities=["incidents"])
        use.register_principal(rt, admin, "sme-alice", role="sme", capabilities=["incidents"])
    run("evidence", "add", "E-1", "--title", "INC-1 timeline", "--as", "agent-ir")
    return tmp_path


def _owner_rows(db_url: str, sql: str, **params: object) -> list[tuple[Any, ...]]:
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql), params).all()]
    finally:
        engine.dispose()


def _written(world: Path) -> int:
    run("case", "open", "INC-1", "--subject", "payment_api", "--as", "agent-ir")
    (world / "item.json").write_text(json.dumps(ITEM))
    [out] = as_json("write", str(world / "item.json"), "--as", "agent-ir")
    assert out["outcome"] == "accepted"
    return int(out["item_id"])


def _activate(item_id: int) -> None:
    run("promote", str(item_id), "--to", "shadow", "--as", "sme-alice")
    assert as_json("graduate", str(item_id), "--as", "sme-alice")["state"] == "active"
    verified = as_json("verify", str(item_id), "--as", "sme-alice")
    assert verified["epistemic"] == "verified" and verified["verified_by"] == "sme-alice"


def test_the_runtime_every_command_opens_logs_in_as_the_login_role(world: Path) -> None:
    """Every command opens its runtime with ``caveat.app.serving`` (the commands above
    and below run through it); that runtime's sessions are ``caveat_app``'s."""
    with use.serving("acme", None) as (rt, _), rt.transaction() as s:
        who = s.execute(sa.text("SELECT session_user, current_user")).one()
    assert tuple(who) == (db.APP_ROLE, db.APP_ROLE)


def test_an_incident_loop_from_the_command_line(world: Path, db_url: str) -> None:
    item_id = _written(world)
    shown = as_json("item", "show", str(item_id), "--as", "agent-ir")
    assert "acl" not in shown and "tenant_id" not in shown
    assert shown["subject"] == "payment-api" and shown["scope"] == "case:INC-1"
    _activate(item_id)
    run("case", "close", "INC-1", "--outcome", "confirmed", "--as", "agent-ir")

    run("case", "open", "INC-2", "--subject", "payment-api", "--as", "agent-ir")
    run(
        "observe", "payment_api", "config.connection_pool.max=20",
        "metrics.pool_utilisation=0.97", "--source", "prometheus", "--as", "agent-ir",
    )  # fmt: skip
    found = as_json(
        "recall", QUERY, "--subject", "payment-api", "--case", "INC-2", "--record",
        "--as", "agent-ir",
    )  # fmt: skip
    [top] = found["items"]
    assert top["item"]["id"] == item_id
    assert {c["value"] for c in top["conditions"]} == {"TRUE"}
    assert found["recorded"]["used"] == [item_id]
    nothing_packed = as_json(
        "recall", QUERY, "--subject", "payment-api", "--case", "INC-2", "--record",
        "--budget", "1", "--as", "agent-ir",
    )  # fmt: skip
    assert nothing_packed["packed"]["items"] == []
    assert nothing_packed["recorded"]["used"] == []  # only what was printed is recorded
    readable = run("recall", QUERY, "--subject", "payment-api", "--as", "agent-ir").output
    assert f"1. [{item_id}] Tail latency on payment-api" in readable
    confident = as_json("recall", QUERY, "--min-confidence", "1", "--as", "agent-ir")
    assert confident["items"] == []  # below the confidence asked for: left out
    pinned = as_json(
        "recall", QUERY, "--pin", str(item_id), "--anchor", "case:INC-1", "--as", "agent-ir"
    )
    assert [r["item"]["id"] for r in pinned["pinned"]] == [item_id]
    assert "payment-api · case:INC-1 · evidence E-1, verified by sme-alice" in readable
    assert "config.connection_pool.max eq 20" in readable and "-> TRUE" in readable

    cited = as_json(
        "cite", str(item_id), "--case", "INC-2", "--influence", "decisive", "--as", "agent-ir"
    )
    assert cited["influence"] == "decisive"
    guard = as_json("context", "check", str(item_id), "--case", "INC-2", "--as", "agent-ir")
    assert guard["usable"] == [item_id]
    # by recall's rule, on what is observed now: an inline observation takes precedence
    fifty = "payment-api:config.connection_pool.max=50"
    guard = as_json(
        "context", "check", str(item_id), "--case", "INC-2", "--observe", fifty,
        "--as", "agent-ir",
    )  # fmt: skip
    assert guard["usable"] == [] and guard["dropped"] == {str(item_id): "applicability"}
    told = run(
        "context", "check", str(item_id), "--case", "INC-2", "--observe", fifty,
        "--as", "agent-ir",
    ).output  # fmt: skip
    assert f"dropped {item_id}: applicability" in told
    assert "config.connection_pool.max eq 20" in told and "-> FALSE" in told
    assert "given inline" in told

    # an agent may not revoke; the SME may, and the guard then drops the item
    refused = run("revoke", str(item_id), "--reason", "x", "--as", "agent-ir", ok=1)
    assert "forbidden" in refused.output
    run("revoke", str(item_id), "--reason", "wrong pool", "--as", "sme-alice")
    guard = as_json("context", "check", str(item_id), "--case", "INC-2", "--as", "agent-ir")
    assert guard["usable"] == [] and str(item_id) in guard["dropped"]
    explained = as_json(
        "recall", QUERY, "--subject", "payment-api", "--explain", "--as", "agent-ir"
    )
    assert explained["items"] == []
    assert [w["gate"] for w in explained["withheld"]] == ["activated_version"]
    closed = as_json("case", "close", "INC-2", "--outcome", "confirmed", "--as", "agent-ir")
    assert closed["status"] == "closed"
    states = _owner_rows(
        db_url, "SELECT state FROM item_states WHERE tenant_id = 'acme' AND item_id = :i", i=item_id
    )
    assert states == [("revoked",)]


def test_an_imported_deploy_event_expires_what_depends_on_it(world: Path, db_url: str) -> None:
    """``facts import --format cloudevents`` runs the lifecycle's event handling, as
    ``caveat event`` and replay do: the deploy re-opens what depended on the config."""
    item_id = _written(world)
    _activate(item_id)
    deploy = {
        "specversion": "1.0",
        "id": "deploy-42",
        "source": "ci/payment-api",
        "type": "deploy",
        "subject": "paymentapi-prod",
        "data": {"changes": {"config.connection_pool.max": 100}},
    }
    res = runner.invoke(
        app,
        ["facts", "import", "-", "--format", "cloudevents", "--as", "agent-ir", "--json"],
        input=json.dumps(deploy),
    )
    assert res.exit_code == 0, res.output
    [event] = json.loads(res.output)["events"]
    assert event["needs_reverification"] == [item_id]
    states = _owner_rows(
        db_url, "SELECT state FROM item_states WHERE tenant_id = 'acme' AND item_id = :i", i=item_id
    )
    assert states == [("needs_reverification",)]
    audited = _owner_rows(
        db_url,
        "SELECT count(*) FROM audit_log WHERE tenant_id = 'acme' AND item_id = :i "
        "AND action = 'transition' AND code = 'needs_reverification'",
        i=item_id,
    )
    assert audited == [(1,)]


def test_caveat_event_runs_the_same_handling(world: Path) -> None:
    item_id = _written(world)
    _activate(item_id)
    (world / "deploy.json").write_text(
        json.dumps(
            {
                "specversion": "1.0",
                "id": "deploy-43",
                "source": "ci",
                "type": "config_change",
                "subject": "payment-api",
                "data": {"changes": {"config.connection_pool.max": 50}},
            }
        )
    )
    readable = run("event", str(world / "deploy.json"), "--as", "agent-ir").output
    assert f"needs_reverification: {item_id}" in readable
    again = run("event", str(world / "deploy.json"), "--as", "agent-ir", ok=1)
    assert "conflict" in again.output  # the same event is recorded once


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        (["observe", "payment-api", "config.connection_pool.max=lots"], 2, "fact_type_mismatch"),
        (["observe", "payment-api", "no-equals-sign"], 2, "expected ATTRIBUTE=VALUE"),
        (["observe", "nobody", "config.connection_pool.max=20"], 1, "subject_unresolved"),
        (["observe", "pay\x00ment-api", "config.connection_pool.max=20"], 1, "did you mean"),
        (["recall", "q", "--as-of", "yesterday"], 2, "--as-of: not an ISO 8601 instant"),
        (["recall", "q", "--record"], 2, "--record needs --case"),
        (["recall", "q", "--observe", "payment-api=1"], 2, "SUBJECT:ATTRIBUTE=VALUE"),
        (["context", "check", "1", "--observe", "nonsense"], 2, "expected SUBJECT:ATTRIBUTE=VALUE"),
        (["recall", "q", "--case", "INC-404"], 1, "not_found: no case 'INC-404'"),
        (["recall", "q", "--limit", "0"], 2, "invalid_input: --limit: Input should be greater"),
        (["recall", "q", "--min-confidence", "2"], 2, "invalid_input: --min-confidence: "),
        (["recall", "q", "--anchor", "nocolon"], 2, '--anchor: expected "axis:id"'),
        (["context", "check", "1", "--case", "INC-404"], 1, "not_found: no case 'INC-404'"),
        (["case", "close", "INC-404", "--outcome", "confirmed"], 1, "not_found"),
        (["verify", "999999", "--as", "sme-alice"], 1, "not_found"),
        (["cite", "1", "--case", "INC-1", "--influence", "huge"], 2, "huge"),
        (["diff", "--from", "2026-03-01", "--to", "nope"], 2, "--to: not an ISO 8601 instant"),
        (["evidence", "add", "E-\x002"], 2, "NUL"),
        (["case", "open", "INC-9", "--as", "nobody"], 1, "not_found"),
    ],
)
def test_bad_input_is_one_line_and_an_exit_code(
    world: Path, args: list[str], status: int, says: str
) -> None:
    res = run(*args, ok=status)
    assert says in res.output
    assert "Traceback" not in res.output


def test_a_failed_context_check_from_the_cli_is_recorded(world: Path, db_url: str) -> None:
    """``caveat context check`` records the check as HTTP, MCP and replay do (model §4.3):
    an item a deploy left to verify on its next use, which applies only on what was
    observed before the deploy, fails its check and moves to needs_reverification."""
    item_id = _written(world)
    _activate(item_id)
    run(
        "observe", "payment_api", "config.connection_pool.max=20",
        "metrics.pool_utilisation=0.97", "--as", "agent-ir",
    )  # fmt: skip
    (world / "deploy.json").write_text(
        json.dumps(
            {
                "specversion": "1.0",
                "id": "deploy-44",
                "source": "ci",
                "type": "deploy",
                "subject": "payment-api",
                "data": {},
            }
        )
    )
    [event] = as_json("event", str(world / "deploy.json"), "--as", "agent-ir")["events"]
    assert event["verify_on_next_use"] == [item_id]
    guard = as_json("context", "check", str(item_id), "--case", "INC-1", "--as", "agent-ir")
    assert guard["dropped"] == {str(item_id): "needs_reverification"}
    assert guard["checked"] == {str(item_id): False}
    states = _owner_rows(
        db_url, "SELECT state FROM item_states WHERE tenant_id = 'acme' AND item_id = :i", i=item_id
    )
    assert states == [("needs_reverification",)]


def test_recall_with_knowledge_prints_runbook_passages_in_the_merged_order(
    world: Path,
) -> None:
    """``caveat docs import`` (an SME), then ``caveat recall --sources memory,knowledge``:
    the precedent and the runbook's passage in one ranked list, the passage tagged with
    its ref; memory alone (the default) prints no passage."""
    item_id = _written(world)
    _activate(item_id)
    book = world / "runbooks"
    book.mkdir()
    (book / "pool.md").write_text(
        "# Payment API\n\n## Pool exhausted\n\nRestart the pods one at a time.\n"
    )
    run("docs", "import", str(book), "--as", "sme-alice")
    run(
        "observe", "payment_api", "config.connection_pool.max=20",
        "metrics.pool_utilisation=0.97", "--as", "agent-ir",
    )  # fmt: skip
    both = run("recall", QUERY, "--sources", "memory,knowledge", "--explain", "--as", "agent-ir")
    lines = both.output.splitlines()
    ref = "doc:pool.md#pool-exhausted"
    ranked = [line.split(" ", 1) for line in lines if line[:3] in ("1. ", "2. ")]
    assert [n for n, _ in ranked] == ["1.", "2."], both.output
    assert {body for _, body in ranked} == {
        f"[{item_id}] {ITEM['text']}",
        f"[knowledge {ref}] Payment API > Pool exhausted",
    }, both.output
    assert "     Restart the pods one at a time." in lines
    assert "knowledge: 1 passage(s) returned of 1 considered" in lines
    data = as_json("recall", QUERY, "--sources", "knowledge", "--as", "agent-ir")
    assert data["items"] == [] and [p["ref"] for p in data["knowledge"]] == [ref]
    alone = run("recall", QUERY, "--as", "agent-ir").output
    assert "[knowledge" not in alone and f"1. [{item_id}]" in alone
