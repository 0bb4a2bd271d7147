"""The bundled scenario of core blocks (scenarios/core-block.yaml; docs/blocks.md): a
block edited twice, packed first in every recall, the prefix byte-identical between
recalls whose ranked items differ and changed, after an edit, in that block alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from caveat.replay import load_scenario, run_scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


def test_a_block_edited_twice_keeps_the_packed_prefix_stable(
    pg_server_url: str, template_db: str
) -> None:
    path = SCENARIOS / "core-block.yaml"
    res = run_scenario(
        load_scenario(path),
        path=str(path),
        server_url=pg_server_url,
        template=template_db,
        embedder=None,
    )
    assert res.ok, [f.describe() for f in res.failures] or res.error
    packed: list[Any] = [s.result["packed"] for s in res.steps if s.action == "recall"]
    first, other, edited, again = packed
    assert first["items"] == ["pool-restart"] and other["items"] == []
    assert first["prefix"] == other["prefix"]  # the same bytes, whatever was ranked
    assert first["text"].startswith(first["prefix"] + "\n\nPrecedents from caveat")
    assert other["text"] == other["prefix"]
    one = "Page the DBA on call for payments-db."
    assert edited["prefix"] == first["prefix"].replace(one, one + "\nThen open a bridge.")
    assert again["prefix"] == edited["prefix"].replace("for payments-db.", "(#dba-oncall).")
    assert [p["blocks"] for p in packed] == [["escalation", "style"]] * 4
