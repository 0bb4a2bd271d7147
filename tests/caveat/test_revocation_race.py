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
from collections.abc import Awaitable, Callable
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
    world: Lineage,
    case: str,
    *,
    calls: int,
    k: int,
    guard: bool,
    between: threading.Event,
    revoked: threading.Event,
    think: float,
    run: Run,
) -> None:
    """Open a case, observe, recall, record use; then ``calls`` model calls, each after
    the context guard (unless ``guard`` is off). After call ``k`` it lets the SME in and
    makes call k+1 only once the SME has revoked."""
    ask = {"query": QUERY, "subjects": [world.subject], "case": case}
    await call("open_case", {"case": case, "subjects": [world.subject]})
    pool = {"subject": world.subject, "attribute": "config.connection_pool.max", "value": 20}
    await call("observe", {"observations": [pool]})
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
            dropped = {int(i) for i in checked["dropped"]}
            assert set(checked["usable"]) | dropped == set(context), checked
            context = [i for i in context if i not in dropped]
        model(tuple(context))


def sme(
    s: Server,
    target: int,
    jitter: float,
    between: threading.Event,
    revoked: threading.Event,
    run: Run,
) -> None:
    """An SME with a client of its own: waits for the gap, revokes, then signals (also
    when it fails, so that the loop stops waiting; the failure is kept in ``run``)."""
    try:
        with httpx.Client(
            base_url=s.base, headers={"Authorization": f"Bearer {s.sme}"}, timeout=30
        ) as c:
            assert between.wait(30), "the loop never reached the gap"
            time.sleep(jitter)
            res = c.post(f"/v1/items/{target}/revoke", json={"reason": "wrong precedent"})
            assert res.status_code == 200, res.text
            run.reopened = tuple(res.json()["reopened"])
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
            args=(s, target, rng.uniform(0, 0.01), between, revoked, run),
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


def _report(figures: dict[str, Figures], seconds: dict[str, float]) -> None:
    report = {
        "seed": SEED,
        "runs": RUNS,
        "control_runs": CONTROL_RUNS,
        "seconds": {door: round(t, 1) for door, t in seconds.items()},
        "figures": {name: f.__dict__ for name, f in figures.items()},
    }
    print("\nfigure 3:", json.dumps(report))
    path = os.environ.get("CAVEAT_RACE_REPORT")
    if path:
        Path(path).write_text(json.dumps(report, indent=2) + "\n")


async def _mcp_race(s: Server, figures: dict[str, Figures]) -> tuple[list[str], list[str]]:
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


def test_no_revoked_item_reaches_the_next_model_call(db_url: str) -> None:
    """RUNS races over HTTP and RUNS over MCP with the guard, CONTROL_RUNS of each
    without it, on one server logged in as caveat_app."""
    figures = {f"{door}/{mode}": Figures() for door in ("http", "mcp") for mode in MODES}
    found: dict[str, list[str]] = {}
    seconds: dict[str, float] = {}
    with serving(db_url) as s:
        for door, race_through in (("http", _http_race), ("mcp", _mcp_race)):
            started = time.monotonic()
            mine = {mode: figures[f"{door}/{mode}"] for mode in MODES}
            found[f"{door}/guarded"], found[f"{door}/control"] = asyncio.run(race_through(s, mine))
            seconds[door] = time.monotonic() - started
    _report(figures, seconds)
    for door in ("http", "mcp"):
        guarded, control = figures[f"{door}/guarded"], figures[f"{door}/control"]
        assert guarded.runs == RUNS and guarded.calls_after >= RUNS
        # the guard: zero withdrawn items at any model call after the revocation
        assert found[f"{door}/guarded"] == [], found[f"{door}/guarded"]
        assert guarded.leaks == 0
        # the control (no guard) must catch the leak: the assertion above can fail
        assert control.runs == CONTROL_RUNS and control.leaks > 0, control
        assert found[f"{door}/control"], control
