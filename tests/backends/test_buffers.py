"""Zero-fill elision and buffer reuse in cpu_sim runs: never visible in the results."""

from __future__ import annotations

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.cpu.buffers import BufferPool, covered

TILED = """
sym R, C
input  X: f32[R, C]
output Y: f32[R, C]
output Part: f32[R, C]
output Acc: f32[R, C]
kernel cp(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
kernel acc(y: InOut[Tile[4, 8, f32]]) { store(y, y + 1) }
workload w() {
    for i, j in P(R / 4, C / 8) {
        cp[i, j](x = X[i*4 : i*4 + 4, j*8 : j*8 + 8], y = Y[i*4 : i*4 + 4, j*8 : j*8 + 8])
        acc[i, j](y = Acc[i*4 : i*4 + 4, j*8 : j*8 + 8])
    }
    for i in P(R / 8) {
        cp[i](x = X[i*8 : i*8 + 4, 0:8], y = Part[i*8 : i*8 + 4, 0:8])
    }
}
"""


def test_coverage_is_proved_only_for_tensors_written_everywhere():
    m = ptowsp.parse(TILED, "tiled.wsp").ir
    s = m.schedules[0]
    syms = {"R": 16, "C": 24}
    assert covered(s, m.tensor("Y"), syms)
    assert not covered(s, m.tensor("Part"), syms)  # every other block of rows, one column block
    assert not covered(s, m.tensor("Acc"), syms)  # InOut: reads the zero-filled value
    assert not covered(s, m.tensor("Y"), {"R": 18, "C": 24})  # R / 4 tiles leave two rows


CSP_WRITERS = """
sym N
input  X: f32[N, 4, 8]
output Y: f32[N, 4, 8]
output Z: f32[N, 4, 8]
channel c: Tile[4, 8, f32], depth = 1
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
kernel inc(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x + 1.0) }
workload w() {
    for i in P(N) { copy[i](x = X[i], y = Y[i]) }
    for i in P(N) { copy[i](x = X[i], y = Z[i]) }
    pipe {
        process a { for i in P.seq(N) { send(c, copy[i](x = X[i], y = c)) } }
        process b { consume(c) as t { inc[t](x = t, y = Y[t.index]) } }
    }
}
schedule main = w()
"""


def test_tasks_inside_csp_statements_are_writers_too():
    m = ptowsp.parse(CSP_WRITERS, "csp.wsp").ir
    s = m.schedules[0]
    assert covered(s, m.tensor("Z"), {"N": 3})
    assert not covered(s, m.tensor("Y"), {"N": 3})  # a consume's task writes it as well

READ_FIRST = """
sym N
input  X: f32[N, 4, 8]
output Y: f32[N, 4, 8]
output Z: f32[N, 4, 8]
output W: f32[N, 4, 8]
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
workload w() {
    for i in P(N) { copy[i](x = Y[i], y = Z[i]) }
    for i in P(N) { copy[i](x = X[i], y = Y[i]) }
    for i in P(N) {
        copy[i](x = X[i], y = W[i])
        copy[i](x = W[(i + 1) % N], y = Z[i])
    }
}
schedule main = w()
"""


def test_a_tensor_read_before_its_covering_task_is_not_covered():
    m = ptowsp.parse(READ_FIRST, "read_first.wsp").ir
    s = m.schedules[0]
    assert not covered(s, m.tensor("Y"), {"N": 3})  # the first loop reads it before it is written
    assert not covered(s, m.tensor("W"), {"N": 3})  # iteration i reads what i + 1 writes


@pytest.mark.cc
def test_a_read_before_the_write_sees_zeros_on_cpu_sim_as_on_ref(tmp_path, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path))
    module = ptowsp.parse(READ_FIRST.replace("        copy[i](x = W[(i + 1) % N], y = Z[i])\n",
                                             ""), "read_first.wsp")
    prog = module.compile(target="cpu_sim")
    for seed in range(3):  # later runs reuse the buffers of earlier ones, which hold values
        x = np.random.default_rng(seed).standard_normal((3, 4, 8)).astype(np.float32) + 5
        out = prog.run(bind={"N": 3}, X=x)
        np.testing.assert_array_equal(out["Z"], np.zeros_like(x))
        np.testing.assert_array_equal(out["Y"], x)
        del out


@pytest.mark.cc
def test_results_are_zero_where_nothing_is_written_even_with_reused_buffers(tmp_path, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path))
    prog = ptowsp.parse(TILED, "tiled.wsp").compile(target="cpu_sim")
    for seed in range(4):  # later runs reuse the buffers of earlier ones
        x = np.random.default_rng(seed).standard_normal((16, 24)).astype(np.float32) + 5
        out = prog.run(X=x)
        np.testing.assert_array_equal(out["Y"], x)
        np.testing.assert_array_equal(out["Acc"], np.ones((16, 24)))
        part = np.zeros((16, 24), np.float32)
        for i in range(2):
            part[i * 8:i * 8 + 4, :8] = x[i * 8:i * 8 + 4, :8]
        np.testing.assert_array_equal(out["Part"], part)
        del out


def test_pool_never_hands_out_an_array_someone_still_holds():
    pool = BufferPool()
    a = pool.take((4,), np.float32, zero=True)
    pool.keep([a])
    b = pool.take((4,), np.float32, zero=True)
    assert b is not a  # `a` is still referenced here
    view = a[:2]
    del a
    pool.keep([b])
    c = pool.take((4,), np.float32, zero=True)
    assert c is not view.base
    del view, b
    d = pool.take((4,), np.float32, zero=False)
    assert d.shape == (4,)


def test_pool_reuses_an_array_its_caller_dropped():
    pool = BufferPool()
    first = pool.take((8,), np.float32, zero=False)
    first_id = id(first)
    pool.keep([first])
    del first
    again = pool.take((8,), np.float32, zero=True)
    assert id(again) == first_id and not again.any()
    assert pool.take((8,), np.float64, zero=True).dtype == np.float64  # another dtype: a new array
