"""The episodic -> semantic rollup at every door (docs/lifecycle.md, "Rollup from a door"):
the preview (the deterministic clusters and the items they become, nothing changed), the
write through the gate (a refusal reported per cluster), a subject filter and a
summariser, through the use cases, ``POST /v1/rollup`` and ``caveat rollup``, as the
application's login role under row-level security."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import claims
import factgen
import lifecycle
from caveat import app as use
from caveat.errors import Forbidden, NotFound, SubjectUnresolved
from tests.caveat._doors import two_tenants
from tests.caveat.test_cli_incident import run
from tests.caveat.test_sources_doors import Served, served
from tests.conftest import ADMIN

T0 = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
AGENT = claims.Actor("agent-ir", "agent")
SME = claims.Actor("sme-alice", "sme")
POOL = "config.connection_pool.max eq 20"


def _episode(
    rt: use.Runtime,
    subject: str,
    text: str,
    n: int,
    *,
    evidence: str = "E-1",
    actor: claims.Actor = AGENT,
) -> int:
    body = {
        "kind": "episode",
        "subject": subject,
        "attribute": f"trace_{n}",
        "object": f"T-{subject}-{n}",
        "required": [POOL] if subject == "payment_api" else [],
        "evidence": [evidence],
        "scope": {"axis": "case", "id": "INC-1"},
        "text": text,
    }
    return use.write(rt, actor, claims.ItemWrite.model_validate(body), now=T0).item_id


@dataclasses.dataclass
class Episodes:
    payments: list[int]
    orders: list[int]


def _episodes(rt: use.Runtime) -> Episodes:
    """Three similar episodes about payment-api and three about orders-db, in a case
    that is then closed (an open case's episodes are not rolled up)."""
    use.import_entities(rt, ADMIN, [factgen.EntitySpec("orders-db", "database", ("orders_db",))])
    use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"], now=T0)
    payments = [
        _episode(rt, "payment_api", f"Pool exhausted on payment-api, restart restored it {n}", n)
        for n in range(3)
    ]
    orders = [
        _episode(rt, "orders_db", f"Disk filled on orders-db, vacuum freed space {n}", n)
        for n in range(3)
    ]
    return Episodes(payments, orders)


@pytest.fixture
def rt(db_url: str) -> Iterator[use.Runtime]:
    with two_tenants(db_url) as runtime:
        yield runtime


def _states(rt: use.Runtime, ids: list[int]) -> list[str]:
    return [use.item(rt, ADMIN, i).state for i in ids]


def _same_as_written(request: claims.ItemWrite, item: claims.ItemRecord) -> None:
    """The stored item is the request the preview showed, field by field."""
    assert (item.kind, item.subject, item.attribute) == (
        request.kind,
        request.subject,
        request.attribute,
    )
    assert item.object == {"value": request.object} and item.text == request.text
    assert list(item.required) == request.required and list(item.excluded) == request.excluded
    assert sorted(item.evidence) == request.evidence
    assert list(item.derived_from) == request.derived_from
    assert (item.scope_axis, item.scope_id) == (request.scope.axis, request.scope.id)
    assert item.epistemic == request.epistemic == "hypothesis"
    assert list(item.entities) == request.entities


def test_the_preview_changes_nothing_and_is_what_the_rollup_writes(rt: use.Runtime) -> None:
    eps = _episodes(rt)
    assert use.rollup_preview(rt, AGENT) == []  # the case is still open
    use.close_case(rt, ADMIN, "INC-1", outcome="confirmed", now=T0)
    with pytest.raises(Forbidden):
        use.rollup_preview(rt, SME)
    with pytest.raises(Forbidden):
        use.rollup(rt, SME)
    audit_before = len(use.audit_entries(rt, ADMIN))
    plans = use.rollup_preview(rt, AGENT)
    assert [p.episodes for p in plans] == [tuple(eps.payments), tuple(eps.orders)]
    assert use.rollup_preview(rt, AGENT) == plans  # deterministic
    assert len(use.audit_entries(rt, ADMIN)) == audit_before  # nothing recorded
    assert set(_states(rt, eps.payments + eps.orders)) == {"case"}  # nothing moved
    pay = plans[0].request
    assert pay.required == [POOL] and pay.evidence == ["E-1"]
    assert pay.text is not None and pay.text.startswith("Recurring on payment-api, 3 episodes")

    done = use.rollup(rt, AGENT, now=T0)
    assert [d.request for d in done] == [p.request for p in plans]
    assert all(d.refused is None and d.item_id is not None for d in done)
    for d in done:
        assert d.item_id is not None and d.request is not None
        item = use.item(rt, AGENT, d.item_id)
        _same_as_written(d.request, item)
        assert item.state == "case"  # it reaches the tenant only through the lifecycle
    assert set(_states(rt, eps.payments + eps.orders)) == {"archived"}
    assert use.rollup_preview(rt, AGENT) == []  # rolled up once
    assert use.rollup_preview(rt.for_tenant("globex"), AGENT) == []  # acme's are acme's


def test_a_subject_filter_and_a_summariser(rt: use.Runtime) -> None:
    eps = _episodes(rt)
    use.close_case(rt, ADMIN, "INC-1", outcome="confirmed", now=T0)
    with pytest.raises(SubjectUnresolved):
        use.rollup_preview(rt, AGENT, subject="nobody-at-all")
    summary = "payment-api's pool runs dry under load; a restart buys time"
    summariser = lifecycle.RecordedSummariser({tuple(eps.payments): summary})
    [plan] = use.rollup_preview(rt, AGENT, subject="payment-api", summariser=summariser)
    assert plan.episodes == tuple(eps.payments) and plan.request.text == summary
    assert summariser.calls == [tuple(eps.payments)]
    # a summariser that fails (no summary recorded for orders-db's cluster) fails the
    # rollup before its first write: nothing is written or archived
    audit_before = len(use.audit_entries(rt, ADMIN))
    with pytest.raises(NotFound):
        use.rollup(rt, AGENT, summariser=summariser, now=T0)
    assert set(_states(rt, eps.payments + eps.orders)) == {"case"}
    assert len(use.audit_entries(rt, ADMIN)) == audit_before
    # the runtime's summariser is the doors'
    with_model = dataclasses.replace(rt, summariser=summariser)
    [done] = use.rollup(with_model, AGENT, subject="payment_api", now=T0)
    assert done.request == plan.request and done.item_id is not None
    assert use.item(rt, AGENT, done.item_id).text == summary
    assert set(_states(rt, eps.payments)) == {"archived"}
    assert set(_states(rt, eps.orders)) == {"case"}  # another subject's: left alone


def test_a_refusal_of_the_gate_is_reported_and_its_episodes_stay(rt: use.Runtime) -> None:
    eps = _episodes(rt)
    use.close_case(rt, ADMIN, "INC-1", outcome="confirmed", now=T0)
    use.declare_tenant(rt, ADMIN, policy=factgen.TenantPolicy(writes="off"), now=T0)
    done = use.rollup(rt, AGENT, now=T0)
    assert [(d.item_id, d.refused) for d in done] == [(None, "writes_disabled")] * 2
    assert done[0].message is not None and "writes are off" in done[0].message
    assert set(_states(rt, eps.payments + eps.orders)) == {"case"}
    refusals = use.audit_entries(rt, ADMIN, code="writes_disabled")
    assert len(refusals) == 2  # the gate audits each refusal


def _client(s: Served, who: str) -> httpx.Client:
    return httpx.Client(
        base_url=s.base, headers={"Authorization": f"Bearer {s.tokens[who]}"}, timeout=30
    )


def test_http_previews_then_rolls_up(rt: use.Runtime) -> None:
    eps = _episodes(rt)
    use.close_case(rt, ADMIN, "INC-1", outcome="confirmed", now=T0)
    summary = "orders-db fills its disk; vacuum frees it"
    model = lifecycle.RecordedSummariser({tuple(eps.orders): summary, tuple(eps.payments): "p"})
    with (
        served(dataclasses.replace(rt, summariser=model)) as s,
        _client(s, "agent") as agent,
        _client(s, "sme") as sme,
    ):
        r = sme.post("/v1/rollup", json={"dry_run": True})
        assert (r.status_code, r.json()["code"]) == (403, "forbidden")
        bad = agent.post("/v1/rollup", json={"dry_run": "yes"})
        assert (bad.status_code, bad.json()["code"]) == (422, "invalid_input")
        preview = agent.post("/v1/rollup", json={"dry_run": True, "subject": "orders-db"})
        assert preview.status_code == 200, preview.text
        [plan] = preview.json()["rollups"]
        assert preview.json()["dry_run"] is True and plan["item_id"] is None
        assert plan["episodes"] == eps.orders and plan["item"]["text"] == summary
        assert set(_states(rt, eps.orders)) == {"case"}
        written = agent.post("/v1/rollup", json={"subject": "orders-db"}).json()
        [done] = written["rollups"]
        assert written["dry_run"] is False and done["refused"] is None
        assert done["item"] == plan["item"]  # what the preview showed is what was sent
        shown = agent.get(f"/v1/items/{done['item_id']}").json()
        for key in ("subject", "attribute", "object", "text", "derived_from", "evidence"):
            assert shown[key] == plan["item"][key], key
        assert set(_states(rt, eps.orders)) == {"archived"}
        rest = agent.post("/v1/rollup")  # no body: every subject
        assert rest.status_code == 200, rest.text
        rest = rest.json()["rollups"]
        assert [r["episodes"] for r in rest] == [eps.payments]
        with _client(s, "globex") as other:
            assert other.post("/v1/rollup", json={"dry_run": True}).json()["rollups"] == []


@pytest.fixture
def cli_env(
    db_url: str, rt: use.Runtime, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Episodes:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")
    use.register_principal(rt, ADMIN, "agent-ir", role="agent")
    use.register_principal(rt, ADMIN, "sme-1", role="sme")
    eps = _episodes(rt)
    use.close_case(rt, ADMIN, "INC-1", outcome="confirmed", now=T0)
    monkeypatch.chdir(tmp_path)
    return eps


def test_cli_previews_rolls_up_and_reports_refusals(cli_env: Episodes, rt: use.Runtime) -> None:
    eps = cli_env
    assert "forbidden" in run("rollup", "--dry-run", "--as", "sme-1", ok=1).output
    text = run("rollup", "--dry-run", "--subject", "payment-api", "--as", "agent-ir").output
    assert f"would write from episodes {', '.join(map(str, eps.payments))}" in text
    assert f"requires: {POOL}" in text and "evidence: E-1" in text
    preview: Any = json.loads(run("rollup", "--dry-run", "--json", "--as", "agent-ir").output)
    assert [r["episodes"] for r in preview["rollups"]] == [eps.payments, eps.orders]
    assert set(_states(rt, eps.payments + eps.orders)) == {"case"}
    done = json.loads(
        run("rollup", "--subject", "payment-api", "--json", "--as", "agent-ir").output
    )
    [wrote] = done["rollups"]
    assert wrote["item"] == preview["rollups"][0]["item"] and wrote["item_id"] is not None
    use.declare_tenant(rt, ADMIN, policy=factgen.TenantPolicy(writes="off"))
    res = run("rollup", "--as", "agent-ir", ok=1)  # a refused cluster: exit 1
    assert "refused writes_disabled: writes are off" in res.output
    assert set(_states(rt, eps.orders)) == {"case"}
    assert "nothing to roll up" in run("rollup", "--subject", "payment-api").output


# --- access: a rollup never folds readable episodes into an item their readers lose -----

#: The rolling agent may read everything below; the reader is an ordinary insider (an SME:
CLEARED = claims.Actor("agent-ir", "agent", frozenset({"c1"}), "restricted")
#: an agent lists only its own audit rows).
READER = claims.Actor("reader", "sme")


def _access(item: claims.ItemRecord) -> tuple[object, ...]:
    return (item.acl, item.deny, item.classification)


def _mixed(rt: use.Runtime, held: dict[str, Any]) -> tuple[list[int], list[int]]:
    """Six similar episodes about payment-api, three formed from tenant-readable
    evidence and three from evidence ``held`` away from the reader; the case closed."""
    use.add_evidence(rt, ADMIN, "E-held", **held)
    use.open_case(rt, ADMIN, "INC-1", subjects=["payment-api"], now=T0)
    text = "Pool exhausted on payment-api, restart restored it {}"
    open_ = [_episode(rt, "payment_api", text.format(n), n, actor=CLEARED) for n in range(3)]
    kept = [
        _episode(rt, "payment_api", text.format(n), n, evidence="E-held", actor=CLEARED)
        for n in range(3, 6)
    ]
    use.close_case(rt, ADMIN, "INC-1", outcome="confirmed", now=T0)
    return open_, kept


@pytest.mark.parametrize(
    "held",
    [{"classification": "restricted"}, {"deny": ["principal:reader"]}, {"readers": ["c1"]}],
)
def test_a_rollup_clusters_only_episodes_of_one_access(
    rt: use.Runtime, held: dict[str, Any]
) -> None:
    open_, kept = _mixed(rt, held)
    assert {use.item(rt, READER, i).id for i in open_} == set(open_)
    plans = use.rollup_preview(rt, CLEARED)
    assert [p.episodes for p in plans] == [tuple(open_), tuple(kept)]
    done = use.rollup(rt, CLEARED, now=T0)
    assert all(d.refused is None and d.item_id is not None for d in done)
    for d, episodes in zip(done, (open_, kept), strict=True):
        assert d.item_id is not None
        rolled = use.item(rt, ADMIN, d.item_id)
        assert {_access(use.item(rt, ADMIN, e)) for e in episodes} == {_access(rolled)}
    # the reader still reads what it read: the open episodes' rollup, not the held one's
    assert use.item(rt, READER, done[0].item_id or 0).derived_from == tuple(open_)
    with pytest.raises(NotFound):
        use.item(rt, READER, done[1].item_id or 0)
    assert set(_states(rt, open_ + kept)) == {"archived"}


def test_an_archive_by_a_rollup_the_reader_may_not_read_names_no_item(
    rt: use.Runtime,
) -> None:
    eps = _episodes(rt)
    use.close_case(rt, ADMIN, "INC-1", outcome="confirmed", now=T0)
    done = use.rollup(rt, AGENT, subject="payment-api", now=T0)
    [rolled] = [d.item_id for d in done]
    assert rolled is not None
    window = {"from_": T0 - timedelta(hours=1), "to": T0 + timedelta(hours=1)}

    def archived(who: claims.Actor) -> list[tuple[int, str | None, dict[str, Any]]]:
        rows = use.transitions(rt, who, **window)
        return [(r.item_id, r.reason, r.cause) for r in rows if r.to_state == "archived"]

    named = [(e, f"rolled up into item {rolled}", {"rollup": rolled}) for e in eps.payments]
    assert archived(READER) == named  # a rollup it reads is named to it
    use.redact(rt, ADMIN, rolled, reason="pasted a customer's card number")
    assert archived(ADMIN) == named
    assert archived(READER) == [(e, "rolled up into an item", {}) for e in eps.payments]
    scrubbed = {"reason": "rolled up into an item", "cause": {}}

    def archives(rows: Any) -> list[dict[str, Any]]:
        return [
            {k: r.detail[k] for k in scrubbed}
            for r in rows
            if r.action == "transition" and r.code == "archived"
        ]

    seen = use.audit_entries(rt, READER, item_id=eps.payments[0])
    assert archives(seen) == [scrubbed]
    assert archives(use.item_dossier(rt, READER, eps.payments[0]).history) == [scrubbed]
