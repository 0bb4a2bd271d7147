"""The file fact source with real files: JSON or YAML by extension, a pointer per
attribute, dated at the file's modification time, re-read only when it changed."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from caveat import app, connectors
from caveat.connectors import file as file_source

from ._pullkit import facts, load, rt_fixture, status

__all__ = ["rt_fixture"]  # a fixture

MAX = "config.connection_pool.max"


def sources(template: Path) -> str:
    return f"""
sources:
  - name: deployed
    kind: file
    path: "{template}"
    subjects: [paymentapi-prod]
    attributes:
      - attribute: {MAX}
        pointer: /pool/max
"""


def stamp(path: Path, when: datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()))


def test_a_yaml_file_is_read_dated_when_read_and_reread_only_when_changed(
    tmp_path: Path, rt: app.Runtime
) -> None:
    path = tmp_path / "paymentapi-prod.yaml"
    path.write_text("pool:\n  max: 20\n")
    t1 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
    stamp(path, t1)
    load(rt, sources(tmp_path / "{subject}.yaml"))

    read1, read2, read3 = (t1 + timedelta(minutes=m) for m in (5, 6, 65))
    [first] = connectors.pull_sources(rt, now=read1)
    [again] = connectors.pull_sources(rt, now=read2)
    reads_unchanged = file_source.reads(path)
    path.write_text("pool:\n  max: 100\n")
    t2 = datetime(2026, 12, 3, 11, 0, tzinfo=UTC)
    stamp(path, t2)
    [changed] = connectors.pull_sources(rt, now=read3)

    assert reads_unchanged == 1  # the second pull was served from the cache
    assert file_source.reads(path) == 2
    # observed when read: an unchanged file observed again is still fresh (max_age counts
    # from the read); when it was written is the provenance's modified_at
    assert [(f.subject, f.value, f.observed_at) for f in first.stored] == [
        ("payment-api", 20, read1)
    ]
    assert [(f.value, f.observed_at) for f in again.stored] == [(20, read2)]
    assert [(f.value, f.observed_at) for f in changed.stored] == [(100, read3)]
    last = facts(rt, "deployed")[-1]
    assert last.provenance == {
        "source": "deployed",
        "kind": "file",
        "path": str(path),
        "pointer": "/pool/max",
        "modified_at": t2.isoformat(),
        "sample_time": read3.isoformat(),
    }


def test_a_json_file_is_read_strictly_and_a_malformed_one_is_an_error_with_its_line(
    tmp_path: Path, rt: app.Runtime
) -> None:
    path = tmp_path / "paymentapi-prod.json"
    path.write_text('{"pool": {"max": 12}}')
    load(rt, sources(tmp_path / "{subject}.json"))
    [good] = connectors.pull_sources(rt)
    path.write_text('{"pool": {"max": 12,,}}')
    [bad] = connectors.pull_sources(rt)
    path.unlink()
    [gone] = connectors.pull_sources(rt)

    assert [f.value for f in good.stored] == [12]
    assert bad.stored == () and bad.error is not None
    assert bad.error.startswith(f"paymentapi-prod: {path}:1:")
    assert "invalid JSON" in bad.error
    assert gone.error == f"paymentapi-prod: cannot read {path}: No such file or directory"
    assert status(rt, "deployed").errors == 2
