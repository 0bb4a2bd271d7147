"""Evidence-derived read access (model §5); the actor and the one role table live in
``factgen`` (the leftmost package that changes data) and are re-exported here."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from factgen._access import ROLE_ACTIONS, Actor, Role
from factgen._classification import strictest

__all__ = [
    "ROLE_ACTIONS",
    "ROLLUP_AGENT_PREFIX",
    "Access",
    "Actor",
    "Role",
    "acl_from_readers",
    "item_access",
    "may_read_block",
    "private_visible",
]

#: Anchors an agent may write to; tenant scope is reached only through the lifecycle.
AGENT_WRITABLE_AXES = frozenset({"case", "agent", "session"})
#: The ``agent`` anchors no principal owns: a rollup's ``agent:rollup:<hash>`` (docs/
#: lifecycle.md, "Rollup"). Any agent may write there; every other ``agent:<id>``
#: anchor is that principal's own (docs/agents.md, "Private memory").
ROLLUP_AGENT_PREFIX = "rollup:"


def acl_from_readers(readers: Iterable[Sequence[str]]) -> list[list[str]]:
    """The item ACL from its evidence's reader lists: sorted, de-duplicated, no empties."""
    return [list(t) for t in sorted({tuple(sorted(set(r))) for r in readers if r})]


@dataclass(frozen=True)
class Access:
    """Who may read an item, as derived from its evidence (docs/claims.md, "Access
    control"): ``acl``, one reader list per source that has readers; ``deny``, the union
    of their deny lists; ``classification``, the strictest of their levels (None: none
    is classified)."""

    acl: list[list[str]]
    deny: list[str]
    classification: str | None

    @classmethod
    def of(cls, row: Any) -> Access:
        """The access of an item row that carries ``acl``, ``deny`` and ``classification``."""
        return cls([list(t) for t in row.acl or []], list(row.deny or []), row.classification)

    def readable_by(self, actor: Actor) -> bool:
        """``Actor.can_read_acl`` on all three parts."""
        return actor.can_read_acl(self.acl, deny=self.deny, classification=self.classification)


def item_access(evidence: Iterable[Any], levels: Sequence[str]) -> Access:
    """An item's access from the rows of the evidence it is formed from (each with
    ``readers``, ``deny`` and ``classification``), the tenant's levels deciding which
    level is the strictest."""
    rows = list(evidence)
    return Access(
        acl_from_readers(r.readers for r in rows),
        sorted({d for r in rows for d in r.deny}),
        strictest((r.classification for r in rows), levels),
    )


def may_read_block(actor: Actor, scope: tuple[str, str], teams: Collection[str] = ()) -> bool:
    """Whether ``actor`` (a member of ``teams``) may read the core blocks on ``scope``
    (docs/blocks.md): the tenant's, everyone who reads; a team's, its members, SMEs and
    admins; an agent's, that agent and the admin."""
    axis, ident = scope
    if not actor.may("read"):
        return False
    if actor.role == "admin" or axis == "tenant":
        return True
    if axis == "team":
        return actor.may("set_block") or ident in teams
    return axis == "agent" and actor.id == ident


def private_visible(actor: Actor, scope_axis: str, session_owner: str | None) -> bool:
    """Whether ``actor`` may know of an item on an anchor of ``scope_axis`` at all, by
    the private-memory rule (docs/agents.md, "Private memory"): a ``session`` item is its
    session's owner's (``session_owner``: the principal that owns it, None when nobody
    does) and the operator's alone; every other item is decided by the read gate only
    (an ``agent`` lesson reaches others through the lifecycle). The Python twin of
    ``claims._queries.private_visible``."""
    return scope_axis != "session" or actor.role == "admin" or session_owner == actor.id
