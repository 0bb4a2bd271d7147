"""The SME's reads at the command line: the review queue, an item's dossier, and what an
action would do (``docs/sme.md`` has the same as pages)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from caveat.cli._claims import item_app
from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, refusals

__all__: list[str] = []

SubjectOpt = Annotated[
    str | None, typer.Option("--subject", help="Only rows about subjects containing this.")
]


@app.command("review")
@refusals
def review(
    subject: SubjectOpt = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The review queue: shadow items, re-opened items, contested keys, promotion
    candidates, the last week's refusals, the active items whose conditions are false
    now and the cases awaiting an outcome, as the acting principal may read them."""
    from caveat import app as use
    from caveat.app.views import review_view

    with use.serving(tenant, as_) as (rt, actor):
        queue = use.review_queue(rt, actor).about(subject)
    if as_json:
        typer.echo(json.dumps(review_view(queue), default=str))
        return
    typer.echo(f"shadow items: {len(queue.shadow)}")
    for r in queue.shadow:
        share = "n/a" if r.stats.agreement is None else f"{r.stats.agreement:.0%}"
        typer.echo(
            f"  #{r.stats.item_id} {r.subject} {r.stats.attribute}: {r.stats.matched} matched, "
            f"agreement {share}, next close: {r.next_close}"
        )
    typer.echo(f"re-opened: {len(queue.reopened)}")
    for o in queue.reopened:
        typer.echo(f"  #{o.item_id} {o.subject} {o.attribute}: {o.state} ({o.reason or '-'})")
    for title, keys in (("contested keys", queue.contested), ("candidates", queue.candidates)):
        typer.echo(f"{title}: {len(keys)}")
        for k in keys:
            values = "; ".join(f"{v} ({', '.join(map(str, ids))})" for v, ids in k.values.items())
            typer.echo(f"  {k.subject} {k.attribute}: {values}")
    typer.echo(f"refusals since {queue.refusals_since:%Y-%m-%d}: {queue.refusal_count}")
    for g in queue.refusals:
        typer.echo(f"  {g.code}: {g.count} (newest {g.last_at:%Y-%m-%d %H:%M})")
    typer.echo(f"active, conditions false now: {len(queue.false_now)}")
    for f in queue.false_now:
        why = "; ".join(
            f"{c.value.condition} is {c.value.value.name}"
            + (f" ({c.value.attribute} = {c.value.observed.value})" if c.value.observed else "")
            for c in f.conditions
        )
        typer.echo(f"  #{f.item_id} {f.subject} {f.attribute}: {why}")
    typer.echo(f"awaiting an outcome: {len(queue.awaiting)}")
    for c in queue.awaiting:
        close = f"; caveat case close {c.case_id} --outcome {'|'.join(c.close_as)}"
        typer.echo(
            f"  {c.case_id} ({', '.join(c.subjects) or 'no subject'}): reported over "
            f"{c.since:%Y-%m-%d %H:%M} by {c.reported_by}, {len(c.cited)} cited"
            f"{close if c.close_as else ''}"
        )


@item_app.command("dossier")
@refusals
def item_dossier(
    item_id: Annotated[int, typer.Argument(help="Item id.")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """An item with each condition against what is observed now, its evidence, citations,
    lineage and history, and the SME actions open to the acting principal."""
    from caveat import app as use
    from caveat.app.views import dossier_view, object_text

    with use.serving(tenant, as_) as (rt, actor):
        view = dossier_view(use.item_dossier(rt, actor, item_id))
    if as_json:
        typer.echo(json.dumps(view, default=str))
        return
    item = view["item"]
    typer.echo(
        f"#{item['id']} {item['state']}: {item['subject']} {item['attribute']}"
        f" = {object_text(item)}"
    )
    for c in view["conditions"]:
        hint = f"  ({c['to_observe']})" if c["to_observe"] else ""
        typer.echo(f"  {c['list']:<8} {c['condition']:<40} -> {c['value']}{hint}")
    typer.echo(
        f"  confidence {view['confidence']:.2f}; evidence "
        f"{', '.join(e['id'] for e in view['evidence'])}"
    )
    family = view["lineage"]
    typer.echo(
        f"  ancestors {[n['id'] for n in family['ancestors']]}, "
        f"descendants {[n['id'] for n in family['descendants']]}"
    )
    typer.echo(
        f"  citations {len(view['citations'])}, history {len(view['history'])} rows; "
        f"actions: {', '.join(view['actions']) or 'none'}"
    )
    if view["binding"] is not None:  # a skill: its enforcement level
        set_ = view["enforcement"]
        how = f" (set by {set_['set_by']}: {set_['reason']})" if set_ else ""
        binds = "binding" if view["binding"] else "not binding"
        typer.echo(f"  enforcement {set_['level'] if set_ else 'advisory'}, {binds}{how}")


@item_app.command("preview")
@refusals
def item_preview(
    item_id: Annotated[int, typer.Argument(help="Item id.")],
    action: Annotated[
        str, typer.Argument(help="verify, promote, graduate, drop, refute, revoke or redact.")
    ],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What an SME action would do to the item, before it is done (changes nothing)."""
    from caveat import app as use
    from caveat.app.views import preview_view

    with use.serving(tenant, as_) as (rt, actor):
        view = preview_view(use.action_preview(rt, actor, item_id, action))
    if as_json:
        typer.echo(json.dumps(view, default=str))
        return
    if view["refusal"]:
        typer.echo(
            f"{action} #{item_id} would be refused: {view['refusal']['code']}: "
            f"{view['refusal']['detail']}"
        )
        return
    typer.echo(f"{action} #{item_id}: {view['from_state']} -> {view['to_state'] or 'hidden'}")
    for effect in view["effects"]:
        typer.echo(f"  {effect}")
    for n in view["reopens"]:
        typer.echo(f"  re-opens #{n['id']} ({n['state']} -> needs_reverification)")
