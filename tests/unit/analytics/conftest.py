"""A Spark session for the analytics tests (local mode). Missing Spark or Java fails them."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Any:
    from gateway.analytics.spark import session

    return session("local[2]", app_name="kgw-tests", driver_memory="2g")
