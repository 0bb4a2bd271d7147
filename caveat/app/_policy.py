"""Tenant policy from every door (model §7.1; docs/policy.md): show it (now or as of an
instant) and change keys of it (admin), with a dry run that previews what the change
would do. The request and answer models every door shares live here too."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import Field, JsonValue

import factgen
import lifecycle
from caveat.answers import _policy as out
from caveat.app._requests import Strict
from caveat.app._unit import Unit, usecase
from predicates.errors import InputError

__all__ = [
    "PolicyChangeIn",
    "PolicyChangeOut",
    "PolicyChangesIn",
    "PolicyOut",
    "change_view",
    "cli_value",
    "pairs",
    "policy_set",
    "policy_show",
    "policy_view",
]


@usecase(require="read")
def policy_show(u: Unit, *, as_of: datetime | None = None) -> factgen.PolicyVersion:
    """The tenant's policy in force now, or at ``as_of`` (the version of then), with its
    version number, who set it and when."""
    return lifecycle.show_policy(**u.scope(), at=as_of)


@usecase(require="policy", use="policy_set")
def policy_set(
    u: Unit,
    changes: Mapping[str, Any],
    *,
    dry_run: bool = False,
    now: datetime | None = None,
) -> lifecycle.PolicyChange:
    """Change policy keys (admin), all or nothing: each changed key one ``policy_set``
    audit row, the whole a new policy version; ``dry_run`` only previews. A change (not
    a dry run) creates the tenant if it is new, as ``schema load`` does."""
    if not dry_run:
        factgen.ensure_tenant(**u.at(now))
    return lifecycle.set_policy(**u.at(now), changes=changes, dry_run=dry_run)


# --- what the doors take ---------------------------------------------------------------


def cli_value(text: str) -> Any:
    """A value typed on a command line or in a form: JSON when it parses (``3``, ``0.8``,
    ``true``, ``["prod"]``), else the text itself (``on``, ``1h``)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def pairs(words: Sequence[str]) -> dict[str, Any]:
    """``KEY VALUE [KEY VALUE ...]`` as changes, in order; a key named twice is refused."""
    if not words or len(words) % 2:
        raise InputError(
            "give KEY VALUE pairs (for example shadow.min_matched_cases 5)",
            key=None,
            expected="KEY VALUE",
            given=list(words),
        )
    changes: dict[str, Any] = {}
    for key, value in zip(words[::2], words[1::2], strict=True):
        if key in changes:
            raise InputError(f"policy key {key} given twice", key=key, expected="once", given=2)
        changes[key] = cli_value(value)
    return changes


class PolicyChangeIn(Strict):
    """One key's new value, as JSON (a duration as text like ``1h``)."""

    key: str = Field(min_length=1, description="A dotted policy key: shadow.min_matched_cases.")
    value: JsonValue = Field(description="Its new value (docs/policy.md gives each type).")


class PolicyChangesIn(Strict):
    """Policy changes, made all or nothing (none is stored when one is refused)."""

    changes: list[PolicyChangeIn] = Field(min_length=1, description="The keys to change.")

    def as_changes(self) -> dict[str, Any]:
        return pairs([w for c in self.changes for w in (c.key, json.dumps(c.value))])


# --- what the doors answer --------------------------------------------------------------


class PolicyOut(out.PolicyOut):
    """A tenant's policy as of an instant: the version in force, who set it and when, the
    document, and every key flat."""

    policy: factgen.TenantPolicy  # type: ignore[assignment]


class PolicyChangeOut(out.PolicyChangeOut):
    """A change as made (or previewed, ``dry_run``): the keys changed, those already at
    their value, the resulting version (null: nothing stored) and the preview."""

    policy: factgen.TenantPolicy  # type: ignore[assignment]


def policy_view(v: factgen.PolicyVersion) -> dict[str, Any]:
    """A policy version's JSON form (``PolicyOut``)."""
    document = v.policy.model_dump(mode="json")
    return {
        "version": v.version,
        "set_at": v.set_at.isoformat(),
        "set_by": v.set_by,
        "policy": document,
        "keys": [
            {
                "key": spec.key,
                "value": factgen.policy_value(document, spec.key),
                "default": spec.default,
                "expected": spec.expected,
            }
            for spec in factgen.policy_keys().values()
        ],
    }


def _pair(pair: tuple[Sequence[Any], Sequence[Any]] | None) -> dict[str, Any] | None:
    return None if pair is None else {"current": list(pair[0]), "new": list(pair[1])}


def change_view(c: lifecycle.PolicyChange) -> dict[str, Any]:
    """A policy change's JSON form (``PolicyChangeOut``)."""
    p = c.preview
    return {
        "dry_run": c.dry_run,
        "version": c.version,
        "at": c.at.isoformat(),
        "changes": [{"key": d.key, "old": d.old, "new": d.new} for d in c.changes],
        "unchanged": list(c.unchanged),
        "policy": c.policy.model_dump(mode="json"),
        "preview": {
            "would_graduate": _pair(p.would_graduate),
            "would_drop": _pair(p.would_drop),
            "candidates": _pair(p.candidates),
            "auto_promoted": _pair(p.auto_promoted),
            "lines": p.lines(),
        },
    }
