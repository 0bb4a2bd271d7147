"""All SQL of recall: the six gates and the ranking, in one place."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from claims._queries import ITEM_COLUMNS, ITEMS, TRANSITIONS

__all__: list[str] = []

# Gates 1-2 (tenant_scope, capability) are never reported: they decide what
# the caller may know exists; a redacted item is treated the same way, as
# never having existed, as of any instant. Gates 3-6 are computed per row so
# that explain can name the first one that withholds an item.
# ``activated_version`` is split into its parts: the row is current
# (``g_current``), a skill is released (``g_released``), and the state admits
# the item here: active, case items in their own case, and verify-on-next-use
# items whose check did not fail (``:blocked``).
_CANDIDATES = f"""
SELECT {ITEM_COLUMNS},
       st.state AS state_then,
       (i.superseded_at IS NULL OR i.superseded_at > :as_of) AS g_current,
       (i.kind <> 'skill' OR i.release_state = 'released') AS g_released,
       (
         (i.superseded_at IS NULL OR i.superseded_at > :as_of)
         AND (
           st.state = 'active'
           OR (st.state = 'verify_on_next_use' AND NOT (i.id = ANY(:blocked)))
           OR (st.state = 'case' AND i.scope_axis = 'case' AND i.scope_id = :case_id)
         )
         AND (i.kind <> 'skill' OR i.release_state = 'released')
       ) IS TRUE AS g_activated_version,
       (cardinality(i.purposes) = 0 OR i.purposes @> ARRAY[CAST(:purpose AS text)])
         IS TRUE AS g_purpose,
       caveat_applies(i.conditions, CAST(:snapshot AS jsonb), i.subject) AS g_applicability,
       (i.valid_from <= :at AND (i.valid_to IS NULL OR i.valid_to > :at)) AS g_validity_window,
       ts_rank_cd(i.fts, q.query, 32) AS lexical,
       CASE WHEN cardinality(i.entities) = 0 THEN 0.0 ELSE
         CAST(cardinality(ARRAY(SELECT unnest(i.entities) INTERSECT
                                SELECT unnest(CAST(:query_entities AS text[])))) AS float8)
         / cardinality(i.entities) END AS entity_overlap,
       i.salience * power(0.5, greatest(extract(epoch FROM (CAST(:at AS timestamptz) - CASE
           WHEN u.last_used_at <= :as_of THEN greatest(u.last_used_at, i.recorded_at)
           ELSE i.recorded_at END)), 0) / :half_life_s) AS effective_salience
FROM {ITEMS}
CROSS JOIN (SELECT CASE WHEN :tsquery = '' THEN CAST('' AS tsquery)
                   ELSE to_tsquery('english', :tsquery) END AS query) q
LEFT JOIN LATERAL (
    SELECT t.to_state AS state FROM {TRANSITIONS} t
    WHERE t.tenant_id = i.tenant_id AND t.item_id = i.id AND t.at <= :as_of
    ORDER BY t.at DESC, t.seq DESC LIMIT 1
) st ON TRUE
LEFT JOIN item_usage u ON u.tenant_id = i.tenant_id AND u.item_id = i.id
WHERE i.tenant_id = :tenant
  AND (CAST(:admin AS boolean) OR NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements(i.acl) r
        WHERE NOT (r ?| CAST(:capabilities AS text[]))))
  AND NOT EXISTS (SELECT 1 FROM redactions x WHERE x.tenant_id = i.tenant_id AND x.item_id = i.id)
  AND i.recorded_at <= :as_of
  AND (CAST(:all_subjects AS boolean) OR i.subject = ANY(:subjects))
"""

_RANKED = f"""
WITH gated AS (
  SELECT * FROM ({_CANDIDATES}) c
  WHERE g_activated_version AND g_purpose AND g_applicability AND g_validity_window
), ranked AS (
  SELECT gated.*,
         rank() OVER (ORDER BY lexical DESC) AS lexical_rank,
         rank() OVER (ORDER BY entity_overlap DESC) AS entity_rank
  FROM gated
)
SELECT ranked.*,
       (CASE WHEN lexical > 0 THEN 1.0 / (60 + lexical_rank) ELSE 0 END
        + CASE WHEN entity_overlap > 0 THEN 1.0 / (60 + entity_rank) ELSE 0 END)
       * (0.9 + 0.2 * effective_salience)
       * (CASE WHEN verified_by IS NOT NULL THEN 1.05 ELSE 1.0 END) AS score
FROM ranked
ORDER BY score DESC, recorded_at DESC, id
LIMIT :limit
"""

# Verify-on-next-use items that pass every other gate: they are checked before the top-k cut.
# (A live recall may filter on the current state first; an as-of recall may not.)
_TO_CHECK = f"""
SELECT * FROM ({_CANDIDATES} AND (NOT CAST(:live AS boolean) OR cur.state = 'verify_on_next_use')) c
WHERE state_then = 'verify_on_next_use' AND g_current AND g_released
  AND g_purpose AND g_applicability AND g_validity_window
ORDER BY id
"""

# Shadow items that pass every gate but their own state (the shadow log), outside their own case.
_SHADOW = f"""
SELECT id, g_applicability AS matched FROM ({_CANDIDATES} AND cur.state = 'shadow') c
WHERE state_then = 'shadow' AND g_current AND g_released AND g_purpose AND g_validity_window
  AND NOT (scope_axis = 'case' AND scope_id = :case_id)
ORDER BY id
"""


def _params(p: dict[str, Any]) -> dict[str, Any]:
    return {**p, "snapshot": json.dumps(p["snapshot"])}


def gated_ranked(*, session: Session, params: dict[str, Any]) -> Sequence[sa.Row[Any]]:
    """Items that pass all six gates, ranked, top ``limit``."""
    return session.execute(sa.text(_RANKED), _params(params)).all()


def candidates(*, session: Session, params: dict[str, Any]) -> Sequence[sa.Row[Any]]:
    """Every item the caller may see, with each reportable gate's verdict (for explain)."""
    return session.execute(
        sa.text(f"SELECT * FROM ({_CANDIDATES}) c ORDER BY id"), _params(params)
    ).all()


def to_check(*, session: Session, params: dict[str, Any]) -> Sequence[sa.Row[Any]]:
    """Verify-on-next-use items that pass every other gate."""
    return session.execute(sa.text(_TO_CHECK), _params(params)).all()


def shadow_candidates(*, session: Session, params: dict[str, Any]) -> Sequence[sa.Row[Any]]:
    """``(id, matched)`` of shadow items that pass every gate but their state."""
    return session.execute(sa.text(_SHADOW), _params(params)).all()


def context_states(*, session: Session, tenant: str, ids: Sequence[int]) -> Sequence[sa.Row[Any]]:
    """The context guard's one read: each item's row, whether it is redacted, and whether a
    secondary TTL may have run out (an active ``permission_refusal`` item)."""
    return session.execute(
        sa.text(
            f"SELECT {ITEM_COLUMNS}, "
            "EXISTS (SELECT 1 FROM redactions x WHERE x.tenant_id = i.tenant_id "
            "        AND x.item_id = i.id) AS redacted, "
            "(cur.state = 'active' AND i.content_type = 'permission_refusal') AS ttl_applies "
            f"FROM {ITEMS} WHERE i.tenant_id = :t AND i.id = ANY(:ids)"
        ),
        {"t": tenant, "ids": list(ids)},
    ).all()
