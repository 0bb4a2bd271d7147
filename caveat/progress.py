"""One progress bar for the command line and the benchmarks (rich, on stderr).

On a terminal it redraws in place; elsewhere (CI logs, pipes) rich draws nothing
live and the final state is printed once, so logs stay readable.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["Bar"]


class Bar:
    """A bar of ``total`` steps labelled ``label``; ``update(done)`` sets the count
    reached, ``advance(n)`` adds to it. A context manager; ``enabled=False`` draws
    nothing."""

    def __init__(self, label: str, total: int, enabled: bool = True) -> None:
        self.enabled = enabled
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
            disable=not enabled,
        )
        self._task = self._progress.add_task(label, total=max(total, 1))
        self._started = False
        self._closed = False

    def __enter__(self) -> Bar:
        self._start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _start(self) -> None:
        if not self._started and not self._closed:
            self._progress.start()
            self._started = True

    def update(self, done: int) -> None:
        """The count reached so far; the bar closes itself when it reaches the total
        (later updates draw nothing)."""
        if self._closed:
            return
        self._start()
        self._progress.update(self._task, completed=done)
        task = self._progress.tasks[0]
        if task.total is not None and done >= task.total:
            self.close()

    def advance(self, n: int) -> None:
        """``n`` more steps done."""
        if self._closed:
            return
        self._start()
        self._progress.advance(self._task, n)

    def close(self) -> None:
        """Draw the final state and stop."""
        if self._started:
            self._progress.stop()
            self._started = False
        self._closed = True
