"""The real SRE stack for the connector tests (``tests/stack.py``): one exporter and
one Prometheus per test module (a fresh Prometheus takes about 5 s to its first
sample), factories for the parts a test configures itself (rules, Alertmanager,
a webhook receiver), each stopped at the end of its scope.

Tests sharing the module's exporter and Prometheus use a ``service`` label of their
own, so what one test sets never answers another's query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import pytest

from tests.stack import Alertmanager, Exporter, Prometheus, WebhookReceiver


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    """A ``prometheus_client`` exporter on the loopback, for the whole module."""
    with Exporter() as e:
        yield e


@pytest.fixture(scope="module")
def prometheus(exporter: Exporter) -> Iterator[Prometheus]:
    """Debian's Prometheus scraping ``exporter`` every second, for the whole module
    (no rules, no Alertmanager; use ``start_prometheus`` for those, or to stop it)."""
    with Prometheus([exporter.address]) as p:
        yield p


StartPrometheus = Callable[..., Prometheus]
StartAlertmanager = Callable[..., Alertmanager]


class _Stoppable(Protocol):
    def stop(self) -> None: ...


S = TypeVar("S", bound=_Stoppable)


def _stopped_after(make: Callable[..., S]) -> Iterator[Callable[..., S]]:
    """A fixture's body yielding ``make`` as the test's starter: what it started is
    stopped, in the order it was started, when the test is done."""
    started: list[S] = []

    def start(*args: Any, **kwargs: Any) -> S:
        made = make(*args, **kwargs)
        started.append(made)
        return made

    yield start
    for made in started:
        made.stop()


@pytest.fixture
def start_prometheus(exporter: Exporter) -> Iterator[StartPrometheus]:
    """``start_prometheus(rules=None, alertmanager=None, targets=None)``: a Prometheus
    of the test's own (scraping ``exporter`` unless ``targets`` says otherwise),
    stopped after the test."""

    def make(
        *,
        rules: str | None = None,
        alertmanager: str | None = None,
        targets: Sequence[str] | None = None,
    ) -> Prometheus:
        return Prometheus(
            [exporter.address] if targets is None else targets,
            rules=rules,
            alertmanager=alertmanager,
        )

    yield from _stopped_after(make)


@pytest.fixture
def start_alertmanager() -> Iterator[StartAlertmanager]:
    """``start_alertmanager(webhook_url, token=None, send_resolved=True, ...)``: an
    Alertmanager delivering every alert to one webhook, stopped after the test."""
    yield from _stopped_after(Alertmanager)


@pytest.fixture
def webhook_receiver() -> Iterator[WebhookReceiver]:
    """A loopback HTTP server recording every POST (path, headers, JSON body)."""
    with WebhookReceiver() as r:
        yield r
