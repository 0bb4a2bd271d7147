"""The write gate's four shape checks (model §3.2), as pure functions of data.

G1 subject, G2 conditions, G3 evidence, G4 object; the first failure stops
the write with a stable reason code. Nothing here touches the database: the
caller hands in the world model and what the writer can see of the evidence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from claims._proposal import ItemWrite
from factgen import World
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
)

__all__ = ["PreparedItem", "check_shape", "compile_conditions", "is_rule_attribute", "is_rule_text"]

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

SKILL_HINT = "file the procedure as a skill (kind: skill, with a version and a test reference)"


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

    @property
    def required_text(self) -> list[str]:
        """Canonical, sorted, de-duplicated required conditions."""
        return sorted({c.text for c in self.required})

    @property
    def excluded_text(self) -> list[str]:
        """Canonical, sorted, de-duplicated excluded conditions."""
        return sorted({c.text for c in self.excluded})

    @property
    def cond_key(self) -> str:
        """The normalised conditions part of the supersession key (model §1.1)."""
        return json.dumps({"r": self.required_text, "x": self.excluded_text}, sort_keys=True)

    @property
    def evidence_key(self) -> str:
        """For an episode, its sorted evidence (two traces are two records); else empty."""
        if self.request.kind != "episode":
            return ""
        return json.dumps(sorted(set(self.request.evidence)))

    def conditions_json(self) -> dict[str, list[dict[str, Any]]]:
        """What the in-database evaluator reads."""
        return {
            "required": _unique_json(self.required),
            "excluded": _unique_json(self.excluded),
        }


def _unique_json(conds: Sequence[CompiledPredicate]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for c in conds:
        seen.setdefault(c.text, condition_json(c))
    return [seen[k] for k in sorted(seen)]


def compile_conditions(
    texts: Sequence[str], world: World, *, which: str
) -> tuple[CompiledPredicate, ...]:
    """G2 for one list: parse, resolve ``@entity:``, type-check against the schema.

    Raises ``GateRejection`` with ``condition_unparsable``,
    ``condition_unknown_attribute``, ``condition_type_mismatch`` or
    ``condition_unresolved_entity``; the detail names the condition and where.
    """
    out: list[CompiledPredicate] = []
    for index, text in enumerate(texts):
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
            out.append(compile_predicate(pred, spec.vtype))
        except (PredicateTypeError, PredicateSyntaxError) as exc:
            raise GateRejection(
                exc.code,
                f"{which}[{index}] {to_text(pred)!r}: {exc.message}",
                gate="G2",
                attribute=pred.attribute.path,
                expected=str(spec.vtype),
                **where,
            ) from exc
    return tuple(out)


def check_shape(
    request: ItemWrite,
    world: World,
    *,
    visible_evidence: Mapping[str, bool],
) -> PreparedItem:
    """Run G1-G4 in order; return the prepared item or raise ``GateRejection``.

    ``visible_evidence`` maps every evidence id that exists to whether the
    writer may read it; an id absent or unreadable does not resolve (G3).
    """
    # G1 subject
    try:
        subject = world.resolver.resolve(request.subject)
    except SubjectUnresolved as exc:
        raise GateRejection(
            "subject_unresolved",
            exc.message,
            gate="G1",
            subject=request.subject,
            suggestions=exc.detail.get("suggestions", []),
        ) from exc
    # G2 conditions
    required = compile_conditions(request.required, world, which="required")
    excluded = compile_conditions(request.excluded, world, which="excluded")
    # G3 evidence
    if not request.evidence:
        raise GateRejection(
            "evidence_missing", "an item needs at least one evidence reference", gate="G3"
        )
    unresolved = [e for e in request.evidence if not visible_evidence.get(e, False)]
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
    entities = tuple(sorted({subject, *mentioned, *request.entities}))
    return PreparedItem(request, subject, required, excluded, obj, entities)


def _check_object(request: ItemWrite, world: World) -> dict[str, Any]:
    if request.kind != "skill" and is_rule_attribute(request.attribute):
        raise GateRejection(
            "object_is_rule",
            f"attribute {request.attribute!r} names a remedy, not an observation; {SKILL_HINT}",
            gate="G4",
            attribute=request.attribute,
        )
    value = request.object
    if isinstance(value, str) and value in request.evidence:
        return {"evidence": value}
    if value is None or isinstance(value, dict | list):
        raise GateRejection(
            "object_type_mismatch",
            "the object must be a typed literal or an evidence reference",
            gate="G4",
            value=repr(value),
        )
    if request.kind != "skill" and isinstance(value, str) and is_rule_text(value):
        raise GateRejection(
            "object_is_rule",
            f"object {value!r} is an instruction, not an observed value; {SKILL_HINT}",
            gate="G4",
            value=value,
        )
    spec = world.schema.get(request.attribute)
    if spec is not None:
        try:
            return {"value": encode(coerce(value, spec.vtype), spec.vtype)}
        except ValueTypeError as exc:
            raise GateRejection(
                "object_type_mismatch",
                f"object of {request.attribute!r} must be {spec.vtype}, got {value!r}",
                gate="G4",
                attribute=request.attribute,
                expected=str(spec.vtype),
                value=repr(value),
            ) from exc
    return {"value": value}
