"""Kleene's strong three-valued logic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from predicates import Truth

T, F, U = Truth.TRUE, Truth.FALSE, Truth.UNKNOWN
truths = st.sampled_from(list(Truth))

AND_TABLE = {
    (T, T): T, (T, U): U, (T, F): F,
    (U, T): U, (U, U): U, (U, F): F,
    (F, T): F, (F, U): F, (F, F): F,
}  # fmt: skip
OR_TABLE = {
    (T, T): T, (T, U): T, (T, F): T,
    (U, T): T, (U, U): U, (U, F): U,
    (F, T): T, (F, U): U, (F, F): F,
}  # fmt: skip


@pytest.mark.parametrize(("pair", "expected"), AND_TABLE.items())
def test_and_truth_table(pair: tuple[Truth, Truth], expected: Truth) -> None:
    a, b = pair
    assert a.and_(b) is expected
    assert (a & b) is expected


@pytest.mark.parametrize(("pair", "expected"), OR_TABLE.items())
def test_or_truth_table(pair: tuple[Truth, Truth], expected: Truth) -> None:
    a, b = pair
    assert a.or_(b) is expected
    assert (a | b) is expected


def test_not_table() -> None:
    assert T.not_() is F and F.not_() is T and U.not_() is U
    assert ~T is F and ~U is U


@given(truths, truths)
def test_commutativity(a: Truth, b: Truth) -> None:
    assert a.and_(b) is b.and_(a)
    assert a.or_(b) is b.or_(a)


@given(truths, truths, truths)
def test_associativity(a: Truth, b: Truth, c: Truth) -> None:
    assert a.and_(b).and_(c) is a.and_(b.and_(c))
    assert a.or_(b).or_(c) is a.or_(b.or_(c))


@given(truths, truths, truths)
def test_distributivity(a: Truth, b: Truth, c: Truth) -> None:
    assert a.and_(b.or_(c)) is a.and_(b).or_(a.and_(c))
    assert a.or_(b.and_(c)) is a.or_(b).and_(a.or_(c))


@given(truths, truths)
def test_de_morgan(a: Truth, b: Truth) -> None:
    assert a.and_(b).not_() is a.not_().or_(b.not_())
    assert a.or_(b).not_() is a.not_().and_(b.not_())


@given(truths)
def test_identities_double_negation_and_idempotence(a: Truth) -> None:
    assert a.not_().not_() is a
    assert a.and_(T) is a and a.or_(F) is a
    assert a.and_(F) is F and a.or_(T) is T
    assert a.and_(a) is a and a.or_(a) is a


@given(truths)
def test_unknown_propagates_unless_absorbed(a: Truth) -> None:
    assert U.and_(a) is (F if a is F else U)
    assert U.or_(a) is (T if a is T else U)


def test_excluded_middle_does_not_hold_for_unknown() -> None:
    assert U.or_(U.not_()) is U
    assert U.and_(U.not_()) is U


@given(st.lists(truths, max_size=6))
def test_all_and_any_fold(values: list[Truth]) -> None:
    expected_all = T
    expected_any = F
    for v in values:
        expected_all = expected_all.and_(v)
        expected_any = expected_any.or_(v)
    assert Truth.all(values) is expected_all
    assert Truth.any(values) is expected_any
    assert Truth.all(iter(values)) is expected_all


def test_empty_folds() -> None:
    assert Truth.all([]) is T
    assert Truth.any([]) is F


def test_of_and_to_bool_mirror_sql_booleans() -> None:
    assert Truth.of(True) is T and Truth.of(False) is F and Truth.of(None) is U
    assert [t.to_bool() for t in (T, F, U)] == [True, False, None]


@pytest.mark.parametrize("t", list(Truth))
def test_truth_is_not_a_python_bool(t: Truth) -> None:
    with pytest.raises(TypeError):
        bool(t)
    with pytest.raises(TypeError):
        if t:  # pragma: no cover - raises
            pass


def test_truth_renders_as_its_name() -> None:
    assert str(U) == "UNKNOWN"
    assert Truth("TRUE") is T
