"""``caveat db ...`` and ``caveat migrate``: the database."""

from __future__ import annotations

import typer

from caveat import db
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


@app.command("migrate")
@refusals
def migrate() -> None:
    """Bring the database schema to the latest revision (alembic upgrade head)."""
    settings = Settings()
    url = db.server_url(settings.database_url, settings.pgdata)
    db.migrate(url)
    typer.echo("database at head")
