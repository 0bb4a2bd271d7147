"""Running a scenario: a fresh isolated store, a virtual clock, every step for real."""

from __future__ import annotations

import functools
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import claims
import factgen
import recall
from caveat import app, connectors, db
from caveat.app._input import first_error
from caveat.app._requests import RecallIn
from caveat.app.views import condition_view, withheld_view
from caveat.replay._models import (
    AttachEvidenceArgs,
    AuditVerifyExpect,
    BlockArgs,
    CheckContextArgs,
    CheckContextExpect,
    CiteArgs,
    CloseCaseArgs,
    DiffArgs,
    DiffExpect,
    DocsArgs,
    EventArgs,
    EvidenceArgs,
    ExpectStateArgs,
    HookArgs,
    HookExpect,
    ObserveArgs,
    OpenCaseArgs,
    PromoteArgs,
    RecallArgs,
    RecallExpect,
    RefuteArgs,
    RevokeArgs,
    Scenario,
    Step,
    VerifyArgs,
    WriteArgs,
    WriteExpect,
)
from caveat.replay._report import Failure, ScenarioResult, StepRecord
from caveat.settings import Settings
from predicates import ValueType
from predicates.errors import CaseNotOpen, CaveatError, InputError
from recall._blocks import render_blocks

__all__ = ["FROM_SETTINGS", "Replayer", "run_scenario", "settings_embedder"]


class _FromSettings(Enum):
    FROM_SETTINGS = "settings"


FROM_SETTINGS = _FromSettings.FROM_SETTINGS
"""The default embedder of a run: ``settings_embedder()``."""


@functools.cache
def _embedder_named(name: str, cache_dir: Path) -> recall.Embedder | None:
    return recall.make_embedder(name, cache_dir=cache_dir)


def settings_embedder() -> recall.Embedder | None:
    """The embedder ``Settings().embedder`` names (``CAVEAT_EMBEDDER``), built once per
    process for each name; ``None`` for ``none`` (no dense channel)."""
    settings = Settings()
    return _embedder_named(settings.embedder, settings.models_dir)


def _resolve(embedder: recall.Embedder | _FromSettings | None) -> recall.Embedder | None:
    return settings_embedder() if isinstance(embedder, _FromSettings) else embedder


@dataclass
class _Outcome:
    """What one step did: a one-line summary and a JSON-ready result (or an error)."""

    summary: str
    result: dict[str, Any] = field(default_factory=dict)
    error: CaveatError | None = None


class Replayer:
    """Executes a scenario's steps against one store, on the scenario's virtual clock.

    With an ``embedder``, every recall step first drains the embedding queue, so the
    dense channel sees every item written so far whatever the timing."""

    def __init__(self, scenario: Scenario, runtime: app.Runtime) -> None:
        self.scenario = scenario
        self.rt = runtime.for_tenant(scenario.tenant)
        self.sessions = self.rt.sessions
        self.embedder = self.rt.embedder
        self.tenant = scenario.tenant
        self.refs: dict[str, int | None] = {}
        self.ids: dict[int, str] = {}
        self.case_id: str | None = None
        self.actors: dict[str, claims.Actor] = {}
        self.now = scenario.start
        self.warnings: list[str] = []

    # --- set-up ------------------------------------------------------------

    def setup(self) -> None:
        """Tenant, policy, principals, schema and entities, as the scenario declares them."""
        sc = self.scenario
        overrides: dict[str, Any] = {}
        if sc.policy.writes is not None:
            overrides["writes"] = sc.policy.writes
        if sc.policy.permission_refusal_ttl is not None:
            overrides["permission_refusal_ttl"] = sc.policy.permission_refusal_ttl
        if sc.policy.working_memory_ttl is not None:
            overrides["working_memory_ttl"] = sc.policy.working_memory_ttl
        if sc.policy.shadow is not None:
            overrides["shadow"] = {
                k: v for k, v in sc.policy.shadow.model_dump().items() if v is not None
            }
        policy = factgen.TenantPolicy.model_validate(overrides)
        admin = app.LOCAL_ADMIN
        rt, now = self.rt, self.now
        app.declare_tenant(rt, admin, policy=policy, now=now)
        for pid, p in sc.principals.items():
            self.actors[pid] = app.register_principal(
                rt,
                admin,
                pid,
                role=p.role,
                capabilities=p.capabilities,
                clearance=p.clearance,
                team=p.team,
            )
        app.declare_schema(
            rt,
            admin,
            [
                factgen.AttributeSpec(
                    attribute=e.attribute,
                    vtype=ValueType.parse(e.type),
                    unit=e.unit,
                    max_age=e.max_age,
                    content_type=e.content_type,
                )
                for e in sc.schema_
            ],
            now=now,
        )
        app.import_entities(
            rt,
            admin,
            [
                factgen.EntitySpec(
                    id=e.id,
                    kind=e.kind,
                    aliases=tuple(e.aliases),
                    edges=tuple(
                        [("depends_on", d) for d in e.depends_on]
                        + [("runs_on", r) for r in e.runs_on]
                    ),
                )
                for e in sc.entities
            ],
            now=now,
        )
        if sc.hooks is not None:
            text = json.dumps({"hooks": sc.hooks.model_dump(mode="json")})
            app.load_sources(rt, admin, text, source_name="<scenario hooks>", now=now)

    # --- steps -------------------------------------------------------------

    def run_step(self, step: Step) -> tuple[StepRecord, list[Failure]]:
        """Execute one step and check its expectations."""
        self.now = step.at
        handler: Callable[[Step], _Outcome] = getattr(self, f"_do_{step.action}")
        try:
            outcome = handler(step)
        except CaveatError as exc:
            outcome = _Outcome(f"refused: {exc.code}: {exc.message}", {}, exc)
        failures = self._check(step, outcome)
        result = dict(outcome.result)
        if outcome.error is not None:
            result["error"] = outcome.error.to_dict()
        record = StepRecord(
            index=step.index,
            line=step.line,
            action=step.action,
            at=step.at,
            actor=step.actor,
            summary=outcome.summary,
            ok=not failures,
            result=result,
        )
        return record, failures

    def _actor(self, step: Step) -> claims.Actor:
        return self.actors[step.actor]

    def _item(self, ref: str) -> int:
        item_id = self.refs.get(ref)
        if item_id is None:
            raise InputError(f"{ref!r} names no stored item (its write was refused)", ref=ref)
        return item_id

    def _ref(self, item_id: int) -> str:
        return self.ids.get(item_id, f"#{item_id}")

    def _do_observe(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, ObserveArgs)
        facts = app.observe(
            self.rt,
            self._actor(step),
            [
                factgen.Observation(o.subject, o.attribute, o.value, o.source)
                for o in args.observations
            ],
            now=self.now,
        )
        shown = ", ".join(f"{f.subject} {f.attribute}={f.value}" for f in facts)
        return _Outcome(f"observes {shown}", {"facts": len(facts)})

    def _do_evidence(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, EvidenceArgs)
        app.add_evidence(
            self.rt,
            self._actor(step),
            args.id,
            title=args.title,
            uri=args.uri,
            readers=args.readers or [],
            deny=args.deny,
            classification=args.classification,
            now=self.now,
        )
        who = f" (readers: {', '.join(args.readers)})" if args.readers else ""
        return _Outcome(f"registers evidence {args.id}{who}", {"evidence": args.id})

    def _do_open_case(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, OpenCaseArgs)
        case = app.open_case(
            self.rt, self._actor(step), args.id, subjects=args.subjects, now=self.now
        )
        self.case_id = case.id
        return _Outcome(
            f"opens case {case.id} about {', '.join(case.subjects) or 'no subject'}",
            {"case": case.id},
        )

    def _do_close_case(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, CloseCaseArgs)
        res = app.close_case(
            self.rt, self._actor(step), args.id, outcome=args.outcome, now=self.now
        )
        if self.case_id == args.id:
            self.case_id = None
        moves = [
            (what, [self._ref(i) for i in ids])
            for what, ids in (
                ("demotes", res.demoted),
                ("graduates", res.graduated),
                ("drops", res.dropped),
            )
            if ids
        ]
        tail = "".join(f"; {what} {', '.join(refs)}" for what, refs in moves)
        return _Outcome(
            f"closes case {args.id} as {args.outcome}{tail}",
            {
                "case": args.id,
                "signals": {self._ref(i): v for i, v in res.signals.items()},
                **{what: refs for what, refs in moves},
            },
        )

    def _do_write(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, WriteArgs)
        self.refs[args.ref] = None
        if args.scope is not None:
            scope = claims.Anchor(axis=args.scope.axis, id=args.scope.id)
        elif self.case_id is not None:
            scope = claims.Anchor(axis="case", id=self.case_id)
        else:
            raise InputError("a write outside an open case needs a scope", ref=args.ref)
        request = claims.ItemWrite(
            kind=args.kind,
            subject=args.subject,
            attribute=args.attribute,
            object=args.object,
            required=args.required,
            excluded=args.excluded,
            evidence=args.evidence,
            derived_from=[self._item(r) for r in args.derived_from],
            epistemic=args.epistemic or "observation",
            content_type=args.content_type,
            scope=scope,
            purposes=args.purposes,
            text=args.text,
            valid_from=args.valid_from,
            valid_to=args.valid_to,
        )
        try:
            result = app.write(self.rt, self._actor(step), request, now=self.now)
        except CaveatError as exc:
            gate = exc.detail.get("gate")
            return _Outcome(
                f"write {args.ref} rejected{f' at {gate}' if gate else ''}: {exc.code}",
                {"outcome": "rejected", "code": exc.code, "gate": gate, "message": exc.message},
                exc,
            )
        self.refs[args.ref] = result.item_id
        self.ids.setdefault(result.item_id, args.ref)
        return _Outcome(
            f"write {args.ref} {result.outcome} (item {result.item_id}, state {result.state})",
            {"outcome": result.outcome, "item": result.item_id, "state": result.state},
        )

    def _do_verify(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, VerifyArgs)
        item = app.verify(self.rt, self._actor(step), self._item(args.item), now=self.now)
        return _Outcome(f"verifies {args.item}", {"state": item.state})

    def _do_promote(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, PromoteArgs)
        item = app.promote(
            self.rt, self._actor(step), self._item(args.item), to=args.to, now=self.now
        )
        return _Outcome(f"promotes {args.item} to {item.state}", {"state": item.state})

    def _do_refute(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, RefuteArgs)
        item = app.refute(
            self.rt, self._actor(step), self._item(args.item), reason=args.reason, now=self.now
        )
        return _Outcome(f"refutes {args.item}: {args.reason}", {"state": item.state})

    def _do_revoke(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, RevokeArgs)
        res = app.revoke(
            self.rt, self._actor(step), self._item(args.item), reason=args.reason, now=self.now
        )
        reopened = [self._ref(i) for i in res.reopened]
        tail = f"; re-opens {', '.join(reopened)}" if reopened else ""
        return _Outcome(
            f"revokes {args.item}: {args.reason}{tail}",
            {"state": res.item.state, "reopened": reopened},
        )

    def _do_cite(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, CiteArgs)
        if self.case_id is None:
            raise CaseNotOpen("no case is open to cite in", item=args.item)
        cited = app.cite(
            self.rt,
            self._actor(step),
            self.case_id,
            self._item(args.item),
            influence=args.influence,
            expected=args.expected,
            observed=args.observed,
            rationale=args.rationale,
            now=self.now,
        )
        return _Outcome(
            f"cites {args.item} as {cited.influence} in {cited.case_id} "
            f"(compliance {cited.compliance})",
            {"influence": cited.influence, "compliance": cited.compliance},
        )

    def _do_event(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, EventArgs)
        handled = app.record_event(
            self.rt,
            self._actor(step),
            type=args.type,
            subjects=args.subjects,
            changes=args.changes,
            principal=args.principal,
            source="replay",
            now=self.now,
        )
        event, res = handled.event, handled.outcome
        affected = [self._ref(i) for i in res.affected]
        waiting = [self._ref(i) for i in res.unaffected]
        changed = ", ".join(f"{a}={v}" for a, (v, _) in event.changes.items())
        summary = f"{args.type} event on {', '.join(event.subjects) or args.principal}"
        summary += f" ({changed})" if changed else ""
        summary += f": {len(res.matched)} matched"
        if affected:
            summary += f"; needs_reverification: {', '.join(affected)}"
        if waiting:
            summary += f"; verify_on_next_use: {', '.join(waiting)}"
        by_conditions = [self._ref(i) for i in res.by_conditions]
        if res.by_conditions:
            with self.rt.transaction() as s:
                found = claims.get_items(session=s, tenant=self.tenant, ids=list(res.by_conditions))
            for i in res.by_conditions:
                self.warnings.append(
                    f"step {step.index + 1} (line {step.line}, event): {args.type} event "
                    f"re-opened {self._ref(i)} (content type {found[i].content_type}) "
                    f"through its conditions, not its content type's trigger: {res.reasons[i]}"
                )
        return _Outcome(
            summary,
            {
                "event": event.id,
                "needs_reverification": affected,
                "verify_on_next_use": waiting,
                "by_conditions": by_conditions,
            },
        )

    def _do_hook(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, HookArgs)
        headers = {
            "github": {"x-github-event": "deployment_status"},
            "cloudevents": {"content-type": "application/cloudevents+json"},
        }.get(args.kind, {})
        headers |= {k.lower(): v for k, v in args.headers.items()}
        body = json.dumps(args.payload, default=_json_default).encode()
        delivery = connectors.receive(
            self.rt,
            args.kind,
            body=body,
            headers=headers,
            now=self.now,
            trusted=claims.Actor(f"source-{args.kind}", "source"),
            delivery_id=args.delivery,
        )
        case: str | None = None
        for done in delivery.done:
            if done["action"] in ("open_case", "join_case"):
                case = done["case"]
                if done.get("status", "open") == "open":
                    self.case_id = case
            elif done["action"] == "close_case" and self.case_id == done["case"]:
                self.case_id = None
        actions = [d["action"] for d in delivery.done]
        seen = " (a repeat: nothing done again)" if delivery.duplicate else ""
        return _Outcome(
            f"{args.kind} hook {delivery.delivery_id or ''}{seen}: {', '.join(actions)}",
            {
                "delivery": delivery.delivery_id,
                "duplicate": delivery.duplicate,
                "done": actions,
                "case": case,
                "detail": list(delivery.done),
            },
        )

    def _do_advance(self, step: Step) -> _Outcome:
        swept = app.sweep(self.rt, app.LOCAL_ADMIN, now=self.now)
        summary = f"clock advances to {self.now.isoformat()}"
        archived = [self._ref(i) for i in swept.archived]
        expired = [self._ref(i) for i in swept.expired]
        working = [self._ref(i) for i in swept.working_memory]
        if archived:
            summary += f"; archives unused {', '.join(archived)}"
        if expired:
            summary += f"; TTL ran out for {', '.join(expired)}"
        if working:
            summary += f"; working memory TTL ran out for {', '.join(working)}"
        return _Outcome(
            summary, {"archived": archived, "ttl_expired": expired, "working_memory": working}
        )

    def _do_attach_evidence(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, AttachEvidenceArgs)
        att = app.attach_evidence(
            self.rt,
            self._actor(step),
            self._item(args.item),
            args.evidence,
            stance=args.stance,
            strength=args.strength,
            source_kind=args.source_kind,
            now=self.now,
        )
        return _Outcome(
            f"attaches {args.evidence} to {args.item}: {att.stance} ({att.source_kind},"
            f" strength {att.strength:g}); confidence {att.confidence_before:.3f}"
            f" -> {att.confidence_after:.3f}",
            {
                "item": args.item,
                "evidence": att.evidence_id,
                "stance": att.stance,
                "strength": att.strength,
                "source_kind": att.source_kind,
                "confidence_before": att.confidence_before,
                "confidence_after": att.confidence_after,
            },
        )

    def _drain(self) -> int:
        """Embed everything queued, in a transaction of its own; the number embedded."""
        return self.rt.embed_pending(now=self.now)

    def _do_recall(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, RecallArgs)
        embedded = self._drain()
        request = self._recall_request(args)
        actor = self._actor(step)
        res = app.recall_items(self.rt, actor, request, now=self.now)
        returned = (*res.pinned, *res.items)
        if args.record and args.as_of is None:
            app.record_use(self.rt, actor, request, [r.item.id for r in returned], now=self.now)
        items = [self._ref(r.item.id) for r in returned]
        pinned = [self._ref(r.item.id) for r in res.pinned]
        withheld = {self._ref(w.item.id): w.gate for w in res.withheld}
        given = f" with {len(args.observations)} inline observations" if args.observations else ""
        shown = [f"{ref} (pinned)" if ref in pinned else ref for ref in items]
        shown += [f"{p.ref} (knowledge)" for p in res.knowledge]
        summary = f"recalls {args.query!r}{given}: {', '.join(shown) or 'nothing'}"
        if withheld:
            summary += "; withheld " + ", ".join(f"{k} ({v})" for k, v in withheld.items())
        packed: dict[str, Any] | None = None
        if res.packed is not None:
            p = res.packed
            shown, omitted = [self._ref(i) for i in p.ids], [self._ref(i) for i in p.omitted]
            packed = {
                "items": shown,
                "item_ids": list(p.ids),
                "omitted": omitted,
                "tokens": p.tokens,
                "budget": p.budget,
                "text": p.text,
                # the core blocks packed first (labels, in order) and the prefix they make
                "blocks": [b.label for i in p.blocks for b in res.blocks if b.item_id == i],
                "prefix": render_blocks([b for b in res.blocks if b.item_id in p.blocks]),
            }
            summary += f"; packs {', '.join(shown) or 'nothing'} in {p.tokens}/{p.budget} tokens"
            if omitted:
                summary += f" (omits {', '.join(omitted)})"
        return _Outcome(
            summary,
            {
                "items": items,
                "item_ids": [r.item.id for r in returned],
                "pinned": pinned,
                "scores": {self._ref(r.item.id): r.score for r in returned},
                "withheld": withheld,
                "withheld_ids": [w.item.id for w in res.withheld],
                # each as the doors' explain shows it, with the verdict of every gate
                # recall reports (for the narration of caveat demo)
                "withheld_detail": {
                    self._ref(w.item.id): {**withheld_view(w), "gates": dict(w.verdicts)}
                    for w in res.withheld
                },
                "missing_observations": list(res.missing_observations),
                "confidence": {
                    self._ref(r.item.id): r.parts["confidence"]
                    for r in returned
                    if math.isfinite(r.parts.get("confidence", math.nan))
                },
                "channels": list(res.channels),
                "embedded": embedded,
                "not_embedded": res.not_embedded,
                "packed": packed,
                # knowledge passages (model §6): their documents, refs and the count
                "knowledge": list(dict.fromkeys(p.document_id for p in res.knowledge)),
                "knowledge_refs": [p.ref for p in res.knowledge],
                "knowledge_considered": res.knowledge_considered,
            },
        )

    def _recall_request(self, args: RecallArgs) -> recall.RecallRequest:
        """The step's recall as the doors build it: through ``RecallIn`` (the same names,
        bounds and defaults), inside the open case, ``pinned`` refs as item ids. What
        ``RecallIn`` refuses (a limit above 100, an observation's value that is not a
        scalar) is the step's ``invalid_input``, as at a door."""
        fields = args.model_dump(include=set(RecallIn.model_fields), exclude_none=True)
        fields |= {"case": self.case_id, "pinned": [self._item(r) for r in args.pinned]}
        try:
            return RecallIn.model_validate(fields).to_request()
        except ValidationError as exc:
            raise InputError(f"recall: {first_error(exc.errors())}") from exc

    def _do_check_context(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, CheckContextArgs)
        ids = [self._item(r) for r in args.items]
        res = app.check_context(
            self.rt,
            self._actor(step),
            ids,
            case_id=self.case_id,
            record=True,
            now=self.now,
            observations=[
                factgen.Observation(o.subject, o.attribute, o.value, o.source)
                for o in args.observations
            ],
            session=args.session,
        )
        usable = [self._ref(i) for i in res.usable]
        dropped = {self._ref(i): why for i, why in res.dropped.items()}
        conditions = {
            self._ref(i): [condition_view(c) for c in values]
            for i, values in res.conditions.items()
        }
        return _Outcome(
            f"context check: usable {', '.join(usable) or 'none'}; dropped "
            + (", ".join(f"{k} ({v})" for k, v in dropped.items()) or "none"),
            {
                "usable": usable,
                "dropped": list(dropped),
                "reasons": dropped,
                "conditions": conditions,
            },
        )

    def _do_block(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, BlockArgs)
        done = app.block_set(
            self.rt, self._actor(step), args.label, args.text, scope=args.scope, now=self.now
        )
        where = args.scope or "tenant"
        extra = f", superseding item {done.superseded}" if done.superseded else ""
        return _Outcome(
            f"sets block {args.label} on {where}: {done.outcome}{extra}",
            {"outcome": done.outcome, "item_id": done.item_id, "superseded": done.superseded},
        )

    def _do_docs(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, DocsArgs)
        report = app.docs_import(
            self.rt,
            self._actor(step),
            [claims.DocumentInput(args.id, args.text, uri=args.uri)],
            readers=args.readers or (),
            now=self.now,
        )
        [done] = report.documents
        return _Outcome(
            f"imports {args.id}: {done.outcome}, {len(done.passage_ids)} passages",
            {"outcome": done.outcome, "passage_ids": list(done.passage_ids)},
        )

    def _do_audit_verify(self, step: Step) -> _Outcome:
        report = app.audit_verify(self.rt, self._actor(step))
        verdict = "holds" if report.ok else f"BROKEN at {report.broken_at}: {report.reason}"
        return _Outcome(
            f"audit chain of {report.checked} rows {verdict}",
            {"ok": report.ok, "checked": report.checked, "broken_at": report.broken_at},
        )

    def _do_expect_state(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, ExpectStateArgs)
        ids = {ref: self.refs.get(ref) for ref in args.states}
        with self.rt.transaction() as s:
            found = claims.get_items(
                session=s, tenant=self.tenant, ids=[i for i in ids.values() if i is not None]
            )
        states = {
            ref: (found[i].state if i is not None and i in found else None)
            for ref, i in ids.items()
        }
        return _Outcome(
            "checks states: " + ", ".join(f"{k}={v}" for k, v in states.items()),
            {"states": states},
        )

    def _do_diff(self, step: Step) -> _Outcome:
        args = step.args
        assert isinstance(args, DiffArgs)
        bounds = [self.now + b if isinstance(b, timedelta) else b for b in (args.from_, args.to)]
        res = app.diff(
            self.rt,
            self._actor(step),
            from_=bounds[0],
            to=bounds[1],
            subjects=args.subjects,
            purpose=args.purpose,
            now=self.now,
        )
        became = {self._ref(e.item_id): e.cause for e in res.became}
        stopped = {self._ref(e.item_id): e.cause for e in res.stopped}
        shown = [
            f"{what} {', '.join(f'{r} ({c})' for r, c in refs.items()) or 'nothing'}"
            for what, refs in (("became", became), ("stopped", stopped))
        ]
        span = f"{bounds[0].isoformat()} .. {bounds[1].isoformat()}"
        return _Outcome(
            f"diff {span}: " + "; ".join(shown),
            {
                "from": bounds[0],
                "to": bounds[1],
                "became": list(became),
                "stopped": list(stopped),
                "causes": {**became, **stopped},
                "item_ids": [e.item_id for e in res.entries],
                "detail": {self._ref(e.item_id): self._diff_detail(e.detail) for e in res.entries},
            },
        )

    def _diff_detail(self, detail: dict[str, Any]) -> dict[str, Any]:
        """The cause's detail with item ids shown as refs (a successor)."""
        if detail.get("successor") is None:
            return detail
        return {**detail, "successor": self._ref(int(detail["successor"]))}

    # --- expectations --------------------------------------------------------

    def _check(self, step: Step, outcome: _Outcome) -> list[Failure]:
        fails: list[Failure] = []

        def fail(what: str, expected: object, got: object) -> None:
            fails.append(Failure(step.index, step.line, step.action, what, expected, got))

        expect = step.expect
        err = outcome.error
        got_code = None if err is None else err.code
        if expect is not None and expect.error is not None:
            if got_code != expect.error:
                fail("error", expect.error, got_code or "success")
            return fails
        rejected_ok = isinstance(expect, WriteExpect) and expect.outcome == "rejected"
        if err is not None and not rejected_ok:
            fail("error", "success", f"{err.code}: {err.message}")
            return fails
        res = outcome.result
        if isinstance(expect, WriteExpect):
            for key in ("outcome", "code", "gate", "state"):
                want = getattr(expect, key)
                if want is not None and res.get(key) != want:
                    fail(key, want, res.get(key))
        elif isinstance(expect, RecallExpect):
            self._check_recall(expect, res, fail)
        elif isinstance(expect, DiffExpect):
            self._check_diff(expect, res, fail)
        elif isinstance(expect, CheckContextExpect):
            for key in ("usable", "dropped"):
                want = getattr(expect, key)
                if want is not None:
                    missing = [r for r in want if r not in res[key]]
                    if missing:
                        fail(key, want, res[key])
            for ref, why in (expect.reasons or {}).items():
                if res["reasons"].get(ref) != why:
                    fail(f"reasons[{ref}]", why, res["reasons"].get(ref))
        elif isinstance(expect, HookExpect):
            for key in ("done", "duplicate", "case"):
                want = getattr(expect, key)
                if want is not None and res.get(key) != want:
                    fail(key, want, res.get(key))
        elif (
            isinstance(expect, AuditVerifyExpect)
            and expect.ok is not None
            and res.get("ok") != expect.ok
        ):
            fail("ok", expect.ok, res.get("ok"))
        if isinstance(step.args, ExpectStateArgs):
            for ref, want in step.args.states.items():
                got = res["states"].get(ref)
                if got != want:
                    fail(f"state[{ref}]", want, got)
        return fails

    def _check_recall(
        self, expect: RecallExpect, res: dict[str, Any], fail: Callable[[str, object, object], None]
    ) -> None:
        items: list[str] = res["items"]
        if expect.include is not None:
            missing = [r for r in expect.include if r not in items]
            if missing:
                fail("include", expect.include, items)
        if expect.exclude is not None:
            present = [r for r in expect.exclude if r in items]
            if present:
                fail("exclude", expect.exclude, items)
        if expect.order is not None:
            positions = [items.index(r) if r in items else None for r in expect.order]
            if None in positions or positions != sorted(p for p in positions if p is not None):
                fail("order", expect.order, items)
        if expect.count is not None and len(items) != expect.count:
            fail("count", expect.count, len(items))
        if expect.withheld is not None:
            for ref, gate in expect.withheld.items():
                got = res["withheld"].get(ref)
                if got != gate:
                    fail(f"withheld[{ref}]", gate, got or ("returned" if ref in items else None))
        if expect.missing_observations is not None:
            absent = [
                a for a in expect.missing_observations if a not in res["missing_observations"]
            ]
            if absent:
                fail(
                    "missing_observations", expect.missing_observations, res["missing_observations"]
                )
        if expect.unknown_to_caller is not None:
            mentioned = set(res["item_ids"]) | set(res["withheld_ids"])
            leaked = [r for r in expect.unknown_to_caller if self.refs.get(r) in mentioned]
            if leaked:
                fail("unknown_to_caller", expect.unknown_to_caller, f"mentioned: {leaked}")
        docs: list[str] = res["knowledge"]
        wanted, unwanted = expect.knowledge_include or [], expect.knowledge_exclude or []
        if [d for d in wanted if d not in docs]:
            fail("knowledge_include", wanted, docs)
        if [d for d in unwanted if d in docs]:
            fail("knowledge_exclude", unwanted, docs)
        considered = res["knowledge_considered"]
        if expect.knowledge_considered is not None and considered != expect.knowledge_considered:
            fail("knowledge_considered", expect.knowledge_considered, considered)
        self._check_packed(expect, res.get("packed"), fail)

    def _check_packed(
        self,
        expect: RecallExpect,
        packed: dict[str, Any] | None,
        fail: Callable[[str, object, object], None],
    ) -> None:
        wanted = {
            name: getattr(expect, name)
            for name in ("packed_include", "packed_exclude", "packed_within_budget", "packed_first")
            if getattr(expect, name) is not None
        }
        if not wanted:
            return
        if packed is None:
            for name, want in wanted.items():
                fail(name, want, "no packed result")
            return
        ids = set(packed["item_ids"])
        include = expect.packed_include or []
        if any(self.refs.get(r) not in ids for r in include):
            fail("packed_include", include, packed["items"])
        exclude = expect.packed_exclude or []
        if any(self.refs.get(r) in ids for r in exclude):
            fail("packed_exclude", exclude, packed["items"])
        first = expect.packed_first
        if first is not None and packed["blocks"][: len(first)] != first:
            fail("packed_first", first, packed["blocks"])
        if expect.packed_within_budget and packed["tokens"] > packed["budget"]:
            fail(
                "packed_within_budget",
                f"<= {packed['budget']} tokens",
                f"{packed['tokens']} tokens",
            )

    def _check_diff(
        self, expect: DiffExpect, res: dict[str, Any], fail: Callable[[str, object, object], None]
    ) -> None:
        for key in ("became", "stopped"):
            want: list[str] | None = getattr(expect, key)
            if want is not None and any(r not in res[key] for r in want):
                fail(key, want, res[key])
        for ref, cause in (expect.causes or {}).items():
            got = res["causes"].get(ref)
            if got != cause:
                fail(f"causes[{ref}]", cause, got or "unchanged")
        if expect.unknown_to_caller is not None:
            mentioned = set(res["item_ids"]) | {d.get("successor") for d in res["detail"].values()}
            mentioned.discard(None)
            leaked = [
                r
                for r in expect.unknown_to_caller
                if self.refs.get(r) in mentioned or r in mentioned
            ]
            if leaked:
                fail("unknown_to_caller", expect.unknown_to_caller, f"mentioned: {leaked}")


def _json_default(value: object) -> str:
    """A YAML timestamp in a hook's payload, as the RFC 3339 text a sender sends."""
    if hasattr(value, "isoformat"):
        return str(value.isoformat()).replace("+00:00", "Z")
    raise TypeError(f"{type(value).__name__} is not JSON")


def run_scenario(
    scenario: Scenario,
    *,
    path: str,
    server_url: str,
    template: str,
    on_step: Callable[[StepRecord], None] | None = None,
    embedder: recall.Embedder | _FromSettings | None = FROM_SETTINGS,
) -> ScenarioResult:
    """Replay ``scenario`` in a fresh database cloned from ``template``, then drop it.

    ``embedder`` feeds the dense channel (default: the one the settings name, built once
    per process); ``None`` runs recalls without it."""
    dense = _resolve(embedder)
    started = time.perf_counter()
    records: list[StepRecord] = []
    failures: list[Failure] = []
    error: str | None = None
    replayer: Replayer | None = None
    with db.with_database(server_url, template=template, prefix="caveat_replay") as url:
        settings = Settings()
        engine = db.make_app_engine(url, **settings.app_engine_options())
        try:
            runtime = app.Runtime.over(
                engine, scenario.tenant, embedder=dense, settings=settings, server_url=url
            )
            replayer = Replayer(scenario, runtime)
            try:
                replayer.setup()
            except CaveatError as exc:
                error = f"set-up failed: {exc.code}: {exc.message}"
            else:
                for step in scenario.steps:
                    began = time.perf_counter()
                    record, step_failures = replayer.run_step(step)
                    record = replace(record, seconds=time.perf_counter() - began)
                    records.append(record)
                    failures.extend(step_failures)
                    if on_step is not None:
                        on_step(record)
        finally:
            engine.dispose()
    return ScenarioResult(
        path=path,
        name=scenario.name,
        steps=tuple(records),
        failures=tuple(failures),
        duration_s=time.perf_counter() - started,
        error=error,
        warnings=tuple(replayer.warnings) if replayer is not None else (),
    )


def prepare_template(server_url: str, name: str) -> str:
    """(Re)create a database migrated to head to clone scenarios from; returns its name."""
    db.drop_database(server_url, name)
    url = db.create_database(server_url, name)
    db.migrate(url)
    return name


def run_all(
    scenarios: Sequence[tuple[str, Scenario]],
    *,
    server_url: str,
    embedder: recall.Embedder | _FromSettings | None = FROM_SETTINGS,
) -> list[ScenarioResult]:
    """Replay each scenario in isolation, from one migrated template, with one embedder
    (default: the one the settings name)."""
    dense = _resolve(embedder)
    template = prepare_template(server_url, f"caveat_replay_tpl_{os.getpid()}")
    try:
        return [
            run_scenario(sc, path=path, server_url=server_url, template=template, embedder=dense)
            for path, sc in scenarios
        ]
    finally:
        db.drop_database(server_url, template)
