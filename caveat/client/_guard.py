"""The context guard helper (docs/agents.md, "The loop", steps 3, 4 and 6)::

    with client.context("INC-1041") as ctx:
        found = ctx.recall("checkout 502s", subjects=["payment-api"])
        ctx.use([r.item.id for r in found.items])      # record_use: what went in
        ...
        checked = ctx.check(observations=[...])         # before each model call
        prompt = [i for i in context if i.id in ctx.items]

It keeps the ids the agent put into its context (those ``record_use`` accepted), and
``check`` asks ``POST /v1/context/check`` about them with the guard's case and
session: what it drops leaves ``items`` and is kept in ``dropped`` with the reason.
``AsyncContext`` is the same over an ``AsyncClient``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from caveat.answers import ContextOut, RecallOut, UseOut
from caveat.client._api import Observation

if TYPE_CHECKING:
    from caveat.client._client import AsyncClient, Client

__all__ = ["AsyncContext", "Context"]


class _Guard:
    """The guard's state, shared by both forms."""

    def __init__(self, *, case: str | None, session: str | None) -> None:
        self.case = case
        self.session = session
        #: The ids in the agent's context, in the order they entered it.
        self.items: list[int] = []
        #: Every id a check dropped, with its reason (``revoked``, ``applicability``, ...).
        self.dropped: dict[int, str] = {}
        #: Every id ``record_use`` refused, with its reason.
        self.refused: dict[int, str] = {}
        self._request: dict[str, Any] | None = None

    def _recall_request(self, query: str, request: dict[str, Any]) -> dict[str, Any]:
        # None fields are left out where the request is sent (``_api._fields``)
        self._request = {"query": query, "case": self.case, "session": self.session, **request}
        return self._request

    def _use_request(self, ids: Sequence[int]) -> dict[str, Any]:
        if self._request is None:
            raise ValueError("use: recall through the guard first (ctx.recall)")
        return {**self._request, "used": list(ids)}

    def _used(self, done: UseOut) -> UseOut:
        self.items += [i for i in done.used if i not in self.items]
        self.refused |= {int(k): v for k, v in done.refused.items()}
        return done

    def _checked(self, answer: ContextOut) -> ContextOut:
        dropped = {int(k): v for k, v in answer.dropped.items()}
        self.dropped |= dropped
        self.items = [i for i in self.items if i not in dropped]
        return answer

    def _check_args(self, observations: Sequence[Observation] | None) -> dict[str, Any]:
        return {
            "items": list(self.items),
            "case": self.case,
            "session": self.session,
            "observations": observations,
        }


class Context(_Guard):
    """The guard over a ``Client``: ``recall``, ``use``, and ``check`` before each model
    call."""

    def __init__(self, client: Client, *, case: str | None, session: str | None) -> None:
        super().__init__(case=case, session=session)
        self.client = client

    def recall(self, query: str, **request: Any) -> RecallOut:
        """A recall in the guard's case and session (a read: nothing enters the context)."""
        return self.client.recall(**self._recall_request(query, request))

    def use(self, ids: Sequence[int]) -> UseOut:
        """Record that ``ids`` of the last recall went into the context; the server
        re-checks each, and the accepted ones join ``items``."""
        return self._used(self.client.record_use(**self._use_request(ids)))

    def check(self, observations: Sequence[Observation] | None = None) -> ContextOut:
        """Ask whether ``items`` may still be used; what is dropped leaves ``items``."""
        return self._checked(self.client.check_context(**self._check_args(observations)))

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.items = []


class AsyncContext(_Guard):
    """``Context`` over an ``AsyncClient``: ``recall``, ``use`` and ``check`` are awaited."""

    def __init__(self, client: AsyncClient, *, case: str | None, session: str | None) -> None:
        super().__init__(case=case, session=session)
        self.client = client

    async def recall(self, query: str, **request: Any) -> RecallOut:
        """A recall in the guard's case and session."""
        return await self.client.recall(**self._recall_request(query, request))

    async def use(self, ids: Sequence[int]) -> UseOut:
        """Record that ``ids`` of the last recall went into the context."""
        return self._used(await self.client.record_use(**self._use_request(ids)))

    async def check(self, observations: Sequence[Observation] | None = None) -> ContextOut:
        """Ask whether ``items`` may still be used; what is dropped leaves ``items``."""
        return self._checked(await self.client.check_context(**self._check_args(observations)))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.items = []
