"""The incident summaries the benchmarks write and query (docs/performance.md, "The corpus").

Every benchmark that uses them takes ``--corpus PATH``: a JSON-lines file, one object
a line with at least ``id``, ``organisation`` and ``summary`` (``category`` and ``url``
are carried, not read). Without it, the 190 public postmortem summaries of
``../shared/data/postmortems.jsonl`` when that file is beside the project, else the
project's own ``bench/data/incidents.jsonl``: 80 of the same incidents (the same ids,
so bench/data/paraphrases.jsonl's targets are in both), summarised in the project's
words. Each benchmark's output says which one it used (``Summaries.label``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = [
    "BUNDLED",
    "SHARED",
    "Postmortem",
    "Summaries",
    "add_argument",
    "current",
    "default_path",
    "from_args",
    "read",
    "use",
]

HERE = Path(__file__).resolve().parent
#: The public postmortem summaries beside the project (not part of it).
SHARED = HERE.parents[1] / "shared" / "data" / "postmortems.jsonl"
#: The project's own summaries: what a fresh clone runs on.
BUNDLED = HERE / "data" / "incidents.jsonl"


@dataclass(frozen=True)
class Postmortem:
    id: str
    organisation: str
    summary: str


@dataclass(frozen=True)
class Summaries:
    """One corpus: where it was read from and its summaries, in file order."""

    path: Path
    docs: tuple[Postmortem, ...]

    @property
    def label(self) -> str:
        """How the output names it: ``../shared/data/postmortems.jsonl (190 summaries)``."""
        if self.path == SHARED:
            where = "../shared/data/postmortems.jsonl"
        elif self.path == BUNDLED:
            where = "bench/data/incidents.jsonl"
        else:
            where = str(self.path)
        return f"{where} ({len(self.docs)} summaries)"

    @property
    def digest(self) -> str:
        """A short digest of the summaries (a kept store records what it was built from)."""
        h = hashlib.sha256("\n".join(f"{p.id}\t{p.summary}" for p in self.docs).encode())
        return h.hexdigest()[:10]


def default_path() -> Path:
    """``../shared/data/postmortems.jsonl`` when it is there, else the project's own."""
    return SHARED if SHARED.is_file() else BUNDLED


@cache
def read(path: Path) -> Summaries:
    """The summaries of ``path``; ``ValueError`` naming the file and line of a bad one."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"{path}: cannot read the corpus ({e.strerror})") from None
    docs: list[Postmortem] = []
    seen: set[str] = set()
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            doc = Postmortem(str(row["id"]), str(row["organisation"]), str(row["summary"]))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            what = f"missing field {e}" if isinstance(e, KeyError) else "not a JSON object"
            raise ValueError(f"{path}:{n}: {what}") from None
        if doc.id in seen:
            raise ValueError(f"{path}:{n}: id {doc.id!r} appears twice")
        seen.add(doc.id)
        docs.append(doc)
    if not docs:
        raise ValueError(f"{path}: the corpus holds no summaries")
    return Summaries(path.resolve(), tuple(docs))


_chosen: list[Path] = []


def use(path: Path | str | None) -> Summaries:
    """Make ``path`` (None: ``default_path()``) this run's corpus; returns it read."""
    chosen = default_path() if path is None else Path(path).resolve()
    summaries = read(chosen)
    _chosen[:] = [chosen]
    return summaries


def current() -> Summaries:
    """This run's corpus: the one ``use`` chose, else the default."""
    return read(_chosen[0] if _chosen else default_path())


def add_argument(parser: argparse.ArgumentParser) -> None:
    """The benchmarks' ``--corpus PATH`` option."""
    parser.add_argument(
        "--corpus",
        metavar="PATH",
        help="the incident summaries (JSON lines: id, organisation, summary); default "
        "../shared/data/postmortems.jsonl when present, else bench/data/incidents.jsonl",
    )


def from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Summaries:
    """Use the corpus ``--corpus`` names (a bad one: the parser's error, exit 2)."""
    try:
        return use(args.corpus)
    except ValueError as e:
        parser.error(str(e))
