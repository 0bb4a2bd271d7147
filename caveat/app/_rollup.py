"""Use cases of the tenant's registry (its own axes and content types, from a file) and
of the episodic -> semantic rollup (docs/claims.md, "The registry, from configuration";
docs/lifecycle.md, "Rollup from a door")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import claims
import factgen
import lifecycle
from caveat.app._errors import mapped
from caveat.app._runtime import Runtime
from caveat.app._unit import Unit, clock, usecase

__all__ = [
    "AxisShown",
    "ContentTypeShown",
    "RegistryShown",
    "load_registry",
    "rollup",
    "rollup_preview",
    "show_registry",
]


# --- the registry ------------------------------------------------------------------


@usecase(require="schema", use="load_registry")
def load_registry(
    u: Unit,
    text: str,
    *,
    source_name: str = "<registry>",
    section: bool = False,
    attributes: Sequence[factgen.AttributeSpec] = (),
    now: datetime | None = None,
) -> claims.LoadedRegistry:
    """Validate a registry file (``DocumentError`` with line and column; with
    ``section``, the ``registry:`` key of a schema file) and make it the tenant's
    registry (admin only), replacing the one before, with one audit row. Creates the
    tenant if new. A content type a current item uses cannot be removed
    (``content_type_in_use``): nothing is stored then. ``attributes`` (a schema file's)
    are declared in the same transaction: the file is loaded whole or not at all."""
    # ``require`` is checked before the file is read: a refusal says nothing of it
    doc = factgen.load_yaml_document(text, source=source_name)
    declared = claims.registry_of_document(doc, section=section)
    at = u.at(now)
    factgen.ensure_tenant(**at)
    loaded = claims.store_registry(**at, declared=declared, document=text)
    if attributes:
        factgen.declare_attributes(**u.scope(), specs=list(attributes))
    return loaded


@dataclass(frozen=True)
class AxisShown:
    """One scope axis the tenant's writes may use."""

    name: str
    agent_writable: bool
    entity: bool
    fixed_id: str | None
    builtin: bool


@dataclass(frozen=True)
class ContentTypeShown:
    """One content type: the events that re-open its items, whose items they reach,
    its secondary TTL (the tenant policy's for ``permission_refusal``)."""

    name: str
    triggers: tuple[str, ...]
    reach: str | None
    ttl: timedelta | None
    builtin: bool


@dataclass(frozen=True)
class RegistryShown:
    """The registry every door uses now: built-ins and the tenant's, and the load."""

    axes: tuple[AxisShown, ...]
    content_types: tuple[ContentTypeShown, ...]
    loaded: claims.LoadedRegistry | None


@usecase(require="read")
def show_registry(u: Unit) -> RegistryShown:
    """The tenant's axes and content types as its writes, events and TTLs use them,
    built-ins included, and who loaded its registry when (every role may read it)."""
    world = u.world()
    declared = claims.DeclaredRegistry.of(world)
    items = declared.items()
    builtin_axes = {a.name for a in claims.BUILTIN_AXES}
    triggers = {t.content_type: t for t in lifecycle.tenant_triggers(world).triggers()}
    ttls = lifecycle.ttls(world)
    axes = tuple(
        AxisShown(a.name, a.agent_writable, a.entity, a.fixed_id, a.name in builtin_axes)
        for a in sorted(items.axes.values(), key=lambda a: a.name)
    )
    content_types = tuple(
        ContentTypeShown(
            name,
            tuple(sorted(triggers[name].events)) if name in triggers else (),
            str(triggers[name].reach) if name in triggers else None,
            ttls.get(name),
            name in claims.BUILTIN_CONTENT_TYPES,
        )
        for name in sorted(items.content_types)
    )
    return RegistryShown(
        axes, content_types, claims.loaded_registry(session=u.session, tenant=u.tenant)
    )


# --- rollup --------------------------------------------------------------------------


@usecase(require="rollup")
def rollup_preview(
    u: Unit,
    *,
    subject: str | None = None,
    summariser: lifecycle.Summariser | None = None,
) -> list[lifecycle.RollupPlan]:
    """The deterministic clusters of episodes and the item each would become; nothing
    is written (agents and admins). ``summariser``: the runtime's unless given."""
    return lifecycle.plan_rollup(
        **u.scope(), subject=subject, summariser=summariser or u.rt.summariser
    )


def rollup(
    rt: Runtime,
    actor: claims.Actor,
    *,
    subject: str | None = None,
    summariser: lifecycle.Summariser | None = None,
    now: datetime | None = None,
) -> list[lifecycle.Rollup]:
    """Roll the clusters ``rollup_preview`` shows up into semantic items, each through
    the write gate (a refusal is reported with its code and message, its episodes
    left as they are), then archive each rolled-up cluster's episodes. The gate owns
    its transactions (it audits a refusal in one of its own): this is one write per
    cluster, not one transaction."""
    actor.require("rollup")
    with mapped():
        return lifecycle.rollup(
            sessions=rt.sessions,
            tenant=rt.tenant,
            actor=actor,
            now=clock(now),
            subject=subject,
            summariser=summariser or rt.summariser,
        )
