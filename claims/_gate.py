"""The write gate's four shape checks (model §3.2), as pure functions of data.

G1 subject, G2 conditions, G3 evidence, G4 object; the first failure stops
the write with a stable reason code. Nothing here touches the database: the
caller hands in the world model and what the writer can see of the evidence.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from claims._anchors import DEFAULT_REGISTRY, ItemRegistry
from claims._proposal import ItemWrite
from factgen import World, normalise
from predicates import (
    Attribute,
    CompiledPredicate,
    coerce,
    compile_predicate,
    condition_json,
    encode,
    parse,
    to_text,
)
from predicates.errors import (
    GateRejection,
    PredicateSyntaxError,
    PredicateTypeError,
    SubjectUnresolved,
    ValueTypeError,
    shown,
)

__all__ = [
    "SKILL_HINT",
    "ConditionCache",
    "PreparedItem",
    "check_shape",
    "compile_conditions",
    "derive_content_type",
    "is_rule_attribute",
    "is_rule_text",
]

_RULE_ATTRIBUTE = re.compile(
    r"^(fix_\w*|\w*_method|\w*_procedure|how_to_\w*|should_\w*|must_\w*|recommended_\w*"
    r"|best_\w*|always_\w*|never_\w*|remedy|workaround|action)$"
)
_INSTRUCTION = re.compile(r"\b(should|must|always|never|do not|don't|dont)\b", re.IGNORECASE)
#: Bare imperative verbs of operations work; an object that is just one of these is a rule.
IMPERATIVE_VERBS = frozenset(
    """
    restart reboot rollback roll revert redeploy deploy scale upscale downscale increase decrease
    raise lower bump drain failover fail kill flush purge clear reset retry disable enable
    rotate restore reload recycle evict throttle block unblock page escalate patch upgrade
    downgrade vacuum reindex resize cordon uncordon delete remove
    """.split()
)

SKILL_HINT = (
    "file the procedure as a skill instead (kind: skill, with a version and a test "
    "reference; see docs/claims.md#skills)"
)

#: Compiled conditions by text, valid for one ``World`` (a batch loads it once).
ConditionCache = dict[str, CompiledPredicate]


def is_rule_attribute(attribute: str) -> bool:
    """Whether ``attribute`` names a remedy or recommendation rather than an observation."""
    return bool(_RULE_ATTRIBUTE.match(attribute.lower()))


def is_rule_text(value: str) -> bool:
    """Whether a string object is an instruction: a bare imperative or should/must/... text."""
    words = value.strip().lower().split()
    if not words:
        return False
    if len(words) <= 2 and words[0] in IMPERATIVE_VERBS:
        return True
    return bool(_INSTRUCTION.search(value))


@dataclass(frozen=True)
class PreparedItem:
    """A write that passed G1-G4: canonical subject, conditions and object."""

    request: ItemWrite
    subject: str
    required: tuple[CompiledPredicate, ...]
    excluded: tuple[CompiledPredicate, ...]
    object: dict[str, Any]
    entities: tuple[str, ...]
    scope: tuple[str, str] = ("", "")
    facets: tuple[tuple[str, str], ...] = ()
    content_type: str | None = None

    @cached_property
    def required_text(self) -> list[str]:
        """Canonical, sorted, de-duplicated required conditions."""
        return sorted({c.text for c in self.required})

    @cached_property
    def excluded_text(self) -> list[str]:
        """Canonical, sorted, de-duplicated excluded conditions."""
        return sorted({c.text for c in self.excluded})

    @cached_property
    def cond_key(self) -> str:
        """The normalised conditions part of the supersession key (model §1.1).

        ``json.dumps({"r": required, "x": excluded}, sort_keys=True)``, spelled out.
        """
        return f'{{"r": {_str_list(self.required_text)}, "x": {_str_list(self.excluded_text)}}}'

    @cached_property
    def evidence_key(self) -> str:
        """The key's discriminator: an episode's sorted evidence (two traces are two
        records), a skill's version (``v3``; versions are rows of their own), else empty.
        """
        if self.request.kind == "episode":
            return _str_list(sorted(set(self.request.evidence)))
        if self.request.kind == "skill" and self.request.version is not None:
            return f"v{self.request.version}"
        return ""

    def conditions_json(self) -> dict[str, list[dict[str, Any]]]:
        """What the in-database evaluator reads."""
        return {
            "required": _unique_json(self.required),
            "excluded": _unique_json(self.excluded),
        }


def _str_list(values: Sequence[str]) -> str:
    """``json.dumps`` of a list of strings (default separators), in C per string."""
    return "[" + ", ".join(map(_json_str, values)) + "]"


_json_str = json.encoder.encode_basestring_ascii


def _unique_json(conds: Sequence[CompiledPredicate]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for c in conds:
        seen.setdefault(c.text, condition_json(c))
    return [seen[k] for k in sorted(seen)]


def compile_conditions(
    texts: Sequence[str], world: World, *, which: str, cache: ConditionCache | None = None
) -> tuple[CompiledPredicate, ...]:
    """G2 for one list: parse, resolve ``@entity:``, type-check against the schema.

    Raises ``GateRejection`` with ``condition_unparsable``,
    ``condition_unknown_attribute``, ``condition_type_mismatch`` or
    ``condition_unresolved_entity``; the detail names the condition and where.
    ``cache`` (for one ``world`` only) remembers conditions that compiled.
    """
    out: list[CompiledPredicate] = []
    for index, text in enumerate(texts):
        hit = cache.get(text) if cache is not None else None
        if hit is not None:
            out.append(hit)
            continue
        compiled = _compile_one(text, index, world, which)
        if cache is not None:
            cache[text] = compiled
        out.append(compiled)
    return tuple(out)


def _compile_one(text: str, index: int, world: World, which: str) -> CompiledPredicate:
    where = {"list": which, "index": index, "condition": text}
    try:
        pred = parse(text)
    except PredicateSyntaxError as exc:
        raise GateRejection(
            "condition_unparsable",
            f"{which}[{index}] is not a predicate: {exc.message} "
            f"at column {exc.column}\n{exc.caret()}",
            gate="G2",
            line=exc.line,
            column=exc.column,
            expected=exc.expected,
            **where,
        ) from exc
    if pred.attribute.entity is not None:
        try:
            entity = world.resolver.resolve(pred.attribute.entity)
        except SubjectUnresolved as exc:
            raise GateRejection(
                "condition_unresolved_entity",
                f"{which}[{index}]: {exc.message}",
                gate="G2",
                suggestions=exc.detail.get("suggestions", []),
                **where,
            ) from exc
        pred = replace(pred, attribute=Attribute(entity, pred.attribute.path))
    spec = world.schema.get(pred.attribute.path)
    if spec is None:
        hints = world.schema.suggest(pred.attribute.path)
        hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
        raise GateRejection(
            "condition_unknown_attribute",
            f"{which}[{index}]: no fact source declares {pred.attribute.path!r}{hint}",
            gate="G2",
            attribute=pred.attribute.path,
            suggestions=hints,
            **where,
        )
    try:
        return compile_predicate(pred, spec.vtype)
    except (PredicateTypeError, PredicateSyntaxError) as exc:
        raise GateRejection(
            exc.code,
            f"{which}[{index}] {to_text(pred)!r}: {exc.message}",
            gate="G2",
            attribute=pred.attribute.path,
            expected=str(spec.vtype),
            **where,
        ) from exc


def check_shape(
    request: ItemWrite,
    world: World,
    *,
    visible_evidence: Mapping[str, bool],
    registry: ItemRegistry = DEFAULT_REGISTRY,
    cache: ConditionCache | None = None,
    names: dict[str, str | None] | None = None,
) -> PreparedItem:
    """Run G1-G4 in order; return the prepared item or raise ``GateRejection``.

    ``visible_evidence`` maps every evidence id that exists to whether the
    writer may read it; an id absent or unreadable does not resolve (G3).
    G1 also resolves anchors on entity axes (``anchor_unresolved``); G3 also
    resolves a skill's ``test`` reference. Axes and content types are
    checked before the gate, by the write path. ``cache`` and ``names``
    (for one ``world`` only) remember compiled conditions and name lookups.
    """
    lookup = _lookup(world, {} if names is None else names)
    # G1 subject (and anchors that name entities)
    try:
        subject = lookup(request.subject) or world.resolver.resolve(request.subject)
    except SubjectUnresolved as exc:
        raise GateRejection(
            "subject_unresolved",
            exc.message,
            gate="G1",
            subject=request.subject,
            suggestions=exc.detail.get("suggestions", []),
        ) from exc
    scope = _canonical_anchor(request.scope.axis, request.scope.id, world, registry, lookup)
    facets = tuple(
        sorted(
            {_canonical_anchor(f.axis, f.id, world, registry, lookup) for f in request.facets}
            - {scope}
        )
    )
    # G2 conditions
    required = compile_conditions(request.required, world, which="required", cache=cache)
    excluded = compile_conditions(request.excluded, world, which="excluded", cache=cache)
    # G3 evidence
    if not request.evidence:
        raise GateRejection(
            "evidence_missing", "an item needs at least one evidence reference", gate="G3"
        )
    refs = [*request.evidence, *([request.test] if request.test is not None else [])]
    unresolved = sorted({e for e in refs if not visible_evidence.get(e, False)})
    if unresolved:
        raise GateRejection(
            "evidence_unresolved",
            f"evidence does not resolve: {', '.join(unresolved)}",
            gate="G3",
            evidence=unresolved,
        )
    # G4 object
    obj = _check_object(request, world)
    mentioned = {c.predicate.attribute.entity or subject for c in (*required, *excluded)}
    named = {lookup(e) or normalise(e) for e in request.entities}
    entities = tuple(sorted({subject, *mentioned, *named} - {""}))
    content_type = request.content_type or derive_content_type(request, world, required, excluded)
    return PreparedItem(
        request, subject, required, excluded, obj, entities, scope, facets, content_type
    )


def _lookup(world: World, names: dict[str, str | None]) -> Callable[[str], str | None]:
    def lookup(name: str) -> str | None:
        if name not in names:
            names[name] = world.resolver.lookup(name)
        return names[name]

    return lookup


def _canonical_anchor(
    axis: str,
    anchor_id: str,
    world: World,
    registry: ItemRegistry,
    lookup: Callable[[str], str | None],
) -> tuple[str, str]:
    spec = registry.axis(axis)
    if spec is None or not spec.entity:
        return (axis, anchor_id)
    try:
        return (axis, lookup(anchor_id) or world.resolver.resolve(anchor_id))
    except SubjectUnresolved as exc:
        raise GateRejection(
            "anchor_unresolved",
            f"anchor {axis}:{anchor_id}: {exc.message}",
            gate="G1",
            anchor=f"{axis}:{anchor_id}",
            suggestions=exc.detail.get("suggestions", []),
        ) from exc


def derive_content_type(
    request: ItemWrite,
    world: World,
    required: Sequence[CompiledPredicate],
    excluded: Sequence[CompiledPredicate],
) -> str | None:
    """The content type an item depends on when the writer names none.

    The item attribute's declared content type if it has one; otherwise the
    one content type its conditions' attributes are declared with, when they
    agree on exactly one; otherwise None (no event re-opens the item).
    """
    own = world.schema.get(request.attribute)
    if own is not None and own.content_type:
        return own.content_type
    found: set[str] = set()
    for cond in (*required, *excluded):
        spec = world.schema.get(cond.predicate.attribute.path)
        if spec is not None and spec.content_type:
            found.add(spec.content_type)
    return found.pop() if len(found) == 1 else None


def _check_object(request: ItemWrite, world: World) -> dict[str, Any]:
    if request.kind != "skill" and is_rule_attribute(request.attribute):
        raise GateRejection(
            "object_is_rule",
            f"attribute {request.attribute!r} names a remedy, not an observation; {SKILL_HINT}",
            gate="G4",
            attribute=request.attribute,
            file_as="skill",
        )
    value = request.object
    if isinstance(value, str) and value in request.evidence:
        return {"evidence": value}
    if (
        value is None
        or isinstance(value, dict | list)
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        raise GateRejection(
            "object_type_mismatch",
            "the object must be a typed literal or an evidence reference",
            gate="G4",
            value=shown(value),
        )
    if request.kind != "skill" and isinstance(value, str) and is_rule_text(value):
        raise GateRejection(
            "object_is_rule",
            f"object {value!r} is an instruction, not an observed value; {SKILL_HINT}",
            gate="G4",
            value=value,
            file_as="skill",
        )
    spec = world.schema.get(request.attribute)
    if spec is not None:
        try:
            return {"value": encode(coerce(value, spec.vtype), spec.vtype)}
        except ValueTypeError as exc:
            raise GateRejection(
                "object_type_mismatch",
                f"object of {request.attribute!r} must be {spec.vtype}, got {shown(value)}",
                gate="G4",
                attribute=request.attribute,
                expected=str(spec.vtype),
                value=shown(value),
            ) from exc
    return {"value": value}
