"""``POST /v1/hooks/{kind}``: webhooks from Alertmanager, GitHub, CloudEvents senders and
PagerDuty (docs/hooks.md). The body is read raw (a signature is over its bytes) and
handed to ``caveat.connectors.receive``; a refusal is problem details with its code."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from caveat import app as use
from caveat import connectors
from caveat.answers._service import DeliveryOut
from caveat.api._deps import typed
from predicates.errors import CaveatError

__all__ = ["router"]

router = APIRouter()


_DOC = typed(DeliveryOut)
_DOC["responses"][202] = {"model": DeliveryOut, "description": "Acknowledged, nothing to do"}


@router.post("/v1/hooks/{kind}", tags=["hooks"], **_DOC)
async def hook_route(
    request: Request,
    kind: Annotated[str, Path(description="alertmanager, github, cloudevents or pagerduty")],
    tenant: Annotated[
        str | None,
        Query(
            description="The tenant of a signed delivery without a token (default: the "
            "server's); with a token, the token's tenant (another is refused).",
            min_length=1,
            max_length=63,
        ),
    ] = None,
) -> Any:
    """Receive one webhook as its sender sends it (raw body, the sender's headers).
    Authenticated by a bearer token of role ``source`` or by the sender's signature
    (GitHub ``X-Hub-Signature-256``, PagerDuty ``X-PagerDuty-Signature``); acted on in
    one transaction, once per delivery id. 200 with what was done (or, for a repeat,
    what the first delivery did); 202 when the delivery asks for nothing (ignored, with
    the reason)."""
    runtime: use.Runtime = request.app.state.runtime
    metrics = request.app.state.metrics
    body = await request.body()
    try:
        delivery = await run_in_threadpool(
            connectors.receive,
            runtime,
            kind,
            body=body,
            headers=dict(request.headers),
            tenant=tenant,
        )
    except CaveatError as exc:
        metrics.hook_delivered(kind, exc.code)
        raise
    ignored = bool(delivery.done) and all(d.get("action") == "ignored" for d in delivery.done)
    metrics.hook_delivered(
        kind, "ignored" if ignored else "duplicate" if delivery.duplicate else "done"
    )
    background = getattr(request.app.state, "background", None)
    if background is not None and not ignored:
        background.touch(runtime.tenant if tenant is None else tenant)
    return JSONResponse(delivery.to_json(), status_code=202 if ignored else 200)
