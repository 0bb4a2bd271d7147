"""The recipes of docs/hooks.md work as written: the Argo CD notifications template is
taken from the docs, rendered with an application's fields as the notifications
controller renders it (the Go template actions it uses: ``{{.path}}`` and
``{{index .map "key"}}``), and posted to ``/v1/hooks/cloudevents`` with the headers
of its webhook service; it records the deploy."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from tests.connectors.test_hooks import Hooked, hooked  # noqa: F401  (the fixture)

DOC = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"
_ACTION = re.compile(r'\{\{\s*(?:index\s+)?\.([\w.]+)(?:\s+"([^"]+)")?\s*\}\}')

APP = {
    "app": {
        "metadata": {"name": "payments", "labels": {"caveat.io/subject": "payment_api"}},
        "status": {
            "health": {"status": "Healthy"},
            "operationState": {
                "phase": "Succeeded",
                "finishedAt": "2026-12-03T10:08:00Z",
                "syncResult": {"revision": "a84d88e7554fc1fa21bcbc4efae3c782a70d2b9d"},
            },
        },
    }
}


def render(template: str, data: dict[str, Any]) -> str:
    """The template with each action replaced by its value in ``data``."""

    def value(m: re.Match[str]) -> str:
        node: Any = data
        for key in m.group(1).split("."):
            node = node[key]
        if m.group(2) is not None:
            node = node[m.group(2)]
        return str(node)

    return _ACTION.sub(value, template)


def _configmap() -> dict[str, Any]:
    text = DOC.read_text()
    block = text.split("### Argo CD notifications", 1)[1].split("```yaml\n", 1)[1]
    loaded: dict[str, Any] = yaml.safe_load(block.split("```", 1)[0])
    return loaded


def _body() -> str:
    template = yaml.safe_load(_configmap()["data"]["template.caveat-deployed"])
    body: str = template["webhook"]["caveat"]["body"]
    inner = body.split("<!-- argocd-body -->", 1)[1].split("<!-- /argocd-body -->", 1)[0]
    return inner


def test_the_argocd_template_renders_a_cloudevent_caveat_records(hooked: Hooked) -> None:  # noqa: F811
    config = _configmap()["data"]
    service = yaml.safe_load(config["service.webhook.caveat"])
    assert service["url"].endswith("/v1/hooks/cloudevents")
    headers = {h["name"]: h["value"] for h in service["headers"]}
    assert headers["Authorization"] == "Bearer $caveat-token"
    trigger = yaml.safe_load(config["trigger.on-deployed-caveat"])
    assert trigger[0]["send"] == ["caveat-deployed"]
    rendered = render(_body(), APP)
    event = json.loads(rendered)  # the rendered body is JSON
    assert event["type"] == "dev.argocd.sync.succeeded"
    r = hooked.post(
        "cloudevents",
        rendered.encode(),
        token=hooked.source,
        headers={"Content-Type": headers["Content-Type"]},
    )
    assert r.status_code == 200, r.text
    (done,) = r.json()["done"]
    assert (done["action"], done["type"], done["subjects"]) == ("event", "deploy", ["payment-api"])
    again = hooked.post(
        "cloudevents",
        rendered.encode(),
        token=hooked.source,
        headers={"Content-Type": headers["Content-Type"]},
    )
    assert again.json()["duplicate"] is True
    assert hooked.count("events") == 1


def test_the_alertmanager_config_in_the_docs_sends_the_token() -> None:
    blocks = DOC.read_text().split("```yaml\n")[1:]
    parsed = [yaml.safe_load(b.split("```", 1)[0]) for b in blocks]
    assert all(isinstance(p, dict) for p in parsed)
    receivers = [p for p in parsed if "receivers" in p]
    webhook = receivers[0]["receivers"][0]["webhook_configs"][0]
    assert webhook["url"].endswith("/v1/hooks/alertmanager")
    assert webhook["http_config"]["authorization"]["type"] == "Bearer"


def test_the_hooks_example_of_the_docs_loads() -> None:
    import factgen

    text = DOC.read_text().split("## The mapping", 1)[1].split("```yaml\n", 1)[1].split("```")[0]
    config = factgen.load_sources_yaml(text)
    assert config.hooks.github.repositories["acme/payments@production"] == ["payment-api"]
    assert config.hooks.cloudevents.types == {"dev.argocd.sync.succeeded": "deploy"}
