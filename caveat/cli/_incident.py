"""The commands of an incident's loop and of an SME's review, one per use case, named
like the scenario steps: cases, evidence, observations, events, citations, recall,
the context guard, the belief diff; verify, promote, graduate, drop, refute, revoke,
redact. Each validates its input, calls one function of ``caveat.app`` and renders
the result (``caveat.app.views`` for ``--json``)."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from caveat.app._input import anchor_fields, observation_fields, scalar
from caveat.cli._common import AsOpt, JsonOpt, TenantOpt, app, instant, refusals
from predicates.errors import InputError

if TYPE_CHECKING:
    import claims
    import factgen

case_app = typer.Typer(help="Cases: one incident or agent run.", no_args_is_help=True)
app.add_typer(case_app, name="case")
evidence_app = typer.Typer(help="Evidence sources and attachments.", no_args_is_help=True)
app.add_typer(evidence_app, name="evidence")
context_app = typer.Typer(help="The context guard.", no_args_is_help=True)
app.add_typer(context_app, name="context")

ItemArg = Annotated[int, typer.Argument(help="Item id.")]
ReasonOpt = Annotated[str, typer.Option("--reason", help="Why (audited).")]


class Outcome(StrEnum):
    confirmed = "confirmed"
    rejected = "rejected"


class Influence(StrEnum):
    decisive = "decisive"
    contributing = "contributing"
    considered = "considered"
    ignored = "ignored"


class Stance(StrEnum):
    supports = "supports"
    refutes = "refutes"


class SourceKind(StrEnum):
    human_confirm = "human_confirm"
    citation = "citation"
    repeat_observation = "repeat_observation"
    agent_judge = "agent_judge"


class PromoteTo(StrEnum):
    shadow = "shadow"
    active = "active"


def _echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, default=str))


def observation(text: str, subject: str | None = None) -> factgen.Observation:
    """``ATTRIBUTE=VALUE`` about ``subject``, or ``SUBJECT:ATTRIBUTE=VALUE``."""
    import factgen

    flag = "--observe" if subject is None else "ATTRIBUTE=VALUE"
    given = observation_fields(text, flag, subject)
    return factgen.Observation(given["subject"], given["attribute"], given["value"], None)


# --- cases -------------------------------------------------------------------------


@case_app.command("open")
@refusals
def case_open(
    case_id: Annotated[str, typer.Argument(help="Case id, e.g. INC-1041.")],
    subject: Annotated[
        list[str] | None, typer.Option("--subject", help="A subject of the case (repeat).")
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Open a case; writes and recalls with --case happen inside it until it closes."""
    from caveat import app as use
    from caveat.app.views import case_view

    with use.serving(tenant, as_) as (rt, actor):
        case = use.open_case(rt, actor, case_id, subjects=subject or [])
    if as_json:
        _echo_json(case_view(case))
    else:
        typer.echo(f"opened case {case.id} about {', '.join(case.subjects) or 'no subject'}")


@case_app.command("close")
@refusals
def case_close(
    case_id: Annotated[str, typer.Argument(help="Case id.")],
    outcome: Annotated[Outcome, typer.Option("--outcome", help="How the case concluded.")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Close a case: citations become support or counter signals; shadow items move."""
    from caveat import app as use
    from caveat.app.views import closed_view

    with use.serving(tenant, as_) as (rt, actor):
        res = use.close_case(rt, actor, case_id, outcome=outcome.value)
    moves = {"demoted": res.demoted, "graduated": res.graduated, "dropped": res.dropped}
    if as_json:
        _echo_json({**closed_view(res), **{k: list(v) for k, v in moves.items()}})
        return
    typer.echo(f"closed case {case_id} as {outcome.value}")
    for item_id, signal in res.signals.items():
        typer.echo(f"  item {item_id}: {signal}")
    for what, ids in moves.items():
        if ids:
            typer.echo(f"  {what}: {', '.join(map(str, ids))}")


# --- evidence ----------------------------------------------------------------------


@evidence_app.command("add")
@refusals
def evidence_add(
    evidence_id: Annotated[str, typer.Argument(help="Evidence id, e.g. E-1.")],
    title: Annotated[str | None, typer.Option("--title", help="A title.")] = None,
    uri: Annotated[str | None, typer.Option("--uri", help="Where it lives.")] = None,
    reader: Annotated[
        list[str] | None,
        typer.Option("--reader", help="A capability that may read it (repeat; none: everyone)."),
    ] = None,
    deny: Annotated[
        list[str] | None,
        typer.Option(
            "--deny",
            help="principal:<id> or cap:<capability> that may never read it, whatever "
            "grants it (repeat).",
        ),
    ] = None,
    classification: Annotated[
        str | None,
        typer.Option(
            "--classification",
            help="Its level (public, internal, confidential, restricted: the tenant's "
            "policy); none: the lowest.",
        ),
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Register an evidence source; items formed from it are readable only by its readers,
    never by whom it denies, and only with a clearance reaching its classification."""
    import factgen
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        use.add_evidence(
            rt,
            actor,
            evidence_id,
            title=title,
            uri=uri,
            readers=reader or [],
            deny=deny or [],
            classification=classification,
        )
    denied = factgen.parse_deny(deny or [])
    if as_json:
        _echo_json(
            {
                "evidence": evidence_id,
                "readers": reader or [],
                "deny": denied,
                "classification": classification,
            }
        )
    else:
        who = f" (readers: {', '.join(reader)})" if reader else " (tenant-readable)"
        more = f"; denied: {', '.join(denied)}" if denied else ""
        level = f"; {classification}" if classification else ""
        typer.echo(f"registered evidence {evidence_id}{who}{more}{level}")


@evidence_app.command("attach")
@refusals
def evidence_attach(
    item_id: ItemArg,
    evidence_id: Annotated[str, typer.Argument(help="Evidence id.")],
    stance: Annotated[Stance, typer.Option("--stance", help="For or against the item.")],
    strength: Annotated[float, typer.Option("--strength", help="0 to 1.")],
    source_kind: Annotated[SourceKind, typer.Option("--source-kind", help="Where it comes from.")],
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Attach evidence for or against an item: its confidence moves (ranking only)."""
    from dataclasses import asdict

    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        att = use.attach_evidence(
            rt,
            actor,
            item_id,
            evidence_id,
            stance=stance.value,
            strength=strength,
            source_kind=source_kind.value,
        )
    if as_json:
        _echo_json(asdict(att))
    else:
        typer.echo(
            f"item {item_id}: {att.stance} {evidence_id} ({att.source_kind}, strength "
            f"{att.strength:g}); confidence {att.confidence_before:.3f} -> "
            f"{att.confidence_after:.3f}"
        )


# --- the world ---------------------------------------------------------------------


@app.command("observe")
@refusals
def observe(
    subject: Annotated[str, typer.Argument(help="The entity observed (aliases resolve).")],
    values: Annotated[
        list[str], typer.Argument(help="ATTRIBUTE=VALUE ... (VALUE as JSON, else text).")
    ],
    source: Annotated[
        str | None, typer.Option("--source", help="Where it was seen (default: cli).")
    ] = None,
    at: Annotated[str | None, typer.Option("--at", help="When (ISO 8601; default now).")] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Record typed facts about a subject; one value of the wrong type stores nothing."""
    import factgen
    from caveat import app as use
    from caveat.app.views import fact_json

    observations = [
        factgen.Observation(o.subject, o.attribute, o.value, source or "cli")
        for o in (observation(v, subject) for v in values)
    ]
    when = instant(at, "--at")
    with use.serving(tenant, as_) as (rt, actor):
        facts = use.observe(rt, actor, observations, at=when)
    shown = [fact_json(f) for f in facts]
    if as_json:
        _echo_json(shown)
        return
    for f in shown:
        typer.echo(
            f"observed {f['subject']} {f['attribute']} = {f['literal']} at {f['observed_at']}"
        )


def render_events(data: dict[str, Any]) -> None:
    """Each event, and what its handling re-opened."""
    for e in data["events"]:
        changed = ", ".join(f"{a}={v['literal']}" for a, v in e["changes"].items())
        typer.echo(
            f"{e['type']} event on {', '.join(e['subjects']) or e['principal'] or '-'}"
            + (f" ({changed})" if changed else "")
            + f": {len(e['matched'])} matched"
        )
        for state in ("needs_reverification", "verify_on_next_use"):
            if e[state]:
                typer.echo(f"  {state}: {', '.join(map(str, e[state]))}")


@app.command("event")
@refusals
def event(
    file: Annotated[str, typer.Argument(help="CloudEvents JSON (one or a batch); - reads stdin.")],
    subject: Annotated[
        str | None, typer.Option("--subject", help="Default subject for events naming none.")
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Record deploy, config, version or authorisation events and run the lifecycle's
    handling: what depended on what changed is re-opened."""
    from caveat import app as use
    from caveat.app.views import event_view
    from caveat.cli._facts import read_input

    text, source_name = read_input(file)
    with use.serving(tenant, as_) as (rt, actor):
        done = use.import_facts(
            rt, actor, format="cloudevents", text=text, source_name=source_name, subject=subject
        )
    data = event_view(done)
    if as_json:
        _echo_json(data)
    else:
        render_events(data)


# --- review: an SME's actions ------------------------------------------------------


def _moved(item: claims.ItemRecord, as_json: bool, verb: str) -> None:
    from caveat.app.views import item_view

    if as_json:
        typer.echo(item_view(item).model_dump_json())
    else:
        typer.echo(f"item {item.id} {verb}: now {item.state} ({item.epistemic})")


@app.command("verify")
@refusals
def verify(
    item_id: ItemArg,
    rationale: Annotated[str | None, typer.Option("--rationale", help="Why (audited).")] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Verify an item (SME): its epistemic status becomes verified."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        _moved(use.verify(rt, actor, item_id, rationale=rationale), as_json, "verified")


@app.command("promote")
@refusals
def promote(
    item_id: ItemArg,
    to: Annotated[PromoteTo, typer.Option("--to", help="shadow, or active from shadow.")],
    rationale: Annotated[str | None, typer.Option("--rationale", help="Why (audited).")] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Expand an item's scope: case -> shadow, shadow -> active (SME)."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        item = use.promote(rt, actor, item_id, to=to.value, rationale=rationale)
    _moved(item, as_json, "promoted")


@app.command("graduate")
@refusals
def graduate(
    item_id: ItemArg,
    rationale: Annotated[str | None, typer.Option("--rationale", help="Why (audited).")] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Graduate a shadow item to active before its thresholds are met (SME)."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        _moved(use.graduate(rt, actor, item_id, rationale=rationale), as_json, "graduated")


@app.command("drop")
@refusals
def drop(
    item_id: ItemArg,
    reason: ReasonOpt,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Drop a shadow item back to its case (SME)."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        _moved(use.drop(rt, actor, item_id, rationale=reason), as_json, "dropped")


@app.command("refute")
@refusals
def refute(
    item_id: ItemArg,
    reason: ReasonOpt,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Refute an item (SME): it is no longer recalled."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        _moved(use.refute(rt, actor, item_id, reason=reason), as_json, "refuted")


@app.command("revoke")
@refusals
def revoke(
    item_id: ItemArg,
    reason: ReasonOpt,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke an item (SME); everything derived from it goes to needs_reverification."""
    from caveat import app as use
    from caveat.app.views import item_view

    with use.serving(tenant, as_) as (rt, actor):
        res = use.revoke(rt, actor, item_id, reason=reason)
    if as_json:
        _echo_json({"item": item_view(res.item).model_dump(mode="json"), "reopened": res.reopened})
        return
    typer.echo(f"item {item_id} revoked")
    if res.reopened:
        typer.echo(f"  re-opened (needs_reverification): {', '.join(map(str, res.reopened))}")


@app.command("redact")
@refusals
def redact(
    item_id: ItemArg,
    reason: ReasonOpt,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Redact an item (SME): hidden everywhere, history included; nothing is deleted."""
    from caveat import app as use

    with use.serving(tenant, as_) as (rt, actor):
        use.redact(rt, actor, item_id, reason=reason)
    if as_json:
        _echo_json({"item": item_id, "redacted": True})
    else:
        typer.echo(f"item {item_id} redacted")


@app.command("cite")
@refusals
def cite(
    item_id: ItemArg,
    case_id: Annotated[str, typer.Option("--case", help="The open case it influenced.")],
    influence: Annotated[Influence, typer.Option("--influence", help="How much it mattered.")],
    expected: Annotated[
        str | None,
        typer.Option(
            "--expected", help="What the skill or rule prescribes (a JSON scalar or text)."
        ),
    ] = None,
    observed: Annotated[
        str | None,
        typer.Option("--observed", help="What was observed or done (with --expected)."),
    ] = None,
    rationale: Annotated[str | None, typer.Option("--rationale", help="Why.")] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Record that an item in the case's context influenced it: how, what it expected and
    what was observed (both or neither; a skill's compliance comes from them), why."""
    from caveat import app as use
    from caveat.app.views import citation_view

    with use.serving(tenant, as_) as (rt, actor):
        cited = use.cite(
            rt,
            actor,
            case_id,
            item_id,
            influence=influence.value,
            expected=None if expected is None else scalar(expected),
            observed=None if observed is None else scalar(observed),
            rationale=rationale,
        )
    if as_json:
        _echo_json(citation_view(cited))
    else:
        typer.echo(
            f"cited item {item_id} as {cited.influence} in {cited.case_id} "
            f"(compliance {cited.compliance})"
        )


# --- recall, the context guard, the belief diff ------------------------------------


def _provenance(item: dict[str, Any]) -> str:
    verified = f", verified by {item['verified_by']}" if item["verified_by"] else ""
    return (
        f"{item['subject']} · {item['scope']} · evidence {', '.join(item['evidence'])}"
        f"{verified} · {item['recorded_at'][:10]} · {item['state']}"
    )


def _conditions(conditions: list[dict[str, Any]], indent: str) -> list[str]:
    from caveat.app.views import condition_line

    return [condition_line(c, indent) for c in conditions]


def render_recall(data: dict[str, Any], budget: int | None) -> list[str]:
    """A ranked list with each item's provenance and the conditions that let it
    through; then, with explain, why each withheld item was withheld; with a budget,
    the packed text an agent pastes into its prompt."""
    from caveat.app.views import object_text

    if budget is not None and data["packed"] is not None:
        return [data["packed"]["text"]]
    lines = [
        f"block {b['scope']} block:{b['label']}: {' / '.join(b['text'].splitlines())}"
        for b in data.get("blocks", [])
    ]  # the core blocks in play (docs/blocks.md), one line each
    items = {r["item"]["id"]: r for r in data["items"]}
    passages = {p["id"]: p for p in data.get("knowledge", [])}
    merged = [
        items[o["id"]] if o["source"] == "memory" else passages[o["id"]]
        for o in data.get("order", [])
    ] or data["items"]
    ranked = [*data["pinned"], *merged]
    if not ranked:
        lines.append("no precedent applies now")
    for n, r in enumerate(ranked, 1):
        if r.get("source") == "knowledge":  # a runbook or postmortem passage (model §6)
            heading = " > ".join(r["heading_path"]) or r["document_id"]
            lines.append(f"{n}. [knowledge {r['ref']}] {heading}")
            where = f"passage of {r['document_id']} v{r['version']}"
            lines.append(f"   {where} · score {r['score']:.4f}")
            if r["uri"]:
                lines.append(f"   {r['uri']}")
            lines.extend(f"     {line}" for line in r["text"].splitlines() if line.strip())
            continue
        item = r["item"]
        pin = " (pinned)" if r["pinned"] else ""
        lines.append(f"{n}. [{item['id']}] {item['text'] or item['attribute']}{pin}")
        lines.append(
            f"   {item['kind']} {item['attribute']} = {object_text(item)} · score {r['score']:.4f}"
        )
        lines.append(f"   {_provenance(item)}")
        lines.extend(_conditions(r["conditions"], "     "))
    for w in data["withheld"]:
        state = (
            f" ({w['state']}{' in ' + w['scope'] if 'scope' in w else ''})" if "state" in w else ""
        )
        lines.append(f"withheld [{w['id']}] by {w['gate']}{state}: {w['text'] or w['attribute']}")
        lines.extend(_conditions(w["conditions"], "     "))
    counts = data.get("knowledge_counts")
    if counts and (counts["considered"] or counts["returned"]):
        lines.append(
            f"knowledge: {counts['returned']} passage(s) returned of {counts['considered']} "
            "considered"
        )
    if data["missing_observations"]:
        lines.append("observe to decide: " + ", ".join(data["missing_observations"]))
    for e in data["source_errors"]:
        asked = f" (asked for {', '.join(e['attributes'])})" if e["attributes"] else ""
        lines.append(f"source {e['source']} failed: {e['error']}{asked}")
    return lines


#: RecallIn's fields by ``caveat recall``'s option (where the name differs)
_FLAGS = {"subjects": "--subject", "observations": "--observe", "anchors": "--anchor"}
_FLAGS |= {"pinned": "--pin", "case": "--case"}


@app.command("recall")
@refusals
def recall_command(
    query: Annotated[str, typer.Argument(help="The symptom, as you would type it.")],
    subject: Annotated[
        list[str] | None, typer.Option("--subject", help="Affected subject (repeat).")
    ] = None,
    purpose: Annotated[str | None, typer.Option("--purpose", help="Purpose of use.")] = None,
    case_id: Annotated[str | None, typer.Option("--case", help="The open case asking.")] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Also say what was withheld and why.")
    ] = False,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="What we believed then (ISO 8601).")
    ] = None,
    budget: Annotated[
        int | None, typer.Option("--budget", help="Print the packed text within TOKENS.")
    ] = None,
    observe: Annotated[
        list[str] | None,
        typer.Option("--observe", help="Inline observation SUBJECT:ATTR=VALUE (repeat)."),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", help="How many items (default: the policy's recall.limit)."),
    ] = None,
    min_confidence: Annotated[
        float | None,
        typer.Option("--min-confidence", help="Leave out items below this confidence (0-1)."),
    ] = None,
    anchor: Annotated[
        list[str] | None,
        typer.Option("--anchor", help="Rank items anchored at AXIS:ID higher (repeat)."),
    ] = None,
    pin: Annotated[
        list[int] | None,
        typer.Option("--pin", help="An item wanted whatever its rank, still gated (repeat)."),
    ] = None,
    record: Annotated[
        bool, typer.Option("--record", help="Record the use of what is printed (needs --case).")
    ] = False,
    refresh: Annotated[
        bool,
        typer.Option(
            "--refresh",
            help="First pull what the conditions lack from the fact sources (needs --subject).",
        ),
    ] = False,
    refresh_deadline_ms: Annotated[
        int | None,
        typer.Option(
            "--refresh-deadline-ms",
            help="How long --refresh waits for the sources (default 500, "
            "CAVEAT_REFRESH_DEADLINE_MS).",
        ),
    ] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", help="The session asking (its working memory is yours)."),
    ] = None,
    sources: Annotated[
        str,
        typer.Option("--sources", help="Where answers come from: memory,knowledge."),
    ] = "memory",
    anchors_mode: Annotated[
        str,
        typer.Option(
            "--anchors-mode",
            help="extend: --anchor joins the default anchors; replace: only --anchor.",
        ),
    ] = "extend",
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Ask for precedents whose conditions hold now: gates first, then ranking; with
    --refresh, pull what their conditions lack from the fact sources first."""
    from pydantic import ValidationError

    from caveat import app as use
    from caveat.app._requests import RecallIn
    from caveat.app.views import recall_view, use_view
    from caveat.connectors._refresh_recall import recall as refreshed_recall

    if record and case_id is None:
        raise InputError("--record needs --case: a use is recorded in a case's context")
    if record and as_of is not None:
        raise InputError("--record and --as-of do not go together: a past answer is not used")
    try:
        body = RecallIn.model_validate(
            {
                "query": query,
                "subjects": subject,
                "purpose": purpose,
                "case": case_id,
                "observations": [observation_fields(o, "--observe") for o in observe or []],
                "as_of": instant(as_of, "--as-of"),
                "limit": limit,
                "explain": explain,
                "anchors": [anchor_fields(a, "--anchor") for a in anchor or []],
                "pinned": pin or [],
                "budget": budget,
                "min_confidence": min_confidence,
                "refresh": refresh,
                "refresh_deadline_ms": refresh_deadline_ms,
                "session": session,
                "sources": [s.strip() for s in sources.split(",") if s.strip()],
                "anchors_mode": anchors_mode,
            }
        )
        request = body.to_request()
    except ValidationError as exc:  # said with the option's name
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "query"
        flag = _FLAGS.get(field, "--" + field.replace("_", "-"))
        raise InputError(f"{flag}: {first['msg']}", attribute=flag) from exc
    with use.serving(tenant, as_, embedder="settings") as (rt, actor):
        done = refreshed_recall(rt, actor, body)
        res = done.result
        used = None
        if record:  # what was printed: the packed items with a budget, else every item
            shown = (
                list(res.packed.ids)
                if res.packed is not None
                else [r.item.id for r in (*res.pinned, *res.items)]
            )
            used = use.record_use(rt, actor, request, shown)
    data = recall_view(res, done.source_errors)
    if used is not None:
        data["recorded"] = use_view(used)
    if as_json:
        _echo_json(data)
        return
    for line in render_recall(data, budget):
        typer.echo(line)
    if used is not None:
        typer.echo(f"recorded the use of {len(used.used)} items in case {case_id}")


@context_app.command("check")
@refusals
def context_check(
    items: Annotated[list[int], typer.Argument(help="Item ids in the agent's context.")],
    case_id: Annotated[str | None, typer.Option("--case", help="The case they serve.")] = None,
    observe: Annotated[
        list[str] | None,
        typer.Option("--observe", help="Inline observation SUBJECT:ATTR=VALUE (repeat)."),
    ] = None,
    session: Annotated[
        str | None, typer.Option("--session", help="The session asking (its working memory).")
    ] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Which of these items may still be used, by recall's rule (revoked, refuted,
    re-opened, and those whose conditions no longer hold are dropped)."""
    from caveat import app as use
    from caveat.app.views import condition_line, context_view

    given = [observation(o) for o in observe or []]
    with use.serving(tenant, as_) as (rt, actor):
        check = use.check_context(
            rt, actor, items, case_id=case_id, record=True, observations=given, session=session
        )
    data = context_view(check)
    if as_json:
        _echo_json(data)
        return
    typer.echo(f"usable: {', '.join(map(str, check.usable)) or 'none'}")
    for item_id, why in check.dropped.items():
        typer.echo(f"dropped {item_id}: {why}")
        for c in data["conditions"].get(str(item_id), []):
            typer.echo(condition_line(c))


@app.command("diff")
@refusals
def diff(
    from_: Annotated[str, typer.Option("--from", help="From this instant (ISO 8601).")],
    to: Annotated[str, typer.Option("--to", help="To this instant (ISO 8601).")],
    subject: Annotated[
        list[str] | None, typer.Option("--subject", help="Only these subjects (repeat).")
    ] = None,
    purpose: Annotated[str | None, typer.Option("--purpose", help="Purpose of use.")] = None,
    tenant: TenantOpt = None,
    as_: AsOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What became and stopped being recallable between two instants, with causes."""
    from caveat import app as use
    from caveat.app.views import diff_view

    start, end = instant(from_, "--from"), instant(to, "--to")
    assert start is not None and end is not None
    with use.serving(tenant, as_) as (rt, actor):
        res = use.diff(rt, actor, from_=start, to=end, subjects=subject or None, purpose=purpose)
    data = diff_view(res)
    if as_json:
        _echo_json(data)
        return
    for what in ("became", "stopped"):
        entries = data[what]
        typer.echo(f"{what} recallable: {len(entries)}")
        for e in entries:
            typer.echo(f"  item {e['item']}: {e['cause']} {json.dumps(e['detail'], default=str)}")
