"""The two clients: ``Client`` over ``httpx.Client`` and ``AsyncClient`` over
``httpx.AsyncClient``, the same surface (``Api``'s routes), two thin transports.

Both send the bearer token on every request, carry the consistency token (the latest
``Caveat-Consistency-Token`` position an answer gave, sent with every later request: a
read replica answers a recall or a context check only once it has replayed that far,
docs/http.md "Read replicas"), turn a refusal's problem details into the error tree
(``caveat.client._errors``) and a transport failure into ``TransportError``.
"""

from __future__ import annotations

import re
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import httpx

from caveat.client._api import Api
from caveat.client._errors import CaveatError, TransportError, UnexpectedAnswer, from_problem
from caveat.client._guard import AsyncContext, Context
from caveat.client._route import Request, _Async, _Sync

__all__ = ["TOKEN_HEADER", "AsyncClient", "Client"]

#: The header of a consistency token (docs/http.md "Read replicas").
TOKEN_HEADER = "Caveat-Consistency-Token"
_DEFAULT_TIMEOUT = 30.0
H = TypeVar("H", httpx.Client, httpx.AsyncClient)
_POSITION = re.compile(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})")


def _position(token: str) -> int | None:
    """A token's WAL position ``X/Y`` as a number (None: not one)."""
    m = _POSITION.fullmatch(token)
    return None if m is None else (int(m[1], 16) << 32) + int(m[2], 16)


def _later_token(held: str | None, given: str) -> str:
    """The token to keep: ``given``, unless both are WAL positions and ``held`` is the
    later (answers of concurrent calls, ``asyncio.gather``, may arrive out of order;
    the TypeScript client keeps the later position too)."""
    now, before = _position(given), None if held is None else _position(held)
    return (
        held
        if held is not None and now is not None and before is not None and before > now
        else given
    )


class _Session(Generic[H]):
    """What both clients hold: their httpx client, the headers to send and the
    consistency token."""

    _http: type[H]

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        token: str | None = None,
        timeout: float = _DEFAULT_TIMEOUT,
        consistency_token: str | None = None,
        http: H | None = None,
    ) -> None:
        """A client of the server at ``base_url`` with a bearer ``token``, or over an
        httpx client of your own (``http``: its base URL, timeouts, transport, hooks);
        ``consistency_token``: one a write answered elsewhere, for the first read."""
        self.consistency_token = consistency_token
        self._auth = {"Authorization": f"Bearer {token}"} if token else {}
        self.http: H = http or self._http(base_url=base_url, timeout=timeout)

    def _headers(self, request: Request) -> dict[str, str]:
        headers = {**self._auth, **request.headers}
        if self.consistency_token is not None:
            headers[TOKEN_HEADER] = self.consistency_token
        return headers

    def _read(self, request: Request, response: httpx.Response) -> Any:
        """The answer's JSON (or text), having kept its consistency token; a refusal
        raised as its error."""
        token = response.headers.get(TOKEN_HEADER)
        if token:
            self.consistency_token = _later_token(self.consistency_token, token)
        if response.status_code >= 400:
            try:
                problem = response.json()
            except ValueError:
                problem = None
            if not isinstance(problem, dict) or "code" not in problem:
                raise UnexpectedAnswer(
                    f"{request.method} {request.path}: HTTP {response.status_code} without "
                    "problem details",
                    status=response.status_code,
                )
            raise from_problem(response.status_code, problem)
        if request.text:
            return response.text
        try:
            return response.json()
        except ValueError as exc:
            raise UnexpectedAnswer(
                f"{request.method} {request.path}: the answer is not JSON",
                status=response.status_code,
            ) from exc

    def _build(self, http: httpx.Client | httpx.AsyncClient, request: Request) -> httpx.Request:
        return http.build_request(
            request.method,
            request.path,
            params=request.query,
            json=request.json,
            content=request.content,
            headers=self._headers(request),
        )


def _failed(request: Request, exc: httpx.HTTPError) -> CaveatError:
    return TransportError(f"{request.method} {request.path}: {type(exc).__name__}: {exc}")


class Client(_Sync, _Session[httpx.Client], Api):
    """The HTTP API over ``httpx.Client``: ``Client(base_url, token=...)``, or over a
    client of your own (``http=``: its base URL, timeouts, transport)."""

    _http = httpx.Client

    def _send(self, request: Request) -> Any:
        try:
            response = self.http.send(self._build(self.http, request))
        except httpx.HTTPError as exc:
            raise _failed(request, exc) from exc
        return self._read(request, response)

    def context(self, case: str | None = None, *, session: str | None = None) -> Context:
        """The context guard for one agent run (``with client.context(case) as ctx``)."""
        return Context(self, case=case, session=session)

    def close(self) -> None:
        """Close the underlying HTTP client."""
        self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncClient(_Async, _Session[httpx.AsyncClient], Api):
    """``Client``'s surface over ``httpx.AsyncClient``: every route method is awaited,
    every ``iter_*`` is an async iterator."""

    _http = httpx.AsyncClient

    async def _send(self, request: Request) -> Any:
        try:
            response = await self.http.send(self._build(self.http, request))
        except httpx.HTTPError as exc:
            raise _failed(request, exc) from exc
        return self._read(request, response)

    def context(self, case: str | None = None, *, session: str | None = None) -> AsyncContext:
        """The context guard (``async with client.context(case) as ctx``)."""
        return AsyncContext(self, case=case, session=session)

    async def aclose(self) -> None:
        """Close the underlying HTTP client."""
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
