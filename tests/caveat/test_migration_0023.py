"""Migration 0023 re-chains the audit log of every tenant over detail digests: it
verifies the old chain first, refuses a broken one, and records both heads."""

from __future__ import annotations

import importlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

import claims
from caveat import db

m23 = importlib.import_module("migrations.versions.0023_erasable_audit_detail")

T = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

#: Details as the code before 0023 wrote them: nested, numbers that jsonb reads back
#: differently, unicode and escapes.
DETAILS: list[dict[str, Any]] = [
    {"reason": "written", "from": None, "to": "case", "cause": {}},
    {"request": {"text": 'tab\there "quoted" ünïcode', "object": 1.5}, "big": 10**16},
    {"values": {"a": [1, 2]}, "message": "refused"},
    {},
]


class _R:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def _old_chain(conn: sa.Connection, tenant: str, n: int) -> str:
    """``n`` rows hash-chained as before 0023 (the hash over the detail itself)."""
    conn.execute(
        sa.text("INSERT INTO tenants (id, created_at) VALUES (:t, now()) ON CONFLICT DO NOTHING"),
        {"t": tenant},
    )
    prev = m23.GENESIS
    for seq in range(1, n + 1):
        detail = DETAILS[seq % len(DETAILS)]
        row = _R(
            seq=seq,
            at=T + timedelta(seconds=seq),
            actor=f"agent-{seq % 2}",
            action="transition" if seq % 2 else "reject",
            item_id=None if seq % 3 == 0 else seq,
            code=None if seq % 4 == 0 else "case",
        )
        stored = conn.execute(
            sa.text("SELECT CAST(:d AS jsonb)"), {"d": m23._canonical(detail)}
        ).scalar()
        row.detail = stored
        digest = m23._old(prev, tenant, row)
        conn.execute(
            sa.text(
                "INSERT INTO audit_log (tenant_id, seq, at, actor, action, item_id, code, "
                "detail, prev_hash, hash) VALUES (:t, :s, :at, :a, :act, :i, :c, "
                "CAST(:d AS jsonb), :p, :h)"
            ),
            {
                "t": tenant,
                "s": seq,
                "at": row.at,
                "a": row.actor,
                "act": row.action,
                "i": row.item_id,
                "c": row.code,
                "d": m23._canonical(detail),
                "p": prev,
                "h": digest,
            },
        )
        prev = digest
    conn.execute(
        sa.text("UPDATE tenants SET audit_seq = :s, audit_hash = :h WHERE id = :t"),
        {"s": n, "h": prev if n else None, "t": tenant},
    )
    return prev


def test_0023_rechains_every_tenant_and_records_both_heads(pg_server_url: str) -> None:
    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        command.upgrade(db.alembic_config(url), "0018")
        engine = db.make_engine(url)
        try:
            with engine.begin() as c:
                old_heads = {"acme": _old_chain(c, "acme", 9), "globex": _old_chain(c, "globex", 4)}
                _old_chain(c, "empty", 0)
            db.migrate(url)
            sessions = db.tenant_sessions(engine, "acme")
            reports = {}
            for tenant in ("acme", "globex", "empty"):
                with db.tenant_sessions(engine, tenant).begin() as s:
                    reports[tenant] = claims.verify_chain(session=s, tenant=tenant)
            with sessions.begin() as s:
                [mark] = claims.audit_entries(session=s, tenant="acme", action="rechain")
                [before] = claims.audit_entries(session=s, tenant="acme", limit=2)[:1]
            with engine.connect() as c:
                counts = dict(
                    c.execute(
                        sa.text(
                            "SELECT tenant_id, count(*) FROM audit_log "
                            "WHERE action = 'rechain' GROUP BY 1"
                        )
                    ).all()
                )
                kept = c.execute(
                    sa.text("SELECT detail FROM audit_log WHERE tenant_id = 'acme' AND seq = 2")
                ).scalar()
        finally:
            engine.dispose()
    assert all(r.ok for r in reports.values()), reports
    assert reports["acme"].checked == 10 and reports["globex"].checked == 5
    assert reports["empty"].checked == 0
    assert counts == {"acme": 1, "globex": 1}  # a tenant with no rows gets none
    assert mark.seq == 10 and mark.actor == "migration:0023"
    assert mark.detail["old_head"] == old_heads["acme"]
    assert mark.detail["new_head"] == before.hash != old_heads["acme"]
    assert mark.detail["rows"] == 9
    assert kept == DETAILS[2]  # details are kept as they were


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE audit_log SET actor = 'mallory' WHERE tenant_id = 'globex' AND seq = 2",
        "DELETE FROM audit_log WHERE tenant_id = 'globex' AND seq = 3",
    ],
)
def test_0023_refuses_a_broken_chain_and_changes_nothing(pg_server_url: str, tamper: str) -> None:
    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        command.upgrade(db.alembic_config(url), "0018")
        engine = db.make_engine(url)
        try:
            with engine.begin() as c:
                _old_chain(c, "acme", 3)
                _old_chain(c, "globex", 4)
                c.execute(sa.text("ALTER TABLE audit_log DISABLE TRIGGER USER"))
                c.execute(sa.text(tamper))
                c.execute(sa.text("ALTER TABLE audit_log ENABLE TRIGGER USER"))
            with pytest.raises(Exception, match=r"tenant 'globex' is broken at row") as err:
                db.migrate(url)
            assert type(err.value).__name__ == "ChainBroken"  # alembic loads its own copy
            with engine.connect() as c:
                version = c.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
                columns = {col["name"] for col in sa.inspect(c).get_columns("audit_log")}
        finally:
            engine.dispose()
    assert version == "0018" and "detail_digest" not in columns


def test_0023_down_and_up_again_keeps_a_verifying_chain(pg_server_url: str) -> None:
    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        command.upgrade(db.alembic_config(url), "0018")
        engine = db.make_engine(url)
        try:
            with engine.begin() as c:
                _old_chain(c, "acme", 5)
            db.migrate(url)
            command.downgrade(db.alembic_config(url), "0018")
            db.migrate(url)
            with db.tenant_sessions(engine, "acme").begin() as s:
                report = claims.verify_chain(session=s, tenant="acme")
        finally:
            engine.dispose()
    assert report.ok and report.checked == 7  # 5 rows and a rechain row per upgrade


def test_0023_rechains_a_store_written_through_the_application(pg_server_url: str) -> None:
    """A store written through the whole write path (a batch past the bulk threshold,
    a refusal, a redaction), taken down to 0018's chain, holds there by the old rule and
    verifies again after 0023. (The same ran by hand against the code before 0023
    writing at 0018: tests cannot import that code, so this takes the way down.)"""
    from caveat import app as use
    from predicates.errors import GateRejection
    from tests.caveat._doors import PRECEDENT, precedent, world
    from tests.conftest import ADMIN

    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        db.migrate(url)
        app = db.make_app_engine(url)
        owner = db.make_engine(url)
        try:
            rt = use.Runtime.over(app, "acme")
            world(rt)
            item = precedent(rt)
            use.write_batch(
                rt,
                ADMIN,
                [
                    claims.ItemWrite.model_validate(
                        {**PRECEDENT, "attribute": f"a{i}", "text": f'ünï "{i}"\t'}
                    )
                    for i in range(100)
                ],
            )
            with pytest.raises(GateRejection):
                use.write(rt, ADMIN, claims.ItemWrite.model_validate({**PRECEDENT, "evidence": []}))
            use.redact(rt, ADMIN, item, reason="pii")
            before = use.audit_verify(rt, ADMIN)
            command.downgrade(db.alembic_config(url), "0018")
            with owner.connect() as c:
                rows = c.execute(m23._ROWS, {"t": "acme"}).all()
            prev = m23.GENESIS
            for row in rows:  # the chain before 0023: the hash over the detail itself
                assert row.prev_hash == prev and m23._old(prev, "acme", row) == row.hash
                prev = row.hash
            db.migrate(url)
            after = use.audit_verify(rt, ADMIN)
        finally:
            app.dispose()
            owner.dispose()
    assert before.ok and after.ok
    assert len(rows) == before.checked > 100  # (the first upgrade found no tenant)
    assert after.checked == before.checked + 1  # and the rechain row
