"""The one shape around every use case: the permission check, the transaction and the
error mapping, so that a use case's body reads as its own logic.

    @usecase(require="read")
    def lineage(u: Unit, item_id: int) -> lifecycle.Lineage:
        return lifecycle.lineage(**u.scope(), item_id=item_id)

makes ``lineage(rt, actor, item_id)``: ``actor.require("read")`` first (before any
transaction, as a door's refusal costs no round trip), then one transaction of the
runtime (``Runtime.transaction``: committed on success, database errors come out as the
error tree), then the body with a ``Unit`` that carries the runtime, the session and the
actor. ``Unit.scope()`` and ``Unit.at(now)`` are the keyword arguments every domain
function takes (``session``, ``tenant``, ``actor``; and ``now``, the wall clock unless the
caller passed its own, as replay does with its virtual clock).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Concatenate, ParamSpec, TypedDict, TypeVar

from sqlalchemy.orm import Session

import claims
import factgen
from caveat.app._runtime import Runtime, utcnow

__all__ = ["Scope", "Timed", "Unit", "clock", "usecase"]

P = ParamSpec("P")
T = TypeVar("T")


def clock(now: datetime | None) -> datetime:
    """``now`` as the caller gave it, or the wall clock."""
    return now or utcnow()


class Scope(TypedDict):
    """The keyword arguments that place a domain call: its transaction, tenant, actor."""

    session: Session
    tenant: str
    actor: claims.Actor


class Timed(Scope):
    """``Scope`` and the instant the call acts at."""

    now: datetime


@dataclass(frozen=True)
class Unit:
    """What a use case's body works in: the runtime, its open transaction, the actor."""

    rt: Runtime
    session: Session
    actor: claims.Actor

    @property
    def tenant(self) -> str:
        return self.rt.tenant

    def world(self) -> factgen.World:
        """The tenant's typed world, as cached by the runtime for this transaction."""
        return self.rt.world(self.session)

    def scope(self) -> Scope:
        return Scope(session=self.session, tenant=self.rt.tenant, actor=self.actor)

    def at(self, now: datetime | None) -> Timed:
        return Timed(session=self.session, tenant=self.rt.tenant, actor=self.actor, now=clock(now))


def usecase(
    *, require: str | None = None, use: str | None = None
) -> Callable[
    [Callable[Concatenate[Unit, P], T]], Callable[Concatenate[Runtime, claims.Actor, P], T]
]:
    """Make ``body(unit, ...)`` the use case ``f(rt, actor, ...)``: ``require`` is the
    action the actor must hold (checked before the transaction; most domain functions
    check their own), ``use`` names the transaction (its ``application_name`` is then
    ``caveat:<use>``, which the lock-wait diagnostics read)."""

    def wrap(
        body: Callable[Concatenate[Unit, P], T],
    ) -> Callable[Concatenate[Runtime, claims.Actor, P], T]:
        @functools.wraps(body)
        def run(rt: Runtime, actor: claims.Actor, /, *args: P.args, **kwargs: P.kwargs) -> T:
            if require is not None:
                actor.require(require)
            with rt.transaction(use) as session:
                return body(Unit(rt, session, actor), *args, **kwargs)

        return run

    return wrap
