"""Parser: operators, literals, entities, escapes and error positions."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from predicates import Attribute, Duration, Op, Predicate, Version, parse, to_text
from predicates.errors import CaveatError, PredicateSyntaxError


def test_simple_predicate_has_attribute_op_and_value() -> None:
    assert parse("config.connection_pool.max gte 200") == Predicate(
        Attribute(None, "config.connection_pool.max"), Op.GTE, 200
    )


@pytest.mark.parametrize("op", [op for op in Op if op not in (Op.IN, Op.NOT_IN, Op.EXISTS)])
def test_every_scalar_operator_parses(op: Op) -> None:
    p = parse(f'x {op.value} "abc"')
    assert p.op is op
    assert p.value == "abc"


def test_list_operators_take_lists() -> None:
    assert parse("x in [1, 2]").value == (1, 2)
    assert parse("x not_in [1]").op is Op.NOT_IN


def test_exists_takes_no_value() -> None:
    p = parse("alerts.last_page exists")
    assert p.op is Op.EXISTS
    assert p.value is None


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ("200", 200),
        ("-7", -7),
        ("0.8", Decimal("0.8")),
        ("-12.50", Decimal("-12.5")),
        ("true", True),
        ("false", False),
        ('"eu-west-1"', "eu-west-1"),
        ("30s", Duration(30)),
        ("5m", Duration(300)),
        ("2h", Duration(7200)),
        ("7d", Duration(7 * 86400)),
        ("250ms", Duration(Decimal("0.25"))),
        ("15us", Duration.from_micros(15)),
        ("v15.4", Version((15, 4))),
        ("v15.10.2", Version((15, 10, 2))),
        ("2026-03-01T09:00:00Z", datetime(2026, 3, 1, 9, tzinfo=UTC)),
        ("2026-03-01T09:00:00.25Z", datetime(2026, 3, 1, 9, 0, 0, 250000, tzinfo=UTC)),
        ("2026-03-01T09:00:00+00:00", datetime(2026, 3, 1, 9, tzinfo=UTC)),
        ("2026-03-01T10:30:00+01:30", datetime(2026, 3, 1, 9, tzinfo=UTC)),
    ],
)
def test_literals(literal: str, expected: object) -> None:
    value = parse(f"x eq {literal}").value
    assert value == expected
    assert type(value) is type(expected)


def test_decimal_literals_are_exact_decimals() -> None:
    p = parse("x eq 0.1000000000000000000000000000001")
    assert p.value == Decimal("0.1000000000000000000000000000001")
    assert to_text(p) == "x eq 0.1000000000000000000000000000001"


def test_timestamps_are_aware_utc() -> None:
    value = parse("x eq 2026-03-01T09:00:00+02:00").value
    assert isinstance(value, datetime)
    assert value.utcoffset() is not None
    assert value.tzinfo is UTC


def test_entity_reference() -> None:
    p = parse("@payments-db:config.max_connections gte 200")
    assert p.attribute == Attribute("payments-db", "config.max_connections")
    assert to_text(p) == "@payments-db:config.max_connections gte 200"


@pytest.mark.parametrize("entity", ["payments-db", "db_1.prod", "10.0.0.1", "A-b_c.d"])
def test_entity_names(entity: str) -> None:
    assert parse(f"@{entity}:x exists").attribute.entity == entity


def test_keywords_can_be_attribute_names() -> None:
    assert parse("in eq 1").attribute.path == "in"
    assert parse("exists exists").attribute.path == "exists"
    assert parse("true.false eq true").attribute.path == "true.false"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (r'"a\"b"', 'a"b'),
        (r'"a\\b"', "a\\b"),
        (r'"a\nb"', "a\nb"),
        (r'"a\tb"', "a\tb"),
        (r'"\u00e9"', "é"),
        (r'"\ud83d\ude00"', "😀"),
        (r'"\/"', "/"),
        ('"é😀"', "é😀"),
        ('""', ""),
    ],
)
def test_string_escapes(source: str, expected: str) -> None:
    assert parse(f"x eq {source}").value == expected


def test_strings_print_with_escapes() -> None:
    p = parse(r'x eq "tab\there \"quoted\" back\\slash \u0001 é"')
    assert to_text(p) == r'x eq "tab\there \"quoted\" back\\slash \u0001 é"'


def test_whitespace_is_free_but_canonical_form_uses_single_spaces() -> None:
    p = parse('  @db:x   in\n[ "b" ,"a"  ]  ')
    assert to_text(p) == '@db:x in ["a", "b"]'


def test_lists_are_sorted_and_deduplicated() -> None:
    assert to_text(parse("x in [3, 1, 2, 1]")) == "x in [1, 2, 3]"
    assert parse("x in [3, 1, 2, 1]") == parse("x in [1, 2, 3]")


def test_versions_and_decimals_print_canonically() -> None:
    assert to_text(parse("x eq v15.0.0")) == "x eq v15"
    assert to_text(parse("x eq v15.04")) == "x eq v15.4"
    assert to_text(parse("x eq 0.80")) == "x eq 0.8"
    assert to_text(parse("x eq 2.000")) == "x eq 2.0"
    assert to_text(parse("x eq -0.0")) == "x eq 0.0"
    assert to_text(parse("x eq 007")) == "x eq 7"
    assert to_text(parse("x eq 3600s")) == "x eq 1h"
    assert to_text(parse("x eq 90000ms")) == "x eq 90s"
    assert to_text(parse("x eq 0ms")) == "x eq 0s"


def test_literal_kinds_stay_distinct() -> None:
    assert parse("x eq 1") != parse("x eq 1.0")
    assert parse("x eq 1") != parse("x eq true")
    assert parse("x eq 1.0") == parse("x eq 1.00")
    assert parse("x eq v15") == parse("x eq v15.0")
    assert hash(parse("x eq v15")) == hash(parse("x eq v15.0"))


# --- errors --------------------------------------------------------------------


def _error(text: str) -> PredicateSyntaxError:
    with pytest.raises(PredicateSyntaxError) as info:
        parse(text)
    return info.value


@pytest.mark.parametrize(
    "prose",
    [
        "when the pool is busy",
        "the connection pool is exhausted",
        "restart the service",
        "pool > 200",
        "x == 5",
        "x eq",
        "eq 5",
        "x eq 5 6",
        "x in 5",
        "x eq [1]",
        "x exists 5",
        "x contains 5",
        "x matches v15",
        "x in []",
        "x EQ 5",
        "x eq TRUE",
        "x eq 'single'",
        "x eq -5s",
        "x eq 1.5s",
        "x eq 5min",
        "x eq .5",
        "x eq 5.",
        "x eq 1e5",
        "x eq v",
        "x.eq",
        "x. eq 1",
        "x..y eq 1",
        "@:x eq 1",
        "@a b:x eq 1",
        "x eq 2026-03-01",
        "x eq 2026-03-01T09:00:00",
        "x eq 2026-13-01T09:00:00Z",
        "x eq 2026-03-01T09:00:00.1234567Z",
        "x eq 2026-03-01T09:00:60Z",
        "x eq 2026-03-01T09:00:00+24:00",
        'x eq "unterminated',
        'x eq "bad \\x escape"',
        'x eq "nul \\u0000"',
        'x eq "lone \\ud800"',
        'x eq "raw\nnewline"',
        'x matches "("',
        'x matches "\\\\d+"',
        "",
        "   ",
        "\n\n",
    ],
)
def test_malformed_input_is_a_syntax_error(prose: str) -> None:
    err = _error(prose)
    assert err.code == "condition_unparsable"
    assert err.line >= 1
    assert err.column >= 1
    assert "^" in err.caret()


def test_prose_error_points_at_the_second_word() -> None:
    err = _error("when the pool is busy")
    assert (err.line, err.column) == (1, 6)
    assert "eq" in err.expected and "gte" in err.expected
    assert err.caret() == "when the pool is busy\n     ^"
    assert "line 1, column 6" in str(err)


def test_error_on_a_later_line_reports_that_line() -> None:
    err = _error("config.pool.max\n  gte\n    high")
    assert (err.line, err.column) == (3, 5)
    assert err.caret() == "    high\n    ^"


def test_unexpected_end_points_after_the_last_token() -> None:
    err = _error("x gte  ")
    assert (err.line, err.column) == (1, 6)
    assert "integer" in err.expected


def test_bad_character_column() -> None:
    err = _error("x eq 5 ✓")
    assert (err.line, err.column) == (1, 8)


def test_bad_escape_points_into_the_string() -> None:
    err = _error('x eq "ab\\qc"')
    assert (err.line, err.column) == (1, 9)


def test_invalid_regex_points_into_the_pattern() -> None:
    err = _error('x matches "ab[c"')
    assert (err.line, err.column) == (1, 14)
    assert "']'" in err.message


def test_bad_timestamp_points_at_the_literal() -> None:
    err = _error("t gt 2026-02-30T00:00:00Z")
    assert (err.line, err.column) == (1, 6)


def test_carriage_returns_count_as_line_breaks_like_the_caret() -> None:
    err = _error("x\r\neq\r\n  bad")
    assert (err.line, err.column) == (3, 3)
    assert err.caret() == "  bad\n  ^"


def test_error_detail_is_json_ready() -> None:
    detail = _error("x eq").to_dict()
    assert detail["code"] == "condition_unparsable"
    assert detail["line"] == 1 and detail["column"] == 5
    assert isinstance(detail["expected"], list)


def test_non_string_input_is_a_syntax_error() -> None:
    with pytest.raises(PredicateSyntaxError):
        parse(None)  # type: ignore[arg-type]
    with pytest.raises(PredicateSyntaxError):
        parse(b"x eq 1")  # type: ignore[arg-type]


def test_very_long_input_is_refused_cleanly() -> None:
    with pytest.raises(PredicateSyntaxError):
        parse("x in [" + ", ".join(["1"] * 20_000) + "]")
    with pytest.raises(PredicateSyntaxError):
        parse("x eq " + "9" * 5000)
    with pytest.raises(PredicateSyntaxError):
        parse("x eq 99999999999d")


@pytest.mark.parametrize(
    "text",
    ["x in [" * 5000, "(" * 10_000, "x matches " + '"' + "(" * 400 + '"', "\x00", "\ud800", "🙂"],
)
def test_pathological_inputs_only_raise_syntax_errors(text: str) -> None:
    with pytest.raises(PredicateSyntaxError) as info:
        parse(text)
    assert isinstance(info.value, CaveatError)
