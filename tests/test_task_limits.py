"""What one task passes its kernel (limits.py: MAX_TILES, MAX_SCALARS, MAX_COORDS, the runtime's
`wsp_task`): exactly the limit runs, one more is an error at the call on every target (before:
a segmentation fault for tiles, exit 70 for scalars and coordinates)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.limits import MAX_COORDS, MAX_SCALARS, MAX_TILES

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("ref", pytest.param("cpu_sim", marks=pytest.mark.cc), "ascend_npu")


def tiles_program(n: int) -> str:
    params = ", ".join(f"x{i}: In[Tile[1, 8, f32]]" for i in range(n - 1))
    args = ", ".join(f"x{i} = X[{i}]" for i in range(n - 1))
    total = " + ".join(f"x{i}" for i in range(n - 1))
    return (f"input X: f32[{n}, 8]\noutput Y: f32[1, 8]\n"
            f"kernel k({params}, y: Out[Tile[1, 8, f32]]) {{ store(y, {total}) }}\n"
            f"workload w() {{ k({args}, y = Y) }}\n")


def scalars_program(n: int) -> str:
    params = ", ".join(f"s{i}: Scalar[f32]" for i in range(n))
    args = ", ".join(f"s{i} = {i}.0" for i in range(n))
    total = " + ".join(f"s{i}" for i in range(n))
    return (f"output Y: f32[1, 8]\n"
            f"kernel k(y: Out[Tile[1, 8, f32]], {params}) {{ store(y, full(1, 8, {total}, f32)) }}\n"
            f"workload w() {{ k(y = Y, {args}) }}\n")


def coords_program(n: int) -> str:
    loops = "".join(f"for i{k} in P(2) {{ " for k in range(n))
    coords = ", ".join(f"i{k}" for k in range(n))
    return (f"output Y: f32[1, 8]\n"
            f"kernel k(y: InOut[Tile[1, 8, f32]]) {{ store(y, y + 1.0) }}\n"
            f"workload w() {{ {loops}k[{coords}](y = Y) {'}' * n} }}\n")


@pytest.mark.parametrize("target", TARGETS)
def test_one_past_each_limit_is_an_error_at_the_call(target):
    cases = ((tiles_program(MAX_TILES + 1), f"passes {MAX_TILES + 1} tiles", MAX_TILES),
             (scalars_program(MAX_SCALARS + 1), f"passes {MAX_SCALARS + 1} scalar arguments",
              MAX_SCALARS),
             (coords_program(MAX_COORDS + 1), f"passes {MAX_COORDS + 1} coordinates", MAX_COORDS))
    for text, words, most in cases:
        with pytest.raises(ptowsp.WspError) as info:
            ptowsp.parse(text, "t.wsp").compile(target=target)
        (d,) = info.value.diagnostics
        assert d.message.startswith("the call `k") and words in d.message, d.message
        assert f"more than a task can take ({most})" in d.message
        assert d.span.line in (3, 4)


@pytest.mark.parametrize("target", ("ref", pytest.param("cpu_sim", marks=pytest.mark.cc)))
def test_exactly_the_limit_runs(target, wspc_cache):
    x = np.arange(MAX_TILES * 8, dtype=np.float32).reshape(MAX_TILES, 8)
    y = ptowsp.parse(tiles_program(MAX_TILES), "t.wsp").compile(target=target).run(X=x)["Y"]
    np.testing.assert_array_equal(y, x[:MAX_TILES - 1].sum(axis=0, keepdims=True))
    y = ptowsp.parse(scalars_program(MAX_SCALARS), "t.wsp").compile(target=target).run()["Y"]
    np.testing.assert_array_equal(y, np.full((1, 8), sum(range(MAX_SCALARS)), np.float32))
    y = ptowsp.parse(coords_program(MAX_COORDS), "t.wsp").compile(target=target).run()["Y"]
    np.testing.assert_array_equal(y, np.full((1, 8), 2.0 ** MAX_COORDS, np.float32))


def test_the_runtime_header_has_the_same_limits():
    header = (ROOT / "runtime_c" / "wsp_runtime.h").read_text()
    defined = dict(re.findall(r"#define WSP_MAX_(TILES|SCALARS|COORDS) (\d+)", header))
    assert {k: int(v) for k, v in defined.items()} == {
        "TILES": MAX_TILES, "SCALARS": MAX_SCALARS, "COORDS": MAX_COORDS}


@pytest.mark.parametrize("target", TARGETS)
def test_a_tile_past_the_element_limit_is_an_error_at_the_argument(target):
    """A partial view may be shorter than its tile, so a tile of 2^63 columns once reached ref
    (a NumPy ValueError: exit 70, found by `make fuzz`); a tile holds at most 2^24 elements."""
    text = ("output Y: f32[1, 8]\n"
            "kernel k(y: Out[Tile[1, 9223372036854775808, f32]]) { store(y, 1.0) }\n"
            "workload w() { k(y = Y) }\n")
    with pytest.raises(ptowsp.WspError) as info:
        ptowsp.parse(text, "t.wsp").compile(target=target)
    (d,) = info.value.diagnostics
    assert (d.span.line, d.span.col) == (3, 18)
    assert d.message == ("`y` is a Tile[1, 9223372036854775808, f32] of 9,223,372,036,854,775,808 "
                         "elements, more than a tile can hold (16,777,216): use smaller tiles and "
                         "more tasks")
