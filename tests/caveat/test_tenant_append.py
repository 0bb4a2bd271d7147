"""The application role's bulk append to the audit log (issue 14, figure 7; migration 0014).

``caveat_append_audit`` is a SECURITY DEFINER function: it runs as the owner, so
these tests check, as ``caveat_app``, that it confines what it writes as the
policies would: the transaction's tenant only, nothing without one, only new
positions of ``audit_log`` (no other table, no row rewritten, no temporary table
standing in), and that a revocation as the application role goes through it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from psycopg.types.json import Jsonb
from sqlalchemy.orm import Session, sessionmaker

import claims
import factgen
import lifecycle
from caveat import db
from claims import _audit
from tests.conftest import ADMIN, T0, Store
from tests.lifecycle.helpers import Life

OWN, OTHER = "acme", "globex"
APPEND = (
    "SELECT caveat_append_audit(CAST(%s AS bigint), CAST(%s AS text), CAST(%s AS timestamptz), "
    "CAST(%s AS text[]), CAST(%s AS text[]), CAST(%s AS text[]), CAST(%s AS jsonb[]), "
    "CAST(%s AS text[]), CAST(%s AS int[]), CAST(%s AS bigint[]), CAST(%s AS text[]))"
)
HASH = "f" * 64


@pytest.fixture
def two_tenants(store: Store) -> Store:
    """``acme`` (the store) and ``globex``, each with a chain of its own."""
    with store.sessions.begin() as s:
        factgen.ensure_tenant(actor=ADMIN, session=s, tenant=OTHER, now=T0)
        for tenant in (OWN, OTHER):
            claims.append_many(
                session=s,
                tenant=tenant,
                at=T0,
                rows=[claims.PendingAudit("setup", "note", None, None, {"n": i}) for i in range(3)],
            )
    return store


@pytest.fixture
def app(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A driver connection logged in as ``caveat_app``; each ``transaction()`` a real one."""
    url = sa.make_url(db.app_url(db_url)).render_as_string(hide_password=False)
    conninfo = url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        assert conn.execute("SELECT session_user").fetchone() == ("caveat_app",)
        yield conn


def _counts(engine: sa.Engine) -> dict[str, dict[str, int]]:
    """Rows per tenant of every tenant table, as the owner."""
    out: dict[str, dict[str, int]] = {}
    with engine.connect() as c:
        tables = c.execute(
            sa.text(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'tenant_id' "
                "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') "
                "AND NOT c.relispartition ORDER BY 1"
            )
        ).scalars()
        for t in list(tables):
            rows = c.execute(sa.text(f"SELECT tenant_id, count(*) FROM {t} GROUP BY 1")).all()
            out[t] = {str(k): int(n) for k, n in rows}
    return out


def _head(engine: sa.Engine, tenant: str) -> tuple[int, str]:
    with engine.connect() as c:
        seq, digest = c.execute(
            sa.text("SELECT audit_seq, audit_hash FROM tenants WHERE id = :t"), {"t": tenant}
        ).one()
    return int(seq), str(digest)


def _run(seq: int, prev: str, n: int, *, kind: int = 1) -> tuple[Any, ...]:
    """The function's arguments for ``n`` rows of one kind, from ``seq`` on."""
    return (
        seq,
        prev,
        T0,
        ["intruder"],
        ["note"],
        [None],
        [Jsonb({"forged": True})],
        [HASH],
        "{" + ",".join([str(kind)] * n) + "}",
        "{" + ",".join(["NULL"] * n) + "}",
        "{" + ",".join([HASH] * n) + "}",
    )


def _sqlstate(conn: psycopg.Connection[Any], tenant: str | None, *args: Any) -> str | None:
    """Call the function in a transaction of its own naming ``tenant`` (``""`` when
    None), rolled back; the SQLSTATE it failed with, or None."""
    try:
        with conn.transaction():
            conn.execute("SELECT set_config('caveat.tenant', %s, true)", [tenant or ""])
            conn.execute(APPEND, args)
            raise _Done
    except _Done:
        return None
    except psycopg.Error as exc:
        return exc.sqlstate


class _Done(Exception):
    pass


def _app_sessions(db_url: str, tenant: str) -> sessionmaker[Session]:
    return db.tenant_sessions(db.make_app_engine(db_url, poolclass=sa.pool.NullPool), tenant)


def _dispose(sessions: sessionmaker[Session]) -> None:
    bind = sessions.kw.get("bind")
    if isinstance(bind, sa.Engine):
        bind.dispose()


def test_a_bulk_append_as_the_application_role_lands_in_its_tenant(
    two_tenants: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``append_many`` as caveat_app (200 rows, runs of 64: four calls in one pipeline)
    extends the transaction's tenant's chain, which verifies; nothing else moves."""
    engine = two_tenants.engine
    monkeypatch.setattr(_audit, "_RUN", 64)
    before = _counts(engine)
    head = _head(engine, OWN)[0]
    sessions = _app_sessions(db_url, OWN)
    try:
        with sessions.begin() as s:
            assert claims._queries.row_security_active(session=s, table="audit_log")
            seqs = claims.append_many(
                session=s,
                tenant=OWN,
                at=T0 + timedelta(hours=1),
                rows=[
                    claims.PendingAudit("sme-alice", "transition", i, "revoked", {"i": i % 3})
                    for i in range(200)
                ],
            )
        with sessions.begin() as s:
            report = claims.verify_chain(session=s, tenant=OWN)
    finally:
        _dispose(sessions)
    assert seqs == list(range(head + 1, head + 201))
    assert report.ok and report.checked == head + 200
    after = _counts(engine)
    assert after["audit_log"] == {**before["audit_log"], OWN: before["audit_log"][OWN] + 200}
    assert {t: n for t, n in after.items() if t != "audit_log"} == {
        t: n for t, n in before.items() if t != "audit_log"
    }


def test_the_function_writes_the_transactions_tenant_and_no_other(
    two_tenants: Store, app: psycopg.Connection[Any]
) -> None:
    """With acme's tenant set, a run meant for globex (continuing globex's chain) lands in
    acme or is refused, never in globex; the function takes no tenant to name."""
    engine = two_tenants.engine
    other_seq, other_head = _head(engine, OTHER)
    own_seq, _ = _head(engine, OWN)
    before = _counts(engine)
    assert own_seq > other_seq + 2  # the store's setup wrote more of acme's chain
    # globex's next positions, continuing its head, are taken in acme: refused
    assert _sqlstate(app, OWN, *_run(other_seq + 1, other_head, 2)) == "23505"
    # positions free in acme: the rows land in acme, whatever chain they claim to continue
    with app.transaction():
        app.execute("SELECT set_config('caveat.tenant', %s, true)", [OWN])
        assert app.execute(APPEND, _run(own_seq + 1, other_head, 2)).fetchone() == (2,)
    after = _counts(engine)
    assert after["audit_log"] == {**before["audit_log"], OWN: before["audit_log"][OWN] + 2}
    with engine.connect() as c:
        landed = c.execute(
            sa.text(
                "SELECT tenant_id, seq, actor, prev_hash, hash FROM audit_log "
                "WHERE actor = 'intruder' ORDER BY seq"
            )
        ).all()
    # one contiguous run, each row linked to the one before it
    assert [tuple(r) for r in landed] == [
        (OWN, own_seq + 1, "intruder", other_head, HASH),
        (OWN, own_seq + 2, "intruder", HASH, HASH),
    ]
    # globex's chain is untouched and verifies
    with engine.connect() as c, Session(bind=c) as s:
        assert claims.verify_chain(session=s, tenant=OTHER).ok


def test_without_a_tenant_the_function_refuses(
    two_tenants: Store, app: psycopg.Connection[Any]
) -> None:
    before = _counts(two_tenants.engine)
    assert _sqlstate(app, None, *_run(100, HASH, 2)) == "42501"
    # not set at all in the transaction: refused the same way
    with (
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="names no tenant"),
        app.transaction(),
    ):
        app.execute(APPEND, _run(100, HASH, 2))
    assert _counts(two_tenants.engine) == before


def test_the_function_refuses_malformed_runs(
    two_tenants: Store, app: psycopg.Connection[Any]
) -> None:
    seq = _head(two_tenants.engine, OWN)[0] + 1
    good = _run(seq, HASH, 3)
    assert _sqlstate(app, OWN, *good) is None  # the control: the same run, well formed
    short = (*good[:10], "{" + HASH + "}")  # 3 rows, 1 hash
    assert _sqlstate(app, OWN, *short) == "22023"
    assert _sqlstate(app, OWN, *_run(seq, HASH, 3, kind=2)) == "22023"  # no kind 2
    assert _sqlstate(app, OWN, *(None, *good[1:])) == "22023"  # no first seq
    assert _sqlstate(app, OWN, *(0, *good[1:])) == "22023"


def test_the_function_cannot_rewrite_the_log_or_be_led_elsewhere(
    two_tenants: Store, app: psycopg.Connection[Any]
) -> None:
    """Taken positions are refused (no row rewritten or reordered); the log stays
    append-only for caveat_app; a temporary ``audit_log`` of the caller's does not
    catch the rows (the function's search_path puts pg_temp last)."""
    engine = two_tenants.engine
    seq, _ = _head(engine, OWN)
    assert _sqlstate(app, OWN, *_run(1, HASH, 1)) == "23505"
    assert _sqlstate(app, OWN, *_run(seq, HASH, 2)) == "23505"  # overlaps the last row
    for sql in ("UPDATE audit_log SET actor = 'x'", "DELETE FROM audit_log"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), app.transaction():
            app.execute("SELECT set_config('caveat.tenant', %s, true)", [OWN])
            app.execute(sql)
    before = _counts(engine)
    with app.transaction():
        app.execute("SELECT set_config('caveat.tenant', %s, true)", [OWN])
        app.execute("CREATE TEMP TABLE audit_log (LIKE public.audit_log) ON COMMIT DROP")
        assert app.execute(APPEND, _run(seq + 1, HASH, 2)).fetchone() == (2,)
        assert app.execute("SELECT count(*) FROM pg_temp.audit_log").fetchone() == (0,)
    after = _counts(engine)
    assert after["audit_log"][OWN] == before["audit_log"][OWN] + 2
    assert {t: n for t, n in after.items() if t != "audit_log"} == {
        t: n for t, n in before.items() if t != "audit_log"
    }


def test_a_revocation_as_the_application_role_goes_through_the_function(
    store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A revocation re-opening 70 descendants (71 transition rows, runs of 16) as
    caveat_app: the chain verifies; and the control, the function's EXECUTE revoked
    from caveat_app, makes the same revocation fail (42501) with nothing moved."""
    monkeypatch.setattr(_audit, "_RUN", 16)
    life = Life(store)
    life.open("INC-1")
    root = life.write()
    children = [life.write(derived_from=[root]) for _ in range(70)]
    sessions = _app_sessions(db_url, life.tenant)

    def revoke() -> lifecycle.RevokeResult:
        with sessions.begin() as s:
            return lifecycle.revoke(
                session=s,
                tenant=life.tenant,
                item_id=root,
                reason="coincidence",
                actor=life.store.sme,
                now=life.tick(minutes=5),
            )

    try:
        with life.engine.begin() as c:
            c.execute(sa.text("REVOKE EXECUTE ON FUNCTION caveat_append_audit FROM caveat_app"))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            revoke()
        assert set(life.states(root, *children)) == {"case"}
        with life.engine.begin() as c:
            c.execute(sa.text("GRANT EXECUTE ON FUNCTION caveat_append_audit TO caveat_app"))
        res = revoke()
        with sessions.begin() as s:
            report = claims.verify_chain(session=s, tenant=life.tenant)
    finally:
        _dispose(sessions)
    assert sorted(res.reopened) == sorted(children)
    assert life.states(root) == ["revoked"]
    assert set(life.states(*children)) == {"needs_reverification"}
    assert report.ok
    assert life.history_holds()
