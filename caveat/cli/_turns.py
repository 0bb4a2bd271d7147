"""``caveat turns submit|show|list|run``: agent turns for the server-side extractor
(docs/proposals.md, "The server-side extractor")."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals
from caveat.cli._facts import read_input

turns_app = typer.Typer(
    help="Agent turns: queued for the server-side extractor, proposals through the gate.",
    no_args_is_help=True,
)
app.add_typer(turns_app, name="turns")


def _line(turn: dict[str, Any]) -> str:
    tail = ""
    if turn["state"] == "queued":
        tail = f", next attempt {turn['next_attempt_at']}"
    elif turn["outcomes"] is not None:
        kinds: dict[str, int] = {}
        for o in turn["outcomes"]:
            key = o["code"] if o["outcome"] == "rejected" else o["outcome"]
            kinds[key] = kinds.get(key, 0) + 1
        tail = ", " + (", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no proposals")
    error = f"  ({turn['last_error']})" if turn["last_error"] else ""
    return (
        f"{turn['id']}: {turn['state']} after {turn['attempts']} attempt(s), "
        f"by {turn['principal']} into {turn['scope']}{tail}{error}"
    )


def _show(turn: dict[str, Any], as_json: bool) -> None:
    typer.echo(json.dumps(turn) if as_json else _line(turn))


@turns_app.command("submit")
@refusals
def turns_submit(
    turn_id: Annotated[str, typer.Argument(help="The turn's id (resubmitting it is safe).")],
    file: Annotated[str, typer.Argument(help="The turn's text (UTF-8), or - for stdin.")],
    case: Annotated[
        str | None, typer.Option("--case", help="Anchor its proposals to this open case.")
    ] = None,
    scope: Annotated[
        str | None, typer.Option("--scope", help='Anchor as "axis:id" instead.')
    ] = None,
    evidence: Annotated[
        list[str] | None, typer.Option("--evidence", help="An evidence id it may cite.")
    ] = None,
    subject: Annotated[
        list[str] | None, typer.Option("--subject", help="An entity in play.")
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Queue a turn for the server's extractor, as --as (an agent); prints its state at
    once. The server's background round asks the model and writes through the gate."""
    from caveat import app as use
    from caveat.app._input import proposal_anchor
    from caveat.app._requests import TurnIn

    text, _ = read_input(file)
    body = TurnIn(
        id=turn_id,
        text=text,
        case=case,
        scope=scope,
        evidence=evidence or [],
        subjects=subject or [],
    )
    anchor = proposal_anchor(body.case, body.scope)
    with use.serving(tenant, as_) as (rt, actor):
        done = use.submit_turn(rt, actor, body.agent_turn(), scope=anchor)
    _show(done.record.to_json(), as_json)


@turns_app.command("show")
@refusals
def turns_show(
    turn_id: Annotated[str, typer.Argument(help="The turn's id.")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show one turn: its state, attempts, last error and its proposals' outcomes."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        turn = use.turn_show(rt, actor, turn_id).to_json()
    if as_json:
        typer.echo(json.dumps(turn))
        return
    typer.echo(_line(turn))
    for o in turn["outcomes"] or []:
        what = o["code"] if o["outcome"] == "rejected" else f"item {o['item_id']}"
        typer.echo(
            f"    [{o['index']}] {o['outcome']}: {what}"
            + (f": {o['message']}" if o["message"] else "")
        )


@turns_app.command("list")
@refusals
def turns_list(
    state: Annotated[
        str | None, typer.Option("--state", help="queued, done or failed only.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=500)] = 50,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List turns, newest first (an agent's own; an SME's or admin's every one)."""
    import claims
    from caveat import app as use
    from predicates.errors import InputError

    if state is not None and state not in claims.TURN_STATES:
        raise InputError(f"--state: one of {', '.join(claims.TURN_STATES)}", attribute="state")
    with use.serving(tenant, as_) as (rt, actor):
        rows = [t.to_json() for t in use.turns_list(rt, actor, state=state, limit=limit)]
    if as_json:
        typer.echo(json.dumps({"turns": rows}))
        return
    for row in rows:
        typer.echo(_line(row))
    if not rows:
        typer.echo("no turns")


@turns_app.command("run")
@refusals
def turns_run(
    tenant: TenantOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Process the due turns once, here (the server's background round does it on its
    own): ask CAVEAT_EXTRACTOR_URL for each and consolidate as its submitter."""
    from caveat import app as use
    from caveat import connectors

    with use.serving(tenant, None) as (rt, actor):
        extract = connectors.ChatExtractor.from_settings(rt.settings)
        if extract is None:
            raise use.extractor_not_configured()
        done = use.process_turns(rt, actor, extract=extract, limit=100)
    if as_json:
        typer.echo(json.dumps({"turns": [d.__dict__ for d in done]}))
        return
    for d in done:
        typer.echo(
            f"{d.turn_id}: {d.outcome} ({d.seconds:.2f} s)" + (f": {d.error}" if d.error else "")
        )
    if not done:
        typer.echo("no turns due")
