"""``caveat registry load|show`` (the tenant's own axes and content types) and ``caveat
rollup`` (episodes rolled up into semantic items): docs/cli.md."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals

registry_app = typer.Typer(
    help="The tenant's registry: its own scope axes and content types.", no_args_is_help=True
)
app.add_typer(registry_app, name="registry")


def _print_registry(view: dict[str, Any]) -> None:
    typer.echo("axes:")
    for a in view["axes"]:
        flags = [
            "agent-writable" if a["agent_writable"] else "",
            "entity" if a["entity"] else "",
            f"only {a['name']}:{a['fixed_id']}" if a["fixed_id"] else "",
            "built-in" if a["builtin"] else "declared",
        ]
        typer.echo(f"  {a['name']:<20} {', '.join(f for f in flags if f)}")
    typer.echo("content types:")
    for c in view["content_types"]:
        parts = [
            f"re-opened by {', '.join(c['triggers'])} (reach {c['reach']})"
            if c["triggers"]
            else "no trigger",
            f"ttl {c['ttl_seconds']:g}s" if c["ttl_seconds"] is not None else "",
            "built-in" if c["builtin"] else "declared",
        ]
        typer.echo(f"  {c['name']:<20} {', '.join(p for p in parts if p)}")
    if view["loaded_at"] is None:
        typer.echo("no registry loaded: built-ins only (caveat registry load FILE)")
    else:
        typer.echo(f"loaded {view['loaded_at']} by {view['loaded_by']} (sha256 {view['sha256']})")


@registry_app.command("load")
@refusals
def registry_load(
    file: Annotated[str, typer.Argument(help="Registry YAML file, or - for standard input.")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Load the tenant's registry (admin): its axes and content types (expiry triggers,
    reach, secondary TTL), validated with the line and column of the first problem;
    replaces the registry before it, with an audit row. Creates the tenant if new."""
    from caveat import app as use
    from caveat.app._rollup_out import registry_view
    from caveat.cli._facts import read_input

    text, source = read_input(file)
    with use.serving(tenant, as_) as (rt, actor):
        use.load_registry(rt, actor, text, source_name=source)
        view = registry_view(use.show_registry(rt, actor))
        tenant = rt.tenant
    if as_json:
        typer.echo(json.dumps({"tenant": tenant, **view}))
        return
    typer.echo(f"loaded the registry of tenant {tenant}")
    _print_registry(view)


@registry_app.command("show")
@refusals
def registry_show(
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The axes and content types every door uses for the tenant (built-ins included)
    and who loaded its registry when."""
    from caveat import app as use
    from caveat.app._rollup_out import registry_view

    with use.serving(tenant, as_) as (rt, actor):
        view = registry_view(use.show_registry(rt, actor))
        tenant = rt.tenant
    if as_json:
        typer.echo(json.dumps({"tenant": tenant, **view}))
        return
    _print_registry(view)


@app.command("rollup")
@refusals
def rollup_command(
    subject: Annotated[
        str | None, typer.Option("--subject", help="Only episodes about this subject.")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the clusters and items; write nothing.")
    ] = False,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Roll related episodes up into semantic items (agents and admins): the
    deterministic clusters, each written through the gate as a hypothesis derived from
    its episodes, which are then archived. A refused cluster is reported with the gate's
    code (exit 1 when any was refused)."""
    from caveat import app as use
    from caveat.app._rollup_out import rollups_view

    with use.serving(tenant, as_) as (rt, actor):
        if dry_run:
            view = rollups_view(use.rollup_preview(rt, actor, subject=subject), dry_run=True)
        else:
            view = rollups_view(use.rollup(rt, actor, subject=subject), dry_run=False)
    refused = [r for r in view["rollups"] if r["refused"]]
    if as_json:
        typer.echo(json.dumps(view))
    else:
        if not view["rollups"]:
            typer.echo("nothing to roll up")
        for r in view["rollups"]:
            eps = ", ".join(map(str, r["episodes"]))
            item = r["item"]
            if dry_run:
                head = "would write"
            elif r["refused"]:
                head = f"refused {r['refused']}: {r['message']}"
            else:
                head = f"wrote item {r['item_id']}"
            typer.echo(f"{head} from episodes {eps}")
            typer.echo(f"  {item['subject']} {item['attribute']} = {item['object']!r}")
            typer.echo(f"  text: {item.get('text', '')}")
            if item.get("required"):
                typer.echo(f"  requires: {'; '.join(item['required'])}")
            if item.get("evidence"):
                typer.echo(f"  evidence: {', '.join(item['evidence'])}")
    if refused:
        raise typer.Exit(1)
