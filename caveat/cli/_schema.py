"""``caveat schema ...``: the fact schema and exported JSON schemas."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals

schema_app = typer.Typer(help="The fact schema and exported JSON schemas.", no_args_is_help=True)
app.add_typer(schema_app, name="schema")


@schema_app.command("load")
@refusals
def schema_load(
    file: Annotated[str, typer.Argument(help="Schema YAML file, or - for standard input.")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Declare (or redeclare) the fact attributes of a schema file; creates the tenant if new."""
    import factgen
    from caveat import app as use
    from caveat.cli._facts import read_input
    from predicates import duration_literal

    text, source = read_input(file)
    specs = factgen.load_schema_yaml(text, source=source)
    # a ``registry:`` section is the tenant's registry (caveat registry load), loaded
    # with the attributes in one transaction
    doc = factgen.load_yaml_document(text, source=source)
    section = isinstance(doc.data, dict) and "registry" in doc.data
    with use.serving(tenant, as_) as (rt, actor):
        tenant = rt.tenant
        if section:
            use.load_registry(rt, actor, text, source_name=source, section=True, attributes=specs)
            count = len(specs)
        else:
            count = use.declare_schema(rt, actor, specs)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "tenant": tenant,
                    "registry_loaded": section,
                    "declared": [
                        {
                            "attribute": spec.attribute,
                            "type": str(spec.vtype),
                            "unit": spec.unit,
                            "max_age_seconds": None
                            if spec.max_age is None
                            else spec.max_age.total_seconds(),
                            "content_type": spec.content_type,
                        }
                        for spec in specs
                    ],
                }
            )
        )
        return
    typer.echo(f"declared {count} attributes in tenant {tenant}")
    if section:
        typer.echo("loaded its registry: axes and content types (caveat registry show)")
    for spec in specs:
        extra = [
            f"unit {spec.unit}" if spec.unit else "",
            f"max_age {duration_literal(spec.max_age)}" if spec.max_age else "",
            spec.content_type or "",
        ]
        shown = ", ".join(e for e in extra if e)
        typer.echo(f"  {spec.attribute:<40} {spec.vtype!s:<12} {shown}".rstrip())
