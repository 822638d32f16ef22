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
from tests.emitted_programs import emitted_programs, program_paths

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
    """softmax(q kᵀ) v in one kernel, on the cube pipeline (what `cube_pipeline` makes of a
    kernel with both; this one, f32 probabilities into a matmul with f16 `v`, is not split and
    runs on a vector core, and an f32 one is split into stages: test_cost.py): the
    second matmul reads the softmax, which reads the first matmul's product, so the stages run
    product, softmax, product, in that order."""
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
    assert cost.kernel_unit(k) == cost.UNIT_VECTOR
    pipe = cost.cube_pipeline(k, MACHINE, {}, {})
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


# ---------------------------------------------------------------------------------------------
# The model follows the emitter: which kernels run on the cube, and what a vector matmul runs

def test_the_cube_rule_agrees_with_the_emitter_for_every_example():
    """Every kernel of every example and test program the ascend_npu target compiles: the
    cycle model puts it on the cube (unit 1) exactly when the emitted header runs it there or
    splits it into stages over the cube and the vector cores, and every other kernel on a
    vector core, where each of its matmuls (a kernel the split refuses) is the calls the
    emitted block runs (`_count_calls`, times the chunks of rows for a block in the chunk
    loop). (Every example's matmuls run on the cube now, so the vector matmul's counts are
    held to the emitted code by the tests below.)"""
    from ptowsp.backends.ascend import cube_views
    from ptowsp.backends.ascend.aicore import header_path

    seen = {"cube": 0, "split": 0, "vector matmul": 0, "vector": 0}
    checked = []
    for path, ir, runs, files in emitted_programs():
        checked.append(path.name)
        units = cost.kernel_costs(ir, MACHINE)
        vector_only = cube_views(runs)
        for k, (unit, _) in zip(ir.kernels, units):
            if k.comm is not None or k.is_extern:
                continue
            text = files[header_path(k)]
            # split between the cube and the vector cores: the emitter writes the stages'
            # headers beside the kernel's (aicore/mixed.py), and the model says the same
            split = header_path(k)[:-2] + "__s0.h" in files
            assert split == (cost._split(k, vector_only) is not None), (path.name, k.name)
            on_cube = "on the cube (AIC)" in text or split
            assert unit == (cost.UNIT_CUBE if on_cube else cost.UNIT_VECTOR), (path.name, k.name)
            mms = [i for i, op in enumerate(k.ops) if op.op == "matmul"]
            seen["split" if split else "cube" if on_cube else "vector matmul" if mms
                 else "vector"] += 1
            if on_cube or not mms:
                continue
            chunks = [int(n) for n in re.findall(r"// (\d+) chunks? of \d+ rows", text)] or [1]
            blocks = _matmul_blocks(text)
            assert len(blocks) == len(mms), (path.name, k.name)
            for i, block in zip(mms, blocks):
                model = cost.vector_matmul(k, i, MACHINE, chunks[0])
                times = 1 if model.form == "tt" else chunks[0]  # tt: resident, before the loop
                calls, copies = _count_calls(block)
                assert model.calls == {c: n * times for c, n in calls.items()}, (path.name, k.name)
                assert model.copies == copies * times, (path.name, k.name)
    assert seen["cube"] and seen["split"] and seen["vector"], seen
    assert len(checked) >= len(program_paths()) - 2, checked


_FOR = re.compile(r"for \(int32_t (\w+) = (.+?); \1 < (.+?); (?:\+\+\1|\1 \+= (.+?))\)\s*(\{?)(.*)$")
_CALLS = ("Duplicate", "Muls", "Add", "Mul", "ReduceSum", "PipeBarrier", "Cast")


def _matmul_blocks(text: str) -> list[list[str]]:
    """The lines of each `// %i = matmul(...)` block of an emitted vector kernel, in order."""
    lines = text.splitlines()
    out = []
    for n, line in enumerate(lines):
        if re.match(r"\s*// %\d+ = matmul\(", line):
            j = n + 1
            while lines[j].strip() != "{":
                j += 1
            depth, block = 0, []
            for x in lines[j:]:
                depth += x.count("{") - x.count("}")
                block.append(x)
                if depth == 0:
                    break
            out.append(block)
    return out


def _count_calls(block: list[str]) -> tuple[dict, int]:
    """({(call, elements it covers or 0): times run}, copies) of one block, its loops run: the
    C++ loop skeleton turned into Python (a `for` with its bounds, a `const int32_t` with a
    ternary, a call counted on its line). A `wsp_sync` outside the loops (a hand-off set by
    what came before) is left out, as the model leaves it out."""
    py, ind = ["def run(count):"], 1

    def calls(body: str, depth: int) -> None:
        found = [c for c in re.findall(r"AscendC::(\w+)[<(]", body) if c in _CALLS]
        found += ["GetValue"] * body.count(".GetValue(") + ["SetValue"] * body.count(".SetValue(")
        if "wsp_sync<" in body and depth > 1:
            found.append("wsp_sync")
        if "wsp_copy_in<" in body:
            found.append("copy")
        m = re.search(r", (\d+)\);$", body)
        for c in found:
            key = (c, int(m.group(1)) if c in _CALLS and c != "PipeBarrier" and m else 0)
            py.append("    " * depth + f"count[{key!r}] = count.get({key!r}, 0) + 1")

    for raw in block:
        line = raw.strip()
        m = _FOR.match(line)
        if m:
            var, lo, hi, step, brace, rest = m.groups()
            py.append("    " * ind + f"for {var} in range({lo}, {hi}, {step or 1}):")
            if brace:
                ind += 1
            else:
                calls(rest, ind + 1)
                py.append("    " * (ind + 1) + "pass")
            continue
        if line.startswith("}"):
            ind -= 1 if ind > 1 else 0
            continue
        m = re.match(r"const int32_t (\w+) = (.+) < (.+) \? (.+) : (.+);$", line)
        if m:
            name, a, b, c, d = m.groups()
            py.append("    " * ind + f"{name} = ({c}) if ({a}) < ({b}) else ({d})")
            continue
        calls(line, ind)
    count: dict = {}
    env: dict = {}
    exec("\n".join(py + ["    pass"]), env)
    env["run"](count)
    copies = count.pop(("copy", 0), 0)
    return count, copies


MIXED = {
    # RMSNorm -> a matmul with streamed weights (f32 and f16)
    "rmsnorm_proj": ("f32", "store(y, matmul(x * rsqrt(rowmean(x * x) + 1e-6), w))"),
    "rmsnorm_proj_f16": ("f16", "store(y, matmul(x * rsqrt(rowmean(x * x) + 1e-6), w))"),
    # a matmul -> SiLU, a resident right operand computed in the kernel
    "silu_resident": ("f32", "store(y, silu(matmul(x, exp(w))))"),
    # a dot-product form (a @ transpose(s)) and a transpose-transpose form, with vector work
    "dot": ("f32", "store(y, exp(matmul(x * 2.0, transpose(s))))"),
    "tt": ("f32", "store(y, exp(matmul(transpose(t * 2.0), transpose(s))))"),
    # an accumulator
    "acc": ("f32", "store(y, exp(matmul(x, w, acc = x)))"),
}
# each of these would be split over the cube and the vector cores (backends/mixed_split.py):
# the tests keep `k` on the vector path as a kernel some task passes a gather or column-strided
# view is kept (`vector_only`), the case where the vector matmul still runs
KEEP = frozenset({"k"})


def _mixed_source(body: str, wdtype: str) -> str:
    return f"""module mixed
input X: f32[32, 64]
input W: {wdtype}[64, 64]
input S: f32[64, 64]
input T: f32[64, 32]
output Y: f32[32, 64]
kernel k(x: In[Tile[32, 64, f32]], w: In[Tile[64, 64, {wdtype}]], s: In[Tile[64, 64, f32]],
         t: In[Tile[64, 32, f32]], y: Out[Tile[32, 64, f32]]) {{
    {body}
}}
workload wl() {{ k[0](x = X, w = W, s = S, t = T, y = Y) }}
schedule main = wl()
"""


@pytest.mark.parametrize("name", sorted(MIXED))
def test_a_mixed_kernel_is_costed_as_its_emitted_vector_matmul(name):
    """A kernel with a matmul and vector work runs on a vector core (the emitter writes the
    vector matmul of aicore/matmul.py), and the model counts that matmul's calls as the
    emitted kernel runs them: each AscendC call of the matmul's block, its loops run, with the
    elements each covers, and the streamed operand's block copies; its V cycles are those
    counts at the model's figures."""
    from ptowsp.backends.ascend.aicore import emit_aicore

    wdtype, body = MIXED[name]
    ir = ptowsp.parse(_mixed_source(body, wdtype), "mixed.wsp").ir
    (k,) = [x for x in ir.kernels if x.name == "k"]
    # split over the cube and the vector cores, but for operands of two dtypes (f32 x f16)
    assert (cost.kernel_unit(k) == cost.UNIT_CUBE) == (wdtype == "f32")
    assert cost.kernel_unit(k, KEEP) == cost.UNIT_VECTOR
    text = emit_aicore(ir, KEEP)["aicore/kernel_k.h"]
    assert "on the cube" not in text and "// 1 chunk of" in text
    mms = [i for i, op in enumerate(k.ops) if op.op == "matmul"]
    blocks = _matmul_blocks(text)
    assert len(blocks) == len(mms)
    total = 0
    for i, block in zip(mms, blocks):
        model = cost.vector_matmul(k, i, MACHINE)
        calls, copies = _count_calls(block)
        assert calls == model.calls, (model.form, block)
        assert copies == model.copies, model.form
        width = MACHINE.vector_bytes_per_cycle
        cycles = sum(n * (-(-e * 4 // width) if e
                          else P.SCALAR_ACCESS_CYCLES if c in ("GetValue", "SetValue")
                          else P.VECTOR_BARRIER_CYCLES) for (c, e), n in calls.items())
        assert model.cycles == cycles
        total += cycles
    # the kernel's time holds its matmuls' vector work (and more: the other ops, the DMA)
    assert cost.kernel_cost(k, MACHINE, vector_only=KEEP)[1] > total
    forms = {cost.vector_matmul(k, i, MACHINE).form for i in mms}
    assert forms <= {"rows", "streamed", "dot", "tt"}


def test_a_chunked_mixed_kernel_streams_its_weights_once_per_chunk():
    """A kernel too large for the UB at once runs its rows in chunks, each running the matmul's
    block again (the streamed weights copied in again): the model's counts for the emitter's
    chunk count are the block's counts times the chunks, and its pipeline's V stages hold the
    streamed loads of every chunk."""
    from ptowsp.backends.ascend.aicore import emit_aicore

    src = """module big
input X: f32[512, 256]
input W: f32[256, 256]
output Y: f32[512, 256]
kernel k(x: In[Tile[512, 256, f32]], w: In[Tile[256, 256, f32]], y: Out[Tile[512, 256, f32]]) {
    store(y, exp(matmul(x * 2.0, w)))
}
workload wl() { k[0](x = X, w = W, y = Y) }
schedule main = wl()
"""
    ir = ptowsp.parse(src, "big.wsp").ir
    (k,) = ir.kernels
    text = emit_aicore(ir, KEEP)["aicore/kernel_k.h"]
    (chunks,) = [int(n) for n in re.findall(r"// (\d+) chunks? of \d+ rows", text)]
    assert chunks > 1
    (i,) = [i for i, op in enumerate(k.ops) if op.op == "matmul"]
    (block,) = _matmul_blocks(text)
    calls, copies = _count_calls(block)
    model = cost.vector_matmul(k, i, MACHINE, chunks)
    assert model.form == "streamed"
    assert model.calls == {c: n * chunks for c, n in calls.items()}
    assert model.copies == copies * chunks
    pipe = cost.kernel_pipeline(k, MACHINE, chunks=chunks, vector_only=KEEP)
    rates = P.Rates.of(MACHINE, MACHINE.vector_cores)
    streamed = P.transfer(256 * 256 * 4, rates.hbm) * chunks
    assert pipe.busy()["V"] >= model.cycles + streamed
    # W is not among the chunks' MTE2 (it streams), X is
    assert pipe.busy()["MTE2"] == chunks * P.transfer(512 * 256 * 4 / chunks, rates.hbm)
