"""The audit log: tamper-evident against the owner, append-only for the application role."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import sessionmaker
from typer.testing import CliRunner

import claims
from caveat import db
from caveat.cli import app
from predicates.errors import GateRejection
from tests.claims._support import chain_ok, rows, write
from tests.conftest import T0, Store

runner = CliRunner()


def _history(store: Store) -> None:
    """Seven or more audit rows: writes, a refusal, a supersession, a duplicate."""
    write(store, attribute="lag_returned_within_s", object=900)
    write(store, attribute="lag_returned_within_s", object=600, now=T0 + timedelta(minutes=5))
    with pytest.raises(GateRejection):
        write(store, subject="nobody", now=T0 + timedelta(minutes=10))
    write(store, now=T0 + timedelta(minutes=15))
    write(store, now=T0 + timedelta(minutes=20))


def _as_owner(store: Store, *statements: str) -> None:
    with store.engine.begin() as c:
        c.execute(sa.text("ALTER TABLE audit_log DISABLE TRIGGER USER"))
        for stmt in statements:
            c.execute(sa.text(stmt))
        c.execute(sa.text("ALTER TABLE audit_log ENABLE TRIGGER USER"))


OWNER_TAMPERING = {
    "update a field": ["UPDATE audit_log SET actor = 'mallory' WHERE seq = 3"],
    "rewrite a detail": [
        "UPDATE audit_log SET detail = jsonb_set(detail, '{message}', '\"fine\"') "
        "WHERE action = 'reject'"
    ],
    "delete a middle row": ["DELETE FROM audit_log WHERE seq = 4"],
    "delete the last rows": ["DELETE FROM audit_log WHERE seq >= 9"],
    "reorder two rows": [
        "UPDATE audit_log SET seq = -1 WHERE seq = 5",
        "UPDATE audit_log SET seq = 5 WHERE seq = 6",
        "UPDATE audit_log SET seq = 6 WHERE seq = -1",
    ],
    "truncate": ["TRUNCATE audit_log"],
    "re-hash a forged row": [
        "UPDATE audit_log SET actor = 'mallory', "
        "hash = encode(sha256(convert_to(hash, 'UTF8')), 'hex') WHERE seq = 2"
    ],
}


@pytest.mark.parametrize("statements", OWNER_TAMPERING.values(), ids=OWNER_TAMPERING.keys())
def test_owner_tampering_is_detected(store: Store, statements: list[str]) -> None:
    _history(store)
    assert chain_ok(store)
    _as_owner(store, *statements)
    with store.sessions.begin() as s:
        report = claims.verify_chain(session=s, tenant=store.tenant)
    assert not report.ok and report.reason and report.broken_at is not None


def test_verify_reports_the_head_to_anchor_elsewhere(store: Store) -> None:
    _history(store)
    with store.sessions.begin() as s:
        report = claims.verify_chain(session=s, tenant=store.tenant)
    [last] = rows(
        store, "SELECT hash FROM audit_log WHERE tenant_id = :t ORDER BY seq DESC LIMIT 1"
    )
    assert report.ok and report.head == last.hash


@pytest.fixture
def app_sessions(store: Store) -> Iterator[sessionmaker[Any]]:
    """Sessions that run as the application role ``caveat_app``, for the store's tenant."""
    engine = db.make_app_engine(store.engine.url.render_as_string(hide_password=False))
    yield db.tenant_sessions(engine, store.tenant)
    engine.dispose()


def test_the_application_role_writes_through_the_whole_write_path(
    store: Store, app_sessions: sessionmaker[Any]
) -> None:
    with app_sessions.begin() as s:
        assert s.execute(sa.text("SELECT current_user")).scalar() == "caveat_app"
    result = claims.write_batch(
        sessions=app_sessions,
        tenant=store.tenant,
        requests=[
            claims.ItemWrite.model_validate(
                {
                    "kind": "fact",
                    "subject": "payment-api",
                    "attribute": "lag_returned_within_s",
                    "object": obj,
                    "evidence": ["E-1"],
                    "scope": {"axis": "case", "id": "INC-1"},
                }
            )
            for obj in (900, 600, "fifteen")
        ],
        actor=store.agent,
        now=T0,
    )
    assert [o.outcome for o in result.outcomes] == ["accepted", "accepted", "rejected"]
    with app_sessions.begin() as s:
        assert claims.verify_chain(session=s, tenant=store.tenant).ok


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_log SET actor = 'mallory'",
        "DELETE FROM audit_log",
        "TRUNCATE audit_log",
        "ALTER TABLE audit_log DISABLE TRIGGER USER",
        "DROP TABLE audit_log",
    ],
)
def test_the_application_role_cannot_tamper(
    store: Store, app_sessions: sessionmaker[Any], statement: str
) -> None:
    _history(store)
    # even with the append-only trigger off, privileges alone refuse the application role
    with store.engine.begin() as c:
        c.execute(sa.text("ALTER TABLE audit_log DISABLE TRIGGER USER"))
    try:
        with pytest.raises(sa.exc.ProgrammingError) as err, app_sessions.begin() as s:
            s.execute(sa.text(statement))
        assert getattr(err.value.orig, "sqlstate", None) == "42501"  # insufficient_privilege
        assert "append-only" not in str(err.value)
    finally:
        with store.engine.begin() as c:
            c.execute(sa.text("ALTER TABLE audit_log ENABLE TRIGGER USER"))
    assert chain_ok(store)


def test_the_owner_is_refused_by_the_trigger(store: Store) -> None:
    _history(store)
    for stmt in ("UPDATE audit_log SET actor = 'x'", "DELETE FROM audit_log", "TRUNCATE audit_log"):
        with pytest.raises(sa.exc.DBAPIError, match="append-only"), store.engine.begin() as c:
            c.execute(sa.text(stmt))
    assert chain_ok(store)


def test_a_rejection_is_recorded_even_though_its_write_rolled_back(store: Store) -> None:
    with pytest.raises(GateRejection):
        write(store, evidence=[])
    [r] = rows(store, "SELECT action, code, detail FROM audit_log WHERE action = 'reject'")
    assert r.code == "evidence_missing" and r.detail["request"]["evidence"] == []
    assert rows(store, "SELECT id FROM items") == []


# --- the CLI ---------------------------------------------------------------------


@pytest.fixture
def cli_env(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("DATABASE_URL", store.engine.url.render_as_string(hide_password=False))
    return ["--tenant", store.tenant]


def _show(tenant_args: list[str], *args: str) -> list[dict[str, Any]]:
    res = runner.invoke(app, ["audit", "show", *tenant_args, *args, "--json"])
    assert res.exit_code == 0, res.output
    parsed: list[dict[str, Any]] = json.loads(res.output)
    return parsed


def test_audit_show_filters(store: Store, cli_env: list[str]) -> None:
    _history(store)
    everything = _show(cli_env)
    assert [r["seq"] for r in everything] == list(range(1, len(everything) + 1))
    [first_write, *_] = [r for r in everything if r["action"] == "write"]
    item = str(first_write["item_id"])
    by_item = _show(cli_env, "--item", item)
    assert {r["item_id"] for r in by_item} == {first_write["item_id"]}
    # the supersession and, as it changes the state, its transition (the history)
    assert [r["action"] for r in by_item] == ["write", "transition", "supersede", "transition"]
    assert [r["code"] for r in _show(cli_env, "--code", "subject_unresolved")] == [
        "subject_unresolved"
    ]
    assert {r["actor"] for r in _show(cli_env, "--actor", "sme-alice")} == {"sme-alice"}
    assert _show(cli_env, "--actor", "agent-ir", "--action", "duplicate")[0]["code"] == (
        "duplicate_no_change"
    )
    window = _show(
        cli_env,
        "--since",
        (T0 + timedelta(minutes=5)).isoformat(),
        "--until",
        "2026-03-01T09:15:00Z",
    )
    assert {r["at"][:16] for r in window} == {"2026-03-01T09:05", "2026-03-01T09:10"}
    assert [r["seq"] for r in _show(cli_env, "--limit", "2")] == [
        everything[-2]["seq"],
        everything[-1]["seq"],
    ]
    text = runner.invoke(app, ["audit", "show", *cli_env, "--code", "subject_unresolved"])
    assert text.exit_code == 0 and "reject" in text.output and "subject_unresolved" in text.output


def test_audit_show_refuses_a_bad_instant(cli_env: list[str]) -> None:
    res = runner.invoke(app, ["audit", "show", *cli_env, "--since", "last tuesday"])
    assert res.exit_code == 2 and "ISO 8601" in res.output


def test_audit_verify_cli_names_the_broken_row(store: Store, cli_env: list[str]) -> None:
    _history(store)
    ok = runner.invoke(app, ["audit", "verify", *cli_env, "--json"])
    assert ok.exit_code == 0 and json.loads(ok.output)["ok"] is True
    _as_owner(store, "DELETE FROM audit_log WHERE seq = 4")
    broken = runner.invoke(app, ["audit", "verify", *cli_env])
    assert broken.exit_code == 1 and "BROKEN at row 5" in broken.output


@pytest.mark.parametrize("n", [3, 200])  # one pipelined INSERT; a binary COPY
def test_appended_rows_hash_as_entry_hash_defines(store: Store, n: int) -> None:
    shared = {"reason": 'tab\there, newline\nthere, back\\slash, quote " and ünïcode'}
    pending = [
        claims.PendingAudit(
            actor=f"agent\t{i % 3}",
            action="transition" if i % 2 else "note\\x",
            item_id=None if i % 5 == 0 else i,
            code=None if i % 4 == 0 else f"code\n{i % 2}",
            detail=shared if i % 3 else {"i": i, "big": 10**16, "nested": {"k": [1.5, "\t"]}},
        )
        for i in range(n)
    ]
    with store.sessions.begin() as s:
        seqs = claims.append_many(session=s, tenant=store.tenant, at=T0, rows=pending)
    assert seqs == list(range(seqs[0], seqs[0] + n))
    assert chain_ok(store)
    stored = rows(
        store,
        "SELECT seq, actor, action, item_id, code, detail FROM audit_log "
        "WHERE tenant_id = :t AND seq >= :first ORDER BY seq",
        first=seqs[0],
    )
    assert [(r.actor, r.action, r.item_id, r.code) for r in stored] == [
        (p.actor, p.action, p.item_id, p.code) for p in pending
    ]
    assert [r.detail for r in stored] == [p.detail for p in pending]


def test_the_application_role_stores_large_batches_under_row_level_security(
    store: Store, app_sessions: sessionmaker[Any]
) -> None:
    """PostgreSQL refuses COPY FROM into a table whose row-level security applies to
    the user; the application role's bulk paths (items, states, audit rows) still
    store everything, through a staging table."""
    result = claims.write_batch(
        sessions=app_sessions,
        tenant=store.tenant,
        requests=[
            claims.ItemWrite.model_validate(
                {
                    "kind": "fact",
                    "subject": "payment-api",
                    "attribute": f"limit_{i}",
                    "object": i,
                    "evidence": ["E-1"],
                    "scope": {"axis": "case", "id": "INC-1"},
                }
            )
            for i in range(40)
        ],
        actor=store.agent,
        now=T0,
    )
    assert [o.outcome for o in result.outcomes] == ["accepted"] * 40
    with app_sessions.begin() as s:
        claims.append_many(
            session=s,
            tenant=store.tenant,
            at=T0,
            rows=[claims.PendingAudit("agent", "note", i, "x", {"i": i}) for i in range(100)],
        )
    with app_sessions.begin() as s:
        assert claims.verify_chain(session=s, tenant=store.tenant).ok
        counts = s.execute(
            sa.text(
                "SELECT (SELECT count(*) FROM items), (SELECT count(*) FROM item_states), "
                "(SELECT count(*) FROM audit_log WHERE action = 'note')"
            )
        ).one()
    assert tuple(counts) == (40, 40, 100)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([-0.0, 0.0, -0, 1e16, -1e16, 1e300, 5e-324])
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(detail=st.dictionaries(st.text(max_size=6), _json_values, max_size=5))
def test_any_detail_appended_verifies(store: Store, detail: dict[str, Any]) -> None:
    """The law of the chain over digests: whatever detail a use case audits (a cite's
    expected ``-0.0``, a policy's ``1e16``), the digest taken on write is the digest of
    what jsonb reads back, so the chain verifies (each row alone: a broken row would
    break the chain for every later example)."""
    with store.sessions.begin() as s:
        seq = claims.append(
            session=s, tenant=store.tenant, actor="a", action="note", at=T0, detail=detail
        )
    [row] = rows(
        store,
        "SELECT detail, detail_digest FROM audit_log WHERE tenant_id = :t AND seq = :seq",
        seq=seq,
    )
    assert claims.detail_digest(row.detail) == row.detail_digest  # what verify checks
