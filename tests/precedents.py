"""An active precedent written through the application layer, for the tests and the
bench that recall against live sources (tests/connectors, bench/bench_refresh.py)."""

from __future__ import annotations

import claims
import factgen
from caveat import app as use


def active_episode(
    rt: use.Runtime,
    actor: factgen.Actor,
    service: str,
    required: list[str],
    *,
    text: str | None = None,
    case: str | None = None,
    evidence: str = "E-1",
) -> int:
    """An episode about ``service`` (``restart_restored_service_at`` ``evidence``, cited
    as its evidence) whose conditions are ``required``, written in case ``case``
    (default ``INC-<service>``, opened here) and promoted through shadow to active; its
    item id, all done as ``actor``. ``text`` defaults to a pool exhausted that a restart
    restored."""
    case = case or f"INC-{service}"
    use.open_case(rt, actor, case, subjects=[service])
    written = use.write(
        rt,
        actor,
        claims.ItemWrite.model_validate(
            {
                "kind": "episode",
                "subject": service,
                "attribute": "restart_restored_service_at",
                "object": evidence,
                "required": required,
                "evidence": [evidence],
                "scope": {"axis": "case", "id": case},
                "text": text or f"{service}: connection pool exhausted; a restart restored it.",
            }
        ),
    )
    assert written.item_id is not None
    use.promote(rt, actor, written.item_id, to="shadow")
    use.promote(rt, actor, written.item_id, to="active")
    return written.item_id
