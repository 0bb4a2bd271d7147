"""Alertmanager's webhook (version 4) as caveat's use cases (docs/hooks.md).

A firing notification opens (or joins) the case of its alert group, about the subjects
its alerts' labels name (``hooks.alertmanager.subject_labels``, resolved through the
aliases), and observes ``alert.<alertname>`` = true for each firing alert's subjects at
its ``startsAt``; a resolved alert observes false at its ``endsAt``. An attribute
``alert.<alertname>`` the schema does not declare is skipped and reported, the case
still opens (a source never declares attributes).

* case id: ``am-<alertname>-<10 hex of sha256(groupKey)>``, stable for the group's life;
* delivery id (Alertmanager sends none): ``am-`` and 32 hex of the sha256 of the group
  key, the status and every alert's fingerprint, ``startsAt`` and ``endsAt``: a resend
  of the same notification is acknowledged once, a change in the group is new.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime

import factgen
from caveat import app as use
from caveat.connectors._hooks import Translation, read_json, timestamp
from predicates.errors import SubjectUnresolved, shown

__all__ = ["alert_attribute", "case_id", "translate"]

_NOT_SEGMENT = re.compile(r"[^A-Za-z0-9_]")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def alert_attribute(alertname: str) -> str:
    """``alert.<alertname>``, the name made an attribute segment (other characters
    read as ``_``; a leading digit prefixed with ``_``)."""
    segment = _NOT_SEGMENT.sub("_", alertname) or "_"
    if segment[0].isdigit():
        segment = "_" + segment
    return f"alert.{segment}"


def case_id(group_key: str, alertname: str | None) -> str:
    """The case of an alert group: readable, and stable for the group key."""
    slug = _NOT_SLUG.sub("-", (alertname or "group").lower()).strip("-")[:40] or "group"
    return f"am-{slug}-{hashlib.sha256(group_key.encode()).hexdigest()[:10]}"


def translate(
    body: bytes, headers: Mapping[str, str], config: factgen.HooksConfig, now: datetime
) -> Translation:
    """The actions of one webhook notification (module doc); ``DocumentError`` saying
    where for a payload that is not version 4, ``SubjectUnresolved`` for an alert that
    carries none of the subject labels."""
    doc = read_json(body, "alertmanager")
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error((), "an Alertmanager notification is a JSON object")
    if data.get("version") != "4":
        raise doc.error(
            ("version",), f"expected webhook version '4', not {shown(data.get('version'))}"
        )
    status = data.get("status")
    if status not in ("firing", "resolved"):
        raise doc.error(("status",), f"status is firing or resolved, not {shown(status)}")
    group_key = data.get("groupKey")
    if not isinstance(group_key, str) or not group_key:
        raise doc.error(("groupKey",), "groupKey is a non-empty string")
    alerts = data.get("alerts")
    if not isinstance(alerts, list) or not alerts:
        raise doc.error(("alerts",), "alerts is a non-empty list")
    wanted = config.alertmanager.subject_labels
    subjects: list[str] = []
    observations: list[factgen.Observation] = []
    identity: list[tuple[str, str, str]] = []
    times: list[datetime] = []
    names: list[str] = []
    for i, alert in enumerate(alerts):
        where: tuple[str | int, ...] = ("alerts", i)
        if not isinstance(alert, dict):
            raise doc.error(where, "an alert is a JSON object")
        labels = alert.get("labels")
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise doc.error((*where, "labels"), "labels map names to strings")
        name = labels.get("alertname")
        if not name:
            raise doc.error((*where, "labels"), "an alert has the label alertname")
        a_status = alert.get("status", status)
        if a_status not in ("firing", "resolved"):
            raise doc.error(
                (*where, "status"), f"status is firing or resolved, not {shown(a_status)}"
            )
        starts = timestamp(doc, (*where, "startsAt"), alert.get("startsAt"))
        ends_raw = alert.get("endsAt", "0001-01-01T00:00:00Z")
        ends = timestamp(doc, (*where, "endsAt"), ends_raw)
        fingerprint = alert.get("fingerprint", "")
        if not isinstance(fingerprint, str):
            raise doc.error((*where, "fingerprint"), "fingerprint is a string")
        named = [labels[label] for label in wanted if labels.get(label)]
        if not named:
            raise SubjectUnresolved(
                f"alerts[{i}] ({name}) carries none of the subject labels "
                f"{', '.join(wanted)} (hooks.alertmanager.subject_labels)",
                alert=name,
                labels=sorted(labels),
            )
        firing = a_status == "firing"
        when = starts if firing else ends
        times.append(when)
        names.append(name)
        identity.append((fingerprint, str(alert.get("startsAt")), str(ends_raw)))
        for subject in named:
            if firing and subject not in subjects:
                subjects.append(subject)
            observations.append(
                factgen.Observation(
                    subject,
                    alert_attribute(name),
                    firing,
                    "alertmanager",
                    observed_at=when,
                    provenance={
                        "source": "alertmanager",
                        "alert": name,
                        "status": a_status,
                        "fingerprint": fingerprint,
                        "group_key": group_key,
                    },
                )
            )
    actions: list[use.HookAction] = []
    if status == "firing" and subjects:
        labelled = [data.get(k) for k in ("groupLabels", "commonLabels")]
        given = [g.get("alertname") for g in labelled if isinstance(g, dict)]
        alertname = next((a for a in given if isinstance(a, str) and a), names[0])
        actions.append(use.OpenCase(case_id(group_key, str(alertname)), tuple(subjects)))
    actions.append(use.Observe(tuple(observations), declared_only=True))
    digest = hashlib.sha256(
        json.dumps([group_key, status, sorted(identity)], separators=(",", ":")).encode()
    ).hexdigest()
    return Translation(tuple(actions), f"am-{digest[:32]}", max(times))
