"""Mixed kernels (a matmul and vector work) split over the cores of an AI Core group, on the
CPU Ascend C of `ascendc_cpu/` (docs/ascend.md, "Mixed kernels: the split"):

- the stand-in's MIX launch (`wsp_cpu_mix_launch`: the block's AIC and its one or two AIVs as
  threads, each with its own memories), its cross-core flags in mode 2 and its tracking of
  the GM workspace's producers;
- matmul -> vector epilogue, the form built: `aicore.mixed.split_epilogue` of swiglu_ffn's
  `silu(x @ Wg) * (x @ Wu)`, a gemm + bias + relu and a softmax of x · wtᵀ, the cube part on
  the AIC (Fixpipe into the GM workspace), `CrossCoreSetFlag<2, PIPE_FIX>`, and on each AIV
  `CrossCoreWaitFlag` then the vector part on its share of the rows (GetSubBlockIdx), equal
  to ref's unsplit kernel and to NumPy in float64, for f16 / bf16 / f32 operands at shapes
  across the fractal and block edges, with one and two AIVs per group;
- each missing or misplaced synchronisation caught: no set (the wait hangs), no wait (a
  race on the workspace), a set on a pipe other than the writer's, a set never waited for,
  a flag id past 10, a kernel declaring another kernel type;
- the rule (`test_the_eligibility_rule`): what splits, and what keeps the vector path (a
  vector value feeding a matmul, attention, an `acc`);
- swiglu_ffn split end to end on the host, through the tree's MIX dispatcher
  (`wsp_dispatch_mix`) and hostrun's MIX launches.
"""

from __future__ import annotations

import ctypes
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.ascend import aicore
from ptowsp.backends.ascend.aicore.mixed import split_epilogue
from ptowsp.backends.ref import values as R
from ptowsp.ir.passes import optimize
from tests.accuracy import UNIT, assert_close

from .ascendc_cpu import harness as H
from .hostrun import build_host, run
from .streams import ROOT

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

# shapes (M, K, N) across the fractal (16) and the cube's block (base_m 128) edges, an odd M
# (the AIVs' halves differ) and M = 1 (the second AIV has no rows)
SHAPES = {"f16": [(17, 33, 40), (130, 48, 24)], "bf16": [(1, 16, 17), (33, 257, 16)],
          "f32": [(40, 300, 24), (16, 15, 33)]}
# what the driver does wrong (0: nothing)
MODES = {"ok": 0, "no_set": 1, "no_wait": 2, "wrong_pipe": 3, "never_waited": 4, "flag_11": 5,
         "wrong_type": 6}


def program(m: int, k: int, n: int, dt: str) -> str:
    """Mixed kernels as a user writes them: swiglu_ffn's gate (row-local: the AIVs share the
    rows), the same plus a row broadcast of a bias (read whole by each AIV) and a softmax of
    x · wgᵀ (not in the row-local list: AIV 0 takes every row)."""
    return f"""
input X: {dt}[{m}, {k}]
input WG: {dt}[{k}, {n}]
input WU: {dt}[{k}, {n}]
input WT: {dt}[{n}, {k}]
input BIAS: f32[1, {n}]
output Y: {dt}[{m}, {n}]
kernel gate(x: In[Tile[{m}, {k}, {dt}]], wg: In[Tile[{k}, {n}, {dt}]], wu: In[Tile[{k}, {n}, {dt}]],
            y: Out[Tile[{m}, {n}, {dt}]]) {{
    store(y, silu(matmul(x, wg)) * matmul(x, wu))
}}
kernel biased(x: In[Tile[{m}, {k}, {dt}]], wg: In[Tile[{k}, {n}, {dt}]], bias: In[Tile[1, {n}, f32]],
              y: Out[Tile[{m}, {n}, {dt}]]) {{
    store(y, relu(matmul(x, wg) + broadcast(bias, {m}, {n})))
}}
kernel scores(x: In[Tile[{m}, {k}, {dt}]], wt: In[Tile[{n}, {k}, {dt}]], y: Out[Tile[{m}, {n}, {dt}]]) {{
    store(y, softmax(matmul(x, transpose(wt))))
}}
workload w() {{
    gate[0](x = X, wg = WG, wu = WU, y = Y)
    biased[0](x = X, wg = WG, bias = BIAS, y = Y)
    scores[0](x = X, wt = WT, y = Y)
}}
schedule main = w()
"""


KERNELS = ("gate", "biased", "scores")


def _driver(units: list[tuple[str, list]]) -> str:
    """One C entry per (unit, kernel): a MIX launch of one block, the cube part on the AIC,
    the vector part on each AIV with rows, the flags as `mode` says."""
    lines = ["#include <cstdio>", "#include <exception>", '#include "mix_launch.h"',
             f'#include "{units[0][0]}/aicore/wsp_aicore.h"',
             f'#include "{units[0][0]}/aicore/wsp_cube.h"']
    for name, splits in units:
        lines.append(f"namespace {name} {{")
        for sp in splits:
            for part in (sp.cube, sp.vector):
                lines.append(f'#include "{name}/{aicore.header_path(part)}"')
        lines.append("}")
        for sp in splits:
            aic, aiv = (f"{name}::{aicore.kernel_entry(x)}" for x in (sp.cube, sp.vector))
            lines.append(f"""
extern "C" int run_{name}_{sp.vector.name}(const WspTile *aic, const WspTile *aiv, int nv,
        const int *aiv_rows, const WspScalar *scalars, int ratio, int mode, void *ws,
        long ws_bytes, char *err, int n)
{{
    const int type = mode == 6 ? KERNEL_TYPE_MIX_AIC_1_1 + (ratio == 1)
                               : (ratio == 2 ? KERNEL_TYPE_MIX_AIC_1_2 : KERNEL_TYPE_MIX_AIC_1_1);
    AscendC::wsp_cpu_untrack_gm();
    AscendC::wsp_cpu_track_gm(ws, (size_t)ws_bytes);
    try {{
        AscendC::wsp_cpu_mix_launch(0, ratio, [&] {{
            KERNEL_TASK_TYPE_DEFAULT(type);
            if (!ASCEND_IS_AIC) AscendC::ShimFail("test", "ASCEND_IS_AIC is false on the AIC");
            {aic}(aic, scalars);
            if (mode == 3) AscendC::CrossCoreSetFlag<2, PIPE_M>(0);
            else if (mode == 5) AscendC::CrossCoreSetFlag<2, PIPE_FIX>(11);
            else if (mode != 1) AscendC::CrossCoreSetFlag<2, PIPE_FIX>(0);
            if (mode == 4) AscendC::CrossCoreSetFlag<2, PIPE_FIX>(1);
        }}, [&] {{
            KERNEL_TASK_TYPE_DEFAULT(type);
            if (!ASCEND_IS_AIV) AscendC::ShimFail("test", "ASCEND_IS_AIV is false on an AIV");
            const int64_t sub = AscendC::GetSubBlockIdx();
            if (AscendC::GetBlockIdx() != sub || AscendC::GetTaskRatio() != ratio)
                AscendC::ShimFail("test", "GetBlockIdx / GetTaskRatio on an AIV of block 0");
            if (mode != 2) AscendC::CrossCoreWaitFlag<2, PIPE_MTE2>(0);
            if (aiv_rows[sub] > 0) {aiv}(aiv + nv * sub, scalars);
        }});
    }} catch (const std::exception &e) {{
        AscendC::wsp_cpu_untrack_gm();
        std::snprintf(err, n, "%s", e.what());
        return 1;
    }}
    AscendC::wsp_cpu_untrack_gm();
    return 0;
}}""")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    """Every shape's kernels, split (aicore.mixed) and emitted, built into one library."""
    work = tmp_path_factory.mktemp("mixed")
    units, kernels = [], {}
    for dt, shapes in SHAPES.items():
        for m, k, n in shapes:
            name = H.unit_name(f"mix_{dt}_{m}_{k}_{n}")
            mod = ptowsp.parse(program(m, k, n, dt), f"{name}.wsp").ir
            splits = {kk.name: split_epilogue(kk) for kk in mod.kernels}
            assert all(splits.values()), [x for x, v in splits.items() if v is None]
            for sp in splits.values():
                assert aicore.is_cube(sp.cube) and not aicore.is_cube(sp.vector)
            parts = tuple(x for sp in splits.values() for x in (sp.cube, sp.vector))
            files = aicore.emit_aicore(dataclasses.replace(mod, name=name, kernels=parts))
            for rel, text in files.items():
                (work / name / rel).parent.mkdir(parents=True, exist_ok=True)
                (work / name / rel).write_text(text)
            units.append((name, list(splits.values())))
            kernels[(dt, m, k, n)] = (name, {kk.name: kk for kk in mod.kernels}, splits)
    (work / "driver.cpp").write_text(_driver(units))
    so = work / "mixed.so"
    done = subprocess.run(["g++", *H.CXXFLAGS, "-pthread", "-I", str(H.HERE), "-I", str(work),
                           "-o", str(so), str(work / "driver.cpp")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-6000:]
    return ctypes.CDLL(str(so)), kernels


def _tile(buf: np.ndarray, rows: int, cols: int, row0: int = 0) -> H.WspTile:
    return H.WspTile(buf.ctypes.data + row0 * cols * buf.itemsize, rows, cols, cols, col_stride=1)


def run_split(lib, dt: str, shape, kname: str, ratio: int, mode: int, seed: int = 0):
    """Kernel `kname` split and run on the stand-in: (its stores, ref's stores of the kernel
    as written, the task's inputs); raises H.KernelFailed with the stand-in's message."""
    dll, kernels = lib
    name, kern, splits = kernels[(dt, *shape)]
    k, sp = kern[kname], splits[kname]
    task = H.random_task(k, np.random.default_rng(seed))
    # each workspace tile in one GM buffer (NaN until written: a read before the write shows)
    offs, at = {}, 0
    for p in sp.workspace:
        offs[p.name] = at
        at += -(-p.rows * p.cols * np.dtype(H.NP[p.dtype]).itemsize // 64) * 64
    ws = H._aligned(max(at, 64), np.uint8)
    ws[:] = 0xFF
    tiles = [p for p in k.params if p.kind == "tile"]
    wsp = {p.name: p for p in sp.workspace}

    def tile(src, rows=None, row0=0):
        if isinstance(src, str):
            p = wsp[src]
            buf = ws[offs[src]:offs[src] + p.rows * p.cols * np.dtype(H.NP[p.dtype]).itemsize]
            buf = buf.view(H.NP[p.dtype])
        else:
            p, buf = tiles[src], task.tiles[src]
        return _tile(buf, p.rows if rows is None else rows, p.cols, row0)

    aic = (H.WspTile * len(sp.cube_tiles))(*(tile(s) for s in sp.cube_tiles))
    m = max(p.rows for p in sp.vector.params if p.kind == "tile" and p.mode == "Out")
    share = -(-m // ratio) if sp.rows_split else m
    rows = [max(0, min(m, (s + 1) * share) - s * share) for s in range(ratio)]
    nv = len(sp.vector_tiles)
    aiv = (H.WspTile * (nv * ratio))()
    for s in range(ratio):
        for j, (src, split) in enumerate(zip(sp.vector_tiles, sp.row_tiles)):
            aiv[nv * s + j] = tile(src, rows[s], s * share) if split else tile(src)
    sc = [H.scalar_arg(p.dtype, task.scalars[p.name]) for p in k.params if p.kind == "scalar"]
    scalars = (H.WspScalar * max(len(sc), 1))(*sc)
    err = ctypes.create_string_buffer(4096)
    fn = getattr(dll, f"run_{name}_{sp.vector.name}")
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_long,
                   ctypes.c_char_p, ctypes.c_int]
    if fn(aic, aiv, nv, (ctypes.c_int * 2)(*(rows + [0])[:2]), scalars, ratio, mode,
          ctypes.c_void_p(ws.ctypes.data), ws.nbytes, err, 4096) != 0:
        raise H.KernelFailed(err.value.decode())
    got = {out: np.array(H.tile_view(task, k, out)) for out, _ in k.stores}
    return got, H.ref_outputs(k, task), task


def _f64(v: np.ndarray, dt: str) -> np.ndarray:
    return (R.bf16_from_bits(v) if dt == "bf16" else v).astype(np.float64)


def _numpy(kname: str, x: dict, dt: str):
    """The kernel's formula in float64 from the task's inputs; (value, a bound on the f32
    sums' error before the dtype's rounding)."""
    def f(n):
        return _f64(x[n], dt) if n != "bias" else x[n].astype(np.float64)

    k = x["x"].shape[1]
    err = 8 * k * UNIT["f32"]
    if kname == "gate":
        g, u = f("x") @ f("wg"), f("x") @ f("wu")
        mg, mu = np.abs(f("x")) @ np.abs(f("wg")), np.abs(f("x")) @ np.abs(f("wu"))
        return g / (1 + np.exp(-g)) * u, err * (mg * np.abs(u) + mu * np.abs(g) + mg * mu)
    if kname == "biased":
        return np.maximum(f("x") @ f("wg") + f("bias"), 0), err * (np.abs(f("x")) @ np.abs(f("wg")))
    s = f("x") @ f("wt").T
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True), err * (np.abs(f("x")) @ np.abs(f("wt")).T)


CASES = [(dt, s) for dt, ss in SHAPES.items() for s in ss]


@pytest.mark.parametrize("ratio", [2, 1])
@pytest.mark.parametrize("kname", KERNELS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}_" + "x".join(map(str, c[1])))
def test_split_equals_ref_and_numpy(lib, case, kname, ratio):
    dt, shape = case
    _, kern, splits = lib[1][(dt, *shape)]
    assert splits[kname].rows_split == (kname != "scores" and shape[0] > 1)
    got, want, task = run_split(lib, dt, shape, kname, ratio, MODES["ok"], seed=sum(shape))
    what = f"{kname} {dt} {shape} ratio {ratio}"
    H.compare(kern[kname], got, want, what)
    exact, err = _numpy(kname, task.inputs, dt)
    # the f32 sums' error carried through the epilogue (silu and softmax are within 2 of
    # their argument's relative error), then the dtype's roundings
    assert_close(_f64(got["y"], dt), exact, rtol=8 * UNIT[dt], atol=4 * err + 1e-6, what=what)


@pytest.mark.parametrize("mode, message", [
    ("no_set", "which no core of the group sets: every other core is waiting or finished"),
    ("no_wait", "workspace bytes"),
    ("wrong_pipe", "with no CrossCoreSetFlag on that pipe after the write waited for"),
    ("never_waited", "was set for AIV 0 and never waited for"),
    ("flag_11", "flag ids are 0..10 on Atlas A2 / A3"),
    ("wrong_type", "a kernel of a MIX launch declares another kernel type"),
])
@pytest.mark.parametrize("ratio", [2, 1])
def test_each_missing_synchronisation_is_caught(lib, mode, message, ratio):
    with pytest.raises(H.KernelFailed, match="ascendc_cpu") as err:
        run_split(lib, "f16", (17, 33, 40), "gate", ratio, MODES[mode])
    assert message in str(err.value), str(err.value)


def test_the_eligibility_rule():
    """What splits and what does not (aicore/mixed.py's rule): what does not keeps the vector
    path for the whole kernel (never a wrong answer)."""
    mod = ptowsp.load(str(ROOT / "examples/swiglu_ffn.wsp")).ir
    gate, down = (next(k for k in mod.kernels if k.name == x) for x in ("gate", "down"))
    assert not aicore.is_cube(gate) and aicore.is_cube(down)
    sp = split_epilogue(gate)
    assert sp and sp.rows_split and sp.workspace_bytes == 2 * 16 * 256 * 4
    assert [op.op for op in sp.cube.ops].count("matmul") == 2
    assert "matmul" not in [op.op for op in sp.vector.ops]
    assert split_epilogue(down) is None  # all matmuls: the cube kernel as it is
    not_split = {
        # a vector value feeding a matmul (prologue -> matmul: not built)
        "rms": "store(y, matmul(x * rsqrt(rowmean(x * x) + 1e-6), w))",
        # attention's two matmuls with softmax between
        "attn": "store(y, matmul(softmax(matmul(x, transpose(w))), x))",
        # an accumulating matmul
        "acc": "store(y, relu(matmul(x, w, acc = y)))",
    }
    for what, body in not_split.items():
        text = f"""
input X: f32[16, 16]
input W: f32[16, 16]
output Y: f32[16, 16]
kernel k(x: In[Tile[16, 16, f32]], w: In[Tile[16, 16, f32]], y: InOut[Tile[16, 16, f32]]) {{
    {body}
}}
workload wl() {{ k[0](x = X, w = W, y = Y) }}
schedule main = wl()
"""
        (k,) = ptowsp.parse(text, f"{what}.wsp").ir.kernels
        assert split_epilogue(k) is None, what


# -- end to end: the tree, with the MIX dispatcher

SWIGLU16 = (ROOT / "examples/swiglu_ffn.wsp").read_text().replace(
    "input X: f32[T, 64]", "input X: f16[T, 64]").replace(
    "input W1: f32[64, 256]", "input W1: f16[64, 256]").replace(
    "input W3: f32[64, 256]", "input W3: f16[64, 256]").replace(
    "x: In[Tile[16, 64, f32]], w1: In[Tile[64, 256, f32]], w3: In[Tile[64, 256, f32]]",
    "x: In[Tile[16, 64, f16]], w1: In[Tile[64, 256, f16]], w3: In[Tile[64, 256, f16]]")


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_swiglu_ffn_split_end_to_end(dt, tmp_path):
    """examples/swiglu_ffn (f32 as written, and with f16 X, W1, W3) at -O1, where `gate` is a
    kernel of its own (-O2 fuses it with `down` into a kernel whose vector work feeds a matmul,
    which is not split): `gate` split, its cube part on each block's AIC and its vector part on
    the two AIVs through wsp_dispatch_mix (8 rows each), `down` on the cube, the host
    binary's Y equal to ref's and to NumPy's formula; T = 48 on 2 blocks: one block runs two
    gate tasks in a wave, the AIC's second Fixpipe into the workspace waiting for the AIVs'
    flag."""
    text = SWIGLU16 if dt == "f16" else (ROOT / "examples/swiglu_ffn.wsp").read_text()
    ir, _ = optimize(ptowsp.parse(text, f"swiglu_{dt}.wsp").ir, 1)
    tree, exe = build_host(tmp_path, ir, "main")
    dispatch = (tree / "aicore/dispatch.asc").read_text()
    assert "KERNEL_TYPE_MIX_AIC_1_2" in dispatch and "wsp_aicore_gate_aiv" in dispatch
    data = tmp_path / "data"
    binds = ["T=48"]
    done = subprocess.run([sys.executable, str(tree / "scripts/gen_data.py"), "--data", str(data),
                           "--target", "ref", *binds], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    done = run(exe, data, "-b", "2", *binds)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = (data / "acl.log").read_text().split()
    assert "<<<wsp_dispatch_mix>>>" in calls and "<<<wsp_dispatch_cube>>>" in calls
    got = np.load(data / "output/Y.npy").astype(np.float64)
    want = np.load(data / "expected/Y.npy").astype(np.float64)
    rt, at = H.TOL_MATMUL["f32"]
    np.testing.assert_allclose(got, want, rtol=rt, atol=at * np.abs(want).max())
    x, w1, w3, w2 = (np.load(data / f"input/{n}.npy").astype(np.float64)
                     for n in ("X", "W1", "W3", "W2"))
    g = x @ w1
    h = g / (1 + np.exp(-g)) * (x @ w3)
    np.testing.assert_allclose(got, h @ w2, rtol=1e-3, atol=1e-3 * np.abs(h @ w2).max())
