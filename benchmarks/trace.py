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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.trace_data import synthetic  # noqa: E402

TARGET_S = 10.0


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
