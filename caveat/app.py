"""The composition root: settings -> database -> sessions, handed to the domain packages."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

import claims
import factgen
from caveat import db
from caveat.settings import Settings

__all__ = ["LOCAL_ADMIN", "Runtime", "acting", "acting_as", "open_runtime", "utcnow"]

#: Whom the CLI acts as unless ``--as`` names a principal: the store's operator.
LOCAL_ADMIN = claims.Actor("local-admin", "admin")


def utcnow() -> datetime:
    """The wall clock, timezone-aware UTC (replay uses a virtual clock instead)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Runtime:
    """What a command needs: settings, the server URL, an engine on the main database."""

    settings: Settings
    server_url: str
    engine: Engine
    tenant: str
    sessions: sessionmaker[Session]


@contextmanager
def open_runtime(
    settings: Settings | None = None, *, tenant: str | None = None, migrate: bool = False
) -> Iterator[Runtime]:
    """Start or attach to the database (embedded unless ``DATABASE_URL``), optionally migrate.

    Sessions act for ``tenant`` (default: the settings' tenant): every
    transaction names it, and row-level security shows only its rows.
    """
    settings = settings or Settings()
    url = db.server_url(settings.database_url, settings.pgdata)
    if migrate:
        db.migrate(url)
    engine = db.make_app_engine(url)
    name = tenant or settings.tenant
    try:
        yield Runtime(settings, url, engine, name, db.tenant_sessions(engine, name))
    finally:
        engine.dispose()


def acting_as(session: Session, tenant: str, principal: str | None) -> claims.Actor:
    """The local admin, or the named principal of ``tenant`` (``NotFound`` if unknown)."""
    if principal is None:
        return LOCAL_ADMIN
    return claims.get_actor(session=session, tenant=tenant, principal=principal)


@contextmanager
def acting(
    tenant: str | None, principal: str | None, *, create_tenant: bool = False
) -> Iterator[tuple[Session, str, claims.Actor]]:
    """One transaction of a command: ``(session, tenant, actor)``.

    ``tenant`` None means the settings' default; ``principal`` None the local
    admin. With ``create_tenant`` a missing tenant is created first.
    """
    with open_runtime(tenant=tenant) as rt, rt.sessions.begin() as session:
        if create_tenant:
            factgen.ensure_tenant(session=session, tenant=rt.tenant, now=utcnow())
        yield session, rt.tenant, acting_as(session, rt.tenant, principal)
