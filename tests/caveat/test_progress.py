"""The one progress bar (rich, on stderr): final state printed once off a terminal."""

from __future__ import annotations

import pytest

from caveat.progress import Bar


def test_the_bar_reports_its_final_count_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    bar = Bar("loading", 3)
    bar.update(1)
    bar.advance(1)
    bar.update(3)  # reaching the total closes it
    bar.update(3)  # and a late update does not draw it twice
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.count("3/3") == 1 and "loading" in out.err


def test_a_disabled_bar_draws_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with Bar("quiet", 5, enabled=False) as bar:
        bar.advance(5)
    assert capsys.readouterr().err == ""
