"""How a route is written once for both clients.

A route is a builder function decorated with ``route(METHOD, PATH)``: it turns the
method's arguments into a ``Call`` (path parameters, query, JSON or raw body) that names
its answer model. The decorator is a descriptor: on a ``Client`` the method sends the
call and returns the answer; on an ``AsyncClient`` it returns an awaitable of the same.
``paged`` does the same for a cursor-paginated route, as an iterator over its items
(``Iterator`` on a ``Client``, ``AsyncIterator`` on an ``AsyncClient``), following the
page's ``next`` cursor.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload
from urllib.parse import quote

from pydantic import TypeAdapter, ValidationError

from caveat.client._errors import UnexpectedAnswer

__all__ = ["Call", "Paged", "Request", "Route", "paged", "route"]

T = TypeVar("T")
Row = TypeVar("Row")
P = ParamSpec("P")


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request as a route builds it, and the model its answer is read as."""

    answer: Any  # type[T], or a generic alias such as list[OutcomeOut]
    path: Mapping[str, str | int] = field(default_factory=dict)
    query: Mapping[str, Any] = field(default_factory=dict)
    json: Any = None
    content: bytes | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The answer is text (``/metrics``), not JSON.
    text: bool = False

    def read(self, data: Any) -> T:
        """The answer ``data`` (JSON, or the text of a text route) as the route's model."""
        try:
            value: T = _adapter(self.answer).validate_python(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "answer"
            raise UnexpectedAnswer(f"{where}: {first['msg']}") from exc
        return value


@functools.cache
def _adapter(answer: Any) -> TypeAdapter[Any]:
    return TypeAdapter(answer)


@dataclass(frozen=True)
class Request:
    """A call made concrete: method, path (parameters filled in), query and body."""

    method: str
    path: str
    query: Mapping[str, Any]
    json: Any
    content: bytes | str | None
    headers: Mapping[str, str]
    text: bool = False


def _request(method: str, template: str, call: Call[Any]) -> Request:
    path = template.format(**{k: quote(str(v), safe="") for k, v in call.path.items()})
    query = {k: v for k, v in call.query.items() if v is not None}
    return Request(method, path, query, call.json, call.content, call.headers, call.text)


class _Sync:
    """Marker base of the synchronous client (the descriptors dispatch on it)."""

    def _send(self, request: Request) -> Any:
        raise NotImplementedError


class _Async:
    """Marker base of the asynchronous client."""

    async def _send(self, request: Request) -> Any:
        raise NotImplementedError


class Route(Generic[P, T]):
    """A route's method: ``build`` written once, sent by either client."""

    def __init__(self, method: str, path: str, build: Callable[Concatenate[Any, P], Call[T]]):
        self.method = method
        self.path = path
        self.build = build
        self.__doc__ = build.__doc__
        self.__name__ = build.__name__

    def request(self, owner: Any, *args: P.args, **kwargs: P.kwargs) -> tuple[Request, Call[T]]:
        call = self.build(owner, *args, **kwargs)
        return _request(self.method, self.path, call), call

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Route[P, T]: ...
    @overload
    def __get__(self, obj: _Sync, owner: type[Any]) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: _Async, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...
    def __get__(self, obj: Any, owner: type[Any]) -> Any:
        if obj is None:
            return self
        if isinstance(obj, _Async):

            async def sent_async(*args: P.args, **kwargs: P.kwargs) -> T:
                request, call = self.request(obj, *args, **kwargs)
                return call.read(await obj._send(request))

            sent_async.__doc__ = self.__doc__
            return sent_async

        def sent(*args: P.args, **kwargs: P.kwargs) -> T:
            request, call = self.request(obj, *args, **kwargs)
            return call.read(obj._send(request))

        sent.__doc__ = self.__doc__
        return sent


class Paged(Generic[P, Row]):
    """A paginated route's iterator: every item of every page, following ``next``."""

    def __init__(self, route: Route[P, Any]) -> None:
        self.route = route
        self.__doc__ = route.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Paged[P, Row]: ...
    @overload
    def __get__(self, obj: _Sync, owner: type[Any]) -> Callable[P, Iterator[Row]]: ...
    @overload
    def __get__(self, obj: _Async, owner: type[Any]) -> Callable[P, AsyncIterator[Row]]: ...
    def __get__(self, obj: Any, owner: type[Any]) -> Any:
        if obj is None:
            return self

        def following(request: Request, cursor: str | None) -> Request:
            return replace(request, query={**request.query, "cursor": cursor})

        if isinstance(obj, _Async):

            async def rows_async(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[Row]:
                request, call = self.route.request(obj, *args, **kwargs)
                while True:
                    page = call.read(await obj._send(request))
                    for row in page.items:
                        yield row
                    if not page.next:
                        return
                    request = following(request, page.next)

            return rows_async

        def rows(*args: P.args, **kwargs: P.kwargs) -> Iterator[Row]:
            request, call = self.route.request(obj, *args, **kwargs)
            while True:
                page = call.read(obj._send(request))
                yield from page.items
                if not page.next:
                    return
                request = following(request, page.next)

        return rows


def route(
    method: str, path: str
) -> Callable[[Callable[Concatenate[Any, P], Call[T]]], Route[P, T]]:
    """Declare a route method: ``build`` turns its arguments into a ``Call``."""

    def made(build: Callable[Concatenate[Any, P], Call[T]]) -> Route[P, T]:
        return Route(method, path, build)

    return made


def paged(of: Route[P, Any], row: type[Row]) -> Paged[P, Row]:
    """An iterator over the items of ``of``'s pages, typed as ``row`` (the page's model
    reads them)."""
    return Paged(of)
