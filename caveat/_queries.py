"""The delivery package's own SQL: what an operator's command runs on a server, outside
any tenant, and what the read routing asks the primary and a replica (the domain's SQL
lives in each domain package's ``_queries.py``)."""

from __future__ import annotations

from sqlalchemy import Connection
from sqlalchemy.orm import Session

__all__ = [
    "APP_ROLE_EXISTS",
    "CREATE_APP_ROLE",
    "PUBLIC_RELATIONS",
    "advisory_unlock",
    "replica_lag",
    "try_advisory_lock",
    "withdrawal_horizon",
    "write_position",
]

#: Whether the application's login role exists on the server.
APP_ROLE_EXISTS = "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'caveat_app')"

#: The application's login role, with the attributes migrations 0003 and 0011 give
#: it: LOGIN, and by omission NOSUPERUSER, NOBYPASSRLS, NOCREATEROLE, NOCREATEDB.
#: ``pg_dump`` writes no roles (they belong to the server, not to a database), so a
#: restore into a fresh server needs it before the grants the dump carries.
CREATE_APP_ROLE = "CREATE ROLE caveat_app LOGIN"

#: How many relations (tables, sequences, views, indexes) the ``public`` schema holds: a
#: restore goes only into a database where this is zero.
PUBLIC_RELATIONS = """
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public'"""


def withdrawal_horizon(*, connection: Connection, tenant: str) -> int:
    """The tenant's withdrawal horizon on the primary: how often it withdrew something
    (migration 0015's triggers move it); 0 before its first withdrawal. One statement
    (``caveat_withdrawal_horizon``), so it may run in autocommit."""
    return int(
        connection.exec_driver_sql("SELECT caveat_withdrawal_horizon(%s)", (tenant,)).scalar_one()
    )


def replica_lag(*, session: Session, tenant: str, horizon: int, token: str | None) -> str | None:
    """Why the replica behind ``session`` may not serve the tenant now, or None when it may:
    ``not_in_recovery`` (it is no standby), ``horizon`` (its copy of the tenant's horizon is
    short of ``horizon``: a withdrawal not replayed yet), ``token`` (its replay position
    has not passed the caller's token). Run first in the transaction that then reads:
    every later snapshot of a standby is at least as new."""
    row = (
        session.connection()
        .exec_driver_sql(
            "SELECT pg_is_in_recovery(), "
            "coalesce((SELECT withdrawal_horizon FROM tenants WHERE id = %(t)s), 0) >= %(h)s, "
            "CAST(%(lsn)s AS pg_lsn) IS NULL "
            "OR pg_last_wal_replay_lsn() >= CAST(%(lsn)s AS pg_lsn)",
            {"t": tenant, "h": horizon, "lsn": token},
        )
        .one()
    )
    if not row[0]:
        return "not_in_recovery"
    if not row[1]:
        return "horizon"
    if not row[2]:
        return "token"
    return None


def write_position(*, connection: Connection) -> str:
    """The primary's WAL insert position now: past the end of every commit before this
    call, so a replica that has replayed it has replayed them (a consistency token)."""
    return str(
        connection.exec_driver_sql("SELECT CAST(pg_current_wal_insert_lsn() AS text)").scalar_one()
    )


def try_advisory_lock(*, connection: Connection, key: int) -> bool:
    """Take the session-level advisory lock ``key`` if no other session holds it (never
    waits); it is held until ``advisory_unlock`` or the connection's end."""
    return bool(connection.exec_driver_sql("SELECT pg_try_advisory_lock(%s)", (key,)).scalar_one())


def advisory_unlock(*, connection: Connection, key: int) -> bool:
    """Release the session-level advisory lock ``key`` this session holds."""
    return bool(connection.exec_driver_sql("SELECT pg_advisory_unlock(%s)", (key,)).scalar_one())
