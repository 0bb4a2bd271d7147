"""The audit log: append-only, hash-chained per tenant (model §7)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, NamedTuple

from psycopg.types.json import Jsonb as _Jsonb
from sqlalchemy.orm import Session

from claims import _queries as q
from claims._access import Actor
from predicates.errors import InputError

__all__ = [
    "ERASURE_ACTION",
    "GENESIS",
    "AuditEntryRecord",
    "AuditReport",
    "PendingAudit",
    "append",
    "append_many",
    "audit_entries",
    "detail_digest",
    "entry_hash",
    "erase_details",
    "verify_chain",
]

GENESIS = "0" * 64
_str = json.encoder.encode_basestring_ascii  # json.dumps of one str, in C


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _as_jsonb_reads_it(text: str) -> int | float:
    """A JSON number as it comes back from jsonb: ``1e+16`` is stored as the numeric
    10000000000000000 and read back as an int, so it is hashed as one; ``-0.0`` is
    stored as the numeric 0.0 (numeric has no negative zero), so it is hashed as
    ``0.0``."""
    if "e" in text or "E" in text:
        exact = Decimal(text)
        if exact == exact.to_integral_value():
            return int(exact)
    value = float(text)
    return 0.0 if value == 0 else value


#: How a NUL byte (which PostgreSQL text and jsonb cannot hold) is written in an audit
#: detail: a refused request that carried one is still recorded, the byte spelled out.
NUL_SHOWN_AS = "\\x00"
#: A lone surrogate (jsonb refuses its escape, "\ud800") is spelled out the same way.
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE = re.compile(r"\\ud[89a-f]")


def _normalised(detail: dict[str, Any] | None) -> tuple[dict[str, Any], str]:
    """The detail as it reads back from jsonb, and its canonical text."""
    text = _canonical(detail or {})
    if "\\u0000" in text or _ESCAPED_SURROGATE.search(text):
        text = _canonical(_nul_shown(json.loads(text)))
    loaded: dict[str, Any] = json.loads(text, parse_float=_as_jsonb_reads_it)
    return loaded, _canonical(loaded)


def _nul_shown(value: Any) -> Any:
    if isinstance(value, str):
        value = value.replace("\x00", NUL_SHOWN_AS)
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", value)
    if isinstance(value, dict):
        return {_nul_shown(k): _nul_shown(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nul_shown(v) for v in value]
    return value


def detail_digest(detail: dict[str, Any] | None) -> str:
    """SHA-256 of a detail's canonical JSON (as it reads back from jsonb): what the chain
    hashes in place of the detail, so that an erased detail (``forget``) leaves the
    chain whole. The row keeps it (``detail_digest``) and the verifier checks it
    against the detail while the detail is there."""
    return _sha(_normalised(detail)[1])


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _digest(
    prev_hash: str,
    tenant: str,
    seq: int,
    at: datetime,
    actor: str,
    action: str,
    item_id: int | None,
    code: str | None,
    digest: str,
) -> str:
    # the canonical JSON of [tenant, seq, at, actor, action, item_id, code, detail_digest]
    body = ",".join(
        (
            "[" + _str(tenant),
            str(seq),
            _str(at.isoformat(timespec="microseconds")),
            _str(actor),
            _str(action),
            "null" if item_id is None else str(item_id),
            "null" if code is None else _str(code),
            _str(digest) + "]",
        )
    )
    return hashlib.sha256(f"{prev_hash}|{body}".encode()).hexdigest()


def entry_hash(
    *,
    prev_hash: str,
    tenant: str,
    seq: int,
    at: datetime,
    actor: str,
    action: str,
    item_id: int | None,
    code: str | None,
    detail: dict[str, Any] | None = None,
    digest: str | None = None,
) -> str:
    """SHA-256 over the previous hash and every structural field of the row, with the
    digest of its detail (``detail_digest``) in place of the detail, canonically encoded.

    The body is the canonical JSON of ``[tenant, seq, at, actor, action,
    item_id, code, detail_digest]`` (sorted keys, no spaces; migration 0023). The
    structural fields (who, what, which item, which code, when, where in the chain)
    are never erased; the detail (reasons, rationales, requests, objects) is the
    erasable part. Pass ``digest`` for a row whose detail was erased.
    """
    if digest is None:
        digest = detail_digest(detail)
    return _digest(prev_hash, tenant, seq, at, actor, action, item_id, code, digest)


class PendingAudit(NamedTuple):
    """One audit row to append: who did what to which item, with what code and detail."""

    actor: str
    action: str
    item_id: int | None = None
    code: str | None = None
    detail: dict[str, Any] | None = None


def append_many(
    *, session: Session, tenant: str, at: datetime, rows: Sequence[PendingAudit]
) -> list[int]:
    """Append ``rows`` in order to the tenant's chain, all at ``at``; returns their seqs.

    The chain head on the tenant row is locked once (appends are serialised
    per tenant) and moved once. A few rows go in with one pipelined INSERT;
    more with a binary ``COPY``, streamed: the server stores rows while the
    next ones are hashed. Where row-level security binds the session's user (the
    application role, which may not ``COPY`` there), more go in as runs of
    ``_RUN`` rows through ``caveat_append_audit`` (migration 0014), pipelined the
    same way; the tenant is then the transaction's ``caveat.tenant``.
    """
    if not rows:
        return []
    at = at.astimezone(UTC)
    head_seq, head_hash = q.lock_audit_head(session=session, tenant=tenant)
    chain = _Chain(tenant, at, head_seq, head_hash or GENESIS)
    if len(rows) < _STREAM_FROM:
        out = [chain.row(r) for r in rows]
        q.copy_rows(session=session, table="audit_log", columns=q.AUDIT_COPY_COLUMNS, rows=out)
    elif q.row_security_active(session=session, table="audit_log"):
        q.append_audit_runs(session=session, runs=chain.runs(rows, _RUN))
    else:
        q.copy_binary(
            session=session,
            table="audit_log",
            columns=q.AUDIT_COPY_COLUMNS,
            types=q.AUDIT_COPY_TYPES,
            rows=(chain.row(r, json=Jsonb) for r in rows),
        )
    q.set_audit_head(session=session, tenant=tenant, seq=chain.seq, digest=chain.prev)
    return list(range(head_seq + 1, chain.seq + 1))


_STREAM_FROM = 64
#: Rows per call of ``caveat_append_audit``: large enough that a call's overhead
#: vanishes, small enough that the server stores one run while the next is hashed and
#: that little is left to store once the last row is hashed (a 100,001-row revocation's
#: append, alternating, medians of 4: 0.89 s in runs of 2,500, 1.06 s in runs of
#: 10,000, 0.94 s by the owner's COPY).
_RUN = 2_500


def _as_is(text: str) -> str:
    return text


class Jsonb(_Jsonb):
    """A detail's canonical JSON text, sent as jsonb as it is (not encoded again)."""

    def __init__(self, text: str) -> None:
        super().__init__(text, dumps=_as_is)


class _Chain:
    """Extends a tenant's chain row by row, at one instant.

    The parts of a row's hashed body that do not change between rows with the
    same actor, action, code and detail object are encoded once; the body is
    the one ``entry_hash`` defines.
    """

    def __init__(self, tenant: str, at: datetime, seq: int, prev: str) -> None:
        self.tenant, self.at, self.seq, self.prev = tenant, at, seq, prev
        self._hash_tenant = "|[" + _str(tenant) + ","
        self._hash_at = "," + _str(at.isoformat(timespec="microseconds")) + ","
        self._parts: dict[tuple[str, str, str | None, int], tuple[str, str, Any, str]] = {}

    def _link(
        self, row: PendingAudit, json: Callable[[str], Any]
    ) -> tuple[tuple[str, str, Any, str], str]:
        """Extend the chain by ``row``: its shared parts (one object per actor, action,
        code and detail object; then the detail as ``json`` wraps its canonical text,
        and the detail's digest) and the hash it links to; ``self.prev`` is then its
        own hash."""
        key = (row.actor, row.action, row.code, id(row.detail))
        parts = self._parts.get(key)
        if parts is None:
            text = _normalised(row.detail)[1]
            digest = _sha(text)
            parts = self._parts[key] = (
                self._hash_at + _str(row.actor) + "," + _str(row.action) + ",",
                "," + ("null" if row.code is None else _str(row.code)) + "," + _str(digest) + "]",
                json(text),
                digest,
            )
        prev = self.prev
        self.seq += 1
        item = "null" if row.item_id is None else str(row.item_id)
        body = self._hash_tenant + str(self.seq) + parts[0] + item + parts[1]
        self.prev = hashlib.sha256((prev + body).encode()).hexdigest()
        return parts, prev

    def runs(self, rows: Sequence[PendingAudit], size: int) -> Iterator[q.AuditRun]:
        """The next rows as runs of at most ``size`` (``caveat_append_audit``'s form),
        each made as it is asked for."""
        for start in range(0, len(rows), size):
            seq, prev = self.seq + 1, self.prev
            kinds: dict[int, int] = {}
            listed: list[tuple[str, str, str | None, Any, str]] = []
            kind: list[int] = []
            items: list[int | None] = []
            hashes: list[str] = []
            for row in rows[start : start + size]:
                parts = self._link(row, Jsonb)[0]
                n = kinds.get(id(parts))
                if n is None:
                    listed.append((row.actor, row.action, row.code, parts[2], parts[3]))
                    n = kinds[id(parts)] = len(listed)
                kind.append(n)
                items.append(row.item_id)
                hashes.append(self.prev)
            yield q.AuditRun(seq, prev, self.at, listed, kind, items, hashes)

    def row(self, row: PendingAudit, json: Callable[[str], Any] = _as_is) -> tuple[Any, ...]:
        """The next row as column values (``AUDIT_COPY_COLUMNS``); ``json`` wraps the
        detail's canonical text (the same object for rows that share a detail)."""
        parts, prev = self._link(row, json)
        return (
            self.tenant,
            self.seq,
            self.at,
            row.actor,
            row.action,
            row.item_id,
            row.code,
            parts[2],
            parts[3],
            prev,
            self.prev,
        )


def append(
    *,
    session: Session,
    tenant: str,
    actor: str,
    action: str,
    at: datetime,
    item_id: int | None = None,
    code: str | None = None,
    detail: dict[str, Any] | None = None,
) -> int:
    """Append one row to the tenant's chain (serialised per tenant); returns its seq."""
    [seq] = append_many(
        session=session,
        tenant=tenant,
        at=at,
        rows=[PendingAudit(actor, action, item_id, code, detail)],
    )
    return seq


@dataclass(frozen=True)
class AuditReport:
    """The outcome of recomputing a tenant's chain; ``head`` is the last hash that held.

    Keep ``head`` somewhere the database owner cannot write (a ticket, a log
    shipper): a chain rewritten from scratch verifies, but ends elsewhere.
    ``erased`` counts the rows whose detail an erasure (``forget``) removed: each
    verified by its stored digest alone, and each named by a ``forget`` row.
    """

    ok: bool
    checked: int
    broken_at: int | None = None
    reason: str | None = None
    head: str | None = None
    erased: int = 0


#: The action of the audit row an erasure appends; its detail names the rows whose
#: detail it erased (``audit_rows``), and is itself never erased.
ERASURE_ACTION = "forget"


def verify_chain(*, session: Session, tenant: str) -> AuditReport:
    """Recompute the tenant's chain; report the first row that does not hold.

    Detects edited, deleted, reordered and truncated rows: every row must link
    to its predecessor's hash, carry the next seq, and hash to its own value,
    and the last row must be the head recorded on the tenant row. A row's hash
    covers the digest of its detail (``entry_hash``): a detail that is there must
    match its digest; a detail that is gone (erased by ``forget``) verifies by its
    digest alone, and must be one that a ``forget`` row of the chain names.
    """
    prev = GENESIS
    expected_seq = 1
    count = 0
    erased: list[int] = []
    named: set[int] = set()
    for row in q.audit_entries(session=session, tenant=tenant):
        count += 1
        if row.seq != expected_seq:
            return AuditReport(
                False, count, row.seq, f"seq {row.seq} where {expected_seq} due", prev
            )
        if row.prev_hash != prev:
            return AuditReport(False, count, row.seq, "link to the previous row is broken", prev)
        if row.detail is None:
            erased.append(row.seq)
        elif (
            _sha(_canonical(row.detail)) != row.detail_digest  # as read back, it is normal
            and detail_digest(row.detail) != row.detail_digest
        ):
            return AuditReport(False, count, row.seq, "row detail does not match its digest", prev)
        elif row.action == ERASURE_ACTION:
            named.update(int(s) for s in row.detail.get("audit_rows") or ())
        digest = _digest(
            prev,
            tenant,
            row.seq,
            row.at,
            row.actor,
            row.action,
            row.item_id,
            row.code,
            row.detail_digest or "",
        )
        if digest != row.hash:
            return AuditReport(False, count, row.seq, "row content does not match its hash", prev)
        prev = row.hash
        expected_seq += 1
    head_seq, head_hash = q.audit_head(session=session, tenant=tenant)
    if head_seq != count or (head_hash or GENESIS) != prev:
        return AuditReport(
            False,
            count,
            count + 1,
            f"the chain ends at {count}, its head says {head_seq}",
            prev,
        )
    stray = [s for s in erased if s not in named]
    if stray:
        return AuditReport(
            False, count, stray[0], "row detail erased outside any erasure", prev, len(erased)
        )
    return AuditReport(True, count, head=None if count == 0 else prev, erased=len(erased))


def erase_details(*, session: Session, tenant: str, erasure: int, seqs: Sequence[int]) -> int:
    """Erase the detail of the tenant's audit rows ``seqs``, under the erasure record
    ``erasure``; the rows and their digests stay, so the chain
    verifies. The ``forget`` row that names them (``audit_rows``) is the caller's to
    append, in the same transaction. Returns how many details were erased."""
    if not seqs:
        return 0
    return q.erase_audit_details(session=session, tenant=tenant, erasure=erasure, seqs=seqs)


@dataclass(frozen=True)
class AuditEntryRecord:
    """One audit row as stored."""

    seq: int
    at: datetime
    actor: str
    action: str
    item_id: int | None
    code: str | None
    detail: dict[str, Any]
    hash: str
    #: The detail was erased (``forget``): ``detail`` is empty, the digest stays.
    erased: bool = False


def audit_entries(
    *,
    session: Session,
    tenant: str,
    item_id: int | None = None,
    actor: str | None = None,
    code: str | None = None,
    action: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int | None = None,
    after: int | None = None,
    reader: Actor | None = None,
) -> list[AuditEntryRecord]:
    """The tenant's audit rows in chain order, filtered; ``since`` inclusive, ``until`` not.

    With ``limit``, the last ``limit`` matching rows (still in chain order). With
    ``after`` (a chain position, ``0`` for the start), a keyset page instead: the first
    ``limit`` matching rows whose ``seq`` is past ``after`` (``since``/``until`` are not
    taken with it).

    With a ``reader``, only the rows it may see (docs/reliability.md, section 2): all
    of them for an admin (the store's operator); for an SME, none about an item it may
    not read (evidence it does not hold, or redacted) and no ``contested`` row naming
    one; for an agent, the same and only its own rows. Without one (the domain's own
    reads, the chain's verification), every row.
    """
    seen = q.AuditReader()
    if reader is not None and reader.role != "admin":
        seen = q.AuditReader(
            everything=False,
            capabilities=tuple(sorted(reader.capabilities)),
            own=reader.id if reader.role == "agent" else None,
            deny_keys=tuple(reader.deny_keys),
            cleared=reader.cleared,
            reader=reader.id,
        )
    if after is not None:
        if limit is None or since is not None or until is not None:
            raise InputError("a keyset page takes a limit and no since/until", attribute="after")
        rows = q.audit_page(
            session=session,
            tenant=tenant,
            after=after,
            limit=limit,
            item_id=item_id,
            actor=actor,
            code=code,
            action=action,
            reader=seen,
        )
    else:
        rows = q.audit_entries(
            session=session,
            tenant=tenant,
            item_id=item_id,
            actor=actor,
            code=code,
            action=action,
            since=since,
            until=until,
            limit=limit,
            reader=seen,
        )
    return [
        AuditEntryRecord(
            int(r.seq),
            r.at,
            r.actor,
            r.action,
            r.item_id,
            r.code,
            dict(r.detail or {}),
            r.hash,
            r.detail is None,
        )
        for r in rows
    ]
