"""A tenant's registry at every door (docs/claims.md, "The registry, from configuration"):
the use cases, ``PUT``/``GET /v1/registry``, ``caveat registry load|show`` and a schema
file's ``registry:`` section, all as the application's login role under row-level
security; and a declared content type used end to end: the gate takes it, its trigger
re-opens its items on an event, its secondary TTL runs out."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

import claims
import factgen
from caveat import app as use
from caveat import db
from caveat.errors import Conflict, DocumentError, Forbidden, GateRejection
from tests.caveat._doors import two_tenants
from tests.caveat.test_cli_incident import run
from tests.caveat.test_sources_doors import YAML, Served, served
from tests.conftest import ADMIN

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)

REGISTRY = """\
axes:
  - {name: runbook, agent_writable: true}
content_types:
  - name: dashboard
    triggers: [deploy]
  - name: feature_flag
    triggers: [config_change]
    ttl: 1h
"""
#: line 5, column 16: an event type that is not one
BAD = REGISTRY.replace("triggers: [deploy]", "triggers: [redeploy]")
#: the registry without ``dashboard``, which an item uses once written
WITHOUT_DASHBOARD = REGISTRY.replace("  - name: dashboard\n    triggers: [deploy]\n", "")

AGENT = claims.Actor("agent-ir", "agent")
SME = claims.Actor("sme-alice", "sme")


def _item(content_type: str, attribute: str = "dashboard_panel", **kw: Any) -> dict[str, Any]:
    return {
        "kind": "fact",
        "subject": "payment_api",
        "attribute": attribute,
        "object": "p99 latency",
        "required": ["config.connection_pool.max eq 20"],
        "evidence": ["E-1"],
        "scope": {"axis": "case", "id": "INC-1"},
        "content_type": content_type,
        "text": f"the {content_type} of payment-api shows p99 latency",
        **kw,
    }


def _write(rt: use.Runtime, body: dict[str, Any], who: claims.Actor = ADMIN) -> int:
    return use.write(rt, who, claims.ItemWrite.model_validate(body), now=T0).item_id


def _activate(rt: use.Runtime, item_id: int) -> None:
    use.promote(rt, ADMIN, item_id, to="shadow", now=T0)
    use.promote(rt, ADMIN, item_id, to="active", now=T0)


def _state(rt: use.Runtime, item_id: int) -> str:
    return use.item(rt, ADMIN, item_id).state


def _loads(rt: use.Runtime) -> int:
    return len(use.audit_entries(rt, ADMIN, action="load_registry"))


@pytest.fixture
def rt(db_url: str) -> Iterator[use.Runtime]:
    """Tenants acme and globex with the door tests' world, as caveat_app."""
    with two_tenants(db_url) as runtime:
        use.open_case(runtime, ADMIN, "INC-1", subjects=["payment-api"], now=T0)
        yield runtime


def test_a_declared_content_type_is_written_re_opened_by_its_trigger_and_timed_out(
    rt: use.Runtime,
) -> None:
    shown = use.show_registry(rt, AGENT)  # every role may read it
    assert shown.loaded is None and "dashboard" not in {c.name for c in shown.content_types}
    with pytest.raises(GateRejection) as refused:
        _write(rt, _item("dashboard"))
    assert refused.value.code == "content_type_unknown"
    for who in (SME, AGENT):
        with pytest.raises(Forbidden):
            use.load_registry(rt, who, REGISTRY)
    with pytest.raises(DocumentError) as bad:
        use.load_registry(rt, ADMIN, BAD, source_name="registry.yaml")
    assert (bad.value.detail["line"], bad.value.detail["column"]) == (5, 16)
    assert _loads(rt) == 0  # a refused load stores nothing and audits nothing

    loaded = use.load_registry(rt, ADMIN, REGISTRY, now=T0)
    assert loaded.loaded_by == ADMIN.id and loaded.document == REGISTRY
    [row] = use.audit_entries(rt, ADMIN, action="load_registry")
    assert row.detail["content_types"] == ["dashboard", "feature_flag"]
    assert row.detail["axes"] == ["runbook"]
    shown = use.show_registry(rt, AGENT)
    by_name = {c.name: c for c in shown.content_types}
    assert by_name["dashboard"].triggers == ("deploy",) and by_name["dashboard"].reach == "subject"
    assert by_name["feature_flag"].ttl == timedelta(hours=1) and not by_name["dashboard"].builtin
    assert by_name["permission_refusal"].ttl == timedelta(hours=1)  # the policy's, built in
    assert {a.name: a.agent_writable for a in shown.axes}["runbook"] is True

    # the gate takes what the registry declares, for an agent too (its new axis)
    dashboard = _write(rt, _item("dashboard"))
    flag = _write(rt, _item("feature_flag", attribute="flag_state"))
    runbook = _write(
        rt,
        _item("dashboard", attribute="runbook_step", scope={"axis": "runbook", "id": "rb-1"}),
        AGENT,
    )
    assert runbook > 0
    _activate(rt, dashboard)
    _activate(rt, flag)

    # a deploy re-opens the dashboard item (its trigger), not the feature flag
    deploy = use.record_event(rt, AGENT, type="deploy", subjects=["payment-api"], now=T0)
    assert deploy.outcome.matched == (dashboard,)
    assert _state(rt, dashboard) == "verify_on_next_use" and _state(rt, flag) == "active"
    # a config change re-opens the feature flag
    change = use.record_event(rt, AGENT, type="config_change", subjects=["payment-api"], now=T0)
    assert flag in change.outcome.matched and _state(rt, flag) == "verify_on_next_use"

    # the feature flag's secondary TTL runs out an hour after it was made active: the
    # context guard reads it as run out at once (a check on observations since then)
    again = _write(rt, _item("feature_flag", attribute="flag_owner"))
    _activate(rt, again)
    pool = factgen.Observation("payment-api", "config.connection_pool.max", 20)
    use.observe(rt, AGENT, [pool], now=T0)
    before = use.check_context(rt, AGENT, [again], now=T0 + timedelta(minutes=59))
    assert list(before.usable) == [again]
    after = use.check_context(rt, AGENT, [again], now=T0 + timedelta(minutes=61))
    assert again not in after.usable and after.dropped[again] == "needs_reverification"
    assert use.sweep(rt, ADMIN, now=T0 + timedelta(minutes=59)).expired == ()
    assert again in use.sweep(rt, ADMIN, now=T0 + timedelta(minutes=61)).expired

    # dashboard items exist: the content type cannot be removed, and nothing is stored
    with pytest.raises(Conflict) as in_use:
        use.load_registry(rt, ADMIN, WITHOUT_DASHBOARD)
    assert in_use.value.code == "content_type_in_use"
    assert in_use.value.detail["content_types"] == {"dashboard": 2}
    assert use.show_registry(rt, ADMIN).loaded.document == REGISTRY  # type: ignore[union-attr]
    assert _loads(rt) == 1

    # another tenant's registry is its own
    globex = rt.for_tenant("globex")
    assert use.show_registry(globex, ADMIN).loaded is None
    use.open_case(globex, ADMIN, "INC-1", subjects=["payment-api"], now=T0)
    with pytest.raises(GateRejection):
        _write(globex, _item("dashboard"))


def test_the_stored_registry_is_isolated_by_row_level_security(
    rt: use.Runtime, db_url: str
) -> None:
    use.load_registry(rt, ADMIN, REGISTRY, now=T0)
    engine = db.make_app_engine(db_url)
    try:
        with db.tenant_sessions(engine, "globex").begin() as s:
            assert s.execute(sa.text("SELECT count(*) FROM tenant_registry")).scalar() == 0
        with db.tenant_sessions(engine, "acme").begin() as s:
            assert s.execute(sa.text("SELECT count(*) FROM tenant_registry")).scalar() == 1
            with pytest.raises(sa.exc.ProgrammingError):  # the role may not delete it
                s.execute(sa.text("DELETE FROM tenant_registry"))
    finally:
        engine.dispose()


def _client(s: Served, who: str) -> httpx.Client:
    return httpx.Client(
        base_url=s.base, headers={"Authorization": f"Bearer {s.tokens[who]}"}, timeout=30
    )


def test_http_loads_and_shows_the_registry_and_an_event_re_opens_a_declared_type(
    rt: use.Runtime,
) -> None:
    with served(rt) as s, _client(s, "admin") as admin, _client(s, "agent") as agent:
        shown = agent.get("/v1/registry").json()
        assert shown["loaded_at"] is None and "case" in [a["name"] for a in shown["axes"]]
        [refused] = agent.post("/v1/items", json=[_item("dashboard")]).json()
        assert (refused["outcome"], refused["code"]) == ("rejected", "content_type_unknown")
        for who in ("sme", "agent", "source"):
            with _client(s, who) as c:
                r = c.put("/v1/registry", content=REGISTRY, headers=YAML)
                assert (r.status_code, r.json()["code"]) == (403, "forbidden"), who
        bad = admin.put("/v1/registry", content=BAD, headers=YAML)
        assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
        problem = bad.json()
        assert (problem["code"], problem["line"], problem["column"]) == ("document_invalid", 5, 16)
        assert problem["detail"].startswith("registry.yaml:5:16: content_types[0].triggers[0]")
        wrong = admin.put("/v1/registry", json={"axes": []})
        assert (wrong.status_code, wrong.json()["code"]) == (422, "invalid_input")
        r = admin.put("/v1/registry", content=REGISTRY, headers=YAML)
        assert r.status_code == 200, r.text
        types = {c["name"]: c for c in r.json()["content_types"]}
        assert types["feature_flag"]["ttl_seconds"] == 3600.0
        assert types["dashboard"] == {
            "name": "dashboard",
            "triggers": ["deploy"],
            "reach": "subject",
            "ttl_seconds": None,
            "builtin": False,
        }
        assert agent.get("/v1/registry").json()["document"] == REGISTRY
        [out] = agent.post("/v1/items", json=[_item("dashboard")]).json()
        assert out["outcome"] == "accepted", out
        _activate(rt, out["item_id"])
        deploy = {
            "specversion": "1.0",
            "id": "d-1",
            "source": "ci",
            "type": "deploy",
            "subject": "payment-api",
        }
        [event] = agent.post("/v1/events", json=deploy).json()["events"]
        assert event["verify_on_next_use"] == [out["item_id"]]
        assert agent.get(f"/v1/items/{out['item_id']}").json()["state"] == "verify_on_next_use"
        gone = admin.put("/v1/registry", content=WITHOUT_DASHBOARD, headers=YAML)
        assert (gone.status_code, gone.json()["code"]) == (409, "content_type_in_use")
        with _client(s, "globex") as other:
            assert other.get("/v1/registry").json()["loaded_at"] is None


SCHEMA = """\
attributes:
  - {attribute: config.dashboard.version, type: int, content_type: dashboard}
registry:
  content_types:
    - name: dashboard
      triggers: [deploy, config_change]
"""


@pytest.fixture
def cli_env(db_url: str, rt: use.Runtime, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    use.create_token(rt, ADMIN, "sme-1", role="sme")
    (tmp_path / "registry.yaml").write_text(REGISTRY)
    (tmp_path / "bad.yaml").write_text(BAD)
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "bad-schema.yaml").write_text(SCHEMA.replace("config_change", "often"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_cli_loads_and_shows_the_registry_and_a_schema_files_section(
    cli_env: Path, rt: use.Runtime
) -> None:
    assert "no registry loaded: built-ins only" in run("registry", "show").output
    res = run("registry", "load", "bad.yaml", ok=2)
    assert "caveat: document_invalid: bad.yaml:5:16: content_types[0].triggers[0]" in res.output
    assert "forbidden" in run("registry", "load", "registry.yaml", "--as", "sme-1", ok=1).output
    text = run("registry", "load", "registry.yaml").output
    assert "loaded the registry of tenant acme" in text
    assert "feature_flag" in text and "re-opened by config_change (reach subject)" in text
    shown = json.loads(run("registry", "show", "--json", "--as", "sme-1").output)
    assert shown["tenant"] == "acme" and shown["document"] == REGISTRY
    # a schema file's registry: section replaces it (the feature flag is gone), with its
    # attributes in one transaction: while a feature flag item exists, neither is stored
    res = run("schema", "load", "bad-schema.yaml", ok=2)
    assert "bad-schema.yaml:6:26: registry.content_types[0].triggers[1]" in res.output
    flag = _write(rt, _item("feature_flag", attribute="flag_state"))
    res = run("schema", "load", "schema.yaml", ok=1)
    assert "content_type_in_use" in res.output and "feature_flag (1 items)" in res.output
    with rt.transaction() as s:
        assert rt.world(s).schema.get("config.dashboard.version") is None
    use.redact(rt, ADMIN, flag, reason="in the way")  # still a current item: still used
    assert "content_type_in_use" in run("schema", "load", "schema.yaml", ok=1).output
    # a section that keeps the content type loads, attributes and all
    keeping = SCHEMA + "    - {name: feature_flag, triggers: [config_change]}\n"
    (cli_env / "keeping.yaml").write_text(keeping)
    assert "loaded its registry" in run("schema", "load", "keeping.yaml").output
    with rt.transaction() as s:
        assert rt.world(s).schema.get("config.dashboard.version") is not None
    shown = json.loads(run("registry", "show", "--json").output)
    declared = {c["name"]: c for c in shown["content_types"] if not c["builtin"]}
    assert declared["dashboard"] == {
        "name": "dashboard",
        "triggers": ["config_change", "deploy"],
        "reach": "subject",
        "ttl_seconds": None,
        "builtin": False,
    }
    assert declared["feature_flag"]["ttl_seconds"] is None  # the new file's: no TTL
    assert shown["document"] == keeping
    assert _loads(rt) == 2
