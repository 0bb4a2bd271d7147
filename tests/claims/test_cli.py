"""The claims commands: a thin shell over the library; the database state is checked after."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import claims
from caveat.cli import app
from tests.claims._support import GOOD, evidence, rows
from tests.conftest import Store

runner = CliRunner()


@pytest.fixture
def cli(tstore: Store, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("DATABASE_URL", tstore.engine.url.render_as_string(hide_password=False))
    return ["--tenant", tstore.tenant]


def _file(tmp_path: Path, data: Any) -> str:
    path = tmp_path / "items.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_write_a_batch(tstore: Store, open_case: str, cli: list[str], tmp_path: Path) -> None:
    items = [GOOD, {**GOOD, "subject": "nobody"}, {**GOOD, "object": "E-2", "evidence": ["E-2"]}]
    res = runner.invoke(app, ["write", _file(tmp_path, items), *cli, "--as", "agent-ir"])
    assert res.exit_code == 1  # one item was refused
    lines = res.output.splitlines()
    assert lines[0].startswith("[0] accepted: item ")
    assert lines[1].startswith("[1] rejected at G1: subject_unresolved")
    assert "supersedes" in lines[2] and lines[-1] == "2 accepted, 0 duplicate, 1 rejected"
    stored = rows(tstore, "SELECT created_by FROM items WHERE tenant_id = :t")
    assert [r.created_by for r in stored] == ["agent-ir", "agent-ir"]
    again = runner.invoke(app, ["write", _file(tmp_path, GOOD), *cli, "--json", "--as", "agent-ir"])
    assert again.exit_code == 0
    assert json.loads(again.output)[0]["outcome"] == "accepted"  # GOOD's object again: new


def test_write_into_a_closed_or_unknown_case_is_refused(
    tstore: Store, cli: list[str], tmp_path: Path
) -> None:
    res = runner.invoke(app, ["write", _file(tmp_path, GOOD), *cli, "--json"])
    assert res.exit_code == 1 and json.loads(res.output)[0]["code"] == "not_found"


def test_write_refuses_malformed_input(cli: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = runner.invoke(app, ["write", str(bad), *cli])
    assert res.exit_code == 2 and "not JSON" in res.output
    res = runner.invoke(app, ["write", _file(tmp_path, {**GOOD, "acl": []}), *cli])
    assert res.exit_code == 2 and "not an item write" in res.output


def test_item_show_and_skill_release(
    tstore: Store, open_case: str, cli: list[str], tmp_path: Path
) -> None:
    evidence(tstore, "T-pass", test_outcome="passed")
    skill = {**GOOD, "kind": "skill", "attribute": "pool_restart_procedure", "object": "drain"}
    written = runner.invoke(
        app, ["write", _file(tmp_path, skill), *cli, "--as", "agent-ir", "--json"]
    )
    item_id = json.loads(written.output)[0]["item_id"]
    shown = runner.invoke(app, ["item", "show", str(item_id), *cli, "--json"])
    assert json.loads(shown.output)["release_state"] == "draft"
    # the text form prints what the JSON says, never a Python repr (None, ['...'], datetime)
    text = runner.invoke(app, ["item", "show", str(item_id), *cli]).output
    lines = dict(line.strip().split(": ", 1) for line in text.splitlines() if ": " in line)
    assert lines["evidence"] == ", ".join(GOOD["evidence"])
    assert lines["valid_to"] == "-"
    assert "T" in lines["valid_from"] and "None" not in text and "['" not in text
    hidden = runner.invoke(app, ["item", "show", "999999", *cli])
    assert hidden.exit_code == 1 and "not_found" in hidden.output
    refused = runner.invoke(app, ["skill", "release", str(item_id), *cli, "--as", "sme-alice"])
    assert refused.exit_code == 1 and "skill_test_required" in refused.output
    by_agent = runner.invoke(
        app, ["skill", "release", str(item_id), "--test", "T-pass", *cli, "--as", "agent-ir"]
    )
    assert by_agent.exit_code == 1 and "forbidden" in by_agent.output
    released = runner.invoke(
        app, ["skill", "release", str(item_id), "--test", "T-pass", *cli, "--as", "sme-alice"]
    )
    assert released.exit_code == 0 and "version 1 released" in released.output
    with tstore.sessions.begin() as s:
        rec = claims.get_item(session=s, tenant=tstore.tenant, item_id=item_id, actor=tstore.sme)
    assert (rec.release_state, rec.test_evidence) == ("released", "T-pass")
    retired = runner.invoke(
        app, ["skill", "retire", str(item_id), "--reason", "superseded by runbook", *cli, "--json"]
    )
    assert retired.exit_code == 0 and json.loads(retired.output)["release_state"] == "retired"


def test_write_with_a_nul_byte_is_a_refusal_not_a_traceback(
    tstore: Store, open_case: str, cli: list[str], tmp_path: Path
) -> None:
    item = {**GOOD, "text": "pool\x00exhausted"}
    res = runner.invoke(app, ["write", _file(tmp_path, item), *cli, "--as", "agent-ir"])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit)
    assert "rejected: text_invalid: text: holds a NUL byte" in res.output
    refused = rows(tstore, "SELECT code FROM audit_log WHERE tenant_id = :t AND action = 'reject'")
    assert [r.code for r in refused] == ["text_invalid"]
    assert rows(tstore, "SELECT id FROM items WHERE tenant_id = :t") == []


def test_a_large_write_shows_its_progress_and_a_small_one_does_not(
    tstore: Store, open_case: str, cli: list[str], tmp_path: Path
) -> None:
    from caveat.cli import _claims

    items = [{**GOOD, "object": "E-1", "text": f"restart {n}"} for n in range(3)]
    quiet = runner.invoke(app, ["write", _file(tmp_path, items), *cli, "--as", "agent-ir"])
    assert quiet.exit_code == 0 and "writing" not in quiet.output
    _claims.BAR_FROM = 2  # the threshold, lowered for the test
    try:
        shown = runner.invoke(app, ["write", _file(tmp_path, items), *cli, "--as", "agent-ir"])
    finally:
        _claims.BAR_FROM = 1000
    assert shown.exit_code == 0, shown.output
    assert "writing" in shown.output and "3/3" in shown.output
