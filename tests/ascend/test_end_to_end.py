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

Programs: every example and tests/programs program that compiles for ascend_npu, each tree
built once for the module (test_every_program_is_covered keeps the list whole): rmsnorm
(segments of 4 tasks), softmax (the last a partial tile), swiglu_ffn (matmul kernels, a scratch
tensor between two task groups), attention_varlen and attention_tiered (ragged: the expander
reads seq_lens; partial, empty and full sequences, S not a multiple of the block), megakernel
(CSP: pipes with channel slots in `main`, pinned per-tile dispatch in `per_tile`), gemm
(partial tiles at every edge), moe (`topk` routing written by the route tasks and read by the
expander in the same run), llama_layer (a whole decoder layer: prefill, decode past a key
block and an empty sequence over a ragged KV cache), worker_pool (a pool of replicated
workers and a token channel, in a window of 8 over 2 dispatchers in `spread`),
embedding_gather (gather views), events_slots_inline (events, slots, `when` on query),
moe_sparse (a CSR routing given as input), named_edges (`after` edges), ragged_attention
(`when` branches on lengths), rmsnorm_task_graph (task-graph knobs, warned about), rope
(rotate-half, f16), spec_first_program, spec_megakernel (segments of 5 tasks) and every
schedule of spec_schedules (round robin, hash, dispatch_by, work stealing dealt). None had to
be marked xfail. gemm, moe, llama_layer and worker_pool are also held to their formulas in
float64 NumPy written here (or in examples/llama_layer.py and tests/test_examples_dynamic.py);
the others to ref, which tests/test_examples*.py and test_llama_layer.py hold to NumPy.

examples/moe_extern.wsp routes with an `extern c` kernel, and the target refuses an extern
kernel without an `extern ascend` body (docs/ascend.md, "Errors particular to this target");
test_moe_extern_runs_with_an_ascend_c_router gives it one written here in Ascend C (MOE_ROUTER:
the C router's algorithm on the scalar and vector units) and runs it with PMIN 0 and 450 (six
tokens routed to nothing) against ref (the router's Python twin) and NumPy.

Not run here:
- the mesh examples (tp_mlp, tp_attention, sp_rmsnorm, mesh_decoder_layer, ep_moe): one process
  per rank through the stand-in HCCL, end to end in test_hccl_overlap.py; tp_csp_ffn.wsp is
  pipes on a mesh of several devices, which the target refuses at its `mesh` line;
- examples/errors_demo.wsp (wrong on purpose) and tests/programs/lib_shared.wsp (an import's
  library: nothing to run).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.ref import register_extern, unregister_extern
from ptowsp.ir.passes import optimize
from tests.test_examples_dynamic import (
    RTOL,
    C,
    U,
    moe_inputs,
    moe_numpy,
    moe_routing_numpy,
    route_python,
    topk_inputs,
    topk_routing_numpy,
)

from .ascendc_cpu import harness as H
from .cann import lint_aicore
from .hostrun import build_host, run, write_inputs
from .streams import ROOT

if str(ROOT / "examples") not in sys.path:  # as tests/test_llama_layer.py imports it
    sys.path.insert(0, str(ROOT / "examples"))
import llama_layer as L  # noqa: E402  (the layer in float64 NumPy, from its formulas)

pytestmark = [pytest.mark.cc]

def _llama():
    """llama_layer.wsp: a prefill sequence over two token tiles, a decode one past a key block,
    an empty one; every input from examples/llama_layer.py (scaled weights, a cache full of
    garbage past each context), so that its float64 NumPy layer is the second oracle."""
    return L.batch([20, 1, 0], [0, 300, 5], maxctx=320, seed=0)


def _moe():
    """moe.wsp's inputs as test_examples_dynamic makes them (30 tokens: a partial last chunk)."""
    return topk_inputs(30, seed=0)


# (program, schedule, symbols, index inputs, wsp_main options)
CASES = [
    ("examples/rmsnorm", "main", {"B": 2, "T": 3}, {}, ["-c", "4", "-b", "3"]),
    ("examples/softmax", "main", {"R": 45}, {}, ["-b", "3"]),
    ("examples/swiglu_ffn", "main", {"T": 32}, {}, ["-b", "2"]),
    # seq_lens: a partial last block, an empty sequence, the whole of S (a partial last block)
    ("examples/attention_varlen", "main", {"B": 3, "H": 2, "S": 130},
     {"seq_lens": [70, 0, 130]}, ["-b", "4"]),
    ("examples/megakernel", "main", {"N": 5}, {}, ["-c", "4"]),
    ("examples/megakernel", "per_tile", {"N": 5}, {}, ["-b", "2"]),
    # partial tiles at every edge (M, K not multiples of the tile)
    ("examples/gemm", "main", {"M": 100, "N": 128, "K": 150}, {}, ["-b", "3"]),
    # ragged, tiered: an empty sequence, partial blocks, one past the short tier
    ("examples/attention_tiered", "main", {"B": 4, "H": 2, "S": 210},
     {"seq_lens": [100, 0, 200, 30]}, ["-b", "3"]),
    # top-k routing written and read in the same run (segments end at each read)
    ("examples/moe", "rr", {"T": 30}, _moe(), ["-b", "4"]),
    ("examples/llama_layer", "main", L.binds(_llama()), _llama(), ["-b", "3"]),
    # CSP: a pool of replicated workers, a token channel; dispatched round robin in a window
    ("examples/worker_pool", "main", {"N": 7}, {}, ["-b", "3"]),
    ("examples/worker_pool", "spread", {"N": 7}, {}, ["-b", "2"]),
    ("tests/programs/embedding_gather", "main", {"T": 3}, {}, ["-b", "2"]),
    ("tests/programs/events_slots_inline", "main", {"N": 3}, {"counts": [2, 0, 1]}, ["-b", "2"]),
    ("tests/programs/moe_sparse", "main", {"T": 5, "NNZ": 7},
     {"indptr": [0, 2, 2, 5, 6, 7], "indices": [1, 3, 0, 2, 7, 5, 4]}, ["-b", "4"]),
    ("tests/programs/named_edges", "main", {"N": 4}, {}, ["-b", "2"]),
    # each branch: the matmul chain of a long sequence (18 blocks), `small` twice for a length
    # of 7 (the only one whose result the program keeps), `empty`
    ("tests/programs/ragged_attention", "varlen", {"B": 3, "S": 1152},
     {"seq_lens": [7, 1090, 0]}, ["-b", "3"]),
    ("tests/programs/rmsnorm_task_graph", "main", {"B": 2, "T": 2}, {}, ["-b", "2"]),
    ("tests/programs/rope_rotate_half", "main", {"T": 3}, {}, ["-b", "2"]),
    ("tests/programs/spec_first_program", "main", {"B": 2, "T": 2}, {}, ["-b", "2"]),
    ("tests/programs/spec_megakernel", "main", {"N": 4}, {}, ["-c", "5"]),
    *[("tests/programs/spec_schedules", s, {"B": 2}, {}, ["-b", "3"])
      for s in ("fast", "rr", "hashed", "direct", "stealing", "by_name")],
]


def _near(got, want, bound, what):
    """|got - want| <= bound elementwise (float64)."""
    err = np.abs(np.asarray(got, np.float64) - want)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert np.all(err <= bound), f"{what}: off by {err[worst]} at {worst} (bound {bound[worst]})"


def _gemm_numpy(a, out):
    """C = A B; each f32 sum of K products within K units of roundoff of its terms."""
    A, B = np.asarray(a["A"], np.float64), np.asarray(a["B"], np.float64)
    _near(out["C"], A @ B, A.shape[1] * U * (np.abs(A) @ np.abs(B)), "C")


def _moe_numpy(a, out):
    """The top-2 experts of each token by its logits (largest first), and Y as the gated sum of
    their SwiGLU FFNs, to the error bound test_examples_dynamic derives for f32."""
    routes, margin = topk_routing_numpy(a["X"], a["Wg"])
    assert margin > 1e-3, margin  # no near tie: f32 logits pick the same experts
    np.testing.assert_array_equal(out["Experts"], [e for e, _ in routes])
    _near(out["Gate"], np.asarray([w for _, w in routes]), np.full(out["Gate"].shape, 1e-6),
          "Gate")
    y, err = moe_numpy(a, routes)
    _near(out["Y"], y, RTOL * np.abs(y) + C * U * err, "Y")


def _llama_numpy(a, out):
    """examples/llama_layer.py's float64 layer, to tests/test_llama_layer.py's tolerance."""
    want = L.numpy_layer(a)
    for name in ("Y", "Kc", "Vc"):
        w = np.asarray(want[name], np.float64)
        _near(out[name], w, 2e-5 + 2e-5 * np.abs(w), name)


def _worker_pool_numpy(a, out):
    """Probs[k] = softmax(X[k] / 8) by rows, Owner[k] = k % 4, ColSum = the sum of Probs over
    items and rows."""
    x = np.asarray(a["X"], np.float64) * 0.125
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    _near(out["Probs"], p, 1e-6 * p + 1e-9, "Probs")
    np.testing.assert_array_equal(out["Owner"][:, 0], np.arange(len(x)) % 4)
    col = p.sum(axis=(0, 1))[None]
    _near(out["ColSum"], col, 1e-5 * col, "ColSum")


# the independent oracle of a program: its formulas in float64 NumPy, from the inputs the run
# read (the other programs are held to ref here, and ref to NumPy in tests/test_examples*.py)
NUMPY = {"examples/gemm": _gemm_numpy, "examples/moe": _moe_numpy,
         "examples/llama_layer": _llama_numpy, "examples/worker_pool": _worker_pool_numpy}


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """Each (program, schedule)'s tree and host binary, built once for the module."""
    built = {}

    def get(program: str, schedule: str):
        if (program, schedule) not in built:
            tmp = tmp_path_factory.mktemp(f"{Path(program).name}-{schedule}")
            built[program, schedule] = (tmp, *build(tmp, program, schedule))
        return built[program, schedule]
    return get


def build(tmp: Path, program: str, schedule: str):
    """The tree and its host binary: main.asc + expand.aicpu + dispatch.asc with the kernels."""
    module = ptowsp.load(str(ROOT / f"{program}.wsp"))
    ir, _ = optimize(module.ir, 2)
    tree, exe = build_host(tmp, ir, schedule)
    return tree, exe, ir


RUN_APART = {"examples/moe_extern"}  # test_moe_extern_runs_with_an_ascend_c_router
NOT_RUN = {"examples/tp_mlp", "examples/tp_attention", "examples/sp_rmsnorm",
           "examples/mesh_decoder_layer", "examples/ep_moe", "examples/tp_csp_ffn",
           "examples/errors_demo", "tests/programs/lib_shared"}


def test_every_program_is_covered():
    """Every example and test program is run here or listed in NOT_RUN (the docstring's why)."""
    files = {str(p.relative_to(ROOT).with_suffix("")) for d in ("examples", "tests/programs")
             for p in (ROOT / d).glob("*.wsp")}
    assert files - NOT_RUN - RUN_APART == {c[0] for c in CASES}
    assert NOT_RUN | RUN_APART <= files


def tolerance(ir) -> dict | None:
    """None: bit for bit (every op exact); else the dtype table test_aicore uses."""
    if all(H.exact(k) for k in ir.kernels):
        return None
    return H.TOL_MATMUL if any(op.op == "matmul" for k in ir.kernels for op in k.ops) else H.TOL


@pytest.mark.parametrize("program, schedule, syms, given, opts", CASES,
                         ids=[f"{Path(c[0]).name}-{c[1]}" for c in CASES])
def test_tree_runs_end_to_end(trees, program, schedule, syms, given, opts):
    tmp, tree, exe, ir = trees(program, schedule)
    data = tmp / ("data-" + "-".join(f"{k}{v}" for k, v in syms.items()))
    binds = [f"{k}={v}" for k, v in syms.items()]
    cmd = [sys.executable, str(tree / "scripts/gen_data.py"), "--data", str(data),
           "--target", "ref", *binds]
    for name, values in given.items():
        path = data.with_name(data.name + f"-{name}.npy")
        decl = next(t for t in ir.tensors if t.name == name)
        np.save(path, np.asarray(values, H.NP[decl.dtype]))
        cmd += ["--input", f"{name}={path}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    done = run(exe, data, *opts, *binds, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    tasks, segments, waves = map(int, re.search(
        r"(\d+) tasks in (\d+) segments, (\d+) waves", done.stdout).groups())
    assert tasks > 0 and segments >= (2 if "-c" in opts else 1)
    calls = (data / "acl.log").read_text().split()
    # one launch per wave of each dispatcher the tree has: AIV (vector kernels), AIC (cube),
    # MIX (kernels split between the cube and the vector cores)
    kinds = [k for k in ("wsp_dispatch", "wsp_dispatch_cube", "wsp_dispatch_mix")
             if f"{k}<<<" in (tree / "aicore/dispatch.asc").read_text()]
    assert kinds and all(calls.count(f"<<<{k}>>>") == waves for k in kinds), kinds
    assert calls[0] == "aclInit" and calls[-1] == "aclFinalize"
    tol = tolerance(ir)
    expected = sorted((data / "expected").glob("*.npy"))
    assert expected
    for path in expected:
        want = np.load(path)
        got = np.load(data / "output" / path.name)
        assert got.shape == want.shape and got.dtype == want.dtype, path.name
        msg = f"{program}/{schedule}: {path.stem}"
        if tol is None or not np.issubdtype(want.dtype, np.floating):
            np.testing.assert_array_equal(got, want, err_msg=msg + " (exact)")
            continue
        dtype = next(t.dtype for t in ir.tensors if t.name == path.stem)
        rt, at = tol[dtype]
        w = want.astype(np.float64)
        scale = float(np.max(np.abs(w[np.isfinite(w)]), initial=1.0))
        np.testing.assert_allclose(got.astype(np.float64), w, rtol=rt, atol=at * scale,
                                   equal_nan=True, err_msg=msg)
    if program in NUMPY:
        inputs = {p.stem: np.load(p) for p in (data / "input").glob("*.npy")}
        NUMPY[program](inputs, {p.stem: np.load(data / "output" / p.name) for p in expected})


# examples/moe_extern.wsp's router in Ascend C (its `extern c` body's algorithm): the test's
# `extern ascend` body, since the example ships none. A chunk's logits (16 x 8 f32, NaN past a
# partial chunk's tokens) and the bias are loaded into UB; the scalar unit subtracts each row's
# max, the vector unit takes `Exp`, and the scalar unit sums, picks the top K of logits + bias
# (ties to the lower expert), applies the threshold and writes Indptr, Indices and Gate rows in
# UB, which are stored as the views' boxes. UB in floats: logits 0, bias 128, p 136, gates 264
# (32-byte rows), Indptr 392, Indices 408 (every part 32-byte aligned).
MOE_ROUTER = r'''
    AscendC::TPipe pipe;
    AscendC::TBuf<AscendC::TPosition::VECCALC> tb;
    pipe.InitBuffer(tb, 440 * 4);
    AscendC::LocalTensor<float> ub = tb.Get<float>();
    AscendC::LocalTensor<float> lg = ub, bs = ub[128], p = ub[136], gt = ub[264];
    AscendC::LocalTensor<int32_t> pt = ub[392].ReinterpretCast<int32_t>();
    AscendC::LocalTensor<int32_t> ix = ub[408].ReinterpretCast<int32_t>();
    wsp_copy_in<uint32_t>(lg.ReinterpretCast<uint32_t>(), logits, 0, 16, 32, 32, 4, 0x7fc00000u);
    wsp_copy_in<uint32_t>(bs.ReinterpretCast<uint32_t>(), bias, 0, 1, 32, 32, 4);
    wsp_sync<AscendC::HardEvent::V_S>();
    wsp_sync<AscendC::HardEvent::MTE2_S>();
    const int ne = (int)logits.cols, nk = (int)g.cols, rows = (int)logits.rows;
    const float thr = (float)pmin * 0.001f;
    for (int r = 0; r < 16; r++) {
        float mx = 0.0f;
        for (int e = 0; e < ne; e++) {
            const float v = lg.GetValue(r * 8 + e);
            if (e == 0 || v > mx) mx = v;
        }
        for (int e = 0; e < 8; e++)
            p.SetValue(r * 8 + e, r < rows && e < ne ? lg.GetValue(r * 8 + e) - mx : 0.0f);
    }
    wsp_sync<AscendC::HardEvent::S_V>();
    AscendC::Exp(p, p, 128);
    wsp_sync<AscendC::HardEvent::V_S>();
    int32_t n = 0;
    for (int r = 0; r < rows; r++) {
        float sum = 0.0f;
        for (int e = 0; e < ne; e++) sum += p.GetValue(r * 8 + e);
        int used = 0, kept[8], nkept = 0;
        float total = 0.0f;
        for (int k = 0; k < nk; k++) {
            int best = -1;
            for (int e = 0; e < ne; e++) {
                if ((used >> e) & 1) continue;
                if (best < 0 || lg.GetValue(r * 8 + e) + bs.GetValue(e) >
                                lg.GetValue(r * 8 + best) + bs.GetValue(best)) best = e;
            }
            used |= 1 << best;
            const float pb = p.GetValue(r * 8 + best) / sum;
            if (pb >= thr) { kept[nkept++] = best; total += pb; }
        }
        for (int j = 0; j < 8; j++)
            gt.SetValue(r * 8 + j, j < nkept ? p.GetValue(r * 8 + kept[j]) / sum / total : 0.0f);
        for (int j = 0; j < nkept; j++) ix.SetValue(n++, kept[j]);
        pt.SetValue(r, base + n);
    }
    for (int j = n; j < 32; j++) ix.SetValue(j, 0);
    wsp_sync<AscendC::HardEvent::S_MTE3>();
    wsp_copy_out<uint32_t>(ptr, pt.ReinterpretCast<uint32_t>(), 0, 1, 64, 64, 4);
    wsp_copy_out<uint32_t>(idx, ix.ReinterpretCast<uint32_t>(), 0, 1, 128, 128, 4);
    wsp_copy_out<uint32_t>(g, gt.ReinterpretCast<uint32_t>(), 0, 16, 8, 32, 4);
    AscendC::PipeBarrier<PIPE_ALL>();
    pipe.Destroy();
'''


def test_moe_extern_runs_with_an_ascend_c_router(tmp_path):
    """examples/moe_extern.wsp with its router written in Ascend C (MOE_ROUTER as its `extern
    ascend` body): the routing the route tasks write on the AICore is read by the expander in
    the same run, and Indptr, Indices, Gate and Y equal ref's (which runs the router through
    its Python twin) and the float64 NumPy routing and layer of test_examples_dynamic. 30
    tokens: the last chunk of 16 is partial (its logits padded with NaN)."""
    text = (ROOT / "examples/moe_extern.wsp").read_text()
    end = text.index('"""', text.index('extern c """') + len('extern c """')) + 3
    text = text[:end] + ' extern ascend """' + MOE_ROUTER + '"""' + text[end:]
    module = ptowsp.parse(text, str(ROOT / "examples/moe_extern.wsp"))
    ir, _ = optimize(module.ir, 2)
    tree, exe = build_host(tmp_path, ir, "rr")
    # nothing bisheng refuses in it (no double, no float <-> unsigned cast, ...)
    assert lint_aicore((tree / "aicore/kernel_route.h").read_text()) == []
    inputs = moe_inputs(30, seed=0)
    for pmin in (0, 450):  # 450: experts below p = 0.45 dropped, 6 tokens routed to nothing
        data = tmp_path / f"data{pmin}"
        write_inputs(data, inputs)
        done = run(exe, data, "-b", "4", "T=30", f"PMIN={pmin}", timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        segments = int(re.search(r"in (\d+) segments", done.stdout).group(1))
        assert segments >= 3  # the expander stops before reading each chunk's routing
        got = {n: np.load(data / "output" / f"{n}.npy") for n in ("Indptr", "Indices", "Gate", "Y")}
        register_extern("route", route_python)
        try:
            want = module.compile("ref", schedule="rr").run(bind={"PMIN": pmin}, **inputs)
        finally:
            unregister_extern("route")
        for name in ("Indptr", "Indices"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        for name in ("Gate", "Y"):
            w = want[name].astype(np.float64)
            np.testing.assert_allclose(got[name], w, rtol=H.TOL_MATMUL["f32"][0],
                                       atol=H.TOL_MATMUL["f32"][1] * np.abs(w).max(), err_msg=name)
        routes, margin = moe_routing_numpy(inputs["X"], inputs["Wg"], inputs["Bias"], pmin=pmin)
        assert margin > 1e-4
        counts = [len(r[0]) for r in routes]
        assert (0 in counts) == (pmin > 0)
        np.testing.assert_array_equal(got["Indptr"][1:], np.cumsum(counts))
        y, err = moe_numpy(inputs, routes)
        _near(got["Y"], y, RTOL * np.abs(y) + C * U * err, "Y")
