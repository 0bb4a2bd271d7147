"""The policy page in a real headless Chromium (as tests/caveat/test_web_browser.py
drives the SME pages): an admin follows the nav's Policy link, types a bad value and
sees the typed error beside the form it typed, previews a good one, applies it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, expect

from caveat import app as use
from tests.caveat.test_http import Server, serving
from tests.caveat.test_web_browser import _login, _shot, chromium  # noqa: F401
from tests.conftest import ADMIN


@pytest.fixture
def site(db_url: str) -> Iterator[tuple[Server, str]]:
    with serving(db_url) as s:
        yield s, use.create_token(s.rt, ADMIN, "admin-bo", role="admin").token


def test_an_admin_sets_a_key_on_the_policy_page(
    chromium: Browser,  # noqa: F811
    site: tuple[Server, str],
) -> None:
    s, admin = site
    page = _login(chromium, s, admin)
    page.get_by_role("link", name="Policy").click()
    expect(page).to_have_url(f"{s.base}/ui/policy")
    expect(page.get_by_test_id("version")).to_contain_text("Version 1")
    page.get_by_label("Key").fill("shadow.min_matched_cases")
    page.get_by_label("Value").fill("-2")
    page.get_by_role("button", name="Apply").click()
    expect(page.get_by_test_id("error")).to_contain_text("policy key shadow.min_matched_cases")
    expect(page.get_by_test_id("expected")).to_contain_text("an integer >= 0")
    expect(page.get_by_label("Value")).to_have_value("-2")  # kept as typed
    page.get_by_label("Value").fill("5")
    page.get_by_role("button", name="Preview").click()
    expect(page.get_by_test_id("preview")).to_contain_text("shadow.min_matched_cases: 3 → 5")
    _shot(page, "policy")
    assert use.policy_show(s.rt, ADMIN).version == 1
    page.get_by_role("button", name="Apply").click()
    expect(page.get_by_test_id("done")).to_contain_text("version 2: shadow.min_matched_cases = 5")
    assert use.policy_show(s.rt, ADMIN).policy.shadow.min_matched_cases == 5
