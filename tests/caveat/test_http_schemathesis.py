"""Schemathesis against the HTTP API's own OpenAPI document, over real HTTP.

A uvicorn server on loopback (as ``caveat_app``) with an admin token, and the
``st`` command line of schemathesis 4 with its coverage, fuzzing and stateful
phases and the checks the API promises: no server error for any input, every
response as documented, authentication never ignored, and schema-violating
requests rejected. ``make test`` runs a small budget of examples per operation;
``make fuzz`` a larger one (``CAVEAT_FUZZ_EXAMPLES``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from caveat import app as use
from tests.caveat.test_http import serving
from tests.conftest import ADMIN

CHECKS = "not_a_server_error,response_schema_conformance,ignored_auth,negative_data_rejection"


def test_schemathesis_finds_nothing(db_url: str, tmp_path: Path) -> None:
    st = shutil.which("st", path=str(Path(sys.executable).parent))
    assert st is not None, "schemathesis is a dev dependency (pip install -e '.[dev]')"
    examples = os.environ.get("CAVEAT_FUZZ_EXAMPLES", "15")
    with serving(db_url) as s:
        admin = use.create_token(s.rt, ADMIN, "st-admin", role="admin").token
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
            ],
            cwd=tmp_path,  # st writes .hypothesis/ and .schemathesis/ where it runs
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    summary = done.stdout[done.stdout.find("SUMMARY") :]
    assert done.returncode == 0, summary or done.stdout[-4000:] or done.stderr[-4000:]
    assert "Stateful" in summary and "generated" in summary
