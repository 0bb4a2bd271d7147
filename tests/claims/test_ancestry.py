"""``item_ancestry`` is the transitive closure of ``derived_from`` (migration 0007).

Differential: random lineage DAGs are inserted in random statement batches (a
parent and its child may arrive in the same statement, as in a bulk load),
and the trigger-filled closure is compared with networkx's.
"""

from __future__ import annotations

import itertools

import networkx as nx
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_INSERT = sa.text(
    "INSERT INTO items (id, tenant_id, kind, subject, attribute, object, conditions, cond_key, "
    "evidence, evidence_key, derived_from, epistemic, salience, scope_axis, scope_id, "
    "valid_from, recorded_at, created_by) "
    "SELECT u.id, :t, 'fact', 'svc', 'a' || u.id, CAST('{}' AS jsonb), "
    "CAST('{\"required\": [], \"excluded\": []}' AS jsonb), 'k' || u.id, '{}', '', "
    "CAST(u.parents AS bigint[]), 'observation', 0.5, 'case', 'C', now(), now(), 'test' "
    "FROM unnest(CAST(:ids AS bigint[]), CAST(:parents AS text[])) AS u(id, parents)"
)

_ids = itertools.count(1_000_000, 1_000)


@st.composite
def lineages(draw: st.DrawFn) -> tuple[list[list[int]], list[int]]:
    """Parents (earlier items only) of each of n items, and where statements end."""
    n = draw(st.integers(1, 24))
    parents = [
        sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else [] for i in range(n)
    ]
    cuts = sorted(draw(st.sets(st.integers(1, n), max_size=4)) | {n})
    return parents, cuts


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lineage=lineages())
def test_the_closure_is_the_transitive_closure_of_derived_from(
    engine: sa.Engine, lineage: tuple[list[list[int]], list[int]]
) -> None:
    parents, cuts = lineage
    base = next(_ids)
    tenant = f"anc{base}"
    start = 0
    with engine.begin() as c:
        for end in cuts:
            batch = range(start, end)
            c.execute(
                _INSERT,
                {
                    "t": tenant,
                    "ids": [base + i for i in batch],
                    "parents": [
                        "{" + ",".join(str(base + p) for p in parents[i]) + "}" for i in batch
                    ],
                },
            )
            start = end
        got = set(
            c.execute(
                sa.text(
                    "SELECT ancestor_id, descendant_id FROM item_ancestry WHERE tenant_id = :t"
                ),
                {"t": tenant},
            ).all()
        )
    graph: nx.DiGraph[int] = nx.DiGraph()
    graph.add_nodes_from(base + i for i in range(len(parents)))
    graph.add_edges_from((base + p, base + i) for i, ps in enumerate(parents) for p in ps)
    assert got == set(nx.transitive_closure_dag(graph).edges())
