"""``caveat audit ...``: the hash-chained audit log."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, instant, refusals

audit_app = typer.Typer(help="The hash-chained audit log.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")


@audit_app.command("verify")
@refusals
def audit_verify(tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False) -> None:
    """Recompute the tenant's audit hash chain; exit 1 if it does not hold."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        report = use.audit_verify(rt, actor)
    if as_json:
        typer.echo(json.dumps(asdict(report)))
    elif report.ok:
        typer.echo(f"audit chain holds ({report.checked} rows)")
    else:
        typer.echo(f"audit chain BROKEN at row {report.broken_at}: {report.reason}")
    if not report.ok:
        raise typer.Exit(1)


@audit_app.command("show")
@refusals
def audit_show(
    item: Annotated[int | None, typer.Option("--item", help="Only rows about this item.")] = None,
    actor: Annotated[
        str | None, typer.Option("--actor", help="Only rows by this principal.")
    ] = None,
    code: Annotated[
        str | None, typer.Option("--code", help="Only rows with this code (e.g. a reason code).")
    ] = None,
    action: Annotated[
        str | None, typer.Option("--action", help="Only rows of this action (write, reject, ...).")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="From this instant, inclusive (ISO 8601; UTC).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Before this instant (ISO 8601; UTC).")
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the last N matching rows.")
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List audit rows in chain order, filtered by item, actor, code, action and time range."""
    from caveat import app as use
    from caveat.app.views import audit_view

    start, end = instant(since, "--since"), instant(until, "--until")
    with use.serving(tenant, as_) as (rt, reader):
        rows = use.audit_entries(
            rt,
            reader,
            item_id=item,
            by=actor,
            code=code,
            action=action,
            since=start,
            until=end,
            limit=limit,
        )
    if as_json:
        typer.echo(json.dumps([audit_view(r) for r in rows], default=str))
        return
    for r in rows:
        subject = "-" if r.item_id is None else str(r.item_id)
        typer.echo(
            f"{r.seq:>6}  {r.at.isoformat(timespec='seconds')}  {r.actor:<14} "
            f"{r.action:<10} item {subject:<6} {r.code or '-'}"
        )
    if not rows:
        typer.echo("no audit rows match", err=True)
