"""Who is acting, and the one role table (model §5, scenario-format.md "Roles").

It lives here, in the leftmost package that changes data, so that every
data-changing public function of factgen, claims, lifecycle and recall takes the
actor and checks it against one table; ``claims`` re-exports both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from factgen._classification import CLASSIFICATION_LEVELS, cleared_levels, default_clearance
from predicates.errors import Forbidden

__all__ = ["ROLE_ACTIONS", "Actor", "Role", "Unread"]

Role = Literal["agent", "sme", "admin", "source"]

# The one role table: the model's actions (scenario-format.md, "Roles") and the
# lifecycle's own (``rollup`` of episodes; an SME's ``drop`` of a shadow item,
# ``redact`` and ``forget``, ``set_enforcement`` of a skill, the ``sweep``), each an
# entry of its own. ``diff`` (what became and stopped being recallable) is a read of
# history that agents and the SMEs who review their knowledge both need.
_EVERYONE = frozenset(
    {"open_case", "observe", "evidence", "event", "check_context", "audit_verify", "read"}
)
_AGENT = frozenset({"write", "recall", "diff", "cite", "close_case", "attach_evidence", "rollup"})
_SME = frozenset(
    {
        # an incident its sender reported over without an outcome waits for the SME
        # to close its case (model §2.2; docs/sme.md, "Cases awaiting an outcome")
        "close_case",
        "verify",
        "promote",
        "refute",
        "revoke",
        "graduate",
        "release",
        "attach_evidence",
        "drop",
        "redact",
        "set_enforcement",
        "sweep",
        "diff",
        "sources_read",
        # a team's and the tenant's core blocks (model §4 "Core blocks"; docs/blocks.md)
        "set_block",
        # importing, revoking and redacting runbooks and postmortems (model §6
        # "Knowledge beside memory"; docs/knowledge.md): the team's, not an agent's
        "docs",
    }
)
#: A tool that sends hooks or whose facts are pulled (model §2.2): it may observe, post
#: events and open or close cases, nothing else: no recall, no reading of items.
_SOURCE = frozenset({"open_case", "observe", "event", "close_case"})
ROLE_ACTIONS: dict[str, frozenset[str]] = {
    "agent": _EVERYONE | _AGENT,
    "sme": _EVERYONE | _SME,
    "source": _SOURCE,
    "admin": _EVERYONE
    | _AGENT
    | _SME
    # ``forget`` is real erasure (model §7): the store's operator only
    | {"policy", "schema", "entities", "write_any_axis", "tokens", "sources", "forget"},
}


class Unread(Enum):
    """A part of an actor not read from the registry when it was built (``Actor.team``)."""

    TEAM = "team"


@dataclass(frozen=True)
class Actor:
    """Who is acting: id, role and capabilities (opaque strings), its clearance among
    the tenant's classification ``levels`` (lowest first), and ``held``: capabilities its
    principal holds that a token may not carry (a deny naming one still binds it).

    ``team``: its principal's team as read with the principal (None: it has none), or
    ``Unread.TEAM`` for an actor built without that read (``claims.team_of`` then reads
    it): an authenticated actor carries it, so a recall need not read it again."""

    id: str
    role: Role
    capabilities: frozenset[str] = field(default_factory=frozenset)
    clearance: str = default_clearance(CLASSIFICATION_LEVELS)
    levels: tuple[str, ...] = CLASSIFICATION_LEVELS
    held: frozenset[str] = field(default_factory=frozenset)
    team: str | Unread | None = field(default=Unread.TEAM, compare=False)

    def may(self, action: str) -> bool:
        """Whether the role allows ``action``."""
        return action in ROLE_ACTIONS.get(self.role, frozenset())

    def require(self, action: str) -> None:
        """Raise ``Forbidden`` unless the role allows ``action``."""
        if not self.may(action):
            raise Forbidden(
                f"{self.id} ({self.role}) may not {action.replace('_', ' ')}",
                actor=self.id,
                role=self.role,
                action=action,
            )

    @property
    def cleared(self) -> tuple[str, ...]:
        """The classification levels this actor may read: up to its clearance."""
        return cleared_levels(self.clearance, self.levels)

    @property
    def deny_keys(self) -> list[str]:
        """The deny entries that name this actor: ``principal:<id>`` and ``cap:<c>`` for
        every capability it carries or its principal holds."""
        caps = self.capabilities | self.held
        return sorted({f"principal:{self.id}", *(f"cap:{c}" for c in caps)})

    def can_read(
        self, readers: Sequence[str], *, deny: Sequence[str], classification: str | None
    ) -> bool:
        """Evidence with ``readers`` (empty: tenant-readable), ``deny`` entries and a
        ``classification`` (None: the lowest level) is readable by this actor: no deny
        entry names it (a deny wins over any grant), its clearance reaches the level, and
        it holds one of the readers.

        The local admin reads everything: it is the operator of the store (it can make a
        token for any principal and clearance, so a deny could not bind it). A role
        without ``read`` (``source``: a tool that sends hooks) reads nothing.
        """
        if not self.may("read"):
            return False
        if self.role == "admin":
            return True
        if deny and not set(deny).isdisjoint(self.deny_keys):
            return False
        if classification is not None and classification not in self.cleared:
            return False
        return not readers or bool(self.capabilities & set(readers))

    def can_read_acl(
        self, acl: Iterable[Sequence[str]], *, deny: Sequence[str], classification: str | None
    ) -> bool:
        """An item is readable when every evidence source it was formed from is: its
        ``acl`` (one reader list per source), the union of their ``deny`` lists and the
        strictest of their levels (``classification``)."""
        if not self.can_read((), deny=deny, classification=classification):
            return False
        return all(self.can_read(r, deny=(), classification=None) for r in acl)

    def gate_params(self, caps: str = "caps") -> dict[str, Any]:
        """The parameters of the SQL read gate (``claims._queries.readable``) for this
        actor, its capabilities under the name ``caps``, and its id (``principal``: the
        owner of its agent anchor and sessions, recall's private state gate)."""
        return {
            "admin": self.role == "admin",
            # the state gate admits a principal's own agent anchor and sessions
            "principal": self.id,
            caps: sorted(self.capabilities),
            "deny_keys": self.deny_keys,
            "cleared": list(self.cleared),
        }
