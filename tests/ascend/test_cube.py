"""Matmul on the Cube unit (`backends/ascend/aicore/cube.py`), compiled against the CPU Ascend C
of `ascendc_cpu/`, whose cube model permutes the NZ / ZZ / ZN fractal layouts in memory and
checks L1 / L0A / L0B / L0C capacities, 512-byte fractal alignment and the MTE2 / MTE1 / M / FIX
hand-offs:

- every layout (a·b, a·sᵀ, sᵀ·b, sᵀ·tᵀ, and `acc` stored into its own tile) x dtype (f16,
  bf16 and f32 in, f32 / f16 / bf16 out) x shapes across the fractal, block and stage edges of
  `backends/cube.py`'s tiling (1, 15, 16, 17, 127, 129, 255, 257, and a K past step_k), kernel
  == ref == NumPy in float64; shapes and values under hypothesis;
- the stand-in's rules: a missing flag, an over-capacity buffer, a misaligned fractal, a cube
  instruction in a vector kernel, and a wrong fractal order (wrong numbers) are each caught;
- which kernels go to the cube and which stay on the vector path;
- a GEMM tree with f16 operands, partial edge tiles and `acc`, end to end on the host through
  both dispatchers (the AIC one runs its tasks), equal to ref.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp import driver
from ptowsp.backends.ascend import aicore
from ptowsp.backends.cube import cube_tiling
from ptowsp.backends.ref import values as R
from ptowsp.ir.passes import optimize
from tests.accuracy import UNIT, assert_close

from .ascendc_cpu import harness as H
from .hostrun import build_host, run
from .streams import CXX, ROOT

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def program(m: int, k: int, n: int, dt: str, out: str = "f32") -> str:
    """One kernel storing the four layouts and `acc`, all on the cube."""
    return f"""
input A: {dt}[{m}, {k}]
input S: {dt}[{k}, {m}]
input B: {dt}[{k}, {n}]
input T: {dt}[{n}, {k}]
output Y0: {out}[{m}, {n}]
output Y1: {out}[{m}, {n}]
output Y2: {out}[{m}, {n}]
output Y3: {out}[{m}, {n}]
output Y4: f32[{m}, {n}]
kernel mm(a: In[Tile[{m}, {k}, {dt}]], s: In[Tile[{k}, {m}, {dt}]], b: In[Tile[{k}, {n}, {dt}]],
          t: In[Tile[{n}, {k}, {dt}]], y0: Out[Tile[{m}, {n}, {out}]],
          y1: Out[Tile[{m}, {n}, {out}]], y2: Out[Tile[{m}, {n}, {out}]],
          y3: Out[Tile[{m}, {n}, {out}]], y4: InOut[Tile[{m}, {n}, f32]]) {{
    store(y0, matmul(a, b))
    store(y1, matmul(a, transpose(t)))
    store(y2, matmul(transpose(s), b))
    store(y3, matmul(transpose(s), transpose(t)))
    store(y4, matmul(a, b, acc = y4))
}}
workload w() {{ mm[0](a = A, s = S, b = B, t = T, y0 = Y0, y1 = Y1, y2 = Y2, y3 = Y3, y4 = Y4) }}
schedule main = w()
"""


def _f64(x: np.ndarray, dt: str) -> np.ndarray:
    return (R.bf16_from_bits(x) if dt == "bf16" else x).astype(np.float64)


def check(m: int, k: int, n: int, dt: str, seed: int, tmp_path, out: str = "f32",
          levels=(0, 2)) -> str:
    """Run the layouts' kernel on the stand-in at each level; each store equals ref and
    float64 NumPy. The kernel's header (of the last level)."""
    base = driver.lower(driver.check_text(program(m, k, n, dt, out), "cube.wsp"))
    units = []
    for level in levels:
        mod, _ = optimize(base, level)
        name = H.unit_name(f"cube_{m}_{k}_{n}_{dt}_{out}_O{level}")
        mod = dataclasses.replace(mod, name=name)
        (kern,) = mod.kernels
        assert aicore.is_cube(kern), name
        units.append(H.Unit(name, aicore.emit_aicore(mod), [kern]))
    lib = H.build(units, tmp_path)
    rng = np.random.default_rng(seed)
    got = {}
    for u in units:
        (kern,) = u.kernels
        task = H.random_task(kern, rng)
        got[u.name] = H.run_task(lib, u.name, kern, task)
        H.compare(kern, got[u.name], H.ref_outputs(kern, task), u.name)
        x = {p: _f64(task.inputs[p], dt) for p in "asbt"}
        acc = task.inputs["y4"].astype(np.float64)
        terms = {"y0": (x["a"], x["b"], 0.0), "y1": (x["a"], x["t"].T, 0.0),
                 "y2": (x["s"].T, x["b"], 0.0), "y3": (x["s"].T, x["t"].T, 0.0),
                 "y4": (x["a"], x["b"], acc)}
        for y, (p, q, plus) in terms.items():
            want = p @ q + plus
            # products of f16 / bf16 are exact in f32; f32 sums of k terms, then the stored
            # dtype's rounding
            unit = UNIT["f32" if y == "y4" else out]
            atol = 4 * np.sqrt(k) * UNIT["f32"] * (np.abs(p) @ np.abs(q) + np.abs(plus))
            assert_close(_f64(got[u.name][y], "bf16" if out == "bf16" and y != "y4" else "f32"),
                         want, rtol=4 * unit + 4 * k * UNIT["f32"], atol=atol + unit * np.abs(want),
                         what=f"{y} {u.name}")
    return units[-1].files[aicore.header_path(units[-1].kernels[0])]


# shapes across the fractal (16), block (base_m 128, base_n 256) and stage edges
EDGES = [(1, 1, 1), (15, 16, 17), (17, 15, 16), (16, 127, 129), (129, 17, 255), (255, 33, 257)]


@pytest.mark.parametrize("dt", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("shape", EDGES, ids=lambda s: "x".join(map(str, s)))
def test_every_layout_dtype_and_edge(dt, shape, tmp_path):
    m, k, n = shape
    check(m, k, n, dt, sum(shape), tmp_path, levels=(2,))


@pytest.mark.parametrize("dt, out", [("f16", "f16"), ("bf16", "bf16"), ("f16", "bf16"),
                                     ("f32", "f16")])
def test_fixpipe_converts_on_the_way_out(dt, out, tmp_path):
    """C stored as f16 / bf16: Fixpipe's F322F16 / F322BF16 (one rounding of the f32 sum)."""
    text = check(20, 40, 24, dt, 5, tmp_path, out=out)
    assert "wsp_cube_out<" + {"f16": "half", "bf16": "bfloat16_t"}[out] + ">" in text


@pytest.mark.parametrize("dt", ["f16", "f32"])
def test_k_past_one_l1_stage(dt, tmp_path):
    """K deeper than one L1 stage (step_k): the stages accumulate in L0C (cmatrixInitVal only
    on the first Mmad), at -O0 and -O2."""
    m, k, n = 17, 2600, 15
    t = cube_tiling(m, n, k, 2 if dt == "f16" else 4)
    assert t.l1_stages > 1 and t.k_steps > t.l1_stages, t
    text = check(m, k, n, dt, 3, tmp_path)
    assert f"k1 += {t.step_k}" in text and f"k0 += {t.base_k}" in text


@settings(max_examples=4, deadline=None)
@given(st.integers(1, 140), st.integers(1, 140), st.integers(1, 140),
       st.sampled_from(["f16", "bf16", "f32"]), st.integers(0, 2**31))
def test_shapes_and_values(tmp_path_factory, m, k, n, dt, seed):
    check(m, k, n, dt, seed, tmp_path_factory.mktemp("cube"), levels=(2,))


def test_the_emitted_loops_are_the_tiling():
    """The header's loops and buffers are `cube_tiling`'s, not chosen by the emitter."""
    mod = driver.lower(driver.check_text(program(300, 700, 520, "f16"), "t.wsp"))
    (kern,) = mod.kernels
    text = aicore.emit_aicore(mod)[aicore.header_path(kern)]
    t = cube_tiling(300, 520, 700, 2)
    assert f"m0 += {t.base_m}" in text and f"n0 += {t.base_n}" in text
    assert f"k1 += {t.step_k}" in text and f"k0 += {t.base_k}" in text
    assert f"TQue<AscendC::TPosition::A1, {t.l1_buffers}>" in text
    assert f"TQue<AscendC::TPosition::A2, {t.l0_buffers}>" in text
    assert "AscendC::Mmad(" in text and "LoadData(" in text and "wsp_cube_in<half>" in text
    assert "Muls" not in text and "GetValue" not in text  # nothing of the vector path


# -- which kernels go to the cube (a matmul with vector work after it is split over the cube
# and the vector cores: tests/ascend/test_mixed.py)

STAYS = {
    "integer operands": "store(y, matmul(x, w))",
    "acc from another tile": "store(y, matmul(h, w, acc = c))",
    "mixed operand dtypes": "store(y, matmul(h, g))",
}


@pytest.mark.parametrize("why", list(STAYS))
def test_what_stays_on_the_vector_path(why):
    src = f"""
input X: i32[16, 32]
input H: f16[16, 32]
input G: bf16[32, 16]
input W: {"i32" if why.startswith("integer") else "f16"}[32, 16]
input C: f32[16, 16]
output Y: f32[16, 16]
kernel k(x: In[Tile[16, 32, i32]], h: In[Tile[16, 32, f16]], g: In[Tile[32, 16, bf16]],
         w: In[Tile[32, 16, {"i32" if why.startswith("integer") else "f16"}]], c: In[Tile[16, 16, f32]],
         y: Out[Tile[16, 16, f32]]) {{
    {STAYS[why]}
}}
workload wl() {{ k[0](x = X, h = H, g = G, w = W, c = C, y = Y) }}
schedule main = wl()
"""
    mod = driver.lower(driver.check_text(src, "s.wsp"))
    (kern,) = mod.kernels
    assert not aicore.is_cube(kern), why
    assert "Mmad" not in aicore.emit_aicore(mod)[aicore.header_path(kern)]


def test_matmuls_whose_panels_do_not_fit_l1_together_stay_on_the_vector_path():
    """Two matmuls of one kernel share the queues, sized for the largest panel of each: when
    those do not fit L1 together the kernel keeps the vector path (no tiling of its own)."""
    src = """
input A: f16[128, 4096]
input B: f16[4096, 16]
input C: f16[16, 4096]
input D: f16[4096, 256]
output Y: f32[128, 16]
output Z: f32[16, 256]
kernel k(a: In[Tile[128, 4096, f16]], b: In[Tile[4096, 16, f16]], c: In[Tile[16, 4096, f16]],
         d: In[Tile[4096, 256, f16]], y: Out[Tile[128, 16, f32]], z: Out[Tile[16, 256, f32]]) {
    store(y, matmul(a, b))
    store(z, matmul(c, d))
}
workload wl() { k[0](a = A, b = B, c = C, d = D, y = Y, z = Z) }
schedule main = wl()
"""
    (kern,) = driver.lower(driver.check_text(src, "two.wsp")).kernels
    assert not aicore.is_cube(kern)
    # each alone fits (its tiling is made to), and both fill most of L1
    one, two = cube_tiling(128, 16, 4096, 2), cube_tiling(16, 256, 4096, 2)
    assert one.fits() and two.fits()
    assert one.l1_bytes() + two.l1_bytes() > 512 * 1024 - 256


def test_a_gathered_operand_stays_on_the_vector_path():
    """A task passing a gather view (or a column-strided one): the cube's Nd2Nz copies take
    rows of contiguous elements, so that kernel keeps the vector path's copies."""
    from ptowsp.backends.ascend import cube_views, emit_project

    src = """
input X: f16[64, 32]
input W: f16[32, 16]
input P: i32[16]
output Y: f32[16, 16]
kernel k(x: In[Tile[16, 32, f16]], w: In[Tile[32, 16, f16]], y: Out[Tile[16, 16, f32]]) {
    store(y, matmul(x, w))
}
workload wl() { k[0](x = X[P[0 : 16], :], w = W, y = Y) }
schedule main = wl()
"""
    m = ptowsp.parse(src, "g.wsp")
    ir, _ = optimize(m.ir, 2)
    assert cube_views(ir) == {"k"}
    files = emit_project(ir, "main").files
    assert "wsp_dispatch_cube" not in files["aicore/dispatch.asc"]
    assert "aicore/wsp_cube.h" not in files


# -- the stand-in's rules

RULES = r"""
#include "kernel_operator.h"
#include <cstdio>
#include <cstring>
using namespace AscendC;

static half A[32 * 32], B[32 * 32];
static float C[32 * 32];

// C = A @ B (32 x 32 x 32, f16) with TBufs and explicit flags; `mode` breaks one rule
static void mm(int mode)
{
    TPipe pipe;
    TBuf<TPosition::A1> a1;
    TBuf<TPosition::B1> b1;
    TBuf<TPosition::A2> a2;
    TBuf<TPosition::B2> b2;
    TBuf<TPosition::CO1> co1;
    pipe.InitBuffer(a1, 2048);
    pipe.InitBuffer(b1, 2048);
    pipe.InitBuffer(a2, mode == 2 ? 70000 : 2048);
    pipe.InitBuffer(b2, 2048);
    pipe.InitBuffer(co1, 4096);
    GlobalTensor<half> ga, gb;
    GlobalTensor<float> gc;
    ga.SetGlobalBuffer(A, 1024);
    gb.SetGlobalBuffer(B, 1024);
    gc.SetGlobalBuffer(C, 1024);
    LocalTensor<half> la1 = a1.Get<half>(), lb1 = b1.Get<half>();
    LocalTensor<half> la2 = a2.Get<half>(), lb2 = b2.Get<half>();
    LocalTensor<float> lc = co1.Get<float>();
    DataCopy(la1, ga, Nd2NzParams(1, 32, 32, 0, 32, 32, 1, 0));
    DataCopy(lb1, gb, Nd2NzParams(1, 32, 32, 0, 32, 32, 1, 0));
    if (mode != 1) {  // mode 1: no MTE2 -> MTE1 flag
        SetFlag<HardEvent::MTE2_MTE1>(0);
        WaitFlag<HardEvent::MTE2_MTE1>(0);
    }
    for (int i = 0; i < 2; ++i)  // ZZ: a's fractals (k, i) of the NZ copy, 2 apart
        LoadData(la2[i * 2 * 256 + (mode == 3 ? 8 : 0)], la1,
                 LoadData2DParams((uint16_t)i, 2, 2, 0, 0, false, 0));
    for (int j = 0; j < 2; ++j)  // ZN: b's fractals transposed (mode 4: not transposed)
        LoadData(lb2[j * 2 * 256], lb1, LoadData2DParams((uint16_t)j, 2, 2, 0, 0, mode != 4, 0));
    SetFlag<HardEvent::MTE1_M>(0);
    WaitFlag<HardEvent::MTE1_M>(0);
    Mmad(lc, la2, lb2, MmadParams(32, 32, 32, 0, false, true));
    SetFlag<HardEvent::M_FIX>(0);
    WaitFlag<HardEvent::M_FIX>(0);
    FixpipeParamsV220 p;
    p.nSize = 32;
    p.mSize = 32;
    p.srcStride = 32;
    p.dstStride = 32;
    Fixpipe(gc, lc, p);
    pipe.Destroy();
}

int main(int argc, char **argv)
{
    const int mode = argc > 1 ? std::atoi(argv[1]) : 0;
    for (int i = 0; i < 1024; ++i) {
        A[i] = half((float)((i * 7) % 13) - 6.0f);
        B[i] = half((float)((i * 5) % 11) - 5.0f);
    }
    if (mode == 5) KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    try {
        mm(mode);
    } catch (const std::exception &e) {
        std::printf("%s\n", e.what());
        return 1;
    }
    for (int i = 0; i < 1024; ++i) std::printf("%.1f\n", C[i]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def rules(tmp_path_factory):
    d = tmp_path_factory.mktemp("rules")
    (d / "rules.cpp").write_text(RULES)
    exe = d / "rules"
    subprocess.run([CXX, "-std=c++17", "-O1", f"-I{H.HERE}", str(d / "rules.cpp"), "-o", str(exe)],
                   check=True, capture_output=True, text=True)

    def go(mode: int):
        return subprocess.run([str(exe), str(mode)], capture_output=True, text=True, timeout=60)
    return go


def _matrices():
    i = np.arange(1024)
    a = ((i * 7) % 13 - 6.0).reshape(32, 32)
    b = ((i * 5) % 11 - 5.0).reshape(32, 32)
    return a, b


def test_rules_a_correct_kernel_computes_a_at_b(rules):
    done = rules(0)
    assert done.returncode == 0, done.stdout
    a, b = _matrices()
    np.testing.assert_array_equal(np.array(done.stdout.split(), float).reshape(32, 32), a @ b)


@pytest.mark.parametrize("mode, message", [
    (1, "reads L1 bytes [0, 512) on pipe MTE1 (L1->L0A/L0B load), but pipe MTE2 (GM->UB/L1 copy) "
        "wrote them with no synchronisation"),
    (2, "more bytes after 0 exceed L0A (65536 bytes)"),
    (3, "not 512-byte aligned (a whole 512-byte fractal)"),
    (5, "an L1 / L0 buffer in a KERNEL_TYPE_AIV_ONLY kernel (the vector cores have none)"),
], ids=["missing-flag", "over-capacity", "misaligned-fractal", "cube-in-aiv"])
def test_rules_each_misuse_is_caught(rules, mode, message):
    done = rules(mode)
    assert done.returncode == 1 and message in done.stdout, done.stdout[:600]


def test_rules_a_wrong_fractal_order_gives_wrong_numbers(rules):
    """B loaded into L0B without the transposing load: the stand-in's ZN layout is really
    permuted, so the product is a @ b's fractals transposed, not a @ b."""
    done = rules(4)
    assert done.returncode == 0, done.stdout
    a, b = _matrices()
    got = np.array(done.stdout.split(), float).reshape(32, 32)
    assert not np.array_equal(got, a @ b)


# -- end to end

GEMM16 = (ROOT / "examples/gemm.wsp").read_text().replace(
    "f32[M, K]", "f16[M, K]").replace("f32[K, N]", "f16[K, N]").replace(
    "a: In[Tile[TS, TS, f32]], b: In[Tile[TS, TS, f32]]",
    "a: In[Tile[TS, TS, f16]], b: In[Tile[TS, TS, f16]]")


@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_gemm_tree_on_the_cube_end_to_end(dt, tmp_path):
    """The example GEMM (f32 as written, and with f16 operands): every task on the cube through
    wsp_dispatch_cube (the only dispatcher of the tree) (partial edge tiles, `acc` through Fixpipe's atomic add, three K steps in
    order), the host binary's C equal to ref's."""
    text = GEMM16 if dt == "f16" else (ROOT / "examples/gemm.wsp").read_text()
    ir, _ = optimize(ptowsp.parse(text, f"gemm_{dt}.wsp").ir, 2)
    tree, exe = build_host(tmp_path, ir, "main")
    assert "KERNEL_TYPE_AIC_ONLY" in (tree / "aicore/dispatch.asc").read_text()
    data = tmp_path / "data"
    binds = ["M=100", "N=70", "K=130"]
    done = subprocess.run([sys.executable, str(tree / "scripts/gen_data.py"), "--data", str(data),
                           "--target", "ref", *binds], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    done = run(exe, data, "-b", "3", *binds)
    assert done.returncode == 0, done.stdout + done.stderr
    waves = int(re.search(r"(\d+) waves", done.stdout)[1])
    calls = (data / "acl.log").read_text().split()
    # every task on the cube: the AIC dispatcher once per wave, no AIV launch
    assert calls.count("<<<wsp_dispatch_cube>>>") == waves and "<<<wsp_dispatch>>>" not in calls
    got = np.load(data / "output/C.npy").astype(np.float64)
    want = np.load(data / "expected/C.npy").astype(np.float64)
    rt, at = H.TOL_MATMUL["f32"]
    np.testing.assert_allclose(got, want, rtol=rt, atol=at * np.abs(want).max())
