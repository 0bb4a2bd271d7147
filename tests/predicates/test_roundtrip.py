"""Printing and parsing round-trip; arbitrary text never crashes the parser."""

from __future__ import annotations

import pickle
from dataclasses import replace

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from predicates import Predicate, parse, to_text
from predicates.errors import PredicateSyntaxError
from tests.predicates.strategies import predicates

_SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(predicates())
def test_parse_of_printed_ast_is_the_ast(p: Predicate) -> None:
    assert parse(to_text(p)) == p


@_SETTINGS
@given(predicates())
def test_printing_is_canonical(p: Predicate) -> None:
    text = to_text(p)
    assert to_text(parse(text)) == text
    assert "  " not in text.split('"')[0]


@_SETTINGS
@given(predicates())
def test_equal_predicates_print_identically(p: Predicate) -> None:
    copy = replace(p)
    assert copy == p and hash(copy) == hash(p)
    assert to_text(copy) == to_text(p)
    assert pickle.loads(pickle.dumps(p)) == p


@_SETTINGS
@given(predicates(), st.sampled_from([" ", "\t", "\n", "  \n "]))
def test_extra_whitespace_does_not_change_the_predicate(p: Predicate, ws: str) -> None:
    text = to_text(p)
    head, _, tail = text.partition(f" {p.op.value}")
    assert parse(f"{ws}{head}{ws}{p.op.value}{tail}{ws}") == p


@settings(max_examples=1500, deadline=None)
@given(st.text())
@example("")
@example("x eq")
@example("@")
@example('"')
@example('x matches "(((((((((((((((((((((((((((((((((((((((((((((((((((((a"')
@example("x in [" + "1," * 3000)
def test_arbitrary_text_only_raises_syntax_errors(text: str) -> None:
    try:
        p = parse(text)
    except PredicateSyntaxError as err:
        assert err.line >= 1 and err.column >= 1
        err.caret()
    else:
        assert parse(to_text(p)) == p


_ALPHABET = st.sampled_from(
    [*'abxyz.@:-_0123456789 []",\\vTZ+eqnltgsimhdu', "eq", "in", "exists", "matches", "\n"]
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_ALPHABET, max_size=30).map("".join))
def test_near_miss_text_only_raises_syntax_errors(text: str) -> None:
    try:
        p = parse(text)
    except PredicateSyntaxError as err:
        assert 1 <= err.line <= text.count("\n") + 2
        assert err.column >= 1
    else:
        assert to_text(parse(to_text(p))) == to_text(p)
