"""Load (issue 14, figure 6): concurrent agents over loopback HTTP, an SME revoking and
deploy events fanning out, for a bounded time.

``python -m bench load [--agents 8] [--seconds 60] [--seed 14006] [--items 20000]
[--corpus PATH] [--json]``

A throwaway embedded PostgreSQL (or ``DATABASE_URL``'s server, as a superuser: the lock
watch sets three server settings for the run and resets them) gets a database of its
own, migrated to head and loaded with ``bench recall``'s generated store (``--items``
over 20 tenants, the measured tenant ``bench`` holding half, about 50 items a subject,
every item ``active``; its texts and the agents' queries from the incident summaries of
bench/corpus.py, ``--corpus PATH``). ``caveat serve`` then runs as a subprocess on 127.0.0.1 and a
free port, logged in as ``caveat_app`` (the application role, under forced row-level
security), with no embedder (lexical + entity channels; ``--embedder`` to change it)
and its background round every 2 s.

Against it, ``--agents`` threads, each with an API token of its own (role ``agent``),
work incidents: open a case, observe, then rounds of recall, record the use of what
came back, check the context, write an observation into the case (some derived from a
context item), and close the case. An SME thread revokes a recalled item every
``--revoke-every`` seconds; a CI thread posts a deploy CloudEvent that changes
``config.connection_pool.max`` of a subject the agents work on every
``--deploy-every`` seconds (the lifecycle re-opens or marks for verification the items
that depend on it). Every response is recorded: call, status, latency, and for a write
the acknowledged item.

Afterwards, the four properties (``check``):

1. **zero errors**: every response 2xx, no timeout, no exception. Refusals the API
   answers inside a 2xx (a write the gate refuses, a used id ``record_use`` refuses, an
   item the context guard drops) are counted apart, by code.
2. **no lost writes**: every acknowledged write is read back by id as the SME (its
   subject, attribute and object), and its ``write`` or ``supersede`` row is in the
   audit log (``GET /v1/audit`` per agent).
3. **no recall waited on a lock**: measured by ``LockWatch`` on the server: PostgreSQL
   logs every lock wait longer than ``deadlock_timeout`` (set to 1 ms, with
   ``log_lock_waits``), and each backend's ``application_name`` names the use case its
   transaction runs (``caveat:recall``, set by the runtime); a sampler also polls
   ``pg_stat_activity`` for backends waiting on a lock. Before the run, a control holds
   an ``ACCESS EXCLUSIVE`` lock on ``items`` while an agent recalls: the watch must
   report that recall's wait, or the run fails (the detector can fail).
4. p50 / p95 / max per call and throughput: the report.

The database and the server are the run's own, stopped and deleted afterwards.
``tests/caveat/test_load.py`` runs the same harness small (a few agents, a few seconds,
a small world) in ``make test``. Figures in docs/reliability.md, section 6.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import sqlalchemy as sa

import claims
import factgen
import recall as recall_api
from bench import corpus as bench_corpus
from caveat import app as use
from caveat import db

#: The tenant the load runs in (``bench recall``'s measured tenant).
TENANT = "bench"
ADMIN = factgen.Actor("load-admin", "admin")
#: What an agent writes about (fact attributes of the claims benchmark's kind).
WRITE_ATTRIBUTES = (
    "error_count_peaked",
    "pool_wait_ms_peaked",
    "failed_checkouts_count",
    "restarted_pods",
    "lag_returned_within_s",
)
#: The calls an agent makes, and the SME's and CI's.
AGENT_CALLS = (
    "open_case",
    "observe",
    "recall",
    "record_use",
    "check_context",
    "write",
    "close_case",
)
CALLS = (*AGENT_CALLS, "revoke", "deploy")
POOL_VALUES = (10, 20, 50, 100, 200)


# --- the world -----------------------------------------------------------------------


@dataclass
class World:
    """What the agents work on: subjects with items, public evidence, queries."""

    subjects: list[str]
    evidence: list[str]
    queries: list[str]
    items: int


SMALL_TEXTS = (
    "connection pool exhausted under checkout load; requests queued then timed out",
    "database failover left stale connections; error rate rose until the pool recycled",
    "cache stampede after a deploy doubled latency on the payment path",
    "retry storm amplified load on the primary until the queue drained",
    "a config change lowered the pool max and checkouts started failing",
)
SMALL_QUERIES = (
    "pool exhausted checkout timeouts",
    "stale connections after failover",
    "latency doubled after deploy cache",
    "retries amplify load queue",
    "checkouts failing after config change",
)


def small_world(url: str, *, subjects: int = 4, per_subject: int = 12, seed: int = 0) -> World:
    """A small store written through the application layer (as caveat_app, the
    operator): the benchmark schema, ``subjects`` services with their pool max observed,
    public evidence, and ``per_subject`` active items each whose conditions hold."""
    from bench.bench_recall import _schema_specs

    rng = random.Random(seed)
    engine = db.make_app_engine(url)
    try:
        rt = use.Runtime.over(engine, TENANT)
        use.declare_tenant(rt, ADMIN)
        use.declare_schema(rt, ADMIN, _schema_specs())
        names = [f"checkout-svc-{i:02d}" for i in range(subjects)]
        use.import_entities(rt, ADMIN, [factgen.EntitySpec(n, "service") for n in names])
        evidence = [f"PM-{i:03d}" for i in range(4)]
        for eid in evidence:
            use.add_evidence(rt, ADMIN, eid)
        pool = {n: rng.choice(POOL_VALUES) for n in names}
        use.observe(
            rt,
            ADMIN,
            [
                factgen.Observation(n, "config.connection_pool.max", v, "seed")
                for n, v in pool.items()
            ],
        )
        use.open_case(rt, ADMIN, "SEED-1", subjects=names)
        requests = [
            claims.ItemWrite.model_validate(
                {
                    "kind": "fact",
                    "subject": n,
                    "attribute": WRITE_ATTRIBUTES[k % len(WRITE_ATTRIBUTES)] + f"_{k}",
                    "object": rng.randint(1, 5000),
                    "required": [f"config.connection_pool.max eq {pool[n]}"],
                    "evidence": [rng.choice(evidence)],
                    "scope": {"axis": "case", "id": "SEED-1"},
                    "text": f"{n}: {SMALL_TEXTS[k % len(SMALL_TEXTS)]}",
                }
            )
            for n in names
            for k in range(per_subject)
        ]
        written = use.write_batch(rt, ADMIN, requests).outcomes
        ids = [o.item_id for o in written if o.item_id is not None]
        assert len(ids) == len(requests), written
        for item in ids:
            use.promote(rt, ADMIN, item, to="shadow")
            use.promote(rt, ADMIN, item, to="active")
    finally:
        engine.dispose()
    return World(names, evidence, list(SMALL_QUERIES), len(ids))


def big_world(url: str, *, items: int, seed: int, show: bool = True) -> World:
    """``bench recall``'s generated store (``items`` over 20 tenants, half in ``bench``)."""
    from bench import bench_recall as br

    corpus = br.load(url, items, seed, show=show)
    rng = random.Random(seed)
    return World(
        corpus.measured_subjects,
        [f"PM-{i:03d}" for i in range(12)],
        br.phrases(200, rng),
        corpus.measured_items,
    )


@dataclass
class Tokens:
    agents: list[str]
    sme: str
    ci: str


def tokens(url: str, agents: int) -> Tokens:
    """API tokens made through the application layer: one per agent (role agent,
    capability ``incidents``), an SME's and the CI's (which posts deploy events)."""
    engine = db.make_app_engine(url)
    try:
        rt = use.Runtime.over(engine, TENANT)
        made = [
            use.create_token(
                rt, ADMIN, f"agent-load-{i:02d}", role="agent", capabilities=["incidents"]
            ).token
            for i in range(agents)
        ]
        sme = use.create_token(rt, ADMIN, "sme-load", role="sme", capabilities=["incidents"])
        ci = use.create_token(rt, ADMIN, "ci-deploy", role="agent")
    finally:
        engine.dispose()
    return Tokens(made, sme.token, ci.token)


# --- the server ----------------------------------------------------------------------


SERVE = (sys.executable, "-m", "caveat", "serve", "--host", "127.0.0.1")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def serving(
    url: str,
    *,
    embedder: str = "none",
    every: float = 2.0,
    workers: int | None = None,
    code: Path | None = None,
) -> Iterator[str]:
    """``caveat serve`` in a subprocess on loopback over the database at ``url`` (the
    owner's URL: the server logs in as caveat_app itself), with ``workers`` processes
    (None: the server's default, the machine's cores); yields its base URL and stops it
    (SIGINT, then SIGKILL after 15 s) afterwards. ``code``: a checkout whose packages the
    server imports instead of this one's (``worktree``: the base commit of a comparison),
    with this interpreter and its installed libraries."""
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="caveat-load-") as home:
        env = {
            **os.environ,
            "DATABASE_URL": url,
            "CAVEAT_HOME": home,
            "CAVEAT_TENANT": TENANT,
            "CAVEAT_EMBEDDER": embedder,
        }
        if code is not None:
            env["PYTHONPATH"] = str(code)
        log = Path(home) / "serve.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    *SERVE,
                    "--port",
                    str(port),
                    "--every",
                    str(every),
                    *(() if workers is None else ("--workers", str(workers))),
                ],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=code,
            )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"caveat serve exited: {log.read_text()[-2000:]}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"caveat serve did not start: {log.read_text()[-2000:]}")
                time.sleep(0.1)
            yield base
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            text = log.read_text(errors="replace")
            if "Traceback" in text:  # a 500's cause: the server's own account
                print(f"caveat serve's log:\n{text[-20000:]}", file=sys.stderr)


# --- the lock watch ------------------------------------------------------------------

_WAIT_LINE = re.compile(
    r"app=(?P<app>\S*) LOG:\s+process (?P<pid>\d+) still waiting for (?P<what>.+?) after "
    r"(?P<ms>[\d.]+) ms"
)
_SAMPLE = """
SELECT a.pid, coalesce(a.application_name, ''), coalesce(a.wait_event, ''),
       left(a.query, 160), pg_blocking_pids(a.pid)
FROM pg_stat_activity a
WHERE a.wait_event_type = 'Lock' AND a.datname = current_database()
  AND a.pid <> pg_backend_pid()
"""


@dataclass(frozen=True)
class Wait:
    """A backend seen waiting on a heavyweight lock: by the server log or a sample."""

    source: str  # "log" or "sample"
    app: str  # application_name: caveat:<use case>, or caveat for the untagged
    what: str
    pid: int


def libpq(url: str) -> str:
    """A SQLAlchemy URL as libpq conninfo, for psycopg."""
    return (
        sa.make_url(url)
        .render_as_string(hide_password=False)
        .replace("postgresql+psycopg://", "postgresql://")
    )


class LockWatch:
    """Every lock wait on the server, with the use case of the waiting transaction.

    ``arm`` (as a superuser: the run's own server) turns on ``log_lock_waits`` with a
    1 ms ``deadlock_timeout`` and puts ``application_name`` into the log line prefix.
    Between ``start`` and ``stop``, the log's new lines are read back through
    ``pg_read_file`` (the embedded server logs to ``log`` in its data directory; on
    another server the log part is reported unavailable), and a thread samples
    ``pg_stat_activity`` every ``every`` seconds for backends whose wait is a lock.
    """

    def __init__(self, url: str, every: float = 0.01) -> None:
        self.dsn = libpq(url)
        self.every = every
        self.log_available = False
        self._offset = 0
        self._samples: list[Wait] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.sampled = 0

    def arm(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            c.execute("ALTER SYSTEM SET log_lock_waits = on")
            c.execute("ALTER SYSTEM SET deadlock_timeout = '1ms'")
            c.execute("ALTER SYSTEM SET log_line_prefix = '%m [%p] app=%a '")
            c.execute("SELECT pg_reload_conf()")
            time.sleep(0.2)  # the postmaster signals its children
            assert c.execute("SHOW log_lock_waits").fetchone() == ("on",)

    def disarm(self) -> None:
        """The three settings back to the server's own (``DATABASE_URL``'s server keeps
        its configuration)."""
        with psycopg.connect(self.dsn, autocommit=True) as c:
            for name in ("log_lock_waits", "deadlock_timeout", "log_line_prefix"):
                c.execute(f"ALTER SYSTEM RESET {name}")
            c.execute("SELECT pg_reload_conf()")

    def _log_size(self, c: psycopg.Connection[Any]) -> int | None:
        try:
            row = c.execute("SELECT size FROM pg_stat_file('log', true)").fetchone()
        except psycopg.Error:
            return None
        return None if row is None or row[0] is None else int(row[0])

    def start(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            size = self._log_size(c)
        self.log_available = size is not None
        self._offset = size or 0
        self._samples = []
        self.sampled = 0
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as c:
            while not self._stop.is_set():
                for pid, app, event, query, blockers in c.execute(_SAMPLE).fetchall():
                    what = f"{event} (blocked by {blockers}): {query}"
                    self._samples.append(Wait("sample", app, what, pid))
                self.sampled += 1
                self._stop.wait(self.every)

    def stop(self) -> list[Wait]:
        """The waits seen since ``start``: the log's, then the samples'."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        waits: list[Wait] = []
        with psycopg.connect(self.dsn, autocommit=True) as c:
            time.sleep(0.2)  # the log is written by the backends themselves; let it land
            size = self._log_size(c)
            if size is not None and size > self._offset:
                row = c.execute(
                    "SELECT pg_read_file('log', %s, %s)", [self._offset, size - self._offset]
                ).fetchone()
                text = row[0] if row else ""
                for m in _WAIT_LINE.finditer(text):
                    waits.append(Wait("log", m["app"], m["what"], int(m["pid"])))
        return waits + self._samples


def control(
    watch: LockWatch, base: str, agent: str, subject: str, hold: float = 0.3
) -> dict[str, int]:
    """The watch's control: an ACCESS EXCLUSIVE lock on ``items``, held by the owner
    while an agent's recall runs, must show up as a recall's wait. The lock is held until
    the recall is waiting for it (seen by a query of the control's own, at most 20 s),
    then ``hold`` seconds more, so a loaded machine cannot let the recall arrive after the
    lock is gone. The recall waits the watch reported, by source (``log``, ``sample``):
    the run needs one from each (from the samples alone when the log is unavailable)."""
    watch.start()
    answer: list[int] = []
    with psycopg.connect(watch.dsn) as owner, psycopg.connect(watch.dsn, autocommit=True) as c:
        owner.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")

        def ask() -> None:
            with httpx.Client(base_url=base, timeout=30) as client:
                res = client.get(
                    "/v1/recall",
                    params={"query": "pool exhausted", "subject": subject},
                    headers={"Authorization": f"Bearer {agent}"},
                )
                answer.append(res.status_code)

        thread = threading.Thread(target=ask)
        thread.start()
        deadline = time.monotonic() + 20
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        waiting += " AND application_name = 'caveat:recall'"
        while time.monotonic() < deadline:
            row = c.execute(waiting).fetchone()
            if row and row[0]:
                break
            time.sleep(0.01)
        time.sleep(hold)
        owner.rollback()
    thread.join(30)
    waits = watch.stop()
    assert answer == [200], answer
    seen = Counter(w.source for w in waits if w.app == "caveat:recall")
    return {"log": seen["log"], "sample": seen["sample"]}


# --- the load --------------------------------------------------------------------------


@dataclass
class Ack:
    """An acknowledged write: what the agent was told, and what it asked for."""

    item_id: int
    agent: int
    subject: str
    attribute: str
    object: Any


@dataclass
class Record:
    """Everything the clients saw, shared by their threads (appends are atomic)."""

    #: names this run's cases and events apart from another run's on the same store
    tag: str = ""
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    refusals: Counter[str] = field(default_factory=Counter)
    acks: list[Ack] = field(default_factory=list)
    recalled: list[int] = field(default_factory=list)
    revoked: list[int] = field(default_factory=list)
    reopened_by_revocations: int = 0
    deploys: int = 0
    reopened_by_deploys: int = 0
    incidents: int = 0

    def call(
        self, client: httpx.Client, kind: str, method: str, path: str, **kwargs: Any
    ) -> Any | None:
        """One call, timed; its JSON answer, or None when it failed (recorded)."""
        started = time.perf_counter()
        try:
            res = client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:  # a timeout, a refused connection: an error
            self.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            return None
        finally:
            self.latencies[kind].append(time.perf_counter() - started)
        if not res.is_success:
            self.errors.append(f"{kind}: {res.status_code} {res.text[:300]}")
            return None
        return res.json()


def agent_loop(
    i: int, base: str, token: str, world: World, seed: int, until: float, rec: Record
) -> None:
    """One agent working incidents until ``until`` (it finishes the call in flight)."""
    rng = random.Random(f"{seed}/agent/{i}")
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=30) as c:
        n = 0
        while time.monotonic() < until:
            n += 1
            case = f"LOAD-{seed}{rec.tag}-{i}-{n}"
            subjects = rng.sample(world.subjects, min(len(world.subjects), rng.choice([1, 1, 2])))
            if (
                rec.call(
                    c, "open_case", "POST", "/v1/cases", json={"id": case, "subjects": subjects}
                )
                is None
            ):
                return
            rec.incidents += 1
            seen = [
                {
                    "subject": s,
                    "attribute": "metrics.error_rate",
                    "value": round(rng.uniform(0, 0.1), 3),
                }
                for s in subjects
            ]
            rec.call(c, "observe", "POST", "/v1/observations", json={"observations": seen})
            context: list[int] = []
            for _ in range(rng.randint(3, 6)):
                if time.monotonic() >= until:
                    break
                query = rng.choice(world.queries)
                found = rec.call(
                    c,
                    "recall",
                    "GET",
                    "/v1/recall",
                    params={"query": query, "subject": subjects, "case": case},
                )
                if found is None:
                    continue
                ids = [r["item"]["id"] for r in found["items"]]
                rec.recalled.extend(ids[:3])
                pick = ids[: rng.randint(1, 3)]
                if pick:
                    ask = {"query": query, "subjects": subjects, "case": case, "used": pick}
                    used = rec.call(c, "record_use", "POST", "/v1/record-use", json=ask)
                    if used is not None:
                        context += [x for x in used["used"] if x not in context]
                        for code in used["refused"].values():
                            rec.refusals[f"record_use:{code}"] += 1
                if context:
                    checked = rec.call(
                        c,
                        "check_context",
                        "POST",
                        "/v1/context/check",
                        json={"items": context, "case": case},
                    )
                    if checked is not None:
                        for why in checked["dropped"].values():
                            rec.refusals[f"check_context:{why}"] += 1
                        dropped = {int(x) for x in checked["dropped"]}
                        context = [x for x in context if x not in dropped]
                subject = rng.choice(subjects)
                body = {
                    "kind": "fact",
                    "subject": subject,
                    "attribute": rng.choice(WRITE_ATTRIBUTES),
                    "object": rng.randint(1, 5000),
                    "required": [f"config.connection_pool.max gte {rng.choice(POOL_VALUES)}"],
                    "evidence": [rng.choice(world.evidence)],
                    "epistemic": "observation",
                    "scope": {"axis": "case", "id": case},
                    "text": f"{subject} during {case}: {query}",
                }
                if context and rng.random() < 0.3:
                    body["derived_from"] = [rng.choice(context)]
                outcomes = rec.call(c, "write", "POST", "/v1/items", json=[body])
                for o in outcomes or []:
                    if o["outcome"] == "rejected":
                        rec.refusals[f"write:{o['code']}"] += 1
                    else:
                        ack = Ack(o["item_id"], i, subject, body["attribute"], body["object"])
                        rec.acks.append(ack)
            rec.call(
                c, "close_case", "POST", f"/v1/cases/{case}/close", json={"outcome": "confirmed"}
            )


def sme_loop(base: str, token: str, seed: int, every: float, until: float, rec: Record) -> None:
    """An SME revoking, every ``every`` seconds, an item an agent recalled."""
    rng = random.Random(f"{seed}/sme")
    done: set[int] = set()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        while time.monotonic() + every < until:
            time.sleep(rng.uniform(0.5, 1.5) * every)
            fresh = [x for x in rec.recalled[-200:] if x not in done]
            if not fresh:
                continue
            target = rng.choice(fresh)
            done.add(target)
            res = rec.call(
                c,
                "revoke",
                "POST",
                f"/v1/items/{target}/revoke",
                json={"reason": "load: wrong precedent"},
            )
            if res is not None:
                rec.revoked.append(target)
                rec.reopened_by_revocations += len(res["reopened"])


def deploy_loop(
    base: str, token: str, world: World, seed: int, every: float, until: float, rec: Record
) -> None:
    """CI posting a deploy CloudEvent every ``every`` seconds: a subject's pool max
    changes, and what depended on it is re-opened (model §4.3)."""
    rng = random.Random(f"{seed}/deploy")
    n = 0
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as c:
        while time.monotonic() + every < until:
            time.sleep(rng.uniform(0.5, 1.5) * every)
            n += 1
            event = {
                "specversion": "1.0",
                "id": f"deploy-{seed}{rec.tag}-{n}",
                "source": "load-ci",
                "type": "deploy",
                "subject": rng.choice(world.subjects[:20]),
                "data": {"changes": {"config.connection_pool.max": rng.choice(POOL_VALUES)}},
            }
            res = rec.call(c, "deploy", "POST", "/v1/events", json=event)
            if res is not None:
                rec.deploys += 1
                for e in res["events"]:
                    rec.reopened_by_deploys += len(e["needs_reverification"])
                    rec.reopened_by_deploys += len(e["verify_on_next_use"])


def drive(
    base: str,
    toks: Tokens,
    world: World,
    *,
    seconds: float,
    seed: int,
    revoke_every: float,
    deploy_every: float,
    tag: str = "",
) -> tuple[Record, float]:
    """The agents, the SME and CI for ``seconds``; what they saw, and the wall time.
    ``tag``: a part of every case and event id (runs on one store each need their own)."""
    rec = Record(tag=tag)
    started = time.monotonic()
    until = started + seconds
    threads = [
        threading.Thread(target=agent_loop, args=(i, base, t, world, seed, until, rec))
        for i, t in enumerate(toks.agents)
    ]
    threads.append(
        threading.Thread(target=sme_loop, args=(base, toks.sme, seed, revoke_every, until, rec))
    )
    threads.append(
        threading.Thread(
            target=deploy_loop, args=(base, toks.ci, world, seed, deploy_every, until, rec)
        )
    )
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return rec, time.monotonic() - started


# --- afterwards ----------------------------------------------------------------------


def read_back(base: str, toks: Tokens, rec: Record) -> dict[str, Any]:
    """Every acknowledged write read back by id as the SME, and found in the audit log
    (its ``write`` row, listed per agent): the lost, as counts and examples."""
    lost: list[str] = []
    sme = {"Authorization": f"Bearer {toks.sme}"}

    def one(c: httpx.Client, ack: Ack) -> None:
        res = c.get(f"/v1/items/{ack.item_id}")
        if res.status_code != 200:
            lost.append(f"item {ack.item_id}: {res.status_code} {res.text[:200]}")
            return
        got = res.json()
        said = (got["subject"], got["attribute"], got["object"])  # the value, as written
        if said != (ack.subject, ack.attribute, ack.object):
            lost.append(f"item {ack.item_id}: {said} is not what was written: {ack}")

    def some(part: Sequence[Ack]) -> None:
        with httpx.Client(base_url=base, headers=sme, timeout=30) as c:
            for ack in part:
                try:
                    one(c, ack)
                except Exception as exc:  # a check that cannot run counts as a loss
                    lost.append(f"item {ack.item_id}: not read back: {exc!r}")

    acks = list(rec.acks)
    threads = [threading.Thread(target=some, args=(acks[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    audited: set[int] = set()
    with httpx.Client(base_url=base, headers=sme, timeout=30) as c:
        for i in range(len(toks.agents)):
            cursor: str | None = None
            while True:
                params: dict[str, Any] = {"actor": f"agent-load-{i:02d}", "action": "write"}
                params |= {"limit": 500} | ({"cursor": cursor} if cursor else {})
                page = c.get("/v1/audit", params=params)
                page.raise_for_status()
                body = page.json()
                audited |= {r["item_id"] for r in body["items"] if r["item_id"] is not None}
                cursor = body["next"]
                if cursor is None:
                    break
    unaudited = [a.item_id for a in acks if a.item_id not in audited]
    lost += [f"item {i}: no write row in the audit log" for i in unaudited[:20]]
    return {
        "acknowledged": len(acks),
        "distinct": len({a.item_id for a in acks}),
        "read_back": len(acks) - sum(1 for x in lost if "audit" not in x),
        "audited": len(acks) - len(unaudited),
        "lost": lost,
    }


def _ms(values: Sequence[float], q: float, digits: int = 1) -> float:
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], digits)


def report(
    rec: Record,
    wall: float,
    writes: dict[str, Any],
    waits: Sequence[Wait],
    control_waits: dict[str, int],
    watch: LockWatch,
) -> dict[str, Any]:
    """The run's figures: per call n, p50, p95, max (ms); throughput; the properties."""
    calls = {
        kind: {
            "n": len(rec.latencies[kind]),
            "p50_ms": _ms(rec.latencies[kind], 0.50),
            "p95_ms": _ms(rec.latencies[kind], 0.95),
            "max_ms": round(1000 * max(rec.latencies[kind]), 1),
            "mean_ms": round(1000 * statistics.fmean(rec.latencies[kind]), 1),
        }
        for kind in CALLS
        if rec.latencies.get(kind)
    }
    total = sum(len(v) for v in rec.latencies.values())
    by_app: Counter[str] = Counter(f"{w.source}:{w.app}" for w in waits)
    # what the logged waits waited for, ids left out ("ShareLock on transaction")
    on: Counter[str] = Counter(
        f"{w.app}: {' '.join(w.what.split()[:3])}" for w in waits if w.source == "log"
    )
    recall_waits = [w for w in waits if w.app == "caveat:recall"]
    return {
        "seconds": round(wall, 1),
        "calls": calls,
        "total_calls": total,
        "throughput_per_s": round(total / wall, 1),
        "incidents": rec.incidents,
        "revocations": len(rec.revoked),
        "reopened_by_revocations": rec.reopened_by_revocations,
        "deploys": rec.deploys,
        "reopened_by_deploys": rec.reopened_by_deploys,
        "refusals": dict(sorted(rec.refusals.items())),
        "errors": len(rec.errors),
        "error_examples": rec.errors[:10],
        "writes": writes,
        "lock_waits": dict(sorted(by_app.items())),
        "lock_waits_on": dict(on.most_common(10)),
        "lock_log": watch.log_available,
        "lock_samples": watch.sampled,
        "recall_lock_waits": len(recall_waits),
        "recall_lock_wait_examples": [w.__dict__ for w in recall_waits[:5]],
        "control_recall_waits": control_waits,
    }


def check(r: dict[str, Any]) -> list[str]:
    """The four properties' failures (empty when they hold, and the detector works)."""
    failed = []
    if r["errors"]:
        failed.append(f"{r['errors']} errors: {r['error_examples']}")
    if r["writes"]["lost"] or r["writes"]["acknowledged"] == 0:
        failed.append(f"lost writes (or none acknowledged): {r['writes']}")
    if r["recall_lock_waits"]:
        failed.append(f"recalls waited on a lock: {r['recall_lock_wait_examples']}")
    seen = r["control_recall_waits"]
    if seen["sample"] == 0 or (r["lock_log"] and seen["log"] == 0):
        failed.append(f"the lock watch missed the control's recall wait ({seen}): it cannot fail")
    missing = [k for k in CALLS if k not in r["calls"]]
    if missing:
        failed.append(f"no call of: {missing}")
    return failed


def run(
    url: str,
    world: Callable[[str], World],
    *,
    agents: int,
    seconds: float,
    seed: int,
    revoke_every: float,
    deploy_every: float,
    embedder: str = "none",
    workers: int | None = None,
) -> dict[str, Any]:
    """On the migrated database at ``url`` (the owner's URL, on a server this run may
    reconfigure): the world, the tokens, the server (``workers`` processes), the
    control, the load, the checks."""
    t = time.monotonic()
    made = world(url)
    toks = tokens(url, agents)
    setup = time.monotonic() - t
    watch = LockWatch(url)
    watch.arm()
    try:
        r = one_run(
            url,
            made,
            toks,
            watch,
            seconds=seconds,
            seed=seed,
            revoke_every=revoke_every,
            deploy_every=deploy_every,
            embedder=embedder,
            workers=workers,
        )
    finally:
        watch.disarm()
    return {"setup_seconds": round(setup, 1), **r}


def one_run(
    url: str,
    made: World,
    toks: Tokens,
    watch: LockWatch,
    *,
    seconds: float,
    seed: int,
    revoke_every: float,
    deploy_every: float,
    embedder: str = "none",
    workers: int | None = None,
    code: Path | None = None,
    tag: str = "",
) -> dict[str, Any]:
    """One server (``code``'s, ``workers`` processes) over the loaded store: the
    control, the load, the read-back and the report, with the in-process recall p50 of
    the same store just after (``inprocess_recall``, this checkout's code)."""
    with serving(url, embedder=embedder, workers=workers, code=code) as base:
        control_waits = control(watch, base, toks.agents[0], made.subjects[0])
        watch.start()
        rec, wall = drive(
            base,
            toks,
            made,
            seconds=seconds,
            seed=seed,
            revoke_every=revoke_every,
            deploy_every=deploy_every,
            tag=tag,
        )
        waits = watch.stop()
        writes = read_back(base, toks, rec)
    r = report(rec, wall, writes, waits, control_waits, watch)
    here = inprocess_recall(url, made, toks.agents[0], seed=seed)
    r["inprocess_recall_p50_ms"] = here
    asked = r["calls"].get("recall")
    r["recall_p95_over_inprocess_p50"] = None if asked is None else round(asked["p95_ms"] / here, 2)
    return {
        "agents": len(toks.agents),
        "workers": workers,
        "code": "this checkout" if code is None else str(code),
        "seed": seed,
        "items": made.items,
        "subjects": len(made.subjects),
        **r,
    }


def timed_calls(n: int, call: Callable[[int], object], warm: int = 20) -> list[float]:
    """The seconds each of ``n`` calls ``call(i)`` took, one at a time, after ``warm``
    untimed calls that warm the caches (``i`` counts from 0 over all of them)."""
    times = []
    for i in range(n + warm):
        t = time.perf_counter()
        call(i)
        if i >= warm:
            times.append(time.perf_counter() - t)
    return times


def inprocess_recall(url: str, made: World, token: str, *, seed: int, n: int = 200) -> float:
    """The p50 (ms) of ``n`` recalls made in this process through a runtime as a server
    holds one (the application role, its world cache): an agent's query and subject as
    ``agent_loop`` draws them, nothing else running."""
    rng = random.Random(seed)
    engine = db.make_app_engine(url)
    try:
        rt, actor = use.authenticate(use.Runtime.over(engine, TENANT), token)
        requests = [
            recall_api.RecallRequest(
                query=rng.choice(made.queries), subjects=rng.sample(made.subjects[:20], 2)
            )
            for _ in range(n + 20)
        ]
        times = timed_calls(n, lambda i: rt.recall(actor, requests[i]))
    finally:
        engine.dispose()
    return round(1000 * statistics.median(times), 2)


# --- against a base commit (issue 27) ------------------------------------------------


ROOT = Path(__file__).resolve().parents[1]


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """``rev`` of this repository checked out, detached, in a temporary directory (a git
    worktree), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="caveat-base-") as tmp:
        path = Path(tmp) / "base"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(path), rev],
            check=True,
        )
        try:
            yield path
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)],
                check=False,
            )


def compare(
    url: str,
    world: Callable[[str], World],
    *,
    base: str,
    rounds: int,
    agents: int,
    seconds: float,
    seed: int,
    revoke_every: float,
    deploy_every: float,
    embedder: str = "none",
    workers: int | None = None,
) -> dict[str, Any]:
    """This checkout's server and ``base``'s, on one store (loaded once, migrated by this
    checkout: the base's code ignores what it does not know), the same tokens and seed,
    alternating for ``rounds`` rounds (the base first in even rounds): each run's figures
    and the ratios of the medians."""
    made = world(url)
    toks = tokens(url, agents)
    watch = LockWatch(url)
    watch.arm()
    runs: dict[str, list[dict[str, Any]]] = {"head": [], "base": []}
    try:
        with worktree(base) as code:
            for r in range(rounds):
                order = ("base", "head") if r % 2 == 0 else ("head", "base")
                for side in order:
                    runs[side].append(
                        one_run(
                            url,
                            made,
                            toks,
                            watch,
                            seconds=seconds,
                            seed=seed,
                            revoke_every=revoke_every,
                            deploy_every=deploy_every,
                            embedder=embedder,
                            workers=workers if side == "head" else None,
                            code=code if side == "base" else None,
                            tag=f"-{side}{r}",
                        )
                    )
    finally:
        watch.disarm()

    def median(side: str, key: Callable[[dict[str, Any]], float]) -> float:
        return float(statistics.median(key(x) for x in runs[side]))

    def rate(x: dict[str, Any]) -> float:
        return float(x["throughput_per_s"])

    def p95(x: dict[str, Any]) -> float:
        asked = x["calls"].get("recall")
        return float("nan") if asked is None else float(asked["p95_ms"])

    head_runs = runs["head"]
    return {
        "base": base,
        "rounds": rounds,
        "runs": runs,
        "throughput_per_s": {side: [rate(x) for x in runs[side]] for side in runs},
        "recall_p95_ms": {side: [p95(x) for x in runs[side]] for side in runs},
        "throughput_ratio": round(median("head", rate) / median("base", rate), 2),
        "recall_p95_ratio": round(median("head", p95) / median("base", p95), 2),
        "recall_p95_over_inprocess_p50": [x["recall_p95_over_inprocess_p50"] for x in head_runs],
        "errors": sum(x["errors"] for side in runs for x in runs[side]),
        "lost_writes": sum(len(x["writes"]["lost"]) for side in runs for x in runs[side]),
        "recall_lock_waits": sum(x["recall_lock_waits"] for side in runs for x in runs[side]),
        "failed": [
            f"{side} run {i}: {f}"
            for side in runs
            for i, x in enumerate(runs[side])
            for f in check(x)
        ],
    }


def markdown(r: dict[str, Any]) -> str:
    """The per-call table of docs/reliability.md, section 6."""
    lines = ["| call | n | p50 ms | p95 ms | max ms |", "|---|---|---|---|---|"]
    for kind, c in r["calls"].items():
        lines.append(f"| {kind} | {c['n']} | {c['p50_ms']} | {c['p95_ms']} | {c['max_ms']} |")
    rate = f"{r['throughput_per_s']} calls/s over {r['seconds']} s"
    lines.append(f"| all | {r['total_calls']} | | | | ({rate})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench load")
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=14006)
    parser.add_argument("--items", type=int, default=20_000, help="over 20 tenants; half in bench")
    parser.add_argument("--revoke-every", type=float, default=1.0)
    parser.add_argument("--deploy-every", type=float, default=2.0)
    parser.add_argument("--embedder", default="none", help="the server's CAVEAT_EMBEDDER")
    parser.add_argument(
        "--workers", type=int, default=None, help="caveat serve --workers (default: its own)"
    )
    parser.add_argument(
        "--base",
        default=None,
        help="a commit to run beside this checkout (a git worktree; its server single-process"
        " as it was), alternating on one store",
    )
    parser.add_argument("--rounds", type=int, default=2, help="with --base: runs of each side")
    parser.add_argument("--json", action="store_true")
    bench_corpus.add_argument(parser)
    args = parser.parse_args(argv)
    bench_corpus.from_args(parser, args)
    started = time.monotonic()
    common: dict[str, Any] = {
        "agents": args.agents,
        "seconds": args.seconds,
        "seed": args.seed,
        "revoke_every": args.revoke_every,
        "deploy_every": args.deploy_every,
        "embedder": args.embedder,
        "workers": args.workers,
    }
    with (
        db.temporary_server(os.environ.get("DATABASE_URL")) as server,
        db.with_database(server, prefix="caveat_load") as url,
    ):
        db.migrate(url)

        def world(u: str) -> World:
            return big_world(u, items=args.items, seed=args.seed, show=not args.json)

        if args.base is not None:
            r = compare(url, world, base=args.base, rounds=args.rounds, **common)
        else:
            r = run(url, world, **common)
    r["total_seconds"] = round(time.monotonic() - started, 1)
    failed = r["failed"] if args.base is not None else check(r)
    r["failed"] = failed
    r["corpus"] = bench_corpus.current().label
    print(json.dumps(r, indent=2))
    if not args.json:
        print(comparison(r) if args.base is not None else markdown(r))
    for f in failed:
        print("FAILED:", f, file=sys.stderr)
    return 1 if failed else 0


def comparison(r: dict[str, Any]) -> str:
    """The side-by-side table of docs/performance.md (``--base``)."""
    lines = [
        "| run | calls/s | recall p50 ms | recall p95 ms | in-process recall p50 ms |",
        "|---|---|---|---|---|",
    ]
    for side in ("base", "head"):
        for i, x in enumerate(r["runs"][side]):
            c = x["calls"]["recall"]
            lines.append(
                f"| {side} {i + 1} | {x['throughput_per_s']} | {c['p50_ms']} | {c['p95_ms']} "
                f"| {x['inprocess_recall_p50_ms']} |"
            )
    lines.append(
        f"\nthroughput head/base {r['throughput_ratio']}, recall p95 head/base "
        f"{r['recall_p95_ratio']}, head recall p95 / in-process p50 "
        f"{r['recall_p95_over_inprocess_p50']}"
    )
    return "\n".join(lines)
