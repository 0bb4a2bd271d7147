"""Entities, aliases and normalisation: a name resolves, or says why not."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

from predicates.errors import InputError, SubjectUnresolved, shown

__all__ = ["EntitySpec", "Resolver", "normalise"]

#: How many looked-up names a resolver remembers (then it starts again).
MEMO_MAX = 1 << 16
#: The longest name the resolver ranks suggestions for (entity names are far shorter).
SUGGEST_MAX = 256

_SEPARATORS = re.compile(r"[-_.\s]+")


def normalise(name: str, suffixes: Iterable[str] = ()) -> str:
    """Fold case and ``-``/``_``/``.`` separators away, after dropping a declared suffix.

    ``PaymentAPI-prod``, ``payment_api`` and ``payment-api`` all normalise to
    ``paymentapi`` when ``prod`` is a declared environment suffix.
    """
    parts = [p for p in _SEPARATORS.split(name.strip().lower()) if p]
    lowered = {s.lower().strip("-_.") for s in suffixes}
    if len(parts) > 1 and parts[-1] in lowered:
        parts = parts[:-1]
    return "".join(parts)


@dataclass(frozen=True)
class EntitySpec:
    """A canonical entity with its aliases and outgoing topology edges."""

    id: str
    kind: str
    aliases: tuple[str, ...] = ()
    edges: tuple[tuple[str, str], ...] = field(default=())  # (relation, target)


class Resolver:
    """Maps raw names to canonical entity ids; never resolves silently."""

    def __init__(self, aliases: Mapping[str, str], suffixes: Iterable[str] = ()) -> None:
        self._suffixes = tuple(suffixes)
        self._aliases = dict(aliases)  # normalised alias -> entity id
        # raw name -> entity id or None: a pull looks up the same labels at every query
        self._memo: dict[str, str | None] = {}

    @property
    def suffixes(self) -> tuple[str, ...]:
        """The declared environment suffixes."""
        return self._suffixes

    def key(self, name: str) -> str:
        """The normalised lookup key of ``name``."""
        return normalise(name, self._suffixes)

    def aliases(self) -> dict[str, str]:
        """A copy of the table: normalised alias -> entity id."""
        return dict(self._aliases)

    def entity_ids(self) -> set[str]:
        """Every canonical id known."""
        return set(self._aliases.values())

    def lookup(self, name: str) -> str | None:
        """The canonical id for ``name``, or None (remembered: the table never changes)."""
        try:
            return self._memo[name]
        except KeyError:
            pass
        found = self._aliases.get(self.key(name))
        if len(self._memo) >= MEMO_MAX:
            self._memo.clear()
        self._memo[name] = found
        return found

    def resolve(self, name: str) -> str:
        """The canonical id for ``name``; ``SubjectUnresolved`` with suggestions otherwise."""
        found = self.lookup(name)
        if found is not None:
            return found
        suggestions = self.suggest(name)
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        raise SubjectUnresolved(
            f"{shown(name)} does not resolve to a known entity{hint}",
            name=name,
            suggestions=suggestions,
        )

    def suggest(self, name: str, limit: int = 3) -> list[str]:
        """Canonical ids whose aliases are closest to ``name``, best first; none for a
        name longer than ``SUGGEST_MAX`` (fuzzy ranking is quadratic in the length: a
        40 KB name took 10 s to refuse)."""
        if not self._aliases or len(name) > SUGGEST_MAX:
            return []
        ranked = process.extract(
            self.key(name), list(self._aliases), scorer=fuzz.WRatio, limit=limit * 3
        )
        out: list[str] = []
        for alias, score, _ in ranked:
            entity = self._aliases[alias]
            if score >= 60 and entity not in out:
                out.append(entity)
        return out[:limit]


def alias_table(entities: Iterable[EntitySpec], suffixes: Iterable[str]) -> dict[str, str]:
    """Normalised alias -> entity id for ``entities``; refuses ambiguous aliases."""
    suffixes = tuple(suffixes)
    table: dict[str, str] = {}
    for entity in entities:
        for name in (entity.id, *entity.aliases):
            key = normalise(name, suffixes)
            if not key:
                raise InputError(f"alias {name!r} of {entity.id!r} is empty once normalised")
            other = table.get(key)
            if other is not None and other != entity.id:
                raise InputError(
                    f"alias {name!r} of {entity.id!r} collides with {other!r} "
                    f"(both normalise to {key!r})",
                    alias=name,
                )
            table[key] = entity.id
    return table
