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

Turns for the server-side extractor (docs/proposals.md, "The server-side extractor"):
with ``CAVEAT_EXTRACTOR_URL`` set, a third thread runs every ``tick``: per known tenant,
under that tenant's extraction lock (``turns_key``), ``caveat.app.process_turns``
claims the due turns (``FOR UPDATE SKIP LOCKED``, each leased) and asks the model for
each with no transaction open.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

import claims
from caveat import _queries as q
from caveat import app as use
from caveat import connectors
from predicates.errors import NotFound

__all__ = ["Background", "lock_key", "round_key", "turns_key"]

_log = logging.getLogger("caveat.serve")


def _key(*parts: str) -> int:
    """A signed 64-bit advisory lock key from a hash of ``parts`` (the same in every
    process)."""
    digest = hashlib.blake2b("\0".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_key(tenant: str, source: str) -> int:
    """The advisory lock of one source of one tenant."""
    return _key("caveat-source-pull", tenant, source)


def round_key(tenant: str) -> int:
    """The advisory lock of one tenant's background round (drain and sweep): held by the
    one worker running it, so two workers never run the same tenant's round at once."""
    return _key("caveat-round", tenant)


def turns_key(tenant: str) -> int:
    """The advisory lock of one tenant's extraction round: one worker asks the model
    for that tenant's turns at a time (docs/proposals.md, "The server-side extractor")."""
    return _key("caveat-turns", tenant)


@contextmanager
def _locked(rt: use.Runtime, keys: Sequence[int]) -> Iterator[list[int]]:
    """The session-level advisory locks of ``keys`` that no other session holds, taken
    without waiting on a connection of its own in autocommit (no transaction stays open
    while the body waits on the network); released after the body. A connection whose
    release failed is discarded, and its locks go with it."""
    with rt.autocommit() as auto:
        held = [k for k in keys if q.try_advisory_lock(connection=auto, key=k)]
        try:
            yield held
        finally:
            try:
                for key in held:
                    q.advisory_unlock(connection=auto, key=key)
            except Exception:  # the connection broke: its locks went with it
                auto.invalidate()
                raise


class Background:
    """Daemon threads: every ``interval`` seconds, embed what waits in each known tenant's
    queue and sweep it (as the local admin: the sweep is the system's), and every
    ``chain_every`` seconds verify its audit chain (told to ``on_chain``); every ``tick``
    seconds (at most ``interval``), pull each known tenant's due sources."""

    def __init__(
        self,
        runtime: use.Runtime,
        interval: float = 5.0,
        *,
        puller: use.Puller = connectors.pull_sources,
        tick: float = 1.0,
        chain_every: float = 3600.0,
        on_chain: Callable[[str, claims.AuditReport], None] | None = None,
        extract: use.Extract | None = None,
        on_turn: Callable[[str, use.TurnDone], None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.interval = interval
        self.chain_every = chain_every
        self.on_chain = on_chain
        self._chain_at: dict[str, float] = {}  # when each tenant's chain was last verified
        self.tick = min(tick, interval)
        self.puller = puller
        self._tenants: set[str] = {runtime.tenant}  # the settings' default tenant
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.rounds = 0
        self.skipped = 0  # tenants' rounds left to another worker holding their lock
        self.pull_rounds = 0
        self.extract = extract  # None: no extractor configured, no extraction thread
        self.on_turn = on_turn
        self.turn_rounds = 0

    def touch(self, tenant: str) -> None:
        """A request authenticated into ``tenant``: look after it from now on."""
        with self._lock:
            self._tenants.add(tenant)

    def tenants(self) -> set[str]:
        """The tenants known so far."""
        with self._lock:
            return set(self._tenants)

    def run_once(self) -> None:
        """One round: drain and sweep every known tenant whose round no other worker is
        running (its advisory lock, taken without waiting on a connection of its own:
        a tenant whose lock is held is left to the holder and counted in ``skipped``); a
        failure is logged, never fatal."""
        for tenant in sorted(self.tenants()):
            rt = self.runtime.for_tenant(tenant)
            try:
                with _locked(rt, [round_key(tenant)]) as held:
                    if not held:
                        self.skipped += 1
                        continue
                    rt.embed_pending()
                    use.sweep(rt, use.LOCAL_ADMIN)
                    self._verify_chain(rt)
            except NotFound:  # the default tenant, before its schema is loaded
                _log.debug("tenant %s does not exist yet", tenant)
            except Exception:  # the next round tries again
                _log.exception("background round failed for tenant %s", tenant)
        self.rounds += 1

    def _verify_chain(self, rt: use.Runtime) -> None:
        """Verify the tenant's audit chain when ``chain_every`` has passed since this
        worker last did (at once for a tenant it has not verified yet)."""
        last = self._chain_at.get(rt.tenant)
        if last is not None and time.monotonic() - last < self.chain_every:
            return
        report = use.audit_verify(rt, use.LOCAL_ADMIN)
        self._chain_at[rt.tenant] = time.monotonic()
        if not report.ok:
            _log.error("audit chain of %s broken at %s: %s", rt.tenant, report.broken_at,
                       report.reason)  # fmt: skip
        if self.on_chain is not None:
            self.on_chain(rt.tenant, report)

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
        keys = {lock_key(rt.tenant, name): name for name in due}
        with _locked(rt, list(keys)) as held:
            names = [keys[k] for k in held]
            # read again under the locks: a worker that pulled one of them since
            # released its lock after its pull committed
            still = set(use.due_sources(rt, now=now)) if names else set()
            names = [n for n in names if n in still]
            outcomes = self.puller(rt, names, now=now) if names else []
        for outcome in outcomes:
            if outcome.error is not None:
                _log.warning("source %s of %s: %s", outcome.source, rt.tenant, outcome.error)
        return outcomes

    def process_turns(self) -> list[use.TurnDone]:
        """One extraction round: every known tenant's due turns, by one worker at a time
        per tenant (its advisory lock, held while the model answers on a connection in
        autocommit, so no transaction stays open); each outcome is told to ``on_turn``;
        a failure is logged, never fatal."""
        done: list[use.TurnDone] = []
        if self.extract is None:
            return done
        for tenant in sorted(self.tenants()):
            rt = self.runtime.for_tenant(tenant)
            try:
                with _locked(rt, [turns_key(tenant)]) as held:
                    if not held:
                        continue
                    outcomes = use.process_turns(rt, use.LOCAL_ADMIN, extract=self.extract)
            except Exception:  # a store that went away: the next round tries again
                _log.exception("extraction round failed for tenant %s", tenant)
                continue
            for outcome in outcomes:
                if outcome.outcome in ("retried", "failed"):
                    _log.warning(
                        "turn %s of %s %s: %s",
                        outcome.turn_id,
                        tenant,
                        outcome.outcome,
                        outcome.error,
                    )
                if self.on_turn is not None:
                    self.on_turn(tenant, outcome)
            done += outcomes
        self.turn_rounds += 1
        return done

    def _turn_loop(self) -> None:
        while not self._stop.wait(self.tick):
            self.process_turns()

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
            if self.extract is not None:
                self._threads.append(
                    threading.Thread(target=self._turn_loop, name="caveat-turns", daemon=True)
                )
            for thread in self._threads:
                thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            # a pull in flight ends within its source's timeout, a call to the model
            # within the extractor's
            thread.join(timeout=max(70, self.runtime.settings.extractor_timeout + 10))
        self._threads = []
