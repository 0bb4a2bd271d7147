"""The edge's use cases (model §2.1, §2.2) through the application layer, as the
application role under row-level security: a pull stored as one audited batch, a hook
delivery acted on once and atomically, a refusal audited."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa

import factgen
from caveat import app as use
from predicates.errors import Forbidden, SubjectUnresolved
from tests.caveat._doors import two_tenants
from tests.conftest import ADMIN, T0


@pytest.fixture
def rt(db_url: str) -> Iterator[use.Runtime]:
    with two_tenants(db_url) as runtime:
        yield runtime


def _count(rt: use.Runtime, table: str) -> int:
    with rt.transaction() as s:
        return int(s.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_a_pull_is_one_audited_batch_by_the_sources_own_principal(rt: use.Runtime) -> None:
    outcome = use.store_pull(
        rt,
        source="cfg",
        observations=[
            factgen.Observation("payment_api", "config.connection_pool.max", 20, "cfg"),
            factgen.Observation("nobody", "config.connection_pool.max", 20, "cfg"),
        ],
        refused=[
            factgen.Refusal(
                factgen.Observation("payment-api", "config.connection_pool.max", None),
                "not_finite",
                "NaN",
            )
        ],
        latency_ms=3.0,
        now=T0,
    )
    assert [f.subject for f in outcome.stored] == ["payment-api"]
    assert outcome.refused_by_reason == {"not_finite": 1, "subject_unresolved": 1}
    [status] = use.sources_status(rt, ADMIN)
    assert (status.source, status.samples_stored, status.refused) == (
        "cfg",
        1,
        {"not_finite": 1, "subject_unresolved": 1},
    )
    [row] = [e for e in use.audit_entries(rt, ADMIN) if e.action == "pull"]
    assert row.actor == "source:cfg"
    assert row.detail == {"source": "cfg", "stored": 1, "refused": outcome.refused_by_reason}
    # the other tenant saw nothing of it
    assert use.sources_status(rt.for_tenant("globex"), ADMIN) == []
    assert _count(rt.for_tenant("globex"), "facts") == 0


def test_sources_are_loaded_by_an_admin_and_read_by_smes(rt: use.Runtime) -> None:
    text = (
        "sources:\n  - name: cfg\n    kind: file\n    path: /srv/{subject}.json\n"
        "    subjects: [payment-api]\n    attributes:\n"
        "      - {attribute: config.connection_pool.max, pointer: /pool/max}\n"
    )
    sme = use.register_principal(rt, ADMIN, "sme-1", role="sme")
    agent = use.register_principal(rt, ADMIN, "agent-1", role="agent")
    with pytest.raises(Forbidden):
        use.load_sources(rt, sme, text)
    use.load_sources(rt, ADMIN, text, now=T0)
    shown = use.show_sources(rt, sme)
    assert shown is not None and shown.document == text
    with pytest.raises(Forbidden):
        use.show_sources(rt, agent)
    with pytest.raises(Forbidden):
        use.sources_status(rt, use.source_actor("cfg"))
    [row] = [e for e in use.audit_entries(rt, ADMIN) if e.action == "load_sources"]
    assert row.detail["sources"] == ["cfg"]
    assert use.show_sources(rt.for_tenant("globex"), ADMIN) is None


def test_a_delivery_is_acted_on_once_and_its_repeat_answers_the_same(rt: use.Runtime) -> None:
    actor = use.source_actor("github")
    actions = [
        use.PostEvent(
            "deploy",
            ("payment_api",),
            T0,
            changes={"config.connection_pool.max": 100},
            external_id="deploy-7",
        )
    ]
    first = use.deliver_hook(
        rt, kind="github", actor=actor, actions=actions, delivery_id="d-1", now=T0
    )
    again = use.deliver_hook(
        rt,
        kind="github",
        actor=actor,
        actions=actions,
        delivery_id="d-1",
        now=T0 + timedelta(seconds=3),
    )
    assert not first.duplicate and again.duplicate
    assert again.done == first.done and first.done[0]["subjects"] == ["payment-api"]
    assert _count(rt, "events") == 1


def test_a_delivery_whose_second_action_is_refused_writes_nothing(rt: use.Runtime) -> None:
    actor = use.source_actor("alertmanager")
    actions: list[use.HookAction] = [
        use.OpenCase("am-1", ("payment-api",)),
        use.Observe(
            (factgen.Observation("no-such-service", "config.connection_pool.max", 1, "am"),)
        ),
    ]
    with pytest.raises(SubjectUnresolved):
        use.deliver_hook(
            rt, kind="alertmanager", actor=actor, actions=actions, delivery_id="g-1", now=T0
        )
    assert (_count(rt, "cases"), _count(rt, "facts"), _count(rt, "hook_deliveries")) == (0, 0, 0)
    # the same delivery, fixed by the sender, is not taken for a repeat
    use.deliver_hook(
        rt, kind="alertmanager", actor=actor, actions=actions[:1], delivery_id="g-1", now=T0
    )
    assert _count(rt, "cases") == 1


def test_a_firing_then_a_resolved_alert_opens_then_joins_one_case(rt: use.Runtime) -> None:
    actor = use.source_actor("alertmanager")
    opened = use.deliver_hook(
        rt, kind="alertmanager", actor=actor, actions=[use.OpenCase("am-2", ("payment_api",))]
    )
    joined = use.deliver_hook(
        rt, kind="alertmanager", actor=actor, actions=[use.OpenCase("am-2", ("payment-api",))]
    )
    assert opened.done[0]["action"] == "open_case" and joined.done[0]["action"] == "join_case"
    waiting = use.deliver_hook(
        rt, kind="pagerduty", actor=actor, actions=[use.CloseCase("am-2", None)]
    )
    assert waiting.done == ({"action": "awaiting_outcome", "case": "am-2"},)
    assert (
        use.deliver_hook(
            rt, kind="pagerduty", actor=actor, actions=[use.CloseCase("am-2", "confirmed")]
        ).done[0]["outcome"]
        == "confirmed"
    )


def test_a_refused_delivery_leaves_its_audit_row_and_nothing_else(rt: use.Runtime) -> None:
    use.refuse_hook(
        rt,
        kind="github",
        actor_id="source:github",
        error=SubjectUnresolved("no entity answers to 'acme/unknown'"),
        delivery_id="d-9",
    )
    [row] = [e for e in use.audit_entries(rt, ADMIN) if e.action == "hook_refused"]
    assert (row.code, row.detail["kind"], row.detail["delivery_id"]) == (
        "subject_unresolved",
        "github",
        "d-9",
    )
    assert use.audit_verify(rt, ADMIN).ok
