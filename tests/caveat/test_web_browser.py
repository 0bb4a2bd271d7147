"""The SME pages in a real headless Chromium (Debian's ``chromium``, driven by Playwright
with ``executable_path``: no browser download), over a server on loopback logged in
as the application role.

An SME logs in, opens the queue, opens a shadow item, promotes it, revokes its
parent, and finds the descendants re-opened on the item page and in its history;
an agent finds no SME action and is refused one posted directly. With
``CAVEAT_SCREENSHOTS=DIR`` (``make screenshots``) the walk also saves the
screenshots docs/sme.md shows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

import factgen
from caveat import app as use
from tests.caveat._review_world import Review, resolved_incident, review_world
from tests.caveat.test_http import Server, serving
from tests.conftest import ADMIN

CHROMIUM = Path(os.environ.get("CAVEAT_CHROMIUM", "/usr/bin/chromium"))
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LAPTOP = {"width": 1366, "height": 820}


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    # a missing browser fails the suite: `make test` installs Debian's chromium
    assert CHROMIUM.exists(), f"no Chromium at {CHROMIUM}: run `make browser` (Debian's chromium)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


@pytest.fixture
def site(db_url: str) -> Iterator[tuple[Server, Review]]:
    with serving(db_url) as s:
        yield s, review_world(s.rt)


def _shot(page: Page, name: str) -> None:
    where = os.environ.get("CAVEAT_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(where) / f"sme-{name}.png"), full_page=True)


def _login(browser: Browser, s: Server, token: str) -> Page:
    page = browser.new_context(viewport=LAPTOP).new_page()
    page.goto(f"{s.base}/ui/")
    expect(page).to_have_url(f"{s.base}/ui/login?next=/ui/")
    page.get_by_label("API token").fill(token)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(f"{s.base}/ui/")
    return page


def test_an_sme_promotes_a_shadow_item_and_revokes_its_parent(
    chromium: Browser, site: tuple[Server, Review]
) -> None:
    s, w = site
    # what an SME usually finds: the pool observed, a human's confirmation, a citation
    use.observe(s.rt, ADMIN, [factgen.Observation("payment-api", "config.connection_pool.max", 20)])
    use.attach_evidence(
        s.rt, ADMIN, w.child, "E-1", stance="supports", strength=0.8, source_kind="human_confirm"
    )
    page = _login(chromium, s, s.sme)
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    expect(page.get_by_test_id("who")).to_contain_text("sme-alice")
    shadow = page.locator("#shadow")
    expect(shadow.locator("tr[data-item]")).to_have_count(1)  # not the restricted one
    _shot(page, "queue")

    # open the shadow item and promote it (early graduation), with a rationale
    shadow.get_by_role("link", name=f"#{w.child}", exact=True).click()
    expect(page).to_have_url(f"{s.base}/ui/items/{w.child}")
    expect(page.get_by_test_id("state")).to_have_text("shadow")
    expect(page.get_by_test_id("conditions")).to_contain_text("TRUE")
    expect(page.get_by_test_id("links")).to_contain_text("supports")
    _shot(page, "item")
    page.get_by_role("link", name="Graduate to active").click()
    expect(page.get_by_test_id("effects")).to_contain_text("active")
    page.get_by_label("Rationale").fill("held in three incidents")
    page.get_by_role("button", name="Graduate to active").click()
    expect(page.get_by_test_id("done")).to_contain_text("graduate")
    expect(page.get_by_test_id("state")).to_have_text("active")
    assert use.item(s.rt, ADMIN, w.child).state == "active"

    # its parent, from the lineage graph: the preview names what the revocation re-opens
    page.locator(f'[data-testid="lineage"] a[data-node="{w.parent}"]').click()
    expect(page).to_have_url(f"{s.base}/ui/items/{w.parent}")
    page.get_by_role("link", name="Revoke").click()
    reopens = page.get_by_test_id("reopens")
    expect(reopens.locator("li")).to_have_count(2)
    expect(reopens).to_contain_text(f"#{w.child}")
    expect(reopens).to_contain_text(f"#{w.grandchild}")
    assert use.item(s.rt, ADMIN, w.parent).state == "active"  # the preview changed nothing
    page.get_by_label("Rationale").fill("the postmortem disproved it")
    page.get_by_role("button", name="Revoke").click()
    expect(page.get_by_test_id("state")).to_have_text("revoked")
    expect(page.get_by_test_id("actions")).not_to_contain_text("Revoke")

    # the descendants are re-opened, on their page and in their history
    page.locator(f'[data-testid="lineage"] a[data-node="{w.child}"]').click()
    expect(page.get_by_test_id("state")).to_have_text("needs reverification")
    history = page.get_by_test_id("history")
    reopened = history.locator('tr[data-action="transition"][data-code="needs_reverification"]')
    expect(reopened).to_have_count(1)
    expect(reopened).to_contain_text(f"revocation of #{w.parent}")
    expect(history.locator('tr[data-code="active"]')).to_contain_text("held in three incidents")
    graph = page.get_by_test_id("lineage")
    expect(graph.locator(f'a[data-node="{w.parent}"]')).to_have_attribute("data-state", "revoked")
    expect(graph.locator(f'a[data-node="{w.grandchild}"]')).to_have_attribute(
        "data-state", "needs_reverification"
    )
    # and in the queue's re-opened section
    page.get_by_role("navigation").get_by_role("link", name="Queue").click()
    expect(page.locator("#reopened tr[data-item]")).to_have_count(2)
    entries = use.audit_entries(s.rt, ADMIN, item_id=w.parent)
    assert entries[-1].actor == "sme-alice"
    assert entries[-1].detail["reason"] == "the postmortem disproved it"


def test_an_agent_sees_no_sme_action_and_a_direct_post_is_refused(
    chromium: Browser, site: tuple[Server, Review]
) -> None:
    s, w = site
    page = _login(chromium, s, s.agent)
    page.goto(f"{s.base}/ui/items/{w.parent}")
    expect(page.get_by_test_id("state")).to_have_text("active")
    expect(page.get_by_test_id("actions")).to_have_count(0)
    expect(page.locator('a[href*="/act/"]')).to_have_count(0)
    # a post of its own, with the session's own CSRF token: the server refuses it
    csrf = page.locator('input[name="csrf"]').first.get_attribute("value")
    assert csrf
    answer = page.request.post(
        f"{s.base}/ui/items/{w.parent}/act/revoke",
        form={"csrf": csrf, "rationale": "an agent tries"},
        max_redirects=0,
    )
    assert answer.status == 403 and "forbidden" in answer.text()
    page.goto(f"{s.base}/ui/items/{w.parent}/act/revoke")
    expect(page.get_by_test_id("code")).to_have_text("forbidden")
    assert use.item(s.rt, ADMIN, w.parent).state == "active"


def test_an_sme_closes_a_case_awaiting_its_outcome_from_the_queue(
    chromium: Browser, site: tuple[Server, Review]
) -> None:
    s, _ = site
    resolved_incident(s.rt)
    page = _login(chromium, s, s.sme)
    row = page.locator('#awaiting tr[data-case="pd-Q1"]')
    expect(row).to_contain_text("source:pagerduty")
    expect(row.locator("[data-cited]")).to_have_attribute("data-cited", "1")
    row.get_by_role("button", name="rejected").click()
    expect(page.get_by_role("status")).to_have_text("Done: closed case pd-Q1 as rejected.")
    expect(page.locator('[data-count="awaiting"]')).to_have_text("0")
    expect(page.locator('tr[data-case="pd-Q1"]')).to_have_count(0)
    closed = use.audit_entries(s.rt, ADMIN, action="close_case")
    assert [(r.actor, r.code) for r in closed] == [("sme-alice", "rejected")]


def test_an_sme_acts_from_queue_rows_and_a_refused_action_keeps_its_form(
    chromium: Browser, site: tuple[Server, Review]
) -> None:
    s, w = site
    first, _ = w.candidates
    page = _login(chromium, s, s.sme)
    # a promotion candidate promoted from its row, through the preview, back to the queue
    page.locator("#candidates").get_by_role("link", name=f"Promote #{first}").click()
    expect(page).to_have_url(f"{s.base}/ui/items/{first}/act/promote?next=/")
    expect(page.get_by_test_id("effects")).to_contain_text("shadow")
    page.get_by_label("Rationale").fill("two cases agree")
    page.get_by_role("button", name="Promote to shadow").click()
    expect(page.get_by_role("status")).to_have_text(f"Done: promote #{first}.")
    expect(page.locator(f'#shadow tr[data-item="{first}"]')).to_have_count(1)
    assert use.item(s.rt, ADMIN, first).state == "shadow"

    # a graduation from the shadow row, refused because someone dropped it meanwhile
    row = page.locator(f'#shadow tr[data-item="{w.child}"]')
    row.get_by_role("link", name=f"Graduate #{w.child}").click()
    page.get_by_label("Rationale").fill("held in three incidents,\nsee INC-2 and INC-4")
    use.drop(s.rt, ADMIN, w.child, rationale="someone else was faster")
    page.get_by_role("button", name="Graduate to active").click()
    error = page.get_by_test_id("error")
    expect(error).to_contain_text("illegal_transition")
    expect(page.get_by_label("Rationale")).to_have_value(
        "held in three incidents,\nsee INC-2 and INC-4"
    )
    expect(page.get_by_role("button", name="Graduate to active")).to_be_visible()
    assert use.item(s.rt, ADMIN, w.child).state == "case"
    page.get_by_role("link", name="Cancel").click()
    expect(page).to_have_url(f"{s.base}/ui/")


def test_what_an_sme_reads_keeps_its_shape(chromium: Browser, site: tuple[Server, Review]) -> None:
    """The caret diagram keeps its lines and its column; lineage boxes hold whole names."""
    s, w = site
    import claims
    from tests.caveat._review_world import _write

    bad = {
        "kind": "fact",
        "subject": "payment-api",
        "attribute": "pool_ok",
        "object": True,
        "required": ["config.connection_pool.max eq"],
        "evidence": ["E-1"],
        "scope": {"axis": "case", "id": "INC-2"},
    }
    use.write_batch(s.rt, ADMIN, [claims.ItemWrite.model_validate(bad)])
    long = "checkout_latency_follows_pool_exhaustion_under_peak_load"
    _write(s.rt, "INC-2", attribute=long, derived_from=[w.child])
    page = _login(chromium, s, s.sme)
    page.goto(f"{s.base}/ui/queue/refusals")
    diagram = page.locator(".msg.diagram").first
    expect(diagram).to_have_css("white-space", "pre-wrap")
    lines = diagram.inner_text().split("\n")
    assert lines[-2:] == ["config.connection_pool.max eq", " " * 29 + "^"]
    page.goto(f"{s.base}/ui/items/{w.child}")
    overflow = page.evaluate(
        """() => [...document.querySelectorAll('[data-testid=lineage] a')].flatMap(a => {
            const box = a.querySelector('rect').getBBox();
            return [...a.querySelectorAll('text')]
              .filter(t => t.getBBox().x + t.getBBox().width > box.x + box.width - 4)
              .map(t => t.textContent);
        })"""
    )
    assert overflow == []
    expect(page.get_by_test_id("lineage")).to_contain_text(long)
