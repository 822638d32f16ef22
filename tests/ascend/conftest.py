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


@pytest.fixture(autouse=True)
def plan_is_the_emitters(monkeypatch):
    """Every kernel these tests emit, at every chunk of rows the emitter's search measures:
    the UB plan below both back ends (`backends/ub_plan.py`, which the cycle model costs) asks
    for the buffers the emitter asks for, so its footprint and chunking are the emitter's. A
    writer that changes its temporaries (`Frame.temp`) declares them in `UbPlan` too."""
    from ptowsp.backends.ascend.aicore import kernel as K

    from .ub_plan_check import check_measure

    monkeypatch.setattr(K.KernelEmitter, "measure",
                        classmethod(check_measure(K.KernelEmitter.measure.__func__)))
