"""``caveat policy show|set``: tenant policy (model §7.1; docs/policy.md)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, instant, refusals

policy_app = typer.Typer(
    help="Tenant policy: every knob the gate, the lifecycle and recall read.",
    no_args_is_help=True,
)
app.add_typer(policy_app, name="policy")


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@policy_app.command("show")
@refusals
def policy_show(
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="The policy in force then (ISO 8601).")
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print the tenant's policy: every key with its value (and its default where it
    differs), the version in force now or at --as-of, who set it and when."""
    from caveat import app as use
    from caveat.app._policy import policy_view

    with use.serving(tenant, as_) as (rt, actor):
        view = policy_view(use.policy_show(rt, actor, as_of=instant(as_of, "--as-of")))
        tenant = rt.tenant
    if as_json:
        typer.echo(json.dumps({"tenant": tenant, **view}))
        return
    typer.echo(
        f"policy of tenant {tenant}: version {view['version']}, "
        f"set {view['set_at']} by {view['set_by']}"
    )
    for k in view["keys"]:
        default = "" if k["value"] == k["default"] else f"  (default {_shown(k['default'])})"
        typer.echo(f"  {k['key']:<30} {_shown(k['value'])}{default}")


@policy_app.command("set")
@refusals
def policy_set(
    pairs: Annotated[
        list[str],
        typer.Argument(
            help="KEY VALUE, repeatable (shadow.min_matched_cases 5 writes off); "
            "all are made or none."
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only preview what the change would do.")
    ] = False,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Change policy keys (admin), all or nothing: each changed key one audit row, the
    whole a new policy version; prints the change and its preview (which shadow items
    the next close would graduate or drop, which promotion candidates appear or
    disappear). A bad value exits 2 naming the key, what it takes and what it got."""
    from caveat import app as use
    from caveat.app import _policy as p

    changes = p.pairs(pairs)
    with use.serving(tenant, as_) as (rt, actor):
        view = p.change_view(use.policy_set(rt, actor, changes, dry_run=dry_run))
        tenant = rt.tenant
    if as_json:
        typer.echo(json.dumps({"tenant": tenant, **view}))
        return
    if dry_run:
        head = f"dry run: tenant {tenant}'s policy unchanged"
    elif view["version"] is None:
        head = f"tenant {tenant}'s policy unchanged (every key already has its value)"
    else:
        head = f"tenant {tenant}'s policy is now version {view['version']}"
    typer.echo(head)
    for c in view["changes"]:
        typer.echo(f"  {c['key']}: {_shown(c['old'])} -> {_shown(c['new'])}")
    for key in view["unchanged"]:
        typer.echo(f"  {key}: unchanged")
    for line in view["preview"]["lines"]:
        typer.echo(f"  {line}")
