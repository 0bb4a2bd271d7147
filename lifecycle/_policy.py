"""Tenant policy as an admin changes it (model §7.1; docs/policy.md): a set of key
changes, validated all or nothing, stored as the tenant's next policy version with one
``policy_set`` audit row per changed key, and previewed before it is made.

The preview is what the review queue shows of a pending change: under the current and
the new values, which shadow items the next case close would graduate or drop
(``shadow.*``), which promotion candidates appear or disappear
(``promotion.min_subjects``), and which items the policy would promote to shadow when
``promotion.auto_apply`` is on. A dry run computes it and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from claims import Actor, append
from factgen import (
    PolicyVersion,
    TenantPolicy,
    changed_policy,
    check_levels_kept,
    current_policy,
    lock_policy,
    policy_as_of,
    policy_value,
    store_policy,
)
from lifecycle._promotion import PromotionKey, candidates, eligible_for_promotion
from lifecycle._shadow import shadow_report

__all__ = [
    "KeyChange",
    "PolicyChange",
    "PolicyPreview",
    "preview_policy",
    "set_policy",
    "show_policy",
]


@dataclass(frozen=True)
class KeyChange:
    """One key's change: its old and new values (JSON)."""

    key: str
    old: Any
    new: Any


@dataclass(frozen=True)
class PolicyPreview:
    """What a pending change would do, each pair (under the current policy, under the
    new one); None where the change does not touch what it is about."""

    would_graduate: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    would_drop: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    candidates: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    auto_promoted: tuple[tuple[int, ...], tuple[int, ...]] | None = None

    def lines(self) -> list[str]:
        """The preview as sentences an SME reads (the CLI and the policy page)."""
        out: list[str] = []
        for name, pair in (("graduate", self.would_graduate), ("drop", self.would_drop)):
            if pair is not None:
                before, after = pair
                gained = sorted(set(after) - set(before))
                lost = sorted(set(before) - set(after))
                out.append(
                    f"shadow items the next close would {name}: {len(before)} -> {len(after)}"
                    + (f"; now also {_ids(gained)}" if gained else "")
                    + (f"; no longer {_ids(lost)}" if lost else "")
                )
        if self.candidates is not None:
            before_keys, after_keys = self.candidates
            appear = sorted(set(after_keys) - set(before_keys))
            disappear = sorted(set(before_keys) - set(after_keys))
            out.append(
                f"promotion candidates: {len(before_keys)} -> {len(after_keys)}"
                + (f"; appear: {', '.join(appear)}" if appear else "")
                + (f"; disappear: {', '.join(disappear)}" if disappear else "")
            )
        if self.auto_promoted is not None:
            before_ids, after_ids = self.auto_promoted
            out.append(
                "items the policy would promote to shadow at the next close or sweep: "
                f"{len(before_ids)} -> {len(after_ids)}"
                + (f" ({_ids(sorted(after_ids))})" if after_ids else "")
            )
        return out


def _ids(ids: list[int]) -> str:
    return ", ".join(f"#{i}" for i in ids)


@dataclass(frozen=True)
class PolicyChange:
    """A policy change as made (or, with ``dry_run``, as it would be made): the keys
    that change, the resulting policy, its version (None when nothing was stored), and
    the preview."""

    changes: tuple[KeyChange, ...]
    unchanged: tuple[str, ...]
    policy: TenantPolicy
    version: int | None
    at: datetime
    dry_run: bool
    preview: PolicyPreview


def show_policy(
    *, session: Session, tenant: str, actor: Actor, at: datetime | None = None
) -> PolicyVersion:
    """The tenant's policy in force at ``at`` (None: now), with its version, who set it
    and when (``read``: every principal but a source)."""
    actor.require("read")
    return policy_as_of(session=session, tenant=tenant, at=at)


def _label(k: PromotionKey) -> str:
    conds = " & ".join(k.required)
    return f"{k.subject} {k.attribute} ({k.kind}{', ' + conds if conds else ''})"


def preview_policy(
    *, session: Session, tenant: str, actor: Actor, old: TenantPolicy, new: TenantPolicy
) -> PolicyPreview:
    """What changing ``old`` to ``new`` would do, as ``actor`` may read it."""
    graduate = drop = keys = auto = None
    if old.shadow != new.shadow:
        before = shadow_report(session=session, tenant=tenant, actor=actor, policy=old.shadow)
        after = shadow_report(session=session, tenant=tenant, actor=actor, policy=new.shadow)
        graduate = (before.would_graduate, after.would_graduate)
        drop = (before.would_drop, after.would_drop)
    if old.promotion.min_subjects != new.promotion.min_subjects:

        def listed(n: int) -> tuple[str, ...]:
            found = candidates(session=session, tenant=tenant, actor=actor, min_subjects=n)
            return tuple(_label(k) for k in found)

        keys = (listed(old.promotion.min_subjects), listed(new.promotion.min_subjects))
    if old.promotion != new.promotion and (old.promotion.auto_apply or new.promotion.auto_apply):

        def promoted(p: TenantPolicy) -> tuple[int, ...]:
            if not p.promotion.auto_apply:
                return ()
            return tuple(
                eligible_for_promotion(
                    session=session, tenant=tenant, policy=p.promotion, actor=actor
                )
            )

        auto = (promoted(old), promoted(new))
    return PolicyPreview(graduate, drop, keys, auto)


def set_policy(
    *,
    session: Session,
    tenant: str,
    actor: Actor,
    changes: Mapping[str, Any],
    now: datetime,
    dry_run: bool = False,
) -> PolicyChange:
    """Change tenant policy keys (admin: ``policy``), all or nothing.

    ``changes`` maps dotted keys to JSON values (``factgen.changed_policy``: the first bad
    one is an ``InputError`` naming the key, nothing is stored; so is a change of
    ``classification_levels`` that drops or reorders a level in use,
    ``factgen.check_levels_kept``, dry run or not). A key set to the value
    it has is left out (``unchanged``); when something changes the new policy is the
    tenant's next version and each changed key one ``policy_set`` audit row (detail:
    key, old, new, version). With ``dry_run`` nothing is stored; the preview is the same.
    """
    actor.require("policy")
    old = (
        current_policy(session=session, tenant=tenant)
        if dry_run
        else lock_policy(session=session, tenant=tenant)
    )
    new = changed_policy(old, changes)
    check_levels_kept(session=session, tenant=tenant, old=old, new=new)
    diffs = tuple(
        KeyChange(key, policy_value(old, key), policy_value(new, key))
        for key in changes
        if policy_value(old, key) != policy_value(new, key)
    )
    unchanged = tuple(key for key in changes if key not in {d.key for d in diffs})
    preview = preview_policy(session=session, tenant=tenant, actor=actor, old=old, new=new)
    if dry_run or not diffs:
        return PolicyChange(diffs, unchanged, new if dry_run else old, None, now, dry_run, preview)
    version = store_policy(session=session, tenant=tenant, policy=new, at=now, by=actor.id)
    for d in diffs:
        append(
            session=session,
            tenant=tenant,
            actor=actor.id,
            action="policy_set",
            at=now,
            code=d.key,
            detail={"key": d.key, "old": d.old, "new": d.new, "version": version},
        )
    return PolicyChange(diffs, unchanged, new, version, now, dry_run, preview)
