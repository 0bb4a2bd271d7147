"""The TypeScript client (clients/typescript, docs/client-typescript.md): its committed types are
the server's OpenAPI document as openapi-typescript renders it today, and its tests,
compiled with tsc (which type-checks the client and the tests against those types),
pass under Node against a live ``caveat serve`` on loopback.

``make test`` installs Node, npm and the client's packages (``make ts-client``); without
them these tests fail, saying so: they are never skipped.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from caveat import app as use
from tests.caveat._doors import caveat_serve, precedent, two_tenants
from tests.conftest import ADMIN

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "clients" / "typescript"
SCHEMA = CLIENT / "src" / "schema.ts"


def _tool(name: str) -> Path:
    """An executable of the client's ``node_modules`` (Node and npm on the PATH); a
    failure naming the make target that installs them otherwise."""
    missing = [t for t in ("node", "npm") if shutil.which(t) is None]
    if missing:
        pytest.fail(
            f"{' and '.join(missing)} not found: `make ts-client` installs Debian's "
            "nodejs and npm and the client's packages (make test does it first)"
        )
    path = CLIENT / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.fail(
            f"{path.relative_to(REPO)} is missing: run `make ts-client` "
            "(npm ci in clients/typescript)"
        )
    return path


def _run(
    argv: list[str | Path],
    *,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env=env,
        timeout=timeout,
        capture_output=True,
        text=True,
        check=False,
    )


def _types_command(document: Path, output: Path) -> list[str]:
    """``npm run types`` (what ``make ts-types`` runs) as package.json spells it, reading
    ``document`` and writing ``output``: one command, one set of options."""
    script = json.loads((CLIENT / "package.json").read_text())["scripts"]["types"].split()
    assert script[0] == "openapi-typescript", script
    assert {"build/openapi.json", "src/schema.ts"} <= set(script), script
    swap = {"build/openapi.json": str(document), "src/schema.ts": str(output)}
    return [str(_tool("openapi-typescript")), *(swap.get(a, a) for a in script[1:])]


def test_the_committed_types_are_the_servers_document(tmp_path: Path) -> None:
    """The types regenerated from this checkout's OpenAPI document equal the committed
    ones: a route or schema changed without ``make ts-types`` fails here."""
    document = tmp_path / "openapi.json"
    dumped = _run([sys.executable, REPO / "clients" / "openapi.py", document], cwd=REPO)
    assert dumped.returncode == 0, dumped.stderr[-3000:]
    assert json.loads(document.read_text())["paths"], "an OpenAPI document with routes"
    fresh = tmp_path / "schema.ts"
    done = _run([*_types_command(document, fresh)], cwd=CLIENT)
    assert done.returncode == 0, done.stderr[-3000:] or done.stdout
    drift = list(
        difflib.unified_diff(
            SCHEMA.read_text().splitlines(keepends=True),
            fresh.read_text().splitlines(keepends=True),
            "clients/typescript/src/schema.ts (committed)",
            "from the server's document now",
        )
    )
    assert not drift, (
        "clients/typescript/src/schema.ts is not the server's OpenAPI document as "
        "openapi-typescript renders it: run `make ts-types` and commit the result\n"
        + "".join(drift[:60])
    )


_TS_FENCE = re.compile(r"^```ts\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_the_readme_example_compiles(tmp_path: Path) -> None:
    """clients/typescript/README.md's example, as written, type-checks against the
    committed types (strict): an example calling a route or field that is gone fails."""
    tsc = _tool("tsc")
    [example] = _TS_FENCE.findall((CLIENT / "README.md").read_text())
    assert 'from "@caveat/client"' in example
    entry = (CLIENT / "src" / "index.ts").as_posix().removesuffix(".ts") + ".js"
    (tmp_path / "example.ts").write_text(
        example.replace('from "@caveat/client"', f'from "{entry}"') + "\nexport {};\n"
    )
    config = {
        "extends": (CLIENT / "tsconfig.json").as_posix(),
        "compilerOptions": {
            "noEmit": True,
            "rootDir": "/",
            "typeRoots": [(CLIENT / "node_modules" / "@types").as_posix()],
        },
        "include": ["example.ts"],
    }
    (tmp_path / "tsconfig.json").write_text(json.dumps(config))
    (tmp_path / "package.json").write_text('{"type": "module"}\n')  # top-level await
    done = _run([tsc, "-p", tmp_path / "tsconfig.json"], cwd=tmp_path)
    assert done.returncode == 0, f"the README's example:\n{done.stdout}{done.stderr}"


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """``caveat serve`` (one worker) as a subprocess over a database holding the door
    tests' world in tenants acme and globex and acme's precedent (item 1); its base URL
    and an agent's token (agent-ir, of acme)."""
    with two_tenants(db_url) as rt:
        assert precedent(rt) == 1
        token = use.create_token(rt, ADMIN, "agent-ir", role="agent", capabilities=[]).token
    with caveat_serve(
        db_url, tmp_path / "home", tmp_path / "serve.log", "--workers", "1",
        ready_within=60, stop_within=30,
    ) as (base, _):  # fmt: skip
        yield base, token


@pytest.fixture
def compiling(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """tsc compiling the client and its tests (strict, against the committed types) into
    a directory of their own that resolves the client's packages, started before the
    server so the two overlap; the process and the compiled test file."""
    tsc = _tool("tsc")
    out = tmp_path / "ts"
    out.mkdir()
    (out / "package.json").write_text('{"type": "module"}\n')
    (out / "node_modules").symlink_to(CLIENT / "node_modules", target_is_directory=True)
    argv = [str(tsc), "-p", str(CLIENT / "tsconfig.json"), "--outDir", str(out / "dist")]
    proc = subprocess.Popen(
        argv, cwd=CLIENT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        yield proc, out / "dist" / "test" / "caveat.test.js"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_the_clients_tests_pass_against_a_live_server(
    compiling: tuple[subprocess.Popen[str], Path], served: tuple[str, str]
) -> None:
    tsc, compiled = compiling
    report, _ = tsc.communicate(timeout=120)
    assert tsc.returncode == 0, f"tsc:\n{report}"
    base, token = served
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAVEAT_")}
    env |= {"CAVEAT_URL": base, "CAVEAT_TOKEN": token}
    done = _run(
        ["node", "--test", "--test-reporter=tap", compiled],
        cwd=compiled.parent,
        env=env,
        timeout=120,
    )
    output = f"{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, f"node --test failed:\n{output[-6000:]}"
    summary = {
        line.split()[1]: int(line.split()[2])
        for line in done.stdout.splitlines()
        if line.startswith("# ") and len(line.split()) == 3 and line.split()[2].isdigit()
    }
    assert (summary.get("pass"), summary.get("fail")) == (6, 0), output[-6000:]
