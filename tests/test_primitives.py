"""The primitive table (`ptowsp/primitives`): every IR op has a complete entry, every primitive
lowers to an op of the table, and the ops' NumPy meanings give, bit for bit, the values `ref`
gave before the table held them (`GOLDEN`: digests of each call's stored value)."""

from __future__ import annotations

import hashlib
import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from ptowsp.backends.ref.kernels import eval_kernel
from ptowsp.dtypes import numpy_compute_dtype, numpy_dtype
from ptowsp.frontend.checker import check_source
from ptowsp.ir.passes.plan_kernels import plan_kernel
from ptowsp.ir.verify import verify
from ptowsp.lower import lower
from ptowsp.primitives import (
    ARITH_OPERATORS,
    BROADCAST,
    COMPARE_OPERATORS,
    COMPLEX,
    ELEMWISE,
    INJECTIVE,
    LOGIC_OPERATORS,
    OPS,
    PRIMITIVES,
    REDUCTION,
    UNARY_OPERATORS,
)

ROOT = Path(__file__).resolve().parents[1]

# Every kernel below takes these tiles and scalar; each stores one call into `y`.
INPUTS = ("x: In[Tile[4, 8, f32]], h: In[Tile[4, 8, f16]], d: In[Tile[4, 8, f64]], "
          "i: In[Tile[4, 8, i32]], u: In[Tile[4, 8, u8]], v: In[Tile[4, 1, f32]], "
          "w: In[Tile[1, 8, f32]], m: In[Tile[8, 4, f32]], s: Scalar[f32]")
F32, F16, I32, BOOL = (4, 8, "f32"), (4, 8, "f16"), (4, 8, "i32"), (4, 8, "bool")

# Calls of every primitive (adding a primitive adds its calls here), then of the operators:
# (expression, stored shape and dtype).
CALLS = {
    "load": [("load(x)", F32)],
    "full": [("full(4, 8, 1.5, f32)", F32), ("full(4, 8, -3, i32)", I32)],
    "constant": [("constant(2, f16)", F16)],
    "add": [("add(x, v)", F32), ("add(i, 7)", I32), ("add(h, x)", F32),
            ("add(u, u)", (4, 8, "u8"))],
    "sub": [("sub(x, w)", F32), ("sub(i, u)", I32)],
    "mul": [("mul(x, s)", F32), ("mul(i, i)", I32)],
    "div": [("div(x, v)", F32), ("div(i, 3)", I32), ("div(3, i)", I32)],
    "maximum": [("maximum(x, w)", F32), ("maximum(i, 0)", I32)],
    "minimum": [("minimum(d, 0.5)", (4, 8, "f64"))],
    "exp": [("exp(x)", F32), ("exp(h)", F16)],
    "log": [("log(abs(x))", F32)],
    "sqrt": [("sqrt(abs(d))", (4, 8, "f64"))],
    "rsqrt": [("rsqrt(abs(x))", F32)],
    "tanh": [("tanh(x)", F32)],
    "sigmoid": [("sigmoid(x * 10)", F32)],
    "sin": [("sin(x)", F32)],
    "cos": [("cos(h)", F16)],
    "abs": [("abs(x)", F32), ("abs(i)", I32)],
    "neg": [("neg(x)", F32), ("neg(i)", I32)],
    "pow": [("pow(abs(x), 1.5)", F32), ("pow(x, 2)", F32)],
    "relu": [("relu(x)", F32), ("relu(i)", I32)],
    "gelu": [("gelu(x)", F32)],
    "silu": [("silu(h)", F16)],
    "rowsum": [("rowsum(x)", (4, 1, "f32"))],
    "rowmax": [("rowmax(x)", (4, 1, "f32"))],
    "rowmin": [("rowmin(i)", (4, 1, "i32"))],
    "rowmean": [("rowmean(h)", (4, 1, "f16"))],
    "colsum": [("colsum(i)", (1, 8, "i32"))],
    "colmax": [("colmax(x)", (1, 8, "f32"))],
    "colmin": [("colmin(d)", (1, 8, "f64"))],
    "colmean": [("colmean(x)", (1, 8, "f32"))],
    "rowmul": [("rowmul(x, v)", F32)],
    "rowadd": [("rowadd(x, v)", F32)],
    "rowsub": [("rowsub(x, rowmax(x))", F32)],
    "rowdiv": [("rowdiv(x, v)", F32)],
    "colmul": [("colmul(x, w)", F32)],
    "coladd": [("coladd(i, colsum(i))", I32)],
    "colsub": [("colsub(x, w)", F32)],
    "coldiv": [("coldiv(x, w)", F32)],
    "broadcast": [("broadcast(v, 4, 8)", F32), ("broadcast(1.0, 4, 8)", F32)],
    "matmul": [("matmul(x, m)", (4, 4, "f32")),
               ("matmul(x, m, acc = matmul(x, m))", (4, 4, "f32")),
               ("matmul(i, cast(m, i32))", (4, 4, "f32"))],
    "transpose": [("transpose(x)", (8, 4, "f32"))],
    "softmax": [("softmax(x)", F32), ("softmax(h)", F16)],
    "cast": [("cast(x * 3, i32)", I32), ("cast(i, f16)", F16), ("cast(d, bf16)", (4, 8, "bf16"))],
    "where": [("where(x > w, x, 0)", F32), ("where(i < 0, i, u)", I32)],
    "row_index": [("row_index(4, 8)", I32)],
    "valid_rows": [("valid_rows(x)", I32)],
    "valid_cols": [("valid_cols(x)", I32)],
    "col_index": [("col_index(4, 8)", I32)],
    "slice_even": [("slice_even(x)", (4, 4, "f32"))],
    "slice_odd": [("slice_odd(i)", (4, 4, "i32"))],
    "interleave": [("interleave(slice_odd(x), slice_even(x))", F32)],
    # with the slices `x[r0:r1, c0:c1]` (syntax, not primitives: their ops slice_rows/_cols)
    "concat": [("concat(-x[:, 5:], x[:, :5], axis = 1)", F32),
               ("concat(x[2:4], h[1:3, :])", F32), ("concat(i[1:2, 2:6], i[3:4, 0:4], 1)",
                                                     (1, 8, "i32"))],
    # indices out of range (negative included) among them: `i` holds -20 .. 19, `u` 0 .. 19
    "gather": [("gather(x, i, axis = 1)", F32), ("gather(m, i[:, 2:3])", (4, 4, "f32")),
               ("gather(u, u[:, 0:2], 1)", (4, 2, "u8"))],
    "max": [("max(x, w)", F32)],
    "min": [("min(i, u)", I32)],
    "argmax": [("argmax(x)", (4, 1, "i32")), ("argmax(u)", (4, 1, "i32"))],
    "argmin": [("argmin(h)", (4, 1, "i32"))],
    # a primitive with two results: `let r0, r1 = CALL`, then `@ n` stores result n
    "topk": [("topk(x, 3) @ 0", (4, 3, "f32")), ("topk(i, 8) @ 1", I32)],
    "sort": [("sort(d) @ 0", (4, 8, "f64")), ("sort(u, descending = true) @ 1", I32)],
}
OPERATOR_CALLS = [
    ("x > w", BOOL), ("x < v", BOOL), ("i >= 0", BOOL), ("x <= h", BOOL), ("i == u", BOOL),
    ("x != 0", BOOL), ("(x > 0) and (i < 3)", BOOL), ("not (x >= 0) or (i == 2)", BOOL),
    ("-x + x * 2 - x / 4", F32), ("i - u", I32),
]

# sha256 (first 16 hex digits) of each call's stored value, from ref before the table held
# the meanings; a deliberate change of a meaning regenerates them: `python tests/test_primitives.py`
GOLDEN = {
    'load(x)': '62e2f9f6bf84986e',
    'full(4, 8, 1.5, f32)': 'c3e09d0a6450c431',
    'full(4, 8, -3, i32)': 'aac380f03f354110',
    'constant(2, f16)': '87446e9e883ab7a2',
    'add(x, v)': 'b128f23571a90364',
    'add(i, 7)': 'cf2f40f017d3d3b5',
    'add(h, x)': '8ea2b7de80230262',
    'add(u, u)': '626d698d1675013b',
    'sub(x, w)': 'c6238ee2c7fd2c9b',
    'sub(i, u)': '04a24ef7409382ec',
    'mul(x, s)': '986dfd6cdb91d743',
    'mul(i, i)': '775c084bacaf7a28',
    'div(x, v)': '271fda1e1ff7bb55',
    'div(i, 3)': '465e06e2751fd335',
    'div(3, i)': 'c0be9cc0ceb944fb',
    'maximum(x, w)': '0cd33a7a1ff007d2',
    'maximum(i, 0)': '0222993d17457ad8',
    'minimum(d, 0.5)': 'bd446f11f33a4274',
    'exp(x)': 'e6e7dd04d5a8859e',
    'exp(h)': 'be593ca84002cdea',
    'log(abs(x))': '3218a524be7e11fe',
    'sqrt(abs(d))': '121d03223adb6fba',
    'rsqrt(abs(x))': '3b4d181792f94fba',
    'tanh(x)': 'b52a71e960d7a726',
    'sigmoid(x * 10)': '1d2c8bcaf4fe2f4d',
    'sin(x)': 'f02a053a1129e9c6',
    'cos(h)': '471b96303df41b50',
    'abs(x)': '9303d53bccfadd43',
    'abs(i)': 'efb1730e9c9ecc1d',
    'neg(x)': 'fbfa208d1a6ba813',
    'neg(i)': '6e119cfb27c95887',
    'pow(abs(x), 1.5)': '86f800f958d6ab44',
    'pow(x, 2)': '9fc72a08822c7104',
    'relu(x)': '7bff9274215997ea',
    'relu(i)': '0222993d17457ad8',
    'gelu(x)': '5a80912f9ec31130',
    'silu(h)': '30c3e2916ea98e78',
    'rowsum(x)': 'f5fd762d698172eb',
    'rowmax(x)': '083f8dd947356f3f',
    'rowmin(i)': '470578cd0c3d37b9',
    'rowmean(h)': 'baf4d44202fd8c5b',
    'colsum(i)': '047875c12ee0d3ec',
    'colmax(x)': '2749241e240a4016',
    'colmin(d)': '4f56e16bd70cfd10',
    'colmean(x)': 'fa4b856350665476',
    'rowmul(x, v)': '5fc0f1fa3d7d433d',
    'rowadd(x, v)': 'b128f23571a90364',
    'rowsub(x, rowmax(x))': '5659b8f36a248d04',
    'rowdiv(x, v)': '271fda1e1ff7bb55',
    'colmul(x, w)': '7cd119dfdf32351f',
    'coladd(i, colsum(i))': 'f3020e46214fdbdb',
    'colsub(x, w)': 'c6238ee2c7fd2c9b',
    'coldiv(x, w)': '94e6b8f658e04c88',
    'broadcast(v, 4, 8)': 'bf882f6352520e8e',
    'broadcast(1.0, 4, 8)': '57d6eb6c64fb078d',
    'matmul(x, m)': '3fc22740414c1d0b',
    'matmul(x, m, acc = matmul(x, m))': 'cb6eeec3c4592e31',
    'matmul(i, cast(m, i32))': '01c2235e8bc86cbf',
    'transpose(x)': '3e4da78b3ecdb7bb',
    'softmax(x)': '8e4b1cc6d9a84955',
    'softmax(h)': '68c4fab3e71563dd',
    'cast(x * 3, i32)': '246f5b180ef703c7',
    'cast(i, f16)': 'e6f793ade2ef7d55',
    'cast(d, bf16)': '5c629fd654d9dcd8',
    'where(x > w, x, 0)': '90d6e1930c83fa57',
    'where(i < 0, i, u)': 'ce716845d584f9d9',
    'row_index(4, 8)': '0fdd4675d15be19f',
    'valid_rows(x)': '0043e4b8fc74c664',
    'valid_cols(x)': 'ef589fde32bfac1a',
    'col_index(4, 8)': 'f1af91e033f19732',
    'slice_even(x)': 'ce71ec0d9de3e5fd',
    'slice_odd(i)': 'fb11e3a9d4b46bbd',
    'interleave(slice_odd(x), slice_even(x))': '0a493976d4edca22',
    'concat(-x[:, 5:], x[:, :5], axis = 1)': 'd11c8e0fd77683a6',
    'concat(x[2:4], h[1:3, :])': '3d8f25e25f7563f2',
    'concat(i[1:2, 2:6], i[3:4, 0:4], 1)': 'be87da1be66b7f78',
    'gather(x, i, axis = 1)': 'a2b44104ddb832b2',
    'gather(m, i[:, 2:3])': 'b7114014b51b2463',
    'gather(u, u[:, 0:2], 1)': '1db4de500ee00095',
    'max(x, w)': '0cd33a7a1ff007d2',
    'min(i, u)': 'e56c2764b0466314',
    'argmax(x)': 'b6552bfec6bd5dde',
    'argmax(u)': '62582637bf1010f1',
    'argmin(h)': 'b4c5fe86bab95dfc',
    'topk(x, 3) @ 0': '49ee5ff72f30a180',
    'topk(i, 8) @ 1': 'e57460aed6ec0b44',
    'sort(d) @ 0': '6499971914545bb8',
    'sort(u, descending = true) @ 1': '726afcff3c47ecaa',
    'x > w': '6ec23370883d2ca2',
    'x < v': 'd3d11e9b728a22c5',
    'i >= 0': '59b30e6392a99b86',
    'x <= h': '85b61207345725d1',
    'i == u': 'ca1110ecfa22521c',
    'x != 0': '86588f037c542911',
    '(x > 0) and (i < 3)': '6659faaa3f25a780',
    'not (x >= 0) or (i == 2)': 'cff061aecf61fe81',
    '-x + x * 2 - x / 4': '986dfd6cdb91d743',
    'i - u': '04a24ef7409382ec',
}


def _calls() -> list[tuple[str, tuple[int, int, str]]]:
    return [c for calls in CALLS.values() for c in calls] + OPERATOR_CALLS


def _body(e: str) -> str:
    if " @ " not in e:
        return f"store(y, {e})"
    call, n = e.split(" @ ")
    return f"let r0, r1 = {call}\n    store(y, r{n})"


def _module():
    kernels = [f"kernel k{n}({INPUTS}, y: Out[Tile[{r}, {c}, {dt}]]) {{\n    {_body(e)}\n}}"
               for n, (e, (r, c, dt)) in enumerate(_calls())]
    return lower(check_source("module prims\n" + "\n".join(kernels) + "\n", "prims.wsp"))


def _inputs(k) -> dict:
    rng = np.random.default_rng(7)
    out = {}
    for p in k.params:
        if p.kind == "tile":  # a whole view: the tile's extents (what a back end supplies)
            out[f"valid_rows:{p.name}"] = np.int32(p.rows)
            out[f"valid_cols:{p.name}"] = np.int32(p.cols)
        if p.mode not in ("In", None):
            continue
        if p.kind == "scalar":
            out[p.name] = np.asarray(0.75, dtype=numpy_compute_dtype(p.dtype))
        elif p.dtype in ("i32", "u8"):
            lo = 0 if p.dtype == "u8" else -20
            ints = rng.integers(lo, 20, (p.rows, p.cols))
            out[p.name] = ints.astype(numpy_compute_dtype(p.dtype))
        else:
            x = rng.standard_normal((p.rows, p.cols)) * 3
            out[p.name] = x.astype(numpy_dtype(p.dtype)).astype(numpy_compute_dtype(p.dtype))
    return out


def digests() -> dict[str, str]:
    """Each call's stored value through ref, as a digest of its dtype, shape and bytes."""
    m = _module()
    out = {}
    for (e, _), k in zip(_calls(), m.kernels):
        y = np.ascontiguousarray(eval_kernel(k, _inputs(k))["y"])
        h = hashlib.sha256(f"{y.dtype}{y.shape}".encode() + y.tobytes())
        out[e] = h.hexdigest()[:16]
    return out


# ---------------------------------------------------------------------------------------------


def test_every_op_has_a_complete_entry():
    kinds = ("leaf", "ew", "red", "view", "matmul", "select")
    for name, s in OPS.items():
        assert s.name == name
        assert s.arity and all(isinstance(n, int) and n >= 0 for n in s.arity), name
        assert callable(s.rule) and callable(s.numpy), name
        assert (s.plan is None) == (s.expand is not None), name  # planned, or expanded first
        assert s.plan is None or s.plan in kinds, name
        assert s.fusion in (INJECTIVE, ELEMWISE, BROADCAST, REDUCTION, COMPLEX), name
        assert (s.axis is not None) == (s.plan == "red") and s.axis in (None, "row", "col"), name
        assert not s.cheap or s.plan == "ew", name
        # a meaning takes the evaluation and one value per operand
        params = inspect.signature(s.numpy).parameters.values()
        if not any(p.kind == p.VAR_POSITIONAL for p in params):
            assert len(params) - 1 in s.arity, name


def test_every_primitive_and_operator_lowers_to_an_op_of_the_table():
    for p in PRIMITIVES.values():
        assert p.op is None or p.op in OPS, p.name
        for q in p.params:
            assert q.as_dtype in ("result", "own", "bool", "f32"), (p.name, q.name)
    # the six without an op of their own are written out by lowering
    assert {p.name for p in PRIMITIVES.values() if p.op is None} == {
        "load", "full", "constant", "broadcast", "concat", "gather"}
    for ops in (ARITH_OPERATORS, COMPARE_OPERATORS, LOGIC_OPERATORS, UNARY_OPERATORS):
        assert set(ops.values()) <= set(OPS)


def test_each_call_lowers_to_its_op_and_every_op_is_reached():
    assert set(CALLS) == set(PRIMITIVES), "every primitive needs calls in CALLS"
    m = _module()
    verify(m)
    reached = set()
    for (e, _), k in zip(_calls(), m.kernels):
        names = {op.op for op in k.ops}
        reached |= names | {op.op for op in plan_kernel(k).ops}
        prim = PRIMITIVES.get(e.split("(")[0])
        if prim is not None and prim.op is not None:
            assert prim.op in names, e
        if prim is not None and prim.pair is not None:
            assert prim.pair in names, e
    assert reached == set(OPS)


def test_meanings_give_the_values_ref_gave():
    got = digests()
    assert set(got) == set(GOLDEN)
    assert {e: d for e, d in got.items() if GOLDEN[e] != d} == {}


def test_importing_the_table_does_not_import_numpy():
    code = "import sys, ptowsp.primitives\nassert 'numpy' not in sys.modules\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr


if __name__ == "__main__":
    for e, d in digests().items():
        print(f"    {e!r}: {d!r},")
