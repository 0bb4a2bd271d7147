"""``caveat forget``: real erasure (model §7) of items, a subject's or an anchor's, with
``--dry-run`` for the preview. The operator's (admin)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals


@app.command("forget")
@refusals
def forget(
    item: Annotated[
        list[int] | None, typer.Option("--item", help="An item id to erase (repeatable).")
    ] = None,
    subject: Annotated[
        str | None, typer.Option("--subject", help="Erase every item of this subject.")
    ] = None,
    anchor: Annotated[
        str | None, typer.Option("--anchor", help="Erase every item at this anchor AXIS:ID.")
    ] = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (kept in the erasure record).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be erased; change nothing.")
    ] = False,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Erase items for good (admin): their text, object, entities, conditions, embeddings
    and the detail of the audit rows about them; the audit chain still verifies. Exactly
    one of --item, --subject or --anchor; --reason unless --dry-run."""
    from caveat import app as use
    from predicates.errors import InputError

    with use.serving(tenant, as_) as (rt, actor):
        if dry_run:
            plan = use.forget_plan_view(
                use.forget_preview(rt, actor, items=item or (), subject=subject, anchor=anchor)
            )
            if as_json:
                typer.echo(json.dumps(plan))
                return
            typer.echo(
                f"would erase {len(plan['items'])} item rows (history included) and the "
                f"detail of {plan['audit_rows']} audit rows"
            )
            for name in ("by_subject", "by_anchor"):
                for key, n in plan[name].items():
                    typer.echo(f"  {name[3:]} {key}: {n}")
            if plan["descendants"]:
                typer.echo(f"  built on them (not erased): {plan['descendants']}")
            return
        if reason is None:
            raise InputError("forget needs --reason (or --dry-run)", attribute="reason")
        done = use.forget_done_view(
            use.forget(rt, actor, items=item or (), subject=subject, anchor=anchor, reason=reason)
        )
    if as_json:
        typer.echo(json.dumps(done))
        return
    typer.echo(
        f"erasure {done['erasure']}: {len(done['items'])} item rows erased, "
        f"{done['audit_rows']} audit details removed; the chain still verifies"
    )
    if done["not_vacuumed"]:
        typer.echo("  NOT vacuumed (VACUUM FULL them as the tables' owner):")
        for table, why in done["why_not_vacuumed"].items():
            typer.echo(f"    {table}: {why}")
