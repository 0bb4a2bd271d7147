"""Fixtures of the lifecycle tests."""

from __future__ import annotations

import pytest

from tests.conftest import Store
from tests.lifecycle.helpers import Life


@pytest.fixture
def life(store: Store) -> Life:
    """The acme store with case INC-1 open about payment-api."""
    driver = Life(store)
    driver.open("INC-1")
    return driver
