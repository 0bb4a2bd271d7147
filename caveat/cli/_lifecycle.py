"""``caveat shadow report``, ``caveat lineage ITEM``, ``caveat promotion ...``: the lifecycle."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals

if TYPE_CHECKING:
    import lifecycle

shadow_app = typer.Typer(help="The shadow period.", no_args_is_help=True)
app.add_typer(shadow_app, name="shadow")
promotion_app = typer.Typer(help="Promotion across cases.", no_args_is_help=True)
app.add_typer(promotion_app, name="promotion")


def _short(text: str | None, width: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


@shadow_app.command("report")
@refusals
def shadow_report(tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False) -> None:
    """Distribution of matched cases and agreement over shadow items, against the thresholds."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        report = use.shadow_report(rt, actor)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "policy": report.policy.model_dump(),
                    "items": [{**s.__dict__, "agreement": s.agreement} for s in report.items],
                    "matched_cases": report.matched_distribution,
                    "agreement": report.agreement_distribution,
                    "would_graduate": list(report.would_graduate),
                    "would_drop": list(report.would_drop),
                }
            )
        )
        return
    p = report.policy
    typer.echo(
        f"{len(report.items)} shadow items; thresholds: {p.min_matched_cases} matched cases, "
        f"agreement {p.min_agreement}"
    )
    typer.echo("\nmatched, concluded cases per item:")
    for bucket, n in report.matched_distribution.items():
        typer.echo(f"  {bucket:>5}  {n:>5}  {'#' * min(n, 60)}")
    typer.echo("\nagreement per item:")
    for bucket, n in report.agreement_distribution.items():
        typer.echo(f"  {bucket:>7}  {n:>5}  {'#' * min(n, 60)}")
    if report.items:
        typer.echo("\n  item  cases  matched  pending  agreement  subject / text")
        for st in report.items:
            share = "-" if st.agreement is None else f"{st.agreement:.2f}"
            typer.echo(
                f"  {st.item_id:>4}  {st.cases:>5}  {st.matched:>7}  {st.pending:>7}  "
                f"{share:>9}  {st.subject}: {_short(st.text or st.attribute)}"
            )
    typer.echo(
        f"\nat the next close: {len(report.would_graduate)} would graduate, "
        f"{len(report.would_drop)} would drop"
    )


def _node(n: lifecycle.LineageNode) -> dict[str, Any]:
    return {
        "id": n.id,
        "state": n.state,
        "depth": n.depth,
        "kind": n.kind,
        "subject": n.subject,
        "attribute": n.attribute,
        "text": n.text,
        "redacted": n.redacted,
    }


def _line(n: lifecycle.LineageNode) -> str:
    if n.redacted:
        return f"#{n.id} [{n.state}] (redacted)"
    return f"#{n.id} [{n.state}] {n.kind} {n.subject} {n.attribute}  {_short(n.text, 50)}"


@app.command("lineage")
@refusals
def lineage(
    item: Annotated[int, typer.Argument(help="Item id.")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ancestors and descendants of an item, with their states."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        res = use.lineage(rt, actor, item)
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "item": _node(res.item),
                    "ancestors": [_node(n) for n in res.ancestors],
                    "descendants": [_node(n) for n in res.descendants],
                }
            )
        )
        return
    typer.echo(f"ancestors ({len(res.ancestors)}):")
    for n in res.ancestors:
        typer.echo(f"  {'  ' * (-n.depth - 1)}{-n.depth} up    {_line(n)}")
    typer.echo(f"item:\n  {_line(res.item)}")
    typer.echo(f"descendants ({len(res.descendants)}):")
    for n in res.descendants:
        typer.echo(f"  {'  ' * (n.depth - 1)}{n.depth} down  {_line(n)}")


def _print_keys(keys: list[lifecycle.PromotionKey], as_json: bool, empty: str) -> None:
    from caveat.app.views import key_view

    if as_json:
        typer.echo(json.dumps([key_view(k) for k in keys]))
        return
    if not keys:
        typer.echo(empty)
        return
    for k in keys:
        conds = " and ".join(k.required) or "no condition"
        if k.excluded:
            conds += " unless " + " or ".join(k.excluded)
        typer.echo(f"{k.subject} {k.attribute} ({k.kind}) when {conds}: {len(k.cases)} cases")
        for value, ids in k.values.items():
            holders = [i for i in k.items if i.id in ids]
            where = ", ".join(f"#{i.id} {i.case_id} [{i.state}]" for i in holders)
            typer.echo(f"  = {value}: {where}")


@promotion_app.command("candidates")
@refusals
def promotion_candidates(
    tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False
) -> None:
    """Keys held by items of several cases that agree on the object."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        keys = use.promotion_candidates(rt, actor)
    _print_keys(keys, as_json, "no promotion candidates")


@promotion_app.command("contested")
@refusals
def promotion_contested(
    tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False
) -> None:
    """Keys whose cases disagree on the object, with every distinct value (never voted on)."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        keys = use.contested_keys(rt, actor)
    _print_keys(keys, as_json, "no contested keys")


@app.command("sweep")
@refusals
def sweep(tenant: TenantOpt = None, as_: AsOpt = None, as_json: JsonOpt = False) -> None:
    """Persist what time did: run out secondary TTLs and archive unused case episodes past
    the tenant's horizon (SME or admin; `caveat serve` runs it in the background)."""
    from caveat import app as use
    from caveat.app.views import sweep_view

    with use.serving(tenant, as_) as (rt, actor):
        done = use.sweep(rt, actor)
    if as_json:
        typer.echo(json.dumps(sweep_view(done)))
        return
    typer.echo(
        f"archived {len(done.archived)}, expired {len(done.expired)}, "
        f"working memory expired {len(done.working_memory)}"
    )
    for label, ids in (
        ("archived", done.archived),
        ("verify_on_next_use", done.expired),
        ("working_memory", done.working_memory),
    ):
        if ids:
            typer.echo(f"  {label}: {', '.join(map(str, ids))}")
