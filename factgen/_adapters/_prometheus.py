"""Prometheus text exposition samples turned into typed facts through a mapping.

The mapping (YAML; a list of rules, or a mapping with one key ``rules``)::

    rules:
      - metric: pgbouncer_pool_utilisation   # sample name as written in the exposition
        labels: {pool: main}                  # optional: every label must equal this
        subject_label: service                # the subject is this label's value (aliases apply)
        attribute: metrics.pool_utilisation
      - metric: pg_static
        subject: payments-db                  # or a fixed subject
        attribute: env.postgres.version
        value_label: short_version            # the value is this label's text, not the sample

A sample takes the first rule that matches it; a rule with neither
``subject`` nor ``subject_label`` uses the caller's default subject. Samples
no rule matches are skipped and reported (``unmapped``). The exposition
format carries only floats, so a sample value is converted for the declared
type: ``float`` as is, ``int`` when integral, ``bool`` from 0 or 1,
``duration`` from seconds, ``timestamp`` from Unix seconds; ``string``,
``enum`` and ``version`` need ``value_label``. Anything else rejects the
whole exposition, as do two samples that land on one (subject, attribute).
A sample's own timestamp, when written, is its ``observed_at``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO, cast

from prometheus_client.parser import text_fd_to_metric_families
from sqlalchemy.orm import Session

from factgen._access import Actor
from factgen._adapters._common import ImportResult, Skipped, store_observations
from factgen._document import Document, Path, load_yaml
from factgen._facts import Observation
from factgen._world import World
from predicates import ValueType
from predicates.errors import DocumentError, SubjectUnresolved, UnknownAttribute, ValueTypeError

__all__ = [
    "MetricRule",
    "MetricSample",
    "import_prometheus",
    "load_prometheus_mapping",
    "parse_exposition",
    "prometheus_observations",
    "sample_number",
]

_RULE_KEYS = ("metric", "labels", "subject", "subject_label", "attribute", "value_label")
_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ATTRIBUTE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_INT_TEXT = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class MetricRule:
    """One mapping rule: which samples, whose subject, which attribute."""

    metric: str
    attribute: str
    labels: Mapping[str, str] = field(default_factory=dict)
    subject: str | None = None
    subject_label: str | None = None
    value_label: str | None = None
    line: int | None = None

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether a sample ``name{labels}`` is this rule's."""
        return name == self.metric and all(labels.get(k) == v for k, v in self.labels.items())


@dataclass(frozen=True)
class MetricSample:
    """One sample of an exposition, with the line it was written on."""

    name: str
    labels: Mapping[str, str]
    value: float
    timestamp: float | None
    line: int | None


def _string_field(doc: Document, path: Path, value: object, pattern: re.Pattern[str]) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise doc.error(path, f"{path[-1]} {value!r} is not a valid name")
    return value


def load_prometheus_mapping(text: str, *, source: str = "<mapping>") -> list[MetricRule]:
    """The rules of a mapping file; ``DocumentError`` with line and column when malformed."""
    doc = load_yaml(text, source=source)
    data = doc.data
    base: Path = ()
    if isinstance(data, dict):
        if set(data) != {"rules"}:
            raise doc.error((), "expected a list of rules, or a mapping with the one key 'rules'")
        data, base = data["rules"], ("rules",)
    if not isinstance(data, list) or not data:
        raise doc.error(base, "expected a non-empty list of rules")
    rules: list[MetricRule] = []
    for index, entry in enumerate(data):
        path: Path = (*base, index)
        if not isinstance(entry, dict):
            raise doc.error(path, "a rule is a mapping with metric, attribute and a subject")
        for key in entry:
            if key not in _RULE_KEYS:
                raise doc.error(
                    (*path, key), f"unknown key {key!r}; allowed: {', '.join(_RULE_KEYS)}", key=True
                )
        for key in ("metric", "attribute"):
            if entry.get(key) is None:
                raise doc.error(path, f"missing required key {key!r}")
        metric = _string_field(doc, (*path, "metric"), entry["metric"], _METRIC)
        attribute = _string_field(doc, (*path, "attribute"), entry["attribute"], _ATTRIBUTE)
        labels_node = entry.get("labels") or {}
        if not isinstance(labels_node, dict):
            raise doc.error((*path, "labels"), "labels is a mapping of label name to value")
        labels: dict[str, str] = {}
        for name, value in labels_node.items():
            _string_field(doc, (*path, "labels", name), name, _LABEL)
            if not isinstance(value, str):
                raise doc.error(
                    (*path, "labels", name), f"label values are quoted strings, not {value!r}"
                )
            labels[name] = value
        subject = entry.get("subject")
        if subject is not None and (not isinstance(subject, str) or not subject.strip()):
            raise doc.error((*path, "subject"), f"subject must be an entity name, not {subject!r}")
        subject_label = entry.get("subject_label")
        if subject_label is not None:
            subject_label = _string_field(doc, (*path, "subject_label"), subject_label, _LABEL)
        if subject is not None and subject_label is not None:
            raise doc.error(path, "give subject or subject_label, not both")
        value_label = entry.get("value_label")
        if value_label is not None:
            value_label = _string_field(doc, (*path, "value_label"), value_label, _LABEL)
        rules.append(
            MetricRule(
                metric=metric,
                attribute=attribute,
                labels=labels,
                subject=subject,
                subject_label=subject_label,
                value_label=value_label,
                line=doc.where(path)[0],
            )
        )
    return rules


class _Lines:
    """Iterates lines for the parser and remembers how far it got."""

    def __init__(self, text: str) -> None:
        self._lines = text.split("\n")
        self.current = 0

    def __iter__(self) -> Iterator[str]:
        for number, line in enumerate(self._lines, start=1):
            self.current = number
            yield line + "\n"


def parse_exposition(text: str, *, source: str = "<metrics>") -> list[MetricSample]:
    """Every sample of a text exposition, in order, with its line.

    Uses ``prometheus_client``'s parser; a malformed line raises
    ``DocumentError`` with its line number.
    """
    reader = _Lines(text)
    try:
        families = list(text_fd_to_metric_families(cast(TextIO, reader)))
    except Exception as exc:  # the parser raises bare ValueError, IndexError...
        line = reader.current or None
        shown = text.split("\n")[line - 1].strip() if line else ""
        reason = str(exc) or type(exc).__name__
        raise DocumentError(
            f"malformed exposition line {shown[:120]!r}: {reason}",
            source=source,
            line=line,
            column=1,
        ) from exc
    sample_lines = [
        n
        for n, raw in enumerate(text.split("\n"), start=1)
        if raw.strip() and not raw.strip().startswith("#")
    ]
    samples = [s for family in families for s in family.samples]
    lines: list[int | None] = list(sample_lines)
    if len(lines) != len(samples):  # pragma: no cover - the parser reads one sample a line
        lines = [None] * len(samples)
    return [
        MetricSample(
            s.name,
            dict(s.labels),
            float(s.value),
            None if s.timestamp is None else float(cast(Any, s.timestamp)),
            line,
        )
        for s, line in zip(samples, lines, strict=True)
    ]


def _sample_value(sample: MetricSample, rule: MetricRule, vtype: ValueType) -> object:
    """The sample (or its label) as a raw value of ``vtype``; ValueTypeError if it cannot be."""
    name = vtype.name

    def refuse(why: str, shown: object) -> ValueTypeError:
        return ValueTypeError(
            f"{rule.attribute} from {sample.name} (line {sample.line}): expected {vtype}, "
            f"got {shown!r}: {why}",
            attribute=rule.attribute,
            expected=str(vtype),
            value=repr(shown),
            line=sample.line,
        )

    if rule.value_label is not None:
        text = sample.labels.get(rule.value_label)
        if text is None:
            raise refuse(f"the sample has no label {rule.value_label!r}", None)
        if name == "int":
            if not _INT_TEXT.fullmatch(text):
                raise refuse("not an integer", text)
            return int(text)
        if name == "float":
            try:
                return float(text)
            except ValueError:
                raise refuse("not a number", text) from None
        if name == "bool":
            if text not in ("true", "false"):
                raise refuse("not true or false", text)
            return text == "true"
        return text
    try:
        return sample_number(sample.value, vtype)
    except ValueError as exc:
        if name in ("string", "enum", "version"):
            raise refuse(f"{exc} (value_label)", sample.value) from None
        raise refuse(str(exc), sample.value) from None


def sample_number(value: float, vtype: ValueType) -> object:
    """A sample's number as a raw value of ``vtype`` (``coerce`` types it): ``float`` and
    ``duration`` (seconds) as is, ``int`` when integral, ``bool`` from 0 or 1,
    ``timestamp`` from Unix seconds; ``ValueError`` saying why for anything else (a
    ``string``, ``enum`` or ``version`` is not a number). Shared by the exposition import
    and the Prometheus fact source (``caveat.connectors``)."""
    name = vtype.name
    if name in ("string", "enum", "version"):
        raise ValueError("a sample value is a number; take the text from a label")
    if name == "int":
        if not math.isfinite(value) or not value.is_integer():
            raise ValueError("not an integral number")
        return int(value)
    if name == "bool":
        if value not in (0.0, 1.0):
            raise ValueError("a bool sample is 0 or 1")
        return value == 1.0
    if name == "timestamp":
        if not math.isfinite(value):
            raise ValueError("not a finite number of Unix seconds")
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            raise ValueError("out of range of Unix seconds") from None
    return value


def prometheus_observations(
    world: World,
    samples: list[MetricSample],
    rules: list[MetricRule],
    *,
    subject: str | None = None,
    source: str | None = None,
    source_name: str = "<metrics>",
) -> tuple[list[tuple[float | None, Observation, int | None]], list[Skipped]]:
    """``(sample timestamp, observation, line)`` for every mapped sample, and the skipped.

    Raises ``UnknownAttribute`` for a rule whose attribute is not declared,
    ``SubjectUnresolved`` for a subject that does not resolve,
    ``ValueTypeError`` for a value that cannot have the declared type and
    ``DocumentError`` for a sample without a subject or two samples on one
    (subject, attribute).
    """
    for declared in rules:
        try:
            world.schema.require(declared.attribute)
        except UnknownAttribute as exc:
            raise UnknownAttribute(
                f"mapping rule at line {declared.line}: {exc.message}",
                line=declared.line,
                **exc.detail,
            ) from exc
    out: list[tuple[float | None, Observation, int | None]] = []
    skipped: list[Skipped] = []
    claimed: dict[tuple[str, str], int | None] = {}
    for sample in samples:
        rule = next((r for r in rules if r.matches(sample.name, sample.labels)), None)
        if rule is None:
            skipped.append(Skipped(sample.name, "unmapped", sample.line))
            continue
        if rule.subject is not None:
            name = rule.subject
        elif rule.subject_label is not None:
            label = sample.labels.get(rule.subject_label)
            if label is None:
                raise DocumentError(
                    f"{sample.name} has no label {rule.subject_label!r} to name its subject",
                    source=source_name,
                    line=sample.line,
                )
            name = label
        elif subject is not None:
            name = subject
        else:
            raise DocumentError(
                f"{sample.name}: the rule at line {rule.line} names no subject and no default "
                "subject was given",
                source=source_name,
                line=sample.line,
            )
        try:
            canonical = world.resolver.resolve(name)
        except SubjectUnresolved as exc:
            raise SubjectUnresolved(
                f"{sample.name} (line {sample.line}): {exc.message}", line=sample.line, **exc.detail
            ) from exc
        spec = world.schema.require(rule.attribute)
        key = (canonical, rule.attribute)
        if key in claimed:
            raise DocumentError(
                f"{sample.name} sets {rule.attribute} of {canonical} again "
                f"(first set at line {claimed[key]})",
                source=source_name,
                line=sample.line,
            )
        claimed[key] = sample.line
        raw = _sample_value(sample, rule, spec.vtype)
        out.append(
            (sample.timestamp, Observation(canonical, rule.attribute, raw, source), sample.line)
        )
    return out, skipped


def import_prometheus(
    *,
    session: Session,
    world: World,
    actor: Actor,
    text: str,
    rules: list[MetricRule],
    observed_at: datetime,
    now: datetime,
    subject: str | None = None,
    source_name: str = "<metrics>",
    source: str | None = None,
) -> ImportResult:
    """Parse an exposition, map its samples and store the facts, atomically.

    Samples without a timestamp are observed at ``observed_at``; the fact
    source is ``source``, by default ``prometheus:<source_name>``. On any
    error (see ``prometheus_observations``) nothing is stored.
    """
    actor.require("observe")
    samples = parse_exposition(text, source=source_name)
    mapped, skipped = prometheus_observations(
        world,
        samples,
        rules,
        subject=subject,
        source=source or f"prometheus:{source_name}",
        source_name=source_name,
    )
    groups: dict[datetime, list[tuple[Observation, int | None]]] = {}
    for stamp, obs, line in mapped:
        try:
            at = observed_at if stamp is None else datetime.fromtimestamp(stamp, UTC)
        except (OverflowError, OSError, ValueError):
            raise DocumentError(
                f"sample timestamp {stamp!r} is out of range", source=source_name, line=line
            ) from None
        groups.setdefault(at, []).append((obs, line))
    ordered = sorted(groups.items())
    lines = [line for _, group in ordered for _, line in group]
    facts = store_observations(
        session=session,
        world=world,
        batches=[(at, [obs for obs, _ in group]) for at, group in ordered],
        now=now,
        line_of=lambda i: lines[i],
        source_name=source_name,
    )
    return ImportResult(facts=tuple(facts), skipped=tuple(skipped))
