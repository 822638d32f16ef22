"""Every transcendental primitive, on `ref` and on `cpu_sim`, within a bound in ulps of the
float64 value, element by element, over a sweep of arguments (tiny, moderate, large, zero,
infinities, NaN).

End-to-end comparisons (tests/test_examples_*.py, test_cpu_vs_ref.py, test_differential.py)
hold each element to a relative bound of the result type's precision, which is too coarse to
see an `exp` 40 ulp off: these tests are what does. The same functions on the CPU Ascend C
are bounded in tests/ascend/test_transcendentals.py.

The bounds (ULPS below) are what each target promises for f32 results; f16 and bf16 results
are computed in f32 and rounded once, so they are within one ulp of their own type; f64
results within a few f64 ulps. gelu's argument u = sqrt(2/pi) (x + 0.044715 x^3) is rounded
in the working type before sigmoid(2u): for x < 0 that rounding is multiplied by 2|u| (the
problem's own condition number), so its bound grows by 6|u| ulps there. Every target computes
gelu as x sigmoid(2u), which does not cancel for x < 0 as 0.5 x (1 + tanh(u)) does (language.md
section 5); the last test shows the bound would catch the tanh form.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.ref import values as R
from tests.accuracy import assert_ulps, ulp_errors

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("wspc_cache"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning")]

ROWS, COLS = 16, 96
DTYPES = ("f32", "f64", "f16", "bf16")
EXPONENTS = (0.5, 1.75, 2.0, 3.0, -1.0, -2.5)


def _gelu(x):
    # 0.5 x (1 + tanh(u)) == x sigmoid(2u): the sigmoid form is accurate for x << 0
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
    return np.where(x == -np.inf, -0.0, x / (1 + np.exp(-2 * u)))


# name: (the kernel's expression of x, the float64 reference of x)
FUNCTIONS = {
    "exp": ("exp(x)", np.exp),
    "log": ("log(abs(x))", lambda x: np.log(np.abs(x))),
    "sqrt": ("sqrt(abs(x))", lambda x: np.sqrt(np.abs(x))),
    "rsqrt": ("rsqrt(abs(x))", lambda x: 1 / np.sqrt(np.abs(x))),
    "tanh": ("tanh(x)", np.tanh),
    "sigmoid": ("sigmoid(x)", lambda x: 1 / (1 + np.exp(-x))),
    "sin": ("sin(x)", np.sin),
    "cos": ("cos(x)", np.cos),
    "gelu": ("gelu(x)", _gelu),
    "silu": ("silu(x)", lambda x: np.where(x == -np.inf, -0.0, x / (1 + np.exp(-x)))),
    # pow_K: |x| to the K-th exponent of EXPONENTS
    **{f"pow_{k}": (f"pow(abs(x), {e})", lambda x, e=e: np.abs(x) ** e)
       for k, e in enumerate(EXPONENTS)},
}

# f32 results, in f32 ulps, per target. ref is NumPy on f32 arrays: exp, log, sin, cos and
# tanh are bounded by what NumPy's own accuracy tests accept for its float32 loops
# (numpy/_core/tests/data/umath-validation-set-*.csv: 3, 4, 2, 2, 2 ulp), the functions built
# from them by those bounds plus their own roundings. cpu_sim's are the C kernels' own
# (backends/cpu/wsp_kernels.h), as tests/backends/test_cpu_kernels.py bounds them too.
ULPS = {
    "ref": {"exp": 3, "log": 4, "sqrt": 0.5, "rsqrt": 1.5, "tanh": 2, "sigmoid": 4,
            "sin": 2, "cos": 2, "gelu": 4, "silu": 4.5, "pow": 1},
    "cpu_sim": {"exp": 1.5, "log": 1.5, "sqrt": 0.5, "rsqrt": 1.5, "tanh": 2.5, "sigmoid": 2.5,
                "sin": 1, "cos": 1, "gelu": 4, "silu": 3.5, "pow": 1},
}
ULPS_F64 = 4  # f64 results: libm and NumPy in float64, a few ulps of f64
# gelu and silu results below the smallest normal number may lose the subnormal spacing
SUBNORMAL = {"f16": 2.0**-14, "bf16": 2.0**-126, "f32": 2.0**-126, "f64": 2.0**-1022}


def arguments() -> np.ndarray:
    """ROWS x COLS float64 arguments: edge values, a dense sweep of [-12, 12], and
    log-spaced magnitudes of both signs from 1e-30 to 1e4."""
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e-8, -1e-8, 0.5, -0.5, 1.0,
             -1.0, 2.5, 88.0, -88.0, 89.0, -104.0, 7e4, -1e5, 1e-3, -3.0, 3.0, 20.0, -20.0]
    n = ROWS * COLS
    rng = np.random.default_rng(11)
    mags = np.logspace(-30, 4, (n - len(edges)) // 3)
    sweep = np.linspace(-12, 12, (n - len(edges)) // 3)
    rest = rng.standard_normal(n - len(edges) - len(mags) - len(sweep)) * 3
    signs = np.where(rng.random(len(mags)) < 0.5, -1.0, 1.0)
    x = np.concatenate([edges, mags * signs, sweep, rest])
    return x.reshape(ROWS, COLS)


def stored(x: np.ndarray, dt: str) -> np.ndarray:
    """x rounded into dt's memory form (bf16: its bits)."""
    if dt == "bf16":
        return R.bf16_bits(x.astype(np.float32))
    return x.astype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[dt])


def as_f64(a: np.ndarray, dt: str) -> np.ndarray:
    if dt == "bf16":
        return R.bf16_from_bits(a).astype(np.float64)
    return a.astype(np.float64)


def program(dt: str) -> ptowsp.Module:
    lines = [f"input X: {dt}[{ROWS}, {COLS}]"]
    calls = []
    for name, (expr, _) in FUNCTIONS.items():
        out = f"Y_{name}"
        lines.append(f"output {out}: {dt}[{ROWS}, {COLS}]")
        lines.append(f"kernel k_{name}(x: In[Tile[{ROWS}, {COLS}, {dt}]], "
                     f"y: Out[Tile[{ROWS}, {COLS}, {dt}]]) {{ store(y, {expr}) }}")
        calls.append(f"    k_{name}(x = X, y = {out})")
    lines.append("workload w() {\n" + "\n".join(calls) + "\n}")
    return ptowsp.parse("\n".join(lines), f"transcendentals_{dt}.wsp")


_RUNS: dict = {}


def outputs(target: str, dt: str) -> tuple[np.ndarray, dict]:
    """(the arguments as dt holds them, in float64; every function's results, in float64)."""
    key = (target, dt)
    if key not in _RUNS:
        x = stored(arguments(), dt)
        out = program(dt).compile(target=target).run(X=x)
        _RUNS[key] = (as_f64(x, dt), {k: as_f64(v, dt) for k, v in out.items()})
    return _RUNS[key]


def overflows(want: np.ndarray, dt: str) -> np.ndarray:
    """Where the exact value rounds past dt's largest finite number (to an infinity)."""
    big = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38,
           "f64": np.inf}[dt]
    half_ulp = {"f16": 2.0**-11, "bf16": 2.0**-8, "f32": 2.0**-24, "f64": 0.0}[dt]
    with np.errstate(invalid="ignore", over="ignore"):
        return np.isfinite(want) & (np.abs(want) >= big * (1 + half_ulp))


def bound(target: str, name: str, dt: str, x: np.ndarray):
    base = "pow" if name.startswith("pow") else name
    if dt == "f64":
        n = ULPS_F64
    elif dt in ("f16", "bf16"):
        n = 1
    else:
        n = ULPS[target][base]
    if base == "gelu":
        with np.errstate(all="ignore"):
            u = np.abs(0.7978845608028654 * (x + 0.044715 * x**3))
        return n + np.where(x < 0, 6 * np.nan_to_num(u, posinf=1e300), 0)
    return n


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_within_bound_in_ulps(target, dt, name):
    x, out = outputs(target, dt)
    with np.errstate(all="ignore"):
        want = FUNCTIONS[name][1](x)
    got = out[f"Y_{name}"]
    # a result past dt's largest finite value is an infinity of the same sign
    over = overflows(want, dt)
    assert np.all(np.isinf(got[over]) & (np.sign(got[over]) == np.sign(want[over]))), name
    ulps = np.broadcast_to(bound(target, name, dt, x), x.shape)[~over]
    atol = SUBNORMAL[dt] if name in ("gelu", "silu") else 0.0
    assert_ulps(got[~over], want[~over], dt, ulps, what=f"{name} on {target} ({dt})",
                inputs=x[~over], atol=atol)


def test_the_gelu_bound_sees_the_tanh_form():
    """0.5 x (1 + tanh(u)), as ref and the AICore code computed gelu before, in f32: 10^8 ulp off
    at x = -5.4 and -0 at x = -8.3 (about -1e-23): far out of the bound above."""
    x = np.float32([-5.4, -8.3])
    u = np.float32(math.sqrt(2 / math.pi)) * (x + np.float32(0.044715) * x * x * x)
    tanh_form = (np.float32(0.5) * x * (np.float32(1) + np.tanh(u))).astype(np.float64)
    x64 = x.astype(np.float64)
    assert (ulp_errors(tanh_form, _gelu(x64), "f32") > bound("ref", "gelu", "f32", x64)).all()
    assert tanh_form[1] == 0 and _gelu(x64)[1] < -1e-24
