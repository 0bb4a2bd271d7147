"""``caveat hooks post``: act on a webhook payload from a file, as ``POST /v1/hooks/{kind}``
would (docs/hooks.md): for trying a payload, a mapping in ``sources.yaml`` or a recipe
without the sender. The local operator is trusted: no token, no signature."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from caveat.cli._common import JsonOpt, TenantOpt, app, refusals
from predicates.errors import InputError

hooks_app = typer.Typer(help="Webhook deliveries (docs/hooks.md).", no_args_is_help=True)
app.add_typer(hooks_app, name="hooks")


def _headers(given: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for h in given:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise InputError(f"--header {h!r}: expected NAME:VALUE", header=h)
        out[name.strip().lower()] = value.strip()
    return out


def _body(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror})", path=name) from None


@hooks_app.command("post")
@refusals
def hooks_post(
    kind: Annotated[str, typer.Argument(help="alertmanager, github, cloudevents or pagerduty.")],
    file: Annotated[str, typer.Argument(help="The payload (the request body), or - for stdin.")],
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            "-H",
            help="A request header NAME:VALUE (repeat), e.g. 'X-GitHub-Event: deployment_status'.",
        ),
    ] = None,
    tenant: TenantOpt = None,
    as_: Annotated[
        str | None,
        typer.Option("--as", help="Act as this principal (default: source:KIND, role source)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Deliver one payload as its sender would, mapped by the tenant's sources.yaml
    ``hooks:``; a refusal stores nothing (and is audited). A repeat of a delivery id
    is acknowledged, not acted on twice."""
    from caveat import app as use
    from caveat import connectors

    body, headers = _body(file), _headers(header or [])
    with use.serving(tenant, as_) as (rt, actor):
        trusted = use.source_actor(kind) if as_ is None else actor
        delivery = connectors.receive(rt, kind, body=body, headers=headers, trusted=trusted)
        tenant = rt.tenant
    if as_json:
        typer.echo(json.dumps({"tenant": tenant, **delivery.to_json()}))
        return
    seen = " (a repeat: nothing done again)" if delivery.duplicate else ""
    typer.echo(f"{kind} delivery {delivery.delivery_id or '(no id)'} in tenant {tenant}{seen}")
    for done in delivery.done:
        rest = ", ".join(f"{k}={v}" for k, v in done.items() if k != "action")
        typer.echo(f"  {done['action']}: {rest}")
