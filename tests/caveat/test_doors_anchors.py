"""Anchors from the context at every door (model §6; issue 26; docs/agents.md, "Anchors"):
a recall by an agent with a team, in a session and a case, about a subject, answers
with the default anchor set and the tenant policy's weights; ``anchors_mode=replace``
keeps only the request's anchors; a bad ``anchors_mode`` is refused naming it. Real
HTTP on loopback, the MCP SDK client over stdio and the CLI runner, each as the
application's login role under row-level security."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from typer.testing import CliRunner

from caveat import app as use
from caveat import db
from caveat.api import create_app
from caveat.cli import app
from tests.caveat._doors import QUERY, precedent, world
from tests.caveat.test_http import Server, client, loopback
from tests.caveat.test_mcp import _data, _params
from tests.conftest import ADMIN

#: a weight the policy sets away from its default (0.8), so the answer must read policy
TEAM_WEIGHT = 1.2
ASK: dict[str, Any] = {
    "query": QUERY,
    "subjects": ["payment_api"],  # an alias: the service anchor is the canonical id
    "case": "INC-1",
    "session": "s-7",
    # inline: the precedent's condition (pool max 20) holds, so it is returned
    "observations": [
        {"subject": "payment-api", "attribute": "config.connection_pool.max", "value": 20}
    ],
}
OBSERVE = "payment-api:config.connection_pool.max=20"
#: the default set, highest weight first (the team's policy weight puts it first; ties
#: keep session, case, service, team, agent, tenant), as the answer's ``anchors`` lists it
DEFAULTS = [
    {"axis": "team", "id": "sre", "weight": TEAM_WEIGHT, "origin": "default"},
    {"axis": "session", "id": "s-7", "weight": 1.0, "origin": "default"},
    {"axis": "case", "id": "INC-1", "weight": 1.0, "origin": "default"},
    {"axis": "service", "id": "payment-api", "weight": 0.9, "origin": "default"},
    {"axis": "agent", "id": "agent-ir", "weight": 0.7, "origin": "default"},
    {"axis": "tenant", "id": "*", "weight": 0.6, "origin": "default"},
]
REPLACED = [{"axis": "case", "id": "INC-9", "weight": 1.5, "origin": "request"}]


def _setup(rt: use.Runtime) -> tuple[str, int]:
    """The doors' world, the team weight set in policy, and agent-ir's token (team sre)."""
    world(rt)
    item_id = precedent(rt)
    use.policy_set(rt, ADMIN, {"anchors.defaults.team": TEAM_WEIGHT})
    token = use.create_token(rt, ADMIN, "agent-ir", role="agent", capabilities=[], team="sre")
    return token.token, item_id


@pytest.fixture
def served(db_url: str) -> Iterator[tuple[str, str, int]]:
    engine = db.make_app_engine(db_url)
    rt = use.Runtime.over(engine, "acme")
    try:
        token, item_id = _setup(rt)
        yield db_url, token, item_id
    finally:
        engine.dispose()


def test_http_default_anchors_replace_and_a_bad_mode(db_url: str) -> None:
    engine = db.make_app_engine(db_url)
    rt = use.Runtime.over(engine, "acme")
    try:
        token, item_id = _setup(rt)
        with (
            loopback(create_app(rt)) as base,
            client(Server(base, token, "", "", rt), token) as c,
        ):
            got = c.get(
                "/v1/recall",
                params={
                    "query": QUERY,
                    "subject": "payment_api",
                    "case": "INC-1",
                    "session": "s-7",
                    "observe": OBSERVE,
                },
            )
            posted = c.post("/v1/recall", json={**ASK, "budget": 500})
            replaced = c.post(
                "/v1/recall",
                json={**ASK, "anchors": ["case:INC-9"], "anchors_mode": "replace"},
            )
            replaced_get = c.get(
                "/v1/recall",
                params={"query": QUERY, "anchor": "case:INC-9", "anchors_mode": "replace"},
            )
            bad_get = c.get("/v1/recall", params={"query": QUERY, "anchors_mode": "sideways"})
            bad_post = c.post("/v1/recall", json={**ASK, "anchors_mode": "sideways"})
    finally:
        engine.dispose()
    assert got.status_code == posted.status_code == 200, (got.text, posted.text)
    assert got.json()["anchors"] == DEFAULTS
    assert posted.json()["anchors"] == DEFAULTS
    assert [r["item"]["id"] for r in got.json()["items"]] == [item_id]
    assert posted.json()["packed"]["items"] == [item_id]
    assert replaced.status_code == replaced_get.status_code == 200, replaced.text
    assert replaced.json()["anchors"] == REPLACED
    assert replaced_get.json()["anchors"] == REPLACED
    # replacing the anchors changes no item that may be returned
    assert [r["item"]["id"] for r in replaced.json()["items"]] == [
        r["item"]["id"] for r in posted.json()["items"]
    ]
    for bad, where in ((bad_get, "query.anchors_mode"), (bad_post, "anchors_mode")):
        assert bad.status_code == 422, bad.text
        assert bad.json()["code"] == "invalid_input"
        assert bad.json()["detail"] == f"{where}: Input should be 'extend' or 'replace'"


def test_mcp_default_anchors_replace_and_a_bad_mode(served: tuple[str, str, int]) -> None:
    db_url, token, item_id = served

    async def ask() -> list[Any]:
        async with Client(_params(db_url, token), read_timeout_seconds=60) as c:
            return [
                await c.call_tool("recall", ASK),
                await c.call_tool("explain", ASK),
                await c.call_tool(
                    "recall", {**ASK, "anchors": ["case:INC-9"], "anchors_mode": "replace"}
                ),
                await c.call_tool("recall", {**ASK, "anchors_mode": "sideways"}),
            ]

    recalled, explained, replaced, bad = asyncio.run(ask())
    assert _data(recalled)["anchors"] == DEFAULTS
    assert [r["item"]["id"] for r in _data(recalled)["items"]] == [item_id]
    assert [r["item"]["id"] for r in _data(replaced)["items"]] == [item_id]
    assert _data(explained)["anchors"] == DEFAULTS
    assert _data(replaced)["anchors"] == REPLACED
    assert bad.is_error
    assert bad.content[0].text == (
        "invalid_input: anchors_mode: Input should be 'extend' or 'replace'"
    )
    assert "Traceback" not in bad.content[0].text


def test_cli_default_anchors_replace_and_a_bad_mode(
    served: tuple[str, str, int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db_url, _, _ = served
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    runner = CliRunner()
    ask = [
        "recall", QUERY, "--subject", "payment_api", "--case", "INC-1", "--session", "s-7",
        "--observe", OBSERVE, "--as", "agent-ir",
    ]  # fmt: skip
    done = runner.invoke(app, [*ask, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["anchors"] == DEFAULTS
    done = runner.invoke(
        app, [*ask, "--anchor", "case:INC-9", "--anchors-mode", "replace", "--json"]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["anchors"] == REPLACED
    bad = runner.invoke(app, [*ask, "--anchors-mode", "sideways"])
    assert bad.exit_code == 2, bad.output
    assert "invalid_input: --anchors-mode: Input should be 'extend' or 'replace'" in bad.output
    assert "Traceback" not in bad.output
