"""Mixed kernels (matmuls and vector work) split into stages over the cores of an AI Core group,
on the CPU Ascend C of `ascendc_cpu/` (docs/ascend.md, "Mixed kernels: the split"):

- the stand-in's MIX launch (`wsp_cpu_mix_launch`: the block's AIC and its one or two AIVs as
  threads, each with its own memories), its cross-core flags in mode 2, in both directions,
  and its tracking of the GM workspace's producers and readers;
- every form `aicore.mixed.split_mixed` builds, run through the kernel's own task functions
  (`<entry>_aic` / `<entry>_aiv`, the stages and their flags, as the MIX dispatcher calls
  them): matmul -> vector epilogue (swiglu_ffn's `silu(x @ Wg) * (x @ Wu)`, a gemm + bias +
  relu, a softmax of x · wtᵀ that is not row-local), vector prologue -> matmul (RMSNorm ->
  matmul: the AIVs write the operand, the AIC waits for both) and a chain cube -> vector ->
  cube -> vector (attention's exp(s - max) v / sum), equal to ref's unsplit kernel and to
  NumPy in float64, for f16 / bf16 / f32 operands at shapes across the fractal and block
  edges, with one and two AIVs per group; two tasks of a kernel, and a run of every kernel
  one after the other on one group's workspace (the flags between tasks); a partial view
  that leaves AIV 1 no rows;
- each flag of the emitted protocol taken out or misplaced, caught: the wait it feeds hangs,
  or a race on the workspace, or a set never waited for; a flag id past 10, a kernel declaring
  another kernel type;
- the rule (`test_the_rule`): which kernels split and into which stages, and what keeps the
  vector path;
- swiglu_ffn split end to end on the host, through the tree's MIX dispatcher
  (`wsp_dispatch_mix`) and hostrun's MIX launches.
"""

from __future__ import annotations

import ctypes
import dataclasses
import re
import subprocess
import sys

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.ascend import aicore
from ptowsp.backends.ascend.aicore.mixed import split_mixed, workspace_offsets
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


def program(m: int, k: int, n: int, dt: str) -> str:
    """Mixed kernels as a user writes them: swiglu_ffn's gate (row-local: the AIVs share the
    rows), the same plus a row broadcast of a bias (read whole by each AIV), a softmax of
    x · wtᵀ (not in the row-local list: AIV 0 takes every row), an RMSNorm -> matmul (the
    prologue) and attention's exp(s - max(s)) · wv / sum (a chain of four stages)."""
    return f"""
input X: {dt}[{m}, {k}]
input WG: {dt}[{k}, {n}]
input WU: {dt}[{k}, {n}]
input WT: {dt}[{n}, {k}]
input WV: {dt}[{n}, {n}]
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
kernel rms(x: In[Tile[{m}, {k}, {dt}]], wg: In[Tile[{k}, {n}, {dt}]], y: Out[Tile[{m}, {n}, {dt}]]) {{
    let xf = cast(x, f32)
    store(y, matmul(cast(xf * rsqrt(rowmean(xf * xf) + 1e-6), {dt}), wg))
}}
kernel attn(x: In[Tile[{m}, {k}, {dt}]], wt: In[Tile[{n}, {k}, {dt}]], wv: In[Tile[{n}, {n}, {dt}]],
            y: Out[Tile[{m}, {n}, {dt}]]) {{
    let s = matmul(x, transpose(wt))
    let p = exp(s - rowmax(s))
    store(y, matmul(cast(p, {dt}), wv) / rowsum(p))
}}
workload w() {{
    gate[0](x = X, wg = WG, wu = WU, y = Y)
    biased[0](x = X, wg = WG, bias = BIAS, y = Y)
    scores[0](x = X, wt = WT, y = Y)
    rms[0](x = X, wg = WG, y = Y)
    attn[0](x = X, wt = WT, wv = WV, y = Y)
}}
schedule main = w()
"""


KERNELS = ("gate", "biased", "scores", "rms", "attn")
FORMS = {"gate": "cube -> vector", "biased": "cube -> vector", "scores": "cube -> vector",
         "rms": "vector -> cube", "attn": "cube -> vector -> cube -> vector"}

# each flag of the protocol taken out of (or changed in) the emitted task functions: (kernel,
# the line's text, its replacement, what the stand-in says). Run on the f16 17 x 33 x 40
# kernels, two tasks in a launch.
MUTANTS = {
    # matmul -> epilogue: the AIC's set after its Fixpipes, the AIVs' wait for it
    "no_set": ("gate", "AscendC::CrossCoreSetFlag<2, PIPE_FIX>(0);", "",
               "which no core of the group sets: every other core is waiting or finished"),
    "no_wait": ("gate", "AscendC::CrossCoreWaitFlag<2, PIPE_MTE2>(0);", "", "workspace bytes"),
    "wrong_pipe": ("gate", "AscendC::CrossCoreSetFlag<2, PIPE_FIX>(0);",
                   "AscendC::CrossCoreSetFlag<2, PIPE_M>(0);",
                   "with no CrossCoreSetFlag on that pipe after the write waited for"),
    "flag_11": ("gate", "AscendC::CrossCoreSetFlag<2, PIPE_FIX>(0);",
                "AscendC::CrossCoreSetFlag<2, PIPE_FIX>(11);", "flag ids are 0..10 on Atlas A2 / A3"),
    # the AIC not waiting for the AIVs' end of the previous task: a set left over
    "no_pending_wait": ("gate", "if (pending) AscendC::CrossCoreWaitFlag<2, PIPE_FIX>(1);", "",
                        "was set for the AIC and never waited for|workspace bytes"),
    # prologue -> matmul, AIV -> AIC: the AIVs' set after their copies, the AIC's wait for it
    "v_no_set": ("rms", "AscendC::CrossCoreSetFlag<2, PIPE_MTE3>(2);", "",
                 "which no core of the group sets: every other core is waiting or finished"),
    "v_no_wait": ("rms", "AscendC::CrossCoreWaitFlag<2, PIPE_MTE2>(2);", "", "workspace bytes"),
    "v_wrong_pipe": ("rms", "AscendC::CrossCoreSetFlag<2, PIPE_MTE3>(2);",
                     "AscendC::CrossCoreSetFlag<2, PIPE_MTE2>(2);",
                     "with no CrossCoreSetFlag on that pipe after the write waited for"),
    # the AIC's relay before the AIVs overwrite the workspace of the previous task
    "no_relay_set": ("rms", "if (pending) AscendC::CrossCoreSetFlag<2, PIPE_MTE2>(3);", "",
                     "which no core of the group sets: every other core is waiting or finished"),
    "no_relay_wait": ("rms", "if (pending) AscendC::CrossCoreWaitFlag<2, PIPE_MTE3>(3);", "",
                      "workspace bytes|was set for AIV 0 and never waited for"),
    # in a chain, the AIC's wait for the AIVs' stage
    "chain_no_wait": ("attn", "AscendC::CrossCoreWaitFlag<2, PIPE_MTE2>(2);", "", "workspace bytes"),
}
MUTANT_SHAPE = ("f16", (17, 33, 40))


def _driver(units: list[tuple[str, list]]) -> str:
    """Per unit, one C entry running `ntasks` tasks (kernel `which[j]`, its tiles and scalars)
    in one MIX launch of one block, each core calling the kernels' task functions as the MIX
    dispatcher does (`pending` from the second task on, the AIC's wait for the last flag 1);
    mode 1 declares the other MIX kernel type."""
    lines = ["#include <cstdio>", "#include <exception>", '#include "mix_launch.h"',
             f'#include "{units[0][0]}/aicore/wsp_aicore.h"',
             f'#include "{units[0][0]}/aicore/wsp_cube.h"']
    for name, kernels in units:
        lines.append(f"namespace {name} {{")
        lines += [f'#include "{name}/{aicore.header_path(k)}"' for k in kernels]
        lines.append("}")

        def calls(part: str, name=name, kernels=kernels) -> str:
            return "".join(
                f"case {i}: {name}::{aicore.kernel_entry(k)}_{part}(tiles[j], scalars[j], "
                "(GM_ADDR)ws, j > 0); break; " for i, k in enumerate(kernels))

        lines.append(f"""
extern "C" int run_{name}(int ntasks, const int *which, const WspTile *const *tiles,
        const WspScalar *const *scalars, int ratio, int mode, void *ws, long ws_bytes, char *err,
        int n)
{{
    const int type = (ratio == 2) == (mode == 1) ? KERNEL_TYPE_MIX_AIC_1_1 : KERNEL_TYPE_MIX_AIC_1_2;
    AscendC::wsp_cpu_untrack_gm();
    AscendC::wsp_cpu_track_gm(ws, (size_t)ws_bytes);
    try {{
        AscendC::wsp_cpu_mix_launch(0, ratio, [&] {{
            KERNEL_TASK_TYPE_DEFAULT(type);
            if (!ASCEND_IS_AIC) AscendC::ShimFail("test", "ASCEND_IS_AIC is false on the AIC");
            for (int j = 0; j < ntasks; ++j) switch (which[j]) {{ {calls("aic")}}}
            if (ntasks) AscendC::CrossCoreWaitFlag<2, PIPE_FIX>(1);
        }}, [&] {{
            KERNEL_TASK_TYPE_DEFAULT(type);
            if (!ASCEND_IS_AIV) AscendC::ShimFail("test", "ASCEND_IS_AIV is false on an AIV");
            if (AscendC::GetBlockIdx() != AscendC::GetSubBlockIdx() || AscendC::GetTaskRatio() != ratio)
                AscendC::ShimFail("test", "GetBlockIdx / GetTaskRatio on an AIV of block 0");
            for (int j = 0; j < ntasks; ++j) switch (which[j]) {{ {calls("aiv")}}}
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


def _write(work, name: str, files: dict) -> None:
    for rel, text in files.items():
        (work / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / name / rel).write_text(text)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    """Every shape's kernels, split (aicore.mixed) and emitted as the tree has them, and the
    mutants of the f16 17 x 33 x 40 ones, built into one library."""
    work = tmp_path_factory.mktemp("mixed")
    units, kernels = [], {}
    for dt, shapes in SHAPES.items():
        for m, k, n in shapes:
            name = H.unit_name(f"mix_{dt}_{m}_{k}_{n}")
            mod = dataclasses.replace(ptowsp.parse(program(m, k, n, dt), f"{name}.wsp").ir, name=name)
            splits = {kk.name: split_mixed(kk) for kk in mod.kernels}
            assert {x: sp.form for x, sp in splits.items() if sp} == FORMS
            files = aicore.emit_aicore(mod)
            _write(work, name, files)
            units.append((name, list(mod.kernels)))
            kernels[(dt, m, k, n)] = (name, {kk.name: kk for kk in mod.kernels}, splits)
            if (dt, (m, k, n)) != MUTANT_SHAPE:
                continue
            for what, (kname, old, new, _) in MUTANTS.items():
                mname = f"{name}_{what}"
                path = aicore.header_path(mod.kernel(kname))
                assert files[path].count(old) == 1, (what, old)
                # the unit's headers under their own include guards, one line changed
                guard = f"WSP_AICORE_{name.upper()}_"
                mutant = {rel: text.replace(guard, f"WSP_AICORE_{mname.upper()}_")
                          for rel, text in files.items()}
                mutant[path] = mutant[path].replace(old, new)
                _write(work, mname, mutant)
                units.append((mname, list(mod.kernels)))
                kernels[(what,)] = (mname, {kk.name: kk for kk in mod.kernels}, splits)
    (work / "driver.cpp").write_text(_driver(units))
    so = work / "mixed.so"
    done = subprocess.run(["g++", *H.CXXFLAGS, "-pthread", "-I", str(H.HERE), "-I", str(work),
                           "-o", str(so), str(work / "driver.cpp")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-6000:]
    return ctypes.CDLL(str(so)), kernels


def _tiles(k, task) -> "ctypes.Array":
    params = [p for p in k.params if p.kind == "tile"]
    arr = (H.WspTile * len(params))()
    for t, (buf, p, (off, stride)) in enumerate(zip(task.tiles, params, task.views)):
        arr[t] = H.WspTile(buf.ctypes.data + off * buf.itemsize, p.rows, p.cols, stride, col_stride=1)
    return arr


def run_tasks(lib, key, knames: list[str], ratio: int, mode: int = 0, seed: int = 0,
              tasks=None, rows: int = 0):
    """Tasks of kernels `knames` of unit `key` run one after the other in one MIX launch of
    one block; their tasks (H.Task: the outputs in their buffers). `rows`: every tile of the
    kernel's M rows (the stored tile's) a partial view of that many. Raises H.KernelFailed."""
    dll, kernels = lib
    name, kern, splits = kernels[key]
    order = {x: i for i, x in enumerate(kern)}
    rng = np.random.default_rng(seed)
    tasks = tasks or [H.random_task(kern[x], rng, strided=bool(j % 2)) for j, x in enumerate(knames)]
    tiles = [_tiles(kern[x], t) for x, t in zip(knames, tasks)]
    for x, arr in zip(knames, tiles):
        m = kern[x].params[-1].rows  # y's
        for t in arr if rows else ():
            t.rows = rows if t.rows == m else t.rows
    scal = []
    for x, t in zip(knames, tasks):
        sc = [H.scalar_arg(p.dtype, t.scalars[p.name]) for p in kern[x].params if p.kind == "scalar"]
        scal.append((H.WspScalar * max(len(sc), 1))(*sc))
    size = max(workspace_offsets(splits[x])[1] for x in knames)
    ws = H._aligned(size, np.uint8)
    ws[:] = 0xFF  # NaN until written: a read before the write shows
    n = len(knames)
    err = ctypes.create_string_buffer(4096)
    fn = getattr(dll, f"run_{name}")
    fn.restype = ctypes.c_int
    ptrs = (ctypes.c_void_p * n)(*(ctypes.cast(t, ctypes.c_void_p) for t in tiles))
    sptrs = (ctypes.c_void_p * n)(*(ctypes.cast(s, ctypes.c_void_p) for s in scal))
    if fn(n, (ctypes.c_int * n)(*(order[x] for x in knames)), ptrs, sptrs, ratio, mode,
          ctypes.c_void_p(ws.ctypes.data), ctypes.c_long(ws.nbytes), err, 4096) != 0:
        raise H.KernelFailed(err.value.decode())
    return tasks


def _f64(v: np.ndarray, dt: str) -> np.ndarray:
    return (R.bf16_from_bits(v) if dt == "bf16" else v).astype(np.float64)


def _numpy(kname: str, x: dict, dt: str):
    """The kernel's formula in float64 from the task's inputs; (value, a bound on the f32
    sums' and the intermediate roundings' error before the dtype's final rounding)."""
    def f(n):
        return _f64(x[n], dt) if n != "bias" else x[n].astype(np.float64)

    k = x["x"].shape[1]
    u32 = UNIT["f32"]
    err = 8 * k * u32
    if kname == "gate":
        g, u = f("x") @ f("wg"), f("x") @ f("wu")
        mg, mu = np.abs(f("x")) @ np.abs(f("wg")), np.abs(f("x")) @ np.abs(f("wu"))
        return g / (1 + np.exp(-g)) * u, err * (mg * np.abs(u) + mu * np.abs(g) + mg * mu)
    if kname == "biased":
        return np.maximum(f("x") @ f("wg") + f("bias"), 0), err * (np.abs(f("x")) @ np.abs(f("wg")))
    if kname == "rms":
        # the normalised rows rounded to the dtype (the matmul's operand), then the f32 sums
        h = f("x") / np.sqrt(np.mean(f("x") ** 2, axis=1, keepdims=True) + 1e-6)
        return h @ f("wg"), (2 * UNIT[dt] + err + 16 * u32) * (np.abs(h) @ np.abs(f("wg")))
    s = f("x") @ f("wt").T
    es = err * (np.abs(f("x")) @ np.abs(f("wt")).T).max(axis=1, keepdims=True)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    if kname == "scores":
        return e / e.sum(axis=1, keepdims=True), err * (np.abs(f("x")) @ np.abs(f("wt")).T)
    # attn: p's error (s's, twice through exp and the max), p rounded to the dtype, the f32
    # sums of p · wv, the division
    n = f("wv").shape[0]
    rel = 4 * es + 2 * UNIT[dt] + 8 * n * u32 + 8 * u32
    sums = e.sum(axis=1, keepdims=True)
    return (e @ f("wv")) / sums, rel * (e @ np.abs(f("wv"))) / sums


CASES = [(dt, s) for dt, ss in SHAPES.items() for s in ss]


@pytest.mark.parametrize("ratio", [2, 1])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}_" + "x".join(map(str, c[1])))
def test_split_equals_ref_and_numpy(lib, case, ratio):
    """Each kernel twice in a launch (the second task after the first's flags), then every
    kernel once in a run (the workspace's layout changing from task to task), each task equal
    to ref's unsplit kernel and to NumPy."""
    dt, shape = case
    key = (dt, *shape)
    _, kern, splits = lib[1][key]
    for x in KERNELS:
        assert splits[x].rows_split == (x != "scores" and shape[0] > 1), x
    runs = [[x, x] for x in KERNELS] + [list(KERNELS)]
    for j, names in enumerate(runs):
        tasks = run_tasks(lib, key, names, ratio, seed=sum(shape) + j)
        for x, task in zip(names, tasks):
            k = kern[x]
            got = {out: np.array(H.tile_view(task, k, out)) for out, _ in k.stores}
            what = f"{x} {dt} {shape} ratio {ratio} in {names}"
            H.compare(k, got, H.ref_outputs(k, task), what)
            exact, err = _numpy(x, task.inputs, dt)
            # the f32 sums' error carried through the epilogue (silu and softmax are within 2
            # of their argument's relative error), then the dtype's roundings
            assert_close(_f64(got["y"], dt), exact, rtol=8 * UNIT[dt], atol=4 * err + 1e-6,
                         what=what)


@pytest.mark.parametrize("kname", ["rms", "gate", "attn"])
def test_a_partial_view_of_the_rows(lib, kname):
    """x and y partial views of 5 of their 33 rows: the AIVs share the kernel's 33 rows
    (17 and 16), so AIV 1's share of the task's tiles is empty; it still computes its share of
    the workspace (from the pad values) and keeps the flags. The 5 rows equal ref's (every op
    row-local: a row depends on its own row only), the rows past the view are left as they
    were."""
    key = ("bf16", 33, 257, 16)
    _, kern, splits = lib[1][key]
    assert splits[kname].rows_split
    (task,) = run_tasks(lib, key, [kname], 2, seed=5, rows=5)
    k = kern[kname]
    full = H.tile_view(task, k, "y")
    want = H.ref_outputs(k, task)["y"]
    H.compare(k, {"y": np.array(full[:5])}, {"y": want[:5]}, f"{kname} rows 0..4")
    before = H.random_task(k, np.random.default_rng(5))  # the garbage the Out tile started as
    assert np.array_equal(np.array(full[5:]), np.array(H.tile_view(before, k, "y"))[5:])


@pytest.mark.parametrize("what", sorted(MUTANTS))
@pytest.mark.parametrize("ratio", [2, 1])
def test_each_flag_is_needed(lib, what, ratio):
    """Each flag of the emitted protocol taken out, or set on another pipe, is caught by the
    stand-in: two tasks of the kernel in one launch (the flags between tasks too)."""
    kname, _, _, message = MUTANTS[what]
    with pytest.raises(H.KernelFailed, match="ascendc_cpu") as err:
        run_tasks(lib, (what,), [kname, kname], ratio)
    assert re.search(message, str(err.value)), str(err.value)


@pytest.mark.parametrize("ratio", [2, 1])
def test_a_kernel_declaring_another_type_is_caught(lib, ratio):
    with pytest.raises(H.KernelFailed, match="a kernel of a MIX launch declares another kernel type"):
        run_tasks(lib, ("f16", 17, 33, 40), ["gate"], ratio, mode=1)


def _kernel(body: str, params: str = "x: In[Tile[16, 16, f32]], w: In[Tile[16, 16, f32]], "
            "y: InOut[Tile[16, 16, f32]]"):
    text = f"""
input X: f32[16, 16]
input W: f32[16, 16]
output Y: f32[16, 16]
kernel k({params}) {{
    {body}
}}
workload wl() {{ k[0](x = X, w = W, y = Y) }}
schedule main = wl()
"""
    (k,) = ptowsp.parse(text, "k.wsp").ir.kernels
    return k


def test_the_rule():
    """Which kernels split and into which stages (aicore/mixed.py's rule); what does not keeps
    the vector path for the whole kernel (never a wrong answer)."""
    mod = ptowsp.load(str(ROOT / "examples/swiglu_ffn.wsp")).ir
    gate, down = (next(k for k in mod.kernels if k.name == x) for x in ("gate", "down"))
    assert not aicore.is_cube(gate) and aicore.is_cube(down)
    sp = split_mixed(gate)
    assert sp.form == "cube -> vector" and sp.rows_split
    assert sp.workspace_bytes == 2 * 16 * 256 * 4
    cube, vec = sp.stages
    assert [op.op for op in cube.kernel.ops].count("matmul") == 2 and aicore.is_cube(cube.kernel)
    assert "matmul" not in [op.op for op in vec.kernel.ops]
    assert split_mixed(down) is None  # all matmuls: the cube kernel as it is
    # -O2 fuses gate and down: silu(x w1) * (x w3) then @ w2, the product stored by the cube
    fused = next(k for k in optimize(mod, 2)[0].kernels if "down" in k.name)
    sp = split_mixed(fused)
    assert sp.form == "cube -> vector -> cube" and sp.rows_split
    assert [p.name for p in sp.workspace] == ["wsp_mm0", "wsp_mm1", "wsp_v0"]
    assert sp.stages[2].kernel.stores[0][0] == "y" and sp.vector_writes
    # RMSNorm -> matmul: the vector stage writes the operand, the cube stage reads it
    rms = split_mixed(_kernel("store(y, matmul(x * rsqrt(rowmean(x * x) + 1e-6), w))"))
    assert rms.form == "vector -> cube" and rms.stages[0].writes() == ("wsp_v0",)
    assert "wsp_v0" in rms.stages[1].tiles
    # attention: q kᵀ, softmax, p v stored by the cube
    att = split_mixed(_kernel("store(y, matmul(softmax(matmul(x, transpose(w))), x))"))
    assert att.form == "cube -> vector -> cube" and not att.rows_split
    # an accumulating matmul into the tile it reads: the addition is the vector stage's
    acc = split_mixed(_kernel("store(y, relu(matmul(x, w, acc = y)))"))
    assert acc.form == "cube -> vector" and "add" in [op.op for op in acc.stages[1].kernel.ops]
    not_split = {
        # a product the cube would read as it is
        "mm_of_mm": "store(y, relu(matmul(matmul(x, w), w)))",
        # an operand the kernel stores: the order of the store and the read would matter
        "stored": "store(y, matmul(y, w) + x)",
        # operands of two dtypes
        "dtypes": "store(y, relu(matmul(x, cast(w, f16))))",
    }
    for what, body in not_split.items():
        assert split_mixed(_kernel(body)) is None, what


# -- end to end: the tree, with the MIX dispatcher

SWIGLU16 = (ROOT / "examples/swiglu_ffn.wsp").read_text().replace(
    "input X: f32[T, 64]", "input X: f16[T, 64]").replace(
    "input W1: f32[64, 256]", "input W1: f16[64, 256]").replace(
    "input W3: f32[64, 256]", "input W3: f16[64, 256]").replace(
    "x: In[Tile[16, 64, f32]], w1: In[Tile[64, 256, f32]], w3: In[Tile[64, 256, f32]]",
    "x: In[Tile[16, 64, f16]], w1: In[Tile[64, 256, f16]], w3: In[Tile[64, 256, f16]]")


@pytest.mark.parametrize("dt, level", [("f32", 1), ("f16", 1), ("f32", 2)])
def test_swiglu_ffn_split_end_to_end(dt, level, tmp_path):
    """examples/swiglu_ffn (f32 as written, and with f16 X, W1, W3) at -O1, where `gate` is a
    kernel of its own: `gate` split, its cube stage on each block's AIC and its vector stage on
    the two AIVs through wsp_dispatch_mix (8 rows each), `down` on the cube; at -O2, where
    gate and down fuse, the chain cube -> vector -> cube (the AIVs writing the operand of
    `down`'s matmul, the AIC waiting for both). The host binary's Y equal to ref's and to
    NumPy's formula; T = 48 on 2 blocks: one block runs two tasks in a wave (the flags
    between tasks). The workspace is the host's: allocated with the run's buffers and freed
    with them (the stand-in ACL fails aclFinalize on an allocation never freed)."""
    text = SWIGLU16 if dt == "f16" else (ROOT / "examples/swiglu_ffn.wsp").read_text()
    ir, _ = optimize(ptowsp.parse(text, f"swiglu_{dt}.wsp").ir, level)
    tree, exe = build_host(tmp_path, ir, "main")
    dispatch = (tree / "aicore/dispatch.asc").read_text()
    mixed = "gate" if level == 1 else "gate__down"
    assert "KERNEL_TYPE_MIX_AIC_1_2" in dispatch and f"wsp_aicore_{mixed}_aiv(" in dispatch
    data = tmp_path / "data"
    binds = ["T=48"]
    done = subprocess.run([sys.executable, str(tree / "scripts/gen_data.py"), "--data", str(data),
                           "--target", "ref", *binds], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    done = run(exe, data, "-b", "2", *binds)
    assert done.returncode == 0, done.stdout + done.stderr
    calls = (data / "acl.log").read_text().split()
    assert "<<<wsp_dispatch_mix>>>" in calls
    assert ("<<<wsp_dispatch_cube>>>" in calls) == (level == 1)  # -O2: every kernel mixed
    assert calls.count("aclrtMalloc") == calls.count("aclrtFree")
    assert calls.index("aclrtMalloc") < calls.index("<<<wsp_dispatch_mix>>>")
    got = np.load(data / "output/Y.npy").astype(np.float64)
    want = np.load(data / "expected/Y.npy").astype(np.float64)
    rt, at = H.TOL_MATMUL["f32"]
    np.testing.assert_allclose(got, want, rtol=rt, atol=at * np.abs(want).max())
    x, w1, w3, w2 = (np.load(data / f"input/{n}.npy").astype(np.float64)
                     for n in ("X", "W1", "W3", "W2"))
    g = x @ w1
    h = g / (1 + np.exp(-g)) * (x @ w3)
    np.testing.assert_allclose(got, h @ w2, rtol=1e-3, atol=1e-3 * np.abs(h @ w2).max())


def test_the_stand_in_acl_catches_a_leak_and_a_bad_free(tmp_path):
    """The stand-in ACL's allocation tracking that the trees run under: aclFinalize fails
    while an aclrtMalloc is not freed, aclrtFree of a pointer it did not return fails."""
    src = tmp_path / "leak.cpp"
    src.write_text("""#include "acl/acl.h"
int main(int argc, char **) {
    void *p = nullptr, *q = nullptr;
    if (aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST) || aclrtMalloc(&q, 64, ACL_MEM_MALLOC_HUGE_FIRST)) return 5;
    if (aclrtFree(p)) return 6;
    if (aclrtFree(p) == ACL_SUCCESS) return 7;  /* freed twice */
    if (argc > 1 && aclrtFree(q)) return 8;
    return aclFinalize() == ACL_SUCCESS ? 0 : 4;
}
""")
    exe = tmp_path / "leak"
    subprocess.run(["g++", "-std=c++17", f"-I{ROOT / 'tests/ascend/stub_acl'}", str(src), "-o",
                    str(exe)], check=True)
    leak = subprocess.run([str(exe)], capture_output=True, text=True)
    assert leak.returncode == 4, leak.stderr
    assert "aclFinalize with 1 device allocations never freed" in leak.stderr
    assert "which aclrtMalloc did not return or was freed" in leak.stderr
    assert subprocess.run([str(exe), "free"], capture_output=True).returncode == 0
