"""Recall is a read: facts as they are now, a cached world, ``record_use`` apart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

import claims
import factgen
import lifecycle
import recall
from predicates import ValueType, encode
from tests.conftest import ADMIN, T0, Store
from tests.recall.test_recall import POOL, _activate, _write


def _hot(setup: Store, at: Any = T0) -> None:
    setup.observe(
        at,
        ("payment-api", "config.connection_pool.max", 20),
        ("payment-api", "metrics.pool_utilisation", 0.9),
    )


def _recall(setup: Store, *, record: bool = False, **kw: Any) -> recall.RecallResult:
    req = recall.RecallRequest(**{"query": "pool exhausted tail latency", **kw})
    with setup.sessions.begin() as s:
        res = recall.recall(session=s, tenant=setup.tenant, actor=setup.agent, request=req, now=T0)
    if record:
        with setup.sessions.begin() as s:
            recall.record_use(
                session=s,
                tenant=setup.tenant,
                actor=setup.agent,
                request=req,
                used=[r.item.id for r in res.items],
                now=T0,
            )
    return res


# --- facts_current --------------------------------------------------------------

_FACT_ROWS = st.lists(
    st.tuples(
        st.sampled_from(["svc-a", "svc-b"]),
        st.sampled_from(["m.x", "m.y"]),
        st.integers(0, 5),  # observed minute (ties on purpose)
        st.integers(0, 100),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batches=st.lists(_FACT_ROWS, min_size=1, max_size=4))
def test_facts_current_is_the_latest_of_the_history(
    engine: sa.Engine, batches: list[list[tuple[str, str, int, int]]]
) -> None:
    """The trigger keeps, per (tenant, subject, attribute), the fact a snapshot reads
    from the history: the latest observed, then the latest inserted; however the
    facts arrive (in one statement or several, out of order, with ties)."""
    tenant = f"t{abs(hash(json.dumps(batches))) % 10**9}"
    with engine.begin() as c:
        c.execute(sa.text("DELETE FROM facts"))
        c.execute(sa.text("DELETE FROM facts_current"))
        for batch in batches:
            c.execute(
                sa.text(
                    "INSERT INTO facts (tenant_id, subject, attribute, value, observed_at, "
                    "recorded_at) SELECT :t, s, a, jsonb_build_object('t', 'int', 'v', v), "
                    ":t0 + make_interval(mins => m), :t0 FROM unnest("
                    "CAST(:s AS text[]), CAST(:a AS text[]), CAST(:m AS int[]), "
                    "CAST(:v AS int[])) AS u(s, a, m, v)"
                ),
                {
                    "t": tenant,
                    "t0": T0,
                    "s": [r[0] for r in batch],
                    "a": [r[1] for r in batch],
                    "m": [r[2] for r in batch],
                    "v": [r[3] for r in batch],
                },
            )
        history = c.execute(
            sa.text(
                "SELECT DISTINCT ON (subject, attribute) subject, attribute, id, value "
                "FROM facts WHERE tenant_id = :t "
                "ORDER BY subject, attribute, observed_at DESC, id DESC"
            ),
            {"t": tenant},
        ).all()
        current = c.execute(
            sa.text(
                "SELECT subject, attribute, fact_id, value FROM facts_current "
                "WHERE tenant_id = :t ORDER BY subject, attribute"
            ),
            {"t": tenant},
        ).all()
    assert [tuple(r) for r in current] == [tuple(r) for r in history]


def test_live_snapshot_reads_facts_current_and_falls_back_for_later_observations(
    setup: Store,
) -> None:
    _hot(setup)
    setup.observe(T0 + timedelta(hours=1), ("payment-api", "config.connection_pool.max", 100))
    with setup.sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=setup.tenant)
        for at in (T0, T0 + timedelta(minutes=5), T0 + timedelta(hours=2)):
            for subjects in (["payment-api"], ["payment-api", "orders-db"]):
                live = factgen.build_snapshot(
                    session=s, world=world, subjects=subjects, at=at, current=True
                )
                history = factgen.build_snapshot(session=s, world=world, subjects=subjects, at=at)
                assert live.entries == history.entries, at


# --- the world cache --------------------------------------------------------------


def test_world_cache_reloads_exactly_when_the_world_changes(setup: Store) -> None:
    cache = factgen.WorldCache()
    with setup.sessions.begin() as s:
        first = cache.get(session=s, tenant=setup.tenant)
        assert cache.get(session=s, tenant=setup.tenant) is first
    # facts and items are not the world: the copy stays
    _hot(setup)
    _write(setup)
    with setup.sessions.begin() as s:
        assert cache.get(session=s, tenant=setup.tenant) is first
    # a declaration, an entity and a policy change each invalidate it
    changes = [
        lambda s: factgen.declare_attributes(
            actor=ADMIN,
            session=s,
            tenant=setup.tenant,
            specs=[factgen.AttributeSpec("metrics.qps", ValueType.parse("int"))],
        ),
        lambda s: factgen.import_entities(
            actor=ADMIN,
            session=s,
            world=factgen.load_world(session=s, tenant=setup.tenant),
            entities=[factgen.EntitySpec("ledger", "service")],
        ),
        lambda s: factgen.ensure_tenant(
            actor=ADMIN,
            session=s,
            tenant=setup.tenant,
            now=T0,
            policy=factgen.TenantPolicy(topology_depth=2),
        ),
    ]
    seen = first
    for change in changes:
        with setup.sessions.begin() as s:
            change(s)
        with setup.sessions.begin() as s:
            now = cache.get(session=s, tenant=setup.tenant)
        assert now is not seen
        seen = now
    assert "metrics.qps" in {a.attribute for a in seen.schema}
    assert seen.resolver.resolve("ledger") == "ledger"
    assert seen.policy.topology_depth == 2


def test_a_rolled_back_change_never_names_another_world(setup: Store) -> None:
    cache = factgen.WorldCache()
    with setup.sessions() as s:
        factgen.declare_attributes(
            actor=ADMIN,
            session=s,
            tenant=setup.tenant,
            specs=[factgen.AttributeSpec("metrics.ghost", ValueType.parse("int"))],
        )
        ghost = cache.get(session=s, tenant=setup.tenant)
        assert "metrics.ghost" in {a.attribute for a in ghost.schema}
        s.rollback()
    with setup.sessions.begin() as s:
        factgen.declare_attributes(
            actor=ADMIN,
            session=s,
            tenant=setup.tenant,
            specs=[factgen.AttributeSpec("metrics.real", ValueType.parse("int"))],
        )
    with setup.sessions.begin() as s:
        world = cache.get(session=s, tenant=setup.tenant)
    names = {a.attribute for a in world.schema}
    assert "metrics.real" in names and "metrics.ghost" not in names


# --- recall is a read -----------------------------------------------------------


def _recorded(setup: Store) -> dict[str, int]:
    with setup.engine.connect() as c:
        return {
            t: int(c.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one())
            for t in ("audit_log", "item_usage", "case_context", "shadow_log", "expiry_checks")
        }


def test_recall_runs_in_a_read_only_transaction_and_records_nothing(setup: Store) -> None:
    item = _write(setup)
    _activate(setup, item)
    with setup.sessions.begin() as s:
        lifecycle.open_case(
            session=s,
            tenant=setup.tenant,
            case_id="INC-2",
            subjects=["payment-api"],
            actor=setup.agent,
            now=T0,
        )
    shadow = _write(
        setup, attribute="restarted_at", object="E-2", scope={"axis": "case", "id": "INC-2"}
    )
    with setup.sessions.begin() as s:
        lifecycle.promote(
            session=s, tenant=setup.tenant, item_id=shadow, to="shadow", actor=setup.sme, now=T0
        )
    _hot(setup)
    before = _recorded(setup)
    req = recall.RecallRequest("pool exhausted tail latency", case_id="INC-1", explain=True)
    with setup.sessions.begin() as s:
        s.execute(sa.text("SET TRANSACTION READ ONLY"))
        res = recall.recall(session=s, tenant=setup.tenant, actor=setup.agent, request=req, now=T0)
    assert [r.item.id for r in res.items] == [item]
    assert _recorded(setup) == before
    with setup.sessions.begin() as s:
        use = recall.record_use(
            session=s, tenant=setup.tenant, actor=setup.agent, request=req, used=[item], now=T0
        )
    assert use.used == (item,) and use.refused == {}
    after = _recorded(setup)
    assert after["item_usage"] == before["item_usage"] + 1
    assert after["case_context"] == before["case_context"] + 1
    assert after["shadow_log"] == before["shadow_log"] + 1


def test_record_use_trusts_nothing_the_client_says(setup: Store) -> None:
    open_ = _write(setup)
    _activate(setup, open_)
    with setup.sessions.begin() as s:
        payments = claims.register_principal(
            actor=ADMIN,
            session=s,
            tenant=setup.tenant,
            principal="agent-pay",
            role="agent",
            capabilities=["incidents", "payments-restricted"],
        )
    secret = _write(
        setup,
        actor=payments,
        attribute="secret_restart",
        object="E-secret",
        evidence=["E-secret"],
    )
    _activate(setup, secret)
    unproven = _write(setup, attribute="failover_restored_at", object="E-2")
    _activate(setup, unproven)
    _hot(setup)
    req = recall.RecallRequest("pool", subjects=["orders-db"])
    with setup.sessions.begin() as s:
        use = recall.record_use(
            session=s,
            tenant=setup.tenant,
            actor=setup.agent,
            request=req,
            used=[open_, secret, 999_999],
            now=T0,
        )
    # hidden and missing items are the same "not_found"; a visible item outside the
    # request's subjects is refused too; nothing was used
    assert use.used == ()
    assert use.refused == {open_: "subject", secret: "not_found", 999_999: "not_found"}
    assert _recorded(setup)["item_usage"] == 0


def test_recall_sees_a_ttl_that_ran_out_at_once_and_record_use_persists_it(
    setup: Store,
) -> None:
    item = _write(setup, content_type="permission_refusal")
    _activate(setup, item)
    # fresh at ``later`` (utilisation's max_age is 15 minutes), but observed before the
    # TTL (one hour by default) ran out, so the check after it cannot pass
    _hot(setup, T0 + timedelta(minutes=58))
    later = T0 + timedelta(minutes=70)
    req = recall.RecallRequest("pool exhausted", explain=True)
    with setup.sessions.begin() as s:
        res = recall.recall(
            session=s, tenant=setup.tenant, actor=setup.agent, request=req, now=later
        )
        assert res.items == ()
        assert {w.item.id: w.gate for w in res.withheld} == {item: "activated_version"}
        assert (
            lifecycle.visible_item(
                session=s, tenant=setup.tenant, item_id=item, actor=setup.sme
            ).state
            == "active"
        )
    with setup.sessions.begin() as s:
        use = recall.record_use(
            session=s, tenant=setup.tenant, actor=setup.agent, request=req, used=[item], now=later
        )
    assert use.used == () and use.checks == {item: False}
    with setup.sessions.begin() as s:
        state = lifecycle.visible_item(
            session=s, tenant=setup.tenant, item_id=item, actor=setup.sme
        ).state
    assert state == "needs_reverification"


# --- the context guard answers by recall's rule -----------------------------------


def test_context_guard_drops_a_skill_version_that_is_not_released(setup: Store) -> None:
    with setup.sessions.begin() as s:
        lifecycle.open_case(
            session=s,
            tenant=setup.tenant,
            case_id="INC-9",
            subjects=["payment-api"],
            actor=setup.agent,
            now=T0,
        )
    skill = claims.ItemWrite.model_validate(
        {
            "kind": "skill",
            "subject": "payment-api",
            "attribute": "pool_restart_procedure",
            "object": "E-1",
            "required": POOL,
            "evidence": ["E-1"],
            "scope": {"axis": "case", "id": "INC-9"},
            "version": 1,
            "test": "E-2",
            "text": "restart the pool",
        }
    )
    item_id = lifecycle.write(
        sessions=setup.sessions, tenant=setup.tenant, request=skill, actor=setup.agent, now=T0
    ).item_id
    with setup.sessions.begin() as s:
        res = recall.check_context(
            session=s,
            tenant=setup.tenant,
            actor=setup.agent,
            item_ids=[item_id],
            case_id="INC-9",
            now=T0,
        )
    assert res.usable == () and res.dropped == {item_id: "unreleased"}


@pytest.mark.parametrize("limit", [1, 3])
def test_an_answer_is_never_shortened_by_the_candidate_cap(
    setup: Store, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    """With a cap of 2 candidates and the matching items failing a gate, the walk
    widens (and then fills from the items no term matched) until ``limit`` pass."""
    from recall import _recall as recall_module

    monkeypatch.setattr(recall_module, "CANDIDATE_CAP", 2)
    failing = [
        _write(setup, attribute=f"pool_fail_{n}", object="E-1", purposes=["postmortem"])
        for n in range(4)
    ]
    passing = [
        _write(setup, attribute=f"restart_{n}", object="E-2", text="disk filled up on orders")
        for n in range(3)
    ]
    for i in failing + passing:
        _activate(setup, i)
    _hot(setup)
    res = _recall(setup, purpose="incident_diagnosis", limit=limit, explain=True)
    got = [r.item.id for r in res.items]
    assert len(got) == limit and set(got) <= set(passing)
    assert {w.item.id for w in res.withheld} == set(failing)


# --- caveat_applies_at against caveat_applies -------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_applies_at_with_inline_observations_agrees_with_caveat_applies(
    engine: sa.Engine, seed: int
) -> None:
    """Given the whole snapshot as inline observations (and every attribute declared,
    with no max_age), ``caveat_applies_at`` gives ``caveat_applies``'s answer, which
    tests/predicates/test_sql.py holds to the Python evaluator: 2,000 random items
    per seed, JSON nulls, wrong types, missing observations and ``@entity:`` included."""
    import random

    from tests.predicates.test_sql import ATTRIBUTES, _random_item, applies_payload

    rng = random.Random(seed)
    items = [_random_item(rng) for _ in range(2000)]
    declared = {"exact": {path: None for path, _ in ATTRIBUTES}, "patterns": []}
    payload = json.dumps(applies_payload(items))
    with engine.connect() as c:
        rows = c.execute(
            sa.text(
                "SELECT caveat_applies(p -> 'c', p -> 's', p ->> 'u'), "
                "caveat_applies_at('nobody', p -> 'c', p ->> 'u', now(), NULL, p -> 's', "
                "CAST(:d AS jsonb), true) "
                "FROM jsonb_array_elements(CAST(:p AS jsonb)) WITH ORDINALITY AS t(p, i) "
                "ORDER BY i"
            ),
            {"p": payload, "d": json.dumps(declared)},
        ).all()
    assert [tuple(r) for r in rows if r[0] != r[1]] == []
    assert sum(1 for r in rows if r[0]) >= 100 and sum(1 for r in rows if not r[0]) >= 100


# --- the plain-SQL applicability of live recall ---------------------------------


def _applies_sql(since: str = "NULL") -> str:
    from recall import _queries as q

    return q._applies(since)


#: Each payload row as item ``i`` of no tenant, in payload order (``p``: the row).
_PAYLOAD_ITEMS = (
    " FROM jsonb_array_elements(%(p)s) WITH ORDINALITY AS t(p, n) "
    "CROSS JOIN LATERAL (SELECT 'nobody' AS tenant_id, p -> 'c' AS conditions, "
    "p ->> 'u' AS subject) i ORDER BY n"
)


@pytest.fixture
def mig_conn(engine: sa.Engine) -> Iterator[Any]:
    """An autocommit psycopg connection to a migrated database, as its owner."""
    with engine.connect() as c:
        raw = c.connection.driver_connection
        assert raw is not None
        raw.autocommit = True
        yield raw


@pytest.mark.parametrize("seed", [3, 4])
def test_sql_applicability_agrees_with_caveat_applies(mig_conn: Any, seed: int) -> None:
    """With each item's snapshot given as its inline observations (every attribute
    declared, no max_age), live recall's plain-SQL applicability gives
    ``caveat_applies``'s answer, which tests/predicates/test_sql.py holds to the Python
    evaluator: 2,000 random items per seed, every operator, JSON nulls, wrong types,
    missing observations and ``@entity:`` included."""
    import random

    from tests.predicates.test_sql import ATTRIBUTES, _random_item, applies_payload

    rng = random.Random(seed)
    items = [_random_item(rng) for _ in range(2000)]
    payload = applies_payload(items)
    # inline observations are one parameter per query; per item here, so the fragment
    # reads them from the row instead
    expr = _applies_sql().replace("%(inline)s", "(p -> 's')")
    rows = mig_conn.execute(
        "SELECT caveat_applies(p -> 'c', p -> 's', p ->> 'u'), " + expr + _PAYLOAD_ITEMS,
        {
            "p": Jsonb(payload),
            "at": T0,
            "declared": Jsonb({"exact": {a: None for a, _ in ATTRIBUTES}, "patterns": []}),
        },
    ).fetchall()
    assert [(n, r) for n, r in enumerate(rows) if r[0] != r[1]] == []
    assert sum(1 for r in rows if r[0]) >= 100 and sum(1 for r in rows if not r[0]) >= 100


def test_sql_applicability_agrees_with_caveat_applies_at_on_stored_facts(mig_conn: Any) -> None:
    """On stored facts, live recall's plain-SQL applicability gives ``caveat_applies_at``'s
    answer for every ``since``: facts older than their max_age, an attribute declared
    by a pattern, one not declared, facts recorded or observed after ``at`` (the history
    then answers), inline observations overriding, and ``@entity:`` conditions."""
    import random

    from tests.predicates.test_sql import ATTRIBUTES, SUBJECTS, _random_item, random_observation

    rng = random.Random(11)
    tenant = "applies-sql"
    at = T0
    mig_conn.execute("SELECT set_config('caveat.tenant', %s, false)", [tenant])
    rows: list[tuple[Any, ...]] = []
    for subject in SUBJECTS:
        for path, name in ATTRIBUTES:
            for _ in range(rng.randint(0, 3)):
                obs = random_observation(rng, name)
                value = getattr(obs, "value", None)
                if value is None:
                    continue
                observed = at - timedelta(minutes=rng.randint(-30, 90))
                recorded = observed + timedelta(minutes=rng.choice([0, 0, 5, 45]))
                rows.append(
                    (tenant, subject, path, Jsonb(encode(value, obs.vtype)), observed, recorded)
                )
    with mig_conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO facts (tenant_id, subject, attribute, value, observed_at, recorded_at) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            rows,
        )
    names = [a for a, _ in ATTRIBUTES]
    declared = {
        "exact": {a: rng.choice([None, 1800.0, 3600.0]) for a in names[:-2]},
        "patterns": [[r"^x\.[^.]+$", 60.0], [r"^[t]$", None]],  # ``t`` by pattern; ``f`` not
    }
    items = [_random_item(rng) for _ in range(1500)]
    inline = {"db2": {"a.x": {"t": "int", "v": 3}, "e": {"t": "enum", "v": "red"}}}
    sinces = [None, at - timedelta(minutes=20), at - timedelta(minutes=60)]
    payload = [
        {
            "c": {
                "required": [doc for _, doc in item["required"]],
                "excluded": [doc for _, doc in item["excluded"]],
            },
            "u": item["subject"],
            "since": None if (s := rng.choice(sinces)) is None else s.isoformat(),
        }
        for item in items
    ]
    since = "CAST(p ->> 'since' AS timestamptz)"
    got = mig_conn.execute(
        "SELECT caveat_applies_at(i.tenant_id, i.conditions, i.subject, %(at)s, "
        f"{since}, %(inline)s, %(declared)s, true), {_applies_sql(since)} "
        "FROM jsonb_array_elements(%(p)s) WITH ORDINALITY AS t(p, n) "
        "CROSS JOIN LATERAL (SELECT CAST(%(tenant)s AS text) AS tenant_id, "
        "p -> 'c' AS conditions, p ->> 'u' AS subject) i ORDER BY n",
        {
            "p": Jsonb(payload),
            "at": at,
            "tenant": tenant,
            "inline": Jsonb(inline),
            "declared": Jsonb(declared),
        },
    ).fetchall()
    assert [(n, r) for n, r in enumerate(got) if r[0] != r[1]] == []
    assert sum(1 for r in got if r[0]) >= 50 and sum(1 for r in got if not r[0]) >= 50


_TRUTH_NAME = {True: "TRUE", False: "FALSE", None: "UNKNOWN"}


def test_sql_condition_values_agree_with_the_python_evaluator(mig_conn: Any) -> None:
    """The per-condition values live recall returns with each item (computed in its
    ranking query) are the Python evaluator's, required and excluded conditions alike,
    in list order, with the observation each was decided on: 2,000 random items."""
    import random

    from predicates import Observed, decode
    from recall import _queries as q
    from tests.predicates.test_sql import ATTRIBUTES, _random_item, applies_payload

    rng = random.Random(5)
    items = [_random_item(rng) for _ in range(2000)]
    payload = applies_payload(items)
    rows = mig_conn.execute(
        "SELECT " + q._condition_detail().replace("%(inline)s", "(p -> 's')") + _PAYLOAD_ITEMS,
        {
            "p": Jsonb(payload),
            "at": T0,
            "declared": Jsonb({"exact": {a: None for a, _ in ATTRIBUTES}, "patterns": []}),
        },
    ).fetchall()
    seen = {"TRUE": 0, "FALSE": 0, "UNKNOWN": 0}
    for item, (detail,) in zip(items, rows, strict=True):
        expected = []
        for req, conds in ((True, item["required"]), (False, item["excluded"])):
            for n, (cp, _) in enumerate(conds, start=1):
                subject = cp.attribute.entity or item["subject"]
                encoded = item["snapshot"].get(subject, {}).get(cp.attribute.path)
                obs = None if encoded is None else Observed(*decode(encoded))
                truth = cp(obs).name
                seen[truth] += 1
                expected.append([req, n, truth, subject, cp.attribute.path, encoded is not None])
        got = [[d[0], d[1], _TRUTH_NAME[d[2]], d[3], d[4], d[5] is not None] for d in detail]
        assert got == expected, (item, detail)
    assert min(seen.values()) >= 200, seen
