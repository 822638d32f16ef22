"""`@ptoisa_kernel` and `ptoisa.*` (docs/python.md, "PTO-ISA kernels"): every instruction in a
kernel of its own, run on cpu_sim and ref and checked against a NumPy formula; an ISA-level
top-k (TSORT32 + store_topk_indices_i32) against argsort with ties by lower index; the
prototype's import paths; and the errors, each at the user's line."""

from __future__ import annotations

import numpy as np
import pytest

import ptowsp
from pto_wsp import (
    DType,
    In,
    KernelError,
    Out,
    P,
    Scalar,
    Tensor,
    Tile,
    kernel,
    pto,
    ptoisa,
    ptoisa_kernel,
    workload,
)
from tests.embed.helpers import markers

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("wspc_cache")]

F32, I32 = DType.F32, DType.I32
line_of, at = markers(__file__)

R, C = 4, 8
RNG = np.random.default_rng(1919)
A = RNG.uniform(0.5, 2.0, (R, C)).astype(np.float32)      # positive: log, sqrt, division
B = RNG.uniform(0.5, 2.0, (R, C)).astype(np.float32)
Z = RNG.standard_normal((R, C)).astype(np.float32)        # signed: abs, neg, relu
ROW = RNG.uniform(0.5, 2.0, (R, 1)).astype(np.float32)
COL = RNG.uniform(0.5, 2.0, (1, C)).astype(np.float32)
S = np.float32(1.5)

# instruction -> (second operand, NumPy formula of the result)
BINARY = {
    "TADD": (B, np.add), "TSUB": (B, np.subtract), "TMUL": (B, np.multiply),
    "TDIV": (B, np.divide), "TMAX": (B, np.maximum), "TMIN": (B, np.minimum),
    "TROWEXPANDADD": (ROW, np.add), "TROWEXPANDSUB": (ROW, np.subtract),
    "TROWEXPANDMUL": (ROW, np.multiply), "TROWEXPANDDIV": (ROW, np.divide),
    "TROWEXPANDMAX": (ROW, np.maximum), "TROWEXPANDMIN": (ROW, np.minimum),
    "TCOLEXPANDADD": (COL, np.add), "TCOLEXPANDSUB": (COL, np.subtract),
    "TCOLEXPANDMUL": (COL, np.multiply), "TCOLEXPANDDIV": (COL, np.divide),
    "TCOLEXPANDMAX": (COL, np.maximum), "TCOLEXPANDMIN": (COL, np.minimum),
}
SCALAR = {"TADDS": np.add, "TSUBS": np.subtract, "TMULS": np.multiply, "TDIVS": np.divide,
          "TMAXS": np.maximum, "TMINS": np.minimum}
UNARY = {"TEXP": (A, np.exp), "TLOG": (A, np.log), "TSQRT": (A, np.sqrt),
         "TRSQRT": (A, lambda x: 1 / np.sqrt(x)), "TABS": (Z, np.abs), "TNEG": (Z, np.negative),
         "TRELU": (Z, lambda x: np.maximum(x, 0)), "TMOV": (Z, lambda x: x)}


def _binary(op: str, shape: tuple):
    @ptoisa_kernel(name=f"isa_{op.lower()}")
    def k(a: In[Tile[R, C, F32]], b: In[Tile[shape[0], shape[1], F32]], o: Out[Tile[R, C, F32]]):
        ptoisa.tstore(o, getattr(ptoisa, op)(ptoisa.tload(a), ptoisa.tload(b)))
    return k


def _scalar(op: str):
    @ptoisa_kernel(name=f"isa_{op.lower()}")
    def k(a: In[Tile[R, C, F32]], s: Scalar[F32], o: Out[Tile[R, C, F32]]):
        ptoisa.tstore(o, getattr(ptoisa, op)(ptoisa.tload(a), s))
    return k


def _unary(op: str):
    @ptoisa_kernel(name=f"isa_{op.lower()}")
    def k(a: In[Tile[R, C, F32]], o: Out[Tile[R, C, F32]]):
        ptoisa.tstore(o, getattr(ptoisa, op)(ptoisa.tload(a)))
    return k


@ptoisa_kernel
def isa_scale_i32(x: In[Tile[R, C, I32]], o: Out[Tile[R, C, I32]]):
    # an f32 number on an i32 tile: the ISA converts the scalar to the element type
    ptoisa.tstore(o, ptoisa.TMULS(ptoisa.tload(x), 3.0))


@ptoisa_kernel
def topk8(scores_tile: In[Tile[1, 32, F32]], out_idx_tile: Out[Tile[1, 8, I32]]):
    scores = ptoisa.tload(scores_tile)
    idx = ptoisa.iota_u32(32)
    pairs = ptoisa.TSORT32(scores, idx)
    ptoisa.store_topk_indices_i32(out_idx_tile, pairs, 8)


def _run(w, target: str) -> None:
    program = w().compile(target=target)
    program.execute()
    program.synchronize()


@pytest.mark.parametrize("target", ["cpu_sim", "ref"])
def test_every_instruction_against_numpy(target):
    cases = []  # (kernel, inputs, expected)
    for op, (b, f) in BINARY.items():
        cases.append((_binary(op, b.shape), (A, b), f(A, b)))
    for op, f in SCALAR.items():
        cases.append((_scalar(op), (A, S), f(A, S)))
    for op, (a, f) in UNARY.items():
        cases.append((_unary(op), (a,), f(a)))
    xi = np.arange(-16, 16, dtype=np.int32).reshape(R, C)
    cases.append((isa_scale_i32, (xi,), xi * 3))
    outs = [np.full(expected.shape, np.nan if expected.dtype.kind == "f" else -1,
                    dtype=expected.dtype) for _, _, expected in cases]
    tensors = [([Tensor(data=x) if isinstance(x, np.ndarray) else x for x in inputs],
                Tensor(data=out)) for (_, inputs, _), out in zip(cases, outs)]

    @workload
    def every():
        for (k, _, _), (ins, out) in zip(cases, tensors):
            k(*ins, out)

    _run(every, target)
    for (k, _, expected), out in zip(cases, outs):
        np.testing.assert_allclose(out, expected, rtol=2e-6, atol=1e-6, err_msg=k.name)


@pytest.mark.parametrize("target", ["cpu_sim", "ref"])
def test_isa_topk_matches_argsort_with_ties_by_lower_index(target):
    n = 5
    # few distinct values, so most rows have ties inside and at the k-th place
    scores = RNG.integers(0, 6, size=(n, 1, 32)).astype(np.float32)
    scores[0, 0] = 1.0  # all equal: the first eight columns
    scores[1, 0, 31] = -np.inf
    out = np.full((n, 1, 8), -1, dtype=np.int32)
    Sc, Out_ = Tensor(data=scores), Tensor(data=out)

    @workload
    def topk():
        for b in P(n):
            topk8[b](scores_tile=Sc[b], out_idx_tile=Out_[b])

    _run(topk, target)
    expected = np.argsort(-scores, axis=-1, kind="stable")[..., :8]
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(out[0, 0], np.arange(8))


def test_the_prototype_import_paths_name_the_same_objects():
    from pto_wsp.ptoisa_jit import ptoisa as p2
    from pto_wsp.ptoisa_jit import ptoisa_kernel as k2

    assert p2 is ptoisa is ptowsp.ptoisa and k2 is ptoisa_kernel is ptowsp.ptoisa_kernel
    assert "TSORT32" in dir(ptoisa)


def test_a_ptoisa_kernel_traces_to_the_ir_of_the_same_pto_kernel():
    @kernel
    def topk8_pto(scores_tile: In[Tile[1, 32, F32]], out_idx_tile: Out[Tile[1, 8, I32]]):
        idx = pto.iota_u32(32)
        pairs = pto.tsort32(scores_tile, idx)
        pto.store(out_idx_tile, pto.extract_topk_indices(pairs, 8))

    def body(k):
        return k.trace().dump().split("\n", 1)[1]

    assert body(topk8) == body(topk8_pto)


# ---------------------------------------------------------------------------------------------
# Errors, each at the user's line


def _error(k) -> str:
    with pytest.raises(KernelError) as info:
        k.trace()
    return info.value


def test_operands_of_two_shapes_are_an_error_at_the_line():
    @ptoisa_kernel
    def bad(a: In[Tile[4, 8, F32]], b: In[Tile[1, 8, F32]], o: Out[Tile[4, 8, F32]]):
        ptoisa.tstore(o, ptoisa.TADD(ptoisa.tload(a), ptoisa.tload(b)))  # E:shape
    text = at(_error(bad), "shape")
    assert ("`ptoisa.TADD`: operands [4, 8] f32 and [1, 8] f32: the instruction takes two "
            "tiles of one shape") in text


def test_operands_of_two_dtypes_are_an_error_at_the_line():
    @ptoisa_kernel
    def bad(a: In[Tile[4, 8, F32]], b: In[Tile[4, 8, I32]], o: Out[Tile[4, 8, F32]]):
        ptoisa.tstore(o, ptoisa.TMUL(ptoisa.tload(a), ptoisa.tload(b)))  # E:dtype
    assert "the instruction takes two tiles of one dtype" in at(_error(bad), "dtype")


def test_row_and_column_expansion_take_a_column_and_a_row():
    @ptoisa_kernel
    def bad_row(a: In[Tile[4, 8, F32]], b: In[Tile[1, 8, F32]], o: Out[Tile[4, 8, F32]]):
        ptoisa.tstore(o, ptoisa.TROWEXPANDMUL(ptoisa.tload(a), ptoisa.tload(b)))  # E:row

    @ptoisa_kernel
    def bad_col(a: In[Tile[4, 8, F32]], b: In[Tile[4, 1, F32]], o: Out[Tile[4, 8, F32]]):
        ptoisa.tstore(o, ptoisa.TCOLEXPANDADD(ptoisa.tload(a), ptoisa.tload(b)))  # E:col
    assert "the second operand is a column `[M, 1]` of one value per row of the first" in at(
        _error(bad_row), "row")
    assert "the second operand is a row `[1, N]` of one value per column of the first" in at(
        _error(bad_col), "col")


def test_a_store_of_another_shape_and_a_parameter_as_operand():
    @ptoisa_kernel
    def bad_store(a: In[Tile[4, 8, F32]], o: Out[Tile[4, 4, F32]]):
        ptoisa.tstore(o, ptoisa.tload(a))  # E:store

    @ptoisa_kernel
    def unloaded(a: In[Tile[4, 8, F32]], o: Out[Tile[4, 8, F32]]):
        ptoisa.tstore(o, ptoisa.TEXP(a))  # E:unloaded
    assert "`ptoisa.tstore`: a [4, 8] f32 tile stored to `o`, a [4, 4] f32 parameter" in at(
        _error(bad_store), "store")
    text = at(_error(unloaded), "unloaded")
    assert "`ptoisa.TEXP`: the operand `a` is a tile parameter (global memory), not a tile " \
           "register" in text
    assert "load it first: `a_t = ptoisa.tload(a)`" in text


def test_loading_an_out_and_storing_an_in_parameter():
    @ptoisa_kernel
    def load_out(a: In[Tile[4, 8, F32]], o: Out[Tile[4, 8, F32]]):
        ptoisa.tstore(o, ptoisa.tload(o))  # E:load_out

    @ptoisa_kernel
    def store_in(a: In[Tile[4, 8, F32]], o: Out[Tile[4, 8, F32]]):
        ptoisa.tstore(a, ptoisa.tload(a))  # E:store_in

    @ptoisa_kernel
    def load_scalar(s: Scalar[F32], o: Out[Tile[4, 8, F32]]):
        ptoisa.tstore(o, ptoisa.tload(s))  # E:load_scalar
    assert "`ptoisa.tload`: `o` is an `Out` parameter, which is never read" in at(
        _error(load_out), "load_out")
    assert "`ptoisa.tstore`: `a` is an `In` parameter, which is never written" in at(
        _error(store_in), "store_in")
    assert "`ptoisa.tload` reads a tile parameter of the kernel, not the scalar parameter " \
           "`s`" in at(_error(load_scalar), "load_scalar")


def test_an_unknown_instruction_names_the_closest():
    @ptoisa_kernel
    def typo(a: In[Tile[4, 8, F32]], o: Out[Tile[4, 8, F32]]):
        ptoisa.tstore(o, ptoisa.TEXPP(ptoisa.tload(a)))  # E:typo
    text = at(_error(typo), "typo")
    assert "`ptoisa.TEXPP` is not a ptoisa instruction" in text
    assert "did you mean `TEXP`?" in text


def test_ptoisa_outside_a_ptoisa_kernel_is_an_error():
    @kernel
    def plain(a: In[Tile[4, 8, F32]], o: Out[Tile[4, 8, F32]]):
        pto.store(o, ptoisa.TEXP(a))  # E:plain
    text = at(_error(plain), "plain")
    assert "`ptoisa.TEXP` is used in a `@kernel` body; ptoisa instructions only work inside a " \
           "`@ptoisa_kernel` body" in text
    assert "decorate the function with `@ptoisa_kernel`" in text
    with pytest.raises(KernelError) as info:
        ptoisa.iota_u32(32)  # E:outside
    assert "`ptoisa.iota_u32` is used in Python code outside a kernel" in at(info.value, "outside")


def test_sort_and_topk_operands():
    @ptoisa_kernel
    def wide(s: In[Tile[1, 64, F32]], o: Out[Tile[1, 8, I32]]):
        pairs = ptoisa.TSORT32(ptoisa.tload(s), ptoisa.iota_u32(64))  # E:wide
        ptoisa.store_topk_indices_i32(o, pairs, 8)

    @ptoisa_kernel
    def index_dtype(s: In[Tile[1, 32, F32]], i: In[Tile[1, 32, I32]], o: Out[Tile[1, 8, I32]]):
        pairs = ptoisa.TSORT32(ptoisa.tload(s), ptoisa.tload(i))  # E:index
        ptoisa.store_topk_indices_i32(o, pairs, 8)

    @ptoisa_kernel
    def too_many(s: In[Tile[1, 32, F32]], o: Out[Tile[1, 40, I32]]):
        pairs = ptoisa.TSORT32(ptoisa.tload(s), ptoisa.iota_u32(32))
        ptoisa.store_topk_indices_i32(o, pairs, 40)  # E:many

    @ptoisa_kernel
    def wrong_out(s: In[Tile[1, 32, F32]], o: Out[Tile[1, 8, F32]]):
        pairs = ptoisa.TSORT32(ptoisa.tload(s), ptoisa.iota_u32(32))
        ptoisa.store_topk_indices_i32(o, pairs, 8)  # E:out
    assert "`ptoisa.TSORT32` sorts a [1, 32] f32 tile, not [1, 64] f32" in at(_error(wide), "wide")
    text = at(_error(index_dtype), "index")
    assert "`ptoisa.TSORT32` takes its indices as a [1, 32] u32 tile, not [1, 32] i32" in text
    assert "the pairs are [1, 64] f32; it takes the [1, 2n] f32 pairs of `TSORT32` and k <= n" \
        in at(_error(too_many), "many")
    assert "`o` is [1, 8] f32; the k = 8 indices are stored to a [1, 8] i32 parameter" in at(
        _error(wrong_out), "out")


def test_the_prototype_s_c_text_and_bad_cycle_counts_are_errors():
    @ptoisa_kernel
    def cycles(s: In[Tile[1, 32, F32]], o: Out[Tile[1, 32, F32]], pad_to: Scalar[I32]):
        ptoisa.tstore(o, ptoisa.tload(s))
        ptoisa.cpu_sim_add_cycles(f"({pad_to.name} / 32) * 128")  # E:cycles

    @ptoisa_kernel
    def c_text(s: In[Tile[1, 32, F32]], o: Out[Tile[1, 32, F32]], pad_to: Scalar[I32]):
        ptoisa.tstore(o, ptoisa.TADDS(ptoisa.tload(s), f"{pad_to.name} * 2"))  # E:ctext

    @ptoisa_kernel
    def helper_text(s: In[Tile[1, 32, F32]], o: Out[Tile[1, 32, F32]]):
        ptoisa.tstore(o, ptoisa.TADDS(ptoisa.tload(s), ptoisa.scalar_expr("2 * k")))  # E:helper

    @ptoisa_kernel
    def float_count(s: In[Tile[1, 32, F32]], o: Out[Tile[1, 32, F32]], f: Scalar[F32]):
        ptoisa.tstore(o, ptoisa.tload(s))
        ptoisa.cpu_sim_add_cycles(f)  # E:float

    @ptoisa_kernel
    def negative(s: In[Tile[1, 32, F32]], o: Out[Tile[1, 32, F32]]):
        ptoisa.tstore(o, ptoisa.tload(s))
        ptoisa.cpu_sim_add_cycles(-5)  # E:negative

    @ptoisa_kernel
    def tile_param(s: In[Tile[1, 32, F32]], o: Out[Tile[1, 32, F32]]):
        ptoisa.tstore(o, ptoisa.tile_expr(s))  # E:tile_helper
    text = at(_error(cycles), "cycles")
    assert "`ptoisa.cpu_sim_add_cycles` takes a non-negative integer or an integer `Scalar` " \
           "parameter, not the string '(pad_to / 32) * 128'" in text
    assert "wspc's kernels are not C++ text: pass the `Scalar` parameter itself" in text
    text = at(_error(c_text), "ctext")
    assert "`ptoisa.TADDS` takes a number or a scalar parameter as its scalar, not the string " \
           "'pad_to * 2'" in text
    assert "wspc's kernels are not C++ text" in text
    assert "`ptoisa.scalar_expr` takes a number or a `Scalar` parameter of the kernel, not the " \
           "string '2 * k'" in at(_error(helper_text), "helper")
    assert "`ptoisa.cpu_sim_add_cycles` counts cycles with an integer; `f` is a f32 scalar" in \
        at(_error(float_count), "float")
    assert "`ptoisa.cpu_sim_add_cycles` takes a non-negative integer or an integer `Scalar` " \
           "parameter, not a int (-5)" in at(_error(negative), "negative")
    assert "`ptoisa.tile_expr`: the operand `s` is a tile parameter (global memory), not a tile " \
           "register" in at(_error(tile_param), "tile_helper")


# a kernel whose tasks each add cycles: 40 fixed, plus 100 per unit of `extra`, plus `extra`
# once more through the prototype's helpers (`scalar_expr`, `tile_expr` return the operand)
@ptoisa_kernel(cpp_includes=["pto/pto-inst.hpp", "<cstdint>"])
def slow_add(a: In[Tile[R, C, F32]], b: In[Tile[R, C, F32]], o: Out[Tile[R, C, F32]],
             extra: Scalar[I32], k: Scalar[F32]):
    x = ptoisa.tile_expr(ptoisa.tload(a))
    ptoisa.tstore(o, ptoisa.TADDS(ptoisa.TADD(x, ptoisa.tload(b)), ptoisa.scalar_expr(k)))
    ptoisa.cpu_sim_add_cycles(40)
    ptoisa.cpu_sim_add_cycles(ptoisa.scalar_expr(extra))


@ptoisa_kernel
def plain_add(a: In[Tile[R, C, F32]], b: In[Tile[R, C, F32]], o: Out[Tile[R, C, F32]],
              extra: Scalar[I32], k: Scalar[F32]):
    ptoisa.tstore(o, ptoisa.TADDS(ptoisa.TADD(ptoisa.tload(a), ptoisa.tload(b)), k))


def _adds(k):
    xs = Tensor(data=np.stack([A] * 4), dtype=F32)
    ys = Tensor(data=np.stack([B] * 4), dtype=F32)
    out = Tensor(data=np.zeros((4, R, C), np.float32), dtype=F32)

    @workload
    def adds():
        for i in P(4):
            k[i](a=xs[i], b=ys[i], o=out[i], extra=i * 100, k=0.5)
    return adds, out


def test_cpu_sim_add_cycles_adds_exactly_its_count_to_each_task_s_modelled_time():
    durations, totals = {}, {}
    for k in (plain_add, slow_add):
        w, out = _adds(k)
        prog = w().compile(target="cpu_sim")
        prog.enable_tracing("full")
        prog.execute()
        prog.synchronize()
        np.testing.assert_allclose(out.data, np.stack([A + B + 0.5] * 4), rtol=1e-6)
        sim = prog.trace.sim
        durations[k.name] = (sim["finish"] - sim["start"]).tolist()
        totals[k.name] = prog.stats.extra["serial_cycles"]
    base = durations["plain_add"]
    assert durations["slow_add"] == [d + 40 + 100 * i for i, d in enumerate(base)]
    assert totals["slow_add"] == totals["plain_add"] + 4 * 40 + 100 * (0 + 1 + 2 + 3)
    # the kernel's `add_cycles`, in the `.wsp` text and the IR; ref runs it unchanged
    w, out = _adds(slow_add)
    assert "    add_cycles(40 + extra)\n" in ptowsp.to_wsp(w())
    assert slow_add.cpp_includes == ("pto/pto-inst.hpp", "cstdint")
    prog = w().compile(target="ref")
    prog.execute()
    prog.synchronize()
    np.testing.assert_allclose(out.data, np.stack([A + B + 0.5] * 4), rtol=1e-6)


def test_python_operators_constexprs_headers_and_an_empty_body():
    @ptoisa_kernel
    def operator(a: In[Tile[4, 8, F32]], o: Out[Tile[4, 8, F32]]):
        v = ptoisa.tload(a)
        ptoisa.tstore(o, v + v)  # E:operator
    text = at(_error(operator), "operator")
    assert "a ptoisa tile is combined by instructions, not by Python operators" in text

    @ptoisa_kernel
    def nothing(a: In[Tile[4, 8, F32]], o: Out[Tile[4, 8, F32]]):  # E:nothing
        pass
    text = at(_error(nothing), "nothing")
    assert "kernel `nothing` has an empty body: no `ptoisa.*` instruction was traced" in text

    with pytest.raises(KernelError) as info:
        @ptoisa_kernel(cpp_includes="pto/pto.hpp")  # E:includes
        def headers(a: In[Tile[4, 8, F32]], o: Out[Tile[4, 8, F32]]):
            pass
    assert "`@ptoisa_kernel(cpp_includes=...)` takes a list of header names, not 'pto/pto.hpp'" \
        in at(info.value, "includes")

    from pto_wsp import Constexpr

    rows = "N"  # the Constexpr parameter's name

    @ptoisa_kernel
    def specialised(a: In[Tile[rows, 8, F32]], o: Out[Tile[rows, 8, F32]],
                    N: Constexpr[I32] = 4):  # E:constexpr
        ptoisa.tstore(o, ptoisa.tload(a))
    assert "a `@ptoisa_kernel` takes tile and scalar parameters; `N` is a Constexpr" in at(
        _error(specialised), "constexpr")
