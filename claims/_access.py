"""Evidence-derived read access (model §5); the actor and the one role table live in
``factgen`` (the leftmost package that changes data) and are re-exported here."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from factgen._access import ROLE_ACTIONS, Actor, Role

__all__ = ["ROLE_ACTIONS", "Actor", "Role", "acl_from_readers"]

#: Anchors an agent may write to; tenant scope is reached only through the lifecycle.
AGENT_WRITABLE_AXES = frozenset({"case", "agent", "session"})


def acl_from_readers(readers: Iterable[Sequence[str]]) -> list[list[str]]:
    """The item ACL from its evidence's reader lists: sorted, de-duplicated, no empties."""
    return [list(t) for t in sorted({tuple(sorted(set(r))) for r in readers if r})]
