"""A tenant's fact sources at every door (model §2.1; docs/sources.md): the CLI's
``caveat sources load|show|pull|status``, the HTTP routes under ``/v1/sources``, and the
scheduled pulls of ``caveat serve``'s background, all as the application's login role
under row-level security.

The pulls here go through a ``Recorder``, a translator as small as a connector can be
(it reads the loaded sources, "fetches" a value it holds, and stores it with
``caveat.app.store_pull``), so that what is tested is the doors and the schedule: who
may pull, how often, and how many workers pull a due source (once).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import factgen
from caveat import app as use
from caveat import db
from caveat.api import create_app
from caveat.api._background import Background, lock_key
from caveat.errors import DocumentError, Forbidden, NotFound
from tests.caveat._doors import two_tenants
from tests.caveat.test_cli_incident import run
from tests.caveat.test_http import loopback
from tests.conftest import ADMIN

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)

SOURCES = """\
sources:
  - name: deployed
    kind: file
    path: /srv/deployed/{subject}.json
    subjects: [payment-api]
    every: 30s
    attributes:
      - attribute: config.connection_pool.max
        pointer: /pool/max
  - name: manual
    kind: file
    path: /srv/manual/{subject}.json
    subjects: [payment-api]
    attributes:
      - attribute: config.connection_pool.max
        pointer: /pool/max
"""
#: line 7, column 9: the attribute's value, an attribute the schema does not declare
UNDECLARED = SOURCES.replace("attribute: config.connection_pool.max", "attribute: pool.maxx", 1)
#: line 6, column 12: a duration that is not one
BAD_EVERY = SOURCES.replace("every: 30s", "every: often")


@dataclass
class Recorder:
    """A puller: each pull of a source stores ``value`` for its subjects (or, when
    ``down``, records the error a connector records), after ``delay`` seconds (the
    network); every pull is recorded in ``calls``."""

    value: object = 20
    down: bool = False
    delay: float = 0.0
    calls: list[tuple[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(
        self, rt: use.Runtime, names: Sequence[str] | None = None, *, now: datetime | None = None
    ) -> list[use.PullOutcome]:
        out = []
        for spec in use.pull_frame(rt).config.sources:
            if names is not None and spec.name not in names:
                continue
            with self.lock:
                self.calls.append((rt.tenant, spec.name))
            time.sleep(self.delay)
            if self.down:
                out.append(
                    use.store_pull(
                        rt,
                        source=spec.name,
                        observations=[],
                        error="connection refused",
                        latency_ms=3.0,
                        now=now,
                    )
                )
                continue
            obs = [
                factgen.Observation(
                    subject, a.attribute, self.value, provenance={"source": spec.name}
                )
                for subject in spec.subjects
                for a in spec.attributes
            ]
            obs.append(factgen.Observation("nobody", spec.attributes[0].attribute, 1))
            out.append(
                use.store_pull(rt, source=spec.name, observations=obs, latency_ms=12.0, now=now)
            )
        return out


@pytest.fixture
def rt(db_url: str) -> Iterator[use.Runtime]:
    """Tenants acme and globex with the door tests' world, as caveat_app."""
    with two_tenants(db_url) as runtime:
        yield runtime


def _status(rt: use.Runtime, name: str, now: datetime | None = None) -> dict[str, Any]:
    reports = use.sources_status(rt, ADMIN, now=now)
    return next(r.to_json() for r in reports if r.source == name)


# --- the use cases: who may do what ------------------------------------------------------


def test_load_show_pull_and_status_and_who_may(rt: use.Runtime) -> None:
    sme = factgen.Actor("sme-alice", "sme")
    for who in (sme, factgen.Actor("agent-ir", "agent"), use.source_actor("prom")):
        with pytest.raises(Forbidden):
            use.load_sources(rt, who, SOURCES)
    assert use.show_sources(rt, sme) is None
    loaded = use.load_sources(rt, ADMIN, SOURCES, now=T0)
    assert [s.name for s in loaded.config.sources] == ["deployed", "manual"]
    shown = use.show_sources(rt, sme)
    assert shown is not None and shown.document == SOURCES
    recorder = Recorder()
    for who in (sme, use.source_actor("deployed")):
        with pytest.raises(Forbidden):
            use.pull_sources(rt, who, puller=recorder)
    with pytest.raises(NotFound):
        use.pull_sources(rt, ADMIN, ["nope"], puller=recorder)
    assert recorder.calls == []
    [outcome] = use.pull_sources(rt, ADMIN, ["deployed"], puller=recorder, now=T0)
    assert (len(outcome.stored), outcome.refused_by_reason) == (1, {"subject_unresolved": 1})
    deployed = _status(rt, "deployed", T0 + timedelta(seconds=1))
    assert deployed["pulls"] == 1 and deployed["samples_stored"] == 1
    assert deployed["refused"] == {"subject_unresolved": 1}
    assert deployed["last_latency_ms"] == 12.0 and deployed["scheduled"] is True
    assert deployed["due"] is False
    nxt = datetime.fromisoformat(deployed["next_pull_at"]) - T0
    assert timedelta(seconds=27) <= nxt <= timedelta(seconds=33)  # 30s +- 10%
    manual = _status(rt, "manual", T0)
    assert (manual["pulls"], manual["scheduled"], manual["next_pull_at"]) == (0, False, None)
    for who in (factgen.Actor("agent-ir", "agent"), use.source_actor("deployed")):
        with pytest.raises(Forbidden):
            use.sources_status(rt, who)
    # a source pulled, then no longer declared: still reported, after the declared ones
    use.pull_sources(rt, ADMIN, ["manual"], puller=recorder, now=T0)
    use.load_sources(rt, ADMIN, SOURCES[: SOURCES.index("  - name: manual")], now=T0)
    reports = [r.to_json() for r in use.sources_status(rt, sme, now=T0)]
    assert [(r["source"], r["declared"], r["kind"], r["pulls"]) for r in reports] == [
        ("deployed", True, "file", 1),
        ("manual", False, None, 1),
    ]


def test_an_undeclared_attribute_is_refused_where_it_is_written(rt: use.Runtime) -> None:
    with pytest.raises(DocumentError) as exc:
        use.load_sources(rt, ADMIN, UNDECLARED, source_name="sources.yaml")
    err = exc.value
    assert err.code == "fact_unknown_attribute"
    assert (err.source, err.line, err.column) == ("sources.yaml", 8, 20)
    assert "'pool.maxx' is not declared in the schema" in err.message
    assert use.show_sources(rt, ADMIN) is None  # nothing written


def test_the_back_off_doubles_and_is_capped() -> None:
    every = timedelta(seconds=30)
    delays = [use.pull_delay(every, n).total_seconds() for n in range(6)]
    assert delays == [30, 60, 120, 240, 300, 300]  # 5 min cap
    assert use.pull_delay(timedelta(seconds=5), 9) == timedelta(seconds=50)  # 10 x every
    assert use.pull_delay(timedelta(hours=1), 3) == timedelta(hours=1)  # never below every


# --- HTTP ----------------------------------------------------------------------------------


@dataclass
class Served:
    base: str
    tokens: dict[str, str]


@contextmanager
def served(
    rt: use.Runtime, *, background: float | None = None, puller: use.Puller | None = None
) -> Iterator[Served]:
    """A server on loopback over ``rt`` (the connectors' pulls unless ``puller``), with
    tokens of acme's admin, SME, agent and source, and globex's admin."""
    tokens = {
        role: use.create_token(rt, ADMIN, f"{role}-1", role=role).token
        for role in ("admin", "sme", "agent", "source")
    }
    tokens["globex"] = use.create_token(rt.for_tenant("globex"), ADMIN, "g", role="admin").token
    given = {} if puller is None else {"puller": puller}
    with loopback(create_app(rt, background=background, **given)) as base:
        yield Served(base, tokens)


def _client(s: Served, who: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {s.tokens[who]}"} if who else {}
    return httpx.Client(base_url=s.base, headers=headers, timeout=30)


YAML = {"Content-Type": "application/yaml"}


def on_disk(tmp_path: Path, text: str = SOURCES, pool_max: int = 20) -> str:
    """``text`` with its file sources under ``tmp_path``: deployed's file of payment-api
    says ``pool_max``; manual's directory does not exist (its pull fails)."""
    (tmp_path / "deployed").mkdir(exist_ok=True)
    (tmp_path / "deployed" / "payment-api.json").write_text(json.dumps({"pool": {"max": pool_max}}))
    return text.replace("/srv/", f"{tmp_path}/")


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the sample ``name`` with exactly ``labels`` in a /metrics text (0
    when absent: the connectors' counters are the process's, so tests read deltas)."""
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == labels:
                return float(found.value)
    return 0.0


def _metrics(s: Served, **labels: str) -> dict[str, float]:
    text = httpx.get(f"{s.base}/metrics").text
    names = ("caveat_source_pull_seconds_count", "caveat_source_pull_errors_total")
    out = {n: sample(text, n, **labels) for n in names}
    for outcome in ("stored", "pointer_missing"):
        out[outcome] = sample(text, "caveat_source_samples_total", **labels, outcome=outcome)
    return out


def test_http_loads_shows_pulls_and_reports_sources(rt: use.Runtime, tmp_path: Path) -> None:
    text = on_disk(tmp_path)
    with served(rt) as s, _client(s, "admin") as admin, _client(s, "sme") as sme:
        assert sme.get("/v1/sources").json()["code"] == "not_found"
        for who in ("sme", "agent", "source"):
            with _client(s, who) as c:
                r = c.put("/v1/sources", content=text, headers=YAML)
                assert (r.status_code, r.json()["code"]) == (403, "forbidden"), who
        r = admin.put("/v1/sources", content=text, headers=YAML)
        assert r.status_code == 200, r.text
        assert r.json()["sources"] == ["deployed", "manual"]
        assert r.json()["config"]["sources"][0]["every"] == 30.0
        plain = admin.put("/v1/sources", content=text, headers={"Content-Type": "text/plain"})
        assert plain.status_code == 200
        wrong = admin.put("/v1/sources", json={"sources": []})
        assert (wrong.status_code, wrong.json()["code"]) == (422, "invalid_input")
        bad = admin.put("/v1/sources", content=BAD_EVERY, headers=YAML)
        assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
        problem = bad.json()
        assert (problem["code"], problem["line"], problem["column"]) == ("document_invalid", 6, 12)
        assert problem["detail"].startswith("sources.yaml:6:12: sources[0].every: ")
        undeclared = admin.put("/v1/sources", content=UNDECLARED, headers=YAML).json()
        assert (undeclared["code"], undeclared["line"]) == ("fact_unknown_attribute", 8)
        shown = sme.get("/v1/sources").json()
        assert shown["document"] == text and shown["loaded_by"] == "admin-1"
        for who in ("agent", "source"):
            with _client(s, who) as c:
                for path in ("/v1/sources", "/v1/sources/status"):
                    assert c.get(path).status_code == 403, (who, path)
                assert c.post("/v1/sources/pull").status_code == 403, who
        assert sme.post("/v1/sources/pull").status_code == 403
        assert admin.post("/v1/sources/pull", params={"name": "nope"}).status_code == 404
        at = {"tenant": "acme", "source": "deployed"}
        before = _metrics(s, **at)
        pulled = admin.post("/v1/sources/pull", params={"name": "deployed"})
        assert pulled.status_code == 200, pulled.text
        [deployed] = pulled.json()["pulls"]
        assert deployed | {"latency_ms": 0} == {
            "source": "deployed",
            "stored": 1,
            "refused": {},
            "error": None,
            "latency_ms": 0,
        }
        every = admin.post("/v1/sources/pull").json()["pulls"]
        assert [p["source"] for p in every] == ["deployed", "manual"]
        assert every[1]["stored"] == 0 and "cannot read" in every[1]["error"]
        status = {r["source"]: r for r in sme.get("/v1/sources/status").json()["sources"]}
        with _client(s, "globex") as other:
            assert other.get("/v1/sources").status_code == 404  # acme's are not globex's
            assert other.get("/v1/sources/status").json() == {"sources": []}
        after = _metrics(s, **at)
        manual = _metrics(s, tenant="acme", source="manual")
    assert status["deployed"]["pulls"] == 2 and status["deployed"]["samples_stored"] == 2
    assert status["deployed"]["errors"] == 0 and status["deployed"]["last_error"] is None
    assert status["manual"]["pulls"] == 1 and status["manual"]["scheduled"] is False
    assert status["manual"]["errors"] == 1 and "cannot read" in status["manual"]["last_error"]
    delta = {k: after[k] - before[k] for k in after}
    assert delta == {
        "caveat_source_pull_seconds_count": 2,
        "caveat_source_pull_errors_total": 0,
        "stored": 2,
        "pointer_missing": 0,
    }
    assert manual["caveat_source_pull_errors_total"] >= 1


def test_a_pull_of_a_source_that_is_down_answers_its_error(rt: use.Runtime) -> None:
    from tests.stack import free_port

    down = f"""\
sources:
  - name: flags
    kind: http_json
    url: http://127.0.0.1:{free_port()}/flags/{{subject}}
    subjects: [payment-api]
    timeout: 1s
    attributes:
      - {{attribute: config.connection_pool.max, pointer: /pool/max}}
"""
    use.load_sources(rt, ADMIN, down)
    with served(rt) as s, _client(s, "admin") as admin:
        before = _metrics(s, tenant="acme", source="flags")
        r = admin.post("/v1/sources/pull", params={"name": "flags"})
        status = admin.get("/v1/sources/status").json()["sources"][0]
        after = _metrics(s, tenant="acme", source="flags")
    assert r.status_code == 200
    [pull] = r.json()["pulls"]
    assert pull["error"] and pull["stored"] == 0
    assert status["errors"] == 1 and status["consecutive_failures"] == 1
    assert status["last_error"] == pull["error"] and status["last_ok_at"] is None
    errors = "caveat_source_pull_errors_total"
    assert after[errors] - before[errors] == 1


def test_the_server_pulls_the_default_tenants_due_sources_without_a_request(
    rt: use.Runtime, tmp_path: Path
) -> None:
    """The server's tenant (the settings' default) was loaded with the CLI and no request
    came: the background pulls it when due (the connectors, a real file), and the
    metrics count it."""
    use.load_sources(rt, ADMIN, on_disk(tmp_path, SOURCES.replace("every: 30s", "every: 1s")))
    with served(rt, background=0.2) as s:
        deadline = time.monotonic() + 20
        while _status(rt, "deployed")["pulls"] < 2:
            assert time.monotonic() < deadline, "the background never pulled twice"
            time.sleep(0.1)
        metrics = _metrics(s, tenant="acme", source="deployed")
    assert _status(rt, "manual")["pulls"] == 0  # no every: on demand only
    assert _status(rt, "deployed")["samples_stored"] >= 2
    assert metrics["caveat_source_pull_seconds_count"] >= 2


# --- scheduled pulls: one puller, jitter, back-off -------------------------------------------


@pytest.fixture
def workers(db_url: str, rt: use.Runtime) -> Iterator[tuple[Recorder, list[Background]]]:
    """Two background workers, each on an engine of its own (two servers on one
    database), sharing one recorder; acme's sources loaded."""
    use.load_sources(rt, ADMIN, SOURCES, now=T0 - timedelta(hours=1))
    recorder = Recorder()
    engines = [db.make_app_engine(db_url) for _ in range(2)]
    try:
        yield (
            recorder,
            [Background(use.Runtime.over(e, "acme"), 5.0, puller=recorder) for e in engines],
        )
    finally:
        for e in engines:
            e.dispose()


def test_two_workers_pull_a_due_source_once(
    rt: use.Runtime, workers: tuple[Recorder, list[Background]]
) -> None:
    recorder, pair = workers
    recorder.delay = 0.5  # the network: both workers are in their round at once
    start = threading.Barrier(len(pair))
    results: dict[int, list[use.PullOutcome]] = {}

    def run(i: int, now: datetime) -> None:
        start.wait()
        results[i] = pair[i].pull_due(now=now)

    for now in (T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=40)):
        threads = [threading.Thread(target=run, args=(i, now)) for i in range(len(pair))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        pulled = sorted(len(r) for r in results.values())
        assert pulled == ([0, 0] if now == T0 + timedelta(seconds=1) else [0, 1]), now
    # at T0 and 40s later (past 30s +- 10%), once each; at T0 + 1s nothing was due
    assert recorder.calls == [("acme", "deployed")] * 2
    assert _status(rt, "deployed")["pulls"] == 2
    assert _status(rt, "manual")["pulls"] == 0  # no every: never scheduled


def test_two_servers_pull_a_due_http_source_once_counted_at_the_source(
    db_url: str, rt: use.Runtime
) -> None:
    """The connectors' pull, against a real HTTP server that answers slowly and counts
    its requests: two workers' rounds at once make one request, one pull."""
    from tests.connectors._pullkit import Answer, JsonServer

    with JsonServer() as server:
        server.answers["/pool/payment-api"] = Answer({"pool": {"max": 20}}, delay=0.5)
        use.load_sources(
            rt,
            ADMIN,
            f"""\
sources:
  - name: pool
    kind: http_json
    url: {server.url}/pool/{{subject}}
    subjects: [payment-api]
    every: 30s
    attributes:
      - {{attribute: config.connection_pool.max, pointer: /pool/max}}
""",
        )
        engines = [db.make_app_engine(db_url) for _ in range(2)]
        try:
            pair = [Background(use.Runtime.over(e, "acme"), 5.0) for e in engines]
            start = threading.Barrier(2)
            done: list[list[use.PullOutcome]] = []

            def run(worker: Background) -> None:
                start.wait()
                done.append(worker.pull_due())

            threads = [threading.Thread(target=run, args=(w,)) for w in pair]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=30)
            again = [w.pull_due() for w in pair]  # pulled just now: not due
        finally:
            for e in engines:
                e.dispose()
        requests = list(server.requests)
    assert sorted(len(d) for d in done) == [0, 1] and again == [[], []]
    assert [r.path for r in requests] == ["/pool/payment-api"]
    status = _status(rt, "pool")
    assert (status["pulls"], status["samples_stored"], status["errors"]) == (1, 1, 0)


def test_a_source_another_worker_holds_is_left_to_it(
    db_url: str, rt: use.Runtime, workers: tuple[Recorder, list[Background]]
) -> None:
    recorder, (worker, _) = workers
    owner = db.make_engine(db_url)
    try:
        with owner.connect() as other:
            key = lock_key("acme", "deployed")
            assert other.exec_driver_sql("SELECT pg_try_advisory_lock(%s)", (key,)).scalar()
            assert worker.pull_due(now=T0) == []  # it is another's pull
            other.exec_driver_sql("SELECT pg_advisory_unlock(%s)", (key,))
    finally:
        owner.dispose()
    assert [o.source for o in worker.pull_due(now=T0)] == ["deployed"]
    assert recorder.calls == [("acme", "deployed")]


def test_a_worker_that_read_the_schedule_before_anothers_pull_does_not_pull_again(
    rt: use.Runtime,
    workers: tuple[Recorder, list[Background]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """B read 'due' just before A pulled, and takes the lock just after A released it:
    B reads the schedule again under the lock and leaves it."""
    recorder, (a, b) = workers
    assert len(a.pull_due(now=T0)) == 1
    real = use.due_sources
    stale = iter([["deployed"]])  # what B read before A's pull committed

    def due(rt: use.Runtime, *, now: datetime | None = None) -> list[str]:
        return next(stale, None) or real(rt, now=now)

    monkeypatch.setattr(use, "due_sources", due)
    assert b.pull_due(now=T0) == []
    assert recorder.calls == [("acme", "deployed")]


def test_errors_back_off_measurably_from_the_status(
    rt: use.Runtime, workers: tuple[Recorder, list[Background]]
) -> None:
    recorder, (worker, _) = workers
    recorder.down = True

    def next_in(now: datetime) -> float:
        at = _status(rt, "deployed", now)["next_pull_at"]
        return (datetime.fromisoformat(at) - now).total_seconds()

    assert len(worker.pull_due(now=T0)) == 1
    status = _status(rt, "deployed", T0)
    assert (status["consecutive_failures"], status["errors"]) == (1, 1)
    assert status["last_error"] == "connection refused"
    assert 54 <= next_in(T0) <= 66  # 2 x 30s, +- 10%
    assert worker.pull_due(now=T0 + timedelta(seconds=40)) == []  # due at 30s without errors
    t1 = T0 + timedelta(seconds=70)
    assert len(worker.pull_due(now=t1)) == 1
    assert _status(rt, "deployed", t1)["consecutive_failures"] == 2
    assert 108 <= next_in(t1) <= 132  # 4 x 30s
    recorder.down = False
    t2 = t1 + timedelta(seconds=140)
    assert len(worker.pull_due(now=t2)) == 1
    status = _status(rt, "deployed", t2)
    assert (status["consecutive_failures"], status["errors"], status["pulls"]) == (0, 2, 3)
    assert status["last_ok_at"] == t2.isoformat()
    assert 27 <= next_in(t2) <= 33  # back to every
    assert len(recorder.calls) == 3


def test_a_puller_that_fails_or_a_store_that_is_gone_never_stops_the_round(
    rt: use.Runtime,
    workers: tuple[Recorder, list[Background]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder, (worker, _) = workers

    def broken(rt: use.Runtime, names: Sequence[str] | None = None, **_: Any) -> list[Any]:
        raise RuntimeError("the connector crashed")

    worker.puller = broken
    assert worker.pull_due(now=T0) == []
    assert "scheduled pull failed for tenant acme" in caplog.text
    worker.puller = recorder
    assert len(worker.pull_due(now=T0)) == 1  # the next round pulls
    gone = Background(
        use.Runtime.over(db.make_engine("postgresql+psycopg://x@/x?host=/nonexistent"), "acme"),
        puller=recorder,
    )
    assert gone.pull_due(now=T0) == [] and gone.pull_rounds == 1


# --- the CLI ---------------------------------------------------------------------------------


@pytest.fixture
def cli_env(
    db_url: str, rt: use.Runtime, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Recorder:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    use.create_token(rt, ADMIN, "sme-1", role="sme")
    recorder = Recorder()
    monkeypatch.setattr("caveat.cli._sources.puller", lambda: recorder)
    (tmp_path / "sources.yaml").write_text(SOURCES)
    (tmp_path / "bad.yaml").write_text(BAD_EVERY)
    monkeypatch.chdir(tmp_path)
    return recorder


def test_cli_loads_shows_pulls_and_reports_sources(cli_env: Recorder) -> None:
    res = run("sources", "show", ok=1)
    assert "caveat: not_found: no sources.yaml loaded in tenant acme" in res.output
    res = run("sources", "load", "bad.yaml", ok=2)
    assert "caveat: document_invalid: bad.yaml:6:12: sources[0].every: " in res.output
    assert "forbidden" in run("sources", "load", "sources.yaml", "--as", "sme-1", ok=1).output
    res = run("sources", "load", "sources.yaml")
    assert res.output.startswith("loaded 2 sources in tenant acme: deployed, manual\n")
    assert "deployed         file       every 30s" in res.output
    loaded = json.loads(run("sources", "load", "sources.yaml", "--json").output)
    assert (loaded["tenant"], loaded["sources"]) == ("acme", ["deployed", "manual"])
    assert run("sources", "show", "--as", "sme-1").stdout == SOURCES
    assert "forbidden" in run("sources", "pull", "--as", "sme-1", ok=1).output
    assert "not_found" in run("sources", "pull", "nope", ok=1).output
    pulled = json.loads(run("sources", "pull", "deployed", "--json").output)
    assert pulled["pulls"][0] | {"latency_ms": 0} == {
        "source": "deployed",
        "stored": 1,
        "refused": {"subject_unresolved": 1},
        "error": None,
        "latency_ms": 0,
    }
    text = run("sources", "pull").output
    assert "deployed: stored 1, refused subject_unresolved 1, 12 ms" in text
    cli_env.down = True
    res = run("sources", "pull", "manual", ok=1)  # a failed pull: exit 1
    assert "manual: error: connection refused" in res.output
    status = json.loads(run("sources", "status", "--json", "--as", "sme-1").output)
    by_name = {r["source"]: r for r in status["sources"]}
    assert by_name["deployed"]["pulls"] == 2 and by_name["deployed"]["samples_stored"] == 2
    assert by_name["manual"]["errors"] == 1
    text = run("sources", "status").output
    assert "samples stored 2, refused subject_unresolved 2" in text
    assert "errors 1, consecutive failures 1, last " in text and "connection refused" in text
    assert "next pull " in text
    assert cli_env.calls == [("acme", "deployed")] * 2 + [("acme", "manual")] * 2


def test_a_default_tenant_that_does_not_exist_yet_is_looked_after_quietly(
    rt: use.Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    """A fresh store: the server's default tenant has no schema, no sources, nothing to
    embed; its rounds run and log nothing."""
    worker = Background(rt.for_tenant("default"), 5.0, puller=Recorder())
    assert worker.tenants() == {"default"}  # before any request
    worker.run_once()
    assert worker.pull_due() == []
    assert (worker.rounds, worker.pull_rounds) == (1, 1)
    assert [r.getMessage() for r in caplog.records if r.levelname in ("ERROR", "WARNING")] == []


def test_each_tenants_due_sources_are_pulled_into_its_own_rows(
    rt: use.Runtime, tmp_path: Path
) -> None:
    """Two tenants declare a source of the same name, each reading its own file: one
    round pulls both (the lock is per tenant and source), each into its own facts and
    status, as the application role."""
    globex = rt.for_tenant("globex")
    for tenant, pool_max in (("acme", 20), ("globex", 40)):
        home = tmp_path / tenant
        home.mkdir()
        use.load_sources(rt.for_tenant(tenant), ADMIN, on_disk(home, pool_max=pool_max))
    worker = Background(rt, 5.0)
    worker.touch("globex")
    done = worker.pull_due()
    assert sorted(o.source for o in done) == ["deployed", "deployed"]
    assert worker.pull_due() == []  # both pulled: neither is due
    for tenant, pool_max in (("acme", 20), ("globex", 40)):
        runtime = rt.for_tenant(tenant)
        status = _status(runtime, "deployed")
        assert (status["pulls"], status["samples_stored"]) == (1, 1), tenant
        with runtime.transaction() as s:
            values = (
                s.connection()
                .exec_driver_sql("SELECT tenant_id, value FROM facts WHERE source = 'deployed'")
                .all()
            )
        assert [(t, v["v"]) for t, v in values] == [(tenant, pool_max)], tenant
    assert lock_key("acme", "deployed") != lock_key("globex", "deployed")
    assert _status(globex, "manual")["pulls"] == 0


# --- the docs --------------------------------------------------------------------------------


def test_docs_sources_configuration_example_loads_and_every_key_is_documented() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "sources.md").read_text()
    start = docs.index("## Configuration")
    section = docs[start : docs.index("\n## ", start)]
    [example] = re.findall(r"```yaml\n(.*?)```", section, re.S)
    config = factgen.load_sources_yaml(example)
    assert [s.name for s in config.sources] == ["prom", "deployed", "flags"]
    keys = set(factgen.SourceSpec.model_fields) | set(factgen.SourceAttribute.model_fields)
    keys |= set(factgen.SourcesConfig.model_fields) - {"sources"}
    table = set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))
    assert keys <= table, keys - table
