"""Differential test of recall's six gates (model.md §6, issue 9 "Proof").

On generated worlds (items over a few subjects with 0-3 conditions, some about
another entity; evidence ACLs, deny lists and classification levels, and principals
with random capabilities and clearances; every
lifecycle state; purposes; validity windows; facts with a max_age; inline
observations; skills with draft, released and retired versions) the SQL recall
and the pure-Python reference in ``tests/recall/worlds.py`` must agree on which
items may be returned: with a limit that returns all of them, for a query that
matches no text and for one that matches some (ranking never changes
admissibility); with a small limit, the answer is as long as it can be and holds
only admissible items (the lazy path and the fallback must not shorten it).

Every returned item also passes the reference's gates evaluated for it alone
(the point check); where ``recall.record_use`` exists, the server's own point
check admits exactly the returned ids, and of every id exactly the admissible
ones. Every item that explain reports as withheld is one the caller may see,
withheld by the first gate that fails in the reference (a verify-on-next-use
item is checked only when it passes the other gates, model §4.3; a failed check
is reported under ``activated_version``).

Each recall runs in a transaction that is rolled back, so the world is the same
for every request whatever a recall leaves behind. Everything runs as the
application's login role, each transaction naming its tenant: under row-level
security.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session, sessionmaker

import claims
import factgen
import lifecycle
import recall
from caveat import db
from tests.conftest import ADMIN
from tests.recall.knowledge import Section, add_document
from tests.recall.worlds import (
    ATTRIBUTES,
    CAPS,
    CASES,
    DENIED_CAP,
    EVIDENCE,
    FACT_TIMES,
    LEVELS,
    MATCHED_BY_SOME,
    MATCHING,
    MIN,
    PREDICATES,
    PRIVATE,
    PURPOSES,
    QUERY_NOTHING,
    QUERY_SOME,
    REPORTED,
    SESSIONS,
    SME,
    SUBJECTS,
    T0,
    TEXTS,
    WRITER,
    Built,
    Doc,
    Fact,
    Reference,
    Request,
    Row,
    Verdict,
    build,
    setup_tenant,
)

_tenants = itertools.count(1)

# --- strategies ---------------------------------------------------------------------


def _weighted(draw: st.DrawFn, choices: dict[Any, int]) -> Any:
    return draw(st.sampled_from([c for c, w in choices.items() for _ in range(w)]))


#: Predicates that are TRUE whenever their attribute has a fresh observation.
_LIKELY = (
    "config.connection_pool.max in [20, 100]",
    "config.connection_pool.max exists",
    "env.postgres.version exists",
)


@st.composite
def _conditions(draw: st.DrawFn, hostile: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    found: dict[str, bool] = {}
    for _ in range(draw(st.integers(0, 3 if hostile else 1))):
        pred = draw(st.sampled_from(PREDICATES if hostile else _LIKELY))
        if draw(st.integers(0, 2)) == 0:
            pred = f"@{draw(st.sampled_from(SUBJECTS))}:{pred}"
        found.setdefault(pred, not hostile or draw(st.integers(0, 3)) > 0)  # mostly required
    return (
        tuple(p for p, req in found.items() if req),
        tuple(p for p, req in found.items() if not req),
    )


@st.composite
def _window(draw: st.DrawFn, hostile: bool) -> tuple[int | None, int | None]:
    start = _weighted(draw, {None: 3 if hostile else 12, 20: 1, 40: 1})
    end = _weighted(draw, {None: 2 if hostile else 12, 25: 1, 50: 1, 180: 1})
    if end is not None and end <= (start or 17):  # also after a rewrite at T0+16m
        end = None
    return start, end


@st.composite
def _rows(draw: st.DrawFn, hostile: bool, bait: bool, family: int) -> list[Row]:
    """One item (a skill: 1-2 versions). A ``hostile`` row is random and mostly fails a
    gate; the others mostly pass every gate a request does not decide."""
    w = 1 if hostile else 0
    kind = _weighted(draw, {"fact": 3, "skill": 1})
    subject = draw(st.sampled_from(SUBJECTS))
    case = draw(st.sampled_from(CASES))
    required, excluded = draw(_conditions(hostile))
    window = draw(_window(hostile))
    content = draw(st.sampled_from(["failure_mechanism", "permission_refusal", "configuration"]))
    # private memory (model §4): an agent's lesson or a session's working memory
    anchor = _weighted(draw, {None: 8, **dict.fromkeys(PRIVATE, 1)})
    # working memory is its owner's alone: no SME may promote, release or end it
    memory = anchor is not None and anchor.startswith("session:")
    if memory:
        kind = "fact"
    purposes = _weighted(draw, {(): 1 + 9 * (1 - w), ("postmortem",): 1, (PURPOSES[0],): 1})
    versions = draw(st.integers(1, 2)) if kind == "skill" else 1
    rows = []
    released = False
    for _ in range(versions):
        path = _weighted(
            draw,
            {
                "active": 1 + 9 * (1 - w),
                "verify_on_next_use": 1 + 2 * (1 - w),
                "case": 1,
                "shadow": 1,
                "needs_reverification": 1,
            },
        )
        if path != "case" and not required:
            required = (draw(st.sampled_from(PREDICATES if hostile else _LIKELY)),)
            excluded = tuple(e for e in excluded if e != required[0])
        end = _weighted(
            draw, {None: 3 if hostile else 30, "refuted": 1, "revoked": 1, "redacted": 1}
        )
        rewrite = None
        if kind == "fact" and end != "redacted":
            rewrite = _weighted(draw, {None: 3 if hostile else 30, "case": 1, "active": 1})
            if rewrite == "active" and not required:
                rewrite = "case"  # promotion needs a required condition
        if memory:
            path, end, rewrite = "case", None, "case" if rewrite else None
        release = None
        if kind == "skill":
            release = _weighted(draw, {"released": 2 if hostile else 12, "draft": 1, "retired": 1})
            if release == "released" and released:
                release = "retired"
            released = released or release == "released"
        if bait:  # most rows fail a gate and match the query better than those that pass
            admissible_looking = path in ("active", "verify_on_next_use") and end is None
            text = TEXTS[2] if admissible_looking else MATCHING
        else:
            text = draw(st.sampled_from(TEXTS))
        evidence = draw(
            st.lists(
                st.sampled_from(sorted(EVIDENCE) + ["E-open"] * 12 * (1 - w)),
                min_size=1,
                max_size=2,
            )
        )
        if anchor is not None and PRIVATE[anchor] == "reader":  # the reader writes its own
            evidence = [e if e != "E-deny-reader" else "E-open" for e in evidence]
        rows.append(
            Row(
                kind=kind,
                subject=subject,
                case=case,
                required=required,
                excluded=excluded,
                evidence=tuple(evidence),
                purposes=purposes,
                text=text,
                content_type=content,
                valid_from=window[0],
                valid_to=window[1],
                path=path,
                end=end,
                rewrite=rewrite,
                release=release,
                family=family if kind == "skill" else None,
                anchor=anchor,
            )
        )
    if any(r.path in ("needs_reverification", "verify_on_next_use") for r in rows):
        # the deploy event re-opens configuration items; the others are activated after it
        rows = [Row(**{**r.__dict__, "content_type": "configuration"}) for r in rows]
    return rows


_values = {a: st.sampled_from(spec[3]) for a, spec in ATTRIBUTES.items()}


@st.composite
def _docs(draw: st.DrawFn) -> list[Doc]:
    """Knowledge documents (model §6): random readers, deny lists, levels, purposes and
    withdrawals; texts some queries match."""
    return [
        Doc(
            readers=tuple(sorted(draw(st.sets(st.sampled_from(CAPS), max_size=2)))),
            deny=_weighted(draw, {(): 6, ("principal:reader",): 1, (f"cap:{DENIED_CAP}",): 1}),
            classification=_weighted(draw, {None: 6, **dict.fromkeys(LEVELS, 1)}),
            purposes=_weighted(draw, {(): 6, ("postmortem",): 1, (PURPOSES[0],): 1}),
            text=draw(st.sampled_from(TEXTS)),
            end=_weighted(draw, {None: 6, "superseded": 1, "revoked": 1, "redacted": 1}),
        )
        for _ in range(draw(st.integers(0, 6)))
    ]


SOURCE_SETS = (("memory",), ("memory", "knowledge"), ("knowledge",))


@st.composite
def worlds(draw: st.DrawFn) -> tuple[list[Row], list[Fact], Any, Request]:
    now = T0 + draw(st.sampled_from([30, 120])) * MIN
    bait = draw(st.integers(0, 2)) == 0  # most rows fail a gate and outrank the others
    rows: list[Row] = []
    for family in range(draw(st.integers(4, 12))):
        rows.extend(draw(_rows(bait or draw(st.integers(0, 2)) == 0, bait, family)))
    times = [m for m in FACT_TIMES if T0 + m * MIN <= now]
    facts = [
        Fact(subject, attribute, draw(_values[attribute]), minute)
        for subject in SUBJECTS
        for attribute in ATTRIBUTES
        if draw(st.integers(0, 4)) > 0
        for minute in sorted(draw(st.sets(st.sampled_from(times), min_size=1, max_size=2)))
    ]
    admin = draw(st.integers(0, 9)) == 0
    request = Request(
        admin=admin,
        caps=(CAPS if draw(st.booleans()) else tuple(sorted(draw(st.sets(st.sampled_from(CAPS))))))
        + ((DENIED_CAP,) if draw(st.integers(0, 3)) == 0 else ()),
        subjects=draw(
            st.none()
            | st.none()
            | st.lists(st.sampled_from(SUBJECTS), min_size=1, max_size=2, unique=True).map(tuple)
        ),
        purpose=draw(st.sampled_from([None, *PURPOSES])),
        case_id=draw(st.sampled_from([None, *CASES])),
        inline=tuple(
            (s, a, draw(_values[a]))
            for s, a in draw(
                st.lists(
                    st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(sorted(ATTRIBUTES))),
                    max_size=2,
                    unique=True,
                )
            )
        ),
        clearance=_weighted(draw, {level: 3 if level == "internal" else 1 for level in LEVELS}),
        session=draw(st.sampled_from([None, *SESSIONS])),
        sources=_weighted(draw, {SOURCE_SETS[0]: 1, SOURCE_SETS[1]: 2, SOURCE_SETS[2]: 1}),
    )
    return rows, facts, now, request


# --- the neighbour tenant: items that would pass every gate there --------------------

_NEIGHBOUR = "dneighbour"
_neighbour_ids: list[int] = []


def _neighbour(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as s:
        exists = s.execute(
            sa.text("SELECT 1 FROM tenants WHERE id = :t"), {"t": _NEIGHBOUR}
        ).first()
    if exists:
        return
    _neighbour_ids.clear()
    setup_tenant(sessions, _NEIGHBOUR)
    for n, subject in enumerate(SUBJECTS):
        res = lifecycle.write(
            sessions=sessions,
            tenant=_NEIGHBOUR,
            request=claims.ItemWrite.model_validate(
                {
                    "kind": "fact",
                    "subject": subject,
                    "attribute": f"neighbour_{n}",
                    "object": n,
                    "required": ["config.connection_pool.max gte 0"],
                    "evidence": ["E-open"],
                    "scope": {"axis": "case", "id": "INC-1"},
                    "text": MATCHING,
                }
            ),
            actor=WRITER,
            now=T0,
        )
        _neighbour_ids.append(res.item_id)
        with sessions.begin() as s:
            for to in ("shadow", "active"):
                lifecycle.promote(
                    session=s, tenant=_NEIGHBOUR, item_id=res.item_id, to=to, actor=SME, now=T0
                )  # type: ignore[arg-type]
    with sessions.begin() as s:  # a runbook passage the query matches, open to all
        add_document(s, _NEIGHBOUR, "n-runbook", [Section(("Runbook",), "n", MATCHING)], at=T0)
    with sessions.begin() as s:
        world = factgen.load_world(session=s, tenant=_NEIGHBOUR)
        factgen.observe(
            actor=ADMIN,
            session=s,
            world=world,
            observations=[
                factgen.Observation(subject, "config.connection_pool.max", 20, "test")
                for subject in SUBJECTS
            ],
            observed_at=T0,
            now=T0,
        )


# --- running recall -----------------------------------------------------------------


def _recall(
    sessions: sessionmaker[Session], built: Built, request: Request, query: str, limit: int
) -> recall.RecallResult:
    with sessions() as s:
        try:
            return recall.recall(
                session=s,
                tenant=built.tenant,
                actor=request.actor(),
                request=request.recall_request(query, limit),
                now=built.now,
            )
        finally:
            s.rollback()


def _record_use(
    sessions: sessionmaker[Session], built: Built, request: Request, used: list[int]
) -> Any:
    """``recall.record_use`` (the server's own point check of used items), rolled back."""
    with sessions() as s:
        try:
            return recall.record_use(  # type: ignore[attr-defined]
                session=s,
                tenant=built.tenant,
                actor=request.actor(),
                request=request.recall_request(QUERY_SOME, 10),
                used=used,
                now=built.now,
            )
        finally:
            s.rollback()


def _describe(built: Built, verdicts: dict[int, Verdict], ids: Any) -> str:
    lines = []
    for i in sorted(ids):
        item = built.items.get(i)
        if item is None:
            lines.append(f"  {i}: not an item of tenant {built.tenant}")
            continue
        v = verdicts[i]
        lines.append(
            f"  {i}: state={item.state} release={item.release_state} "
            f"superseded={item.superseded} redacted={item.redacted} acl={item.acl} "
            f"subject={item.subject} case={item.row.case} anchor={item.row.anchor} "
            f"written={item.written_at} purposes={item.row.purposes} "
            f"content={item.row.content_type} activated={item.activated_at} "
            f"window=[{item.valid_from}, {item.valid_to}) "
            f"gates={v.gates} check={v.check} first_failing={v.first_failing} "
            f"conditions={v.values}"
        )
    return "\n".join(lines)


def check_world(
    sessions: sessionmaker[Session],
    rows: list[Row],
    facts: list[Fact],
    now: Any,
    *requests: Request,
    docs: list[Doc] | None = None,
) -> None:
    """Build the world in a fresh tenant and check every request against the reference."""
    tenant = f"dt{next(_tenants)}"
    _ACTING["tenant"] = tenant
    built = build(sessions, tenant, rows, facts, now, docs or [])
    with sessions() as s:
        world = factgen.load_world(session=s, tenant=tenant)
    ref = Reference(world, built, facts, world.policy.permission_refusal_ttl)
    for request in requests:
        _check_request(sessions, built, ref, request)


def _check_request(
    sessions: sessionmaker[Session], built: Built, ref: Reference, request: Request
) -> None:
    tenant, now = built.tenant, built.now
    snapshot = ref.snapshot(request)
    verdicts = {i: ref.verdict(it, tenant, request, snapshot) for i, it in built.items.items()}
    expected = {
        i for i, v in verdicts.items() if v.admissible and ref.in_scope(built.items[i], request)
    }
    memory = "memory" in request.sources
    if not memory:
        expected = set()
    passage_gates = {i: ref.passage(d, request) for i, d in built.passages.items()}
    for query in (QUERY_NOTHING, QUERY_SOME):
        context = f"\nquery={query!r}\nrequest={request}\nnow={now}\n"
        res = _recall(sessions, built, request, query, 1000)
        # knowledge passages (model §6): those the query matches that pass their gates
        some = query == QUERY_SOME
        matched = {i for i, d in built.passages.items() if some and d.text in MATCHED_BY_SOME}
        want_passages = (
            {i for i in matched if passage_gates[i] is None}
            if "knowledge" in request.sources
            else set()
        )
        got_passages = [p.id for p in res.knowledge]
        assert len(got_passages) == len(set(got_passages))
        assert set(got_passages) == want_passages, (
            f"passages: SQL {sorted(got_passages)}, reference {sorted(want_passages)}{context}"
            + "\n".join(f"  {i}: {built.passages[i]} -> {passage_gates[i]}" for i in matched)
        )
        considered = (
            sum(passage_gates[i] != "hidden" for i in matched)
            if "knowledge" in request.sources
            else 0
        )
        assert res.knowledge_considered == considered, (res.knowledge_considered, considered)
        assert all(not p.ref.startswith("doc:n-") for p in res.knowledge)  # the neighbour's
        assert {i for s, i in res.order if s == "knowledge"} == set(got_passages)
        got = [r.item.id for r in res.items]
        assert {i for s, i in res.order if s == "memory"} == set(got)
        assert len(got) == len(set(got)), f"an item returned twice: {got}"
        wrong = set(got) ^ expected
        assert not wrong, (
            f"SQL recall and the reference disagree (query {query!r}); "
            f"returned-not-admissible={sorted(set(got) - expected)} "
            f"admissible-not-returned={sorted(expected - set(got))}{context}"
            + _describe(built, verdicts, wrong)
        )
        # point check: each returned item passes the six gates evaluated for it alone
        for r in res.items:
            assert r.item.tenant_id == tenant
            alone = ref.verdict(built.items[r.item.id], tenant, request, snapshot)
            assert alone.admissible, _describe(built, {r.item.id: alone}, [r.item.id])
            assert lifecycle.applies(r.conditions), (r.item.id, r.conditions)
            # the condition values the ranking query reports are the reference's, each
            # with the observation the reference's snapshot holds
            # (in list order; the reference keys them by the text it wrote, the item
            # stores the canonical text)
            assert [c.value.name for c in r.conditions] == list(alone.values.values())
            for c in r.conditions:
                entry = snapshot.get(c.subject, c.attribute)
                assert (c.observed is None) == (entry is None), (r.item.id, c, entry)
                if c.observed is not None and entry is not None:
                    got_obs = (c.observed.value, c.observed.vtype, c.observed.inline)
                    assert got_obs == (entry.value, entry.vtype, entry.inline), (c, entry)
                    assert c.observed.observed_at == entry.observed_at, (c, entry)
        # explain: only visible items, each under the first gate that fails
        seen: set[int] = set()
        for w in res.withheld:
            i = w.item.id
            assert i not in seen, f"withheld twice: {i}"
            seen.add(i)
            assert i in built.items, f"explain mentions item {i} of another tenant{context}"
            v = verdicts[i]
            assert v.visible, f"explain mentions hidden item {i}{context}" + _describe(
                built, verdicts, [i]
            )
            assert ref.in_scope(built.items[i], request), f"{i} is outside the subjects asked"
            assert i not in got
            assert w.gate in REPORTED
            assert w.gate == v.first_failing, (
                f"explain says {w.gate!r} for item {i} (state {w.state!r}, "
                f"verdicts {getattr(w, 'verdicts', None)}), the reference {v.first_failing!r}"
                f"{context}" + _describe(built, verdicts, [i])
            )
        # the server's point check (record_use re-evaluates each used id by itself):
        # what the recall returned is all admitted, and of every id, exactly the admissible
        if memory and query == QUERY_SOME:
            use = _record_use(sessions, built, request, got)
            assert set(use.used) == set(got), (use, got)
            hidden = {i for i, v in verdicts.items() if not v.visible}
            use = _record_use(sessions, built, request, [*built.items, *_neighbour_ids])
            assert set(use.used) == expected, (
                f"record_use admits {sorted(use.used)}, the reference {sorted(expected)}{context}"
                + _describe(built, verdicts, set(use.used) ^ expected)
            )
            for i in [*hidden, *_neighbour_ids]:
                assert use.refused.get(i) == "not_found", (i, use.refused.get(i))
        # a small limit: never shorter than it can be, only admissible items
        small = _recall(sessions, built, request, query, 3)
        ids = [r.item.id for r in small.items]
        assert set(ids) <= expected, (
            f"limit 3 returned inadmissible {sorted(set(ids) - expected)}{context}"
            + _describe(built, verdicts, set(ids) - expected)
        )
        few = {p.id for p in small.knowledge}
        assert few <= want_passages, (few, want_passages)
        assert len(small.order) == len(ids) + len(few)
        assert len(ids) + len(few) == min(3, len(expected) + len(want_passages)), (
            f"limit 3 returned {len(ids)} items and {len(few)} passages of {len(expected)} "
            f"admissible items and {len(want_passages)} passages (query {query!r}){context}"
            + _describe(built, verdicts, expected - set(ids))
        )


#: The tenant the application role's transactions name (row-level security): the
#: world being built and checked, or the neighbour while it is made.
_ACTING: dict[str, str] = {"tenant": _NEIGHBOUR}


@pytest.fixture
def sessions(db_url: str) -> Iterator[sessionmaker[Session]]:
    """Sessions of the application's login role, each transaction naming ``_ACTING``'s
    tenant (as a runtime's do), so every gate is checked under row-level security."""
    engine = db.make_app_engine(db_url)
    made = sessionmaker(engine, expire_on_commit=False)

    @sa.event.listens_for(made, "after_begin")
    def _tenant(session: Session, transaction: Any, connection: sa.Connection) -> None:
        connection.exec_driver_sql(
            "SELECT set_config('caveat.tenant', %s, true)", (_ACTING["tenant"],)
        )

    _ACTING["tenant"] = _NEIGHBOUR
    _neighbour(made)
    yield made
    engine.dispose()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: keeps it bounded
)
@given(world=worlds(), docs=_docs())
def test_sql_recall_agrees_with_the_reference_gates(
    sessions: sessionmaker[Session],
    world: tuple[list[Row], list[Fact], Any, Request],
    docs: list[Doc],
) -> None:
    check_world(sessions, *world, docs=docs)


def _row(subject: str, case: str, text: str, path: str, **changes: Any) -> Row:
    return Row(
        **{
            "kind": "fact",
            "subject": subject,
            "case": case,
            "required": ("config.connection_pool.max eq 20",),
            "excluded": (),
            "evidence": ("E-open",),
            "purposes": (),
            "text": text,
            "content_type": "failure_mechanism",
            "valid_from": None,
            "valid_to": None,
            "path": path,
            **changes,
        }
    )


def test_a_small_limit_is_filled_past_many_gated_candidates(
    sessions: sessionmaker[Session],
) -> None:
    """Over a thousand candidates rank first (the query's words, the subject asked) and
    every one fails a gate or is hidden; five that pass rank last and share no word with
    the query. A limit of 3 still returns 3 of those five, with or without subjects."""
    bait = [
        *(_row("payment-api", "INC-2", MATCHING, "case") for _ in range(1100)),
        *(_row("payment-api", "INC-1", MATCHING, "shadow") for _ in range(15)),
        *(
            _row("payment-api", "INC-1", MATCHING, "active", purposes=("postmortem",))
            for _ in range(15)
        ),
        *(_row("payment-api", "INC-1", MATCHING, "case", end="revoked") for _ in range(10)),
        *(_row("payment-api", "INC-1", MATCHING, "active", evidence=("E-c3",)) for _ in range(15)),
    ]
    good = [_row("orders-db", "INC-1", TEXTS[2], "active") for _ in range(5)]
    facts = [Fact(s, "config.connection_pool.max", 20, 5) for s in SUBJECTS]
    request = Request(
        admin=False,
        caps=("c1",),
        subjects=("payment-api", "orders-db"),
        purpose="incident_diagnosis",
        case_id="INC-1",
        inline=(),
    )
    check_world(
        sessions,
        bait + good,
        facts,
        T0 + timedelta(minutes=30),
        request,
        Request(**{**request.__dict__, "subjects": None}),
    )


@pytest.mark.parametrize("minutes", [30, 70])
def test_private_items_agree_with_the_reference(
    sessions: sessionmaker[Session], minutes: int
) -> None:
    """Every private anchor (the reader's and the writer's agent anchors and sessions),
    as written, rewritten by key at T0+16m, and (lessons) promoted to shadow (still the
    owner's) and to active; asked by the reader in each
    session and none, in a case and none, and by the operator. At T0+70m working memory
    written at T0 has run out (TTL 1h) and its rewrite has not."""
    rows = [
        _row("payment-api", "INC-1", MATCHING, path, anchor=anchor, rewrite=rewrite)
        for anchor in PRIVATE
        for path, rewrite in (
            ("case", None),
            ("case", "case"),
            ("shadow", None),
            ("active", None),
        )
        if path == "case" or anchor.startswith("agent:")  # no SME sees working memory
    ]
    facts = [Fact(s, "config.connection_pool.max", 20, 5) for s in SUBJECTS]
    base = Request(admin=False, caps=CAPS, subjects=None, purpose=None, case_id=None, inline=())
    check_world(
        sessions,
        rows,
        facts,
        T0 + timedelta(minutes=minutes),
        *(Request(**{**base.__dict__, "session": s}) for s in (None, *SESSIONS)),
        Request(**{**base.__dict__, "session": "S-r", "case_id": "INC-1"}),
        Request(**{**base.__dict__, "session": "S-w", "admin": True}),
    )


def test_knowledge_passages_agree_with_the_reference(sessions: sessionmaker[Session]) -> None:
    """Every kind of document access (readers, deny by principal and by capability, each
    level, purposes) and every withdrawal, asked with both sources and knowledge alone by
    readers of every clearance, with and without the capabilities, for each purpose, and
    by the operator; beside items that pass."""
    docs = [
        Doc(readers, deny, level, purposes, text, end)
        for readers, deny, level, purposes, end in (
            ((), (), None, (), None),
            (("c1",), (), None, (), None),
            (("c3",), (), None, (), None),
            ((), ("principal:reader",), None, (), None),
            ((), (f"cap:{DENIED_CAP}",), None, (), None),
            ((), (), "public", (), None),
            ((), (), "confidential", (), None),
            ((), (), "restricted", (), None),
            ((), (), None, ("postmortem",), None),
            ((), (), None, (), "superseded"),
            ((), (), None, (), "revoked"),
            ((), (), None, (), "redacted"),
        )
        for text in (MATCHING, TEXTS[2])
    ]
    rows = [_row("payment-api", "INC-1", MATCHING, "active") for _ in range(3)]
    facts = [Fact(s, "config.connection_pool.max", 20, 5) for s in SUBJECTS]
    base = Request(admin=False, caps=("c1",), subjects=None, purpose=None, case_id=None, inline=())
    variants = [
        {"sources": sources, **change}
        for sources in (("memory", "knowledge"), ("knowledge",))
        for change in (
            {},
            {"caps": ("c1", DENIED_CAP)},
            {"caps": ("c3",), "clearance": "confidential"},
            {"purpose": "postmortem"},
            {"purpose": "incident_diagnosis", "clearance": "public"},
            {"admin": True},
        )
    ]
    check_world(
        sessions,
        rows,
        facts,
        T0 + timedelta(minutes=30),
        *(Request(**{**base.__dict__, **v}) for v in variants),
        docs=docs,
    )
