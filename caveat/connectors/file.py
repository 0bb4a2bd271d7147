"""Files: for each subject the source lists, the file at the path template with
``{subject}`` replaced, JSON or YAML (by its extension: ``.json``, ``.yaml``/``.yml``;
else guessed from its first character), each attribute read at its JSON pointer.

A file is re-read only when it changed: the process keeps each file's parsed document
with its modification time (nanoseconds), size and inode, and reads it again only when
one of those differs. Its observations are dated when the file was read (the pull's
``now``): reading it is observing that it still says so, and an attribute's ``max_age``
counts from there, as it does for every kind. The file's modification time is kept in
the provenance (``modified_at``), where explain shows it. A missing or malformed file is that
subject's error (with the line and column of the first problem); relative paths are
relative to the working directory of the process that pulls.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import factgen
from caveat.connectors._http import Transport
from caveat.connectors._map import Part, document_part, subject_fetches
from caveat.settings import Settings
from predicates.errors import DocumentError

__all__ = ["fetch_subject", "fetches", "read_document", "reads", "subject_path"]

KIND = "file"
#: The most bytes a source file may have (a deployed config, not a data set).
MAX_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class _Cached:
    stamp: tuple[int, int, int]  # mtime_ns, size, inode
    document: object
    mtime: datetime


_lock = threading.Lock()
_cache: dict[str, _Cached] = {}
_reads: Counter[str] = Counter()


def reads(path: str | os.PathLike[str]) -> int:
    """How many times this process read and parsed ``path`` (not served from the cache)."""
    with _lock:
        return _reads[os.fspath(path)]


def subject_path(template: str, name: str) -> str:
    """The path template with ``{subject}`` replaced by ``name``; ``OSError`` when the
    server confines file sources (``CAVEAT_SOURCE_FILES``) and the path resolves
    outside that directory (``..`` and symbolic links included)."""
    path = template.replace("{subject}", name)
    root = Settings().source_files
    if root is not None and not Path(path).resolve().is_relative_to(root.resolve()):
        raise PermissionError(f"{path} is outside the directory file sources may read")
    return path


def _syntax(path: str) -> str | None:
    suffix = Path(path).suffix.lower()
    return {".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(suffix)


def read_document(path: str) -> tuple[object, datetime]:
    """The parsed document at ``path`` and its modification time, from the cache while
    the file is unchanged; ``OSError`` or ``DocumentError`` when it cannot be read."""
    st = os.stat(path)
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    with _lock:
        cached = _cache.get(path)
    if cached is not None and cached.stamp == stamp:
        return cached.document, cached.mtime
    if st.st_size > MAX_BYTES:
        raise DocumentError(f"{path} has {st.st_size} bytes, more than {MAX_BYTES}", source=path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    document = factgen.load_document(text, source=path, syntax=_syntax(path)).data
    mtime = datetime.fromtimestamp(st.st_mtime_ns / 1e9, UTC)
    with _lock:
        _cache[path] = _Cached(stamp, document, mtime)
        _reads[path] += 1
    return document, mtime


def fetch_subject(
    spec: factgen.SourceSpec,
    name: str,
    attributes: tuple[factgen.SourceAttribute, ...],
    world: factgen.World,
    now: datetime | None = None,
) -> Part:
    """One subject's file, its attributes mapped, observed ``now`` (default: the wall
    clock); its error is the part's."""
    path = spec.path or ""
    try:
        path = subject_path(path, name)
        document, mtime = read_document(path)
    except (OSError, UnicodeDecodeError, DocumentError) as exc:
        if isinstance(exc, DocumentError):
            reason = f"{exc}"  # the path with the line and column of the problem
        else:
            reason = f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}"
        return Part.failed([a.attribute for a in attributes], f"{name}: {reason}")
    return document_part(
        world,
        spec,
        name=name,
        document=document,
        attributes=attributes,
        now=now,
        provenance={"kind": KIND, "path": path, "modified_at": mtime.isoformat()},
    )


def fetches(
    spec: factgen.SourceSpec,
    world: factgen.World,
    wanted: Mapping[str, frozenset[str]] | None,
    transport: Transport,
    now: datetime | None = None,
) -> list[tuple[tuple[str, ...], Callable[[float], Part]]]:
    """One read per listed subject (in a refresh, per subject needed); the timeout does
    not apply to a local read."""
    return subject_fetches(
        spec,
        world,
        wanted,
        lambda name, attrs, _timeout: fetch_subject(spec, name, attrs, world, now),
    )
