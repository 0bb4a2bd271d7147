"""Every route of the HTTP API (``/openapi.json``), written once as a ``Call`` builder:
``Client`` and ``AsyncClient`` both inherit ``Api``. A method's name is the use case's
(the CLI verb's or the MCP tool's where there is one); its answer is the route's model
from ``caveat.answers``. Bodies are sent as given, and the server validates them: a
field it does not take is refused with ``invalid_input``, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from caveat.answers import (
    AttachmentOut,
    AuditPage,
    AuditReportOut,
    AuditRow,
    BlockSetOut,
    BlocksOut,
    CaseOut,
    CitationOut,
    CitationPage,
    ClosedOut,
    ContextOut,
    DeliveryOut,
    DiffOut,
    DocsImportOut,
    DocumentDetailOut,
    DocumentOut,
    DocumentsOut,
    DossierOut,
    EnforcementOut,
    ErasurePlanOut,
    EventsOut,
    EvidenceOut,
    FactsOut,
    ForgetOut,
    HealthOut,
    ItemView,
    KeyOut,
    KeyPage,
    LineageOut,
    OutcomeOut,
    PolicyChangeOut,
    PreviewOut,
    PullsOut,
    RecallOut,
    RedactedOut,
    RedactOut,
    RegistryOut,
    ReviewOut,
    RevokedOut,
    RollupsOut,
    ServiceIndex,
    ShadowPage,
    ShadowRowOut,
    SourcesOut,
    SourcesStatusOut,
    SweepOut,
    TenantPolicyOut,
    TokenIssued,
    TokenOut,
    TokenPage,
    TransitionOut,
    TurnOut,
    TurnsOut,
    UseOut,
)
from caveat.client._route import Call, paged, route

__all__ = ["Api", "Observation"]

#: An observation as the API takes it: ``{"subject", "attribute", "value"}`` and an
#: optional ``"source"``.
Observation = Mapping[str, Any]


def _when(at: datetime | str | None) -> str | None:
    return at.isoformat() if isinstance(at, datetime) else at


def _fields(**given: Any) -> dict[str, Any]:
    """The body's fields that were given (None: left to the server's default)."""
    return {k: v for k, v in given.items() if v is not None}


class Api:
    """The routes; each method's docstring says what the route does (docs/http.md)."""

    # --- service -------------------------------------------------------------------
    @route("GET", "/")
    def index(self) -> Call[ServiceIndex]:
        """The service index: its version and where things are."""
        return Call(ServiceIndex)

    @route("GET", "/healthz")
    def healthz(self) -> Call[HealthOut]:
        """The server is up and its database answers."""
        return Call(HealthOut)

    @route("GET", "/metrics")
    def metrics(self) -> Call[str]:
        """The server's Prometheus text exposition."""
        return Call(str, text=True)

    # --- recall and the context ----------------------------------------------------
    @route("POST", "/v1/recall")
    def recall(
        self,
        /,
        query: str,
        *,
        subjects: Sequence[str] | None = None,
        purpose: str | None = None,
        case: str | None = None,
        observations: Sequence[Observation] | None = None,
        session: str | None = None,
        limit: int | None = None,
        explain: bool | None = None,
        **more: Any,
    ) -> Call[RecallOut]:
        """Precedents whose conditions hold now (a pure read). ``more``: the other
        fields of the recall request (``as_of``, ``anchors``, ``budget``, ``refresh``,
        ``sources``, ...), as docs/http.md lists them."""
        body = _fields(
            query=query,
            subjects=subjects,
            purpose=purpose,
            case=case,
            observations=observations,
            session=session,
            limit=limit,
            explain=explain,
            **more,
        )
        return Call(RecallOut, json=body)

    @route("GET", "/v1/recall")
    def recall_get(self, /, query: str, **params: Any) -> Call[RecallOut]:
        """The same read as ``recall``, its parameters in the query string (``subject``,
        ``observe``, ``anchor``, ``pin``, ``source`` repeat: give them as lists)."""
        return Call(RecallOut, query={"query": query, **params})

    @route("POST", "/v1/record-use")
    def record_use(self, /, query: str, used: Sequence[int], **request: Any) -> Call[UseOut]:
        """Record the use of what a recall returned: the recall's request as it was made
        (``query`` and the same fields) and the ids used; the server re-checks each."""
        return Call(UseOut, json={"query": query, "used": list(used), **_fields(**request)})

    @route("POST", "/v1/context/check")
    def check_context(
        self,
        items: Sequence[int],
        *,
        case: str | None = None,
        session: str | None = None,
        observations: Sequence[Observation] | None = None,
    ) -> Call[ContextOut]:
        """The context guard: which of ``items`` may still be used, and why not the
        others (recorded on the primary)."""
        body = _fields(items=list(items), case=case, session=session, observations=observations)
        return Call(ContextOut, json=body)

    # --- cases ---------------------------------------------------------------------
    @route("POST", "/v1/cases")
    def open_case(self, case_id: str, subjects: Sequence[str] = ()) -> Call[CaseOut]:
        """Open a case (an incident or an agent run)."""
        return Call(CaseOut, json={"id": case_id, "subjects": list(subjects)})

    @route("POST", "/v1/cases/{case_id}/close")
    def close_case(
        self, case_id: str, outcome: Literal["confirmed", "rejected"]
    ) -> Call[ClosedOut]:
        """Close a case: its citations become support or counter signals."""
        return Call(ClosedOut, path={"case_id": case_id}, json={"outcome": outcome})

    @route("POST", "/v1/items/{item_id}/cite")
    def cite(
        self,
        item_id: int,
        case: str,
        influence: Literal["decisive", "contributing", "considered", "ignored"],
        *,
        expected: Any = None,
        observed: Any = None,
        rationale: str | None = None,
    ) -> Call[CitationOut]:
        """Record that an item in the case's context influenced it."""
        body = _fields(
            case=case,
            influence=influence,
            expected=expected,
            observed=observed,
            rationale=rationale,
        )
        return Call(CitationOut, path={"item_id": item_id}, json=body)

    # --- the world -----------------------------------------------------------------
    @route("POST", "/v1/observations")
    def observe(self, observations: Sequence[Observation]) -> Call[FactsOut]:
        """Record typed facts; one value of the wrong type stores nothing."""
        return Call(FactsOut, json={"observations": list(observations)})

    @route("POST", "/v1/events")
    def record_events(
        self, events: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> Call[EventsOut]:
        """Record CloudEvents (one, or a list): deploys, config and version changes."""
        body = dict(events) if isinstance(events, Mapping) else list(events)
        return Call(EventsOut, json=body)

    @route("GET", "/v1/diff")
    def diff(
        self,
        since: datetime | str,
        until: datetime | str,
        *,
        subject: str | None = None,
        purpose: str | None = None,
    ) -> Call[DiffOut]:
        """What the store believed at ``until`` that it did not at ``since``."""
        query = {"from": _when(since), "to": _when(until), "subject": subject}
        return Call(DiffOut, query={**query, "purpose": purpose})

    # --- items ---------------------------------------------------------------------
    @route("POST", "/v1/items")
    def write(self, items: Sequence[Mapping[str, Any]]) -> Call[list[OutcomeOut]]:
        """Write items through the gate; each outcome says accepted or its reason code."""
        return Call(list[OutcomeOut], json=list(items))

    @route("POST", "/v1/proposals")
    def propose(
        self,
        proposals: Sequence[Mapping[str, Any]],
        *,
        case: str | None = None,
        scope: str | None = None,
        source: str | None = None,
    ) -> Call[list[OutcomeOut]]:
        """File a model's proposals; the gate judges each."""
        body = _fields(proposals=list(proposals), case=case, scope=scope, source=source)
        return Call(list[OutcomeOut], json=body)

    @route("GET", "/v1/items/{item_id}")
    def item(self, item_id: int) -> Call[ItemView]:
        """One item as the caller may see it."""
        return Call(ItemView, path={"item_id": item_id})

    @route("GET", "/v1/items/{item_id}/lineage")
    def lineage(self, item_id: int) -> Call[LineageOut]:
        """What an item was derived from and what was derived from it."""
        return Call(LineageOut, path={"item_id": item_id})

    @route("GET", "/v1/items/{item_id}/dossier")
    def dossier(self, item_id: int) -> Call[DossierOut]:
        """Everything an SME reviews about an item."""
        return Call(DossierOut, path={"item_id": item_id})

    @route("GET", "/v1/items/{item_id}/preview/{action}")
    def preview(self, item_id: int, action: str) -> Call[PreviewOut]:
        """What a lifecycle action on an item would do."""
        return Call(PreviewOut, path={"item_id": item_id, "action": action})

    @route("POST", "/v1/evidence")
    def add_evidence(
        self,
        evidence_id: str,
        *,
        uri: str | None = None,
        title: str | None = None,
        readers: Sequence[str] | None = None,
        deny: Sequence[str] | None = None,
        classification: str | None = None,
    ) -> Call[EvidenceOut]:
        """Register evidence and who may read it."""
        body = _fields(
            id=evidence_id,
            uri=uri,
            title=title,
            readers=readers,
            deny=deny,
            classification=classification,
        )
        return Call(EvidenceOut, json=body)

    @route("POST", "/v1/items/{item_id}/evidence")
    def attach_evidence(
        self, item_id: int, evidence: str, stance: str, strength: float, source_kind: str
    ) -> Call[AttachmentOut]:
        """Attach evidence to an item (supporting or contradicting it)."""
        body = {
            "evidence": evidence,
            "stance": stance,
            "strength": strength,
            "source_kind": source_kind,
        }
        return Call(AttachmentOut, path={"item_id": item_id}, json=body)

    @route("POST", "/v1/items/{item_id}/verify")
    def verify(self, item_id: int) -> Call[ItemView]:
        """An SME verifies an item."""
        return Call(ItemView, path={"item_id": item_id})

    @route("POST", "/v1/items/{item_id}/promote")
    def promote(self, item_id: int, to: str, rationale: str | None = None) -> Call[ItemView]:
        """An SME promotes an item (``to``: shadow or active)."""
        return Call(ItemView, path={"item_id": item_id}, json=_fields(to=to, rationale=rationale))

    @route("POST", "/v1/items/{item_id}/graduate")
    def graduate(self, item_id: int, rationale: str | None = None) -> Call[ItemView]:
        """An SME graduates a shadow item to active."""
        return Call(ItemView, path={"item_id": item_id}, json=_fields(rationale=rationale))

    @route("POST", "/v1/items/{item_id}/drop")
    def drop(self, item_id: int, reason: str) -> Call[ItemView]:
        """An SME drops a shadow item."""
        return Call(ItemView, path={"item_id": item_id}, json={"reason": reason})

    @route("POST", "/v1/items/{item_id}/refute")
    def refute(self, item_id: int, reason: str) -> Call[ItemView]:
        """An SME refutes an item."""
        return Call(ItemView, path={"item_id": item_id}, json={"reason": reason})

    @route("POST", "/v1/items/{item_id}/revoke")
    def revoke(self, item_id: int, reason: str) -> Call[RevokedOut]:
        """An SME revokes an item and what was derived from it."""
        return Call(RevokedOut, path={"item_id": item_id}, json={"reason": reason})

    @route("POST", "/v1/items/{item_id}/redact")
    def redact(self, item_id: int, reason: str) -> Call[RedactedOut]:
        """An SME redacts an item's text."""
        return Call(RedactedOut, path={"item_id": item_id}, json={"reason": reason})

    @route("POST", "/v1/items/{item_id}/enforcement")
    def enforce(self, item_id: int, level: str, reason: str) -> Call[EnforcementOut]:
        """An SME sets a skill's enforcement level."""
        body = {"level": level, "reason": reason}
        return Call(EnforcementOut, path={"item_id": item_id}, json=body)

    @route("POST", "/v1/skills/{item_id}/release")
    def release_skill(self, item_id: int, test: str | None = None) -> Call[ItemView]:
        """Release a skill version (``test``: the passing run it cites)."""
        return Call(ItemView, path={"item_id": item_id}, query={"test": test})

    @route("POST", "/v1/skills/{item_id}/retire")
    def retire_skill(self, item_id: int, rationale: str | None = None) -> Call[ItemView]:
        """Retire a released skill version."""
        return Call(ItemView, path={"item_id": item_id}, json=_fields(rationale=rationale))

    # --- review ----------------------------------------------------------------------
    @route("GET", "/v1/review")
    def review(self) -> Call[ReviewOut]:
        """The SME review queue."""
        return Call(ReviewOut)

    @route("GET", "/v1/transitions")
    def transitions(
        self,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        subject: str | None = None,
    ) -> Call[list[TransitionOut]]:
        """The items' state transitions in a window."""
        query = {"from": _when(since), "to": _when(until), "subject": subject}
        return Call(list[TransitionOut], query=query)

    @route("GET", "/v1/audit")
    def audit_page(
        self,
        *,
        item: int | None = None,
        actor: str | None = None,
        code: str | None = None,
        action: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Call[AuditPage]:
        """One page of the audit log (``iter_audit`` follows the pages)."""
        query = {"item": item, "actor": actor, "code": code, "action": action}
        return Call(AuditPage, query={**query, "cursor": cursor, "limit": limit})

    iter_audit = paged(audit_page, AuditRow)

    @route("POST", "/v1/audit/verify")
    def verify_audit(self) -> Call[AuditReportOut]:
        """Check the audit log's hash chain."""
        return Call(AuditReportOut)

    @route("POST", "/v1/sweep")
    def sweep(self) -> Call[SweepOut]:
        """Run the lifecycle's sweep now (expiry, shadow closes, working memory)."""
        return Call(SweepOut)

    @route("GET", "/v1/shadow")
    def shadow_page(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> Call[ShadowPage]:
        """One page of the shadow items' statistics (``iter_shadow`` follows the pages)."""
        return Call(ShadowPage, query={"cursor": cursor, "limit": limit})

    iter_shadow = paged(shadow_page, ShadowRowOut)

    @route("GET", "/v1/promotion/candidates")
    def candidates_page(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> Call[KeyPage]:
        """One page of promotion candidates (``iter_candidates`` follows the pages)."""
        return Call(KeyPage, query={"cursor": cursor, "limit": limit})

    iter_candidates = paged(candidates_page, KeyOut)

    @route("GET", "/v1/promotion/contested")
    def contested_page(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> Call[KeyPage]:
        """One page of contested keys (``iter_contested`` follows the pages)."""
        return Call(KeyPage, query={"cursor": cursor, "limit": limit})

    iter_contested = paged(contested_page, KeyOut)

    @route("GET", "/v1/citations")
    def citations_page(
        self,
        *,
        case: str | None = None,
        item: int | None = None,
        influence: str | None = None,
        compliance: str | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Call[CitationPage]:
        """One page of citations, oldest first (``iter_citations`` follows the pages)."""
        query = {"case": case, "item": item, "influence": influence, "compliance": compliance}
        window = {"since": _when(since), "until": _when(until)}
        return Call(CitationPage, query={**query, **window, "cursor": cursor, "limit": limit})

    iter_citations = paged(citations_page, CitationOut)

    # --- tokens --------------------------------------------------------------------
    @route("POST", "/v1/tokens")
    def create_token(
        self,
        principal: str,
        role: str,
        *,
        team: str | None = None,
        clearance: str | None = None,
        capabilities: Sequence[str] | None = None,
    ) -> Call[TokenIssued]:
        """Issue a token (its secret is in the answer, once)."""
        body = _fields(
            principal=principal,
            role=role,
            team=team,
            clearance=clearance,
            capabilities=capabilities,
        )
        return Call(TokenIssued, json=body)

    @route("GET", "/v1/tokens")
    def tokens_page(
        self, *, cursor: str | None = None, limit: int | None = None
    ) -> Call[TokenPage]:
        """One page of the tenant's tokens (``iter_tokens`` follows the pages)."""
        return Call(TokenPage, query={"cursor": cursor, "limit": limit})

    iter_tokens = paged(tokens_page, TokenOut)

    @route("DELETE", "/v1/tokens/{token_id}")
    def revoke_token(self, token_id: str) -> Call[TokenOut]:
        """Revoke a token."""
        return Call(TokenOut, path={"token_id": token_id})

    # --- agent turns for the server-side extractor ------------------------------------
    @route("POST", "/v1/turns")
    def submit_turn(
        self,
        id: str,
        text: str,
        *,
        case: str | None = None,
        scope: str | None = None,
        evidence: Sequence[str] | None = None,
        subjects: Sequence[str] | None = None,
    ) -> Call[TurnOut]:
        """Queue an agent turn for the server's extractor (docs/proposals.md)."""
        body = _fields(
            id=id, text=text, case=case, scope=scope, evidence=evidence, subjects=subjects
        )
        return Call(TurnOut, json=body)

    @route("GET", "/v1/turns")
    def turns(
        self, *, state: Literal["queued", "done", "failed"] | None = None, limit: int | None = None
    ) -> Call[TurnsOut]:
        """The newest turns first."""
        return Call(TurnsOut, query={"state": state, "limit": limit})

    @route("GET", "/v1/turns/{turn_id}")
    def turn(self, turn_id: str) -> Call[TurnOut]:
        """One turn and where it stands."""
        return Call(TurnOut, path={"turn_id": turn_id})

    # --- sources, hooks, registry, rollup --------------------------------------------
    @route("GET", "/v1/sources")
    def sources(self) -> Call[SourcesOut]:
        """The tenant's ``sources.yaml`` as loaded."""
        return Call(SourcesOut)

    @route("PUT", "/v1/sources")
    def load_sources(self, document: str) -> Call[SourcesOut]:
        """Load a ``sources.yaml`` (its text)."""
        return Call(SourcesOut, content=document, headers={"Content-Type": "text/plain"})

    @route("POST", "/v1/sources/pull")
    def pull_sources(self, name: str | None = None) -> Call[PullsOut]:
        """Pull the fact sources now (``name``: one of them)."""
        return Call(PullsOut, query={"name": name})

    @route("GET", "/v1/sources/status")
    def sources_status(self) -> Call[SourcesStatusOut]:
        """What each source's pulls did, and when it is next pulled."""
        return Call(SourcesStatusOut)

    @route("POST", "/v1/hooks/{kind}")
    def hook(
        self,
        kind: str,
        body: bytes | str,
        *,
        headers: Mapping[str, str] | None = None,
        tenant: str | None = None,
    ) -> Call[DeliveryOut]:
        """Deliver a webhook (``kind``: alertmanager, github, cloudevents, pagerduty) as
        its sender would: the raw body and the sender's headers."""
        heads = {"Content-Type": "application/json", **(headers or {})}
        return Call(
            DeliveryOut, path={"kind": kind}, query={"tenant": tenant}, content=body, headers=heads
        )

    @route("GET", "/v1/registry")
    def registry(self) -> Call[RegistryOut]:
        """The tenant's axes and content types."""
        return Call(RegistryOut)

    @route("PUT", "/v1/registry")
    def load_registry(self, document: str) -> Call[RegistryOut]:
        """Load a registry document (its text)."""
        return Call(RegistryOut, content=document, headers={"Content-Type": "text/plain"})

    @route("POST", "/v1/rollup")
    def rollup(self, *, dry_run: bool = False, subject: str | None = None) -> Call[RollupsOut]:
        """Roll clusters of episodes up into items (``dry_run``: a preview)."""
        return Call(RollupsOut, json=_fields(dry_run=dry_run, subject=subject))

    # --- policy, blocks, documents, erasure --------------------------------------------
    @route("GET", "/v1/policy")
    def policy(self, as_of: datetime | str | None = None) -> Call[TenantPolicyOut]:
        """The tenant's policy (as of an instant)."""
        return Call(TenantPolicyOut, query={"as_of": _when(as_of)})

    @route("PUT", "/v1/policy")
    def set_policy(
        self, changes: Mapping[str, Any], *, dry_run: bool = False
    ) -> Call[PolicyChangeOut]:
        """Change policy keys (``{"recall.limit": 5}``); ``dry_run``: a preview."""
        body = {"changes": [{"key": k, "value": v} for k, v in changes.items()]}
        return Call(PolicyChangeOut, query={"dry_run": dry_run}, json=body)

    @route("GET", "/v1/blocks")
    def blocks(self, scope: str | None = None) -> Call[BlocksOut]:
        """The memory blocks the caller may read."""
        return Call(BlocksOut, query={"scope": scope})

    @route("GET", "/v1/blocks/{label}")
    def block(
        self, label: str, *, scope: str | None = None, history: bool | None = None
    ) -> Call[BlocksOut]:
        """One block (``history``: its earlier rows too)."""
        query = {"scope": scope, "history": history}
        return Call(BlocksOut, path={"label": label}, query=query)

    @route("PUT", "/v1/blocks/{label}")
    def set_block(self, label: str, text: str, *, scope: str | None = None) -> Call[BlockSetOut]:
        """Set a block's text."""
        return Call(BlockSetOut, path={"label": label}, query={"scope": scope}, json={"text": text})

    @route("GET", "/v1/docs")
    def documents(self) -> Call[DocumentsOut]:
        """The imported documents."""
        return Call(DocumentsOut)

    @route("POST", "/v1/docs")
    def import_documents(
        self, /, documents: Sequence[Mapping[str, Any]], **access: Any
    ) -> Call[DocsImportOut]:
        """Import documents (``access``: readers, deny, classification, purposes)."""
        return Call(DocsImportOut, json={"documents": list(documents), **_fields(**access)})

    @route("GET", "/v1/docs/{document_id}")
    def document(self, document_id: str) -> Call[DocumentDetailOut]:
        """A document, its passages and its history."""
        return Call(DocumentDetailOut, path={"document_id": document_id})

    @route("POST", "/v1/docs/{document_id}/revoke")
    def revoke_document(self, document_id: str, reason: str) -> Call[DocumentOut]:
        """Revoke a document."""
        return Call(DocumentOut, path={"document_id": document_id}, json={"reason": reason})

    @route("POST", "/v1/docs/{document_id}/redact")
    def redact_document(self, document_id: str, reason: str) -> Call[RedactOut]:
        """Redact a document's passages."""
        return Call(RedactOut, path={"document_id": document_id}, json={"reason": reason})

    @route("POST", "/v1/forget/preview")
    def forget_preview(
        self,
        *,
        subject: str | None = None,
        anchor: str | None = None,
        items: Sequence[int] | None = None,
    ) -> Call[ErasurePlanOut]:
        """What a ``forget`` would erase."""
        return Call(ErasurePlanOut, json=_fields(subject=subject, anchor=anchor, items=items))

    @route("POST", "/v1/forget")
    def forget(
        self,
        reason: str,
        *,
        subject: str | None = None,
        anchor: str | None = None,
        items: Sequence[int] | None = None,
    ) -> Call[ForgetOut]:
        """Erase a subject, an anchor or items (history included)."""
        body = _fields(reason=reason, subject=subject, anchor=anchor, items=items)
        return Call(ForgetOut, json=body)
