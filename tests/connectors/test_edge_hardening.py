"""Findings of the issue-24 review, each pinned: what a hostile or broken outside
system sends never costs a 500, another source's pull, or the schedule."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from caveat import app, connectors
from tests.conftest import ADMIN

from ._pullkit import (
    ATTR,
    Answer,
    JsonServer,
    entities,
    facts,
    json_server_fixture,
    load,
    prom,
    rt_fixture,
    status,
    vector,
)

__all__ = ["json_server_fixture", "rt_fixture"]  # fixtures

API = "/api/v1/query"


def test_an_error_answer_with_control_characters_is_a_failed_pull_kept_printable(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    json_server.answers[API] = Answer({"status": "error", "error": "bad\u0000query"}, status=400)
    load(rt, "sources:" + prom("broken", json_server.url))
    [outcome] = connectors.pull_sources(rt, ["broken"])
    assert outcome.error is not None and "\x00" not in outcome.error
    assert "bad\\x00query" in outcome.error
    seen = status(rt, "broken")
    assert (seen.pulls, seen.errors, seen.consecutive_failures) == (1, 1, 1)
    assert seen.last_error == outcome.error


def test_a_refresh_that_times_out_never_backs_the_schedule_off(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    json_server.answers[API] = Answer(vector(({"service": "payment-api"}, "0.5")), delay=1.0)
    load(rt, "sources:" + prom("slowish", json_server.url, extra="    every: 30s\n"))
    for _ in range(3):
        report = connectors.refresh(
            rt, [("payment-api", ATTR)], deadline=timedelta(milliseconds=50)
        )
        assert [f.error for f in report.failures] == ["timed out after 50 ms"]
    seen = status(rt, "slowish")
    assert (seen.pulls, seen.errors) == (3, 3)  # counted: an operator sees it
    assert (seen.consecutive_failures, seen.last_pull_at) == (0, None)  # the schedule's own


def test_a_sample_a_little_ahead_of_the_clock_counts_from_now(
    json_server: JsonServer, rt: app.Runtime
) -> None:
    now = app.utcnow().replace(microsecond=0)
    ahead = now + timedelta(seconds=3)
    json_server.answers[API] = Answer(
        vector(({"service": "payment-api"}, "0.5"), at=ahead.timestamp())
    )
    load(rt, "sources:" + prom("fast-clock", json_server.url))
    [outcome] = connectors.pull_sources(rt, ["fast-clock"], now=now)
    [fact] = outcome.stored
    assert fact.observed_at == now
    [row] = facts(rt, "fast-clock")
    assert row.provenance is not None and row.provenance["sample_time"].startswith(
        ahead.isoformat()[:19]
    )


def test_an_alert_group_that_fires_again_after_its_case_closed_opens_the_next_case(
    rt: app.Runtime,
) -> None:
    entities(rt, "payment-api")
    actor = app.source_actor("alertmanager")
    fire = [app.OpenCase("am-pool-1", ("payment-api",))]
    assert app.deliver_hook(rt, kind="alertmanager", actor=actor, actions=fire).done[0] == {
        "action": "open_case",
        "case": "am-pool-1",
        "subjects": ["payment-api"],
    }
    app.close_case(rt, ADMIN, "am-pool-1", outcome="confirmed")
    again = app.deliver_hook(rt, kind="alertmanager", actor=actor, actions=fire)
    assert again.done[0]["action"] == "open_case" and again.done[0]["case"] == "am-pool-1-2"
    repeat = app.deliver_hook(rt, kind="alertmanager", actor=actor, actions=fire)
    assert repeat.done[0] == {"action": "join_case", "case": "am-pool-1-2", "status": "open"}


def test_a_file_source_outside_the_operators_directory_reads_nothing(
    rt: app.Runtime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    allowed, secret = tmp_path / "deploy", tmp_path / "secret"
    allowed.mkdir()
    secret.mkdir()
    for where in (allowed, secret):
        (where / "payment-api.json").write_text('{"pool": {"max": 20}}')
    monkeypatch.setenv("CAVEAT_SOURCE_FILES", str(allowed))
    entities(rt, "payment-api")
    text = (
        "sources:\n  - name: {name}\n    kind: file\n    path: {path}\n"
        "    subjects: [payment-api]\n    attributes:\n"
        "      - {{attribute: config.connection_pool.max, pointer: /pool/max}}\n"
    )
    escape = f"{allowed}/../secret/{{subject}}.json"
    load(
        rt,
        text.format(name="inside", path=f"{allowed}/{{subject}}.json")
        + text.format(name="outside", path=escape).removeprefix("sources:\n"),
    )
    inside, outside = connectors.pull_sources(rt)
    assert [f.value for f in inside.stored] == [20] and inside.error is None
    assert outside.stored == () and outside.error is not None
    assert "outside the directory file sources may read" in outside.error
