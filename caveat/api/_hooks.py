"""``POST /v1/hooks/{kind}``: webhooks from Alertmanager, GitHub, CloudEvents senders and
PagerDuty (docs/hooks.md). The body is read raw (a signature is over its bytes) and
handed to ``caveat.connectors.receive``; a refusal is problem details with its code."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.concurrency import run_in_threadpool

from caveat import app as use
from caveat import connectors
from caveat.api._deps import typed

__all__ = ["router"]

router = APIRouter()


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HookFactOut(_Out):
    subject: str
    attribute: str


class HookSkippedOut(_Out):
    subject: str
    attribute: str
    code: str


class HookDoneOut(_Out):
    """One thing a delivery did: ``open_case``, ``join_case``, ``observe``, ``event``,
    ``close_case``, ``awaiting_outcome`` or ``ignored``, with what it touched."""

    action: str
    case: str | None = None
    subjects: list[str] | None = None
    status: str | None = None
    facts: list[HookFactOut] | None = None
    skipped: list[HookSkippedOut] | None = None
    event: int | None = None
    type: str | None = None
    affected: list[int] | None = None
    outcome: str | None = None
    reason: str | None = None


class DeliveryOut(_Out):
    """What a delivery did; a repeat of a delivery id answers the first time's, with
    ``duplicate`` true."""

    kind: str
    delivery_id: str | None
    duplicate: bool
    done: list[HookDoneOut]


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
    body = await request.body()
    delivery = await run_in_threadpool(
        connectors.receive,
        runtime,
        kind,
        body=body,
        headers=dict(request.headers),
        tenant=tenant,
    )
    ignored = bool(delivery.done) and all(d.get("action") == "ignored" for d in delivery.done)
    background = getattr(request.app.state, "background", None)
    if background is not None and not ignored:
        background.touch(runtime.tenant if tenant is None else tenant)
    return JSONResponse(delivery.to_json(), status_code=202 if ignored else 200)
