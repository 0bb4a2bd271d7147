"""The retrieval benchmark's parts: its scoring, its loader, and its BM25 baseline."""

from __future__ import annotations

import sqlalchemy as sa

import recall
from bench import bench_recall as br
from bench import bench_retrieval as bq


def test_scores_count_hits_and_reciprocal_ranks_within_the_top_ten() -> None:
    ranked = [["a", "b"], ["x", "y", "z", "b"], [str(i) for i in range(20)], []]
    got = bq.scores(ranked, ["a", "b", "15", "q"])
    assert got == {"hit@1": 0.25, "hit@5": 0.5, "mrr": round((1 + 1 / 4) / 4, 3), "queries": 4}


def test_bm25_ranks_a_summary_first_for_its_own_words() -> None:
    docs = bq.postmortems()
    rank = bq.bm25_ranker(docs)
    assert rank(docs[31].summary)[0] == docs[31].id


def test_loaded_summaries_are_active_episodes_recalled_by_their_words(
    engine: sa.Engine, db_url: str
) -> None:
    docs = bq.postmortems()[:12]
    ids = bq.load(db_url, docs)
    assert sorted(ids.values()) == sorted(p.id for p in docs)
    with engine.connect() as c:
        c.execute(sa.text("SELECT set_config('caveat.tenant', :t, false)"), {"t": bq.TENANT})
        states = c.execute(sa.text("SELECT DISTINCT state FROM item_states")).scalars().all()
    assert states == ["active"]
    rt = br.runtime(db_url, bq.TENANT)
    try:
        target = docs[2]
        res = rt.recall(bq.AGENT, recall.RecallRequest(query=target.summary, limit=5), bq.NOW)
    finally:
        rt.engine.dispose()
    assert [ids[r.item.id] for r in res.items][:1] == [target.id]


def test_each_ranking_runs_its_channels_on_the_loaded_summaries(db_url: str) -> None:
    docs = bq.postmortems()[:12]
    ids = bq.load(db_url, docs)
    embedder = recall.HashingEmbedder()
    assert bq._drain(db_url, embedder) > 0
    asked = [bq.Query(docs[5].summary, docs[5].id, "test")]
    dense_only = bq.RANKINGS["caveat_dense"][0]
    assert dense_only is not None
    for fusion, emb in ((dense_only, embedder), (recall.FUSION, embedder), (recall.FUSION, None)):
        ranked = bq._ask(db_url, ids, asked, emb, fusion)
        assert ranked[0][0] == docs[5].id
    rt = br.runtime(db_url, bq.TENANT, embedder=embedder, fusion=dense_only)
    try:
        res = rt.recall(bq.AGENT, recall.RecallRequest(query=docs[5].summary), bq.NOW)
    finally:
        rt.engine.dispose()
    assert res.channels == ("lexical", "dense")
    assert res.not_embedded == 0
    # dense only: the lexical weight is zero, so the score is the dense channel's alone
    assert res.items[0].parts["dense_rank"] == 1.0
    assert res.items[0].parts["fused"] > 0
