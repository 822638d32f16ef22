"""Many devices on the cycle model: the tensor-parallel MLP and the expert-parallel MoE on 1, 2,
4 and 8 modelled Ascend 910B NPUs (the built-in machine and its `[interconnect]`), strong
scaling (the same problem on more devices). Prints, per program and device count, the modelled
time, the speed-up and parallel efficiency over one device, the bytes the collectives move and
the communication share (the comm engines' busy time over every device's time), and per
collective its messages, algorithm and modelled time.

The cycle model is deterministic, so one run each (no medians): the figures are the model's,
not a host's. The programs are benchmarks/mesh/*.wsp.in: the device lowering's output written
out by hand (each tensor's leading device dimension, every task on device `d`, each
collective's messages as kernels of their own that this script gives their `Kernel.comm`),
since the lowering of `mesh` programs (ir/devices.py, docs/distributed.md) was not merged when
this was written; once it is, examples/tp_mlp.wsp and examples/ep_moe.wsp run through it are
the programs to measure. Compiled at -O0, so that no pass merges a collective's copy into its
neighbours.

MPI: `wspc run --launcher mpi` (the mpi engineer's part) is not measured here; its real
timings will be added beside these modelled ones.

    python benchmarks/mesh.py [--devices 1 --devices 2 ...] [--program tp_mlp|ep_moe]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ptowsp  # noqa: E402
from ptowsp import driver, sym  # noqa: E402
from ptowsp.api import Program  # noqa: E402
from ptowsp.ir import nodes as N  # noqa: E402
from ptowsp.ir.visit import rewrite  # noqa: E402

HERE = Path(__file__).resolve().parent / "mesh"


def tp_mlp(p: int) -> tuple[str, dict]:
    """The TP MLP's text for p devices and its collective kernels: {kernel: Comm}."""
    tile = 32 * 64 * 4  # TB x DB f32: one allreduce message's destination tile
    text = (HERE / "tp_mlp.wsp.in").read_text().format(
        P=p, srcs=", ".join(f"src_{i}: In[Tile[TB, DB, f32]]" for i in range(p)),
        sum=" + ".join(f"src_{i}" for i in range(p)),
        views=", ".join(f"src_{i} = Zp[{i}, t*TB : t*TB + TB, c*DB : c*DB + DB]"
                        for i in range(p)))
    return text, {"ar": N.Comm("allreduce", "tp", p, sym.const((p - 1) * tile), "sum")}


def ep_moe(p: int) -> tuple[str, dict]:
    """The EP MoE's text for p devices and its collective kernels."""
    c = 2048 // (8 * p)
    text = (HERE / "ep_moe.wsp.in").read_text().format(P=p)
    return text, {"a2a": N.Comm("all_to_all", "ep", p, sym.const(c * 256 * 4), None)}


PROGRAMS = {"tp_mlp": tp_mlp, "ep_moe": ep_moe}


def compiled(text: str, comms: dict, p: int) -> Program:
    """The module with every task on device `d` of a one-axis mesh of p devices and the
    collectives' kernels given their Comm, built for cpu_sim."""
    ir, _ = driver.optimize(ptowsp.parse(text).ir, 0)
    axis = next(iter(comms.values())).over
    d = sym.var("d")

    def place(st):
        return [dataclasses.replace(st, device=d)] if isinstance(st, N.Task) else [st]

    kernels = tuple(dataclasses.replace(k, comm=comms[k.name]) if k.name in comms else k
                    for k in ir.kernels)
    ir = dataclasses.replace(
        ir, kernels=kernels, mesh=N.Mesh((N.MeshAxis(axis, sym.const(p)),)),
        schedules=tuple(dataclasses.replace(s, body=rewrite(s.body, place))
                        for s in ir.schedules))
    t = driver.target("cpu_sim")
    runnable = driver.open_artifact(t, driver.build(t, driver.emit(t, ir, "main", {})))
    return Program(ir, "main", "cpu_sim", runnable, 0.0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, action="append", choices=[1, 2, 4, 8])
    ap.add_argument("--program", action="append", choices=sorted(PROGRAMS))
    args = ap.parse_args()
    counts = sorted(set(args.devices or [1, 2, 4, 8]))
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("WSPC_CACHE_DIR", str(Path(tmp) / "cache"))
        for name in args.program or ["tp_mlp", "ep_moe"]:
            print(f"{name}: modelled on the built-in ascend910b, strong scaling")
            print(f"  {'devices':>7} {'time us':>10} {'speed-up':>9} {'efficiency':>10} "
                  f"{'comm MB':>8} {'comm share':>10}")
            base = None
            rows = []
            for p in counts:
                prog = compiled(*PROGRAMS[name](p), p)
                st = prog.simulate(trace=True)
                us = st.extra["simulated_us"]
                base = base if base is not None else us * counts[0]
                comm = st.extra.get("comm_cycles", 0)
                share = comm / (p * st.total_cycles) if st.total_cycles else 0.0
                moved = sum(c["bytes"] for c in st.extra.get("collectives", []))
                print(f"  {p:>7} {us:>10.1f} {base / us:>8.2f}x {base / (p * us):>9.1%} "
                      f"{moved / 1e6:>8.2f} {share:>9.1%}")
                rows.append((p, st.extra.get("collectives", [])))
            for p, coll in rows:
                for c in coll:
                    print(f"  {p} devices: `{c['collective']}` {c['kind']} over {c['over']}: "
                          f"{c['messages']} messages ({c['algorithm']}, "
                          f"{c['message_cycles'] or 0} cycles each), {c['bytes'] / 1e6:.2f} MB, "
                          f"{c['modelled_us']:.1f} us from first to last")
        print("MPI (wspc run --launcher mpi): not measured here; the mpi part adds it")


if __name__ == "__main__":
    sys.exit(main())
