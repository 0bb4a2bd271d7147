"""CloudEvents 1.0 over HTTP, structured and binary modes, as caveat events
(docs/hooks.md).

* structured mode: ``Content-Type: application/cloudevents+json``, the body is the
  event (batch mode is refused: one event per request);
* binary mode: the attributes in ``ce-*`` headers (``ce-specversion``, ``ce-id``,
  ``ce-source``, ``ce-type``, ``ce-time``, ``ce-subject``, extensions), the body is
  ``data`` with ``Content-Type`` as its ``datacontenttype``.

Either is read exactly as ``caveat facts import --format cloudevents`` reads an event
(``factgen.parse_cloudevent``: subjects, changes, principal, time, identity), with
``hooks.cloudevents.types`` mapping a foreign ``type`` (Argo CD's) to a caveat event
type first. An event of a type caveat does not know is acknowledged and ignored. The
delivery id is ``<source> <id>``; ``time`` is checked against the clock-skew rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import factgen
from caveat import app as use
from caveat.connectors._hooks import Translation, read_json
from predicates.errors import DocumentError

__all__ = ["STRUCTURED", "translate"]

#: The media type of structured mode.
STRUCTURED = "application/cloudevents+json"
_BATCH = "application/cloudevents-batch+json"


def _binary(body: bytes, headers: Mapping[str, str]) -> dict[str, object]:
    node: dict[str, object] = {
        k[3:]: v for k, v in headers.items() if k.startswith("ce-") and k != "ce-"
    }
    content_type = headers.get("content-type")
    if content_type:
        node["datacontenttype"] = content_type
    if body.strip():
        is_json = content_type is None or "json" in content_type.lower()
        if is_json:
            node["data"] = read_json(body, "cloudevents (binary mode data)").data
        else:
            node.setdefault("datacontenttype", "application/octet-stream")
    return node


def translate(
    body: bytes, headers: Mapping[str, str], config: factgen.HooksConfig, now: datetime
) -> Translation:
    """The actions of one CloudEvent (module doc)."""
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    text: str | None = None
    if media == _BATCH:
        raise DocumentError(
            "batch mode is not taken: send one event per request", source="cloudevents"
        )
    if media == STRUCTURED:
        doc = read_json(body, "cloudevents")
        node, text = doc.data, body.decode("utf-8")
    elif "ce-specversion" in headers:
        node = _binary(body, headers)
    else:
        raise DocumentError(
            "not a CloudEvent: send Content-Type application/cloudevents+json (structured "
            "mode) or the ce-* headers (binary mode)",
            source="cloudevents",
        )
    event = factgen.parse_cloudevent(
        node, now=now, text=text, source_name="cloudevents", types=config.cloudevents.types
    )
    if isinstance(event, str):
        assert isinstance(node, dict)
        ident = f"{node.get('source')} {node.get('id')}"
        reason = f"type {event!r} names no caveat event type (hooks.cloudevents.types)"
        return Translation((use.Ignore(reason),), ident)
    action = use.PostEvent(
        type=event.type,
        subjects=event.subjects,
        occurred_at=event.occurred_at,
        changes=event.changes,
        principal=event.principal,
        external_id=event.external_id,
    )
    return Translation((action,), event.external_id, event.occurred_at if event.timed else None)
