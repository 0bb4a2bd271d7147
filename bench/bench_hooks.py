"""Hook deliveries end to end (issue 24): ``python -m bench hooks [--n N]``.

Side by side in one run, on one throwaway embedded PostgreSQL:

- **over HTTP**: ``caveat serve`` in a subprocess on loopback (as ``caveat_app``); a
  client POSTs an Alertmanager firing notification (a new alert group each time) to
  ``/v1/hooks/alertmanager`` with a ``source`` token, and a GitHub
  ``deployment_status`` (a new deployment each time) to ``/v1/hooks/github`` signed
  with the webhook secret: authentication, the tenant's ``hooks:``, translation and
  ``deliver_hook``'s one transaction, and the HTTP round trip;
- **directly**: the use cases the same payloads map to, called in process through
  ``caveat.app`` as ``caveat_app``: ``open_case`` then ``observe`` (what an operator
  types for an alert), and ``record_event`` (a deploy).

Deliveries alternate with the direct calls (so a drift in the machine's load falls
on both alike); the figure is each path's median and p95, and the ratio of medians
(the issue's bar: at most 1.5x). Prints a Markdown block for docs/performance.md.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx

import factgen
from bench.bench_load import TENANT, serving
from caveat import app as use
from caveat import connectors, db
from predicates import ValueType

ADMIN = factgen.Actor("bench-admin", "admin")
SECRET = "bench-github-secret"
SOURCES = """\
hooks:
  alertmanager: {subject_labels: [service]}
  github:
    repositories: {acme/payments: [payment-api]}
    secret_env: CAVEAT_BENCH_GITHUB_SECRET
"""


def _alert(i: int, at: datetime) -> bytes:
    stamp = at.isoformat().replace("+00:00", "Z")
    return json.dumps(
        {
            "version": "4",
            "groupKey": f'{{}}:{{alertname="PoolExhausted",n="{i}"}}',
            "status": "firing",
            "receiver": "caveat",
            "groupLabels": {"alertname": "PoolExhausted"},
            "commonLabels": {"alertname": "PoolExhausted", "service": "payment-api"},
            "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093",
            "alerts": [
                {
                    "status": "firing",
                    "labels": {"alertname": "PoolExhausted", "service": "payment-api"},
                    "annotations": {},
                    "startsAt": stamp,
                    "endsAt": "0001-01-01T00:00:00Z",
                    "generatorURL": "",
                    "fingerprint": f"{i:016x}",
                }
            ],
        }
    ).encode()


def _deployment(i: int, at: datetime) -> bytes:
    return json.dumps(
        {
            "action": "created",
            "deployment_status": {
                "id": 10_000 + i,
                "state": "success",
                "environment": "production",
                "created_at": at.isoformat().replace("+00:00", "Z"),
            },
            "deployment": {
                "id": i,
                "environment": "production",
                "payload": {"config": {"connection_pool": {"max": 20 + i % 80}}},
            },
            "repository": {"full_name": "acme/payments"},
        }
    ).encode()


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def _p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.95) - 1)]


def main(argv: list[str]) -> int:
    """Run both paths for each hook and print the figures; exit 1 over the bar."""
    parser = argparse.ArgumentParser(prog="python -m bench hooks")
    parser.add_argument("--n", type=int, default=200, help="deliveries per hook and path")
    parser.add_argument("--bar", type=float, default=1.5)
    args = parser.parse_args(argv)
    os.environ["CAVEAT_BENCH_GITHUB_SECRET"] = SECRET
    with db.temporary_server() as server:
        url = db.create_database(server, "caveat_hooks_bench")
        db.migrate(url)
        engine = db.make_app_engine(url)
        rt = use.Runtime.over(engine, TENANT)
        use.declare_schema(
            rt,
            ADMIN,
            [
                factgen.AttributeSpec("alert.PoolExhausted", ValueType.parse("bool")),
                factgen.AttributeSpec(
                    "config.connection_pool.max",
                    ValueType.parse("int"),
                    content_type="configuration",
                ),
            ],
        )
        use.import_entities(rt, ADMIN, [factgen.EntitySpec("payment-api", "service", ())])
        use.load_sources(rt, ADMIN, SOURCES)
        token = use.create_token(rt, ADMIN, "alertmanager", role="source").token
        operator = use.register_principal(rt, ADMIN, "sre-oncall", role="sme")
        figures: dict[str, dict[str, list[float]]] = {
            "alertmanager": {"http": [], "direct": [], "inproc": []},
            "github": {"http": [], "direct": [], "inproc": []},
        }
        floor: list[float] = []
        # no background round (embedding, sweeps) competing with either path
        with (
            serving(url, every=3600) as base,
            httpx.Client(base_url=base, timeout=30) as client,
        ):
            auth = {"Authorization": f"Bearer {token}"}
            at = datetime.now(UTC) - timedelta(minutes=1)
            for warm in range(5):  # connections, caches, the world of both paths
                client.post("/v1/hooks/alertmanager", content=_alert(-1 - warm, at), headers=auth)
                use.open_case(rt, operator, f"warm-{warm}", subjects=["payment-api"])
            for i in range(args.n):
                body = _alert(i, at)
                r: list[httpx.Response] = []
                figures["alertmanager"]["http"].append(
                    _timed(
                        lambda body=body, r=r: r.append(  # type: ignore[misc]
                            client.post("/v1/hooks/alertmanager", content=body, headers=auth)
                        )
                    )
                )
                assert r[0].status_code == 200, r[0].text

                def direct(i: int = i) -> None:
                    use.open_case(rt, operator, f"direct-{i}", subjects=["payment-api"])
                    use.observe(
                        rt,
                        operator,
                        [factgen.Observation("payment-api", "alert.PoolExhausted", True, "op")],
                        at=at,
                    )

                figures["alertmanager"]["direct"].append(_timed(direct))
                inproc = _alert(args.n + i, at)
                figures["alertmanager"]["inproc"].append(
                    _timed(
                        lambda inproc=inproc: connectors.receive(  # type: ignore[misc]
                            rt, "alertmanager", body=inproc, headers=auth
                        )
                    )
                )
                floor.append(_timed(lambda: client.get("/healthz")))

                deploy = _deployment(i, at)
                signature = (
                    "sha256=" + hmac.new(SECRET.encode(), deploy, hashlib.sha256).hexdigest()
                )
                headers = {
                    "X-GitHub-Event": "deployment_status",
                    "X-GitHub-Delivery": f"bench-{i}",
                    "X-Hub-Signature-256": signature,
                    "Content-Type": "application/json",
                }
                g: list[httpx.Response] = []
                figures["github"]["http"].append(
                    _timed(
                        lambda deploy=deploy, headers=headers, g=g: g.append(  # type: ignore[misc]
                            client.post(
                                f"/v1/hooks/github?tenant={TENANT}", content=deploy, headers=headers
                            )
                        )
                    )
                )
                assert g[0].status_code == 200, g[0].text
                again = _deployment(args.n + i, at)
                figures["github"]["inproc"].append(
                    _timed(
                        lambda again=again, i=i: connectors.receive(  # type: ignore[misc]
                            rt,
                            "github",
                            body=again,
                            headers={
                                "x-github-event": "deployment_status",
                                "x-github-delivery": f"inproc-{i}",
                                "x-hub-signature-256": "sha256="
                                + hmac.new(SECRET.encode(), again, hashlib.sha256).hexdigest(),
                            },
                        )
                    )
                )
                figures["github"]["direct"].append(
                    _timed(
                        lambda i=i: use.record_event(  # type: ignore[misc]
                            rt,
                            operator,
                            type="deploy",
                            subjects=["payment-api"],
                            changes={"config.connection_pool.max": 20 + i % 80},
                            occurred_at=at,
                        )
                    )
                )
        engine.dispose()
    ok = True
    print(f"### Hooks end to end ({args.n} deliveries per hook and path)\n")
    print(
        "| hook | over HTTP, median (p95) ms | the use case directly, median (p95) ms "
        "| ratio | in process (`connectors.receive`), median ms |"
    )
    print("|---|---|---|---|---|")
    for kind, label in (
        ("alertmanager", "Alertmanager firing → `open_case` + `observe`"),
        ("github", "GitHub `deployment_status` (signed) → `record_event`"),
    ):
        http, direct = figures[kind]["http"], figures[kind]["direct"]
        ratio = statistics.median(http) / statistics.median(direct)
        ok &= ratio <= args.bar
        print(
            f"| {label} | {statistics.median(http):.1f} ({_p95(http):.1f}) "
            f"| {statistics.median(direct):.1f} ({_p95(direct):.1f}) | {ratio:.2f}x "
            f"| {statistics.median(figures[kind]['inproc']):.1f} |"
        )
    print(
        f"\nThe HTTP floor, `GET /healthz` (one `SELECT 1`) on the same server: "
        f"{statistics.median(floor):.1f} ms median ({_p95(floor):.1f} p95)."
    )
    print(f"\nbar: {args.bar}x; {'within' if ok else 'OVER'}")
    return 0 if ok else 1
