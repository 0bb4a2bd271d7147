"""``caveat hooks post`` and the CLI's side of hooks: a ``source`` token made by
``caveat token create --role source`` authenticates a hook; a payload posted from a file
acts as the HTTP route would; the clock-skew rule holds for ``facts import`` as well."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from caveat import app as use
from caveat import db
from caveat.cli import app
from tests.caveat._doors import world
from tests.connectors.test_hooks import PAYLOADS, future_cloudevent, hooks_world

runner = CliRunner()
ARGS = ["--tenant", "acme"]


@pytest.fixture
def acme(db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[sa.Engine]:
    monkeypatch.setenv("DATABASE_URL", db_url)
    with use.serving("acme", None) as (rt, _):
        world(rt)
        hooks_world(rt)
    owner = db.make_engine(db_url)
    yield owner
    owner.dispose()


def _count(owner: sa.Engine, table: str) -> int:
    with owner.connect() as c:
        return int(c.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_a_source_token_from_the_cli_authenticates_as_role_source(acme: sa.Engine) -> None:
    made = runner.invoke(
        app, ["token", "create", "--principal", "am", "--role", "source", *ARGS, "--json"]
    )
    assert made.exit_code == 0, made.output
    token = json.loads(made.output)["token"]
    with use.serving("acme", None) as (rt, _):
        scoped, actor = use.authenticate(rt, token)
    assert (scoped.tenant, actor.id, actor.role) == ("acme", "am", "source")


def test_hooks_post_acts_on_a_payload_file(acme: sa.Engine) -> None:
    file = str(PAYLOADS / "alertmanager-firing.json")
    done = runner.invoke(app, ["hooks", "post", "alertmanager", file, *ARGS, "--json"])
    assert done.exit_code == 0, done.output
    out = json.loads(done.output)
    assert out["tenant"] == "acme"
    assert [d["action"] for d in out["done"]] == ["open_case", "observe"]
    again = runner.invoke(app, ["hooks", "post", "alertmanager", file, *ARGS])
    assert again.exit_code == 0 and "a repeat" in again.output
    assert _count(acme, "cases") == 1
    with acme.connect() as c:
        actor = c.execute(sa.text("SELECT opened_by FROM cases")).scalar_one()
    assert actor == "source:alertmanager"


def test_hooks_post_takes_the_senders_headers(acme: sa.Engine) -> None:
    file = str(PAYLOADS / "github-deployment-status-success.json")
    headers = ["-H", "X-GitHub-Event: deployment_status", "--header", "X-GitHub-Delivery:d-1"]
    done = runner.invoke(app, ["hooks", "post", "github", file, *headers, *ARGS, "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["delivery_id"] == "d-1"
    assert _count(acme, "events") == 1
    bad = runner.invoke(app, ["hooks", "post", "github", file, "-H", "no colon", *ARGS])
    assert bad.exit_code == 2 and "NAME:VALUE" in bad.output


def test_hooks_post_refuses_an_unknown_kind_and_bad_input(acme: sa.Engine) -> None:
    file = str(PAYLOADS / "alertmanager-firing.json")
    unknown = runner.invoke(app, ["hooks", "post", "nagios", file, *ARGS])
    assert unknown.exit_code == 1 and "not_found" in unknown.output
    garbage = runner.invoke(app, ["hooks", "post", "pagerduty", file, *ARGS])
    assert garbage.exit_code == 2 and "document_invalid" in garbage.output
    assert _count(acme, "cases") == 0


def test_a_cloudevent_dated_2027_is_refused_by_facts_import_too(
    acme: sa.Engine, tmp_path: Path
) -> None:
    file = tmp_path / "future.json"
    file.write_bytes(future_cloudevent())
    imported = runner.invoke(app, ["facts", "import", str(file), "--format", "cloudevents", *ARGS])
    assert imported.exit_code != 0 and "event_in_future" in imported.output
    hooked = runner.invoke(
        app,
        [
            "hooks",
            "post",
            "cloudevents",
            str(file),
            "-H",
            "content-type: application/cloudevents+json",
            *ARGS,
        ],
    )
    assert hooked.exit_code != 0 and "event_in_future" in hooked.output
    assert _count(acme, "events") == 0
