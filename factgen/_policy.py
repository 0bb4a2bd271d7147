"""Tenant policy (model §7.1): one typed document, stored as jsonb on the tenant row,
with every version kept (migration 0019) so that a read as of an instant sees the policy
of then. docs/policy.md lists every key, its type, its default and who reads it.

A key is a dotted path into the document (``shadow.min_matched_cases``,
``writes``); ``policy_keys`` lists them, ``policy_value`` reads one, and
``changed_policy`` applies a set of changes all or nothing, refusing the first bad one
with an ``InputError`` that names the key, what it expects and what it was given (an
unknown key with the closest known ones).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    field_validator,
)
from pydantic.fields import FieldInfo
from rapidfuzz import process
from sqlalchemy.orm import Session

from factgen import _queries as q
from factgen._classification import CLASSIFICATION_LEVELS
from predicates import Duration, ValueType, coerce, duration_literal
from predicates.errors import InputError, NotFound, ValueTypeError

__all__ = [
    "AnchorDefaults",
    "AnchorPolicy",
    "ConfidenceSettings",
    "KeySpec",
    "PolicyVersion",
    "PromotionPolicy",
    "RecallPolicy",
    "ShadowPolicy",
    "Span",
    "TenantPolicy",
    "changed_policy",
    "check_levels_kept",
    "current_policy",
    "lock_policy",
    "policy_as_of",
    "policy_keys",
    "policy_value",
    "store_policy",
]


def _span(value: object) -> object:
    """``30m``, ``1h``, ``7d`` (a duration literal) as a ``timedelta``; ISO 8601 text (the
    form policies were stored in before 0019) and anything else are left to pydantic."""
    if isinstance(value, str):
        try:
            parsed = coerce(value.strip(), ValueType("duration"))
        except ValueTypeError:
            return value
        assert isinstance(parsed, Duration)
        return timedelta(microseconds=parsed.micros)
    return value


#: A duration: a literal like ``30m``, ``1h`` or ``7d`` in and out (JSON), a ``timedelta``
#: in Python.
Span = Annotated[
    timedelta,
    BeforeValidator(_span),
    PlainSerializer(duration_literal, return_type=str, when_used="json"),
]


class _Group(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ShadowPolicy(_Group):
    """Thresholds for graduating a shadow item (model §4.1)."""

    min_matched_cases: int = Field(default=3, ge=0)
    min_agreement: float = Field(default=0.8, ge=0.0, le=1.0)


class ConfidenceSettings(_Group):
    """Evidence-weighted confidence (model §6; ``lifecycle.ConfidencePolicy`` is built
    from it): the prior of an item without evidence, the floor, the half-life of every
    term."""

    half_life: Span = Field(default=timedelta(days=90), gt=timedelta(0))
    floor: float = Field(default=0.1, ge=0.0, lt=1.0)
    prior: float = Field(default=0.5, ge=0.0, le=1.0)


class PromotionPolicy(_Group):
    """Promotion across scopes (model §4.2): a key is a candidate when current items of at
    least ``min_subjects`` distinct scope anchors (cases, agents, sessions, teams, ...)
    agree on its object; with ``auto_apply`` an uncontested candidate's items are promoted
    to shadow by the policy itself (case close and sweep)."""

    min_subjects: int = Field(default=3, ge=2)
    auto_apply: bool = False


class AnchorDefaults(_Group):
    """The weights of the default anchor set a recall builds from who asks (model §6
    "Anchors from the context"; docs/retrieval.md)."""

    session: float = Field(default=1.0, ge=0.5, le=2.0)
    case: float = Field(default=1.0, ge=0.5, le=2.0)
    service: float = Field(default=0.9, ge=0.5, le=2.0)
    team: float = Field(default=0.8, ge=0.5, le=2.0)
    agent: float = Field(default=0.7, ge=0.5, le=2.0)
    tenant: float = Field(default=0.6, ge=0.5, le=2.0)


class AnchorPolicy(_Group):
    """Recall's scope anchors: the weight of an anchor a request names without one, the
    share of it a facet match gets, the most anchors may lift a score (``boost``: a
    factor of at most ``1 + boost``), each anchor's packing ``floor`` (docs/packing.md) and
    the default set's weights (docs/retrieval.md)."""

    weight: float = Field(default=1.5, ge=0.5, le=2.0)
    facet_share: float = Field(default=0.5, ge=0.0, le=1.0)
    boost: float = Field(default=0.5, ge=0.0, le=1.0)
    #: packing: the entries each anchor in play is given before the fill by rank
    floor: int = Field(default=1, ge=0, le=10)
    defaults: AnchorDefaults = AnchorDefaults()


class RecallPolicy(_Group):
    """Recall's defaults: how many items a request that names no ``limit`` gets."""

    limit: int = Field(default=10, ge=1, le=100)


class TenantPolicy(BaseModel):
    """Every tenant-level knob; absent keys take these defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    writes: Literal["on", "off", "incognito"] = "on"
    shadow: ShadowPolicy = ShadowPolicy()
    permission_refusal_ttl: Span = Field(default=timedelta(hours=1), gt=timedelta(0))
    # private memory (model §4): a session's working memory expires this long after its
    # last write
    working_memory_ttl: Span = Field(default=timedelta(hours=1), gt=timedelta(0))
    confidence: ConfidenceSettings = ConfidenceSettings()
    promotion: PromotionPolicy = PromotionPolicy()
    anchors: AnchorPolicy = AnchorPolicy()
    recall: RecallPolicy = RecallPolicy()
    entity_suffixes: tuple[Annotated[str, Field(min_length=1)], ...] = ("prod", "production")
    topology_depth: int = Field(default=1, ge=0, le=10)
    # lifecycle (docs/lifecycle.md)
    skill_enforcement_threshold: Literal["advisory", "recommended", "required"] = "required"
    salience_half_life: Span = Field(default=timedelta(days=30), gt=timedelta(0))
    episode_archive_horizon: Span = Field(default=timedelta(days=90), gt=timedelta(0))
    rollup_min_episodes: int = Field(default=3, ge=2)
    # the edge (docs/sources.md, docs/hooks.md): an event dated further ahead of the
    # server's clock than this is refused (event_in_future), not stored to take
    # effect later
    event_clock_skew: Span = Field(default=timedelta(minutes=5), ge=timedelta(0))
    # access control (docs/claims.md, "Access control"): the classification levels of
    # evidence and principals' clearances, lowest first; evidence without a level is at
    # the lowest one
    classification_levels: tuple[str, ...] = Field(default=CLASSIFICATION_LEVELS, min_length=1)

    @field_validator("classification_levels")
    @classmethod
    def _distinct_levels(cls, levels: tuple[str, ...]) -> tuple[str, ...]:
        if any(not name.strip() for name in levels) or len(set(levels)) != len(levels):
            raise ValueError("classification levels must be distinct, non-empty names")
        return levels


# --- keys ------------------------------------------------------------------------------


@dataclass(frozen=True)
class KeySpec:
    """One key of the policy: its dotted path, what it expects, and its default (JSON)."""

    key: str
    expected: str
    default: Any


def _bounds(info: FieldInfo) -> str:
    parts = []
    for m in info.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(m, attr, None)
            if isinstance(m, getattr(annotated_types, attr.capitalize())) and bound is not None:
                shown = duration_literal(bound) if isinstance(bound, timedelta) else bound
                parts.append(f"{sign} {shown}")
    return f" {' and '.join(parts)}" if parts else ""


def _expected(info: FieldInfo) -> str:
    kind = info.annotation
    origin = getattr(kind, "__origin__", None)
    if kind is bool:
        return "true or false"
    if kind is int:
        return "an integer" + _bounds(info)
    if kind is float:
        return "a number" + _bounds(info)
    if kind is timedelta:
        return "a duration like 30m, 1h or 7d" + _bounds(info)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in kind.__args__)  # type: ignore[union-attr]
    if origin is tuple:
        return "a list of non-empty strings"
    return str(kind)


def _walk(model: type[BaseModel], prefix: str = "") -> dict[str, FieldInfo]:
    out: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, _Group):
            out |= _walk(kind, f"{prefix}{name}.")
        else:
            out[f"{prefix}{name}"] = info
    return out


_FIELDS = _walk(TenantPolicy)
_GROUPS = {k.split(".", 1)[0] for k in _FIELDS if "." in k}


def policy_keys() -> dict[str, KeySpec]:
    """Every key of the policy, in the document's order, with its type and default."""
    defaults = TenantPolicy().model_dump(mode="json")
    return {
        key: KeySpec(key, _expected(info), policy_value(defaults, key))
        for key, info in _FIELDS.items()
    }


def policy_value(document: Mapping[str, Any] | TenantPolicy, key: str) -> Any:
    """The JSON value of ``key`` in a policy (or its JSON document)."""
    node: Any = document.model_dump(mode="json") if isinstance(document, TenantPolicy) else document
    for part in key.split("."):
        node = node[part]
    return node


def _unknown(key: str) -> InputError:
    if key in _GROUPS:
        inside = ", ".join(k for k in _FIELDS if k.startswith(f"{key}."))
        return InputError(
            f"policy key {key!r} is a group; set one of its keys: {inside}",
            key=key,
            expected=f"one of {inside}",
            given=key,
            suggestions=[k for k in _FIELDS if k.startswith(f"{key}.")],
        )
    hints = [m[0] for m in process.extract(key, list(_FIELDS), limit=3, score_cutoff=60)]
    hint = f"; did you mean {', '.join(hints)}?" if hints else ""
    return InputError(
        f"no policy key {key!r}{hint}",
        key=key,
        expected="a policy key (caveat policy show)",
        given=key,
        suggestions=hints,
    )


def _bad(key: str, given: Any, why: str) -> InputError:
    expected = _expected(_FIELDS[key])
    return InputError(
        f"policy key {key}: expected {expected}, got {json.dumps(given, default=str)} ({why})",
        key=key,
        expected=expected,
        given=_safe(given),
    )


def _safe(given: Any) -> Any:
    """``given`` as strict JSON can carry it (a NaN anywhere in it is shown as text)."""
    try:
        json.dumps(given, allow_nan=False)
    except ValueError:
        return json.dumps(given)
    return given


def _finite(given: Any) -> bool:
    return not (isinstance(given, float) and not math.isfinite(given))


def changed_policy(policy: TenantPolicy, changes: Mapping[str, Any]) -> TenantPolicy:
    """``policy`` with ``changes`` (dotted key -> JSON value) applied, all or nothing.

    Values are checked as JSON, strictly (``"3"`` is not an integer; a duration is text
    like ``1h``): the first bad key, in the order given, is refused with an
    ``InputError`` whose ``key``, ``expected`` and ``given`` say what and where."""
    if not changes:
        raise InputError("no policy change given", key=None, expected="KEY VALUE", given=None)
    document = policy.model_dump(mode="json")
    for key, given in changes.items():
        if key not in _FIELDS:
            raise _unknown(key)
        if not _finite(given):
            raise _bad(key, given, "not a finite number")
        *parents, last = key.split(".")
        node = document
        for part in parents:
            node = node[part]
        node[last] = given
        try:  # each key alone first: the error then names the key it is about
            TenantPolicy.model_validate_json(json.dumps(document), strict=True)
        except ValidationError as exc:
            raise _bad(key, given, exc.errors()[0]["msg"]) from None
    return TenantPolicy.model_validate_json(json.dumps(document), strict=True)


def check_levels_kept(
    *, session: Session, tenant: str, old: TenantPolicy, new: TenantPolicy
) -> None:
    """Refuse a change of ``classification_levels`` that would change what a stored
    level means: an item keeps its strictest level as a name fixed when it is written,
    and a principal's clearance is a name too, so every level in use (by evidence,
    items, principals or tokens) must stay, and those in use must keep their order.
    Adding levels anywhere is fine. ``InputError`` naming the key, the levels in use
    (with where) and the levels given otherwise; every door that changes a tenant's
    policy calls it (``caveat policy set``, ``declare_tenant``, ``caveat schema load``)."""
    before, after = old.classification_levels, new.classification_levels
    if before == after:
        return
    used = q.classification_levels_in_use(session=session, tenant=tenant)
    # a name the old levels do not know is already unknown (read fail closed): its
    # meaning is not the one at stake here
    in_use = [level for level in before if level in used]
    dropped = [level for level in in_use if level not in after]
    kept = [level for level in after if level in in_use]
    if not dropped and kept == in_use:
        return
    why = f"it drops {', '.join(dropped)}" if dropped else f"it reorders them as {', '.join(kept)}"
    where = "; ".join(f"{level} ({', '.join(used[level])})" for level in in_use)
    raise InputError(
        f"policy key classification_levels: the levels in use, lowest first, are "
        f"{where}; given {', '.join(after)}, {why}. Stored levels are names: keep every "
        "level in use, in the same order (new levels may go anywhere)",
        key="classification_levels",
        expected=f"a list holding {', '.join(in_use)} in that order",
        given=list(after),
        in_use={level: used[level] for level in in_use},
    )


# --- versions ------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicyVersion:
    """One version of a tenant's policy: its number, the policy, when and by whom set."""

    version: int
    policy: TenantPolicy
    set_at: datetime
    set_by: str


def policy_as_of(*, session: Session, tenant: str, at: datetime | None = None) -> PolicyVersion:
    """The tenant's policy in force at ``at`` (None: now), with its version. ``NotFound``
    for an unknown tenant, or an instant before its first policy."""
    row = q.policy_version(session=session, tenant=tenant, at=at)
    if row is None:
        if q.tenant_created_at(session=session, tenant=tenant) is None:
            raise NotFound(f"no tenant {tenant!r}", tenant=tenant)
        raise NotFound(
            f"tenant {tenant!r} had no policy as of {at:%Y-%m-%dT%H:%M:%SZ}"
            if at is not None
            else f"tenant {tenant!r} has no policy version",
            tenant=tenant,
        )
    return PolicyVersion(
        int(row.version), TenantPolicy.model_validate(row.policy), row.set_at, row.set_by
    )


def store_policy(
    *, session: Session, tenant: str, policy: TenantPolicy, at: datetime, by: str
) -> int:
    """Make ``policy`` the tenant's current one and its next version; returns the version.
    The caller holds the tenant's row lock (``lock_policy``) and writes the audit."""
    document = policy.model_dump(mode="json")
    q.set_tenant_policy(session=session, tenant=tenant, policy=document)
    return q.add_policy_version(session=session, tenant=tenant, policy=document, at=at, by=by)


def lock_policy(*, session: Session, tenant: str) -> TenantPolicy:
    """The tenant's current policy, its row locked for a change; ``NotFound`` otherwise."""
    raw = q.lock_tenant_policy(session=session, tenant=tenant)
    if raw is None:
        raise NotFound(f"no tenant {tenant!r}", tenant=tenant)
    return TenantPolicy.model_validate(raw)


def current_policy(*, session: Session, tenant: str) -> TenantPolicy:
    """The tenant's policy as stored now (one read of its row, not the whole world);
    ``NotFound`` for an unknown tenant."""
    raw = q.tenant_policy(session=session, tenant=tenant)
    if raw is None:
        raise NotFound(f"no tenant {tenant!r}", tenant=tenant)
    return TenantPolicy.model_validate(raw)
