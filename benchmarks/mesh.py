"""Many devices on the cycle model: the tensor-parallel MLP and the expert-parallel MoE on 1, 2,
4 and 8 modelled Ascend 910B NPUs (the built-in machine and its `[interconnect]`), strong
scaling (the same problem on more devices). Prints, per program and device count, the modelled
time, the speed-up and parallel efficiency over one device, the bytes the collectives move
between devices and the communication share (the comm engines' busy time over every device's
time), then per collective its messages, algorithm and modelled time.

The cycle model is deterministic, so one run each (no medians): the figures are the model's,
not a host's. The programs are benchmarks/mesh/tp_mlp.wsp and ep_moe.wsp: the shapes of
examples/tp_mlp.wsp and examples/ep_moe.wsp are test-sized (a 128 x 512 MLP), too small for a
scaling figure, so these are simpler programs with weights 8 to 16 times larger, compiled with
`mesh={axis: p}` through the device lowering.

MPI: `wspc run --launcher mpi` is measured by benchmarks/mesh_mpi.py (real time per collective
against a bare mpi4py Allreduce of the same bytes).

    python benchmarks/mesh.py [--devices 1 --devices 2 ...] [--program tp_mlp|ep_moe]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ptowsp  # noqa: E402

HERE = Path(__file__).resolve().parent / "mesh"
PROGRAMS = {"tp_mlp": "tp", "ep_moe": "ep"}  # the program and its mesh axis


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
            module = ptowsp.load(str(HERE / f"{name}.wsp"))
            for p in counts:
                prog = module.compile(target="cpu_sim", mesh={PROGRAMS[name]: p})
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
        print("MPI (wspc run --launcher mpi): benchmarks/mesh_mpi.py")


if __name__ == "__main__":
    sys.exit(main())
