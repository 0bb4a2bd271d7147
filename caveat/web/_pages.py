"""The SME pages: each route reads its input, calls one ``caveat.app`` function and
renders a template. Rules live in the application layer and the domain; a page only
shows what they answer, and posts only what they decide."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import Depends, FastAPI, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

from caveat import app as use
from caveat.app._input import first_error, instant
from caveat.app.views import ItemView, item_view, object_text, typed_literal
from caveat.errors import status_of
from caveat.web._graph import draw
from caveat.web._sections import SECTIONS
from caveat.web._session import COOKIE, Guard, Viewer, same_origin, viewer
from predicates.errors import CaveatError, NotFound, Unauthenticated

__all__ = ["create_pages"]

_HERE = Path(__file__).parent
_PER_PAGE = 20
_PREVIEW = 5  # rows of each section on the landing page

Seen = Annotated[Viewer, Depends(viewer)]

#: The actions' labels and what each asks for (verbs an SME reads on a button).
ACTION_LABELS = {
    "verify": "Verify",
    "promote": "Promote to shadow",
    "graduate": "Graduate to active",
    "drop": "Drop to case",
    "refute": "Refute",
    "revoke": "Revoke",
    "redact": "Redact",
    "forget": "Forget (erase for good)",
}


def _when(value: datetime | None) -> str:
    return "—" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _age(value: timedelta | None) -> str:
    if value is None:
        return "—"
    s = int(value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit} ago"
    return f"{max(s, 0)}s ago"


def _templates() -> Jinja2Templates:
    t = Jinja2Templates(directory=str(_HERE / "templates"))
    t.env.filters["when"] = _when
    t.env.filters["age"] = _age
    t.env.filters["object_text"] = object_text
    t.env.filters["literal"] = typed_literal
    t.env.globals["ACTION_LABELS"] = ACTION_LABELS
    return t


def create_pages(runtime: use.Runtime) -> FastAPI:
    """The SME pages as an application to mount (``caveat serve`` mounts it at ``/ui``),
    over the same runtime as the API."""
    pages = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    pages.state.runtime = runtime
    pages.state.guard = guard = Guard.new()
    templates = _templates()
    pages.mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static")

    def render(
        request: Request,
        name: str,
        who: Viewer | None,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        base = request.scope.get("root_path", "")
        return templates.TemplateResponse(
            request,
            name,
            {"base": base, "who": who, **context},
            status_code=status,
        )

    def go(request: Request, path: str) -> RedirectResponse:
        return RedirectResponse(request.scope.get("root_path", "") + path, status_code=303)

    @pages.exception_handler(Unauthenticated)
    async def _login(request: Request, exc: Unauthenticated) -> Response:
        if request.method == "GET":
            return go(request, f"/login?next={request.url.path}")
        return render(request, "error.html", None, 401, code=exc.code, message=exc.message)

    @pages.exception_handler(CaveatError)
    async def _refused(request: Request, exc: CaveatError) -> Response:
        who = None
        with contextlib.suppress(CaveatError):
            who = viewer(request)
        status = status_of(exc).http
        return render(request, "error.html", who, status, code=exc.code, message=exc.message)

    @pages.exception_handler(RequestValidationError)
    async def _malformed(request: Request, exc: RequestValidationError) -> Response:
        message = first_error(exc.errors(), "malformed request")
        return render(request, "error.html", None, 422, code="invalid_input", message=message)

    @pages.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        code = "not_found" if exc.status_code == 404 else "invalid_input"
        return render(request, "error.html", None, exc.status_code, code=code, message=exc.detail)

    # --- logging in and out -------------------------------------------------------------

    @pages.get("/login", response_class=HTMLResponse)
    def login_page(request: Request, next: str = "/") -> HTMLResponse:
        return render(request, "login.html", None, next=next, error=None)

    @pages.post("/login", response_model=None)
    def login(
        request: Request,
        token: Annotated[str, Form()],
        next: Annotated[str, Form()] = "/",
    ) -> Response:
        if not same_origin(request):
            return render(request, "login.html", None, 403, next="/", error="cross-site login")
        try:
            use.authenticate(request.app.state.runtime, token.strip())
        except CaveatError as exc:
            return render(request, "login.html", None, 401, next=next, error=exc.message)
        base = request.scope.get("root_path", "")
        target = next if next.startswith("/") and not next.startswith("//") else "/"
        if base and target.startswith(base):
            target = target[len(base) :] or "/"
        response = go(request, target)
        response.set_cookie(
            COOKIE, token.strip(), httponly=True, samesite="strict", path=base or "/"
        )
        return response

    @pages.post("/logout")
    def logout(request: Request, who: Seen, csrf: Annotated[str, Form()] = "") -> Response:
        guard.check(request, who.session, csrf)
        response = go(request, "/login")
        response.delete_cookie(COOKIE, path=request.scope.get("root_path", "") or "/")
        return response

    # --- the queue ----------------------------------------------------------------------

    @pages.get("/", response_class=HTMLResponse)
    def queue_page(request: Request, who: Seen, subject: str | None = None) -> HTMLResponse:
        queue = use.review_queue(who.rt, who.actor).about(subject)
        sections = [
            (s, use.listing(s.rows(queue), sorts=s.sorts, per_page=_PREVIEW))
            for s in SECTIONS.values()
        ]
        return render(
            request, "queue.html", who, queue=queue, sections=sections, subject=subject or ""
        )

    @pages.get("/queue/{section}", response_class=HTMLResponse)
    def section_page(
        request: Request,
        who: Seen,
        section: str,
        subject: str | None = None,
        sort: str | None = None,
        desc: bool = False,
        page: Annotated[int, Query(ge=1)] = 1,
    ) -> HTMLResponse:
        s = SECTIONS.get(section)
        if s is None:
            raise NotFound(f"no section {section!r}; expected one of {', '.join(SECTIONS)}")
        queue = use.review_queue(who.rt, who.actor).about(subject)
        page_of = use.listing(
            s.rows(queue), sorts=s.sorts, sort=sort, descending=desc, page=page, per_page=_PER_PAGE
        )
        return render(
            request,
            "section.html",
            who,
            queue=queue,
            section=s,
            listing=page_of,
            subject=(subject or "").strip(),
        )

    # --- one item -----------------------------------------------------------------------

    @pages.get("/items/{item_id}", response_class=HTMLResponse)
    def item_page(
        request: Request, who: Seen, item_id: int, done: str | None = None
    ) -> HTMLResponse:
        d = use.item_dossier(who.rt, who.actor, item_id)
        return render(
            request,
            "item.html",
            who,
            d=d,
            view=item_view(d.item),
            graph=draw(d.lineage),
            done=done,
        )

    @pages.get("/items/{item_id}/act/{action}", response_class=HTMLResponse)
    def action_page(request: Request, who: Seen, item_id: int, action: str) -> HTMLResponse:
        preview = use.action_preview(who.rt, who.actor, item_id, action)
        view = item_view(use.item(who.rt, who.actor, item_id))
        return render(request, "action.html", who, p=preview, view=view, error=None)

    @pages.post("/items/{item_id}/act/{action}", response_model=None)
    def act(
        request: Request,
        who: Seen,
        item_id: int,
        action: str,
        csrf: Annotated[str, Form()] = "",
        rationale: Annotated[str, Form()] = "",
    ) -> Response:
        guard.check(request, who.session, csrf)
        done = use.take_action(who.rt, who.actor, item_id, action, rationale=rationale)
        if done.state is None:  # redacted or forgotten: the item is gone from every page
            return go(request, f"/?done={action}")
        return go(request, f"/items/{item_id}?done={action}")

    # --- a case awaiting its outcome ---------------------------------------------------

    @pages.post("/cases/{case_id}/close", response_model=None)
    def close(
        request: Request,
        who: Seen,
        case_id: str,
        outcome: Annotated[Literal["confirmed", "rejected"], Form()],
        csrf: Annotated[str, Form()] = "",
    ) -> Response:
        guard.check(request, who.session, csrf)
        use.close_case(who.rt, who.actor, case_id, outcome=outcome)
        return go(request, "/?done=" + quote(f"closed case {case_id} as {outcome}"))

    # --- what changed -------------------------------------------------------------------

    @pages.get("/changes", response_class=HTMLResponse)
    def changes_page(
        request: Request,
        who: Seen,
        subject: str | None = None,
        from_: Annotated[str | None, Query(alias="from")] = None,
        to: str | None = None,
    ) -> HTMLResponse:
        now = use.utcnow()
        start = instant(from_ or None, "from") or now - timedelta(days=7)
        end = instant(to or None, "to") or now
        subjects = [subject.strip()] if subject and subject.strip() else None
        diff = use.diff(who.rt, who.actor, from_=start, to=end, subjects=subjects, now=now)
        items: dict[int, ItemView] = {}
        for entry in diff.entries:
            try:
                items[entry.item_id] = item_view(use.item(who.rt, who.actor, entry.item_id))
            except NotFound:
                continue  # redacted since: named by id only
        return render(
            request,
            "changes.html",
            who,
            diff=diff,
            items=items,
            subject=subject or "",
            start=start.strftime("%Y-%m-%dT%H:%M"),
            end=end.strftime("%Y-%m-%dT%H:%M"),
        )

    @pages.get("/shadow", response_class=HTMLResponse)
    def shadow_page(request: Request, who: Seen) -> HTMLResponse:
        report = use.shadow_report(who.rt, who.actor)
        return render(request, "shadow.html", who, report=report)

    return pages
