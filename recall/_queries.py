"""All SQL of recall: the six gates and the ranking, in one place."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import psycopg
import sqlalchemy as sa
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from sqlalchemy.orm import Session

from claims._queries import (
    ITEM_COLUMNS,
    ITEM_COLUMNS_AS_OF,
    ITEMS,
    TRANSITIONS,
    acl_readable,
    owns_session,
    param_like,
    private_visible,
    readable,
    release_as_of,
    verification_as_of,
)
from lifecycle import CONFIDENCE_SQL

__all__: list[str] = []


# --- the state gate's private part (model §4 "Private memory") --------------------
#
# One rule, spelled once for both parameter styles (``:x`` for the as-of path, ``%(x)s``
# for the live one); ``recall._recall.admits_private`` is its Python twin (the context
# guard answers by it; tests/recall/test_private.py holds the two to each other). Who
# may know of a session item at all is claims' ``private_visible`` (used here with the
# read gate), the one rule every package's reads share.


def admits_private(item: str, *, state: str, at: str, style: str) -> str:
    """An item ``item`` in state ``state`` (an SQL expression) that the state gate admits
    at ``at`` without promotion: a ``case`` item in its own case (parameter ``case_id``),
    on the caller's own agent anchor (``principal``), or working memory of the request's
    session (``session``) that the caller owns, while its TTL (``wm_ttl_s``, seconds from
    the item's own write, its ``recorded_at``) has not run out: expired at exactly
    ``recorded_at + ttl``; and the caller's own agent lesson in ``shadow`` (promotion
    started: still its own agent's, in shadow for everyone else). Never NULL."""
    case_id, principal = param_like(style, "case_id"), param_like(style, "principal")
    sess, ttl = param_like(style, "session"), param_like(style, "wm_ttl_s")
    own_lesson = f"({item}.scope_axis = 'agent' AND {item}.scope_id = CAST({principal} AS text))"
    return f"""((({state} = 'case' AND (
        ({item}.scope_axis = 'case' AND {item}.scope_id = CAST({case_id} AS text))
        OR {own_lesson}
        OR ({item}.scope_axis = 'session' AND {item}.scope_id = CAST({sess} AS text)
            AND CAST({at} AS timestamptz)
                < {item}.recorded_at + make_interval(secs => CAST({ttl} AS float8))
            AND {owns_session(item, at=at, style=style)})))
      OR ({state} = 'shadow' AND {own_lesson})) IS TRUE)"""


# Gates 1-2 (tenant_scope, capability) are never reported: they decide what
# the caller may know exists; a redacted item is treated the same way, as
# never having existed, as of any instant. Gates 3-6 are computed per row so
# that explain can name the first one that withholds an item.
# ``activated_version`` is split into its parts: the row is current
# (``g_current``), a skill is released (``g_released``), and the state admits
# the item here: active, case items in their own case, and verify-on-next-use
# items whose check did not fail (``:blocked``).
_CANDIDATES = f"""
SELECT {ITEM_COLUMNS_AS_OF},
       st.state AS state_then,
       (i.superseded_at IS NULL OR i.superseded_at > :as_of) AS g_current,
       (i.kind <> 'skill' OR rh.release_state = 'released') AS g_released,
       (
         (i.superseded_at IS NULL OR i.superseded_at > :as_of)
         AND (
           st.state = 'active'
           OR (st.state = 'verify_on_next_use' AND NOT (i.id = ANY(:blocked)))
           OR {admits_private("i", state="st.state", at=":as_of", style=":")}
         )
         AND (i.kind <> 'skill' OR rh.release_state = 'released')
       ) IS TRUE AS g_activated_version,
       (cardinality(i.purposes) = 0 OR i.purposes @> ARRAY[CAST(:purpose AS text)])
         IS TRUE AS g_purpose,
       caveat_applies(i.conditions, CAST(:snapshot AS jsonb), i.subject) AS g_applicability,
       (i.valid_from <= :at AND (i.valid_to IS NULL OR i.valid_to > :at)) AS g_validity_window,
       ts_rank(i.fts, q.query, 1) AS lexical,
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
{release_as_of(":as_of")}
{verification_as_of(":as_of")}
LEFT JOIN item_usage u ON u.tenant_id = i.tenant_id AND u.item_id = i.id
WHERE i.tenant_id = :tenant
  AND {readable("i", caps=":capabilities", admin=":admin")}
  AND i.kind <> 'block'
  AND {private_visible("i", at=":as_of", style=":")}
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

# Verify-on-next-use items (then) that pass every other gate: an as-of recall evaluates
# their check before the top-k cut (the live path checks in SQL, LIVE_RANKED).
_TO_CHECK = f"""
SELECT * FROM ({_CANDIDATES}) c
WHERE state_then = 'verify_on_next_use' AND g_current AND g_released
  AND g_purpose AND g_applicability AND g_validity_window
ORDER BY id
"""


# --- the live path (no as_of): candidates from indexes, gates in rank order ------
#
# psycopg ``%(name)s`` parameters, one constant text per candidate source, so the
# driver prepares each statement once per connection. ``_VISIBLE`` is gates 1-2
# and redaction: it filters before any candidate is ranked, counted or capped.
_VISIBLE = f"""i.tenant_id = %(tenant)s AND i.superseded_at IS NULL AND i.kind <> 'block'
  AND {readable("i", caps="%(caps)s", admin="%(admin)s")}
  AND {private_visible("i", at=None, style="%")}"""

#: Where candidates come from: the subjects' items (btree), the items a query
#: term matches (capped in table order: a sequential scan that stops at the cap for
#: common terms, the GIN bitmap for rare ones, which read the table in the same
#: order; the application's sessions turn synchronized scans off, so a scan always
#: starts at the first page and the same query keeps the same candidates), the rest
#: of the tenant by recency (the stage that fills an answer no term could), or named
#: items (a point check); ``shadow`` and ``pending`` (verify-on-next-use) items of the
#: request's subjects are what ``record_use`` records beside the items used.
SOURCES = {
    "subject": "AND i.subject = ANY(CAST(%(subjects)s AS text[]))",
    "text": "AND i.fts @@ to_tsquery('english', %(tsquery)s)",
    "recent": "AND NOT coalesce(i.fts @@ q.query, false) ORDER BY i.recorded_at DESC, i.id",
    "ids": "AND i.id = ANY(CAST(%(ids)s AS bigint[]))",
    "shadow": "AND i.id IN (SELECT s.item_id FROM item_states s WHERE s.tenant_id = %(tenant)s "
    "AND s.state = 'shadow') AND (CAST(%(all_subjects)s AS boolean) "
    "OR i.subject = ANY(CAST(%(subjects)s AS text[])))",
    # stored as waiting, or active with a secondary TTL (that may have run out: the
    # state laterals read it as waiting then)
    "pending": "AND i.id IN (SELECT s.item_id FROM item_states s WHERE s.tenant_id = %(tenant)s "
    "AND (s.state = 'verify_on_next_use' OR (s.state = 'active' AND %(ttl)s ? i.content_type))) "
    "AND (CAST(%(all_subjects)s AS boolean) OR i.subject = ANY(CAST(%(subjects)s AS text[])))",
}

#: The entity channel, when the query names subjects (``{entity}``), or none.
_ENTITY = {
    True: """CASE WHEN cardinality(c.entities) = 0 THEN 0.0
              ELSE CAST(cardinality(ARRAY(
                     SELECT unnest(c.entities) INTERSECT
                     SELECT unnest(CAST(%(query_entities)s AS text[])))) AS float8)
                   / cardinality(c.entities) END""",
    False: "0.0",
}
_ENTITY_RANK = {
    True: "rank() OVER (PARTITION BY withdrawn ORDER BY entity_overlap DESC)",
    False: "CAST(1 AS bigint)",
}

#: An item's confidence at ``%(at)s`` from its ``item_confidence`` row ``ic`` (ranking
#: only): ``lifecycle.CONFIDENCE_SQL``, the SQL twin of ``lifecycle.confidence_at``.
_CONFIDENCE = CONFIDENCE_SQL.format(c="ic", i="c")

#: The anchor term of each candidate (model §6, "Anchors from the context"): for every
#: anchor in play (``%(anchors)s``, ``n`` its position) that the candidate is anchored at
#: (its scope: all of the weight) or faceted at (``facet_share`` of it), ``w / (rrf_k +
#: r)``, ``r`` its rank among that anchor's candidates by the fused score before anchors
#: (``base``; ties share a rank); summed over the anchors (``recall._fusion.anchor_terms``
#: is its Python twin). Only candidates on some anchor have a row.
_ANCHOR_TERMS = """
SELECT h.id, sum(h.w / (%(rrf_k)s + h.r)) AS term FROM (
  SELECT m.id, m.w, rank() OVER (PARTITION BY m.withdrawn, m.n ORDER BY m.base DESC) AS r
  FROM (
    -- anchored at it: a hash join on the scope
    SELECT b.id, b.withdrawn, b.base, a.n, a.w
    FROM based b JOIN anchors a
      ON a.axis = b.scope_axis AND a.id = b.scope_id
    UNION ALL
    -- faceted at it (and not anchored there): only the candidates with facets
    SELECT b.id, b.withdrawn, b.base, a.n, %(facet_share)s * a.w
    FROM based b JOIN anchors a ON b.facets @> a.probe
    WHERE b.facets <> CAST('[]' AS jsonb)
      AND NOT (a.axis = b.scope_axis AND a.id = b.scope_id)) m) h
GROUP BY h.id"""

#: The dense channel: the cosine similarity of candidate ``c``'s embedding under the
#: request's model to the query vector; NULL when there is no query vector (no
#: embedder), when the item is not embedded yet, and when the dense channel is a list
#: (``%(dense_ids)s``, a recall without subjects: its nearest items) that ``c`` is not
#: on: a channel contributes to fusion only for what it found, as the full-text
#: channel only for the items a term matches. With subjects (``dense_ids`` NULL) every
#: candidate is scored by key.
_DENSE = """CASE WHEN CAST(%(qvec)s AS text) IS NULL THEN NULL
    WHEN CAST(%(dense_ids)s AS bigint[]) IS NOT NULL
         AND NOT c.id = ANY(CAST(%(dense_ids)s AS bigint[])) THEN NULL ELSE (
    SELECT 1 - (e.embedding <=> CAST(%(qvec)s AS vector)) FROM item_embeddings e
    WHERE e.tenant_id = %(tenant)s AND e.item_id = c.id AND e.model = %(model)s) END"""

#: Candidates without a vector under the request's model yet (read from the primary
#: key's index; no vector is read).
_UNEMBEDDED = """(SELECT count(*) FROM cand c WHERE CAST(%(qvec)s AS text) IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM item_embeddings e WHERE e.tenant_id = %(tenant)s
                        AND e.item_id = c.id AND e.model = %(model)s))"""

_LIVE_CTES = """
WITH q AS MATERIALIZED (
  SELECT CASE WHEN %(tsquery)s = '' THEN CAST('' AS tsquery)
         ELSE to_tsquery('english', %(tsquery)s) END AS query
), anchors AS MATERIALIZED (
  -- each anchor in play once: its axis, id, weight, and the facet it matches
  SELECT x ->> 'axis' AS axis, x ->> 'id' AS id, CAST(x ->> 'w' AS float8) AS w, n,
         jsonb_build_array(jsonb_build_object('axis', x ->> 'axis', 'id', x ->> 'id')) AS probe
  FROM jsonb_array_elements(%(anchors)s) WITH ORDINALITY AS a(x, n)
), cand AS MATERIALIZED (
  SELECT i.id, i.fts, i.entities, i.salience, i.recorded_at, i.verified_by,
         i.scope_axis, i.scope_id, i.facets
  FROM items i, q WHERE {visible} {source} LIMIT %(cap)s
), scored AS (
  SELECT c.id, c.recorded_at, c.verified_by, c.scope_axis, c.scope_id, c.facets,
         CASE WHEN %(tsquery)s = '' OR NOT (c.fts @@ q.query) THEN CAST(0 AS float8)
              ELSE CAST(ts_rank(c.fts, q.query, 1) AS float8) END AS lexical,
         CAST({entity} AS float8) AS entity_overlap,
         CAST({dense} AS float8) AS dense,
         CAST({confidence} AS float8) AS confidence,
         power(0.5, greatest(extract(epoch FROM (CAST(%(at)s AS timestamptz)
           - c.recorded_at)), 0) / %(recency_half_life_s)s) AS recency,
         c.salience * power(0.5, greatest(extract(epoch FROM (CAST(%(at)s AS timestamptz) - CASE
             WHEN u.last_used_at <= %(at)s THEN greatest(u.last_used_at, c.recorded_at)
             ELSE c.recorded_at END)), 0) / %(half_life_s)s) AS effective_salience,
         -- revoked or refuted: kept for explain, ranked apart (never takes a rank)
         EXISTS (SELECT 1 FROM item_states ws WHERE ws.tenant_id = %(tenant)s
                 AND ws.item_id = c.id AND ws.state IN ('revoked', 'refuted')) AS withdrawn
  FROM cand c CROSS JOIN q
  LEFT JOIN item_usage u ON u.tenant_id = %(tenant)s AND u.item_id = c.id
  LEFT JOIN item_confidence ic ON ic.tenant_id = %(tenant)s AND ic.item_id = c.id
), ranked AS (
  SELECT s.*, rank() OVER (PARTITION BY withdrawn ORDER BY lexical DESC) AS lexical_rank,
         {entity_rank} AS entity_rank,
         rank() OVER (PARTITION BY withdrawn ORDER BY dense DESC NULLS LAST) AS dense_rank
  FROM scored s
), based AS MATERIALIZED (
  SELECT r.*,
          (CASE WHEN lexical > 0 THEN %(w_lexical)s / (%(rrf_k)s + lexical_rank) ELSE 0 END
           + CASE WHEN dense IS NOT NULL THEN %(w_dense)s / (%(rrf_k)s + dense_rank) ELSE 0 END
           + CASE WHEN entity_overlap > 0 THEN %(w_entity)s / (%(rrf_k)s + entity_rank)
                  ELSE 0 END)
          * (1 - %(b_salience)s + 2 * %(b_salience)s * least(effective_salience, 1.0))
          * (1 - %(b_recency)s + 2 * %(b_recency)s * recency)
          * (CASE WHEN verified_by IS NOT NULL THEN 1 + %(b_verified)s ELSE 1.0 END)
          * (1 - %(b_confidence)s + 2 * %(b_confidence)s * confidence) AS base
  FROM ranked r
), anchored AS (
  SELECT b.*, CAST(coalesce(t.term, 0) AS float8) AS anchor_term,
         -- the bounded anchor factor: 1 + boost * term / (term + 1 / rrf_k), below 1 + boost
         1 + %(b_anchors)s * coalesce(t.term, 0)
               / (coalesce(t.term, 0) + 1.0 / %(rrf_k)s) AS anchor_weight
  FROM based b LEFT JOIN ({anchor_terms}) t ON t.id = b.id
), walk AS (
  SELECT r.*, row_number() OVER w AS pos
  FROM (SELECT r.*, r.base * r.anchor_weight AS score FROM anchored r) r
  WINDOW w AS (ORDER BY score DESC, recorded_at DESC, id)
  ORDER BY score DESC, recorded_at DESC, id OFFSET 0
)"""

# The state an item has for a live recall: a secondary TTL that ran out reads as
# verify_on_next_use at once (a sweep or record_use persists it), and the instant
# since which its check counts: the pending check's, else when it entered
# verify_on_next_use, else now. ``since`` is NULL for every other state.
_STATE_LATERALS = f"""
CROSS JOIN LATERAL (
  SELECT CASE WHEN cur.state = 'active' AND %(ttl)s ? i.content_type THEN (
           SELECT max(t.at) + make_interval(secs => CAST(%(ttl)s ->> i.content_type AS float8))
           FROM {TRANSITIONS} t
           WHERE t.tenant_id = i.tenant_id AND t.item_id = i.id AND t.to_state = 'active')
         END AS due
) tt
CROSS JOIN LATERAL (
  SELECT CASE WHEN tt.due <= %(at)s THEN 'verify_on_next_use' ELSE cur.state END AS state,
         CASE WHEN tt.due <= %(at)s THEN tt.due
              WHEN cur.state = 'verify_on_next_use' THEN coalesce(
                (SELECT ec.since FROM expiry_checks ec
                 WHERE ec.tenant_id = i.tenant_id AND ec.item_id = i.id),
                (SELECT max(t.at) FROM {TRANSITIONS} t WHERE t.tenant_id = i.tenant_id
                 AND t.item_id = i.id AND t.to_state = 'verify_on_next_use'),
                %(at)s) END AS since
) g"""
_LIVE_STATE = f"""
JOIN items i ON i.tenant_id = %(tenant)s AND i.id = w.id
JOIN item_states cur ON cur.tenant_id = %(tenant)s AND cur.item_id = w.id {_STATE_LATERALS}"""

_G_RELEASED = "(i.kind <> 'skill' OR i.release_state = 'released')"
_G_STATE = (
    "(g.state IN ('active', 'verify_on_next_use') "
    f"OR {admits_private('i', state='g.state', at='%(at)s', style='%')})"
)
_G_PURPOSE = (
    "(cardinality(i.purposes) = 0 OR i.purposes @> ARRAY[CAST(%(purpose)s AS text)]) IS TRUE"
)
_G_VALIDITY = "(i.valid_from <= %(at)s AND (i.valid_to IS NULL OR i.valid_to > %(at)s))"


# Applicability of item ``i`` at ``%(at)s``, in plain SQL: the rule of the plpgsql
# ``caveat_applies_at`` (migration 0008; every required condition TRUE, every excluded
# one FALSE, UNKNOWN never granted, never NULL), with each condition's observation read
# as ``caveat_observed`` reads it: inline first (``%(inline)s``), then, for a declared
# attribute (``%(declared)s``), the latest fact (history when that is later than
# ``at``), no older than its max_age nor than ``{since}``; compared as ``caveat_eval``
# compares (``in`` / ``not_in`` and versions call the plpgsql helpers). The executor
# runs it with no interpreter in between: 3-4x faster per item than the plpgsql
# function (docs/performance.md). The fenced subqueries (``OFFSET 0``) keep each
# fact lookup a probe of facts_current's key; flattened, the planner hashed every
# fact of the tenant instead. tests/recall/test_read.py holds it to
# ``caveat_applies`` and ``caveat_applies_at``.
#
#: One row per condition of item ``{i}``: ``req`` (required or excluded), ``n`` (its
#: position in its list), ``ok`` (TRUE / FALSE / NULL for UNKNOWN), and the
#: observation that decided it (``obs``, its ``observed_at``, ``source``, ``provenance``,
#: ``inl``: given inline), or NULL when there is none that counts.
_CONDITION_ROWS = """
    SELECT e.req, e.n, e.s, e.a, e.obs, e.o, e.source, e.provenance,
           e.inl IS NOT NULL AS inl, CASE
      WHEN e.op IS NULL THEN NULL
      WHEN e.obs IS NULL OR jsonb_typeof(e.obs) <> 'object'
        THEN CASE WHEN e.op = 'exists' AND NOT e.before_since THEN false END
      WHEN (e.obs ->> 't') IS DISTINCT FROM e.t OR e.v IS NULL OR jsonb_typeof(e.v) = 'null'
        THEN NULL
      WHEN e.op = 'exists' THEN true
      WHEN e.op IN ('in', 'not_in') THEN caveat_eval(e.x, e.obs)
      WHEN e.op IN ('contains', 'matches') THEN CASE
        WHEN e.t <> 'string' OR jsonb_typeof(e.v) <> 'string'
          OR jsonb_typeof(e.lit) IS DISTINCT FROM 'string' THEN NULL
        WHEN e.op = 'contains' THEN strpos(e.v #>> '{{}}', e.lit #>> '{{}}') > 0
        ELSE (e.v #>> '{{}}') ~ (e.lit #>> '{{}}') END
      ELSE CASE e.op WHEN 'eq' THEN e.cmp = 0 WHEN 'ne' THEN e.cmp <> 0
        WHEN 'lt' THEN e.cmp < 0 WHEN 'lte' THEN e.cmp <= 0
        WHEN 'gt' THEN e.cmp > 0 WHEN 'gte' THEN e.cmp >= 0 END
    END AS ok
    FROM (
      SELECT o.*, CASE
        WHEN o.op NOT IN ('eq', 'ne', 'lt', 'lte', 'gt', 'gte')
          OR jsonb_typeof(o.v) IS DISTINCT FROM jsonb_typeof(o.lit) THEN NULL
        WHEN o.t IN ('int', 'float', 'duration', 'timestamp') THEN CASE
          WHEN jsonb_typeof(o.v) = 'number' THEN CAST(sign(
            CAST(o.v #>> '{{}}' AS numeric) - CAST(o.lit #>> '{{}}' AS numeric)) AS integer) END
        WHEN o.t IN ('string', 'enum') THEN CASE
          WHEN jsonb_typeof(o.v) <> 'string' THEN NULL
          WHEN (o.v #>> '{{}}') = (o.lit #>> '{{}}') THEN 0
          WHEN (o.v #>> '{{}}') COLLATE "C" < (o.lit #>> '{{}}') COLLATE "C" THEN -1 ELSE 1 END
        WHEN o.t = 'bool' THEN CASE
          WHEN jsonb_typeof(o.v) <> 'boolean' THEN NULL
          WHEN o.v = o.lit THEN 0 WHEN o.v < o.lit THEN -1 ELSE 1 END
        WHEN o.t = 'version' THEN CASE
          WHEN jsonb_typeof(o.v) = 'array' THEN caveat_version_cmp(o.v, o.lit) END
      END AS cmp
      FROM (
        SELECT c.req, c.n, c.s, c.a, c.x, c.inl, c.x ->> 'op' AS op, c.x ->> 't' AS t,
               c.x -> 'v' AS lit, ob.obs, ob.obs -> 'v' AS v, ob.before_since,
               CASE WHEN ob.obs IS NULL THEN NULL WHEN c.inl IS NOT NULL
                    THEN CAST(%(at)s AS timestamptz) ELSE p.o END AS o,
               CASE WHEN ob.obs IS NULL OR c.inl IS NOT NULL THEN NULL ELSE p.source END
                 AS source,
               CASE WHEN ob.obs IS NULL OR c.inl IS NOT NULL THEN NULL ELSE p.provenance END
                 AS provenance
        FROM (
          SELECT c.*, %(inline)s -> c.s -> c.a AS inl,
                 CASE WHEN %(declared)s -> 'exact' ? c.a
                        THEN jsonb_build_array(%(declared)s -> 'exact' -> c.a)
                      ELSE (SELECT jsonb_build_array(pt -> 1)
                            FROM jsonb_array_elements(%(declared)s -> 'patterns') pt
                            WHERE c.a ~ (pt ->> 0) LIMIT 1) END AS decl
          FROM (
            SELECT true AS req, n, x, coalesce(x ->> 'e', {i}.subject) AS s, x ->> 'a' AS a
            FROM jsonb_array_elements(coalesce({i}.conditions -> 'required', '[]'))
                 WITH ORDINALITY AS r(x, n)
            UNION ALL
            SELECT false, n, x, coalesce(x ->> 'e', {i}.subject), x ->> 'a'
            FROM jsonb_array_elements(coalesce({i}.conditions -> 'excluded', '[]'))
                 WITH ORDINALITY AS r(x, n)
            OFFSET 0) c
          OFFSET 0) c
        LEFT JOIN LATERAL (
          SELECT f.value, f.observed_at, f.recorded_at, f.source, f.provenance
          FROM facts_current f
          WHERE f.tenant_id = {i}.tenant_id AND f.subject = c.s AND f.attribute = c.a
            AND c.inl IS NULL AND c.decl IS NOT NULL
          LIMIT 1) fc ON true
        LEFT JOIN LATERAL (
          SELECT h.value, h.observed_at, h.source, h.provenance FROM facts h
          WHERE (fc.observed_at > %(at)s OR fc.recorded_at > %(at)s)
            AND h.tenant_id = {i}.tenant_id AND h.subject = c.s AND h.attribute = c.a
            AND h.observed_at <= %(at)s AND h.recorded_at <= %(at)s
          ORDER BY h.observed_at DESC, h.id DESC LIMIT 1) fh ON true
        CROSS JOIN LATERAL (
          SELECT CASE WHEN fc.observed_at > %(at)s OR fc.recorded_at > %(at)s
                      THEN fh.value ELSE fc.value END AS v,
                 CASE WHEN fc.observed_at > %(at)s OR fc.recorded_at > %(at)s
                      THEN fh.observed_at ELSE fc.observed_at END AS o,
                 CASE WHEN fc.observed_at > %(at)s OR fc.recorded_at > %(at)s
                      THEN fh.source ELSE fc.source END AS source,
                 CASE WHEN fc.observed_at > %(at)s OR fc.recorded_at > %(at)s
                      THEN fh.provenance ELSE fc.provenance END AS provenance) p
        CROSS JOIN LATERAL (
          SELECT CASE
            WHEN c.inl IS NOT NULL THEN c.inl
            WHEN c.decl IS NULL OR p.v IS NULL THEN NULL
            WHEN jsonb_typeof(c.decl -> 0) = 'number' AND CAST(%(at)s AS timestamptz) - p.o
                 > make_interval(secs => CAST(c.decl ->> 0 AS float8)) THEN NULL
            WHEN CAST({since} AS timestamptz) IS NOT NULL
                 AND p.o < CAST({since} AS timestamptz) THEN NULL
            ELSE p.v END AS obs,
          -- observed, but before the check's instant: UNKNOWN, even for exists
          (c.inl IS NULL AND p.v IS NOT NULL AND CAST({since} AS timestamptz) IS NOT NULL
           AND p.o < CAST({since} AS timestamptz)) AS before_since) ob
        OFFSET 0) o
      ) e"""

#: The conditions of ``{i}`` are well-formed: an object of two lists (or none at all).
_WELL_FORMED = """({i}.conditions IS NULL OR (jsonb_typeof({i}.conditions) = 'object'
    AND jsonb_typeof(coalesce({i}.conditions -> 'required', CAST('[]' AS jsonb))) = 'array'
    AND jsonb_typeof(coalesce({i}.conditions -> 'excluded', CAST('[]' AS jsonb))) = 'array'))"""


def _applies(since: str, item: str = "i") -> str:
    """Item ``item`` applies at ``%(at)s``, counting only observations made at or after
    ``since`` (an SQL expression; ``NULL``: any). Never NULL."""
    rows = _CONDITION_ROWS.format(i=item, since=since)
    return (
        f"(CASE WHEN {_WELL_FORMED.format(i=item)} THEN (SELECT coalesce(bool_and("
        "CASE WHEN k.req THEN k.ok IS TRUE ELSE k.ok IS FALSE END), true) "
        f"FROM ({rows}) k) ELSE false END)"
    )


def _condition_detail(item: str = "i") -> str:
    """Each condition of ``item`` with its value and the observation behind it, as a JSON
    array in list order (required first): ``[required, n, ok, subject, attribute, type
    tag, json kind, value text, observed_at, source, inline, provenance]``; NULL when the
    conditions are malformed."""
    rows = _CONDITION_ROWS.format(i=item, since="NULL")
    return (
        f"(CASE WHEN {_WELL_FORMED.format(i=item)} THEN (SELECT coalesce(jsonb_agg("
        "jsonb_build_array(k.req, k.n, k.ok, k.s, k.a, k.obs ->> 't', "
        "jsonb_typeof(k.obs -> 'v'), k.obs ->> 'v', k.o, k.source, k.inl, k.provenance) "
        f"ORDER BY k.req DESC, k.n), CAST('[]' AS jsonb)) FROM ({rows}) k) END)"
    )


def _live_ctes(source: str, ent: bool) -> str:
    return _LIVE_CTES.format(
        visible=_VISIBLE,
        source=source,
        entity=_ENTITY[ent],
        entity_rank=_ENTITY_RANK[ent],
        dense=_DENSE,
        anchor_terms=_ANCHOR_TERMS,
        confidence=_CONFIDENCE,
    )


_NULLS = ", ".join(["NULL"] * (len(ITEM_COLUMNS.split(", ")) + 15))

#: The top ``limit`` candidates of a source that pass every gate, with their rows, in
#: rank order, then one row with only ``n_candidates`` (the number ranked). The cheap
#: gates run first, applicability (with the verify-on-next-use check, which implies
#: it) last, each row gated only when the walk reaches it: the gates sit in a LATERAL
#: subquery of each walked row (its LIMIT keeps the planner from flattening it into a
#: join), so the plan walks the candidates in order and stops at ``limit``. As a join
#: it could be hashed and sorted after gating every candidate (100k items, no
#: subject: 120 ms instead of 44). Each returned row carries ``condition_values``
#: (``_condition_detail``), computed for those rows only.
LIVE_RANKED = {
    (name, ent): _live_ctes(source, ent)
    + f"""
(SELECT top.*, {_condition_detail("top")} AS condition_values FROM (
  SELECT x.*, w.score, w.lexical, w.lexical_rank, w.entity_overlap,
         w.entity_rank, w.dense, w.dense_rank, w.anchor_weight, w.anchor_term, w.confidence,
         w.recency,
         w.effective_salience, w.pos,
         CASE WHEN CAST(%(qvec)s AS text) IS NULL THEN NULL ELSE (
           SELECT CAST(e.embedding AS real[]) FROM item_embeddings e
           WHERE e.tenant_id = %(tenant)s AND e.item_id = w.id AND e.model = %(model)s) END
           AS vector,
         CAST(NULL AS bigint) AS n_candidates, CAST(NULL AS bigint) AS n_unembedded
  FROM walk w CROSS JOIN LATERAL (
    SELECT {ITEM_COLUMNS}, g.state = 'verify_on_next_use' AS checked
    FROM items i JOIN item_states cur ON cur.tenant_id = i.tenant_id AND cur.item_id = i.id
      {_STATE_LATERALS}
    WHERE i.tenant_id = %(tenant)s AND i.id = w.id AND w.confidence >= %(min_confidence)s
      AND {_G_RELEASED} AND {_G_STATE} AND {_G_PURPOSE} AND {_G_VALIDITY}
      AND {_applies("g.since")}
    LIMIT 1
  ) x
  ORDER BY w.score DESC, w.recorded_at DESC, w.id
  LIMIT %(limit)s
) top ORDER BY top.pos)
UNION ALL
SELECT {_NULLS}, (SELECT count(*) FROM cand),
       {_UNEMBEDDED}, NULL"""
    for name, source in SOURCES.items()
    if name != "text"  # ranked as the ``ids`` TEXT_CANDIDATES selects
    for ent in (True, False)
}

#: Every reportable gate's verdict for the candidates a walk reached (``pos <=
#: %(walked)s``) or named (``ids``), with the item's row: explain and point checks.
#: A verify-on-next-use check is run only for an item that passes the other gates
#: (model §4.3); one that fails another gate is reported under that gate.
LIVE_VERDICTS = {
    (name, ent): _live_ctes(source, ent)
    + f"""
SELECT {ITEM_COLUMNS.replace("cur.state", "g.state")}, w.pos, w.confidence,
       ({_G_RELEASED} AND {_G_STATE} AND (g.state <> 'verify_on_next_use'
         OR NOT ({_G_PURPOSE} AND {_G_VALIDITY} AND {_applies("NULL")})
         OR {_applies("g.since")})) AS g_activated_version,
       {_G_PURPOSE} AS g_purpose,
       {_applies("NULL")} AS g_applicability,
       {_G_VALIDITY} AS g_validity_window,
       {_G_RELEASED} AS g_released,
       g.state = 'verify_on_next_use' AS checked,
       cur.state AS stored_state
FROM walk w {_LIVE_STATE}
WHERE w.pos <= %(walked)s
ORDER BY w.score DESC, w.recorded_at DESC, w.id"""
    for name, source in SOURCES.items()
    if name != "text"  # ranked as the ``ids`` TEXT_CANDIDATES selects
    for ent in (True, False)
}


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


#: Whether a source's statements may be prepared (None: psycopg's default, from the
#: fifth use on a connection). Every source's are: the full-text one's terms are
#: planned in ``TEXT_CANDIDATES`` alone.
_PREPARE: dict[str, bool | None] = {name: None for name in SOURCES if name != "text"}


def _cursor(session: Session) -> psycopg.Cursor[dict[str, Any]]:
    raw = session.connection().connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    cur: psycopg.Cursor[dict[str, Any]] = raw.cursor(row_factory=dict_row)
    return cur


def _live_params(p: dict[str, Any]) -> dict[str, Any]:
    return {
        **p,
        "inline": Jsonb(p["inline"]),
        "anchors": Jsonb(p.get("anchors", [])),
        "declared": Jsonb(p["declared"]),
        "ttl": Jsonb(p["ttl"]),
        "dense_ids": p.get("dense_ids"),
    }


#: The full-text candidates of a live recall: the first ``cap`` items the caller may see
#: that a query term matches, as one array of ids. Planned for each query, with its
#: terms in sight: how common they are decides between a scan that stops at the cap
#: (common terms) and the GIN bitmap (rare ones). A generic plan cannot tell the two
#: apart (measured at 1M items: 170 ms prepared, 35 ms planned). Ordered by recency
#: instead, the cap cost a full scan whenever the planner misjudged an OR of common
#: terms (p95 at 100k: 124 ms against 66).
TEXT_CANDIDATES = f"""
SELECT coalesce(array_agg(c.id), CAST('{{}}' AS bigint[])) FROM (
  SELECT i.id FROM items i WHERE {_VISIBLE} {SOURCES["text"]} LIMIT %(cap)s) c"""


def text_candidates(*, session: Session, params: dict[str, Any]) -> list[int]:
    """``TEXT_CANDIDATES``, planned for this query's terms (never prepared)."""
    raw = session.connection().connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    row = raw.execute(TEXT_CANDIDATES, params, prepare=False).fetchone()
    assert row is not None
    return list(row[0])


#: What the dense channel may offer: what the caller may see (``_VISIBLE``), less the
#: withdrawn items (revoked or refuted, model §4.4): a withdrawn item's vector is never a
#: candidate, so it cannot take a place among the nearest ``k`` (a probe of
#: ``item_states``' key per row the scan passes).
_DENSE_VISIBLE = f"""{_VISIBLE}
  AND NOT EXISTS (SELECT 1 FROM item_states ws WHERE ws.tenant_id = %(tenant)s
                  AND ws.item_id = i.id AND ws.state IN ('revoked', 'refuted'))"""

#: The dense channel's plan, from the index alone and a sample (docs/retrieval.md):
#: how many items of the tenant have a vector under the model (up to
#: ``%(cutover)s + 1``, an index-only scan of the primary key), and how many of the
#: first ``%(sample)s`` of them (by id) the caller may see (gates 1-2, redaction,
#: current rows, not withdrawn). No vector is read.
DENSE_PLAN = f"""
WITH e AS MATERIALIZED (
  SELECT item_id FROM item_embeddings
  WHERE tenant_id = %(tenant)s AND model = %(model)s
  ORDER BY item_id LIMIT %(cutover)s + 1)
SELECT (SELECT count(*) FROM e) AS n,
       (SELECT count(*) FROM (SELECT item_id FROM e ORDER BY item_id LIMIT %(sample)s) s
          JOIN items i ON i.id = s.item_id WHERE {_DENSE_VISIBLE}) AS seen"""

#: The exact ``k`` nearest of the embedded items the caller may see, when there are at
#: most ``%(cutover)s`` of them: the ids first (no vector read), then the distance of
#: each (no vector sorted); NULL when the passing set is larger than the cut-over.
DENSE_EXACT = f"""
WITH p AS MATERIALIZED (
  SELECT e.item_id FROM item_embeddings e JOIN items i ON i.id = e.item_id
  WHERE e.tenant_id = %(tenant)s AND e.model = %(model)s AND {_DENSE_VISIBLE}
  ORDER BY e.item_id LIMIT %(cutover)s + 1)
SELECT CASE WHEN (SELECT count(*) FROM p) <= %(cutover)s THEN ARRAY(
         SELECT item_id FROM (
           SELECT p.item_id, e.embedding <=> CAST(%(qvec)s AS vector) AS d
           FROM p JOIN item_embeddings e ON e.tenant_id = %(tenant)s
             AND e.model = %(model)s AND e.item_id = p.item_id) x
         ORDER BY d, item_id LIMIT %(k)s) END AS ids"""

#: The dense channel's candidates from the HNSW index (``dim = 384``), the filters
#: applied during the scan; the session's ``hnsw.iterative_scan`` (``make_app_engine``)
#: lets the scan go on past filtered rows until ``k`` pass.
DENSE_HNSW = f"""
SELECT e.item_id FROM item_embeddings e JOIN items i ON i.id = e.item_id
WHERE e.dim = 384 AND e.tenant_id = %(tenant)s AND e.model = %(model)s AND {_DENSE_VISIBLE}
ORDER BY CAST(e.embedding AS vector(384)) <=> CAST(%(qvec)s AS vector(384))
LIMIT %(k)s"""

#: The exact ``k`` nearest over the whole passing set, however large (HNSW under-filled,
#: or a model without an index); distances first, so the sort carries no vector.
DENSE_ALL = f"""
SELECT item_id FROM (
  SELECT e.item_id, e.embedding <=> CAST(%(qvec)s AS vector) AS d
  FROM item_embeddings e JOIN items i ON i.id = e.item_id
  WHERE e.tenant_id = %(tenant)s AND e.model = %(model)s AND {_DENSE_VISIBLE}) x
ORDER BY d, item_id
LIMIT %(k)s"""


def dense_plan(*, session: Session, params: dict[str, Any]) -> tuple[int, int]:
    """``DENSE_PLAN``: ``(embedded items up to cutover + 1, how many of the sample the
    caller may see)``."""
    raw = session.connection().connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    row = raw.execute(DENSE_PLAN, params).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def dense_exact(*, session: Session, params: dict[str, Any]) -> list[int] | None:
    """``DENSE_EXACT``: the exact nearest ids when the passing set is at most ``cutover``,
    None when it is larger."""
    raw = session.connection().connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    row = raw.execute(DENSE_EXACT, params).fetchone()
    assert row is not None
    return None if row[0] is None else list(row[0])


def dense_search(*, session: Session, params: dict[str, Any], exact: bool) -> list[int]:
    """The nearest ids by the HNSW index (``exact`` False, dimension 384) or a full scan."""
    raw = session.connection().connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    rows = raw.execute(DENSE_ALL if exact else DENSE_HNSW, params).fetchall()
    return [int(r[0]) for r in rows]


# --- the embedding queue ---

#: A batch of queued items with the text to embed, locked so concurrent drains share
#: the queue (``SKIP LOCKED``), oldest first. A redacted or missing item is taken too:
#: the drain drops it without an embedding.
EMBED_BATCH = """
SELECT q.item_id, coalesce(nullif(i.text, ''),
         i.subject || ' ' || replace(i.attribute, '_', ' ')) AS text,
       (i.id IS NULL OR EXISTS (SELECT 1 FROM redactions x
          WHERE x.tenant_id = q.tenant_id AND x.item_id = q.item_id)) AS gone
FROM embed_queue q LEFT JOIN items i ON i.id = q.item_id AND i.tenant_id = q.tenant_id
WHERE q.tenant_id = %(tenant)s
ORDER BY q.enqueued_at, q.item_id
LIMIT %(batch)s
FOR UPDATE OF q SKIP LOCKED"""

_EMBED_STORE = """
INSERT INTO item_embeddings (tenant_id, item_id, model, dim, embedding, embedded_at)
VALUES (%s, %s, %s, %s, CAST(%s AS vector), %s)
ON CONFLICT (tenant_id, item_id, model)
DO UPDATE SET dim = excluded.dim, embedding = excluded.embedding,
              embedded_at = excluded.embedded_at"""


def embed_batch(*, session: Session, tenant: str, batch: int) -> list[tuple[int, str, bool]]:
    """Up to ``batch`` queued items, locked: ``(item_id, text, gone)``."""
    raw = session.connection().connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    rows = raw.execute(EMBED_BATCH, {"tenant": tenant, "batch": batch}).fetchall()
    return [(int(r[0]), str(r[1] or ""), bool(r[2])) for r in rows]


def store_embeddings(
    *,
    session: Session,
    tenant: str,
    model: str,
    dim: int,
    rows: Sequence[tuple[int, str]],
    done: Sequence[int],
    at: Any,
) -> None:
    """Store ``(item_id, vector text)`` rows under ``model`` and take ``done`` off the queue."""
    raw = session.connection().connection.driver_connection
    assert isinstance(raw, psycopg.Connection)
    with raw.cursor() as cur:
        if rows:
            cur.executemany(_EMBED_STORE, [(tenant, i, model, dim, v, at) for i, v in rows])
        cur.execute(
            "DELETE FROM embed_queue WHERE tenant_id = %s AND item_id = ANY(%s)",
            (tenant, list(done)),
        )


def passages_to_embed(
    *,
    session: Session,
    tenant: str,
    model: str,
    passage_ids: Sequence[int] | None,
    batch: int,
) -> list[tuple[int, str]]:
    """Up to ``batch`` live passages (of ``passage_ids``; None: any) without a vector
    under ``model``: ``(id, heading path and text)``, oldest first."""
    only = "" if passage_ids is None else " AND p.id = ANY(:ids)"
    rows = session.execute(
        sa.text(
            "SELECT p.id, array_to_string(p.heading_path, ' / ') AS path, p.text "
            "FROM passages p WHERE p.tenant_id = :t AND p.withdrawn_at IS NULL"
            f"{only} AND NOT EXISTS (SELECT 1 FROM passage_embeddings e "
            "WHERE e.tenant_id = p.tenant_id AND e.passage_id = p.id AND e.model = :m) "
            "ORDER BY p.id LIMIT :n"
        ),
        {"t": tenant, "m": model, "ids": list(passage_ids or ()), "n": batch},
    ).all()
    return [(int(r.id), f"{r.path}\n{r.text}" if r.path else str(r.text)) for r in rows]


def store_passage_embeddings(
    *,
    session: Session,
    tenant: str,
    model: str,
    dim: int,
    rows: Sequence[tuple[int, str]],
    at: datetime,
) -> None:
    """Store ``(passage id, vector text)`` rows under ``model``."""
    if not rows:
        return
    session.execute(
        sa.text(
            "INSERT INTO passage_embeddings (tenant_id, passage_id, model, dim, embedding, "
            "embedded_at) SELECT :t, r.id, :m, :dim, CAST(r.v AS vector), :at "
            "FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r(id bigint, v text) "
            "ON CONFLICT (tenant_id, passage_id, model) DO NOTHING"
        ),
        {
            "t": tenant,
            "m": model,
            "dim": dim,
            "at": at,
            "rows": json.dumps([{"id": i, "v": v} for i, v in rows]),
        },
    )


def queue_depth(*, session: Session, tenant: str) -> int:
    """Items of ``tenant`` waiting for an embedding."""
    return int(
        session.execute(
            sa.text("SELECT count(*) FROM embed_queue WHERE tenant_id = :t"), {"t": tenant}
        ).scalar_one()
    )


def enqueue_missing(*, session: Session, tenant: str, model: str) -> int:
    """Queue every current, unredacted item of ``tenant`` without an embedding under
    ``model`` (a backfill after a model change); the number queued."""
    return int(
        session.execute(
            sa.text(
                "WITH n AS (INSERT INTO embed_queue (tenant_id, item_id, enqueued_at) "
                "SELECT i.tenant_id, i.id, now() FROM items i WHERE i.tenant_id = :t "
                "AND i.superseded_at IS NULL AND NOT EXISTS (SELECT 1 FROM item_embeddings e "
                "WHERE e.tenant_id = i.tenant_id AND e.item_id = i.id AND e.model = :m) "
                "AND NOT EXISTS (SELECT 1 FROM redactions x WHERE x.tenant_id = i.tenant_id "
                "AND x.item_id = i.id) ON CONFLICT DO NOTHING RETURNING 1) "
                "SELECT count(*) FROM n"
            ),
            {"t": tenant, "m": model},
        ).scalar_one()
    )


def live_ranked(*, session: Session, source: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """The top ``limit`` candidates of ``source`` that pass every gate, in rank order."""
    with _cursor(session) as cur:
        cur.execute(
            LIVE_RANKED[source, bool(params["query_entities"])],
            _live_params(params),
            prepare=_PREPARE[source],
        )
        return cur.fetchall()


def live_verdicts(*, session: Session, source: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Each reportable gate's verdict, with the item row, for the candidates of ``source``
    at walk positions up to ``walked``."""
    with _cursor(session) as cur:
        cur.execute(
            LIVE_VERDICTS[source, bool(params["query_entities"])],
            _live_params(params),
            prepare=_PREPARE[source],
        )
        return cur.fetchall()


#: The context guard's one read (model §4.4): per item, its row with the state it has
#: for a live read (a run-out TTL reads as expired), whether the caller may see it, and
#: recall's rule for it, spelled by the same fragments as ``LIVE_RANKED`` and
#: ``LIVE_VERDICTS``: ``released``, ``applies`` (every required condition TRUE, every
#: excluded one FALSE, on what is observed now, inline observations first),
#: ``valid`` (the validity window) and, for an item in verify_on_next_use, its check
#: (``check_passed``: applicability on observations made since the event). An item
#: that does not apply carries ``condition_values`` (``_condition_detail``).
GUARD = f"""
SELECT {ITEM_COLUMNS.replace("cur.state", "g.state")}, {_G_RELEASED} AS released,
       ({readable("i", caps="%(caps)s", admin="%(admin)s")}
        AND {private_visible("i", at=None, style="%")}) AS readable,
       (SELECT ms.principal FROM memory_sessions ms WHERE ms.tenant_id = i.tenant_id
        AND i.scope_axis = 'session' AND ms.session_id = i.scope_id
        ) AS session_owner,
       EXISTS (SELECT 1 FROM redactions x WHERE x.tenant_id = i.tenant_id
               AND x.item_id = i.id AND x.erasure_id IS NOT NULL) AS forgotten,
       ap.applies, {_G_VALIDITY} AS valid,
       CASE WHEN g.state = 'verify_on_next_use' AND ap.applies
         THEN {_applies("g.since")} END AS check_passed,
       CASE WHEN NOT ap.applies THEN {_condition_detail("i")} END AS condition_values
FROM items i JOIN item_states cur ON cur.tenant_id = i.tenant_id AND cur.item_id = i.id
  {_STATE_LATERALS}
  CROSS JOIN LATERAL (SELECT {_applies("NULL")} AS applies) ap
WHERE i.tenant_id = %(tenant)s AND i.id = ANY(CAST(%(ids)s AS bigint[])) AND i.kind <> 'block'"""


def guard_states(*, session: Session, params: dict[str, Any]) -> list[dict[str, Any]]:
    """``GUARD``: one row per item found, as a mapping (``record_from_mapping`` reads it)."""
    with _cursor(session) as cur:
        cur.execute(GUARD, _live_params(params))
        return cur.fetchall()


#: What a refresh pulls (``recall.needs``): each ``(subject, attribute)`` a condition of
#: an item this live recall could return names, and lacks an observation that counts.
#: The items are the request's subjects' (widened by topology) and its pinned ones the
#: caller may see (``_VISIBLE``), in a state recall admits (``_G_STATE``, a run-out
#: secondary TTL read as waiting), released, for the purpose, in their validity window:
#: every gate but applicability, which is what the pull decides. A condition's subject
#: is its ``@entity`` (canonical, as written) or the item's. Lacking: a declared
#: attribute (``%(declared)s``; an undeclared one cannot be stored) not given inline,
#: whose latest observation by ``%(at)s`` (``facts_current``; the history when that one
#: is later) is missing, older than its max_age, or, for an item waiting for its check,
#: older than the check's instant (``g.since``).
NEEDS = f"""
WITH cand AS MATERIALIZED (
  SELECT i.id FROM items i WHERE {_VISIBLE}
    AND i.subject = ANY(CAST(%(subjects)s AS text[]))
  UNION
  SELECT i.id FROM items i WHERE {_VISIBLE} AND i.id = ANY(CAST(%(ids)s AS bigint[]))
)
SELECT DISTINCT c.s AS subject, c.a AS attribute
FROM cand JOIN items i ON i.tenant_id = %(tenant)s AND i.id = cand.id
  JOIN item_states cur ON cur.tenant_id = i.tenant_id AND cur.item_id = i.id
  {_STATE_LATERALS}
  CROSS JOIN LATERAL (
    SELECT coalesce(x ->> 'e', i.subject) AS s, x ->> 'a' AS a
    FROM jsonb_array_elements(coalesce(i.conditions -> 'required', '[]')
                              || coalesce(i.conditions -> 'excluded', '[]')) x
    WHERE jsonb_typeof(x) = 'object') c
  CROSS JOIN LATERAL (
    SELECT CASE WHEN %(declared)s -> 'exact' ? c.a
                  THEN jsonb_build_array(%(declared)s -> 'exact' -> c.a)
                ELSE (SELECT jsonb_build_array(pt -> 1)
                      FROM jsonb_array_elements(%(declared)s -> 'patterns') pt
                      WHERE c.a ~ (pt ->> 0) LIMIT 1) END AS decl) d
WHERE {_WELL_FORMED.format(i="i")}
  AND {_G_RELEASED} AND {_G_STATE} AND {_G_PURPOSE} AND {_G_VALIDITY}
  AND c.a IS NOT NULL AND d.decl IS NOT NULL AND %(inline)s -> c.s -> c.a IS NULL
  AND NOT EXISTS (
    SELECT 1 FROM facts_current f
    CROSS JOIN LATERAL (
      SELECT CASE WHEN f.observed_at <= %(at)s AND f.recorded_at <= %(at)s THEN f.observed_at
             ELSE (SELECT max(h.observed_at) FROM facts h
                   WHERE h.tenant_id = f.tenant_id AND h.subject = f.subject
                     AND h.attribute = f.attribute AND h.observed_at <= %(at)s
                     AND h.recorded_at <= %(at)s) END AS o) p
    WHERE f.tenant_id = %(tenant)s AND f.subject = c.s AND f.attribute = c.a
      AND p.o IS NOT NULL
      AND (jsonb_typeof(d.decl -> 0) <> 'number' OR CAST(%(at)s AS timestamptz) - p.o
           <= make_interval(secs => CAST(d.decl ->> 0 AS float8)))
      AND (g.since IS NULL OR p.o >= g.since))
ORDER BY 1, 2"""


def needs(*, session: Session, params: dict[str, Any]) -> list[tuple[str, str]]:
    """``NEEDS``: the ``(subject, attribute)`` pairs, sorted. Prepared at once: planning
    it (5 ms) costs more than running it (1-2 ms), and its plan does not depend on the
    values (the subjects' items by their index)."""
    with _cursor(session) as cur:
        cur.execute(NEEDS, _live_params(params), prepare=True)
        return [(str(r["subject"]), str(r["attribute"])) for r in cur.fetchall()]


# --- belief diff and as-of history ---

#: The state of item ``i`` at ``{at}``: its transition audit row current then.
_STATE_AT = f"""LEFT JOIN LATERAL (
    SELECT t.to_state AS state, t.from_state, t.at, t.actor, t.reason FROM {TRANSITIONS} t
    WHERE t.tenant_id = i.tenant_id AND t.item_id = i.id AND t.at <= {{at}}
    ORDER BY t.at DESC, t.seq DESC LIMIT 1
) {{alias}} ON TRUE"""


def _gates_at(k: str) -> str:
    """Per-gate verdicts of item ``i`` at instant ``:t{k}`` outside any case, for the belief
    diff. ``admitted`` is the state part of ``activated_version``: ``active``,
    ``verify_on_next_use`` pending its check (run in Python, on the snapshot then), or
    a ``case`` or ``shadow`` item the private rule admits then (``private``: the caller's
    own agent lessons; the diff names no case and no session)."""
    return f"""
       (i.recorded_at <= :t{k}) AS g_recorded_{k},
       (i.superseded_at IS NULL OR i.superseded_at > :t{k}) AS g_current_{k},
       (s{k}.state IN ('active', 'verify_on_next_use')
        OR {admits_private("i", state=f"s{k}.state", at=f":t{k}", style=":")})
         IS TRUE AS g_admitted_{k},
       {admits_private("i", state=f"s{k}.state", at=f":t{k}", style=":")} AS g_private_{k},
       (i.kind <> 'skill' OR r{k}.release_state = 'released') IS TRUE AS g_released_{k},
       caveat_applies(i.conditions, CAST(:snapshot_{k} AS jsonb), i.subject) AS g_applicability_{k},
       (i.valid_from <= :t{k} AND (i.valid_to IS NULL OR i.valid_to > :t{k}))
         AS g_validity_window_{k},
       s{k}.state AS state_{k}, s{k}.at AS state_at_{k}, s{k}.from_state AS state_from_{k},
       s{k}.actor AS state_actor_{k}, s{k}.reason AS state_reason_{k},
       r{k}.release_state AS release_{k}, r{k}.at AS release_at_{k},
       r{k}.actor AS release_actor_{k}, r{k}.reason AS release_reason_{k}"""


# Every item the caller may see (tenant, capability, redaction: never mentioned otherwise;
# never a core block, which is packed, not recalled: docs/blocks.md) among the subjects,
# with the gates at both instants. Items admitted by their state at neither instant can
# be recallable at neither and are left out before any condition is evaluated; the rest
# are kept when a gate verdict differs or a check may decide.
_DIFF = f"""
SELECT * FROM (
SELECT {ITEM_COLUMNS},
       (cardinality(i.purposes) = 0 OR i.purposes @> ARRAY[CAST(:purpose AS text)])
         IS TRUE AS g_purpose,
       (SELECT n.id FROM items n WHERE n.tenant_id = i.tenant_id AND n.id = i.superseded_by
          AND {readable("n", caps=":capabilities", admin=":admin")}) AS visible_successor,
       {_gates_at("0")},
       {_gates_at("1")}
FROM {ITEMS}
{_STATE_AT.format(at=":t0", alias="s0")}
{_STATE_AT.format(at=":t1", alias="s1")}
{release_as_of(":t0", "r0")}
{release_as_of(":t1", "r1")}
WHERE i.tenant_id = :tenant
  AND {readable("i", caps=":capabilities", admin=":admin")}
  AND i.kind <> 'block'
  AND i.recorded_at <= :t1
  AND (CAST(:all_subjects AS boolean) OR i.subject = ANY(:subjects))
  AND (s0.state IN ('active', 'verify_on_next_use') OR s1.state IN ('active', 'verify_on_next_use')
       OR (i.scope_axis = 'agent'
           AND (s0.state IN ('case', 'shadow') OR s1.state IN ('case', 'shadow'))))
) d
WHERE g_purpose AND (
  state_0 = 'verify_on_next_use' OR state_1 = 'verify_on_next_use'
  OR (g_recorded_0 AND g_current_0 AND g_admitted_0 AND g_released_0 AND g_applicability_0
      AND g_validity_window_0)
     IS DISTINCT FROM
     (g_current_1 AND g_admitted_1 AND g_released_1 AND g_applicability_1
      AND g_validity_window_1)
)
ORDER BY id
"""


def diff_rows(*, session: Session, params: dict[str, Any]) -> Sequence[sa.Row[Any]]:
    """Items whose recallability may differ between ``:t0`` and ``:t1`` (``t0 <= t1``),
    with every gate's verdict at both instants and the history rows that set them."""
    return session.execute(
        sa.text(_DIFF),
        {
            **params,
            "snapshot_0": json.dumps(params["snapshot_0"]),
            "snapshot_1": json.dumps(params["snapshot_1"]),
        },
    ).all()


# --- knowledge passages (model §6 "Knowledge beside memory") -----------------------
#
# A passage passes the tenant gate (row-level security and ``%(tenant)s``), the
# capability gate (its acl, deny list and classification, as ``readable`` spells them
# for an item, less the item-keyed redactions: a redacted passage is withdrawn), and
# the purpose gate; as of ``%(at)s`` it was recorded and not yet withdrawn, and a
# redacted one never. Never the applicability gate: a passage states no conditions.
# ``recall._recall.admits_passage`` is the Python twin (tests/recall hold them to it).

#: A passage row ``p`` the caller may know exists at ``%(at)s``: gates 1-2 and time.
PASSAGE_VISIBLE = f"""p.tenant_id = %(tenant)s
  AND {acl_readable("p", caps="%(caps)s", admin="%(admin)s")}
  AND p.recorded_at <= %(at)s
  AND (p.withdrawn_at IS NULL OR p.withdrawn_at > %(at)s)
  AND p.withdrawn_reason IS DISTINCT FROM 'redacted'"""

#: The purpose gate of a passage ``p``: no purposes, or the request's among them.
PASSAGE_PURPOSE = (
    "(cardinality(p.purposes) = 0 OR p.purposes @> ARRAY[CAST(%(purpose)s AS text)]) IS TRUE"
)

#: The passages a recall ranks: the full-text channel (as the items' candidates: the
#: first ``%(cap)s`` passages the caller may see that a query term matches, scored by
#: ``ts_rank`` in the same scan, which stops at the cap; then those that pass the purpose
#: gate. Under row-level security the planner never reads the GIN index ``ix_passages_fts``
#: for the application role: ``@@`` is not leakproof) and the dense channel (the ``%(k)s``
#: nearest to the query vector under ``%(model)s``, over passages that pass every gate:
#: ``%(dense_ids)s`` with ``%(dense_scores)s`` when ``PASSAGES_DENSE_HNSW`` found them,
#: else (NULL) an exact scan here);
#: each channel ranks its own candidates and reciprocal rank fusion sums them with the
#: items' weights and ``k`` (``w / (rrf_k + rank)``). No boost: salience, recency,
#: verification, confidence and anchors are properties of items. The top ``%(limit)s``,
#: and with each row ``considered``: the passages either channel found (the full-text
#: channel's within its cap) that the caller may see (through the tenant and
#: capability gates, as of ``%(at)s``), before the purpose gate.
PASSAGES_RANKED = f"""
WITH q AS MATERIALIZED (
  SELECT CASE WHEN %(tsquery)s = '' THEN CAST('' AS tsquery)
         ELSE to_tsquery('english', %(tsquery)s) END AS query
), found AS MATERIALIZED (
  SELECT p.id, {PASSAGE_PURPOSE} AS purposed,
         CAST(ts_rank(p.fts, q.query, 1) AS float8) AS lexical
  FROM passages p, q
  WHERE %(tsquery)s <> '' AND p.fts @@ q.query AND {PASSAGE_VISIBLE}
  LIMIT %(cap)s
), lex AS MATERIALIZED (
  SELECT f.id, f.lexical FROM found f WHERE f.purposed
), den AS MATERIALIZED (
  SELECT d.id, d.dense
  FROM unnest(CAST(%(dense_ids)s AS bigint[]), CAST(%(dense_scores)s AS float8[]))
    AS d(id, dense)
  UNION ALL
  (SELECT e.passage_id AS id,
          CAST(1 - (e.embedding <=> CAST(%(qvec)s AS vector)) AS float8) AS dense
   FROM passage_embeddings e JOIN passages p
     ON p.tenant_id = e.tenant_id AND p.id = e.passage_id
   WHERE CAST(%(dense_ids)s AS bigint[]) IS NULL
     AND CAST(%(qvec)s AS text) IS NOT NULL AND e.tenant_id = %(tenant)s
     AND e.model = %(model)s AND {PASSAGE_VISIBLE} AND {PASSAGE_PURPOSE}
   ORDER BY e.embedding <=> CAST(%(qvec)s AS vector), e.passage_id LIMIT %(k)s)
), cand AS (
  SELECT coalesce(l.id, d.id) AS id, coalesce(l.lexical, 0) AS lexical, d.dense
  FROM lex l FULL JOIN den d ON d.id = l.id
), ranked AS (
  SELECT c.*, rank() OVER (ORDER BY lexical DESC) AS lexical_rank,
         rank() OVER (ORDER BY dense DESC NULLS LAST) AS dense_rank
  FROM cand c
), scored AS (
  SELECT r.*,
         CASE WHEN lexical > 0 THEN %(w_lexical)s / (%(rrf_k)s + lexical_rank) ELSE 0 END
         + CASE WHEN dense IS NOT NULL THEN %(w_dense)s / (%(rrf_k)s + dense_rank) ELSE 0 END
           AS score
  FROM ranked r
), considered AS (
  SELECT (SELECT count(*) FROM found)
         + (SELECT count(*) FROM den d WHERE NOT EXISTS (SELECT 1 FROM found f
                                                         WHERE f.id = d.id)) AS n
)
SELECT s.id, s.score, s.lexical, s.lexical_rank, s.dense, s.dense_rank,
       p.document_id, p.document_version, p.heading_path, p.fragment, p.text,
       p.recorded_at, d.uri, d.title, (SELECT n FROM considered) AS considered
FROM (SELECT * FROM scored ORDER BY score DESC, id LIMIT %(limit)s) s
JOIN passages p ON p.tenant_id = %(tenant)s AND p.id = s.id
LEFT JOIN documents d ON d.tenant_id = p.tenant_id AND d.id = p.document_id
  AND d.version = p.document_version
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       (SELECT n FROM considered)
ORDER BY 2 DESC NULLS LAST, 1"""


#: The passages' dense channel by the HNSW index (``dim = 384``): the ``%(wide)s``
#: nearest of the tenant's passages under ``%(model)s`` from the index alone (a scan the
#: planner cannot turn into reading every passage first, as it does when the gates sit
#: in the same scan), then those that pass every gate, the ``%(k)s`` nearest of them with
#: their similarity. None while the tenant has at most ``%(cutover)s`` passages embedded
#: under the model (an exact scan is then as cheap, and exact); fewer than ``%(k)s``
#: when the gates pass too few of the ``%(wide)s``, and the caller then scans exactly.
PASSAGES_DENSE_HNSW = f"""
WITH near AS MATERIALIZED (
  SELECT e.passage_id AS id,
         CAST(e.embedding AS vector(384)) <=> CAST(%(qvec)s AS vector(384)) AS d
  FROM passage_embeddings e
  WHERE (SELECT count(*) FROM (SELECT 1 FROM passage_embeddings c
          WHERE c.tenant_id = %(tenant)s AND c.model = %(model)s
          LIMIT %(cutover)s + 1) x) > %(cutover)s
    AND e.dim = 384 AND e.tenant_id = %(tenant)s AND e.model = %(model)s
  ORDER BY CAST(e.embedding AS vector(384)) <=> CAST(%(qvec)s AS vector(384))
  LIMIT %(wide)s)
SELECT n.id, CAST(1 - n.d AS float8) AS dense
FROM near n JOIN passages p ON p.tenant_id = %(tenant)s AND p.id = n.id
WHERE {PASSAGE_VISIBLE} AND {PASSAGE_PURPOSE}
ORDER BY n.d, n.id
LIMIT %(k)s"""


def passages_dense_hnsw(*, session: Session, params: dict[str, Any]) -> list[tuple[int, float]]:
    """``PASSAGES_DENSE_HNSW``: ``(passage id, similarity)`` nearest first; empty at or
    under the cut-over."""
    with _cursor(session) as cur:
        cur.execute(PASSAGES_DENSE_HNSW, params)
        return [(int(r["id"]), float(r["dense"])) for r in cur.fetchall()]


def passages_ranked(
    *, session: Session, params: dict[str, Any]
) -> tuple[list[dict[str, Any]], int]:
    """``PASSAGES_RANKED``: the top ``limit`` passages that pass their gates, in rank
    order, and how many the caller may see that the channels considered."""
    with _cursor(session) as cur:
        cur.execute(PASSAGES_RANKED, params)
        rows = cur.fetchall()
    considered = int(rows[-1]["considered"]) if rows else 0
    return [r for r in rows if r["id"] is not None], considered


#: The items the caller may see (``_VISIBLE``: gates 1-2, redaction, current rows,
#: another principal's working memory hidden) that cite each passage ref of
#: ``%(refs)s`` as evidence: a passage's link back to the items (model §6), through
#: ``item_passage_refs`` (migration 0028: text equality on its key, an index scan under
#: row-level security, where ``items.evidence @> ...`` would scan every item).
PASSAGES_CITED_BY = f"""
SELECT c.ref, i.id FROM item_passage_refs c
JOIN items i ON i.tenant_id = %(tenant)s AND i.id = c.item_id
WHERE c.tenant_id = %(tenant)s AND c.ref = ANY(CAST(%(refs)s AS text[])) AND {_VISIBLE}
ORDER BY c.ref, i.id"""


def passages_cited_by(*, session: Session, params: dict[str, Any]) -> dict[str, list[int]]:
    """``PASSAGES_CITED_BY``: per ref, the ids of the visible items citing it."""
    out: dict[str, list[int]] = {}
    with _cursor(session) as cur:
        cur.execute(PASSAGES_CITED_BY, params)
        for row in cur.fetchall():
            out.setdefault(row["ref"], []).append(int(row["id"]))
    return out
