"""The world the door tests (HTTP, MCP) share: a tenant with a schema, an entity,
evidence, and one active precedent, set up through the application layer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

import claims
import factgen
from caveat import app as use
from caveat import db
from predicates import ValueType
from tests.conftest import ADMIN
from tests.stack import free_port

QUERY = "checkout slow, payment api connection pool exhausted"
#: The precedent's request: an episode about payment-api (pool max 20) in case INC-1.
PRECEDENT: dict[str, object] = {
    "kind": "episode",
    "subject": "payment_api",
    "attribute": "restart_restored_service_at",
    "object": "E-1",
    "required": ["config.connection_pool.max eq 20"],
    "evidence": ["E-1"],
    "scope": {"axis": "case", "id": "INC-1"},
    "text": "Payment API pool exhausted at max 20; a restart restored it.",
}


def world(rt: use.Runtime) -> None:
    """The schema (pool max, a configuration), payment-api and evidence E-1."""
    use.declare_schema(
        rt,
        ADMIN,
        [
            factgen.AttributeSpec(
                "config.connection_pool.max", ValueType.parse("int"), content_type="configuration"
            )
        ],
    )
    use.import_entities(rt, ADMIN, [factgen.EntitySpec("payment-api", "service", ("payment_api",))])
    use.add_evidence(rt, ADMIN, "E-1")


def precedent(rt: use.Runtime) -> int:
    """An active precedent about payment-api (pool max 20), written in case INC-1."""
    use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"])
    written = use.write(rt, ADMIN, claims.ItemWrite.model_validate(PRECEDENT))
    use.promote(rt, ADMIN, written.item_id, to="shadow")
    use.promote(rt, ADMIN, written.item_id, to="active")
    return written.item_id


@contextmanager
def two_tenants(db_url: str) -> Iterator[use.Runtime]:
    """Tenants acme and globex with ``world`` each, as the login role (caveat_app);
    the runtime is acme's, ``for_tenant("globex")`` the other's."""
    engine = db.make_app_engine(db_url)
    runtime = use.Runtime.over(engine, "acme")
    try:
        world(runtime)
        world(runtime.for_tenant("globex"))
        yield runtime
    finally:
        engine.dispose()


@contextmanager
def caveat_serve(
    db_url: str, home: Path, log: Path, *args: str, ready_within: float, stop_within: float
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``caveat serve ARGS`` as a subprocess on a free loopback port over ``db_url``
    (tenant acme, the hashing embedder, ``CAVEAT_HOME`` at ``home``, no other
    ``CAVEAT_`` setting of this process), its output in ``log``; its base URL and the
    process once ``/healthz`` answers (within ``ready_within`` seconds, or the test fails
    with the log's tail). Stopped with SIGINT (killed after ``stop_within`` seconds)
    unless it has exited already."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
    env |= {
        "DATABASE_URL": db_url,
        "CAVEAT_HOME": str(home),
        "CAVEAT_EMBEDDER": "hashing",
        "CAVEAT_TENANT": "acme",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "caveat", "serve", "--port", str(port), *args],
            cwd=Path(__file__).resolve().parents[2], env=env, stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_within
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=stop_within)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
