"""``caveat predicate check``: one condition, parsed, typed and evaluated now."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals

predicate_app = typer.Typer(help="The predicate language.", no_args_is_help=True)
app.add_typer(predicate_app, name="predicate")


@predicate_app.command("check")
@refusals
def predicate_check(
    expression: Annotated[str, typer.Argument(help='A predicate, e.g. "config.pool.max gte 200".')],
    subject: Annotated[
        str | None,
        typer.Option("--subject", help="The entity it is about (unless it names @entity:)."),
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Parse, type-check and evaluate a predicate against the current snapshot."""
    import factgen
    from caveat.app import acting, utcnow
    from caveat.app.views import typed_value
    from caveat.cli._facts import show_age
    from predicates import duration_literal, typed_literal

    with acting(tenant, as_) as (s, tenant, _actor):
        world = factgen.load_world(session=s, tenant=tenant)
        result = factgen.check_predicate(
            session=s, world=world, text=expression, subject=subject, at=utcnow()
        )
    spec, entry = result.spec, result.entry
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "predicate": result.canonical,
                    "subject": result.subject,
                    "attribute": spec.attribute,
                    "type": str(spec.vtype),
                    "value": result.truth.name,
                    "fact": None
                    if entry is None
                    else {
                        **typed_value(entry.value, entry.vtype),
                        "observed_at": typed_literal(entry.observed_at),
                        "source": entry.source,
                        "age_seconds": None if result.age is None else result.age.total_seconds(),
                    },
                    "note": result.note,
                }
            )
        )
        return
    declared = (
        spec.attribute
        if spec.attribute == result.predicate.attribute.path
        else (f"{result.predicate.attribute.path} (declared as {spec.attribute})")
    )
    extra = "".join(
        [
            f", unit {spec.unit}" if spec.unit else "",
            f", max_age {duration_literal(spec.max_age)}" if spec.max_age else "",
        ]
    )
    typer.echo(f"parse    {result.canonical}")
    typer.echo(f"type     {declared} is {spec.vtype}{extra}: the predicate type-checks")
    typer.echo(f"subject  {result.subject}")
    typer.echo(f"value    {result.truth.name}")
    if entry is None:
        typer.echo(f"fact     none: {result.note}")
    else:
        age = "" if result.age is None else f" ({show_age(result.age)} ago)"
        typer.echo(
            f"fact     {typed_literal(entry.value)} "
            f"observed {typed_literal(entry.observed_at)}{age}, "
            f"source {entry.source or 'unknown'}"
        )
        if result.truth.name == "UNKNOWN":
            typer.echo(f"         {result.note}")
