"""The recall benchmark's generated store, small: loaded and well-formed (no timings)."""

from __future__ import annotations

import random

import sqlalchemy as sa
from sqlalchemy.orm import sessionmaker

import claims
import recall
from bench import bench_recall as br
from bench import corpus as bench_corpus
from bench.bench_claims import SCHEMA


def test_generated_store_is_well_formed(engine: sa.Engine, db_url: str) -> None:
    corpus = br.load(db_url, 2000, seed=7, show=False)
    assert corpus.items == 2000
    assert corpus.measured_items == 1000
    assert 0.5 < corpus.passing / corpus.measured_items < 0.7
    with engine.connect() as c:
        per_tenant = {
            t: n for t, n in c.execute(sa.text("SELECT tenant_id, count(*) FROM items GROUP BY 1"))
        }
        assert len(per_tenant) == 20
        assert sum(per_tenant.values()) == 2000
        assert per_tenant[br.TENANT] == 1000  # the measured tenant holds half
        query = sa.text("SELECT state, count(*) FROM item_states GROUP BY 1")
        states = {s: n for s, n in c.execute(query)}
        assert states == {"active": 2000}
        assert (
            c.execute(
                sa.text(
                    "SELECT count(*) FROM audit_log WHERE tenant_id = :t AND action = 'transition'"
                ),
                {"t": br.TENANT},
            ).scalar_one()
            == 1000
        )
        subjects = c.execute(sa.text("SELECT count(*) FROM entities")).scalar_one()
        assert subjects == corpus.subjects
        facts = c.execute(sa.text("SELECT count(*) FROM facts")).scalar_one()
        assert facts == corpus.fact_rows == subjects * len(SCHEMA) * 3
        if c.execute(sa.text("SELECT to_regclass('facts_current')")).scalar_one() is not None:
            # the latest value of each (subject, attribute), kept by a trigger on facts
            current = c.execute(sa.text("SELECT count(*) FROM facts_current")).scalar_one()
            assert current == subjects * len(SCHEMA)
        edges = c.execute(sa.text("SELECT count(*) FROM entity_edges")).scalar_one()
        assert edges > 0
        named = c.execute(
            sa.text(
                "SELECT count(*) FROM items WHERE EXISTS (SELECT 1 FROM unnest(required) r "
                "WHERE r LIKE '@%')"
            )
        ).scalar_one()
        assert named > 0  # conditions about another entity
        hidden = c.execute(
            sa.text("SELECT count(*) FROM items WHERE acl::text LIKE :r"),
            {"r": f"%{br.RESTRICTED}%"},
        ).scalar_one()
        assert hidden > 0

    # the rows are the write path's: written through the gate again, each is a duplicate
    sessions = sessionmaker(engine, expire_on_commit=False)
    assert corpus.samples
    again = claims.write_batch(
        sessions=sessions,
        tenant=br.TENANT,
        requests=corpus.samples,
        actor=br.LOADER,
        now=br.NOW,
    )
    assert {o.outcome for o in again.outcomes} == {"duplicate"}

    # recall finds items (never a hidden one); the baseline returns rows
    rt = br.runtime(db_url)
    connection = rt.engine.connect()
    try:
        texts = br.phrases(5, random.Random(1))
        returned = [
            item
            for text in texts
            for item in br._recall_call(
                rt, recall.RecallRequest(query=text, purpose=br.PURPOSE)
            ).items
        ]
        assert returned
        assert all(r.item.state == "active" for r in returned)
        assert all(r.item.readable_by(br.PRINCIPAL) for r in returned)
        raw = br.Raw(connection)
        params = {"t": br.TENANT, "q": br.or_query(texts[0]), "cap": 1000}
        rows = raw.bare(br.BASELINE, params, prepare=False)
        assert rows
        assert len(raw.bare(br.BASELINE_PREPARED, params)) == len(rows)
        assert len(raw.tx(br.BASELINE_PREPARED, params)) == len(rows)
        ids = [r.item.id for r in returned][:50]
        assert br._guard_call(rt, ids).usable
    finally:
        connection.close()
        rt.engine.dispose()


def test_the_dense_measurement_runs_every_variant_on_a_small_store(db_url: str) -> None:
    """``--dense`` on a small store with the hashing embedder: every item gets its vector,
    every dense variant answers, the sweep times every size, and the HNSW baseline's
    recall is a share (no timing is asserted)."""
    corpus = br.load(db_url, 2000, seed=7, show=False)
    embedder = recall.make_embedder("hashing")
    assert embedder is not None
    vectors = br.load_vectors(db_url, embedder, show=False)
    assert vectors["rows"] == 2000
    assert br.vectors_ready(db_url, embedder.name, 2000)
    out = br.measure(
        db_url, corpus, queries=4, seed=7, cap=1000, warmup=1, show=False, dense=embedder
    )
    assert sum(out["dense_paths"].values()) == 4  # one no-subject dense recall per query
    assert set(out["dense_paths"]) <= {"exact", "hnsw", "hnsw+exact"}
    assert out["mean_results_dense_subject"] > 0 and out["mean_results_baseline_dense"] == 10
    assert 0.0 <= out["baseline_dense_recall_at_10_min"] <= out["baseline_dense_recall_at_10"] <= 1
    assert set(out["sweep_p50_ms"]) == {"hnsw", *(str(n) for n in br.SWEEP_SIZES)}
    assert out["dense_embed_misses"] == 0  # every recall used the vector timed for it
    report = br.markdown(
        {**out, "dense_model": embedder.name, "vectors": vectors, "embedder_load_s": 0.0}, []
    )
    assert "Cut-over sweep" in report and "Dense channel: `hashing-v1-384`" in report
    assert f"Corpus: {bench_corpus.current().label}." in report  # it says which it used


def test_generated_passages_are_stored_as_an_import_stores_them(
    engine: sa.Engine, db_url: str
) -> None:
    """``--passages``: documents of four sections in the measured tenant, access and
    purposes per document, ``fts`` equal to what ``claims.import_documents`` computes,
    and a vector per passage with ``--dense``; the knowledge variants answer."""
    corpus = br.load(db_url, 2000, seed=7, show=False)
    loaded = br.load_passages(db_url, 402, seed=7, show=False)
    assert (loaded["documents"], loaded["passages"]) == (101, 402)
    assert br.passages_ready(db_url, 402, None)
    embedder = recall.HashingEmbedder()
    assert br.load_passage_vectors(db_url, embedder, show=False)["rows"] == 402
    assert br.passages_ready(db_url, 402, embedder.name)
    with engine.connect() as c:
        c.execute(sa.text("SELECT set_config('caveat.tenant', :t, false)"), {"t": br.TENANT})
        wrong = c.execute(
            sa.text(
                "SELECT count(*) FROM passages WHERE fts <> to_tsvector('english', "
                "array_to_string(heading_path, ' ') || ' ' || text)"
            )
        ).scalar_one()
        per_doc = c.execute(
            sa.text(
                "SELECT count(*) AS n, count(DISTINCT acl) AS acls, "
                "count(DISTINCT purposes) AS ps FROM passages GROUP BY document_id"
            )
        ).all()
        acls = c.execute(sa.text("SELECT DISTINCT acl::text FROM passages")).scalars().all()
        unjoined = c.execute(
            sa.text(
                "SELECT count(*) FROM passages p LEFT JOIN documents d ON d.tenant_id = "
                "p.tenant_id AND d.id = p.document_id AND d.version = p.document_version "
                "WHERE d.id IS NULL"
            )
        ).scalar_one()
    assert wrong == 0 and unjoined == 0
    assert sorted({r.n for r in per_doc}) == [2, 4]  # the last document holds the rest
    assert {(r.acls, r.ps) for r in per_doc} == {(1, 1)}  # one access per document
    assert set(acls) == {"[]", '[["incidents"]]', '[["legal"]]'}
    out = br.measure(
        db_url,
        corpus,
        queries=4,
        seed=7,
        cap=1000,
        warmup=1,
        show=False,
        dense=embedder,
        passages=402,
    )
    assert out["mean_passages_knowledge_no_subject"] > 0
    assert out["ratio_knowledge"] > 0 and out["ratio_dense_knowledge"] > 0
    report = br.markdown(
        {
            **out,
            "dense_model": embedder.name,
            "vectors": br.load_vectors(db_url, embedder, show=False),
            "embedder_load_s": 0.0,
        },
        [],
    )
    assert "Knowledge: 402 passages" in report and "`ratio_knowledge`" in report
