"""A tenant's own scope axes and content types, declared in a file (model §1, §4.3).

A registry file (``caveat registry load FILE``, ``PUT /v1/registry``, or the
``registry:`` section of a schema file)::

    axes:
      - {name: runbook, agent_writable: true}
      - {name: region, entity: false}
    content_types:
      - name: dashboard
        triggers: [deploy, config_change]   # the event types that re-open its items
        reach: subject                      # subject | dependents | principal
        ttl: 2h                             # optional secondary TTL

Each load replaces the tenant's registry (one audit row). It is part of the tenant's
world (``factgen.World.registry``), so every door's write gate, event handling and
secondary TTL reads the same declarations. Built-in axes and content types cannot be
redeclared; a content type that a current item uses cannot be removed
(``content_type_in_use``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from sqlalchemy.orm import Session

from claims import _queries as q
from claims._access import Actor
from claims._anchors import BUILTIN_AXES, BUILTIN_CONTENT_TYPES, AxisType, ItemRegistry
from claims._audit import append
from factgen import Document, Span, World, first_problem, load_yaml_document
from predicates.errors import Conflict

__all__ = [
    "REACHES",
    "AxisDecl",
    "ContentTypeDecl",
    "DeclaredRegistry",
    "LoadedRegistry",
    "load_registry_yaml",
    "loaded_registry",
    "registry_of_document",
    "store_registry",
]

#: Whose items an event reaches (``lifecycle.Reach``): its subjects, also the entities
#: that depend on them, or also its principal.
REACHES = ("subject", "dependents", "principal")
_NAME = r"^[a-z][a-z0-9_]*$"
Name = Annotated[str, Field(pattern=_NAME)]
EventType = Literal["deploy", "config_change", "version_change", "authorisation"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class AxisDecl(_Strict):
    """A scope axis of the tenant: whether agents may write there, whether its anchor
    ids name entities (resolved through the aliases, as a subject is)."""

    name: Name
    agent_writable: bool = False
    entity: bool = False

    def axis(self) -> AxisType:
        return AxisType(self.name, agent_writable=self.agent_writable, entity=self.entity)


class ContentTypeDecl(_Strict):
    """A content type of the tenant: the event types that re-open its items, whose
    items an event reaches, and an optional secondary TTL (model §4.3)."""

    name: Name
    triggers: list[EventType] = []
    reach: Literal["subject", "dependents", "principal"] = "subject"
    ttl: Span | None = None

    @field_validator("ttl")
    @classmethod
    def _positive(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value <= timedelta(0):
            raise ValueError("ttl must be longer than zero")
        return value


class DeclaredRegistry(_Strict):
    """What a tenant declared: its axes and content types, beside the built-ins."""

    axes: list[AxisDecl] = []
    content_types: list[ContentTypeDecl] = []

    def items(self, base: ItemRegistry | None = None) -> ItemRegistry:
        """``base`` (the built-ins) with the declared axes and content types."""
        axes = (base or ItemRegistry()).with_axes(*(a.axis() for a in self.axes))
        return axes.with_content_types(*(c.name for c in self.content_types))

    def ttls(self) -> dict[str, timedelta]:
        """``{content type: secondary TTL}`` of the declared content types that have one."""
        return {c.name: c.ttl for c in self.content_types if c.ttl is not None}

    def to_json(self) -> dict[str, Any]:
        """The JSON form kept in the store (TTLs as seconds)."""
        return self.model_dump(mode="json")

    @classmethod
    def of(cls, world: World) -> DeclaredRegistry:
        """The registry the tenant's world holds (empty when it declared none)."""
        return cls.model_validate(world.registry, strict=False)


def _check(doc: Document, base: tuple[str | int, ...], declared: DeclaredRegistry) -> None:
    """What one field cannot say alone: names unique, built-ins not redeclared."""
    builtin_axes = {a.name for a in BUILTIN_AXES}
    for key, names, builtins, what in (
        ("axes", [a.name for a in declared.axes], builtin_axes, "axis"),
        (
            "content_types",
            [c.name for c in declared.content_types],
            BUILTIN_CONTENT_TYPES,
            "content type",
        ),
    ):
        seen: dict[str, int] = {}
        for index, name in enumerate(names):
            path = (*base, key, index, "name")
            if name in builtins:
                raise doc.error(path, f"{name!r} is a built-in {what}; it cannot be redeclared")
            if name in seen:
                raise doc.error(path, f"{what} {name!r} is already declared (entry {seen[name]})")
            seen[name] = index


class _Section(_Strict):
    """A schema file's ``registry:`` section, validated where it stands in the file."""

    registry: DeclaredRegistry


def registry_of_document(doc: Document, *, section: bool = False) -> DeclaredRegistry:
    """The registry ``doc`` declares (with ``section``: its ``registry:`` key, a schema
    file's); ``DocumentError`` with line and column otherwise."""
    data = doc.data.get("registry") if section and isinstance(doc.data, dict) else doc.data
    base: tuple[str | int, ...] = ("registry",) if section else ()
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise doc.error(base, "expected a mapping with axes: and content_types:")
    try:
        if section:
            declared = _Section.model_validate({"registry": data}).registry
        else:
            declared = DeclaredRegistry.model_validate(data)
    except ValidationError as exc:
        raise first_problem(doc, exc) from None
    _check(doc, base, declared)
    return declared


def load_registry_yaml(text: str, *, source: str = "<registry>") -> DeclaredRegistry:
    """The validated registry file; ``DocumentError`` with line and column for malformed
    YAML, an unknown or missing key, a bad name, event type, reach or TTL, a name
    declared twice or a built-in redeclared."""
    doc = load_yaml_document(text, source=source)
    return registry_of_document(doc)


# --- in the store ------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedRegistry:
    """A tenant's registry as loaded: the declarations, the text, who and when."""

    declared: DeclaredRegistry
    document: str
    loaded_at: datetime
    loaded_by: str


def loaded_registry(*, session: Session, tenant: str) -> LoadedRegistry | None:
    """The tenant's registry as loaded, or None when it never loaded one."""
    row = q.registry_row(session=session, tenant=tenant)
    if row is None:
        return None
    return LoadedRegistry(
        DeclaredRegistry.model_validate(row.declared, strict=False),
        row.document,
        row.loaded_at,
        row.loaded_by,
    )


def store_registry(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    declared: DeclaredRegistry,
    document: str,
    now: datetime,
) -> LoadedRegistry:
    """Make ``declared`` the tenant's registry (``schema`` action: admins), with one
    ``load_registry`` audit row (the names declared, the names removed, the text's
    digest). A content type that a current item uses cannot be removed: ``Conflict``
    (``content_type_in_use``, with the counts), and nothing is stored."""
    actor.require("schema")
    before = loaded_registry(session=session, tenant=tenant)
    kept = {c.name for c in declared.content_types}
    removed: Sequence[str] = sorted(
        {c.name for c in before.declared.content_types} - kept if before else set()
    )
    used = q.content_types_in_use(session=session, tenant=tenant, names=removed)
    if used:
        shown = ", ".join(f"{name} ({n} items)" for name, n in sorted(used.items()))
        raise Conflict(
            f"content types still used by current items cannot be removed: {shown}; "
            "keep them in the registry (their items' events and TTL still read them)",
            code="content_type_in_use",
            content_types=dict(sorted(used.items())),
        )
    q.upsert_registry(
        session=session,
        tenant=tenant,
        document=document,
        declared=declared.to_json(),
        at=now,
        actor=actor.id,
    )
    append(
        session=session,
        tenant=tenant,
        actor=actor.id,
        action="load_registry",
        at=now,
        detail={
            "axes": [a.name for a in declared.axes],
            "content_types": [c.name for c in declared.content_types],
            "removed_content_types": list(removed),
            "sha256": hashlib.sha256(document.encode()).hexdigest(),
        },
    )
    return LoadedRegistry(declared, document, now, actor.id)
