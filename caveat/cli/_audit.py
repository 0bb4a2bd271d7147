"""``caveat audit ...``: the hash-chained audit log."""

from __future__ import annotations

import json

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals

audit_app = typer.Typer(help="The hash-chained audit log.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")


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
