"""cpu_sim == ref == NumPy on random op chains, for several dtypes and odd shapes.

Each module holds a batch of randomly generated kernels (one per expression), so one C build
serves many chains; hypothesis then varies the data (negative, large, tiny values) fed to the
compiled module. The NumPy formula is built from the same random tree by this file's own table
of NumPy functions: it shares nothing with `backends/ref`.

Each element is held to its own bound: alongside the formula, the tree gives the rounding error
a computation in the kernel's dtype may carry into that element (first-order propagation: each
operation's own rounding, a few ulps for a transcendental, and its operands' errors scaled by
its slope). Where a sum cancels, that error is what is left of a small element's accuracy, so
it is never sized from the largest element, and an element that is not near 0 keeps a
relative bound of a few roundings.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ptowsp

pytestmark = pytest.mark.cc

UNARY = {
    "exp": lambda a: np.exp(np.clip(a, -30, 30)),  # the .wsp side clips with minimum/maximum too
    "tanh": np.tanh,
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)),
    "relu": lambda a: np.maximum(a, 0),
    "abs": np.abs,
    "neg": np.negative,
    "sqrt": lambda a: np.sqrt(np.abs(a)),
    "silu": lambda a: a / (1 + np.exp(-a)),
}
UNARY_WSP = {
    "exp": "exp(minimum(maximum({}, -30.0), 30.0))",
    "sqrt": "sqrt(abs({}))",
}


def _sqrt_slope(a, ea):
    # |sqrt(a') - sqrt(a)| <= ea / (2 sqrt(|a| - ea)), and <= sqrt(ea) always
    with np.errstate(all="ignore"):
        return np.fmin(ea / (2 * np.sqrt(np.maximum(np.abs(a) - ea, 0))), np.sqrt(ea))


# name: (the error its operand's error ea at a becomes, its own error in ulps of its result)
UNARY_ERR = {
    "exp": (lambda a, ea: np.exp(np.minimum(np.clip(a, -30, 30) + ea, 30)) * ea, 2),
    "tanh": (lambda a, ea: ea, 3),
    "sigmoid": (lambda a, ea: ea / 4, 3),
    "relu": (lambda a, ea: ea, 0),
    "abs": (lambda a, ea: ea, 0),
    "neg": (lambda a, ea: ea, 0),
    "sqrt": (_sqrt_slope, 1),
    "silu": (lambda a, ea: 1.1 * ea, 4),
}


def _binary_err(op, a, b, ea, eb):
    """The error of `a op b` from its operands' errors (before its own rounding)."""
    if op in "+-":
        return ea + eb
    if op == "*":
        return np.abs(a) * eb + np.abs(b) * ea + ea * eb
    return np.maximum(ea, eb)  # maximum, minimum: a choice between the operands
BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


LITEXPRS: list[str] = []  # the literal-only sub-expressions of the expression being built


def random_expr(rng: random.Random, depth: int):
    """(wsp text, numpy function of (x, y), kind) of a random expression over tiles x and y
    (random_expr_with_error's first three)."""
    return random_expr_with_error(rng, depth)[:3]


def random_expr_with_error(rng: random.Random, depth: int):
    """(wsp text, numpy function of (x, y), kind, error) of a random expression over tiles x
    and y; error(x, y, u, tiny) is the rounding error (absolute, per element) a computation
    with unit roundoff u (and an absolute error `tiny` per operation, for subnormal results)
    may carry, from the float64 values.

    `kind` follows the literal rules of language.md section 4: "tile"; "lit", a bare literal,
    which takes the dtype of the tile it meets; "litexpr", an expression of literals only,
    which is computed as an f32 scalar."""
    if depth == 0 or rng.random() < 0.2:
        leaf = rng.choice(["x", "y", "x", "y", "lit"])
        if leaf == "lit":
            v = round(rng.uniform(-2, 2), 3)
            # rounded into the tile's dtype where it meets the tile
            return f"({v})", lambda x, y, v=v: v, "lit", lambda x, y, u, tiny, v=v: u * abs(v)
        return (leaf, (lambda x, y: x) if leaf == "x" else (lambda x, y: y), "tile",
                lambda x, y, u, tiny: 0.0)
    if rng.random() < 0.5:
        name = rng.choice(sorted(UNARY))
        text, f, kind, ef = random_expr_with_error(rng, depth - 1)
        wsp = UNARY_WSP.get(name, name + "({})").format(text)
        slope, ulps = UNARY_ERR[name]
        if kind == "tile":
            def err(x, y, u, tiny, f=f, ef=ef, g=UNARY[name], slope=slope, ulps=ulps):
                a = f(x, y)
                with np.errstate(all="ignore"):
                    return slope(a, ef(x, y, u, tiny)) + 2 * ulps * u * np.abs(g(a)) + tiny
            return wsp, lambda x, y, f=f, g=UNARY[name]: g(f(x, y)), "tile", err
        LITEXPRS.append(wsp)
        fn = lambda x, y, f=f, g=UNARY[name]: g(np.float32(f(x, y))).astype(np.float32)  # noqa: E731
        return wsp, fn, "litexpr", _litexpr_err(fn)
    op = rng.choice(sorted(BINARY))
    ta, fa, ka, ea = random_expr_with_error(rng, depth - 1)
    tb, fb, kb, eb = random_expr_with_error(rng, depth - 1)
    wsp = f"({ta} {op} {tb})" if op in "+-*" else f"{op}({ta}, {tb})"
    g = BINARY[op]
    if ka != "tile" and kb != "tile":
        LITEXPRS.append(wsp)
        fn = lambda x, y: g(np.float32(fa(x, y)), np.float32(fb(x, y))).astype(np.float32)  # noqa: E731
        return wsp, fn, "litexpr", _litexpr_err(fn)

    def operand(f, kind):
        # a bare literal meets the tile as an exact decimal; a literal expression as its f32 value
        return (lambda x, y: np.float64(np.float32(f(x, y)))) if kind == "litexpr" else f

    fa2, fb2 = operand(fa, ka), operand(fb, kb)

    def err(x, y, u, tiny):
        a, b = fa2(x, y), fb2(x, y)
        with np.errstate(all="ignore"):
            return _binary_err(op, a, b, ea(x, y, u, tiny), eb(x, y, u, tiny)) \
                + u * np.abs(g(a, b)) + tiny

    return wsp, lambda x, y: g(fa2(x, y), fb2(x, y)), "tile", err


def _litexpr_err(fn):
    # an f32 scalar from literals: NumPy's f32 functions and the target's may differ by a few
    # f32 ulps at each step of it
    return lambda x, y, u, tiny: 16 * 2.0**-24 * np.abs(np.float64(fn(x, y)))


# unit roundoff of each dtype: operations on f16 and bf16 tiles may round to them at each step;
# TINY, the absolute error a result below the smallest normal number may carry
UNIT = {"f64": 2.0**-53, "f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}
TINY = {"f64": 2.0**-1074, "f32": 2.0**-149, "f16": 2.0**-24, "bf16": 2.0**-133}
SAFETY = 2  # the first-order bound, doubled (measured errors stay under a third of it)


def worst(a, b, bound) -> str:
    with np.errstate(all="ignore"):
        r = np.where(a == b, 0, np.abs(a - b) / bound)
        i = np.unravel_index(np.argmax(np.nan_to_num(r, nan=np.inf)), a.shape)
    return f"at {i}: {a[i]!r} vs {b[i]!r}, bound {bound[i]:.3g}"


SHAPES = [(3, 5), (16, 128), (1, 7), (7, 1), (5, 33)]
DTYPES = ["f32", "f64", "f16", "bf16"]
NP = {"f32": np.float32, "f64": np.float64, "f16": np.float16}


def to_f64(a, dt):
    if dt == "bf16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return a.astype(np.float64)


def from_f32(a, dt):
    """NumPy's rounding of an f32 result into dt (bf16: nearest even, by bits)."""
    if dt == "bf16":
        b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
        return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
    return a.astype(NP[dt])


def _rounded_to_f32(f):
    return lambda x, y: np.float64(np.float32(f(x, y)))


def build_batch(seed: int, dt: str, shape):
    rng = random.Random(seed)
    m, n = shape
    exprs = []
    for _ in range(10):
        LITEXPRS.clear()
        text, f, kind, err = random_expr_with_error(rng, 4)
        if kind != "tile":  # no tile at all: an f32 scalar, broadcast and converted on store
            f = _rounded_to_f32(f)
        exprs.append((text, f, err))
    lines = [f"input X: {dt}[{m}, {n}]", f"input Y: {dt}[{m}, {n}]"]
    for i, (text, _, _) in enumerate(exprs):
        lines.append(f"output O{i}: {dt}[{m}, {n}]")
        lines.append(f"kernel k{i}(x: In[Tile[{m}, {n}, {dt}]], y: In[Tile[{m}, {n}, {dt}]], "
                     f"o: Out[Tile[{m}, {n}, {dt}]]) {{ store(o, broadcast({text}, {m}, {n})) }}")
    calls = "\n".join(f"    k{i}(x = X, y = Y, o = O{i})" for i in range(len(exprs)))
    lines.append(f"workload w() {{\n{calls}\n}}")
    module = ptowsp.parse("\n".join(lines), f"chains_{seed}_{dt}.wsp")
    return module, module.compile(target="cpu_sim"), module.compile(target="ref"), exprs


_BATCHES: dict = {}


def batch(seed, dt, shape):
    key = (seed, dt, shape)
    if key not in _BATCHES:
        _BATCHES[key] = build_batch(seed, dt, shape)
    return _BATCHES[key]


CASES = [(seed, dt, SHAPES[(seed + i) % len(SHAPES)]) for i, dt in enumerate(DTYPES) for seed in (1, 2)]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


def values(dt, shape):
    elems = st.floats(-50, 50, allow_nan=False, width=32) | st.sampled_from([0.0, -0.0, 1e-6, -1e-6, 40.0])
    return hnp.arrays(np.float32, shape, elements=elems).map(lambda a: from_f32(a, dt))


@pytest.mark.parametrize("seed, dt, shape", CASES, ids=[f"{d}-{s}-{m}x{n}" for s, d, (m, n) in CASES])
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_chains_cpu_equals_ref_equals_numpy(seed, dt, shape, data):
    module, cpu, ref, exprs = batch(seed, dt, shape)
    x = data.draw(values(dt, shape))
    y = data.draw(values(dt, shape))
    got = cpu.run(X=x, Y=y)
    want = ref.run(X=x, Y=y)
    x64, y64 = to_f64(x, dt), to_f64(y, dt)
    u, tiny = UNIT[dt], TINY[dt]
    for i, (text, f, err) in enumerate(exprs):
        a, b = to_f64(got[f"O{i}"], dt), to_f64(want[f"O{i}"], dt)
        with np.errstate(all="ignore"):
            expected = np.broadcast_to(f(x64, y64), shape)
            # the error of the computation, and the rounding of its result into dt
            bound = np.broadcast_to(err(x64, y64, u, tiny), shape) + u * np.abs(expected) + tiny
            # equal infinities (exp past f16's range) are equal; otherwise within the bound
            assert np.all((a == b) | (np.abs(a - b) <= 2 * SAFETY * bound)), \
                f"cpu_sim != ref for {text}: {worst(a, b, 2 * SAFETY * bound)}"
            big = np.abs(expected) > {"f16": 65504.0, "bf16": 3.3e38}.get(dt, np.inf)
            close = (a == expected) | (np.abs(a - expected) <= SAFETY * bound)
            assert np.all(close | (big & np.isinf(a))), \
                f"cpu_sim != numpy for {text}: {worst(a, expected, SAFETY * bound)}"
