"""``caveat serve --workers N``: N server processes on one port (uvicorn's workers).

The parent starts (or attaches to) the database once, migrating the embedded one as a
single server does, and makes a directory for the workers' metrics
(``PROMETHEUS_MULTIPROC_DIR``, removed when it stops). Each worker is a process of its
own, started by uvicorn, that builds its runtime from the same settings
(``worker_app``): its engine and connection pool, its cached world (kept coherent by
the world version every transaction checks), its embedder, and its background threads.
No two workers run one tenant's background round at once (``Background.run_once``
takes the tenant's advisory lock, and a worker that finds it held leaves the round to
the holder); a due fact source is pulled by one worker (its own lock). ``/metrics``
answers with the sum of every worker's metrics. On SIGINT or SIGTERM uvicorn stops
accepting, lets requests in flight finish (at most ``GRACE`` seconds), then each
worker stops its background and closes its runtime.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import FastAPI

from predicates.errors import InputError

if TYPE_CHECKING:
    from caveat.settings import Settings

__all__ = ["GRACE", "Pools", "pools_for", "serve_workers", "worker_app"]

#: Seconds uvicorn lets requests in flight finish on shutdown.
GRACE = 30
#: The background interval a worker takes from its parent.
_EVERY = "CAVEAT_SERVE_EVERY"


def worker_app() -> FastAPI:
    """One worker's app (uvicorn's factory): a runtime of its own from the settings, the
    database the parent resolved, the background every ``CAVEAT_SERVE_EVERY`` seconds;
    the runtime is closed when the app shuts down."""
    from caveat.api import create_app
    from caveat.app import open_runtime

    stack = ExitStack()
    runtime = stack.enter_context(open_runtime(embedder="settings"))
    try:
        return create_app(
            runtime, background=float(os.environ.get(_EVERY, "5")), on_close=stack.close
        )
    except BaseException:
        stack.close()
        raise


#: Connections left to everything but the workers: the parent, the CLI, a backup,
#: migrations, an operator's psql.
SPARE_CONNECTIONS = 10


@dataclass(frozen=True)
class Pools:
    """Each worker's pool: connections kept open, and more opened under a burst."""

    size: int
    overflow: int


def pools_for(*, usable: int, workers: int, size: int, overflow: int) -> Pools:
    """Each of ``workers`` pools, at most ``size`` + ``overflow`` connections, so that all
    of them together, at their fullest, stay within ``usable`` connections less
    ``SPARE_CONNECTIONS``: the overflow gives way first, then the kept connections.
    ``InputError`` when the workers cannot have two connections each."""
    share = (usable - SPARE_CONNECTIONS) // workers
    if share < 2:
        raise InputError(
            f"{workers} workers need at least {2 * workers + SPARE_CONNECTIONS} connections;"
            f" the server allows {usable} to the application: lower --workers or raise"
            " PostgreSQL's max_connections",
            attribute="workers",
        )
    kept = min(size, share)
    return Pools(kept, max(0, min(overflow, share - kept)))


def serve_workers(
    *, url: str, settings: Settings, host: str, port: int, workers: int, every: float
) -> None:
    """Serve with ``workers`` processes on ``host:port`` over the database at ``url``
    (already started and migrated by the caller, whose ``settings`` size the pools),
    until interrupted; each worker's pool sized so that all of them fit the server's
    connections (``pools_for``)."""
    import uvicorn

    from caveat import db

    pools = pools_for(
        usable=db.usable_connections(url),
        workers=workers,
        size=settings.pool_size,
        overflow=settings.pool_overflow,
    )
    with tempfile.TemporaryDirectory(prefix="caveat-metrics-") as metrics:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics
        os.environ[_EVERY] = str(every)
        os.environ["DATABASE_URL"] = url  # the workers attach to it, never start another
        os.environ["CAVEAT_POOL_SIZE"] = str(pools.size)
        os.environ["CAVEAT_POOL_OVERFLOW"] = str(pools.overflow)
        uvicorn.run(
            "caveat.api._workers:worker_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            timeout_graceful_shutdown=GRACE,
            log_level="info",
        )
