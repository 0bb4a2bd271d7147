"""What the policy doors answer (``/v1/policy``): the policy document is JSON here;
the server's subclasses (``caveat.app._policy``) type it with ``factgen.TenantPolicy``."""

from __future__ import annotations

from datetime import datetime

from pydantic import JsonValue

from caveat.answers._answers import Answer as _Out


class PolicyKeyOut(_Out):
    """One key: its value, its default, and what it takes."""

    key: str
    value: JsonValue
    default: JsonValue
    expected: str


class PolicyOut(_Out):
    """A tenant's policy as of an instant: the version in force, who set it and when, the
    document, and every key flat."""

    version: int
    set_at: datetime
    set_by: str
    policy: dict[str, JsonValue]
    keys: list[PolicyKeyOut]


class KeyChangeOut(_Out):
    key: str
    old: JsonValue
    new: JsonValue


class PreviewPairOut(_Out):
    """Under the current policy and under the new one."""

    current: list[JsonValue]
    new: list[JsonValue]


class PolicyPreviewOut(_Out):
    """What the pending change would do (null: the change does not touch it)."""

    would_graduate: PreviewPairOut | None
    would_drop: PreviewPairOut | None
    candidates: PreviewPairOut | None
    auto_promoted: PreviewPairOut | None
    lines: list[str]


class PolicyChangeOut(_Out):
    """A change as made (or previewed, ``dry_run``): the keys changed, those already at
    their value, the resulting version (null: nothing stored) and the preview."""

    dry_run: bool
    version: int | None
    at: datetime
    changes: list[KeyChangeOut]
    unchanged: list[str]
    policy: dict[str, JsonValue]
    preview: PolicyPreviewOut
