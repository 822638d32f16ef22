"""Trace export at scale: a million synthetic tasks (8 workers, 4 dispatchers, the cycle model's
records beside them) through `Trace.to_chrome_trace`, the median of a few runs against a 10 s
target (the bound tests/test_trace.py once asserted; tests check what is exported, never how
fast).

    python benchmarks/trace.py [--tasks 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from ptowsp.backends.cpu.trace import EVENT_DTYPE, SIMRESULT_DTYPE, Trace  # noqa: E402
from ptowsp.backends.machine import load_machine  # noqa: E402

TARGET_S = 10.0


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
    return Trace(ev, ["mm", "init", "norm"], replace(load_machine(None), clock_ghz=1.8), sim=sim)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    tr = synthetic(args.tasks)
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        tr.to_chrome_trace()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"to_chrome_trace, {args.tasks:,} tasks: median {med:.2f} s, best {min(times):.2f} s "
          f"(target < {TARGET_S:.0f} s{'' if med < TARGET_S else ': MISSED'})")


if __name__ == "__main__":
    main()
