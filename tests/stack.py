"""A real SRE stack on loopback for the connector tests: a ``prometheus_client``
exporter the test changes, Debian's Prometheus scraping it, Debian's Alertmanager
delivering webhooks, and a small webhook receiver that records what arrives.

Everything listens on 127.0.0.1 on a free port and keeps its files in a temporary
directory of its own, so two pytest-xdist workers never meet. Each process is started
by the test and stopped by PID (SIGTERM, then SIGKILL after a timeout), at the end
of its fixture or, failing that, when the test process exits. ``make sre-tools`` (part of
``make test``) installs the two Debian packages.

Field notes (2026-12-03, Debian 12: Prometheus 2.42, Alertmanager 0.25; a 2-core
machine shared with other test runs, load ~0.2-1.5; three runs of each unless said):

- Startup is cheap: ``/-/ready`` answers 0.08-0.10 s after the exec for Prometheus
  and 0.09-0.16 s for Alertmanager; SIGTERM stops either within 20 ms.
- The first sample is what costs: with ``scrape_interval: 1s`` the exporter's value
  is queryable 5.5-5.8 s after Prometheus is started, whatever the interval (it
  looks like the 5 s tick at which Prometheus 2.42 hands discovered targets to its
  scrape manager; there is no flag for it in 2.42). So: one Prometheus per test
  module (the ``prometheus`` fixture), a ``service`` label of its own per test.
- After the first sample a changed gauge is visible in 1.0-1.05 s (one scrape).
- Alerts (rule ``for: 0s``, ``evaluation_interval: 1s``, ``group_wait: 0s``,
  ``group_interval: 1s``): the first webhook arrives 5.4-6.2 s after Prometheus is
  started with the value already over the threshold (the notifier finds its
  Alertmanager through the same kind of tick). The resolved notification arrives
  1.0-1.4 s after the value drops: a scrape, an evaluation, then Alertmanager's
  next flush. Prometheus sends the resolved alert with ``endsAt`` set, so
  Alertmanager's ``resolve_timeout`` (5 min) plays no part.
- Alertmanager 0.25: ``--cluster.listen-address=`` (empty) turns the HA gossip off;
  without it every instance binds 0.0.0.0:9094 and a second worker's fails. The
  webhook is version ``"4"``, its ``endsAt`` is ``0001-01-01T00:00:00Z`` while
  firing, and it carries ``Authorization: Bearer <token>`` when the receiver has
  ``http_config.authorization.credentials``.
- A division by a zero gauge answers the string ``"+Inf"``; 0/0 answers ``"NaN"``.
- tests/connectors/test_stack.py takes 16-19 s in one worker (two Prometheus starts).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self, TypeVar

import httpx
from prometheus_client import CollectorRegistry, Gauge, Histogram, start_http_server

#: The Debian binaries; ``make sre-tools`` installs them.
PROMETHEUS = "prometheus"
ALERTMANAGER = "prometheus-alertmanager"
LOOPBACK = "127.0.0.1"
#: How long a binary may take to answer ``/-/ready`` (it takes a tenth of a second).
READY_TIMEOUT = 30.0
#: Between two polls of a condition.
POLL = 0.1

T = TypeVar("T")


class StackError(RuntimeError):
    """A part of the stack did not start, or a condition was not met in time."""


def free_port() -> int:
    """A TCP port free on the loopback now (the kernel's pick; another process may
    take it before it is used, so the servers below retry on "address in use")."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        port: int = s.getsockname()[1]
        return port


def binary(name: str) -> str:
    """The path of a Debian binary, or a clear error naming the make target."""
    found = shutil.which(name) or shutil.which(name, path="/usr/bin")
    if found is None:
        raise StackError(f"{name} is not installed: run `make sre-tools` (Debian's package)")
    return found


def poll(probe: Callable[[], T], done: Callable[[T], bool], timeout: float, what: str) -> T:
    """Call ``probe`` until ``done`` holds for its answer; its answer, or a
    :class:`StackError` after ``timeout`` seconds naming ``what`` and the last answer."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if done(last):
            return last
        if time.monotonic() > deadline:
            raise StackError(f"{what}: not after {timeout} s; last: {last!r}")
        time.sleep(POLL)


# --------------------------------------------------------------------------- servers


class LoopbackServer:
    """A server answering on the loopback from a thread of its own; ``stop()`` (or
    leaving its ``with`` block) shuts it down and joins the thread."""

    _server: socketserver.TCPServer
    _thread: threading.Thread
    port: int

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        """Serve ``handler`` on a free loopback port, polling for shutdown every 50 ms."""
        server = ThreadingHTTPServer((LOOPBACK, 0), handler)
        self._started(
            server,
            threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            ),
        )
        self._thread.start()

    def _started(self, server: socketserver.TCPServer, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread
        self.port = server.server_address[1]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing (the tests read what they need)."""

    def log_message(self, format: str, *args: object) -> None:
        pass


# --------------------------------------------------------------------------- exporter


class Exporter(LoopbackServer):
    """A ``prometheus_client`` exporter on the loopback with a registry of its own:
    gauges ``db_pool_in_use{service}``, ``db_pool_max{service}`` and a histogram
    ``http_request_duration_seconds{service}``, served by prometheus_client's own
    HTTP server."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.in_use = Gauge(
            "db_pool_in_use",
            "Connections in use",
            ["service"],
            registry=self.registry,
        )
        self.max = Gauge("db_pool_max", "Connection pool size", ["service"], registry=self.registry)
        self.latency = Histogram(
            "http_request_duration_seconds",
            "Request latency",
            ["service"],
            registry=self.registry,
        )
        self._started(*start_http_server(0, addr=LOOPBACK, registry=self.registry))

    @property
    def address(self) -> str:
        """``host:port``, as a scrape target."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}/metrics"

    def set(self, service: str, *, in_use: float | None = None, max: float | None = None) -> None:
        """Set a service's pool gauges (either or both)."""
        if in_use is not None:
            self.in_use.labels(service=service).set(in_use)
        if max is not None:
            self.max.labels(service=service).set(max)

    def observe_latency(self, service: str, seconds: float, count: int = 1) -> None:
        """Record ``count`` requests of ``seconds`` each for a service."""
        child = self.latency.labels(service=service)
        for _ in range(count):
            child.observe(seconds)

    def remove(self, service: str) -> None:
        """Stop exporting a service's series (a subject Prometheus no longer knows)."""
        for metric in (self.in_use, self.max, self.latency):
            with contextlib.suppress(KeyError):
                metric.remove(service)


# --------------------------------------------------------------------------- processes


#: Processes started and not yet stopped, stopped at interpreter exit if a test run
#: ends without its fixtures' teardown.
_running: set[_Process] = set()


@atexit.register
def _stop_all() -> None:
    for process in list(_running):
        process.stop()


class _Process:
    """A binary started on a free loopback port with its files in a temporary
    directory; waits for ``/-/ready``; stopped by PID."""

    name: str = ""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"caveat-{self.name}-"))
        self.log = self.dir / "log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        #: seconds from exec to ``/-/ready``, for the field notes
        self.startup_seconds = 0.0

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _argv(self) -> list[str]:
        raise NotImplementedError

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _start(self) -> None:
        for _attempt in range(3):
            self.port = free_port()
            started = time.monotonic()
            with self.log.open("ab") as log:
                self._proc = subprocess.Popen(
                    self._argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.dir,
                )
            _running.add(self)
            if self._wait_ready():
                self.startup_seconds = time.monotonic() - started
                return
            tail = self.log_tail()
            self.stop(remove=False)
            if "address already in use" not in tail:
                break
        errors = "\n".join(line for line in tail.splitlines() if "level=error" in line)
        shutil.rmtree(self.dir, ignore_errors=True)
        raise StackError(f"{self.name} did not become ready; its log:\n{errors or tail}")

    def _wait_ready(self) -> bool:
        assert self._proc is not None
        deadline = time.monotonic() + READY_TIMEOUT
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    return False
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url}/-/ready").status_code == 200:
                        return True
                time.sleep(0.05)
        return False

    def stop(self, *, remove: bool = True) -> None:
        """SIGTERM by PID, wait, SIGKILL after 10 s; then delete the directory."""
        proc, self._proc = self._proc, None
        _running.discard(self)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Prometheus(_Process):
    """Debian's Prometheus scraping ``targets`` every second (job ``exporter``),
    evaluating ``rules`` (the text of a rule file, optional) every second and
    sending alerts to ``alertmanager`` (``host:port``, optional)."""

    name = "prometheus"

    def __init__(
        self,
        targets: Sequence[str],
        *,
        rules: str | None = None,
        alertmanager: str | None = None,
    ) -> None:
        super().__init__()
        config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [
                {"job_name": "exporter", "static_configs": [{"targets": list(targets)}]}
            ],
        }
        if rules is not None:
            (self.dir / "rules.yml").write_text(rules)
            config["rule_files"] = [str(self.dir / "rules.yml")]
        if alertmanager is not None:
            config["alerting"] = {
                "alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]
            }
        # JSON is YAML: no YAML writer needed
        (self.dir / "prometheus.yml").write_text(json.dumps(config, indent=1))
        self._start()

    def _argv(self) -> list[str]:
        return [
            binary(PROMETHEUS),
            f"--config.file={self.dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.dir / 'data'}",
            f"--web.listen-address={self.address}",
        ]

    def query(self, promql: str) -> dict[str, Any]:
        """The JSON answer of an instant query (``/api/v1/query``), errors included."""
        answer = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=5)
        body: dict[str, Any] = answer.json()
        return body

    def vector(self, promql: str) -> list[dict[str, Any]]:
        """The result list of an instant query that must succeed."""
        body = self.query(promql)
        if body.get("status") != "success":
            raise StackError(f"query {promql!r} failed: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for(
        self,
        promql: str,
        predicate: Callable[[list[dict[str, Any]]], bool],
        timeout: float = 20.0,
    ) -> list[dict[str, Any]]:
        """Poll an instant query until ``predicate`` holds for its result list."""
        try:
            return poll(lambda: self.vector(promql), predicate, timeout, f"query {promql!r}")
        except StackError as e:
            raise StackError(f"{e}\nprometheus log ends:\n{self.log_tail()}") from None

    def alerts(self) -> list[dict[str, Any]]:
        """Prometheus's active alerts (``/api/v1/alerts``)."""
        body = httpx.get(f"{self.url}/api/v1/alerts", timeout=5).json()
        alerts: list[dict[str, Any]] = body["data"]["alerts"]
        return alerts


def by_label(result: list[dict[str, Any]], label: str = "service") -> dict[str, str]:
    """An instant vector as ``{label value: sample value string}``."""
    return {s["metric"].get(label, ""): s["value"][1] for s in result}


class Alertmanager(_Process):
    """Debian's Alertmanager with one route to one webhook receiver (``webhook_url``,
    with a bearer ``token`` if given), short grouping and clustering off."""

    name = "alertmanager"

    def __init__(
        self,
        webhook_url: str,
        *,
        token: str | None = None,
        send_resolved: bool = True,
        group_wait: str = "0s",
        group_interval: str = "1s",
        repeat_interval: str = "4h",
    ) -> None:
        super().__init__()
        webhook: dict[str, Any] = {"url": webhook_url, "send_resolved": send_resolved}
        if token is not None:
            webhook["http_config"] = {"authorization": {"type": "Bearer", "credentials": token}}
        config = {
            "route": {
                "receiver": "webhook",
                "group_by": ["alertname", "service"],
                "group_wait": group_wait,
                "group_interval": group_interval,
                "repeat_interval": repeat_interval,
            },
            "receivers": [{"name": "webhook", "webhook_configs": [webhook]}],
        }
        (self.dir / "alertmanager.yml").write_text(json.dumps(config, indent=1))
        self._start()

    def _argv(self) -> list[str]:
        return [
            binary(ALERTMANAGER),
            f"--config.file={self.dir / 'alertmanager.yml'}",
            f"--storage.path={self.dir / 'data'}",
            f"--web.listen-address={self.address}",
            "--cluster.listen-address=",
        ]

    def alerts(self) -> list[dict[str, Any]]:
        """Alertmanager's alerts (``/api/v2/alerts``)."""
        alerts: list[dict[str, Any]] = httpx.get(f"{self.url}/api/v2/alerts", timeout=5).json()
        return alerts


# --------------------------------------------------------------------------- webhooks


@dataclass(frozen=True)
class Delivery:
    """One request the receiver got: path, headers (lower-case names), JSON body."""

    path: str
    headers: dict[str, str]
    body: Any
    received: float  # time.monotonic()


class WebhookReceiver(LoopbackServer):
    """A tiny HTTP server on the loopback that answers 200 to every POST and
    records it, for Alertmanager to deliver to."""

    def __init__(self) -> None:
        self.deliveries: list[Delivery] = []
        self._changed = threading.Condition()
        receiver = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw.decode(errors="replace")
                delivery = Delivery(
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                    time.monotonic(),
                )
                with receiver._changed:
                    receiver.deliveries.append(delivery)
                    receiver._changed.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._serve(Handler)

    def url_for(self, path: str = "/hook") -> str:
        return f"http://{LOOPBACK}:{self.port}{path}"

    @property
    def url(self) -> str:
        return self.url_for()

    def wait_for(self, predicate: Callable[[Delivery], bool], timeout: float = 30.0) -> Delivery:
        """The first delivery (received so far or later) for which ``predicate``
        holds; a :class:`StackError` listing what did arrive after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for d in self.deliveries:
                    if predicate(d):
                        return d
                left = deadline - time.monotonic()
                if left <= 0:
                    got = [(d.path, d.body) for d in self.deliveries]
                    raise StackError(f"no matching delivery after {timeout} s; got {got!r}")
                self._changed.wait(left)


__all__ = [
    "Alertmanager",
    "Delivery",
    "Exporter",
    "LoopbackServer",
    "Prometheus",
    "QuietHandler",
    "StackError",
    "WebhookReceiver",
    "binary",
    "by_label",
    "free_port",
    "poll",
]
