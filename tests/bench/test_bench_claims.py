"""The ingest benchmark's backfill: the queue the gated run leaves is drained whole."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.orm import sessionmaker

import claims
from bench import bench_claims as bc


def test_backfill_drains_what_the_gated_ingest_queued(engine: sa.Engine) -> None:
    world = bc.World(7)
    sessions = sessionmaker(engine, expire_on_commit=False)
    agent = bc._setup(sessions, world)
    result = claims.write_batch(
        sessions=sessions,
        tenant=bc.TENANT,
        requests=world.writes(300),
        actor=agent,
        now=bc.T0,
        chunk_size=100,
    )
    accepted = result.count("accepted")
    assert accepted > 200
    out = bc._backfill(engine, 0)
    assert out["queued"] == accepted  # the statement trigger queued every stored item
    taken, seconds = out["hashing"]
    assert taken == accepted and seconds > 0
    assert "minilm" not in out
    with engine.connect() as c:
        assert c.execute(sa.text("SELECT count(*) FROM embed_queue")).scalar_one() == 0
        stored = c.execute(
            sa.text("SELECT count(*) FROM item_embeddings WHERE model = 'hashing-v1-384'")
        ).scalar_one()
    assert stored == accepted
