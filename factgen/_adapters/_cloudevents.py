"""CloudEvents (JSON, structured mode, specversion 1.0) recorded as caveat events.

One event object, or a batch (a JSON array). Each event::

    {"specversion": "1.0", "id": "deploy-4711", "source": "ci/payments",
     "type": "com.example.deploy", "time": "2026-03-01T09:00:00Z",
     "subject": "payment-api",
     "data": {"subjects": ["payment-api"], "changes": {"config.connection_pool.max": 100},
              "principal": "agent-ir"}}

* ``type``: the last dot-separated segment, with ``-`` read as ``_``, names
  the caveat event type: ``deploy``, ``config_change``, ``version_change``,
  ``authorisation`` (``authorization`` too). ``com.caveat.deploy``,
  ``io.argo.deploy`` and ``config-change`` all qualify. An event of any other
  type is skipped and reported (``unsupported_type``), not an error.
* subjects: ``data.subjects``, else the ``subject`` attribute, else the
  caller's default subject; each resolves through aliases.
* ``data.changes``: attribute -> value, typed against the schema.
* principal: ``data.principal``, else the ``principal`` extension attribute.
* ``time`` is when the event occurred (the import instant when absent).
* identity: ``external_id`` is ``"<source> <id>"`` (a CloudEvent is identified
  by source and id together); a repeat is a ``Conflict``.

The batch is atomic: any malformed, unresolved or mistyped event rejects the
whole batch and nothing is stored. Other members of ``data`` are ignored.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from factgen._access import Actor
from factgen._adapters._common import ImportResult, Skipped
from factgen._document import Document, Path, load_json
from factgen._events import EVENT_TYPES, Event, record_event
from factgen._world import World
from predicates import ValueType, coerce
from predicates.errors import CaveatError, ValueTypeError, shown

__all__ = ["CloudEvent", "event_type_of", "import_cloudevents", "parse_cloudevent"]

_FRACTION = re.compile(r"(\.[0-9]{6})[0-9]+")
_JSON_TYPES = re.compile(r"application/(.+\+)?json(;.*)?", re.IGNORECASE)


def event_type_of(ce_type: str) -> str | None:
    """The caveat event type a CloudEvents ``type`` names, or None."""
    last = ce_type.rsplit(".", 1)[-1].strip().lower().replace("-", "_")
    if last == "authorization":
        last = "authorisation"
    return last if last in EVENT_TYPES else None


def _text(doc: Document, path: Path, value: object, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise doc.error(path, f"{what} must be a non-empty string, not {shown(value)}")
    return value


def _time(doc: Document, path: Path, value: object) -> datetime:
    if not isinstance(value, str):
        raise doc.error(path, f"time is an RFC 3339 timestamp string, not {shown(value)}")
    text = _FRACTION.sub(r"\1", value.strip().upper())  # nanoseconds -> microseconds
    try:
        stamp = coerce(text, ValueType("timestamp"))
    except ValueTypeError as exc:
        raise doc.error(path, f"time {shown(value)}: {exc.message}") from exc
    assert isinstance(stamp, datetime)
    return stamp


def _event_args(
    doc: Document,
    path: Path,
    node: object,
    default_subject: str | None,
    now: datetime,
    types: Mapping[str, str] | None = None,
) -> dict[str, Any] | str:
    """``record_event`` keyword arguments for one CloudEvent, or the skipped type.
    ``types`` maps a foreign ``type`` (Argo CD's) to a caveat event type first."""
    if not isinstance(node, dict):
        raise doc.error(path, "a CloudEvent is a JSON object")
    for key in ("specversion", "id", "source", "type"):
        if key not in node:
            raise doc.error(path, f"missing required attribute {key!r}")
    if node["specversion"] != "1.0":
        raise doc.error(
            (*path, "specversion"), f"specversion must be '1.0', not {node['specversion']!r}"
        )
    ce_id = _text(doc, (*path, "id"), node["id"], "id")
    ce_source = _text(doc, (*path, "source"), node["source"], "source")
    ce_type = _text(doc, (*path, "type"), node["type"], "type")
    etype = (types or {}).get(ce_type) or event_type_of(ce_type)
    if etype is None:
        return ce_type
    occurred = _time(doc, (*path, "time"), node["time"]) if node.get("time") is not None else now
    content_type = node.get("datacontenttype")
    if content_type is not None and (
        not isinstance(content_type, str) or not _JSON_TYPES.fullmatch(content_type)
    ):
        raise doc.error((*path, "datacontenttype"), f"data must be JSON, not {content_type!r}")
    if "data_base64" in node:
        raise doc.error((*path, "data_base64"), "binary data is not supported; send JSON data")
    data = node.get("data")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise doc.error((*path, "data"), "data is a JSON object with subjects, changes, principal")
    subjects: list[str]
    if data.get("subjects") is not None:
        raw = data["subjects"]
        if not isinstance(raw, list) or not all(isinstance(s, str) and s for s in raw):
            raise doc.error((*path, "data", "subjects"), "subjects is a list of entity names")
        subjects = list(raw)
    elif node.get("subject") is not None:
        subjects = [_text(doc, (*path, "subject"), node["subject"], "subject")]
    elif default_subject is not None:
        subjects = [default_subject]
    elif etype == "authorisation":
        subjects = []
    else:
        raise doc.error(
            path, f"a {etype} event names its subjects (data.subjects or subject); none given"
        )
    changes = data.get("changes")
    if changes is None:
        changes = {}
    if not isinstance(changes, dict):
        raise doc.error((*path, "data", "changes"), "changes maps attributes to values")
    principal = data.get("principal", node.get("principal"))
    if principal is not None:
        principal = _text(doc, (*path, "data", "principal"), principal, "principal")
    return {
        "type": etype,
        "subjects": subjects,
        "changes": changes,
        "principal": principal,
        "occurred_at": occurred,
        "source": ce_source,
        "external_id": f"{ce_source} {ce_id}",
    }


@dataclass(frozen=True)
class CloudEvent:
    """One CloudEvent read as a caveat event: ``record_event``'s arguments, with the
    event's ``id`` and ``source`` and whether it said its ``time``."""

    type: str
    subjects: tuple[str, ...]
    changes: dict[str, object] = field(hash=False)
    principal: str | None
    occurred_at: datetime
    timed: bool
    id: str
    source: str
    external_id: str


def parse_cloudevent(
    node: object,
    *,
    now: datetime,
    text: str | None = None,
    source_name: str = "<event>",
    types: Mapping[str, str] | None = None,
    default_subject: str | None = None,
) -> CloudEvent | str:
    """One CloudEvent (a JSON object; ``text`` is the JSON it was read from, for line
    and column) as a ``CloudEvent``, or its ``type`` when it names no caveat event type
    (neither ``types`` nor ``event_type_of`` knows it). ``DocumentError`` saying where
    for a malformed event, exactly as ``import_cloudevents`` reads it; nothing is
    stored (what a hook receiving CloudEvents over HTTP shares with the import)."""
    doc = Document(node, source_name, lazy_text=text)
    args = _event_args(doc, (), node, default_subject, now, types)
    if isinstance(args, str):
        return args
    assert isinstance(node, dict)
    return CloudEvent(
        type=args["type"],
        subjects=tuple(args["subjects"]),
        changes=dict(args["changes"]),
        principal=args["principal"],
        occurred_at=args["occurred_at"],
        timed=node.get("time") is not None,
        id=str(node["id"]),
        source=args["source"],
        external_id=args["external_id"],
    )


def _relabel(exc: CaveatError, prefix: str, line: int | None) -> CaveatError:
    """A copy of ``exc`` (same class, code and detail) whose message says where."""
    again = copy.copy(exc)
    again.message = prefix + exc.message
    again.args = (again.message,)
    again.detail = {**exc.detail, "line": line}
    return again


def import_cloudevents(
    *,
    session: Session,
    world: World,
    actor: Actor,
    text: str,
    now: datetime,
    subject: str | None = None,
    source_name: str = "<events>",
) -> ImportResult:
    """Parse one CloudEvent or a batch and record each as an event, atomically.

    Raises ``DocumentError`` (with line and column where known) for malformed
    JSON or a malformed CloudEvent, and whatever ``record_event`` raises
    (``SubjectUnresolved``, ``UnknownAttribute``, ``ValueTypeError``,
    ``Conflict``), prefixed with the event's position; nothing is stored then.
    """
    actor.require("event")
    doc = load_json(text, source=source_name)
    data = doc.data
    events: list[tuple[Path, object]]
    if isinstance(data, list):
        events = [((i,), node) for i, node in enumerate(data)]
    else:
        events = [((), data)]
    prepared: list[tuple[Path, dict[str, Any]]] = []
    skipped: list[Skipped] = []
    for path, node in events:
        args = _event_args(doc, path, node, subject, now)
        if isinstance(args, str):
            ce_id = node.get("id") if isinstance(node, dict) else None
            skipped.append(Skipped(f"{args} {ce_id}", "unsupported_type", doc.where(path)[0]))
        else:
            prepared.append((path, args))
    recorded: list[Event] = []
    with session.begin_nested():
        for path, args in prepared:
            try:
                recorded.append(
                    record_event(session=session, world=world, actor=actor, now=now, **args)
                )
            except CaveatError as exc:
                line, _ = doc.where(path)
                where = f"{source_name}:{line}" if line is not None else source_name
                raise _relabel(exc, f"{where}: ", line) from exc
    return ImportResult(events=tuple(recorded), skipped=tuple(skipped))
