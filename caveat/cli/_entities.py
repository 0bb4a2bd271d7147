"""``caveat entities ...``: canonical entities, their aliases and the topology."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals

entities_app = typer.Typer(
    help="Canonical entities, aliases and the topology.", no_args_is_help=True
)
app.add_typer(entities_app, name="entities")


@entities_app.command("import")
@refusals
def entities_import(
    file: Annotated[str, typer.Argument(help="Entities YAML file, or - for standard input.")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Import entities, their aliases and topology edges; creates the tenant if new."""
    import factgen
    from caveat import app as use
    from caveat.cli._facts import read_input

    text, source = read_input(file)
    entities = factgen.load_entities_yaml(text, source=source)
    with use.serving(tenant, as_) as (rt, actor):
        tenant = rt.tenant
        count = use.import_entities(rt, actor, entities)
        with rt.transaction() as s:
            topology = rt.world(s).topology
    edges = sum(len(e.edges) for e in entities)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "tenant": tenant,
                    "imported": [
                        {"id": e.id, "kind": e.kind, "aliases": list(e.aliases)} for e in entities
                    ],
                    "edges": [list(edge) for edge in topology.edges()],
                }
            )
        )
        return
    typer.echo(f"imported {count} entities and {edges} edges into tenant {tenant}")
    for e in entities:
        aliases = f" (aliases: {', '.join(e.aliases)})" if e.aliases else ""
        typer.echo(f"  {e.id:<24} {e.kind}{aliases}")
        for relation, target in e.edges:
            typer.echo(f"    {relation} -> {target}")
