"""An item's conditions evaluated in Python against a snapshot (three-valued)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from claims import ItemRecord
from factgen import Snapshot, SnapshotEntry, World
from predicates import CompiledPredicate, Predicate, Truth, ValueType, compile_predicate, parse
from predicates.errors import PredicateSyntaxError, PredicateTypeError

__all__ = ["ConditionValue", "applies", "condition_values"]


@dataclass(frozen=True)
class ConditionValue:
    """One condition's value against the snapshot, with the observation it used."""

    condition: str
    list: str  # "required" or "excluded"
    value: Truth
    subject: str
    attribute: str
    observed: SnapshotEntry | None


@functools.lru_cache(maxsize=8192)
def _parsed(text: str) -> Predicate:
    return parse(text)


@functools.lru_cache(maxsize=8192)
def _compiled(text: str, vtype: ValueType) -> CompiledPredicate | None:
    try:
        return compile_predicate(_parsed(text), vtype)
    except (PredicateTypeError, PredicateSyntaxError):
        return None


def condition_values(item: ItemRecord, world: World, snapshot: Snapshot) -> list[ConditionValue]:
    """Every condition of ``item`` evaluated in Python against ``snapshot``."""
    out: list[ConditionValue] = []
    for which, texts in (("required", item.required), ("excluded", item.excluded)):
        for text in texts:
            pred = _parsed(text)
            subject = pred.attribute.entity or item.subject
            entry = snapshot.get(subject, pred.attribute.path)
            spec = world.schema.get(pred.attribute.path)
            compiled = None if spec is None else _compiled(text, spec.vtype)
            if compiled is None:
                value = Truth.UNKNOWN
            else:
                value = compiled(snapshot.observed(subject, pred.attribute.path))
            out.append(ConditionValue(text, which, value, subject, pred.attribute.path, entry))
    return out


def applies(values: Sequence[ConditionValue]) -> bool:
    """TRUE on every required condition and FALSE on every excluded one; UNKNOWN never passes."""
    return all(v.value is (Truth.TRUE if v.list == "required" else Truth.FALSE) for v in values)
