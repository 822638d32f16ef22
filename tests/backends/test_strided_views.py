"""Strided views (language.md section 6, "Strided views"): a slice with a step on any dimension
of a view. cpu_sim == ref == NumPy's basic slicing over shapes, starts, steps (rows, columns
and a leading dimension), dtypes (f32, f16, i32, i8) and modes (In, Out, InOut: a strided
store leaves the skipped elements as they were); a partial strided view (a run-time stop);
a `let`, a transposed strided view and a gather view's stepped columns; dependencies on the
bounding box (a reader of a touched element waits for the writer, one of
an element past the box does not); the IR's box; the cycle model's DMA blocks.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptowsp
from ptowsp import driver, sym
from ptowsp.backends.cpu import cost
from ptowsp.backends.machine import load_machine
from ptowsp.ir import nodes as N
from ptowsp.ir import visit as V

pytestmark = pytest.mark.cc

from .test_partial_tiles import SETTINGS, _cache, compiled  # noqa: E402, F401
from .test_transposed_views import both, ints  # noqa: E402

DTYPES = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "i8": np.int8}

# x (In), z (InOut) and y (Out), each a [R, C] strided view of a [B, H, W] tensor.
MODES = """\
    input  X: DT[B, H, W]
    inout  Z: DT[B, H, W]
    inout  Y: DT[B, H, W]
    kernel k(x: In[Tile[R, C, DT]], z: InOut[Tile[R, C, DT]], y: Out[Tile[R, C, DT]]) {
        store(y, x * 2 + z)
        store(z, z - x)
    }
    axis batch = Dense[B]
    workload w() {
        for b in P(batch) {
            k[b](x = X[b, XV], z = Z[b, ZV], y = Y[LV, YV])
        }
    }
"""


def sl(a: int, n: int, k: int) -> slice:
    """n elements from a, k apart, as NumPy and the view write them (the stop is the last
    element's next position, which never passes the dimension)."""
    return slice(a, a + (n - 1) * k + 1, k)


def text_of(s: slice) -> str:
    return f"{s.start} : {s.stop}" + (f" : {s.step}" if s.step != 1 else "")


@st.composite
def views(draw):
    r, c = draw(st.sampled_from([1, 3, 8])), draw(st.sampled_from([1, 5, 16]))
    b = draw(st.integers(1, 3))
    steps = [(draw(st.integers(1, 4)), draw(st.integers(1, 5))) for _ in range(3)]
    h = max((r - 1) * rk + 1 for rk, _ in steps) + draw(st.integers(0, 3))
    w = max((c - 1) * ck + 1 for _, ck in steps) + draw(st.integers(0, 3))
    subs = []
    for rk, ck in steps:
        a0 = draw(st.integers(0, h - ((r - 1) * rk + 1)))
        c0 = draw(st.integers(0, w - ((c - 1) * ck + 1)))
        subs.append((sl(a0, r, rk), sl(c0, c, ck)))
    lead = draw(st.integers(1, 3))  # Y's leading dimension stepped: b * lead .. (one element)
    return r, c, b, h, w, subs, lead


@SETTINGS
@given(v=views(), dt=st.sampled_from(sorted(DTYPES)), seed=st.integers(0, 2**16))
def test_strided_reads_and_writes_match_numpy_on_both_targets(v, dt, seed):
    r, c, b, h, w, (xs, zs, ys), lead = v
    text = MODES.replace("DT", dt).replace("R, C", f"{r}, {c}")
    text = text.replace("B, H, W", f"{b * lead}, {h}, {w}").replace("Dense[B]", f"Dense[{b}]")
    text = text.replace("XV", ", ".join(map(text_of, xs))).replace("ZV", ", ".join(map(text_of, zs)))
    text = text.replace("LV", f"b * {lead} : b * {lead} + 1 : {lead}")
    text = text.replace("YV", ", ".join(map(text_of, ys)))
    rng = np.random.default_rng(seed)
    X, Z, Y = (ints(rng, (b * lead, h, w), DTYPES[dt]) for _ in range(3))
    out = both(text, {}, {"X": X, "Z": Z, "Y": Y}, workers=2)
    want_y, want_z = Y.copy(), Z.copy()
    for i in range(b):
        x, z = X[i][xs].astype(np.int64), Z[i][zs].astype(np.int64)
        want_y[i * lead : i * lead + 1 : lead][0][ys] = x * 2 + z
        want_z[i][zs] = z - x
    np.testing.assert_array_equal(out["Y"], want_y)
    np.testing.assert_array_equal(out["Z"], want_z)


# A run-time stop: ceildiv(L - 1, 3) valid columns of a Tile[4, 16], padded with 0 past them
# (a row sum sees them as 0); the InOut writes only its elements.
PARTIAL = """\
    sym L
    input  X: f32[4, 48]
    inout  Y: f32[4, 48]
    output S: f32[4, 1]
    kernel k(x: In[Tile[4, 16, f32]], y: InOut[Tile[4, 16, f32]], s: Out[Tile[4, 1, f32]]) {
        store(s, rowsum(x))
        store(y, y + x * 10.0)
    }
    workload w() {
        k(x = X[:, 1 : L : 3], y = Y[:, 1 : L : 3], s = S)
    }
"""


@SETTINGS
@given(L=st.integers(2, 48), seed=st.integers(0, 2**16))
def test_a_partial_strided_view(L, seed):
    rng = np.random.default_rng(seed)
    X, Y = ints(rng, (4, 48), np.float32), ints(rng, (4, 48), np.float32)
    out = both(PARTIAL, {"L": L}, {"X": X, "Y": Y})
    want = Y.copy()
    want[:, 1:L:3] += X[:, 1:L:3] * 10
    np.testing.assert_array_equal(out["Y"], want)
    np.testing.assert_array_equal(out["S"][:, 0], X[:, 1:L:3].sum(axis=1))


# Task 0 writes the even columns 0..60 of Y (its box: columns 0 to 60); task 1 reads column 4
# (written), task 2 column 3 (skipped, inside the box), task 3 column 63 (skipped, past it).
DEPS = """\
    input  X: f32[1, 31]
    output Y: f32[1, 64]
    output R: f32[3, 1]
    kernel put(x: In[Tile[1, 31, f32]], y: Out[Tile[1, 31, f32]]) { store(y, x + 1.0) }
    kernel get(y: In[Tile[1, 1, f32]], r: Out[Tile[1, 1, f32]]) { store(r, y) }
    workload w() {
        put(x = X, y = Y[0, 0:62:2])
        get(y = Y[0, 4:5], r = R[0:1, :])
        get(y = Y[0, 3:4], r = R[1:2, :])
        get(y = Y[0, 63:64], r = R[2:3, :])
    }
    schedule s = w()
"""


def test_dependencies_are_on_the_bounding_box_and_never_miss_a_touched_element(tmp_path):
    X = np.arange(31, dtype=np.float32)[None, :]
    prog = ptowsp.parse(textwrap.dedent(DEPS), "deps.wsp").compile(target="cpu_sim")
    out = prog.run(workers=2, trace=True, X=X)
    edges = {tuple(e) for e in prog.trace.edges.tolist()}
    assert (0, 1) in edges  # reads an element the writer touches: required
    assert (0, 2) in edges  # a skipped element inside the box: over-approximated (allowed)
    assert (0, 3) not in edges  # past the box: no order
    np.testing.assert_array_equal(out["R"][:, 0], [X[0, 2] + 1, 0, 0])


def test_the_ir_prints_the_bounding_box_and_its_step():
    ir = driver.lower(driver.check_text(textwrap.dedent(DEPS), "t.wsp"))
    put = next(iter(V.tasks(ir.schedules[0].body)))
    y = next(a for a in put.args if isinstance(a, N.TileArg) and a.param == "y")
    assert y.steps == (1, 2) and y.box_extents[1] == sym.const(61)
    from ptowsp.ir.printer import print_module
    assert "y: w Y[0, 0:61:2] rows=- cols=1" in print_module(ir)


def test_the_cycle_model_costs_the_dma_blocks_a_strided_view_touches():
    """A [16, 64] f32 tile read with column step k moves the 32-byte blocks its rows touch:
    step 2 spans 127 elements (16 blocks a row, 2x the 8 of a contiguous row), step 8 or more
    one block per element (8x)."""
    machine = load_machine(None)
    base = "input X: f32[16, 4096]\noutput Y: f32[16, 64]\n" \
           "kernel k(x: In[Tile[16, 64, f32]], y: Out[Tile[16, 64, f32]]) { store(y, x) }\n"
    cycles = {}
    for step in (1, 2, 8, 16):
        text = base + f"workload w() {{ k(x = X[:, 0 : {64 * step} : {step}], y = Y) }}\n" \
                      "schedule s = w()\n"
        m = driver.lower(driver.check_text(text, "c.wsp"))
        touched = cost.touched_bytes(m, machine)
        k = m.kernels[0]
        want = {1: 16 * 64 * 4, 2: 16 * 16 * 32, 8: 16 * 64 * 32, 16: 16 * 64 * 32}[step]
        assert touched.get(k.name, {}).get("x", 16 * 64 * 4) == want
        assert cost.moved_bytes(k, touched.get(k.name)) == want + 16 * 64 * 4
        cycles[step] = cost.kernel_costs(m, machine)[0][1]
    assert cycles[1] < cycles[2] < cycles[8] == cycles[16]
    assert cost.strided_row_bytes(64, 2, 4, 32) == 512  # 127 elements: 508 bytes, 16 blocks
    assert cost.strided_row_bytes(3, 1, 4, 32) == 32


# A `let` of a strided view, a strided view transposed (InOut), and a gather view whose
# columns are stepped.
MIXED = """\
    input  pos: i32[4]
    input  T: f32[10, 16]
    input  X: f32[8, 16]
    inout  Z: f32[8, 12]
    output G: f32[4, 8]
    output Y: f32[4, 8]
    kernel cp(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x + 1.0) }
    kernel tw(z: InOut[Tile[4, 4, f32]]) { store(z, z * 10.0) }
    workload w() {
        let v = X[0:8:2, 1:16:2]
        cp(x = v, y = Y)
        tw(z = Z[0:8:2, 0:12:3].T)
        cp(x = T[pos[0:4], 1:16:2], y = G)
    }
"""


def test_lets_transposes_and_gathered_rows_of_strided_views():
    rng = np.random.default_rng(3)
    pos = np.array([3, 0, 9, 5], np.int32)
    T, X, Z = (ints(rng, s, np.float32) for s in ((10, 16), (8, 16), (8, 12)))
    out = both(MIXED, {}, {"pos": pos, "T": T, "X": X, "Z": Z})
    np.testing.assert_array_equal(out["Y"], X[0:8:2, 1:16:2] + 1)
    want = Z.copy()
    want[0:8:2, 0:12:3] *= 10
    np.testing.assert_array_equal(out["Z"], want)
    np.testing.assert_array_equal(out["G"], T[pos][:, 1:16:2] + 1)
