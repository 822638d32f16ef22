"""The whole emitted ascend_npu tree run end to end on the host, with nothing of cpu_sim in it:
host/main.asc (the CANN 8 route: aicpu/expand.aicpu compiled into the host program) + the
tree's own aicore/dispatch.asc + its aicore/kernel_*.h, compiled with g++ against the stand-in
ACL (stub_acl/) and the CPU implementation of the Ascend C API (ascendc_cpu/kernel_operator.h,
whose rule checks stay on: UB capacity, alignment, queue discipline, pipe synchronisation).
The dispatcher's `wsp_dispatch<<<blocks, nullptr, stream>>>(...)` is rewritten into a call of
the stub ACL's wsp_stub_launch (hostrun.host_launcher), which runs the real dispatcher kernel
on every block of the launch in turn, GetBlockIdx() reporting the block.

Per program: the tree's scripts/gen_data.py writes the inputs and, with `--target ref`, the
ref back end's outputs (`ptowsp.load(...).compile("ref").run(...)`); the host binary runs on
them; every output must equal ref's to test_aicore's tolerances (bit for bit when every
kernel op is exactly specified, else ascendc_cpu/harness.py's TOL, or TOL_MATMUL when a kernel
multiplies matrices). So this proves that the three sides agree on the ABI as emitted (plan
words, task records, control block, tile addresses and strides, scalar bits), that the
dispatcher runs every task of every wave on its block with the right kernel, and that the
segment loop (flushes, waves, host copies of the data the expander reads) composes with the
real kernels into the program's result.

Programs: rmsnorm (segments of 4 tasks), softmax (round_robin(2) over 3 blocks, the last a
partial tile), swiglu_ffn (matmul kernels, a scratch tensor between two task groups),
attention_varlen (ragged: the expander reads seq_lens, with a partial, an empty and a full
sequence, S not a multiple of the block; round_robin(4)), and
megakernel (CSP: pipes with channel slots in `main`, pinned per-tile dispatch in `per_tile`).
None of them had to be left out.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.ir.passes import optimize

from .ascendc_cpu import harness as H
from .hostrun import build_host, run
from .streams import ROOT

pytestmark = [pytest.mark.cc]

# (example, schedule, symbols, index inputs, wsp_main options)
CASES = [
    ("rmsnorm", "main", {"B": 2, "T": 3}, {}, ["-c", "4", "-b", "3"]),
    ("softmax", "main", {"R": 45}, {}, ["-b", "3"]),
    ("swiglu_ffn", "main", {"T": 32}, {}, ["-b", "2"]),
    # seq_lens: a partial last block, an empty sequence, the whole of S (a partial last block)
    ("attention_varlen", "main", {"B": 3, "H": 2, "S": 130}, {"seq_lens": [70, 0, 130]},
     ["-b", "4"]),
    ("megakernel", "main", {"N": 5}, {}, ["-c", "4"]),
    ("megakernel", "per_tile", {"N": 5}, {}, ["-b", "2"]),
]


def build(tmp: Path, example: str, schedule: str):
    """The tree and its host binary: main.asc + expand.aicpu + dispatch.asc with the kernels."""
    module = ptowsp.load(str(ROOT / f"examples/{example}.wsp"))
    ir, _ = optimize(module.ir, 2)
    tree, exe = build_host(tmp, ir, schedule)
    return tree, exe, ir


def tolerance(ir) -> dict | None:
    """None: bit for bit (every op exact); else the dtype table test_aicore uses."""
    if all(H.exact(k) for k in ir.kernels):
        return None
    return H.TOL_MATMUL if any(op.op == "matmul" for k in ir.kernels for op in k.ops) else H.TOL


@pytest.mark.parametrize("example, schedule, syms, given, opts", CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_tree_runs_end_to_end(tmp_path, example, schedule, syms, given, opts):
    tree, exe, ir = build(tmp_path, example, schedule)
    data = tmp_path / "data"
    binds = [f"{k}={v}" for k, v in syms.items()]
    cmd = [sys.executable, str(tree / "scripts/gen_data.py"), "--data", str(data),
           "--target", "ref", *binds]
    for name, values in given.items():
        path = tmp_path / f"{name}.npy"
        decl = next(t for t in ir.tensors if t.name == name)
        np.save(path, np.asarray(values, H.NP[decl.dtype]))
        cmd += ["--input", f"{name}={path}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    done = run(exe, data, *opts, *binds)
    assert done.returncode == 0, done.stdout + done.stderr
    tasks, segments, waves = map(int, re.search(
        r"(\d+) tasks in (\d+) segments, (\d+) waves", done.stdout).groups())
    assert tasks > 0 and segments >= (2 if "-c" in opts else 1)
    calls = (data / "acl.log").read_text().split()
    assert calls.count("<<<wsp_dispatch>>>") == waves  # one launch per wave
    assert calls[0] == "aclInit" and calls[-1] == "aclFinalize"
    tol = tolerance(ir)
    expected = sorted((data / "expected").glob("*.npy"))
    assert expected
    for path in expected:
        want = np.load(path)
        got = np.load(data / "output" / path.name)
        assert got.shape == want.shape and got.dtype == want.dtype, path.name
        msg = f"{example}/{schedule}: {path.stem}"
        if tol is None or not np.issubdtype(want.dtype, np.floating):
            np.testing.assert_array_equal(got, want, err_msg=msg + " (exact)")
            continue
        dtype = next(t.dtype for t in ir.tensors if t.name == path.stem)
        rt, at = tol[dtype]
        w = want.astype(np.float64)
        scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=1.0))
        np.testing.assert_allclose(got.astype(np.float64), w, rtol=rt, atol=at * scale,
                                   equal_nan=True, err_msg=msg)
