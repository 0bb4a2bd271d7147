"""Evidence-weighted confidence (ranking only): the rule, its fold, its SQL twin, and
``attach_evidence`` on the database, as the application role under row-level security."""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.orm import Session, sessionmaker

import claims
import lifecycle
from caveat import db
from lifecycle import (
    CONFIDENCE_SQL,
    SOURCE_KINDS,
    ConfidencePolicy,
    Link,
    confidence_at,
    confidence_from_links,
    confidence_params,
    fold,
    initial_score,
)
from predicates.errors import Forbidden, GateRejection, InputError, NotFound
from tests.conftest import T0
from tests.lifecycle.helpers import Life

TOL = 1e-9
DAY = timedelta(days=1)

# --- the rule, as functions of data ----------------------------------------------

policies = st.builds(
    ConfidencePolicy,
    prior=st.floats(0.0, 1.0),
    floor=st.floats(0.0, 0.95),
    half_life=st.integers(3600, 400 * 86400).map(lambda s: timedelta(seconds=s)),
)
links_of = st.lists(
    st.tuples(
        st.integers(0, 200 * 86400 * 10**6),  # microseconds after the previous instant
        st.sampled_from(["supports", "refutes"]),
        st.floats(0.0, 1.0),
        st.sampled_from(sorted(SOURCE_KINDS)),
    ),
    max_size=25,
)
offsets = st.integers(0, 800 * 86400 * 10**6).map(lambda us: timedelta(microseconds=us))
scores = st.floats(-20.0, 20.0)


def _links(recorded_at: datetime, spec: list[tuple[int, str, float, str]]) -> list[Link]:
    out, at = [], recorded_at
    for gap, stance, strength, kind in spec:
        at += timedelta(microseconds=gap)
        out.append(Link(stance, strength, kind, at))
    return out


def _folded(
    recorded_at: datetime, links: list[Link], policy: ConfidencePolicy
) -> tuple[float, datetime]:
    """The stored ``(score, at)`` after attaching ``links`` one by one, as attach_evidence
    does: a first attachment starts from the prior as of ``recorded_at``."""
    score, score_at = policy.prior, recorded_at
    for link in links:
        score = fold(score, score_at, link.stance, link.strength, link.source_kind, link.at, policy)
        score_at = max(score_at, link.at)
    return score, score_at


@given(policies, links_of, offsets)
def test_folding_incrementally_equals_the_sum_from_scratch(
    policy: ConfidencePolicy, spec: list[tuple[int, str, float, str]], after: timedelta
) -> None:
    links = _links(T0, spec)
    now = (links[-1].at if links else T0) + after
    score, score_at = _folded(T0, links, policy)
    assert confidence_at(score, score_at, now, policy) == pytest.approx(
        confidence_from_links(T0, links, now, policy), abs=TOL
    )
    # and every prefix agrees at the instant of its last link
    for k in range(len(links) + 1):
        s, s_at = _folded(T0, links[:k], policy)
        at = links[k - 1].at if k else T0
        assert confidence_at(s, s_at, at, policy) == pytest.approx(
            confidence_from_links(T0, links[:k], at, policy), abs=TOL
        )


@given(policies, scores, offsets, offsets, links_of)
def test_confidence_is_always_between_the_floor_and_one(
    policy: ConfidencePolicy,
    score: float,
    a: timedelta,
    b: timedelta,
    spec: list[tuple[int, str, float, str]],
) -> None:
    for value in (
        confidence_at(score, T0 + a, T0 + b, policy),  # now may even precede the score
        confidence_from_links(T0, _links(T0, spec), T0 + b, policy),
        confidence_at(initial_score(T0, T0 + a, policy), T0 + a, T0 + b, policy),
    ):
        assert policy.floor <= value <= 1.0


@given(policies, scores, offsets, offsets)
def test_without_new_evidence_confidence_never_rises_and_tends_to_the_floor(
    policy: ConfidencePolicy, score: float, a: timedelta, b: timedelta
) -> None:
    earlier, later = T0 + min(a, b), T0 + max(a, b)
    assert confidence_at(score, T0, later, policy) <= confidence_at(score, T0, earlier, policy)
    far = T0 + 80 * policy.half_life
    assert confidence_at(score, T0, far, policy) == pytest.approx(policy.floor, abs=TOL)
    assert confidence_from_links(T0, [], far, policy) == pytest.approx(policy.floor, abs=TOL)


@given(
    policies,
    scores,
    offsets,
    st.sampled_from(["supports", "refutes"]),
    st.floats(0.0, 1.0),
    st.sampled_from(sorted(SOURCE_KINDS)),
)
def test_support_never_lowers_and_refutation_never_raises_confidence(
    policy: ConfidencePolicy,
    score: float,
    gap: timedelta,
    stance: str,
    strength: float,
    kind: str,
) -> None:
    at = T0 + gap
    before = confidence_at(score, T0, at, policy)
    after = confidence_at(fold(score, T0, stance, strength, kind, at, policy), at, at, policy)
    assert after >= before if stance == "supports" else after <= before


def test_the_weights_and_defaults_are_the_documented_ones() -> None:
    assert dict(SOURCE_KINDS) == {
        "human_confirm": 1.0,
        "repeat_observation": 0.8,
        "citation": 0.6,
        "agent_judge": 0.3,
    }
    policy = ConfidencePolicy()
    assert (policy.prior, policy.floor, policy.half_life) == (0.5, 0.1, timedelta(days=90))
    # no evidence, one half-life on: the prior halved
    assert confidence_at(0.5, T0, T0 + 90 * DAY) == pytest.approx(0.1 + 0.9 * 0.25)
    assert lifecycle.contribution("refutes", 0.5, "citation") == pytest.approx(-0.3)
    assert confidence_params(policy) == {
        "conf_prior": 0.5,
        "conf_floor": 0.1,
        "conf_half_life_s": 90 * 86400.0,
    }


@pytest.mark.parametrize(
    ("stance", "strength", "kind", "attribute"),
    [
        ("maybe", 0.5, "citation", "stance"),
        ("supports", 1.5, "citation", "strength"),
        ("supports", -0.1, "citation", "strength"),
        ("supports", math.nan, "citation", "strength"),
        ("supports", True, "citation", "strength"),
        ("supports", 0.5, "gut_feeling", "source_kind"),
    ],
)
def test_bad_links_are_typed_input_errors(
    stance: str, strength: float, kind: str, attribute: str
) -> None:
    with pytest.raises(InputError) as err:
        lifecycle.contribution(stance, strength, kind)
    assert err.value.detail["attribute"] == attribute
    assert attribute in err.value.message
    assert err.value.detail["expected"]


@pytest.mark.parametrize(
    "kw",
    [{"prior": 1.5}, {"floor": 1.0}, {"floor": -0.1}, {"half_life": timedelta(0)}],
)
def test_a_policy_out_of_range_is_refused(kw: dict[str, Any]) -> None:
    with pytest.raises(InputError):
        ConfidencePolicy(**kw)


# --- the SQL twin -------------------------------------------------------------------

_TWIN = (
    "SELECT " + CONFIDENCE_SQL.format(c="c", i="i") + " FROM "
    "(SELECT CAST(%(recorded_at)s AS timestamptz) AS recorded_at) i LEFT JOIN "
    "(SELECT CAST(%(score)s AS float8) AS score, CAST(%(score_at)s AS timestamptz) AS at) c "
    "ON %(has_row)s"
)


def _instant(rng: random.Random) -> datetime:
    return T0 + timedelta(microseconds=rng.randrange(-400 * 86400 * 10**6, 400 * 86400 * 10**6))


def test_confidence_sql_agrees_with_python(pg_conn: psycopg.Connection[Any]) -> None:
    """``CONFIDENCE_SQL`` on PostgreSQL gives ``confidence_at`` (with a row) and the
    decayed prior (without), on random scores, instants (now before or after the
    score's) and policies, tiny values and thousands of half-lives included (where
    PostgreSQL's float8 arithmetic raises on underflow)."""
    rng = random.Random(20261201)
    for n in range(400):
        policy = ConfidencePolicy(
            prior=rng.choice([rng.random(), 1e-250, 0.0, 1.0]),
            floor=rng.choice([0.0, 0.1, rng.random() * 0.9]),
            half_life=timedelta(seconds=rng.randrange(60, 500 * 86400)),
        )
        score = rng.choice([0.0, 1.0, 1e-250, -1e-310, rng.uniform(-3.0, 4.0)])
        score_at, recorded_at, now = _instant(rng), _instant(rng), _instant(rng)
        has_row = n % 4 != 0
        got = pg_conn.execute(
            _TWIN,
            {
                **confidence_params(policy),
                "at": now,
                "score": score,
                "score_at": score_at,
                "recorded_at": recorded_at,
                "has_row": has_row,
            },
        ).fetchone()
        assert got is not None
        if has_row:
            want = confidence_at(score, score_at, now, policy)
        else:
            want = confidence_at(initial_score(recorded_at, now, policy), now, now, policy)
            assert want == pytest.approx(confidence_from_links(recorded_at, [], now, policy))
        assert got[0] == pytest.approx(want, abs=TOL), (n, policy, score, score_at, now)


# --- attach_evidence on the database --------------------------------------------------


@pytest.fixture
def app(life: Life) -> Iterator[sessionmaker[Session]]:
    """Sessions that run as the application role ``caveat_app``, for the store's tenant."""
    engine = db.make_app_engine(life.engine.url.render_as_string(hide_password=False))
    sessions = db.tenant_sessions(engine, life.tenant)
    with sessions.begin() as s:
        assert s.execute(sa.text("SELECT current_user")).scalar() == "caveat_app"
    yield sessions
    engine.dispose()


def _attach(
    app: sessionmaker[Session],
    life: Life,
    item_id: int,
    actor: claims.Actor | None = None,
    evidence_id: str = "E-2",
    stance: str = "supports",
    strength: float = 0.5,
    source_kind: str = "citation",
) -> lifecycle.Attachment:
    with app.begin() as s:
        return lifecycle.attach_evidence(
            session=s,
            tenant=life.tenant,
            actor=actor or life.store.agent,
            item_id=item_id,
            evidence_id=evidence_id,
            stance=stance,
            strength=strength,
            source_kind=source_kind,
            now=life.now,
        )


def _footprint(life: Life, item_id: int) -> tuple[Any, ...]:
    """Everything an attachment could change: its tables, the audit log, the item."""
    return (
        life.scalar("SELECT count(*) FROM evidence_links"),
        life.scalar("SELECT count(*) FROM item_confidence"),
        life.scalar("SELECT count(*) FROM audit_log"),
        life.scalar(
            "SELECT row(cur.state, i.conditions, i.required, i.excluded, i.epistemic)::text "
            "FROM items i JOIN item_states cur ON cur.item_id = i.id WHERE i.id = :i",
            i=item_id,
        ),
    )


def _stored(life: Life, item_id: int) -> tuple[float, datetime]:
    with life.engine.connect() as c:
        row = c.execute(
            sa.text("SELECT score, at FROM item_confidence WHERE item_id = :i"), {"i": item_id}
        ).one()
    return float(row.score), row.at


def test_agents_and_smes_attach_evidence_and_confidence_moves(
    life: Life, app: sessionmaker[Session]
) -> None:
    item = life.write()
    life.activate(item)
    state = life.state(item)
    footprint = _footprint(life, item)
    life.tick(days=90)  # one half-life: the prior is halved
    first = _attach(app, life, item, strength=0.5, source_kind="citation")
    assert first.confidence_before == pytest.approx(0.1 + 0.9 * 0.25)
    assert first.confidence_after == pytest.approx(0.1 + 0.9 * (0.25 + 0.3))
    assert (first.item_id, first.stance, first.strength, first.source_kind) == (
        item,
        "supports",
        0.5,
        "citation",
    )
    life.tick(days=1)
    second = _attach(
        app,
        life,
        item,
        actor=life.store.agent,
        stance="refutes",
        strength=1.0,
        source_kind="agent_judge",
    )
    assert second.confidence_after < second.confidence_before < first.confidence_after
    third = _attach(
        app,
        life,
        item,
        actor=life.store.sme,
        evidence_id="E-secret",
        strength=1.0,
        source_kind="human_confirm",
    )
    assert third.confidence_after == pytest.approx(1.0)
    # stored: the links, the folded score, one audit row each; the item untouched
    assert life.scalar("SELECT count(*) FROM evidence_links WHERE item_id = :i", i=item) == 3
    assert _footprint(life, item)[3] == footprint[3] and life.state(item) == state
    with app.begin() as s:
        links = lifecycle._queries.evidence_links(session=s, tenant=life.tenant, item_id=item)
        assert [(r.id, r.evidence_id, r.actor) for r in links] == [
            (first.link_id, "E-2", "agent-ir"),
            (second.link_id, "E-2", "agent-ir"),
            (third.link_id, "E-secret", "sme-alice"),
        ]
        recorded_at = life.scalar("SELECT recorded_at FROM items WHERE id = :i", i=item)
        later = life.now + 30 * DAY
        assert lifecycle.confidence_of(
            session=s, tenant=life.tenant, actor=life.store.sme, item_id=item, now=later
        ) == pytest.approx(confidence_from_links(recorded_at, links, later), abs=TOL)
    with life.engine.connect() as c:
        audit = c.execute(
            sa.text(
                "SELECT actor, item_id, code, detail FROM audit_log "
                "WHERE action = 'attach_evidence' ORDER BY seq"
            )
        ).all()
    assert [(a.actor, a.item_id, a.code) for a in audit] == [
        ("agent-ir", item, "supports"),
        ("agent-ir", item, "refutes"),
        ("sme-alice", item, "supports"),
    ]
    assert audit[0].detail == {
        "evidence": "E-2",
        "stance": "supports",
        "strength": 0.5,
        "source_kind": "citation",
        "confidence_before": pytest.approx(first.confidence_before),
        "confidence_after": pytest.approx(first.confidence_after),
    }
    assert life.audit_ok()


def test_an_agent_may_not_attach_a_human_confirmation(
    life: Life, app: sessionmaker[Session]
) -> None:
    item = life.write()
    before = _footprint(life, item)
    with pytest.raises(Forbidden) as err:
        _attach(app, life, item, source_kind="human_confirm")
    assert err.value.detail["source_kind"] == "human_confirm"
    assert _footprint(life, item) == before
    admin = claims.Actor("root", "admin")
    assert _attach(app, life, item, actor=admin, source_kind="human_confirm").link_id > 0


def test_every_role_of_a_person_or_agent_may_attach_evidence() -> None:
    people = {r: a for r, a in claims.ROLE_ACTIONS.items() if r != "source"}
    assert set(people) == {"agent", "sme", "admin"}
    assert all("attach_evidence" in actions for actions in people.values())
    # a tool that sends hooks or whose facts are pulled only observes, posts events and
    # opens or closes cases (model §2.2)
    assert claims.ROLE_ACTIONS["source"] == {"open_case", "observe", "event", "close_case"}


def test_a_missing_a_hidden_and_a_redacted_item_are_refused_alike(
    life: Life, app: sessionmaker[Session]
) -> None:
    insider = claims.Actor("agent-p", "agent", frozenset({"incidents", "payments-restricted"}))
    secret = life.write(actor=insider, evidence=["E-secret"], object="E-secret")
    gone = life.write()
    life.do(lifecycle.redact, item_id=gone, reason="test", actor=life.store.sme)
    before = _footprint(life, secret)
    messages = []
    for item_id in (secret, gone, 999_999):
        with pytest.raises(NotFound) as err:
            _attach(app, life, item_id)
        messages.append(err.value.message.replace(str(item_id), "#"))
    assert len(set(messages)) == 1
    assert _footprint(life, secret) == before


@pytest.mark.parametrize("evidence_id", ["E-nope", "E-secret", ""])
def test_evidence_that_does_not_resolve_is_refused_as_the_write_gate_does(
    life: Life, app: sessionmaker[Session], evidence_id: str
) -> None:
    item = life.write()
    before = _footprint(life, item)
    with pytest.raises(GateRejection) as err:
        _attach(app, life, item, evidence_id=evidence_id)
    assert err.value.code == "evidence_unresolved" and err.value.gate == "G3"
    assert err.value.detail["evidence"] == [evidence_id]
    assert _footprint(life, item) == before


@pytest.mark.parametrize(
    ("change", "attribute"),
    [
        ({"stance": "agrees"}, "stance"),
        ({"strength": 2.0}, "strength"),
        ({"strength": -1.0}, "strength"),
        ({"source_kind": "vibes"}, "source_kind"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(
    life: Life, app: sessionmaker[Session], change: dict[str, Any], attribute: str
) -> None:
    item = life.write()
    before = _footprint(life, item)
    with pytest.raises(InputError) as err:
        _attach(app, life, item, **change)
    assert err.value.detail["attribute"] == attribute
    assert _footprint(life, item) == before


def test_concurrent_attachments_lose_no_update(life: Life, app: sessionmaker[Session]) -> None:
    item = life.write()
    life.tick(days=10)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def attach(stance: str) -> None:
        try:
            barrier.wait()
            for _ in range(5):
                _attach(app, life, item, stance=stance, strength=0.25, source_kind="citation")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=attach, args=(s,))
        for s in ("supports", "supports", "supports", "refutes")
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    # all at one instant: the prior decayed over ten days, plus 20 contributions
    score, at = _stored(life, item)
    recorded_at = life.scalar("SELECT recorded_at FROM items WHERE id = :i", i=item)
    assert at == life.now
    assert score == pytest.approx(initial_score(recorded_at, life.now) + (15 - 5) * 0.25 * 0.6)
    assert life.scalar("SELECT count(*) FROM evidence_links") == 20
    assert life.audit_ok()


def test_the_sql_twin_reads_stored_scores_as_the_reference_computes_them(
    life: Life, app: sessionmaker[Session]
) -> None:
    """Random attachments on a few items, the clock moving; then ``CONFIDENCE_SQL`` over
    the stored rows (and items without one) equals ``confidence_from_links``."""
    rng = random.Random(7)
    items = [life.write() for _ in range(4)]
    life.tick(hours=1)
    untouched = life.write()
    for _ in range(40):
        life.tick(seconds=rng.randrange(0, 40 * 86400))
        _attach(
            app,
            life,
            rng.choice(items),
            actor=life.store.sme,
            evidence_id=rng.choice(["E-1", "E-2", "E-secret"]),
            stance=rng.choice(["supports", "refutes"]),
            strength=rng.random(),
            source_kind=rng.choice(sorted(SOURCE_KINDS)),
        )
    sql = (
        "SELECT i.id, " + CONFIDENCE_SQL.format(c="c", i="i") + " FROM items i "
        "LEFT JOIN item_confidence c ON c.tenant_id = i.tenant_id AND c.item_id = i.id "
        "WHERE i.id = ANY(%(ids)s) ORDER BY i.id"
    )
    with app.begin() as s:
        raw = s.connection().connection.driver_connection
        assert isinstance(raw, psycopg.Connection)
        recorded = {
            r.id: r.recorded_at
            for r in s.execute(sa.text("SELECT id, recorded_at FROM items")).all()
        }
        links = {
            i: lifecycle._queries.evidence_links(session=s, tenant=life.tenant, item_id=i)
            for i in [*items, untouched]
        }
        for days in (0, 1, 45, 400):
            now = life.now + days * DAY
            got = raw.execute(
                sql, {**confidence_params(), "at": now, "ids": [*items, untouched]}
            ).fetchall()
            assert len(got) == 5
            for item_id, value in got:
                want = confidence_from_links(recorded[item_id], links[item_id], now)
                assert value == pytest.approx(want, abs=TOL), (item_id, days)
    assert links[untouched] == [] and all(links[i] for i in items)


def test_confidence_of_an_item_without_evidence_is_the_decayed_prior(life: Life) -> None:
    item = life.write()
    with life.sessions.begin() as s:
        value = lifecycle.confidence_of(
            session=s,
            tenant=life.tenant,
            actor=life.store.agent,
            item_id=item,
            now=T0 + 180 * DAY,
        )
    assert value == pytest.approx(0.1 + 0.9 * 0.125)
