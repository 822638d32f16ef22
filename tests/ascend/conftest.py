"""Fixtures of the ascend_npu tests: `cann_headers`, CANN's real headers (tests/ascend/cann.py),
or a skip that says how to provide them."""

from __future__ import annotations

import pytest

from .cann import SKIP_REASON, headers


@pytest.fixture(scope="session")
def cann_headers():
    found = headers()
    if found is None:
        pytest.skip(SKIP_REASON)
    return found
