"""Private memory at every door (docs/agents.md, "Private memory"), as the application's
login role: an agent writes a lesson (``scope: agent:<its id>``) and working memory
(``scope: session:<S>``) over HTTP, MCP (the SDK's client over stdio) and the CLI;
recall and the context guard answer for them in the session; another principal's
writes are refused ``axis_not_writable`` and its recall in the same session hears
nothing of the working memory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from caveat import app as use
from tests.caveat.test_cli_incident import as_json, run, world  # noqa: F401 (fixture)
from tests.caveat.test_http import serving
from tests.caveat.test_mcp import _data, _params, _world
from tests.conftest import ADMIN

NOTE: dict[str, Any] = {
    "kind": "episode",
    "subject": "payment-api",
    "attribute": "current_hypothesis",
    "object": "pool saturation",
    "evidence": ["E-1"],
    "scope": "session:run-1",
    "text": "Working hypothesis: payment api connection pool exhausted at checkout.",
}
LESSON: dict[str, Any] = {
    **NOTE,
    "kind": "fact",
    "attribute": "check_pool_first",
    "object": True,
    "scope": "agent:agent-ir",
    "text": "Lesson: when checkout is slow, check the payment api connection pool first.",
}
QUERY = "checkout slow payment api connection pool"


def _ids(answer: dict[str, Any], key: str = "items") -> set[int]:
    if key == "items":
        return {int(r["item"]["id"]) for r in answer["items"]}
    return {int(w["id"]) for w in answer["withheld"]}


def test_http_writes_recalls_and_guards_private_memory(db_url: str) -> None:
    with serving(db_url) as srv:
        other = use.create_token(srv.rt, ADMIN, "agent-x", role="agent").token
        me = httpx.Client(base_url=srv.base, headers={"Authorization": f"Bearer {srv.agent}"})
        them = httpx.Client(base_url=srv.base, headers={"Authorization": f"Bearer {other}"})
        with me, them:
            wrote = me.post("/v1/items", json=[NOTE, LESSON])
            assert wrote.status_code == 200, wrote.text
            assert [(o["outcome"], o["state"]) for o in wrote.json()] == [("accepted", "case")] * 2
            note, lesson = (int(o["item_id"]) for o in wrote.json())
            # another principal: neither its session nor its agent anchor
            refused = them.post("/v1/items", json=[{**NOTE, "object": "disk"}, LESSON]).json()
            assert [(o["outcome"], o["code"]) for o in refused] == [
                ("rejected", "axis_not_writable")
            ] * 2
            assert all("agent-ir" not in o["message"] for o in refused[:1])
            # recalled in its session, by its owner; the lesson in any
            mine = me.post("/v1/recall", json={"query": QUERY, "session": "run-1"}).json()
            assert _ids(mine) == {note, lesson}
            got = me.get("/v1/recall", params={"query": QUERY, "session": "run-1"}).json()
            assert _ids(got) == {note, lesson}
            elsewhere = me.post("/v1/recall", json={"query": QUERY, "explain": True}).json()
            assert _ids(elsewhere) == {lesson} and note in _ids(elsewhere, "withheld")
            # the other principal naming the same session: the lesson is another's case
            # item (withheld), the working memory is never mentioned
            asked = {"query": QUERY, "session": "run-1", "explain": True}
            theirs = them.post("/v1/recall", json=asked).json()
            assert _ids(theirs) == set() and _ids(theirs, "withheld") == {lesson}
            guard = {"items": [note], "session": "run-1"}
            assert me.post("/v1/context/check", json=guard).json()["usable"] == [note]
            dropped = them.post("/v1/context/check", json=guard).json()["dropped"]
            assert dropped == {str(note): "not_found"}
            assert them.get(f"/v1/items/{note}").status_code == 404


async def _mcp(params: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with Client(params, read_timeout_seconds=60) as c:
        note = {k: v for k, v in NOTE.items() if k != "scope"}
        seen["propose"] = _data(
            await c.call_tool(
                "propose",
                {
                    "scope": "session:run-1",
                    "proposals": [
                        {**note, "excluded": [], "required": [], "epistemic": "observation"}
                    ],
                },
            )
        )
        ask = {"query": QUERY, "session": "run-1"}
        seen["recall"] = _data(await c.call_tool("recall", ask))
        seen["other"] = _data(await c.call_tool("recall", {**ask, "session": "run-2"}))
        [outcome] = seen["propose"]["outcomes"]
        seen["guard"] = _data(
            await c.call_tool("check_context", {"items": [outcome["item_id"]], "session": "run-1"})
        )
    return seen


def test_mcp_proposes_recalls_and_guards_working_memory(db_url: str) -> None:
    token, _, _, engine = _world(db_url)
    try:
        seen = asyncio.run(_mcp(_params(db_url, token)))
    finally:
        engine.dispose()
    [outcome] = seen["propose"]["outcomes"]
    assert outcome["outcome"] == "accepted", outcome
    note = int(outcome["item_id"])
    assert note in {int(r["item"]["id"]) for r in seen["recall"]["items"]}
    assert note not in {int(r["item"]["id"]) for r in seen["other"]["items"]}
    assert seen["guard"]["usable"] == [note]


def test_the_cli_writes_and_recalls_private_memory(world: Path) -> None:  # noqa: F811
    (world / "note.json").write_text(json.dumps([NOTE, LESSON]))
    outs = as_json("write", str(world / "note.json"), "--as", "agent-ir")
    assert [o["outcome"] for o in outs] == ["accepted", "accepted"]
    note, lesson = (int(o["item_id"]) for o in outs)
    got = as_json("recall", QUERY, "--session", "run-1", "--as", "agent-ir")
    assert {int(r["item"]["id"]) for r in got["items"]} == {note, lesson}
    check = as_json("context", "check", str(note), "--session", "run-1", "--as", "agent-ir")
    assert check["usable"] == [note]
    with use.serving("acme", None) as (rt, admin):
        use.register_principal(rt, admin, "agent-x", role="agent", capabilities=["incidents"])
    (world / "intrude.json").write_text(json.dumps({**NOTE, "object": "disk"}))
    [refused] = as_json("write", str(world / "intrude.json"), "--as", "agent-x", ok=1)
    assert (refused["outcome"], refused["code"]) == ("rejected", "axis_not_writable")
