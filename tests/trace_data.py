"""A synthetic trace of `n` tasks (8 workers, 4 dispatchers, 3 kernels, the cycle model's
records beside them): what tests/test_trace.py exports and benchmarks/trace.py times."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ptowsp.backends.cpu.trace import EVENT_DTYPE, SIMRESULT_DTYPE, Trace
from ptowsp.backends.machine import load_machine

MACHINE = replace(load_machine(None), clock_ghz=1.8)  # 1.8 GHz, 24 cube and 48 vector cores
KERNELS = ["mm", "init", "norm"]


def synthetic(n: int) -> Trace:
    ev = np.zeros(n, EVENT_DTYPE)
    ev["kernel"] = np.arange(n) % 3
    ev["worker"], ev["dispatcher"], ev["stream"] = np.arange(n) % 8, np.arange(n) % 4, -1
    ev["ncoords"], ev["coords"][:, 0], ev["coords"][:, 1] = 2, np.arange(n) // 1000, np.arange(n)
    ev["start_ns"] = np.arange(n) * 10
    ev["end_ns"] = ev["start_ns"] + 7
    sim = np.zeros(n, SIMRESULT_DTYPE)
    sim["start"] = np.arange(n) * 100
    sim["finish"], sim["unit"], sim["core"] = sim["start"] + 90, 1, np.arange(n) % 24
    sim["dispatcher"], sim["group"] = ev["dispatcher"], -1
    return Trace(ev, list(KERNELS), MACHINE, sim=sim)
