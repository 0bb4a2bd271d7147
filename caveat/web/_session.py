"""Who is looking at a page: the API token in an HTTP-only cookie, and the forms' guard
against cross-site request forgery.

A login posts an API token (docs/claims.md, "Tokens"); the server authenticates it
and keeps it in a cookie that scripts cannot read (``HttpOnly``) and that no other
site's request carries (``SameSite=Strict``). Every page re-authenticates it, so a
revoked token is logged out at its next click. Every form carries a CSRF token,
an HMAC of the session's token under a key the server holds; a post without the
right one, or with an ``Origin`` of another site, is refused before anything runs.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import Request

import claims
from caveat import app as use
from predicates.errors import Forbidden, Unauthenticated

__all__ = ["COOKIE", "Guard", "Viewer", "same_origin", "viewer"]

#: The session cookie's name.
COOKIE = "caveat_session"


def same_origin(request: Request) -> bool:
    """Whether a post comes from this site: no ``Origin`` (or an opaque one), or one
    naming the host the request was sent to."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return True
    return urlsplit(origin).netloc == request.headers.get("host", "")


@dataclass(frozen=True)
class Guard:
    """The server's CSRF key (new at each start: a restart asks forms to be reloaded)."""

    key: bytes

    @classmethod
    def new(cls) -> Guard:
        """A guard with a fresh random key."""
        return cls(secrets.token_bytes(32))

    def token_for(self, session: str) -> str:
        """The CSRF token the forms of ``session`` carry."""
        return hmac.new(self.key, session.encode(), hashlib.sha256).hexdigest()

    def check(self, request: Request, session: str, given: str | None) -> None:
        """Refuse (``forbidden``) a post from another origin or without this session's
        CSRF token."""
        if not same_origin(request):
            raise Forbidden("a form posted from another site is refused")
        if not given or not hmac.compare_digest(given, self.token_for(session)):
            raise Forbidden("the form's CSRF token is missing or wrong: reload the page")


@dataclass(frozen=True)
class Viewer:
    """The tenant's runtime, the principal a page acts for, and its forms' CSRF token."""

    rt: use.Runtime
    actor: claims.Actor
    session: str
    csrf: str

    def may(self, action: str) -> bool:
        """Whether the principal's role allows ``action`` (what a page offers)."""
        return self.actor.may(action)


def viewer(request: Request) -> Viewer:
    """The viewer of a page from its session cookie (``unauthenticated`` without one, or
    with a token that authenticates no more: the pages send a GET to the login)."""
    token = request.cookies.get(COOKIE)
    if not token:
        raise Unauthenticated("log in with an API token")
    rt, actor = use.authenticate(request.app.state.runtime, token)
    guard: Guard = request.app.state.guard
    return Viewer(rt, actor, token, guard.token_for(token))
