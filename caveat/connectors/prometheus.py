"""Prometheus: one instant query (``GET /api/v1/query``, no ``time``: Prometheus's now)
per attribute per pull.

Each sample of the answer (a vector; a scalar with a fixed ``subject``) is one
observation of the attribute: its subject is the value of ``subject_label`` through the
tenant's aliases (or the attribute's fixed ``subject``), its value the sample's string
typed by the schema, its time the sample's own. Refused, never stored under a guess:
a sample without the label (``label_missing``), a label no entity answers to
(``subject_unresolved``), ``NaN`` or ``±Inf`` (``not_finite``), a value the type cannot
hold (``fact_type_mismatch``), and both of two samples that land on one subject
(``ambiguous``). An error answer (``status: error``, 4xx/5xx, not JSON, another shape)
is the query's error: nothing of it is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime

import factgen
from caveat.connectors._http import FetchError, Transport, bearer
from caveat.connectors._map import (
    LABEL_MISSING,
    Part,
    refusal,
    settle,
    typed_observation,
)

__all__ = ["AnswerError", "fetch_query", "fetches", "map_answer", "query_url"]

KIND = "prometheus"
_API = "/api/v1/query"


class AnswerError(FetchError):
    """Prometheus answered, but not a successful instant vector or scalar."""


def query_url(base: str) -> str:
    """The instant-query endpoint of a Prometheus at ``base`` (its HTTP API root, or
    the endpoint itself)."""
    base = base.rstrip("/")
    return base if base.endswith(_API) else base + _API


def _sample(raw: object, times: dict[float, datetime]) -> tuple[datetime, float]:
    """A ``[unix seconds, "value"]`` pair as (time, number); AnswerError otherwise.
    ``times`` remembers the times seen (an instant query's samples share one)."""
    if not (isinstance(raw, list) and len(raw) == 2):
        raise AnswerError(f"a sample is [time, value], not {str(raw)[:80]}")
    stamp, text = raw
    if not isinstance(stamp, int | float) or isinstance(stamp, bool) or not isinstance(text, str):
        raise AnswerError(f"a sample is [time, value], not {str(raw)[:80]}")
    try:
        number = float(text)
    except ValueError:
        raise AnswerError(f"a sample's value {text[:40]!r} is not a number") from None
    at = times.get(stamp)
    if at is None:
        try:
            at = times[stamp] = datetime.fromtimestamp(stamp, UTC)
        except (OverflowError, OSError, ValueError):
            raise AnswerError(f"a sample's time {stamp!r} is out of range") from None
    return at, number


def _samples(body: object) -> list[tuple[dict[str, str], datetime, float]]:
    """The (labels, time, value) of every sample of an instant query's answer."""
    if not isinstance(body, dict):
        raise AnswerError("the answer is not a Prometheus API response")
    status = body.get("status")
    if status == "error":
        raise AnswerError(f"{body.get('errorType', 'error')}: {body.get('error', '')}")
    data = body.get("data")
    if status != "success" or not isinstance(data, dict):
        raise AnswerError("the answer is not a Prometheus API response")
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar":
        at, number = _sample(result, {})
        return [({}, at, number)]
    if kind != "vector":
        raise AnswerError(f"an instant query answers a vector or a scalar, not {kind!r}")
    if not isinstance(result, list):
        raise AnswerError("a vector's result is a list")
    out = []
    times: dict[float, datetime] = {}
    for entry in result:
        labels = entry.get("metric") if isinstance(entry, dict) else None
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise AnswerError("a vector sample has metric labels and a value")
        at, number = _sample(entry.get("value"), times)
        out.append((labels, at, number))
    return out


def _name_of(labels: Mapping[str, str], attribute: factgen.SourceAttribute) -> str | None:
    """The subject a sample names: the attribute's fixed subject, else its label's value."""
    if attribute.subject is not None:
        return attribute.subject
    return labels.get(attribute.subject_label or "")


def _subject_of(
    labels: Mapping[str, str], attribute: factgen.SourceAttribute, world: factgen.World
) -> str | None:
    name = _name_of(labels, attribute)
    return None if name is None else world.resolver.lookup(name)


def map_answer(
    body: object,
    *,
    source: str,
    attribute: factgen.SourceAttribute,
    world: factgen.World,
    subjects: Collection[str] | None = None,
) -> tuple[list[factgen.Observation], list[factgen.Refusal]]:
    """An instant query's answer as the observations to store and the refusals with their
    reasons: every sample is one or the other. ``AnswerError`` for an answer that is an
    error or not an instant vector/scalar (then nothing of it counts).

    With ``subjects`` (a refresh: the canonical subjects needed), only the samples of
    those subjects are mapped; the others are left out, neither stored nor refused."""
    part = Part()
    query = attribute.query or ""
    samples = _samples(body)
    if subjects is not None:
        samples = [s for s in samples if _subject_of(s[0], attribute, world) in subjects]
    provenances: dict[datetime, dict[str, str]] = {}  # one per sample time, shared
    for labels, at, number in samples:
        provenance = provenances.get(at)
        if provenance is None:
            provenance = provenances[at] = {
                "source": source,
                "kind": KIND,
                "query": query,
                "sample_time": at.isoformat(),
            }
        name = _name_of(labels, attribute)
        if name is None:
            obs = factgen.Observation("", attribute.attribute, number, source, at, provenance)
            part.refused.append(
                refusal(
                    obs,
                    LABEL_MISSING,
                    f"a sample of {query!r} has no label {attribute.subject_label!r}"
                    f" to name its subject (labels: {sorted(labels)})",
                )
            )
            continue
        part.take(
            typed_observation(
                world,
                name=name,
                attribute=attribute.attribute,
                raw=number,
                source=source,
                observed_at=at,
                provenance=provenance,
                number=True,
            )
        )
    return settle(part.candidates, part.refused)


def fetch_query(
    spec: factgen.SourceSpec,
    attribute: factgen.SourceAttribute,
    world: factgen.World,
    *,
    transport: Transport,
    timeout: float,
    subjects: Collection[str] | None = None,
) -> Part:
    """One attribute's query against ``spec``'s Prometheus, mapped (only the samples of
    ``subjects`` when given); its error (the source down, an error answer, garbage) is
    the part's error, never an exception."""
    part = Part()
    try:
        body = transport.get_json(
            query_url(spec.url or ""),
            params={"query": attribute.query or ""},
            headers=bearer(spec.token_env),
            timeout=timeout,
        )
        part.candidates, part.refused = map_answer(
            body, source=spec.name, attribute=attribute, world=world, subjects=subjects
        )
    except FetchError as exc:
        part.error([attribute.attribute], f"{attribute.attribute}: {exc.message}")
    except Exception as exc:  # a connector never lets a source's answer crash a pull
        part.error([attribute.attribute], f"{attribute.attribute}: {type(exc).__name__}: {exc}")
    return part


def fetches(
    spec: factgen.SourceSpec,
    world: factgen.World,
    wanted: Mapping[str, frozenset[str]] | None,
    transport: Transport,
    now: datetime | None = None,
) -> list[tuple[tuple[str, ...], Callable[[float], Part]]]:
    """The fetches of one pull of ``spec``: one query per attribute (per wanted attribute
    in a refresh), each with the attributes it answers."""

    def one(attr: factgen.SourceAttribute) -> Callable[[float], Part]:
        subjects = None if wanted is None else wanted[attr.attribute]
        return lambda timeout: fetch_query(
            spec, attr, world, transport=transport, timeout=timeout, subjects=subjects
        )

    return [
        ((attr.attribute,), one(attr))
        for attr in spec.attributes
        if wanted is None or attr.attribute in wanted
    ]
