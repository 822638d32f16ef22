"""Every transcendental primitive as the AICore emitter writes it, compiled with g++ against the
CPU implementation of the Ascend C API (ascendc_cpu/) and run on the host: each result within a
bound in ulps of the float64 value, element by element, over the arguments of
tests/backends/test_transcendentals.py (the same kernels, lowered from the same program).

tests/ascend/test_aicore.py compares these functions with `ref` to a tolerance relative to a
tile's largest value, which cannot see a small result far off; the shim's own API functions
are bounded in tests/ascend/test_aicore_shim.py. f64 is not a vector type of the AICore.

The bounds (ULPS, f32 results) are the CPU Ascend C's, measured and rounded up: Exp, Ln, Tanh,
Sin, Cos and Power are libm-backed, the emitter builds rsqrt, sigmoid, silu and gelu from them
with a few more roundings. f16 and bf16 kernels compute in f32 and round once on the store,
within one ulp of their type (the device's own f16 math is not modelled by the shim). gelu is
x sigmoid(2u), as on every target, with the bound of tests/backends/test_transcendentals.py
(6|u| more ulps for x < 0, where the rounding of u is multiplied by 2|u|).
"""

from __future__ import annotations

import numpy as np
import pytest

from ptowsp.backends.ascend import aicore
from tests.accuracy import assert_ulps
from tests.backends import test_transcendentals as T

from .ascendc_cpu import harness as H

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

DTYPES = ("f32", "f16", "bf16")
ULPS = {"exp": 1, "log": 1, "sqrt": 0.5, "rsqrt": 1.5, "tanh": 2, "sigmoid": 2.5, "sin": 1,
        "cos": 1, "gelu": 4, "silu": 3, "pow": 1}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    units = []
    for dt in DTYPES:
        m = T.program(dt).ir
        name = H.unit_name(f"transcendentals_{dt}")
        units.append(H.Unit(name, aicore.emit_aicore(m), list(m.kernels)))
    return H.build(units, tmp_path_factory.mktemp("aicore_transcendentals"))


def run(lib, dt: str, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(the arguments as dt holds them, in float64; the kernel's results, in float64)."""
    unit = lib.units[H.unit_name(f"transcendentals_{dt}")]
    k = next(k for k in unit.kernels if k.name == f"k_{name}")
    x = T.stored(T.arguments(), dt)
    xbuf = H._aligned(x.size + 8, x.dtype)
    xbuf[:x.size] = x.reshape(-1)
    ybuf = H._aligned(x.size + 8, x.dtype)
    task = H.Task([xbuf, ybuf], [(0, T.COLS), (0, T.COLS)], {}, {"x": x})
    (y,) = H.run_task(lib, unit.name, k, task).values()
    return T.as_f64(x, dt), T.as_f64(y, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", list(T.FUNCTIONS))
def test_within_bound_in_ulps(lib, dt, name):
    x, got = run(lib, dt, name)
    with np.errstate(all="ignore"):
        want = T.FUNCTIONS[name][1](x)
    over = T.overflows(want, dt)
    assert np.all(np.isinf(got[over]) & (np.sign(got[over]) == np.sign(want[over]))), name
    base = "pow" if name.startswith("pow") else name
    n = ULPS[base] if dt == "f32" else 1
    if base == "gelu":
        with np.errstate(all="ignore"):
            u = np.abs(0.7978845608028654 * (x + 0.044715 * x**3))
        n = n + np.where(x < 0, 6 * np.nan_to_num(u, posinf=1e300), 0)
    ulps = np.broadcast_to(n, x.shape)[~over]
    atol = T.SUBNORMAL[dt] if base in ("gelu", "silu") else 0.0
    assert_ulps(got[~over], want[~over], dt, ulps, what=f"{name} on the CPU Ascend C ({dt})",
                inputs=x[~over], atol=atol)

