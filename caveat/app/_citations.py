"""The use cases of citations and enforcement levels (docs/lifecycle.md, "Cases,
citations and demotion"): an SME's ``set_enforcement`` of a skill, and the listing of
citations (``list_citations``), keyset-paged by an opaque cursor that every door
hands back as it got it. ``cite`` itself is in ``_usecases``, with the case's other
use cases."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime

import lifecycle
from caveat.app._unit import Unit, usecase
from predicates.errors import InputError

__all__ = ["CitationListing", "list_citations", "set_enforcement"]


@usecase()
def set_enforcement(
    u: Unit, item_id: int, *, level: str, reason: str, now: datetime | None = None
) -> lifecycle.Enforcement:
    """An SME sets a skill's enforcement level (``advisory`` < ``recommended`` <
    ``required``) with a reason; one audit row. The skill binds (an unfollowed citation
    is a ``violation``) when its level reaches the tenant's
    ``skill_enforcement_threshold``."""
    return lifecycle.set_enforcement(**u.at(now), item_id=item_id, level=level, reason=reason)


@dataclass(frozen=True)
class CitationListing:
    """A page of citations, oldest first, and the cursor of the next (``None``: last)."""

    items: list[lifecycle.Citation]
    next: str | None


def _digest(filters: lifecycle.CitationFilter) -> str:
    """A digest of a listing's filters: a cursor is good only for the filters it came with."""
    text = json.dumps(asdict(filters), default=lambda v: v.isoformat(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cursor(key: lifecycle.CitationKey, filters: str) -> str:
    at, case_id, item_id = key
    raw = json.dumps({"at": at.isoformat(), "case": case_id, "item": item_id, "f": filters})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _after(cursor: str | None, filters: str) -> lifecycle.CitationKey | None:
    """The position a cursor encodes; ``invalid_input`` naming ``cursor`` for anything this
    layer did not give for the same filters."""
    if not cursor:
        return None
    try:
        seen = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        key = (datetime.fromisoformat(seen["at"]), seen["case"], seen["item"])
        ok = (
            seen["f"] == filters
            and key[0].tzinfo is not None
            and type(key[1]) is str
            and type(key[2]) is int
        )
    except (ValueError, KeyError, TypeError, binascii.Error):
        ok = False
    if not ok:
        raise InputError("cursor: not a cursor this API gave for these filters", attribute="cursor")
    return key


@usecase(require="read")
def list_citations(
    u: Unit,
    filters: lifecycle.CitationFilter | None = None,
    *,
    cursor: str | None = None,
    limit: int = 100,
) -> CitationListing:
    """Citations oldest first, kept by ``filters`` (case, item, influence, compliance, a
    range of when they were made), of the items the caller may read (what it may not
    read is neither listed nor counted); a page of ``limit`` past ``cursor``, with the
    cursor of the next page."""
    kept = filters or lifecycle.CitationFilter()
    digest = _digest(kept)

    def page(after: lifecycle.CitationKey | None, n: int) -> list[lifecycle.Citation]:
        return lifecycle.list_citations(**u.scope(), filters=kept, after=after, limit=n)

    rows = page(_after(cursor, digest), limit)
    # a full page has a next one when a row follows its last
    more = len(rows) == limit and bool(page(rows[-1].key, 1))
    return CitationListing(rows, _cursor(rows[-1].key, digest) if more else None)
