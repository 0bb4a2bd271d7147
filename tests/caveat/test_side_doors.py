"""Figure 2 of docs/reliability.md: no side doors.

A reader's answers in a world with items it may not read (evidence it may not read:
readers it does not hold, a deny list naming it or a capability of it, a level above
its clearance; redacted items; another principal's working memory, in the very session
the reader's recall names) must equal its answers in the same world without those items ever
written. Both worlds are built through the application layer on engines logged in as
``caveat_app``; ids differ between them, so every item id in an answer is replaced by
the item's text (unique per item) before the two answers are compared.

The write side: a ``derived_from`` id the writer may not read is answered as one that
never existed, and a collision with a row the writer may not read is the generic
``conflict`` of model.md §1.1, the message of a lost race, naming no row.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import networkx as nx
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import claims
import factgen
import recall
from caveat import app as use
from caveat import db
from claims._write import CONFLICT_MESSAGE
from predicates import ValueType
from predicates.errors import CaveatError
from tests.conftest import ADMIN

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
#: Where each world's item ids start: any integer at or past it in an answer is an id.
ID_BASE = 10_000_000
CASES = ("INC-1", "INC-2", "INC-3")
ATTRIBUTES = ("pool_exhaustion_seen", "retries_amplify_load", "checkout_latency_from_pool")
#: Left out of the comparison: an audit row's place in the tenant's chain counts every
#: row before it, hidden items' too (a known side door: docs/reliability.md).
AUDIT_POSITION = frozenset({"seq", "hash"})
QUERY = "payment api pool exhaustion checkout latency retries"
#: The session another principal (``agent-o``) owns, and every recall of the reader names.
SESSION = "run-1"
#: Where each world's knowledge passage ids start (past every item id).
PASSAGE_BASE = 50_000_000
#: The access that hides a runbook from both readers (model §6 "Knowledge beside
#: memory"): readers a capability they lack, a deny naming them, a level above them.
HIDING_DOCS: dict[str, dict[str, Any]] = {
    "acl": {"readers": ["payments-restricted"]},
    "denied": {"deny": ["principal:agent-r", "cap:reviewers"]},
    "classified": {"classification": "confidential"},
}


@dataclasses.dataclass(frozen=True)
class Spec:
    """One generated item: where it lives, what it holds, who may see it, what befalls it."""

    case: str
    attribute: str
    value: bool
    # "", "acl" (restricted evidence), "denied" (evidence denying both readers),
    # "classified" (evidence above their clearance), "redacted" or "session" (another
    # principal's working memory in ``SESSION``)
    hidden: str
    fate: str  # "case", "shadow", "active" or "revoked"
    parent: int | None  # index of an earlier item it derives from


@dataclasses.dataclass(frozen=True)
class DocSpec:
    """One generated runbook: how it is hidden ("" visible, or a ``HIDING_DOCS`` key),
    and whether it is revoked after its import."""

    hidden: str
    revoked: bool


docs = st.lists(
    st.builds(DocSpec, st.sampled_from(["", "", "acl", "denied", "classified"]), st.booleans()),
    max_size=4,
)


def _runbook(n: int) -> str:
    return (
        f"# Runbook {n}\n\n## Pool exhaustion {n}\n\nPayment api pool exhaustion: "
        f"restart the pods (runbook {n}).\n\n## Checkout latency {n}\n\n"
        f"Checkout latency from retries: shed load (runbook {n}).\n"
    )


@st.composite
def worlds(draw: st.DrawFn) -> list[Spec]:
    keys = draw(
        st.lists(
            st.tuples(st.sampled_from(CASES), st.sampled_from(ATTRIBUTES)),
            min_size=2,
            max_size=7,
            unique=True,
        )
    )
    out: list[Spec] = []
    for n, (case, attribute) in enumerate(keys):
        hidden = draw(
            st.sampled_from(["", "", "acl", "redacted", "denied", "classified", "session"])
        )
        fate = draw(st.sampled_from(["case", "shadow", "active"]))
        if not hidden:  # a hidden item's fate never reaches a visible one (no revoked cascade)
            fate = draw(st.sampled_from(["case", "shadow", "active", "revoked"]))
        if hidden == "session":  # working memory, in its session, as its owner wrote it
            fate = "case"
        # a visible item derives from visible ones only: the world without the hidden
        # items could not hold its lineage otherwise (docs/reliability.md)
        parents = [i for i in range(n) if hidden or not out[i].hidden]
        parent = draw(st.none() | st.sampled_from(parents)) if parents else None
        if hidden == "session":
            parent = None
        out.append(Spec(case, attribute, draw(st.booleans()), hidden, fate, parent))
    return out


@contextmanager
def _runtime(pg_server_url: str, template_db: str) -> Iterator[tuple[use.Runtime, sa.Engine]]:
    with db.with_database(pg_server_url, template=template_db, prefix="caveat_sd") as url:
        owner = db.make_engine(url)
        with owner.begin() as c:  # setup only: ids from ID_BASE, so answers show them
            c.execute(
                sa.text("SELECT setval(pg_get_serial_sequence('items', 'id'), :n)"), {"n": ID_BASE}
            )
            c.execute(
                sa.text("SELECT setval(pg_get_serial_sequence('passages', 'id'), :n)"),
                {"n": PASSAGE_BASE},
            )
        owner.dispose()
        engine = db.make_app_engine(url)
        try:
            yield use.Runtime.over(engine, "acme"), engine
        finally:
            engine.dispose()


def _setup(rt: use.Runtime) -> tuple[claims.Actor, claims.Actor]:
    use.declare_tenant(rt, ADMIN, now=T0)
    use.declare_schema(
        rt,
        ADMIN,
        [
            factgen.AttributeSpec(
                "config.connection_pool.max", ValueType.parse("int"), content_type="configuration"
            )
        ],
        now=T0,
    )
    use.import_entities(rt, ADMIN, [factgen.EntitySpec("payment-api", "service", ())], now=T0)
    use.add_evidence(rt, ADMIN, "E-1", now=T0)
    use.add_evidence(rt, ADMIN, "E-secret", readers=["payments-restricted"], now=T0)
    # the agent denied by name, the SME by a capability it holds (docs/claims.md)
    use.add_evidence(rt, ADMIN, "E-denied", deny=["principal:agent-r", "cap:reviewers"], now=T0)
    use.add_evidence(rt, ADMIN, "E-classified", classification="confidential", now=T0)
    for case in CASES:
        use.open_case(rt, ADMIN, case, subjects=["payment-api"], now=T0)
    agent = use.register_principal(rt, ADMIN, "agent-r", role="agent", capabilities=["incidents"])
    sme = use.register_principal(
        rt, ADMIN, "sme-r", role="sme", capabilities=["incidents", "reviewers"]
    )
    assert agent.clearance == sme.clearance == "internal"  # the default: below E-classified
    return agent, sme


#: The evidence that hides an item of each kind from both readers.
HIDING_EVIDENCE = {"acl": "E-secret", "denied": "E-denied", "classified": "E-classified"}


def _text(n: int, spec: Spec) -> str:
    return f"Item {n}: payment api {spec.attribute.replace('_', ' ')} in {spec.case}."


def _build(rt: use.Runtime, specs: list[Spec], *, with_hidden: bool) -> dict[int, str]:
    """Write the world as its operator; the ids of the visible items, with their text."""
    at = T0 + timedelta(minutes=1)
    other = use.register_principal(rt, ADMIN, "agent-o", role="agent", capabilities=["incidents"])
    ids: dict[int, int] = {}  # spec index -> item id
    for n, spec in enumerate(specs):
        if spec.hidden and not with_hidden:
            continue
        parent = ids.get(spec.parent) if spec.parent is not None else None
        body = {
            "kind": "fact",
            "subject": "payment-api",
            "attribute": spec.attribute,
            "object": spec.value,
            "required": ["config.connection_pool.max eq 20"],
            "evidence": [HIDING_EVIDENCE.get(spec.hidden, "E-1")],
            "derived_from": [] if parent is None else [parent],
            "scope": f"session:{SESSION}" if spec.hidden == "session" else f"case:{spec.case}",
            "text": _text(n, spec),
        }
        writer = other if spec.hidden == "session" else ADMIN
        item_id = use.write(rt, writer, claims.ItemWrite.model_validate(body), now=at).item_id
        ids[n] = item_id
    later = at + timedelta(minutes=1)
    for n, item_id in ids.items():
        spec = specs[n]
        if spec.fate in {"shadow", "active", "revoked"}:
            use.promote(rt, ADMIN, item_id, to="shadow", now=later)
        if spec.fate in {"active", "revoked"}:
            use.promote(rt, ADMIN, item_id, to="active", now=later)
    end = later + timedelta(minutes=1)
    for n, item_id in ids.items():
        if specs[n].fate == "revoked":
            use.revoke(rt, ADMIN, item_id, reason="wrong dashboard", now=end)
    for n, item_id in ids.items():
        if specs[n].hidden == "redacted":
            use.redact(rt, ADMIN, item_id, reason="customer data", now=end)
    use.observe(
        rt,
        ADMIN,
        [factgen.Observation("payment-api", "config.connection_pool.max", 20)],
        now=end,
    )
    return {item_id: _text(n, specs[n]) for n, item_id in ids.items() if not specs[n].hidden}


def _build_docs(rt: use.Runtime, specs: list[DocSpec], *, with_hidden: bool) -> dict[int, str]:
    """Import the runbooks as the operator (the hidden ones only ``with_hidden``), revoke
    those so specified; the ids of the visible passages, with their refs."""
    at = T0 + timedelta(minutes=1)
    for n, spec in enumerate(specs):
        if spec.hidden and not with_hidden:
            continue
        doc = claims.DocumentInput(f"runbooks/rb-{n}.md", _runbook(n))
        with rt.transaction() as s:
            claims.import_documents(
                session=s, tenant=rt.tenant, actor=ADMIN, now=at, documents=[doc],
                **HIDING_DOCS.get(spec.hidden, {}),
            )  # fmt: skip
            if spec.revoked:
                claims.revoke_document(
                    session=s, tenant=rt.tenant, actor=ADMIN, document_id=doc.id,
                    reason="obsolete", now=at + timedelta(minutes=1),
                )  # fmt: skip
    with rt.transaction() as s:
        rows = s.execute(sa.text("SELECT id, document_id, fragment FROM passages")).all()
    visible = {f"runbooks/rb-{n}.md" for n, spec in enumerate(specs) if not spec.hidden}
    return {
        int(r.id): claims.passage_ref(r.document_id, r.fragment)
        for r in rows
        if r.document_id in visible
    }


def _plain(value: Any, names: dict[int, str]) -> Any:
    """``value`` as plain data, each item id replaced by its item's text."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(getattr(value, f.name), names)
            for f in dataclasses.fields(value)
            if f.name not in AUDIT_POSITION
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, nx.DiGraph):
        nodes = sorted((_plain(n, names), _plain(d, names)) for n, d in value.nodes(data=True))
        edges = sorted((_plain(u, names), _plain(v, names)) for u, v in value.edges())
        return {"nodes": [repr(n) for n in nodes], "edges": [repr(e) for e in edges]}
    if isinstance(value, dict):
        return {repr(_plain(k, names)): _plain(v, names) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, names) for v in value]
    if isinstance(value, frozenset | set):
        return sorted((_plain(v, names) for v in value), key=repr)
    if isinstance(value, bool):
        return value
    if isinstance(value, str):  # an id named in a message ("ancestor 10000004 revoked")
        return re.sub(r"\d{8,}", lambda m: str(_plain(int(m.group()), names)), value)
    if isinstance(value, int) and value > PASSAGE_BASE:
        return names.get(value, f"<hidden passage {value}>")
    if isinstance(value, int) and value > ID_BASE:
        return names.get(value, f"<hidden item {value}>")
    if isinstance(value, float):
        return "nan" if value != value else round(value, 9)
    return value


def _answers(rt: use.Runtime, agent: claims.Actor, sme: claims.Actor) -> dict[str, Any]:
    """Everything the two readers may ask, keyed by question."""
    now = T0 + timedelta(hours=1)
    out: dict[str, Any] = {}
    for case in (None, *CASES):
        for session in (None, SESSION):
            req = recall.RecallRequest(
                query=QUERY, case_id=case, explain=True, limit=5, session=session
            )
            out[f"recall {case} {session}"] = use.recall_items(rt, agent, req, now=now)
        for sources in (("knowledge",), ("memory", "knowledge")):
            req = recall.RecallRequest(
                query=QUERY, case_id=case, explain=True, limit=5, sources=sources
            )
            out[f"recall {case} {sources}"] = use.recall_items(rt, agent, req, now=now)
    for who in (agent, sme):
        out[f"diff {who.id}"] = use.diff(rt, who, from_=T0, to=now, now=now)
    out["queue"] = use.review_queue(rt, sme, now=now)
    with rt.transaction() as s:
        every = [int(r[0]) for r in s.execute(sa.text("SELECT id FROM items ORDER BY id"))]
    for item_id in every:  # the app role sees the tenant's ids; each reader asks of each
        for who in (agent, sme):
            for name, ask in (
                ("item", lambda: use.item(rt, who, item_id)),
                ("lineage", lambda: use.lineage(rt, who, item_id)),
            ):
                out[f"{name} {who.id} {item_id}"] = _outcome(ask)
        out[f"dossier {item_id}"] = _outcome(lambda: use.item_dossier(rt, sme, item_id, now=now))
    return out


def _outcome(ask: Any) -> Any:
    try:
        return ask()
    except CaveatError as exc:
        return ("refused", exc.code, exc.message)


def _by_text(answers: dict[str, Any], names: dict[int, str]) -> dict[str, Any]:
    """Answers about one item keyed by the item's text; the rest as they are. Answers
    about an item the readers may not see (refused) are the world's business, not the
    comparison's: only the visible items' are kept, and each must be present in both."""
    out: dict[str, Any] = {}
    for key, value in answers.items():
        parts = key.split(" ")
        if parts[0] in {"item", "lineage", "dossier"}:
            item_id = int(parts[-1])
            label = " ".join([*parts[:-1], names.get(item_id, f"<hidden item {item_id}>")])
            if isinstance(value, tuple) and value[0] == "refused":
                continue
            out[label] = _plain(value, names)
        else:
            out[key] = _plain(value, names)
    return out


@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate),  # no shrinking: each example builds two databases
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(specs=worlds(), runbooks=docs)
def test_a_reader_sees_what_it_would_see_had_the_hidden_items_never_been_written(
    pg_server_url: str, template_db: str, specs: list[Spec], runbooks: list[DocSpec]
) -> None:
    """Hidden items and hidden runbooks alike: a recall with knowledge answers the same
    items, passages, counts and explain."""
    answers = []
    for with_hidden in (True, False):
        with _runtime(pg_server_url, template_db) as (rt, _):
            agent, sme = _setup(rt)
            names = _build(rt, specs, with_hidden=with_hidden)
            names |= _build_docs(rt, runbooks, with_hidden=with_hidden)
            answers.append(_by_text(_answers(rt, agent, sme), names))
    a, b = answers
    # the runbooks the reader may read are there to be hidden among: the test can fail
    shown = a["recall None ('knowledge',)"]["knowledge"]
    assert bool(shown) == any(not r.hidden and not r.revoked for r in runbooks), shown
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], f"{key}: {_first_difference(a[key], b[key])}"


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two plain answers first differ, and how."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=repr):
            if a.get(k, "<absent>") != b.get(k, "<absent>"):
                return _first_difference(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for n, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{n}]")
    return f"{path}: with hidden items {a!r}, without {b!r}"


# --- the write side ------------------------------------------------------------------


def _writer_world(rt: use.Runtime) -> tuple[claims.Actor, dict[str, int]]:
    """A writer without the restricted capability; one item it may read, one with
    restricted evidence, one redacted, one revoked it may not read and a readable child
    of that one, and a readable revoked item."""
    agent, _ = _setup(rt)
    at = T0 + timedelta(minutes=1)

    def item(attribute: str, evidence: str, parent: int | None = None) -> int:
        body = {
            "kind": "fact",
            "subject": "payment-api",
            "attribute": attribute,
            "object": True,
            "required": ["config.connection_pool.max eq 20"],
            "evidence": [evidence],
            "derived_from": [] if parent is None else [parent],
            "scope": {"axis": "case", "id": "INC-1"},
            "text": attribute,
        }
        return use.write(rt, ADMIN, claims.ItemWrite.model_validate(body), now=at).item_id

    ids = {
        "readable": item("a_readable", "E-1"),
        "restricted": item("a_restricted", "E-secret"),
        "denied": item("a_denied", "E-denied"),
        "classified": item("a_classified", "E-classified"),
        "redacted": item("a_redacted", "E-1"),
        "hidden_revoked": item("a_hidden_revoked", "E-secret"),
        "revoked": item("a_revoked", "E-1"),
    }
    ids["child_of_hidden_revoked"] = item("a_child", "E-1", ids["hidden_revoked"])
    use.redact(rt, ADMIN, ids["redacted"], reason="customer data", now=at)
    use.revoke(rt, ADMIN, ids["hidden_revoked"], reason="wrong", now=at)
    use.revoke(rt, ADMIN, ids["revoked"], reason="wrong", now=at)
    return agent, ids


def _try_write(rt: use.Runtime, who: claims.Actor, **fields: Any) -> tuple[Any, ...]:
    body = {
        "kind": "fact",
        "subject": "payment-api",
        "attribute": "new_claim",
        "object": True,
        "required": ["config.connection_pool.max eq 20"],
        "evidence": ["E-1"],
        "scope": {"axis": "case", "id": "INC-1"},
        **fields,
    }
    try:
        result = use.write(rt, who, claims.ItemWrite.model_validate(body), now=T0 + timedelta(1))
    except CaveatError as exc:
        return ("refused", exc.code, exc.message, exc.detail)
    return (result.outcome,)


@pytest.fixture
def writer(db_url: str) -> Iterator[tuple[use.Runtime, claims.Actor, dict[str, int]]]:
    engine = db.make_app_engine(db_url)
    rt = use.Runtime.over(engine, "acme")
    agent, ids = _writer_world(rt)
    yield rt, agent, ids
    engine.dispose()


@pytest.mark.parametrize("hidden", ["restricted", "redacted", "denied", "classified"])
@pytest.mark.parametrize(
    "other",
    [
        {},  # otherwise a valid write: lineage is the refusal
        {"subject": "nobody"},  # an earlier gate refuses first, in both worlds alike
        {"scope": {"axis": "case", "id": "INC-9"}},  # the case guard refuses first
    ],
)
def test_deriving_from_a_hidden_item_answers_as_from_an_item_never_written(
    writer: tuple[use.Runtime, claims.Actor, dict[str, int]], hidden: str, other: dict[str, Any]
) -> None:
    rt, agent, ids = writer
    absent = 987_654_321
    seen = _try_write(rt, agent, derived_from=[ids[hidden]], **other)
    never = _try_write(rt, agent, derived_from=[absent], **other)
    # the same answer, but for the id the writer itself named
    assert seen == tuple(_swap(v, absent, ids[hidden]) for v in never), f"{seen} != {never}"
    both = _try_write(rt, agent, derived_from=[ids["readable"], ids[hidden]], **other)
    assert both[:2] == never[:2]
    if not other:
        assert never[1] == "not_found"
    # the refusals' audit rows (every role reads the log) alike too: code, message, detail
    rows = use.audit_entries(rt, agent, action="reject")
    seen_row, never_row = rows[-3], rows[-2]
    assert (seen_row.code, seen_row.detail) == (
        never_row.code,
        _swap(never_row.detail, absent, ids[hidden]),
    )


def _swap(value: Any, old: int, new: int) -> Any:
    if isinstance(value, str):
        return value.replace(str(old), str(new))
    if isinstance(value, dict):
        return {k: _swap(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, old, new) for v in value]
    return new if value == old else value


def test_a_revoked_lineage_names_only_what_the_writer_may_read(
    writer: tuple[use.Runtime, claims.Actor, dict[str, int]],
) -> None:
    rt, agent, ids = writer
    hidden_parent = _try_write(rt, agent, derived_from=[ids["hidden_revoked"]])
    assert hidden_parent[1] == "not_found"  # the hidden revoked item itself: never written
    via = _try_write(rt, agent, derived_from=[ids["child_of_hidden_revoked"]])
    assert via[1] == "lineage_revoked"  # still refused: the lineage holds a revoked item
    assert str(ids["hidden_revoked"]) not in via[2] and ids["hidden_revoked"] not in (
        via[3]["revoked"] + via[3].get("via", [])
    )
    assert str(ids["child_of_hidden_revoked"]) in via[2]  # named: the writer's own id
    seen = _try_write(rt, agent, derived_from=[ids["revoked"], ids["child_of_hidden_revoked"]])
    assert seen[1] == "lineage_revoked" and seen[3]["revoked"] == [ids["revoked"]]
    for row in use.audit_entries(rt, agent, code="lineage_revoked"):
        assert str(ids["hidden_revoked"]) not in str(row.detail)


@pytest.mark.parametrize("kind", ["restricted", "denied", "classified"])
def test_a_hidden_collision_is_the_conflict_of_a_lost_race(
    writer: tuple[use.Runtime, claims.Actor, dict[str, int]], kind: str
) -> None:
    rt, agent, ids = writer
    # a hidden row's key, from a writer who may not read it: the generic conflict
    hidden = _try_write(rt, agent, attribute=f"a_{kind}", object=False)
    assert hidden == ("refused", "conflict", CONFLICT_MESSAGE, {})
    assert "hidden" not in hidden[2] and str(ids[kind]) not in hidden[2]
    # the same key held by a row the writer may read: supersession (model §1.1)
    assert _try_write(rt, agent, attribute="a_readable", object=False) == ("accepted",)
    [row] = use.audit_entries(rt, agent, code="conflict")
    assert "existing" not in row.detail and ids[kind] not in row.detail.values()


@pytest.fixture
def far_writer(db_url: str) -> Iterator[tuple[use.Runtime, claims.Actor, dict[str, int]]]:
    """``writer``'s world with item ids from ID_BASE, so any such number in an audit
    row's detail is an item id."""
    owner = db.make_engine(db_url)
    with owner.begin() as c:  # setup only
        c.execute(
            sa.text("SELECT setval(pg_get_serial_sequence('items', 'id'), :n)"), {"n": ID_BASE}
        )
    owner.dispose()
    engine = db.make_app_engine(db_url)
    rt = use.Runtime.over(engine, "acme")
    agent, ids = _writer_world(rt)
    yield rt, agent, ids
    engine.dispose()


def test_the_audit_log_lists_nothing_about_an_item_the_reader_may_not_read(
    far_writer: tuple[use.Runtime, claims.Actor, dict[str, int]],
) -> None:
    """An agent and an SME without the restricted capability list the audit log: no row
    about a restricted or redacted item, no contested row naming one, no re-opening
    naming a hidden revoked ancestor, no fan-out count; an agent lists only its own
    rows; the operator lists every row."""
    rt, agent, ids = far_writer
    sme = use.register_principal(
        rt, ADMIN, "sme-q", role="sme", capabilities=["incidents", "reviewers"]
    )
    hidden = {
        ids["restricted"],
        ids["redacted"],
        ids["hidden_revoked"],
        ids["denied"],
        ids["classified"],
    }
    # contested across cases with the restricted item: the row names it
    use.open_case(rt, ADMIN, "INC-4", subjects=["payment-api"], now=T0)
    body = {
        "kind": "fact",
        "subject": "payment-api",
        "attribute": "a_restricted",
        "object": False,
        "required": ["config.connection_pool.max eq 20"],
        "evidence": ["E-1"],
        "scope": {"axis": "case", "id": "INC-4"},
        "text": "a restricted key, seen otherwise",
    }
    rival = use.write(rt, ADMIN, claims.ItemWrite.model_validate(body), now=T0 + timedelta(1))
    use.record_event(rt, ADMIN, type="deploy", subjects=["payment-api"], now=T0 + timedelta(2))
    _try_write(rt, agent)  # the agent's own accepted write
    _try_write(rt, agent, subject="nobody")  # and its own refusal
    every = use.audit_entries(rt, ADMIN)

    def names(row: claims.AuditEntryRecord) -> set[int]:
        found = {row.item_id} if row.item_id is not None else set()
        numbers = re.findall(r"\d+", json.dumps(row.detail))
        return found | {int(n) for n in numbers if int(n) > ID_BASE}

    # the operator's listing holds what the others may not be shown: the test can fail
    assert any(names(r) & hidden for r in every)
    assert any(r.action == "contested" and r.item_id == rival.item_id for r in every)
    assert any(r.action == "event" and "affected" in r.detail for r in every)
    for who in (agent, sme):
        listed = use.audit_entries(rt, who)
        assert listed, who
        for row in listed:
            assert not names(row) & hidden, (who.id, row)
            assert row.action != "event" or "affected" not in row.detail
        assert not [r for r in listed if r.action == "contested"]
        page = use.audit_entries(rt, who, after=0, limit=500)
        assert [r.seq for r in page] == [r.seq for r in listed]  # the keyset page alike
    assert {r.actor for r in use.audit_entries(rt, agent)} == {agent.id}
    by_sme = use.audit_entries(rt, sme)
    assert {r.item_id for r in by_sme} >= {ids["readable"], ids["child_of_hidden_revoked"]}
    child = ids["child_of_hidden_revoked"]
    cause = {"revoked": ids["hidden_revoked"]}
    [told] = [r.seq for r in every if r.item_id == child and r.detail.get("cause") == cause]
    [seen] = [r for r in by_sme if r.seq == told]  # the re-opening, without its cause
    assert (seen.detail["reason"], seen.detail["cause"]) == ("an ancestor was revoked", {})
    assert len(by_sme) < len(every)
