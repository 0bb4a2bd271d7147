"""A closed case's outcome moves the confidence of each item it cited (model §4.2).

When a case closes, each citation gets its signal (``support`` for ``confirmed``,
``counter`` for ``rejected``: ``lifecycle._cases``) and, here, the cited item gets an
evidence link of source kind ``citation`` (``lifecycle._confidence``): it
``supports`` the item on a support signal and ``refutes`` it on a counter signal,
with the strength of the citation's influence (``CITATION_STRENGTH``), so the item's
confidence moves and its history says which case moved it and how. The link's
evidence id is ``case:<id>``; its audit row is an ``attach_evidence`` row of the
lifecycle (``SYSTEM_ACTOR``) naming the case, its outcome, the influence, the
compliance and who closed the case.

No link is attached for:

- an ``ignored`` citation (strength 0: the item played no part in the outcome);
- a skill that was **not followed** (compliance ``discretion`` or ``violation``):
  the outcome of a case that did something else says nothing of the procedure,
  neither that it works nor that it fails (the citation still records the
  deviation, and a counter signal on a decisive or contributing citation still
  re-opens the item: that rule is the model's, a reason to look);
- a redacted item (it is answered as never written).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import Any

from sqlalchemy.orm import Session

from lifecycle._confidence import Attachment, fold_link
from lifecycle._states import SYSTEM_ACTOR

__all__ = ["CITATION_STRENGTH", "citation_evidence", "outcome_link"]

#: Influence -> strength of the evidence link a closed case gives the cited item
#: (times the ``citation`` source kind's weight, 0.6: a decisive citation of a
#: confirmed case adds 0.3 to the item's raw score, a human confirmation 1.0).
CITATION_STRENGTH: Mapping[str, float] = MappingProxyType(
    {"decisive": 0.5, "contributing": 0.3, "considered": 0.1, "ignored": 0.0}
)
#: Compliances of a skill that was not followed: its case's outcome says nothing of it.
_NOT_FOLLOWED = frozenset({"discretion", "violation"})


def outcome_link(signal: str, influence: str, compliance: str) -> tuple[str, float] | None:
    """The ``(stance, strength)`` a citation's signal gives its item, or ``None`` when it
    gives none (pure)."""
    strength = CITATION_STRENGTH[influence]
    if strength <= 0.0 or compliance in _NOT_FOLLOWED:
        return None
    return ("supports" if signal == "support" else "refutes", strength)


def citation_evidence(
    *,
    session: Session,
    tenant: str,
    case_id: str,
    outcome: str,
    signal: str,
    cited: Sequence[Any],
    closed_by: str,
    now: datetime,
) -> dict[int, Attachment]:
    """Attach, for each cited row (``item_id, influence, compliance, recorded_at,
    redacted``: ``signal_citations``), the link its signal gives, by item id."""
    done: dict[int, Attachment] = {}
    for row in cited:
        link = outcome_link(signal, str(row.influence), str(row.compliance))
        if link is None or row.redacted:
            continue
        stance, strength = link
        done[int(row.item_id)] = fold_link(
            session=session,
            tenant=tenant,
            item_id=int(row.item_id),
            recorded_at=row.recorded_at,
            evidence_id=f"case:{case_id}",
            stance=stance,
            strength=strength,
            source_kind="citation",
            actor=SYSTEM_ACTOR,
            now=now,
            detail={
                "case": case_id,
                "outcome": outcome,
                "influence": str(row.influence),
                "compliance": str(row.compliance),
                "closed_by": closed_by,
            },
        )
    return done
