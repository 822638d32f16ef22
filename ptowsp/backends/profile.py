"""Where a run's time goes, kernel by kernel: the table `wspc run --stats` prints, `--json`
gives as `kernels` and `Trace.summary()` shows (docs/running.md, "Per-kernel table").

    rows = kernel_rows(names, kernel, real_ns, ran, sim_cycles, work)
    print("\\n".join(table_lines(rows)))

The inputs are per-task columns (NumPy arrays, one entry per task of the run: its kernel index,
its real duration, whether it ran, its modelled duration) and what one task of each kernel moves
and computes (`work[k] = (bytes, flops)`, from the kernel's signature and ops); nothing here
times or models anything. Rows are sorted by real time, the largest first.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

ROW_FIELDS = ("kernel", "tasks", "tasks_run", "real_ms", "real_mean_us", "sim_cycles", "bytes",
              "flops", "gb_per_s", "gflop_per_s", "pipes")


def kernel_rows(names: Sequence[str], kernel: np.ndarray, real_ns: np.ndarray, ran: np.ndarray,
                sim_cycles: Optional[np.ndarray], work: Sequence[tuple[int, int]],
                pipes: Sequence[Optional[dict[str, int]]] = ()) -> list[dict[str, Any]]:
    """One row per kernel with at least one task (fields `ROW_FIELDS`), largest real time
    first. `real_ns` counts only where `ran`; `sim_cycles` None: the model did not replay;
    `pipes`: per kernel, the cycles one task keeps each pipe busy in the model (None or
    missing: `pipes` is None in the row)."""
    n = max(len(names), int(kernel.max(initial=-1)) + 1)
    k = kernel.astype(np.int64)
    tasks = np.bincount(k, minlength=n)
    runs = np.bincount(k, weights=ran.astype(np.float64), minlength=n)
    real = np.bincount(k, weights=np.where(ran, real_ns, 0).astype(np.float64), minlength=n)
    sim = (np.bincount(k, weights=sim_cycles.astype(np.float64), minlength=n)
           if sim_cycles is not None else None)
    rows = []
    for i in np.nonzero(tasks)[0].tolist():
        t, r, ns = int(tasks[i]), int(runs[i]), float(real[i])
        b, f = (int(x) * t for x in (work[i] if i < len(work) else (0, 0)))
        rows.append({
            "kernel": names[i] if i < len(names) else f"kernel{i}",
            "tasks": t, "tasks_run": r,
            "real_ms": ns / 1e6, "real_mean_us": ns / r / 1e3 if r else 0.0,
            "sim_cycles": int(sim[i]) if sim is not None else None,
            "bytes": b, "flops": f,
            # bytes per ns are GB/s, flops per ns GFLOP/s
            "gb_per_s": b / ns if ns > 0 else None,
            "gflop_per_s": f / ns if ns > 0 and f else None,
            "pipes": ({p: c * t for p, c in pipes[i].items()}
                      if i < len(pipes) and pipes[i] is not None and sim is not None else None)})
    rows.sort(key=lambda row: (-row["real_ms"], -(row["sim_cycles"] or 0), row["kernel"]))
    return rows


def table_lines(rows: Sequence[dict[str, Any]], indent: str = "  ") -> list[str]:
    """The rows as a short text table: one line per kernel, a header first."""
    if not rows:
        return []
    total = sum(r["real_ms"] for r in rows)
    width = max(6, *(len(r["kernel"]) for r in rows))
    head = (f"{indent}{'kernel':<{width}} {'tasks':>8} {'real ms':>9} {'%':>5} {'mean us':>9} "
            f"{'sim cycles':>12} {'MB':>9} {'GB/s':>7} {'GFLOP/s':>8}")
    lines = [head]
    for r in rows:
        share = f"{100.0 * r['real_ms'] / total:.0f}" if total > 0 else "-"
        sim = f"{r['sim_cycles']:,}" if r["sim_cycles"] is not None else "-"
        lines.append(f"{indent}{r['kernel']:<{width}} {r['tasks']:>8,} {r['real_ms']:>9.3f} "
                     f"{share:>5} {r['real_mean_us']:>9.2f} {sim:>12} {r['bytes'] / 1e6:>9.2f} "
                     f"{_rate(r['gb_per_s']):>7} {_rate(r['gflop_per_s']):>8}")
    return lines


def _rate(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.2f}"


__all__ = ["ROW_FIELDS", "kernel_rows", "table_lines"]
