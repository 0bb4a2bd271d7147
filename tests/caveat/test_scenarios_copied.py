"""The scenarios the project must replay are bundled, unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "scenarios"


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/scenarios is not beside the project")
def test_every_shared_scenario_is_bundled_unchanged() -> None:
    shared = sorted(SHARED.glob("*.yaml"))
    assert shared
    for f in shared:
        bundled = ROOT / "scenarios" / f.name
        assert bundled.exists(), f"scenarios/{f.name} is missing"
        assert bundled.read_text() == f.read_text(), f"scenarios/{f.name} differs from shared"
