"""README's "Connect your Prometheus in five minutes", as written, against a real
Prometheus (Debian's, scraping the test's exporter): its sources.yaml loads with
``caveat sources load``, ``caveat sources pull prom`` stores what Prometheus answers,
and ``caveat sources status`` reports it; through the CLI, as the application role."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import factgen
from caveat import app as use
from caveat import db
from predicates import ValueType
from tests.caveat.test_cli_incident import run
from tests.conftest import ADMIN
from tests.stack import Exporter, Prometheus, by_label

ROOT = Path(__file__).resolve().parents[2]


def readme_sources() -> str:
    """The sources.yaml the README's section writes (its heredoc)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Connect your Prometheus in five minutes") :]
    found = re.search(r"cat > sources.yaml <<'YAML'\n(.*?)\nYAML\n", section, re.S)
    assert found, "the README's section writes sources.yaml with a heredoc"
    return found.group(1) + "\n"


def test_the_readmes_five_minutes_against_a_real_prometheus(
    exporter: Exporter,
    prometheus: Prometheus,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = db.make_app_engine(db_url)
    try:
        rt = use.Runtime.over(engine, "acme")
        use.declare_schema(
            rt,
            ADMIN,
            [
                factgen.AttributeSpec("metrics.pool_utilisation", ValueType.parse("float")),
                factgen.AttributeSpec("config.connection_pool.max", ValueType.parse("int")),
            ],
        )
        use.import_entities(rt, ADMIN, [factgen.EntitySpec("checkout-api", "service")])
    finally:
        engine.dispose()
    exporter.set("checkout-api", in_use=18, max=20)
    prometheus.wait_for("db_pool_max", lambda r: "checkout-api" in by_label(r))
    text = readme_sources()
    assert "url: http://localhost:9090" in text
    (tmp_path / "sources.yaml").write_text(text.replace("http://localhost:9090", prometheus.url))
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    monkeypatch.chdir(tmp_path)

    loaded = run("sources", "load", "sources.yaml").output
    assert loaded.startswith("loaded 1 sources in tenant acme: prom\n")
    pulled = json.loads(run("sources", "pull", "prom", "--json").output)
    [pull] = pulled["pulls"]
    assert (pull["source"], pull["stored"], pull["refused"], pull["error"]) == (
        "prom",
        2,
        {},
        None,
    )
    [status] = json.loads(run("sources", "status", "--json").output)["sources"]
    assert (status["pulls"], status["samples_stored"], status["every_seconds"]) == (1, 2, 30.0)
    assert status["scheduled"] and not status["due"]
    assert "prom  (prometheus, every 30s)" in run("sources", "status").output
