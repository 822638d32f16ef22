"""`gelu` as the AICore emitter writes it, compiled with g++ against the CPU implementation of
the Ascend C API (ascendc_cpu/) and run on the host: every result within the bound in ulps of
tests/backends/test_gelu.py (the same kernel, arguments and float64 reference), mostly negative
arguments, where the tanh form 0.5 x (1 + tanh(u)) cancels. f64 is not a vector type of the
AICore. The device's own Exp is not modelled by the shim (libm there): what this holds the
emitter to is the composition, the same as ref's.
"""

from __future__ import annotations

import pytest

from ptowsp.backends.ascend import aicore
from tests.backends import test_gelu as G

from .ascendc_cpu import harness as H

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

DTYPES = ("f32", "f16", "bf16")


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    units = []
    for dt in DTYPES:
        m = G.program(dt).ir
        units.append(H.Unit(H.unit_name(f"gelu_{dt}"), aicore.emit_aicore(m), list(m.kernels)))
    return H.build(units, tmp_path_factory.mktemp("aicore_gelu"))


@pytest.mark.parametrize("dt", DTYPES)
def test_gelu_within_bound_in_ulps(lib, dt):
    unit = lib.units[H.unit_name(f"gelu_{dt}")]
    (k,) = unit.kernels
    x = G.stored(G.arguments(), dt)
    xbuf = H._aligned(x.size + 8, x.dtype)
    xbuf[:x.size] = x.reshape(-1)
    ybuf = H._aligned(x.size + 8, x.dtype)
    task = H.Task([xbuf, ybuf], [(0, G.COLS), (0, G.COLS)], {}, {"x": x})
    (y,) = H.run_task(lib, unit.name, k, task).values()
    G.assert_within(G.as_f64(y, dt), G.as_f64(x, dt), dt, f"gelu on the CPU Ascend C ({dt})")
