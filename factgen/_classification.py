"""Classification levels and deny lists of evidence (model §5; docs/claims.md, "Access
control"): the names, their order and the spelling of a deny entry, checked once here
for every door.

A tenant's levels are ordered, lowest first (``TenantPolicy.classification_levels``,
by default ``public < internal < confidential < restricted``). Evidence without a level
is at the lowest one. A principal's clearance is the highest level it may read.

A deny entry names a principal (``principal:alice``) or a capability
(``cap:contractor``); an item formed from denied evidence is hidden from the named
principal and from every principal that holds the capability, whatever else grants it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rapidfuzz import process

from predicates.errors import InputError

__all__ = [
    "CLASSIFICATION_LEVELS",
    "DENY_KINDS",
    "check_level",
    "cleared_levels",
    "default_clearance",
    "level_rank",
    "parse_deny",
    "strictest",
]

#: The default level names, lowest first.
CLASSIFICATION_LEVELS: tuple[str, ...] = ("public", "internal", "confidential", "restricted")
#: The two kinds of deny entry: ``principal:<id>`` and ``cap:<capability>``.
DENY_KINDS: tuple[str, ...] = ("principal", "cap")


def _suggest(name: str, choices: Sequence[str]) -> str:
    found = [m[0] for m in process.extract(name, list(choices), limit=2, score_cutoff=50)]
    return f" (did you mean {' or '.join(repr(f) for f in found)}?)" if found else ""


def check_level(name: str, levels: Sequence[str], *, field: str = "classification") -> str:
    """``name`` if it is one of the tenant's ``levels``; ``InputError`` naming the field,
    the known levels and the nearest names otherwise."""
    if name in levels:
        return name
    raise InputError(
        f"unknown {field} level {name!r}{_suggest(name, levels)}; "
        f"the tenant's levels, lowest first: {', '.join(levels)}",
        field=field,
        level=name,
        levels=list(levels),
    )


def default_clearance(levels: Sequence[str]) -> str:
    """The clearance of a principal made without one: the level above the lowest
    (``internal`` with the default names): a tenant's principals are insiders; an
    outsider's token is made with ``--clearance public``."""
    return levels[min(1, len(levels) - 1)]


def cleared_levels(clearance: str | None, levels: Sequence[str]) -> tuple[str, ...]:
    """The level names a principal with ``clearance`` may read: every level up to its
    own. A clearance the tenant's levels no longer name reads the lowest level only."""
    if clearance is not None and clearance in levels:
        return tuple(levels[: list(levels).index(clearance) + 1])
    return tuple(levels[:1])


def level_rank(level: str | None, levels: Sequence[str]) -> int:
    """A level's place among ``levels``, lowest 0 (None: unclassified, the lowest); a
    name the levels do not know is above every level (read by the operator only)."""
    if level is None:
        return 0
    return list(levels).index(level) if level in levels else len(levels)


def strictest(names: Iterable[str | None], levels: Sequence[str]) -> str | None:
    """The highest of ``names`` (None: unclassified, the lowest); None when every one is
    unclassified."""
    named = [n for n in names if n is not None]
    if not named:
        return None
    return max(named, key=lambda n: level_rank(n, levels))


def parse_deny(entries: Iterable[str]) -> list[str]:
    """Deny entries, checked and normalised (trimmed, sorted, de-duplicated): each is
    ``principal:<id>`` or ``cap:<capability>``; ``InputError`` naming the entry
    otherwise."""
    out: set[str] = set()
    for raw in entries:
        entry = raw.strip()
        kind, sep, name = entry.partition(":")
        if not sep or kind not in DENY_KINDS or not name.strip():
            hint = _suggest(kind, DENY_KINDS) if sep and kind not in DENY_KINDS else ""
            raise InputError(
                f"deny entry {raw!r} is not principal:<id> or cap:<capability>{hint}",
                field="deny",
                entry=raw,
            )
        out.add(f"{kind}:{name.strip()}")
    return sorted(out)
