"""Evidence-derived read access (model §5); the actor and the one role table live in
``factgen`` (the leftmost package that changes data) and are re-exported here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from factgen._access import ROLE_ACTIONS, Actor, Role
from factgen._classification import strictest

__all__ = ["ROLE_ACTIONS", "Access", "Actor", "Role", "acl_from_readers", "item_access"]

#: Anchors an agent may write to; tenant scope is reached only through the lifecycle.
AGENT_WRITABLE_AXES = frozenset({"case", "agent", "session"})


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
