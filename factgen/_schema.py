"""The schema registry: every fact attribute declared once, with its type."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta

from rapidfuzz import process

from predicates import ValueType
from predicates.errors import InputError, UnknownAttribute

__all__ = ["AttributeSpec", "SchemaRegistry"]

_SEGMENT = r"[A-Za-z_][A-Za-z0-9_]*"


@dataclass(frozen=True)
class AttributeSpec:
    """One declared attribute (a dotted path; ``*`` stands for one segment)."""

    attribute: str
    vtype: ValueType
    unit: str | None = None
    max_age: timedelta | None = None
    content_type: str | None = None

    def __post_init__(self) -> None:
        segments = self.attribute.split(".")
        if not all(s == "*" or re.fullmatch(_SEGMENT, s) for s in segments):
            raise InputError(
                f"invalid attribute name {self.attribute!r}: dotted segments of letters, "
                "digits and _, or * for one segment",
                attribute=self.attribute,
            )

    def matches(self, attribute: str) -> bool:
        """Whether ``attribute`` is this entry (``*`` matches exactly one segment)."""
        mine = self.attribute.split(".")
        theirs = attribute.split(".")
        return len(mine) == len(theirs) and all(
            m in ("*", t) for m, t in zip(mine, theirs, strict=True)
        )


class SchemaRegistry:
    """Lookup of attribute specs: exact names first, then ``*`` patterns."""

    def __init__(self, specs: Iterable[AttributeSpec] = ()) -> None:
        self._exact: dict[str, AttributeSpec] = {}
        self._patterns: list[AttributeSpec] = []
        for spec in specs:
            self.add(spec)

    def add(self, spec: AttributeSpec) -> None:
        """Declare (or redeclare) one attribute."""
        if "*" in spec.attribute.split("."):
            self._patterns = [p for p in self._patterns if p.attribute != spec.attribute]
            self._patterns.append(spec)
            self._patterns.sort(key=lambda p: p.attribute.count("*"))
        else:
            self._exact[spec.attribute] = spec

    def __iter__(self) -> Iterator[AttributeSpec]:
        yield from self._exact.values()
        yield from self._patterns

    def __len__(self) -> int:
        return len(self._exact) + len(self._patterns)

    def get(self, attribute: str) -> AttributeSpec | None:
        """The spec for ``attribute``, or None when undeclared."""
        spec = self._exact.get(attribute)
        if spec is not None:
            return spec
        for pattern in self._patterns:
            if pattern.matches(attribute):
                return pattern
        return None

    def suggest(self, attribute: str, limit: int = 3) -> list[str]:
        """Declared names closest to ``attribute``, best first."""
        names = [s.attribute for s in self]
        return [m[0] for m in process.extract(attribute, names, limit=limit, score_cutoff=50)]

    def require(self, attribute: str) -> AttributeSpec:
        """The spec for ``attribute``; ``UnknownAttribute`` with suggestions otherwise."""
        spec = self.get(attribute)
        if spec is None:
            hints = self.suggest(attribute)
            hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
            raise UnknownAttribute(
                f"attribute {attribute!r} is not declared in the schema{hint}",
                attribute=attribute,
                suggestions=hints,
            )
        return spec
