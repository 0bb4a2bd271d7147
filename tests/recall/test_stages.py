"""A live recall without subjects walks two candidate stages (the full-text matches
joined by the dense channel's nearest, then the rest by recency): an item is ranked,
and withheld, once, whichever stages it is a candidate of."""

from __future__ import annotations

import factgen
from caveat import app as use
from caveat import db
from recall import HashingEmbedder, RecallRequest
from tests.caveat._doors import precedent, world
from tests.conftest import ADMIN


def test_the_dense_channels_nearest_are_not_ranked_again_by_recency(db_url: str) -> None:
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme", embedder=HashingEmbedder())
        world(rt)
        use.observe(
            rt, ADMIN, [factgen.Observation("payment-api", "config.connection_pool.max", 20)]
        )
        active = precedent(rt)  # no term of the queries below in its text
        rt.embed_pending()
        for query in ("zebra unicorn", "restart"):
            got = use.recall_items(rt, ADMIN, RecallRequest(query, explain=True, limit=10))
            ids = [r.item.id for r in got.items]
            assert ids == [active], (query, ids)
            assert "dense" in got.channels
            withheld = [w.item.id for w in got.withheld]
            assert len(withheld) == len(set(withheld)), (query, withheld)
    finally:
        engine.dispose()
