"""Figure 4 of issue 14, the hypothesis part: hostile input through the application layer.

For predicate strings (the parser and the write gate's G2), scenario files,
config documents, Prometheus expositions, CloudEvents, and nasty strings in
every string a use case takes (NUL bytes, lone surrogates, control
characters, 1 MB values, JSON nested 10,000 deep), every example proves:

- no crash: the call returns, or raises a ``CaveatError`` with a stable
  ``code`` (a snake_case word); any other exception fails the test;
- a refused input writes no row: every table but the audit log (rejections
  are audited, model §3.2) holds as many rows after the refusal as before;
- the tenant's audit chain verifies (``caveat.app.audit_verify``) after it.

Everything runs as the application's login role (``caveat_app``) through
``caveat.app``; the owner only counts rows. Examples per test:
``CAVEAT_FUZZ_EXAMPLES`` (``make test``: 60; ``make fuzz``: 500), derandomized,
so a run is reproducible. docs/reliability.md, section 4, has the figures.
"""

from __future__ import annotations

import copy
import functools
import io
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

import claims
import factgen
import predicates
from caveat import app as use
from caveat import db
from caveat.replay import parse_scenario
from predicates import ValueType
from predicates.errors import CaveatError
from tests.caveat._doors import PRECEDENT, world
from tests.caveat._fuzz_queries import row_counts
from tests.conftest import ADMIN

T = TypeVar("T")

EXAMPLES = int(os.environ.get("CAVEAT_FUZZ_EXAMPLES", "60"))

#: Bounded, reproducible: a fixed number of examples, derandomized (the seed is the
#: test's own), no example database, no deadline (the database sets the pace).
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)

SCENARIOS = sorted((Path(__file__).parents[2] / "scenarios").glob("*.yaml"))
CODE = re.compile(r"[a-z][a-z0-9_]*")
NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


# --- nasty strings --------------------------------------------------------------------


def deep_json(depth: int = 10_000) -> str:
    """A JSON document nested ``depth`` levels (objects and arrays alternating)."""
    return '{"a":[' * (depth // 2) + "1" + "]}" * (depth // 2)


def deep_value(depth: int = 10_000) -> object:
    """A Python value nested ``depth`` levels, built without recursion."""
    value: object = 1
    for n in range(depth):
        value = {"a": value} if n % 2 else [value]
    return value


MEGABYTE = "x" * 1_000_000
NASTY_STRINGS = [
    "\x00",
    "payment-api\x00",
    "\ud800",
    "a\udfffb",
    "\x01\x02\x1b[31m\x7f\x9f",
    "\t\n\r\x0b\x0c",
    "\u202epayment-api",
    "\ufeff",
    "",
    " ",
    "'; DROP TABLE items; --",
    "%s%n%x",
    "\\",
    '"',
    "💥" * 10,
    MEGABYTE,
    "é" * 500_000,
    "[" * 10_000,
    deep_json(),
]

nasty = st.one_of(
    st.sampled_from(NASTY_STRINGS),
    st.text(max_size=30),
    st.text(alphabet=st.characters(codec=None, categories=["Cc", "Cs", "Zl", "Zp"]), max_size=10),
    st.tuples(
        st.sampled_from(["payment-api", "E-1", "INC-1"]), st.sampled_from(NASTY_STRINGS[:9])
    ).map("".join),
)


# --- the world and the invariants -----------------------------------------------------


@dataclass
class Fuzz:
    """A tenant set up through the application layer as caveat_app, and the owner's
    engine that counts rows."""

    rt: use.Runtime
    owner: sa.Engine
    refused: int = 0
    done: int = 0
    codes: Counter[str] = field(default_factory=Counter)
    messages: dict[str, str] = field(default_factory=dict)
    #: The row counts after the last call (nothing else writes in between).
    counts: dict[str, int] | None = None

    def call(self, what: Callable[[], T], *, verify: bool = True) -> T | CaveatError:
        """Run ``what``: a result, or its typed refusal having written no row; either
        way the audit chain verifies afterwards (``verify``; else the caller verifies
        at the end of its run). Any other exception propagates."""
        before = self.counts if self.counts is not None else row_counts(self.owner)
        self.counts = None
        try:
            result: T | CaveatError = what()
        except CaveatError as exc:
            assert isinstance(exc.code, str) and CODE.fullmatch(exc.code), repr(exc.code)
            # the database is up: bad input is the caller's error, never the database's
            assert exc.code != "database_unavailable", str(exc)
            after = self.counts = row_counts(self.owner)
            grown = {t: (before[t], after[t]) for t in after if after[t] != before.get(t)}
            assert not grown, f"refused ({exc.code}) but wrote rows: {grown}"
            str(exc), exc.to_dict()  # rendering a refusal must not crash either
            self.refused += 1
            self.codes[exc.code] += 1
            self.messages.setdefault(exc.code, str(exc)[:300])
            result = exc
        else:
            self.done += 1
            self.counts = row_counts(self.owner)
        if verify:
            self.verify()
        return result

    def verify(self) -> None:
        report = use.audit_verify(self.rt, ADMIN)
        assert report.ok, report


SCHEMA = [
    factgen.AttributeSpec("metrics.pool_utilisation", ValueType.parse("float")),
    factgen.AttributeSpec("env.postgres.version", ValueType.parse("version")),
    factgen.AttributeSpec("config.timeout", ValueType.parse("duration")),
    factgen.AttributeSpec("config.deploy.region", ValueType.parse("string")),
    factgen.AttributeSpec("config.feature.enabled", ValueType.parse("bool")),
    factgen.AttributeSpec("deploy.at", ValueType.parse("timestamp")),
]


@pytest.fixture
def fuzz(db_url: str) -> Iterator[Fuzz]:
    """One database for the whole test function; each example checks its own rows."""
    engine = db.make_app_engine(db_url)
    owner = db.make_engine(db_url)
    rt = use.Runtime.over(engine, "acme")
    try:
        world(rt)
        use.declare_schema(rt, ADMIN, SCHEMA)
        use.import_entities(rt, ADMIN, [factgen.EntitySpec("payments-db", "database")])
        use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"])
        assert row_counts(owner)["entities"] == 2, "the owner must count every tenant's rows"
        f = Fuzz(rt, owner)
        yield f
        assert use.audit_verify(rt, ADMIN).ok
        if os.environ.get("CAVEAT_FUZZ_STATS"):  # for docs/reliability.md: what got through
            print(f" done={f.done} refused={f.refused} {dict(f.codes)} {f.messages}", end=" ")
    finally:
        engine.dispose()
        owner.dispose()


def item_write(**fields: Any) -> claims.ItemWrite | None:
    """An item request as a door would validate it; None when its schema refuses it
    (the door answers that with its own validation error before any use case)."""
    base: dict[str, Any] = {**PRECEDENT, **fields}
    try:
        return claims.ItemWrite.model_validate(base)
    except pydantic.ValidationError:
        return None


# --- 1. predicate strings ---------------------------------------------------------------

ATTRIBUTES = [
    "config.connection_pool.max",
    "metrics.pool_utilisation",
    "env.postgres.version",
    "config.timeout",
    "config.deploy.region",
    "config.feature.enabled",
    "deploy.at",
    "config.thread_pool.max",
    "@payments-db:env.postgres.version",
    "@nowhere:config.connection_pool.max",
    "a" * 5000,
]
OPERATORS = ["eq", "ne", "lt", "lte", "gt", "gte", "in", "not_in", "contains", "matches", "exists"]
LITERALS = [
    "20",
    "-1",
    "0",
    "2.5",
    "-0.0",
    "99999999999999999999999999999999",
    "1" * 5000,
    "1e309",
    "v15.10",
    "v" + ".".join(["9" * 30] * 50),
    "30s",
    "99999999999999999999d",
    "2026-03-01T09:00:00Z",
    "9999-12-31T23:59:59.999999999+14:00",
    "0000-00-00T00:00:00Z",
    '"eu-west-1"',
    '"(a+)+$"',
    '"[[[[["',
    '"\\u0000"',
    '"\\ud800"',
    '"\\x"',
    "true",
    "false",
    '["a", "b"]',
    "[1, 2.5, v1]",
    "[]",
    "[" * 2000 + "1" + "]" * 2000,
]
PUNCTUATION = ["[", "]", ",", "@", ":", '"', "\\", "(", ")", "\n", "\x00", "\ud800"]

VALID_PREDICATES = [
    "config.connection_pool.max eq 20",
    "config.connection_pool.max gte -5",
    "metrics.pool_utilisation lt 0.9",
    "@payments-db:env.postgres.version lt v15.10",
    "config.timeout lte 30s",
    'config.deploy.region in ["eu-west-1", "eu-central-1"]',
    'config.deploy.region matches "^eu-"',
    "config.feature.enabled eq true",
    "deploy.at gt 2026-03-01T09:00:00Z",
    "config.deploy.region exists",
]

predicate_text = st.one_of(
    st.sampled_from(VALID_PREDICATES),
    st.tuples(
        st.sampled_from(ATTRIBUTES),
        st.sampled_from(OPERATORS),
        st.one_of(st.sampled_from(LITERALS), st.text(max_size=20).map(json.dumps)),
    ).map(" ".join),
    st.lists(st.sampled_from(ATTRIBUTES + OPERATORS + LITERALS + PUNCTUATION), max_size=7).map(
        " ".join
    ),
    st.text(max_size=80),
    nasty,
)


@FUZZ
@given(text=predicate_text)
def test_predicate_strings_parse_or_refuse_typed(text: str) -> None:
    try:
        parsed = predicates.parse(text)
    except CaveatError as exc:
        assert CODE.fullmatch(exc.code)
        str(exc), exc.to_dict()
        return
    assert predicates.parse(predicates.to_text(parsed)) == parsed


@FUZZ
@given(required=st.lists(predicate_text, min_size=1, max_size=3), excluded=st.booleans())
def test_predicate_strings_through_the_write_gate(
    fuzz: Fuzz, required: list[str], excluded: bool
) -> None:
    request = item_write(
        required=required if not excluded else ["config.connection_pool.max eq 20"],
        excluded=required if excluded else [],
    )
    if request is None:
        return
    result = fuzz.call(lambda: use.write(fuzz.rt, ADMIN, request))
    if isinstance(result, CaveatError):  # the gate judged it, not the database
        assert result.code in claims.REASON_GATES, str(result)


# --- 2. scenario files ------------------------------------------------------------------


@functools.cache
def _scenario_texts() -> tuple[str, ...]:
    return tuple(p.read_text() for p in SCENARIOS)


@functools.cache
def _scenario_data() -> tuple[object, ...]:
    yaml = YAML(typ="safe")
    return tuple(yaml.load(text) for text in _scenario_texts())


def _dump(data: object, as_json: bool) -> str:
    if as_json:
        return json.dumps(data, default=str, ensure_ascii=False)
    out = io.StringIO()
    yaml = YAML(typ="safe")
    yaml.default_flow_style = False
    yaml.dump(data, out)
    return out.getvalue()


JUNK: list[object] = [
    None,
    True,
    -1,
    2**70,
    1e309,
    "",
    "\x00",
    "\ud800",
    MEGABYTE,
    [],
    {},
    [None],
    {"": None},
    "2026-13-45T99:99:99Z",
    "-5m",
    "9999999999999999d",
    {"write": None},
]


@st.composite
def mutated_scenario(draw: st.DrawFn) -> str:
    """A valid scenario with a few of its values replaced, keys dropped or added, and
    dumped as YAML or JSON; or its text with bytes cut out or spliced in."""
    paths = SCENARIOS
    index = draw(st.integers(0, len(paths) - 1))
    if draw(st.booleans()):
        text = _scenario_texts()[index]
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(text)))
            cut = draw(st.integers(0, 40))
            splice = draw(st.one_of(st.sampled_from(NASTY_STRINGS[:14]), st.text(max_size=10)))
            text = text[:at] + splice + text[at + cut :]
        return text
    data = copy.deepcopy(_scenario_data()[index])
    for _ in range(draw(st.integers(1, 4))):
        node: Any = data
        while True:
            children = (
                list(node.keys())
                if isinstance(node, dict)
                else list(range(len(node)))
                if isinstance(node, list)
                else []
            )
            if not children or draw(st.integers(0, 3)) == 0:
                break
            key = draw(st.sampled_from(children))
            child = node[key]
            if not isinstance(child, dict | list) or draw(st.integers(0, 4)) == 0:
                action = draw(st.sampled_from(["replace", "delete", "add"]))
                if action == "replace":
                    node[key] = draw(st.one_of(st.sampled_from(JUNK), nasty))
                elif action == "delete" and isinstance(node, dict):
                    del node[key]
                elif action == "delete":
                    node.pop(key)
                elif isinstance(node, dict):
                    node[draw(nasty)] = draw(st.sampled_from(JUNK))
                else:
                    node.append(draw(st.sampled_from(JUNK)))
                break
            node = child
    return _dump(data, draw(st.booleans()))


@FUZZ
@given(text=st.one_of(mutated_scenario(), st.text(max_size=200), nasty))
def test_scenario_text_parses_or_refuses_typed(text: str) -> None:
    try:
        parse_scenario(text, "fuzz.yaml")
    except CaveatError as exc:
        assert exc.code == "scenario_invalid", exc.code
        str(exc), exc.to_dict()


def test_the_scenarios_themselves_parse() -> None:
    """The mutations start from valid files (else the test above proves less)."""
    assert len(SCENARIOS) >= 5
    for path in SCENARIOS:
        parse_scenario(path.read_text(), str(path))


# --- 3. config documents ----------------------------------------------------------------

keys = st.one_of(
    st.sampled_from(
        [
            "connection_pool",
            "max",
            "timeout",
            "deploy",
            "region",
            "feature",
            "enabled",
            "config",
            "config.connection_pool.max",
            "",
        ]
    ),
    nasty,
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.sampled_from(["30s", "eu-west-1", "v1.2", "2026-03-01T09:00:00Z", "true", "-1"]),
    nasty,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=4)),
    max_leaves=12,
)


@st.composite
def config_document(draw: st.DrawFn) -> tuple[str, str]:
    data = draw(json_values)
    if draw(st.booleans()):
        data = {"connection_pool": {"max": data}}
    if draw(st.integers(0, 2)) == 0:  # a valid document, one leaf perhaps replaced
        valid: dict[str, Any] = {
            "connection_pool": {"max": draw(st.integers(-(2**31), 2**31))},
            "timeout": "30s",
            "deploy": {"region": draw(st.text(max_size=10))},
            "feature": {"enabled": draw(st.booleans())},
        }
        section = draw(st.sampled_from(["connection_pool", "deploy", "feature", "timeout"]))
        if draw(st.booleans()):
            valid[section] = data
        data = valid
    form = draw(st.sampled_from(["json", "yaml", "text"]))
    if form == "text":
        return draw(st.one_of(st.text(max_size=200), nasty)), draw(
            st.sampled_from(["fuzz.json", "fuzz.yaml"])
        )
    if form == "json":
        return json.dumps(data, allow_nan=True), "fuzz.json"
    try:
        return _dump(data, False), "fuzz.yaml"
    except Exception:
        return json.dumps(data, allow_nan=True), "fuzz.yaml"


def mostly(value: str) -> Callable[[int], st.SearchStrategy[str]]:
    """``value`` three times in four, a nasty string otherwise (for ``flatmap``)."""
    return lambda n: nasty if n == 0 else st.just(value)


@FUZZ
@given(doc=config_document(), subject=st.integers(0, 3).flatmap(mostly("payment-api")))
def test_config_documents(fuzz: Fuzz, doc: tuple[str, str], subject: str) -> None:
    text, name = doc
    fuzz.call(
        lambda: use.import_facts(
            fuzz.rt, ADMIN, format="config", text=text, source_name=name, subject=subject
        )
    )


def test_a_config_document_nested_ten_thousand_deep(fuzz: Fuzz) -> None:
    for text, name in (
        (deep_json(), "deep.json"),
        ("a:\n" + "".join(" " * n + "- \n" for n in range(1, 300)), "deep.yaml"),
        ("[" * 10_000 + "]" * 10_000, "deep.yaml"),
        ("{a: " * 10_000 + "1" + "}" * 10_000, "deep.yaml"),
    ):
        result = fuzz.call(
            lambda: use.import_facts(
                fuzz.rt, ADMIN, format="config", text=text, source_name=name, subject="payment-api"
            )
        )
        assert isinstance(result, CaveatError | use.ImportOutcome)


# --- 4. Prometheus expositions ---------------------------------------------------------

RULES = [
    factgen.MetricRule(
        metric="pool_utilisation", attribute="metrics.pool_utilisation", subject_label="service"
    ),
    factgen.MetricRule(
        metric="pool_max", attribute="config.connection_pool.max", subject="payment-api"
    ),
    factgen.MetricRule(
        metric="pg_static",
        attribute="env.postgres.version",
        subject="payments-db",
        value_label="short_version",
    ),
    factgen.MetricRule(metric="deployed_at", attribute="deploy.at"),
    factgen.MetricRule(metric="feature", attribute="config.feature.enabled"),
]
metric_names = st.one_of(
    st.sampled_from([r.metric for r in RULES] + ["unmapped_total", "a:b", "_"]), nasty
)
label_values = st.one_of(
    st.sampled_from(["payment-api", "payment_api", "payments-db", "v15.10", "nope"]), nasty
)
numbers = st.one_of(
    st.sampled_from(["0", "1", "20", "-1", "NaN", "+Inf", "-Inf", "1e309", "0.5", "1e18"]),
    st.floats().map(repr),
    st.integers().map(str),
    nasty,
)


@st.composite
def exposition(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 4)) == 0:
        return draw(st.one_of(st.text(max_size=200), nasty))
    lines = []
    for _ in range(draw(st.integers(0, 5))):
        name = draw(metric_names)
        labels = draw(
            st.dictionaries(
                st.one_of(st.sampled_from(["service", "short_version", "pool"]), nasty),
                label_values,
                max_size=3,
            )
        )
        shown = ",".join(f'{k}="{v}"' for k, v in labels.items())
        line = f"{name}{{{shown}}} {draw(numbers)}" if labels else f"{name} {draw(numbers)}"
        if draw(st.booleans()):
            line += " " + draw(
                st.one_of(st.integers(-(2**63), 2**63).map(str), st.sampled_from(["1e30", "x"]))
            )
        if draw(st.integers(0, 5)) == 0:
            line = draw(st.sampled_from(["# TYPE ", "# HELP ", "# "])) + line
        lines.append(line)
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n# EOF\n"]))


@FUZZ
@given(text=exposition(), subject=st.one_of(st.none(), st.just("payment-api"), nasty))
def test_prometheus_expositions(fuzz: Fuzz, text: str, subject: str | None) -> None:
    fuzz.call(
        lambda: use.import_facts(
            fuzz.rt,
            ADMIN,
            format="prometheus",
            text=text,
            source_name="fuzz.prom",
            rules=RULES,
            subject=subject,
        )
    )


# --- 5. CloudEvents -------------------------------------------------------------------

_counter = iter(range(10**9))


@st.composite
def cloud_event(draw: st.DrawFn) -> object:
    def maybe(value: st.SearchStrategy[Any]) -> Any:
        return (
            draw(st.one_of(value, st.sampled_from(JUNK), nasty))
            if draw(st.integers(0, 3)) == 0
            else draw(value)
        )

    event: dict[str, Any] = {
        "specversion": maybe(st.just("1.0")),
        "id": maybe(st.just(f"ev-{next(_counter)}")),
        "source": maybe(st.just("ci/payments")),
        "type": maybe(
            st.sampled_from(
                [
                    "com.example.deploy",
                    "config-change",
                    "io.x.version_change",
                    "authorization",
                    "com.example.other",
                ]
            )
        ),
    }
    if draw(st.booleans()):
        event["time"] = maybe(
            st.sampled_from(["2026-03-01T09:00:00Z", "2026-03-01T09:00:00.123456789+02:00"])
        )
    if draw(st.booleans()):
        event["subject"] = maybe(st.just("payment-api"))
    if draw(st.booleans()):
        event["datacontenttype"] = maybe(st.just("application/json"))
    event["data"] = maybe(
        st.fixed_dictionaries(
            {},
            optional={
                "subjects": st.one_of(st.just(["payment-api"]), st.lists(label_values, max_size=3)),
                "changes": st.one_of(
                    st.sampled_from(
                        [{}, {"config.connection_pool.max": 100}, {"config.timeout": "5m"}]
                    ),
                    st.dictionaries(
                        st.one_of(st.sampled_from([s.attribute for s in SCHEMA]), nasty),
                        json_values,
                        max_size=3,
                    ),
                ),
                "principal": label_values,
            },
        )
    )
    if draw(st.integers(0, 7)) == 0:
        event.pop(draw(st.sampled_from(list(event))))
    return event


@st.composite
def cloudevents_text(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.one_of(st.text(max_size=200), nasty))
    if kind == 1:
        return json.dumps(draw(json_values))
    events = draw(st.lists(cloud_event(), min_size=1, max_size=3))
    return json.dumps(events[0] if kind == 2 else events, allow_nan=True)


@FUZZ
@given(text=cloudevents_text(), subject=st.one_of(st.none(), st.just("payment-api"), nasty))
def test_cloudevents(fuzz: Fuzz, text: str, subject: str | None) -> None:
    fuzz.call(
        lambda: use.import_facts(
            fuzz.rt,
            ADMIN,
            format="cloudevents",
            text=text,
            source_name="fuzz.json",
            subject=subject,
        )
    )


def test_cloudevents_nested_ten_thousand_deep(fuzz: Fuzz) -> None:
    deep_change = (
        '{"specversion": "1.0", "id": "d", "source": "s", "type": "deploy",'
        ' "subject": "payment-api", "data": {"changes": {"config.deploy.region": '
        + "[" * 10_000
        + "]" * 10_000
        + "}}}"
    )
    for text in (deep_json(), "[" * 10_000 + "]" * 10_000, deep_change):
        fuzz.call(
            lambda: use.import_facts(
                fuzz.rt, ADMIN, format="cloudevents", text=text, source_name="deep.json"
            )
        )


# --- 5b. hook deliveries -----------------------------------------------------------------

PAYLOADS = Path(__file__).parents[1] / "connectors" / "payloads"
HOOK_PAYLOADS = sorted(PAYLOADS.glob("*.json"))
HOOK_KINDS = ["alertmanager", "github", "cloudevents", "pagerduty"]
HOOKS_YAML = """\
hooks:
  alertmanager: {subject_labels: [service, instance]}
  github:
    repositories: {acme/payments@production: [payment-api], acme/payments: [payments-db]}
    secret_env: CAVEAT_FUZZ_GITHUB_SECRET
  pagerduty:
    services: {PF9KMXH: [payment_api]}
    secret_env: CAVEAT_FUZZ_PD_SECRET
  cloudevents:
    types: {dev.argocd.sync.succeeded: deploy}
"""
HEADER_NAMES = [
    "content-type",
    "authorization",
    "x-github-event",
    "x-github-delivery",
    "x-hub-signature-256",
    "x-pagerduty-signature",
    "ce-specversion",
    "ce-id",
    "ce-source",
    "ce-type",
    "ce-time",
    "ce-subject",
    "ce-",
]
HEADER_VALUES = [
    "application/cloudevents+json",
    "application/cloudevents-batch+json",
    "application/json",
    "text/plain",
    "deployment_status",
    "ping",
    "1.0",
    "0.3",
    "com.example.deploy",
    "2027-01-01T00:00:00Z",
    "not a time",
    "Bearer cvt1.YWNtZQ.x.y",
    "Bearer ",
    "Basic x",
    "sha256=" + "0" * 64,
    "v1=,v1=zz",
]


def _mutated(draw: st.DrawFn, node: Any, depth: int = 0) -> Any:
    """``node`` with some members replaced by junk, dropped, or kept."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            roll = draw(st.integers(0, 9))
            if roll == 0:
                continue
            out[key] = (
                draw(st.sampled_from(JUNK)) if roll == 1 else _mutated(draw, value, depth + 1)
            )
        return out
    if isinstance(node, list):
        return [_mutated(draw, v, depth + 1) for v in node] + draw(
            st.lists(json_values, max_size=1)
        )
    if draw(st.integers(0, 5)) == 0:
        return draw(st.one_of(st.sampled_from(JUNK), nasty, json_values))
    return node


hook_headers = st.dictionaries(
    st.one_of(st.sampled_from(HEADER_NAMES), st.text(max_size=10)),
    st.one_of(st.sampled_from(HEADER_VALUES), st.text(max_size=20)),
    max_size=2,
)


#: the headers each kind's sender sends with its recorded payloads
BASE_HEADERS = {
    "alertmanager": {"content-type": "application/json"},
    "github": {"x-github-event": "deployment_status", "x-github-delivery": "d"},
    "cloudevent": {"content-type": "application/cloudevents+json"},
    "pagerduty": {"content-type": "application/json"},
}
KIND_OF = {"cloudevent": "cloudevents"}


@st.composite
def hook_delivery(draw: st.DrawFn) -> tuple[str, bytes, dict[str, str]]:
    """(kind, body, headers): mostly a recorded payload, perhaps mutated, to its own
    kind with its sender's headers; sometimes junk anywhere."""
    path = draw(st.sampled_from(HOOK_PAYLOADS))
    prefix = path.stem.split("-", 1)[0]
    kind = KIND_OF.get(prefix, prefix)
    if draw(st.integers(0, 7)) == 0:
        kind = draw(st.one_of(st.sampled_from(HOOK_KINDS), nasty))
    headers = dict(BASE_HEADERS[prefix]) if draw(st.integers(0, 4)) else {}
    headers |= draw(hook_headers)
    roll = draw(st.integers(0, 9))
    if roll == 0:
        body = draw(st.binary(max_size=200))
    elif roll == 1:
        body = draw(nasty).encode("utf-8", "surrogatepass")
    elif roll == 2:
        body = json.dumps(draw(json_values)).encode()
    else:
        recorded = json.loads(path.read_text())
        node = _mutated(draw, recorded) if roll > 5 else recorded
        body = json.dumps(node, allow_nan=True).encode("utf-8", "surrogatepass")
    return kind, body, headers


@pytest.fixture
def hooked_fuzz(fuzz: Fuzz, monkeypatch: pytest.MonkeyPatch) -> Fuzz:
    monkeypatch.setenv("CAVEAT_FUZZ_GITHUB_SECRET", "s")
    monkeypatch.setenv("CAVEAT_FUZZ_PD_SECRET", "s")
    use.declare_schema(
        fuzz.rt, ADMIN, [factgen.AttributeSpec("alert.PoolExhausted", ValueType.parse("bool"))]
    )
    use.load_sources(fuzz.rt, ADMIN, HOOKS_YAML)
    fuzz.counts = None
    return fuzz


@FUZZ
@given(delivery=hook_delivery(), trusted=st.sampled_from([True, True, True, False]))
def test_hook_deliveries(
    hooked_fuzz: Fuzz, delivery: tuple[str, bytes, dict[str, str]], trusted: bool
) -> None:
    """Any body and headers to any hook: acted on, or refused typed with no row written;
    trusted (replay, ``caveat hooks post``) or authenticated by its own headers."""
    from caveat import connectors

    kind, body, headers = delivery
    actor = use.source_actor(kind) if trusted else None
    hooked_fuzz.call(
        lambda: connectors.receive(hooked_fuzz.rt, kind, body=body, headers=headers, trusted=actor)
    )


def test_hook_bodies_nested_ten_thousand_deep(hooked_fuzz: Fuzz) -> None:
    from caveat import connectors

    ce = {"content-type": "application/cloudevents+json"}
    for kind, headers in (("alertmanager", {}), ("cloudevents", ce), ("pagerduty", {})):
        for text in (deep_json(), "[" * 10_000 + "]" * 10_000):
            hooked_fuzz.call(
                lambda: connectors.receive(
                    hooked_fuzz.rt,
                    kind,
                    body=text.encode(),
                    headers=headers,
                    trusted=use.source_actor(kind),
                )
            )


# --- 6. nasty strings everywhere a string goes in -------------------------------------

DEEP = deep_value()


def _doors(rt: use.Runtime, s: str, v: object) -> list[tuple[str, Callable[[], object]]]:
    """Every use case that takes a string, with ``s`` in one of its strings (and ``v``
    as the value of an observation or a change)."""
    out: list[tuple[str, Callable[[], object]]] = []
    for name in ("subject", "attribute", "text", "object", "content_type"):
        request = item_write(**{name: s})
        if request is not None:
            out.append((f"write.{name}", functools.partial(use.write, rt, ADMIN, request)))
    for door, value in (
        ("evidence", [s]),
        ("entities", [s]),
        ("scope", {"axis": "case", "id": s}),
        ("scope.axis", {"axis": s, "id": "x"}),
        ("object.any", v),
        ("required", [f"config.deploy.region eq {json.dumps(s)}"]),
    ):
        request = item_write(**{door.split(".")[0]: value})
        if request is not None:
            out.append((f"write.{door}", functools.partial(use.write, rt, ADMIN, request)))
    out += [
        ("open_case.id", lambda: use.open_case(rt, ADMIN, s, subjects=["payment-api"])),
        ("open_case.subjects", lambda: use.open_case(rt, ADMIN, "INC-N", subjects=[s])),
        ("add_evidence.id", lambda: use.add_evidence(rt, ADMIN, s)),
        ("add_evidence.title", lambda: use.add_evidence(rt, ADMIN, "E-N", title=s, uri=s)),
        ("add_evidence.readers", lambda: use.add_evidence(rt, ADMIN, "E-R", readers=[s])),
        (
            "observe.subject",
            lambda: use.observe(
                rt, ADMIN, [factgen.Observation(s, "config.deploy.region", "eu", "t")]
            ),
        ),
        (
            "observe.attribute",
            lambda: use.observe(rt, ADMIN, [factgen.Observation("payment-api", s, "eu", "t")]),
        ),
        (
            "observe.value",
            lambda: use.observe(
                rt, ADMIN, [factgen.Observation("payment-api", "config.deploy.region", s, "t")]
            ),
        ),
        (
            "observe.value.any",
            lambda: use.observe(
                rt, ADMIN, [factgen.Observation("payment-api", "config.deploy.region", v, "t")]
            ),
        ),
        (
            "observe.source",
            lambda: use.observe(
                rt, ADMIN, [factgen.Observation("payment-api", "config.deploy.region", "eu", s)]
            ),
        ),
        (
            "event.type",
            lambda: use.record_event(rt, ADMIN, type=s, subjects=["payment-api"]),
        ),
        (
            "event.subjects",
            lambda: use.record_event(rt, ADMIN, type="deploy", subjects=[s]),
        ),
        (
            "event.changes.key",
            lambda: use.record_event(
                rt, ADMIN, type="config_change", subjects=["payment-api"], changes={s: 1}
            ),
        ),
        (
            "event.changes.value",
            lambda: use.record_event(
                rt,
                ADMIN,
                type="config_change",
                subjects=["payment-api"],
                changes={"config.deploy.region": v},
            ),
        ),
        (
            "event.principal",
            lambda: use.record_event(
                rt, ADMIN, type="authorisation", subjects=["payment-api"], principal=s
            ),
        ),
        (
            "event.source",
            lambda: use.record_event(rt, ADMIN, type="deploy", subjects=["payment-api"], source=s),
        ),
        ("cite.case", lambda: use.cite(rt, ADMIN, s, 1, influence="decisive")),
        ("cite.influence", lambda: use.cite(rt, ADMIN, "INC-1", 1, influence=s)),
        ("close_case.id", lambda: use.close_case(rt, ADMIN, s, outcome="confirmed")),
        ("authenticate", lambda: use.authenticate(rt, s)),
        ("revoke_token", lambda: use.revoke_token(rt, ADMIN, s)),
        (
            "import_entities",
            lambda: use.import_entities(rt, ADMIN, [factgen.EntitySpec(s, "service", (s,))]),
        ),
        (
            "register_principal",
            lambda: use.register_principal(rt, ADMIN, s, role="agent", capabilities=[s]),
        ),
        ("create_token", lambda: use.create_token(rt, ADMIN, s, role="agent")),
        ("audit_entries.by", lambda: use.audit_entries(rt, ADMIN, by=s, code=s, action=s)),
        ("refute.reason", lambda: use.refute(rt, ADMIN, 1, reason=s)),
        ("tenant", lambda: use.declare_tenant(rt.for_tenant(s), ADMIN)),
    ]
    return out


DOOR_NAMES = [name for name, _ in _doors(None, "x", 1)]  # type: ignore[arg-type]
#: The doors that take ``v``, any value, rather than a string.
VALUE_DOORS = {"write.object.any", "observe.value.any", "event.changes.value"}
#: The strings every door gets in ``make test``; ``make fuzz`` gives each every one.
EXHAUSTIVE = NASTY_STRINGS if EXAMPLES >= 200 else ["\x00", "\ud800", NASTY_STRINGS[4], MEGABYTE]


#: Values (of an observation, a change, an item's object), by a short name: hypothesis
#: cannot print a value nested 10,000 deep when it reports a failing example.
VALUES: dict[str, object] = {
    "deep": DEEP,
    "deep-990": deep_value(990),
    "megabyte": MEGABYTE,
    "nul": "\x00",
    "surrogate": "\ud800",
    "nul-key": {"\x00": 1},
    "surrogate-key": {"\ud800": [1]},
    "inf": 1e309,
    "nan": float("nan"),
    "big": 2**80,
    "huge": 10**5000,
    "bytes": b"\x00\xff",
}


@FUZZ
@given(
    door=st.sampled_from(sorted(set(DOOR_NAMES))),
    s=nasty,
    v=st.one_of(st.sampled_from(sorted(VALUES)), nasty),
)
def test_nasty_strings_everywhere(fuzz: Fuzz, door: str, s: str, v: str) -> None:
    for name, call in _doors(fuzz.rt, s, VALUES.get(v, v)):
        if name == door:
            fuzz.call(call)


def test_every_nasty_string_at_every_door(fuzz: Fuzz) -> None:
    """NUL, a lone surrogate, control characters and a megabyte in every string of every
    door, and every odd value in every door that takes a value (``make fuzz``: every
    string of the fixed list; the hypothesis test above samples them all)."""
    for s in EXHAUSTIVE:
        for _, call in _doors(fuzz.rt, s, s):
            fuzz.call(call, verify=False)
    for value in VALUES.values():
        for name, call in _doors(fuzz.rt, "x-value", value):
            if name in VALUE_DOORS:
                fuzz.call(call, verify=False)
    fuzz.verify()
    assert fuzz.refused > 0 and fuzz.done > 0


def test_a_refusal_writes_nothing_and_an_acceptance_something(fuzz: Fuzz) -> None:
    """The harness can fail: a write that is accepted adds rows, one that is refused
    adds none (and the count sees rows of the tenant the owner does not act for)."""
    before = row_counts(fuzz.owner)
    ok = item_write()
    assert ok is not None
    assert not isinstance(fuzz.call(lambda: use.write(fuzz.rt, ADMIN, ok)), CaveatError)
    assert row_counts(fuzz.owner)["items"] == before["items"] + 1
    bad = item_write(required=["when the pool is busy"])
    assert bad is not None
    refused = fuzz.call(lambda: use.write(fuzz.rt, ADMIN, bad))
    assert isinstance(refused, CaveatError) and refused.code == "condition_unparsable"
