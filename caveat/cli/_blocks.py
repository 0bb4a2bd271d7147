"""``caveat block set|list|show``: core blocks (model §4 "Core blocks"; docs/blocks.md)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals
from caveat.cli._facts import read_input

block_app = typer.Typer(
    help="Core blocks: editable texts packed first in every recall.", no_args_is_help=True
)
app.add_typer(block_app, name="block")

ScopeOpt = Annotated[
    str | None,
    typer.Option("--scope", help='tenant (the default), "team:ID" or "agent:ID".'),
]


def _print(block: dict[str, Any], *, with_text: bool = True) -> None:
    gone = f", superseded {block['superseded_at']}" if block["superseded_at"] else ""
    typer.echo(
        f"{block['scope']} block:{block['label']}  (item {block['item_id']}, "
        f"{block['recorded_at']} by {block['created_by']}{gone})"
    )
    if with_text:
        for line in block["text"].splitlines():
            typer.echo(f"    {line}")


@block_app.command("set")
@refusals
def block_set(
    label: Annotated[str, typer.Argument(help="The block's label: [a-z][a-z0-9_-]*.")],
    file: Annotated[str, typer.Argument(help="The block's text (UTF-8), or - for stdin.")],
    scope: ScopeOpt = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set block LABEL to the text of FILE: a new row under its key, the text before kept
    as its history; the same text is a duplicate. An agent sets its own agent:ID blocks,
    an SME or admin a team's and the tenant's. Bad input exits 2 and writes nothing."""
    from caveat import app as use
    from caveat.app._blocks import set_view

    text, _ = read_input(file)
    with use.serving(tenant, as_) as (rt, actor):
        view = set_view(use.block_set(rt, actor, label, text, scope=scope), label, scope)
    if as_json:
        typer.echo(json.dumps(view))
        return
    extra = f", supersedes item {view['superseded']}" if view["superseded"] else ""
    typer.echo(f"{view['outcome']}: {view['scope']} block:{label} is item {view['item_id']}{extra}")


@block_app.command("list")
@refusals
def block_list(
    scope: ScopeOpt = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the blocks in force that you may read, in packing order (anchor: tenant,
    team, agent; then label); --scope keeps one anchor's."""
    from caveat import app as use
    from caveat.app._blocks import block_view

    with use.serving(tenant, as_) as (rt, actor):
        rows = [block_view(b) for b in use.block_list(rt, actor, scope=scope)]
    if as_json:
        typer.echo(json.dumps({"blocks": rows}))
        return
    if not rows:
        typer.echo("no blocks")
    for row in rows:
        _print(row, with_text=False)


@block_app.command("show")
@refusals
def block_show(
    label: Annotated[str, typer.Argument(help="The block's label.")],
    scope: ScopeOpt = None,
    history: Annotated[
        bool, typer.Option("--history", help="Every text it has had, oldest first.")
    ] = False,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print block LABEL (on --scope, default the tenant) with its text; --history every
    row it has had, oldest first."""
    from caveat import app as use
    from caveat.app._blocks import block_view

    with use.serving(tenant, as_) as (rt, actor):
        rows = [
            block_view(b) for b in use.block_show(rt, actor, label, scope=scope, history=history)
        ]
    if as_json:
        typer.echo(json.dumps({"blocks": rows}))
        return
    for row in rows:
        _print(row)
