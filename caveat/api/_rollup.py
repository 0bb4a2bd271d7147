"""The routes of the tenant's registry (show it; load it, admin) and of the episodic ->
semantic rollup (its preview and its write). Each validates, calls one ``caveat.app``
use case and renders (docs/http.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from caveat import app as use
from caveat.api._deps import Acting, typed
from caveat.api._sources import yaml_body, yaml_text
from caveat.app._rollup_out import RegistryOut, RollupsOut, registry_view, rollups_view

__all__ = ["router"]

router = APIRouter()

_YAML_BODY = yaml_body("The registry file's text (docs/claims.md, the registry).")


@router.put("/v1/registry", tags=["registry"], openapi_extra=_YAML_BODY, **typed(RegistryOut))
async def load_registry_route(request: Request, who: Acting) -> Any:
    """Load the tenant's registry (admin): its own scope axes and content types (their
    expiry triggers and secondary TTL), the YAML text as the body (``application/yaml``
    or ``text/plain``), validated with the line and column of the first problem
    (``document_invalid``, 422). It replaces the tenant's registry, with an audit row;
    removing a content type that current items use is ``content_type_in_use`` (409)."""
    rt, actor = who
    text = await yaml_text(request, "registry")
    await run_in_threadpool(use.load_registry, rt, actor, text, source_name="registry.yaml")
    return registry_view(await run_in_threadpool(use.show_registry, rt, actor))


@router.get("/v1/registry", tags=["registry"], **typed(RegistryOut))
def show_registry_route(who: Acting) -> Any:
    """The axes and content types the tenant's writes, events and TTLs use (built-ins
    included) and its registry's last load (every role)."""
    rt, actor = who
    return registry_view(use.show_registry(rt, actor))


class RollupIn(BaseModel):
    """What to roll up: episodes of one subject (all when absent); a dry run writes
    nothing and answers what would be written."""

    model_config = ConfigDict(extra="forbid", strict=True)

    subject: str | None = Field(default=None, min_length=1)
    dry_run: bool = False


#: No body: every subject's episodes, written.
_EVERY = RollupIn()


@router.post("/v1/rollup", tags=["lifecycle"], **typed(RollupsOut))
def rollup_route(who: Acting, body: Annotated[RollupIn, Body()] = _EVERY) -> Any:
    """Roll related episodes up into semantic items (agents and admins): the
    deterministic clusters, each written through the gate as a hypothesis derived from
    its episodes, which are then archived; a refusal is reported per cluster with its
    code. With ``dry_run``, the same clusters and items, nothing written."""
    rt, actor = who
    if body.dry_run:
        plans = use.rollup_preview(rt, actor, subject=body.subject)
        return rollups_view(plans, dry_run=True)
    return rollups_view(use.rollup(rt, actor, subject=body.subject), dry_run=False)
