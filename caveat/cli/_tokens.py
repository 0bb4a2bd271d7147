"""``caveat token create|list|revoke``: API tokens for the doors that take them."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals

if TYPE_CHECKING:
    import claims

token_app = typer.Typer(help="API tokens: stored hashed, shown once.", no_args_is_help=True)
app.add_typer(token_app, name="token")


def _info(t: claims.TokenInfo) -> dict[str, Any]:
    return {
        "id": t.id,
        "principal": t.principal,
        "role": t.role,
        "capabilities": list(t.capabilities),
        "created_at": t.created_at.isoformat(),
        "created_by": t.created_by,
        "revoked_at": None if t.revoked_at is None else t.revoked_at.isoformat(),
        "clearance": t.clearance,
    }


@token_app.command("create")
@refusals
def token_create(
    principal: Annotated[str, typer.Option("--principal", help="Whom the token acts for.")],
    role: Annotated[
        str, typer.Option("--role", help="agent, sme, admin or source (a tool sending hooks).")
    ],
    capability: Annotated[
        list[str] | None,
        typer.Option(
            "--capability",
            help="A capability it carries (repeat; default: all of the principal's).",
        ),
    ] = None,
    clearance: Annotated[
        str | None,
        typer.Option(
            "--clearance",
            help="The highest classification level it reads (a new principal's; at most an "
            "existing one's). Default: the principal's; internal for a new one.",
        ),
    ] = None,
    team: Annotated[
        str | None,
        typer.Option(
            "--team",
            help="The principal's team (recall's default team:<id> anchor); sets it for a "
            "new or existing principal. Default: keep it.",
        ),
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a token (admin); prints it once. A new principal is created with the role."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        issued = use.create_token(
            rt,
            actor,
            principal,
            role=role,
            capabilities=capability,
            clearance=clearance,
            team=team,
        )
    if as_json:
        typer.echo(json.dumps({"token": issued.token, **_info(issued.info)}))
        return
    typer.echo(issued.token)
    typer.echo(
        f"token {issued.info.id} for {principal} ({issued.info.role}; capabilities: "
        f"{', '.join(issued.info.capabilities) or 'none'}; clearance: {issued.info.clearance})."
        " It is shown once: store it now.",
        err=True,
    )


@token_app.command("list")
@refusals
def token_list(tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False) -> None:
    """The tenant's tokens, newest first, never their secrets (admin)."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        tokens = use.list_tokens(rt, actor)
    if as_json:
        typer.echo(json.dumps([_info(t) for t in tokens]))
        return
    for t in tokens:
        state = "revoked " + f"{t.revoked_at:%Y-%m-%d %H:%M}" if t.revoked_at else "live"
        typer.echo(
            f"{t.id}  {t.principal:<16} {t.role:<6} {','.join(t.capabilities) or '-':<24} "
            f"{t.clearance:<12} "
            f"created {t.created_at:%Y-%m-%d %H:%M} by {t.created_by}  {state}"
        )


@token_app.command("revoke")
@refusals
def token_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (from token list).")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a token (admin): it authenticates no more."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        info = use.revoke_token(rt, actor, token_id)
    if as_json:
        typer.echo(json.dumps(_info(info)))
    else:
        typer.echo(f"token {info.id} revoked")
