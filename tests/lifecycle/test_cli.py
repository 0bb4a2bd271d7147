"""The lifecycle commands on a real database: shadow report, lineage, promotion."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import lifecycle
from caveat.cli import app
from tests.lifecycle.helpers import Life

runner = CliRunner()


@pytest.fixture
def cli(life: Life, db_url: str, monkeypatch: pytest.MonkeyPatch) -> Life:
    monkeypatch.setenv("DATABASE_URL", db_url)
    return life


def _run(*args: str) -> str:
    res = runner.invoke(app, [*args, "--tenant", "acme"])
    assert res.exit_code == 0, res.output
    return res.output


def test_lineage_command(cli: Life) -> None:
    root = cli.write(text="root cause")
    child = cli.write(derived_from=[root], text="derived claim")
    cli.do(lifecycle.revoke, item_id=root, reason="wrong", actor=cli.store.sme)
    out = _run("lineage", str(child))
    assert f"#{root} [revoked]" in out and f"#{child} [needs_reverification]" in out
    data = json.loads(_run("lineage", str(root), "--json"))
    assert [d["id"] for d in data["descendants"]] == [child]
    missing = runner.invoke(app, ["lineage", "99999", "--tenant", "acme"])
    assert missing.exit_code == 1 and "not_found" in missing.output


def test_promotion_commands(cli: Life) -> None:
    a = cli.write(attribute="root_cause", object="pool exhausted")
    cli.open("INC-2")
    cli.write(case_id="INC-2", attribute="root_cause", object="pool exhausted")
    assert "pool exhausted" not in _run("promotion", "candidates")  # two scopes: below 3
    cli.open("INC-4")
    cli.write(case_id="INC-4", attribute="root_cause", object="pool exhausted")
    assert "pool exhausted" in _run("promotion", "candidates")
    assert _run("promotion", "contested").strip() == "no contested keys"
    cli.open("INC-3")
    cli.write(case_id="INC-3", attribute="root_cause", object="slow disk")
    out = _run("promotion", "contested")
    assert '= "pool exhausted"' in out and '= "slow disk"' in out and f"#{a} INC-1" in out
    [key] = json.loads(_run("promotion", "contested", "--json"))
    assert sorted(key["values"]) == ['"pool exhausted"', '"slow disk"']


def test_shadow_report_command(cli: Life) -> None:
    item = cli.write()
    cli.do(lifecycle.promote, item_id=item, to="shadow", actor=cli.store.sme)
    cli.hot()
    cli.open("INC-2")
    cli.recall("INC-2")
    cli.close("INC-2")
    out = _run("shadow", "report")
    assert "1 shadow items" in out and "thresholds: 3 matched cases" in out
    data = json.loads(_run("shadow", "report", "--json"))
    assert data["items"][0]["matched"] == 1 and data["agreement"]["0.8-1.0"] == 1
