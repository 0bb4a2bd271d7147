"""Properties of the Prometheus mapping (``prometheus.map_answer``, a pure function of
an answer, the attribute's config and the tenant's world): for random label sets,
aliases, value types, NaN, ±Inf, huge values and missing labels, every sample is
either stored under the subject its label resolves to or refused with a reason; never
stored under a guessed subject; the counts add up. No network, no database: the world
is built in memory."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import factgen
from caveat.connectors import prometheus
from caveat.connectors._map import resolve_pointer
from predicates import ValueType

SUFFIXES = ("prod", "staging")
ENTITIES = {
    "payment-api": ("payment_api", "paymentapi-prod", "PaymentAPI"),
    "payments-db": ("pgdb",),
    "orders-db": (),
}
ATTR = "metrics.x"
VTYPES = ("float", "int", "bool", "duration", "timestamp", "string")
NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def world(vtype: str) -> factgen.World:
    aliases = {
        factgen.normalise(name, SUFFIXES): entity
        for entity, names in ENTITIES.items()
        for name in (entity, *names)
    }
    return factgen.World(
        "t",
        factgen.TenantPolicy(),
        factgen.SchemaRegistry([factgen.AttributeSpec(ATTR, ValueType.parse(vtype))]),
        factgen.Resolver(aliases, SUFFIXES),
        factgen.Topology(),
    )


KNOWN = [n for entity, names in ENTITIES.items() for n in (entity, *names)]
label_values = st.one_of(
    st.sampled_from(KNOWN),
    st.sampled_from(["paymnet-api", "payment-api-eu", "unknown", "", "payments-db-staging"]),
    st.text(min_size=0, max_size=12),
)
values = st.one_of(
    st.sampled_from(["NaN", "+Inf", "-Inf", "0", "1", "1e308", "-1e308", "1e400", "2", "-3"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
)
label_sets = st.dictionaries(
    st.sampled_from(["service", "job", "instance", "pool"]), label_values, max_size=4
)
samples = st.lists(st.tuples(label_sets, values), max_size=12)


def answer(items: list[tuple[dict[str, str], str]]) -> dict[str, Any]:
    stamp = NOW.timestamp()
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": labels, "value": [stamp, value]} for labels, value in items],
        },
    }


SPEC = factgen.SourceAttribute(attribute=ATTR, query="q", subject_label="service")
FIXED = factgen.SourceAttribute(attribute=ATTR, query="q", subject="paymentapi-prod")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=samples, vtype=st.sampled_from(VTYPES))
def test_every_sample_is_stored_under_its_resolved_subject_or_refused_with_a_reason(
    items: list[tuple[dict[str, str], str]], vtype: str
) -> None:
    w = world(vtype)
    stored, refused = prometheus.map_answer(answer(items), source="s", attribute=SPEC, world=w)

    # the counts add up: one outcome per sample
    assert len(stored) + len(refused) == len(items)
    codes = Counter(r.code for r in refused)
    assert set(codes) <= {
        "label_missing",
        "subject_unresolved",
        "not_finite",
        "fact_type_mismatch",
        "ambiguous",
    }
    # a missing label, or a label no alias answers to, is never stored
    assert codes["label_missing"] == sum("service" not in labels for labels, _ in items)
    unresolved = [
        labels["service"]
        for labels, _ in items
        if "service" in labels and w.resolver.lookup(labels["service"]) is None
    ]
    assert codes["subject_unresolved"] == len(unresolved)
    # stored only under the subject a sample's own label resolves to, once per subject
    resolved = Counter(
        w.resolver.lookup(labels["service"]) for labels, _ in items if "service" in labels
    )
    subjects = [o.subject for o in stored]
    assert len(subjects) == len(set(subjects))
    for obs in stored:
        assert resolved[obs.subject] == 1  # its one sample: two or more are ambiguous
        assert obs.subject in ENTITIES
        assert obs.observed_at == NOW
        assert obs.provenance == {
            "source": "s",
            "kind": "prometheus",
            "query": "q",
            "sample_time": NOW.isoformat(),
        }
    # what is kept types as the schema says, so store_pull stores it
    typed = factgen.type_observations(w, stored, NOW)
    assert [t.subject for t in typed] == subjects
    for t in typed:
        assert not (isinstance(t.value, float) and not math.isfinite(t.value))
    # a subject with one sample: stored, or refused for its value; with two: none kept
    by_subject: dict[str, list[str]] = {}
    for labels, value in items:
        canonical = w.resolver.lookup(labels["service"]) if "service" in labels else None
        if canonical is not None:
            by_subject.setdefault(canonical, []).append(value)
    for canonical, vals in by_subject.items():
        if len(vals) > 1 or not math.isfinite(float(vals[0])):
            assert canonical not in subjects


@settings(max_examples=100, deadline=None)
@given(items=samples)
def test_a_fixed_subject_takes_one_sample_and_refuses_two(
    items: list[tuple[dict[str, str], str]],
) -> None:
    w = world("float")
    stored, refused = prometheus.map_answer(answer(items), source="s", attribute=FIXED, world=w)
    assert len(stored) + len(refused) == len(items)
    assert all(o.subject == "payment-api" for o in stored)
    finite = [v for _, v in items if math.isfinite(float(v))]
    codes = Counter(r.code for r in refused)
    assert codes["not_finite"] == len(items) - len(finite)
    if len(items) == 1 and finite:
        assert [o.value for o in stored] == [float(finite[0])]
    if len(items) > 1:  # two samples on one subject: none is kept, a NaN among them too
        assert stored == []
        assert codes["ambiguous"] == len(finite)


@settings(max_examples=200, deadline=None)
@given(
    document=st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        max_leaves=10,
    )
)
def test_every_pointer_into_a_document_finds_its_value(document: object) -> None:
    def walk(node: object, pointer: str) -> list[tuple[str, object]]:
        out = [(pointer, node)]
        if isinstance(node, dict):
            for key, child in node.items():
                escaped = key.replace("~", "~0").replace("/", "~1")
                out += walk(child, f"{pointer}/{escaped}")
        elif isinstance(node, list):
            for index, child in enumerate(node):
                out += walk(child, f"{pointer}/{index}")
        return out

    for pointer, value in walk(document, ""):
        assert resolve_pointer(document, pointer) == value
