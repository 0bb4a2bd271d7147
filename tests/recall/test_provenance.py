"""A condition's observation carries its provenance (facts.provenance, migration 0017):
where a source pulled it, by the ranking query (returned items) and by the snapshot
(withheld ones), live and as of an instant."""

from __future__ import annotations

from datetime import timedelta

import factgen
import recall
from tests.conftest import ADMIN, T0, Store
from tests.recall.test_recall import _activate, _write

QUERY = "max by (service) (db_pool_in_use{service='payment-api'} / db_pool_max)"
PULLED = {"source": "prom", "query": QUERY, "sample_time": "2026-03-01T09:00:00Z"}


def _pull(store: Store, utilisation: float) -> None:
    with store.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=store.tenant)
        factgen.observe(
            actor=ADMIN,
            session=s,
            world=world,
            observations=[
                factgen.Observation(
                    "payment-api", "metrics.pool_utilisation", utilisation, "prom", T0, PULLED
                ),
                factgen.Observation("payment-api", "config.connection_pool.max", 20, "typed"),
            ],
            observed_at=T0,
            now=T0,
        )


def _ask(store: Store, **kw: object) -> recall.RecallResult:
    request = recall.RecallRequest(
        **{"query": "pool exhausted", "subjects": ["payment-api"], "explain": True, **kw}  # type: ignore[arg-type]
    )
    with store.sessions.begin() as s:
        return recall.recall(
            session=s,
            tenant=store.tenant,
            actor=store.agent,
            request=request,
            now=T0 + timedelta(minutes=1),
        )


def _provenance(values: tuple[recall.ConditionValue, ...]) -> dict[str, object]:
    return {v.attribute: None if v.observed is None else v.observed.provenance for v in values}


def test_each_conditions_observation_carries_its_provenance(setup: Store) -> None:
    _pull(setup, 0.97)
    applies = _write(setup)  # pool max eq 20 and utilisation gte 0.8
    withheld = _write(setup, attribute="other", required=["metrics.pool_utilisation lt 0.5"])
    _activate(setup, applies)
    _activate(setup, withheld)
    expected = {"config.connection_pool.max": None, "metrics.pool_utilisation": PULLED}
    for res in (_ask(setup), _ask(setup, as_of=T0 + timedelta(minutes=1))):
        [item] = res.items
        assert item.item.id == applies
        assert _provenance(item.conditions) == expected
        [w] = [w for w in res.withheld if w.item.id == withheld]
        assert _provenance(w.conditions) == {"metrics.pool_utilisation": PULLED}
