"""Output models: what a caller sees, separate from storage rows, with one JSON form.

Every door prints these (the CLI's ``--json`` and text, the HTTP API, the MCP tools,
the SME pages), so an item looks the same wherever it is read. An item as a caller
sees it carries no ``acl`` and no ``tenant_id``: who may read it is the store's
business, and the tenant is the caller's own.

The rendering rules live here and nowhere else (docs/http.md, "Values and scopes"):

- A typed value (a fact, an observation behind a condition, an event's change) is
  ``{"type": T, "value": V, "literal": L}``: ``V`` is JSON's own value where JSON has
  the type (``int`` and ``float`` a number, ``bool`` ``true``/``false``, ``string``
  and ``enum`` a string) and the predicate literal where it has not (``version``
  ``"v3.1"``, ``duration`` ``"15m"``, ``timestamp`` ``"2026-12-03T10:00:00Z"``);
  ``L`` is always the predicate language's literal, as a condition spells it
  (``0.12``, ``true``, ``"canary"``, ``v3.1``, ``15m``), printed by
  ``predicates.typed_literal``. The store's internal encoding (``{"t", "v"}``)
  never reaches an answer.
- An item's ``object`` is what a writer gives to write it again: the value as
  above (or the raw JSON scalar of an undeclared attribute), or the evidence id
  it refers to; ``object_type`` says which (a type name, ``evidence``, or null).
- A scope or a facet is the string ``"axis:id"`` (``"case:INC-902"``,
  ``"tenant:*"``), the spelling every write input takes.
- A person reads the literal (``object_text``, ``condition_line``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Protocol

import claims
import factgen
import lifecycle
import recall
from caveat.answers._answers import ItemView, JSONScalar
from caveat.app._blocks import block_view
from caveat.app._review import ReviewQueue
from caveat.app._usecases import EventResult, ImportOutcome
from predicates import TYPE_NAMES, Truth, TypedValue, ValueType, decode, typed_literal
from predicates.errors import ValueTypeError

__all__ = [
    "ItemView",
    "SourceError",
    "audit_view",
    "case_view",
    "citation_view",
    "closed_view",
    "condition_line",
    "condition_view",
    "context_view",
    "diff_view",
    "dossier_view",
    "enforcement_view",
    "event_json",
    "event_view",
    "fact_json",
    "item_view",
    "key_view",
    "object_text",
    "plain",
    "preview_view",
    "recall_view",
    "review_view",
    "sweep_view",
    "typed_literal",
    "typed_value",
    "use_view",
    "withheld_view",
]

#: The value types JSON carries natively; the others are given as their literal.
_NATIVE = frozenset({"int", "float", "bool", "string", "enum"})


def typed_value(value: TypedValue, vtype: ValueType) -> dict[str, Any]:
    """A typed value as every answer shows it: ``{"type", "value", "literal"}`` (the
    module's rules: JSON's own value where JSON has the type, else the literal; the
    predicate literal beside it)."""
    literal = typed_literal(value)
    shown: JSONScalar
    if vtype.name in _NATIVE:
        assert isinstance(value, int | float | bool | str)
        shown = value
    else:
        shown = literal
    return {"type": vtype.name, "value": shown, "literal": literal}


def _object(stored: dict[str, Any]) -> tuple[JSONScalar, str | None]:
    """An item's stored object as a writer gives it, and what it is."""
    if "evidence" in stored:
        return str(stored["evidence"]), "evidence"
    value = stored.get("value")
    if isinstance(value, dict) and "t" in value:
        typed = typed_value(*decode(value))
        return typed["value"], typed["type"]
    assert isinstance(value, int | float | bool | str)
    return value, None


def object_text(view: ItemView | dict[str, Any]) -> str:
    """An item's object as a person reads it: the predicate literal of a typed value,
    ``evidence E-901`` for an evidence reference, JSON for an undeclared one."""
    data = view if isinstance(view, dict) else view.model_dump(mode="json")
    obj, kind = data["object"], data["object_type"]
    if kind == "evidence":
        return f"evidence {obj}"
    if kind in ("version", "duration", "timestamp"):
        return str(obj)
    return json.dumps(obj, ensure_ascii=False)


def sweep_view(done: lifecycle.SweepResult) -> dict[str, Any]:
    """What a sweep did: the items archived, expired, and working memory archived."""
    return {
        "archived": list(done.archived),
        "expired": list(done.expired),
        "working_memory": list(done.working_memory),
    }


def condition_view(c: lifecycle.ConditionValue) -> dict[str, Any]:
    """One condition's value and the observation it used (its value rendered by
    ``typed_value``, its instant as a timestamp literal, its source and, for a pulled
    one, its ``provenance``: the source's query or pointer and the sample's time), or
    ``observed: null``."""
    obs = c.observed
    return {
        "condition": c.condition,
        "list": c.list,
        "value": c.value.name,
        "subject": c.subject,
        "attribute": c.attribute,
        "observed": None
        if obs is None
        else {
            **typed_value(obs.value, obs.vtype),
            "observed_at": typed_literal(obs.observed_at),
            "source": obs.source,
            "inline": obs.inline,
            "provenance": None if obs.provenance is None else dict(obs.provenance),
        },
    }


def plain(value: Any) -> Any:
    """Stored JSON (an audit row's detail) as an answer shows it: every encoded value
    ``{"t", "v"}`` inside it rendered by ``typed_value``, every anchor ``{"axis", "id"}``
    as ``"axis:id"``; everything else as it is."""
    if isinstance(value, list):
        return [plain(v) for v in value]
    if not isinstance(value, dict):
        return value
    if value.keys() == {"t", "v"} and value["t"] in TYPE_NAMES:
        try:
            return typed_value(*decode(value))
        except ValueTypeError:
            return value
    if value.keys() == {"axis", "id"} and all(isinstance(v, str) for v in value.values()):
        return f"{value['axis']}:{value['id']}"
    return {k: plain(v) for k, v in value.items()}


def audit_view(entry: claims.AuditEntryRecord) -> dict[str, Any]:
    """An audit row: its fields, its instant, its detail through ``plain``."""
    return {**asdict(entry), "at": entry.at.isoformat(), "detail": plain(entry.detail)}


def _blocks(c: lifecycle.ConditionValue) -> bool:
    """Whether a condition keeps its item from applying: a required one not TRUE, an
    excluded one not FALSE."""
    return c.value is not (Truth.TRUE if c.list == "required" else Truth.FALSE)


def withheld_view(w: recall.Withheld) -> dict[str, Any]:
    """A withheld item, compactly (model §6): id, subject, attribute, text, the gate; for
    ``activated_version`` the state that withheld it (and the scope, for an item of
    another case); the conditions that failed or were UNKNOWN. Never the whole record:
    an explain is read by a model, and its size is its cost."""
    out: dict[str, Any] = {
        "id": w.item.id,
        "subject": w.item.subject,
        "attribute": w.item.attribute,
        "text": w.item.text,
        "gate": w.gate,
    }
    if w.gate == "activated_version":
        out["state"] = w.state
        if w.state == "case":
            out["scope"] = f"{w.item.scope_axis}:{w.item.scope_id}"
        elif w.item.kind == "skill" and w.item.release_state != "released":
            out["release_state"] = w.item.release_state
    out["conditions"] = [condition_view(c) for c in w.conditions if _blocks(c)]
    return out


def item_view(record: claims.ItemRecord) -> ItemView:
    """The caller's view of a stored item: no ``acl``, no ``tenant_id``."""
    obj, object_type = _object(record.object)
    return ItemView(
        id=record.id,
        kind=record.kind,
        subject=record.subject,
        attribute=record.attribute,
        object=obj,
        object_type=object_type,
        required=list(record.required),
        excluded=list(record.excluded),
        evidence=list(record.evidence),
        derived_from=list(record.derived_from),
        epistemic=record.epistemic,
        content_type=record.content_type,
        scope=f"{record.scope_axis}:{record.scope_id}",
        facets=[f"{axis}:{anchor}" for axis, anchor in record.facets],
        purposes=list(record.purposes),
        text=record.text,
        salience=record.salience,
        valid_from=record.valid_from,
        valid_to=record.valid_to,
        recorded_at=record.recorded_at,
        superseded_at=record.superseded_at,
        superseded_by=record.superseded_by,
        state=record.state,
        verified_by=record.verified_by,
        verified_at=record.verified_at,
        version=record.version,
        release_state=record.release_state,
        created_by=record.created_by,
    )


def _item(record: claims.ItemRecord) -> dict[str, Any]:
    return item_view(record).model_dump(mode="json")


def _finite(parts: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in parts.items() if not math.isnan(v)}


class SourceError(Protocol):
    """A fact source a refresh asked that failed or timed out (``caveat.connectors.
    SourceFailure``): its name, the error, the attributes it was asked for."""

    @property
    def source(self) -> str: ...
    @property
    def error(self) -> str: ...
    @property
    def attributes(self) -> Sequence[str]: ...


def recall_view(
    result: recall.RecallResult, source_errors: Sequence[SourceError] = ()
) -> dict[str, Any]:
    """A recall's answer: ranked items (score parts, the condition values that let each
    through), pinned items, with explain the withheld items and their gates, and, for a
    recall with ``refresh``, each source that failed or timed out (``source_errors``,
    beside ``missing_observations``: why an observation is still missing)."""

    def recalled(r: recall.RecalledItem) -> dict[str, Any]:
        return {
            "source": "memory",
            "item": _item(r.item),
            "score": r.score,
            "parts": _finite(r.parts),
            "conditions": [condition_view(c) for c in r.conditions],
            "checked": r.checked,
            "pinned": r.pinned,
        }

    packed = result.packed
    return {
        "items": [recalled(r) for r in result.items],
        "pinned": [recalled(r) for r in result.pinned],
        "knowledge": [passage_view(p) for p in result.knowledge],
        "order": [{"source": src, "id": i} for src, i in result.order],
        "knowledge_counts": {
            "considered": result.knowledge_considered,
            "returned": len(result.knowledge),
        },
        "withheld": [withheld_view(w) for w in result.withheld],
        "missing_observations": list(result.missing_observations),
        "source_errors": [
            {"source": e.source, "error": e.error, "attributes": list(e.attributes)}
            for e in source_errors
        ],
        "channels": list(result.channels),
        "not_embedded": result.not_embedded,
        "dense_search": result.dense_search,
        "anchors": [
            {"axis": a.axis, "id": a.id, "weight": a.weight, "origin": a.origin}
            for a in result.anchors
        ],
        "packed": None
        if packed is None
        else {
            "text": packed.text,
            "tokens": packed.tokens,
            "budget": packed.budget,
            "items": list(packed.ids),
            "omitted": list(packed.omitted),
            "blocks": [_block_ref(result, i) for i in packed.blocks],
            "blocks_omitted": [_block_ref(result, i) for i in packed.blocks_omitted],
            "knowledge": list(packed.knowledge),
            "knowledge_omitted": list(packed.knowledge_omitted),
        },
        "blocks": [block_view(b) for b in result.blocks],
    }


def passage_view(p: recall.RecalledPassage) -> dict[str, Any]:
    """A knowledge passage a recall returned (model §6), tagged ``source: knowledge``:
    its id, its ref (what an item cites as evidence), its document, version, heading
    path, fragment, URI and title, its text, its score and score parts, and the items
    the caller may see that cite it (``cited_by``)."""
    return {
        "source": "knowledge",
        "id": p.id,
        "ref": p.ref,
        "document_id": p.document_id,
        "version": p.version,
        "heading_path": list(p.heading_path),
        "fragment": p.fragment,
        "uri": p.uri,
        "title": p.title,
        "text": p.text,
        "score": p.score,
        "parts": _finite(p.parts),
        "recorded_at": p.recorded_at.isoformat(),
        "cited_by": list(p.cited_by),
    }


def _block_ref(result: recall.RecallResult, item_id: int) -> dict[str, Any]:
    """A packed (or omitted) core block as ``{label, scope, item_id}``."""
    block = next(b for b in result.blocks if b.item_id == item_id)
    return {"label": block.label, "scope": block.anchor, "item_id": block.item_id}


def context_view(check: recall.ContextCheck) -> dict[str, Any]:
    """The context guard's answer: usable ids, dropped ids with the reason, and the
    condition values of each item dropped as ``applicability``."""
    return {
        "usable": list(check.usable),
        "dropped": {str(i): why for i, why in check.dropped.items()},
        "checked": {str(i): ok for i, ok in check.checked.items()},
        "conditions": {
            str(i): [condition_view(c) for c in values] for i, values in check.conditions.items()
        },
    }


def diff_view(diff: recall.BeliefDiff) -> dict[str, Any]:
    """The belief diff: what became and stopped being recallable, each with its cause."""

    def entry(e: recall.DiffEntry) -> dict[str, Any]:
        return {"item": e.item_id, "cause": e.cause, "detail": e.detail}

    return {
        "from": diff.from_.isoformat(),
        "to": diff.to.isoformat(),
        "subjects": None if diff.subjects is None else list(diff.subjects),
        "purpose": diff.purpose,
        "became": [entry(e) for e in diff.became],
        "stopped": [entry(e) for e in diff.stopped],
    }


def fact_json(fact: factgen.TypedFact) -> dict[str, Any]:
    """A stored fact: subject, attribute, its value (``typed_value``: type, value,
    literal), when it was observed and its source."""
    return {
        "subject": fact.subject,
        "attribute": fact.attribute,
        **typed_value(fact.value, fact.vtype),
        "observed_at": typed_literal(fact.observed_at),
        "source": fact.source,
    }


def event_json(event: factgen.Event) -> dict[str, Any]:
    """A recorded event: each change by attribute as a ``typed_value``."""
    return {
        "id": event.id,
        "type": event.type,
        "subjects": list(event.subjects),
        "changes": {a: typed_value(v, t) for a, (v, t) in event.changes.items()},
        "principal": event.principal,
        "occurred_at": typed_literal(event.occurred_at),
        "source": event.source,
        "external_id": event.external_id,
    }


def _handled(outcome: lifecycle.EventOutcome) -> dict[str, Any]:
    return {
        "matched": list(outcome.matched),
        "needs_reverification": list(outcome.affected),
        "verify_on_next_use": list(outcome.unaffected),
    }


def event_view(result: EventResult | ImportOutcome) -> dict[str, Any]:
    """Recorded events (and facts, for an import) with what their handling re-opened."""
    if isinstance(result, EventResult):
        return {"events": [{**event_json(result.event), **_handled(result.outcome)}]}
    r = result.result
    return {
        "facts": [fact_json(f) for f in r.facts],
        "events": [
            {**event_json(e), **_handled(h)} for e, h in zip(r.events, result.handled, strict=True)
        ],
        "skipped": [{"key": s.key, "reason": s.reason, "line": s.line} for s in r.skipped],
    }


def case_view(case: lifecycle.CaseRecord) -> dict[str, Any]:
    """A case: id, subjects, status and outcome."""
    return {
        "id": case.id,
        "subjects": list(case.subjects),
        "status": case.status,
        "outcome": case.outcome,
        "opened_at": case.opened_at.isoformat(),
        "closed_at": None if case.closed_at is None else case.closed_at.isoformat(),
    }


def closed_view(res: lifecycle.CloseResult) -> dict[str, Any]:
    """A closed case and the signal each cited item got (``support``/``counter``), by id."""
    return {
        **case_view(res.case),
        "signals": {str(i): v for i, v in res.signals.items()},
        "confidence": {
            str(i): {"before": before, "after": after}
            for i, (before, after) in res.confidence.items()
        },
    }


def use_view(done: recall.UseRecord) -> dict[str, Any]:
    """What record_use recorded: the ids used, and each refused id with the reason."""
    return {"used": list(done.used), "refused": {str(k): v for k, v in done.refused.items()}}


def citation_view(cited: lifecycle.Citation) -> dict[str, Any]:
    """A citation of an item in a case."""
    return {
        "case": cited.case_id,
        "item": cited.item_id,
        "influence": cited.influence,
        "compliance": cited.compliance,
        "cited_at": cited.cited_at.isoformat(),
        "cited_by": cited.cited_by,
        "expected": cited.expected,
        "observed": cited.observed,
        "rationale": cited.rationale,
        "signal": cited.signal,
        "signalled_at": None if cited.signalled_at is None else cited.signalled_at.isoformat(),
        "kind": cited.kind,
        "subject": cited.subject,
        "attribute": cited.attribute,
    }


def enforcement_view(e: lifecycle.Enforcement) -> dict[str, Any]:
    """A skill's enforcement level as an SME set it (``previous``: the level before)."""
    return {
        "item": e.item_id,
        "level": e.level,
        "previous": e.previous,
        "set_at": e.set_at.isoformat(),
        "set_by": e.set_by,
        "reason": e.reason,
    }


def condition_line(c: dict[str, Any], indent: str = "    ") -> str:
    """One condition of a recall's JSON form as a person reads it: the list, the
    predicate, its value, and the observation behind it (or why there is none), with
    the query or pointer a source pulled it by (``from prom: max by (service) (...)``)."""
    obs = c["observed"]
    if obs is None:
        seen = "no fresh observation"
    else:
        origin = "given inline" if obs["inline"] else f"from {obs['source'] or 'unknown source'}"
        how = (obs.get("provenance") or {}).get("query") or (obs.get("provenance") or {}).get(
            "pointer"
        )
        if how and not obs["inline"]:
            origin += f": {how}"
        seen = (
            f"observed {obs['literal']} at {obs['observed_at'][:16].replace('T', ' ')} ({origin})"
        )
    return f"{indent}{c['list']:<8} {c['condition']:<40} -> {c['value']:<7} {seen}"


def key_view(k: lifecycle.PromotionKey) -> dict[str, Any]:
    """A promotion key (candidate or contested): its key, its cases, every distinct value
    with the ids of the items holding it, and each item with its case and state."""
    return {
        "subject": k.subject,
        "attribute": k.attribute,
        "kind": k.kind,
        "required": list(k.required),
        "excluded": list(k.excluded),
        "cases": list(k.cases),
        "values": {v: list(ids) for v, ids in k.values.items()},
        "items": [
            {"id": i.id, "case_id": i.case_id, "state": i.state, "value": i.value} for i in k.items
        ],
    }


def review_view(queue: ReviewQueue) -> dict[str, Any]:
    """The review queue: shadow items with what the next close would do, re-opened items
    with their cause, contested keys with every value and its holders, promotion
    candidates, refusals by reason code, and the cases awaiting an outcome."""
    return {
        "shadow": [
            {**asdict(r.stats), "agreement": r.stats.agreement, "next_close": r.next_close}
            for r in queue.shadow
        ],
        "policy": queue.policy.model_dump(mode="json"),
        "reopened": [asdict(r) for r in queue.reopened],
        "contested": [key_view(k) for k in queue.contested],
        "candidates": [key_view(k) for k in queue.candidates],
        "refusals": [
            {
                "code": g.code,
                "gate": g.gate,
                "count": g.count,
                "last_at": g.last_at,
                "subjects": list(g.subjects),
                "recent": [asdict(r) for r in g.refusals[:5]],
            }
            for g in queue.refusals
        ],
        "refusals_since": queue.refusals_since,
        "awaiting": [asdict(c) for c in queue.awaiting],
        "refusals_total": queue.refusal_count,
        "false_now": [
            {
                "item_id": f.item_id,
                "subject": f.subject,
                "attribute": f.attribute,
                "text": f.text,
                "at": f.at,
                "conditions": [_condition_now(c) for c in f.conditions],
            }
            for f in queue.false_now
        ],
    }


def _condition_now(c: lifecycle.ConditionNow) -> dict[str, Any]:
    return {
        **condition_view(c.value),
        "age_seconds": None if c.age is None else c.age.total_seconds(),
        "to_observe": c.to_observe,
    }


def _node(n: lifecycle.LineageNode) -> dict[str, Any]:
    return asdict(n)


def dossier_view(d: lifecycle.Dossier) -> dict[str, Any]:
    """An item's dossier: the item, each condition now (value, observation, age, what to
    observe), evidence and links, confidence, citations, lineage and history."""
    drawn = _visible(d.lineage)
    return {
        "item": item_view(d.item).model_dump(mode="json"),
        "at": d.at.isoformat(),
        "conditions": [_condition_now(c) for c in d.conditions],
        "false_now": [c.value.condition for c in d.false_now],
        "evidence": [asdict(e) for e in d.evidence],
        "links": [asdict(link) for link in d.links],
        "confidence": d.confidence,
        "citations": [asdict(c) for c in d.citations],
        "lineage": {
            "ancestors": [_node(n) for n in d.lineage.ancestors],
            "descendants": [_node(n) for n in d.lineage.descendants],
            "edges": [[a, b] for a, b in d.lineage.graph.edges if {a, b} <= drawn],
        },
        "actions": list(d.actions),
        "enforcement": None if d.enforcement is None else enforcement_view(d.enforcement),
        "binding": d.binding,
        "history": [
            {
                "seq": h.seq,
                "at": h.at.isoformat(),
                "actor": h.actor,
                "action": h.action,
                "code": h.code,
                "detail": plain(h.detail),
            }
            for h in d.history
        ],
    }


def _visible(lin: lifecycle.Lineage) -> set[int]:
    return {lin.item.id} | {n.id for n in (*lin.ancestors, *lin.descendants)}


def preview_view(p: lifecycle.ActionPreview) -> dict[str, Any]:
    """What an action would do: the state it leads to, its effects, the descendants a
    revocation re-opens, or the refusal it would meet."""
    return {
        "action": p.action,
        "item": p.item_id,
        "from_state": p.from_state,
        "to_state": p.to_state,
        "effects": list(p.effects),
        "reopens": [_node(n) for n in p.reopens],
        "refusal": None if p.refusal is None else {"code": p.refusal[0], "detail": p.refusal[1]},
    }
