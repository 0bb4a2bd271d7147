"""The SME pages: each route reads its input, calls one ``caveat.app`` function and
renders a template. Rules live in the application layer and the domain; a page only
shows what they answer, and posts only what they decide."""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote, urlencode

from fastapi import Depends, FastAPI, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.exceptions import HTTPException as StarletteHTTPException

import lifecycle
from caveat import app as use
from caveat.app._input import first_error, instant
from caveat.app._policy import cli_value, policy_view
from caveat.app.views import ItemView, item_view, object_text, typed_literal
from caveat.errors import status_of
from caveat.web._graph import draw
from caveat.web._sections import SECTIONS
from caveat.web._session import COOKIE, Guard, Viewer, same_origin, viewer
from predicates.errors import CaveatError, Forbidden, InputError, NotFound, Unauthenticated

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


_UNITS = (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000), ("s", 1_000_000))


def duration_text(value: timedelta | None, parts: int = 4) -> str:
    """A duration as every page writes it: ``15m``, ``1h 30m``, ``2d 3h``, ``250ms``
    (from its largest unit, ``parts`` units at most, zeros left out; never ``0:15:00``
    nor ``900s``)."""
    if value is None:
        return "—"
    left = max(value // timedelta(microseconds=1), 0)
    if left < 1_000_000:
        return f"{left // 1000}ms"
    out, used = [], 0
    for unit, size in _UNITS:
        if used or left >= size:
            used += 1
            if left >= size:
                out.append(f"{left // size}{unit}")
            left %= size
        if used == parts:
            break
    return " ".join(out)


def _age(value: timedelta | None) -> str:
    """How long ago: ``15m ago``, ``1h 30m ago`` (minutes, or hours and minutes, ...)."""
    if value is None:
        return "—"
    if value < timedelta(seconds=1):
        return "just now"
    return f"{duration_text(value, parts=2 if value >= timedelta(hours=1) else 1)} ago"


def _templates() -> Jinja2Templates:
    t = Jinja2Templates(directory=str(_HERE / "templates"))
    t.env.filters["when"] = _when
    t.env.filters["age"] = _age
    t.env.filters["duration"] = duration_text
    t.env.filters["object_text"] = object_text
    t.env.filters["literal"] = typed_literal
    t.env.globals["ACTION_LABELS"] = ACTION_LABELS
    t.env.globals["ACTION_RIGHTS"] = lifecycle.SME_ACTIONS
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
        path = request.url.path[len(base) :] if request.url.path.startswith(base) else "/"
        kept = [(k, v) for k, v in request.query_params.multi_items() if k != "done"]
        here = path + ("?" + urlencode(kept) if kept else "")  # where a row's action returns
        return templates.TemplateResponse(
            request,
            name,
            {"base": base, "who": who, "here": here, **context},
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

    def back(next: str | None) -> str | None:
        """Where an action taken from the queue returns: a path of these pages only."""
        if next and next.startswith("/") and not next.startswith("//") and "\\" not in next:
            return next
        return None

    def action_form(
        request: Request,
        who: Viewer,
        item_id: int,
        action: str,
        *,
        next: str | None,
        error: CaveatError | None = None,
        rationale: str = "",
    ) -> HTMLResponse:
        preview = use.action_preview(who.rt, who.actor, item_id, action)
        view = item_view(use.item(who.rt, who.actor, item_id))
        return render(
            request,
            "action.html",
            who,
            200 if error is None else status_of(error).http,
            p=preview,
            view=view,
            error=None if error is None else (error.code, error.message),
            rationale=rationale,
            next=back(next),
        )

    @pages.get("/items/{item_id}/act/{action}", response_class=HTMLResponse)
    def action_page(
        request: Request, who: Seen, item_id: int, action: str, next: str | None = None
    ) -> HTMLResponse:
        return action_form(request, who, item_id, action, next=next)

    @pages.post("/items/{item_id}/act/{action}", response_model=None)
    def act(
        request: Request,
        who: Seen,
        item_id: int,
        action: str,
        csrf: Annotated[str, Form()] = "",
        rationale: Annotated[str, Form()] = "",
        next: Annotated[str | None, Form()] = None,
    ) -> Response:
        guard.check(request, who.session, csrf)
        try:
            done = use.take_action(who.rt, who.actor, item_id, action, rationale=rationale)
        except (NotFound, Forbidden):
            raise  # nothing to act on, or no right to: the error page
        except CaveatError as exc:  # the form again, the rationale kept, the error in it
            try:
                return action_form(
                    request, who, item_id, action, next=next, error=exc, rationale=rationale
                )
            except CaveatError:
                raise exc from None
        said = quote(f"{action} #{item_id}")
        if (target := back(next)) is not None:
            return go(request, f"{target}{'&' if '?' in target else '?'}done={said}")
        if done.state is None:  # redacted or forgotten: the item is gone from every page
            return go(request, f"/?done={said}")
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

    # --- a case's or an event's audit rows (neither has a page) --------------------------

    @pages.get("/audit", response_class=HTMLResponse)
    def audit_page(
        request: Request, who: Seen, case: str | None = None, event: int | None = None
    ) -> HTMLResponse:
        rows = use.audit_about(who.rt, who.actor, case=case or None, event=event)
        return render(request, "audit.html", who, rows=rows, case=case, event=event)

    # --- what changed -------------------------------------------------------------------

    @pages.get("/changes", response_class=HTMLResponse)
    def changes_page(
        request: Request,
        who: Seen,
        subject: str | None = None,
        from_: Annotated[str | None, Query(alias="from")] = None,
        to: str | None = None,
    ) -> HTMLResponse:
        ch = use.changes(
            who.rt,
            who.actor,
            from_=instant(from_ or None, "from"),
            to=instant(to or None, "to"),
            subject=subject,
        )
        items: dict[int, ItemView] = {}
        for entry in (*ch.became, *ch.stopped):
            try:
                items[entry.item_id] = item_view(use.item(who.rt, who.actor, entry.item_id))
            except NotFound:
                continue  # redacted since: named by id only
        return render(
            request,
            "changes.html",
            who,
            ch=ch,
            diff=ch.diff,
            items=items,
            subject=(subject or "").strip(),
            start=ch.diff.from_.strftime("%Y-%m-%dT%H:%M"),
            end=ch.diff.to.strftime("%Y-%m-%dT%H:%M"),
        )

    @pages.get("/shadow", response_class=HTMLResponse)
    def shadow_page(request: Request, who: Seen) -> HTMLResponse:
        report = use.shadow_report(who.rt, who.actor)
        return render(request, "shadow.html", who, report=report)

    # --- tenant policy (admins; docs/sme.md, "Tenant policy") ----------------------------

    def policy_render(
        request: Request,
        who: Viewer,
        *,
        as_of: str | None = None,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        at = instant(as_of or None, "as_of")
        shown = use.policy_show(who.rt, who.actor, as_of=at)
        keys = policy_view(shown)["keys"]
        context = {"key": "", "value": "", "error": None, "preview": None, "done": None} | context
        context["as_of"] = as_of
        return render(request, "policy.html", who, status, shown=shown, shown_keys=keys, **context)

    @pages.get("/policy", response_class=HTMLResponse)
    def policy_page(
        request: Request, who: Seen, as_of: str | None = None, done: str | None = None
    ) -> HTMLResponse:
        who.actor.require("policy")  # the page is the admin's: its form changes the policy
        return policy_render(request, who, as_of=as_of, done=done)

    @pages.post("/policy", response_model=None)
    def policy_post(
        request: Request,
        who: Seen,
        key: Annotated[str, Form()],
        value: Annotated[str, Form()],
        step: Annotated[Literal["preview", "apply"], Form()] = "preview",
        csrf: Annotated[str, Form()] = "",
    ) -> Response:
        guard.check(request, who.session, csrf)
        changes = {key.strip(): cli_value(value.strip())}
        try:
            change = use.policy_set(who.rt, who.actor, changes, dry_run=step == "preview")
        except InputError as exc:  # the form kept, the typed error in place
            error = {"code": exc.code, "message": exc.message, **exc.detail}
            return policy_render(request, who, status=422, key=key, value=value, error=error)
        if step == "preview":
            return policy_render(request, who, key=key, value=value, preview=change)
        said = ", ".join(f"{c.key} = {json.dumps(c.new)}" for c in change.changes)
        done = f"version {change.version}: {said}" if change.version else "nothing changed"
        return go(request, "/policy?done=" + quote(done))

    return pages
