"""What ``caveat serve`` does between requests: drain the embedding queue and run the
TTL sweep, for every tenant a request has authenticated into.

The server logs in as ``caveat_app``, which row-level security keeps from listing
tenants, so it works for the tenants it has seen (``touch``); a tenant nobody has
called is drained by ``caveat embed`` or at its first request.
"""

from __future__ import annotations

import logging
import threading

from caveat import app as use

__all__ = ["Background"]

_log = logging.getLogger("caveat.serve")


class Background:
    """A daemon thread that, every ``interval`` seconds, embeds what waits in each seen
    tenant's queue and sweeps it (as the local admin: the sweep is the system's)."""

    def __init__(self, runtime: use.Runtime, interval: float = 5.0) -> None:
        self.runtime = runtime
        self.interval = interval
        self._tenants: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.rounds = 0

    def touch(self, tenant: str) -> None:
        """A request authenticated into ``tenant``: look after it from now on."""
        with self._lock:
            self._tenants.add(tenant)

    def tenants(self) -> set[str]:
        """The tenants seen so far."""
        with self._lock:
            return set(self._tenants)

    def run_once(self) -> None:
        """One round: drain and sweep every seen tenant; a failure is logged, never fatal."""
        with self._lock:
            tenants = sorted(self._tenants)
        for tenant in tenants:
            rt = self.runtime.for_tenant(tenant)
            try:
                rt.embed_pending()
                use.sweep(rt, use.LOCAL_ADMIN)
            except Exception:  # the next round tries again
                _log.exception("background round failed for tenant %s", tenant)
        self.rounds += 1

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.run_once()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="caveat-bg", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
