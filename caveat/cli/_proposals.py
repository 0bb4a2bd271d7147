"""``caveat schema proposals`` and ``caveat proposals apply``: model output through the gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from caveat.cli._claims import read_json, render_batch
from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals
from caveat.cli._schema import schema_app

proposals_app = typer.Typer(
    help="Model proposals: consolidate through the gate.", no_args_is_help=True
)
app.add_typer(proposals_app, name="proposals")


@schema_app.command("proposals")
def schema_proposals() -> None:
    """Print the JSON schema of model proposals (a structured-output schema for any LLM)."""
    import claims

    typer.echo(json.dumps(claims.proposal_json_schema(), indent=2, sort_keys=True))


@proposals_app.command("apply")
@refusals
def proposals_apply(
    path: Annotated[
        Path, typer.Argument(help='Model output: {"proposals": [...]}; - reads stdin.')
    ],
    case: Annotated[
        str | None, typer.Option("--case", help="Anchor the items to this (open) case.")
    ] = None,
    scope: Annotated[
        str | None, typer.Option("--scope", help='Anchor as "axis:id" instead (e.g. session:s-1).')
    ] = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Where the proposals came from (audited).")
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Consolidate a model's proposals: each applied, a duplicate, or rejected with its code."""
    import claims
    from caveat import app as use
    from caveat.app._input import proposal_anchor

    anchor = proposal_anchor(case, scope)
    proposals = claims.parse_model_output(json.dumps(read_json(path)))
    with use.serving(tenant, as_) as (rt, actor):
        result = use.propose(rt, actor, proposals, scope=anchor, source=source or str(path))
    render_batch(result, as_json)
