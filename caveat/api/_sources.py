"""The routes of a tenant's fact sources (model §2.1; docs/http.md, docs/sources.md):
load its ``sources.yaml`` (admin), show it and its sources' status (SME or admin), and
pull now (admin). Each validates, calls one ``caveat.app`` use case and renders."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool

from caveat import app as use
from caveat.api._deps import Acting, typed
from caveat.app._sources_out import (
    PullsOut,
    SourcesOut,
    SourcesStatusOut,
    pulls_view,
    sources_view,
    status_view,
)
from predicates.errors import InputError, NotFound

__all__ = ["YAML_TYPES", "router", "yaml_body", "yaml_text"]

router = APIRouter()

#: The media types ``PUT /v1/sources`` takes its YAML text as.
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/plain")


def yaml_body(description: str) -> dict[str, Any]:
    """A YAML text body as /openapi.json documents it: a string, ``text/plain``. The
    YAML media types are taken too, and left out of the document: a client generated
    from it (or a fuzzer) would send a YAML-serialised object there, not the file's text."""
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    }


async def yaml_text(request: Request, what: str) -> str:
    """The request's body as the text of the YAML file ``what``: ``invalid_input`` for
    another content type or a body that is not UTF-8."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in YAML_TYPES:
        raise InputError(
            f"send the {what} text as {' or '.join(YAML_TYPES[::3])}, not {kind or 'none'}",
            attribute="content-type",
        )
    raw = await request.body()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"the body is not UTF-8 text ({exc.reason})") from None


_YAML_BODY = yaml_body("The sources.yaml text (docs/sources.md, Configuration).")


@router.put("/v1/sources", tags=["sources"], openapi_extra=_YAML_BODY, **typed(SourcesOut))
async def load_sources_route(request: Request, who: Acting) -> Any:
    """Load the tenant's ``sources.yaml`` (admin): the YAML text as the body
    (``application/yaml`` or ``text/plain``), validated with the line and column of the
    first problem (``document_invalid``, 422) and every attribute checked against the
    schema; it replaces the tenant's sources, with an audit row."""
    rt, actor = who
    text = await yaml_text(request, "sources.yaml")
    loaded = await run_in_threadpool(use.load_sources, rt, actor, text, source_name="sources.yaml")
    return sources_view(loaded)


@router.get("/v1/sources", tags=["sources"], **typed(SourcesOut))
def show_sources_route(who: Acting) -> Any:
    """The tenant's sources as loaded (SME or admin); 404 when none was loaded."""
    rt, actor = who
    loaded = use.show_sources(rt, actor)
    if loaded is None:
        raise NotFound("no sources.yaml loaded for this tenant (PUT /v1/sources)")
    return sources_view(loaded)


@router.post("/v1/sources/pull", tags=["sources"], **typed(PullsOut))
def pull_sources_route(
    request: Request,
    who: Acting,
    name: Annotated[
        list[str] | None,
        Query(description="A source to pull (repeat; none: every declared source)."),
    ] = None,
) -> Any:
    """Pull sources now, whatever their schedule (admin): one answer per source, with
    samples stored, refused by reason and its error (a source down is an answer with
    its error, not a failed request); 404 for a name sources.yaml does not declare."""
    rt, actor = who
    return pulls_view(use.pull_sources(rt, actor, name, puller=request.app.state.puller))


@router.get("/v1/sources/status", tags=["sources"], **typed(SourcesStatusOut))
def sources_status_route(who: Acting) -> Any:
    """Each source's pulls, samples stored, refusals by reason, errors and the last
    error, latency, consecutive failures, and when caveat serve pulls it next (SME or
    admin)."""
    rt, actor = who
    return status_view(use.sources_status(rt, actor))
