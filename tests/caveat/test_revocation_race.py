"""Revocation before next use (issue 14, figure 3), through HTTP and MCP alike.

An honest agent loop (test code, not the product) opens a case, observes, recalls,
records the use of what it puts in its context, then makes K model calls; before each
one it runs the context guard (``POST /v1/context/check`` or the MCP tool
``check_context``) and drops what the guard withheld. An SME thread, with its own
HTTP client and an SME token, revokes one of the context items or an ancestor of one
(whose descendants are then re-opened) at a random moment between call k and call
k+1. The SME revokes, then signals; the loop makes call k+1 only after the signal, so
every call after k happens after the revocation committed.

Afterwards the items' states are read through the application layer as an admin:
no model call after the revocation may have received an item revoked or re-opened
by it. The control runs the same loop with the guard skipped and must see such an
item reach a model call (which shows the assertion can fail).

The servers are the door tests' (``serving``): uvicorn on loopback over a runtime that
logs in as ``caveat_app``. ``CAVEAT_RACE_RUNS`` (default 10 per door) and
``CAVEAT_RACE_SEED`` set the number of runs and the seed; with ``CAVEAT_RACE_REPORT``
the figures are written there as JSON (``python -m bench revocation_race`` does this).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import claims
import factgen
from caveat import app as use
from predicates import ValueType
from tests.caveat.test_http import Server, serving
from tests.conftest import ADMIN

RUNS = int(os.environ.get("CAVEAT_RACE_RUNS", "10"))
CONTROL_RUNS = int(os.environ.get("CAVEAT_RACE_CONTROL_RUNS", str(max(2, RUNS // 5))))
SEED = int(os.environ.get("CAVEAT_RACE_SEED", "14003"))
MODES = ("guarded", "control")
QUERY = "connection pool exhausted under checkout load"
WITHDRAWN = ("revoked", "needs_reverification")

Call = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Lineage:
    """One run's items: a shadow ancestor (never recalled), an active root derived
    from it, an active child of the root, and an independent active item."""

    subject: str
    ancestor: int
    root: int
    child: int
    loner: int

    @property
    def recallable(self) -> set[int]:
        return {self.root, self.child, self.loner}

    @property
    def all(self) -> tuple[int, ...]:
        return (self.ancestor, self.root, self.child, self.loner)


@dataclass(frozen=True)
class Applies:
    """One applicability run's items, all active ``failure_mechanism`` precedents (which
    deploys do not trigger): one requires the pool max at 20, one at least 10, one the
    retries at least 3. The world changes the pool max to 50."""

    subject: str
    exact: int
    floor: int
    retries: int

    @property
    def recallable(self) -> set[int]:
        return {self.exact, self.floor, self.retries}

    def stopped(self, change: str) -> set[int]:
        """What may not reach a model call after the change: the item whose condition it
        made FALSE and, for a deploy, every item whose conditions name the pool max (the
        event re-opens them, model §4.3)."""
        return {self.exact} if change == "observation" else {self.exact, self.floor}


@dataclass
class Run:
    """What one run saw: every model call's context, and when the revocation landed."""

    calls: list[tuple[float, tuple[int, ...]]] = field(default_factory=list)
    revoked_at: float | None = None
    reopened: tuple[int, ...] = ()
    error: BaseException | None = None


@dataclass
class Figures:
    runs: int = 0
    revocations: int = 0
    calls: int = 0
    calls_after: int = 0
    leaks: int = 0
    leaked_runs: int = 0
    targets: dict[str, int] = field(default_factory=dict)


def _write(rt: use.Runtime, case: str, subject: str, attribute: str, **more: Any) -> int:
    body = {
        "kind": "fact",
        "subject": subject,
        "attribute": attribute,
        "object": True,
        "required": ["config.connection_pool.max eq 20"],
        "evidence": ["E-1"],
        "scope": {"axis": "case", "id": case},
        "text": f"{subject}: connection pool exhausted under checkout load ({attribute}).",
        **more,
    }
    written = use.write(rt, ADMIN, claims.ItemWrite.model_validate(body))
    assert written.item_id is not None, written
    return written.item_id


def lineage(rt: use.Runtime, n: int, door: str) -> Lineage:
    """The run's world, set up through the application layer as the operator."""
    subject = f"svc-{door}-{n}"
    use.import_entities(rt, ADMIN, [factgen.EntitySpec(subject, "service", ())])
    case = f"SEED-{door}-{n}"
    use.open_case(rt, ADMIN, case, subjects=[subject])
    ancestor = _write(rt, case, subject, "pool_max_too_low")
    use.promote(rt, ADMIN, ancestor, to="shadow")
    root = _write(rt, case, subject, "pool_exhausted", derived_from=[ancestor])
    child = _write(rt, case, subject, "restart_restores", derived_from=[root])
    loner = _write(rt, case, subject, "retries_amplify_load")
    for item in (root, child, loner):
        use.promote(rt, ADMIN, item, to="shadow")
        use.promote(rt, ADMIN, item, to="active")
    return Lineage(subject, ancestor, root, child, loner)


def observed(subject: str) -> list[dict[str, Any]]:
    """What the agent observes before it recalls: the pool max at 20, retries at 5."""
    return [
        {"subject": subject, "attribute": "config.connection_pool.max", "value": 20},
        {"subject": subject, "attribute": "config.retries.max", "value": 5},
    ]


def applies(rt: use.Runtime, n: int, door: str) -> Applies:
    """An applicability run's world, set up through the application layer."""
    subject = f"app-{door}-{n}"
    use.import_entities(rt, ADMIN, [factgen.EntitySpec(subject, "service", ())])
    case = f"SEED-{door}-{n}"
    use.open_case(rt, ADMIN, case, subjects=[subject])
    more = {"content_type": "failure_mechanism"}
    exact = _write(rt, case, subject, "pool_max_twenty", **more)
    floor = _write(
        rt, case, subject, "pool_max_floor", required=["config.connection_pool.max gte 10"], **more
    )
    retries = _write(
        rt, case, subject, "retries_amplify", required=["config.retries.max gte 3"], **more
    )
    for item in (exact, floor, retries):
        use.promote(rt, ADMIN, item, to="shadow")
        use.promote(rt, ADMIN, item, to="active")
    return Applies(subject, exact, floor, retries)


def change(subject: str, kind: str, n: int) -> Callable[[httpx.Client], tuple[int, ...]]:
    """The world changes between two model calls: the pool max becomes 50, observed
    (``POST /v1/observations``) or deployed (a CloudEvent at ``POST /v1/events``)."""

    def act(c: httpx.Client) -> tuple[int, ...]:
        if kind == "observation":
            fifty = {"subject": subject, "attribute": "config.connection_pool.max", "value": 50}
            res = c.post("/v1/observations", json={"observations": [fifty]})
            assert res.status_code == 201, res.text
            return ()
        deploy = {
            "specversion": "1.0",
            "id": f"deploy-{subject}-{n}",
            "source": f"ci/{subject}",
            "type": "deploy",
            "subject": subject,
            "data": {"changes": {"config.connection_pool.max": 50}},
        }
        res = c.post("/v1/events", json=deploy)
        assert res.status_code == 200, res.text
        [event] = res.json()["events"]
        return tuple(event["needs_reverification"])

    return act


def http_door(s: Server) -> tuple[httpx.AsyncClient, Call]:
    """The agent's tools as HTTP routes (docs/agents.md)."""
    api = httpx.AsyncClient(
        base_url=s.base, headers={"Authorization": f"Bearer {s.agent}"}, timeout=30
    )

    async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
        if name == "open_case":
            res = await api.post(
                "/v1/cases", json={"id": args["case"], "subjects": args["subjects"]}
            )
        elif name == "observe":
            res = await api.post("/v1/observations", json=args)
        elif name == "recall":
            params = {"query": args["query"], "subject": args["subjects"], "case": args["case"]}
            res = await api.get("/v1/recall", params=params)
        elif name == "record_use":
            res = await api.post("/v1/record-use", json=args)
        elif name == "check_context":
            res = await api.post("/v1/context/check", json=args)
        else:  # pragma: no cover - the loop calls no other tool
            raise AssertionError(name)
        assert not res.is_error, res.text
        body: dict[str, Any] = res.json()
        return body

    return api, call


async def agent_loop(
    call: Call,
    world: Lineage | Applies,
    case: str,
    *,
    calls: int,
    k: int,
    guard: bool,
    between: threading.Event,
    revoked: threading.Event,
    think: float,
    run: Run,
    ignore: frozenset[str] = frozenset(),
) -> None:
    """Open a case, observe, recall, record use; then ``calls`` model calls, each after
    the context guard (unless ``guard`` is off). After call ``k`` it lets the SME in and
    makes call k+1 only once the SME has revoked (or changed the world). Drops for a
    reason in ``ignore`` are not followed (a guard that does not answer them)."""
    ask = {"query": QUERY, "subjects": [world.subject], "case": case}
    await call("open_case", {"case": case, "subjects": [world.subject]})
    await call("observe", {"observations": observed(world.subject)})
    found = await call("recall", ask)
    recalled = [r["item"]["id"] for r in found["items"]]
    assert set(recalled) == world.recallable, (recalled, world)
    used = await call("record_use", {**ask, "used": recalled})
    assert used["refused"] == {}, used
    context: list[int] = list(used["used"])

    def model(items: tuple[int, ...]) -> None:
        """A model call: it receives the context items (no real model)."""
        run.calls.append((time.monotonic(), items))

    for n in range(1, calls + 1):
        if n == k + 1:
            between.set()
            await asyncio.sleep(think)  # the agent's own work between two calls
            assert await asyncio.to_thread(revoked.wait, 30), "the SME never signalled"
            assert run.error is None, run.error
        if guard:
            checked = await call("check_context", {"items": context, "case": case})
            dropped = {int(i) for i, why in checked["dropped"].items() if why not in ignore}
            assert set(checked["usable"]) | set(map(int, checked["dropped"])) == set(context)
            context = [i for i in context if i not in dropped]
        model(tuple(context))


def revoke(target: int) -> Callable[[httpx.Client], tuple[int, ...]]:
    """The SME's act: revoke ``target``; the descendants it re-opened."""

    def act(c: httpx.Client) -> tuple[int, ...]:
        res = c.post(f"/v1/items/{target}/revoke", json={"reason": "wrong precedent"})
        assert res.status_code == 200, res.text
        return tuple(res.json()["reopened"])

    return act


def sme(
    s: Server,
    act: Callable[[httpx.Client], tuple[int, ...]],
    jitter: float,
    between: threading.Event,
    revoked: threading.Event,
    run: Run,
) -> None:
    """An SME with a client of its own: waits for the gap, acts (revokes, or changes the
    world), then signals (also when it fails, so that the loop stops waiting; the
    failure is kept in ``run``)."""
    try:
        with httpx.Client(
            base_url=s.base, headers={"Authorization": f"Bearer {s.sme}"}, timeout=30
        ) as c:
            assert between.wait(30), "the loop never reached the gap"
            time.sleep(jitter)
            run.reopened = act(c)
            run.revoked_at = time.monotonic()
    except BaseException as exc:  # the loop reports it
        run.error = exc
    finally:
        revoked.set()


async def race(
    s: Server, door: str, call: Call, *, guard: bool, runs: int, figures: Figures
) -> list[str]:
    """``runs`` races through one door; the leaks found, as messages."""
    leaks: list[str] = []
    for n in range(runs):
        rng = random.Random(f"{SEED}/{door}/{'guard' if guard else 'control'}/{n}")
        world = await asyncio.to_thread(lineage, s.rt, n, f"{door}-{'g' if guard else 'c'}")
        calls = rng.randint(2, 6)
        k = rng.randint(1, calls - 1)
        target = rng.choice(world.all)
        run = Run()
        between, revoked = threading.Event(), threading.Event()
        thread = threading.Thread(
            target=sme,
            args=(s, revoke(target), rng.uniform(0, 0.01), between, revoked, run),
            daemon=True,
        )
        thread.start()
        await agent_loop(
            call,
            world,
            f"RUN-{door}-{'g' if guard else 'c'}-{n}",
            calls=calls,
            k=k,
            guard=guard,
            between=between,
            revoked=revoked,
            think=rng.uniform(0, 0.01),
            run=run,
        )
        await asyncio.to_thread(thread.join, 30)
        assert run.error is None and run.revoked_at is not None, run.error
        # the states, read afterwards through the application layer as an admin
        states = {i: use.item(s.rt, ADMIN, i).state for i in world.all}
        withdrawn = {i for i, state in states.items() if state in WITHDRAWN}
        assert states[target] == "revoked", states
        assert withdrawn == {target, *run.reopened}, (states, run.reopened)
        assert withdrawn & world.recallable, "the revocation touched no context item"
        assert len(run.calls) == calls
        before = [items for at, items in run.calls if at < run.revoked_at]
        after = [items for at, items in run.calls if at > run.revoked_at]
        assert len(before) == k and len(after) == calls - k, (k, run)
        assert all(set(items) == world.recallable for items in before), run.calls
        figures.runs += 1
        figures.revocations += 1
        kind = ("ancestor", "root", "child", "loner")[world.all.index(target)]
        figures.targets[kind] = figures.targets.get(kind, 0) + 1
        figures.calls += calls
        figures.calls_after += len(after)
        found = [sorted(withdrawn & set(items)) for items in after if withdrawn & set(items)]
        figures.leaks += sum(len(f) for f in found)
        figures.leaked_runs += bool(found)
        if found:
            leaks.append(
                f"run {n}: target {target}, k={k}, withdrawn {sorted(withdrawn)} in {found}"
            )
    return leaks


async def applicability_race(
    s: Server, door: str, call: Call, *, states_only: bool, runs: int, figures: Figures
) -> list[str]:
    """``runs`` applicability races through one door: between call k and k+1 the pool max
    becomes 50 (an observation in even runs, a deploy in odd ones). ``states_only``: the
    control, a loop that follows the guard's drops except ``applicability`` ones, as a
    guard that only re-read states would answer. The leaks found, as messages."""
    leaks: list[str] = []
    mode = "states" if states_only else "rule"
    for n in range(runs):
        rng = random.Random(f"{SEED}/applicability/{door}/{mode}/{n}")
        tag = f"{door}-{mode}"
        world = await asyncio.to_thread(applies, s.rt, n, tag)
        calls = rng.randint(2, 6)
        k = rng.randint(1, calls - 1)
        kind = ("observation", "deploy")[n % 2]
        run = Run()
        between, changed = threading.Event(), threading.Event()
        thread = threading.Thread(
            target=sme,
            args=(s, change(world.subject, kind, n), rng.uniform(0, 0.01), between, changed, run),
            daemon=True,
        )
        thread.start()
        await agent_loop(
            call,
            world,
            f"RUN-{tag}-{n}",
            calls=calls,
            k=k,
            guard=True,
            between=between,
            revoked=changed,
            think=rng.uniform(0, 0.01),
            run=run,
            ignore=frozenset({"applicability"}) if states_only else frozenset(),
        )
        await asyncio.to_thread(thread.join, 30)
        assert run.error is None and run.revoked_at is not None, run.error
        stopped = world.stopped(kind)
        states = {i: use.item(s.rt, ADMIN, i).state for i in sorted(world.recallable)}
        reopened = {i for i, state in states.items() if state == "needs_reverification"}
        # an observation changes no state; a deploy re-opens what names the pool max
        assert reopened == (stopped if kind == "deploy" else set()), (kind, states)
        assert set(run.reopened) == reopened
        before = [items for at, items in run.calls if at < run.revoked_at]
        after = [items for at, items in run.calls if at > run.revoked_at]
        assert len(before) == k and len(after) == calls - k, (k, run)
        assert all(set(items) == world.recallable for items in before), run.calls
        figures.runs += 1
        figures.revocations += 1
        figures.targets[kind] = figures.targets.get(kind, 0) + 1
        figures.calls += calls
        figures.calls_after += len(after)
        found = [sorted(stopped & set(items)) for items in after if stopped & set(items)]
        figures.leaks += sum(len(f) for f in found)
        figures.leaked_runs += bool(found)
        if found:
            leaks.append(f"run {n}: {kind}, k={k}, stopped {sorted(stopped)} in {found}")
        elif not states_only:
            # the guard drops what stopped applying, and nothing that still applies
            assert all(set(items) == world.recallable - stopped for items in after), run.calls
    return leaks


def _report(
    figures: dict[str, Figures], seconds: dict[str, float], section: str | None = None
) -> None:
    """Print the figures and, with ``CAVEAT_RACE_REPORT``, write them there: the
    revocation race's at the top level, a variant's under its ``section`` (each test
    keeps what the other wrote)."""
    report = {
        "seed": SEED,
        "runs": RUNS,
        "control_runs": CONTROL_RUNS,
        "seconds": {door: round(t, 1) for door, t in seconds.items()},
        "figures": {name: f.__dict__ for name, f in figures.items()},
    }
    print(f"\nfigure 3{f' ({section})' if section else ''}:", json.dumps(report))
    path = os.environ.get("CAVEAT_RACE_REPORT")
    if path:
        file = Path(path)
        kept: dict[str, Any] = json.loads(file.read_text()) if file.exists() else {}
        merged = {**kept, section: report} if section else {**kept, **report}
        file.write_text(json.dumps(merged, indent=2) + "\n")


@asynccontextmanager
async def mcp_door(s: Server) -> AsyncIterator[Call]:
    """The agent's MCP door (the SDK's client over streamable HTTP) as a ``Call``."""
    headers = {"Authorization": f"Bearer {s.agent}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:  # noqa: SIM117
        async with Client(streamable_http_client(f"{s.base}/mcp", http_client=http)) as mcp:

            async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
                result = await mcp.call_tool(name, args)
                assert not result.is_error, result.content
                data = result.structured_content
                assert isinstance(data, dict)
                inner: dict[str, Any] = data.get("result", data)
                return inner

            yield call


async def _mcp_race(s: Server, figures: dict[str, Figures]) -> tuple[list[str], list[str]]:
    async with mcp_door(s) as call:
        leaks = await race(s, "mcp", call, guard=True, runs=RUNS, figures=figures["guarded"])
        caught = await race(
            s, "mcp", call, guard=False, runs=CONTROL_RUNS, figures=figures["control"]
        )
    return leaks, caught


async def _http_race(s: Server, figures: dict[str, Figures]) -> tuple[list[str], list[str]]:
    api, call = http_door(s)
    async with api:
        leaks = await race(s, "http", call, guard=True, runs=RUNS, figures=figures["guarded"])
        caught = await race(
            s, "http", call, guard=False, runs=CONTROL_RUNS, figures=figures["control"]
        )
    return leaks, caught


def _retries(rt: use.Runtime) -> None:
    """The runs' second attribute (the door tests' world declares the pool max)."""
    retries = factgen.AttributeSpec(
        "config.retries.max", ValueType.parse("int"), content_type="configuration"
    )
    use.declare_schema(rt, ADMIN, [retries])


Race = Callable[[Server, dict[str, Figures]], Awaitable[tuple[list[str], list[str]]]]


def _race_both_doors(db_url: str, http: Race, mcp: Race, section: str | None = None) -> None:
    """RUNS races over HTTP and RUNS over MCP through the guard, CONTROL_RUNS of each
    through the control, on one server logged in as caveat_app; then the figure: zero
    leaks through the guard, and the control must catch one (so the first can fail)."""
    figures = {f"{door}/{mode}": Figures() for door in ("http", "mcp") for mode in MODES}
    found: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}
    with serving(db_url) as s:
        _retries(s.rt)
        for door, race_through in (("http", http), ("mcp", mcp)):
            started = time.monotonic()
            mine = {mode: figures[f"{door}/{mode}"] for mode in MODES}
            found[f"{door}/guarded"], found[f"{door}/control"] = asyncio.run(race_through(s, mine))
            seconds[door] = time.monotonic() - started
    _report(figures, seconds, section)
    for door in ("http", "mcp"):
        guarded, control = figures[f"{door}/guarded"], figures[f"{door}/control"]
        assert guarded.runs == RUNS and guarded.calls_after >= RUNS
        assert found[f"{door}/guarded"] == [], found[f"{door}/guarded"]
        assert guarded.leaks == 0
        assert control.runs == CONTROL_RUNS and control.leaks > 0, control
        assert found[f"{door}/control"], control


def test_no_revoked_item_reaches_the_next_model_call(db_url: str) -> None:
    """RUNS races over HTTP and RUNS over MCP with the guard, CONTROL_RUNS of each
    without it: zero withdrawn items at any model call after the revocation, and the
    control (no guard) must catch the leak."""
    _race_both_doors(db_url, _http_race, _mcp_race)


async def _applicability_mcp(s: Server, figures: dict[str, Figures]) -> tuple[list[str], list[str]]:
    async with mcp_door(s) as call:
        return await _applicability_both(s, "mcp", call, figures)


async def _applicability_http(
    s: Server, figures: dict[str, Figures]
) -> tuple[list[str], list[str]]:
    api, call = http_door(s)
    async with api:
        return await _applicability_both(s, "http", call, figures)


async def _applicability_both(
    s: Server, door: str, call: Call, figures: dict[str, Figures]
) -> tuple[list[str], list[str]]:
    leaks = await applicability_race(
        s, door, call, states_only=False, runs=RUNS, figures=figures["guarded"]
    )
    caught = await applicability_race(
        s, door, call, states_only=True, runs=CONTROL_RUNS, figures=figures["control"]
    )
    return leaks, caught


def test_no_item_that_stopped_applying_reaches_the_next_model_call(db_url: str) -> None:
    """The applicability variant (issue 23): between call k and k+1 the pool max becomes
    50, observed or deployed. At every later call, no precedent whose condition it made
    FALSE (nor, after a deploy, one it re-opened) is in the context, and the ones that
    still apply are. The control follows every drop but ``applicability`` (a guard that
    only re-reads states) and must see a precedent that no longer applies reach a call."""
    # observation runs (even ones) leak through a guard that only reads states
    _race_both_doors(db_url, _applicability_http, _applicability_mcp, "applicability")
