"""The MCP tools over streamable HTTP inside ``caveat serve``, through the SDK's client.

A uvicorn server on loopback (over a runtime logged in as ``caveat_app``, under
row-level security) mounts the transport at ``/mcp``; the SDK's ``Client`` talks to
it with an ``Authorization: Bearer`` header, as an agent's host would.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from caveat import app as use
from caveat.mcpserver import TOOLS
from tests.caveat._doors import QUERY, precedent
from tests.caveat.test_http import Server, serving
from tests.conftest import ADMIN

POOL = {"subject": "payment-api", "attribute": "config.connection_pool.max", "value": 20}


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict)
    inner: dict[str, Any] = data.get("result", data)
    return inner


async def _session(s: Server, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each call's raw result, in one client session."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:  # noqa: SIM117
        async with Client(streamable_http_client(f"{s.base}/mcp", http_client=http)) as c:
            return [await c.call_tool(name, args) for name, args in calls]


def _tools(s: Server, token: str) -> list[str]:
    async def run() -> list[str]:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:  # noqa: SIM117
            async with Client(streamable_http_client(f"{s.base}/mcp", http_client=http)) as c:
                return [t.name for t in (await c.list_tools()).tools]

    return asyncio.run(run())


def test_an_incident_loop_through_the_sdk_client_over_streamable_http(db_url: str) -> None:
    with serving(db_url) as s:
        item_id = precedent(s.rt)
        assert set(_tools(s, s.agent)) == set(TOOLS)
        ask = {"query": QUERY, "subjects": ["payment-api"], "case": "INC-2"}
        check = ("check_context", {"items": [item_id], "case": "INC-2"})
        first = asyncio.run(
            _session(
                s,
                s.agent,
                [
                    ("open_case", {"case": "INC-2", "subjects": ["payment-api"]}),
                    ("observe", {"observations": [POOL]}),
                    ("recall", ask),
                    ("record_use", {**ask, "used": [item_id]}),
                    ("cite", {"item": item_id, "case": "INC-2", "influence": "decisive"}),
                    check,
                ],
            )
        )
        use.revoke(s.rt, ADMIN, item_id, reason="wrong pool")  # an SME, mid-incident
        after, closed = asyncio.run(
            _session(s, s.agent, [check, ("close_case", {"case": "INC-2", "outcome": "confirmed"})])
        )
        with s.rt.transaction() as tx:
            used = tx.connection().exec_driver_sql("SELECT count(*) FROM item_usage").scalar()
    opened, seen, found, recorded, cited, before = (_data(r) for r in first)
    assert opened["id"] == "INC-2" and seen["facts"][0]["value"] == 20
    assert [r["item"]["id"] for r in found["items"]] == [item_id]
    assert recorded == {"used": [item_id], "refused": {}} and used == 1
    assert cited["influence"] == "decisive" and cited["cited_by"] == "agent-ir"
    assert before["usable"] == [item_id]
    assert _data(after)["usable"] == [] and str(item_id) in _data(after)["dropped"]
    assert _data(closed)["status"] == "closed"


def test_no_token_or_a_bad_one_is_refused_before_the_protocol(db_url: str) -> None:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with serving(db_url) as s, httpx.Client(base_url=s.base, timeout=30) as c:
        answers = [
            c.post("/mcp", json=hello),
            c.post("/mcp", json=hello, headers={"Authorization": "Bearer cvt1.bm9wZQ.1.2"}),
            c.post("/mcp", json=hello, headers={"Authorization": f"Basic {s.agent}"}),
            c.get("/mcp"),
        ]
        paths = c.get("/openapi.json").json()["paths"]
        metrics = c.get("/metrics").text
    for res in answers:
        assert res.status_code == 401, res.text
        assert res.headers["content-type"].startswith("application/problem+json")
        assert res.json()["code"] == "unauthenticated"
        assert res.headers["www-authenticate"] == "Bearer"
    assert "/mcp" not in paths  # the transport is not part of the HTTP API's contract
    assert 'caveat_refusals_total{code="unauthenticated"} 4.0' in metrics


def test_another_tenants_token_sees_nothing_of_this_tenant(db_url: str) -> None:
    with serving(db_url) as s:
        item_id = precedent(s.rt)
        found, cited, mine = asyncio.run(
            _session(
                s,
                s.other_tenant,
                [
                    ("recall", {"query": QUERY, "observations": [POOL]}),
                    ("cite", {"item": item_id, "case": "INC-1", "influence": "decisive"}),
                    ("explain", {"query": QUERY}),
                ],
            )
        )
        ours = asyncio.run(
            _session(s, s.agent, [("recall", {"query": QUERY, "observations": [POOL]})])
        )[0]
    assert _data(found)["items"] == [] and _data(mine)["items"] == []
    assert cited.is_error and cited.content[0].text.startswith("not_found: no case")
    assert [r["item"]["id"] for r in _data(ours)["items"]] == [item_id]  # it is there


def test_the_tools_act_with_the_tokens_role(db_url: str) -> None:
    """The role table applies per token and per call: no tool offers an SME's action
    to an agent (its SME routes on the same server refuse it), and an SME's token calling
    an agent's tool through the transport is refused with the code."""
    from claims import ROLE_ACTIONS

    with serving(db_url) as s:
        item_id = precedent(s.rt)
        use.open_case(s.rt, ADMIN, "INC-7")
        sme = asyncio.run(
            _session(
                s,
                s.sme,
                [
                    ("recall", {"query": QUERY}),
                    ("cite", {"item": item_id, "case": "INC-7", "influence": "decisive"}),
                    ("check_context", {"items": [item_id], "observations": [POOL]}),
                    ("check_context", {"items": [item_id]}),
                ],
            )
        )
        with httpx.Client(base_url=s.base, timeout=30) as c:
            verify = c.post(
                f"/v1/items/{item_id}/verify", headers={"Authorization": f"Bearer {s.agent}"}
            )
    sme_only = ROLE_ACTIONS["sme"] - ROLE_ACTIONS["agent"]
    assert "verify" in sme_only and not sme_only & set(TOOLS)
    assert (verify.status_code, verify.json()["code"]) == (403, "forbidden")
    recall_refused, cite_refused, checked, unobserved = sme
    for refused in (recall_refused, cite_refused):
        assert refused.is_error
        assert refused.content[0].text.startswith("forbidden: sme-alice (sme) may not")
    assert _data(checked)["usable"] == [item_id]  # a shared action is allowed
    # by recall's rule: without the pool max observed, the precedent does not apply
    answer = _data(unobserved)
    assert answer["usable"] == [] and answer["dropped"] == {str(item_id): "applicability"}
    [pool] = answer["conditions"][str(item_id)]
    assert (pool["condition"], pool["value"]) == ("config.connection_pool.max eq 20", "UNKNOWN")


def test_a_revoked_token_stops_at_the_next_call(db_url: str) -> None:
    with serving(db_url) as s:
        agent = use.create_token(s.rt, ADMIN, "agent-b", role="agent")

        async def run() -> tuple[Any, BaseException | None]:
            headers = {"Authorization": f"Bearer {agent.token}"}
            async with httpx2.AsyncClient(headers=headers, timeout=60) as http:  # noqa: SIM117
                async with Client(streamable_http_client(f"{s.base}/mcp", http_client=http)) as c:
                    first = await c.call_tool("recall", {"query": QUERY})
                    await asyncio.to_thread(use.revoke_token, s.rt, ADMIN, agent.info.id)
                    try:
                        await c.call_tool("recall", {"query": QUERY})
                    except Exception as exc:  # the transport's error for a 401
                        return first, exc
                    return first, None

        first, stopped = asyncio.run(run())
        again = httpx.post(
            f"{s.base}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": f"Bearer {agent.token}"},
        )
    assert not first.is_error
    assert isinstance(stopped, MCPError), stopped  # the client's error for the refusal
    assert (again.status_code, again.json()["code"]) == (401, "unauthenticated")


def _purposed(rt: use.Runtime) -> int:
    """An active precedent about payment-api (pool max 20) that lists a purpose."""
    import claims
    from tests.caveat._doors import PRECEDENT

    use.open_case(rt, ADMIN, "INC-P", subjects=["payment-api"])
    scope = {"axis": "case", "id": "INC-P"}
    given = {**PRECEDENT, "scope": scope, "purposes": ["incident_response"]}
    written = use.write(rt, ADMIN, claims.ItemWrite.model_validate(given))
    use.promote(rt, ADMIN, written.item_id, to="shadow")
    use.promote(rt, ADMIN, written.item_id, to="active")
    return written.item_id


def test_purpose_pinned_anchors_and_min_confidence_reach_the_tools(db_url: str) -> None:
    """Every field of the recall request is an argument of recall and record_use: an
    item that lists purposes comes back (and is used) only for its purpose."""
    with serving(db_url) as s:
        item_id = _purposed(s.rt)
        ask = {"query": QUERY, "observations": [POOL]}
        purposed = {**ask, "purpose": "incident_response"}
        results = asyncio.run(
            _session(
                s,
                s.agent,
                [
                    ("recall", ask),
                    ("recall", purposed),
                    ("record_use", {**purposed, "used": [item_id]}),
                    ("record_use", {**ask, "used": [item_id]}),
                    ("recall", {**purposed, "pinned": [item_id], "anchors": ["case:INC-P"]}),
                    ("explain", {**purposed, "min_confidence": 1.0}),
                ],
            )
        )
    without, found, used, refused, pinned, high = (_data(r) for r in results)
    assert without["items"] == []  # an item listing purposes needs one
    assert [r["item"]["id"] for r in found["items"]] == [item_id]
    assert used == {"used": [item_id], "refused": {}}
    assert refused == {"used": [], "refused": {str(item_id): "purpose"}}
    assert [r["item"]["id"] for r in pinned["pinned"]] == [item_id]
    assert high["items"] == []  # below the confidence asked for


def test_every_refusal_starts_with_its_code_and_logs_no_traceback(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Through the SDK's client: arguments the schema refuses are ``invalid_input:
    <field>: <what>``, arguments a tool does not take too, an unknown case is
    ``not_found`` at recall, record_use and the context check; nothing is logged with a
    traceback, and no text is the SDK's ``Error executing tool``."""
    caplog.set_level(logging.INFO)
    with serving(db_url) as s:
        item_id = precedent(s.rt)
        results = asyncio.run(
            _session(
                s,
                s.agent,
                [
                    ("recall", {"query": QUERY, "limit": 0}),
                    ("explain", {"query": QUERY, "limit": "many"}),
                    ("recall", {"query": QUERY, "purposes": ["incident_response"]}),
                    ("record_use", {"query": QUERY}),
                    ("recall", {"query": QUERY, "anchors": ["no-colon"]}),
                    ("recall", {"query": QUERY, "case": "INC-404"}),
                    ("record_use", {"query": QUERY, "case": "INC-404", "used": [item_id]}),
                    ("check_context", {"items": [item_id], "case": "INC-404"}),
                    ("observe", {"observations": [{**POOL, "value": "twenty"}]}),
                    ("no_such_tool", {}),
                    ("propose", {"case": "INC-1", "proposals": [{"kind": "remedy"}]}),
                ],
            )
        )
    texts = []
    for result in results:
        assert result.is_error
        texts.append(result.content[0].text)
    limit, wrong, unknown, missing, anchor, *cases, typed, tool, proposal = texts
    assert limit == "invalid_input: limit: Input should be greater than or equal to 1"
    assert wrong.startswith("invalid_input: limit: ")
    assert unknown.startswith("invalid_input: purposes: not an argument (query, subjects,")
    assert missing == "invalid_input: used: Field required"
    assert anchor.startswith('invalid_input: anchors[0]: expected "axis:id" (e.g. "case:INC-902")')
    assert cases == ["not_found: no case 'INC-404'"] * 3
    assert typed.startswith("fact_type_mismatch: config.connection_pool.max of payment-api")
    assert tool.startswith("not_found: no tool 'no_such_tool'")
    assert proposal.startswith("invalid_input: proposals[0].kind: Input should be 'episode'")
    assert not [r for r in caplog.records if r.exc_info], "a refusal was logged as a crash"
    assert "Error executing tool" not in caplog.text
