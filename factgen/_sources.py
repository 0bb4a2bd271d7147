"""Fact sources and hook mappings: a tenant's ``sources.yaml`` (model §2.1, §2.2).

The file declares where facts come from (``sources:``) and how hook payloads name
subjects (``hooks:``); docs/sources.md and docs/hooks.md are its reference. It is
validated here, once, with the line and column of the first bad node
(``DocumentError``), and kept in the store as the validated configuration
(``SourcesConfig``), which the connectors of ``caveat.connectors`` read. Nothing
here does I/O to the outside: fetching is the connectors' job, typing the schema's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
    model_validator,
)
from sqlalchemy.orm import Session

from factgen import _queries as q
from factgen._access import Actor
from factgen._document import Document, Path, load_yaml
from factgen._schema import SchemaRegistry
from factgen._world import World
from predicates import Duration, ValueType, coerce
from predicates.errors import DocumentError, UnknownAttribute, ValueTypeError

__all__ = [
    "AlertmanagerHook",
    "CloudEventsHook",
    "GitHubHook",
    "HooksConfig",
    "LoadedSources",
    "PagerDutyHook",
    "SourceAttribute",
    "SourceKind",
    "SourceSpec",
    "SourceStatus",
    "SourcesConfig",
    "Span",
    "claim_delivery",
    "first_problem",
    "load_sources_yaml",
    "loaded_sources",
    "record_pull",
    "settle_delivery",
    "source_status",
    "store_sources",
]

SourceKind = Literal["prometheus", "http_json", "file"]
_NAME = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
_LABEL = r"^[a-zA-Z_][a-zA-Z0-9_]*$"
_ENV = r"^[A-Za-z_][A-Za-z0-9_]*$"
_ATTRIBUTE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
_POINTER = re.compile(r"^(/([^~/]|~[01])*)*$")


def _duration(value: object) -> object:
    """``30s``, ``2m`` or a number of seconds, as a ``timedelta``; anything else is
    left to pydantic to refuse with its type."""
    if isinstance(value, timedelta | bool):
        return value
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    if isinstance(value, str):
        try:
            parsed = coerce(value, ValueType("duration"))
        except ValueTypeError as exc:
            raise ValueError(f"a duration like 30s, 2m or 1h, not {value!r}") from exc
        assert isinstance(parsed, Duration)
        return timedelta(microseconds=parsed.micros)
    return value


#: A duration in the file (``30s``); seconds in the stored JSON.
Span = Annotated[
    timedelta,
    BeforeValidator(_duration),
    PlainSerializer(lambda d: d.total_seconds(), return_type=float, when_used="json"),
]
Name = Annotated[str, Field(pattern=_NAME)]
EnvName = Annotated[str, Field(pattern=_ENV)]
Subjects = list[Annotated[str, Field(min_length=1)]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SourceAttribute(_Strict):
    """One attribute a source answers: a PromQL instant query whose samples name their
    subject by ``subject_label`` (or all name ``subject``), or a JSON pointer into the
    document a ``http_json`` or ``file`` source fetches per subject."""

    attribute: Annotated[str, Field(pattern=_ATTRIBUTE)]
    query: Annotated[str, Field(min_length=1)] | None = None
    subject_label: Annotated[str, Field(pattern=_LABEL)] | None = None
    subject: Annotated[str, Field(min_length=1)] | None = None
    pointer: str | None = None

    @property
    def provenance(self) -> str:
        """What explain shows as the query behind an observation."""
        return self.query if self.query is not None else (self.pointer or "")


class SourceSpec(_Strict):
    """One fact source of a tenant (model §2.1)."""

    name: Name
    kind: SourceKind
    url: Annotated[str, Field(min_length=1)] | None = None
    path: Annotated[str, Field(min_length=1)] | None = None
    subjects: Subjects = []
    every: Span | None = None
    timeout: Span = timedelta(seconds=2)
    token_env: EnvName | None = None
    attributes: Annotated[list[SourceAttribute], Field(min_length=1)]


class AlertmanagerHook(_Strict):
    """Alertmanager (webhook version 4): which alert labels name the subjects, tried in
    order. ``subject_label: service`` (scenario-format.md's spelling) is the list of one."""

    subject_labels: Annotated[list[Annotated[str, Field(pattern=_LABEL)]], Field(min_length=1)] = [
        "service"
    ]

    @model_validator(mode="before")
    @classmethod
    def _one_label(cls, data: object) -> object:
        if isinstance(data, dict) and "subject_label" in data:
            if "subject_labels" in data:
                raise ValueError("give subject_label or subject_labels, not both")
            rest = {k: v for k, v in data.items() if k != "subject_label"}
            return {**rest, "subject_labels": [data["subject_label"]]}
        return data


class GitHubHook(_Strict):
    """GitHub ``deployment_status``: repositories (``owner/name``, or
    ``owner/name@environment``) to subjects, and the secret's environment variable."""

    repositories: dict[str, Subjects] = {}
    environments: list[str] = []
    secret_env: EnvName | None = None


class PagerDutyHook(_Strict):
    """PagerDuty v3 webhooks: services (id or name) to subjects, the signing secret."""

    services: dict[str, Subjects] = {}
    secret_env: EnvName | None = None


class CloudEventsHook(_Strict):
    """CloudEvents 1.0: the subjects come from the event's ``subject`` attribute and
    its data's ``subjects``, resolved through the aliases; ``types`` maps an event
    ``type`` (``dev.argocd.sync.succeeded``) to a caveat event type (``deploy``)."""

    types: dict[str, Literal["deploy", "config_change", "version_change", "authorisation"]] = {}


class HooksConfig(_Strict):
    """How each hook's payload names its subjects (model §2.2)."""

    alertmanager: AlertmanagerHook = AlertmanagerHook()
    github: GitHubHook = GitHubHook()
    pagerduty: PagerDutyHook = PagerDutyHook()
    cloudevents: CloudEventsHook = CloudEventsHook()


class SourcesConfig(_Strict):
    """A tenant's whole ``sources.yaml``, validated."""

    sources: list[SourceSpec] = []
    hooks: HooksConfig = HooksConfig()

    def source(self, name: str) -> SourceSpec | None:
        """The source named ``name``, if declared."""
        return next((s for s in self.sources if s.name == name), None)

    def to_json(self) -> dict[str, Any]:
        """The JSON form kept in the store (durations as seconds)."""
        return self.model_dump(mode="json", exclude_defaults=False)

    @classmethod
    def from_json(cls, data: object) -> SourcesConfig:
        """The configuration as ``to_json`` wrote it."""
        return cls.model_validate(data, strict=False)


def first_problem(doc: Document, exc: ValidationError) -> DocumentError:
    """The first problem (in document order) of a pydantic validation of ``doc``'s data,
    as a ``DocumentError`` with its line and column."""
    problems = []
    for error in exc.errors():
        loc: Path = tuple(p for p in error["loc"] if isinstance(p, str | int))
        kind = error["type"]
        if kind == "missing":
            path, key = loc[:-1], False
            message = f"missing required key {loc[-1]!r}"
        elif kind == "extra_forbidden":
            path, key = loc, True
            message = f"unknown key {loc[-1]!r}"
        else:
            path, key = loc, False
            message = error["msg"].removeprefix("Value error, ")
            if kind == "string_pattern_mismatch":
                message = f"{error.get('input')!r} is not a valid {loc[-1]}"
        line, column = doc.where(path, key=key)
        problems.append(((line or 0, column or 0), path, message, key))
    (_, path, message, key) = min(problems, key=lambda p: p[0])
    return doc.error(path, message, key=key)


def _check(doc: Document, config: SourcesConfig, schema: SchemaRegistry | None) -> None:
    """What one field cannot say alone: names unique, what each kind needs, and (with
    ``schema``) every attribute declared."""
    seen: dict[str, int] = {}
    for index, source in enumerate(config.sources):
        path: Path = ("sources", index)
        if source.name in seen:
            raise doc.error(
                (*path, "name"),
                f"source {source.name!r} is already declared (entry {seen[source.name]})",
            )
        seen[source.name] = index
        if source.kind == "prometheus":
            if source.url is None:
                raise doc.error(path, "a prometheus source needs url (the Prometheus HTTP API)")
            if source.path is not None:
                raise doc.error((*path, "path"), "a prometheus source takes url, not path")
        elif source.kind == "http_json":
            if source.url is None or "{subject}" not in source.url:
                raise doc.error(path, "an http_json source needs a url template with {subject}")
        elif source.path is None or "{subject}" not in source.path:
            raise doc.error(path, "a file source needs a path template with {subject}")
        if source.kind != "prometheus" and not source.subjects:
            raise doc.error(path, f"a {source.kind} source lists the subjects it is read for")
        if source.every is not None and source.every < timedelta(seconds=1):
            raise doc.error((*path, "every"), "every is at least 1s")
        if not timedelta(0) < source.timeout <= timedelta(minutes=1):
            raise doc.error((*path, "timeout"), "timeout is longer than 0 and at most 1m")
        attributes: set[str] = set()
        for a_index, attr in enumerate(source.attributes):
            a_path: Path = (*path, "attributes", a_index)
            if attr.attribute in attributes:
                raise doc.error(
                    (*a_path, "attribute"), f"{attr.attribute!r} is already answered by this source"
                )
            attributes.add(attr.attribute)
            if schema is not None:
                try:
                    schema.require(attr.attribute)
                except UnknownAttribute as exc:
                    raise doc.error(
                        (*a_path, "attribute"), exc.message, code=exc.code, **exc.detail
                    ) from None
            if source.kind == "prometheus":
                if attr.query is None:
                    raise doc.error(a_path, "a prometheus attribute needs query (PromQL)")
                if attr.pointer is not None:
                    raise doc.error((*a_path, "pointer"), "a prometheus attribute takes query")
                if (attr.subject_label is None) == (attr.subject is None):
                    raise doc.error(
                        a_path, "give subject_label (the label naming the subject) or subject"
                    )
            else:
                if attr.pointer is None:
                    raise doc.error(
                        a_path, f"a {source.kind} attribute needs pointer (a JSON pointer)"
                    )
                if not _POINTER.fullmatch(attr.pointer):
                    raise doc.error(
                        (*a_path, "pointer"), f"{attr.pointer!r} is not a JSON pointer (RFC 6901)"
                    )
                for key in ("query", "subject_label", "subject"):
                    if getattr(attr, key) is not None:
                        raise doc.error(
                            (*a_path, key), f"a {source.kind} attribute takes pointer, not {key}"
                        )


def load_sources_yaml(
    text: str, *, source: str = "<sources>", schema: SchemaRegistry | None = None
) -> SourcesConfig:
    """The validated ``sources.yaml``; ``DocumentError`` with line and column for
    malformed YAML, an unknown or missing key, a value of the wrong type, a duplicate
    source, or an attribute that lacks what its kind needs; with ``schema``, also for
    an attribute it does not declare (code ``fact_unknown_attribute``). Without it,
    attribute names are only checked for shape."""
    doc = load_yaml(text, source=source)
    if doc.data is None:
        doc.data = {}
    if not isinstance(doc.data, dict):
        raise doc.error((), "expected a mapping with sources: and hooks:")
    try:
        config = SourcesConfig.model_validate(doc.data)
    except ValidationError as exc:
        raise first_problem(doc, exc) from None
    _check(doc, config, schema)
    return config


# --- in the store ------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedSources:
    """A tenant's sources as loaded: the configuration, its text, who and when."""

    config: SourcesConfig
    document: str
    loaded_at: datetime
    loaded_by: str


@dataclass(frozen=True)
class SourceStatus:
    """What a source's pulls did so far (``caveat sources status``)."""

    source: str
    pulls: int
    last_pull_at: datetime | None
    last_ok_at: datetime | None
    samples_stored: int
    refused: dict[str, int]
    errors: int
    last_error: str | None
    last_error_at: datetime | None
    consecutive_failures: int
    last_latency_ms: float | None


def store_sources(
    *,
    session: Session,
    actor: Actor,
    world: World,
    config: SourcesConfig,
    document: str,
    now: datetime,
) -> LoadedSources:
    """Replace the tenant's sources (``sources`` action: admins). Every attribute a source
    answers must be declared in the schema (``UnknownAttribute`` naming it)."""
    actor.require("sources")
    for spec in config.sources:
        for attr in spec.attributes:
            world.schema.require(attr.attribute)
    q.put_sources(
        session=session,
        tenant=world.tenant,
        document=document,
        config=config.to_json(),
        at=now,
        by=actor.id,
    )
    return LoadedSources(config, document, now, actor.id)


def loaded_sources(*, session: Session, tenant: str) -> LoadedSources | None:
    """The tenant's sources, or None when none were ever loaded."""
    row = q.get_sources(session=session, tenant=tenant)
    if row is None:
        return None
    return LoadedSources(
        SourcesConfig.from_json(row.config), row.document, row.loaded_at, row.loaded_by
    )


def record_pull(
    *,
    session: Session,
    tenant: str,
    source: str,
    at: datetime,
    stored: int,
    refused: Mapping[str, int],
    error: str | None,
    latency_ms: float,
    scheduled: bool = True,
) -> None:
    """Count one pull of ``source`` (stored samples, refusals by reason, its error); a
    pull that is not ``scheduled`` (a recall's refresh) leaves the schedule's fields
    (last pull, consecutive failures) as they were."""
    q.record_pull(
        session=session,
        tenant=tenant,
        source=source,
        at=at,
        stored=stored,
        refused=dict(refused),
        error=error,
        latency_ms=latency_ms,
        scheduled=scheduled,
    )


def source_status(*, session: Session, tenant: str) -> list[SourceStatus]:
    """Every source's status, by name (a source never pulled has none)."""
    return [
        SourceStatus(
            r.source,
            r.pulls,
            r.last_pull_at,
            r.last_ok_at,
            r.samples_stored,
            {str(k): int(v) for k, v in dict(r.refused).items()},
            r.errors,
            r.last_error,
            r.last_error_at,
            r.consecutive_failures,
            r.last_latency_ms,
        )
        for r in q.source_status(session=session, tenant=tenant)
    ]


def claim_delivery(
    *, session: Session, tenant: str, kind: str, delivery_id: str, now: datetime
) -> dict[str, Any] | None:
    """Take a hook delivery id (model §2.2): None the first time, else what the first
    delivery did (a delivery seen twice is acted on once)."""
    return q.claim_delivery(
        session=session, tenant=tenant, kind=kind, delivery_id=delivery_id, at=now
    )


def settle_delivery(
    *, session: Session, tenant: str, kind: str, delivery_id: str, outcome: Mapping[str, Any]
) -> None:
    """Keep what a delivery did, for its repeats."""
    q.set_delivery_outcome(
        session=session, tenant=tenant, kind=kind, delivery_id=delivery_id, outcome=dict(outcome)
    )
