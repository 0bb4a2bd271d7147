"""GitHub's ``deployment_status`` webhook as a ``deploy`` event (docs/hooks.md).

A ``deployment_status`` whose ``state`` is ``success`` records a ``deploy`` event for
the subjects ``hooks.github.repositories`` maps the repository to (the key
``owner/name@environment`` first, then ``owner/name``), resolved through the aliases,
occurred at the status's ``created_at``, with ``changes`` from the deployment's
``payload``: ``payload.changes`` (attribute -> value) and ``payload.config`` flattened
under ``config.`` (``{"connection_pool": {"max": 100}}`` is
``config.connection_pool.max``), each typed by the schema. Every other event
(``ping``, ``push``...), state (``failure``, ``in_progress``...) or an environment
``hooks.github.environments`` does not list is acknowledged and ignored with the
reason. The delivery id is ``X-GitHub-Delivery``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

import factgen
from caveat import app as use
from caveat.connectors._hooks import Translation, read_json, timestamp
from predicates.errors import DocumentError, InputError, SubjectUnresolved, shown

__all__ = ["translate"]


def _ignored(reason: str, delivery: str | None) -> Translation:
    return Translation((use.Ignore(reason),), delivery)


def _changes(doc: factgen.Document, deployment: dict[str, object]) -> dict[str, object]:
    payload = deployment.get("payload")
    if isinstance(payload, str):  # the REST API takes the payload as JSON text too
        if not payload.strip():
            return {}
        try:
            payload = json.loads(payload)
        except json.JSONDecodeError:
            raise doc.error(("deployment", "payload"), "payload is a JSON object") from None
    if payload is None:
        return {}
    if not isinstance(payload, dict):
        raise doc.error(
            ("deployment", "payload"), f"payload is a JSON object, not {shown(payload)}"
        )
    changes: dict[str, object] = {}
    config = payload.get("config")
    if config is not None:
        if not isinstance(config, dict):
            raise doc.error(("deployment", "payload", "config"), "config is a JSON object")
        try:
            changes |= factgen.flatten_config(config, "config.")
        except InputError as exc:
            raise doc.error(("deployment", "payload", "config"), exc.message) from None
    given = payload.get("changes")
    if given is not None:
        if not isinstance(given, dict):
            raise doc.error(
                ("deployment", "payload", "changes"), "changes maps attributes to values"
            )
        changes |= given
    return changes


def translate(
    body: bytes, headers: Mapping[str, str], config: factgen.HooksConfig, now: datetime
) -> Translation:
    """The actions of one GitHub webhook delivery (module doc)."""
    delivery = headers.get("x-github-delivery") or None
    event = headers.get("x-github-event")
    if not event:
        raise DocumentError("a GitHub delivery names its event (X-GitHub-Event)", source="github")
    doc = read_json(body, "github")
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error((), "a GitHub webhook payload is a JSON object")
    if event == "ping":
        return _ignored("ping: the webhook is reachable", delivery)
    if event != "deployment_status":
        return _ignored(f"event {event!r}: only deployment_status is a deploy", delivery)
    status, deployment, repository = (
        data.get("deployment_status"),
        data.get("deployment"),
        data.get("repository"),
    )
    for key, node in (("deployment_status", status), ("deployment", deployment)):
        if not isinstance(node, dict):
            raise doc.error((key,), f"a deployment_status payload has the object {key}")
    assert isinstance(status, dict) and isinstance(deployment, dict)
    if not isinstance(repository, dict) or not isinstance(repository.get("full_name"), str):
        raise doc.error(("repository",), "a deployment_status payload names its repository")
    repo = repository["full_name"]
    state = status.get("state")
    if not isinstance(state, str):
        raise doc.error(("deployment_status", "state"), "state is a string")
    if state != "success":
        return _ignored(f"deployment_status {state!r}: only success is a deploy", delivery)
    environment = status.get("environment") or deployment.get("environment")
    if environment is not None and not isinstance(environment, str):
        raise doc.error(("deployment", "environment"), "environment is a string")
    hooks = config.github
    if hooks.environments and environment not in hooks.environments:
        return _ignored(
            f"environment {environment!r} is not one of hooks.github.environments", delivery
        )
    subjects = hooks.repositories.get(f"{repo}@{environment}") or hooks.repositories.get(repo)
    if not subjects:
        raise SubjectUnresolved(
            f"repository {repo} (environment {environment}) maps to no subject "
            "(hooks.github.repositories in sources.yaml)",
            repository=repo,
            environment=environment,
        )
    occurred = timestamp(
        doc,
        ("deployment_status", "created_at"),
        status.get("created_at") or status.get("updated_at"),
    )
    status_id = status.get("id")
    external = f"github {repo} deployment_status {status_id}" if status_id is not None else None
    event_action = use.PostEvent(
        type="deploy",
        subjects=tuple(subjects),
        occurred_at=occurred,
        changes=_changes(doc, deployment),
        external_id=external,
    )
    return Translation((event_action,), delivery, occurred)
