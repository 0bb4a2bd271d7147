"""Schemathesis hooks for tests/caveat/test_http_schemathesis.py (``SCHEMATHESIS_HOOKS``).

Two parts:

- **Aim**: half of the generated item ids (in paths, and in the bodies of the context
  guard and of record-use) become ids of the seeded world, and half of the recalls
  ask the seeded world's question about its subject, so the fuzzer's
  revocations, refutations, redactions, verifications and recalls meet real items
  (a random id or query meets nothing, and a check on nothing proves nothing).
- **The check** ``no_withdrawn_item_served_as_current``: every item that a current
  read serves as usable (``GET /v1/recall`` without ``as_of``: its items and pinned
  items; ``POST /v1/context/check``: ``usable``; ``POST /v1/record-use``: ``used``)
  must be, in the database at that moment, neither revoked, refuted, superseded,
  archived, awaiting re-verification nor redacted; ``GET /v1/items/{id}`` must state
  the item's state as the database holds it. The database is read as its owner
  (``CAVEAT_ST_DSN``), beside the server, after the response: schemathesis sends one
  request at a time, so nothing moves in between.

The seeded ids come in ``CAVEAT_ST_ITEMS``, the question in ``CAVEAT_ST_QUERY`` and
``CAVEAT_ST_SUBJECT``; every item the check looked at is appended to
``CAVEAT_ST_LOG`` (one line: route, item id, state), so the test can show the check
met withdrawn items and served ones.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg
import schemathesis
from hypothesis import strategies as st

#: states in which an item may never be served as current (model §4)
WITHDRAWN = frozenset({"revoked", "refuted", "superseded", "archived", "needs_reverification"})

_STATES = """
SELECT i.id, s.state, i.superseded_at IS NOT NULL,
       EXISTS (SELECT 1 FROM redactions r WHERE r.tenant_id = i.tenant_id AND r.item_id = i.id)
  FROM items i JOIN item_states s ON s.tenant_id = i.tenant_id AND s.item_id = i.id
 WHERE i.id = ANY(%s)
"""


def _seeded() -> list[int]:
    return [int(x) for x in os.environ.get("CAVEAT_ST_ITEMS", "").split(",") if x]


def _route(ctx: Any) -> str:
    op = ctx.operation
    return "" if op is None else f"{op.method.upper()} {op.path}"


@schemathesis.hook
def flatmap_path_parameters(ctx: Any, params: Any) -> Any:
    if not isinstance(params, dict) or "item_id" not in params or not _seeded():
        return st.just(params)
    return st.one_of(
        st.just(params), st.sampled_from([{**params, "item_id": i} for i in _seeded()])
    )


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: Any) -> None:
    """The run's own token is never the one a ``DELETE /v1/tokens/{token_id}`` revokes
    (the typed answers let the fuzzer follow ``GET /v1/tokens`` to real ids): a spare
    admin token (``CAVEAT_ST_SPARE_TOKEN``) is revoked instead, and the run goes on."""
    own, spare = os.environ.get("CAVEAT_ST_OWN_TOKEN"), os.environ.get("CAVEAT_ST_SPARE_TOKEN")
    params = case.path_parameters
    if own and spare and isinstance(params, dict) and params.get("token_id") == own:
        case.path_parameters = {**params, "token_id": spare}


@schemathesis.hook
def flatmap_query(ctx: Any, query: Any) -> Any:
    if _route(ctx) != "GET /v1/recall" or not isinstance(query, dict):
        return st.just(query)
    asked = {
        **query,
        "query": os.environ.get("CAVEAT_ST_QUERY", ""),
        "subject": os.environ.get("CAVEAT_ST_SUBJECT", ""),
    }
    # a live recall, unless as_of is the case's one violation (a negative case mutates
    # it): dropping it then would send a valid request the check expects refused
    if asked.get("as_of") is None or isinstance(asked["as_of"], str):
        asked.pop("as_of", None)
    return st.one_of(st.just(query), st.just(asked))


@schemathesis.hook
def flatmap_body(ctx: Any, body: Any) -> Any:
    field = {"POST /v1/context/check": "items", "POST /v1/record-use": "used"}.get(_route(ctx))
    if field is None or not isinstance(body, dict) or not _seeded():
        return st.just(body)
    return st.one_of(
        st.just(body),
        st.lists(st.sampled_from(_seeded()), min_size=1, unique=True).map(
            lambda ids: {**body, field: ids}
        ),
    )


def served_as_current(route: str, query: Any, body: Any) -> list[int] | None:
    """The ids a response serves as usable now, or ``None`` when the route serves none
    as current (an ``as_of`` recall answers for the past, where a withdrawn item was
    still current)."""
    if not isinstance(body, dict):
        return None
    if route == "GET /v1/recall":
        if isinstance(query, dict) and query.get("as_of"):
            return None
        rows = list(body.get("items", [])) + list(body.get("pinned", []))
        return [int(r["item"]["id"]) for r in rows]
    if route == "POST /v1/context/check":
        return [int(i) for i in body.get("usable", [])]
    if route == "POST /v1/record-use":
        return [int(i) for i in body.get("used", [])]
    return None


def withdrawn_served(dsn: str, ids: list[int]) -> dict[int, str]:
    """Of ``ids``, those the database holds as withdrawn, with why."""
    if not ids:
        return {}
    bad: dict[int, str] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for item_id, state, superseded, redacted in conn.execute(_STATES, (ids,)):
            if state in WITHDRAWN or superseded or redacted:
                bad[item_id] = "redacted" if redacted else state
    return bad


def _log(lines: list[str]) -> None:
    path = os.environ.get("CAVEAT_ST_LOG")
    if path and lines:
        with open(path, "a", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in lines))


@schemathesis.check
def no_withdrawn_item_served_as_current(ctx: Any, response: Any, case: Any) -> bool | None:
    """No revoked, refuted, superseded, archived, re-opened or redacted item is served
    as current; an item read states the state the database holds."""
    if not 200 <= response.status_code < 300:
        return None
    dsn = os.environ["CAVEAT_ST_DSN"]
    route = f"{case.operation.method.upper()} {case.operation.path}"
    try:
        body = response.json()
    except ValueError:
        return None
    if route == "GET /v1/items/{item_id}" and isinstance(body, dict) and "state" in body:
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT state FROM item_states WHERE item_id = %s", (int(body["id"]),)
            ).fetchone()
        held = None if row is None else row[0]
        _log([f"{route}\t{body['id']}\t{held}"])
        if body["state"] != held:
            raise AssertionError(f"item {body['id']} served as {body['state']!r}; held {held!r}")
        return None
    ids = served_as_current(route, case.query, body)
    if ids is None:
        return None
    bad = withdrawn_served(dsn, ids)
    _log([f"{route}\t{i}\t{bad.get(i, 'served')}" for i in ids])
    if bad:
        raise AssertionError(f"{route} served withdrawn items as current: {bad}")
    return None
