"""The one way a connector reaches an outside system over HTTP: a GET that answers JSON,
with a timeout on every call, or a ``FetchError`` saying what went wrong in words an
operator reads in ``caveat sources status`` (never a token, never a traceback).

``Transport`` wraps one ``httpx.Client`` (connections kept alive, safe to share between
threads); the process has one (``transport()``), and a test or a benchmark may hand a
connector another pointed at a real local server.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

import httpx

from caveat.settings import Settings

__all__ = ["FetchError", "Transport", "bearer", "transport"]

#: The most of an error answer's body quoted in a ``FetchError``.
_QUOTE = 200


class FetchError(Exception):
    """One fetch failed: the source is down, slow, answered an error or not JSON."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)} ms"


def _problem(answer: httpx.Response) -> str:
    """What an error answer says: Prometheus's ``errorType: error``, else its text."""
    try:
        body = answer.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        kind = body.get("errorType")
        return f"{kind}: {body['error']}" if isinstance(kind, str) else body["error"]
    return answer.text.strip()[:_QUOTE]


class Transport:
    """GET JSON over one ``httpx.Client``."""

    def __init__(self, client: httpx.Client | None = None) -> None:
        self.client = client or httpx.Client(
            follow_redirects=False,
            limits=httpx.Limits(max_connections=32, max_keepalive_connections=16),
            headers={"Accept": "application/json", "User-Agent": "caveat-connectors"},
        )

    def get_json(
        self,
        url: str,
        *,
        timeout: float,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """The decoded JSON body of a 2xx answer; ``FetchError`` for a timeout (each of
        connect, write, read and pool waits at most ``timeout`` seconds), a connection
        refused or reset, a 3xx/4xx/5xx answer (with what its body says) or a body that
        is not JSON."""
        try:
            answer = self.client.get(
                url, params=params, headers=headers, timeout=httpx.Timeout(timeout)
            )
        except httpx.TimeoutException:
            raise FetchError(f"timed out after {_ms(timeout)}") from None
        except httpx.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise FetchError(f"cannot reach {_origin(url)}: {reason}") from None
        if not answer.is_success:
            problem = _problem(answer)
            raise FetchError(f"HTTP {answer.status_code}" + (f": {problem}" if problem else ""))
        try:
            return answer.json()
        except ValueError:
            kind = answer.headers.get("content-type", "no content type")
            raise FetchError(f"the answer is not JSON ({kind})") from None

    def close(self) -> None:
        self.client.close()


def _origin(url: str) -> str:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "the source"
    return f"{parsed.scheme}://{parsed.host}" + (f":{parsed.port}" if parsed.port else "")


def bearer(token_env: str | None) -> dict[str, str]:
    """The ``Authorization`` header for a source's ``token_env`` (none without one);
    ``FetchError`` naming the variable, never its value, when the operator does not allow
    it (``CAVEAT_SOURCE_ENV``) or it is not set."""
    if token_env is None:
        return {}
    allowed = {n.strip() for n in Settings().source_env.split(",") if n.strip()}
    if token_env not in allowed:
        raise FetchError(
            f"token_env {token_env} is not a variable the server allows sources to send "
            "(the operator lists them in CAVEAT_SOURCE_ENV)"
        )
    token = os.environ.get(token_env)
    if not token:
        raise FetchError(f"the environment variable {token_env} (token_env) is not set")
    return {"Authorization": f"Bearer {token}"}


@functools.cache
def transport() -> Transport:
    """The process's transport, made on first use."""
    return Transport()
