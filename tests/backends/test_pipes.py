"""The pipeline cycle model (ptowsp/backends/pipes.py, used by backends/cpu/cost.py): the list
schedule, and invariants of a kernel's pipeline that hold whatever the machine's figures: a
kernel is never faster than any one pipe's work, double buffering never slows it, a deeper K
costs more, and a vector kernel's stages are the chunks the Ascend emitter emits. (The closed
form of a GEMM block's time is in test_cost.py.) No C compiler needed."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.backends import pipes as P
from ptowsp.backends.cpu import cost
from ptowsp.backends.cube import cube_tiling
from ptowsp.backends.machine import load_machine
from ptowsp.ir import nodes as N

ROOT = Path(__file__).resolve().parents[2]
MACHINE = load_machine(None)
CUBE = P.Rates.of(MACHINE, MACHINE.cube_cores)


def matmul_kernel(m, k, n, dtype="f16"):
    ops = (N.Op("param", (), (m, k), dtype, "a"), N.Op("param", (), (k, n), dtype, "b"),
           N.Op("matmul", (0, 1), (m, n), "f32"))
    params = (N.KParam("a", "tile", dtype, "In", m, k), N.KParam("b", "tile", dtype, "In", k, n),
              N.KParam("c", "tile", "f32", "Out", m, n))
    return N.Kernel("mm", "mm", params, ops, (("c", 2),))


def test_list_schedule_runs_each_pipe_in_order_after_its_dependencies():
    stages = (P.Stage("MTE2", 10), P.Stage("V", 5, (0,)), P.Stage("MTE2", 10),
              P.Stage("V", 5, (2,)), P.Stage("MTE3", 3, (3,)))
    pipe = P.Pipeline(stages)
    # the second load starts when the MTE2 pipe is free, not when the first V ends
    assert pipe.schedule() == [(0, 10), (10, 15), (10, 20), (20, 25), (25, 28)]
    assert pipe.cycles == 28 and pipe.busy() == {"MTE2": 20, "V": 10, "MTE3": 3}
    with pytest.raises(ValueError):
        P.Pipeline((P.Stage("V", 1, (0,)),)).schedule()


SHAPES = st.tuples(st.integers(1, 700), st.integers(1, 3000), st.integers(1, 700),
                   st.sampled_from(["f16", "bf16", "f32"]))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(SHAPES)
def test_a_matmul_is_never_faster_than_its_bytes_or_its_macs(shape):
    m, k, n, dtype = shape
    pipe = cost.kernel_pipeline(matmul_kernel(m, k, n, dtype), MACHINE)
    busy = pipe.busy()
    assert pipe.cycles >= max(busy.values())
    esize = 4 if dtype == "f32" else 2
    rate = MACHINE.cube_f32_macs_per_cycle if dtype == "f32" else MACHINE.cube_macs_per_cycle
    # the cube's work: at least the MACs at its rate (more: whole fractals)
    assert busy["M"] >= math.ceil(m * n * k / rate)
    # the operands cross MTE2 at least once each, the product leaves through FIX
    assert busy["MTE2"] >= math.floor((m * k + k * n) * esize / CUBE.l2)
    assert busy["FIX"] >= math.floor(m * n * 4 / min(CUBE.fix, CUBE.hbm))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(SHAPES)
def test_double_buffering_never_makes_a_matmul_slower(shape):
    m, k, n, dtype = shape
    t = cube_tiling(m, n, k, 4 if dtype == "f32" else 2)
    io = P.MatmulIO()
    double = P.Pipeline(tuple(P.cube_stages(t, io, CUBE))).cycles
    single = P.Pipeline(tuple(P.cube_stages(
        dataclasses.replace(t, l1_buffers=1, l0_buffers=1), io, CUBE))).cycles
    assert double <= single


def test_double_buffering_overlaps_a_long_k():
    t = cube_tiling(128, 256, 4096, 2)
    assert t.l1_buffers == 2 and t.l0_buffers == 2
    io = P.MatmulIO()
    double = P.Pipeline(tuple(P.cube_stages(t, io, CUBE))).cycles
    single = P.Pipeline(tuple(P.cube_stages(
        dataclasses.replace(t, l1_buffers=1, l0_buffers=1), io, CUBE))).cycles
    assert double < single


def test_vector_chunks_double_buffered_never_slower():
    for chunks in (1, 2, 5, 64):
        args = ([65536], [65536], 3000, chunks, P.Rates.of(MACHINE, MACHINE.vector_cores))
        one = P.Pipeline(tuple(P.vector_stages(*args, buffers=1))).cycles
        two = P.Pipeline(tuple(P.vector_stages(*args, buffers=2))).cycles
        assert two <= one


def test_a_deeper_k_costs_more():
    last = 0
    for k in (16, 64, 256, 320, 640, 1000, 2048, 6144):
        cycles = cost.kernel_cost(matmul_kernel(128, k, 256), MACHINE)[1]
        assert cycles > last, k
        last = cycles


BIG = """module big
input X: f32[256, 1024]
output Y: f32[256, 1024]
kernel scale(x: In[Tile[256, 1024, f32]], y: Out[Tile[256, 1024, f32]]) {
    store(y, exp(x) * 2.0)
}
workload w() { scale[0](x = X, y = Y) }
schedule main = w()
"""


def emitted_chunks(kernel, module: str) -> int:
    """The chunk count the Ascend emitter writes into the kernel's loop comment."""
    from ptowsp.backends.ascend.aicore.kernel import emit_tile_kernel

    text = emit_tile_kernel(kernel, module)
    (n,) = re.findall(r"// (\d+) chunks? of \d+ rows", text)
    return int(n)


def test_a_vector_kernel_runs_the_emitters_chunks():
    (k,) = ptowsp.parse(BIG, "big.wsp").ir.kernels
    chunks = emitted_chunks(k, "big")
    assert chunks > 1  # 1 MiB of f32 does not fit the UB at once
    pipe = cost.kernel_pipeline(k, MACHINE, chunks=chunks)
    assert [s.pipe for s in pipe.stages] == ["MTE2", "V", "MTE3"] * chunks
    rows = 256 // chunks
    rates = P.Rates.of(MACHINE, MACHINE.vector_cores)
    assert pipe.stages[0].cycles == P.transfer(rows * 1024 * 4, rates.hbm)
    # the steady state (the roofline cpu_sim uses without the chunks) bounds it from below,
    # the chunks run one after another from above
    steady = cost.kernel_cost(k, MACHINE)[1]
    assert steady <= pipe.cycles <= sum(pipe.busy().values())
    assert cost.kernel_cost(k, MACHINE, chunks=chunks) == (0, pipe.cycles)
    # one chunk: nothing overlaps
    whole = cost.kernel_pipeline(k, MACHINE, chunks=1)
    assert whole.cycles == sum(whole.busy().values())


def test_the_kernel_table_reports_each_pipes_busy_cycles():
    """`--json`'s kernels[].pipes: per kernel, the cycles its tasks keep each pipe busy in the
    model: a matmul's M pipe is its Mmads, its tasks times the cube cycles of one."""
    text = (ROOT / "examples" / "gemm.wsp").read_text()
    prog = ptowsp.parse(text, "gemm.wsp").compile(target="cpu_sim")
    prog.simulate(trace=True)
    (row,) = prog.trace.kernel_table()
    (k,) = prog.module.kernels
    assert row["pipes"]["M"] == row["tasks"] * cost.cube_cycles(k, MACHINE)
    assert set(row["pipes"]) == {"MTE2", "MTE1", "M", "FIX"}
    assert row["pipes"] == {p: row["tasks"] * c
                            for p, c in cost.kernel_pipeline(k, MACHINE).busy().items()}


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(1, 64), st.integers(0, 200_000), st.integers(0, 200_000),
       st.integers(0, 20_000))
def test_a_vector_pipeline_is_never_faster_than_its_dma_or_its_vector_work(chunks, nin, nout,
                                                                          v):
    rates = P.Rates.of(MACHINE, MACHINE.vector_cores)
    pipe = P.Pipeline(tuple(P.vector_stages([nin], [nout], v, chunks, rates)))
    # loads and stores share the core's HBM share (the GM port): their bytes at its rate
    assert pipe.cycles >= math.floor((nin + nout) / rates.hbm)
    assert pipe.cycles >= v and pipe.busy().get("V", 0) >= v


def _fidelity():
    import importlib.util

    spec = importlib.util.spec_from_file_location("fidelity", ROOT / "benchmarks" / "fidelity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.cc
def test_the_smallest_published_gemm_stays_within_the_target():
    """benchmarks/fidelity.py at 1536^3 (the fastest of its sizes to replay): the modelled time
    of the whole program within 15% of PTO-ISA's published A3 figure (docs/ascend.md, "How a
    kernel's time is built"). A model figure, not a clock: deterministic."""
    fid = _fidelity()
    r = fid.model(1536, tree=False)
    published, _ = fid.PUBLISHED[1536]
    assert abs(r["ms"] / published - 1) <= fid.TARGET
    assert r["tasks"] == (1536 // 128) * (1536 // 256)


def test_attention_runs_its_softmax_between_its_matmuls():
    """softmax(q kᵀ) v in one kernel: the second matmul reads the softmax, which reads the first
    matmul's product, so the stages run product, softmax, product, in that order."""
    src = """module att
input Q: f16[64, 64]
input K: f16[128, 64]
input V: f16[128, 64]
output O: f32[64, 64]
kernel attend(q: In[Tile[64, 64, f16]], k: In[Tile[128, 64, f16]], v: In[Tile[128, 64, f16]],
              o: Out[Tile[64, 64, f32]]) {
    store(o, matmul(softmax(matmul(q, transpose(k))), v))
}
workload w() { attend[0](q = Q, k = K, v = V, o = O) }
schedule main = w()
"""
    (k,) = ptowsp.parse(src, "att.wsp").ir.kernels
    pipe = cost.kernel_pipeline(k, MACHINE)
    kinds = [s.pipe for s in pipe.stages]
    fixes = [i for i, p in enumerate(kinds) if p == "FIX"]
    (vec,) = [i for i, p in enumerate(kinds) if p == "V"]
    assert len(fixes) == 2 and fixes[0] < vec < fixes[1]
    when = pipe.schedule()
    assert when[vec][0] >= when[fixes[0]][1]  # the softmax waits for the first product
    second = [i for i in range(vec + 1, len(kinds)) if kinds[i] == "M"]
    assert second and when[second[0]][0] >= when[vec][1]  # the second matmul for the softmax
    # the first product goes to UB (the softmax reads it), the second to GM
    assert pipe.stages[fixes[0]].port == "" and pipe.stages[fixes[1]].port == "GM"
