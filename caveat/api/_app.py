"""The FastAPI application: authentication, problem details, and the routes."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from caveat import app as use
from caveat import connectors
from caveat.answers._answers import (
    CaseOut,
    CitationOut,
    ClosedOut,
    ContextOut,
    FactsOut,
    HealthOut,
    RecallOut,
    UseOut,
)
from caveat.api._background import Background
from caveat.api._blocks import router as blocks_router
from caveat.api._citations import router as citations_router
from caveat.api._deps import Acting, typed
from caveat.api._docs import router as docs_router
from caveat.api._forget import router as forget_router
from caveat.api._hooks import router as hooks_router
from caveat.api._index import add_index
from caveat.api._mcp import McpDoor
from caveat.api._metrics import Metrics
from caveat.api._more import router
from caveat.api._pages import router as pages_router
from caveat.api._policy import router as policy_router
from caveat.api._review import router as review_router
from caveat.api._rollup import router as rollup_router
from caveat.api._sources import router as sources_router
from caveat.api._turns import router as turns_router
from caveat.app._input import first_error, instant, observation_fields
from caveat.app._requests import CiteIn, ContextIn, ObservationIn, RecallIn, RecordUseIn, Strict
from caveat.app.views import (
    case_view,
    citation_view,
    closed_view,
    context_view,
    fact_json,
    recall_view,
    use_view,
)
from caveat.connectors._refresh_recall import recall as refreshed_recall
from caveat.errors import STATUS, status_of
from caveat.web import create_pages
from predicates.errors import CaveatError, DocumentError, InputError

__all__ = ["create_app"]

_PROBLEM = "application/problem+json"
#: The header of a consistency token: on the answer to every write (the primary's write
#: position after it committed), and given back on a recall or a context check (a
#: replica serves them only once it has replayed that far).
TOKEN_HEADER = "Caveat-Consistency-Token"
#: The header that says which server answered a recall or a context check.
SERVED_BY_HEADER = "Caveat-Served-By"
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: A consistency token given back on a recall or a context check.
TokenIn = Annotated[
    str | None,
    Header(
        alias=TOKEN_HEADER,
        description="A consistency token a write returned: a replica answers only once it "
        "has replayed that far (otherwise the primary does).",
    ),
]


class ConsistencyToken:
    """ASGI middleware: the answer to a successful write under ``/v1/`` (but a hook's:
    Alertmanager or GitHub never reads what it wrote) carries the
    primary's write position in ``Caveat-Consistency-Token``. It is read when the
    answer starts, after the route returned and its transaction committed, so it is
    past the write's commit. Everything else passes through untouched."""

    def __init__(self, app: ASGIApp, runtime: use.Runtime) -> None:
        self.app = app
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in _WRITES
            or not scope["path"].startswith("/v1/")
            or scope["path"].startswith("/v1/hooks/")  # a sender never reads its writes
        ):
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] < 400:
                with suppress(CaveatError):  # the primary went away after the write
                    token = await run_in_threadpool(self.runtime.write_position)
                    MutableHeaders(scope=message).append(TOKEN_HEADER, token)
            await send(message)

        await self.app(scope, receive, sending)


#: Codes for the statuses the framework itself answers with, by their status in the table.
_HTTP_CODES: dict[int, str] = {
    STATUS[code].http: code for code in ("not_found", "method_not_allowed", "too_large")
}


class Problem(BaseModel):
    """Problem details (RFC 9457) with caveat's stable ``code``."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    code: str


def _problem(status: int, code: str, detail: str, extra: dict[str, Any] | None = None) -> Any:
    body = {"type": "about:blank", "title": code.replace("_", " "), "status": status}
    body |= {"detail": detail, "code": code, **(extra or {})}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=_PROBLEM, headers=headers)


class CaseIn(Strict):
    id: str = Field(min_length=1)
    subjects: list[str] = Field(default_factory=list)


class CloseIn(Strict):
    outcome: Literal["confirmed", "rejected"]


class ObserveIn(Strict):
    observations: list[ObservationIn] = Field(min_length=1)


#: The query parameters of ``GET /v1/recall``: ``RecallIn``'s fields in their flat,
#: repeatable spellings (``subject``, ``observe``, ``anchor``, ``pin``).
_RECALL_PARAMS = frozenset(
    {"query", "subject", "purpose", "case", "observe", "as_of", "limit", "explain"}
    | {"anchor", "pin", "budget", "min_confidence", "refresh", "refresh_deadline_ms"}
    | {"session", "source", "anchors_mode"}
)


def _q(name: str, **given: Any) -> Any:
    """A query parameter documented (and bounded) as ``RecallIn``'s field ``name``."""
    f = RecallIn.model_fields[name]
    bounds = {k: getattr(m, k) for m in f.metadata for k in ("ge", "le") if hasattr(m, k)}
    return Query(description=f.description, **bounds, **given)


def create_app(
    runtime: use.Runtime,
    *,
    background: float | None = None,
    puller: use.Puller = connectors.pull_sources,
    on_close: Callable[[], None] | None = None,
) -> FastAPI:
    """The API over ``runtime`` (the caller owns it and disposes of its engine). With
    ``background`` (seconds), a thread drains the embedding queue and sweeps the
    default tenant and every tenant a request has authenticated into, that often, and
    another pulls their due fact sources, and with ``CAVEAT_EXTRACTOR_URL`` a third
    sends their queued agent turns to the extractor, while the app runs; ``puller`` pulls (the
    connectors', or a test's). ``on_close`` runs when the app shuts down, after the
    background has stopped (a worker process closing the runtime it opened)."""
    metrics = Metrics()
    worker = (
        None
        if background is None
        else Background(
            runtime,
            background,
            puller=puller,
            chain_every=runtime.settings.chain_every,
            on_chain=metrics.chain_verified,
            extract=connectors.ChatExtractor.from_settings(runtime.settings),
            on_turn=metrics.turn_done,
        )
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if worker is not None:
            worker.start()
        try:
            async with app.state.mcp.running():  # the MCP transport's session manager
                yield
        finally:
            if worker is not None:
                worker.stop()
            if on_close is not None:
                on_close()

    api = FastAPI(
        title="caveat",
        version="1",
        description="A predicate-gated claim store for incident-response agents.",
        responses={"default": {"model": Problem, "description": "A refusal with its code."}},
        lifespan=lifespan,
    )
    api.state.runtime = runtime
    api.state.background = worker
    api.state.metrics = metrics
    api.state.puller = puller
    metrics.watch_reads(runtime.routes)
    api.state.mcp = McpDoor(
        runtime,
        refuse=_problem,
        refused=lambda code: metrics.refusals.labels(code).inc(),
        touch=worker.touch if worker is not None else lambda _: None,
    )
    api.add_route("/mcp", api.state.mcp, include_in_schema=False)  # MCP, streamable HTTP
    api.add_middleware(ConsistencyToken, runtime=runtime)
    api.include_router(router)
    api.include_router(review_router)
    api.include_router(sources_router)
    api.include_router(hooks_router)
    api.include_router(pages_router)
    api.include_router(rollup_router)
    api.include_router(citations_router)
    api.include_router(policy_router)
    api.include_router(blocks_router)
    api.include_router(turns_router)
    api.include_router(docs_router)
    api.include_router(forget_router)
    api.mount("/ui", create_pages(runtime))  # the SME pages (docs/sme.md)

    @api.exception_handler(CaveatError)
    async def _refused(request: Request, exc: CaveatError) -> Any:
        status = status_of(exc).http
        metrics.refusals.labels(exc.code).inc()
        if isinstance(exc, DocumentError):  # where in the document: source, line, column
            where = {"source": exc.source, "line": exc.line, "column": exc.column}
            return _problem(status, exc.code, str(exc), where)
        if isinstance(exc, InputError) and "expected" in exc.detail and "key" in exc.detail:
            # a policy key's value: which key, what it takes, what it was given (and, for
            # classification_levels, the levels in use: factgen.check_levels_kept)
            names = ("key", "expected", "given", "suggestions", "in_use")
            what = {k: exc.detail[k] for k in names if k in exc.detail}
            return _problem(status, exc.code, exc.message, what)
        return _problem(status, exc.code, exc.message)

    @api.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Any:
        # the framework's own refusals (an unparsable body, no such route or method)
        code = _HTTP_CODES.get(exc.status_code, "invalid_input")
        metrics.refusals.labels(code).inc()
        return _problem(exc.status_code, code, str(exc.detail))

    @api.exception_handler(ValidationError)
    async def _invalid(request: Request, exc: ValidationError) -> Any:
        # a value the domain's own models refused, past the route's validation
        metrics.refusals.labels("invalid_input").inc()
        return _problem(422, "invalid_input", first_error(exc.errors()))

    @api.exception_handler(RequestValidationError)
    async def _malformed(request: Request, exc: RequestValidationError) -> Any:
        detail = first_error(exc.errors(), "malformed request")
        metrics.refusals.labels("invalid_input").inc()
        return _problem(422, "invalid_input", detail, {"errors": len(exc.errors())})

    add_index(api)  # GET / (a browser to /ui/, a client the JSON index) and /favicon.ico

    @api.get("/healthz", tags=["service"], **typed(HealthOut))
    def healthz() -> Any:
        """The server is up and its database answers; ``worker`` is the answering
        process's id (``caveat serve --workers N`` runs several)."""
        with runtime.transaction() as s:
            s.connection().exec_driver_sql("SELECT 1")
        return {"status": "ok", "worker": os.getpid()}

    @api.get("/metrics", tags=["service"], response_class=PlainTextResponse)
    def metrics_route() -> str:
        """Prometheus text exposition of the server's metrics (no token)."""
        worker = getattr(api.state, "background", None)
        for tenant in sorted(worker.tenants() if worker else ()):
            scoped = runtime.for_tenant(tenant)
            metrics.queue_depth.labels(tenant).set(scoped.queue_depth())
            metrics.turns_queued.labels(tenant).set(use.turn_depth(scoped)["queued"])
        return metrics.exposition().decode()

    def recalled(who: Acting, body: RecallIn, response: Response, token: str | None) -> Any:
        rt, actor = who
        with metrics.recall_seconds.time():
            done = refreshed_recall(rt, actor, body, token=token)
            answer = recall_view(done.result, done.source_errors)
        response.headers[SERVED_BY_HEADER] = use.served_by() or "primary"
        return answer

    @api.get("/v1/recall", tags=["recall"], **typed(RecallOut))
    def recall_route(
        who: Acting,
        request: Request,
        query: Annotated[str, _q("query")],
        response: Response,
        subject: Annotated[list[str] | None, _q("subjects")] = None,
        purpose: Annotated[str | None, _q("purpose")] = None,
        case: Annotated[str | None, _q("case")] = None,
        observe: Annotated[
            list[str] | None,
            Query(description="An observation made now, SUBJECT:ATTRIBUTE=VALUE (repeat)."),
        ] = None,
        as_of: Annotated[str | None, _q("as_of")] = None,
        limit: Annotated[int | None, _q("limit")] = None,
        explain: Annotated[bool, _q("explain")] = False,
        anchor: Annotated[
            list[str] | None, Query(description="A scope anchor AXIS:ID to boost (repeat).")
        ] = None,
        pin: Annotated[list[int] | None, _q("pinned")] = None,
        budget: Annotated[int | None, _q("budget")] = None,
        min_confidence: Annotated[float | None, _q("min_confidence")] = None,
        refresh: Annotated[bool, _q("refresh")] = False,
        refresh_deadline_ms: Annotated[int | None, _q("refresh_deadline_ms")] = None,
        session: Annotated[str | None, _q("session")] = None,
        source: Annotated[
            list[Literal["memory", "knowledge"]] | None,
            Query(description="Where answers come from: memory, knowledge (repeat)."),
        ] = None,
        anchors_mode: Annotated[Literal["extend", "replace"], _q("anchors_mode")] = "extend",
        consistency: TokenIn = None,
    ) -> Any:
        """Precedents whose conditions hold now: the six gates, then ranking. A pure
        read: nothing is recorded (POST /v1/record-use does that). Every field of the
        recall request (``POST /v1/recall`` takes the same as a JSON body); the
        answer's ``Caveat-Served-By`` header says whether a replica or the primary
        served it. A query parameter it does not take is refused, not ignored. With
        ``refresh``, what the candidates' conditions lack is first pulled from the fact
        sources within the deadline (``source_errors`` names a source that failed);
        the recall itself is still a read."""
        unknown = sorted(set(request.query_params) - _RECALL_PARAMS)
        if unknown:
            raise InputError(
                f"{unknown[0]}: not a parameter ({', '.join(sorted(_RECALL_PARAMS))})",
                attribute=unknown[0],
            )
        body = RecallIn.model_validate(
            {
                "query": query,
                "subjects": subject,
                "purpose": purpose,
                "case": case,
                "observations": [observation_fields(o, "observe") for o in observe or []],
                "as_of": instant(as_of, "as_of"),
                "limit": limit,
                "explain": explain,
                "anchors": anchor or [],
                "pinned": pin or [],
                "budget": budget,
                "min_confidence": min_confidence,
                "refresh": refresh,
                "refresh_deadline_ms": refresh_deadline_ms,
                "session": session,
                "sources": source or ["memory"],
                "anchors_mode": anchors_mode,
            }
        )
        return recalled(who, body, response, consistency)

    @api.post("/v1/recall", tags=["recall"], **typed(RecallOut))
    def recall_post_route(
        who: Acting, body: RecallIn, response: Response, consistency: TokenIn = None
    ) -> Any:
        """The same read as ``GET /v1/recall``, the request as a JSON body (inline
        observations and anchors as objects). Nothing is recorded."""
        return recalled(who, body, response, consistency)

    @api.post("/v1/record-use", tags=["recall"], **typed(UseOut))
    def record_use_route(who: Acting, body: RecordUseIn) -> Any:
        """Record the use of what a recall returned (the recall's request, and the ids
        used); the server re-checks every id against the same request and refuses the
        rest."""
        rt, actor = who
        done = use.record_use(rt, actor, body.to_request(), body.used)
        return use_view(done)

    @api.post("/v1/context/check", tags=["recall"], **typed(ContextOut))
    def context_route(
        who: Acting,
        body: ContextIn,
        response: Response,
        consistency: TokenIn = None,
    ) -> Any:
        """The context guard: which items may still be used; records the check (on the
        primary; the read may be a fresh replica's, as ``Caveat-Served-By`` says)."""
        rt, actor = who
        answer = use.check_context(
            rt,
            actor,
            body.items,
            case_id=body.case,
            record=True,
            token=consistency,
            observations=body.to_observations(),
            session=body.session,
        )
        response.headers[SERVED_BY_HEADER] = use.served_by() or "primary"
        return context_view(answer)

    @api.post("/v1/cases", status_code=201, tags=["cases"], **typed(CaseOut, 201))
    def open_case_route(who: Acting, body: CaseIn) -> Any:
        """Open a case (an incident or an agent run)."""
        rt, actor = who
        return case_view(use.open_case(rt, actor, body.id, subjects=body.subjects))

    @api.post("/v1/cases/{case_id}/close", tags=["cases"], **typed(ClosedOut))
    def close_case_route(who: Acting, case_id: str, body: CloseIn) -> Any:
        """Close a case: citations become support or counter signals."""
        rt, actor = who
        return closed_view(use.close_case(rt, actor, case_id, outcome=body.outcome))

    @api.post("/v1/items/{item_id}/cite", tags=["cases"], **typed(CitationOut))
    def cite_route(who: Acting, item_id: int, body: CiteIn) -> Any:
        """Record that an item in the case's context influenced it: how, what it expected
        and what was observed (both or neither; a skill's compliance comes from them), why."""
        rt, actor = who
        cited = use.cite(
            rt,
            actor,
            body.case,
            item_id,
            influence=body.influence,
            expected=body.expected,
            observed=body.observed,
            rationale=body.rationale,
        )
        return citation_view(cited)

    @api.post("/v1/observations", status_code=201, tags=["world"], **typed(FactsOut, 201))
    def observe_route(who: Acting, body: ObserveIn) -> Any:
        """Record typed facts; one value of the wrong type stores nothing."""
        rt, actor = who
        facts = use.observe(rt, actor, [o.observation() for o in body.observations])
        return {"facts": [fact_json(f) for f in facts]}

    return api
