"""Benchmarks: ``python -m bench NAME`` runs ``bench/bench_NAME.py`` (see docs/performance.md)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from caveat import db

__all__ = ["bench_database"]


@contextmanager
def bench_database() -> Iterator[str]:
    """A fresh, empty database on ``DATABASE_URL`` or a throwaway embedded server."""
    with (
        db.temporary_server(os.environ.get("DATABASE_URL")) as server_url,
        db.with_database(server_url, prefix="caveat_bench") as url,
    ):
        yield url
