"""Alembic environment: the URL comes from the caller's config or from settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import pool
from sqlmodel import SQLModel

# The table classes register themselves on the metadata when imported.
import claims.models  # noqa: F401
import factgen.models  # noqa: F401
import lifecycle.models  # noqa: F401
import recall.models  # noqa: F401

config = context.config
target_metadata = SQLModel.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from caveat.db import server_url
    from caveat.settings import Settings

    settings = Settings()
    return server_url(settings.database_url, settings.pgdata)


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    from caveat.db import make_engine

    engine = make_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
