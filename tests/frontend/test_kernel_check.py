"""Kernel bodies through the public checker: every primitive's typing rule, promotion, broadcasting
(against NumPy), the statement rules (let, rebinding, store), and the main errors."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptowsp.diagnostics import WspError
from ptowsp.frontend.checker import check_source
from ptowsp.frontend.kernels import KernelTypes
from ptowsp.primitives import PRIMITIVES, Type


def module(params: str, body: str, extra: str = "", name: str = "k") -> str:
    lines = "\n".join("    " + line for line in body.strip().splitlines())
    return f"{extra}\nkernel {name}({params}) {{\n{lines}\n}}\n"


def errors(src: str):
    try:
        check_source(src, "t.wsp")
    except WspError as err:
        return err.diagnostics
    return []


def kernel_types(src: str, name: str = "k") -> KernelTypes:
    env = check_source(src, "t.wsp")  # raises if anything is wrong
    return env.kernel_types[name]


def show(t: Type) -> str:
    if t.is_tile:
        return f"{t.shape_str()} {t.dtype}"
    return f"{t.dtype} {'literal' if t.literal else 'scalar'}"


def let_types(src: str) -> dict[str, str]:
    return {n: show(t) for n, t in kernel_types(src).lets}


def one_error(src: str):
    diags = errors(src)
    assert len(diags) == 1, [f"{d.span.line}:{d.span.col} {d.message}" for d in diags]
    return diags[0]


X = "x: In[Tile[16, 128, f32]]"
Y = "y: Out[Tile[16, 128, f32]]"

# (id, params, body, expected let types). Every primitive appears in at least one body.
VALID = [
    (
        "valid_rows",
        f"a: In[Tile[16, 128, f32], pad = -inf], {Y}",
        "let n = valid_rows(a)\nlet m = valid_cols(y)\nstore(y, a * n + m)",
        {"n": "i32 scalar", "m": "i32 scalar"},
    ),
    (
        "load",
        f"a: In[Tile[16, 128, f16]], {Y}",
        "let t = load(a)\nstore(y, t)",
        {"t": "[16, 128] f16"},
    ),
    ("full", f"{Y}", "let t = full(16, 1, 0, f32)\nstore(y, t)", {"t": "[16, 1] f32"}),
    ("full-const", f"{Y}", "let t = full(N, 128, 2.5, f16)\nstore(y, t)", {"t": "[16, 128] f16"}),
    ("constant", f"{X}, {Y}", "let c = constant(2, f16)\nstore(y, x * c)", {"c": "f16 scalar"}),
    ("add", f"{X}, {Y}", "let t = add(x, rowsum(x))\nstore(y, t)", {"t": "[16, 128] f32"}),
    ("sub", f"{X}, {Y}", "let t = sub(x, colsum(x))\nstore(y, t)", {"t": "[16, 128] f32"}),
    ("mul", f"{X}, {Y}", "let t = mul(rowsum(x), colsum(x))\nstore(y, t)", {"t": "[16, 128] f32"}),
    ("div", f"{X}, {Y}", "let t = div(x, 2)\nstore(y, t)", {"t": "[16, 128] f32"}),
    ("maximum", f"{X}, {Y}", "let t = maximum(x, 0)\nstore(y, t)", {"t": "[16, 128] f32"}),
    ("minimum", f"{X}, {Y}", "let t = minimum(x, rowmax(x))\nstore(y, t)", {"t": "[16, 128] f32"}),
    ("operators", f"{X}, {Y}", "let t = -(x + 1) * x / 2 - x\nstore(y, t)", {"t": "[16, 128] f32"}),
    (
        "math",
        f"{X}, {Y}",
        (
            "let a = exp(x) + log(x) + sqrt(x) + rsqrt(x)\nlet b = tanh(x) + sigmoid(x) + sin(x) + cos(x)\n"
            "let c = abs(x) + neg(x) + pow(x, 2)\nstore(y, a + b + c)"
        ),
        {"a": "[16, 128] f32", "b": "[16, 128] f32", "c": "[16, 128] f32"},
    ),
    (
        "activations",
        f"{X}, {Y}",
        "let t = relu(x) + gelu(x) + silu(x)\nstore(y, t)",
        {"t": "[16, 128] f32"},
    ),
    (
        "row-reductions",
        f"{X}, {Y}",
        "let a = rowsum(x)\nlet b = rowmax(x)\nlet c = rowmin(x)\nlet d = rowmean(x)\nstore(y, x + a + b + c + d)",
        {"a": "[16, 1] f32", "b": "[16, 1] f32", "c": "[16, 1] f32", "d": "[16, 1] f32"},
    ),
    (
        "col-reductions",
        f"{X}, {Y}",
        "let a = colsum(x)\nlet b = colmax(x)\nlet c = colmin(x)\nlet d = colmean(x)\nstore(y, x + a + b + c + d)",
        {"a": "[1, 128] f32", "b": "[1, 128] f32", "c": "[1, 128] f32", "d": "[1, 128] f32"},
    ),
    (
        "row-ops",
        f"{X}, {Y}",
        "let r = rowsum(x)\nlet t = rowmul(x, r) + rowadd(x, r) + rowsub(x, r) + rowdiv(x, r)\nstore(y, t)",
        {"r": "[16, 1] f32", "t": "[16, 128] f32"},
    ),
    (
        "col-ops",
        f"{X}, {Y}",
        "let c = colsum(x)\nlet t = colmul(x, c) + coladd(x, c) + colsub(x, c) + coldiv(x, c)\nstore(y, t)",
        {"c": "[1, 128] f32", "t": "[16, 128] f32"},
    ),
    (
        "broadcast",
        f"{X}, {Y}",
        "let t = broadcast(rowsum(x), 16, 128)\nlet u = broadcast(1.0, 1, 128)\nstore(y, t + u)",
        {"t": "[16, 128] f32", "u": "[1, 128] f32"},
    ),
    (
        "matmul",
        "a: In[Tile[16, 64, f16]], b: In[Tile[64, 32, f16]], c: Out[Tile[16, 32, f32]]",
        "let t = matmul(a, b)\nstore(c, t)",
        {"t": "[16, 32] f32"},
    ),
    (
        "keywords",
        f"{Y}",
        "let t = full(rows = 16, cols = 1, value = 0, dtype = f16)\nstore(y, t)",
        {"t": "[16, 1] f16"},
    ),
    (
        "matmul-acc-positional",
        "a: In[Tile[16, 64, f32]], b: In[Tile[64, 32, f32]], c: InOut[Tile[16, 32, f32]]",
        "store(c, matmul(a, b, c))",
        {},
    ),
    (
        "matmul-acc",
        "a: In[Tile[16, 64, bf16]], b: In[Tile[64, 32, bf16]], c: InOut[Tile[16, 32, f32]]",
        "store(c, matmul(a, b, acc = c))",
        {},
    ),
    (
        "transpose",
        "a: In[Tile[16, 64, f16]], y: Out[Tile[64, 16, f16]]",
        "let t = transpose(a)\nstore(y, t)",
        {"t": "[64, 16] f16"},
    ),
    ("softmax", f"{X}, {Y}", "let t = softmax(x)\nstore(y, t)", {"t": "[16, 128] f32"}),
    (
        "cast",
        f"{X}, z: Out[Tile[16, 128, i32]]",
        "let t = cast(x, i32)\nlet s = cast(1.5, f16)\nstore(z, t)",
        {"t": "[16, 128] i32", "s": "f16 scalar"},
    ),
    (
        "where",
        f"{X}, {Y}",
        (
            "let t = where(x > 0, x, 0)\nlet u = where(x > 1, 1.0, 0.0)\n"
            "let v = where(rowsum(x) > 0, colsum(x), 2)\nstore(y, t + u + v)"
        ),
        {"t": "[16, 128] f32", "u": "[16, 128] f32", "v": "[16, 128] f32"},
    ),
    (
        "index",
        "y: Out[Tile[16, 128, i32]]",
        "let r = row_index(16, 128)\nlet c = col_index(16, 128)\nstore(y, r * 128 + c)",
        {"r": "[16, 128] i32", "c": "[16, 128] i32"},
    ),
    (
        "slices",
        f"{X}, {Y}",
        "let e = slice_even(x)\nlet o = slice_odd(x)\nstore(y, interleave(o, e))",
        {"e": "[16, 64] f32", "o": "[16, 64] f32"},
    ),
    (
        "tile-slices-concat",
        f"{X}, {Y}, c: Out[Tile[2, 32, f16]], z: In[Tile[4, 2 * H, f32]], H: Constexpr[i32] = 2",
        "let l = x[:, 0:64]\nlet r = x[:, 64:]\nlet b = x[2:4, 16:48]\nlet h = x[0:8]\n"
        "let zr = concat(-z[:, H:], z[:, 0:H], axis = 1)\n"
        "let s = (x * 2)[1:2, :]\nlet j = concat(-r, l, axis = 1)\nlet k = concat(h, h)\n"
        "let m = concat(l, cast(r, f16), 1)\n"
        "store(y, j + k + m)\nstore(c, b)",
        {"l": "[16, 64] f32", "r": "[16, 64] f32", "b": "[2, 32] f32", "h": "[8, 128] f32",
         "s": "[1, 128] f32", "j": "[16, 128] f32", "k": "[16, 128] f32",
         "m": "[16, 128] f32", "zr": "[4, H * 2] f32"},
    ),
    (
        "gather",
        f"{X}, {Y}, r: In[Tile[4, 1, i32]], c: In[Tile[16, K, u8]], b: In[Tile[16, 8, bool]], "
        "z: Out[Tile[4, 128, f32]], K: Constexpr[i32] = 3",
        "let g = gather(x, r)\nlet h = gather(x, c, axis = 1)\nlet k = gather(b, c, 1)\n"
        "let e = gather(x, cast(rowsum(x), i64), 0)\nlet n = gather(x[0:2], r)\n"
        "store(z, g)\nstore(y, e)",
        {"g": "[4, 128] f32", "h": "[16, K] f32", "k": "[16, K] bool", "e": "[16, 128] f32",
         "n": "[4, 128] f32"},
    ),
    (
        "compare-logic",
        f"{X}, m: Out[Tile[16, 128, bool]]",
        "let a = x > 0\nlet b = x <= rowmean(x)\nstore(m, (a and not b) or x == 1 or a != b)",
        {"a": "[16, 128] bool", "b": "[16, 128] bool"},
    ),
    (
        "prefixes",
        f"{X}, {Y}",
        "let t = tl.exp(x)\nlet u = pto.rowsum(t)\ntl.store(y, t * u)",
        {"t": "[16, 128] f32", "u": "[16, 1] f32"},
    ),
    (
        "rebind",
        f"{X}, {Y}",
        "let t = x\nt = t * 2\nt = rowsum(t)\nstore(y, t)",
        {"t": "[16, 128] f32"},
    ),
    (
        "inout-not-stored",
        "acc: InOut[Tile[16, 128, f32]], x: In[Tile[16, 128, f32]]",
        "let t = acc + x",
        {"t": "[16, 128] f32"},
    ),
    ("store-fill", f"{Y}", "store(y, 0)", {}),
    (
        "scalars",
        f"{X}, {Y}, s: Scalar[f32] = 1e-6, n: Scalar[i32] = -3, R: Constexpr[i32] = 4, flag: Scalar[bool] = true",
        "let a = s * 2\nlet b = n + R\nlet c = where(flag, x, s)\nstore(y, c + a)",
        {"a": "f32 scalar", "b": "i32 scalar", "c": "[16, 128] f32"},
    ),    (
        "selection",
        f"{X}, h: In[Tile[16, 8, f16]], {Y}",
        "let v, i = topk(h, 4)\nlet _, j = sort(x, descending = true)\n"
        "let s, _ = sort(x)\nlet m = argmax(x) + argmin(h)\nlet z = max(x, 0) - min(x, s)\n"
        "store(y, z + cast(j, f32) + cast(m, f32))",
        {"v": "[16, 4] f16", "i": "[16, 4] i32", "j": "[16, 128] i32", "s": "[16, 128] f32",
         "m": "[16, 1] i32", "z": "[16, 128] f32"},
    ),
]


@pytest.mark.parametrize("params,body,expected", [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_valid_kernels(params, body, expected):
    src = module(params, body, extra="const N = 16")
    assert let_types(src) == expected


def test_every_primitive_has_a_valid_example():
    used = set()
    for _, _, body, _ in VALID:
        used |= set(re.findall(r"([a-z_]+)\(", body))
    assert set(PRIMITIVES) <= used, sorted(set(PRIMITIVES) - used)


def test_language_md_section_1_example():
    # examples/rmsnorm.wsp is language.md's first program, verbatim
    src = (Path(__file__).resolve().parents[2] / "examples" / "rmsnorm.wsp").read_text()
    kt = kernel_types(src, "rmsnorm_tile")
    assert [(n, show(t)) for n, t in kt.lets] == [("ms", "[16, 1] f32")]
    assert [(n, show(t)) for n, t in kt.stores] == [("y", "[16, 128] f32")]


def test_language_md_section_4_online_softmax_update():
    # `store(l, l * alpha + rowsum(p))` then `store(m, m_new)`: reads the entry values of l and m
    src = module(
        "s: In[Tile[16, 64, f32]], m: InOut[Tile[16, 1, f32]], l: InOut[Tile[16, 1, f32]]",
        """
let m_new = maximum(m, rowmax(s))
let alpha = exp(m - m_new)
let p = exp(s - m_new)
store(l, l * alpha + rowsum(p))
store(m, m_new)
""",
    )
    assert let_types(src) == {"m_new": "[16, 1] f32", "alpha": "[16, 1] f32", "p": "[16, 64] f32"}


def test_constexpr_dims():
    src = module(
        "x: In[Tile[R, 128, f32]], y: Out[Tile[R, 128, f32]], R: Constexpr[i32]",
        "let r = rowsum(x)\nlet f = full(R, 1, 1.0, f32)\nstore(y, x * r + f)",
    )
    assert let_types(src) == {"r": "[R, 1] f32", "f": "[R, 1] f32"}


def test_constexpr_dim_may_differ():
    d = one_error(
        module(
            "x: In[Tile[R, 128, f32]], b: In[Tile[16, 128, f32]], R: Constexpr[i32]",
            "let t = x + b",
        )
    )
    assert (d.span.line, d.span.col) == (3, 15)
    assert "may not broadcast: [R, 128] and [16, 128]" in d.message


# -- dtype promotion and literals


@pytest.mark.parametrize(
    "a,b,expr,expected",
    [
        ("f16", "f32", "a + b", "[4, 8] f32"),
        ("f16", "bf16", "a * b", "[4, 8] f32"),
        ("i32", "f16", "a + b", "[4, 8] f16"),
        ("i8", "u8", "a + b", "[4, 8] i16"),
        ("i64", "u64", "a + b", "[4, 8] i64"),
        ("u8", "u32", "a - b", "[4, 8] u32"),
        ("f16", "f16", "a * 2", "[4, 8] f16"),
        ("i32", "i32", "a * 2.5", "[4, 8] f32"),
        ("i32", "i32", "a / 2", "[4, 8] i32"),
        ("f16", "f16", "a * s", "[4, 8] f16"),
        ("i32", "i32", "a * s", "[4, 8] f32"),
        ("f64", "f64", "a + 1", "[4, 8] f64"),
        ("f32", "f32", "1 + 2", "i32 literal"),
        ("f32", "f32", "1 + 2.0", "f32 literal"),
        ("f32", "f32", "N * 0.5", "f32 literal"),
        ("f32", "f32", "s + 1", "f32 scalar"),
        ("f32", "f32", "exp(2)", "f32 literal"),
    ],
)
def test_promotion(a, b, expr, expected):
    src = module(
        f"a: In[Tile[4, 8, {a}]], b: In[Tile[4, 8, {b}]], s: Scalar[f32]",
        f"let t = {expr}",
        extra="const N = 3",
    )
    assert let_types(src)["t"] == expected


# -- broadcasting agrees with NumPy

ROWS = (1, 2, 4, 16)
COLS = (1, 8, 128)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(ROWS),
    st.sampled_from(COLS),
    st.sampled_from(ROWS),
    st.sampled_from(COLS),
    st.sampled_from(["+", "-", "*", "/"]),
)
def test_broadcast_matches_numpy(r1, c1, r2, c2, op):
    try:
        expected = tuple(np.broadcast_shapes((r1, c1), (r2, c2)))
    except ValueError:
        expected = None
    src = module(
        f"a: In[Tile[{r1}, {c1}, f32]], b: In[Tile[{r2}, {c2}, f32]], y: Out[Tile[1, 1, f32]]",
        f"let s = a {op} b\nstore(y, rowsum(colsum(s)))",
    )
    if expected is None:
        d = one_error(src)  # the failed `+` silences the reductions and the store built on it
        assert (d.span.line, d.span.col) == (3, 15)
        assert f"operands of `{op}` do not broadcast: [{r1}, {c1}] and [{r2}, {c2}]" == d.message
    else:
        assert let_types(src) == {"s": f"[{expected[0]}, {expected[1]}] f32"}


# -- errors


def test_several_independent_errors_are_all_reported():
    src = module(
        f"{X}, b: In[Tile[8, 128, f32]], {Y}, n: In[Tile[16, 128, i32]]",
        """
let t = x + b
let u = rowmaen(x)
let v = exp(n)
let w = xx + 1
store(x, t + u + v + w)
z = 3
""",
    )
    got = [(d.span.line, d.span.col, d.message) for d in errors(src)]
    # the store to `x` was meant for some output, so `y` is not also reported as never stored
    assert [g[:2] for g in got] == [(3, 15), (4, 13), (5, 17), (6, 13), (7, 11), (8, 5)]


def test_no_cascade_from_an_unknown_name():
    d = one_error(module(f"{X}, {Y}", "let a = exp(q)\nlet b = rowsum(a) * x\nstore(y, b + a * q)"))
    assert d.message == "unknown name `q`"  # reported once, at its first use


@pytest.mark.parametrize(
    "params,body",
    [
        (f"{X}, y: Out[Tile[16, M, f32]]", "store(y, x + 1)"),  # bad dim, reported by the signature
        (f"{X}, {Y}", "t = x * 2\nstore(y, t)"),  # a forgotten `let`
        (f"{X}, {Y}", "store(yy, x)"),  # a wrong store target: `y` is not also "never stored"
        (f"{X}, {Y}", "rowsum(y, x)"),  # a call statement: one diagnostic, arguments unchecked
    ],
)
def test_one_mistake_one_diagnostic(params, body):
    one_error(module(params, body))


def test_unknown_function_did_you_mean():
    d = one_error(module(f"{X}, {Y}", "let ms = rowmaen(x * x)\nstore(y, x * ms)"))
    assert (d.span.line, d.span.col, d.message, d.help) == (
        3,
        14,
        "unknown function `rowmaen`",
        "did you mean `rowmean`?",
    )


def test_unknown_name_did_you_mean():
    d = one_error(module(f"{X}, {Y}", "let total = rowsum(x)\nstore(y, x * totl)"))
    assert d.message == "unknown name `totl`" and d.help == "did you mean `total`?"


def test_let_used_before_definition():
    d = one_error(module(f"{X}, {Y}", "let a = x * b\nlet b = rowsum(x)\nstore(y, a)"))
    assert (d.span.line, d.span.col) == (3, 17) and "used before its `let`" in d.message
    assert d.notes and d.notes[0].span.line == 4


def test_out_never_stored_points_at_the_parameter():
    d = one_error(module(f"{X}, {Y}", "let a = x * 2"))
    assert (d.span.line, d.span.col, d.message) == (2, 37, "output `y` is never stored")


def test_out_stored_twice():
    d = one_error(module(f"{X}, {Y}", "store(y, x)\nstore(y, x * 2)"))
    assert (d.span.line, d.span.col) == (4, 5) and "stored twice" in d.message
    assert d.notes[0].span.line == 3


def test_inout_stored_twice_but_once_is_fine():
    src = module(
        "acc: InOut[Tile[16, 128, f32]], x: In[Tile[16, 128, f32]]",
        "store(acc, acc + x)\nstore(acc, x)",
    )
    d = one_error(src)
    assert (d.span.line, d.span.col) == (4, 5) and "at most once" in d.message


def test_store_to_in_parameter():
    d = one_error(module(f"{X}, {Y}", "store(y, x)\nstore(x, x)"))
    assert (d.span.line, d.span.col) == (4, 11) and "`In` parameter" in d.message


@pytest.mark.parametrize(
    "body,line,col,text",
    [
        ("store(s, 1)", 3, 11, "it is a scalar parameter"),
        ("let t = x\nstore(t, x)", 4, 11, "it is a `let`"),
        ("store(yy, x)", 3, 11, "unknown name `yy`"),
    ],
)
def test_store_targets(body, line, col, text):
    diags = errors(module(f"{X}, {Y}, s: Scalar[f32]", body + "\nstore(y, x)"))
    assert [(d.span.line, d.span.col) for d in diags] == [(line, col)] and text in diags[0].message


def test_store_shape_and_dtype():
    assert (
        errors(module(f"{X}, {Y}", "store(y, rowsum(x) + colsum(x))")) == []
    )  # broadcasts to [16, 128]
    assert (
        errors(module(f"{X}, {Y}", "store(y, rowsum(x))")) == []
    )  # [16, 1] stretches to [16, 128]
    src = module(f"{X}, y: Out[Tile[8, 128, f32]]", "store(y, x)")
    d = one_error(src)
    assert (d.span.line, d.span.col) == (
        3,
        14,
    ) and "cannot store a [16, 128] value into `y`" in d.message


def test_store_conversions():
    # float->float rounds, int->int wraps, an integer literal fills any numeric tile
    ok = module(
        "a: In[Tile[4, 4, f32]], h: Out[Tile[4, 4, f16]], i: Out[Tile[4, 4, i8]], "
        "j: Out[Tile[4, 4, i64]], f: Out[Tile[4, 4, f64]]",
        "store(h, a)\nstore(i, 3)\nstore(j, cast(a, i32))\nstore(f, 1)",
    )
    assert errors(ok) == []
    bad = module("a: In[Tile[4, 4, f32]], i: Out[Tile[4, 4, i32]]", "store(i, a)")
    d = one_error(bad)
    assert "without a cast" in d.message and "cast(value, i32)" in d.help
    bad = module("i: Out[Tile[4, 4, i32]]", "store(i, 0.5)")
    assert "float literal" in one_error(bad).message
    bad = module("a: In[Tile[4, 4, i32]], f: Out[Tile[4, 4, f32]]", "store(f, a)")
    assert "without a cast" in one_error(bad).message


def test_read_out_parameter():
    d = one_error(module(f"{X}, {Y}", "store(y, y + x)"))
    assert (d.span.line, d.span.col) == (3, 14) and "`Out` parameter" in d.message


def test_rebinding_rules():
    d = one_error(module(f"{X}, {Y}", "x = x * 2\nstore(y, x)"))
    assert (d.span.line, d.span.col) == (3, 5) and "parameters are read-only" in d.message
    d = one_error(module(f"{X}, {Y}", "let t = rowsum(x)\nt = x\nstore(y, t)"))
    assert (d.span.line, d.span.col) == (4, 9) and "`t` is [16, 1]" in d.message
    d = one_error(module(f"{X}, {Y}", "let t = x\nlet t = x * 2\nstore(y, t)"))
    assert (d.span.line, d.span.col) == (4, 9) and "already defined" in d.message
    d = one_error(module(f"{X}, {Y}", "let x = 2\nstore(y, x)"))
    assert "shadow the parameter" in d.message


@pytest.mark.parametrize(
    "stmt,kw",
    [
        ("for i in P.seq(4) { store(y, x) }", "for"),
        ("when x > 0 { store(y, x) }", "when"),
        ("combine { store(y, x) }", "combine"),
    ],
)
def test_workload_statements_in_a_kernel(stmt, kw):
    d = one_error(module(f"{X}, {Y}", stmt))
    assert d.message == f"kernels are straight-line code: no `{kw}` in a kernel"
    assert (d.span.line, d.span.col) == (3, 5)


def test_unused_values():
    d = one_error(module(f"{X}, {Y}", "exp(x)\nstore(y, x)"))
    assert "the value of `exp(...)` is unused" in d.message
    d = one_error(module(f"{X}, {Y}", "tl.exp(x)\nstore(y, x)"))
    assert "unused" in d.message
    d = one_error(module(f"{X}, {Y}", "x + 1\nstore(y, x)"))
    assert "unused" in d.message
    d = one_error(module(f"{X}, {Y}", "stor(y, x)"))
    assert d.message == "unknown function `stor`" and d.help == "did you mean `store`?"


@pytest.mark.parametrize(
    "expr,text",
    [
        ("exp(n)", "`exp` needs a float value, found a [16, 128] i32 tile"),
        ("rowmean(n)", "`rowmean` needs a float tile"),
        ("m + 1", "`+` cannot take a bool value"),
        ("-m", "`-` cannot take a bool value"),
        ("not x", "`not` needs a bool operand"),
        ("x and m", "`and` needs bool operands"),
        ("m < m", "`<` cannot compare a bool value"),
        ("rowsum(s)", "`rowsum` needs a tile, found an f32 scalar"),
        ("rowsum(1.0)", "`rowsum` needs a tile, found a float literal"),
        ("matmul(x, x)", "inner dimensions of `matmul` do not match: [16, 128] x [16, 128]"),
        ("matmul(x, transpose(x), acc = x)", "the `acc` of `matmul` must be a [16, 16] f32 tile"),
        ("pow(x, x)", "the exponent of `pow` must be a scalar"),
        (
            "slice_even(full(4, 5, 0, f32))",
            "`slice_even` needs an even number of columns, found [4, 5]",
        ),
        ("interleave(x, rowsum(x))", "`interleave` needs two tiles of the same shape"),
        (
            "rowmul(x, colsum(x))",
            "`rowmul` needs a [16, 1] tile as its second argument, found a [1, 128] f32 tile",
        ),
        ("colmul(x, rowsum(x))", "`colmul` needs a [1, 128] tile"),
        ("broadcast(x, 4, 128)", "`broadcast` cannot stretch [16, 128] to [4, 128]"),
        ("where(x, x, 0)", "the condition of `where` must be bool"),
        ("where(m, x, rowsum(n) + colsum(rowsum(x)) + full(2, 1, 0, f32))", "do not broadcast"),
        ("full(0, 4, 0, f32)", "`full` needs a positive number of rows, found 0"),
        ("full(x, 4, 0, f32)", "`x` is not a compile-time integer"),
        ("full(4, 4, 1.5, i32)", "`full` of i32 cannot take a float literal without a cast"),
        ("full(4, 4, x, f32)", "the value of `full` must be a scalar"),
        ("cast(x, float32)", "expected a data type such as `f32`, found `float32`"),
        ("constant(1.0, i32)", "`constant` of i32 cannot take a float literal"),
        ("exp(x, x)", "`exp` takes 1 argument, found 2"),
        ("full(4, 4, 0)", "`full` takes 4 arguments, found 3"),
        ("matmul(x, x, x, x)", "`matmul` takes 2 or 3 arguments, found 4"),
        ("matmul(x, transpose(x), accum = x)", "`matmul` has no parameter `accum`"),
        ("x % 2", "`%` is not available in kernels"),
        ("sum(x)", "unknown function `sum`"),
        ("topk(x, 2)", "`topk` returns two tiles, the values and their indices"),
        ("f32(n)", "unknown function `f32`"),
        ("x * f32", "`f32` is a data type, not a value"),
        ("x[0]", "an index would drop a dimension of the tile; select rows with a range"),
        ("x[0:2, 3]", "an index would drop a dimension of the tile; select columns with a range"),
        ("x[0:2, :, :]", "a tile has two dimensions, found 3 ranges"),
        ("s[0:1]", "only a tile can be sliced, found an f32 scalar"),
        ("x[q:4]", "unknown name `q`"),
        ("rowsum(x)[0:2, 1:2]", "slice `1:2` is out of range for the columns of [16, 1]"),
        ("concat(x, x, axis = 2)", "the axis of `concat` is 0 (rows) or 1 (columns)"),
        ("concat(x, s)", "`concat` needs a tile, found an f32 scalar"),
        ("gather(x, x)", "the indices of `gather` must be an integer tile"),
        ("gather(x, n)", "`gather` along axis 0 takes one row number per row of the result"),
        ("gather(x, n[0:8, :], axis = 1)", "`gather` along axis 1 needs one row of indices"),
        ("gather(x, n, axis = 3)", "the axis of `gather` is 0 (rows) or 1 (columns)"),
        ("store(y, x)", "`store` is a statement, not a value"),
    ],
)
def test_expression_errors(expr, text):
    src = module(
        f"{X}, n: In[Tile[16, 128, i32]], m: In[Tile[16, 128, bool]], s: Scalar[f32], {Y}",
        f"let t = {expr}\nstore(y, x)",
    )
    d = one_error(src)
    assert text in d.message, d.message


def test_error_help_texts():
    src = module(f"n: In[Tile[16, 128, i32]], {Y}", "store(y, cast(exp(n), f32))")
    assert "cast(x, f32)" in one_error(src).help
    src = module(f"m: In[Tile[16, 128, bool]], {Y}", "store(y, cast(m * 2, f32))")
    assert "where" in one_error(src).help
    src = module(f"{X}, {Y}", "store(y, sum(x))")
    assert "rowsum" in one_error(src).help
    src = module(f"{X}, {Y}", "let v = sort(x)\nstore(y, v)")
    assert "let v, _ = " in one_error(src).help


# -- parameters and extern kernels


@pytest.mark.parametrize(
    "param,text",
    [
        ("n: Scalar[i32] = 1.5", "`n` is an i32 scalar, but its default is the float `1.5`"),
        ("n: Scalar[bool] = 1", "is a bool scalar"),
        ("n: Scalar[u8] = 300", "does not fit in u8"),
        ("R: Constexpr[i32] = 2.0", "must be an integer"),
        ("R: Constexpr[f32]", "`Constexpr` parameters are integers"),
        ("n: Scalar[f32] = x", "must be a literal"),
        ("a: In[Tile[16, 128, f32]] = 0", "cannot have a default"),
        ("a: In[Tile[0, 128, f32]]", "tile dimensions must be positive"),
    ],
)
def test_parameter_errors(param, text):
    d = one_error(module(f"{X}, {Y}, {param}", "store(y, x)"))
    assert text in d.message, d.message


def test_good_defaults():
    src = module(
        f"{X}, {Y}, a: Scalar[f32] = 1, b: Scalar[i8] = -128, c: Scalar[bool] = false, "
        "R: Constexpr[i32] = N, S: Constexpr[i64] = 8",
        "store(y, x)",
        extra="const N = 4",
    )
    assert errors(src) == []


def test_extern_kernels():
    ok = 'kernel top(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 2, i32]], k: Scalar[i32] = 2) extern c """ y.data[0] = 0; """'
    assert errors(ok) == []
    assert errors('kernel a(x: In[Tile[1, 8, f32]]) extern ascend """ """') == []
    d = one_error('kernel a(x: In[Tile[1, 8, f32]]) extern cc """ """')
    assert d.message == "unknown extern language `cc`" and d.help == "did you mean `c`?"
    d = one_error('kernel a(x: In[Tile[1, 8, f32]])\n  extern c """ """\n  extern c """ """')
    assert (d.span.line, d.span.col) == (3, 3) and "given twice" in d.message


# -- robustness: mutated kernels give diagnostics, never another exception

_SOURCES = [module(c[1], c[2], extra="const N = 16") for c in VALID]
_TOKEN = re.compile(r'"""[\s\S]*?"""|//[^\n]*|\d[\d_.eE]*|\w+|\n|[<>=!]=|\S')
_VOCAB = [
    "(",
    ")",
    "[",
    "]",
    ",",
    "=",
    ".",
    "\n",
    "+",
    "*",
    "/",
    "%",
    "-",
    ">",
    "and",
    "not",
    "let",
    "store",
    "x",
    "y",
    "t",
    "0",
    "1.5",
    "true",
    "f32",
    "i32",
    "bool",
    "exp",
    "rowsum",
    "colsum",
    "matmul",
    "acc",
    "where",
    "cast",
    "full",
    "broadcast",
    "pow",
    "slice_even",
    "interleave",
    "transpose",
    "R",
    "N",
    "In",
    "Out",
    "InOut",
    "Scalar",
    "Constexpr",
    "Tile",
    "tl",
    "for",
    'extern c """ """',
]


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, len(_SOURCES) - 1),
    st.lists(
        st.tuples(
            st.sampled_from(["delete", "duplicate", "replace", "insert"]),
            st.floats(0, 1, exclude_max=True),
        ),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from(_VOCAB),
)
def test_mutated_kernels_give_diagnostics_not_crashes(which, mutations, word):
    toks = _TOKEN.findall(_SOURCES[which])
    for kind, where in mutations:
        i = int(where * len(toks))
        if kind == "delete":
            del toks[i]
        elif kind == "duplicate":
            toks.insert(i, toks[i])
        elif kind == "replace":
            toks[i] = word
        else:
            toks.insert(i, word)
    src = " ".join(toks).replace(" \n ", "\n")
    try:
        check_source(src, "t.wsp")
    except WspError as err:
        assert err.diagnostics
