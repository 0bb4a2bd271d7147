"""The SME pages' reads at the command line: the transitions made inside a window
(docs/sme.md, "What changed")."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, instant, refusals

__all__: list[str] = []


@app.command("transitions")
@refusals
def transitions(
    from_: Annotated[
        str | None,
        typer.Option("--from", help="From this instant (ISO 8601; default: 7 days ago)."),
    ] = None,
    to: Annotated[str | None, typer.Option("--to", help="To this instant (default: now).")] = None,
    subject: Annotated[
        str | None, typer.Option("--subject", help="Only items whose subject contains this.")
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The state transitions made between two instants (both included), oldest first, of
    the items the acting principal may read."""
    from caveat import app as use
    from caveat.app._review import changes_window, transition_view

    start, end = changes_window(instant(from_, "--from"), instant(to, "--to"), use.utcnow())
    with use.serving(tenant, as_) as (rt, actor):
        rows = [
            transition_view(r)
            for r in use.transitions(rt, actor, from_=start, to=end, subject=subject)
        ]
    if as_json:
        typer.echo(json.dumps(rows))
        return
    typer.echo(f"transitions from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} UTC: {len(rows)}")
    for r in rows:
        why = f": {r['reason']}" if r["reason"] else ""
        typer.echo(
            f"  {r['at'][:16]} #{r['item']} {r['subject']} {r['attribute']}: "
            f"{r['from'] or 'new'} -> {r['to']} by {r['actor']}{why}"
        )
