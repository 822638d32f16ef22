"""A kernel too big for the Unified Buffer is reported where the user can fix it, through the
`wspc compile --target ascend_npu` command: at the call that creates the `Constexpr`
specialisation (naming its values, the kernel's declaration as a note), with a caret, exit 1
and no tree written. And the FFN case of issue 21 (three 512 KB f32 weight tiles, no
diagnostic): its weights are matmul right operands streamed from GM in 16 KiB blocks, so the
kernel needs no UB for them, compiles and runs (on the CPU Ascend C, equal to ref and NumPy),
as it should.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.ascend import aicore

from .ascendc_cpu import harness as H

pytestmark = pytest.mark.cc

ROOT = Path(__file__).resolve().parents[2]

ATTN = """module spec
input Q: f32[1024, 256]
output O: f32[1024, 256]

kernel attn(q: In[Tile[R, K, f32]], o: Out[Tile[R, K, f32]], K: Constexpr[i32],
            R: Constexpr[i32]) {
    store(o, transpose(transpose(q)) * 2)
}

workload w() {
    attn(q = Q[0:8, 0:64], o = O[0:8, 0:64], K = 64, R = 8)
    attn(q = Q[0:256, :], o = O[0:256, :], K = 256, R = 256)
}
"""


def _compile(tmp_path: Path, src: str, name: str):
    path = tmp_path / f"{name}.wsp"
    path.write_text(src)
    out = tmp_path / "tree"
    done = subprocess.run([sys.executable, "-m", "ptowsp", "compile", path.name, "--target",
                           "ascend_npu", "-o", "tree"], capture_output=True, text=True,
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return done, out


def test_overflow_is_reported_at_the_specialising_call(tmp_path):
    done, out = _compile(tmp_path, ATTN, "spec")
    assert done.returncode == 1, done.stderr
    err = done.stderr
    assert err.startswith("spec.wsp:12:5: error: kernel `attn` with K = 256, R = 256 needs "), err
    assert "bytes of Unified Buffer" in err and "Traceback" not in err
    assert "  12 |     attn(q = Q[0:256, :]" in err and "^^^^" in err
    assert "kernel `attn` is declared here" in err and "spec.wsp:5:8" in err
    assert "smaller Constexpr values than K = 256, R = 256 at this call" in err
    assert not out.exists() and done.stdout == ""


def test_small_specialisation_compiles():
    m = ptowsp.parse(ATTN.replace("    attn(q = Q[0:256, :], o = O[0:256, :], K = 256, R = 256)\n",
                                  ""), "spec.wsp").ir
    files = aicore.emit_aicore(m)
    assert any(p.startswith("aicore/kernel_attn") for p in files)


FFN = """module ffn
input X: f32[16, 512]
input W1: f32[512, 256]
input W3: f32[512, 256]
input W2: f32[256, 512]
output Y: f32[16, 512]

kernel ffn(x: In[Tile[16, 512, f32]], w1: In[Tile[512, 256, f32]], w3: In[Tile[512, 256, f32]],
           w2: In[Tile[256, 512, f32]], y: Out[Tile[16, 512, f32]]) {
    store(y, matmul(silu(matmul(x, w1)) * matmul(x, w3), w2))
}

workload w() { ffn(x = X, w1 = W1, w3 = W3, w2 = W2, y = Y) }
"""


def test_ffn_weights_stream_from_gm(tmp_path):
    """Three 512 KB f32 weights, each larger than the whole UB: no diagnostic, because none is
    resident (each streams through a 16 KiB queue), the UB summary says what the kernel holds,
    and the kernel runs on the CPU Ascend C equal to ref and to NumPy."""
    m = ptowsp.parse(FFN, "ffn.wsp").ir
    # the vector path (split, its matmuls would run on the cube: kept on the vector path as a
    # task passing it a gather view would keep it)
    files = aicore.emit_aicore(m, frozenset({"ffn"}))
    text = files["aicore/kernel_ffn.h"]
    ub = next(ln for ln in text.split("\n") if "// UB:" in ln)
    used = int(ub.split("UB: ")[1].split(" ")[0])
    assert used <= aicore.UB_BUDGET
    assert text.count("q_mm") >= 3  # one streaming queue per weight
    (k,) = m.kernels
    lib = H.build([H.Unit("ffn", files, [k])], tmp_path)
    task = H.random_task(k, np.random.default_rng(4))
    got = H.run_task(lib, "ffn", k, task)
    H.compare(k, got, H.ref_outputs(k, task))
    x, w1, w3, w2 = (task.inputs[n].astype(np.float64) for n in ("x", "w1", "w3", "w2"))
    h = x @ w1
    want = (h / (1 + np.exp(-h)) * (x @ w3)) @ w2
    np.testing.assert_allclose(got["y"], want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
