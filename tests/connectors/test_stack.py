"""The real stack the connector tests stand on (tests/stack.py): Prometheus answers
the exporter's values as they change, a zero gauge answers "+Inf", and an alerting
rule reaches a webhook through Alertmanager, firing and then resolved, with a
bearer token."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from datetime import datetime

import pytest

import tests.stack
from tests.stack import (
    Delivery,
    Exporter,
    Prometheus,
    StackError,
    WebhookReceiver,
    by_label,
)

from .conftest import StartAlertmanager, StartPrometheus

RATIO = "max by (service) (db_pool_in_use / db_pool_max)"


def test_a_query_answers_the_exporters_ratio_as_it_changes(
    exporter: Exporter, prometheus: Prometheus
) -> None:
    exporter.set("payment-api", in_use=19.4, max=20)
    result = prometheus.wait_for(RATIO, lambda r: "payment-api" in by_label(r))
    assert float(by_label(result)["payment-api"]) == pytest.approx(0.97)
    [sample] = [s for s in result if s["metric"]["service"] == "payment-api"]
    assert sample["metric"] == {"service": "payment-api"}  # max by keeps only the label
    assert abs(sample["value"][0] - time.time()) < 60  # the evaluation's own timestamp

    exporter.set("payment-api", in_use=2.4)
    result = prometheus.wait_for(
        RATIO, lambda r: float(by_label(r)["payment-api"]) == pytest.approx(0.12)
    )

    exporter.observe_latency("payment-api", 0.25, count=4)
    count = prometheus.wait_for(
        'http_request_duration_seconds_count{service="payment-api"}',
        lambda r: by_label(r).get("payment-api") == "4",
    )
    assert count[0]["metric"]["job"] == "exporter"

    exporter.remove("payment-api")  # the series goes stale at the next scrape
    prometheus.wait_for(RATIO, lambda r: "payment-api" not in by_label(r))


def test_a_division_by_a_zero_gauge_answers_inf_and_zero_by_zero_nan(
    exporter: Exporter, prometheus: Prometheus
) -> None:
    exporter.set("zero-api", in_use=5, max=0)
    exporter.set("empty-api", in_use=0, max=0)
    result = prometheus.wait_for(RATIO, lambda r: {"zero-api", "empty-api"} <= by_label(r).keys())
    values = by_label(result)
    assert values["zero-api"] == "+Inf"
    assert values["empty-api"] == "NaN"


def test_a_bad_query_is_an_error_answer_and_a_missing_series_an_empty_vector(
    prometheus: Prometheus,
) -> None:
    bad = prometheus.query("max by (service (")
    assert bad["status"] == "error"
    assert bad["errorType"] == "bad_data"
    assert prometheus.vector('db_pool_max{service="nobody"}') == []
    with pytest.raises(StackError, match="not after"):
        prometheus.wait_for('db_pool_max{service="nobody"}', bool, timeout=0.3)


RULES = """
groups:
  - name: pool
    rules:
      - alert: PoolSaturated
        expr: max by (service) (db_pool_in_use{service="alerting-api"}
              / db_pool_max{service="alerting-api"}) > 0.9
        for: 0s
        labels: {severity: page}
        annotations: {summary: "{{ $labels.service }} pool at {{ $value }}"}
"""


def _status(status: str) -> Callable[[Delivery], bool]:
    """A webhook delivery of that status ("firing", "resolved")."""
    return lambda d: isinstance(d.body, dict) and d.body.get("status") == status


def test_an_alerting_rule_fires_and_resolves_through_alertmanager_with_a_bearer_token(
    exporter: Exporter,
    start_prometheus: StartPrometheus,
    start_alertmanager: StartAlertmanager,
    webhook_receiver: WebhookReceiver,
) -> None:
    alertmanager = start_alertmanager(webhook_receiver.url, token="source-token-1")
    exporter.set("alerting-api", in_use=19.4, max=20)
    started = time.monotonic()
    start_prometheus(rules=RULES, alertmanager=alertmanager.address)

    firing: Delivery = webhook_receiver.wait_for(_status("firing"))
    assert firing.path == "/hook"
    assert firing.headers["authorization"] == "Bearer source-token-1"
    assert firing.headers["content-type"].startswith("application/json")
    body = firing.body
    assert body["version"] == "4"
    assert body["receiver"] == "webhook"
    assert body["groupLabels"] == {"alertname": "PoolSaturated", "service": "alerting-api"}
    assert body["commonLabels"]["severity"] == "page"
    assert body["groupKey"]
    [alert] = body["alerts"]
    assert alert["status"] == "firing"
    assert alert["labels"] == {
        "alertname": "PoolSaturated",
        "service": "alerting-api",
        "severity": "page",
    }
    assert alert["annotations"]["summary"] == "alerting-api pool at 0.97"
    assert alert["endsAt"] == "0001-01-01T00:00:00Z"  # firing: no end yet
    assert alert["fingerprint"]
    first_webhook = firing.received - started

    exporter.set("alerting-api", in_use=2.4)
    dropped = time.monotonic()
    resolved = webhook_receiver.wait_for(_status("resolved"))
    assert resolved.headers["authorization"] == "Bearer source-token-1"
    [gone] = resolved.body["alerts"]
    assert gone["status"] == "resolved"
    assert gone["fingerprint"] == alert["fingerprint"]
    assert gone["startsAt"] == alert["startsAt"]
    ends = datetime.fromisoformat(gone["endsAt"])
    assert ends > datetime.fromisoformat(gone["startsAt"])
    print(
        f"first webhook {first_webhook:.1f} s after Prometheus started; "
        f"resolved {resolved.received - dropped:.1f} s after the value dropped"
    )


def test_a_binary_that_cannot_start_is_an_error_with_its_log(exporter: Exporter) -> None:
    bad = "groups: [{name: pool, rules: [{alert: Broken, expr: 'max by ('}]}]"
    with pytest.raises(StackError, match="prometheus did not become ready") as failed:
        Prometheus([exporter.address], rules=bad)
    assert "Broken" in str(failed.value)
    assert "unclosed left parenthesis" in str(failed.value)


def test_a_port_taken_meanwhile_is_retried_on_another(
    monkeypatch: pytest.MonkeyPatch, webhook_receiver: WebhookReceiver
) -> None:
    """Between free_port() and the bind another worker may take the port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1], tests.stack.free_port()])
        monkeypatch.setattr(tests.stack, "free_port", lambda: next(ports))
        with tests.stack.Alertmanager(webhook_receiver.url) as alertmanager:
            assert alertmanager.port != taken.getsockname()[1]
            assert alertmanager.alerts() == []
