"""The HTTP API over real HTTP on loopback, as the application's login role.

A uvicorn server runs in a thread on 127.0.0.1 (an ephemeral port) over a runtime
whose engine logs in as ``caveat_app``; clients are plain httpx clients with bearer
tokens made by the application layer, as ``caveat token create`` makes them.
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import httpx
import pytest
import uvicorn

from caveat import app as use
from caveat import db
from caveat.api import create_app
from caveat.api._index import prefers_html
from caveat.settings import Settings
from tests.caveat._doors import QUERY, precedent, world
from tests.conftest import ADMIN


@dataclass
class Server:
    base: str
    agent: str
    sme: str
    other_tenant: str
    rt: use.Runtime


@contextmanager
def serving(
    db_url: str,
    *,
    background: float | None = None,
    embedder: object = None,
    settings: Settings | None = None,
) -> Iterator[Server]:
    """A uvicorn server on loopback over a runtime logged in as caveat_app."""
    engine = db.make_app_engine(db_url)
    rt = use.Runtime.over(engine, "acme", embedder=embedder, settings=settings)  # type: ignore[arg-type]
    try:
        world(rt)
        world(rt.for_tenant("globex"))
        agent = use.create_token(rt, ADMIN, "agent-ir", role="agent", capabilities=[]).token
        sme = use.create_token(rt, ADMIN, "sme-alice", role="sme").token
        other = use.create_token(rt.for_tenant("globex"), ADMIN, "agent-g", role="agent").token
        with loopback(create_app(rt, background=background)) as base:
            yield Server(base, agent, sme, other, rt)
    finally:
        engine.dispose()


@contextmanager
def loopback(app: Any) -> Iterator[str]:
    """uvicorn serving ``app`` in a thread on 127.0.0.1 (an ephemeral port); its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{srv.servers[0].sockets[0].getsockname()[1]}"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def server(db_url: str) -> Iterator[Server]:
    with serving(db_url) as s:
        yield s


def client(s: Server, token: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=s.base, headers=headers, timeout=30)


def _item(s: Server) -> int:
    """An active precedent in acme, written through the layer."""
    return precedent(s.rt)


def test_healthz_and_the_openapi_document(server: Server) -> None:
    with client(server, None) as c:
        assert c.get("/healthz").json() == {"status": "ok", "worker": os.getpid()}
        paths = c.get("/openapi.json").json()["paths"]
    assert {"/v1/recall", "/v1/record-use", "/v1/context/check", "/v1/cases"} <= set(paths)


BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8"


def test_the_root_sends_a_browser_to_the_sme_pages(server: Server) -> None:
    with client(server, None) as c:
        r = c.get("/", headers={"Accept": BROWSER})
        assert r.status_code == 307
        assert r.headers["location"] == "/ui/"
        assert "accept" in r.headers["vary"].lower()
        page = c.get("/", headers={"Accept": BROWSER}, follow_redirects=True)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert str(page.url).startswith(f"{server.base}/ui/")


@pytest.mark.parametrize("accept", [None, "*/*", "application/json", "text/html;q=0.5, */*"])
def test_the_root_gives_an_api_client_an_index_whose_links_answer(
    server: Server, accept: str | None
) -> None:
    with client(server, None) as c:
        headers = {"Accept": accept} if accept else {}
        if accept is None:
            c.headers.pop("Accept", None)
        r = c.get("/", headers=headers)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("application/json")
        index = r.json()
        assert index["service"] == "caveat"
        assert index["version"] == metadata.version("caveat")
        links = index["links"]
        assert links["openapi"] == "/openapi.json" and links["docs"] == "/docs"
        assert (links["mcp"], links["ui"], links["metrics"]) == ("/mcp", "/ui/", "/metrics")
        paths = c.get(links["openapi"]).json()["paths"]
        assert links["v1"] == sorted(p for p in paths if p.startswith("/v1/"))
        assert "/v1/recall" in links["v1"]
        assert "/" in paths  # the index is part of the API's schema
        for name in ("docs", "ui", "metrics", "healthz"):
            assert c.get(links[name], follow_redirects=True).status_code == 200, name
        # the MCP endpoint is there (it refuses a bare GET without a token, not a 404)
        assert c.get(links["mcp"]).status_code != 404


def test_the_favicon_is_an_icon(server: Server) -> None:
    with client(server, None) as c:
        r = c.get("/favicon.ico")
    assert r.status_code == 200
    assert r.headers["content-type"] == "image/x-icon"
    assert r.content[:4] == b"\x00\x00\x01\x00"  # an ICO file's header
    assert 0 < len(r.content) < 4096


@pytest.mark.parametrize(
    ("accept", "html"),
    [
        (BROWSER, True),
        ("text/html", True),
        ("application/xhtml+xml, application/json;q=0.5", True),
        ("*/*", False),
        ("application/json", False),
        ("application/json, text/html", False),  # equal: JSON
        ("text/html;q=0.4, application/json;q=0.9", False),
        ("text/*, application/json;q=0.2", True),
        ("text/html;q=0", False),
        ("text/html;q=nonsense, */*;q=0.1", False),
        ("", False),
        (None, False),
    ],
)
def test_which_accept_headers_prefer_html(accept: str | None, html: bool) -> None:
    assert prefers_html(accept) is html


def test_an_agent_loop_over_http(server: Server) -> None:
    item_id = _item(server)
    with client(server, server.agent) as c:
        opened = c.post("/v1/cases", json={"id": "INC-2", "subjects": ["payment-api"]})
        assert opened.status_code == 201, opened.text
        seen = c.post(
            "/v1/observations",
            json={
                "observations": [
                    {
                        "subject": "payment-api",
                        "attribute": "config.connection_pool.max",
                        "value": 20,
                    }
                ]
            },
        )
        assert seen.status_code == 201, seen.text
        found = c.get("/v1/recall", params={"query": QUERY, "subject": "payment-api"})
        assert found.status_code == 200, found.text
        body = found.json()
        assert [r["item"]["id"] for r in body["items"]] == [item_id]
        assert "acl" not in body["items"][0]["item"]
        used = c.post(
            "/v1/record-use",
            json={"query": QUERY, "subjects": ["payment-api"], "case": "INC-2", "used": [item_id]},
        )
        assert used.json() == {"used": [item_id], "refused": {}}
        cited = c.post(f"/v1/items/{item_id}/cite", json={"case": "INC-2", "influence": "decisive"})
        assert cited.status_code == 200, cited.text
        guard = c.post("/v1/context/check", json={"items": [item_id], "case": "INC-2"})
        assert guard.json()["usable"] == [item_id]
        # by recall's rule: an inline observation that makes a condition FALSE drops it
        fifty = {"subject": "payment-api", "attribute": "config.connection_pool.max", "value": 50}
        guard = c.post(
            "/v1/context/check",
            json={"items": [item_id], "case": "INC-2", "observations": [fifty]},
        )
        assert guard.status_code == 200, guard.text
        assert guard.json()["dropped"] == {str(item_id): "applicability"}
        [pool] = [
            v
            for v in guard.json()["conditions"][str(item_id)]
            if v["attribute"] == "config.connection_pool.max"
        ]
        assert pool["value"] == "FALSE" and pool["observed"]["inline"] is True
        assert use.item(server.rt, ADMIN, item_id).state == "active"  # its state is unchanged
        use.revoke(server.rt, ADMIN, item_id, reason="wrong pool")
        guard = c.post("/v1/context/check", json={"items": [item_id], "case": "INC-2"})
        assert guard.json()["usable"] == [] and str(item_id) in guard.json()["dropped"]
        closed = c.post("/v1/cases/INC-2/close", json={"outcome": "confirmed"})
        assert closed.json()["status"] == "closed"


def test_a_recall_is_a_read(server: Server) -> None:
    item_id = _item(server)
    with client(server, server.agent) as c:
        c.get("/v1/recall", params={"query": QUERY, "subject": "payment-api", "case": "INC-1"})
    with server.rt.transaction() as s:
        used = s.connection().exec_driver_sql("SELECT count(*) FROM item_usage").scalar()
    assert used == 0 and item_id > 0


@pytest.mark.parametrize(
    ("token", "status", "code"),
    [
        (None, 401, "unauthenticated"),
        ("cvt1.bm9wZQ.123.456", 401, "unauthenticated"),
        ("not-a-token", 401, "unauthenticated"),
    ],
)
def test_no_token_no_answer(server: Server, token: str | None, status: int, code: str) -> None:
    with client(server, token) as c:
        res = c.get("/v1/recall", params={"query": QUERY})
    assert res.status_code == status
    assert res.headers["content-type"].startswith("application/problem+json")
    assert res.json()["code"] == code and res.headers["www-authenticate"] == "Bearer"


def test_refusals_are_problem_details_with_their_code(server: Server) -> None:
    with client(server, server.agent) as c:
        missing = c.post("/v1/cases/INC-404/close", json={"outcome": "confirmed"})
        assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
        malformed = c.post("/v1/cases", json={"id": "INC-3", "surprise": 1})
        assert (malformed.status_code, malformed.json()["code"]) == (422, "invalid_input")
        assert "surprise" in malformed.json()["detail"]
        bad_value = c.post(
            "/v1/observations",
            json={
                "observations": [
                    {
                        "subject": "payment-api",
                        "attribute": "config.connection_pool.max",
                        "value": "x",
                    }
                ]
            },
        )
        assert (bad_value.status_code, bad_value.json()["code"]) == (422, "fact_type_mismatch")
        nul = c.post("/v1/cases", json={"id": "INC-\u00005"})
        assert nul.status_code == 422 and nul.json()["code"] == "text_invalid", nul.text
        limit = c.get("/v1/recall", params={"query": QUERY, "limit": 0})
        assert limit.status_code == 422
        # a body that is not JSON: where it breaks, as a character position (a list
        # body's items[N] would name an item that does not exist)
        for path in ("/v1/items", "/v1/cases"):
            cut = c.post(path, content=b'{"text":', headers={"content-type": "application/json"})
            assert (cut.status_code, cut.json()["code"]) == (422, "invalid_input"), path
            assert cut.json()["detail"] == "body: not JSON at character 8: Expecting value"


def test_no_token_reaches_another_tenant(server: Server) -> None:
    item_id = _item(server)
    with client(server, server.other_tenant) as c:
        res = c.get("/v1/recall", params={"query": QUERY})
        assert res.status_code == 200 and res.json()["items"] == []
        cite = c.post(f"/v1/items/{item_id}/cite", json={"case": "INC-1", "influence": "decisive"})
        assert (cite.status_code, cite.json()["code"]) == (404, "not_found")


ITEM = {
    "kind": "episode",
    "subject": "payment_api",
    "attribute": "restart_restored_service_at",
    "object": "E-1",
    "required": ["config.connection_pool.max eq 20"],
    "evidence": ["E-1"],
    "scope": {"axis": "case", "id": "INC-5"},
    "text": "Payment API pool exhausted; restart restored it.",
}


def test_an_sme_review_over_http_and_an_agent_refused(server: Server) -> None:
    with client(server, server.agent) as agent, client(server, server.sme) as sme:
        assert agent.post("/v1/cases", json={"id": "INC-5"}).status_code == 201
        [out] = agent.post("/v1/items", json=[ITEM]).json()
        assert out["outcome"] == "accepted", out
        item_id = out["item_id"]
        [dup] = agent.post("/v1/items", json=[ITEM]).json()
        assert dup["outcome"] == "duplicate"
        [bad] = agent.post("/v1/items", json=[{**ITEM, "subject": "nobody"}]).json()
        assert (bad["outcome"], bad["code"], bad["gate"]) == (
            "rejected",
            "subject_unresolved",
            "G1",
        )
        refused = agent.post(f"/v1/items/{item_id}/verify")
        assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")
        assert sme.post(f"/v1/items/{item_id}/verify").json()["verified_by"] == "sme-alice"
        assert sme.post(f"/v1/items/{item_id}/promote", json={"to": "shadow"}).json()["state"] == (
            "shadow"
        )
        assert sme.post(f"/v1/items/{item_id}/graduate", json={}).json()["state"] == "active"
        illegal = sme.post(f"/v1/items/{item_id}/promote", json={"to": "shadow"})
        assert (illegal.status_code, illegal.json()["code"]) == (409, "illegal_transition")
        shown = agent.get(f"/v1/items/{item_id}").json()
        assert shown["state"] == "active" and "acl" not in shown and "tenant_id" not in shown
        deploy = {
            "specversion": "1.0",
            "id": "d-1",
            "source": "ci",
            "type": "deploy",
            "subject": "payment-api",
            "data": {"changes": {"config.connection_pool.max": 100}},
        }
        [event] = agent.post("/v1/events", json=deploy).json()["events"]
        assert event["needs_reverification"] == [item_id]
        revoked = sme.post(f"/v1/items/{item_id}/revoke", json={"reason": "wrong"}).json()
        assert revoked["item"]["state"] == "revoked"
        lineage = agent.get(f"/v1/items/{item_id}/lineage").json()
        assert lineage["item"]["state"] == "revoked"
        assert sme.post("/v1/audit/verify").json()["ok"] is True


def test_lists_are_paginated_by_cursor(server: Server) -> None:
    admin = use.create_token(server.rt, ADMIN, "ops", role="admin").token
    with client(server, admin) as c:
        for n in range(5):
            c.post("/v1/tokens", json={"principal": f"bot-{n}", "role": "agent"})
        seen: list[str] = []
        cursor = None
        while True:
            params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = c.get("/v1/tokens", params=params).json()
            assert len(page["items"]) <= 2
            seen += [t["id"] for t in page["items"]]
            cursor = page["next"]
            if cursor is None:
                break
        every = c.get("/v1/tokens", params={"limit": 500}).json()["items"]
        assert seen == [t["id"] for t in every] and len(seen) == 8  # 3 made by the fixture
        assert all("token" not in t for t in every)
        bad = c.get("/v1/tokens", params={"cursor": "garbage!"})
        assert (bad.status_code, bad.json()["code"]) == (422, "invalid_input")
        audit = c.get("/v1/audit", params={"limit": 3}).json()
        assert len(audit["items"]) == 3 and audit["next"] is not None
    with client(server, server.agent) as c:
        refused = c.get("/v1/tokens")
        assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")


def _pages(c: httpx.Client, params: dict[str, object], between: object = None) -> list[int]:
    """Every row's seq, following ``next`` from the first page to the last."""
    seen: list[int] = []
    cursor = None
    while True:
        page = c.get("/v1/audit", params={**params, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["items"]) <= int(str(params["limit"]))
        seen += [r["seq"] for r in body["items"]]
        cursor = body["next"]
        if cursor is None:
            return seen
        if callable(between):
            between()


def test_the_audit_list_pages_by_keyset_cursor(server: Server) -> None:
    admin = use.create_token(server.rt, ADMIN, "ops", role="admin").token
    with client(server, admin) as c:
        for n in range(6):
            assert c.post("/v1/tokens", json={"principal": f"bot-{n}", "role": "agent"}).is_success
        every = [r.seq for r in use.audit_entries(server.rt, ADMIN)]
        assert len(every) > 7
        assert _pages(c, {"limit": 3}) == every  # each row once, in chain order
        made = [r.seq for r in use.audit_entries(server.rt, ADMIN, action="token_create")]
        assert 6 <= len(made) < len(every)
        assert _pages(c, {"limit": 2, "action": "token_create"}) == made
        # rows appended while a client pages through arrive once, at the end
        grown = _pages(c, {"limit": 4}, lambda: c.post("/v1/evidence", json={"id": "E-x"}))
        after = [r.seq for r in use.audit_entries(server.rt, ADMIN)]
        assert grown == after and len(after) > len(every)
        first = c.get("/v1/audit", params={"limit": 2, "action": "token_create"}).json()
        forged = [
            "garbage!",
            base64.urlsafe_b64encode(b'{"audit":1,"f":"0000000000000000"}').decode(),
            base64.urlsafe_b64encode(b'{"after":2}').decode(),  # a cut list's cursor
            c.get("/v1/tokens", params={"limit": 1}).json()["next"],
        ]
        for cursor in forged:
            bad = c.get("/v1/audit", params={"limit": 2, "cursor": cursor})
            assert (bad.status_code, bad.json()["code"]) == (422, "invalid_input"), cursor
        # a cursor is for the filters it was given with
        other = c.get("/v1/audit", params={"limit": 2, "cursor": first["next"]})
        assert (other.status_code, other.json()["code"]) == (422, "invalid_input")
        same = c.get(
            "/v1/audit", params={"limit": 2, "action": "token_create", "cursor": first["next"]}
        )
        assert [r["seq"] for r in same.json()["items"]] == made[2:4]


def test_the_server_embeds_and_sweeps_in_the_background_and_exposes_metrics(
    db_url: str,
) -> None:
    import recall

    with serving(db_url, background=0.2, embedder=recall.HashingEmbedder()) as s:  # noqa: SIM117 (the clients need s)
        with client(s, s.agent) as agent, client(s, None) as anon:
            assert agent.post("/v1/cases", json={"id": "INC-5"}).status_code == 201
            [out] = agent.post("/v1/items", json=[ITEM]).json()
            assert out["outcome"] == "accepted"
            deadline = time.monotonic() + 15
            while s.rt.queue_depth() > 0:  # the write queued it; the server embeds it
                assert time.monotonic() < deadline, "the background drain never ran"
                time.sleep(0.1)
            agent.get("/v1/recall", params={"query": QUERY})
            agent.post(f"/v1/items/{out['item_id']}/verify")  # an agent: forbidden
            agent.post("/v1/items", json=[{**ITEM, "subject": "nobody"}])
            text = anon.get("/metrics").text
    assert "caveat_recall_seconds_count 1.0" in text
    assert 'caveat_refusals_total{code="forbidden"} 1.0' in text
    assert 'caveat_refusals_total{code="subject_unresolved"} 1.0' in text
    assert 'caveat_embed_queue_depth{tenant="acme"} 0.0' in text


def test_an_smes_other_actions_over_http(server: Server) -> None:
    """Drop, refute, redact and the sweep, each as the SME, each refused to the agent."""
    from tests.caveat._review_world import review_world

    w = review_world(server.rt)
    with client(server, server.sme) as sme, client(server, server.agent) as agent:
        for path, body in (
            (f"/v1/items/{w.child}/drop", {"reason": "one case is not enough"}),
            (f"/v1/items/{w.candidates[0]}/refute", {"reason": "the retry storm was a symptom"}),
            (f"/v1/items/{w.candidates[1]}/redact", {"reason": "pasted a customer's name"}),
            ("/v1/sweep", None),
        ):
            refused = agent.post(path, json=body)
            assert (refused.status_code, refused.json()["code"]) == (403, "forbidden"), path
            assert sme.post(path, json=body).status_code == 200, path
        assert sme.get(f"/v1/items/{w.child}").json()["state"] == "case"
        assert sme.get(f"/v1/items/{w.candidates[0]}").json()["state"] == "refuted"
        assert sme.get(f"/v1/items/{w.candidates[1]}").status_code == 404  # hidden everywhere
        assert sme.post("/v1/sweep").json() == {"archived": [], "expired": [], "working_memory": []}


def test_get_recall_refuses_a_parameter_it_does_not_take(server: Server) -> None:
    """A client spelling a field as the body names it (``anchors`` for ``anchor``) is
    told so, not answered as if it had not asked."""
    with client(server, server.agent) as c:
        res = c.get("/v1/recall", params={"query": QUERY, "anchors": "case:INC-1"})
    assert res.status_code == 422, res.text
    assert res.json()["code"] == "invalid_input"
    detail = res.json()["detail"]
    assert detail.startswith("anchors: not a parameter (anchor, anchors_mode, as_of, ")


def test_post_recall_is_the_same_read_with_a_body(server: Server) -> None:
    """Every field of the recall request at HTTP: the GET's query (inline observations
    as SUBJECT:ATTRIBUTE=VALUE, anchors as AXIS:ID, pinned ids) and the POST's body give
    the same answer, and record nothing."""
    item_id = _item(server)
    pool = "payment-api:config.connection_pool.max=20"
    seen = {"subject": "payment-api", "attribute": "config.connection_pool.max", "value": 20}
    with client(server, server.agent) as c:
        got = c.get(
            "/v1/recall",
            params={"query": QUERY, "observe": pool, "anchor": "case:INC-1", "pin": item_id},
        )
        posted = c.post(
            "/v1/recall",
            json={
                "query": QUERY,
                "observations": [seen],
                "anchors": ["case:INC-1", {"axis": "service", "id": "payment-api"}],
                "pinned": [item_id],
            },
        )
        blind = c.post("/v1/recall", json={"query": QUERY})  # nothing observed: UNKNOWN
        high = c.get("/v1/recall", params={"query": QUERY, "observe": pool, "min_confidence": 1})
        bad = c.post("/v1/recall", json={"query": QUERY, "limit": 0})
    assert got.status_code == posted.status_code == 200, (got.text, posted.text)
    assert [r["item"]["id"] for r in got.json()["pinned"]] == [item_id]
    assert [r["item"]["id"] for r in posted.json()["pinned"]] == [item_id]
    assert blind.json()["items"] == [] and blind.json()["pinned"] == []
    assert high.status_code == 200 and high.json()["items"] == []
    assert (bad.status_code, bad.json()["code"]) == (422, "invalid_input")
    assert bad.json()["detail"].startswith("limit: Input should be greater than")
    with server.rt.transaction() as tx:
        assert tx.connection().exec_driver_sql("SELECT count(*) FROM item_usage").scalar() == 0


def test_an_unknown_case_is_not_found_at_recall_use_and_the_context_check(
    server: Server,
) -> None:
    item_id = _item(server)
    ask = {"query": QUERY, "case": "INC-404"}
    with client(server, server.agent) as c:
        answers = [
            c.get("/v1/recall", params=ask),
            c.post("/v1/recall", json=ask),
            c.post("/v1/record-use", json={**ask, "used": [item_id]}),
            c.post("/v1/context/check", json={"items": [item_id], "case": "INC-404"}),
        ]
        seen = {"subject": "payment-api", "attribute": "config.connection_pool.max", "value": 20}
        known = c.post(
            "/v1/context/check",
            json={"items": [item_id], "case": "INC-1", "observations": [seen]},
        )
    for res in answers:
        assert res.status_code == 404, res.text
        assert res.json()["code"] == "not_found"
        assert res.json()["detail"] == "no case 'INC-404'"
    assert known.status_code == 200 and known.json()["usable"] == [item_id]
    with server.rt.transaction() as tx:  # nothing recorded for the unknown case
        assert tx.connection().exec_driver_sql("SELECT count(*) FROM item_usage").scalar() == 0


def test_a_proposal_off_the_schema_refuses_the_request(server: Server) -> None:
    """The proposals' body is the strict proposal schema: one that does not match it
    is invalid_input naming its index and field, and nothing is proposed."""
    use.open_case(server.rt, ADMIN, "INC-3")
    good = {"kind": "fact", "subject": "payment-api", "attribute": "pool_max_seen", "object": 20}
    with client(server, server.agent) as c:
        res = c.post(
            "/v1/proposals",
            json={"case": "INC-3", "proposals": [good, {**good, "object": {"n": 20}}]},
        )
    assert (res.status_code, res.json()["code"]) == (422, "invalid_input")
    assert res.json()["detail"].startswith("proposals[1].object: ")
    assert use.audit_entries(server.rt, ADMIN, action="proposed") == []
