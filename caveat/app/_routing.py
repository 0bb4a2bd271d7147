"""Read routing to a replica (docs/scaling.md): the consistency token, and which server
served each read.

Recall and the context guard's read go to the replica only when it is proven fresh for
the tenant: its copy of the tenant's withdrawal horizon has the primary's value (it has
replayed the latest withdrawal) and its replay position has passed the caller's token,
if one was given. Everything else, recording included, is the primary's.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable
from contextvars import ContextVar

from predicates.errors import InputError

__all__ = ["ReadRoutes", "parse_token", "served_by"]

#: A WAL position as PostgreSQL prints one (``pg_lsn``): two hex words.
_LSN = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")

#: Which server answered this context's last routed read (``primary`` or ``replica``).
_SERVED_BY: ContextVar[str | None] = ContextVar("caveat_served_by", default=None)


def parse_token(token: str | None) -> str | None:
    """A consistency token as given back by a caller (None or empty: none); anything but
    a WAL position is ``invalid_input``."""
    if token is None or token == "":
        return None
    if not _LSN.fullmatch(token):
        raise InputError(
            "a consistency token is the WAL position a write returned, such as 0/3018AD0",
            token=token[:40],
        )
    return token.upper()


def served_by() -> str | None:
    """``primary`` or ``replica``: who served the last recall or context check made in
    this context (a request's thread), None if none was."""
    return _SERVED_BY.get()


class ReadRoutes:
    """Running totals of routed reads, by server and reason (thread-safe): ``replica``
    with ``fresh``; ``primary`` with ``no_replica``, ``horizon`` (a withdrawal not
    replayed yet), ``token`` (the caller's token not replayed yet), ``not_in_recovery``,
    ``replica_failed`` (unreachable, or the read failed there), ``not_found`` (the
    replica has no such case yet: the primary answers for it) or ``records`` (the guard
    had something to record, which the primary does and answers)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        #: called with ``(server, reason)`` for each read counted (a server's metrics)
        self.listeners: list[Callable[[str, str], None]] = []

    def served(self, server: str, reason: str) -> None:
        """Count one read served by ``server`` for ``reason``; remember it for the context."""
        with self._lock:
            self._counts[(server, reason)] += 1
        _SERVED_BY.set(server)
        for listener in self.listeners:
            listener(server, reason)

    def counts(self) -> dict[tuple[str, str], int]:
        """``(server, reason) -> reads`` so far."""
        with self._lock:
            return dict(self._counts)
