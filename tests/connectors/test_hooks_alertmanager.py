"""A real Alertmanager's webhook reaching a live caveat server: Debian's Prometheus
evaluates an alerting rule on the exporter's pool ratio, Alertmanager delivers the
notification with the ``source`` token in ``http_config.authorization`` to
``POST /v1/hooks/alertmanager`` of a uvicorn server (the application role), and the
case opens; when the ratio falls, the resolved notification observes false."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

import factgen
from caveat import app as use
from caveat import db
from predicates import ValueType
from tests.caveat.test_http import Server, serving
from tests.conftest import ADMIN
from tests.connectors.conftest import StartAlertmanager, StartPrometheus
from tests.stack import Exporter, poll

SERVICE = "hooked-api"
RULES = f"""
groups:
  - name: pool
    rules:
      - alert: PoolSaturated
        expr: max by (service) (db_pool_in_use{{service="{SERVICE}"}}
              / db_pool_max{{service="{SERVICE}"}}) > 0.9
        for: 0s
        labels: {{severity: page}}
        annotations: {{summary: "{{{{ $labels.service }}}} pool at {{{{ $value }}}}"}}
"""


@pytest.fixture
def live(db_url: str) -> Iterator[tuple[Server, sa.Engine]]:
    owner = db.make_engine(db_url)
    with serving(db_url) as s:
        use.declare_schema(
            s.rt, ADMIN, [factgen.AttributeSpec("alert.PoolSaturated", ValueType.parse("bool"))]
        )
        use.import_entities(s.rt, ADMIN, [factgen.EntitySpec(SERVICE, "service", ("hooked_api",))])
        use.load_sources(s.rt, ADMIN, "hooks:\n  alertmanager: {subject_labels: [service]}\n")
        yield s, owner
    owner.dispose()


def _alert_facts(owner: sa.Engine) -> list[object]:
    with owner.connect() as c:
        rows = c.execute(
            sa.text(
                "SELECT value, source FROM facts_current "
                "WHERE attribute = 'alert.PoolSaturated' AND subject = :s"
            ),
            {"s": SERVICE},
        )
        return [r.value["v"] for r in rows]


def test_a_real_alertmanager_webhook_opens_the_case(
    live: tuple[Server, sa.Engine],
    exporter: Exporter,
    start_prometheus: StartPrometheus,
    start_alertmanager: StartAlertmanager,
) -> None:
    server, owner = live
    token = use.create_token(server.rt, ADMIN, "alertmanager", role="source").token
    alertmanager = start_alertmanager(f"{server.base}/v1/hooks/alertmanager", token=token)
    exporter.set(SERVICE, in_use=19.4, max=20)
    start_prometheus(rules=RULES, alertmanager=alertmanager.address)

    def cases() -> list[tuple[str, list[str], str, str]]:
        with owner.connect() as c:
            rows = c.execute(sa.text("SELECT id, subjects, status, opened_by FROM cases"))
            return [(r.id, list(r.subjects), r.status, r.opened_by) for r in rows]

    (case,) = poll(cases, bool, 60, "the case the alert opens")
    assert case[0].startswith("am-poolsaturated-")
    assert case[1:] == ([SERVICE], "open", "alertmanager")
    assert poll(lambda: _alert_facts(owner), bool, 10, "alert.PoolSaturated") == [True]
    with owner.connect() as c:
        refused = c.execute(
            sa.text("SELECT count(*) FROM audit_log WHERE action = 'hook_refused'")
        ).scalar_one()
    assert refused == 0

    exporter.set(SERVICE, in_use=2.4)
    assert poll(lambda: _alert_facts(owner), lambda v: v == [False], 60, "resolved") == [False]
    assert [c[2] for c in cases()] == ["open"]  # resolved observes; the case stays for its outcome
