"""``caveat db ...`` and ``caveat migrate``: the database."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from caveat import backup, db
from caveat.cli._common import app, refusals
from caveat.settings import Settings
from predicates.errors import InputError

db_app = typer.Typer(help="The embedded PostgreSQL server.", no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("start")
@refusals
def db_start() -> None:
    """Start the embedded PostgreSQL (left running) and print its URL."""
    settings = Settings()
    if settings.database_url:
        raise InputError("DATABASE_URL is set: caveat uses that server, not the embedded one")
    typer.echo(db.EmbeddedServer(settings.pgdata).start(keep_running=True))


@db_app.command("stop")
@refusals
def db_stop() -> None:
    """Stop the embedded PostgreSQL."""
    stopped = db.EmbeddedServer(Settings().pgdata).stop()
    typer.echo("stopped" if stopped else "not running")


@db_app.command("status")
@refusals
def db_status() -> None:
    """Say whether the embedded PostgreSQL runs, and where its data lives."""
    settings = Settings()
    if settings.database_url:
        typer.echo("external (DATABASE_URL)")
        return
    server = db.EmbeddedServer(settings.pgdata)
    typer.echo(f"{server.status()} ({settings.pgdata})")


@db_app.command("url")
@refusals
def db_url() -> None:
    """Print the database URL caveat uses (starting the embedded server if needed)."""
    settings = Settings()
    if settings.database_url:
        typer.echo(db.to_sqlalchemy_url(settings.database_url))
        return
    typer.echo(db.EmbeddedServer(settings.pgdata).start(keep_running=True))


@db_app.command("dump")
@refusals
def db_dump(file: Annotated[Path, typer.Argument(help="Where to write the dump.")]) -> None:
    """Back the database up: pg_dump in the custom format, with the server's own pg_dump."""
    settings = Settings()
    url = db.server_url(settings.database_url, settings.pgdata)
    started = time.monotonic()
    size = backup.dump(url, file)
    typer.echo(f"dumped {size} bytes to {file} in {time.monotonic() - started:.2f}s")


@db_app.command("restore")
@refusals
def db_restore(
    file: Annotated[Path, typer.Argument(help="A dump made by caveat db dump.")],
) -> None:
    """Restore a dump into an empty database, creating the role caveat_app if missing."""
    settings = Settings()
    url = db.server_url(settings.database_url, settings.pgdata)
    started = time.monotonic()
    created = backup.restore(url, file)
    role = "created" if created else "present"
    typer.echo(
        f"restored {file} in {time.monotonic() - started:.2f}s (role {db.APP_ROLE} {role});"
        " check it with: caveat audit verify"
    )


@app.command("migrate")
@refusals
def migrate() -> None:
    """Bring the database schema to the latest revision (alembic upgrade head)."""
    settings = Settings()
    url = db.server_url(settings.database_url, settings.pgdata)
    db.migrate(url)
    typer.echo("database at head")
