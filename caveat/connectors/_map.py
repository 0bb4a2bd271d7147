"""What every kind of source does with a value it fetched: find the subject through the
aliases, type the value by the schema, and refuse, with a reason, what cannot be
stored; then refuse every pair of samples that land on one (subject, attribute).

Pure functions of the tenant's world (no I/O): the property tests drive them with a
world built in memory. ``store_pull`` types everything again in its transaction (the
world may have changed since), so nothing here is trusted to write.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import factgen
from predicates import coerce
from predicates.errors import SubjectUnresolved, UnknownAttribute, ValueTypeError

__all__ = [
    "AMBIGUOUS",
    "LABEL_MISSING",
    "NOT_FINITE",
    "POINTER_MISSING",
    "Part",
    "SubjectFetch",
    "document_part",
    "refusal",
    "resolve_pointer",
    "settle",
    "subject_fetches",
    "typed_observation",
]

#: Refusal codes of the connectors (the typing ones are factgen's own).
LABEL_MISSING = "label_missing"
NOT_FINITE = "not_finite"
AMBIGUOUS = "ambiguous"
POINTER_MISSING = "pointer_missing"


@dataclass
class Part:
    """What one fetch of a source (one query, one subject's document) gave: candidate
    observations (subject resolved, value typed), refusals, and errors by attribute."""

    candidates: list[factgen.Observation] = field(default_factory=list)
    refused: list[factgen.Refusal] = field(default_factory=list)
    errors: list[tuple[tuple[str, ...], str]] = field(default_factory=list)

    @classmethod
    def failed(cls, attributes: Iterable[str], message: str) -> Part:
        """A part that is only the error ``message`` of ``attributes``."""
        part = cls()
        part.error(attributes, message)
        return part

    def error(self, attributes: Iterable[str], message: str) -> None:
        self.errors.append((tuple(attributes), message))

    def take(self, typed: factgen.Observation | factgen.Refusal) -> None:
        """A typed observation as a candidate, a refusal as refused."""
        if isinstance(typed, factgen.Observation):
            self.candidates.append(typed)
        else:
            self.refused.append(typed)

    def extend(self, other: Part) -> None:
        self.candidates.extend(other.candidates)
        self.refused.extend(other.refused)
        self.errors.extend(other.errors)


def refusal(obs: factgen.Observation, code: str, message: str) -> factgen.Refusal:
    return factgen.Refusal(obs, code, message)


def _number_for(raw: object, vtype_name: str) -> bool:
    """Whether a JSON number goes through the sample conversion (0/1 to a bool, Unix
    seconds to a timestamp, an integral float to an int) rather than straight to coerce."""
    if not isinstance(raw, int | float) or isinstance(raw, bool):
        return False
    return vtype_name in ("bool", "timestamp") or (vtype_name == "int" and isinstance(raw, float))


def typed_observation(
    world: factgen.World,
    *,
    name: str,
    attribute: str,
    raw: Any,
    source: str,
    observed_at: datetime,
    provenance: Mapping[str, Any],
    number: bool,
) -> factgen.Observation | factgen.Refusal:
    """The observation of ``attribute`` of the subject ``name`` resolves to, with ``raw``
    typed by the schema; or the refusal saying why not (``subject_unresolved``,
    ``fact_unknown_attribute``, ``not_finite``, ``fact_type_mismatch``). ``number``: raw
    is a Prometheus sample's number (a float), else a JSON value."""

    def refuse(subject: str, code: str, message: str) -> factgen.Refusal:
        obs = factgen.Observation(subject, attribute, raw, source, observed_at, provenance)
        return refusal(obs, code, message)

    canonical = world.resolver.lookup(name)
    if canonical is None:
        return refuse(
            name,
            SubjectUnresolved.code,
            f"{name!r} does not resolve to a known entity (no alias answers to it)",
        )
    spec = world.schema.get(attribute)
    if spec is None:
        return refuse(
            canonical, UnknownAttribute.code, f"{attribute} is not declared in the schema"
        )
    if isinstance(raw, float) and not math.isfinite(raw):
        return refuse(canonical, NOT_FINITE, f"{attribute} of {canonical}: {raw} is not finite")
    value: Any = raw
    try:
        if number or _number_for(raw, spec.vtype.name):
            try:
                value = factgen.sample_number(float(raw), spec.vtype)
            except (ValueError, OverflowError) as exc:
                raise ValueTypeError(str(exc)) from None
        value = coerce(value, spec.vtype)
    except ValueTypeError as exc:
        return refuse(
            canonical,
            ValueTypeError.code,
            f"{attribute} of {canonical}: expected {spec.vtype}, got {raw!r}: {exc.message}",
        )
    return factgen.Observation(canonical, attribute, value, source, observed_at, provenance)


def settle(
    candidates: Sequence[factgen.Observation],
    refused: Sequence[factgen.Refusal] = (),
) -> tuple[list[factgen.Observation], list[factgen.Refusal]]:
    """The candidates that alone answer their (subject, attribute), and the refusals:
    those given, and one (``ambiguous``) for each candidate that shares its (subject,
    attribute) with another sample of the pull, a refused one included (a ``NaN`` next
    to a number for one subject): which one is right is not the connector's to guess."""
    unplaced = (LABEL_MISSING, SubjectUnresolved.code)
    landed = Counter((c.subject, c.attribute) for c in candidates)
    landed.update(
        (r.observation.subject, r.observation.attribute) for r in refused if r.code not in unplaced
    )
    kept: list[factgen.Observation] = []
    out: list[factgen.Refusal] = list(refused)
    for c in candidates:
        n = landed[(c.subject, c.attribute)]
        if n == 1:
            kept.append(c)
        else:
            out.append(
                refusal(
                    c,
                    AMBIGUOUS,
                    f"{n} samples answer {c.attribute} of {c.subject} in one pull; none is kept",
                )
            )
    return kept, out


def _token(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def resolve_pointer(document: object, pointer: str) -> object:
    """The value at a JSON pointer (RFC 6901: ``""`` the whole document, ``/a/0/b~1c``);
    ``KeyError`` naming the first token that is not there (a missing key, an index out
    of range or not a number, a step into a scalar)."""
    if pointer == "":
        return document
    node = document
    for raw in pointer.split("/")[1:]:
        token = _token(raw)
        if isinstance(node, dict):
            if token not in node:
                raise KeyError(token)
            node = node[token]
        elif isinstance(node, list):
            if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
                raise KeyError(token)
            index = int(token)
            if index >= len(node):
                raise KeyError(token)
            node = node[index]
        else:
            raise KeyError(token)
    return node


def document_part(
    world: factgen.World,
    spec: factgen.SourceSpec,
    *,
    name: str,
    document: object,
    attributes: Sequence[factgen.SourceAttribute],
    now: datetime | None,
    provenance: Mapping[str, Any],
) -> Part:
    """The attributes of subject ``name`` read from its document (``http_json``,
    ``file``), each at its JSON pointer: an observation, or a refusal
    (``pointer_missing`` for a pointer that is not in the document). Observed ``now``
    (default: the wall clock), by source ``spec.name``, whose name leads the provenance."""
    source = spec.name
    observed_at = now or datetime.now(UTC)
    provenance = {"source": source, **provenance}
    part = Part()
    for attr in attributes:
        pointer = attr.pointer or ""
        where = {**provenance, "pointer": pointer, "sample_time": observed_at.isoformat()}
        try:
            raw = resolve_pointer(document, pointer)
        except KeyError as exc:
            subject = world.resolver.lookup(name) or name
            obs = factgen.Observation(subject, attr.attribute, None, source, observed_at, where)
            part.refused.append(
                refusal(
                    obs,
                    POINTER_MISSING,
                    f"{attr.attribute} of {subject}: the document has nothing at {pointer!r}"
                    f" (no {exc.args[0]!r})",
                )
            )
            continue
        part.take(
            typed_observation(
                world,
                name=name,
                attribute=attr.attribute,
                raw=raw,
                source=source,
                observed_at=observed_at,
                provenance=where,
                number=False,
            )
        )
    return part


#: One subject's fetch of a per-subject source: (name, its attributes, timeout) -> Part.
SubjectFetch = Callable[[str, tuple[factgen.SourceAttribute, ...], float], Part]


def subject_fetches(
    spec: factgen.SourceSpec,
    world: factgen.World,
    wanted: Mapping[str, frozenset[str]] | None,
    fetch: SubjectFetch,
) -> list[tuple[tuple[str, ...], Callable[[float], Part]]]:
    """The fetches of a per-subject source (``http_json``, ``file``): one ``fetch`` per
    listed subject, of the attributes to read for it (all in a pull; in a refresh, those
    needed of it), each with the attributes it answers."""
    out: list[tuple[tuple[str, ...], Callable[[float], Part]]] = []
    for name in spec.subjects:
        canonical = world.resolver.lookup(name)
        attrs = tuple(
            a
            for a in spec.attributes
            if wanted is None
            or (canonical is not None and canonical in wanted.get(a.attribute, ()))
        )
        if attrs:
            out.append((tuple(a.attribute for a in attrs), _bound(fetch, name, attrs)))
    return out


def _bound(
    fetch: SubjectFetch, name: str, attrs: tuple[factgen.SourceAttribute, ...]
) -> Callable[[float], Part]:
    return lambda timeout: fetch(name, attrs, timeout)
