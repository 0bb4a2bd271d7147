"""The portable regex subset: what is refused, and the DFA against Python's ``re``."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from predicates._regex import RegexError, compile_pattern, to_python
from tests.predicates.strategies import patterns


@pytest.mark.parametrize(
    "pattern",
    [
        "",
        "abc",
        "^pg-[0-9]+$",
        "a|b|c",
        "(ab)+c?",
        "(?:ab){2,3}",
        "x{0}",
        "x{2,}",
        "[^\\]\\-\\[\\\\]",
        "[a-zA-Z_][a-zA-Z0-9_]*",
        "\\.\\*\\+\\?\\(\\)\\{\\}\\|\\^\\$\\/",
        "\\n\\t\\r",
        "é+😀",
        "a^b",
        "(^a|b$)",
    ],
)
def test_portable_patterns_compile(pattern: str) -> None:
    assert compile_pattern(pattern).source == pattern


@pytest.mark.parametrize(
    ("pattern", "position"),
    [
        ("\\d+", 0),
        ("a\\w", 1),
        ("\\s", 0),
        ("\\bword\\b", 0),
        ("\\1", 0),
        ("\\", 0),
        ("(?i)abc", 0),
        ("(?=a)", 0),
        ("(?<=a)b", 0),
        ("(?P<n>a)", 0),
        ("a*?", 2),
        ("a++", 2),
        ("a{2}{3}", 4),
        ("*a", 0),
        ("a|*", 2),
        ("{2}", 0),
        ("a{", 1),
        ("a{x}", 1),
        ("a{,3}", 1),
        ("a{3,1}", 1),
        ("a{256}", 1),
        ("a]", 1),
        ("a}", 1),
        ("(", 0),
        ("a)", 1),
        ("()", 0),
        ("a||b", 1),
        ("|a", 0),
        ("^*", 1),
        ("(^a)*", 4),
        ("[]", 0),
        ("[^]", 0),
        ("[a", 0),
        ("[a-]", 2),
        ("[-a]", 1),
        ("[[:alpha:]]", 1),
        ("[z-a]", 2),
        ("[\\d]", 1),
        ("\\q", 0),
    ],
)
def test_non_portable_patterns_are_refused_with_a_position(pattern: str, position: int) -> None:
    with pytest.raises(RegexError) as info:
        compile_pattern(pattern)
    assert info.value.position == position


def test_pattern_size_is_bounded() -> None:
    with pytest.raises(RegexError):
        compile_pattern("a" * 1001)
    with pytest.raises(RegexError):
        compile_pattern("((a{100}){100}){100}")


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("a$", "a\n", False),
        ("^a", "ba", False),
        ("a.b", "a\nb", True),
        ("[^x]", "\n", True),
        ("", "", True),
        ("^$", "", True),
        ("^$", "\n", False),
        ("a^b", "a^b", False),
        ("(^a|b$)", "ab", True),
        ("x{0}", "", True),
        ("[é-ü]", "ö", True),
        ("😀{2}", "😀😀", True),
    ],
)
def test_search_semantics(pattern: str, text: str, expected: bool) -> None:
    assert compile_pattern(pattern).search(text) is expected


_SUBJECTS = st.text(
    st.sampled_from(["a", "b", "é", ".", "x", "\n", "[", "]", "-", "c"]), max_size=8
)


@settings(max_examples=600, deadline=None)
@given(patterns(), st.lists(_SUBJECTS, min_size=1, max_size=6))
def test_dfa_agrees_with_python_re(pattern: str, subjects: list[str]) -> None:
    compiled = compile_pattern(pattern)
    reference = re.compile(to_python(compiled), re.DOTALL)
    for subject in subjects:
        assert compiled.search(subject) == bool(reference.search(subject)), (pattern, subject)


def test_dfa_state_cache_is_bounded_and_still_correct() -> None:
    # (a|b)*a(a|b){12} needs 2**13 DFA states: more than the cache holds.
    compiled = compile_pattern("(a|b)*a(a|b){12}$")
    reference = re.compile("(a|b)*a(a|b){12}\\Z")
    import random

    rng = random.Random(7)
    for _ in range(60):
        subject = "".join(rng.choice("ab") for _ in range(rng.randint(0, 400)))
        assert compiled.search(subject) == bool(reference.search(subject))
