"""Edges named one by one in the embedding, with the prototype's spelling: a kernel call
returns its task handle, `after=[t]` / `after=[t[i - 1]]` / `after=t` on a call (and on the
prototype's `task(kernel, coords, args, after=[...])`) names the tasks it waits for, under
`Deps.explicit()` or any mode. Each program survives the `to_wsp` round trip, runs on cpu_sim and
ref equal to NumPy, and the edge orders tasks that share no data (asserted from the trace);
misuse is a `CompileError` at the user's line (docs/python.md, docs/schedules.md "Named edges")."""

from __future__ import annotations

import numpy as np
import pytest

from pto_wsp import (
    CompileError,
    Dense,
    Deps,
    DispatchPolicy,
    DType,
    In,
    Out,
    P,
    PtoError,
    Tensor,
    Tile,
    TracePolicy,
    kernel,
    pto,
    workload,
)
from pto_wsp.primitives import parallel_for, task

from .helpers import assert_roundtrip, markers

pytestmark = pytest.mark.cc

F32 = DType.F32
line, at = markers(__file__)


@kernel
def scale(x: In[Tile[1, 64, F32]], y: Out[Tile[1, 64, F32]]):
    pto.store(y, pto.mul(x, 2.0))


@kernel
def shift(x: In[Tile[1, 64, F32]], z: Out[Tile[1, 64, F32]]):
    pto.store(z, pto.add(x, 1.0))


def data():
    x = np.random.default_rng(7).standard_normal((8, 64)).astype(np.float32)
    y, z, w = np.zeros_like(x), np.zeros_like(x), np.zeros((1, 64), np.float32)
    return x, y, z, w, [Tensor(data=a, shape=a.shape, dtype=F32) for a in (x, y, z, w)]


def check(wl, x, y, z, w):
    assert_roundtrip(wl)
    for target in ("ref", "cpu_sim"):
        y[:], z[:], w[:] = 0, 0, 0
        prog = wl.compile(target=target)
        prog.execute()
        prog.synchronize()
        np.testing.assert_allclose(y, x * 2, rtol=1e-6)
        np.testing.assert_allclose(z, x + 1, rtol=1e-6)
        np.testing.assert_allclose(w, x[:1] + 1, rtol=1e-6)
    return prog


def model_times(prog):
    """{(kernel, i, statement): (model start, model finish)}"""
    ev, sim, names = prog.trace.events, prog.trace.sim, prog.trace.kernel_names
    return {(names[ev["kernel"][k]], int(ev["coords"][k][0]), int(ev["stmt"][k])):
            (int(sim["start"][k]), int(sim["finish"][k])) for k in range(len(ev))}


@pytest.mark.parametrize("deps", [Deps.explicit(), Deps.infer_tensor_map_exact()])
def test_after_a_task_handle(deps):
    x, y, z, w, (X, Y, Z, W) = data()
    rows = Dense[8]()

    @workload
    def edges():
        for i in P(rows):
            t = scale[i](x=X[i], y=Y[i])
            shift[i](x=X[i], z=Z[i], after=[t])  # the same iteration's
        shift[0](x=X[0], z=W[0], after=t)  # after the loop: every iteration's

    wl = edges().dispatch(DispatchPolicy.round_robin(4)).task_graph(
        deps=deps, trace=TracePolicy.cycles())
    text = assert_roundtrip(wl)
    assert "let t = scale[i](x = X[i], y = Y[i])" in text
    assert "shift[i](x = X[i], z = Z[i]) after t" in text
    prog = check(wl, x, y, z, w)
    got = model_times(prog)
    sa = next(k[2] for k in got if k[0] == "scale")
    sb = next(k[2] for k in got if k[0] == "shift")
    last = max(k[2] for k in got)
    for i in range(8):
        assert got[("shift", i, sb)][0] >= got[("scale", i, sa)][1]
        assert got[("shift", 0, last)][0] >= got[("scale", i, sa)][1]


def test_after_the_previous_iteration_and_the_prototype_task():
    x, y, z, w, (X, Y, Z, W) = data()
    rows = Dense[8]()

    @workload
    def edges():
        def body(i):
            t = task(scale, [i], {"x": X[i], "y": Y[i]})
            task(shift, [i], {"x": X[i], "z": Z[i]}, after=[t, t[i - 1]])
        parallel_for(rows, body)
        shift[0](x=X[0], z=W[0])

    wl = edges().task_graph(deps=Deps.explicit())
    text = assert_roundtrip(wl)
    assert "after [t, t[i - 1]]" in text
    check(wl, x, y, z, w)


def test_explicit_reports_what_no_edge_declares():
    x, y, z, w, (X, Y, Z, W) = data()
    rows = Dense[8]()

    @workload
    def edges():
        for i in P(rows):
            t = scale[i](x=X[i], y=Y[i])
            shift[i](x=Y[i], z=Z[i], after=t)  # reads what t wrote: declared
        shift[0](x=Y[3], z=W[0])  # E:undeclared

    prog = edges().task_graph(deps=Deps.explicit()).compile(target="cpu_sim")
    prog.execute()
    with pytest.raises(PtoError) as info:
        prog.synchronize()
    text = at(info.value, "undeclared")
    assert "depends on `scale[i]` at [3] through `Y`" in text


def test_misuse_is_an_error_at_the_line():
    x, y, z, w, (X, Y, Z, W) = data()
    rows = Dense[8]()

    @workload
    def not_a_handle():
        for i in P(rows):
            scale[i](x=X[i], y=Y[i], after=[X])  # E:not_handle

    with pytest.raises(CompileError) as info:
        not_a_handle()
    assert "`after=` takes task handles, not" in at(info.value, "not_handle")

    @workload
    def later():
        for i in P(rows):
            t = scale[i](x=X[i], y=Y[i])
            shift[i](x=X[i], z=Z[i], after=t[i + 1])  # E:later

    with pytest.raises(CompileError) as info:
        later().compile(target="ref")
    assert "coordinate 1 of `t` is for the loop `i` around both calls" in at(info.value, "later")
