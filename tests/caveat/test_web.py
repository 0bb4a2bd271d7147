"""The SME pages over real HTTP on loopback, as the application's login role: logging
in, what each role sees, the forms' CSRF guard, the queue's lists (filter, sort,
pages), previews, and that no page shows an item the token may not read.

The browser's own walk through them is ``test_web_browser.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from caveat import app as use
from tests.caveat._review_world import Review, resolved_incident, review_world
from tests.caveat.test_http import Server, serving
from tests.conftest import ADMIN


@pytest.fixture
def site(db_url: str) -> Iterator[tuple[Server, Review]]:
    with serving(db_url) as s:
        yield s, review_world(s.rt)


@contextmanager
def browser(s: Server, token: str | None = None) -> Iterator[httpx.Client]:
    """A cookie-keeping client, logged in with ``token`` when one is given."""
    with httpx.Client(base_url=s.base, timeout=30) as c:
        if token is not None:
            r = c.post("/ui/login", data={"token": token, "next": "/ui/"})
            assert r.status_code == 303, r.text
        yield c


def csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


def count(page: str, section: str) -> int:
    found = re.search(rf'data-count="{section}">(\d+)<', page)
    assert found, f"no count for {section}"
    return int(found.group(1))


def test_without_a_session_every_page_sends_to_the_login(site: tuple[Server, Review]) -> None:
    s, w = site
    with browser(s) as c:
        for path in ("/ui/", f"/ui/items/{w.parent}", "/ui/changes", "/ui/queue/shadow"):
            r = c.get(path)
            assert r.status_code == 303
            assert r.headers["location"] == f"/ui/login?next={path}"
        assert c.get("/ui/login").status_code == 200
        bad = c.post("/ui/login", data={"token": "cvt1.acme.nope.nope"})
        assert bad.status_code == 401 and "caveat_session" not in bad.headers.get("set-cookie", "")
        # a post without a session is refused, not redirected
        assert (
            c.post(f"/ui/items/{w.parent}/act/revoke", data={"rationale": "x"}).status_code == 401
        )
    assert use.item(s.rt, ADMIN, w.parent).state == "active"


def test_the_session_cookie_is_http_only_and_same_site(site: tuple[Server, Review]) -> None:
    s, _ = site
    with httpx.Client(base_url=s.base) as c:
        r = c.post("/ui/login", data={"token": s.sme, "next": "/ui/items/1"})
    assert r.headers["location"] == "/ui/items/1"
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie


def test_the_queue_shows_each_section_as_the_sme_may_read_it(site: tuple[Server, Review]) -> None:
    s, w = site
    with browser(s, s.sme) as c:
        page = c.get("/ui/").text
    # the restricted shadow item is neither listed nor counted for an SME without the capability
    assert count(page, "shadow") == 1
    assert f'data-item="{w.child}"' in page and f'data-item="{w.hidden}"' not in page
    assert "Card vault" not in page
    assert count(page, "candidates") == 1 and "retries_amplify_load" in page
    assert count(page, "contested") == 1 and "pool_peak_connections" in page
    assert ">40<" in page and ">60<" in page and "INC-4" in page and "INC-6" in page
    # the tile counts refused writes, as `caveat review` does (two, in one reason code)
    assert count(page, "refusals") == 2 and "subject_unresolved" in page
    assert "in 1 group" in page
    assert count(page, "reopened") == 0
    # an admin reads everything, the restricted item included
    admin = use.create_token(s.rt, ADMIN, "ops-admin", role="admin").token
    with browser(s, admin) as c:
        assert count(c.get("/ui/").text, "shadow") == 2


def test_a_case_awaiting_its_outcome_is_closed_from_the_queue_and_leaves_it(
    site: tuple[Server, Review],
) -> None:
    s, _ = site
    readable, hidden = resolved_incident(s.rt)
    with browser(s, s.sme) as c:
        page = c.get("/ui/").text
        assert count(page, "awaiting") == 1
        row = page[page.index('data-case="pd-Q1"') :].split("</tr>")[0]
        assert "payment-api" in row and "by source:pagerduty" in row
        # the cited item the SME may not read is neither counted nor linked
        assert 'data-cited="1"' in row and f"/ui/items/{readable}" in row
        assert f"/ui/items/{hidden}" not in row
        assert 'action="/ui/cases/pd-Q1/close"' in row
        assert 'value="confirmed"' in row and 'value="rejected"' in row
        section = c.get("/ui/queue/awaiting", params={"sort": "cited"}).text
        assert 'data-case="pd-Q1"' in section
        target, token = "/ui/cases/pd-Q1/close", csrf(page)
        assert c.post(target, data={"outcome": "confirmed"}).status_code == 403  # no CSRF
        bad = c.post(target, data={"outcome": "fixed", "csrf": token})
        assert bad.status_code == 422 and "invalid_input" in bad.text
        assert use.review_queue(s.rt, ADMIN).awaiting[0].case_id == "pd-Q1"  # still waiting
        done = c.post(target, data={"outcome": "confirmed", "csrf": token})
        assert done.status_code == 303
        after = c.get(done.headers["location"]).text
        assert "Done: closed case pd-Q1 as confirmed." in after
        assert count(after, "awaiting") == 0 and 'data-case="pd-Q1"' not in after
        again = c.post(target, data={"outcome": "rejected", "csrf": token})
        assert again.status_code == 409 and "case_not_open" in again.text
    closed = use.audit_entries(s.rt, ADMIN, action="close_case")
    assert [(r.actor, r.detail["case"], r.code) for r in closed] == [
        ("sme-alice", "pd-Q1", "confirmed")
    ]


def test_a_section_filters_sorts_and_pages(site: tuple[Server, Review]) -> None:
    s, _ = site
    for i in range(23):
        use.add_evidence(s.rt, ADMIN, f"E-{i + 10}")
    with browser(s, s.sme) as c:
        # 22 more refused writes, one per subject: 24 rows over two pages of 20
        import claims

        for i in range(22):
            use.write_batch(
                s.rt,
                ADMIN,
                [
                    claims.ItemWrite.model_validate(
                        {
                            "kind": "fact",
                            "subject": "payment-api",
                            "attribute": f"a{i}",
                            "object": 1,
                            "evidence": [f"E-missing-{i}"],
                            "scope": {"axis": "case", "id": "INC-2"},
                        }
                    )
                ],
            )
        first = c.get("/ui/queue/refusals", params={"sort": "code"}).text
        assert first.index("evidence_unresolved") < first.index("subject_unresolved")
        rev = c.get("/ui/queue/refusals", params={"sort": "code", "desc": "true"}).text
        assert rev.index("subject_unresolved") < rev.index("evidence_unresolved")
        only = c.get("/ui/queue/refusals", params={"subject": "nobody-else"}).text
        assert "subject_unresolved" in only and "evidence_unresolved" not in only
        bad = c.get("/ui/queue/refusals", params={"sort": "nonsense"})
        assert bad.status_code == 422 and "invalid_input" in bad.text
        assert c.get("/ui/queue/nonsense").status_code == 404
    # pages: 25 shadow items for the admin, 20 on the first page, 5 on the second
    with browser(s, use.create_token(s.rt, ADMIN, "ops", role="admin").token) as c:
        for i in range(23):
            item = use.write(
                s.rt,
                ADMIN,
                claims.ItemWrite.model_validate(
                    {
                        "kind": "fact",
                        "subject": "payment-api",
                        "attribute": f"seen_{i}",
                        "object": True,
                        "required": ["config.connection_pool.max eq 20"],
                        "evidence": [f"E-{i + 10}"],
                        "scope": {"axis": "case", "id": "INC-2"},
                    }
                ),
            )
            use.promote(s.rt, ADMIN, item.item_id, to="shadow")
        one = c.get("/ui/queue/shadow", params={"sort": "item"}).text
        two = c.get("/ui/queue/shadow", params={"sort": "item", "page": 2}).text
        ids = [int(i) for i in re.findall(r'data-item="(\d+)"', one + two)]
        assert len(ids) == 25 and ids == sorted(ids) and len(set(ids)) == 25
        assert "Page 1 of 2" in one and "Page 2 of 2" in two
        assert c.get("/ui/queue/shadow", params={"page": 0}).status_code == 422


def test_the_item_page_shows_conditions_evidence_lineage_history(
    site: tuple[Server, Review],
) -> None:
    s, w = site
    import factgen

    use.observe(s.rt, ADMIN, [factgen.Observation("payment-api", "config.connection_pool.max", 20)])
    with browser(s, s.sme) as c:
        page = c.get(f"/ui/items/{w.child}").text
        assert "config.connection_pool.max eq 20" in page
        assert 't-TRUE">TRUE' in page and "<code>20</code> from" in page  # the observation
        assert f'data-node="{w.parent}"' in page and f'data-node="{w.grandchild}"' in page
        assert 'data-state="active"' in page and 'data-state="case"' in page
        assert 'data-action="transition"' in page and "seen twice" in page  # the history
        for action in ("graduate", "drop", "refute", "revoke", "redact", "verify"):
            assert f"/items/{w.child}/act/{action}" in page
        assert f"/items/{w.child}/act/promote" not in page  # not defined from shadow
        assert c.get(f"/ui/items/{w.hidden}").status_code == 404  # unreadable: not found
        assert "Card vault" not in c.get(f"/ui/items/{w.hidden}").text


def test_an_unknown_condition_says_what_to_observe(site: tuple[Server, Review]) -> None:
    s, w = site
    with browser(s, s.sme) as c:
        page = c.get(f"/ui/items/{w.child}").text
    assert 't-UNKNOWN">UNKNOWN' in page
    assert "observe config.connection_pool.max of payment-api" in page


def test_a_revocation_preview_lists_the_descendants_it_reopens(
    site: tuple[Server, Review],
) -> None:
    s, w = site
    with browser(s, s.sme) as c:
        page = c.get(f"/ui/items/{w.parent}/act/revoke").text
        reopens = re.findall(r'<li><a href="/ui/items/(\d+)"', page)
        assert sorted(int(i) for i in reopens) == sorted([w.child, w.grandchild])
        assert use.item(s.rt, ADMIN, w.parent).state == "active"  # a preview changes nothing
        # an empty rationale is refused and changes nothing
        r = c.post(f"/ui/items/{w.parent}/act/revoke", data={"csrf": csrf(page), "rationale": " "})
        assert r.status_code == 422 and "rationale" in r.text
        assert use.item(s.rt, ADMIN, w.parent).state == "active"
        r = c.post(
            f"/ui/items/{w.parent}/act/revoke",
            data={"csrf": csrf(page), "rationale": "postmortem disproved it"},
        )
        assert r.status_code == 303 and r.headers["location"] == f"/ui/items/{w.parent}?done=revoke"
        assert use.item(s.rt, ADMIN, w.parent).state == "revoked"
        assert use.item(s.rt, ADMIN, w.child).state == "needs_reverification"
        queue = c.get("/ui/").text
        assert count(queue, "reopened") == 2 and "postmortem disproved it" in queue
        # an illegal action's preview says why
        again = c.get(f"/ui/items/{w.parent}/act/revoke").text
        assert 'data-testid="refusal"' in again and "illegal_transition" in again
    entries = use.audit_entries(s.rt, ADMIN, item_id=w.parent)
    assert entries[-1].detail["reason"] == "postmortem disproved it"


def test_forms_need_the_session_csrf_token_and_the_same_origin(
    site: tuple[Server, Review],
) -> None:
    s, w = site
    with browser(s, s.sme) as c:
        token = csrf(c.get(f"/ui/items/{w.child}/act/graduate").text)
        target = f"/ui/items/{w.child}/act/graduate"
        for data, headers in (
            ({"rationale": "ok"}, {}),
            ({"rationale": "ok", "csrf": "0" * 64}, {}),
            ({"rationale": "ok", "csrf": token}, {"Origin": "http://evil.example"}),
        ):
            r = c.post(target, data=data, headers=headers)
            assert r.status_code == 403 and "forbidden" in r.text
        assert use.item(s.rt, ADMIN, w.child).state == "shadow"
        r = c.post(target, data={"rationale": "ok", "csrf": token}, headers={"Origin": s.base})
        assert r.status_code == 303
    assert use.item(s.rt, ADMIN, w.child).state == "active"


def test_an_agent_sees_no_sme_action_and_is_refused_one(site: tuple[Server, Review]) -> None:
    s, w = site
    with browser(s, s.agent) as c:
        page = c.get(f"/ui/items/{w.child}").text
        assert 'data-testid="actions"' not in page and "/act/" not in page
        assert c.get(f"/ui/items/{w.child}/act/revoke").status_code == 403
        r = c.post(
            f"/ui/items/{w.parent}/act/revoke",
            data={"csrf": csrf(page), "rationale": "I am an agent"},
        )
        assert r.status_code == 403 and "forbidden" in r.text
    assert use.item(s.rt, ADMIN, w.parent).state == "active"


def test_the_what_changed_and_shadow_pages(site: tuple[Server, Review]) -> None:
    s, w = site
    import factgen

    use.observe(s.rt, ADMIN, [factgen.Observation("payment-api", "config.connection_pool.max", 20)])
    with browser(s, s.sme) as c:
        shadow = c.get("/ui/shadow").text
        assert f"/ui/items/{w.child}" in shadow and f"/ui/items/{w.hidden}" not in shadow
        assert 'data-testid="would-graduate">0<' in shadow
    start = use.utcnow()
    use.revoke(s.rt, ADMIN, w.parent, reason="wrong")
    with browser(s, s.sme) as c:
        page = c.get(
            "/ui/changes",
            params={"from": start.isoformat(), "subject": "payment-api"},
        ).text
        stopped = page[page.index('data-testid="stopped"') :]
        assert f"/ui/items/{w.parent}" in stopped and "transition" in stopped
        bad = c.get("/ui/changes", params={"from": "yesterday"})
        assert bad.status_code == 422 and "from" in bad.text


def test_a_revoked_token_is_logged_out(site: tuple[Server, Review]) -> None:
    s, _ = site
    made = use.create_token(s.rt, ADMIN, "sme-bob", role="sme")
    with browser(s, made.token) as c:
        assert c.get("/ui/").status_code == 200
        use.revoke_token(s.rt, ADMIN, made.info.id)
        assert c.get("/ui/").status_code == 303


def test_the_review_reads_over_the_json_api(site: tuple[Server, Review]) -> None:
    s, w = site
    from tests.caveat.test_http import client

    with client(s, s.sme) as sme, client(s, s.agent) as agent:
        queue = sme.get("/v1/review").json()
        assert [r["item_id"] for r in queue["shadow"]] == [w.child]  # not the hidden one
        assert queue["shadow"][0]["next_close"] == "wait"
        assert [g["code"] for g in queue["refusals"]] == ["subject_unresolved"]
        assert queue["refusals"][0]["count"] == 2
        [key] = queue["contested"]
        assert sorted(key["values"]) == ["40", "60"]
        d = sme.get(f"/v1/items/{w.child}/dossier").json()
        assert d["conditions"][0]["value"] == "UNKNOWN"
        assert d["conditions"][0]["to_observe"].startswith("observe config.connection_pool.max")
        assert [n["id"] for n in d["lineage"]["ancestors"]] == [w.parent]
        assert [n["id"] for n in d["lineage"]["descendants"]] == [w.grandchild]
        assert [w.parent, w.child] in d["lineage"]["edges"]
        assert "graduate" in d["actions"] and "promote" not in d["actions"]
        p = sme.get(f"/v1/items/{w.parent}/preview/revoke").json()
        assert (p["from_state"], p["to_state"]) == ("active", "revoked")
        assert sorted(n["id"] for n in p["reopens"]) == sorted([w.child, w.grandchild])
        illegal = sme.get(f"/v1/items/{w.child}/preview/promote").json()
        assert illegal["refusal"]["code"] == "illegal_transition"
        assert sme.get(f"/v1/items/{w.hidden}/dossier").status_code == 404
        assert sme.get(f"/v1/items/{w.child}/preview/explode").status_code == 422
        r = agent.get(f"/v1/items/{w.parent}/preview/revoke")
        assert r.status_code == 403 and r.json()["code"] == "forbidden"
        assert agent.get(f"/v1/items/{w.child}/dossier").json()["actions"] == []


# --- issue 25: the SME pages as an SME tried them -------------------------------------


def _row(page: str, marker: str) -> str:
    """The table row that holds ``marker``."""
    at = page.index(marker)
    return page[page.rindex("<tr", 0, at) : page.index("</tr>", at)]


def test_an_active_item_whose_conditions_are_false_says_so_on_its_page_and_in_the_queue(
    site: tuple[Server, Review],
) -> None:
    s, w = site
    import factgen

    with browser(s, s.sme) as c:
        # nothing observed: UNKNOWN is not FALSE, no banner and nothing in the section
        assert 'data-testid="false-now"' not in c.get(f"/ui/items/{w.parent}").text
        assert count(c.get("/ui/").text, "false") == 0
        use.observe(
            s.rt, ADMIN, [factgen.Observation("payment-api", "config.connection_pool.max", 25)]
        )
        page = c.get(f"/ui/items/{w.parent}").text
        banner = page[
            page.index('data-testid="false-now"') : page.index(
                "</div>", page.index('data-testid="false-now"')
            )
        ]
        assert "conditions are false now" in banner
        assert "config.connection_pool.max eq 20" in banner and 't-FALSE">FALSE' in banner
        assert '<code data-testid="fact">25</code>' in banner and "observed" in banner
        assert re.search(r"observed 20\d\d-\d\d-\d\d \d\d:\d\d UTC \((just now|\d+s ago)\)", banner)
        assert "is true" in banner  # when, and what would decide it
        # a shadow item with the same condition is not active: no banner
        assert 'data-testid="false-now"' not in c.get(f"/ui/items/{w.child}").text
        queue = c.get("/ui/").text
        assert count(queue, "false") == 1
        row = _row(queue, f'<tr data-item="{w.parent}"')
        assert "conditions false" in row and '<code data-testid="fact">25</code>' in row
        assert f"/ui/items/{w.parent}/act/refute?next=" in row  # acted on from the row
        # the subject filter applies to it as to every section
        assert count(c.get("/ui/", params={"subject": "PAYMENT"}).text, "false") == 1
        assert count(c.get("/ui/", params={"subject": "nobody"}).text, "false") == 0
        use.observe(
            s.rt, ADMIN, [factgen.Observation("payment-api", "config.connection_pool.max", 20)]
        )
        assert 'data-testid="false-now"' not in c.get(f"/ui/items/{w.parent}").text
        assert count(c.get("/ui/").text, "false") == 0


def test_queue_rows_act_through_the_preview_and_come_back(site: tuple[Server, Review]) -> None:
    s, w = site
    first, second = w.candidates
    with browser(s, s.sme) as c:
        queue = c.get("/ui/").text
        link = f'/ui/items/{first}/act/promote?next=/"'
        assert link in queue  # a candidate's holder, promoted from its row
        for held in w.contested:
            assert f"/ui/items/{held}/act/refute?next=/" in queue
        assert f"/ui/items/{w.child}/act/drop?next=/" in queue  # a shadow item's row
        form = c.get(f"/ui/items/{first}/act/promote", params={"next": "/"}).text
        assert 'name="next" value="/"' in form and 'data-testid="effects"' in form
        done = c.post(
            f"/ui/items/{first}/act/promote",
            data={"csrf": csrf(form), "rationale": "two cases agree", "next": "/"},
        )
        assert (
            done.status_code == 303
            and done.headers["location"] == f"/ui/?done=promote%20%23{first}"
        )
        assert f"Done: promote #{first}." in c.get(done.headers["location"]).text
        # from a section page, back to that page (its filter kept)
        here = "/queue/contested?subject=payment"
        form = c.get(f"/ui/items/{w.contested[0]}/act/refute", params={"next": here}).text
        back = c.post(
            f"/ui/items/{w.contested[0]}/act/refute",
            data={"csrf": csrf(form), "rationale": "60 was a typo", "next": here},
        )
        assert back.headers["location"].startswith("/ui/queue/contested?subject=payment&done=")
        # a next that leaves the pages is ignored
        form = c.get(f"/ui/items/{w.child}/act/drop").text
        away = c.post(
            f"/ui/items/{w.child}/act/drop",
            data={"csrf": csrf(form), "rationale": "not yet", "next": "//evil.example/"},
        )
        assert away.headers["location"] == f"/ui/items/{w.child}?done=drop"
    assert use.item(s.rt, ADMIN, first).state == "shadow"
    assert use.item(s.rt, ADMIN, second).state == "case"
    assert use.item(s.rt, ADMIN, w.contested[0]).state == "refuted"
    rows = use.audit_entries(s.rt, ADMIN, item_id=first, action="transition")
    assert (rows[-1].actor, rows[-1].detail["reason"]) == ("sme-alice", "two cases agree")


def test_a_refused_action_keeps_the_form_and_the_rationale(site: tuple[Server, Review]) -> None:
    s, w = site
    with browser(s, s.sme) as c:
        form = c.get(f"/ui/items/{w.child}/act/graduate", params={"next": "/"}).text
        use.drop(s.rt, ADMIN, w.child, rationale="someone else was faster")  # meanwhile
        r = c.post(
            f"/ui/items/{w.child}/act/graduate",
            data={"csrf": csrf(form), "rationale": "held in <three> incidents", "next": "/"},
        )
        assert r.status_code == 409 and 'data-testid="error"' in r.text
        assert "illegal_transition" in r.text and "Refused:" in r.text
        assert ">held in &lt;three&gt; incidents</textarea>" in r.text  # kept, escaped
        assert f'action="/ui/items/{w.child}/act/graduate"' in r.text
        assert 'name="next" value="/"' in r.text
        # an empty rationale: the same form, the error in it
        r = c.post(f"/ui/items/{w.parent}/act/revoke", data={"csrf": csrf(form), "rationale": ""})
        assert r.status_code == 422 and 'data-testid="error"' in r.text and "rationale" in r.text
    assert use.item(s.rt, ADMIN, w.child).state == "case"
    assert use.item(s.rt, ADMIN, w.parent).state == "active"


def test_a_missing_page_is_not_found_and_a_refusal_refused(site: tuple[Server, Review]) -> None:
    s, w = site
    with browser(s, s.sme) as c:
        for path in (f"/ui/items/{w.hidden}", "/ui/items/999999", "/ui/queue/nonsense", "/ui/nope"):
            r = c.get(path)
            assert r.status_code == 404 and "<h1>Not found:" in r.text, path
            assert "Refused" not in r.text
    with browser(s, s.agent) as c:
        r = c.get(f"/ui/items/{w.child}/act/revoke")
        assert r.status_code == 403 and "<h1>Refused:" in r.text


def test_the_refusal_tile_counts_what_the_cli_counts_and_groups_identical_ones(
    site: tuple[Server, Review],
) -> None:
    s, _ = site
    import claims

    bad = {
        "kind": "fact",
        "subject": "payment-api",
        "attribute": "pool_ok",
        "object": True,
        "required": ["config.connection_pool.max eq"],  # no value: unparsable
        "evidence": ["E-1"],
        "scope": {"axis": "case", "id": "INC-2"},
    }
    for _ in range(3):
        done = use.write_batch(s.rt, ADMIN, [claims.ItemWrite.model_validate(bad)])
        assert done.outcomes[0].code == "condition_unparsable"
    queue = use.review_queue(s.rt, ADMIN)
    assert queue.refusal_count == 5  # what `caveat review` prints: 2 + 3 refused writes
    with browser(s, s.sme) as c:
        page = c.get("/ui/").text
        assert count(page, "refusals") == queue.refusal_count
        row = _row(page, "<code>condition_unparsable</code>")
        assert row.count("<li data-refusal>") == 1 and 'data-times="3">3\u00d7' in row
        # the caret diagram keeps its lines: the message in a pre-wrapped monospace span
        found = re.search(r'<span class="msg diagram">([^<]*)</span>', row)
        assert found, row
        lines = found.group(1).split("\n")
        assert lines[-2] == "config.connection_pool.max eq" and lines[-1].strip() == "^"
        assert len(lines[-1]) - 1 == len("config.connection_pool.max eq")  # under the end
        css = c.get("/ui/static/caveat.css").text
        assert ".msg { white-space: pre-wrap; }" in css
    # two refusals of one code that differ stay two lines
    with browser(s, s.sme) as c:
        row = _row(c.get("/ui/").text, "<code>subject_unresolved</code>")
        assert row.count("<li data-refusal>") == 2 and "data-times" not in row


def test_lineage_boxes_show_whole_names(site: tuple[Server, Review]) -> None:
    s, w = site
    from tests.caveat._review_world import _write

    long = "checkout_latency_follows_pool_exhaustion_under_peak_load"
    kid = _write(s.rt, "INC-2", attribute=long, derived_from=[w.child])
    with browser(s, s.sme) as c:
        page = c.get(f"/ui/items/{w.child}").text
    svg = page[page.index('data-testid="lineage"') : page.index("</svg>")]
    assert f'class="nlabel">{long}</text>' in svg and "…" not in svg
    assert 'class="nlabel">payment-api</text>' in svg
    width = int(re.search(r'<rect x="\d+" y="\d+" width="(\d+)"', svg).group(1))  # type: ignore[union-attr]
    assert width >= len(long) * 7 and f'data-node="{kid}"' in svg


def test_durations_read_like_15m(site: tuple[Server, Review]) -> None:
    s, w = site
    from datetime import timedelta

    import factgen
    from caveat.web._pages import duration_text

    assert [duration_text(timedelta(seconds=n)) for n in (900, 5400, 86400, 90061)] == [
        "15m",
        "1h 30m",
        "1d",
        "1d 1h 1m 1s",
    ]
    assert duration_text(timedelta(milliseconds=250)) == "250ms"
    now = use.utcnow()
    use.observe(
        s.rt,
        ADMIN,
        [
            factgen.Observation(
                "payment-api",
                "config.connection_pool.max",
                20,
                observed_at=now - timedelta(minutes=15, seconds=20),
            )
        ],
    )
    # a permission refusal's secondary TTL (1 h) ran out: its reason says 1h, not 1:00:00
    from tests.caveat._review_world import _write

    ttl = _write(s.rt, "INC-2", attribute="no_write_access", content_type="permission_refusal")
    use.promote(s.rt, ADMIN, ttl, to="shadow")
    use.promote(s.rt, ADMIN, ttl, to="active")
    use.sweep(s.rt, ADMIN, now=now + timedelta(hours=2))
    with browser(s, s.sme) as c:
        item = c.get(f"/ui/items/{w.child}").text
        assert "15m ago" in item and "0:15" not in item
        queue = c.get("/ui/").text
        assert "secondary TTL of permission_refusal items (1h) ran out" in queue
        assert "1:00:00" not in queue and "3600s" not in queue


def test_what_changed_explains_its_window_matches_parts_and_lists_transitions(
    site: tuple[Server, Review],
) -> None:
    s, w = site
    admin = use.create_token(s.rt, ADMIN, "ops-admin", role="admin").token
    use.revoke(s.rt, ADMIN, w.parent, reason="disproved minutes ago")
    use.refute(s.rt, ADMIN, w.hidden, reason="restricted and wrong")
    with browser(s, s.sme) as c:
        page = c.get("/ui/changes").text  # the default window
        assert "compares <b>now</b> with <b>seven days ago</b>" in page
        assert "is in neither" in page
        moves = page[page.index('data-testid="transitions"') :]
        row = _row(moves, f'<tr data-item="{w.parent}" data-to="revoked"')
        assert "disproved minutes ago" in row and "active" in row
        reopened = _row(moves, f'<tr data-item="{w.child}" data-to="needs_reverification"')
        assert f"revocation of #{w.parent}" in reopened
        assert f'data-item="{w.hidden}"' not in moves  # an item the SME may not read
        # a part of a subject's name, in any case, as the queue matches it
        part = c.get("/ui/changes", params={"subject": "PAYMENT"})
        assert part.status_code == 200 and f'data-item="{w.parent}"' in part.text
        assert "Only items whose subject contains <b>PAYMENT</b>" in part.text
        none = c.get("/ui/changes", params={"subject": "nobody"}).text
        assert "No item you may read changed state" in none
        # an explicit window: no default-window sentence, the same filter on the diff
        start = (use.utcnow() - __import__("datetime").timedelta(hours=1)).isoformat()
        given = c.get("/ui/changes", params={"from": start, "subject": "pay"}).text
        assert "seven days ago" not in given and 'data-testid="transitions"' in given
    with browser(s, admin) as c:
        assert f'data-item="{w.hidden}" data-to="refuted"' in c.get("/ui/changes").text
    # the same list over HTTP, as the SME reads it
    from tests.caveat.test_http import client

    with client(s, s.sme) as sme:
        rows = sme.get("/v1/transitions", params={"subject": "payment"}).json()
        assert {(r["item"], r["to"]) for r in rows} >= {
            (w.parent, "revoked"),
            (w.child, "needs_reverification"),
        }
        assert w.hidden not in {r["item"] for r in rows}
        assert all(r["subject"] == "payment-api" for r in rows)
        # an instant without an offset is UTC, as at every route; a number is no instant
        naive = sme.get("/v1/transitions", params={"from": "2026-01-01T00:00:00"})
        assert (
            naive.json()
            == sme.get("/v1/transitions", params={"from": "2026-01-01T00:00:00Z"}).json()
        )
        bad = sme.get("/v1/transitions", params={"to": "0.5"})
        assert (bad.status_code, bad.json()["code"]) == (422, "invalid_input")
        assert "to: not an ISO 8601 instant" in bad.json()["detail"]
    # an agent lists the audit rows it wrote itself (none here); another tenant, its own
    with client(s, s.agent) as agent, client(s, s.other_tenant) as other:
        assert agent.get("/v1/transitions").json() == []
        theirs = other.get("/v1/transitions")
        assert theirs.status_code == 200 and "disproved minutes ago" not in theirs.text
    source = use.create_token(s.rt, ADMIN, "alertmanager", role="source").token
    with client(s, source) as hook:
        r = hook.get("/v1/transitions")
        assert r.status_code == 403 and r.json()["code"] == "forbidden"


def test_case_and_event_ids_link_to_their_audit_rows(site: tuple[Server, Review]) -> None:
    s, _ = site
    readable, hidden = resolved_incident(s.rt)
    with browser(s, s.sme) as c:
        queue = c.get("/ui/").text
        row = _row(queue, 'data-case="pd-Q1"')
        assert 'href="/ui/audit?case=pd-Q1"' in row
        assert 'href="/ui/audit?case=INC-4"' in queue  # a contested value's case
        page = c.get("/ui/audit", params={"case": "pd-Q1"}).text
        actions = re.findall(r'<tr data-action="(\w+)"', page)
        assert {"open_case", "cite", "awaiting_outcome"} <= set(actions)
        assert f'data-item="{readable}"' in page and f'data-item="{hidden}"' not in page
        assert c.get("/ui/audit").status_code == 422  # neither a case nor an event
    use.record_event(s.rt, ADMIN, type="deploy", subjects=["payment-api"])
    with browser(s, s.sme) as c:
        queue = c.get("/ui/").text
        found = re.search(r'href="/ui/audit\?event=(\d+)"', queue)
        assert found, "a re-opening's event is linked"
        page = c.get(f"/ui/audit?event={found.group(1)}").text
        assert '<tr data-action="event"' in page and '<tr data-action="transition"' in page


def test_what_changed_says_when_it_lists_only_the_newest_transitions(
    site: tuple[Server, Review], monkeypatch: pytest.MonkeyPatch
) -> None:
    s, w = site
    import caveat.app._review as review

    use.revoke(s.rt, ADMIN, w.parent, reason="wrong")  # three transitions, and the world's
    monkeypatch.setattr(review, "TRANSITIONS_LIMIT", 2)
    with browser(s, s.sme) as c:
        page = c.get("/ui/changes").text
        moves = page[page.index('data-testid="transitions"') :]
        assert "The newest 2 are listed" in moves
        assert len(re.findall(r'<tr data-item="\d+" data-to=', moves)) == 2
        assert f'data-item="{w.grandchild}" data-to="needs_reverification"' in moves  # newest
    monkeypatch.setattr(review, "TRANSITIONS_LIMIT", 1000)
    with browser(s, s.sme) as c:
        assert "are listed" not in c.get("/ui/changes").text


def test_an_item_citing_a_runbook_passage_shows_it_on_its_page(
    site: tuple[Server, Review],
) -> None:
    """Knowledge beside memory (model §6): an item whose evidence is a passage's ref links
    to it; its dossier shows the passage's document, heading and text while the SME may
    read it, and stops once the document is revoked."""
    import claims

    s, _ = site
    text = "# Payment API\n\n## Pool exhausted\n\nRestart the pods one at a time.\n"
    use.docs_import(s.rt, ADMIN, [claims.DocumentInput("runbooks/pay.md", text, title="Pay")])
    ref = claims.passage_ref("runbooks/pay.md", "pool-exhausted")
    body = {
        "kind": "fact",
        "subject": "payment-api",
        "attribute": "restart_one_pod_at_a_time",
        "object": True,
        "required": ["config.connection_pool.max eq 20"],
        "evidence": [ref],
        "scope": {"axis": "case", "id": "INC-1"},
    }
    item = use.write(s.rt, ADMIN, claims.ItemWrite.model_validate(body)).item_id
    from tests.caveat.test_http import client

    with client(s, s.sme) as sme:  # the JSON dossier, as its model names it
        [source] = sme.get(f"/v1/items/{item}/dossier").json()["evidence"]
        assert source["passage"]["heading_path"] == ["Payment API", "Pool exhausted"]
        assert source["passage"]["ref"] == ref
    with browser(s, s.sme) as c:
        page = c.get(f"/ui/items/{item}").text
        assert 'data-testid="passage"' in page and ref in page
        assert "Pay v1" in page and "Payment API / Pool exhausted" in page
        assert "Restart the pods one at a time." in page
        use.docs_revoke(s.rt, ADMIN, "runbooks/pay.md", reason="obsolete")
        page = c.get(f"/ui/items/{item}").text
        assert ref in page and "Restart the pods one at a time." not in page
