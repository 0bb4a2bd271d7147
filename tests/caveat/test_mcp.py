"""The MCP server through the official SDK's client, over stdio, as an agent meets it.

``caveat mcp`` runs as a subprocess (acting for ``CAVEAT_TOKEN``, logged in as
``caveat_app``) and the SDK's ``Client`` drives a whole incident loop: open a case,
observe, recall, record use, cite, check the context after an SME's revocation,
propose, close.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from caveat import app as use
from caveat import db
from caveat.mcpserver import TOOLS
from tests.caveat._doors import QUERY, precedent, world
from tests.conftest import ADMIN

ROOT = Path(__file__).resolve().parents[2]


def _world(db_url: str) -> tuple[str, int, use.Runtime, Any]:
    engine = db.make_app_engine(db_url)
    rt = use.Runtime.over(engine, "acme")
    world(rt)
    item_id = precedent(rt)
    token = use.create_token(rt, ADMIN, "agent-ir", role="agent", capabilities=[]).token
    return token, item_id, rt, engine


def _params(db_url: str, token: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
    env |= {"DATABASE_URL": db_url, "CAVEAT_TOKEN": token, "CAVEAT_EMBEDDER": "hashing"}
    return StdioServerParameters(command=sys.executable, args=["-m", "caveat", "mcp"], env=env)


def _data(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    data = result.structured_content
    assert isinstance(data, dict)
    return data.get("result", data)


async def _loop(params: StdioServerParameters, item_id: int, revoke: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with Client(params, read_timeout_seconds=60) as c:
        tools = await c.list_tools()
        seen["tools"] = {t.name: t for t in tools.tools}
        _data(await c.call_tool("open_case", {"case": "INC-2", "subjects": ["payment-api"]}))
        _data(
            await c.call_tool(
                "observe",
                {
                    "observations": [
                        {
                            "subject": "payment-api",
                            "attribute": "config.connection_pool.max",
                            "value": 20,
                        }
                    ]
                },
            )
        )
        ask = {"query": QUERY, "subjects": ["payment-api"], "case": "INC-2"}
        seen["recall"] = _data(await c.call_tool("recall", ask))
        seen["explain"] = _data(await c.call_tool("explain", {"query": QUERY}))
        seen["used"] = _data(await c.call_tool("record_use", {**ask, "used": [item_id]}))
        seen["cite"] = _data(
            await c.call_tool("cite", {"item": item_id, "case": "INC-2", "influence": "decisive"})
        )
        seen["before"] = _data(
            await c.call_tool("check_context", {"items": [item_id], "case": "INC-2"})
        )
        revoke()  # an SME revokes the precedent mid-incident
        seen["after"] = _data(
            await c.call_tool("check_context", {"items": [item_id], "case": "INC-2"})
        )
        seen["propose"] = _data(
            await c.call_tool(
                "propose",
                {
                    "case": "INC-2",
                    "proposals": [
                        {
                            "kind": "episode",
                            "subject": "payment-api",
                            "attribute": "restart_restored_service_at",
                            "object": "E-1",
                            "required": ["config.connection_pool.max eq 20"],
                            "excluded": [],
                            "evidence": ["E-1"],
                            "epistemic": "observation",
                            "text": "Pool exhausted again; restart restored service.",
                        }
                    ],
                },
            )
        )
        seen["refused"] = await c.call_tool(
            "close_case", {"case": "INC-404", "outcome": "confirmed"}
        )
        seen["close"] = _data(
            await c.call_tool("close_case", {"case": "INC-2", "outcome": "confirmed"})
        )
    return seen


def test_an_incident_loop_through_the_sdk_client_over_stdio(db_url: str) -> None:
    token, item_id, rt, engine = _world(db_url)
    try:
        seen = asyncio.run(
            _loop(
                _params(db_url, token),
                item_id,
                lambda: use.revoke(rt, ADMIN, item_id, reason="wrong pool"),
            )
        )
    finally:
        engine.dispose()
    assert set(seen["tools"]) == set(TOOLS)
    assert seen["tools"]["recall"].annotations.read_only_hint is True
    assert [r["item"]["id"] for r in seen["recall"]["items"]] == [item_id]
    assert seen["used"] == {"used": [item_id], "refused": {}}
    assert seen["cite"]["influence"] == "decisive"
    assert seen["before"]["usable"] == [item_id]
    assert seen["after"]["usable"] == [] and str(item_id) in seen["after"]["dropped"]
    assert seen["propose"]["outcomes"][0]["outcome"] == "accepted"
    refused = seen["refused"]
    assert refused.is_error and refused.content[0].text == "not_found: no case 'INC-404'"
    assert seen["close"]["status"] == "closed"


def test_without_a_token_caveat_mcp_refuses_to_start(db_url: str) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
    env["DATABASE_URL"] = db_url
    done = subprocess.run(
        [sys.executable, "-m", "caveat", "mcp"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1 and "unauthenticated" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("tool", TOOLS)
def test_every_tool_is_documented(tool: str) -> None:
    assert f"`{tool}`" in (ROOT / "docs" / "agents.md").read_text()


def test_inline_observations_and_json_results(db_url: str) -> None:
    """A recall decides on observations given inline, and its structured content
    round-trips as JSON (what an agent's framework stores)."""
    token, item_id, _, engine = _world(db_url)
    try:

        async def ask() -> Any:
            async with Client(_params(db_url, token), read_timeout_seconds=60) as c:
                seen = [
                    {
                        "subject": "payment-api",
                        "attribute": "config.connection_pool.max",
                        "value": 20,
                    }
                ]  # inline: nothing is observed in the store
                return await c.call_tool("recall", {"query": QUERY, "observations": seen})

        result = asyncio.run(ask())
    finally:
        engine.dispose()
    assert json.loads(json.dumps(_data(result)))["items"][0]["item"]["id"] == item_id


def test_an_unknown_token_is_refused_naming_the_store_and_the_tenant(db_url: str) -> None:
    """A stdio host that drops the environment starts ``caveat mcp`` on another store:
    the refusal says which store and which tenant it looked in (never a password)."""
    token, _, _, engine = _world(db_url)
    engine.dispose()
    forged = token.rsplit(".", 1)[0] + ".not-the-secret"

    async def ask() -> Any:
        async with Client(_params(db_url, forged), read_timeout_seconds=60) as c:
            return await c.call_tool("recall", {"query": QUERY})

    result = asyncio.run(ask())
    from sqlalchemy import make_url

    url = make_url(db_url)
    assert result.is_error
    text = result.content[0].text
    assert text.startswith("unauthenticated: unknown token (looked in tenant 'acme' of ")
    assert f"DATABASE_URL=postgresql://{url.username}" in text and f"/{url.database}" in text
    assert not url.password or url.password not in text
