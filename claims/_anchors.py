"""Scope axes and content types: the vocabulary an item is written in (model §1).

Both are registered by the application at start-up (the composition root
builds an ``ItemRegistry`` and hands it to the write path); the database
stores them as plain text, so registering one needs no migration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from predicates.errors import InputError

__all__ = [
    "BUILTIN_AXES",
    "BUILTIN_CONTENT_TYPES",
    "DEFAULT_REGISTRY",
    "AxisType",
    "ItemRegistry",
]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class AxisType:
    """One kind of scope anchor, e.g. ``case`` or ``service``.

    ``agent_writable``: an agent may write items anchored here (model §3.2
    allows ``case``, ``agent`` and ``session``). ``entity``: anchor ids name
    entities and are resolved to canonical ids like a subject (G1).
    ``fixed_id``: the only id the axis has (``tenant`` has ``*``).
    """

    name: str
    agent_writable: bool = False
    entity: bool = False
    fixed_id: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise InputError(
                f"invalid axis type {self.name!r}: lower-case letters, digits and _",
                axis=self.name,
            )


BUILTIN_AXES: tuple[AxisType, ...] = (
    AxisType("case", agent_writable=True),
    AxisType("agent", agent_writable=True),
    AxisType("session", agent_writable=True),
    AxisType("tenant", fixed_id="*"),
    AxisType("team"),
    AxisType("service", entity=True),
    AxisType("dataset"),
    AxisType("doc"),
)

#: Content types of model §4.3; each picks an item's event-triggered expiry.
BUILTIN_CONTENT_TYPES: frozenset[str] = frozenset(
    {"configuration", "topology", "failure_mechanism", "permission_refusal"}
)


@dataclass(frozen=True)
class ItemRegistry:
    """The axis types and content types writes may use. Immutable: ``with_*`` copies."""

    axes: Mapping[str, AxisType] = field(
        default_factory=lambda: MappingProxyType({a.name: a for a in BUILTIN_AXES})
    )
    content_types: frozenset[str] = BUILTIN_CONTENT_TYPES

    def with_axes(self, *axes: AxisType) -> ItemRegistry:
        """A registry that also knows ``axes`` (a name already known is redefined)."""
        merged = dict(self.axes)
        merged.update({a.name: a for a in axes})
        return ItemRegistry(MappingProxyType(merged), self.content_types)

    def with_content_types(self, *names: str) -> ItemRegistry:
        """A registry that also knows the content types ``names``."""
        for name in names:
            if not _NAME.match(name):
                raise InputError(
                    f"invalid content type {name!r}: lower-case letters, digits and _",
                    content_type=name,
                )
        return ItemRegistry(self.axes, self.content_types | frozenset(names))

    def axis(self, name: str) -> AxisType | None:
        """The axis type called ``name``, or None when unregistered."""
        return self.axes.get(name)

    def writable_axes(self) -> list[str]:
        """Names of the axes an agent may write to, sorted."""
        return sorted(a.name for a in self.axes.values() if a.agent_writable)

    @classmethod
    def build(
        cls, axes: Iterable[AxisType] = (), content_types: Iterable[str] = ()
    ) -> ItemRegistry:
        """The built-ins plus ``axes`` and ``content_types``: what a composition root calls."""
        return cls().with_axes(*axes).with_content_types(*content_types)


DEFAULT_REGISTRY = ItemRegistry()
