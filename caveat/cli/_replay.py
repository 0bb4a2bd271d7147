"""``caveat replay`` and ``caveat demo``: incident scenarios."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from caveat import db
from caveat.cli._common import JsonOpt, app, refusals
from caveat.settings import Settings
from predicates.errors import InputError


def _scenario_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(sorted([*p.glob("*.yaml"), *p.glob("*.yml")]))
        else:
            files.append(p)
    return files


def _ready_for_report(path: Path) -> None:
    """Make ``path``'s directory (as pytest's ``--junitxml`` does) before any scenario
    runs, so a report that cannot be written fails the run at once (exit 2)."""
    if path.is_dir():
        raise InputError(f"--junit {path}: is a directory; name a file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"--junit {path}: cannot create {path.parent}: {exc.strerror or exc}"
        ) from exc


@app.command("replay")
@refusals
def replay(
    paths: Annotated[list[Path], typer.Argument(help="Scenario files or directories.")],
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Also write JUnit XML to this file.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Replay incident scenarios; exit 0 when every expectation holds, 1 if not, 2 if malformed."""
    from caveat.replay import (
        ScenarioResult,
        exit_status,
        load_scenario,
        render_text,
        run_all,
        to_json,
        write_junit,
    )
    from predicates.errors import ScenarioError

    if junit is not None:
        _ready_for_report(junit)
    files = _scenario_files(paths)
    if not files:
        typer.echo("caveat: no scenario files found", err=True)
        raise typer.Exit(2)
    loaded = []
    malformed: list[ScenarioResult] = []
    for f in files:
        try:
            loaded.append((str(f), load_scenario(f)))
        except ScenarioError as exc:  # the report names it (once), then exit 2
            malformed.append(ScenarioResult(str(f), f.stem, (), (), 0.0, error=str(exc)))
    settings = Settings()
    url = db.server_url(settings.database_url, settings.pgdata)
    results = run_all(loaded, server_url=url) if loaded else []
    results = [*results, *malformed]
    if junit is not None:
        try:
            write_junit(results, junit)
        except OSError as exc:
            raise InputError(f"--junit {junit}: cannot write: {exc.strerror or exc}") from exc
    if as_json:
        typer.echo(json.dumps(to_json(results), indent=2, default=str))
    else:
        typer.echo(render_text(results), nl=False)
    raise typer.Exit(exit_status(results))


def _bundled_demo() -> Path:
    here = Path(__file__).resolve().parent
    for candidate in (
        Path.cwd() / "scenarios" / "pool-max-change.yaml",
        here.parent / "scenarios" / "pool-max-change.yaml",
        here / "_bundled_scenarios" / "pool-max-change.yaml",
    ):
        if candidate.exists():
            return candidate
    raise InputError("cannot find scenarios/pool-max-change.yaml; pass a path")


@app.command("demo")
@refusals
def demo(
    path: Annotated[
        Path | None, typer.Argument(help="Scenario to narrate (default: pool-max-change).")
    ] = None,
) -> None:
    """Replay the pool-max-change incident and narrate why the precedent was withheld."""
    from caveat._narrate import explain_withheld, step_line
    from caveat.replay import load_scenario, prepare_template, run_scenario

    scenario_path = path or _bundled_demo()
    scenario = load_scenario(scenario_path)
    settings = Settings()
    url = db.server_url(settings.database_url, settings.pgdata)
    typer.echo(f"Replaying {scenario.name}: {scenario.description.strip()}\n")
    template = prepare_template(url, "caveat_demo_template")
    try:
        result = run_scenario(
            scenario,
            path=str(scenario_path),
            server_url=url,
            template=template,
            on_step=lambda r: typer.echo(step_line(r)),
        )
    finally:
        db.drop_database(url, template)
    typer.echo("")
    for line in explain_withheld(result):
        typer.echo(line)
    typer.echo("")
    if result.ok:
        typer.echo(f"All {len(result.steps)} steps behaved as the scenario expects.")
        return
    for f in result.failures:
        typer.echo(
            f"step {f.step_index + 1} (line {f.step_line}, {f.action}): {f.expectation}: "
            f"expected {f.expected}, got {f.got}"
        )
    raise typer.Exit(1)
