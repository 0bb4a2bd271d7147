"""PagerDuty's v3 webhooks as cases (docs/hooks.md).

``incident.triggered`` opens (or joins) the case ``pd-<incident id>`` about the subjects
``hooks.pagerduty.services`` maps the incident's service to (its id first, then its
name), resolved through the aliases. ``incident.resolved`` closes it with an outcome
only when the payload carries one (``event.data.outcome``: ``confirmed`` or
``rejected``, which PagerDuty itself never sends; a relay may add it); without one the
case stays open and waits for its outcome in the SME review queue. Other event types
(``incident.acknowledged``, ``pagey.ping``...) are acknowledged and ignored. The
delivery id is ``event.id``; ``event.occurred_at`` is checked against the clock-skew
rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Literal, cast

import factgen
from caveat import app as use
from caveat.connectors._hooks import Translation, read_json, timestamp
from predicates.errors import SubjectUnresolved, shown

__all__ = ["translate"]

_CASE = re.compile(r"[^A-Za-z0-9_.-]")


def translate(
    body: bytes, headers: Mapping[str, str], config: factgen.HooksConfig, now: datetime
) -> Translation:
    """The actions of one PagerDuty webhook (module doc)."""
    doc = read_json(body, "pagerduty")
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("event"), dict):
        raise doc.error((), "a PagerDuty v3 webhook is a JSON object with an event object")
    event = data["event"]
    ev_id = event.get("id")
    if not isinstance(ev_id, str) or not ev_id:
        raise doc.error(("event", "id"), "event.id is a non-empty string")
    ev_type = event.get("event_type")
    if not isinstance(ev_type, str) or not ev_type:
        raise doc.error(("event", "event_type"), "event.event_type is a non-empty string")
    sent = timestamp(doc, ("event", "occurred_at"), event.get("occurred_at"))
    if ev_type not in ("incident.triggered", "incident.resolved"):
        reason = f"{ev_type}: only incident.triggered and incident.resolved act"
        return Translation((use.Ignore(reason),), ev_id, sent)
    incident = event.get("data")
    if not isinstance(incident, dict):
        raise doc.error(("event", "data"), "event.data is the incident object")
    incident_id = incident.get("id")
    if not isinstance(incident_id, str) or not incident_id:
        raise doc.error(("event", "data", "id"), "the incident has an id")
    service = incident.get("service")
    if not isinstance(service, dict):
        raise doc.error(("event", "data", "service"), "the incident names its service")
    keys = [k for k in (service.get("id"), service.get("summary")) if isinstance(k, str) and k]
    services = config.pagerduty.services
    subjects = next((services[k] for k in keys if services.get(k)), None)
    if not subjects:
        raise SubjectUnresolved(
            f"service {' / '.join(keys) or '(unnamed)'} maps to no subject "
            "(hooks.pagerduty.services in sources.yaml)",
            service=keys,
        )
    case = f"pd-{_CASE.sub('-', incident_id)}"
    opened = use.OpenCase(case, tuple(subjects))
    if ev_type == "incident.triggered":
        return Translation((opened,), ev_id, sent)
    outcome = incident.get("outcome")
    if outcome is not None and outcome not in ("confirmed", "rejected"):
        raise doc.error(
            ("event", "data", "outcome"), f"outcome is confirmed or rejected, not {shown(outcome)}"
        )
    closing = use.CloseCase(case, cast(Literal["confirmed", "rejected"] | None, outcome))
    return Translation((opened, closing), ev_id, sent)
