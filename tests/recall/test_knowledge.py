"""Knowledge beside memory in recall (model §6): passages gated by tenant, capability,
purpose and time (never applicability), fused with the items by the same reciprocal
rank fusion, tagged ``knowledge``; the merged order and its limit; counts; packing."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

import claims
import recall
from recall import _queries as rq
from recall._embed import vector_text
from tests.conftest import T0, Store
from tests.recall.knowledge import Section, add_document, withdraw
from tests.recall.test_recall import _activate, _write

RUNBOOK = (
    Section(("Payment API", "Pool exhausted"), "payment-api-pool-exhausted",
            "When the connection pool is exhausted, restart the payment-api pods one by one."),
    Section(("Payment API", "Disk full"), "payment-api-disk-full",
            "When the disk fills, rotate the logs and clear the spool."),
)  # fmt: skip
QUERY = "pool exhausted restart"


def _docs(store: Store, doc_id: str = "runbooks/payment-api.md", **kw: Any) -> list[int]:
    with store.sessions.begin() as s:
        return add_document(s, store.tenant, doc_id, kw.pop("sections", RUNBOOK), at=T0, **kw)


def _ask(store: Store, actor: claims.Actor | None = None, at: Any = None, **kw: Any) -> Any:
    req = recall.RecallRequest(**{"query": QUERY, "explain": True, **kw})
    with store.sessions.begin() as s:
        return recall.recall(
            session=s,
            tenant=store.tenant,
            actor=actor or store.agent,
            request=req,
            now=at or T0 + timedelta(minutes=5),
        )


def _payments(store: Store) -> claims.Actor:
    """An agent that holds the runbook's restricted capability."""
    with store.sessions.begin() as s:
        return claims.register_principal(
            actor=claims.Actor("admin-1", "admin", frozenset()),
            session=s,
            tenant=store.tenant,
            principal="agent-pay",
            role="agent",
            capabilities=["incidents", "payments-restricted"],
        )


def _refs(result: recall.RecallResult) -> list[str]:
    return [p.ref for p in result.knowledge]


def test_default_sources_are_memory_only(setup: Store) -> None:
    _docs(setup)
    item = _write(setup)
    _activate(setup, item)
    res = _ask(setup)
    assert [r.item.id for r in res.items] == [item]
    assert res.knowledge == () and res.knowledge_considered == 0
    assert res.order == (("memory", item),)


def test_knowledge_alone_gives_passages_only(setup: Store) -> None:
    pool, _disk = _docs(setup)
    item = _write(setup)
    _activate(setup, item)
    res = _ask(setup, sources=("knowledge",))
    assert res.items == () and res.withheld == ()
    assert _refs(res) == ["doc:runbooks/payment-api.md#payment-api-pool-exhausted"]
    [p] = res.knowledge
    assert (p.id, p.source, p.document_id, p.version) == (pool, "knowledge", p.document_id, 1)
    assert p.heading_path == ("Payment API", "Pool exhausted")
    assert p.text.startswith("When the connection pool")
    assert res.order == (("knowledge", pool),)
    assert res.knowledge_considered == 1  # the disk passage matches no term


def test_both_sources_fuse_into_one_list_and_the_limit_applies_to_it(setup: Store) -> None:
    pool, _ = _docs(setup)
    item = _write(setup)
    _activate(setup, item)
    res = _ask(setup, sources=("memory", "knowledge"))
    assert {s for s, _ in res.order} == {"memory", "knowledge"}
    assert ("knowledge", pool) in res.order and ("memory", item) in res.order
    assert [type(r).__name__ for r in res.ranked()] == [
        "RecalledItem" if s == "memory" else "RecalledPassage" for s, _ in res.order
    ]
    scores = [r.score for r in res.ranked()]
    assert scores == sorted(scores, reverse=True)
    one = _ask(setup, sources=("memory", "knowledge"), limit=1)
    assert len(one.order) == 1 and len(one.items) + len(one.knowledge) == 1
    assert one.order == res.order[:1]


def test_a_passage_is_never_gated_by_applicability(setup: Store) -> None:
    """The precedent's condition is FALSE now (pool max 100): it is withheld by
    applicability, and the runbook passage is returned beside it."""
    _docs(setup)
    item = _write(setup)
    _activate(setup, item)
    setup.observe(T0 + timedelta(minutes=2), ("payment-api", "config.connection_pool.max", 100))
    res = _ask(setup, sources=("memory", "knowledge"))
    assert res.items == ()
    assert [(w.item.id, w.gate) for w in res.withheld] == [(item, "applicability")]
    assert _refs(res) == ["doc:runbooks/payment-api.md#payment-api-pool-exhausted"]


def test_a_restricted_passage_is_unknown_to_a_caller_without_the_capability(
    setup: Store,
) -> None:
    _docs(setup, "runbooks/secret.md", readers=["payments-restricted"])
    res = _ask(setup, sources=("knowledge",))
    assert res.knowledge == () and res.knowledge_considered == 0 and res.order == ()
    sme = _ask(setup, _payments(setup), sources=("knowledge",))
    assert _refs(sme) == ["doc:runbooks/secret.md#payment-api-pool-exhausted"]
    assert sme.knowledge_considered == 1


def test_deny_and_classification_hide_a_passage_as_they_hide_an_item(setup: Store) -> None:
    _docs(setup, "a.md", deny=["principal:agent-ir"])
    _docs(setup, "b.md", classification="restricted")
    assert _ask(setup, sources=("knowledge",)).knowledge_considered == 0
    admin = claims.Actor("admin-1", "admin", frozenset())
    assert len(_ask(setup, admin, sources=("knowledge",)).knowledge) == 2


def test_the_purpose_gate_applies_and_is_counted_as_considered(setup: Store) -> None:
    _docs(setup, purposes=["postmortem"])
    res = _ask(setup, sources=("knowledge",), purpose="incident_diagnosis")
    assert res.knowledge == () and res.knowledge_considered == 1
    assert _ask(setup, sources=("knowledge",)).knowledge == ()  # no purpose: not listed
    assert len(_ask(setup, sources=("knowledge",), purpose="postmortem").knowledge) == 1


def test_as_of_reads_passages_recorded_and_not_withdrawn_then(setup: Store) -> None:
    _docs(setup, "old.md")
    _docs(setup, "gone.md")
    with setup.sessions.begin() as s:
        withdraw(s, setup.tenant, "old.md", "superseded", T0 + timedelta(minutes=10))
        withdraw(s, setup.tenant, "gone.md", "redacted", T0 + timedelta(minutes=10))
    before = _ask(setup, sources=("knowledge",), as_of=T0 + timedelta(minutes=5))
    assert {p.document_id for p in before.knowledge} == {"old.md"}  # redacted: never
    assert _ask(setup, sources=("knowledge",), as_of=T0 - timedelta(minutes=1)).order == ()
    later = T0 + timedelta(minutes=20)
    assert _ask(setup, at=later, sources=("knowledge",)).order == ()  # withdrawn by now


def test_the_dense_channel_finds_a_passage_no_term_matches(setup: Store) -> None:
    embedder = recall.HashingEmbedder()
    with setup.sessions.begin() as s:
        add_document(
            s,
            setup.tenant,
            "dense.md",
            [Section(("Saturation",), "saturation", "zzqx ywwv")],
            at=T0,
            embedder=embedder,
        )
    req = recall.RecallRequest(query="zzqx ywwv qqq", sources=("knowledge",), explain=True)
    with setup.sessions.begin() as s:
        res = recall.recall(
            session=s, tenant=setup.tenant, actor=setup.agent, request=req,
            now=T0 + timedelta(hours=1), embedder=embedder,
        )  # fmt: skip
    [p] = res.knowledge
    assert p.parts["dense_rank"] == 1 and "dense" in res.channels
    req2 = recall.RecallRequest(query="unrelated words", sources=("knowledge",))
    with setup.sessions.begin() as s:
        res2 = recall.recall(
            session=s, tenant=setup.tenant, actor=setup.agent, request=req2,
            now=T0 + timedelta(hours=1), embedder=embedder,
        )  # fmt: skip
    assert [q.parts.get("lexical") for q in res2.knowledge] == [0.0]  # found by vector only


def test_packing_counts_a_passage_and_tags_it_with_its_ref(setup: Store) -> None:
    _docs(setup)
    item = _write(setup)
    _activate(setup, item)
    res = _ask(setup, sources=("memory", "knowledge"), budget=400)
    packed = res.packed
    assert packed is not None and packed.tokens <= 400
    assert packed.ids == (item,)
    ref = "doc:runbooks/payment-api.md#payment-api-pool-exhausted"
    assert packed.knowledge == (ref,)
    assert f"[knowledge {ref}]" in packed.text
    tight = _ask(setup, sources=("knowledge",), budget=5)
    assert tight.packed is not None and tight.packed.knowledge == ()
    assert tight.packed.knowledge_omitted == (ref,)


# --- the merge, a pure function -------------------------------------------------------


def _item(i: int, score: float) -> Any:
    return type("R", (), {"item": type("I", (), {"id": i})(), "score": score})()


def _passage(i: int, score: float) -> Any:
    return type("P", (), {"id": i, "score": score})()


def test_merge_keeps_each_list_in_order_and_prefers_an_item_on_a_tie() -> None:
    items = [_item(1, 0.5), _item(2, 0.7), _item(3, 0.1)]  # MMR order, not by score
    passages = [_passage(1, 0.6), _passage(2, 0.5)]
    got = recall.merge_sources(items, passages, 10)
    assert got == (
        ("knowledge", 1), ("memory", 1), ("memory", 2), ("knowledge", 2), ("memory", 3),
    )  # fmt: skip
    assert recall.merge_sources(items, passages, 2) == got[:2]


@given(
    st.lists(st.floats(0, 1), max_size=8),
    st.lists(st.floats(0, 1), max_size=8),
    st.integers(1, 20),
)
def test_merge_is_an_interleaving_cut_at_the_limit(a: list[float], b: list[float], k: int) -> None:
    items = [_item(n, x) for n, x in enumerate(a)]
    passages = [_passage(n, x) for n, x in enumerate(sorted(b, reverse=True))]
    got = recall.merge_sources(items, passages, k)
    assert len(got) == min(k, len(a) + len(b))
    assert [i for s, i in got if s == "memory"] == list(range(len(a)))[: len(got)][
        : sum(1 for s, _ in got if s == "memory")
    ]
    assert [i for s, i in got if s == "knowledge"] == list(range(len(b)))[
        : sum(1 for s, _ in got if s == "knowledge")
    ]


# --- the SQL gates and their Python twin ------------------------------------------------

_grid = list(
    itertools.product(
        [(), ("incidents",), ("payments-restricted",)],  # readers
        [(), ("principal:agent-ir",), ("cap:incidents",)],  # deny
        [None, "public", "restricted"],  # classification
        [(), ("postmortem",)],  # purposes
        [None, "superseded", "redacted"],  # withdrawn at T0+10m
    )
)


@pytest.mark.parametrize("at_minutes", [-1, 5, 20])
def test_the_sql_passage_gates_agree_with_admits_passage(setup: Store, at_minutes: int) -> None:
    made = {}
    with setup.sessions.begin() as s:
        for n, (readers, deny, level, purposes, end) in enumerate(_grid):
            [pid] = add_document(
                s, setup.tenant, f"g{n}.md", [Section(("Pool",), "pool", "pool exhausted")],
                at=T0, readers=readers, deny=deny, classification=level, purposes=purposes,
            )  # fmt: skip
            if end:
                withdraw(s, setup.tenant, f"g{n}.md", end, T0 + timedelta(minutes=10))
            made[pid] = (readers, deny, level, purposes, end)
    at = T0 + timedelta(minutes=at_minutes)
    for actor in (setup.agent, _payments(setup), setup.outsider):
        for purpose in (None, "postmortem"):
            res = _ask(setup, actor, sources=("knowledge",), purpose=purpose, limit=1000,
                       as_of=at)  # fmt: skip
            verdicts = {
                pid: recall.admits_passage(
                    actor=actor,
                    acl=[list(r)] if r else [],
                    deny=d,
                    classification=lv,
                    purposes=p,
                    recorded_at=T0,
                    withdrawn_at=None if e is None else T0 + timedelta(minutes=10),
                    withdrawn_reason=e,
                    purpose=purpose,
                    at=at,
                )
                for pid, (r, d, lv, p, e) in made.items()
            }
            assert {p.id for p in res.knowledge} == {i for i, v in verdicts.items() if v is None}
            assert res.knowledge_considered == sum(v != "hidden" for v in verdicts.values())


def test_the_passage_gate_sql_spells_no_applicability() -> None:
    assert "caveat_applies" not in rq.PASSAGES_RANKED
    assert "redactions" not in rq.PASSAGE_VISIBLE


def test_an_imported_runbook_is_recalled_by_text_and_by_vector(setup: Store) -> None:
    """End to end through ``claims.import_documents`` and ``recall.embed_passages``."""
    embedder = recall.HashingEmbedder()
    text = (
        "# Payment API\n\n## Pool exhausted\n\nRestart the payment-api pods one by one.\n\n"
        "## Disk full\n\nRotate the logs.\n"
    )
    with setup.sessions.begin() as s:
        claims.import_documents(
            session=s,
            tenant=setup.tenant,
            actor=setup.sme,
            now=T0,
            documents=[claims.DocumentInput("runbooks/payment-api.md", text, uri="https://x/r.md")],
        )
        assert recall.embed_passages(session=s, tenant=setup.tenant, embedder=embedder, now=T0)
    req = recall.RecallRequest(query="pool exhausted restart", sources=("knowledge",))
    with setup.sessions.begin() as s:
        res = recall.recall(
            session=s, tenant=setup.tenant, actor=setup.agent, request=req,
            now=T0 + timedelta(minutes=5), embedder=embedder,
        )  # fmt: skip
    top = res.knowledge[0]
    assert top.ref == claims.passage_ref("runbooks/payment-api.md", top.fragment)
    assert top.heading_path == ("Payment API", "Pool exhausted")
    assert top.uri == f"https://x/r.md#{top.fragment}"
    assert "dense" in top.parts and top.parts["lexical_rank"] == 1


def test_a_passage_lists_the_items_citing_it_that_the_caller_may_see(setup: Store) -> None:
    """Linked both ways (model §6): an item citing a passage's ref lists on the passage;
    one the caller may not read (restricted evidence beside the ref) never does."""
    text = "# Payment API\n\n## Pool exhausted\n\nRestart the pods one by one.\n"
    with setup.sessions.begin() as s:
        claims.import_documents(
            session=s, tenant=setup.tenant, actor=setup.sme, now=T0,
            documents=[claims.DocumentInput("runbooks/pay.md", text)],
        )  # fmt: skip
    ref = claims.passage_ref("runbooks/pay.md", "pool-exhausted")
    open_item = _write(setup, evidence=[ref])
    pay = _payments(setup)
    secret = _write(setup, pay, evidence=[ref, "E-secret"], attribute="restart_secret")
    [p] = _ask(setup, sources=("knowledge",)).knowledge
    assert p.ref == ref and p.cited_by == (open_item,)
    [p] = _ask(setup, pay, sources=("knowledge",)).knowledge
    assert p.cited_by == (open_item, secret)
    then = _ask(setup, sources=("knowledge",), as_of=T0 + timedelta(minutes=1))
    assert [q.cited_by for q in then.knowledge] == [()]  # an as-of recall lists none


def _passage_params(store: Store, embedder: recall.Embedder, **kw: Any) -> dict[str, Any]:
    from recall._fusion import FUSION

    return {
        **FUSION.params(),
        "tenant": store.tenant,
        **store.agent.gate_params("caps"),
        "at": T0 + timedelta(hours=1),
        "purpose": None,
        "tsquery": "",
        "qvec": vector_text(embedder.embed(["pool exhausted restart pods"])[0]),
        "model": embedder.name,
        "k": 5,
        "cutover": 0,
        "wide": 20,
        "cap": 1000,
        "limit": 5,
        "dense_ids": None,
        "dense_scores": None,
        **kw,
    }


def test_past_the_cutover_the_dense_channel_reads_the_hnsw_index_and_finds_the_same(
    setup: Store,
) -> None:
    """Beyond ``cutover`` passages embedded, the passages' dense channel asks the HNSW
    index (dimension 384), then the gates; on a set this small it finds what the exact
    scan in the ranking statement finds, in the same order, restricted passages left out
    by both; at or under the cut-over it finds nothing (the exact scan runs), and when
    the gates pass fewer than ``k`` of the ``wide`` nearest it comes back short."""
    embedder = recall.HashingEmbedder()
    words = ["pool", "exhausted", "restart", "pods", "disk", "spool", "latency", "dns"]
    open_ids, hidden_ids = [], []
    with setup.sessions.begin() as s:
        for n in range(12):
            text = " ".join(words[(n + j) % len(words)] for j in range(3))
            restricted = n % 4 == 0
            [pid] = add_document(
                s, setup.tenant, f"h{n}.md", [Section((f"H{n}",), "h", text)], at=T0,
                readers=("payments-restricted",) if restricted else (), embedder=embedder,
            )  # fmt: skip
            (hidden_ids if restricted else open_ids).append(pid)
    params = _passage_params(setup, embedder)
    with setup.sessions.begin() as s:
        s.execute(sa.text("SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off"))
        near = rq.passages_dense_hnsw(session=s, params=params)
        plan = [
            str(r[0])
            for r in s.connection().exec_driver_sql(
                "EXPLAIN (ANALYZE, COSTS OFF) " + rq.PASSAGES_DENSE_HNSW, params
            )
        ]
        rows, _ = rq.passages_ranked(session=s, params=params)  # dense_ids None: exact
        over = rq.passages_dense_hnsw(session=s, params={**params, "cutover": 1000})
        short = rq.passages_dense_hnsw(session=s, params={**params, "wide": 4})
    [scan] = [line for line in plan if "ix_passage_embeddings_hnsw_384" in line]
    assert "never executed" not in scan
    exact = sorted(((r["id"], r["dense"]) for r in rows), key=lambda r: (-r[1], r[0]))
    assert [round(d, 6) for _, d in near] == [round(d, 6) for _, d in exact][:5]
    last = round(near[-1][1], 6)  # passages tied with the fifth may come in either order
    assert {i for i, d in near if round(d, 6) > last} == {i for i, d in exact if round(d, 6) > last}
    found = {i for i, _ in near + exact}
    assert found <= set(open_ids) and not found & set(hidden_ids)
    assert over == []
    assert len(short) <= 4 < 5  # no more than the wide nearest: short of k, recall scans exactly
