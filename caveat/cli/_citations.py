"""``caveat citations list`` and ``caveat skill enforce``: citations as the caller may
read them, and a skill's enforcement level (docs/cli.md)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from caveat.cli._claims import skill_app
from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, instant, refusals

citations_app = typer.Typer(help="Citations: how items influenced cases.", no_args_is_help=True)
app.add_typer(citations_app, name="citations")


@skill_app.command("enforce")
@refusals
def skill_enforce(
    item_id: Annotated[int, typer.Argument(help="The skill (item id).")],
    level: Annotated[str, typer.Argument(help="advisory, recommended or required.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (audited).")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set a skill's enforcement level (SME), with a reason.

    At or above the tenant's skill_enforcement_threshold the skill binds: a citation
    that did not follow it is a violation."""
    from caveat import app as use
    from caveat.app.views import enforcement_view

    with use.serving(tenant, as_) as (rt, actor):
        done = use.set_enforcement(rt, actor, item_id, level=level, reason=reason)
    if as_json:
        typer.echo(json.dumps(enforcement_view(done)))
    else:
        typer.echo(
            f"skill {item_id} enforcement {done.previous or 'advisory'} -> {done.level}: "
            f"{done.reason}"
        )


@citations_app.command("list")
@refusals
def citations_list(
    case: Annotated[str | None, typer.Option("--case", help="Only this case's.")] = None,
    item: Annotated[int | None, typer.Option("--item", help="Only this item's.")] = None,
    influence: Annotated[
        str | None,
        typer.Option("--influence", help="decisive, contributing, considered or ignored."),
    ] = None,
    compliance: Annotated[
        str | None,
        typer.Option("--compliance", help="na, complied, discretion or violation."),
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="Cited at or after (ISO 8601; UTC).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Cited before (ISO 8601; UTC).")
    ] = None,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="The `next` cursor a page printed.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most N (1..1000).")] = 100,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List citations oldest first, filtered, as the caller may read them; a page of
    --limit, and the cursor of the next page."""
    import lifecycle
    from caveat import app as use
    from caveat.app.views import citation_view

    kept = lifecycle.CitationFilter(
        case, item, influence, compliance, instant(since, "--since"), instant(until, "--until")
    )
    with use.serving(tenant, as_) as (rt, actor):
        page = use.list_citations(rt, actor, kept, cursor=cursor, limit=limit)
    if as_json:
        typer.echo(json.dumps({"items": [citation_view(c) for c in page.items], "next": page.next}))
        return
    for c in page.items:
        values = "" if c.expected is None else f" expected {c.expected!r} observed {c.observed!r}"
        why = f" ({c.rationale})" if c.rationale else ""
        typer.echo(
            f"{c.cited_at.isoformat(timespec='seconds')}  {c.case_id:<10} item {c.item_id:<6} "
            f"{c.kind or '-':<7} {c.influence:<12} {c.compliance:<10} "
            f"{c.signal or 'open':<7}{values}{why}"
        )
    if not page.items:
        typer.echo("no citations match", err=True)
    if page.next:
        typer.echo(f"next: --cursor {page.next}", err=True)
