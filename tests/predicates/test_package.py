"""The public surface, the grammar as package data, and the grammar cache."""

from __future__ import annotations

import inspect
import os
import stat
import tempfile
from pathlib import Path

import pytest

import predicates
from predicates import SQL_EVALUATOR_DDL, parse
from predicates import _parser as facade

PUBLIC = {
    "Applicability",
    "Attribute",
    "CompiledPredicate",
    "Duration",
    "OPS_BY_TYPE",
    "Observed",
    "ObservedLike",
    "Op",
    "Predicate",
    "SQL_EVALUATOR_DDL",
    "Scalar",
    "TYPE_NAMES",
    "Truth",
    "TypedValue",
    "Value",
    "ValueType",
    "Version",
    "applicability",
    "applicability_sql",
    "check_type",
    "coerce",
    "compile_predicate",
    "condition_json",
    "decode",
    "duration_literal",
    "encode",
    "parse",
    "to_sql",
    "to_text",
    "typed_literal",
}


def test_public_surface_is_pinned() -> None:
    assert set(predicates.__all__) == PUBLIC
    for name in PUBLIC:
        assert hasattr(predicates, name), name


def test_every_public_callable_has_a_docstring() -> None:
    for name in PUBLIC:
        obj = getattr(predicates, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj), name
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if inspect.isfunction(member) and not attr.startswith("_"):
                    assert inspect.getdoc(member), f"{name}.{attr}"


def test_predicates_imports_nothing_else_of_caveat() -> None:
    package = Path(predicates.__file__).parent
    for source in package.glob("*.py"):
        text = source.read_text()
        for other in ("factgen", "claims", "lifecycle", "recall", "caveat"):
            assert f"import {other}" not in text and f"from {other}" not in text, source


def test_grammar_is_package_data_with_named_operator_rules() -> None:
    grammar = facade.grammar_text()
    assert grammar.startswith("//")
    for op in predicates.Op:
        assert f"op_{op.value}:" in grammar


def test_parser_is_built_once() -> None:
    assert facade._parser() is facade._parser()
    options = facade._parser().options
    assert options.parser == "lalr"
    assert options.propagate_positions is True


def test_grammar_builds_in_strict_mode() -> None:
    pytest.importorskip("interegular")
    assert facade._parser().options.strict is True


def test_grammar_cache_lives_in_a_private_temp_directory() -> None:
    path = facade._cache_path(facade.grammar_text(), True)
    assert path is not None
    directory = Path(path).parent
    assert directory.parent == Path(tempfile.gettempdir())
    assert stat.S_IMODE(directory.stat().st_mode) & 0o077 == 0


def test_unusable_temp_directory_disables_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    monkeypatch.setattr(tempfile, "tempdir", str(not_a_dir))
    assert facade._cache_path(facade.grammar_text(), True) is None
    built = facade._parser.__wrapped__()
    assert built.parse("x eq 1") is not None


def test_shared_cache_directory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    uid = os.getuid()
    shared = tmp_path / f"caveat-predicates-{uid}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    assert facade._cache_path(facade.grammar_text(), True) is None


def test_corrupt_cache_file_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    path = facade._cache_path(facade.grammar_text(), facade._strict_available())
    assert path is not None
    Path(path).write_bytes(b"garbage\x00\x01")
    built = facade._parser.__wrapped__()
    tree = built.parse("x eq 1")
    assert tree.data == "compare"
    again = facade._parser.__wrapped__()
    assert again.parse("x in [1]").data == "member"


def test_parse_does_not_write_into_the_package_directory() -> None:
    package = Path(predicates.__file__).parent
    before = sorted(p.name for p in package.iterdir())
    parse("x eq 1")
    after = sorted(p.name for p in package.iterdir())
    assert before == after


def test_sql_text_is_safe_for_any_driver() -> None:
    assert "%" not in SQL_EVALUATOR_DDL
    assert 'COLLATE "C"' in SQL_EVALUATOR_DDL  # code point order, whatever the database locale
    for name in ("caveat_eval(cond jsonb, obs jsonb)", "caveat_applies(conditions jsonb"):
        assert f"CREATE OR REPLACE FUNCTION {name}" in SQL_EVALUATOR_DDL
