"""A stateful property test of the lifecycle against the invariants of model §4.

Random sequences of writes (some derived from earlier items), promotions,
observations, events with random judge answers, citations, case closes,
revocations, refutations, recalls and context checks run on the real store.
After every step:

- only the items §4 allows entered a context: ``active`` items, ``case``
  items inside their own case, ``verify_on_next_use`` items that passed
  their check (they are ``active`` afterwards, by a ``check_passed``);
  never a shadow item;
- nothing returns to ``active`` from an event;
- a revoked (refuted) item stays revoked (refuted, unless revoked later) and is
  never usable;
- a revocation or a refutation moves exactly its item and, of its descendants
  (transitively, by the model's own lineage), those in circulation, to
  ``needs_reverification``; nothing else changes;
- a write derived from a withdrawn lineage is refused with ``lineage_revoked``
  (a revoked ancestor) or else ``lineage_refuted``, and any other write of the
  machine is accepted;
- every transition has exactly one audit row, and the audit chain holds.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy.orm import sessionmaker

import claims
import factgen
import lifecycle
import recall
from claims._queries import TRANSITIONS
from factgen import Event
from predicates import ValueType
from predicates.errors import CaveatError
from tests.conftest import ADMIN, T0
from tests.lifecycle.helpers import HISTORY_BREAKS

AGENT = claims.Actor("agent", "agent", frozenset({"x"}))
SME = claims.Actor("sme", "sme", frozenset({"x"}))
SUBJECTS = ("svc-a", "svc-b")
CONDITIONS = (
    "config.pool.max eq 20",
    "config.pool.max gte 50",
    "metrics.util gte 0.5",
    "metrics.util lt 0.5",
    "env.db.version lt v16",
)
_tenants = itertools.count()

#: An independent oracle for the conditions the machine writes: attribute and test.
ORACLE: dict[str, tuple[str, Any]] = {
    "config.pool.max eq 20": ("config.pool.max", lambda v: v == 20),
    "config.pool.max gte 50": ("config.pool.max", lambda v: v >= 50),
    "metrics.util gte 0.5": ("metrics.util", lambda v: v >= 0.5),
    "metrics.util lt 0.5": ("metrics.util", lambda v: v < 0.5),
    "env.db.version lt v16": ("env.db.version", lambda v: v < [16]),
}


class Judged:
    """A judge with a fixed policy: nothing, everything, or every other item affected."""

    def __init__(self, how: str) -> None:
        self.how = how

    def __call__(
        self, event: Event, items: Sequence[claims.ItemRecord]
    ) -> Mapping[int, lifecycle.Verdict]:
        pick = {"none": lambda i: False, "all": lambda i: True, "odd": lambda i: i % 2 == 1}
        return {i.id: lifecycle.Verdict(pick[self.how](i.id)) for i in items}


class Lifecycle(RuleBasedStateMachine):
    items = Bundle("items")

    def __init__(self, engine: sa.Engine) -> None:
        super().__init__()
        self.engine = engine
        self.sessions = sessionmaker(engine, expire_on_commit=False)
        self.tenant = f"m{next(_tenants)}"
        self.now = T0
        self.case = "C0"
        self.cases = 0
        #: the model: each item's parents, and the withdrawn items (id -> revoked/refuted)
        self.parents: dict[int, list[int]] = {}
        self.withdrawn: dict[int, str] = {}

    # --- helpers ----------------------------------------------------------------

    def _states(self) -> dict[int, str]:
        with self.engine.connect() as c:
            rows = c.execute(
                sa.text(
                    "SELECT i.id, s.state, i.scope_id FROM items i "
                    "JOIN item_states s ON s.item_id = i.id WHERE i.tenant_id = :t"
                ),
                {"t": self.tenant},
            ).all()
        self.scopes = {int(r.id): r.scope_id for r in rows}
        return {int(r.id): r.state for r in rows}

    def _pending(self) -> dict[int, Any]:
        with self.engine.connect() as c:
            rows = c.execute(
                sa.text("SELECT item_id, since FROM expiry_checks WHERE tenant_id = :t"),
                {"t": self.tenant},
            ).all()
        return {int(r.item_id): r.since for r in rows}

    def _passes_check(self, item_id: int, since: Any) -> bool:
        """The oracle: every required condition TRUE on an observation made since ``since``."""
        with self.engine.connect() as c:
            subject, required = c.execute(
                sa.text("SELECT subject, required FROM items WHERE id = :i"), {"i": item_id}
            ).one()
            for cond in required:
                attribute, test = ORACLE[cond]
                fact = c.execute(
                    sa.text(
                        "SELECT value, observed_at FROM facts WHERE tenant_id = :t "
                        "AND subject = :s AND attribute = :a AND observed_at <= :now "
                        "ORDER BY observed_at DESC, id DESC LIMIT 1"
                    ),
                    {"t": self.tenant, "s": subject, "a": attribute, "now": self.now},
                ).first()
                if fact is None or fact.observed_at < since or not test(fact.value["v"]):
                    return False
        return True

    def _may_enter(self, item_id: int, before: dict[int, str], after: dict[int, str]) -> bool:
        if after[item_id] == "case":
            return self.scopes[item_id] == self.case
        if after[item_id] != "active":
            return False
        if before[item_id] == "verify_on_next_use":
            if not self._passes_check(item_id, self.pending[item_id]):
                return False
            with self.engine.connect() as c:
                last = c.execute(
                    sa.text(
                        f"SELECT from_state, to_state FROM {TRANSITIONS} h WHERE item_id = :i "
                        "ORDER BY seq DESC LIMIT 1"
                    ),
                    {"i": item_id},
                ).one()
            return tuple(last) == ("verify_on_next_use", "active")
        return before[item_id] == "active"

    def _descendants(self, item_id: int) -> set[int]:
        """The model's descendants of ``item_id``, transitively over ``derived_from``."""
        out: set[int] = set()
        frontier = {item_id}
        while frontier:
            frontier = {c for c, ps in self.parents.items() if set(ps) & frontier} - out
            out |= frontier
        return out

    def _ancestors(self, item_ids: Sequence[int]) -> set[int]:
        """``item_ids`` and their ancestors in the model, transitively."""
        out, frontier = set(item_ids), set(item_ids)
        while frontier:
            frontier = {p for c in frontier for p in self.parents.get(c, [])} - out
            out |= frontier
        return out

    def _do(self, fn: Any, **kw: Any) -> Any:
        with self.sessions.begin() as s:
            return fn(session=s, tenant=self.tenant, now=self.now, **kw)

    # --- set-up -------------------------------------------------------------------

    def setup(self) -> None:
        with self.sessions.begin() as s:
            factgen.ensure_tenant(
                actor=ADMIN,
                session=s,
                tenant=self.tenant,
                now=T0,
                policy=factgen.TenantPolicy(
                    shadow=factgen.ShadowPolicy(min_matched_cases=1, min_agreement=0.5)
                ),
            )
            for actor in (AGENT, SME):
                claims.register_principal(
                    actor=ADMIN,
                    session=s,
                    tenant=self.tenant,
                    principal=actor.id,
                    role=actor.role,
                    capabilities=sorted(actor.capabilities),
                )
            factgen.declare_attributes(
                actor=ADMIN,
                session=s,
                tenant=self.tenant,
                specs=[
                    factgen.AttributeSpec(
                        "config.pool.max", ValueType.parse("int"), content_type="configuration"
                    ),
                    factgen.AttributeSpec("metrics.util", ValueType.parse("float")),
                    factgen.AttributeSpec(
                        "env.db.version",
                        ValueType.parse("version"),
                        content_type="failure_mechanism",
                    ),
                ],
            )
            world = factgen.load_world(session=s, tenant=self.tenant)
            factgen.import_entities(
                actor=ADMIN,
                session=s,
                world=world,
                entities=[
                    factgen.EntitySpec("svc-a", "service", (), (("depends_on", "svc-b"),)),
                    factgen.EntitySpec("svc-b", "database"),
                ],
            )
            claims.register_evidence(
                session=s, tenant=self.tenant, evidence_id="E", actor=SME, now=T0
            )
            lifecycle.open_case(
                session=s, tenant=self.tenant, case_id="C0", subjects=[], actor=AGENT, now=T0
            )

    # --- rules ----------------------------------------------------------------------

    @rule(
        target=items,
        subject=st.sampled_from(SUBJECTS),
        required=st.lists(st.sampled_from(CONDITIONS), min_size=0, max_size=2, unique=True),
        content_type=st.sampled_from(["configuration", "failure_mechanism"]),
        parent=st.none() | items,
    )
    def write(
        self, subject: str, required: list[str], content_type: str, parent: int | None
    ) -> int:
        derived = [] if parent is None or parent < 0 else [parent]
        request = claims.ItemWrite(
            kind="fact",
            subject=subject,
            attribute=f"a{len(self._states())}",
            object=1,
            required=required,
            evidence=["E"],
            derived_from=derived,
            content_type=content_type,
            scope=claims.Anchor(axis="case", id=self.case),
            text="pool latency on " + subject,
        )
        held = {self.withdrawn.get(a) for a in self._ancestors(derived)}
        expected = next((f"lineage_{w}" for w in ("revoked", "refuted") if w in held), None)
        try:
            item_id = lifecycle.write(
                sessions=self.sessions,
                tenant=self.tenant,
                request=request,
                actor=AGENT,
                now=self.now,
            ).item_id
        except CaveatError as exc:
            assert exc.code == expected, (exc.code, expected, derived)
            return -1
        assert expected is None, (expected, derived)
        self.parents[item_id] = derived
        return item_id

    @rule(item=items, to=st.sampled_from(["shadow", "active", "both"]))
    def promote(self, item: int, to: str) -> None:
        for step in ("shadow", "active") if to == "both" else (to,):
            with contextlib.suppress(CaveatError):
                self._do(lifecycle.promote, item_id=item, to=step, actor=SME)

    @initialize(target=items)
    def seed(self) -> MultipleResults[int]:
        """A tenant; two active items, a shadow and a case item, in a world where they apply,
        and a lineage: an active child of the first and a case grandchild."""
        self.setup()
        made = [
            self.write(subject, [cond], content_type, None)
            for subject, cond, content_type in (
                ("svc-a", "metrics.util gte 0.5", "configuration"),
                ("svc-a", "config.pool.max eq 20", "configuration"),
                ("svc-a", "config.pool.max eq 20", "configuration"),
                ("svc-b", "env.db.version lt v16", "failure_mechanism"),
            )
        ]
        child = self.write("svc-a", ["metrics.util gte 0.5"], "configuration", made[0])
        made += [child, self.write("svc-b", [], "failure_mechanism", child)]
        for item in (*made[:2], child):
            self.promote(item, "both")
        self.promote(made[2], "shadow")
        self.observe("svc-a", 0.9, 20)
        return multiple(*made)

    @rule(
        subject=st.sampled_from(SUBJECTS),
        util=st.sampled_from([0.2, 0.9]),
        pool=st.sampled_from([20, 80]),
    )
    def observe(self, subject: str, util: float, pool: int) -> None:
        with self.sessions.begin() as s:
            world = factgen.load_world(session=s, tenant=self.tenant)
            factgen.observe(
                actor=ADMIN,
                session=s,
                world=world,
                observations=[
                    factgen.Observation(subject, "metrics.util", util),
                    factgen.Observation(subject, "config.pool.max", pool),
                ],
                observed_at=self.now,
                now=self.now,
            )

    @rule(minutes=st.integers(1, 120))
    def tick(self, minutes: int) -> None:
        self.now += timedelta(minutes=minutes)

    @rule(
        kind=st.sampled_from(["deploy", "version_change"]),
        subject=st.sampled_from(SUBJECTS),
        change=st.booleans(),
        judge=st.sampled_from(["rules", "none", "all", "odd"]),
    )
    def event(self, kind: str, subject: str, change: bool, judge: str) -> None:
        before = self._states()
        changes: dict[str, object] = {}
        if change:
            changes = {"config.pool.max": 50} if kind == "deploy" else {"env.db.version": "v16.1"}
        with self.sessions.begin() as s:
            world = factgen.load_world(session=s, tenant=self.tenant)
            ev = factgen.record_event(
                actor=ADMIN,
                session=s,
                world=world,
                type=kind,
                subjects=[subject],
                changes=changes,
                occurred_at=self.now,
                now=self.now,
            )
            out = lifecycle.handle_event(
                session=s,
                tenant=self.tenant,
                event=ev,
                now=self.now,
                judge=None if judge == "rules" else Judged(judge),
            )
        after = self._states()
        became_active = {
            i for i, st_ in after.items() if st_ == "active" and before.get(i) != "active"
        }
        assert not became_active, f"an event returned {became_active} to active"
        for i in out.matched:
            assert after[i] in {"needs_reverification", "verify_on_next_use"}
        if judge == "all":
            assert set(out.affected) == set(out.matched)

    @rule(
        subject=st.none() | st.sampled_from(SUBJECTS),
        as_of=st.booleans(),
    )
    def recall(self, subject: str | None, as_of: bool) -> None:
        before = self._states()
        self.pending = self._pending()
        req = recall.RecallRequest(
            query="pool latency",
            subjects=None if subject is None else [subject],
            case_id=self.case,
            as_of=self.now if as_of else None,
        )
        with self.sessions.begin() as s:
            res = recall.recall(
                session=s, tenant=self.tenant, actor=AGENT, request=req, now=self.now
            )
        assert self._states() == before  # a recall is a read
        if not as_of:  # the door records the use of what it returned
            with self.sessions.begin() as s:
                use = recall.record_use(
                    session=s,
                    tenant=self.tenant,
                    actor=AGENT,
                    request=req,
                    used=[r.item.id for r in res.items],
                    now=self.now,
                )
            assert set(use.used) == {r.item.id for r in res.items}, use
        after = self._states()
        for r in res.items:
            assert r.item.id not in self.withdrawn
            assert before[r.item.id] != "shadow"
            if as_of:
                assert before[r.item.id] in {"active", "case", "verify_on_next_use"}
            else:
                assert self._may_enter(r.item.id, before, after), (r.item.id, before, after)
        if as_of:
            assert before == after  # an as-of recall records nothing

    @rule(ids=st.lists(items, min_size=1, max_size=5, unique=True))
    def check_context(self, ids: list[int]) -> None:
        before = self._states()
        self.pending = self._pending()
        with self.sessions.begin() as s:
            read = recall.check_context(
                session=s,
                tenant=self.tenant,
                actor=AGENT,
                item_ids=ids,
                case_id=self.case,
                now=self.now,
            )
        assert self._states() == before  # the guard's read records nothing
        with self.sessions.begin() as s:
            res = recall.record_context(
                session=s,
                tenant=self.tenant,
                actor=AGENT,
                item_ids=ids,
                case_id=self.case,
                now=self.now,
            )
        assert res.usable == read.usable and res.dropped == read.dropped, (read, res)
        after = self._states()
        for i in res.usable:
            assert i not in self.withdrawn and self._may_enter(i, before, after)
        for i in ids:
            if i not in before:
                assert res.dropped[i] == "not_found"

    @rule(
        item=items, influence=st.sampled_from(["decisive", "contributing", "considered", "ignored"])
    )
    def cite(self, item: int, influence: str) -> None:
        with contextlib.suppress(CaveatError):
            self._do(
                lifecycle.cite, case_id=self.case, item_id=item, influence=influence, actor=AGENT
            )

    @rule(outcome=st.sampled_from(["confirmed", "rejected"]))
    def close_and_open(self, outcome: str) -> None:
        before = self._states()
        res = self._do(lifecycle.close_case, case_id=self.case, outcome=outcome, actor=AGENT)
        after = self._states()
        for i in res.demoted:
            assert outcome == "rejected" and after[i] == "needs_reverification"
        assert not any(after[i] == "revoked" != before[i] for i in after)  # never a revoke
        self.cases += 1
        self.case = f"C{self.cases}"
        self._do(lifecycle.open_case, case_id=self.case, subjects=[], actor=AGENT)

    @rule(item=items, how=st.sampled_from(["revoke", "refute"]))
    def withdraw(self, item: int, how: str) -> None:
        """Revoke or refute ``item``: by the model, the item and its descendants still in
        circulation move, and nothing else."""
        before = self._states()
        action = lifecycle.revoke if how == "revoke" else lifecycle.refute
        try:
            self._do(action, item_id=item, reason="wrong", actor=SME)
        except CaveatError:
            assert item < 0 or before[item] in (
                {"revoked"} if how == "revoke" else {"revoked", "refuted", "superseded"}
            )
            return
        self.withdrawn[item] = f"{how}d"
        after = self._states()
        reopened = {d for d in self._descendants(item) if before[d] in lifecycle.CIRCULATING}
        expected = {**before, item: f"{how}d"} | {d: "needs_reverification" for d in reopened}
        assert after == expected, {
            i: (before[i], after[i]) for i in after if after[i] != expected[i]
        }

    @precondition(lambda self: bool(self._parents_in_circulation()))
    @rule(data=st.data(), how=st.sampled_from(["revoke", "refute"]))
    def withdraw_a_parent(self, data: st.DataObject, how: str) -> None:
        """Withdraw an item something was derived from (a random item rarely is one)."""
        self.withdraw(data.draw(st.sampled_from(self._parents_in_circulation())), how)

    def _parents_in_circulation(self) -> list[int]:
        """Items not withdrawn with a child not withdrawn, by the model."""
        return sorted(
            {p for c, ps in self.parents.items() if c not in self.withdrawn for p in ps}
            - set(self.withdrawn)
        )

    @precondition(lambda self: bool(self.withdrawn))
    @rule(data=st.data())
    def derive_from_withdrawn(self, data: st.DataObject) -> None:
        """Build on a withdrawn item or on one of its descendants: always refused."""
        lineage = sorted({d for w in self.withdrawn for d in {w, *self._descendants(w)}})
        parent = data.draw(st.sampled_from(lineage))
        assert self.write("svc-a", [], "configuration", parent) == -1

    def teardown(self) -> None:
        states = self._states()
        for i, how in self.withdrawn.items():
            assert states[i] == how
        with self.sessions.begin() as s:
            assert claims.verify_chain(session=s, tenant=self.tenant).ok
            broken = s.execute(sa.text(HISTORY_BREAKS), {"t": self.tenant}).scalar()
        assert broken == 0, "a state change without exactly one transition audit row"


def test_lifecycle_invariants_hold_over_random_histories(engine: sa.Engine) -> None:
    run_state_machine_as_test(
        lambda: Lifecycle(engine),
        settings=settings(
            max_examples=30,
            stateful_step_count=30,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
