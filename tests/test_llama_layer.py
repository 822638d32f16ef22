"""examples/llama_layer.wsp, a whole Llama decoder layer over a batch mixing prefill and decode
on a ragged KV cache, against the same layer in float64 NumPy (examples/llama_layer.py, written
from the layer's formulas, not from wspc): the output, the new cache rows, and every other
cache row untouched (the cache arrives full of garbage past each context). cpu_sim == ref ==
NumPy over hand-picked batches (the edges: an empty sequence, one token, a context of 0, a
sequence ending exactly on a tile, the cache's last row) and hypothesis batches, under every
schedule of the example.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import llama_layer as L  # noqa: E402

pytestmark = pytest.mark.cc

TOL = dict(rtol=2e-5, atol=2e-5)  # float32 against float64 through ~10 matrix products


@pytest.fixture(scope="module")
def programs(wspc_cache):
    module = ptowsp.load(str(L.SOURCE))
    return {(target, s): module.compile(target=target, schedule=s)
            for target in ("cpu_sim", "ref") for s in ("main", "decode")}


def check(programs, new, ctx, maxctx=None, seed=0, targets=("cpu_sim", "ref"),
          schedules=("main",)):
    a = L.batch(new, ctx, maxctx, seed=seed)
    want = L.numpy_layer(a)
    for target in targets:
        for s in schedules:
            out = programs[(target, s)].run(bind=L.binds(a), workers=2, **a)
            for name in ("Y", "Kc", "Vc"):
                np.testing.assert_allclose(out[name], want[name], **TOL,
                                           err_msg=f"{name} on {target}, schedule {s}")
            # the rows past each sequence's new end are the caller's, bit for bit
            for b, (c, n) in enumerate(zip(ctx, new)):
                for name in ("Kc", "Vc"):
                    np.testing.assert_array_equal(out[name][b, :, c + n:], a[name][b, :, c + n:])
                    np.testing.assert_array_equal(out[name][b, :, :c], a[name][b, :, :c])


@pytest.mark.parametrize("new, ctx, maxctx", [
    ([37, 1, 0, 120, 1, 16], [0, 300, 5, 64, 999, 17], None),  # mixed, one empty sequence
    ([1] * 5, [0, 1, 63, 64, 255], 257),                          # decode around block edges
    ([16, 32, 17], [0, 32, 15], 64),                              # tiles ending on the edge
    ([5], [59], 64),                                              # up to the cache's last row
])
def test_the_layer_matches_numpy(programs, new, ctx, maxctx):
    check(programs, new, ctx, maxctx, schedules=("main", "decode"))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_batches_match_numpy(programs, data):
    nb = data.draw(st.integers(1, 5))
    new = data.draw(st.lists(st.sampled_from([0, 1, 1, 2, 15, 16, 17, 40]), min_size=nb, max_size=nb))
    ctx = data.draw(st.lists(st.integers(0, 300), min_size=nb, max_size=nb))
    if sum(new) == 0:
        new[0] = 1
    spare = data.draw(st.integers(0, 20))
    check(programs, new, ctx, max(c + n for c, n in zip(ctx, new)) + spare,
          seed=data.draw(st.integers(0, 2**16)))


def test_a_cache_too_short_for_the_new_tokens_is_an_error_naming_the_view(programs):
    a = L.batch([20], [50], 64)  # 50 + 20 rows do not fit 64
    with pytest.raises(ptowsp.WspError) as info:
        programs[("cpu_sim", "main")].run(bind=L.binds(a), **a)
    msg = str(info.value)
    assert "llama_layer.wsp" in msg and "Kc[b, hd, ctx[b] + i0 : ctx[b] + i1, :]" in msg


def test_the_benchmarks_numpy_layer_updates_the_cache_in_place_as_wspc_does(programs):
    """benchmarks/layer.py times the float32 NumPy layer and wspc, both updating the caches
    where they are: check both paths it times compute the checked layer."""
    a = L.batch([3, 1, 17], [5, 40, 0], 64, seed=3)
    want = L.numpy_layer(a)
    np32 = {k: v.copy() for k, v in a.items()}
    got = L.numpy_layer(np32, np.float32, inplace=True)
    assert got["Kc"] is np32["Kc"] and got["Vc"] is np32["Vc"]
    w = {k: v.copy() for k, v in a.items()}
    out = programs[("cpu_sim", "main")].run(bind=L.binds(w), workers=2, inplace=True, **w)
    assert out["Kc"] is w["Kc"] and out["Vc"] is w["Vc"]
    for name in ("Y", "Kc", "Vc"):
        np.testing.assert_allclose(got[name], want[name], **TOL)
        np.testing.assert_allclose(out[name], want[name], **TOL)
