"""Citations and enforcement levels at every door, as the application's login role
under row-level security: ``cite`` with expected/observed values and a rationale
(HTTP, MCP through the SDK's client, CLI), ``GET /v1/citations`` / ``caveat citations
list`` (filters, keyset pages, typed refusals, reader isolation), ``POST
/v1/items/{id}/enforcement`` / ``caveat skill enforce`` (audited, in the dossier), and
a closed case's outcome in the cited items' confidence."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from typer.testing import CliRunner

import claims
from caveat import app as use
from caveat import db
from caveat.cli import app as cli
from caveat.mcpserver import build_server
from tests.caveat._doors import PRECEDENT, precedent, world
from tests.caveat.test_http import Server, client, serving
from tests.caveat.test_web import browser
from tests.conftest import ADMIN

SKILL: dict[str, object] = {
    **PRECEDENT,
    "kind": "skill",
    "attribute": "drain_procedure",
    "object": "E-1",
    "version": 1,
    "text": "Drain the payment-api pool before a restart.",
}
SECRET: dict[str, object] = {
    **PRECEDENT,
    "attribute": "restricted_finding",
    "object": "E-secret",
    "evidence": ["E-secret"],
    "text": "A finding only payments-restricted may read.",
}


def _setup(rt: use.Runtime) -> dict[str, int]:
    """The precedent (active, case INC-1), a skill and a restricted fact in INC-1, and
    INC-2 open with the precedent in its context."""
    fact = precedent(rt)
    use.add_evidence(rt, ADMIN, "E-secret", readers=["payments-restricted"])
    skill = use.write(rt, ADMIN, claims.ItemWrite.model_validate(SKILL)).item_id
    secret = use.write(rt, ADMIN, claims.ItemWrite.model_validate(SECRET)).item_id
    assert skill is not None and secret is not None
    return {"fact": fact, "skill": skill, "secret": secret}


# --- HTTP --------------------------------------------------------------------------------


def _problem(r: Any, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()
    assert body["code"] == code, body
    return body


def test_enforcement_cite_list_and_close_over_http(db_url: str) -> None:
    with serving(db_url) as s:
        ids = _setup(s.rt)
        cleared = use.create_token(
            s.rt, ADMIN, "sme-sec", role="sme", capabilities=["payments-restricted"]
        ).token
        _http_enforcement(s, ids)
        _http_cite(s, ids)
        _http_list(s, ids, cleared)
        _http_close(s, ids)


def _http_enforcement(s: Server, ids: dict[str, int]) -> None:
    skill = ids["skill"]
    with client(s, s.sme) as sme, client(s, s.agent) as agent:
        r = sme.post(
            f"/v1/items/{skill}/enforcement", json={"level": "required", "reason": "runbook"}
        )
        assert r.status_code == 200, r.text
        done = r.json()
        assert (done["level"], done["previous"], done["set_by"]) == ("required", None, "sme-alice")
        _problem(
            agent.post(f"/v1/items/{skill}/enforcement", json={"level": "advisory", "reason": "x"}),
            403,
            "forbidden",
        )
        bad = sme.post(f"/v1/items/{skill}/enforcement", json={"level": "mandatory", "reason": "x"})
        assert "level" in _problem(bad, 422, "invalid_input")["detail"]
        _problem(
            sme.post(f"/v1/items/{skill}/enforcement", json={"level": "required", "reason": ""}),
            422,
            "invalid_input",
        )
        fact = sme.post(
            f"/v1/items/{ids['fact']}/enforcement", json={"level": "required", "reason": "x"}
        )
        assert "only skills" in _problem(fact, 422, "invalid_input")["detail"]
        _problem(
            sme.post("/v1/items/999999/enforcement", json={"level": "required", "reason": "x"}),
            404,
            "not_found",
        )
        dossier = sme.get(f"/v1/items/{skill}/dossier").json()
        assert dossier["enforcement"]["level"] == "required" and dossier["binding"] is True
        assert dossier["enforcement"]["reason"] == "runbook"
        assert any(
            h["action"] == "set_enforcement" and h["code"] == "required" for h in dossier["history"]
        )
        assert sme.get(f"/v1/items/{ids['fact']}/dossier").json()["enforcement"] is None
    with browser(s, s.sme) as ui:
        page = ui.get(f"/ui/items/{skill}")
        assert page.status_code == 200
        assert "Enforcement: <b>required</b> (binding)" in page.text


def _http_cite(s: Server, ids: dict[str, int]) -> None:
    skill = ids["skill"]
    with client(s, s.agent) as agent:
        r = agent.post(
            f"/v1/items/{skill}/cite",
            json={
                "case": "INC-1",
                "influence": "decisive",
                "expected": "drain",
                "observed": "restart",
                "rationale": "no time to drain",
            },
        )
        assert r.status_code == 200, r.text
        cited = r.json()
        assert (cited["compliance"], cited["expected"], cited["observed"]) == (
            "violation",
            "drain",
            "restart",
        )
        assert cited["rationale"] == "no time to drain" and cited["kind"] == "skill"
        r = agent.post(
            f"/v1/items/{ids['fact']}/cite",
            json={"case": "INC-1", "influence": "contributing", "expected": 20, "observed": 20},
        )
        assert r.json()["compliance"] == "na" and r.json()["expected"] == 20
        half = agent.post(
            f"/v1/items/{skill}/cite", json={"case": "INC-1", "influence": "ignored", "expected": 1}
        )
        assert "observed" in _problem(half, 422, "invalid_input")["detail"]
        _problem(
            agent.post(f"/v1/items/{skill}/cite", json={"case": "INC-1", "influence": "crucial"}),
            422,
            "invalid_input",
        )
    use.cite(s.rt, ADMIN, "INC-1", ids["secret"], influence="considered")


def _http_list(s: Server, ids: dict[str, int], cleared: str) -> None:
    fact, skill, secret = ids["fact"], ids["skill"], ids["secret"]
    with client(s, s.agent) as agent, client(s, cleared) as sec, client(s, s.other_tenant) as g:
        listed = agent.get("/v1/citations").json()
        assert [c["item"] for c in listed["items"]] == [skill, fact]  # not the restricted one
        assert listed["next"] is None
        assert [c["item"] for c in sec.get("/v1/citations").json()["items"]] == [
            skill,
            fact,
            secret,
        ]
        assert g.get("/v1/citations").json() == {"items": [], "next": None}
        # hidden is not counted: a page of 2 has no next page for the agent
        assert agent.get("/v1/citations", params={"limit": 2}).json()["next"] is None
        first = agent.get("/v1/citations", params={"limit": 1}).json()
        assert [c["item"] for c in first["items"]] == [skill] and first["next"]
        second = agent.get("/v1/citations", params={"limit": 1, "cursor": first["next"]}).json()
        assert [c["item"] for c in second["items"]] == [fact] and second["next"] is None
        by = agent.get("/v1/citations", params={"compliance": "violation"}).json()
        assert [c["item"] for c in by["items"]] == [skill]
        by = agent.get("/v1/citations", params={"case": "INC-1", "item": fact}).json()
        assert [c["influence"] for c in by["items"]] == ["contributing"]
        assert agent.get("/v1/citations", params={"influence": "ignored"}).json()["items"] == []
        since = agent.get("/v1/citations", params={"since": second["items"][0]["cited_at"]})
        assert [c["item"] for c in since.json()["items"]] == [fact]
        _problem(agent.get("/v1/citations", params={"influence": "crucial"}), 422, "invalid_input")
        _problem(agent.get("/v1/citations", params={"cursor": "nope"}), 422, "invalid_input")
        other = agent.get(
            "/v1/citations", params={"limit": 1, "cursor": first["next"], "case": "X"}
        )
        _problem(other, 422, "invalid_input")
        backwards = agent.get(
            "/v1/citations",
            params={"since": "2026-12-03T12:00:00Z", "until": "2026-12-03T11:00:00Z"},
        )
        assert "since" in _problem(backwards, 422, "invalid_input")["detail"]
        _problem(agent.get("/v1/citations", params={"item": secret}), 404, "not_found")
        _problem(agent.get("/v1/citations", params={"case": "INC-404"}), 404, "not_found")
    source = use.create_token(s.rt, ADMIN, "alertmanager", role="source").token
    with client(s, source) as hook:  # a hook sender reads no item, so no citation either
        _problem(hook.get("/v1/citations"), 403, "forbidden")


def _http_close(s: Server, ids: dict[str, int]) -> None:
    with client(s, s.agent) as agent, client(s, s.sme) as sme:
        before = sme.get(f"/v1/items/{ids['fact']}/dossier").json()["confidence"]
        r = agent.post("/v1/cases/INC-1/close", json={"outcome": "confirmed"})
        assert r.status_code == 200, r.text
        moved = r.json()["confidence"]
        # the fact (contributing) moves; the skill was not followed, so it does not
        assert str(ids["fact"]) in moved and str(ids["skill"]) not in moved
        dossier = sme.get(f"/v1/items/{ids['fact']}/dossier").json()
        assert dossier["confidence"] > before
        assert [(x["evidence_id"], x["source_kind"], x["stance"]) for x in dossier["links"]] == [
            ("case:INC-1", "citation", "supports")
        ]
        signals = agent.get("/v1/citations", params={"case": "INC-1"}).json()["items"]
        assert {c["signal"] for c in signals} == {"support"}


# --- MCP, through the SDK's client ---------------------------------------------------------


def test_the_cite_tool_takes_values_and_a_rationale(db_url: str) -> None:
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        ids = _setup(rt)
        use.set_enforcement(rt, ADMIN, ids["skill"], level="recommended", reason="review")
        token = use.create_token(rt, ADMIN, "agent-ir", role="agent", capabilities=[]).token

        async def calls() -> list[Any]:
            async with Client(build_server(rt, token)) as c:
                ok = await c.call_tool(
                    "cite",
                    {
                        "item": ids["skill"],
                        "case": "INC-1",
                        "influence": "considered",
                        "expected": {"drain": True},
                        "observed": {"drain": True},
                        "rationale": "drained first",
                    },
                )
                off = await c.call_tool(
                    "cite",
                    {
                        "item": ids["skill"],
                        "case": "INC-1",
                        "influence": "decisive",
                        "expected": 20,
                        "observed": "20",
                    },
                )
                half = await c.call_tool(
                    "cite",
                    {"item": ids["skill"], "case": "INC-1", "influence": "decisive", "observed": 1},
                )
                bad = await c.call_tool(
                    "cite", {"item": ids["skill"], "case": "INC-1", "influence": "crucial"}
                )
                return [ok, off, half, bad]

        ok, off, half, bad = asyncio.run(calls())
    finally:
        engine.dispose()
    assert not ok.is_error, ok.content
    data = ok.structured_content
    assert (data["compliance"], data["expected"], data["rationale"]) == (
        "complied",
        {"drain": True},
        "drained first",
    )
    # 20 is not "20"; recommended is under the tenant's threshold (required): discretion
    assert off.structured_content["compliance"] == "discretion"
    assert half.is_error and half.content[0].text.startswith("invalid_input: expected")
    assert bad.is_error and bad.content[0].text.startswith("invalid_input: influence")


# --- CLI -------------------------------------------------------------------------------------

runner = CliRunner()


def _run(*args: str, ok: int = 0) -> Any:
    res = runner.invoke(cli, [*args, "--json"])
    assert res.exit_code == ok, res.output
    return json.loads(res.output)


def test_skill_enforce_cite_and_citations_list_from_the_cli(
    db_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    with use.serving("acme", None) as (rt, admin):
        world(rt)
        ids = _setup(rt)
        use.register_principal(rt, admin, "agent-ir", role="agent", capabilities=[])
        use.register_principal(rt, admin, "sme-alice", role="sme", capabilities=[])
    skill = str(ids["skill"])
    done = _run(
        "skill", "enforce", skill, "required", "--reason", "postmortem", "--as", "sme-alice"
    )
    assert (done["level"], done["reason"]) == ("required", "postmortem")
    refused = _run("skill", "enforce", skill, "required", "--reason", "x", "--as", "agent-ir", ok=1)
    assert refused["error"]["code"] == "forbidden"
    bad = _run("skill", "enforce", skill, "strict", "--reason", "x", "--as", "sme-alice", ok=2)
    assert bad["error"]["code"] == "invalid_input"
    cited = _run(
        "cite", skill, "--case", "INC-1", "--influence", "decisive",
        "--expected", "20", "--observed", "20", "--rationale", "pool at 20", "--as", "agent-ir",
    )  # fmt: skip
    assert (cited["compliance"], cited["expected"], cited["observed"]) == ("complied", 20, 20)
    half = _run("cite", skill, "--case", "INC-1", "--influence", "decisive", "--expected", "20",
                "--as", "agent-ir", ok=2)  # fmt: skip
    assert half["error"]["attribute"] == "observed"
    fact = str(ids["fact"])
    _run("cite", fact, "--case", "INC-1", "--influence", "ignored", "--as", "agent-ir")
    _run("cite", str(ids["secret"]), "--case", "INC-1", "--influence", "ignored")  # the admin
    listed = _run("citations", "list", "--as", "agent-ir")
    assert [c["item"] for c in listed["items"]] == [ids["skill"], ids["fact"]]
    page = _run("citations", "list", "--limit", "1", "--as", "agent-ir")
    assert page["next"]
    rest = _run("citations", "list", "--limit", "1", "--cursor", page["next"], "--as", "agent-ir")
    assert [c["item"] for c in rest["items"]] == [ids["fact"]] and rest["next"] is None
    assert len(_run("citations", "list")["items"]) == 3  # the admin reads everything
    only = _run("citations", "list", "--compliance", "complied", "--as", "agent-ir")
    assert [c["rationale"] for c in only["items"]] == ["pool at 20"]
    for args, attribute in (
        (("--influence", "crucial"), "influence"),
        (("--cursor", "x"), "cursor"),
        (("--since", "2026-12-03T12:00Z", "--until", "2026-12-03T11:00Z"), "since"),
        (("--limit", "0"), "limit"),
    ):
        err = _run("citations", "list", *args, "--as", "agent-ir", ok=2)
        assert err["error"]["attribute"] == attribute, args
    shown = runner.invoke(cli, ["item", "dossier", skill, "--as", "sme-alice"])
    assert "enforcement required, binding (set by sme-alice: postmortem)" in shown.output
    text = runner.invoke(cli, ["citations", "list", "--as", "agent-ir"])
    assert text.exit_code == 0 and "violation" not in text.output and "complied" in text.output
