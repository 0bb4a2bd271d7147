"""Differential tests: the plpgsql evaluator against the Python one, on PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from predicates import (
    OPS_BY_TYPE,
    SQL_EVALUATOR_DDL,
    TYPE_NAMES,
    CompiledPredicate,
    Observed,
    Op,
    Predicate,
    Truth,
    ValueType,
    applicability,
    applicability_sql,
    compile_predicate,
    condition_json,
    decode,
    encode,
    parse,
    to_sql,
)
from predicates._regex import RegexError, compile_pattern
from tests.predicates.strategies import (
    ENUM_CHOICES,
    random_literal,
    random_pattern,
    random_string,
    random_value,
)

PAIRS_PER_SEED = 10_000
ITEMS_PER_SEED = 3_000
FIXED_SEED = 20261130
_MISSING = object()
_JSON_NULL = object()


def _seeds() -> list[int]:
    chosen = os.environ.get("CAVEAT_PREDICATES_SEED")
    if chosen:
        return [int(chosen)]
    # a fresh seed each run; under pytest-xdist the same one in every worker (their
    # collections must agree), drawn from the run's id
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run:
        return [FIXED_SEED, int(hashlib.sha256(run.encode()).hexdigest(), 16) % 2**32]
    return [FIXED_SEED, random.SystemRandom().randrange(2**32)]


SEEDS = _seeds()


@pytest.fixture
def db(pg_conn: psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    pg_conn.execute(SQL_EVALUATOR_DDL)
    yield pg_conn


CHUNK = 250


def _compiled(
    db: psycopg.Connection[Any],
    cases: list[tuple[Any, str, dict[str, Any]]],
    compile_one: Any,
) -> list[bool | None]:
    """Evaluate compiled expressions, each on its own snapshot; results in order.

    ``cases`` are ``(thing, subject, snapshot)``; ``compile_one(thing, snapshot=..., subject=...,
    prefix=...)`` returns ``(sql, params)`` in pyformat style.
    """
    out: list[bool | None] = []
    for start in range(0, len(cases), CHUNK):
        rows = []
        params: dict[str, Any] = {}
        for i, (thing, subject, snapshot) in enumerate(cases[start : start + CHUNK]):
            params[f"s{i}"] = json.dumps(snapshot)
            params[f"u{i}"] = subject
            text, p = compile_one(
                thing,
                snapshot=f"CAST(%(s{i})s AS jsonb)",
                subject=f"CAST(%(u{i})s AS text)",
                paramstyle="pyformat",
                prefix=f"q{i}_",
            )
            rows.append(f"({i}, {text})")
            params.update(p)
        sql = f"SELECT v.r FROM (VALUES {', '.join(rows)}) AS v(i, r) ORDER BY v.i"
        out.extend(r for (r,) in db.execute(sql, params).fetchall())  # type: ignore[arg-type]
    return out


def _vtype(name: str) -> ValueType:
    return ValueType("enum", ENUM_CHOICES) if name == "enum" else ValueType(name)


def random_condition(rng: random.Random, name: str, path: str = "x") -> CompiledPredicate:
    """A random well-typed condition on ``path`` for type ``name``."""
    vtype = _vtype(name)
    op = rng.choice(sorted(OPS_BY_TYPE[name]))
    value: Any
    if op is Op.EXISTS:
        value = None
    elif op in (Op.IN, Op.NOT_IN):
        value = tuple(random_literal(rng, name) for _ in range(rng.randint(1, 4)))
    elif op is Op.MATCHES:
        value = random_pattern(rng)
    elif op is Op.CONTAINS:
        value = random_string(rng, 2)
    else:
        value = random_literal(rng, name)
    return compile_predicate(Predicate(parse(f"{path} exists").attribute, op, value), vtype)


def random_observation(rng: random.Random, name: str) -> Any:
    """Mostly a value of ``name``; sometimes missing, JSON null or of another type."""
    r = rng.random()
    if r < 0.07:
        return _MISSING
    if r < 0.10:
        return _JSON_NULL
    if r < 0.22:
        other = rng.choice([t for t in TYPE_NAMES if t != name])
        return Observed(random_value(rng, other), _vtype(other))
    return Observed(random_value(rng, name), _vtype(name))


def _python(cp: CompiledPredicate, observation: Any) -> Truth:
    return cp(observation if isinstance(observation, Observed) else None)


def _doc(cp: CompiledPredicate, observation: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"c": condition_json(cp)}
    if observation is _JSON_NULL:
        doc["o"] = None
    elif isinstance(observation, Observed):
        doc["o"] = encode(observation.value, observation.vtype)
    return doc


def _show(cp: CompiledPredicate, observation: Any) -> str:
    if isinstance(observation, Observed):
        shown = f"{observation.value!r}: {observation.vtype}"
    else:
        shown = "missing" if observation is _MISSING else "JSON null"
    return f"{cp.text!r} [{cp.vtype}] against {shown}"


@pytest.mark.parametrize("seed", SEEDS)
def test_caveat_eval_agrees_with_python(db: psycopg.Connection[Any], seed: int) -> None:
    rng = random.Random(seed)
    pairs = []
    for _ in range(PAIRS_PER_SEED):
        name = rng.choice(TYPE_NAMES)
        cp = random_condition(rng, name)
        pairs.append((cp, random_observation(rng, name)))
    payload = json.dumps([_doc(cp, o) for cp, o in pairs])
    rows = db.execute(
        "SELECT caveat_eval(p -> 'c', p -> 'o') "
        "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS t(p, i) ORDER BY i",
        (payload,),
    ).fetchall()
    assert len(rows) == len(pairs)
    disagreements = []
    coverage: Counter[tuple[str, Truth]] = Counter()
    for (cp, o), (sql,) in zip(pairs, rows, strict=True):
        expected = _python(cp, o)
        coverage[cp.vtype.name, expected] += 1
        if Truth.of(sql) is not expected:
            disagreements.append(f"{_show(cp, o)}: python {expected}, sql {Truth.of(sql)}")
    # the same pairs, compiled to plain SQL expressions by ``to_sql``
    cases = []
    for cp, o in pairs:
        doc = _doc(cp, o)
        cases.append((cp, "svc", {"svc": {"x": doc["o"]} if "o" in doc else {}}))
    compiled = _compiled(db, cases, to_sql)
    for (cp, o), sql in zip(pairs, compiled, strict=True):
        expected = _python(cp, o)
        if Truth.of(sql) is not expected:
            disagreements.append(f"{_show(cp, o)}: python {expected}, to_sql {Truth.of(sql)}")
    assert not disagreements, (
        f"seed {seed} (rerun with CAVEAT_PREDICATES_SEED={seed}): "
        f"{len(disagreements)} disagreements, e.g.\n" + "\n".join(disagreements[:10])
    )
    for name in TYPE_NAMES:
        for truth in Truth:
            assert coverage[name, truth] >= 20, f"too few {truth} for {name}: {coverage}"


ATTRIBUTES = [("a.x", "int"), ("a.y", "float"), ("b.z", "string"), ("v", "version")]
ATTRIBUTES += [("d", "duration"), ("e", "enum"), ("f", "bool"), ("t", "timestamp")]
SUBJECTS = ["svc", "db1", "db2"]


def _random_item(rng: random.Random) -> dict[str, Any]:
    def cond() -> tuple[CompiledPredicate, dict[str, Any]]:
        path, name = rng.choice(ATTRIBUTES)
        cp = random_condition(rng, name, path)
        entity = rng.choice([None, None, "db1", "db2"])
        if entity is not None:
            cp = compile_predicate(
                Predicate(
                    parse(f"@{entity}:{path} exists").attribute, cp.predicate.op, cp.predicate.value
                ),
                cp.vtype,
            )
        return cp, condition_json(cp)

    required = [cond() for _ in range(rng.randint(0, 3))]
    excluded = [cond() for _ in range(rng.randint(0, 2))]
    snapshot: dict[str, dict[str, Any]] = {}
    for subject in SUBJECTS:
        if rng.random() < 0.1:
            continue
        facts: dict[str, Any] = {}
        for path, name in ATTRIBUTES:
            if rng.random() < 0.8:
                o = random_observation(rng, name)
                if isinstance(o, Observed):
                    facts[path] = encode(o.value, o.vtype)
                elif o is _JSON_NULL:
                    facts[path] = None
        snapshot[subject] = facts
    return {
        "required": required,
        "excluded": excluded,
        "snapshot": snapshot,
        "subject": rng.choice([*SUBJECTS, "ghost"]),
    }


def applies_payload(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``_random_item``s as SQL reads them: ``c`` the conditions document, ``s`` the
    snapshot, ``u`` the subject."""
    return [
        {
            "c": {
                "required": [doc for _, doc in item["required"]],
                "excluded": [doc for _, doc in item["excluded"]],
            },
            "s": item["snapshot"],
            "u": item["subject"],
        }
        for item in items
    ]


def _python_applies(item: dict[str, Any]) -> bool:
    snapshot, subject = item["snapshot"], item["subject"]

    def lookup(cp: CompiledPredicate) -> Observed | None:
        encoded = snapshot.get(cp.attribute.entity or subject, {}).get(cp.attribute.path)
        if encoded is None:
            return None
        value, vtype = decode(encoded)
        return Observed(value, vtype)

    required = [cp for cp, _ in item["required"]]
    excluded = [cp for cp, _ in item["excluded"]]
    return applicability(required, excluded, lookup).applies


@pytest.mark.parametrize("seed", SEEDS)
def test_caveat_applies_agrees_with_python(db: psycopg.Connection[Any], seed: int) -> None:
    rng = random.Random(seed)
    items = [_random_item(rng) for _ in range(ITEMS_PER_SEED)]
    payload = json.dumps(applies_payload(items))
    rows = db.execute(
        "SELECT caveat_applies(p -> 'c', p -> 's', p ->> 'u') "
        "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS t(p, i) ORDER BY i",
        (payload,),
    ).fetchall()
    results = [sql for (sql,) in rows]
    assert None not in results
    compiled = _compiled(
        db,
        [(item, item["subject"], item["snapshot"]) for item in items],
        lambda item, **kw: applicability_sql(
            [cp for cp, _ in item["required"]], [cp for cp, _ in item["excluded"]], **kw
        ),
    )
    assert None not in compiled
    disagreements = [
        (item, f"plpgsql {sql}, to_sql {sql2}")
        for item, sql, sql2 in zip(items, results, compiled, strict=True)
        if not _python_applies(item) == sql == sql2
    ]
    assert not disagreements, (
        f"seed {seed} (rerun with CAVEAT_PREDICATES_SEED={seed}): {len(disagreements)} items "
        f"disagree, e.g. {[cp.text for cp, _ in disagreements[0][0]['required']]}"
    )
    assert results.count(True) >= ITEMS_PER_SEED // 20
    assert results.count(False) >= ITEMS_PER_SEED // 20


def test_caveat_applies_never_grants_unknown(db: psycopg.Connection[Any]) -> None:
    cond = condition_json(compile_predicate(parse("pool.max gte 200"), ValueType("int")))
    absent = condition_json(compile_predicate(parse("incident.open exists"), ValueType("bool")))
    snapshot = {"svc": {"pool.max": encode(300, ValueType("int"))}}

    def applies(required: list[Any], excluded: list[Any], snap: Any, subject: Any) -> Any:
        conditions = {"required": required, "excluded": excluded}
        return db.execute(
            "SELECT caveat_applies(%s::jsonb, %s::jsonb, %s)",
            (json.dumps(conditions), json.dumps(snap), subject),
        ).fetchone()[0]  # type: ignore[index]

    assert applies([cond], [], snapshot, "svc") is True
    assert applies([cond], [], snapshot, "other") is False
    assert applies([cond], [], None, "svc") is False
    assert applies([cond], [], snapshot, None) is False
    assert applies([], [cond], {}, "svc") is False
    assert applies([], [absent], {}, "svc") is True
    assert applies([], [], None, None) is True
    mistyped = {"svc": {"pool.max": encode(300.0, ValueType("float"))}}
    assert applies([cond], [], mistyped, "svc") is False
    assert applies([], [cond], mistyped, "svc") is False
    row = db.execute("SELECT caveat_applies(NULL, NULL, NULL)").fetchone()
    assert row == (True,)
    row = db.execute("SELECT caveat_applies('[1]'::jsonb, '{}'::jsonb, 'svc')").fetchone()
    assert row == (False,)


def test_caveat_eval_edge_cases(db: psycopg.Connection[Any]) -> None:
    cond = json.dumps(condition_json(compile_predicate(parse("x exists"), ValueType("int"))))
    rows = db.execute(
        "SELECT caveat_eval(%s::jsonb, NULL), caveat_eval(%s::jsonb, 'null'::jsonb), "
        'caveat_eval(%s::jsonb, \'{"t": "int", "v": 1}\'::jsonb), '
        'caveat_eval(%s::jsonb, \'{"t": "float", "v": 1}\'::jsonb), '
        "caveat_eval(NULL, NULL)",
        (cond, cond, cond, cond),
    ).fetchone()
    assert rows == (False, False, True, None, None)


def test_sql_functions_are_immutable_and_parallel_safe(db: psycopg.Connection[Any]) -> None:
    rows = db.execute(
        "SELECT proname, provolatile, proparallel FROM pg_proc "
        "WHERE proname IN ('caveat_eval', 'caveat_applies') ORDER BY proname"
    ).fetchall()
    assert rows == [("caveat_applies", "i", "s"), ("caveat_eval", "i", "s")]
    db.execute(SQL_EVALUATOR_DDL)  # CREATE OR REPLACE: idempotent


_REGEX_ALPHABET = [*"ab()[]{}|*+?.^$\\-,012:=!<ndé", "\\.", "[a-b]", "(?:"]
_SUBJECT_ALPHABET = list("ab\n-.[]{}|*+?^$\\,012:é")


def test_portable_regex_subset_agrees_with_postgresql(db: psycopg.Connection[Any]) -> None:
    """Fuzz: every pattern the parser accepts compiles in PostgreSQL and matches alike."""
    rng = random.Random(SEEDS[-1])
    cases: list[tuple[str, str, bool]] = []
    accepted = 0
    for _ in range(6000):
        source = "".join(rng.choice(_REGEX_ALPHABET) for _ in range(rng.randint(1, 8)))
        try:
            pattern = compile_pattern(source)
        except RegexError:
            continue
        accepted += 1
        for _ in range(6):
            subject = "".join(rng.choice(_SUBJECT_ALPHABET) for _ in range(rng.randint(0, 6)))
            cases.append((source, subject, pattern.search(subject)))
    assert accepted >= 300
    payload = json.dumps([[s, p] for p, s, _ in cases])
    try:
        rows = db.execute(
            "SELECT (p ->> 0) ~ (p ->> 1) "
            "FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS t(p, i) ORDER BY i",
            (payload,),
        ).fetchall()
    except psycopg.Error:
        for source in sorted({p for p, _, _ in cases}):
            try:
                db.execute("SELECT '' ~ %s", (source,))
            except psycopg.Error as exc:
                pytest.fail(
                    f"seed {SEEDS[-1]}: PostgreSQL refuses accepted pattern {source!r}: {exc}"
                )
        raise
    wrong = [
        (p, s, expected)
        for (p, s, expected), (sql,) in zip(cases, rows, strict=True)
        if sql is not expected
    ]
    assert not wrong, f"seed {SEEDS[-1]}: {len(wrong)} disagreements, e.g. {wrong[:5]}"
