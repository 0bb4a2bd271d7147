"""The CLI as a user meets it: help everywhere, exit codes, readable failures."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest
import typer
from typer.testing import CliRunner

from caveat.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _commands(group: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for cmd in group.registered_commands:
        out.append((*prefix, cmd.name or cmd.callback.__name__))  # type: ignore[union-attr]
    for sub in group.registered_groups:
        out.extend(_commands(sub.typer_instance, (*prefix, sub.name)))  # type: ignore[arg-type]
    return out


@pytest.mark.parametrize("command", _commands(app))
def test_every_command_has_help_and_is_documented(command: tuple[str, ...]) -> None:
    res = runner.invoke(app, [*command, "--help"])
    assert res.exit_code == 0, res.output
    assert "Usage" in res.output
    docs = (ROOT / "docs" / "cli.md").read_text()
    assert f"caveat {' '.join(command)}" in docs


@pytest.fixture
def env(pg_server_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_server_url)


def test_replay_bundled_scenarios_pass(env: None, tmp_path: Path) -> None:
    junit = tmp_path / "out.xml"
    res = runner.invoke(app, ["replay", str(ROOT / "scenarios"), "--junit", str(junit)])
    assert res.exit_code == 0, res.output
    assert re.search(r"^\d+ passed, 0 failed$", res.output, re.M)
    root = ElementTree.parse(junit).getroot()
    cases = list(root.iter("testcase"))
    assert len(cases) == len(list((ROOT / "scenarios").glob("*.yaml")))
    assert not list(root.iter("failure")) and not list(root.iter("error"))


def test_replay_with_an_unreachable_database_is_one_line_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/nothing")
    res = runner.invoke(app, ["replay", str(ROOT / "scenarios" / "write-gate.yaml")])
    assert res.exit_code == 1, res.output
    assert "caveat: database_unavailable:" in res.output
    assert "Traceback" not in res.output
    assert isinstance(res.exception, SystemExit)  # a clean exit, not an escaped error


WRONG = """\
caveat_scenario: 1
name: wrong
tenant: acme
start: 2026-03-01T09:00:00Z
principals:
  agent-ir: {role: agent, capabilities: [incidents]}
schema:
  - {attribute: config.connection_pool.max, type: int}
entities:
  - {id: payment-api, kind: service}
steps:
  - open_case: {id: INC-1, subjects: [payment-api]}
  - evidence: {id: E-1}
  - write:
      ref: w
      kind: fact
      subject: payment-api
      attribute: restart_restored_service_at
      object: E-1
      required: ["config.connection_pool.max eq 20"]
      evidence: [E-1]
    expect: {outcome: rejected, code: evidence_missing}
"""


def test_a_wrong_expectation_fails_with_step_expected_and_got(env: None, tmp_path: Path) -> None:
    f = tmp_path / "wrong.yaml"
    f.write_text(WRONG)
    res = runner.invoke(app, ["replay", str(f)])
    assert res.exit_code == 1, res.output
    assert "step 3" in res.output and "line 14" in res.output
    assert "expected rejected, got accepted" in res.output
    out = runner.invoke(app, ["replay", str(f), "--json"])
    report = json.loads(out.output)
    assert out.exit_code == 1
    assert report["totals"]["failed"] == 1 and report["exit_status"] == 1
    [scenario] = report["scenarios"]
    assert {f["expectation"] for f in scenario["failures"]} == {"outcome", "code"}


def test_a_malformed_scenario_exits_2_with_file_and_line(env: None, tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(WRONG.replace("    expect: {outcome", "    expekt: {outcome"))
    res = runner.invoke(app, ["replay", str(f)])
    assert res.exit_code == 2
    assert f"{f}:22:" in res.output


@pytest.mark.parametrize("as_json", [False, True])
def test_a_malformed_scenario_is_reported_once(env: None, tmp_path: Path, as_json: bool) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("caveat_scenario: 1\nname: bad\nsteps: 7\n")
    res = runner.invoke(app, ["replay", str(f), *(["--json"] if as_json else [])])
    assert res.exit_code == 2
    assert res.output.count("missing required key 'tenant'") == 1, res.output
    assert f"{f}:1:1: scenario: missing required key 'tenant'" in res.output


def test_a_misspelt_state_gets_a_suggestion_with_its_place(env: None, tmp_path: Path) -> None:
    original = (ROOT / "scenarios" / "pool-max-change.yaml").read_text()
    stated = "expect_state: {pool-restart: "
    at = original.index(stated) + len(stated)
    line = original[:at].count("\n") + 1
    column = at - original.rfind("\n", 0, at)
    bad = tmp_path / "typo.yaml"
    bad.write_text(original[:at] + re.sub(r"\w+", "need_reverification", original[at:], count=1))
    res = runner.invoke(app, ["replay", str(bad)])
    assert res.exit_code == 2
    assert (
        f"{bad}:{line}:{column}: steps[" in res.output
        and "].expect_state.pool-restart: unknown state 'need_reverification'; "
        "did you mean 'needs_reverification'?"
        in res.output
    ), res.output
    assert res.output.count("did you mean") == 1


def test_missing_file_is_a_usage_error(env: None, tmp_path: Path) -> None:
    res = runner.invoke(app, ["replay", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2
    assert "Traceback" not in res.output


def test_demo_narrates_why_the_precedent_was_withheld(env: None, tmp_path: Path) -> None:
    res = runner.invoke(app, ["demo", str(ROOT / "scenarios" / "pool-max-change.yaml")])
    assert res.exit_code == 0, res.output
    assert "pool-restart was withheld by the applicability gate" in res.output
    assert re.search(r"config\.connection_pool\.max eq 20\s+-> FALSE\s+observed 100", res.output)
    assert re.search(r"metrics\.pool_utilisation gte 0\.8\s+-> FALSE\s+observed 0\.12", res.output)
    assert "5 gates passed" in res.output


def test_audit_verify_on_an_empty_tenant(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    res = runner.invoke(app, ["audit", "verify", "--tenant", "nobody"])
    assert res.exit_code == 0, res.output
    assert "holds (0 rows)" in res.output


def test_an_unmigrated_database_is_a_clear_refusal(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_dsn)
    res = runner.invoke(app, ["audit", "verify"])
    assert res.exit_code == 1
    assert "caveat migrate" in res.output and "Traceback" not in res.output


def test_db_status_with_external_url(env: None) -> None:
    res = runner.invoke(app, ["db", "status"])
    assert res.exit_code == 0 and "external" in res.output


def test_embedded_server_lifecycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("CAVEAT_HOME", str(home))
    try:
        assert runner.invoke(app, ["db", "status"]).output.startswith("stopped")
        started = runner.invoke(app, ["db", "start"])
        assert started.exit_code == 0 and "postgresql+psycopg://" in started.output
        assert runner.invoke(app, ["db", "status"]).output.startswith("running")
        assert runner.invoke(app, ["migrate"]).exit_code == 0
    finally:
        stopped = runner.invoke(app, ["db", "stop"])
    assert stopped.output.strip() == "stopped"
    assert runner.invoke(app, ["db", "status"]).output.startswith("stopped")
    shutil.rmtree(home, ignore_errors=True)


def test_acting_as_an_unknown_principal_is_refused(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    res = runner.invoke(app, ["audit", "verify", "--as", "mallory"])
    assert res.exit_code == 1
    assert "not_found" in res.output and "mallory" in res.output


def test_a_new_caveat_home_migrates_itself_on_first_use(tmp_path: Path) -> None:
    """No ``caveat migrate`` first: the embedded database is caveat's own and is brought
    to the newest revision by the first command that opens it."""
    import os
    import subprocess
    import sys

    schema = tmp_path / "schema.yaml"
    schema.write_text("- {attribute: config.connection_pool.max, type: int}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CAVEAT_DATABASE_URL")}
    env["CAVEAT_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-m", "caveat", "schema", "load", str(schema)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    try:
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        assert "config.connection_pool.max" in done.stdout
    finally:
        subprocess.run(
            [sys.executable, "-m", "caveat", "db", "stop"], env=env, timeout=60, check=False
        )


@pytest.mark.parametrize(
    ("spelled", "reason"),
    [
        ('"a\\0b"', "steps[3].write.text: holds a NUL byte"),  # a YAML escape
        ("a\x00b", "invalid YAML: character #x0000 is not allowed"),  # the byte itself
    ],
)
def test_a_nul_byte_in_a_scenario_is_a_malformed_file_with_its_line(
    env: None, tmp_path: Path, spelled: str, reason: str
) -> None:
    original = (ROOT / "scenarios" / "pool-max-change.yaml").read_text()
    line = next(n for n, text in enumerate(original.splitlines(), 1) if "text:" in text)
    bad = tmp_path / "nul.yaml"
    bad.write_text(re.sub(r"text: .*", lambda _: "text: " + spelled, original, count=1))
    res = runner.invoke(app, ["replay", str(bad)])
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit)
    assert re.search(rf"{re.escape(str(bad))}:{line}:\d+: .*{re.escape(reason)}", res.output)


def test_replay_junit_into_a_missing_directory_creates_it(env: None, tmp_path: Path) -> None:
    report = tmp_path / "reports" / "ci" / "out.xml"
    res = runner.invoke(
        app, ["replay", str(ROOT / "scenarios" / "write-gate.yaml"), "--junit", str(report)]
    )
    assert res.exit_code == 0, res.output
    assert ElementTree.parse(report).getroot().get("tests") == "1"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    res = runner.invoke(
        app,
        [
            "replay",
            str(ROOT / "scenarios" / "write-gate.yaml"),
            "--junit",
            str(blocker / "out.xml"),
        ],
    )
    assert res.exit_code == 2 and isinstance(res.exception, SystemExit)
    assert f"--junit {blocker / 'out.xml'}: cannot create" in res.output


def test_a_one_shot_recall_loads_neither_alembic_nor_networkx(db_url: str, tmp_path: Path) -> None:
    """What a CLI recall's start-up no longer pays for (issue 27): the migration check
    reads the revision without alembic, and the topology's graph library is imported only
    when a world is walked."""
    import os
    import subprocess
    import sys

    from caveat import app as use
    from caveat import db

    engine = db.make_app_engine(db_url)
    try:
        use.declare_tenant(use.Runtime.over(engine, "acme"), use.LOCAL_ADMIN)
    finally:
        engine.dispose()
    env = {**os.environ, "DATABASE_URL": db_url, "CAVEAT_HOME": str(tmp_path)}
    env["CAVEAT_EMBEDDER"] = "hashing"
    run = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "caveat", "recall", "pool", "--tenant", "acme"],
        check=False, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0 and "no precedent applies now" in run.stdout, run.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[-1].strip() for line in run.stderr.splitlines() if "|" in line}
    assert "caveat.cli" in loaded and "recall" in loaded  # the list is the command's
    assert not {m for m in loaded if m.split(".")[0] in ("alembic", "networkx", "torch")}
    check = "import sys; from caveat import db; "
    check += f"print(db.at_head({db_url!r}), 'alembic' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", check], check=False, capture_output=True, text=True, cwd=ROOT
    )
    assert out.stdout.split() == ["True", "False"], out.stderr[-2000:]
