"""caveat's predicate language: parse, print, type-check and evaluate conditions.

A predicate is ``[@entity:]attribute operator [value]`` (docs/predicates.md).
It is evaluated in Kleene's three-valued logic against typed observations,
in Python (``compile_predicate``) or in PostgreSQL (the plpgsql
``SQL_EVALUATOR_DDL``, or a plain SQL expression from ``to_sql``), with the
same results. This package imports nothing else of caveat and
touches no database. Errors come from ``predicates.errors``.
"""

from predicates._ast import Attribute, Op, Predicate, Scalar, Value
from predicates._check import OPS_BY_TYPE, check_type
from predicates._encoding import condition_json, decode, encode
from predicates._eval import (
    Applicability,
    CompiledPredicate,
    Observed,
    ObservedLike,
    applicability,
    compile_predicate,
)
from predicates._parser import parse
from predicates._printer import duration_literal, to_text, typed_literal
from predicates._sql import SQL_EVALUATOR_DDL
from predicates._tosql import applicability_sql, to_sql
from predicates._truth import Truth
from predicates._types import TYPE_NAMES, TypedValue, ValueType, coerce
from predicates._values import Duration, Version

__all__ = [
    "OPS_BY_TYPE",
    "SQL_EVALUATOR_DDL",
    "TYPE_NAMES",
    "Applicability",
    "Attribute",
    "CompiledPredicate",
    "Duration",
    "Observed",
    "ObservedLike",
    "Op",
    "Predicate",
    "Scalar",
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
]
