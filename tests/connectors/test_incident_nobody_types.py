"""An incident nobody types (issue 24's proof; docs/sources.md, "The whole story").

Every fact in this test comes from a system caveat does not own, and every door is met
as its user meets it: a real Prometheus scrapes a ``prometheus_client`` exporter whose
pool gauges the test changes; an alerting rule fires and a real Alertmanager posts its
webhook, with a ``source`` token, to a live server logged in as the application role;
the agent is the MCP SDK's client over streamable HTTP; the deploy is a signed GitHub
``deployment_status`` webhook, and the deployed configuration is a file the deploy
rewrites. No ``observe`` is typed anywhere.

1. Pool max 20 (from the deployed-config file), utilisation 0.97 (from Prometheus):
   the alert opens the case; a ``refresh: true`` recall pulls both and offers the
   verified precedent, each condition's value with its source, query and sample time.
2. The deploy raises the pool max to 100 and rewrites the file: the precedent is
   re-opened (``needs_reverification``, withheld); an SME verifies it again (a verdict
   over HTTP, not an observation).
3. Utilisation falls to 0.12: the next recall withholds it, applicability FALSE, both
   values from live sources (the file says 100, Prometheus 0.12).
4. Prometheus is stopped: the recall answers, the utilisation condition is UNKNOWN,
   and explain names the source that failed beside ``missing_observations``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

import factgen
from caveat import app as use
from predicates import ValueType
from tests.caveat.test_http import Server, serving
from tests.caveat.test_mcp_http import _data, _session
from tests.conftest import ADMIN
from tests.connectors.conftest import StartAlertmanager, StartPrometheus
from tests.precedents import active_episode
from tests.stack import Exporter, poll

SERVICE = "checkout-api"
LABEL = "checkout-api-prod"  # what the exporter calls it: an alias of the entity
UTIL = "metrics.pool_utilisation"
POOL = "config.connection_pool.max"
QUERY = "checkout slow, connection pool exhausted"
SECRET = "e2e-github-secret"
#: short, so that the test sees an observation age out instead of waiting minutes
MAX_AGE = timedelta(seconds=3)
RATIO = "max by (service) (db_pool_in_use / db_pool_max)"
RULES = f"""
groups:
  - name: pool
    rules:
      - alert: PoolSaturated
        expr: {RATIO} > 0.9
        for: 0s
        labels: {{severity: page}}
"""


def _sources(prometheus_url: str, deploy_dir: Path) -> str:
    return f"""\
sources:
  - name: prom
    kind: prometheus
    url: {prometheus_url}
    timeout: 1s
    attributes:
      - attribute: {UTIL}
        query: '{RATIO}'
        subject_label: service
  - name: deployed-config
    kind: file
    path: {deploy_dir}/{{subject}}.json
    subjects: [{SERVICE}]
    attributes:
      - {{attribute: {POOL}, pointer: /connection_pool/max}}
hooks:
  alertmanager: {{subject_labels: [service]}}
  github:
    repositories: {{acme/checkout: [{SERVICE}]}}
    secret_env: E2E_GITHUB_SECRET
"""


def _deployed(deploy_dir: Path, pool_max: int) -> None:
    (deploy_dir / f"{SERVICE}.json").write_text(json.dumps({"connection_pool": {"max": pool_max}}))


def _precedent(rt: use.Runtime) -> int:
    """A verified precedent: pool max 20 and saturated, restarting PgBouncer helped."""
    use.add_evidence(rt, ADMIN, "PM-7", title="postmortem: checkout pool exhausted")
    return active_episode(
        rt,
        ADMIN,
        SERVICE,
        [f"{POOL} eq 20", f"{UTIL} gt 0.9"],
        text="Checkout pool exhausted at max 20; restarting PgBouncer restored it.",
        case="INC-7",
        evidence="PM-7",
    )


@pytest.fixture
def live(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    monkeypatch.setenv("E2E_GITHUB_SECRET", SECRET)
    with serving(db_url) as s:
        use.declare_schema(
            s.rt,
            ADMIN,
            [
                factgen.AttributeSpec(
                    POOL, ValueType.parse("int"), content_type="configuration", max_age=MAX_AGE
                ),
                factgen.AttributeSpec(UTIL, ValueType.parse("float"), max_age=MAX_AGE),
                factgen.AttributeSpec("alert.PoolSaturated", ValueType.parse("bool")),
            ],
        )
        use.import_entities(
            s.rt, ADMIN, [factgen.EntitySpec(SERVICE, "service", ("checkout_api", LABEL))]
        )
        yield s


def _recall(s: Server, case: str) -> dict[str, Any]:
    ask = {"query": QUERY, "subjects": [SERVICE], "case": case, "refresh": True, "explain": True}
    [result] = asyncio.run(_session(s, s.agent, [("recall", ask)]))
    return _data(result)


def _conditions(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["attribute"]: c for c in entry["conditions"]}


def _deployment_status(now: datetime, pool_max: int) -> bytes:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "action": "created",
        "deployment_status": {
            "id": 9101,
            "state": "success",
            "environment": "production",
            "created_at": stamp,
            "updated_at": stamp,
        },
        "deployment": {
            "id": 91,
            "sha": "5e1f0c2",
            "ref": "main",
            "environment": "production",
            "payload": {"config": {"connection_pool": {"max": pool_max}}},
            "created_at": stamp,
        },
        "repository": {"id": 7, "name": "checkout", "full_name": "acme/checkout"},
        "sender": {"login": "deploy-bot", "type": "Bot"},
    }
    return json.dumps(body).encode()


def test_an_incident_nobody_types(
    live: Server,
    exporter: Exporter,
    start_prometheus: StartPrometheus,
    start_alertmanager: StartAlertmanager,
    tmp_path: Path,
) -> None:
    s = live
    item_id = _precedent(s.rt)
    deploy_dir = tmp_path / "deploy"
    deploy_dir.mkdir()
    _deployed(deploy_dir, 20)
    exporter.set(LABEL, in_use=19.4, max=20)
    token = use.create_token(s.rt, ADMIN, "alertmanager", role="source").token
    alertmanager = start_alertmanager(f"{s.base}/v1/hooks/alertmanager", token=token)
    prometheus = start_prometheus(rules=RULES, alertmanager=alertmanager.address)
    use.load_sources(s.rt, ADMIN, _sources(prometheus.url, deploy_dir))

    # 1. the alert fires; Alertmanager's webhook opens the case about the subject
    def cases() -> list[tuple[str, list[str]]]:
        with s.rt.transaction() as tx:
            rows = tx.execute(sa.text("SELECT id, subjects FROM cases WHERE id <> 'INC-7'"))
            return [(r.id, list(r.subjects)) for r in rows]

    [(case, subjects)] = poll(cases, bool, 60, "the case Alertmanager's webhook opens")
    assert case.startswith("am-poolsaturated-") and subjects == [SERVICE]
    prometheus.wait_for(RATIO, lambda v: bool(v) and float(v[0]["value"][1]) > 0.9, 20)

    # the agent recalls with refresh: both conditions pulled, the precedent offered
    first = _recall(s, case)
    assert [r["item"]["id"] for r in first["items"]] == [item_id], first
    conditions = _conditions(first["items"][0])
    util, pool = conditions[UTIL]["observed"], conditions[POOL]["observed"]
    assert conditions[UTIL]["value"] == conditions[POOL]["value"] == "TRUE"
    assert util["value"] == pytest.approx(0.97) and util["source"] == "prom"
    assert util["provenance"]["query"] == RATIO
    assert util["provenance"]["sample_time"][:19] == util["observed_at"][:19]
    assert (pool["value"], pool["source"]) == (20, "deployed-config")
    assert pool["provenance"]["pointer"] == "/connection_pool/max"
    assert first["source_errors"] == []

    # 2. a signed deployment_status raises the pool max
    body = _deployment_status(datetime.now(UTC), 100)
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    hooked = httpx.post(
        f"{s.base}/v1/hooks/github",
        params={"tenant": s.rt.tenant},
        content=body,
        headers={
            "Content-Type": "application/json",
            "X-GitHub-Event": "deployment_status",
            "X-GitHub-Delivery": "e2e-deploy-1",
            "X-Hub-Signature-256": signature,
        },
    )
    assert hooked.status_code == 200, hooked.text
    # the deploy changed what a condition names: re-opened (model §4.3)
    assert use.item(s.rt, ADMIN, item_id).state == "needs_reverification"
    _deployed(deploy_dir, 100)  # the deploy tool writes what it applied
    reopened = _recall(s, case)
    assert reopened["items"] == []
    assert [w["gate"] for w in reopened["withheld"] if w["id"] == item_id] == ["activated_version"]
    # an SME reviews it and keeps it as the precedent of a pool at max 20 (a verdict, not
    # an observation): active again, and now it is the facts that decide
    verified = httpx.post(
        f"{s.base}/v1/items/{item_id}/verify", headers={"Authorization": f"Bearer {s.sme}"}
    )
    assert verified.status_code == 200, verified.text
    assert use.item(s.rt, ADMIN, item_id).state == "active"

    # 3. utilisation falls: withheld, applicability FALSE on values from live sources
    exporter.set(LABEL, in_use=2.4)
    prometheus.wait_for(RATIO, lambda v: bool(v) and float(v[0]["value"][1]) < 0.2, 20)

    def both_pulled_again(answer: dict[str, Any]) -> bool:
        [entry] = [w for w in answer["withheld"] if w["id"] == item_id] or [{"conditions": []}]
        sources = {c["attribute"]: (c["observed"] or {}).get("source") for c in entry["conditions"]}
        return sources == {UTIL: "prom", POOL: "deployed-config"}

    # what the first recall pulled counts until its max_age: the next refresh pulls again
    second = poll(lambda: _recall(s, case), both_pulled_again, 20, "both values pulled again")
    assert second["items"] == [], second
    [withheld] = [w for w in second["withheld"] if w["id"] == item_id]
    assert withheld["gate"] == "applicability"
    conditions = _conditions(withheld)
    assert conditions[UTIL]["value"] == conditions[POOL]["value"] == "FALSE"
    assert conditions[UTIL]["observed"]["value"] == pytest.approx(0.12)
    assert conditions[UTIL]["observed"]["provenance"]["source"] == "prom"
    assert conditions[POOL]["observed"]["value"] == 100
    assert conditions[POOL]["observed"]["provenance"]["source"] == "deployed-config"

    # 4. Prometheus is stopped: the recall answers, UNKNOWN, the failed source named
    prometheus.stop()

    third = poll(
        lambda: _recall(s, case),
        lambda a: UTIL in a["missing_observations"],
        20,
        "the last utilisation sample to age past its max_age",
    )
    assert third["items"] == []
    [withheld] = [w for w in third["withheld"] if w["id"] == item_id]
    assert _conditions(withheld)[UTIL]["value"] == "UNKNOWN"
    [failed] = third["source_errors"]
    assert (failed["source"], failed["attributes"]) == ("prom", [UTIL]) and failed["error"]

    # nobody typed a fact: every observation came from a source, a hook or the deploy
    with s.rt.transaction() as tx:
        sources = {r[0] for r in tx.execute(sa.text("SELECT DISTINCT source FROM facts"))}
        typed = tx.execute(
            sa.text("SELECT count(*) FROM audit_log WHERE action = 'observe'")
        ).scalar_one()
    assert sources <= {"prom", "deployed-config", "event:deploy", "alertmanager"}, sources
    assert typed == 0
