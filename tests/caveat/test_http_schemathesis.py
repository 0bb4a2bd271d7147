"""Schemathesis against the HTTP API's own OpenAPI document, over real HTTP.

A uvicorn server on loopback (as ``caveat_app``) with an admin token, and the
``st`` command line of schemathesis 4 with its coverage, fuzzing and stateful
phases and the checks the API promises: no server error for any input, every
response as documented, authentication never ignored, and schema-violating
requests rejected; and caveat's own check (tests/caveat/_st_hooks.py): no revoked,
refuted, superseded, re-opened or redacted item is ever served as current, over a
seeded world the fuzzer's ids and recalls are aimed at. ``make test`` runs a small
budget of examples per operation; ``make fuzz`` a larger one
(``CAVEAT_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import sqlalchemy as sa

import claims
import factgen
import recall
from caveat import app as use
from caveat import db
from caveat.settings import Settings
from tests.caveat import _st_hooks
from tests.caveat._doors import QUERY
from tests.caveat._doors import world as door_world
from tests.caveat.test_http import serving
from tests.conftest import ADMIN

CHECKS = (
    "not_a_server_error,response_schema_conformance,ignored_auth,negative_data_rejection,"
    "no_withdrawn_item_served_as_current"
)
SUBJECT = "payment-api"
#: what each seeded precedent says (one episode each: their own keys)
CLAIMS = (
    ("restart_restored_service_at", "Payment API pool exhausted at max 20; a restart restored it."),
    ("pool_raise_fixed_at", "Checkout slow: raising the payment api connection pool fixed it."),
    ("rollback_fixed_at", "Payment API connection pool exhausted after deploy; rollback fixed it."),
    ("drain_fixed_at", "Slow checkout, payment pool exhausted; draining one node fixed it."),
    ("scale_out_fixed_at", "Payment api connection pool exhausted; scaling out fixed checkout."),
    ("cache_flush_fixed_at", "Checkout slow with the payment api pool full; a cache flush helped."),
)


def seed(rt: use.Runtime) -> dict[str, list[int]]:
    """Active precedents about payment-api that the question finds (its pool max is
    observed at 20), and as many withdrawn ones, one of each kind, that it would find
    were they current: revoked, refuted, redacted, superseded, re-opened."""
    use.observe(rt, ADMIN, [factgen.Observation(SUBJECT, "config.connection_pool.max", 20)])
    use.open_case(rt, ADMIN, "INC-ST", subjects=[SUBJECT])

    def write(attribute: str, text: str, obj: str = "E-1") -> int:
        written = use.write(
            rt,
            ADMIN,
            claims.ItemWrite.model_validate(
                {
                    "kind": "fact",
                    "subject": SUBJECT,
                    "attribute": attribute,
                    "object": obj,
                    "required": ["config.connection_pool.max eq 20"],
                    "evidence": ["E-1"],
                    "scope": {"axis": "case", "id": "INC-ST"},
                    "text": text,
                }
            ),
        )
        assert written.item_id is not None, written
        return written.item_id

    ids = [write(a, t) for a, t in CLAIMS]
    for i in ids:
        use.promote(rt, ADMIN, i, to="shadow")
        use.promote(rt, ADMIN, i, to="active")
    use.revoke(rt, ADMIN, ids[1], reason="seeded: revoked")
    use.refute(rt, ADMIN, ids[2], reason="seeded: refuted")
    use.redact(rt, ADMIN, ids[3], reason="seeded: redacted")
    successor = write(CLAIMS[4][0], CLAIMS[4][1] + " (restated)", obj="E-2")
    return {"active": [ids[0], ids[5]], "withdrawn": ids[1:5], "successor": [successor]}


def _dsn(url: str) -> str:
    return (
        sa.make_url(url)
        .render_as_string(hide_password=False)
        .replace("postgresql+psycopg://", "postgresql://")
    )


def run_st(
    db_url: str, tmp_path: Path, *, examples: str, only: str | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, list[int]], list[list[str]]]:
    """Schemathesis against a server over the seeded world: its output, the world, and
    the items the check looked at (route, id, state)."""
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st is not None, "schemathesis is a dev dependency (pip install -e '.[dev]')"
    log = tmp_path / "served.tsv"
    # an extractor nobody answers at: POST /v1/turns queues (no background round runs)
    extractor = Settings(extractor_url="http://127.0.0.1:9/v1")
    with serving(db_url, settings=extractor) as s:
        issued = use.create_token(s.rt, ADMIN, "st-admin", role="admin")
        admin = issued.token
        spare = use.create_token(s.rt, ADMIN, "st-spare", role="admin").info.id
        use.add_evidence(s.rt, ADMIN, "E-2")
        world = seed(s.rt)
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), *sys.path]),
            "SCHEMATHESIS_HOOKS": _st_hooks.__name__,
            "CAVEAT_ST_DSN": _dsn(db_url),
            "CAVEAT_ST_ITEMS": ",".join(str(i) for ids in world.values() for i in ids),
            "CAVEAT_ST_QUERY": QUERY,
            "CAVEAT_ST_SUBJECT": SUBJECT,
            "CAVEAT_ST_LOG": str(log),
            "CAVEAT_ST_OWN_TOKEN": issued.info.id,
            "CAVEAT_ST_SPARE_TOKEN": spare,
        }
        done = subprocess.run(
            [
                st,
                "run",
                f"{s.base}/openapi.json",
                "--header",
                f"Authorization: Bearer {admin}",
                "--checks",
                CHECKS,
                "--max-examples",
                examples,
                "--seed",
                "20261202",
                "--wait-for-schema",
                "10",
                "--no-color",
                *(["--include-path", only] if only else []),
            ],
            cwd=tmp_path,  # st writes .hypothesis/ and .schemathesis/ where it runs
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    served = [line.split("\t") for line in log.read_text().splitlines()] if log.exists() else []
    return done, world, served


def test_schemathesis_finds_nothing(db_url: str, tmp_path: Path) -> None:
    examples = os.environ.get("CAVEAT_FUZZ_EXAMPLES", "15")
    done, world, served = run_st(db_url, tmp_path, examples=examples)
    summary = done.stdout[done.stdout.find("SUMMARY") :]
    assert done.returncode == 0, summary or done.stdout[-4000:] or done.stderr[-4000:]
    assert "Stateful" in summary and "generated" in summary
    # the check met what it guards: recalls served seeded precedents, the guard was
    # asked about withdrawn ones, and the run withdrew seeded items of its own
    recalled = {int(i) for route, i, _ in served if route == "GET /v1/recall"}
    assert recalled & set(world["active"] + world["successor"]), served[:20]
    seeded = [i for ids in world.values() for i in ids]
    now_withdrawn = _st_hooks.withdrawn_served(_dsn(db_url), seeded)
    assert set(now_withdrawn) > set(world["withdrawn"]), now_withdrawn


def test_the_check_catches_a_guard_that_serves_withdrawn_items(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: with the context guard answering every id usable (its state gate
    off), the same run over the guard's route fails on the new check."""

    def gate_off(
        rt: use.Runtime, actor: claims.Actor, item_ids: Sequence[int], **_: object
    ) -> recall.ContextCheck:
        return recall.ContextCheck(usable=tuple(item_ids), dropped={})

    monkeypatch.setattr(use, "check_context", gate_off)
    done, _, _ = run_st(db_url, tmp_path, examples="15", only="/v1/context/check")
    assert done.returncode != 0
    assert "served withdrawn items as current" in done.stdout, done.stdout[-4000:]


def test_the_check_catches_a_withdrawn_item_served_as_current(db_url: str) -> None:
    """The check itself, given a response that serves the seeded withdrawn items as
    current (what a recall without its state gate would answer), fails on each of them;
    given the active ones, it passes."""
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        door_world(rt)
        use.add_evidence(rt, ADMIN, "E-2")
        world = seed(rt)
    finally:
        engine.dispose()
    dsn = _dsn(db_url)
    for route, body in [
        ("GET /v1/recall", {"items": [{"item": {"id": i}} for i in world["withdrawn"]]}),
        ("POST /v1/context/check", {"usable": world["withdrawn"]}),
        ("POST /v1/record-use", {"used": world["withdrawn"]}),
    ]:
        ids = _st_hooks.served_as_current(route, {}, body)
        assert ids == world["withdrawn"]
        assert set(_st_hooks.withdrawn_served(dsn, ids)) == set(world["withdrawn"]), route
    assert _st_hooks.withdrawn_served(dsn, world["active"] + world["successor"]) == {}
    # an as-of recall answers for the past: not served as current
    assert _st_hooks.served_as_current("GET /v1/recall", {"as_of": "2026-01-01"}, {}) is None
