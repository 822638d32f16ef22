"""AICore kernels (`backends/ascend/aicore/`) compiled with g++ against the CPU implementation
of the Ascend C API in `ascendc_cpu/` and run on the host, checked against the `ref` back end.

What each test proves:
- test_program_kernels: every kernel of every example and test program, at -O0 (one op per
  step) and -O2 (planned, task-fused kernels), emits, compiles and computes what ref computes,
  on contiguous tiles and on tiles inside wider GM rows at odd offsets (the DataCopyPad path),
  without breaking a rule of the API the shim enforces (UB capacity, 32-byte alignment, queue
  discipline, pipe synchronisation). Bit for bit where every op is exact; otherwise to a
  documented tolerance (transcendentals, ReduceSum's order, vector matmul's k order).
- test_value_semantics: NaN / inf / overflow inputs through max/min/relu and the max/min
  reductions (NaN propagates), float -> every integer dtype and bool (truncate, saturate,
  NaN -> 0), integer floor division (x / 0 == 0) and wrap-around, f16/bf16 rounding, bool
  tiles holding nonzero bytes, -inf through silu/gelu, broadcasts of every shape, views,
  iota, matmul with an accumulator and integer / f16 operands; f64 is refused (no double on
  the AI Core: test_f64_is_refused).
- test_chunked_kernel: a kernel whose tiles exceed the UB runs in row chunks through
  double-buffered queues and still matches ref.
- test_hypothesis_chains: generated elementwise / broadcast / reduction chains over f32, f16,
  bf16 and i32, a few batches of kernels per compile.
- test_ub_overflow_is_a_diagnostic / test_wide_rows_are_a_diagnostic: a kernel that cannot
  fit even in 1-row chunks (nor in blocks of columns, when it reads and stores a [rows, 1]
  tile) is a compile error at the kernel's span, rendered as `file:line:col: error: ...`; the
  kernel storing its row max to an Out tile compiles in blocks of columns, in two passes.
- test_extern_ascend: an `extern ascend` body is pasted verbatim behind a `#line` directive
  into the .wsp file (compiler errors point there), binds the parameters by name, and runs.
- test_extern_c_only / test_emit_is_deterministic / test_kernel_entry: the API part A uses.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.backends.ascend import aicore
from ptowsp.diagnostics import WspError
from ptowsp.ir import nodes as N
from ptowsp.ir.passes import optimize

from .ascendc_cpu import harness as H
from .ascendc_cpu.harness import KB

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(p for p in list((ROOT / "examples").glob("*.wsp")) +
                  list((ROOT / "tests" / "programs").glob("*.wsp"))
                  if p.name != "errors_demo.wsp")  # the example of error messages


def _units():
    """(unit name, module, kernels) for every program at -O0 and -O2; extern c kernels apart."""
    out, extern = [], []
    for path in PROGRAMS:
        m0 = ptowsp.load(str(path)).ir
        for level in (0, 2):
            m, _ = optimize(m0, level)
            name = H.unit_name(f"{path.stem}_O{level}")
            ks = tuple(k for k in m.kernels if not k.is_extern)
            extern += [k for k in m.kernels if k.is_extern and k.extern_ascend is None]
            if ks:  # (lib_shared.wsp only declares things for others to import)
                out.append((name, dataclasses.replace(m, name=name, kernels=ks), ks))
    return out, extern


UNITS, EXTERN_C = _units()


@pytest.fixture(scope="module")
def programs_lib(tmp_path_factory):
    units = [H.Unit(name, aicore.emit_aicore(m), list(ks)) for name, m, ks in UNITS]
    return H.build(units, tmp_path_factory.mktemp("aicore_programs"))


# decision: the tasks' integer scalars are small non-negative numbers (positions, row counts);
# a normalisation's `eps` is its usual small positive value: a random one near -mean(x^2) makes
# rsqrt(mean + eps) ill-conditioned, where two correct kernels differ in the fourth digit
SCALARS = {"id": 3, "base": 2, "pmin": 1, "eps": 1e-5}


@pytest.mark.parametrize("unit", [u[0] for u in UNITS])
def test_program_kernels(programs_lib, unit):
    _, m, ks = next(u for u in UNITS if u[0] == unit)
    rng = np.random.default_rng(zlib.crc32(unit.encode()))
    for k in ks:
        for strided in (False, True):
            task = H.random_task(k, rng, strided=strided, scalar_values=SCALARS)
            got = H.run_task(programs_lib, unit, k, task)
            H.compare(k, got, H.ref_outputs(k, task), f"{unit} (strided={strided})")


def test_extern_c_only():
    """A kernel with only an `extern c` body is not ours to emit: a clear ValueError."""
    assert EXTERN_C, "the examples have an extern c kernel (moe `route`)"
    k = EXTERN_C[0]
    with pytest.raises(ValueError, match="extern ascend"):
        aicore.emit_kernel(k)
    m = N.Module("moe", (), (), (k,), (), None)
    with pytest.raises(WspError) as e:
        aicore.emit_aicore(m)
    (d,) = e.value.diagnostics
    assert d.span == k.name_span and d.message == \
        f"kernel `{k.source}` has no `extern ascend` body, which the ascend_npu target needs"


def test_emit_is_deterministic():
    mixed = UNITS[0][1]  # attention_tiered: kernels split into stages
    assert aicore.emit_aicore(mixed) == aicore.emit_aicore(mixed)
    # a unit of vector kernels only: one header each, each with the plain entry
    name, m, ks = next(u for u in UNITS if not any(op.op == "matmul" for k in u[2] for op in k.ops))
    a, b = aicore.emit_aicore(m), aicore.emit_aicore(m)
    assert a == b
    assert set(a) == {"aicore/wsp_aicore.h"} | {aicore.header_path(k) for k in ks}
    for k in ks:
        text = a[aicore.header_path(k)]
        assert f"__aicore__ inline void {aicore.kernel_entry(k)}(const WspTile *tiles, " \
               "const WspScalar *scalars)" in text
    assert "typedef struct WspTile" in a["aicore/wsp_aicore.h"]


def test_kernel_entry():
    k = KB("a+b")
    k.out("y", k.tile("x", 2, 3))
    assert aicore.kernel_entry(k.kernel()) == "wsp_aicore_a_2b_b"
    assert aicore.header_path(k.kernel()) == "aicore/kernel_a_2b_b.h"


def test_scalar_unit_expressions():
    """Scalar-unit C++ is printed by cexpr: the parentheses precedence needs, no others, and
    Ascend C's literals (suffixes, `-MAX - 1`, non-finite floats from their bits)."""
    from ptowsp.backends import cexpr as C
    from ptowsp.backends.ascend.aicore import scalar as S

    def text(e):
        return C.to_c(e)

    assert text(S.literal(-7, "i8")) == "(int8_t)-7"
    assert text(S.literal(2**63, "i64")) == "-9223372036854775807ll - 1"
    assert text(S.literal(2**64 - 1, "u64")) == "18446744073709551615ull"
    assert text(S.literal(float("nan"), "f32")) == "wsp_f32_from_bits(0x7fc00000u)"
    assert text(S.literal(0.1, "bf16")) == "0.100097656f"
    # float scalars arrive as f32 bits already rounded to their dtype (no double on the AI Core)
    assert text(S.scalar_param("f32", 0)) == "wsp_f32_from_bits((uint32_t)scalars[0].i)"
    assert text(S.scalar_param("bf16", 1)) == "wsp_f32_from_bits((uint32_t)scalars[1].i)"
    assert text(S.scalar_param("bool", 2)) == "(uint8_t)(scalars[2].i != 0)"
    assert text(S.sexpr("add", "i32", ["a", "b"], ["i32", "i32"])) == \
        "(int32_t)((uint32_t)a + (uint32_t)b)"
    assert text(S.sexpr("lt", "bool", ["a", "b"], ["f32", "f32"])) == "(uint8_t)(a < b)"
    inner = S.sexpr("sub", "f32", ["b", "c"], ["f32", "f32"])
    assert text(S.sexpr("sub", "f32", ["a", inner], ["f32", "f32"])) == "a - (b - c)"
    assert text(S.sexpr("abs", "i16", ["a"], ["i16"])) == \
        "(int16_t)(a < 0 ? (uint32_t)0 - (uint32_t)a : (uint32_t)a)"
    assert text(S.sconvert("x", "f32", "i8")) == \
        "wsp_f2i<int8_t>(x, -128.0f, 128.0f, (int8_t)127)"
    assert text(S.sconvert("n", "u32", "bf16")) == \
        "wsp_round_bf16(wsp_i2f((int64_t)n, true, true))"
    assert text(C.cast("int64_t", S.literal(-(2**31), "i32"))) == "(int64_t)(-2147483647 - 1)"


# ---------------------------------------------------------------------------------------------
# value semantics


def test_literal_values_are_refs():
    """The literal values the kernels print (`dtypes.literal_value`) are the ones ref computes:
    floats rounded once to the dtype (f16 / bf16 overflow to inf), integers wrapped."""
    from ptowsp.backends.ref.values import scalar_value
    from ptowsp.dtypes import DTYPES, literal_value

    rng = np.random.default_rng(5)
    values = [0.0, -0.0, 0.1, -1.5, 1 / 3, 65519.0, 65520.0, 3.3895e38, 3.39e38, 1e39, -1e39,
              2.0**-133, 2.0**-134, 3 * 2.0**-135, 1e-45, float("inf"), float("-inf"),
              float("nan"), 7, -129, 300, 2**31, -(2**63) - 1, 2**64 + 5, 3.7, -3.7]
    values += list(rng.standard_normal(200) * 10.0 ** rng.integers(-45, 40, 200))
    for dt in DTYPES:
        for v in values:
            if dt not in ("f16", "bf16", "f32", "f64", "bool") and (v != v or abs(v) == np.inf):
                continue  # no integer literal is infinite
            with np.errstate(all="ignore"):
                want = np.asarray(scalar_value(v, dt)).reshape(()).item()
            got = literal_value(v, dt)
            assert type(got) is type(want), (dt, v)
            assert got == want or (got != got and want != want), (dt, v, got, want)
            if isinstance(got, float):
                assert np.copysign(1.0, got) == np.copysign(1.0, want), (dt, v)


def _edge_kernels() -> list[N.Kernel]:
    ks = []
    b = KB("nan_minmax")
    x, y = b.tile("x", 5, 37), b.tile("y", 5, 37)
    b.out("mx", b.op("maximum", x, y))
    b.out("mn", b.op("minimum", x, y))
    b.out("r", b.op("relu", x))
    b.out("rmax", b.op("rowmax", x))
    b.out("rmin", b.op("rowmin", y))
    b.out("cmax", b.op("colmax", x))
    b.out("cmin", b.op("colmin", x))
    b.out("ms", b.op("maximum", x, b.lit(float("nan"))))
    ks.append(b.kernel())
    b = KB("casts")
    x = b.tile("x", 3, 40)
    for dt in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool", "f16", "bf16"):
        b.out("c_" + dt, b.op("cast", x, dtype=dt))
    ks.append(b.kernel())
    b = KB("int_to_float")  # every integer dtype to each float dtype, through int64_t
    ins = {dt: b.tile("i_" + dt, 3, 12, dt) for dt in ("i8", "i32", "i64", "u8", "u32", "u64")}
    for dt, t in ins.items():
        for f in ("f32", "f16", "bf16"):
            b.out(f"{dt}_{f}", b.op("convert", t, dtype=f), f)
    ks.append(b.kernel())
    b = KB("ints")
    a, c = b.tile("a", 4, 9, "i32"), b.tile("c", 4, 9, "i32")
    u, v = b.tile("u", 4, 9, "u8"), b.tile("v", 4, 9, "i64")
    b.out("d", b.op("div", a, c))
    b.out("m", b.op("mul", a, c))
    b.out("s", b.op("sub", a, c))
    b.out("lt", b.op("lt", a, c))
    b.out("ab", b.op("abs", a))
    b.out("ng", b.op("neg", a))
    b.out("rs", b.op("rowsum", a))
    b.out("cm", b.op("colmax", a))
    b.out("du", b.op("div", u, b.lit(7, "u8")))
    b.out("wu", b.op("sub", u, b.lit(200, "u8")))
    b.out("w64", b.op("mul", v, b.lit(2**40, "i64")))
    b.out("f", b.op("convert", a, dtype="f32"))
    b.out("h", b.op("convert", v, dtype="bf16"))
    ks.append(b.kernel())
    b = KB("halfs")
    x, y = b.tile("x", 6, 20, "f16"), b.tile("y", 6, 20, "bf16")
    s = b.op("add", b.op("convert", x, dtype="f32"), b.op("convert", y, dtype="f32"))
    b.out("o16", s, "f16")
    b.out("ob16", s, "bf16")
    h = b.op("convert", s, dtype="f16")
    b.out("e", b.op("mul", h, h), "f16")
    b.out("c", b.op("cast", b.op("mul", s, b.lit(1000.0)), dtype="i16"))
    b.out("lb", b.op("mul", y, b.lit(0.1, "bf16")))  # literals rounded once to f16 / bf16
    b.out("lh", b.op("add", x, b.lit(1e-3, "f16")))
    ks.append(b.kernel())
    b = KB("bools")
    p, q, x = b.tile("p", 4, 33, "bool"), b.tile("q", 1, 33, "bool"), b.tile("x", 4, 33)
    b.out("a", b.op("and", p, q))
    b.out("o", b.op("or", p, q))
    b.out("n", b.op("not", p))
    b.out("w", b.op("where", q, x, b.lit(2.5)))
    b.out("wc", b.op("where", b.op("gt", x, b.lit(0.0)), x, b.op("neg", x)))
    b.out("bf", b.op("convert", p, dtype="f32"))
    ks.append(b.kernel())
    b = KB("activations")
    x = b.tile("x", 7, 50)
    for nm in ("sigmoid", "silu", "gelu", "tanh", "sin", "cos", "exp", "log", "sqrt", "rsqrt",
               "abs", "neg"):
        b.out(nm, b.op(nm, x))
    b.out("p2", b.op("pow", x, b.lit(2.0)))
    b.out("p15", b.op("pow", b.op("abs", x), b.lit(1.5)))
    b.out("pm1", b.op("pow", x, b.lit(-1.0)))
    ks.append(b.kernel())
    b = KB("views")
    x, y = b.tile("x", 6, 10), b.tile("y", 6, 5, "i16")
    b.out("t", b.op("transpose", x, shape=(10, 6)))
    b.out("se", b.op("slice_even", x, shape=(6, 5)))
    b.out("so", b.op("slice_odd", x, shape=(6, 5)))
    b.out("il", b.op("interleave", y, y, shape=(6, 10)))
    b.out("ir", b.add("iota_row", (), (6, 10), "i32"))
    b.out("ic", b.add("iota_col", (), (6, 10), "f32"))
    b.out("bc", b.op("broadcast", b.op("rowsum", x), shape=(6, 10)))
    b.out("bs", b.lit(3.25), shape=(6, 10))
    b.out("bi", b.lit(-7, "i8"), shape=(2, 3))
    ks.append(b.kernel())
    b = KB("tile_slices")  # x[r0:r1, c0:c1] and concat: slice_rows/_cols, concat_rows/_cols
    x, y = b.tile("x", 6, 10), b.tile("y", 6, 5, "i16")
    sc = b.op("slice_cols", x, shape=(6, 4), attr=3)
    b.out("sc", sc)
    b.out("sr", b.op("slice_rows", x, shape=(2, 10), attr=4))
    b.out("sb", b.op("slice_cols", b.op("slice_rows", y, shape=(3, 5), attr=1), shape=(3, 2),
                     attr=2))
    b.out("rh", b.op("concat_cols", b.op("neg", b.op("slice_cols", x, shape=(6, 5), attr=5)),
                     b.op("slice_cols", x, shape=(6, 5), attr=0), shape=(6, 10)))
    b.out("cr", b.op("concat_rows", b.op("slice_rows", x, shape=(1, 10), attr=5), x,
                     shape=(7, 10)))
    b.out("cm", b.op("concat_cols", b.op("convert", y, dtype="f32"), sc, shape=(6, 9)))
    b.out("ci", b.op("concat_rows", y, y, shape=(12, 5)))
    ks.append(b.kernel())
    b = KB("big_rotate_half")  # [512, 128] f32 tiles: runs in row chunks, slices per chunk
    x, c, s = b.tile("x", 512, 128), b.tile("c", 512, 128), b.tile("s", 512, 128)
    rot = b.op("concat_cols", b.op("neg", b.op("slice_cols", x, shape=(512, 64), attr=64)),
               b.op("slice_cols", x, shape=(512, 64), attr=0), shape=(512, 128))
    b.out("y", b.op("add", b.op("mul", x, c), b.op("mul", rot, s)))
    ks.append(b.kernel())
    b = KB("matmuls")
    a, w, c = b.tile("a", 5, 7), b.tile("w", 7, 9), b.tile("c", 5, 9, mode="InOut")
    w16, ai = b.tile("w16", 7, 9, "f16"), b.tile("ai", 5, 7, "i32")
    b.store("c", b.op("matmul", a, w, c, shape=(5, 9), dtype="f32"))
    b.out("m2", b.op("matmul", ai, b.op("convert", w16, dtype="f32"), shape=(5, 9), dtype="f32"))
    wt = b.op("transpose", b.op("transpose", w, shape=(9, 7)), shape=(7, 9))
    b.out("m3", b.op("matmul", a, wt, b.lit(1.0), shape=(5, 9), dtype="f32"))
    ks.append(b.kernel())
    b = KB("matmul_inout")  # the right operand is stored to: read whole before any store
    a, c = b.tile("a", 16, 16), b.tile("c", 16, 16, mode="InOut")
    b.store("c", b.op("matmul", a, c, shape=(16, 16), dtype="f32"))
    ks.append(b.kernel())
    b = KB("scalars")
    x, s = b.tile("x", 4, 16), b.scalar("s", "f16")
    n, t = b.scalar("n", "i32"), b.scalar("t", "bool")
    b.out("a", b.op("mul", x, b.op("convert", s, dtype="f32")))
    b.out("b", b.op("div", b.lit(1.0), x))
    b.out("c", b.op("sub", b.lit(3.0), x))
    mask = b.op("lt", b.add("iota_col", (), (4, 16), "i32"), n)
    b.out("d", b.op("where", mask, x, b.lit(float("-inf"))))
    b.out("e", b.op("add", x, b.op("convert", t, dtype="f32")))
    b.out("f", b.op("minimum", x, b.op("mul", b.op("convert", s, dtype="f32"), b.lit(2.0))))
    ks.append(b.kernel())
    return ks


def _big_kernel() -> N.Kernel:
    """rmsnorm over [512, 200] f16 rows: 200 KiB of input alone, so it must run in chunks."""
    b = KB("big_rmsnorm")
    x = b.op("convert", b.tile("x", 512, 200, "f16"), dtype="f32")
    w = b.tile("w", 1, 200)
    ms = b.op("rowmean", b.op("mul", x, x))
    y = b.op("mul", b.op("mul", x, b.op("rsqrt", b.op("add", ms, b.scalar("eps")))), w)
    b.out("y", y, "f16")
    b.out("s", b.op("colsum", w))
    return b.kernel()


_EXTERN_SRC = '''module ext
kernel scale2(x: In[Tile[4, 12, f32]], y: Out[Tile[4, 12, f32]], k: Scalar[f32])
    extern ascend """
    AscendC::TPipe pipe;
    AscendC::TQue<AscendC::TPosition::VECIN, 1> qi;
    AscendC::TQue<AscendC::TPosition::VECOUT, 1> qo;
    pipe.InitBuffer(qi, 1, 4 * 32 * 4);
    pipe.InitBuffer(qo, 1, 4 * 32 * 4);
    AscendC::LocalTensor<float> a = qi.AllocTensor<float>();
    wsp_copy_in<uint32_t>(a.ReinterpretCast<uint32_t>(), x, 0, 4, 48, 128, 4);
    qi.EnQue(a);
    a = qi.DeQue<float>();
    AscendC::LocalTensor<float> b = qo.AllocTensor<float>();
    AscendC::Muls(b, a, k + k, 128);
    qo.EnQue(b);
    b = qo.DeQue<float>();
    wsp_copy_out<uint32_t>(y, b.ReinterpretCast<uint32_t>(), 0, 4, 48, 128, 4);
    qo.FreeTensor(b);
    qi.FreeTensor(a);
    AscendC::PipeBarrier<PIPE_ALL>();
    pipe.Destroy();
"""
'''


def _extern_kernel(body_fix=lambda s: s) -> tuple[N.Kernel, dict]:
    src = body_fix(_EXTERN_SRC)
    body = src.split('"""')[1]
    params = (N.KParam("x", "tile", "f32", "In", 4, 12), N.KParam("y", "tile", "f32", "Out", 4, 12),
              N.KParam("k", "scalar", "f32"))
    span = N.Span("ext.wsp", 2, 1, 20, 4)
    k = N.Kernel("scale2", "scale2", params, (), (), None, (), span, extern_ascend=body)
    return k, {"ext.wsp": src}


@pytest.fixture(scope="module")
def misc_lib(tmp_path_factory):
    edges = _edge_kernels()
    big = _big_kernel()
    ext, sources = _extern_kernel()
    m = N.Module("misc", (), (), tuple(edges) + (big,), (), None, sources=tuple(sources.items()))
    files = aicore.emit_aicore(m)
    files[aicore.header_path(ext)] = aicore.emit_kernel(ext, "misc", sources)
    units = [H.Unit("misc", files, edges + [big, ext])]
    return H.build(units, tmp_path_factory.mktemp("aicore_misc")), files


def _poison(task: H.Task, k: N.Kernel) -> None:
    """NaN, -inf, +inf and out-of-range values in the first elements of every float input."""
    for name, arr in task.inputs.items():
        if arr.dtype.kind == "f" and arr.size >= 4:
            with np.errstate(over="ignore"):
                arr.flat[:4] = np.array([np.nan, -np.inf, np.inf, 3e9]).astype(arr.dtype)
            H.tile_view(task, k, name)[...] = arr


@pytest.mark.parametrize("name", [k.name for k in _edge_kernels()])
def test_value_semantics(misc_lib, name):
    lib, _ = misc_lib
    k = next(k for k in _edge_kernels() if k.name == name)
    rng = np.random.default_rng(7)
    for trial in range(3):
        task = H.random_task(k, rng, strided=trial == 1)
        if trial == 2:
            _poison(task, k)
        got = H.run_task(lib, "misc", k, task)
        H.compare(k, got, H.ref_outputs(k, task), f"trial {trial}")


def test_chunked_kernel(misc_lib):
    lib, files = misc_lib
    k = _big_kernel()
    text = files[aicore.header_path(k)]
    assert "chunks of" in text and "AscendC::TQue<AscendC::TPosition::VECIN, 2>" in text
    assert "AscendC::TQue<AscendC::TPosition::VECOUT, 2>" in text
    rng = np.random.default_rng(3)
    for strided in (False, True):
        task = H.random_task(k, rng, strided=strided, scalar_values={"eps": 1e-6})
        H.compare(k, H.run_task(lib, "misc", k, task), H.ref_outputs(k, task))


def test_extern_ascend(misc_lib, tmp_path):
    lib, files = misc_lib
    k, sources = _extern_kernel()
    text = files[aicore.header_path(k)]
    lines = text.split("\n")
    src_lines = sources["ext.wsp"].split("\n")
    opening = next(i for i, ln in enumerate(src_lines) if 'extern ascend """' in ln) + 1
    at = next(i for i, ln in enumerate(lines) if ln.startswith("#line") and "ext.wsp" in ln)
    # the body starts right after the opening quotes: the rest of that line, then the next;
    # the file is the tree's copy of the source, relative to the header (no absolute path)
    assert lines[at] == f'#line {opening} "../wsp/ext.wsp"'
    assert lines[at + 1] == "" and lines[at + 2] == src_lines[opening]
    back = next(i for i, ln in enumerate(lines) if ln.startswith("#line") and "aicore/" in ln)
    assert lines[back] == f'#line {back + 2} "{aicore.header_path(k)}"'
    assert "const float k = wsp_f32_from_bits((uint32_t)scalars[0].i);" in text
    task = H.random_task(k, np.random.default_rng(1), strided=True, scalar_values={"k": 1.5})
    sc = [H.scalar_arg("f32", 1.5)]
    lib.run("misc", k, task.tiles, sc, task.views)
    np.testing.assert_array_equal(H.tile_view(task, k, "y"), task.inputs["x"] * np.float32(3.0))
    # a C++ error in the body is reported at its line of the .wsp file
    bad, srcs = _extern_kernel(lambda s: s.replace("AscendC::Muls(b, a, k + k, 128);",
                                                   "AscendC::Muls(b, a, kk, 128);"))
    (tmp_path / "aicore").mkdir()
    (tmp_path / "aicore" / "wsp_aicore.h").write_text(aicore.support_header())
    (tmp_path / "aicore" / "kernel_scale2.h").write_text(aicore.emit_kernel(bad, "bad", srcs))
    (tmp_path / "t.cpp").write_text('#include "aicore/kernel_scale2.h"\n')
    proc = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-I", str(H.HERE), "-I",
                           str(tmp_path), str(tmp_path / "t.cpp")], capture_output=True, text=True)
    where = next(i for i, ln in enumerate(srcs["ext.wsp"].split("\n")) if "kk" in ln) + 1
    assert proc.returncode != 0 and f"ext.wsp:{where}:" in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------
# kernels that cannot fit the Unified Buffer


def _diagnostic(src: str, name: str) -> str:
    m = ptowsp.parse(src, name).ir
    with pytest.raises(WspError) as e:
        aicore.emit_aicore(m)
    return e.value.render()


def _diagnostic_free(src: str, name: str) -> str:
    m = ptowsp.parse(src, name).ir
    return "\n".join(t for p, t in aicore.emit_aicore(m).items() if "/kernel_" in p)


def test_ub_overflow_is_a_diagnostic():
    src = """module big
input X: f32[256, 256]
output Y: f32[256, 256]

kernel tr(x: In[Tile[256, 256, f32]], y: Out[Tile[256, 256, f32]]) {
    store(y, transpose(x) * 2)
}

workload w() { tr(x = X, y = Y) }
"""
    text = _diagnostic(src, "big.wsp")
    assert text.startswith("big.wsp:5:1: error: kernel `tr` needs "), text
    assert "bytes of Unified Buffer" in text and f"has {aicore.UB_BUDGET} (of {aicore.UB_BYTES}" in text


def test_f64_is_refused(tmp_path):
    """An f64 tile or scalar is a compile error for ascend_npu, at the kernel's name with a
    caret (the AI Core has no double); nothing is written. The other targets run it."""
    src = """module dbl
input X: f64[4, 8]
output Y: f64[4, 8]

kernel twice(x: In[Tile[4, 8, f64]], y: Out[Tile[4, 8, f64]], s: Scalar[f64]) {
    store(y, x * s)
}

workload w() { twice(x = X, y = Y, s = 2.0) }
"""
    path = tmp_path / "dbl.wsp"
    path.write_text(src)
    text = _diagnostic(src, "dbl.wsp")
    assert text.startswith("dbl.wsp:5:8: error: kernel `twice` cannot run on the ascend_npu "
                           "target: its parameter `x` is f64, and the AI Core has no f64"), text
    assert "   5 | kernel twice(" in text and "^^^^^" in text
    done = subprocess.run([sys.executable, "-m", "ptowsp", "compile", str(path), "--target",
                           "ascend_npu", "-o", str(tmp_path / "out")], capture_output=True,
                          text=True, cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 1 and "and the AI Core has no f64 (no double in AI Core code)" \
        in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()
    x = np.arange(32, dtype=np.float64).reshape(4, 8)
    assert np.array_equal(ptowsp.parse(src, "dbl.wsp").compile("ref").run(X=x)["Y"], 2 * x)


def test_wide_rows_are_a_diagnostic():
    """An elementwise row wider than the UB runs in blocks of columns (test_aicore_limits);
    one a reduction reads whole is still a compile error at the kernel, saying why."""
    src = """module wide
input X: f32[8, 60000]
output Y: f32[8, 60000]
output S: f32[8, 1]

kernel center(x: In[Tile[8, 60000, f32]], y: Out[Tile[8, 60000, f32]], s: InOut[Tile[8, 1, f32]]) {
    store(y, x - rowmax(x))
    store(s, s + rowmax(x))
}

workload w() { center(x = X, y = Y, s = S) }
"""
    text = _diagnostic(src, "wide.wsp")
    assert text.startswith("wide.wsp:6:1: error: kernel `center` needs "), text
    assert "even in chunks of 1 row (its rows are not split into blocks of columns: a " \
        "transpose, a slice, a sort, a matmul, a column index or a column reduction reads a row " \
        "whole, " \
        "as does a [rows, 1] tile both read and stored)" in " ".join(text.split()), text
    ok = _diagnostic_free(src.replace("s + rowmax(x)", "rowmax(x)").replace("InOut", "Out"),
                          "wide.wsp")
    assert "columns 60000 in blocks of" in ok and ", 2 passes" in ok and "if (cb == 0)" in ok


# ---------------------------------------------------------------------------------------------
# generated chains

_UNARY = ("neg", "abs", "exp", "sqrt", "relu", "sigmoid", "tanh", "silu")
_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
_IBINARY = ("add", "sub", "mul", "div", "maximum", "minimum")


@st.composite
def _chain(draw, name: str):
    rows, cols = draw(st.integers(1, 9)), draw(st.integers(1, 70))
    b = KB(name)
    if draw(st.integers(0, 4)) == 0:  # an integer chain
        x, y = b.tile("x", rows, cols, "i32"), b.tile("y", rows, 1, "i32")
        v = x
        for _ in range(draw(st.integers(1, 4))):
            op = draw(st.sampled_from(_IBINARY + ("lt", "where", "rowsum")))
            if op == "lt":
                v = b.op("where", b.op("lt", v, y), v, b.op("neg", v))
            elif op == "where":
                v = b.op("where", b.op("ge", v, b.lit(0, "i32")), y, v)
            elif op == "rowsum":
                v = b.op("sub", v, b.op("rowsum", v))
            else:
                v = b.op(op, v, draw(st.sampled_from([x, y, b.lit(draw(st.integers(-5, 5)), "i32")])))
        b.out("out", v, draw(st.sampled_from(["i32", "f32", "i8"])))
        return b.kernel()
    dt = draw(st.sampled_from(["f32", "f16", "bf16"]))
    x = b.tile("x", rows, cols, dt)
    other = b.tile("y", *draw(st.sampled_from([(rows, cols), (1, cols), (rows, 1)])), dt)
    xf = x if dt == "f32" else b.op("convert", x, dtype="f32")
    of = other if dt == "f32" else b.op("convert", other, dtype="f32")
    v = xf
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["unary", "binary", "scalar", "row", "col", "where", "round"]))
        if kind == "unary":
            v = b.op(draw(st.sampled_from(_UNARY)), v)
        elif kind == "binary":
            v = b.op(draw(st.sampled_from(_BINARY)), v, of)
        elif kind == "scalar":
            v = b.op(draw(st.sampled_from(_BINARY)), v, b.lit(draw(st.sampled_from([0.5, -2.0, 3.0]))))
        elif kind == "row":
            v = b.op("sub", v, b.op(draw(st.sampled_from(["rowmax", "rowsum", "rowmean"])), v))
        elif kind == "col":
            v = b.op("mul", v, b.op(draw(st.sampled_from(["colmax", "colsum", "colmin"])), v))
        elif kind == "where":
            v = b.op("where", b.op("gt", v, of), v, of)
        else:
            v = b.op("convert", b.op("convert", v, dtype=draw(st.sampled_from(["f16", "bf16"]))),
                     dtype="f32")
    b.out("out", v, draw(st.sampled_from(["f32", "f16", "bf16"])))
    return b.kernel()


_batches = iter(range(10**6))


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(st.data())
def test_hypothesis_chains(tmp_path_factory, data):
    batch = next(_batches)
    ks = [data.draw(_chain(f"chain{batch}_{i}"), label=f"kernel {i}") for i in range(8)]
    m = N.Module(f"hyp{batch}", (), (), tuple(ks), (), None)
    lib = H.build([H.Unit(m.name, aicore.emit_aicore(m), ks)], tmp_path_factory.mktemp("hyp"))
    rng = np.random.default_rng(batch)
    for k in ks:
        task = H.random_task(k, rng, strided=True)
        # chains of transcendentals compound libm differences (glibc vs NumPy's own f32 math)
        H.compare(k, H.run_task(lib, m.name, k, task), H.ref_outputs(k, task), rtol=2e-4)


def test_rotate_half_runs_in_chunks(misc_lib):
    """Column slices and a column concat keep rows: a rotate_half over tiles larger than the UB
    is loaded chunk by chunk, not forced whole."""
    _, files = misc_lib
    k = next(k for k in _edge_kernels() if k.name == "big_rotate_half")
    assert "chunks of" in files[aicore.header_path(k)]


# ---------------------------------------------------------------------------------------------
# integer <-> float on the scalar unit without double


def test_integer_float_conversions_without_double(tmp_path):
    """wsp_aicore.h converts integers to floats and back through int64_t only (bisheng refuses
    double and float <-> unsigned casts in AI Core code): the values ref gives at the ends of
    every range (exact halfway cases, 2^24 + 1, the unsigned maxima, 2^63 and past it)."""
    (tmp_path / "t.cpp").write_text('#include "kernel_operator.h"\n#include "wsp_aicore.h"\n'
                                    '#include <cstdio>\nint main() {\n' + "".join(
                                        f"    std::printf(\"%08x %08x %08x\\n\", wsp_f32_bits(wsp_i2f({_c(v)}, {u}, false)), "
                                        f"wsp_f32_bits(wsp_round_f16(wsp_i2f({_c(v)}, {u}, true))), "
                                        f"wsp_f32_bits(wsp_round_bf16(wsp_i2f({_c(v)}, {u}, true))));\n"
                                        for v, u in _CONVERSIONS) + "".join(
                                        f"    std::printf(\"%llu %lld\\n\", (unsigned long long)wsp_f2i<uint64_t>"
                                        f"({x!r}f, 0.0f, 18446744073709551616.0f, 18446744073709551615ull), "
                                        f"(long long)wsp_f2i<uint32_t>({x!r}f, 0.0f, 4294967296.0f, 4294967295u));\n"
                                        for x in _TO_UNSIGNED) + "}\n")
    (tmp_path / "wsp_aicore.h").write_text(aicore.support_header())
    subprocess.run(["g++", "-std=c++17", "-O1", "-w", "-I", str(H.HERE), "-I", str(tmp_path),
                    str(tmp_path / "t.cpp"), "-o", str(tmp_path / "t")], check=True)
    lines = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    from ptowsp.dtypes import literal_value

    def bits(x: float) -> str:
        return f"{np.float32(x).view(np.uint32):08x}"

    for (v, unsigned), line in zip(_CONVERSIONS, lines):
        value = v % 2**64 if unsigned == "true" else v
        assert line.split() == [bits(literal_value(value, d)) for d in ("f32", "f16", "bf16")], v
    for x, line in zip(_TO_UNSIGNED, lines[len(_CONVERSIONS):]):
        x32 = float(np.float32(x))
        want64 = 0 if x32 <= 0 else 2**64 - 1 if x32 >= 2**64 else int(x32)
        want32 = 0 if x32 <= 0 else 2**32 - 1 if x32 >= 2**32 else int(x32)
        assert line.split() == [str(want64), str(want32)], x


def _c(v: int) -> str:
    """`v` as a C++ int64_t expression (the word of an unsigned value past INT64_MAX)."""
    return f"(int64_t){v % 2**64}ull"


_CONVERSIONS = [(v, "false") for v in (0, 1, -1, 7, 2049, -4097, 65519, 65520, -65536,
                                       2**24 + 1, 2**24 + 3, -(2**24) - 1, 2**31 - 1, -(2**31),
                                       2**40 + 2**16 + 1, 2**53 - 1, 2**63 - 1, -(2**63))]
_CONVERSIONS += [(v, "true") for v in (2**32 - 1, 2**63, 2**64 - 1, 2**40 + 2**15)]
_TO_UNSIGNED = (0.0, -0.5, 0.99, 1.5, 2.0**31, 2.0**32 - 256.0, 2.0**32, 2.0**40 + 3.0, 2.0**63,
                2.0**63 + 2.0**40, 2.0**64, 1e30, -1e30)
