"""Gated recall at scale against the ungated full-text baseline, on one database (issue 9).

``python -m bench recall [--items N] [--queries 200] [--seed S] [--cap 1000] [--json]
[--keep DIR] [--dense [--embedder minilm|hashing]] [--passages N] [--corpus PATH]``

Generates a store of N items (default 100,000) over 20 tenants, of which the
measured one (``bench``) holds half: texts from the incident summaries
(bench/corpus.py: ../shared/data/postmortems.jsonl when present, else
bench/data/incidents.jsonl, or ``--corpus PATH``), about 50 items per
subject, subjects from a topology (services ``depends_on`` databases, caches,
queues), 2-4 conditions per item of which one in five names another entity
(``@entity:attr ...``), about 60% of items with every condition TRUE against
the facts (the rest FALSE or UNKNOWN: some subjects' metrics are stale), a few
percent readable only with a capability the measured principal lacks, some
purposes, a few validity windows; every item ``active``. Facts: every declared
attribute observed for every subject, 3 values of history each.

Items are built by the write path's own functions (``claims.check_shape``, the
writer's row builder) and stored with ``COPY`` as the owner, with their state
rows and, in the measured tenant, one ``transition`` audit row each (the state
history an ``as_of`` read needs). Facts go into ``facts`` with ``COPY`` (its
triggers fire). Then ``VACUUM ANALYZE``.

Then, on one connection, interleaved per query after a warm-up: gated recall
with a random subject that has items, without a subject, both again with
``explain``, and the ungated baseline (a tenant-filtered, capped full-text
top-10, prepared); then the context guard over 50 items against one prepared
primary-key lookup. ``--json`` prints one JSON object; otherwise a Markdown
block (docs/performance.md). Its ratios: ``ratio_subject`` and
``ratio_no_subject``, gated recall p50 (with, without a subject) / baseline p50;
``explain_ratio``, explain p50 / plain p50, both with the subject
(``explain_ratio_no_subject``: both without); ``guard_ratio``, guard p50 / one
bare prepared lookup p50 (``guard_ratio_tx``: / the lookup inside BEGIN ... ROLLBACK;
``guard_ratio_txn``, issue 27's floor: / one runtime transaction reading one item row by
primary key, with the guard's checkout, tenant setting, row-level security and commit).
Each recall and guard call is timed with its transaction (begun, rolled back).

With ``--dense`` (issue 10), after loading, every item of every tenant gets its
vector under ``--embedder`` (default ``minilm``, all-MiniLM-L6-v2 on the CPU;
``hashing`` for a quick run): each distinct text (the text recall's embedding queue
embeds) is embedded once and the vectors are ``COPY``-ed into ``item_embeddings`` as
the owner with the HNSW index dropped, the index is built again (timed), the
embedding queue emptied, then ``VACUUM ANALYZE``. The loop then also times, per
query: the query's embedding alone (``embed``, first, outside the rotation), gated
recall through a runtime with the embedder (dense on) with and without a subject,
and the dense baseline (``baseline_dense``: the tenant's ungated HNSW top-10, on a
connection of the same engine, so with the application's iterative scan). The
dense runtime's embedder returns the vector the loop embedded for the query, so the
dense recall times exclude the embedding; ``*_with_embed`` adds it back per query.
``ratio_dense_subject`` and ``ratio_dense_no_subject``: dense recall p50 /
``baseline_dense`` p50 (``*_fts``: / the full-text baseline p50; ``*_hybrid``: / the
p50 of the two baselines' summed per query). ``baseline_dense_recall_at_10``: the
HNSW baseline's top-10 against the exact top-10 by distance (ties count).

With ``--passages N`` (issue 26; default 0, none), the measured tenant also holds N
knowledge passages: documents of four sections (``Summary``, ``Impact``,
``Mitigation``, ``Follow-up``) under a title, each section two sentences of the
corpus's summaries, with readers and purposes mixed like the items' (3% readable only
with the capability the principal lacks, 5% with its capability; 15% for the
recall's purpose, 5% for another). Documents and passages are stored with ``COPY`` as
the owner (the passages through a staging table, so that ``fts`` is filled by the
import's own expression), their vectors with ``--dense`` as the items' are (the passage
HNSW index dropped and built again). The loop then also times, per query, the recalls
with and without a subject with ``sources: [memory, knowledge]`` (and with ``--dense``
the dense ones too), beside the same recalls on memory alone: ``ratio_knowledge`` =
p50 without a subject, both sources / memory alone (``ratio_knowledge_subject``,
``ratio_dense_knowledge``).

Uses ``DATABASE_URL`` when set, else an embedded PostgreSQL in a temporary
directory. ``--keep DIR`` keeps the embedded server's data in DIR instead and
reuses a store loaded there with the same ``--items``, ``--seed`` and corpus (it is
migrated to head and analysed again before measuring); its record says which
model's vectors it holds, so ``--dense`` reuses them too (another model's are
replaced).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import queue
import random
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np
import sqlalchemy as sa
from pgvector.psycopg import register_vector
from sqlalchemy.orm import Session, sessionmaker

import claims
import factgen
import recall
from bench import bench_database
from bench import corpus as bench_corpus
from bench.bench_claims import ATTRIBUTES, KINDS, NAMES, SCHEMA, T0
from bench.bench_claims import World as ClaimsGenerator
from caveat import app, db
from caveat.progress import Bar
from caveat.settings import Settings
from claims import _queries as cq
from claims._anchors import DEFAULT_REGISTRY
from claims._gate import ConditionCache
from claims._write import WRITE_ACTIONS, _New, _Writer
from predicates import (
    Attribute,
    CompiledPredicate,
    Observed,
    Truth,
    ValueType,
    applicability,
    coerce,
    compile_predicate,
    encode,
)
from recall import _queries as rq
from recall._embed import vector_text
from recall._recall import Source

#: Who loads a benchmark's world (schema, entities, principals, facts).
ADMIN = factgen.Actor("bench-loader", "admin")

TENANT = "bench"
OTHER_TENANTS = tuple(f"bench-t{i:02d}" for i in range(1, 20))
PER_SUBJECT = 50
#: The instant every query is asked at; items were recorded over the 120 days before.
NOW = T0 + timedelta(days=120)
LOADER = claims.Actor("bench-loader", "admin")
PRINCIPAL = claims.Actor("agent-bench", "agent", frozenset({"incidents"}), team=None)
#: A capability the measured principal lacks: items citing such evidence are hidden.
RESTRICTED = "legal"
PURPOSE = "incident_diagnosis"
STALE_METRICS = 0.15  # share of subjects whose latest metrics are older than max_age
PASSING = 0.6  # share of items whose conditions all hold
CHUNK = 10_000  # items per COPY transaction

#: Observed values per attribute, drawn from the thresholds the claims generator's
#: conditions use, so that conditions come out TRUE and FALSE alike.
FACT_VALUES: dict[str, Callable[[random.Random], Any]] = {
    "config.connection_pool.max": lambda r: r.choice([10, 20, 50, 100, 200]),
    "config.connection_pool.timeout": lambda r: f"{r.choice([5, 10, 30, 60])}s",
    "config.replicas": lambda r: r.choice([1, 2, 3, 5]),
    "config.feature_flags.new_checkout": lambda r: r.random() < 0.5,
    "config.cache.ttl": lambda r: f"{r.choice([1, 5, 15, 30])}m",
    "metrics.pool_utilisation": lambda r: round(r.uniform(0.3, 1.0), 2),
    "metrics.error_rate": lambda r: round(r.uniform(0.0, 0.12), 3),
    "metrics.p99_latency_ms": lambda r: r.choice([120, 300, 600, 1200, 2500]),
    "metrics.cpu_utilisation": lambda r: round(r.uniform(0.2, 1.0), 2),
    "metrics.queue_depth": lambda r: r.choice([10, 500, 5000, 20000]),
    "env.postgres.version": lambda r: r.choice(["v13.11", "v14.9", "v15.4", "v16.2"]),
    "env.kernel.version": lambda r: r.choice(["v5.10", "v5.15", "v6.1", "v6.8"]),
    "env.region": lambda r: r.choice(["eu-west-1", "us-east-1", "ap-south-1"]),
    "lag_returned_within_s": lambda r: r.choice([30, 60, 120, 300, 600]),
    "p99_recovered_within_s": lambda r: r.choice([30, 60, 120, 300, 600]),
}
_FALLBACK: dict[str, Callable[[random.Random], Any]] = {
    "int": lambda r: r.randint(1, 1000),
    "float": lambda r: round(r.random(), 2),
    "bool": lambda r: r.random() < 0.5,
    "string": lambda r: r.choice(["a", "b", "c"]),
    "version": lambda r: f"v{r.randint(1, 20)}",
    "duration": lambda r: f"{r.randint(1, 60)}s",
}
#: History of each (subject, attribute): fresh subjects, and subjects whose metrics are stale.
FRESH_AGES = (timedelta(hours=72), timedelta(hours=24), timedelta(minutes=10))
STALE_AGES = (timedelta(hours=96), timedelta(hours=72), timedelta(hours=48))
METRICS_MAX_AGE = timedelta(hours=1)

_STOP = frozenset(
    """
    a about after all also an and any are as at be because been before being but by can
    could did do does during each for from had has have how if in into is it its itself
    more most no not of on once one only or other our out over same so some such than that
    the their them then there these they this those through to too under until up was we
    were what when where which while who why will with within would without
    """.split()
)
#: Light paraphrase: an engineer's word for the postmortem's.
_SYNONYMS = {
    "outage": "downtime",
    "database": "db",
    "failed": "failing",
    "failure": "failing",
    "errors": "error",
    "requests": "request",
    "servers": "server",
    "configuration": "config",
    "latency": "slow",
    "caused": "cause",
    "deployment": "deploy",
    "network": "networking",
    "traffic": "load",
    "service": "services",
    "customers": "users",
    "unavailable": "down",
}

_recall_tsquery: Callable[[str], str] | None
try:  # recall builds its OR query this way; the baseline must build the same one
    from recall._recall import _tsquery as _recall_tsquery
except ImportError:  # pragma: no cover - recall moved it; keep the bench running
    _recall_tsquery = None

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def or_query(text: str) -> str:
    """Free text as recall's OR query: sorted distinct lowercase words joined by `` | ``."""
    if _recall_tsquery is not None:
        return str(_recall_tsquery(text))
    return " | ".join(sorted({w.lower() for w in _WORD.findall(text)}))


# --- generation --------------------------------------------------------------------


@dataclass
class TenantPlan:
    """One tenant of the generated store: its entities, topology, facts and evidence."""

    name: str
    items: int
    entities: list[str]
    kinds: dict[str, str]
    edges: list[tuple[str, str]]  # (src, dst): src depends_on dst
    neighbours: dict[str, list[str]]
    stale: set[str]
    #: the latest observation of every (subject, attribute) as of NOW (None: stale)
    latest: dict[tuple[str, str], Observed | None] = field(default_factory=dict)
    public: list[str] = field(default_factory=list)
    readable: list[str] = field(default_factory=list)  # readers: the principal's capability
    restricted: list[str] = field(default_factory=list)  # readers: a capability it lacks
    readers: dict[str, list[str]] = field(default_factory=dict)
    world: factgen.World | None = None
    cache: ConditionCache = field(default_factory=dict)
    base: list[CompiledPredicate] = field(default_factory=list)
    truth: dict[str, tuple[list[int], ...]] = field(default_factory=dict)
    names: dict[str, str | None] = field(default_factory=dict)
    keys: set[int] = field(default_factory=set)
    written: int = 0


@dataclass
class Corpus:
    """What was loaded, for the measurements and the report."""

    items: int
    measured_items: int
    tenants: int
    subjects: int
    measured_subjects: list[str]  # the measured tenant's subjects that have items
    fact_rows: int
    passing: int  # measured tenant: items whose conditions all hold
    restricted: int  # measured tenant: items hidden from the principal by capability
    sample_ids: list[int]  # measured tenant item ids, for the context guard
    load_seconds: float
    phases: dict[str, float]
    samples: list[claims.ItemWrite] = field(default_factory=list)


def _schema_specs() -> list[factgen.AttributeSpec]:
    return [
        factgen.AttributeSpec(
            a,
            ValueType.parse(t),
            content_type=c,
            max_age=METRICS_MAX_AGE if a.startswith("metrics.") else None,
        )
        for a, t, c in SCHEMA
    ]


def _split(items: int) -> list[tuple[str, int]]:
    """Item counts per tenant: the measured one holds half."""
    measured = items // 2
    rest = items - measured
    out = [(TENANT, measured)]
    for i, name in enumerate(OTHER_TENANTS):
        out.append((name, rest // len(OTHER_TENANTS) + (1 if i < rest % len(OTHER_TENANTS) else 0)))
    return out


def _plan(name: str, items: int, rng: random.Random) -> TenantPlan:
    """Entities in clusters of ten (six services, two databases, a cache, a queue);
    services depend on a database of their cluster, some on its cache or queue, a few
    on a service of another cluster."""
    n = max(1, round(items / PER_SUBJECT))
    roles = ["service"] * 6 + ["database", "database", "cache", "queue"]
    entities: list[str] = []
    kinds: dict[str, str] = {}
    for i in range(n):
        kind = roles[i % 10]
        entity = f"{NAMES[(i // 10) % len(NAMES)]}-{kind}-{i:05d}"
        entities.append(entity)
        kinds[entity] = kind if kind in KINDS else "service"
    edges: list[tuple[str, str]] = []
    for i, entity in enumerate(entities):
        if kinds[entity] != "service":
            continue
        base = i - i % 10
        cluster = [e for e in entities[base : base + 10] if kinds[e] != "service"]
        dbs = [e for e in cluster if kinds[e] == "database"]
        if dbs:
            edges.append((entity, rng.choice(dbs)))
        for other in cluster:
            if kinds[other] in {"cache", "queue"} and rng.random() < 0.4:
                edges.append((entity, other))
        if rng.random() < 0.1 and n > 10:
            other = rng.choice(entities)
            if other != entity and kinds[other] == "service":
                edges.append((entity, other))
    neighbours: dict[str, list[str]] = {e: [] for e in entities}
    for src, dst in sorted(set(edges)):
        neighbours[src].append(dst)
        neighbours[dst].append(src)
    stale = {e for e in entities if rng.random() < STALE_METRICS}
    return TenantPlan(name, items, entities, kinds, sorted(set(edges)), neighbours, stale)


def _facts(plan: TenantPlan, rng: random.Random) -> Iterator[tuple[Any, ...]]:
    """Fact rows (tenant, subject, attribute, value, observed_at, recorded_at, source),
    oldest first, and the latest value of each into ``plan.latest``."""
    for subject in plan.entities:
        for attribute, vtype_text, _ in SCHEMA:
            vtype = ValueType.parse(vtype_text)
            make = FACT_VALUES.get(attribute) or _FALLBACK.get(vtype.name, _FALLBACK["string"])
            metric = attribute.startswith("metrics.")
            ages = STALE_AGES if metric and subject in plan.stale else FRESH_AGES
            value: Any = None
            for age in ages:
                value = coerce(make(rng), vtype)
                at = NOW - age
                yield (
                    plan.name,
                    subject,
                    attribute,
                    json.dumps(encode(value, vtype)),
                    at,
                    at,
                    "bench",
                )
            fresh = not metric or ages[-1] <= METRICS_MAX_AGE
            plan.latest[(subject, attribute)] = Observed(value, vtype) if fresh else None


_TRUE, _FALSE, _NOT_TRUE, _ANY = range(4)


class Generator:
    """Item writes with conditions of a chosen truth, prepared by the write gate's
    own shape checks and turned into ``items`` rows by the writer's row builder.

    Conditions come from a pool: every distinct condition the claims benchmark's
    generator writes (its grammar and thresholds), each parsed once per tenant; an
    ``@entity:`` form is the parsed condition with the entity set, as the gate compiles
    it after resolving the name (so a million items do not parse a million texts).
    Each entity's table of which pool conditions are TRUE, FALSE or not TRUE against
    its latest facts lets a condition of the wanted truth be drawn directly.
    """

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        # the claims benchmark's generator: sentences, and conditions in its grammar
        self.claims = ClaimsGenerator(seed)
        self.claims.rng = self.rng
        self.claims.entities = ["-"]
        texts: set[str] = set()
        for _ in range(5000):
            text = self.claims.condition("")
            texts.add(text.split(":", 1)[1] if text.startswith("@") else text)
        self.pool = sorted(texts)

    def _base(self, plan: TenantPlan) -> list[CompiledPredicate]:
        if not plan.base:
            assert plan.world is not None
            plan.base = list(
                claims.compile_conditions(self.pool, plan.world, which="required", cache=plan.cache)
            )
        return plan.base

    def _table(self, plan: TenantPlan, entity: str) -> tuple[list[int], ...]:
        """Indexes into the pool: TRUE, FALSE, not TRUE, any, against ``entity``'s facts."""
        table = plan.truth.get(entity)
        if table is None:
            values = [cp(plan.latest.get((entity, cp.attribute.path))) for cp in self._base(plan)]
            table = plan.truth[entity] = (
                [i for i, t in enumerate(values) if t is Truth.TRUE],
                [i for i, t in enumerate(values) if t is Truth.FALSE],
                [i for i, t in enumerate(values) if t is not Truth.TRUE],
                list(range(len(values))),
            )
        return table

    def _text(self, plan: TenantPlan, about: str | None, index: int) -> str:
        base = self.pool[index]
        if about is None:
            return base
        text = f"@{about}:{base}"
        if text not in plan.cache:
            cp = self._base(plan)[index]
            pred = replace(cp.predicate, attribute=Attribute(about, cp.attribute.path))
            plan.cache[text] = compile_predicate(pred, cp.vtype)
        return text

    def _pick(self, plan: TenantPlan, subject: str, want: int, other: bool) -> str | None:
        """A condition of the wanted truth (an index into ``_table``); when ``other``,
        about a neighbour of ``subject`` (``@entity:``)."""
        near = plan.neighbours.get(subject) if other else None
        about = self.rng.choice(near) if near else None
        choices = self._table(plan, about or subject)[want]
        if not choices and about is not None:
            about, choices = None, self._table(plan, subject)[want]
        return self._text(plan, about, self.rng.choice(choices)) if choices else None

    def _distinct(
        self, plan: TenantPlan, subject: str, want: int, n: int, taken: Sequence[str] = ()
    ) -> list[str]:
        """``n`` distinct conditions of the wanted truth, none of them in ``taken``."""
        out: dict[str, None] = {}
        for _ in range(10 * n):
            if len(out) >= n:
                break
            text = self._pick(plan, subject, want, self.rng.random() < 0.2)
            if text is not None and text not in taken:
                out[text] = None
        return list(out)

    def conditions(
        self, plan: TenantPlan, subject: str, passing: bool
    ) -> tuple[list[str], list[str]]:
        """Required and excluded conditions (2-4 distinct in all, one in five about
        another entity): all holding when ``passing``, else at least one that does not
        (FALSE, or UNKNOWN for a stale metric)."""
        rng = self.rng
        k = rng.choice([2, 2, 3, 4])
        if passing:
            excluded = (
                self._distinct(plan, subject, _FALSE, 1) if k > 2 and rng.random() < 0.3 else []
            )
            required = self._distinct(plan, subject, _TRUE, k - len(excluded), excluded)
            return required, excluded
        required = self._distinct(plan, subject, _ANY, k - 1)
        failing = self._distinct(plan, subject, _NOT_TRUE, 1, required)
        return required + failing, []

    def write(self, plan: TenantPlan, index: int) -> tuple[claims.ItemWrite, bool]:
        """The ``index``-th item write of ``plan``, and whether its conditions should hold."""
        rng = self.rng
        subject = plan.entities[index % len(plan.entities)]
        passing = rng.random() < PASSING
        required, excluded = self.conditions(plan, subject, passing)
        r = rng.random()
        if r < 0.03:
            evidence = [rng.choice(plan.restricted)]
        elif r < 0.08:
            evidence = [rng.choice(plan.readable)]
        else:
            evidence = rng.sample(plan.public, rng.choice([1, 1, 1, 2]))
        attribute = rng.choice(ATTRIBUTES)
        if attribute in {"lag_returned_within_s", "p99_recovered_within_s"}:
            obj: Any = rng.choice([30, 60, 120, 300, 600, 900])
        elif attribute.endswith("_at"):
            obj = evidence[0]
        elif attribute.endswith(("_count", "_pods", "_ms", "_s", "_peaked")):
            obj = rng.randint(1, 5000)
        else:
            obj = rng.choice([True, False, "partial", "observed twice"])
        p = rng.random()
        purposes = [PURPOSE] if p < 0.15 else (["postmortem_review"] if p < 0.2 else [])
        window: dict[str, Any] = {}
        w = rng.random()
        if w < 0.02:  # a window that has closed (opened at T0: a write at NOW is valid too)
            window = {"valid_from": T0, "valid_to": NOW - timedelta(days=rng.randint(1, 10))}
        elif w < 0.04:  # one still open
            window = {"valid_to": NOW + timedelta(days=rng.randint(1, 30))}
        elif w < 0.05:  # one that opens later
            window = {"valid_from": NOW + timedelta(days=rng.randint(1, 30))}
        near = plan.neighbours.get(subject, [])
        request = {
            "kind": "episode" if rng.random() < 0.1 else "fact",
            "subject": subject,
            "attribute": attribute,
            "object": obj,
            "required": required,
            "excluded": excluded,
            "evidence": evidence,
            "epistemic": "hypothesis" if rng.random() < 0.2 else "observation",
            "scope": {"axis": "case", "id": f"INC-{index // 20}"},
            "facets": [{"axis": "service", "id": subject}] if rng.random() < 0.3 else [],
            "purposes": purposes,
            "text": " ".join(rng.sample(self.claims.sentences, 2))[:600],
            "entities": rng.sample(near, min(len(near), rng.choice([0, 1, 2]))),
            "salience": round(rng.random(), 2),
            **window,
        }
        return claims.ItemWrite.model_validate(request), passing


class RowBuilder:
    """The write path's row for a prepared write: ``claims.check_shape`` (G1-G4, with the
    batch's caches) and the writer's own ``_item_row``, so conditions, ``cond_key``,
    entities, content type and ACL are what ``write_batch`` would store."""

    def __init__(self, plan: TenantPlan) -> None:
        self.plan = plan
        self.writer = _Writer(
            cast(Any, None), plan.name, LOADER, T0, None, DEFAULT_REGISTRY, WRITE_ACTIONS
        )

    def row(
        self, request: claims.ItemWrite, item_id: int, now: datetime
    ) -> tuple[tuple[Any, ...], bool]:
        """The ``items`` row, and whether its conditions hold against the facts now."""
        plan = self.plan
        assert plan.world is not None
        prepared = claims.check_shape(
            request,
            plan.world,
            visible_evidence=dict.fromkeys(request.evidence, True),
            cache=plan.cache,
            names=plan.names,
        )
        key = _Writer._key(prepared)
        digest = hash(key)
        if digest in plan.keys:  # the same key again: a write would supersede; skip
            raise KeyError(key)
        plan.keys.add(digest)
        access = claims.Access(
            claims.acl_from_readers(plan.readers[e] for e in request.evidence), [], None
        )
        new = _New(0, prepared, key, access, None, prepared.content_type, {}, id=item_id)
        self.writer.now = now
        lookup = plan.latest.get
        holds = applicability(
            prepared.required,
            prepared.excluded,
            lambda cp: lookup((cp.attribute.entity or prepared.subject, cp.attribute.path)),
        ).applies
        return self.writer._item_row(new), holds


# --- loading ---------------------------------------------------------------------


#: The progress bar of the loading phases and the query loop (rich, on stderr).
Progress = Bar


def _setup_tenants(
    sessions: sessionmaker[Session], plans: Sequence[TenantPlan], rng: random.Random
) -> None:
    """Tenants, principals, schema, entities with their topology, evidence."""
    specs = _schema_specs()
    for plan in plans:
        with sessions.begin() as s:
            factgen.ensure_tenant(actor=ADMIN, session=s, tenant=plan.name, now=T0)
            claims.register_principal(
                actor=ADMIN,
                session=s,
                tenant=plan.name,
                principal=PRINCIPAL.id,
                role=PRINCIPAL.role,
                capabilities=sorted(PRINCIPAL.capabilities),
            )
            factgen.declare_attributes(actor=ADMIN, session=s, tenant=plan.name, specs=specs)
            world = factgen.load_world(session=s, tenant=plan.name)
            out: dict[str, list[tuple[str, str]]] = {e: [] for e in plan.entities}
            for src, dst in plan.edges:
                out[src].append(("depends_on", dst))
            factgen.import_entities(
                actor=ADMIN,
                session=s,
                world=world,
                entities=[
                    factgen.EntitySpec(e, plan.kinds[e], edges=tuple(out[e])) for e in plan.entities
                ],
            )
            plan.public = [f"PM-{i:03d}" for i in range(12)]
            plan.readable = [f"PM-IR-{i:02d}" for i in range(2)]
            plan.restricted = [f"PM-LEGAL-{i:02d}" for i in range(2)]
            for ids, readers in (
                (plan.public, []),
                (plan.readable, sorted(PRINCIPAL.capabilities)),
                (plan.restricted, [RESTRICTED]),
            ):
                for eid in ids:
                    claims.register_evidence(
                        session=s,
                        tenant=plan.name,
                        evidence_id=eid,
                        actor=LOADER,
                        now=T0,
                        readers=readers,
                    )
                    plan.readers[eid] = list(readers)
        with sessions.begin() as s:
            plan.world = factgen.load_world(session=s, tenant=plan.name)


def _copy(session: Session, table: str, columns: Sequence[str], rows: Sequence[Any]) -> None:
    cq.copy_rows(session=session, table=table, columns=columns, rows=rows)


def _copy_text(rows: Sequence[Sequence[Any]]) -> str:
    """Rows in ``COPY`` text format, as ``claims`` writes them."""
    field = cq._copy_field
    return "".join("\t".join(map(field, row)) + "\n" for row in rows)


def _copy_in(session: Session, table: str, columns: Sequence[str], text: str) -> None:
    """``COPY`` pre-formatted text into ``table`` (as the owner, no row security)."""
    raw = session.connection().connection.driver_connection
    assert raw is not None
    with raw.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
        cp.write(text)


_FACT_COLUMNS = (
    "tenant_id",
    "subject",
    "attribute",
    "value",
    "observed_at",
    "recorded_at",
    "source",
)


def _load_facts(
    sessions: sessionmaker[Session], plans: Sequence[TenantPlan], rng: random.Random, show: bool
) -> int:
    total = sum(len(p.entities) for p in plans) * len(SCHEMA) * 3
    bar = Progress("facts", total, show)
    done = 0
    for plan in plans:
        rows = list(_facts(plan, rng))
        for start in range(0, len(rows), 50_000):
            part = rows[start : start + 50_000]
            with sessions.begin() as s:
                _copy(s, "facts", _FACT_COLUMNS, part)
            done += len(part)
            bar.update(done)
    bar.update(total)
    return done


@dataclass
class _Chunk:
    items: list[tuple[Any, ...]]
    states: list[tuple[Any, ...]]
    transitions: list[int]  # measured tenant item ids
    at: datetime
    items_text: str = ""  # the rows in COPY text format, made by the generating thread
    states_text: str = ""


def _chunks(
    plans: Sequence[TenantPlan], gen: Generator, base_id: int, stats: dict[str, Any]
) -> Iterator[_Chunk]:
    """Chunks of rows, every tenant's items interleaved in proportion, recorded in time order."""
    total = sum(p.items for p in plans)
    builders = {p.name: RowBuilder(p) for p in plans}
    next_id = base_id
    measured = plans[0]
    span = NOW - timedelta(hours=1) - T0
    done = 0
    while done < total:
        at = T0 + span * (done / total)
        chunk = _Chunk([], [], [], at)
        for plan in plans:
            goal = min(plan.items, round(plan.items * min(done + CHUNK, total) / total))
            while plan.written < goal:
                request, _ = gen.write(plan, plan.written)
                try:
                    row, holds = builders[plan.name].row(request, next_id, at)
                except KeyError:
                    continue  # a key collision (rare): draw another write
                chunk.items.append(row)
                chunk.states.append((plan.name, next_id, "active", "shadow"))
                plan.written += 1
                if plan is measured:
                    chunk.transitions.append(next_id)
                    stats["passing"] += holds
                    stats["restricted"] += any(
                        RESTRICTED in plan.readers[e] for e in request.evidence
                    )
                    if len(stats["ids"]) < 5000 and gen.rng.random() < 0.1:
                        stats["ids"].append(next_id)
                    if plan.written % 100 == 1 and len(stats["samples"]) < 50:
                        stats["samples"].append(request)
                next_id += 1
        done += len(chunk.items)
        chunk.items_text, chunk.states_text = _copy_text(chunk.items), _copy_text(chunk.states)
        yield chunk


def _prefetch(source: Iterator[_Chunk], depth: int = 2) -> Iterator[_Chunk]:
    """Generate the next chunks in a thread while the server stores the current one."""
    box: queue.Queue[_Chunk | BaseException | None] = queue.Queue(maxsize=depth)

    def run() -> None:
        try:
            for chunk in source:
                box.put(chunk)
            box.put(None)
        except BaseException as exc:  # handed to the consumer
            box.put(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    while True:
        got = box.get()
        if got is None:
            break
        if isinstance(got, BaseException):
            raise got
        yield got
    thread.join()


_TRANSITION = {"from": "shadow", "to": "active", "reason": "fixture", "cause": {}}


def load(url: str, items: int, seed: int, *, show: bool = True, bulk: bool = True) -> Corpus:
    """Generate and load the store into the (migrated, empty) database at ``url``.

    ``bulk``: the secondary indexes of ``items`` are dropped for the load and built
    again from their definitions after it (as a restore does), which is several times
    faster than maintaining them row by row.
    """
    started = time.perf_counter()
    phases: dict[str, float] = {}
    rng = random.Random(seed)
    plans = [_plan(name, n, rng) for name, n in _split(items)]
    engine = db.make_engine(url)
    sessions = sessionmaker(engine, expire_on_commit=False)
    try:
        t = time.perf_counter()
        _setup_tenants(sessions, plans, rng)
        phases["tenants"] = time.perf_counter() - t
        t = time.perf_counter()
        fact_rows = _load_facts(sessions, plans, rng, show)
        phases["facts"] = time.perf_counter() - t
        t = time.perf_counter()
        gen = Generator(seed)
        stats: dict[str, Any] = {"passing": 0, "restricted": 0, "ids": [], "samples": []}
        with sessions.begin() as s:
            base = (
                int(
                    s.execute(
                        sa.text(
                            "SELECT setval(pg_get_serial_sequence('items', 'id'), "
                            "nextval(pg_get_serial_sequence('items', 'id')) + :n)"
                        ),
                        {"n": items},
                    ).scalar_one()
                )
                - items
            )
        bar = Progress("items", items, show)
        stored = 0
        indexes = _drop_indexes(engine, "items") if bulk else []
        steps = dict.fromkeys(("generate_wait", "copy_items", "copy_states", "audit"), 0.0)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)  # the COPY thread gets the GIL back soon after I/O
        mark = time.perf_counter()
        for chunk in _prefetch(_chunks(plans, gen, base, stats)):
            steps["generate_wait"] += time.perf_counter() - mark
            with sessions.begin() as s:
                s.execute(sa.text("SET LOCAL maintenance_work_mem = '256MB'"))
                mark = time.perf_counter()
                _copy_in(s, "items", cq.ITEM_COPY_COLUMNS, chunk.items_text)
                steps["copy_items"] += time.perf_counter() - mark
                mark = time.perf_counter()
                _copy_in(s, "item_states", cq.STATE_COPY_COLUMNS, chunk.states_text)
                steps["copy_states"] += time.perf_counter() - mark
                mark = time.perf_counter()
                claims.append_many(
                    session=s,
                    tenant=TENANT,
                    at=chunk.at,
                    rows=[
                        claims.PendingAudit(LOADER.id, "transition", i, "active", _TRANSITION)
                        for i in chunk.transitions
                    ],
                )
            steps["audit"] += time.perf_counter() - mark
            stored += len(chunk.items)
            bar.update(stored)
            mark = time.perf_counter()
        sys.setswitchinterval(switch)
        phases |= {f"items.{k}": v for k, v in steps.items()}
        phases["items"] = time.perf_counter() - t
        t = time.perf_counter()
        _create_indexes(engine, indexes, show)
        phases["indexes"] = time.perf_counter() - t
        t = time.perf_counter()
        _analyze(engine)
        phases["vacuum_analyze"] = time.perf_counter() - t
    finally:
        engine.dispose()
    measured = plans[0]
    return Corpus(
        items=stored,
        measured_items=measured.written,
        tenants=len(plans),
        subjects=sum(len(p.entities) for p in plans),
        measured_subjects=sorted(set(measured.entities[: measured.items])),
        fact_rows=fact_rows,
        passing=stats["passing"],
        restricted=stats["restricted"],
        sample_ids=stats["ids"],
        load_seconds=time.perf_counter() - started,
        phases=phases,
        samples=stats["samples"],
    )


def _drop_indexes(engine: sa.Engine, table: str) -> list[str]:
    """Drop ``table``'s indexes that back no constraint; return their definitions."""
    with engine.begin() as c:
        found = c.execute(
            sa.text(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' "
                "AND tablename = :t AND indexname NOT IN (SELECT conname FROM pg_constraint) "
                "ORDER BY indexname"
            ),
            {"t": table},
        ).all()
        for name, _ in found:
            c.execute(sa.text(f'DROP INDEX "{name}"'))
    return [d for _, d in found]


def _create_indexes(engine: sa.Engine, definitions: Sequence[str], show: bool) -> None:
    bar = Progress("indexes", len(definitions), show)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(sa.text("SET maintenance_work_mem = '1GB'"))
        for i, definition in enumerate(definitions):
            c.execute(sa.text(definition))
            bar.update(i + 1)


def _analyze(engine: sa.Engine) -> None:
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
        c.execute(sa.text("VACUUM ANALYZE"))


# --- the dense channel's vectors -------------------------------------------------

#: The text an item is embedded from: the expression of recall's embedding queue.
EMBED_TEXT = "coalesce(nullif(i.text, ''), i.subject || ' ' || replace(i.attribute, '_', ' '))"
#: The HNSW index of migration 0010 (dimension 384), and its definition should a run
#: have stopped between dropping and building it.
HNSW_INDEX = "ix_item_embeddings_hnsw_384"
HNSW_DEFINITION = (
    f"CREATE INDEX {HNSW_INDEX} ON item_embeddings "
    "USING hnsw ((CAST(embedding AS vector(384))) vector_cosine_ops) WHERE dim = 384"
)


def _copy_vectors(
    engine: sa.Engine,
    table: str,
    id_column: str,
    embedder: recall.Embedder,
    rows: Sequence[Any],
    keys: Sequence[int],
    vectors: np.ndarray,
) -> None:
    """One binary ``COPY`` as the owner into ``table``: per ``(tenant, id, text)`` row its
    ``vectors[key]`` under ``embedder``, stamped ``NOW``; committed."""
    raw = engine.raw_connection()
    try:
        pg: Any = raw.driver_connection
        register_vector(pg)
        with (
            pg.cursor() as cur,
            cur.copy(
                f"COPY {table} (tenant_id, {id_column}, model, dim, embedding, embedded_at) "
                "FROM STDIN (FORMAT BINARY)"
            ) as cp,
        ):
            cp.set_types(["text", "int8", "text", "int4", "vector", "timestamptz"])
            for (tenant, row_id, _), k in zip(rows, keys, strict=True):
                cp.write_row((tenant, row_id, embedder.name, embedder.dimension, vectors[k], NOW))
        pg.commit()
    finally:
        raw.close()


def _embed_distinct(
    embedder: recall.Embedder, texts: Sequence[str], show: bool, batch: int = 2048
) -> np.ndarray:
    vectors = np.zeros((len(texts), embedder.dimension), dtype=np.float32)
    bar = Progress("embed", len(texts), show)
    for start in range(0, len(texts), batch):
        part = texts[start : start + batch]
        vectors[start : start + len(part)] = embedder.embed(part)
        bar.update(start + len(part))
    bar.update(len(texts))
    return vectors


def load_vectors(url: str, embedder: recall.Embedder, *, show: bool = True) -> dict[str, Any]:
    """Give every current, unredacted item of every tenant its vector under ``embedder``.

    Each distinct text is embedded once; the vectors go into ``item_embeddings`` by one
    binary ``COPY`` as the owner, with the HNSW index dropped and built again after
    (timed, as a restore would); the embedding queue is emptied; ``VACUUM ANALYZE``.
    Any earlier vectors are replaced. Returns what a kept store records: the model,
    the rows and distinct texts, seconds per phase, the index's size."""
    if embedder.dimension != 384:
        raise ValueError("the HNSW index covers dimension 384 only")
    phases: dict[str, float] = {}
    engine = db.make_engine(url, poolclass=sa.pool.NullPool)
    try:
        t = time.perf_counter()
        with engine.connect() as c:
            rows = c.execute(
                sa.text(
                    f"SELECT i.tenant_id, i.id, {EMBED_TEXT} FROM items i "
                    "WHERE i.superseded_at IS NULL AND NOT EXISTS (SELECT 1 FROM redactions x "
                    "WHERE x.tenant_id = i.tenant_id AND x.item_id = i.id) ORDER BY i.id"
                )
            ).all()
        index_of: dict[str, int] = {}
        keys = [index_of.setdefault(str(text), len(index_of)) for _, _, text in rows]
        phases["read"] = time.perf_counter() - t
        t = time.perf_counter()
        vectors = _embed_distinct(embedder, list(index_of), show)
        phases["embed"] = time.perf_counter() - t
        t = time.perf_counter()
        with engine.begin() as c:
            found = c.execute(
                sa.text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"), {"n": HNSW_INDEX}
            ).scalar()
            definition = str(found) if found else HNSW_DEFINITION
            c.execute(sa.text(f"DROP INDEX IF EXISTS {HNSW_INDEX}"))
            c.execute(sa.text("TRUNCATE item_embeddings, embed_queue"))
        _copy_vectors(engine, "item_embeddings", "item_id", embedder, rows, keys, vectors)
        phases["copy"] = time.perf_counter() - t
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
            c.execute(sa.text("SET maintenance_work_mem = '1GB'"))
            workers = int(c.execute(sa.text("SHOW max_parallel_maintenance_workers")).scalar_one())
            t = time.perf_counter()
            c.execute(sa.text(definition))
            phases["hnsw_build"] = time.perf_counter() - t
            size = c.execute(sa.text(f"SELECT pg_relation_size('{HNSW_INDEX}')")).scalar_one()
        t = time.perf_counter()
        _analyze(engine)
        phases["vacuum_analyze"] = time.perf_counter() - t
    finally:
        engine.dispose()
    return {
        "model": embedder.name,
        "dimension": embedder.dimension,
        "rows": len(rows),
        "texts": len(index_of),
        "phases_s": {k: round(v, 2) for k, v in phases.items()},
        "texts_per_s": round(len(index_of) / max(phases["embed"], 1e-9), 1),
        "index_mb": round(int(size) / 2**20, 1),
        "maintenance_workers": workers,
    }


def vectors_ready(url: str, model: str, items: int) -> bool:
    """Whether the store holds a vector under ``model`` for each of its ``items`` items and
    a valid HNSW index (a kept store whose vectors a run loaded completely)."""
    engine = db.make_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as c:
            valid = c.execute(
                sa.text(
                    "SELECT bool_and(indisvalid) FROM pg_index WHERE indexrelid = to_regclass(:n)"
                ),
                {"n": HNSW_INDEX},
            ).scalar()
            n = c.execute(
                sa.text("SELECT count(*) FROM item_embeddings WHERE model = :m"), {"m": model}
            ).scalar_one()
    finally:
        engine.dispose()
    return bool(valid) and int(n) == items


class PrimedEmbedder:
    """The dense runtime's embedder: the vector the loop embedded (and timed) for a query
    beforehand, so a recall's time is its time without the embedding; any other text
    is embedded by ``inner`` (counted in ``misses``)."""

    def __init__(self, inner: recall.Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self.vectors: dict[str, np.ndarray] = {}
        self.misses = 0

    def prime(self, text: str) -> np.ndarray:
        """Embed ``text`` alone (the timed step) and keep its vector."""
        vector: np.ndarray = self.inner.embed([text])[0]
        self.vectors[text] = vector
        return vector

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The primed vectors of ``texts`` (embedding any text not primed)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            self.misses += len(missing)
            self.vectors.update(zip(missing, self.inner.embed(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self.vectors[t] for t in texts])


# --- knowledge passages (issue 26) -----------------------------------------------

#: The sections of a generated document, in order.
SECTIONS = ("Summary", "Impact", "Mitigation", "Follow-up")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
#: The passages' staging table (COPY cannot compute ``fts``) and its columns.
_STAGE = (
    "CREATE TEMP TABLE bench_passages (document_id text, ordinal int, heading_path text[], "
    "fragment text, text text, acl jsonb, purposes text[], recorded_at timestamptz) "
    "ON COMMIT DROP"
)
_STAGE_COLUMNS = (
    "document_id",
    "ordinal",
    "heading_path",
    "fragment",
    "text",
    "acl",
    "purposes",
    "recorded_at",
)
#: From the staging table into ``passages``, ``fts`` as ``claims``'s import fills it.
_STAGED_INSERT = (
    "INSERT INTO passages (tenant_id, document_id, document_version, ordinal, heading_path, "
    "fragment, text, acl, deny, classification, purposes, fts, recorded_at) "
    "SELECT %(t)s, document_id, 1, ordinal, heading_path, fragment, text, acl, '{}', NULL, "
    "purposes, to_tsvector('english', array_to_string(heading_path, ' ') || ' ' || text), "
    "recorded_at FROM bench_passages ORDER BY document_id, ordinal"
)
_DOCUMENT_COLUMNS = (
    "tenant_id",
    "id",
    "version",
    "title",
    "uri",
    "readers",
    "deny",
    "purposes",
    "digest",
    "imported_at",
    "imported_by",
)
PASSAGE_HNSW_INDEX = "ix_passage_embeddings_hnsw_384"
PASSAGE_HNSW_DEFINITION = (
    f"CREATE INDEX {PASSAGE_HNSW_INDEX} ON passage_embeddings "
    "USING hnsw ((CAST(embedding AS vector(384))) vector_cosine_ops) WHERE dim = 384"
)


def passage_rows(n: int, seed: int) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """``n`` passages of the measured tenant in documents of ``len(SECTIONS)`` sections:
    ``(documents rows, staging rows)``. Access and purposes per document, mixed like the
    items' (``Generator.write``)."""
    rng = random.Random(seed + 7)
    sentences = [
        x for doc in bench_corpus.current().docs for x in _SENTENCE.split(doc.summary.strip())
    ]
    documents: list[tuple[Any, ...]] = []
    staged: list[tuple[Any, ...]] = []
    span = NOW - timedelta(hours=1) - T0
    for d in range((n + len(SECTIONS) - 1) // len(SECTIONS)):
        doc_id = f"runbooks/{NAMES[d % len(NAMES)]}-{d:05d}.md"
        title = f"{NAMES[d % len(NAMES)].capitalize()} runbook {d}"
        r = rng.random()
        readers = [RESTRICTED] if r < 0.03 else (sorted(PRINCIPAL.capabilities) if r < 0.08 else [])
        p = rng.random()
        purposes = [PURPOSE] if p < 0.15 else (["postmortem_review"] if p < 0.2 else [])
        at = T0 + span * rng.random()
        documents.append(
            (
                TENANT,
                doc_id,
                1,
                title,
                f"file:{doc_id}",
                readers,
                [],
                purposes,
                f"{d:064x}",
                at,
                LOADER.id,
            )
        )
        acl = json.dumps([readers] if readers else [])
        for ordinal, section in enumerate(SECTIONS[: n - len(staged)]):
            text = f"## {section}\n\n" + " ".join(rng.sample(sentences, 2))
            staged.append(
                (doc_id, ordinal, [title, section], section.lower(), text, acl, purposes, at)
            )
    return documents, staged


def load_passages(url: str, n: int, seed: int, show: bool = True) -> dict[str, Any]:
    """Replace the measured tenant's knowledge with ``n`` generated passages (COPY as the
    owner), then ``VACUUM ANALYZE``; what was stored and how long it took."""
    t = time.perf_counter()
    documents, staged = passage_rows(n, seed)
    engine = db.make_engine(url)
    sessions = sessionmaker(engine, expire_on_commit=False)
    bar = Progress("passages", len(staged), show)
    try:
        with sessions.begin() as s:
            s.execute(sa.text("TRUNCATE documents, passages, passage_embeddings"))
            _copy_in(s, "documents", _DOCUMENT_COLUMNS, _copy_text(documents))
            raw = s.connection().connection.driver_connection
            assert raw is not None
            raw.execute(_STAGE)
            _copy_in(s, "bench_passages", _STAGE_COLUMNS, _copy_text(staged))
            raw.execute(_STAGED_INSERT, {"t": TENANT})
        bar.update(len(staged))
        _analyze(engine)
    finally:
        engine.dispose()
    return {
        "documents": len(documents),
        "passages": len(staged),
        "load_s": round(time.perf_counter() - t, 2),
    }


def load_passage_vectors(
    url: str, embedder: recall.Embedder, *, show: bool = True
) -> dict[str, Any]:
    """Every live passage's vector under ``embedder`` (the text ``recall.embed_passages``
    embeds: the heading path joined with `` / ``, a newline, the text), each distinct text
    embedded once, ``COPY``-ed as the owner with the passage HNSW index dropped and built
    again; then ``VACUUM ANALYZE``."""
    phases: dict[str, float] = {}
    engine = db.make_engine(url, poolclass=sa.pool.NullPool)
    try:
        t = time.perf_counter()
        with engine.connect() as c:
            rows = c.execute(
                sa.text(
                    "SELECT tenant_id, id, array_to_string(heading_path, ' / ') || E'\\n' || text "
                    "FROM passages WHERE withdrawn_at IS NULL ORDER BY id"
                )
            ).all()
        index_of: dict[str, int] = {}
        keys = [index_of.setdefault(str(text), len(index_of)) for _, _, text in rows]
        vectors = _embed_distinct(embedder, list(index_of), show)
        phases["embed"] = time.perf_counter() - t
        t = time.perf_counter()
        with engine.begin() as c:
            c.execute(sa.text(f"DROP INDEX IF EXISTS {PASSAGE_HNSW_INDEX}"))
            c.execute(sa.text("TRUNCATE passage_embeddings"))
        _copy_vectors(engine, "passage_embeddings", "passage_id", embedder, rows, keys, vectors)
        _create_indexes(engine, [PASSAGE_HNSW_DEFINITION], False)
        phases["copy_and_index"] = time.perf_counter() - t
        _analyze(engine)
    finally:
        engine.dispose()
    return {
        "rows": len(rows),
        "texts": len(index_of),
        "phases_s": {k: round(v, 2) for k, v in phases.items()},
    }


def passages_ready(url: str, n: int, model: str | None) -> bool:
    """Whether the measured tenant holds exactly ``n`` passages (and, with ``model``, a
    vector under it for each)."""
    engine = db.make_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as c:
            have = c.execute(
                sa.text("SELECT count(*) FROM passages WHERE tenant_id = :t"), {"t": TENANT}
            ).scalar_one()
            vec = c.execute(
                sa.text("SELECT count(*) FROM passage_embeddings WHERE model = :m"), {"m": model}
            ).scalar_one()
    finally:
        engine.dispose()
    return int(have) == n and (model is None or int(vec) == n)


# --- measuring -------------------------------------------------------------------


def runtime(
    url: str,
    tenant: str = TENANT,
    embedder: recall.Embedder | None = None,
    fusion: recall.Fusion = recall.FUSION,
) -> app.Runtime:
    """The process-lifetime runtime a server holds, on the measured tenant: the
    application's role under row-level security, its world cache, its sessions, and
    the dense channel's embedder (None: lexical + entity)."""
    engine = db.make_app_engine(url)
    return app.Runtime(
        Settings(),
        url,
        engine,
        tenant,
        db.tenant_sessions(engine, tenant),
        embedder=embedder,
        fusion=fusion,
    )


def _recall_call(rt: app.Runtime, request: recall.RecallRequest) -> recall.RecallResult:
    """One recall as a server makes it: ``Runtime.recall``, a transaction of its own
    (world lookup, the read, commit)."""
    return rt.recall(PRINCIPAL, request, NOW)


def _one_row_transaction(rt: app.Runtime, params: dict[str, Any]) -> object:
    """The guard's honest floor (issue 27): one runtime transaction, as the guard's is
    (the pool's checkout, BEGIN, the tenant setting, row-level security, COMMIT), that
    reads one item row by primary key."""
    with rt.transaction("check_context") as s:
        return s.connection().exec_driver_sql(PK_LOOKUP, params).one()


def measure_tracing(
    ask: Callable[[str, str], object], queries: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    """What OpenTelemetry costs a recall with a subject (issue 28). Off (no exporter
    configured, the API's default provider): the spans a recall makes, times what one
    non-recording span costs, measured in a loop of 100,000, against the recall's p50.
    On: the process's span recorder (``caveat._tracing.recorder``: an SDK provider keeping
    spans in memory), the recall p50 recording against the same queries with its sampler
    dropping every span (as good as off), alternating by query."""
    from opentelemetry import trace

    from caveat import _tracing

    idle = trace.get_tracer("bench")
    n = 100_000
    started = time.perf_counter()
    for _ in range(n):
        with idle.start_as_current_span("x"):
            pass
    per_span_us = (time.perf_counter() - started) / n * 1e6
    record = _tracing.recorder()
    times: dict[bool, list[float]] = {False: [], True: []}
    recorded = 0
    for i, (text, subject) in enumerate(queries):
        for on in (i % 2 == 0, i % 2 == 1):
            with contextlib.ExitStack() as stack:
                if on:
                    exporter = stack.enter_context(record.recording())
                t = time.perf_counter()
                ask(text, subject)
                times[on].append((time.perf_counter() - t) * 1000)
                if on:
                    recorded += len(exporter.get_finished_spans())
    spans = recorded / max(len(times[True]), 1)
    off_p50 = statistics.median(times[False])
    return {
        "tracing_spans_per_recall": round(spans, 1),
        "tracing_off_us_per_span": round(per_span_us, 2),
        "tracing_off_share": round(spans * per_span_us / 1000 / off_p50, 5),
        "p50_ms_tracing_dropped": round(off_p50, 3),
        "p50_ms_tracing_recorded": round(statistics.median(times[True]), 3),
        "ratio_tracing_on": round(statistics.median(times[True]) / off_p50, 3),
    }


def _guard_call(rt: app.Runtime, ids: Sequence[int]) -> recall.ContextCheck:
    """The context guard over ``ids`` as a server makes it: ``Runtime.check_context``."""
    return rt.check_context(PRINCIPAL, ids, None, NOW)


#: The ungated one-axis baseline: the tenant's first ``cap`` full-text matches, ranked
#: as recall ranks them, top 10. The fastest form measured (p50 at 100k / 1M items:
#: 20 / 29 ms, against 26 / 188 ms for ``BASELINE_PREPARED``): planned for each query
#: (unprepared), so the planner sees how common its terms are and stops a scan at the
#: cap when they are common, or reads the GIN index when they are rare; and the tenant
#: filter is applied to each row (``IS TRUE``) rather than through the tenant index,
#: whose bitmap of half the store cost more than all the rest (78 ms at 1M).
BASELINE = (
    "SELECT id FROM (SELECT id, fts FROM items "
    "WHERE (tenant_id = %(t)s) IS TRUE AND fts @@ to_tsquery('english', %(q)s) "
    "LIMIT %(cap)s) c "
    "ORDER BY ts_rank(fts, to_tsquery('english', %(q)s), 1) DESC LIMIT 10"
)
#: The same query written plainly and prepared (reported for reference): a generic plan
#: that cannot see how common the terms are ANDs the GIN bitmap with the tenant's.
BASELINE_PREPARED = (
    "SELECT id FROM (SELECT id, fts FROM items "
    "WHERE tenant_id = %(t)s AND fts @@ (SELECT to_tsquery('english', %(q)s)) LIMIT %(cap)s) c "
    "ORDER BY ts_rank(fts, (SELECT to_tsquery('english', %(q)s)), 1) DESC LIMIT 10"
)
PK_LOOKUP = "SELECT id, subject, acl FROM items WHERE tenant_id = %(t)s AND id = %(id)s"
#: The ungated dense baseline: the tenant's 10 nearest by the HNSW index (the session's
#: ``hnsw.iterative_scan`` and ``ef_search``, ``make_app_engine``), with distances.
BASELINE_DENSE = (
    "SELECT item_id, CAST(embedding AS vector(384)) <=> CAST(%(v)s AS vector(384)) AS d "
    "FROM item_embeddings WHERE dim = 384 AND tenant_id = %(t)s AND model = %(m)s "
    "ORDER BY CAST(embedding AS vector(384)) <=> CAST(%(v)s AS vector(384)) LIMIT 10"
)
#: The exact 10 nearest of the tenant (no index can serve it): the answer HNSW approximates.
EXACT_DENSE = (
    "SELECT item_id, embedding <=> CAST(%(v)s AS vector) AS d FROM item_embeddings "
    "WHERE tenant_id = %(t)s AND model = %(m)s "
    "ORDER BY embedding <=> CAST(%(v)s AS vector), item_id LIMIT 10"
)


#: The cut-over sweep: the exact nearest 100 of the first ``n`` items the caller may see
#: (the statement recall runs at or below the cut-over, its size forced), beside the
#: HNSW statement recall runs above it; both as the application role.
SWEEP_SIZES = (250, 500, 1000, 2000, 4000)
SWEEP_EXACT = rq.DENSE_EXACT.replace("%(cutover)s + 1", "%(n)s").replace(
    "<= %(cutover)s", "<= %(n)s"
)


def sweep_params(model: str, vector: str, n: int) -> dict[str, Any]:
    """The recall statements' parameters for the measured tenant, no capability held."""
    return {
        "tenant": TENANT,
        "admin": False,
        "caps": [],
        "principal": "",
        "deny_keys": [],
        "cleared": ["public"],
        "model": model,
        "qvec": vector,
        "k": 100,
        "n": n,
    }


def recall_at_10(approx: Sequence[Any], exact: Sequence[Any], eps: float = 1e-6) -> float:
    """The share of the exact top-10 an approximate answer found, by distance: a row as
    near as the exact 10th counts (items of identical text tie), at most 1."""
    if not exact:
        return 1.0
    bound = float(exact[-1][1]) + eps
    return min(sum(1 for r in approx if float(r[1]) <= bound), len(exact)) / len(exact)


class Raw:
    """Statements on a connection of the runtime's engine (the application's role, the
    measured tenant set for the session): ``bare`` is one autocommit round trip (the
    fastest), ``tx`` the same statement inside BEGIN ... COMMIT, as a runtime call pays.
    (COMMIT, not ROLLBACK: psycopg forgets its prepared statements on a rollback.)"""

    def __init__(self, connection: sa.Connection) -> None:
        pg = connection.connection.driver_connection
        assert pg is not None
        self.pg: Any = pg
        pg.execute("SELECT set_config('caveat.tenant', %s, false)", [TENANT])
        pg.commit()

    def bare(self, sql: str, params: dict[str, Any], prepare: bool = True) -> list[Any]:
        pg = self.pg
        pg.autocommit = True
        try:
            rows: list[Any] = pg.execute(sql, params, prepare=prepare).fetchall()
            return rows
        finally:
            pg.autocommit = False

    def tx(self, sql: str, params: dict[str, Any], prepare: bool = True) -> list[Any]:
        pg = self.pg
        try:
            rows: list[Any] = pg.execute(sql, params, prepare=prepare).fetchall()
            return rows
        finally:
            pg.commit()


def phrases(n: int, rng: random.Random) -> list[str]:
    """Symptom phrases: 3-6 content words of a postmortem summary, some swapped for an
    engineer's word, shuffled."""
    summaries = [doc.summary for doc in bench_corpus.current().docs]
    out: list[str] = []
    while len(out) < n:
        words = dict.fromkeys(
            w.lower()
            for w in _WORD.findall(rng.choice(summaries))
            if len(w) > 2 and w.lower() not in _STOP and not w.isdigit()
        )
        if len(words) < 3:
            continue
        picked = rng.sample(list(words), rng.randint(3, min(6, len(words))))
        picked = [_SYNONYMS.get(w, w) if rng.random() < 0.3 else w for w in picked]
        rng.shuffle(picked)
        out.append(" ".join(picked))
    return out


def _p(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered) + 0.5) - 1))]


def measure(
    url: str,
    corpus: Corpus,
    *,
    queries: int,
    seed: int,
    cap: int,
    warmup: int = 5,
    show: bool = True,
    dense: recall.Embedder | None = None,
    passages: int = 0,
) -> dict[str, Any]:
    """Time every variant, interleaved per query, on one connection; return the figures.

    With ``dense`` (an embedder whose vectors the store holds), the dense variants too:
    a second runtime with that embedder, primed per query (``PrimedEmbedder``). With
    ``passages`` (the store holds that many), the recalls with ``sources: [memory,
    knowledge]`` too."""
    rng = random.Random(seed + 1)
    texts = phrases(warmup + queries, rng)
    subjects = [rng.choice(corpus.measured_subjects) for _ in texts]
    rt = runtime(url)
    primed = None if dense is None else PrimedEmbedder(dense)
    rt_dense = None if primed is None else runtime(url, embedder=primed)
    connection = rt.engine.connect()
    raw = Raw(connection)
    paths: dict[str, int] = {}
    hnsw_recall: list[float] = []
    uses_index = False
    try:
        both: tuple[Source, ...] = ("memory", "knowledge")
        shown: dict[str, list[int]] = {}

        def ask(
            text: str,
            subject: str | None,
            explain: bool,
            sources: tuple[Source, ...] = ("memory",),
            on: app.Runtime = rt,
            name: str = "",
        ) -> int:
            request = recall.RecallRequest(
                query=text,
                subjects=None if subject is None else [subject],
                purpose=PURPOSE,
                explain=explain,
                sources=sources,
            )
            result = _recall_call(on, request)
            if name:
                shown.setdefault(name, []).append(len(result.knowledge))
            return len(result.items) + len(result.knowledge)

        def baseline(text: str, sql: str, prepare: bool) -> int:
            return len(raw.bare(sql, {"t": TENANT, "q": or_query(text), "cap": cap}, prepare))

        variants: list[tuple[str, Callable[[str, str], int]]] = [
            ("subject", lambda t, s: ask(t, s, False)),
            ("no_subject", lambda t, s: ask(t, None, False)),
            ("explain", lambda t, s: ask(t, s, True)),
            ("explain_no_subject", lambda t, s: ask(t, None, True)),
            ("baseline", lambda t, s: baseline(t, BASELINE, False)),
            ("baseline_prepared", lambda t, s: baseline(t, BASELINE_PREPARED, True)),
        ]
        if passages:
            variants += [
                (
                    "knowledge_subject",
                    lambda t, s: ask(t, s, False, both, name="knowledge_subject"),
                ),
                (
                    "knowledge_no_subject",
                    lambda t, s: ask(t, None, False, both, name="knowledge_no_subject"),
                ),
            ]
        if primed is not None and rt_dense is not None:
            model = primed.name

            def ask_dense(text: str, subject: str | None) -> int:
                request = recall.RecallRequest(
                    query=text, subjects=None if subject is None else [subject], purpose=PURPOSE
                )
                result = _recall_call(rt_dense, request)
                if subject is None:
                    path = result.dense_search or "none"
                    paths[path] = paths.get(path, 0) + 1
                return len(result.items)

            def dense_params(text: str) -> dict[str, Any]:
                return {"t": TENANT, "m": model, "v": vector_text(primed.vectors[text])}

            variants += [
                ("dense_subject", ask_dense),
                ("dense_no_subject", lambda t, s: ask_dense(t, None)),
                ("baseline_dense", lambda t, s: len(raw.bare(BASELINE_DENSE, dense_params(t)))),
            ]
            if passages:
                dense_rt = rt_dense
                variants.append(
                    (
                        "dense_knowledge_no_subject",
                        lambda t, s: ask(
                            t, None, False, both, on=dense_rt, name="dense_knowledge_no_subject"
                        ),
                    )
                )
        times: dict[str, list[float]] = {name: [] for name, _ in variants}
        counts: dict[str, list[int]] = {name: [] for name, _ in variants}
        if primed is not None:
            times["embed"] = []
        bar = Progress("queries", len(texts), show)
        for i, (text, subject) in enumerate(zip(texts, subjects, strict=True)):
            if primed is not None:  # first: the dense variants use the vector
                started = time.perf_counter()
                primed.prime(text)
                if i >= warmup:
                    times["embed"].append((time.perf_counter() - started) * 1000)
            if i == warmup:
                paths.clear()
            shift = i % len(variants)
            for name, fn in variants[shift:] + variants[:shift]:
                started = time.perf_counter()
                n = fn(text, subject)
                elapsed = time.perf_counter() - started
                if i >= warmup:
                    times[name].append(elapsed * 1000)
                    counts[name].append(n)
            bar.update(i + 1)

        if primed is not None:  # the HNSW baseline's answers against the exact ones
            plan = raw.bare("EXPLAIN " + BASELINE_DENSE, dense_params(texts[0]), prepare=False)
            uses_index = any(HNSW_INDEX in str(r[0]) for r in plan)
            for text in texts[warmup:]:
                params = dense_params(text)
                approx = raw.bare(BASELINE_DENSE, params)
                hnsw_recall.append(recall_at_10(approx, raw.bare(EXACT_DENSE, params)))

        sweep: dict[str, list[float]] = {}
        if primed is not None:  # where an exact scan of the passing set costs one HNSW walk
            for text in texts[warmup : warmup + 20]:
                vec = vector_text(primed.vectors[text])
                for n in ("hnsw", *SWEEP_SIZES):
                    sql = rq.DENSE_HNSW if n == "hnsw" else SWEEP_EXACT
                    params = sweep_params(model, vec, 0 if n == "hnsw" else int(n))
                    started = time.perf_counter()
                    raw.bare(sql, params)
                    sweep.setdefault(str(n), []).append((time.perf_counter() - started) * 1000)

        guard: list[float] = []
        lookup: list[float] = []
        lookup_tx: list[float] = []
        lookup_txn: list[float] = []
        usable: list[int] = []
        for i in range(warmup + queries):
            ids = rng.sample(corpus.sample_ids, min(50, len(corpus.sample_ids)))
            params = {"t": TENANT, "id": ids[0]}
            steps: list[tuple[list[float], Callable[[], object]]] = [
                (guard, partial(_guard_call, rt, ids)),
                (lookup, partial(raw.bare, PK_LOOKUP, params)),
                (lookup_tx, partial(raw.tx, PK_LOOKUP, params)),
                (lookup_txn, partial(_one_row_transaction, rt, params)),
            ]
            shift = i % len(steps)
            for sink, step in steps[shift:] + steps[:shift]:
                started = time.perf_counter()
                done = step()
                if i >= warmup:
                    sink.append((time.perf_counter() - started) * 1000)
                    if isinstance(done, recall.ContextCheck):
                        usable.append(len(done.usable))
        tracing = measure_tracing(
            lambda t, s: ask(t, s, False), list(zip(texts, subjects, strict=True))[:100]
        )
    finally:
        connection.close()
        rt.engine.dispose()
        if rt_dense is not None:
            rt_dense.engine.dispose()

    def p50(name: str) -> float:
        return statistics.median(times[name])

    out: dict[str, Any] = {
        "items": corpus.items,
        "measured_items": corpus.measured_items,
        "tenants": corpus.tenants,
        "subjects": corpus.subjects,
        "fact_rows": corpus.fact_rows,
        "queries": queries,
        "cap": cap,
        "seed": seed,
    }
    for name, ms in times.items():
        out[f"p50_ms_{name}"] = round(statistics.median(ms), 3)
        out[f"p95_ms_{name}"] = round(_p(ms, 0.95), 3)
    if primed is not None:  # per query: a dense recall with its embedding; both baselines
        for name in ("dense_subject", "dense_no_subject"):
            both = [a + b for a, b in zip(times[name], times["embed"], strict=True)]
            out[f"p50_ms_{name}_with_embed"] = round(statistics.median(both), 3)
            out[f"p95_ms_{name}_with_embed"] = round(_p(both, 0.95), 3)
        hybrid = [a + b for a, b in zip(times["baseline"], times["baseline_dense"], strict=True)]
        out["p50_ms_baseline_hybrid"] = round(statistics.median(hybrid), 3)
        out |= {
            "ratio_dense_subject": round(p50("dense_subject") / p50("baseline_dense"), 3),
            "ratio_dense_no_subject": round(p50("dense_no_subject") / p50("baseline_dense"), 3),
            "ratio_dense_subject_fts": round(p50("dense_subject") / p50("baseline"), 3),
            "ratio_dense_no_subject_fts": round(p50("dense_no_subject") / p50("baseline"), 3),
            "ratio_dense_no_subject_hybrid": round(
                p50("dense_no_subject") / statistics.median(hybrid), 3
            ),
            "dense_paths": dict(sorted(paths.items())),
            "dense_embed_misses": primed.misses,
            "baseline_dense_uses_hnsw": uses_index,
            "baseline_dense_recall_at_10": round(statistics.fmean(hnsw_recall), 4),
            "baseline_dense_recall_at_10_min": round(min(hnsw_recall), 4),
            "sweep_p50_ms": {n: round(statistics.median(ms), 3) for n, ms in sweep.items()},
        }
    if passages:
        out |= {
            "passages": passages,
            "ratio_knowledge": round(p50("knowledge_no_subject") / p50("no_subject"), 3),
            "ratio_knowledge_subject": round(p50("knowledge_subject") / p50("subject"), 3),
        }
        if primed is not None:
            out["ratio_dense_knowledge"] = round(
                p50("dense_knowledge_no_subject") / p50("dense_no_subject"), 3
            )
        for name, found in shown.items():  # passages among the results (after the warm-up)
            out[f"mean_passages_{name}"] = round(statistics.fmean(found[warmup:]), 2)
    for name, found in counts.items():
        out[f"mean_results_{name}"] = round(statistics.fmean(found), 2)
        out[f"empty_share_{name}"] = round(sum(1 for c in found if c == 0) / queries, 3)
    base = p50("baseline")
    out |= {
        "ratio_subject": round(p50("subject") / base, 3),
        "ratio_no_subject": round(p50("no_subject") / base, 3),
        "explain_ratio": round(p50("explain") / p50("subject"), 3),
        "explain_ratio_no_subject": round(p50("explain_no_subject") / p50("no_subject"), 3),
        "p50_ms_guard_50": round(statistics.median(guard), 3),
        "p95_ms_guard_50": round(_p(guard, 0.95), 3),
        "p50_ms_pk_lookup": round(statistics.median(lookup), 4),
        "p50_ms_pk_lookup_tx": round(statistics.median(lookup_tx), 4),
        "guard_ratio": round(statistics.median(guard) / statistics.median(lookup), 3),
        "guard_ratio_tx": round(statistics.median(guard) / statistics.median(lookup_tx), 3),
        "p50_ms_pk_lookup_txn": round(statistics.median(lookup_txn), 4),
        "guard_ratio_txn": round(statistics.median(guard) / statistics.median(lookup_txn), 3),
        "guard_mean_usable": round(statistics.fmean(usable), 2),
        **tracing,
        "passing_share": round(corpus.passing / max(corpus.measured_items, 1), 3),
        "restricted_share": round(corpus.restricted / max(corpus.measured_items, 1), 3),
        "load_seconds": round(corpus.load_seconds, 1),
        "load_phases_s": {k: round(v, 1) for k, v in corpus.phases.items()},
        "corpus": bench_corpus.current().label,
    }
    return out


# --- the run ---------------------------------------------------------------------


def _meta_get(server: str, name: str) -> dict[str, Any] | None:
    eng = db.make_engine(server, poolclass=sa.pool.NullPool)
    try:
        with eng.connect() as c:
            text = c.execute(
                sa.text(
                    "SELECT shobj_description(oid, 'pg_database') FROM pg_database "
                    "WHERE datname = :n"
                ),
                {"n": name},
            ).scalar()
    finally:
        eng.dispose()
    if not text:
        return None
    meta: dict[str, Any] = json.loads(text)
    return meta


def _meta_set(server: str, name: str, meta: dict[str, Any]) -> None:
    eng = db.make_engine(server, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
    try:
        with eng.connect() as c:
            literal = json.dumps(meta).replace("'", "''")
            c.execute(sa.text(f"COMMENT ON DATABASE \"{name}\" IS '{literal}'"))
    finally:
        eng.dispose()


#: What a kept store records about itself (its database comment).
_KEPT = {f.name for f in fields(Corpus)} - {"samples"}


@contextmanager
def _database(keep: str | None, items: int, seed: int) -> Iterator[tuple[str, str, str]]:
    """``(server url, database name, database url)``: a throwaway database, or with
    ``keep`` one kept (with its embedded server's data) in that directory."""
    if keep is None:
        with bench_database() as url:
            yield "", "", url
        return
    external = os.environ.get("DATABASE_URL")
    server = (
        db.to_sqlalchemy_url(external)
        if external
        else db.EmbeddedServer(Path(keep).resolve() / "pgdata").start(keep_running=False)
    )
    # the corpus's digest too: a store built from other summaries is not reused
    name = f"caveat_bench_recall_{items}_{seed}_{bench_corpus.current().digest}"
    if db.database_exists(server, name):
        meta = _meta_get(server, name)
        if meta is None or not _KEPT <= set(meta) <= _KEPT | {"vectors"}:
            db.drop_database(server, name)  # an interrupted load, or an older generator's
    url = (
        db.database_url(server, name)
        if db.database_exists(server, name)
        else db.create_database(server, name)
    )
    yield server, name, url


def run(
    items: int,
    queries: int,
    seed: int,
    cap: int,
    keep: str | None = None,
    warmup: int = 5,
    show: bool = True,
    dense: str | None = None,
    passages: int = 0,
) -> dict[str, Any]:
    """Load (or reuse) the store and measure it; with ``dense`` (an embedder's name for
    ``recall.make_embedder``), with every item's vector under that embedder too; with
    ``passages``, that many knowledge passages in the measured tenant (and their
    vectors with ``dense``)."""
    with _database(keep, items, seed) as (server, name, url):
        db.migrate(url)
        meta = _meta_get(server, name) if keep else None
        if meta is not None:
            corpus = Corpus(**{k: meta[k] for k in _KEPT})
            engine = db.make_engine(url)
            try:
                _analyze(engine)
            finally:
                engine.dispose()
        else:
            corpus = load(url, items, seed, show=show)
            if keep:
                _meta_set(server, name, {k: getattr(corpus, k) for k in sorted(_KEPT)})
        reused = meta is not None
        embedder = None if dense is None else recall.make_embedder(dense)
        extra: dict[str, Any] = {}
        if embedder is not None:
            started = time.perf_counter()
            embedder.embed(["warm up the model"])
            extra["embedder_load_s"] = round(time.perf_counter() - started, 2)
            vectors = (meta or {}).get("vectors")
            ready = vectors is not None and vectors["model"] == embedder.name
            if not (ready and vectors_ready(url, embedder.name, corpus.items)):
                vectors = load_vectors(url, embedder, show=show)
                if keep:
                    kept = {k: getattr(corpus, k) for k in sorted(_KEPT)}
                    _meta_set(server, name, {**kept, "vectors": vectors})
                ready = False
            extra |= {"dense_model": embedder.name, "vectors": vectors, "reused_vectors": ready}
        if passages:
            model = None if embedder is None else embedder.name
            if not passages_ready(url, passages, model):
                extra["passage_load"] = load_passages(url, passages, seed, show=show)
                if embedder is not None:
                    extra["passage_vectors"] = load_passage_vectors(url, embedder, show=show)
            else:
                extra["passage_load"] = {"reused": True}
        result = measure(
            url,
            corpus,
            queries=queries,
            seed=seed,
            cap=cap,
            warmup=warmup,
            show=show,
            dense=embedder,
            passages=passages,
        )
        result["reused_store"] = reused
        return result | extra


def markdown(r: dict[str, Any], argv: Sequence[str]) -> str:
    """The report as a Markdown block (docs/performance.md)."""

    def row(label: str, key: str) -> str:
        return (
            f"| {label} | {r[f'p50_ms_{key}']:.2f} ms | {r[f'p95_ms_{key}']:.2f} ms "
            f"| {r[f'mean_results_{key}']:.1f} |"
        )

    phases = ", ".join(f"{k} {v:.0f} s" for k, v in r["load_phases_s"].items() if "." not in k)
    return "\n".join(
        [
            f"### recall at scale, {r['items']:,} items ({datetime.now(UTC).date()}, "
            f"{os.cpu_count()} cores, Python {platform.python_version()})",
            "",
            f"Command: `python -m bench recall {' '.join(argv)}`",
            "",
            f"Corpus: {r['corpus']}.",
            "",
            f"Store: {r['items']:,} items in {r['tenants']} tenants, the measured one "
            f"{r['measured_items']:,} over {r['subjects']:,} subjects in all; "
            f"{r['fact_rows']:,} fact rows; {r['passing_share']:.0%} of the measured "
            f"tenant's items with every condition holding, {r['restricted_share']:.1%} "
            f"hidden by capability. Loaded in {r['load_seconds']:.0f} s "
            f"({phases})"
            + (" (reused)" if r.get("reused_store") else "")
            + f". {r['queries']} queries, candidate cap {r['cap']}.",
            "",
            "| variant | p50 | p95 | mean results |",
            "|---|---|---|---|",
            row("gated recall, a subject", "subject"),
            row("gated recall, no subject", "no_subject"),
            row("explain, a subject", "explain"),
            row("explain, no subject", "explain_no_subject"),
            row("baseline: ungated capped full-text top-10 (one round trip)", "baseline"),
            row("the same written plainly, prepared (reference)", "baseline_prepared"),
            f"| context guard, 50 items | {r['p50_ms_guard_50']:.3f} ms "
            f"| {r['p95_ms_guard_50']:.3f} ms | {r['guard_mean_usable']:.1f} usable |",
            f"| one prepared primary-key lookup (bare / in a transaction / in a runtime "
            f"transaction) | {r['p50_ms_pk_lookup']:.3f} / {r['p50_ms_pk_lookup_tx']:.3f} / "
            f"{r['p50_ms_pk_lookup_txn']:.3f} ms | | |",
            "",
            "| ratio | value | goal |",
            "|---|---|---|",
            f"| gated p50 with a subject / baseline p50 | **{r['ratio_subject']:.2f}** | <= 1.0 |",
            f"| gated p50 without a subject / baseline p50 | **{r['ratio_no_subject']:.2f}** "
            "| <= 1.5 |",
            f"| explain / plain, with a subject (without) | **{r['explain_ratio']:.2f}** "
            f"({r['explain_ratio_no_subject']:.2f}) | <= 5 |",
            f"| guard on 50 items / one primary-key lookup (in a transaction) "
            f"| {r['guard_ratio']:.2f} ({r['guard_ratio_tx']:.2f}) | |",
            f"| guard on 50 items / one runtime transaction reading one row "
            f"| **{r['guard_ratio_txn']:.2f}** | <= 2 |",
            f"| tracing off: {r['tracing_spans_per_recall']:.0f} spans x "
            f"{r['tracing_off_us_per_span']:.2f} us / recall p50 "
            f"| {r['tracing_off_share']:.5f} | |",
            f"| tracing on (recorded in memory) / dropped, recall p50 "
            f"| {r['ratio_tracing_on']:.2f} | |",
            *(_markdown_dense(r, row) if "dense_model" in r else []),
            *(_markdown_knowledge(r) if r.get("passages") else []),
        ]
    )


def _markdown_knowledge(r: dict[str, Any]) -> list[str]:
    """The knowledge variants' part of the report (``--passages``)."""

    def row(label: str, key: str) -> str:
        return (
            f"| {label} | {r[f'p50_ms_{key}']:.2f} ms | {r[f'p95_ms_{key}']:.2f} ms "
            f"| {r[f'mean_results_{key}']:.1f} "
            f"| {r.get(f'mean_passages_{key}', 0):.1f} |"
        )

    out = [
        "",
        f"Knowledge: {r['passages']:,} passages in the measured tenant.",
        "",
        "| variant | p50 | p95 | mean results | of which passages |",
        "|---|---|---|---|---|",
        row("recall, a subject, sources: memory", "subject"),
        row("recall, a subject, sources: memory, knowledge", "knowledge_subject"),
        row("recall, no subject, sources: memory", "no_subject"),
        row("recall, no subject, sources: memory, knowledge", "knowledge_no_subject"),
    ]
    if "ratio_dense_knowledge" in r:
        out += [
            row("dense recall, no subject, sources: memory", "dense_no_subject"),
            row(
                "dense recall, no subject, sources: memory, knowledge", "dense_knowledge_no_subject"
            ),
        ]
    out += [
        "",
        "| ratio (p50, both sources / memory alone) | value | goal |",
        "|---|---|---|",
        f"| no subject (`ratio_knowledge`) | **{r['ratio_knowledge']:.2f}** | <= 1.3 |",
        f"| a subject (`ratio_knowledge_subject`) | {r['ratio_knowledge_subject']:.2f} | |",
    ]
    if "ratio_dense_knowledge" in r:
        out.append(
            f"| dense, no subject (`ratio_dense_knowledge`) | {r['ratio_dense_knowledge']:.2f} | |"
        )
    return out


def _markdown_dense(r: dict[str, Any], row: Callable[[str, str], str]) -> list[str]:
    """The dense runs' part of the report."""
    v = r["vectors"]
    ph = v["phases_s"]
    paths = ", ".join(f"{k} {n}" for k, n in r["dense_paths"].items()) or "none"
    return [
        "",
        f"Dense channel: `{r['dense_model']}` (loaded in {r['embedder_load_s']:.1f} s); "
        f"{v['rows']:,} vectors from {v['texts']:,} distinct texts, embedded in "
        f"{ph['embed']:.0f} s ({v['texts_per_s']:,.0f} texts/s), copied in {ph['copy']:.1f} s; "
        f"HNSW build {ph['hnsw_build']:.1f} s ({v['index_mb']:.0f} MB, "
        f"{v['maintenance_workers']} parallel workers), VACUUM ANALYZE "
        f"{ph['vacuum_analyze']:.1f} s" + (" (reused)" if r.get("reused_vectors") else "") + ".",
        "",
        "| variant (dense on) | p50 | p95 | mean results |",
        "|---|---|---|---|",
        row("gated recall, a subject (embedding excluded)", "dense_subject"),
        row("gated recall, no subject (embedding excluded)", "dense_no_subject"),
        f"| the query's embedding alone | {r['p50_ms_embed']:.2f} ms "
        f"| {r['p95_ms_embed']:.2f} ms | |",
        f"| gated recall with its embedding, a subject / no subject "
        f"| {r['p50_ms_dense_subject_with_embed']:.2f} / "
        f"{r['p50_ms_dense_no_subject_with_embed']:.2f} ms "
        f"| {r['p95_ms_dense_subject_with_embed']:.2f} / "
        f"{r['p95_ms_dense_no_subject_with_embed']:.2f} ms | |",
        row("dense baseline: ungated tenant-filtered HNSW top-10", "baseline_dense"),
        f"| both baselines, summed per query | {r['p50_ms_baseline_hybrid']:.2f} ms | | |",
        "",
        "| ratio (dense on, embedding excluded) | value |",
        "|---|---|",
        f"| gated p50 with a subject / dense baseline p50 | **{r['ratio_dense_subject']:.2f}** |",
        f"| gated p50 without a subject / dense baseline p50 "
        f"| **{r['ratio_dense_no_subject']:.2f}** |",
        f"| the same / full-text baseline p50 (with, without a subject) "
        f"| {r['ratio_dense_subject_fts']:.2f}, {r['ratio_dense_no_subject_fts']:.2f} |",
        f"| gated p50 without a subject / both baselines summed p50 "
        f"| {r['ratio_dense_no_subject_hybrid']:.2f} |",
        "",
        f"Dense candidates without a subject: {paths}. The HNSW baseline "
        + ("uses" if r["baseline_dense_uses_hnsw"] else "does **not** use")
        + f" the index; its recall@10 against the exact top-10: mean "
        f"{r['baseline_dense_recall_at_10']:.3f}, min {r['baseline_dense_recall_at_10_min']:.2f}.",
        "",
        "Cut-over sweep (p50, ms, 20 queries, as the application role): the exact top 100 "
        "of the first n items the caller may see, and the HNSW statement (k = 100).",
        "",
        "| " + " | ".join(f"exact {n}" for n in SWEEP_SIZES) + " | HNSW |",
        "|" + "---|" * (len(SWEEP_SIZES) + 1),
        "| "
        + " | ".join(f"{r['sweep_p50_ms'][str(n)]:.2f}" for n in SWEEP_SIZES)
        + f" | {r['sweep_p50_ms']['hnsw']:.2f} |",
    ]


def main(argv: list[str]) -> int:
    """Run the benchmark; print its JSON object or its Markdown report."""
    parser = argparse.ArgumentParser(prog="python -m bench recall")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--cap", type=int, default=1000, help="full-text candidate cap")
    parser.add_argument("--warmup", type=int, default=5, help="unmeasured queries first")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--keep", metavar="DIR", help="keep (and reuse) the store in DIR")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.add_argument(
        "--dense", action="store_true", help="embed every item; measure the dense channel too"
    )
    parser.add_argument(
        "--embedder", choices=("minilm", "hashing"), default="minilm", help="with --dense"
    )
    parser.add_argument(
        "--passages",
        type=int,
        default=0,
        help="knowledge passages in the measured tenant; times sources: [memory, knowledge]",
    )
    bench_corpus.add_argument(parser)
    args = parser.parse_args(argv)
    bench_corpus.from_args(parser, args)
    if args.passages < 0:
        parser.error("--passages must be >= 0")
    result = run(
        args.items,
        args.queries,
        args.seed,
        args.cap,
        keep=args.keep,
        warmup=args.warmup,
        show=not args.quiet,
        dense=args.embedder if args.dense else None,
        passages=args.passages,
    )
    print(json.dumps(result) if args.json else markdown(result, argv))
    return 0
