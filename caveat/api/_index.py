"""What a stranger meets at the server's root: ``GET /`` and ``/favicon.ico``.

A browser (an ``Accept`` header that prefers ``text/html`` to JSON) is sent to the SME
pages at ``/ui/``; any other client gets a JSON index of where things are. docs/http.md.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from fastapi import FastAPI, Request, Response
from fastapi.responses import RedirectResponse

from caveat.answers._service import ServiceIndex, ServiceLinks

__all__ = ["ServiceIndex", "add_index", "prefers_html"]

FAVICON = Path(__file__).resolve().parents[1] / "web" / "static" / "favicon.ico"


def _version() -> str:
    try:
        return metadata.version("caveat")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a bare checkout
        return "unknown"


def _quality(accept: str, media: str) -> float:
    """The q-value ``accept`` gives ``media``: its most specific matching range's
    (``type/subtype`` over ``type/*`` over ``*/*``), 0 when none matches."""
    kind = media.split("/", 1)[0]
    best, specificity = 0.0, -1
    for part in accept.split(","):
        fields = [f.strip() for f in part.split(";")]
        rng = fields[0].lower()
        level = {media: 2, f"{kind}/*": 1, "*/*": 0}.get(rng)
        if level is None or level < specificity:
            continue
        q = 1.0
        for f in fields[1:]:
            name, _, value = f.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    q = 0.0
        if level > specificity:
            best, specificity = q, level
        else:
            best = max(best, q)
    return best


def prefers_html(accept: str | None) -> bool:
    """Whether an ``Accept`` header ranks HTML above JSON (a browser's does; ``*/*``, a
    missing header and ``application/json`` do not)."""
    if not accept:
        return False
    html = max(_quality(accept, "text/html"), _quality(accept, "application/xhtml+xml"))
    return html > _quality(accept, "application/json")


def add_index(api: FastAPI) -> None:
    """Add ``GET /`` and ``GET /favicon.ico`` to ``api``."""
    icon = FAVICON.read_bytes()

    @api.get(
        "/",
        tags=["service"],
        response_model=ServiceIndex,
        responses={307: {"description": "A browser: redirected to the SME pages at /ui/."}},
    )
    def index(request: Request, response: Response) -> ServiceIndex | Response:
        """Where things are: a browser is sent to ``/ui/``, an API client gets this index."""
        if prefers_html(request.headers.get("accept")):
            return RedirectResponse("/ui/", status_code=307, headers={"Vary": "Accept"})
        paths = sorted(p for p in api.openapi()["paths"] if p.startswith("/v1/"))  # cached
        response.headers["Vary"] = "Accept"
        return ServiceIndex(
            service="caveat",
            version=_version(),
            links=ServiceLinks(
                openapi=api.openapi_url or "/openapi.json",
                docs=api.docs_url,
                v1=paths,
                mcp="/mcp",
                ui="/ui/",
                metrics="/metrics",
                healthz="/healthz",
            ),
        )

    @api.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(
            icon, media_type="image/x-icon", headers={"Cache-Control": "public, max-age=86400"}
        )
