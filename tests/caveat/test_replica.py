"""Read replicas with a consistency token (issue 14, "Past one machine").

A primary of the test's own (an embedded PostgreSQL in a temporary directory, never
the suite's shared server), migrated, with a streaming standby made by
``pg_basebackup -R`` from the same binaries (``tests/caveat/_replica.py``). Two
runtimes log in as ``caveat_app``: the guarded one reads the standby only when it is
proven fresh (``caveat.app.Runtime.routed``); the control's reads go to the standby
unconditionally (a runtime over the standby's engine).

Each step makes one item that recall and the context guard serve, checks that the
guarded runtime serves it *from the standby* while the standby is fresh, pauses the
standby's replay (``pg_wal_replay_pause()``), withdraws the item by one of the six
kinds (revocation, refutation, redaction, expiry by a deploy event, demotion by a
rejected case, supersession), and reads at once: the guarded recall and context check
must not serve it (and are served by the primary), while the control must still serve
it (the staleness the test would otherwise miss). Replay resumes; once the standby has
caught up the guarded runtime reads it again, and the item stays withdrawn. Then the
token: with replay paused again, a write the standby lacks is found by a recall that
passes the write's token back (the primary serves it) and not by one without (the
standby serves it: a write that withdraws nothing does not hold the standby back).

``CAVEAT_REPLICA_RUNS`` rounds (default 1: the six kinds once), the kinds in an order
drawn from ``CAVEAT_REPLICA_SEED`` (default 14009); in rounds past the first, half the
steps (drawn) leave replay running and read right after the withdrawal while the
standby streams (a real race; the control then may or may not catch it). With
``CAVEAT_REPLICA_REPORT`` the figures are written there as JSON (``python -m bench
replica``).
"""

from __future__ import annotations

import json
import os
import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

import claims
import factgen
from caveat import app as use
from caveat import db
from caveat.api import create_app
from caveat.api._app import SERVED_BY_HEADER as SERVED_BY
from caveat.api._app import TOKEN_HEADER as TOKEN
from predicates.errors import InputError, NotFound
from recall import RecallRequest
from tests.caveat._doors import world
from tests.caveat._replica import Standby, streaming_replica
from tests.caveat.test_http import loopback
from tests.conftest import ADMIN

RUNS = int(os.environ.get("CAVEAT_REPLICA_RUNS", "1"))
SEED = int(os.environ.get("CAVEAT_REPLICA_SEED", "14009"))
KINDS = ("revocation", "refutation", "redaction", "expiry", "demotion", "supersession")
AGENT = claims.Actor("agent-ir", "agent")
QUERY = "connection pool exhausted under checkout load"
TENANT = "acme"


@dataclass
class Pair:
    """The primary, its standby, the guarded runtime and the control's."""

    standby: Standby
    guarded: use.Runtime
    control: use.Runtime
    engines: list[sa.Engine]


@dataclass
class Figures:
    steps: Counter[str] = field(default_factory=Counter)
    paused: int = 0
    streaming: int = 0
    streaming_served: Counter[str | None] = field(default_factory=Counter)
    stale_served: int = 0  # guarded reads that served a withdrawn item: must be 0
    guarded_reads_after: int = 0
    control_reads_after: int = 0
    control_caught: int = 0  # control reads that served a withdrawn item
    control_caught_paused: int = 0
    replica_served_fresh: int = 0  # guarded reads the standby served while fresh
    token_reads: int = 0
    token_found: int = 0
    token_less_on_replica: int = 0
    routes: dict[str, int] = field(default_factory=dict)


@pytest.fixture(scope="module")
def pair() -> Iterator[Pair]:
    with db.temporary_server() as primary_url:
        db.migrate(primary_url)
        with streaming_replica(primary_url) as standby:
            primary = db.make_app_engine(primary_url)
            replica = db.make_app_engine(standby.url)
            try:
                guarded = use.Runtime.over(primary, TENANT, replica=replica)
                control = use.Runtime.over(replica, TENANT)
                world(guarded)
                yield Pair(standby, guarded, control, [primary, replica])
            finally:
                primary.dispose()
                replica.dispose()


def _subject(rt: use.Runtime, name: str) -> str:
    use.import_entities(rt, ADMIN, [factgen.EntitySpec(name, "service", ())])
    use.observe(rt, ADMIN, [factgen.Observation(name, "config.connection_pool.max", 20)])
    return name


def _write(rt: use.Runtime, subject: str, case: str, attribute: str, obj: object = True) -> int:
    written = use.write(
        rt,
        ADMIN,
        claims.ItemWrite.model_validate(
            {
                "kind": "fact",
                "subject": subject,
                "attribute": attribute,
                "object": obj,
                "required": ["config.connection_pool.max eq 20"],
                "evidence": ["E-1"],
                "scope": {"axis": "case", "id": case},
                "text": f"{subject}: connection pool exhausted under checkout load.",
            }
        ),
    )
    assert written.item_id is not None, written
    return written.item_id


def _active(rt: use.Runtime, subject: str, case: str, attribute: str) -> int:
    item = _write(rt, subject, case, attribute)
    use.promote(rt, ADMIN, item, to="shadow")
    use.promote(rt, ADMIN, item, to="active")
    return item


@dataclass
class Target:
    """The item a step withdraws, where it is read (its case for a case item), and how
    it is withdrawn."""

    item: int
    case: str | None
    subject: str
    withdraw: Callable[[], object]


def target(rt: use.Runtime, kind: str, tag: str) -> Target:
    """An item recall and the guard serve now, and the withdrawal of kind ``kind``."""
    subject = _subject(rt, f"svc-{tag}")
    case = f"INC-{tag}"
    use.open_case(rt, ADMIN, case, subjects=[subject])
    if kind == "supersession":
        old = _write(rt, subject, case, "pool_exhausted_at_peak", True)
        return Target(
            old, case, subject, lambda: _write(rt, subject, case, "pool_exhausted_at_peak", False)
        )
    item = _active(rt, subject, case, "pool_exhausted_at_peak")
    why = {"reason": f"replica figure, {kind}"}
    if kind == "revocation":
        return Target(item, None, subject, lambda: use.revoke(rt, ADMIN, item, **why))
    if kind == "refutation":
        return Target(item, None, subject, lambda: use.refute(rt, ADMIN, item, **why))
    if kind == "redaction":
        return Target(item, None, subject, lambda: use.redact(rt, ADMIN, item, **why))
    if kind == "expiry":
        return Target(
            item,
            None,
            subject,
            lambda: use.record_event(
                rt,
                ADMIN,
                type="deploy",
                subjects=[subject],
                changes={"config.connection_pool.max": 40},
            ),
        )
    assert kind == "demotion"
    judged = f"INC-{tag}-judged"
    use.open_case(rt, ADMIN, judged, subjects=[subject])
    ask = RecallRequest(query=QUERY, subjects=[subject], case_id=judged, limit=50)
    assert item in use.record_use(rt, ADMIN, ask, [item]).used
    use.cite(rt, ADMIN, judged, item, influence="decisive")
    return Target(
        item, None, subject, lambda: use.close_case(rt, ADMIN, judged, outcome="rejected")
    )


def recalled(rt: use.Runtime, t: Target, token: str | None = None) -> set[int]:
    ask = RecallRequest(query=QUERY, subjects=[t.subject], case_id=t.case, limit=50)
    return {r.item.id for r in use.recall_items(rt, AGENT, ask, token=token).items}


def usable(rt: use.Runtime, t: Target, *, record: bool) -> bool:
    check = use.check_context(rt, AGENT, [t.item], case_id=t.case, record=record)
    return t.item in check.usable


def withdrawn_state(rt: use.Runtime, item: int) -> str:
    try:
        return use.item(rt, ADMIN, item).state
    except Exception as exc:  # a redacted item is not found, even for the admin
        return type(exc).__name__


def step(p: Pair, kind: str, tag: str, *, paused: bool, control_first: bool, fig: Figures) -> None:
    """One withdrawal of kind ``kind`` and the reads right after it (see the module's
    docstring); ``control_first``: the control reads before the guarded runtime."""
    rt, control = p.guarded, p.control
    t = target(rt, kind, tag)
    p.standby.catch_up()
    # fresh: the standby serves, and serves the item
    assert t.item in recalled(rt, t)
    assert use.served_by() == "replica", rt.routes.counts()
    assert usable(rt, t, record=True)
    assert use.served_by() == "replica"
    fig.replica_served_fresh += 2
    if paused:
        p.standby.pause()
    t.withdraw()

    def guarded() -> None:
        # right after the withdrawal committed: never served by the guarded runtime
        seen, served = [], []
        for read in (
            lambda: t.item in recalled(rt, t),
            lambda: usable(rt, t, record=False),
            lambda: usable(rt, t, record=True),
        ):
            seen.append(read())
            served.append(use.served_by())
        fig.guarded_reads_after += len(seen)
        fig.stale_served += sum(seen)
        assert not any(seen), f"the {kind} of {t.item} was served stale: {rt.routes.counts()}"
        if paused:
            assert served == ["primary"] * 3, served
        else:
            fig.streaming_served.update(served)

    def controlled() -> None:
        # the control reads the standby whatever its position
        caught = [t.item in recalled(control, t), usable(control, t, record=False)]
        fig.control_reads_after += len(caught)
        fig.control_caught += sum(caught)
        if paused:
            fig.control_caught_paused += sum(caught)
            assert all(caught), f"the control did not see the stale {kind} of {t.item}"

    for reads in (controlled, guarded) if control_first else (guarded, controlled):
        reads()
    if paused:
        p.standby.resume()
    p.standby.catch_up()
    # caught up: the standby serves again, and the item stays withdrawn
    assert t.item not in recalled(rt, t)
    assert use.served_by() == "replica"
    assert not usable(rt, t, record=True)
    assert use.served_by() == "replica"
    fig.replica_served_fresh += 2
    assert withdrawn_state(rt, t.item) != "active"
    fig.steps[kind] += 1
    if paused:
        fig.paused += 1
    else:
        fig.streaming += 1


def token_step(p: Pair, tag: str, fig: Figures) -> None:
    """A write the standby has not replayed: found with its token (the primary serves),
    not without it (the standby serves: nothing was withdrawn)."""
    rt = p.guarded
    subject = _subject(rt, f"svc-{tag}")
    case = f"INC-{tag}"
    use.open_case(rt, ADMIN, case, subjects=[subject])
    p.standby.catch_up()
    p.standby.pause()
    try:
        item = _write(rt, subject, case, "retries_amplify_load")
        token = rt.write_position()
        t = Target(item, case, subject, lambda: None)
        assert item in recalled(rt, t, token=token)
        assert use.served_by() == "primary"
        assert item not in recalled(rt, t)
        assert use.served_by() == "replica"
        fig.token_reads += 1
        fig.token_found += 1
        fig.token_less_on_replica += 1
    finally:
        p.standby.resume()


def test_a_withdrawn_item_is_never_served_stale_from_the_replica(pair: Pair) -> None:
    rng = random.Random(SEED)
    fig = Figures()
    started = time.monotonic()
    failure = None
    try:
        for run in range(RUNS):
            kinds = list(KINDS)
            rng.shuffle(kinds)
            for n, kind in enumerate(kinds):
                paused = run == 0 or rng.random() < 0.5
                first = not paused and rng.random() < 0.5
                step(pair, kind, f"{run}-{n}", paused=paused, control_first=first, fig=fig)
            token_step(pair, f"{run}-token", fig)
    except AssertionError as exc:
        failure = str(exc).splitlines()[0]
        raise
    finally:
        counts = sorted(pair.guarded.routes.counts().items())
        fig.routes = {f"{s}/{r}": n for (s, r), n in counts}
        report = os.environ.get("CAVEAT_REPLICA_REPORT")
        if report:
            figures = {**fig.__dict__, "steps": dict(fig.steps), "runs": RUNS, "seed": SEED}
            figures["streaming_served"] = dict(fig.streaming_served)
            figures["seconds"] = round(time.monotonic() - started, 1)
            figures["failure"] = failure
            if failure is None:
                figures["recall_ms_p50"] = latencies(pair)
            Path(report).write_text(json.dumps(figures, indent=2))
    assert fig.stale_served == 0
    assert fig.steps == Counter({k: RUNS for k in KINDS})
    # the control caught the staleness at every paused step, so the check can fail
    assert fig.control_caught_paused == 2 * fig.paused > 0
    assert pair.guarded.routes.counts().get(("replica", "fresh"), 0) >= fig.replica_served_fresh


def latencies(p: Pair, n: int = 300) -> dict[str, float]:
    """Median recall time (ms) over ``n`` recalls of one step's subject: the primary
    alone (no replica configured), and routed to the fresh standby (the horizon read on
    the primary, the check and the recall on the standby); alternated, after a warm-up."""
    alone = use.Runtime.over(p.engines[0], TENANT)
    t = target(p.guarded, "revocation", "latency")
    p.standby.catch_up()
    times: dict[str, list[float]] = {"primary_only": [], "routed_to_replica": []}
    for i in range(n + 20):
        for name, rt in (("primary_only", alone), ("routed_to_replica", p.guarded)):
            began = time.perf_counter()
            assert t.item in recalled(rt, t)
            if i >= 20:
                times[name].append((time.perf_counter() - began) * 1000)
    assert use.served_by() == "replica"
    return {k: round(statistics.median(v), 2) for k, v in times.items()}


def test_every_withdrawal_moves_the_horizon_in_its_transaction(pair: Pair) -> None:
    """Each of the six kinds moves the tenant's horizon on the primary; a promotion to
    active and a plain write do not."""
    rt = pair.guarded

    def horizon() -> int:
        with rt.transaction() as s:
            query = sa.text("SELECT withdrawal_horizon FROM tenants WHERE id = :t")
            return int(s.execute(query, {"t": TENANT}).scalar_one())

    for n, kind in enumerate(KINDS):
        t = target(rt, kind, f"h-{n}")
        before = horizon()
        t.withdraw()
        assert horizon() > before, kind
    subject = _subject(rt, "svc-h-quiet")
    use.open_case(rt, ADMIN, "INC-h-quiet", subjects=[subject])
    item = _write(rt, subject, "INC-h-quiet", "retries_amplify_load")
    use.promote(rt, ADMIN, item, to="shadow")
    before = horizon()
    use.promote(rt, ADMIN, item, to="active")
    _write(rt, subject, "INC-h-quiet", "pool_max_too_low")
    assert horizon() == before
    # a skill: releasing the first version withdraws nothing; retiring it does
    procedure = use.write(
        rt,
        ADMIN,
        claims.ItemWrite.model_validate(
            {
                "kind": "skill",
                "subject": subject,
                "attribute": "pool_restart_procedure",
                "object": "drain one pod, restart its pool, watch p99 for two minutes",
                "evidence": ["E-1"],
                "scope": {"axis": "case", "id": "INC-h-quiet"},
                "text": f"{subject}: the pool restart procedure.",
            }
        ),
    ).item_id
    assert procedure is not None
    with rt.transaction() as s:
        claims.register_evidence(
            session=s,
            tenant=TENANT,
            evidence_id="RUN-h",
            actor=ADMIN,
            now=use.utcnow(),
            test_outcome="passed",
        )
    use.release_skill(rt, ADMIN, procedure, test="RUN-h")
    assert horizon() == before
    use.retire_skill(rt, ADMIN, procedure)
    assert horizon() > before


def test_a_token_that_is_no_wal_position_is_invalid_input(pair: Pair) -> None:
    ask = RecallRequest(query=QUERY, limit=5)
    for bad in ("yesterday", "0/", "1/2/3", "'; DROP TABLE items; --", "G/0"):
        with pytest.raises(InputError) as info:
            use.recall_items(pair.guarded, AGENT, ask, token=bad)
        assert info.value.code == "invalid_input"


def test_the_token_and_the_server_that_served_over_http(pair: Pair) -> None:
    rt = pair.guarded
    agent = use.create_token(rt, ADMIN, "agent-ir", role="agent", capabilities=[]).token
    sme = use.create_token(rt, ADMIN, "sme-alice", role="sme").token
    t = target(rt, "revocation", "http")
    recall_url = f"/v1/recall?query={QUERY}&subject={t.subject}&limit=50"
    with (
        loopback(create_app(rt)) as base,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {agent}"}) as ag,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {sme}"}) as sm,
    ):

        def ids(res: httpx.Response) -> set[int]:
            assert res.status_code == 200, res.text
            return {int(r["item"]["id"]) for r in res.json()["items"]}

        pair.standby.catch_up()
        res = ag.get(recall_url)
        assert t.item in ids(res) and res.headers[SERVED_BY] == "replica"
        pair.standby.pause()
        try:
            revoked = sm.post(f"/v1/items/{t.item}/revoke", json={"reason": "http"})
            assert revoked.status_code == 200, revoked.text
            token = revoked.headers[TOKEN]
            assert re.fullmatch(r"[0-9A-F]+/[0-9A-F]+", token), token
            res = ag.get(recall_url)
            assert t.item not in ids(res) and res.headers[SERVED_BY] == "primary"
            check = ag.post("/v1/context/check", json={"items": [t.item]})
            assert check.status_code == 200, check.text
            assert check.json()["usable"] == [] and check.headers[SERVED_BY] == "primary"
            bad = ag.get(recall_url, headers={TOKEN: "yesterday"})
            assert bad.status_code == 422 and bad.json()["code"] == "invalid_input", bad.text
            assert TOKEN not in ag.get(recall_url).headers  # a read returns no token
        finally:
            pair.standby.resume()
        pair.standby.catch_up()
        res = ag.get(recall_url, headers={TOKEN: token})
        assert t.item not in ids(res) and res.headers[SERVED_BY] == "replica"
        metrics = httpx.get(f"{base}/metrics").text
        assert 'caveat_reads_total{reason="fresh",served_by="replica"}' in metrics, metrics


def test_a_replica_that_cannot_be_reached_sends_reads_to_the_primary(pair: Pair) -> None:
    primary = pair.engines[0]
    nowhere = sa.create_engine(
        "postgresql+psycopg://caveat_app@/postgres?host=/nonexistent-socket-dir",
        poolclass=sa.pool.NullPool,
    )
    try:
        rt = use.Runtime.over(primary, TENANT, replica=nowhere)
        t = target(rt, "revocation", "down")
        assert t.item in recalled(rt, t)
        assert use.served_by() == "primary"
        assert usable(rt, t, record=True)
        assert rt.routes.counts() == {("primary", "replica_failed"): 2}
    finally:
        nowhere.dispose()


def test_a_case_the_replica_has_not_replayed_is_asked_of_the_primary(pair: Pair) -> None:
    """An unknown case is ``not_found``; a case opened since the standby's last replay
    is not: the standby's ``not_found`` is confirmed on the primary, which answers."""
    rt = pair.guarded
    pair.standby.catch_up()
    pair.standby.pause()
    try:
        use.open_case(rt, ADMIN, "INC-LAG")  # no withdrawal: the standby stays fresh
        before = rt.routes.counts().get(("primary", "not_found"), 0)
        use.recall_items(rt, AGENT, RecallRequest(query=QUERY, case_id="INC-LAG"))
        assert use.served_by() == "primary"
        use.check_context(rt, AGENT, [], case_id="INC-LAG")
        assert use.served_by() == "primary"
        assert rt.routes.counts()[("primary", "not_found")] == before + 2
        with pytest.raises(NotFound) as info:
            use.recall_items(rt, AGENT, RecallRequest(query=QUERY, case_id="INC-NONE"))
        assert info.value.message == "no case 'INC-NONE'"
    finally:
        pair.standby.resume()


def test_the_guards_recording_goes_to_the_primary(pair: Pair) -> None:
    """A verify-on-next-use item (a deploy judged not to touch it): the guard's read
    alone is the fresh standby's; recording the check is the primary's, which answers."""
    rt = pair.guarded
    t = target(rt, "revocation", "vonu")
    use.record_event(rt, ADMIN, type="deploy", subjects=[t.subject], changes={})
    assert withdrawn_state(rt, t.item) == "verify_on_next_use"
    pair.standby.catch_up()
    before = rt.routes.counts()
    use.check_context(rt, AGENT, [t.item], record=False)
    assert use.served_by() == "replica"
    assert withdrawn_state(rt, t.item) == "verify_on_next_use"  # a read records nothing
    use.check_context(rt, AGENT, [t.item], record=True)
    assert use.served_by() == "primary"
    after = rt.routes.counts()
    assert after.get(("primary", "records"), 0) == before.get(("primary", "records"), 0) + 1
    # recorded on the primary: the check ran (no observation since the deploy: failed)
    assert withdrawn_state(rt, t.item) == "needs_reverification"


def test_a_cascade_of_many_rows_moves_the_horizon_once_per_statement(pair: Pair) -> None:
    """A revocation re-opening 2,000 descendants: one statement moves thousands of
    state rows, and the bump touches the tenant's row once (an early version's
    per-row timestamps made that upsert refuse its own row, CardinalityViolation)."""
    rt = pair.guarded
    subject = _subject(rt, "svc-cascade")
    case = "INC-cascade"
    use.open_case(rt, ADMIN, case, subjects=[subject])
    root = _active(rt, subject, case, "pool_exhausted_at_peak")
    body = {
        "kind": "fact",
        "subject": subject,
        "object": True,
        "required": ["config.connection_pool.max eq 20"],
        "evidence": ["E-1"],
        "scope": {"axis": "case", "id": case},
        "derived_from": [root],
        "text": f"{subject}: derived from the pool precedent.",
    }
    batch = [
        claims.ItemWrite.model_validate({**body, "attribute": f"derived_{n}"}) for n in range(2000)
    ]
    assert all(o.item_id is not None for o in use.write_batch(rt, ADMIN, batch).outcomes)
    with rt.transaction() as s:
        query = sa.text("SELECT withdrawal_horizon FROM tenants WHERE id = :t")
        before = int(s.execute(query, {"t": TENANT}).scalar_one())
    revoked = use.revoke(rt, ADMIN, root, reason="a cascade of 2,000")
    assert len(revoked.reopened) == 2000
    with rt.transaction() as s:
        after = int(s.execute(query, {"t": TENANT}).scalar_one())
    assert before < after <= before + 10  # per statement, not per row
