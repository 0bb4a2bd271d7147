"""What ``caveat serve`` does between requests: drain the embedding queue, run the TTL
sweep, and pull the fact sources that are due, for the settings' default tenant from
the start and every tenant a request has authenticated into.

The server logs in as ``caveat_app``, which row-level security keeps from listing
tenants, so it works for the tenants it knows: the default one (``CAVEAT_TENANT``, a
server whose sources were loaded with the CLI pulls them without waiting for a
request) and those it has seen (``touch``); another tenant nobody has called is
drained by ``caveat embed`` and pulled by ``caveat sources pull`` or at its first
request.

Scheduled pulls (docs/sources.md, "Scheduled pulls"): each round reads which sources
are due (``caveat.app.due_sources``: ``every``, jittered, backed off after failures),
takes a PostgreSQL session-level advisory lock per due source (``pg_try_advisory_lock``
on a key derived from the tenant and the source) on a connection of its own in
autocommit, so no transaction is open while the connector waits on the network; reads
again which of the locked sources are still due (another worker may have pulled one
and released its lock in between), pulls those, and releases the locks. However many
workers or replicas serve one database, a due source is pulled once.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from datetime import datetime

from caveat import _queries as q
from caveat import app as use
from caveat import connectors
from predicates.errors import NotFound

__all__ = ["Background", "lock_key"]

_log = logging.getLogger("caveat.serve")


def lock_key(tenant: str, source: str) -> int:
    """The advisory lock of one source of one tenant: a signed 64-bit key from a hash of
    both (the same in every process)."""
    digest = hashlib.blake2b(
        f"caveat-source-pull\0{tenant}\0{source}".encode(), digest_size=8
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


class Background:
    """Daemon threads: every ``interval`` seconds, embed what waits in each known tenant's
    queue and sweep it (as the local admin: the sweep is the system's); every ``tick``
    seconds (at most ``interval``), pull each known tenant's due sources."""

    def __init__(
        self,
        runtime: use.Runtime,
        interval: float = 5.0,
        *,
        puller: use.Puller = connectors.pull_sources,
        tick: float = 1.0,
    ) -> None:
        self.runtime = runtime
        self.interval = interval
        self.tick = min(tick, interval)
        self.puller = puller
        self._tenants: set[str] = {runtime.tenant}  # the settings' default tenant
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.rounds = 0
        self.pull_rounds = 0

    def touch(self, tenant: str) -> None:
        """A request authenticated into ``tenant``: look after it from now on."""
        with self._lock:
            self._tenants.add(tenant)

    def tenants(self) -> set[str]:
        """The tenants known so far."""
        with self._lock:
            return set(self._tenants)

    def run_once(self) -> None:
        """One round: drain and sweep every known tenant; a failure is logged, never fatal."""
        for tenant in sorted(self.tenants()):
            rt = self.runtime.for_tenant(tenant)
            try:
                rt.embed_pending()
                use.sweep(rt, use.LOCAL_ADMIN)
            except NotFound:  # the default tenant, before its schema is loaded
                _log.debug("tenant %s does not exist yet", tenant)
            except Exception:  # the next round tries again
                _log.exception("background round failed for tenant %s", tenant)
        self.rounds += 1

    def pull_due(self, now: datetime | None = None) -> list[use.PullOutcome]:
        """One pull round: every known tenant's due sources, each pulled by one worker
        however many run (the advisory lock); a failure is logged, never fatal."""
        done: list[use.PullOutcome] = []
        for tenant in sorted(self.tenants()):
            try:
                done += self._pull_tenant(self.runtime.for_tenant(tenant), now)
            except Exception:  # a store that went away: the next round tries again
                _log.exception("scheduled pull failed for tenant %s", tenant)
        self.pull_rounds += 1
        return done

    def _pull_tenant(self, rt: use.Runtime, now: datetime | None) -> list[use.PullOutcome]:
        due = use.due_sources(rt, now=now)
        if not due:
            return []
        with use.mapped(), rt.engine.connect() as conn:
            auto = conn.execution_options(isolation_level="AUTOCOMMIT")
            held: list[int] = []
            try:
                names = []
                for name in due:
                    key = lock_key(rt.tenant, name)
                    if q.try_advisory_lock(connection=auto, key=key):
                        held.append(key)
                        names.append(name)
                # read again under the locks: a worker that pulled one of them since
                # released its lock after its pull committed
                still = set(use.due_sources(rt, now=now)) if names else set()
                names = [n for n in names if n in still]
                outcomes = self.puller(rt, names, now=now) if names else []
            finally:
                try:
                    for key in held:
                        q.advisory_unlock(connection=auto, key=key)
                except Exception:  # the connection broke: its locks went with it
                    conn.invalidate()
                    raise
        for outcome in outcomes:
            if outcome.error is not None:
                _log.warning("source %s of %s: %s", outcome.source, rt.tenant, outcome.error)
        return outcomes

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.run_once()

    def _pull_loop(self) -> None:
        while not self._stop.wait(self.tick):
            self.pull_due()

    def start(self) -> None:
        if not self._threads:
            self._stop.clear()
            self._threads = [
                threading.Thread(target=self._loop, name="caveat-bg", daemon=True),
                threading.Thread(target=self._pull_loop, name="caveat-pull", daemon=True),
            ]
            for thread in self._threads:
                thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=70)  # a pull in flight ends within its source's timeout
        self._threads = []
