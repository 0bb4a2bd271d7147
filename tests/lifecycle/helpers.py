"""A small driver over the store for lifecycle tests: one call per domain action."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

import claims
import factgen
import lifecycle
import recall
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
        self, case_id: str | None = None, actor: claims.Actor | None = None, **kw: Any
    ) -> recall.RecallResult:
        req = recall.RecallRequest(
            **{"query": "tail latency on payment api", "case_id": case_id, "explain": True, **kw}
        )
        with self.sessions.begin() as s:
            return recall.recall(
                session=s,
                tenant=self.tenant,
                actor=actor or self.store.agent,
                request=req,
                now=self.now,
            )

    def guard(self, ids: Sequence[int], case_id: str | None = None) -> recall.ContextCheck:
        with self.sessions.begin() as s:
            return recall.check_context(
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
        with self.sessions.begin() as s:
            world = factgen.load_world(session=s, tenant=self.tenant)
            event = factgen.record_event(
                session=s,
                world=world,
                type=type,
                subjects=list(subjects),
                changes=changes or {},
                principal=principal,
                occurred_at=self.now,
                now=self.now,
            )
            return lifecycle.handle_event(
                session=s, tenant=self.tenant, event=event, now=self.now, judge=judge
            )

    def state(self, item_id: int) -> str:
        with self.engine.connect() as c:
            return str(
                c.execute(sa.text("SELECT state FROM items WHERE id = :i"), {"i": item_id}).scalar()
            )

    def states(self, *ids: int) -> list[str]:
        return [self.state(i) for i in ids]

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.engine.connect() as c:
            return c.execute(sa.text(sql), params).scalar()

    def audit_ok(self) -> bool:
        with self.sessions.begin() as s:
            return claims.verify_chain(session=s, tenant=self.tenant).ok

    def transitions_audited_once(self) -> bool:
        """Every transition row has exactly one audit row (transition or supersede) for it."""
        rows = self.scalar(
            "SELECT count(*) FROM ("
            " SELECT t.item_id, t.to_state, count(*) AS n FROM item_transitions t"
            " GROUP BY 1, 2) t FULL JOIN ("
            " SELECT a.item_id, a.code AS to_state, count(*) AS n FROM audit_log a"
            " WHERE a.action IN ('transition', 'supersede') GROUP BY 1, 2) a"
            " USING (item_id, to_state) WHERE t.n IS DISTINCT FROM a.n"
        )
        return rows == 0


def ids(res: recall.RecallResult) -> list[int]:
    return [r.item.id for r in res.items]


def withheld(res: recall.RecallResult) -> dict[int, str]:
    return {w.item.id: w.gate for w in res.withheld}
