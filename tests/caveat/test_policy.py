"""Tenant policy from every door (model §7.1; docs/policy.md), as the application's login
role under row-level security: show (now and as of an instant), set (admin, all or
nothing, one audit row per changed key, a new version), the dry run's preview, and the
knobs the lifecycle reads from it (confidence, promotion)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import claims
import factgen
from caveat import app as use
from caveat import db
from predicates.errors import Forbidden, InputError, NotFound
from tests.caveat._doors import world
from tests.conftest import ADMIN
from tests.connectors.test_hooks import hooked  # noqa: F401  (a fixture)

SME = factgen.Actor("sme-alice", "sme")
AGENT = factgen.Actor("agent-ir", "agent")


@pytest.fixture
def rt(db_url: str) -> Iterator[use.Runtime]:
    engine = db.make_app_engine(db_url)
    runtime = use.Runtime.over(engine, "acme")
    try:
        world(runtime)
        use.register_principal(runtime, ADMIN, "sme-alice", role="sme")
        use.register_principal(runtime, ADMIN, "agent-ir", role="agent")
        yield runtime
    finally:
        engine.dispose()


def test_show_is_the_defaults_as_version_one(rt: use.Runtime) -> None:
    shown = use.policy_show(rt, AGENT)
    assert shown.version == 1 and shown.policy == factgen.TenantPolicy()
    assert shown.set_by == ADMIN.id


def test_set_changes_keys_as_one_version_with_an_audit_row_each(rt: use.Runtime) -> None:
    done = use.policy_set(
        rt, ADMIN, {"shadow.min_matched_cases": 5, "working_memory_ttl": "2h", "writes": "on"}
    )
    assert done.version == 2 and not done.dry_run
    assert [(c.key, c.old, c.new) for c in done.changes] == [
        ("shadow.min_matched_cases", 3, 5),
        ("working_memory_ttl", "1h", "2h"),
    ]
    assert done.unchanged == ("writes",)
    shown = use.policy_show(rt, SME)
    assert shown.version == 2 and shown.policy.shadow.min_matched_cases == 5
    assert shown.policy.working_memory_ttl == timedelta(hours=2)
    with rt.transaction() as s:
        rows = s.execute(
            sa.text(
                "SELECT actor, code, detail FROM audit_log WHERE action = 'policy_set' ORDER BY seq"
            )
        ).all()
    assert [(r.actor, r.code) for r in rows] == [
        (ADMIN.id, "shadow.min_matched_cases"),
        (ADMIN.id, "working_memory_ttl"),
    ]
    assert rows[0].detail == {"key": "shadow.min_matched_cases", "old": 3, "new": 5, "version": 2}
    assert use.audit_verify(rt, ADMIN).ok


def test_nothing_changed_is_no_version_and_no_row(rt: use.Runtime) -> None:
    done = use.policy_set(rt, ADMIN, {"writes": "on"})
    assert done.version is None and done.changes == ()
    assert use.policy_show(rt, ADMIN).version == 1


BAD: list[tuple[str, Any]] = [
    ("writes", "of"),
    ("writes", True),
    ("shadow.min_matched_cases", -1),
    ("shadow.min_matched_cases", "3"),
    ("shadow.min_matched_cases", 2.5),
    ("shadow.min_agreement", 1.5),
    ("permission_refusal_ttl", "0s"),
    ("permission_refusal_ttl", "an hour"),
    ("working_memory_ttl", 5),
    ("confidence.half_life", "0s"),
    ("confidence.floor", 1.0),
    ("confidence.prior", -0.1),
    ("skill_enforcement_threshold", "mandatory"),
    ("promotion.min_subjects", 1),
    ("promotion.auto_apply", "yes"),
    ("anchors.weight", 3),
    ("anchors.facet_share", -1),
    ("anchors.floor", -1),
    ("anchors.floor", 11),
    ("anchors.floor", 1.5),
    ("recall.limit", 0),
    ("topology_depth", 11),
    ("entity_suffixes", "prod"),
    ("entity_suffixes", ["prod", ""]),
    ("event_clock_skew", "-PT1M"),
    ("rollup_min_episodes", 1),
]


@pytest.mark.parametrize(("key", "value"), BAD)
def test_a_bad_value_is_refused_naming_its_key_and_nothing_is_stored(
    rt: use.Runtime, key: str, value: Any
) -> None:
    with pytest.raises(InputError) as refused:
        use.policy_set(rt, ADMIN, {"shadow.min_agreement": 0.5, key: value})
    assert refused.value.detail["key"] == key
    assert refused.value.detail["given"] == value
    assert refused.value.detail["expected"] == factgen.policy_keys()[key].expected
    assert key in str(refused.value)
    shown = use.policy_show(rt, ADMIN)
    assert shown.version == 1 and shown.policy.shadow.min_agreement == 0.8


def test_an_unknown_key_gets_did_you_mean(rt: use.Runtime) -> None:
    with pytest.raises(InputError, match=r"did you mean shadow\.min_matched_cases") as refused:
        use.policy_set(rt, ADMIN, {"shadow.min_matchd_cases": 4})
    assert refused.value.detail["suggestions"][0] == "shadow.min_matched_cases"
    with pytest.raises(InputError, match="is a group"):
        use.policy_set(rt, ADMIN, {"shadow": {"min_matched_cases": 4}})


@pytest.mark.parametrize("actor", [SME, AGENT])
def test_only_an_admin_sets(rt: use.Runtime, actor: factgen.Actor) -> None:
    with pytest.raises(Forbidden):
        use.policy_set(rt, actor, {"writes": "off"})
    with pytest.raises(Forbidden):
        use.policy_set(rt, actor, {"writes": "off"}, dry_run=True)
    assert use.policy_show(rt, actor).policy.writes == "on"


def test_as_of_reads_the_policy_of_then(rt: use.Runtime) -> None:
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    use.policy_set(rt, ADMIN, {"shadow.min_matched_cases": 4}, now=t0)
    use.policy_set(rt, ADMIN, {"shadow.min_matched_cases": 6}, now=t0 + timedelta(days=1))
    first = use.policy_show(rt, ADMIN).set_at
    assert use.policy_show(rt, ADMIN, as_of=t0 - timedelta(seconds=1)).version == 1
    assert first == t0 + timedelta(days=1)
    then = use.policy_show(rt, ADMIN, as_of=t0 + timedelta(hours=1))
    assert (then.version, then.policy.shadow.min_matched_cases) == (2, 4)
    now = use.policy_show(rt, ADMIN)
    assert (now.version, now.policy.shadow.min_matched_cases) == (3, 6)
    with pytest.raises(NotFound, match="no policy as of"):
        use.policy_show(rt, ADMIN, as_of=datetime(2000, 1, 1, tzinfo=UTC))


def test_the_application_role_may_not_rewrite_history(db_url: str, rt: use.Runtime) -> None:
    engine = db.make_app_engine(db_url)
    try:
        with engine.begin() as c:
            c.execute(sa.text("SELECT set_config('caveat.tenant', 'acme', true)"))
            assert c.execute(sa.text("SELECT count(*) FROM tenant_policy_versions")).scalar() == 1
            with pytest.raises(sa.exc.ProgrammingError):
                c.execute(sa.text("UPDATE tenant_policy_versions SET set_by = 'mallory'"))
        with engine.begin() as c:
            c.execute(sa.text("SELECT set_config('caveat.tenant', 'globex', true)"))
            assert c.execute(sa.text("SELECT count(*) FROM tenant_policy_versions")).scalar() == 0
    finally:
        engine.dispose()


VALID: dict[str, st.SearchStrategy[Any]] = {
    "writes": st.sampled_from(["on", "off", "incognito"]),
    "shadow.min_matched_cases": st.integers(0, 10_000),
    "shadow.min_agreement": st.floats(0, 1),
    "working_memory_ttl": st.sampled_from(["1s", "15m", "2h", "7d", "1500ms"]),
    "confidence.floor": st.floats(0, 1, exclude_max=True),
    "confidence.half_life": st.integers(1, 10_000).map(lambda n: f"{n}d"),
    "promotion.min_subjects": st.integers(2, 50),
    "promotion.auto_apply": st.booleans(),
    "anchors.weight": st.floats(0.5, 2),
    "recall.limit": st.integers(1, 100),
    "skill_enforcement_threshold": st.sampled_from(["advisory", "recommended", "required"]),
    "entity_suffixes": st.lists(st.text(min_size=1, max_size=5), max_size=3),
}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_set_then_show_round_trips_any_valid_value(rt: use.Runtime, data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(VALID)))
    value = data.draw(VALID[key])
    use.policy_set(rt, ADMIN, {key: value})
    shown = factgen.policy_value(use.policy_show(rt, ADMIN).policy, key)
    expected = factgen.policy_value(
        factgen.changed_policy(factgen.TenantPolicy(), {key: value}), key
    )
    assert shown == expected == value


# --- the knobs the lifecycle reads ------------------------------------------------------

FACT: dict[str, object] = {
    "kind": "fact",
    "subject": "payment_api",
    "attribute": "root_cause",
    "object": "E-1",
    "required": ["config.connection_pool.max eq 20"],
    "evidence": ["E-1"],
    "text": "The pool was exhausted.",
}


def _write(rt: use.Runtime, axis: str, scope: str, **changes: object) -> int:
    if axis == "case":
        use.open_case(rt, ADMIN, scope, subjects=["payment-api"])
    request = claims.ItemWrite.model_validate(
        {**FACT, "scope": {"axis": axis, "id": scope}, **changes}
    )
    return use.write(rt, ADMIN, request).item_id


def _state(rt: use.Runtime, item_id: int) -> str:
    return use.item(rt, ADMIN, item_id).state


def test_min_subjects_counts_scopes_of_any_axis(rt: use.Runtime) -> None:
    a = _write(rt, "case", "INC-1")
    b = _write(rt, "case", "INC-2")
    assert use.promotion_candidates(rt, SME) == []  # two scopes: below the default 3
    c = _write(rt, "agent", "agent-ir")  # an agent's lesson is a third scope
    [key] = use.promotion_candidates(rt, SME)
    assert {i.id for i in key.items} == {a, b, c}
    assert key.cases == ("INC-1", "INC-2", "agent:agent-ir")
    preview = use.policy_set(rt, ADMIN, {"promotion.min_subjects": 4}, dry_run=True)
    assert preview.preview.candidates is not None
    before, after = preview.preview.candidates
    assert len(before) == 1 and after == ()
    assert "promotion candidates: 1 -> 0; disappear: payment-api root_cause" in "\n".join(
        preview.preview.lines()
    )
    assert use.policy_show(rt, ADMIN).policy.promotion.min_subjects == 3  # a dry run
    use.policy_set(rt, ADMIN, {"promotion.min_subjects": 4})
    assert use.promotion_candidates(rt, SME) == []
    use.policy_set(rt, ADMIN, {"promotion.min_subjects": 2})
    assert len(use.promotion_candidates(rt, SME)) == 1
    d = _write(rt, "team", "payments", object="E-2")  # another scope disagrees
    assert use.promotion_candidates(rt, SME) == []
    [key] = use.contested_keys(rt, SME)
    assert sorted(key.values.values()) == [(a, b, c), (d,)]
    assert key.cases == ("INC-1", "INC-2", "agent:agent-ir", "team:payments")


@pytest.mark.parametrize("auto_apply", [False, True])
def test_auto_apply_promotes_an_uncontested_candidate_at_close(
    rt: use.Runtime, auto_apply: bool
) -> None:
    ids = [_write(rt, "case", f"INC-{n}") for n in (1, 2, 3)]
    contested = [_write(rt, "case", f"INC-{n}", attribute="trigger") for n in (4, 5, 6)]
    contested.append(_write(rt, "case", "INC-7", attribute="trigger", object="E-2"))
    if auto_apply:
        preview = use.policy_set(rt, ADMIN, {"promotion.auto_apply": True}, dry_run=True)
        assert preview.preview.auto_promoted == ((), tuple(ids))
        use.policy_set(rt, ADMIN, {"promotion.auto_apply": True})
    use.close_case(rt, ADMIN, "INC-1", outcome="confirmed")
    want = "shadow" if auto_apply else "case"
    assert [_state(rt, i) for i in ids] == [want] * 3
    assert [_state(rt, i) for i in contested] == ["case"] * 4  # never majority-voted
    with rt.transaction() as s:
        by_policy = s.execute(
            sa.text(
                "SELECT count(*) FROM audit_log WHERE action = 'transition' "
                "AND item_id = ANY(:ids) AND actor = 'policy:promotion.auto_apply'"
            ),
            {"ids": ids + contested},
        ).scalar()
    assert by_policy == (3 if auto_apply else 0)


def test_auto_apply_runs_at_sweep_too(rt: use.Runtime) -> None:
    ids = [_write(rt, "case", f"INC-{n}") for n in (1, 2, 3)]
    use.policy_set(rt, ADMIN, {"promotion.auto_apply": True})
    use.sweep(rt, ADMIN)
    assert [_state(rt, i) for i in ids] == ["shadow"] * 3


def test_auto_apply_never_overturns_an_smes_drop(rt: use.Runtime) -> None:
    ids = [_write(rt, "case", f"INC-{n}") for n in (1, 2, 3)]
    use.policy_set(rt, ADMIN, {"promotion.auto_apply": True})
    use.sweep(rt, ADMIN)
    assert [_state(rt, i) for i in ids] == ["shadow"] * 3
    use.drop(rt, SME, ids[0], rationale="the pool was not the cause here")
    use.sweep(rt, ADMIN)
    use.close_case(rt, ADMIN, "INC-2", outcome="confirmed")
    assert [_state(rt, i) for i in ids] == ["case", "shadow", "shadow"]
    preview = use.policy_set(rt, ADMIN, {"promotion.min_subjects": 2}, dry_run=True)
    assert ids[0] not in preview.preview.auto_promoted[1]
    use.promote(rt, SME, ids[0], to="shadow", rationale="it was after all")  # an SME may
    assert _state(rt, ids[0]) == "shadow"


def test_confidence_reads_the_tenant_policy(rt: use.Runtime) -> None:
    before = _write(rt, "case", "INC-1")
    assert use.item_dossier(rt, ADMIN, before).confidence == pytest.approx(0.1 + 0.9 * 0.5)
    use.policy_set(rt, ADMIN, {"confidence.floor": 0.4, "confidence.prior": 0.0})
    item = _write(rt, "case", "INC-2", attribute="other")
    assert use.item_dossier(rt, ADMIN, item).confidence == pytest.approx(0.4)
    done = use.attach_evidence(
        rt, ADMIN, item, "E-1", stance="supports", strength=1.0, source_kind="human_confirm"
    )
    assert done.confidence_before == pytest.approx(0.4)
    assert done.confidence_after == pytest.approx(1.0)


# --- the HTTP door ------------------------------------------------------------------------


def test_http_show_set_dry_run_and_refusals(db_url: str) -> None:
    from tests.caveat.test_http import client, serving

    with serving(db_url) as srv:
        admin = use.create_token(srv.rt, ADMIN, "admin-bo", role="admin").token
        with client(srv, admin) as a, client(srv, srv.sme) as sme, client(srv, srv.agent) as ag:
            shown = ag.get("/v1/policy")
            assert shown.status_code == 200, shown.text
            body = shown.json()
            assert body["version"] == 1 and body["policy"]["writes"] == "on"
            keys = {k["key"]: k for k in body["keys"]}
            assert keys["promotion.min_subjects"]["default"] == 3
            assert keys["working_memory_ttl"]["value"] == "1h"

            change = {"changes": [{"key": "shadow.min_matched_cases", "value": 5}]}
            dry = a.put("/v1/policy?dry_run=true", json=change)
            assert dry.status_code == 200, dry.text
            assert dry.json()["dry_run"] and dry.json()["version"] is None
            assert dry.json()["preview"]["would_graduate"] == {"current": [], "new": []}
            assert a.get("/v1/policy").json()["version"] == 1

            for who in (sme, ag):
                refused = who.put("/v1/policy", json=change)
                assert refused.status_code == 403 and refused.json()["code"] == "forbidden"

            bad = {
                "changes": [
                    {"key": "shadow.min_matched_cases", "value": 5},
                    {"key": "shadow.min_agreement", "value": "high"},
                ]
            }
            r = a.put("/v1/policy", json=bad)
            assert r.status_code == 422
            problem = r.json()
            assert problem["code"] == "invalid_input"
            assert problem["key"] == "shadow.min_agreement" and problem["given"] == "high"
            assert problem["expected"] == "a number >= 0.0 and <= 1.0"
            assert r.headers["content-type"].startswith("application/problem+json")
            unknown = a.put("/v1/policy", json={"changes": [{"key": "writs", "value": "off"}]})
            assert unknown.status_code == 422 and unknown.json()["suggestions"][0] == "writes"
            assert a.get("/v1/policy").json()["version"] == 1  # nothing of the bad change

            done = a.put("/v1/policy", json=change)
            assert done.status_code == 200, done.text
            assert done.json()["version"] == 2
            assert done.json()["changes"] == [
                {"key": "shadow.min_matched_cases", "old": 3, "new": 5}
            ]
            set_at = a.get("/v1/policy").json()["set_at"]
            assert a.get("/v1/policy").json()["policy"]["shadow"]["min_matched_cases"] == 5
            then = a.get("/v1/policy", params={"as_of": "2000-01-01T00:00:00Z"})
            assert then.status_code == 404 and then.json()["code"] == "not_found"
            before = datetime.fromisoformat(set_at) - timedelta(microseconds=1)
            old = a.get("/v1/policy", params={"as_of": before.isoformat()}).json()
            assert (old["version"], old["policy"]["shadow"]["min_matched_cases"]) == (1, 3)
            rows = a.get("/v1/audit", params={"action": "policy_set"}).json()["items"]
            assert [(r["code"], r["detail"]["new"]) for r in rows] == [
                ("shadow.min_matched_cases", 5)
            ]
            bad_as_of = a.get("/v1/policy", params={"as_of": "yesterday"})
            assert bad_as_of.status_code == 422
            for raw in (
                '{"key": "confidence.floor", "value": NaN}',
                '{"key": "entity_suffixes", "value": [Infinity]}',
            ):
                nan = a.put(
                    "/v1/policy",
                    content='{"changes": [' + raw + "]}",
                    headers={"Content-Type": "application/json"},
                )
                assert nan.status_code == 422, nan.text  # not a 500
                assert nan.json()["code"] == "invalid_input"


# --- the CLI ----------------------------------------------------------------------------


@pytest.fixture
def cli_world(db_url: str, monkeypatch: pytest.MonkeyPatch, rt: use.Runtime) -> None:
    monkeypatch.setenv("DATABASE_URL", db_url)
    monkeypatch.setenv("CAVEAT_TENANT", "acme")


def test_cli_show_set_and_refusals(cli_world: None) -> None:
    from tests.caveat.test_cli_incident import run

    text = run("policy", "show").output
    assert "version 1" in text and "promotion.min_subjects" in text
    dry = run("policy", "set", "shadow.min_agreement", "0.6", "--dry-run").output
    assert dry.startswith("dry run") and "shadow.min_agreement: 0.8 -> 0.6" in dry
    assert "shadow items the next close would graduate: 0 -> 0" in dry
    bad = run("policy", "set", "writes", "off", "recall.limit", "0", ok=2)
    assert "invalid_input: policy key recall.limit: expected an integer >= 1" in bad.output
    assert "got 0" in bad.output and "Traceback" not in bad.output
    typo = run("policy", "set", "promotion.min_subject", "4", ok=2)
    assert "did you mean promotion.min_subjects" in typo.output
    assert "give KEY VALUE pairs" in run("policy", "set", "writes", ok=2).output
    forbidden = run("policy", "set", "writes", "off", "--as", "sme-alice", ok=1)
    assert "forbidden" in forbidden.output
    unchanged = run("policy", "show").output  # nothing of the refused changes was stored
    assert "version 1" in unchanged and re.search(r"\n  writes +on\n", unchanged)
    done = json.loads(
        run("policy", "set", "writes", "off", "working_memory_ttl", "30m", "--json").output
    )
    assert done["version"] == 2
    assert [c["key"] for c in done["changes"]] == ["writes", "working_memory_ttl"]
    shown = json.loads(run("policy", "show", "--json").output)
    assert shown["policy"]["writes"] == "off" and shown["version"] == 2
    first = json.loads(run("policy", "show", "--as-of", shown["set_at"], "--json").output)
    assert first["version"] == 2
    early = run("policy", "show", "--as-of", "2000-01-01", ok=1)
    assert "not_found" in early.output
    assert "(default on)" in run("policy", "show", "--as", "agent-ir").output


# --- the policy page ----------------------------------------------------------------------


def test_the_policy_page_is_the_admins_and_shows_errors_in_place(db_url: str) -> None:
    from tests.caveat.test_http import serving
    from tests.caveat.test_web import browser, csrf

    with serving(db_url) as srv:
        admin = use.create_token(srv.rt, ADMIN, "admin-bo", role="admin").token
        with browser(srv, srv.sme) as c:
            assert 'href="/ui/policy"' not in c.get("/ui/").text  # no link for an SME
            refused = c.get("/ui/policy")
            assert refused.status_code == 403 and "forbidden" in refused.text
        with browser(srv, admin) as c:
            assert 'href="/ui/policy"' in c.get("/ui/").text
            page = c.get("/ui/policy")
            assert page.status_code == 200 and "promotion.auto_apply" in page.text
            token = csrf(page.text)
            bad = c.post(
                "/ui/policy",
                data={
                    "csrf": token,
                    "key": "shadow.min_agreement",
                    "value": "1.5",
                    "step": "apply",
                },
            )
            assert bad.status_code == 422
            assert 'data-testid="error"' in bad.text and "shadow.min_agreement" in bad.text
            assert 'value="1.5"' in bad.text  # the form keeps what was typed
            assert "takes a number &gt;= 0.0 and &lt;= 1.0" in bad.text
            typo = c.post(
                "/ui/policy",
                data={"csrf": token, "key": "shadow.min_agrement", "value": "0.5", "step": "apply"},
            )
            assert typo.status_code == 422 and "did you mean shadow.min_agreement" in typo.text
            preview = c.post(
                "/ui/policy",
                data={"csrf": token, "key": "shadow.min_agreement", "value": "0.5"},
            )
            assert preview.status_code == 200 and 'data-testid="preview"' in preview.text
            assert "shadow items the next close would graduate" in preview.text
            assert use.policy_show(srv.rt, ADMIN).version == 1  # a preview stores nothing
            done = c.post(
                "/ui/policy",
                data={
                    "csrf": token,
                    "key": "shadow.min_agreement",
                    "value": "0.5",
                    "step": "apply",
                },
                follow_redirects=True,
            )
            assert done.status_code == 200 and "version 2: shadow.min_agreement = 0.5" in done.text
            forged = c.post(
                "/ui/policy",
                data={"csrf": "0" * 32, "key": "writes", "value": "off", "step": "apply"},
            )
            assert forged.status_code == 403
        shown = use.policy_show(srv.rt, ADMIN)
        assert (shown.version, shown.policy.shadow.min_agreement, shown.policy.writes) == (
            2,
            0.5,
            "on",
        )


def test_recall_reads_its_defaults_from_the_policy(rt: use.Runtime) -> None:
    import recall
    from tests.caveat._doors import PRECEDENT, QUERY, precedent

    first = precedent(rt)
    second = use.write(
        rt, ADMIN, claims.ItemWrite.model_validate({**PRECEDENT, "attribute": "pool_exhausted_at"})
    ).item_id
    use.promote(rt, ADMIN, second, to="shadow")
    use.promote(rt, ADMIN, second, to="active")
    seen = [factgen.Observation("payment-api", "config.connection_pool.max", 20)]

    def ask(**given: Any) -> recall.RecallResult:
        request = recall.RecallRequest(query=QUERY, observations=seen, **given)
        return use.recall_items(rt, AGENT, request)

    assert {r.item.id for r in ask().items} == {first, second}

    def weight(res: recall.RecallResult) -> float | None:
        return next(a.weight for a in res.anchors if (a.axis, a.id) == ("case", "INC-1"))

    assert weight(ask(anchors=[recall.Anchor("case", "INC-1")])) == 1.5
    assert weight(ask(case_id="INC-1")) == 1.0  # the default case anchor
    use.policy_set(
        rt,
        ADMIN,
        {"recall.limit": 1, "anchors.weight": 1.2, "anchors.defaults.case": 1.9},
    )
    assert len(ask().items) == 1
    assert len(ask(limit=5).items) == 2  # a request's own limit wins
    assert weight(ask(anchors=[recall.Anchor("case", "INC-1")])) == pytest.approx(1.2)
    assert weight(ask(anchors=[recall.Anchor("case", "INC-1", 2.0)])) == 2.0
    assert weight(ask(case_id="INC-1")) == 1.9


def test_the_dry_run_previews_which_shadow_items_graduate(rt: use.Runtime) -> None:
    item = _write(rt, "case", "INC-1")
    use.promote(rt, ADMIN, item, to="shadow")  # in shadow, no matched case yet
    dry = use.policy_set(rt, ADMIN, {"shadow.min_matched_cases": 0}, dry_run=True)
    assert dry.preview.would_graduate == ((), (item,))
    assert dry.preview.would_drop == ((), ())
    assert dry.preview.candidates is None and dry.preview.auto_promoted is None
    assert f"graduate: 0 -> 1; now also #{item}" in "\n".join(dry.preview.lines())
    assert use.shadow_report(rt, ADMIN).would_graduate == ()  # nothing was stored
    use.policy_set(rt, ADMIN, {"shadow.min_matched_cases": 0})
    assert use.shadow_report(rt, ADMIN).would_graduate == (item,)
    back = use.policy_set(rt, ADMIN, {"shadow.min_matched_cases": 3})
    assert back.preview.would_graduate == ((item,), ())


def test_0019_gives_existing_tenants_their_policy_as_version_one(pg_server_url: str) -> None:
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with db.with_database(pg_server_url, prefix="caveat_p19") as url:
        db.migrate(url, "0018")
        engine = db.make_engine(url)
        try:
            with engine.begin() as c:
                c.execute(
                    sa.text(
                        "INSERT INTO tenants (id, policy, created_at) VALUES "
                        "('old', CAST(:p AS jsonb), :at)"
                    ),
                    {
                        "p": json.dumps({"writes": "off", "permission_refusal_ttl": "PT2H"}),
                        "at": created,
                    },
                )
            db.migrate(url)
            with engine.connect() as c:
                row = c.execute(
                    sa.text("SELECT version, policy, set_at, set_by FROM tenant_policy_versions")
                ).one()
            assert (row.version, row.set_at, row.set_by) == (1, created, "migration")
            with engine.begin() as c:
                from sqlalchemy.orm import Session

                v = factgen.policy_as_of(session=Session(bind=c), tenant="old", at=created)
            assert v.policy.writes == "off"
            assert v.policy.permission_refusal_ttl == timedelta(hours=2)  # ISO as stored then
        finally:
            engine.dispose()


def test_a_change_creates_a_new_tenant_a_dry_run_does_not(rt: use.Runtime) -> None:
    fresh = rt.for_tenant("initech")
    with pytest.raises(NotFound, match="no tenant"):
        use.policy_set(fresh, ADMIN, {"writes": "off"}, dry_run=True)
    done = use.policy_set(fresh, ADMIN, {"writes": "off"})
    assert done.version == 2  # 1: the defaults it was created with
    assert use.policy_show(fresh, ADMIN, as_of=done.at - timedelta(microseconds=1)).version == 1
    assert use.policy_show(rt, ADMIN).policy.writes == "on"  # acme untouched


def test_a_hook_that_closes_a_case_applies_the_promotion_policy(
    hooked: Any,  # noqa: F811  (tests/connectors/test_hooks.py: a server with hooks)
) -> None:
    from tests.connectors.test_hooks import _pd, payload

    rt = hooked.server.rt
    ids = [_write(rt, "case", f"INC-{n}") for n in (1, 2, 3)]
    use.policy_set(rt, ADMIN, {"promotion.auto_apply": True})
    assert _pd(hooked, payload("pagerduty-triggered.json")).status_code == 200
    data = json.loads(payload("pagerduty-resolved.json"))
    data["event"]["data"]["outcome"] = "confirmed"
    closed = _pd(hooked, json.dumps(data).encode())
    assert closed.json()["done"][-1]["action"] == "close_case", closed.text
    assert [_state(rt, i) for i in ids] == ["shadow"] * 3
