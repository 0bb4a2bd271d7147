"""The schema is owned by Alembic: upgrade head, then autogenerate finds nothing."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

import lifecycle.models  # noqa: F401
from caveat import db
from tests.conftest import ADMIN


def test_upgrade_head_then_autogenerate_finds_no_difference(pg_server_url: str) -> None:
    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        db.migrate(url)
        engine = db.make_engine(url)
        try:
            with engine.connect() as conn:
                diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
                assert diff == []
                tables = set(sa.inspect(conn).get_table_names())
        finally:
            engine.dispose()
    assert {"items", "item_states", "item_ancestry", "facts", "audit_log", "cases"} <= tables
    assert "item_transitions" not in tables  # the history is the audit log's (0007)


_ITEMS_0006 = (
    "INSERT INTO items (id, tenant_id, kind, subject, attribute, object, conditions, cond_key, "
    "evidence, evidence_key, derived_from, epistemic, salience, scope_axis, scope_id, "
    "valid_from, recorded_at, created_by, state) "
    "SELECT u.id, 'acme', 'fact', 'svc', 'a' || u.id, CAST('{}' AS jsonb), "
    "CAST('{\"required\": [], \"excluded\": []}' AS jsonb), 'k' || u.id, '{}', '', "
    "CAST(u.parents AS bigint[]), 'observation', 0.5, 'case', 'C', now(), now(), 'test', u.state "
    "FROM unnest(CAST(:ids AS bigint[]), CAST(:parents AS text[]), CAST(:states AS text[])) "
    "AS u(id, parents, state)"
)


def test_0007_moves_states_and_lineage_out_of_items(pg_server_url: str) -> None:
    """Data written under 0006 keeps its states (with the state each came from) and its
    lineage (as the closure) across 0007; the history table goes."""
    from alembic import command

    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        command.upgrade(db.alembic_config(url), "0006")
        engine = db.make_engine(url)
        try:
            with engine.begin() as c:
                c.execute(
                    sa.text(_ITEMS_0006),
                    {
                        "ids": [1, 2, 3, 4],
                        "parents": ["{}", "{1}", "{2}", "{1,3}"],
                        "states": ["revoked", "needs_reverification", "active", "case"],
                    },
                )
                c.execute(
                    sa.text(
                        "INSERT INTO item_transitions (tenant_id, item_id, from_state, to_state, "
                        "at, actor) SELECT 'acme', i, f, t, now() + make_interval(secs => k), 'x' "
                        "FROM unnest(CAST(:i AS bigint[]), CAST(:f AS text[]), "
                        "CAST(:t AS text[])) WITH ORDINALITY AS u(i, f, t, k)"
                    ),
                    {
                        "i": [1, 1, 2, 2, 3, 3, 4],
                        "f": [None, "case", None, "case", None, "case", None],
                        "t": [
                            "case",
                            "revoked",
                            "case",
                            "needs_reverification",
                            "case",
                            "active",
                            "case",
                        ],
                    },
                )
            db.migrate(url)
            with engine.connect() as c:
                states = c.execute(
                    sa.text("SELECT item_id, state, previous FROM item_states ORDER BY 1")
                ).all()
                pairs = c.execute(
                    sa.text("SELECT ancestor_id, descendant_id FROM item_ancestry ORDER BY 1, 2")
                ).all()
                tables = set(sa.inspect(c).get_table_names())
                columns = {col["name"] for col in sa.inspect(c).get_columns("items")}
        finally:
            engine.dispose()
    assert [tuple(r) for r in states] == [
        (1, "revoked", "case"),
        (2, "needs_reverification", "case"),
        (3, "active", "case"),
        (4, "case", None),
    ]
    assert [tuple(r) for r in pairs] == [(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)]
    assert "item_transitions" not in tables and "state" not in columns


def test_0008_fills_facts_current_from_the_history(pg_server_url: str) -> None:
    """Facts stored under 0007 give 0008's ``facts_current`` the latest of each
    (tenant, subject, attribute); facts inserted afterwards keep it current."""
    from alembic import command

    insert = sa.text(
        "INSERT INTO facts (tenant_id, subject, attribute, value, observed_at, recorded_at) "
        "SELECT t, s, 'm.x', jsonb_build_object('t', 'int', 'v', v), "
        "TIMESTAMPTZ '2026-03-01 09:00Z' + make_interval(mins => m), now() "
        "FROM unnest(CAST(:t AS text[]), CAST(:s AS text[]), CAST(:m AS int[]), "
        "CAST(:v AS int[])) AS u(t, s, m, v)"
    )
    latest = sa.text("SELECT tenant_id, subject, value->>'v' FROM facts_current ORDER BY 1, 2")
    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        command.upgrade(db.alembic_config(url), "0007")
        engine = db.make_engine(url)
        try:
            with engine.begin() as c:
                c.execute(
                    insert,
                    {
                        "t": ["a", "a", "a", "b"],
                        "s": ["x", "x", "y", "x"],
                        "m": [5, 1, 3, 9],
                        "v": [50, 10, 30, 90],
                    },
                )
            db.migrate(url)
            with engine.begin() as c:
                before = c.execute(latest).all()
                c.execute(insert, {"t": ["a", "b"], "s": ["x", "x"], "m": [7, 2], "v": [70, 20]})
                after = c.execute(latest).all()
        finally:
            engine.dispose()
    assert [tuple(r) for r in before] == [("a", "x", "50"), ("a", "y", "30"), ("b", "x", "90")]
    assert [tuple(r) for r in after] == [("a", "x", "70"), ("a", "y", "30"), ("b", "x", "90")]


def test_the_head_revision_is_alembics_and_at_head_reads_it(pg_server_url: str) -> None:
    """``db.HEAD_REVISION`` (at_head compares with it without importing alembic) is the
    head of the migration scripts: a new migration must move it."""
    from alembic import command
    from alembic.script import ScriptDirectory

    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        heads = ScriptDirectory.from_config(db.alembic_config(url)).get_heads()
        assert heads == [db.HEAD_REVISION]
        assert not db.at_head(url)  # a database with no alembic_version yet
        db.migrate(url)
        assert db.at_head(url)
        command.downgrade(db.alembic_config(url), "-1")
        assert not db.at_head(url)


def test_downgrade_to_base_and_up_again(pg_server_url: str) -> None:
    from alembic import command

    with db.with_database(pg_server_url, prefix="caveat_mig") as url:
        db.migrate(url)
        command.downgrade(db.alembic_config(url), "base")
        db.migrate(url)
        engine = db.make_engine(url)
        try:
            with engine.connect() as conn:
                assert "items" in sa.inspect(conn).get_table_names()
        finally:
            engine.dispose()


_FUNCTION_DEFS = sa.text(
    "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p "
    "JOIN pg_namespace n ON n.oid = p.pronamespace "
    "WHERE n.nspname = 'public' AND p.proname LIKE 'caveat\\_%' "
    "AND p.proname NOT IN "
    # the migrations' own functions: triggers, recall's readers of facts (0008), the
    # application role's bulk audit append (0014)
    "('caveat_audit_append_only', 'caveat_items_derived', 'caveat_items_ancestry', "
    "'caveat_facts_current', 'caveat_world_changed', 'caveat_policy_changed', "
    "'caveat_items_enqueue_embedding', "
    # the read replicas' withdrawal horizon: its triggers and its reader (0015)
    "'caveat_item_states_withdrawn', 'caveat_items_withdrawn', 'caveat_items_deleted', "
    "'caveat_redactions_withdrawn', 'caveat_withdrawal_horizon', "
    "'caveat_observed', 'caveat_applies_at', 'caveat_append_audit', "
    # an erasure's removal of audit details (0023); items citing passages (0028); the
    # credentials version's trigger and reader (0029)
    "'caveat_erase_audit', 'caveat_item_passage_refs', 'caveat_credentials_changed', "
    "'caveat_credentials_version') "
    "ORDER BY 1"
)


def test_migrated_evaluator_is_the_one_the_package_defines(db_url: str, pg_dsn: str) -> None:
    import psycopg

    from predicates import SQL_EVALUATOR_DDL

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(SQL_EVALUATOR_DDL)  # type: ignore[arg-type]
    fresh = db.make_engine(pg_dsn.replace("postgresql://", "postgresql+psycopg://"))
    migrated = db.make_engine(db_url)
    try:
        with fresh.connect() as a, migrated.connect() as b:
            want = a.execute(_FUNCTION_DEFS).all()
            got = b.execute(_FUNCTION_DEFS).all()
    finally:
        fresh.dispose()
        migrated.dispose()
    assert [r[0] for r in want] == [
        "caveat_applies",
        "caveat_cmp",
        "caveat_eval",
        "caveat_version_cmp",
    ]
    assert got == want, "predicates.SQL_EVALUATOR_DDL changed: add a migration revision"


def test_the_application_role_may_not_touch_audit_rows(db_url: str) -> None:
    engine = db.make_app_engine(db_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT current_user")).scalar() == db.APP_ROLE
        for stmt in ("UPDATE audit_log SET actor = 'x'", "DELETE FROM audit_log"):
            with pytest.raises(sa.exc.DBAPIError, match="permission denied"), engine.begin() as c:
                c.execute(sa.text(stmt))
    finally:
        engine.dispose()


def test_row_level_security_shows_the_app_only_its_tenant(db_url: str) -> None:
    from datetime import UTC, datetime

    import factgen
    from predicates import ValueType

    owner = db.make_engine(db_url)
    app = db.make_app_engine(db_url)
    now = datetime(2026, 3, 1, tzinfo=UTC)
    try:
        for tenant in ("acme", "globex"):
            with db.tenant_sessions(app, tenant).begin() as s:
                factgen.ensure_tenant(actor=ADMIN, session=s, tenant=tenant, now=now)
                factgen.declare_attributes(
                    actor=ADMIN,
                    session=s,
                    tenant=tenant,
                    specs=[factgen.AttributeSpec(f"{tenant}.x", ValueType.parse("int"))],
                )
        with db.tenant_sessions(app, "acme").begin() as s:
            seen = s.execute(sa.text("SELECT tenant_id, attribute FROM fact_schema")).all()
            tenants = s.execute(sa.text("SELECT id FROM tenants")).scalars().all()
            assert [tuple(r) for r in seen] == [("acme", "acme.x")]
            assert tenants == ["acme"]
        with (
            pytest.raises(sa.exc.DBAPIError, match="row-level security"),
            db.tenant_sessions(app, "acme").begin() as s,
        ):
            s.execute(
                sa.text(
                    "INSERT INTO fact_schema (tenant_id, attribute, type) "
                    "VALUES ('globex', 'sneaky', 'int')"
                )
            )
        with app.connect() as conn:  # a transaction that names no tenant sees nothing
            assert conn.execute(sa.text("SELECT count(*) FROM fact_schema")).scalar() == 0
        with owner.connect() as conn:  # the owner is not bound by the policies
            assert conn.execute(sa.text("SELECT count(*) FROM fact_schema")).scalar() == 2
    finally:
        owner.dispose()
        app.dispose()


def test_every_tenant_table_has_row_level_security(db_url: str) -> None:
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT c.relname, c.relrowsecurity, "
                    "EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid) "
                    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname <> "
                    "'alembic_version' ORDER BY 1"
                )
            ).all()
    finally:
        engine.dispose()
    assert len(rows) > 15
    unprotected = [r[0] for r in rows if not (r[1] and r[2])]
    assert unprotected == []


def test_tables_new_since_0008_force_row_level_security(db_url: str) -> None:
    """Issue 9's rule for new tables: the tenant in the key, row-level security forced."""
    engine = db.make_engine(db_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                sa.text(
                    "SELECT c.relrowsecurity, c.relforcerowsecurity, "
                    "(SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_index x "
                    " JOIN pg_attribute a ON a.attrelid = x.indrelid "
                    " AND a.attnum = ANY(x.indkey) WHERE x.indrelid = c.oid AND x.indisprimary) "
                    "FROM pg_class c WHERE c.relname = 'facts_current'"
                )
            ).one()
    finally:
        engine.dispose()
    assert row[0] and row[1]
    assert row[2][0] == "tenant_id"


def test_the_application_logs_in_as_its_role_and_cannot_become_the_owner(db_url: str) -> None:
    """Migration 0011: the engine logs in as ``caveat_app`` (not the owner with a
    ``role`` option that any SQL can ``RESET``); it can switch to no other role."""
    engine = db.make_app_engine(db_url)
    try:
        with engine.connect() as conn:
            who = conn.execute(sa.text("SELECT session_user, current_user")).one()
            assert tuple(who) == (db.APP_ROLE, db.APP_ROLE)
            conn.execute(sa.text("RESET ROLE"))
            assert conn.execute(sa.text("SELECT current_user")).scalar() == db.APP_ROLE
            flags = conn.execute(
                sa.text(
                    "SELECT rolcanlogin, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb "
                    "FROM pg_roles WHERE rolname = current_user"
                )
            ).one()
            assert tuple(flags) == (True, False, False, False, False)
        with pytest.raises(sa.exc.DBAPIError, match="permission denied"), engine.connect() as c:
            c.execute(sa.text("SET ROLE postgres"))
    finally:
        engine.dispose()


def test_row_level_security_is_forced_on_every_tenant_table(db_url: str) -> None:
    owner = db.make_engine(db_url)
    try:
        with owner.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
                    "  EXISTS (SELECT 1 FROM pg_policies p WHERE p.schemaname = 'public' "
                    "          AND p.tablename = c.relname) "
                    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') "
                    "  AND (EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid "
                    "               AND a.attname = 'tenant_id' AND NOT a.attisdropped) "
                    "       OR c.relname = 'tenants')"
                )
            ).all()
    finally:
        owner.dispose()
    assert len(rows) > 20
    loose = [r[0] for r in rows if not (r[1] and r[2] and r[3])]
    assert loose == []


def test_a_missing_or_escaping_application_role_is_a_startup_error(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "APP_ROLE", "caveat_no_such_role")
    with pytest.raises(db.DatabaseError, match="cannot log in as the application role"):
        db.make_app_engine(db_url)
    monkeypatch.setattr(db, "APP_ROLE", "postgres")  # a superuser: never the application
    with pytest.raises(db.DatabaseError, match="bypasses row-level security"):
        db.make_app_engine(db_url)
    # the documented escape hatch: run as the connecting user, on purpose
    engine = db.make_app_engine(db_url, as_connecting_user=True)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT session_user")).scalar() == "postgres"
    finally:
        engine.dispose()


def test_an_unreachable_server_is_said_as_such_not_as_a_missing_role() -> None:
    with pytest.raises(db.DatabaseError, match="cannot reach the database") as err:
        db.make_app_engine("postgresql+psycopg://nobody@127.0.0.1:1/x")
    assert "caveat migrate" not in err.value.message
