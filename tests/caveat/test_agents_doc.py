"""docs/agents.md's examples, run as they are written, against a live server.

The fenced ``python`` blocks of the page whose first line is ``# example: NAME`` are
taken out of the markdown and run as programs (a subprocess each) against
``caveat serve``'s application on loopback (as ``caveat_app``, under row-level
security), with ``CAVEAT_URL`` and ``CAVEAT_TOKEN`` set, as the page tells a reader;
the stdio recipe with ``DATABASE_URL`` and ``CAVEAT_TOKEN`` set instead, from the
clone (where ``python -m caveat`` is this checkout's), through the SDK's stdio client
and its minimal environment. What they print is checked against the output the page
shows (the first bare block after the example), so editing an example into something
broken, or its output into something untrue, fails the suite.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from caveat import app as use
from tests.caveat._doors import precedent
from tests.caveat.test_http import serving
from tests.conftest import ADMIN

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def blocks() -> dict[str, str]:
    """The page's examples by name (``# example: NAME`` on a python block's first line)."""
    found: dict[str, str] = {}
    for lang, body in _FENCE.findall(DOC.read_text()):
        first = body.splitlines()[0] if body else ""
        if lang == "python" and first.startswith("# example: "):
            name = first.removeprefix("# example: ").strip()
            assert name not in found, f"two examples named {name}"
            found[name] = body
    return found


def shown_output(name: str) -> list[str]:
    """The output the page says example ``name`` prints (the first bare block after it)."""
    fences = _FENCE.findall(DOC.read_text())
    [at] = [i for i, (lang, body) in enumerate(fences) if body.startswith(f"# example: {name}\n")]
    bare = [body for lang, body in fences[at + 1 :] if lang == ""]
    assert bare, f"the page shows what the {name} example prints"
    return str(bare[0]).splitlines()


def test_the_page_has_both_examples_and_each_shows_the_whole_loop() -> None:
    examples = {name: code for name, code in blocks().items() if name in {"mcp", "http"}}
    assert set(blocks()) == {"mcp", "http", "stdio", "runbooks"}
    steps = {
        "mcp": ["open_case", "observe", "recall", "record_use", "cite", "propose", "close_case"],
        "http": [
            "/v1/cases",
            "/v1/observations",
            "/v1/recall",
            "/v1/record-use",
            "/cite",
            "/v1/events",
            "/v1/proposals",
            "/close",
        ],
    }
    for name, code in examples.items():
        loop = code[code.index("# 1. ") :]  # the loop itself, after its helpers
        at = [loop.index(f'"{s}"' if name == "mcp" else s) for s in steps[name]]
        assert at == sorted(at), f"{name}: the loop's steps are out of order"
        # the context is checked before each of the two model calls, and drops
        assert (
            loop.count(
                "call_model(QUERY, await checked(context))"
                if name == "mcp"
                else "call_model(QUERY, checked(context))"
            )
            == 2
        )
        assert "del context[int(item)]" in code


@pytest.mark.parametrize("name", ["mcp", "http"])
def test_the_example_runs_against_a_live_server(name: str, db_url: str, tmp_path: Path) -> None:
    program = tmp_path / f"agents_{name}.py"
    program.write_text(blocks()[name])
    with serving(db_url) as s:
        item_id = precedent(s.rt)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
        env |= {"CAVEAT_URL": s.base, "CAVEAT_TOKEN": s.agent}
        done = subprocess.run(
            [sys.executable, str(program)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        closed = use.audit_entries(s.rt, ADMIN, action="close_case")
        cited = use.audit_entries(s.rt, ADMIN, action="cite")
    assert done.returncode == 0, done.stderr[-3000:] or done.stdout
    assert item_id == 1  # the page's output names the precedent by its id
    assert done.stdout.splitlines() == shown_output(name)
    # the store agrees with what the program printed
    assert [(r.actor, r.item_id) for r in cited] == [("agent-ir", item_id)]
    assert [(r.actor, r.code) for r in closed] == [("agent-ir", "confirmed")]


def test_the_stdio_recipe_runs_as_written(db_url: str, tmp_path: Path) -> None:
    """The stdio example verbatim: the SDK starts ``caveat mcp`` with its minimal
    environment plus what the example passes, and it reaches this store."""
    program = tmp_path / "agents_stdio.py"
    program.write_text(blocks()["stdio"])
    with serving(db_url) as s:
        item_id = precedent(s.rt)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
        env |= {"DATABASE_URL": db_url, "CAVEAT_TOKEN": s.agent, "CAVEAT_EMBEDDER": "hashing"}
        done = subprocess.run(
            [sys.executable, str(program)],
            env=env,
            cwd=DOC.parents[1],  # the clone: `python -m caveat` is this checkout's
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:] or done.stdout
    assert item_id == 1
    assert done.stdout.splitlines() == shown_output("stdio")


def test_a_broken_example_fails(db_url: str, tmp_path: Path) -> None:
    """The runner notices: an example whose loop breaks exits with the refusal's code."""
    broken = blocks()["http"].replace(
        '"/v1/cases", json={"id": CASE', '"/v1/cases", json={"ID": CASE'
    )
    program = tmp_path / "broken.py"
    program.write_text(broken)
    with serving(db_url) as s:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
        env |= {"CAVEAT_URL": s.base, "CAVEAT_TOKEN": s.agent}
        done = subprocess.run(
            [sys.executable, str(program)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode != 0 and "422 invalid_input" in done.stderr


#: The runbook of the runbooks example, as an SME imports it (docs/knowledge.md).
RUNBOOK = """# Payment API

## Connection pool exhausted

Restart the payment-api pods one at a time (a rolling restart); the pool
drains as each pod comes back.

## Disk full

Rotate the logs.
"""


def test_the_runbooks_example_runs_against_a_live_server(db_url: str, tmp_path: Path) -> None:
    """Recall with both sources over HTTP: the precedent and the runbook's passages in one
    ranked list; a proposal citing the passage as its evidence is accepted, and the
    store holds the lesson with that evidence."""
    import claims

    program = tmp_path / "agents_runbooks.py"
    program.write_text(blocks()["runbooks"])
    with serving(db_url) as s:
        item_id = precedent(s.rt)
        doc = claims.DocumentInput("runbooks/payment-api.md", RUNBOOK, uri="https://git/r.md")
        use.docs_import(s.rt, ADMIN, [doc])
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
        env |= {"CAVEAT_URL": s.base, "CAVEAT_TOKEN": s.agent}
        done = subprocess.run(
            [sys.executable, str(program)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        with s.rt.transaction() as t:
            lesson = t.execute(
                sa.text(
                    "SELECT evidence, created_by FROM items "
                    "WHERE attribute = 'rolling_restart_cleared_pool'"
                )
            ).one()
    assert done.returncode == 0, done.stderr[-3000:] or done.stdout
    assert item_id == 1
    assert done.stdout.splitlines() == shown_output("runbooks")
    ref = claims.passage_ref("runbooks/payment-api.md", "connection-pool-exhausted")
    assert ref in done.stdout
    assert (list(lesson.evidence), lesson.created_by) == ([ref], "agent-ir")
