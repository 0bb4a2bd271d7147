"""ops/: the Prometheus rules and the Grafana dashboard for caveat itself (issue 28),
held to what the server exports, checked by Debian's promtool and evaluated by a real
Prometheus scraping a real caveat server."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
import yaml
from prometheus_client.parser import text_string_to_metric_families

from caveat import db
from tests.caveat.test_http import serving
from tests.stack import Prometheus, binary, poll

OPS = Path(__file__).resolve().parents[2] / "ops"
RULES = OPS / "prometheus" / "caveat-rules.yml"
RULE_TESTS = OPS / "prometheus" / "caveat-rules.test.yml"
DASHBOARD = OPS / "grafana" / "caveat-dashboard.json"
_METRIC = re.compile(r"\bcaveat_[a-z_]+\b")


def _rule_exprs() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [r["expr"] for g in groups for r in g["rules"]]


def _dashboard_exprs() -> list[str]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [t["expr"] for p in panels for t in p["targets"]]


def _exportable(exposition: str) -> set[str]:
    """Every series name ``exposition`` can carry, its families' HELP lines included
    (a labelled metric nobody has touched yet has no sample, but is declared)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        kind = family.type
        names |= {s.name for s in family.samples}
        if kind == "counter":
            names |= {family.name + "_total"}
        elif kind == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(family.name)
    return names


def test_the_rules_are_valid_and_their_unit_tests_pass() -> None:
    promtool = binary("promtool")
    check = subprocess.run(
        [promtool, "check", "rules", str(RULES)], check=False, capture_output=True, text=True
    )
    assert check.returncode == 0 and "SUCCESS: 12 rules found" in check.stdout, check.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", str(RULE_TESTS)],
        check=False, capture_output=True, text=True, cwd=RULE_TESTS.parent,
    )  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr
    alerts = {r["alert"] for r in yaml.safe_load(RULES.read_text())["groups"][1]["rules"]}
    cases = RULE_TESTS.read_text()
    assert {a for a in alerts if f"alertname: {a}" not in cases} == set()  # each is tested


def test_every_metric_the_rules_and_the_dashboard_name_is_exported(db_url: str) -> None:
    with serving(db_url, background=0.2) as s:
        agent = {"Authorization": f"Bearer {s.agent}"}
        with httpx.Client(base_url=s.base, timeout=30) as c:
            assert c.get("/v1/recall", params={"query": "pool"}, headers=agent).is_success
            assert c.get("/v1/recall", params={"query": "pool"}).status_code == 401
            assert c.post("/v1/hooks/github", content=b"{}").status_code == 401
            assert c.post("/v1/hooks/nonsense", content=b"{}").status_code >= 400
            # the background verifies the default tenant's chain at its first round
            text = poll(
                lambda: c.get("/metrics").text,
                lambda t: 'caveat_audit_chain_ok{tenant="acme"} 1.0' in t,
                20,
                "the chain's first verification",
            )
    named = {m for e in [*_rule_exprs(), *_dashboard_exprs()] for m in _METRIC.findall(e)}
    assert len(named) >= 10
    assert named - _exportable(text) == set()
    assert 'caveat_hook_deliveries_total{kind="github",outcome="unauthenticated"} 1.0' in text
    assert 'caveat_hook_deliveries_total{kind="other",outcome="not_found"} 1.0' in text
    assert 'caveat_audit_chain_checked_timestamp_seconds{tenant="acme"}' in text


def _tamper(db_url: str) -> None:
    engine = db.make_engine(db_url)
    try:
        with engine.begin() as conn:
            # as the superuser, with the triggers off (the audit log refuses any UPDATE)
            conn.execute(sa.text("SET LOCAL session_replication_role = replica"))
            conn.execute(
                sa.text("UPDATE audit_log SET actor = 'someone-else' WHERE tenant_id = 'acme' "
                        "AND seq = (SELECT min(seq) FROM audit_log WHERE tenant_id = 'acme')")
            )  # fmt: skip
    finally:
        engine.dispose()


def test_a_real_prometheus_evaluates_the_rules_and_the_dashboard_on_caveats_metrics(
    db_url: str,
) -> None:
    with serving(db_url) as s, httpx.Client(base_url=s.base, timeout=30) as c:
        sme = {"Authorization": f"Bearer {s.sme}"}
        assert c.post("/v1/audit/verify", headers=sme).json()["ok"] is True
        target = s.base.removeprefix("http://")
        with Prometheus([target], rules=RULES.read_text()) as prom:
            prom.wait_for('caveat_audit_chain_ok{tenant="acme"}', lambda r: len(r) == 1)
            for expr in _dashboard_exprs():  # every panel's query runs on real data
                answer: dict[str, Any] = prom.query(expr.replace("$__rate_interval", "1m"))
                assert answer["status"] == "success", (expr, answer)
            assert not [a for a in prom.alerts() if a["labels"]["alertname"].startswith("Caveat")]
            _tamper(db_url)
            assert c.post("/v1/audit/verify", headers=sme).json()["ok"] is False
            deadline = time.monotonic() + 30
            while True:
                firing = [
                    a["labels"].get("tenant")
                    for a in prom.alerts()
                    if a["labels"]["alertname"] == "CaveatAuditChainBroken"
                    and a["state"] == "firing"
                ]
                if firing:
                    break
                assert time.monotonic() < deadline, prom.alerts()
                time.sleep(0.2)
    assert firing == ["acme"]


def test_the_background_verifies_each_chain_once_per_chain_every(db_url: str) -> None:
    """At a tenant's first round, then only when ``chain_every`` has passed; a broken
    chain is reported as such."""
    from caveat import app as use
    from caveat.api._background import Background
    from tests.caveat._doors import world
    from tests.caveat.test_sources_doors import Recorder

    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        world(rt)
        seen: list[tuple[str, bool]] = []
        worker = Background(
            rt, 5.0, puller=Recorder(), chain_every=3600,
            on_chain=lambda tenant, report: seen.append((tenant, report.ok)),
        )  # fmt: skip
        worker.run_once()
        worker.run_once()
        assert seen == [("acme", True)]  # the second round was within the hour
        _tamper(db_url)
        worker.chain_every = 0
        worker.run_once()
        assert seen == [("acme", True), ("acme", False)]
    finally:
        engine.dispose()
