"""``caveat sources load|show|pull|status``: a tenant's fact sources (docs/sources.md)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals

if TYPE_CHECKING:
    from caveat import app as use

sources_app = typer.Typer(
    help="Fact sources: where facts are pulled from (sources.yaml).", no_args_is_help=True
)
app.add_typer(sources_app, name="sources")


def puller() -> use.Puller:
    """The connectors' pull (``caveat.connectors.pull_sources``)."""
    from caveat import connectors

    return connectors.pull_sources


def _when(at: str | None) -> str:
    return "-" if at is None else f"{datetime.fromisoformat(at):%Y-%m-%d %H:%M:%S}"


def _refused(refused: dict[str, int]) -> str:
    return ", ".join(f"{code} {n}" for code, n in sorted(refused.items())) or "none"


@sources_app.command("load")
@refusals
def sources_load(
    file: Annotated[str, typer.Argument(help="sources.yaml, or - for standard input.")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Load the tenant's sources.yaml (admin): validated with the line and column of the
    first problem, every attribute checked against the schema; replaces the tenant's
    sources, with an audit row."""
    from caveat import app as use
    from caveat.app._sources_out import sources_view
    from caveat.cli._facts import read_input

    text, source = read_input(file)
    with use.serving(tenant, as_) as (rt, actor):
        view = sources_view(use.load_sources(rt, actor, text, source_name=source))
        tenant = rt.tenant
    if as_json:
        typer.echo(json.dumps({"tenant": tenant, **view}))
        return
    config = view["config"]
    typer.echo(
        f"loaded {len(view['sources'])} sources in tenant {tenant}: "
        f"{', '.join(view['sources']) or 'none'}"
    )
    for spec in config["sources"]:
        every = f"every {spec['every']:g}s" if spec["every"] is not None else "on demand"
        names = ", ".join(a["attribute"] for a in spec["attributes"])
        typer.echo(f"  {spec['name']:<16} {spec['kind']:<10} {every:<14} {names}")


@sources_app.command("show")
@refusals
def sources_show(tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False) -> None:
    """Print the tenant's sources.yaml as loaded (SME or admin); who loaded it and when
    on standard error."""
    from caveat import app as use
    from caveat.app._sources_out import sources_view
    from predicates.errors import NotFound

    with use.serving(tenant, as_) as (rt, actor):
        loaded = use.show_sources(rt, actor)
        tenant = rt.tenant
    if loaded is None:
        raise NotFound(f"no sources.yaml loaded in tenant {tenant} (caveat sources load)")
    view = sources_view(loaded)
    if as_json:
        typer.echo(json.dumps({"tenant": tenant, **view}))
        return
    typer.echo(
        f"# tenant {tenant}: loaded {_when(view['loaded_at'])} by {view['loaded_by']} "
        f"(sha256 {view['sha256'][:12]})",
        err=True,
    )
    typer.echo(view["document"], nl=not view["document"].endswith("\n"))


@sources_app.command("pull")
@refusals
def sources_pull(
    name: Annotated[
        str | None, typer.Argument(help="The source to pull (default: every source).")
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Pull now, whatever the schedule (admin): per source, samples stored, refused by
    reason, its latency or its error. Exit 1 when a source's pull failed."""
    from caveat import app as use
    from caveat.app._sources_out import pulls_view

    with use.serving(tenant, as_) as (rt, actor):
        names = None if name is None else [name]
        view = pulls_view(use.pull_sources(rt, actor, names, puller=puller()))
    failed = [p for p in view["pulls"] if p["error"] is not None]
    if as_json:
        typer.echo(json.dumps(view))
    else:
        if not view["pulls"]:
            typer.echo("no sources to pull (caveat sources load)")
        for p in view["pulls"]:
            if p["error"] is not None:
                typer.echo(f"{p['source']}: error: {p['error']}", err=True)
            typer.echo(
                f"{p['source']}: stored {p['stored']}, refused {_refused(p['refused'])}, "
                f"{p['latency_ms']:.0f} ms" + (" (failed)" if p["error"] is not None else "")
            )
    if failed:
        raise typer.Exit(1)


def _status_line(r: dict[str, Any]) -> list[str]:
    every = f"every {r['every_seconds']:g}s" if r["every_seconds"] is not None else "on demand"
    if not r["declared"]:
        every = "no longer declared"
    latency = "-" if r["last_latency_ms"] is None else f"{r['last_latency_ms']:.0f} ms"
    lines = [
        f"{r['source']}  ({r['kind'] or '-'}, {every})",
        f"  pulls {r['pulls']}, last {_when(r['last_pull_at'])}, "
        f"last ok {_when(r['last_ok_at'])}, latency {latency}",
        f"  samples stored {r['samples_stored']}, refused {_refused(r['refused'])}",
        f"  errors {r['errors']}, consecutive failures {r['consecutive_failures']}"
        + (f", last {_when(r['last_error_at'])}: {r['last_error']}" if r["last_error"] else ""),
    ]
    if r["scheduled"]:
        due = " (due)" if r["due"] else ""
        lines.append(f"  next pull {_when(r['next_pull_at'])}{due}")
    return lines


@sources_app.command("status")
@refusals
def sources_status(tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False) -> None:
    """What each source's pulls did (SME or admin): pulls, last pull and last success,
    samples stored, refused by reason, errors and the last error, latency, consecutive
    failures, and when caveat serve pulls it next."""
    from caveat import app as use
    from caveat.app._sources_out import status_view

    with use.serving(tenant, as_) as (rt, actor):
        view = status_view(use.sources_status(rt, actor))
    if as_json:
        typer.echo(json.dumps(view))
        return
    if not view["sources"]:
        typer.echo("no sources (caveat sources load)")
    for r in view["sources"]:
        for line in _status_line(r):
            typer.echo(line)
