"""HTTP JSON: for each subject the source lists, one ``GET`` of the URL template with
``{subject}`` replaced by the subject's name (URL-quoted), and each attribute read at
its JSON pointer (RFC 6901) in the answer, typed by the schema.

A pointer the document does not hold is refused (``pointer_missing``); a subject whose
GET fails (down, slow, 4xx/5xx, not JSON) is that subject's error: nothing of it is
stored, the other subjects still count. The document has no time of its own: its
observations are dated when the answer arrived (or the pull's ``now``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from urllib.parse import quote

import factgen
from caveat.connectors._http import FetchError, Transport, bearer
from caveat.connectors._map import Part, document_part, subject_fetches

__all__ = ["fetch_subject", "fetches", "subject_url"]

KIND = "http_json"


def subject_url(template: str, name: str) -> str:
    """The template with ``{subject}`` replaced by ``name``, quoted as one path segment
    or query value (``/`` and ``?`` included)."""
    return template.replace("{subject}", quote(name, safe=""))


def fetch_subject(
    spec: factgen.SourceSpec,
    name: str,
    attributes: tuple[factgen.SourceAttribute, ...],
    world: factgen.World,
    *,
    transport: Transport,
    timeout: float,
    now: datetime | None = None,
) -> Part:
    """One subject's document, its attributes mapped; its error is the part's."""
    url = subject_url(spec.url or "", name)
    names = [a.attribute for a in attributes]
    try:
        document = transport.get_json(url, headers=bearer(spec.token_env), timeout=timeout)
    except FetchError as exc:
        return Part.failed(names, f"{name}: {exc.message}")
    except Exception as exc:  # a connector never lets a source's answer crash a pull
        return Part.failed(names, f"{name}: {type(exc).__name__}: {exc}")
    return document_part(
        world,
        spec,
        name=name,
        document=document,
        attributes=attributes,
        now=now,
        provenance={"kind": KIND, "url": url},
    )


def fetches(
    spec: factgen.SourceSpec,
    world: factgen.World,
    wanted: Mapping[str, frozenset[str]] | None,
    transport: Transport,
    now: datetime | None = None,
) -> list[tuple[tuple[str, ...], Callable[[float], Part]]]:
    """One GET per listed subject (in a refresh, per subject needed)."""
    return subject_fetches(
        spec,
        world,
        wanted,
        lambda name, attrs, timeout: fetch_subject(
            spec, name, attrs, world, transport=transport, timeout=timeout, now=now
        ),
    )
