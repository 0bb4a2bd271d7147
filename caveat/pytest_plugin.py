"""A pytest plugin that replays incident scenarios as test items (docs/scenarios.md).

Registered through the ``pytest11`` entry point, so a team's existing pytest run
collects every YAML file whose top level says ``caveat_scenario:`` (format 1)
wherever pytest looks (``pytest scenarios/``, or ``testpaths``). Each scenario is
replayed once, in a fresh database cloned from a migrated template, exactly as
``caveat replay`` does; its steps are the test items, and each item fails with
the expectations of that step that did not hold (one failure per broken
expectation, each on its own line with what was expected and what happened).
A malformed scenario is a collection error naming ``FILE:LINE:COLUMN``; one that
cannot run (its set-up refused) fails its first item with the error and the others
pointing to it, so the error is printed once.

Each item's time (``--durations``, the JUnit ``time`` of ``--junitxml``) is its own
step's, plus an equal share of the scenario's fixed cost (cloning its database, the
set-up), so the items add up to the replay and step 1 does not carry it all; the
session's one-time template (a migrated database) is in no item's time.

The database is ``DATABASE_URL`` when set, else a temporary embedded
PostgreSQL started for the session and removed after it. ``-p no:caveat``
turns the plugin off.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ScenarioFile", "StepItem"]

_HEADER = re.compile(r"^caveat_scenario\s*:", re.M)


class _Replays:
    """One server and one migrated template for the session, made on first use."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self._template: tuple[str, str] | None = None
        self._failed: Exception | None = None

    def template(self) -> tuple[str, str]:
        """The server's URL and the template's name; a failure to make them is kept and
        raised again for every later item, never retried."""
        from caveat import db
        from caveat.replay import prepare_template

        if self._failed is not None:
            raise self._failed
        if self._template is None:
            try:
                url = self._stack.enter_context(db.temporary_server(os.environ.get("DATABASE_URL")))
                name = prepare_template(url, f"caveat_pytest_tpl_{os.getpid()}")
            except Exception as exc:
                self._failed = exc
                raise
            self._stack.callback(db.drop_database, url, name)
            self._template = (url, name)
        return self._template

    def close(self) -> None:
        self._stack.close()


_REPLAYS = pytest.StashKey[_Replays]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_REPLAYS] = _Replays()


def pytest_unconfigure(config: pytest.Config) -> None:
    replays = config.stash.get(_REPLAYS, None)
    if replays is not None:
        replays.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A step's call lasts its own share of the replay, not the replay (which the
    first step to run triggers)."""
    report = yield
    if isinstance(item, StepItem) and report.when == "call":
        own = item.own_seconds()
        if own is not None:
            report.duration = own
    return report


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> ScenarioFile | None:
    """A ``.yaml``/``.yml`` file whose top level has ``caveat_scenario:``."""
    if file_path.suffix not in (".yaml", ".yml"):
        return None
    try:
        head = file_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if not _HEADER.search(head):
        return None
    return ScenarioFile.from_parent(parent, path=file_path)


class ScenarioFile(pytest.File):
    """A scenario file: its steps as items, replayed once when the first one runs."""

    result: Any = None
    failed: Exception | None = None
    #: The item that reported the scenario's error (set-up failed): it is printed once.
    error_shown_by: str | None = None

    def collect(self) -> Iterator[StepItem]:
        from caveat.replay import load_scenario
        from predicates.errors import ScenarioError

        try:
            scenario = load_scenario(self.path)
        except ScenarioError as exc:  # FILE:LINE:COLUMN: reason, no traceback
            raise self.CollectError(str(exc)) from exc
        self.scenario = scenario
        for step in scenario.steps:
            name = f"step {step.index + 1} (line {step.line}) {step.action}"
            yield StepItem.from_parent(self, name=name, index=step.index, line=step.line)

    def replay(self) -> Any:
        """The scenario's ``ScenarioResult``, replayed on first call."""
        from caveat.replay import run_scenario

        if self.failed is not None:
            raise self.failed
        if self.result is None:
            try:
                url, template = self.config.stash[_REPLAYS].template()
                self.result = run_scenario(
                    self.scenario, path=str(self.path), server_url=url, template=template
                )
            except Exception as exc:  # every later step reports the same failure
                self.failed = exc
                raise
        return self.result


class ScenarioFailed(Exception):
    """The expectations of one step that did not hold."""


class StepItem(pytest.Item):
    """One step of a scenario; it fails with its broken expectations."""

    def __init__(self, *, index: int, line: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index = index
        self.line = line

    def runtest(self) -> None:
        parent = self.parent
        assert isinstance(parent, ScenarioFile)
        result = parent.replay()
        if result.error is not None:  # the first item to run shows it; the rest point to it
            if parent.error_shown_by is not None:
                raise ScenarioFailed(f"not run: the scenario's error is on {parent.error_shown_by}")
            parent.error_shown_by = self.name
            raise ScenarioFailed(f"{parent.path}: {result.error}")
        if not any(r.index == self.index for r in result.steps):
            raise ScenarioFailed("the step did not run (the scenario stopped before it)")
        mine = [f.describe() for f in result.failures if f.step_index == self.index]
        if mine:
            raise ScenarioFailed("\n".join(mine))

    def own_seconds(self) -> float | None:
        """This step's time in the replay plus an equal share of the scenario's fixed
        cost (None before the scenario has replayed, or when replaying it raised)."""
        parent = self.parent
        assert isinstance(parent, ScenarioFile)
        result = parent.result
        if result is None:
            return None
        ran: dict[int, float] = {r.index: r.seconds for r in result.steps}
        fixed = max(float(result.duration_s) - sum(ran.values()), 0.0)
        return ran.get(self.index, 0.0) + fixed / max(len(parent.scenario.steps), 1)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ScenarioFailed):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, self.line - 1, self.name
