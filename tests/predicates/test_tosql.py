"""``to_sql`` / ``applicability_sql`` as a user of them meets them: over table columns,
with SQLAlchemy's named parameters, with hostile strings, and against the plpgsql path."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from predicates import (
    SQL_EVALUATOR_DDL,
    Truth,
    ValueType,
    applicability_sql,
    compile_predicate,
    condition_json,
    encode,
    parse,
    to_sql,
)
from predicates.errors import InputError

SNAPSHOTS = [
    ("payment-api", {"payment-api": {"pool.max": encode(250, ValueType("int"))}}),
    ("payment-api", {"payment-api": {"pool.max": encode(20, ValueType("int"))}}),
    ("payment-api", {"payment-api": {"pool.max": encode(20.0, ValueType("float"))}}),
    ("payment-api", {"payment-api": {}}),
    ("payment-api", {}),
    ("checkout", {"payment-api": {"pool.max": encode(250, ValueType("int"))}}),
]


def _cp(text: str, vtype: str) -> Any:
    return compile_predicate(parse(text), ValueType.parse(vtype))


@pytest.fixture
def table(pg_conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    pg_conn.execute(SQL_EVALUATOR_DDL)
    pg_conn.execute("CREATE TABLE snaps (i int PRIMARY KEY, subject text, snap jsonb)")
    for i, (subject, snap) in enumerate(SNAPSHOTS):
        pg_conn.execute(
            "INSERT INTO snaps VALUES (%s, %s, %s::jsonb)", (i, subject, json.dumps(snap))
        )
    return pg_conn


def test_compiled_predicate_over_columns_agrees_with_python_and_plpgsql(
    table: psycopg.Connection[Any],
) -> None:
    cp = _cp("pool.max gte 200", "int")
    sql, params = to_sql(cp, snapshot="snap", subject="subject", paramstyle="pyformat")
    rows = table.execute(
        f"SELECT {sql}, caveat_eval(%(c)s::jsonb, snap -> subject -> 'pool.max') "
        "FROM snaps ORDER BY i",
        {**params, "c": json.dumps(condition_json(cp))},
    ).fetchall()
    got = [Truth.of(r[0]) for r in rows]
    assert got == [
        Truth.TRUE,
        Truth.FALSE,
        Truth.UNKNOWN,
        Truth.UNKNOWN,
        Truth.UNKNOWN,
        Truth.UNKNOWN,
    ]
    assert [Truth.of(r[1]) for r in rows] == got


def test_named_parameters_work_with_sqlalchemy_and_strings_never_reach_the_text(
    pg_dsn: str,
) -> None:
    hostile = "a'; DROP TABLE snaps; -- :x %(y)s"
    cp = _cp(f"owner eq {json.dumps(hostile)}", "string")
    sql, params = to_sql(cp, snapshot="CAST(:snap AS jsonb)", subject=":subject")
    assert hostile not in sql and "DROP" not in sql
    assert list(params.values()) == [hostile]
    engine = sa.create_engine(pg_dsn.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            snap = {"svc": {"owner": encode(hostile, ValueType("string"))}}
            value = conn.execute(
                sa.text(f"SELECT {sql}"), {**params, "snap": json.dumps(snap), "subject": "svc"}
            ).scalar_one()
    finally:
        engine.dispose()
    assert value is True


def test_an_entity_condition_reads_the_resolved_entity(table: psycopg.Connection[Any]) -> None:
    cp = _cp("@payments_api:pool.max exists", "int")
    sql, params = to_sql(
        cp,
        snapshot="snap",
        subject="subject",
        paramstyle="pyformat",
        resolve_entity=lambda name: "payment-api",
    )
    rows = table.execute(f"SELECT {sql} FROM snaps ORDER BY i", params).fetchall()
    assert [r[0] for r in rows] == [True, True, None, False, False, True]


def test_applicability_sql_never_grants_unknown(table: psycopg.Connection[Any]) -> None:
    required = [_cp("pool.max gte 200", "int")]
    excluded = [_cp("pool.max eq 250", "int")]
    for req, exc, expected in [
        (required, [], [True, False, False, False, False, False]),
        ([], required, [False, True, False, False, False, False]),
        (required, excluded, [False] * 6),
        ([], [], [True] * 6),
    ]:
        sql, params = applicability_sql(
            req, exc, snapshot="snap", subject="subject", paramstyle="pyformat"
        )
        rows = table.execute(f"SELECT {sql} FROM snaps ORDER BY i", params).fetchall()
        assert [r[0] for r in rows] == expected, sql


def test_parameter_names_follow_the_prefix_and_bad_options_are_refused() -> None:
    sql, params = to_sql(_cp('x in ["a", "b"]', "string"), prefix="c3_")
    assert set(params) == {"c3_0", "c3_1"} and ":c3_0" in sql
    sql, params = to_sql(_cp("x gte v15.10", "version"))
    assert params == {} and "15" in sql and "10" in sql
    with pytest.raises(InputError):
        to_sql(_cp("x eq 1", "int"), prefix="1bad")
    with pytest.raises(InputError):
        to_sql(_cp("x eq 1", "int"), paramstyle="qmark")  # type: ignore[arg-type]


def test_versions_with_unstripped_trailing_zeros_compare_like_plpgsql(
    pg_conn: psycopg.Connection[Any],
) -> None:
    pg_conn.execute(SQL_EVALUATOR_DDL)
    cases = [
        ("x eq v15", [15, 0, 0]),
        ("x lt v15.0.1", [15, 0, 0, 0]),
        ("x gt v15", [15, 0, 0, 2]),
        ("x in [v14, v15.1]", [15, 1, 0]),
    ]
    for text, raw in cases:
        cp = _cp(text, "version")
        sql, params = to_sql(cp, snapshot="%(snap)s::jsonb", subject="'s'", paramstyle="pyformat")
        snap = json.dumps({"s": {"x": {"t": "version", "v": raw}}})
        compiled, interpreted = pg_conn.execute(
            f"SELECT {sql}, caveat_eval(%(c)s::jsonb, %(snap)s::jsonb -> 's' -> 'x')",
            {**params, "snap": snap, "c": json.dumps(condition_json(cp))},
        ).fetchone()  # type: ignore[misc]
        assert compiled is True and interpreted is True, text
