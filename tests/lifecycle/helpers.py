"""A small driver over the store for lifecycle tests: one call per domain action."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

import claims
import lifecycle
import recall
from caveat import app as use
from claims._queries import TRANSITIONS
from tests.conftest import T0, Store

POOL = ["config.connection_pool.max eq 20", "metrics.pool_utilisation gte 0.8"]


class Life:
    """Drives one store on a clock that only moves forward when told."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.tenant = store.tenant
        self.sessions = store.sessions
        self.engine = store.engine
        self.now = T0
        self._n = 0

    def tick(self, **delta: float) -> datetime:
        self.now = self.now + timedelta(**delta)
        return self.now

    def open(self, case_id: str, subjects: Sequence[str] = ("payment-api",)) -> None:
        with self.sessions.begin() as s:
            lifecycle.open_case(
                session=s,
                tenant=self.tenant,
                case_id=case_id,
                subjects=list(subjects),
                actor=self.store.agent,
                now=self.now,
            )

    def close(self, case_id: str, outcome: str = "confirmed") -> lifecycle.CloseResult:
        with self.sessions.begin() as s:
            return lifecycle.close_case(
                session=s,
                tenant=self.tenant,
                case_id=case_id,
                outcome=outcome,  # type: ignore[arg-type]
                actor=self.store.agent,
                now=self.now,
            )

    def write(
        self,
        case_id: str = "INC-1",
        actor: claims.Actor | None = None,
        registry: claims.ItemRegistry | None = None,
        **changes: Any,
    ) -> int:
        self._n += 1
        request = claims.ItemWrite.model_validate(
            {
                "kind": "fact",
                "subject": "payment-api",
                "attribute": f"observed_{self._n}",
                "object": "E-1",
                "required": POOL,
                "evidence": ["E-1"],
                "scope": {"axis": "case", "id": case_id},
                "text": "Tail latency spike on payment-api; pool exhausted; restart restored it.",
                **changes,
            }
        )
        return lifecycle.write(
            sessions=self.sessions,
            tenant=self.tenant,
            request=request,
            actor=actor or self.store.agent,
            now=self.now,
            registry=registry,
        ).item_id

    def do(self, fn: Any, **kw: Any) -> Any:
        with self.sessions.begin() as s:
            return fn(session=s, tenant=self.tenant, now=self.now, **kw)

    def activate(self, *ids: int) -> None:
        for item_id in ids:
            for to in ("shadow", "active"):
                self.do(lifecycle.promote, item_id=item_id, to=to, actor=self.store.sme)

    def observe(self, *obs: tuple[str, str, object]) -> None:
        self.store.observe(self.now, *obs)

    def hot(self) -> None:
        """The pool-exhausted world of the canonical scenario."""
        self.observe(
            ("payment-api", "config.connection_pool.max", 20),
            ("payment-api", "metrics.pool_utilisation", 0.97),
        )

    def recall(
        self,
        case_id: str | None = None,
        actor: claims.Actor | None = None,
        record: bool = True,
        **kw: Any,
    ) -> recall.RecallResult:
        """A recall as an agent's door makes it: the read, then (live, unless ``record``
        is false) ``record_use`` of everything it returned, in its own transaction."""
        req = recall.RecallRequest(
            **{"query": "tail latency on payment api", "case_id": case_id, "explain": True, **kw}
        )
        who = actor or self.store.agent
        with self.sessions.begin() as s:
            res = recall.recall(session=s, tenant=self.tenant, actor=who, request=req, now=self.now)
        if record and req.as_of is None:
            with self.sessions.begin() as s:
                recall.record_use(
                    session=s,
                    tenant=self.tenant,
                    actor=who,
                    request=req,
                    used=[r.item.id for r in res.items],
                    now=self.now,
                )
        return res

    def guard(
        self, ids: Sequence[int], case_id: str | None = None, record: bool = True
    ) -> recall.ContextCheck:
        """The context guard as a door calls it: recorded unless ``record`` is false."""
        guard = recall.record_context if record else recall.check_context
        with self.sessions.begin() as s:
            return guard(
                session=s,
                tenant=self.tenant,
                actor=self.store.agent,
                item_ids=list(ids),
                case_id=case_id,
                now=self.now,
            )

    def cite(self, case_id: str, item_id: int, influence: str) -> lifecycle.Citation:
        return self.do(  # type: ignore[no-any-return]
            lifecycle.cite,
            case_id=case_id,
            item_id=item_id,
            influence=influence,
            actor=self.store.agent,
        )

    def event(
        self,
        type: str,
        subjects: Sequence[str],
        changes: dict[str, object] | None = None,
        principal: str | None = None,
        judge: lifecycle.Judge | None = None,
    ) -> lifecycle.EventOutcome:
        # the application layer's one call, so the helper cannot drift from the doors
        rt = use.Runtime.over(self.engine, self.tenant)
        return use.record_event(
            rt,
            self.store.agent,
            type=type,
            subjects=list(subjects),
            changes=changes or {},
            principal=principal,
            occurred_at=self.now,
            judge=judge,
            now=self.now,
        ).outcome

    def state(self, item_id: int) -> str:
        with self.engine.connect() as c:
            return str(
                c.execute(
                    sa.text("SELECT state FROM item_states WHERE item_id = :i"), {"i": item_id}
                ).scalar()
            )

    def states(self, *ids: int) -> list[str]:
        return [self.state(i) for i in ids]

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.engine.connect() as c:
            return c.execute(sa.text(sql), params).scalar()

    def audit_ok(self) -> bool:
        with self.sessions.begin() as s:
            return claims.verify_chain(session=s, tenant=self.tenant).ok

    def history_holds(self) -> bool:
        """Every state change has exactly one ``transition`` audit row: see ``HISTORY_BREAKS``."""
        return self.scalar(HISTORY_BREAKS, t=self.tenant) == 0


#: Items of tenant ``:t`` whose history is not one unbroken chain of ``transition``
#: audit rows: the first from nothing, each from where the one before led, the
#: last leading from the state row's ``previous`` to its ``state``. A state
#: change without its audit row, or an audit row without its change, breaks it.
HISTORY_BREAKS = f"""
SELECT count(*) FROM item_states s
LEFT JOIN LATERAL (
  SELECT count(*) FILTER (WHERE c.from_state IS DISTINCT FROM c.before) AS broken,
         count(*) AS steps,
         (array_agg(c.from_state ORDER BY c.seq DESC))[1] AS last_from,
         (array_agg(c.to_state ORDER BY c.seq DESC))[1] AS last_to
  FROM (SELECT h.seq, h.from_state, h.to_state,
               lag(h.to_state) OVER (ORDER BY h.seq) AS before
        FROM {TRANSITIONS} h WHERE h.tenant_id = s.tenant_id AND h.item_id = s.item_id) c
) h ON TRUE
WHERE s.tenant_id = :t AND (h.steps = 0 OR h.broken > 0 OR h.last_to <> s.state
                            OR h.last_from IS DISTINCT FROM s.previous)
"""


def ids(res: recall.RecallResult) -> list[int]:
    return [r.item.id for r in res.items]


def withheld(res: recall.RecallResult) -> dict[int, str]:
    return {w.item.id: w.gate for w in res.withheld}
