"""Size limits a user does not meet in the AICore kernels, checked on the host against the CPU
Ascend C (`ascendc_cpu/`), ref and an independent NumPy formula.

What each test proves:
- test_many_inputs: a kernel reading more tiles than an AICore TPosition may hold tensors at
  once (8) runs: the first inputs through queues, the rest copied into the arena with
  explicit MTE2 / V hand-offs, in one chunk and in many (double-buffered) chunks, with f16
  inputs among them, up to the language's MAX_TILES parameters.
- test_rows_wider_than_the_ub: an elementwise kernel over rows of 16 to 70000 columns runs in
  blocks of columns (the last one partial), f32 / f16 / bf16, contiguous and strided.
- test_row_reductions_wider_than_the_ub: rmsnorm, softmax and max + min over rows wider than
  the UB run in passes over the blocks (reductions accumulated, read back), NaN propagated.
- test_slices_and_concat_on_the_vector_unit: slices and concatenations on 32-byte blocks are
  moved by Copy (an unaligned slice stays on the scalar unit), equal to ref and NumPy.
- test_gather_rows_by_row_copies: gather_rows of 32-bit values copies whole rows by the vector
  unit (the index read once per row), out-of-range indices giving 0 rows.
- test_column_reductions_in_chunks: column reductions only stores read are accumulated chunk
  by chunk, bit for bit ref's, NaN propagated.
- test_column_reductions_read_by_the_rows: x - colmean(x) and a column max of it over rows
  that do not fit at once run in passes over the chunks of rows.
Each output equals ref's and an independent NumPy formula, with the stand-in's rules on.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptowsp.backends.ascend import aicore
from ptowsp.backends.ref import values as R
from ptowsp.ir import nodes as N
from ptowsp.limits import MAX_TILES

from .ascendc_cpu import harness as H
from .ascendc_cpu.harness import KB

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def _many(name: str, n: int, rows: int, cols: int) -> N.Kernel:
    """y = x0 + 2 x1 + 3 x2 + ... over n input tiles: [rows, cols], every third a [1, cols]
    row and every fifth f16."""
    b = KB(name)
    acc = None
    for i in range(n):
        shape = (1, cols) if i % 3 == 2 else (rows, cols)
        dt = "f16" if i % 5 == 4 else "f32"
        t = b.tile(f"x{i}", *shape, dt)
        v = t if dt == "f32" else b.op("convert", t, dtype="f32")
        v = b.op("mul", v, b.lit(float(i + 1)))
        acc = v if acc is None else b.op("add", acc, v)
    b.out("y", acc)
    return b.kernel()


KERNELS = [_many("many12", 12, 4, 40), _many("many12_chunked", 12, 256, 200),
           _many("many_max", MAX_TILES - 1, 2, 8)]


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    m = N.Module("limits", (), (), tuple(KERNELS), (), None)
    files = aicore.emit_aicore(m)
    return H.build([H.Unit("limits", files, KERNELS)], tmp_path_factory.mktemp("limits")), files


@pytest.mark.parametrize("k", KERNELS, ids=[k.name for k in KERNELS])
def test_many_inputs(lib, k):
    dll, files = lib
    text = files[aicore.header_path(k)]
    assert "calc.GetWithOffset" in text and "wsp_sync<AscendC::HardEvent::MTE2_V>();" in text
    rng = np.random.default_rng(5)
    task = H.random_task(k, rng, strided=True)
    got = H.run_task(dll, "limits", k, task)
    H.compare(k, got, H.ref_outputs(k, task))
    want = None
    for i, p in enumerate(p for p in k.params if p.kind == "tile" and p.mode == "In"):
        x = R.to_compute(task.inputs[p.name], p.dtype).astype(np.float64) * (i + 1)
        want = x if want is None else want + x
    np.testing.assert_allclose(got["y"].astype(np.float64), want, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# rows wider than the Unified Buffer: blocks of columns

def _wide(name: str, rows: int, cols: int, dt: str) -> N.Kernel:
    """y = silu(x * w + b) - 2: x [rows, cols] (dt), w a [1, cols] row, b a [rows, 1] column
    (the same in every block of columns), stored as dt."""
    b = KB(name)
    x = b.tile("x", rows, cols, dt)
    xf = x if dt == "f32" else b.op("convert", x, dtype="f32")
    w = b.tile("w", 1, cols)
    c = b.tile("b", rows, 1)
    y = b.op("sub", b.op("silu", b.op("add", b.op("mul", xf, w), c)), b.lit(2.0))
    b.out("y", y, dt)
    return b.kernel()


def _numpy_wide(task, k) -> np.ndarray:
    p = {q.name: q for q in k.params}
    x = R.to_compute(task.inputs["x"], p["x"].dtype).astype(np.float64)
    u = x * task.inputs["w"].astype(np.float64) + task.inputs["b"].astype(np.float64)
    return u / (1 + np.exp(-u)) - 2


WIDE = [_wide(f"wide_{dt}_{rows}_{cols}", rows, cols, dt)
        for dt, rows, cols in (("f32", 3, 16), ("f32", 2, 9000), ("f32", 3, 20011),
                               ("f16", 2, 33333), ("f32", 1, 70000), ("bf16", 4, 12345))]


@pytest.fixture(scope="module")
def wide_lib(tmp_path_factory):
    m = N.Module("wide", (), (), tuple(WIDE), (), None)
    files = aicore.emit_aicore(m)
    return H.build([H.Unit("wide", files, WIDE)], tmp_path_factory.mktemp("wide")), files


@pytest.mark.parametrize("k", WIDE, ids=[k.name for k in WIDE])
def test_rows_wider_than_the_ub(wide_lib, k):
    """A row wider than the UB runs in blocks of columns (the last one partial), in contiguous
    and in strided (wider GM rows) tiles, equal to ref and to NumPy."""
    dll, files = wide_lib
    text = files[aicore.header_path(k)]
    cols = k.params[0].cols
    if cols >= 20000 or cols == 16:  # past the UB with room to spare / far inside it
        assert ("columns" in text.split("\n")[8]) == (cols >= 20000), text[:600]
    assert f"x: In[Tile[{k.params[0].rows}, {cols}, " in text
    # the [rows, 1] column b is spread along the rows by the vector unit, not read by GetValue
    assert "GetValue" not in text and "wsp_bcast_col(" in text
    rng = np.random.default_rng(cols)
    for strided in (False, True):
        task = H.random_task(k, rng, strided=strided)
        got = H.run_task(dll, "wide", k, task)
        H.compare(k, got, H.ref_outputs(k, task), f"strided={strided}", rtol=1e-4)
        dt = k.params[0].dtype
        g = R.to_compute(got["y"], dt).astype(np.float64)
        tol = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}[dt]
        np.testing.assert_allclose(g, _numpy_wide(task, k), rtol=tol, atol=tol * 10)


# ---------------------------------------------------------------------------------------------
# slices and concatenations moved by the vector unit

def _slices() -> N.Kernel:
    b = KB("vec_slices")
    x = b.tile("x", 6, 72)
    y = b.tile("y", 6, 40, "f16")
    yf = b.op("convert", y, dtype="f32")
    lo = b.op("slice_cols", x, shape=(6, 32), attr=0)
    hi = b.op("slice_cols", x, shape=(6, 40), attr=32)
    b.out("rot", b.op("concat_cols", b.op("neg", hi), lo, shape=(6, 72)))  # rotate_half-like
    b.out("cat", b.op("concat_cols", b.op("slice_cols", x, shape=(6, 8), attr=64), yf,
                      shape=(6, 48)))
    b.out("rows", b.op("concat_rows", b.op("slice_rows", x, shape=(2, 72), attr=3), x,
                       shape=(8, 72)))
    b.out("odd", b.op("slice_cols", x, shape=(6, 5), attr=3))  # unaligned: the scalar unit
    return b.kernel()


def test_slices_and_concat_on_the_vector_unit(tmp_path):
    k = _slices()
    m = N.Module("sl", (), (), (k,), (), None)
    files = aicore.emit_aicore(m)
    text = files[aicore.header_path(k)]
    # three aligned slices (1 box each), two concatenations (2 each); slice_rows + concat_rows
    assert text.count("wsp_copy_box(") == 7 and text.count("wsp_copy_words(") >= 3
    lib = H.build([H.Unit("sl", files, [k])], tmp_path)
    rng = np.random.default_rng(11)
    for strided in (False, True):
        task = H.random_task(k, rng, strided=strided)
        got = H.run_task(lib, "sl", k, task)
        H.compare(k, got, H.ref_outputs(k, task))
        x = task.inputs["x"]
        yf = R.to_compute(task.inputs["y"], "f16").astype(np.float32)
        np.testing.assert_array_equal(got["rot"], np.concatenate([-x[:, 32:], x[:, :32]], 1))
        np.testing.assert_array_equal(got["cat"], np.concatenate([x[:, 64:72], yf], 1))
        np.testing.assert_array_equal(got["rows"], np.concatenate([x[3:5], x], 0))
        np.testing.assert_array_equal(got["odd"], x[:, 3:8])


# ---------------------------------------------------------------------------------------------
# row reductions over rows wider than the Unified Buffer: passes over the blocks of columns

def _wide_norms(rows: int, cols: int, dt: str) -> list[N.Kernel]:
    ks = []
    b = KB(f"wrms_{dt}_{rows}_{cols}")  # rmsnorm: one reduction, two passes
    x = b.tile("x", rows, cols, dt)
    xf = x if dt == "f32" else b.op("convert", x, dtype="f32")
    w = b.tile("w", 1, cols)
    ms = b.op("rowmean", b.op("mul", xf, xf))
    b.out("y", b.op("mul", b.op("mul", xf, b.op("rsqrt", b.op("add", ms, b.lit(1e-5)))), w), dt)
    ks.append(b.kernel())
    b = KB(f"wsm_{dt}_{rows}_{cols}")  # softmax: max, then the sum of exp(x - max): 3 passes
    x = b.tile("x", rows, cols, dt)
    xf = x if dt == "f32" else b.op("convert", x, dtype="f32")
    e = b.op("exp", b.op("sub", xf, b.op("rowmax", xf)))
    b.out("y", b.op("div", e, b.op("rowsum", e)), dt)
    ks.append(b.kernel())
    b = KB(f"wmm_{dt}_{rows}_{cols}")  # max and min together, NaN propagated
    x = b.tile("x", rows, cols, dt)
    xf = x if dt == "f32" else b.op("convert", x, dtype="f32")
    b.out("y", b.op("add", b.op("sub", xf, b.op("rowmin", xf)), b.op("rowmax", xf)), dt)
    ks.append(b.kernel())
    b = KB(f"wst_{dt}_{rows}_{cols}")  # [rows, 1] results stored beside the wide one
    x = b.tile("x", rows, cols, dt)
    xf = x if dt == "f32" else b.op("convert", x, dtype="f32")
    mx = b.op("rowmax", xf)
    b.out("y", b.op("sub", xf, mx), dt)
    b.out("mx", mx)
    b.out("s", b.op("rowsum", xf))
    ks.append(b.kernel())
    return ks


WIDE_RED = (_wide_norms(3, 70000, "f32") + _wide_norms(2, 20011, "f16")
            + _wide_norms(1, 40961, "bf16") + _wide_norms(4, 64, "f32"))


@pytest.fixture(scope="module")
def wide_red_lib(tmp_path_factory):
    m = N.Module("wred", (), (), tuple(WIDE_RED), (), None)
    files = aicore.emit_aicore(m)
    return H.build([H.Unit("wred", files, WIDE_RED)], tmp_path_factory.mktemp("wred")), files


def _numpy_norm(k, task) -> np.ndarray:
    p = {q.name: q for q in k.params}
    x = R.to_compute(task.inputs["x"], p["x"].dtype).astype(np.float64)
    if k.name.startswith("wrms"):
        return x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5) * task.inputs["w"]
    if k.name.startswith("wsm"):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    if k.name.startswith("wst"):
        return x - x.max(1, keepdims=True)
    return x - x.min(1, keepdims=True) + x.max(1, keepdims=True)


@pytest.mark.parametrize("k", WIDE_RED, ids=[k.name for k in WIDE_RED])
def test_row_reductions_wider_than_the_ub(wide_red_lib, k):
    """rmsnorm, softmax and max + min over rows of up to 70000 columns: the reductions are
    accumulated across the blocks of columns in a pass each, read back in the next; equal to
    ref and to NumPy, NaN in a row propagated by max / min."""
    dll, files = wide_red_lib
    text = files[aicore.header_path(k)]
    cols = k.params[0].cols
    if cols > 10000:
        passes = 3 if k.name.startswith("wsm") else 2
        assert f", {passes} passes" in text and "GetValue" not in text, text[:700]
        assert ("if (cb == 0)" in text) == k.name.startswith("wst")
    rng = np.random.default_rng(cols + len(k.name))
    dt = k.params[0].dtype
    for trial in range(2):
        task = H.random_task(k, rng, strided=trial == 1)
        if trial == 1 and k.name.startswith("wmm"):  # a NaN in the last block of row 0
            x = task.inputs["x"]
            x[0, -3] = np.array([0x7fc0], np.uint16)[0] if dt == "bf16" else np.nan
            H.tile_view(task, k, "x")[...] = x
        got = H.run_task(dll, "wred", k, task)
        H.compare(k, got, H.ref_outputs(k, task), f"trial {trial}", rtol=1e-4)
        g = R.to_compute(got["y"], dt).astype(np.float64)
        tol = {"f32": 1e-4, "f16": 2e-3, "bf16": 1.6e-2}[dt]
        want = _numpy_norm(k, task)
        np.testing.assert_allclose(g, want, rtol=tol, atol=tol * np.nanmax(np.abs(want)),
                                   equal_nan=True)
        if k.name.startswith("wst"):
            xf = R.to_compute(task.inputs["x"], dt).astype(np.float64)
            np.testing.assert_array_equal(got["mx"], xf.max(1, keepdims=True).astype(np.float32))
            np.testing.assert_allclose(got["s"], xf.sum(1, keepdims=True), rtol=1e-4,
                                       atol=1e-4 * np.abs(xf).sum(1, keepdims=True).max())


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(st.data())
def test_hypothesis_widths_across_the_ub(tmp_path_factory, data):
    """Widths drawn from 16 to 70000 f32 columns (and a row count), each kernel elementwise or
    reducing its rows: whole rows below the UB, blocks of columns above it, equal to ref."""
    ks = []
    for i in range(3):
        cols = data.draw(st.integers(16, 70000), label=f"cols {i}")
        rows = data.draw(st.integers(1, 3), label=f"rows {i}")
        kind = data.draw(st.sampled_from(["wide", "rms", "softmax", "minmax"]), label="kind")
        if kind == "wide":
            k = _wide(f"hw{i}_{cols}", rows, cols, "f32")
        else:
            k = _wide_norms(rows, cols, "f32")[["rms", "softmax", "minmax"].index(kind)]
            k = dataclasses.replace(k, name=f"hw{i}_{k.name}", source=f"hw{i}_{k.name}")
        ks.append(k)
    m = N.Module("hw", (), (), tuple(ks), (), None)
    lib = H.build([H.Unit("hw", aicore.emit_aicore(m), ks)], tmp_path_factory.mktemp("hw"))
    rng = np.random.default_rng(len(ks))
    for k in ks:
        task = H.random_task(k, rng, strided=True)
        H.compare(k, H.run_task(lib, "hw", k, task), H.ref_outputs(k, task), rtol=1e-4)


# ---------------------------------------------------------------------------------------------
# column reductions accumulated across chunks of rows

def _colred(rows: int, cols: int, dt: str) -> N.Kernel:
    b = KB(f"colred_{dt}_{rows}_{cols}")
    x = b.tile("x", rows, cols, dt)
    xf = x if dt == "f32" else b.op("convert", x, dtype="f32")
    y = b.op("mul", xf, b.lit(0.5))
    b.out("y", y, dt)  # the rows themselves (chunked)
    for what in ("colsum", "colmean", "colmax", "colmin"):
        b.out(what, b.op(what, y))
    return b.kernel()


COLRED = [_colred(2048, 96, "f32"), _colred(1024, 200, "f16"), _colred(6, 40, "f32")]


def test_column_reductions_in_chunks(tmp_path):
    """colsum / colmean / colmax / colmin of a value whose rows do not fit the UB at once are
    accumulated chunk by chunk (rows added in order: bit for bit ref's), NaN propagated."""
    m = N.Module("colred", (), (), tuple(COLRED), (), None)
    files = aicore.emit_aicore(m)
    lib = H.build([H.Unit("colred", files, COLRED)], tmp_path)
    for k in COLRED:
        text = files[aicore.header_path(k)]
        rows = k.params[0].rows
        assert ("chunks of" in text and "vn" in text) or rows < 100, text[:600]
        rng = np.random.default_rng(rows)
        for trial in range(2):
            task = H.random_task(k, rng, strided=trial == 1)
            if trial == 1:
                x = task.inputs["x"]
                x[rows // 2, 3] = np.nan
                H.tile_view(task, k, "x")[...] = x
            got = H.run_task(lib, "colred", k, task)
            H.compare(k, got, H.ref_outputs(k, task), f"trial {trial}")
            y = R.to_compute(task.inputs["x"], k.params[0].dtype).astype(np.float32) * 0.5
            with np.errstate(invalid="ignore"):
                np.testing.assert_array_equal(got["colmax"], y.max(0, keepdims=True))
                np.testing.assert_array_equal(got["colmin"], y.min(0, keepdims=True))


# ---------------------------------------------------------------------------------------------
# gathers of rows moved by the vector unit

def _gathers() -> N.Kernel:
    b = KB("vec_gather")
    x = b.tile("x", 10, 40)
    h = b.tile("h", 10, 24, "f16")
    i32 = b.tile("i32", 6, 1, "i32")
    i64 = b.tile("i64", 6, 1, "i64")
    b.out("g", b.op("gather_rows", x, i32, shape=(6, 40)))
    b.out("gh", b.op("gather_rows", b.op("convert", h, dtype="f32"), i64, shape=(6, 24)), "f16")
    b.out("gi", b.op("gather_rows", b.tile("n", 10, 8, "i32"), i32, shape=(6, 8)))
    return b.kernel()


def test_gather_rows_by_row_copies(tmp_path):
    """gather_rows of 32-bit values: the index read once per row, the row moved by the vector
    unit; out-of-range and negative indices give a 0 row, as ref."""
    k = _gathers()
    m = N.Module("ga", (), (), (k,), (), None)
    files = aicore.emit_aicore(m)
    text = files[aicore.header_path(k)]
    assert text.count("if (ok) wsp_copy_words(") == 3
    lib = H.build([H.Unit("ga", files, [k])], tmp_path)
    rng = np.random.default_rng(2)
    for strided in (False, True):
        task = H.random_task(k, rng, strided=strided)
        for name in ("i32", "i64"):
            idx = np.array([3, -1, 9, 10, 0, 3], dtype=task.inputs[name].dtype).reshape(6, 1)
            task.inputs[name] = idx
            H.tile_view(task, k, name)[...] = idx
        got = H.run_task(lib, "ga", k, task)
        H.compare(k, got, H.ref_outputs(k, task))
        x = task.inputs["x"]
        want = np.stack([x[r] if 0 <= r < 10 else np.zeros(40, np.float32)
                         for r in (3, -1, 9, 10, 0, 3)])
        np.testing.assert_array_equal(got["g"], want)


def _colnorm(rows: int, cols: int, dt: str) -> N.Kernel:
    """x - colmean(x), scaled by 1 / colmax(|x|): column reductions other ops read, over rows
    that do not fit the UB at once (passes over the chunks of rows)."""
    b = KB(f"colnorm_{dt}_{rows}_{cols}")
    x = b.tile("x", rows, cols, dt)
    xf = x if dt == "f32" else b.op("convert", x, dtype="f32")
    c = b.op("sub", xf, b.op("colmean", xf))
    y = b.op("div", c, b.op("colmax", b.op("abs", c)))
    b.out("y", y, dt)
    b.out("s", b.op("colsum", y))
    return b.kernel()


COLNORM = [_colnorm(2048, 96, "f32"), _colnorm(1024, 72, "bf16"), _colnorm(8, 40, "f32")]


def test_column_reductions_read_by_the_rows(tmp_path):
    """A column reduction the rows read (x - colmean(x)) is accumulated in a pass over the
    chunks, read back in the next: 3 passes here (mean, then max |x - mean|, then the output and
    its column sums), equal to ref and NumPy."""
    m = N.Module("colnorm", (), (), tuple(COLNORM), (), None)
    files = aicore.emit_aicore(m)
    lib = H.build([H.Unit("colnorm", files, COLNORM)], tmp_path)
    for k in COLNORM:
        text = files[aicore.header_path(k)]
        rows = k.params[0].rows
        assert ("// pass 3 of 3 over the rows" in text) == (rows > 8), text[:600]
        rng = np.random.default_rng(rows)
        dt = k.params[0].dtype
        for strided in (False, True):
            task = H.random_task(k, rng, strided=strided)
            got = H.run_task(lib, "colnorm", k, task)
            H.compare(k, got, H.ref_outputs(k, task), f"strided={strided}", rtol=1e-4)
            x = R.to_compute(task.inputs["x"], dt).astype(np.float64)
            c = x - x.mean(0, keepdims=True)
            want = c / np.abs(c).max(0, keepdims=True)
            tol = {"f32": 1e-5, "bf16": 1.6e-2}[dt]
            np.testing.assert_allclose(R.to_compute(got["y"], dt), want, rtol=tol, atol=tol)
