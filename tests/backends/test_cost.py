"""The cycle model's inputs: machine files (`ptowsp/backends/machine.py`) and kernel costs
(`backends/cpu/cost.py`), against numbers computed by hand here.

The built-in 910B: 1.8 GHz, 1600 GB/s shared by 24 cube or 48 vector cores, so a cube core moves
1600 / 24 / 1.8 = 37.04 bytes per cycle (one byte costs 0.027 cycles) and a vector core
18.52 bytes per cycle (0.054 cycles a byte). No C compiler needed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace
from pathlib import Path

import pytest
import tomllib

import ptowsp
from ptowsp.backends import machine as machine_module
from ptowsp.backends import pipes as P
from ptowsp.backends.cpu import cost
from ptowsp.backends.cpu.cost import kernel_cost, kernel_costs
from ptowsp.backends.machine import Machine, load_machine
from ptowsp.diagnostics import WspError
from ptowsp.ir import nodes as N

ROOT = Path(__file__).resolve().parents[2]
# the hand-computed figures below assume 1.8 GHz: a fixed machine, whatever the built-in says
M910B = replace(load_machine(None), clock_ghz=1.8)
FAST_HBM = dataclasses.replace(M910B, hbm_gbps=1e12)  # memory never the bottleneck


def tile(name, rows, cols, dtype, mode="In"):
    return N.KParam(name, "tile", dtype, mode, rows, cols)


def matmul_kernel(m, k, n, dtype="f16", out="f16") -> N.Kernel:
    """c = a @ b, as lowering makes it: an f32 product converted to c's dtype."""
    ops = (N.Op("param", (), (m, k), dtype, "a"), N.Op("param", (), (k, n), dtype, "b"),
           N.Op("matmul", (0, 1), (m, n), "f32"), N.Op("convert", (2,), (m, n), out))
    params = (tile("a", m, k, dtype), tile("b", k, n, dtype), tile("c", m, n, out, "Out"))
    return N.Kernel("mm", "mm", params, ops, (("c", 3),))


def elementwise_kernel(rows, cols, op="add", dtype="f32") -> N.Kernel:
    """y = op(x * 2, 1): two tile ops of rows x cols."""
    ops = (N.Op("param", (), (rows, cols), dtype, "x"), N.Op("literal", (), None, dtype, 2.0),
           N.Op("mul", (0, 1), (rows, cols), dtype), N.Op("literal", (), None, dtype, 1.0),
           N.Op(op, (2, 3), (rows, cols), dtype))
    params = (tile("x", rows, cols, dtype), tile("y", rows, cols, dtype, "Out"))
    return N.Kernel("ew", "ew", params, ops, (("y", 4),))


def unary_kernel(op, shape=(16, 128), dtype="f32", out_shape=None) -> N.Kernel:
    out_shape = out_shape or shape
    ops = (N.Op("param", (), shape, dtype, "x"), N.Op(op, (0,), out_shape, dtype))
    params = (tile("x", *shape, dtype), tile("y", *out_shape, dtype, "Out"))
    return N.Kernel(op, op, params, ops, (("y", 1),))


# ---------------------------------------------------------------------------------------------
# Kernel costs, by hand


def _rates(machine=None):
    """A cube core's rates on `machine`, written out here from the machine's keys."""
    m = machine or M910B
    share = m.clock_ghz * m.cube_cores
    return {"hbm": m.hbm_gbps / share, "l2": m.l2_gbps / share, "l1": m.l1_bytes_per_cycle,
            "fix": min(m.fix_bytes_per_cycle, m.hbm_gbps / share)}


def _cycles(nbytes, rate):
    return math.ceil(round(nbytes / rate, 6))


def test_matmul_256_cube_and_memory():
    k = matmul_kernel(256, 256, 256)
    # 16 x 16 x 16 fractals of 4096 MACs at 4096 MACs per cycle
    assert cost.cube_cycles(k, M910B) == 4096
    # the f32 -> f16 convert of the product is the fixpipe's: no vector work
    assert "V" not in cost.kernel_pipeline(k, M910B).busy()
    # a, b read and c written: 3 x 128 KiB = 393216 bytes x 0.027 = 10616.8 (the roofline's
    # memory time, kept for vector kernels without their chunks)
    assert cost.memory_cycles(k, M910B, cost.UNIT_CUBE) == 10617
    # the cube pipeline (backends/pipes.py): 2 C blocks of 128 x 256, each one L1 stage (K = 256
    # fits), 4 L0 steps of 64; block 1's FIX (f16 out, at the HBM share) waits for its Mmads,
    # block 2's first Mmad for block 1's FIX (one L0C buffer)
    r = _rates()
    load = _cycles((128 + 256) * 256 * 2, r["l2"])
    mte1 = _cycles((128 + 256) * 64 * 2, r["l1"])
    mmad = 128 * 256 * 64 // 4096
    fix = _cycles(128 * 256 * 2, r["fix"])
    # the second block's panels load while the first computes (two L1 buffers): its Mmads start
    # when the first block's FIX ends
    first = load + mte1 + 4 * mmad + fix
    assert kernel_cost(k, M910B) == (1, first + 4 * mmad + fix)


def test_gemm_block_time_is_prologue_steps_and_epilogue():
    """A 6144^3 GEMM's task: a 128 x 256 f32 block of C with the whole K (f16 operands). Written
    out from cube.py's tiling, independently of the model's list schedule: the first L1 stage's
    panels (from L2), the first L0 step's MTE1, then the cube never waits (each later load and
    MTE1 is shorter than the Mmads it overlaps), then the block's FIX to GM."""
    from ptowsp.backends.cube import cube_tiling

    m, k, n = 128, 6144, 256
    t = cube_tiling(m, n, k, 2)
    r = _rates()
    prologue = (_cycles((t.base_m + t.base_n) * t.step_k * 2, r["l2"])
                + _cycles((t.base_m + t.base_n) * t.base_k * 2, r["l1"]))
    step = t.base_m * t.base_n * t.base_k // M910B.cube_macs_per_cycle
    epilogue = _cycles(m * n * 4, r["fix"])
    # the premise of the closed form: every other pipe's work per step is below the cube's
    assert _cycles((t.base_m + t.base_n) * t.step_k * 2, r["l2"]) < step * (t.step_k // t.base_k)
    assert _cycles((t.base_m + t.base_n) * t.base_k * 2, r["l1"]) < step
    kern = matmul_kernel(m, k, n, out="f32")
    assert kernel_cost(kern, M910B) == (1, prologue + t.k_steps * step + epilogue)


def test_matmul_rounds_up_to_fractals_and_scales_with_macs():
    assert cost.cube_cycles(matmul_kernel(17, 17, 17), M910B) == 8
    assert cost.cube_cycles(matmul_kernel(1, 16, 1), M910B) == 1
    wide = dataclasses.replace(M910B, cube_macs_per_cycle=8192)
    assert cost.cube_cycles(matmul_kernel(256, 256, 256), wide) == 2048


def test_matmul_with_inout_accumulator():
    """examples/gemm.wsp's kernel: c = matmul(a, b, acc = c) on 64 x 64 f32 tiles."""
    text = (ROOT / "examples" / "gemm.wsp").read_text()
    (k,) = ptowsp.parse(text, "gemm.wsp").ir.kernels
    # f32 fractals are 16 x 8 deep: 4 x 4 x 8 of them, at 2048 MACs (one fractal) per cycle
    assert cost.cube_cycles(k, M910B) == 4 * 4 * 8
    # c's block read first (HBM share), then the panels (L2) on the same MTE2 pipe, one MTE1 of
    # K = 64 (base_k 64), the Mmad, the FIX of c
    r = _rates()
    acc = _cycles(64 * 64 * 4, r["hbm"])
    load = _cycles((64 + 64) * 64 * 4, r["l2"])
    mte1 = _cycles((64 + 64) * 64 * 4, r["l1"])
    fix = _cycles(64 * 64 * 4, r["fix"])
    assert kernel_cost(k, M910B) == (1, acc + load + mte1 + 128 + fix)


def test_elementwise_f32_is_its_chunk_pipeline():
    k = elementwise_kernel(64, 128)
    # mul and add: 64 x 128 x 4 bytes / 256 = 128 cycles each; scalars are free
    assert cost.vector_cycles(k, M910B) == 256
    # x and y (32 KiB each) and the two values fit the UB at once: the emitter writes one chunk
    # of 64 rows, so nothing overlaps: x read, the ops, y written (32768 bytes x 0.054 = 1769.4
    # each way)
    fit = cost.vector_fit(k)
    assert (fit.nchunks, fit.rows, fit.colblock) == (1, 64, None)
    share = M910B.hbm_gbps / (M910B.clock_ghz * M910B.vector_cores)
    assert _cycles(32768, share) == 1770
    assert kernel_cost(k, M910B) == (0, 1770 + 256 + 1770)
    # memory (almost) free: the ops, and a cycle each way
    assert kernel_cost(k, FAST_HBM) == (0, 1 + 256 + 1)


def test_softmax_from_source():
    """examples/softmax.wsp: a 16 x 128 f32 softmax, a transcendental op (x4)."""
    text = (ROOT / "examples" / "softmax.wsp").read_text()
    (k,) = ptowsp.parse(text, "softmax.wsp").ir.kernels
    assert cost.vector_cycles(k, M910B) == 16 * 128 * 4 // 256 * 4
    # one chunk of 16 rows (8 KiB in, 8 KiB out): read, the ops, written; 8 KiB x 0.054 = 442.4
    assert cost.vector_fit(k).nchunks == 1
    assert kernel_cost(k, M910B) == (0, 443 + 128 + 443)
    assert kernel_cost(k, FAST_HBM) == (0, 1 + 128 + 1)


EXTERN = '''
module ext
sym T = 4
input  X: f32[T, 64]
input  W: f32[64, 8]
output R: i32[T, 2]
kernel topk(x: In[Tile[1, 64, f32]], w: In[Tile[64, 8, f32]],
            route: Out[Tile[1, 2, i32]]) extern c """
    for (int j = 0; j < 2; j++) route.data[j] = j;
"""
workload route() {
    for t in P(T) {
        topk[t](x = X[t : t + 1, :], w = W, route = R[t : t + 1, :])
    }
}
schedule main = route()
'''


def test_extern_kernel_is_vector_memory_only():
    (k,) = ptowsp.parse(EXTERN, "ext.wsp").ir.kernels
    assert k.extern_c is not None
    # 256 + 2048 + 8 bytes x 0.054 = 124.8
    assert kernel_cost(k, M910B) == (0, 125)
    assert kernel_cost(k, FAST_HBM) == (0, 1)


def test_doubling_a_tile_doubles_memory_cycles():
    small, big = elementwise_kernel(64, 128), elementwise_kernel(128, 128)
    # exact on a machine where a core moves a power of two bytes per cycle (1536 / 24 / 1.0
    # = 64 cube, 32 vector), to within the final ceil on the 910B
    even = dataclasses.replace(M910B, hbm_gbps=1536, clock_ghz=1.0)
    for unit in (0, 1):
        assert cost.memory_cycles(big, even, unit) == 2 * cost.memory_cycles(small, even, unit)
        twice = 2 * cost.memory_cycles(small, M910B, unit)
        assert twice - 1 <= cost.memory_cycles(big, M910B, unit) <= twice
    assert cost.vector_cycles(big, M910B) == 2 * cost.vector_cycles(small, M910B)


def test_transcendental_ops_cost_four_times():
    plain = cost.vector_cycles(unary_kernel("neg"), M910B)
    assert plain == 32
    for op in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "sin", "cos", "gelu", "silu"):
        assert cost.vector_cycles(unary_kernel(op), M910B) == 4 * plain, op


def test_reductions_count_their_input():
    # rowsum of 16 x 128 reads 2048 elements although it makes 16
    assert cost.vector_cycles(unary_kernel("rowsum", out_shape=(16, 1)), M910B) == 32
    assert cost.vector_cycles(unary_kernel("colmax", out_shape=(1, 128)), M910B) == 32


def test_data_movement_counts_once():
    assert cost.vector_cycles(unary_kernel("transpose", (16, 128), out_shape=(128, 16)),
                              M910B) == 32
    assert cost.vector_cycles(unary_kernel("broadcast", (16, 1), out_shape=(16, 128)),
                              M910B) == 32


def test_ops_work_at_their_widest_dtype():
    """A comparison streams its f32 operands (the bool result is not the width); a convert to
    f16 outside a matmul is vector work at f32 width."""
    ops = (N.Op("param", (), (16, 128), "f32", "x"), N.Op("param", (), (16, 128), "f32", "z"),
           N.Op("lt", (0, 1), (16, 128), "bool"), N.Op("convert", (0,), (16, 128), "f16"))
    params = (tile("x", 16, 128, "f32"), tile("z", 16, 128, "f32"),
              tile("m", 16, 128, "bool", "Out"), tile("h", 16, 128, "f16", "Out"))
    k = N.Kernel("k", "k", params, ops, (("m", 2), ("h", 3)))
    assert cost.vector_cycles(k, M910B) == 32 + 32


def test_cube_pipeline_adds_its_vector_epilogue():
    """The cube pipeline of a kernel with vector work after its matmul (the model of a mixed
    kernel once those run on the cube): the vector work waits for the product (conservative:
    the 910B runs it on the AI core's paired vector cores, in a pipeline the model does not
    overlap). The emitter splits such a kernel between the cube and the vector cores instead,
    and the model costs the parts (the next test)."""
    m, k, n = 64, 64, 64
    ops = (N.Op("param", (), (m, k), "f16", "a"), N.Op("param", (), (k, n), "f16", "b"),
           N.Op("matmul", (0, 1), (m, n), "f32"), N.Op("exp", (2,), (m, n), "f32"))
    params = (tile("a", m, k, "f16"), tile("b", k, n, "f16"), tile("y", m, n, "f32", "Out"))
    kern = N.Kernel("k", "k", params, ops, (("y", 3),))
    # exp over 64 x 64 f32: 16384 / 256 x 4 = 256 cycles, after the matmul's pipeline (its
    # FIX to UB), then y's MTE3 to GM
    pipe = cost.cube_pipeline(kern, FAST_HBM, {}, {})
    assert [s.pipe for s in pipe.stages[-3:]] == ["FIX", "V", "MTE3"]
    assert pipe.stages[-2].cycles == 256 and pipe.busy()["M"] == 64
    ends = pipe.schedule()
    assert ends[-2][0] == ends[-3][1] and ends[-1][0] == ends[-2][1]
    assert kernel_cost(kern, FAST_HBM)[0] == cost.UNIT_CUBE  # split: the next test


def test_a_matmul_epilogue_kernel_is_its_cube_part_then_its_vector_part():
    """exp(a @ b) is split by the emitter (backends/mixed_split.py): the matmul on the group's
    cube core, stored into a workspace tile, then exp on the vector cores, which share its
    rows (exp is row-local). The model: the cube part's pipeline, then the vector part's time
    over two vector cores, one after the other."""
    m, k, n = 64, 64, 64
    ops = (N.Op("param", (), (m, k), "f16", "a"), N.Op("param", (), (k, n), "f16", "b"),
           N.Op("matmul", (0, 1), (m, n), "f32"), N.Op("exp", (2,), (m, n), "f32"))
    params = (tile("a", m, k, "f16"), tile("b", k, n, "f16"), tile("y", m, n, "f32", "Out"))
    kern = N.Kernel("k", "k", params, ops, (("y", 3),))
    # the parts, written out: a kernel storing a @ b into a workspace tile; one reading it
    cube = N.Kernel("k__aic", "k", (tile("a", m, k, "f16"), tile("b", k, n, "f16"),
                                    tile("ws", m, n, "f32", "Out")), ops[:3], (("ws", 2),))
    vec = N.Kernel("k__aiv", "k", (tile("ws", m, n, "f32"), tile("y", m, n, "f32", "Out")),
                   (N.Op("param", (), (m, n), "f32", "ws"), N.Op("exp", (0,), (m, n), "f32")),
                   (("y", 1),))
    want = (cost.cube_pipeline(cube, M910B, {}, {}).cycles
            + -(-kernel_cost(vec, M910B)[1] // 2))
    assert kernel_cost(kern, M910B) == (cost.UNIT_CUBE, want)
    # kept off the cube (a gather view passed to it), it is one vector kernel again
    assert kernel_cost(kern, M910B, vector_only=frozenset({"k"}))[0] == cost.UNIT_VECTOR


def test_a_prologue_and_a_chain_are_their_stages_in_order():
    """RMSNorm -> matmul is a vector stage (row-local: over two vector cores) writing the
    normalised rows into a workspace tile, then the cube stage reading it; softmax(a @ bᵀ) @ b
    is cube, vector (softmax is not in the row-local list: one vector core), cube, the last
    product stored by the cube. The model: the stages' times one after the other."""
    m, k = 32, 64
    a, b = N.Op("param", (), (m, k), "f32", "a"), N.Op("param", (), (k, k), "f32", "b")
    norm = (a, N.Op("mul", (0, 0), (m, k), "f32"), N.Op("rowmean", (1,), (m, 1), "f32"),
            N.Op("rsqrt", (2,), (m, 1), "f32"), N.Op("broadcast", (3,), (m, k), "f32"),
            N.Op("mul", (0, 4), (m, k), "f32"))
    params = (tile("a", m, k, "f32"), tile("b", k, k, "f32"), tile("y", m, k, "f32", "Out"))
    rms = N.Kernel("k", "k", params, (*norm, b, N.Op("matmul", (5, 6), (m, k), "f32")),
                   (("y", 7),))
    vec = N.Kernel("k__s0", "k", (tile("a", m, k, "f32"), tile("ws", m, k, "f32", "Out")),
                   norm, (("ws", 5),))
    cube = N.Kernel("k__s1", "k", (tile("b", k, k, "f32"), tile("ws", m, k, "f32"),
                                   tile("y", m, k, "f32", "Out")),
                    (N.Op("param", (), (m, k), "f32", "ws"), N.Op("param", (), (k, k), "f32", "b"),
                     N.Op("matmul", (0, 1), (m, k), "f32")), (("y", 2),))
    want = -(-kernel_cost(vec, M910B)[1] // 2) + cost.cube_pipeline(cube, M910B, {}, {}).cycles
    assert kernel_cost(rms, M910B) == (cost.UNIT_CUBE, want)
    # softmax(a @ bᵀ) @ b, a [m, k], b [k, k]
    ops = (a, b, N.Op("transpose", (1,), (k, k), "f32"), N.Op("matmul", (0, 2), (m, k), "f32"),
           N.Op("softmax", (3,), (m, k), "f32"), N.Op("matmul", (4, 1), (m, k), "f32"))
    att = N.Kernel("k", "k", params, ops, (("y", 5),))
    s0 = N.Kernel("k__s0", "k", (tile("a", m, k, "f32"), tile("b", k, k, "f32"),
                                 tile("mm", m, k, "f32", "Out")), ops[:4], (("mm", 3),))
    s1 = N.Kernel("k__s1", "k", (tile("mm", m, k, "f32"), tile("p", m, k, "f32", "Out")),
                  (N.Op("param", (), (m, k), "f32", "mm"), N.Op("softmax", (0,), (m, k), "f32")),
                  (("p", 1),))
    s2 = N.Kernel("k__s2", "k", (tile("b", k, k, "f32"), tile("p", m, k, "f32"),
                                 tile("y", m, k, "f32", "Out")),
                  (N.Op("param", (), (m, k), "f32", "p"), N.Op("param", (), (k, k), "f32", "b"),
                   N.Op("matmul", (0, 1), (m, k), "f32")), (("y", 2),))
    want = (cost.cube_pipeline(s0, M910B, {}, {}).cycles + kernel_cost(s1, M910B)[1]
            + cost.cube_pipeline(s2, M910B, {}, {}).cycles)
    assert kernel_cost(att, M910B) == (cost.UNIT_CUBE, want)
    # far below the vector matmul the kernel would be on one vector core
    assert want * 10 < kernel_cost(att, M910B, vector_only=frozenset({"k"}))[1]


def test_at_least_one_cycle():
    empty = N.Kernel("nothing", "nothing", (), (), ())
    assert kernel_cost(empty, M910B) == (0, 1)


def test_costs_follow_module_kernel_order():
    kernels = (elementwise_kernel(8, 8), matmul_kernel(32, 32, 32), unary_kernel("exp"))
    module = N.Module("m", (), (), kernels, (), None)
    costs = kernel_costs(module, M910B)
    assert costs == [kernel_cost(k, M910B) for k in kernels]
    assert [unit for unit, _ in costs] == [0, 1, 0]
    assert all(isinstance(c, int) and c >= 1 for _, c in costs)


# ---------------------------------------------------------------------------------------------
# Machine files


def test_builtin_machine():
    m = load_machine(None)
    assert m == Machine(name="ascend910b", clock_ghz=1.6, dispatchers=4, cube_cores=24,
                        vector_cores=48, cube_macs_per_cycle=4096, vector_bytes_per_cycle=256,
                        hbm_gbps=1600, dispatch_ns=140, completion_ns=600)
    # the published peak: 24 cores x 4096 MACs x 2 FLOP x 1.6 GHz = 314.6 TFLOP/s (sold as 313)
    assert 24 * m.cube_macs_per_cycle * 2 * m.clock_ghz / 1e3 == pytest.approx(314.6, abs=0.1)
    assert m.cores(cost.UNIT_CUBE) == 24 and m.cores(cost.UNIT_VECTOR) == 48


def test_builtin_file_documents_every_key():
    assert set(machine_module._FIELDS) == {f.name for f in dataclasses.fields(Machine)}
    text = (ROOT / "ptowsp" / "backends" / "machines" / "ascend910b.toml").read_text()
    lines = text.splitlines()
    for f in dataclasses.fields(Machine):
        (i,) = [i for i, line in enumerate(lines) if line.startswith(f"{f.name} =")]
        assert lines[i - 1].startswith("#"), f"{f.name} has no comment above it"


def test_machine_toml_ships_with_the_package():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "backends/machines/*.toml" in data["tool"]["setuptools"]["package-data"]["ptowsp"]


def test_user_file_overrides_a_subset(tmp_path):
    p = tmp_path / "slow.toml"
    p.write_text('name = "slow"\nclock_ghz = 1.0  # half speed\ndispatch_ns = 0\n')
    m = load_machine(str(p))
    assert (m.name, m.clock_ghz, m.dispatch_ns) == ("slow", 1.0, 0)
    assert m.cube_cores == 24 and m.completion_ns == 600


def _error(tmp_path, text: str) -> str:
    p = tmp_path / "m.toml"
    p.write_text(text)
    with pytest.raises(WspError) as info:
        load_machine(str(p))
    return info.value.render()


def test_syntax_error_has_a_position(tmp_path):
    out = _error(tmp_path, "clock_ghz = 1.5\ncube_cores = = 3\n")
    first, line, caret = out.splitlines()[:3]
    assert first.endswith("m.toml:2:14: error: invalid TOML: invalid value")
    assert line.endswith("2 | cube_cores = = 3")
    assert caret.endswith("|              ^")


def test_unknown_key_caret_under_the_key(tmp_path):
    out = _error(tmp_path, "clock_ghz = 1.5\n  vector_corse = 3\n")
    assert "m.toml:2:3: error: unknown machine key `vector_corse`" in out
    assert out.splitlines()[2].endswith("|   ^^^^^^^^^^^^")
    assert "help: did you mean `vector_cores`?" in out


def test_unknown_table(tmp_path):
    out = _error(tmp_path, "[cores]\ncube = 3\n")
    assert "m.toml:1:2: error: unknown machine key `cores`" in out


@pytest.mark.parametrize("line, message", [
    ("clock_ghz = true", "`clock_ghz` must be a number, not the boolean true"),
    ('hbm_gbps = "fast"', "`hbm_gbps` must be a number, not the string 'fast'"),
    ("name = 5", "`name` must be a string, not the integer 5"),
    ("clock_ghz = 0", "`clock_ghz` must be positive, not 0"),
    ("cube_cores = -2", "`cube_cores` must be positive, not -2"),
    ("dispatchers = 0", "`dispatchers` must be positive, not 0"),
    ("completion_ns = -1.5", "`completion_ns` must not be negative, not -1.5"),
    ("cube_cores = 24.5", "`cube_cores` must be an integer, not the float 24.5"),
    ("hbm_gbps = inf", "`hbm_gbps` must be a finite number, not inf"),
    ("vector_cores = [48]", "`vector_cores` must be a number, not an array"),
])
def test_bad_values(tmp_path, line, message):
    out = _error(tmp_path, f"# a comment\n{line}  # why\n")
    col = line.index("=") + 3
    assert f"m.toml:2:{col}: error: {message}" in out
    value = line.split("=", 1)[1].strip()
    assert out.splitlines()[2].endswith("| " + " " * (col - 1) + "^" * len(value))


def test_whole_float_count_gets_a_help(tmp_path):
    out = _error(tmp_path, "cube_cores = 24.0\n")
    assert "must be an integer, not the float 24.0" in out
    assert "help: write `cube_cores = 24`" in out


def test_all_errors_reported_together(tmp_path):
    out = _error(tmp_path, "clock_ghz = 0\nbogus = 1\ndispatchers = false\n")
    assert out.endswith("3 errors")


def test_missing_file_names_it(tmp_path):
    with pytest.raises(WspError) as info:
        load_machine(str(tmp_path / "nope.toml"))
    path = tmp_path / "nope.toml"
    assert info.value.render() == f"{path}: error: cannot read machine file: no such file"


def test_to_c_fills_wsp_machine():
    cffi = pytest.importorskip("cffi")
    text = (ROOT / "runtime_c" / "wsp_runtime.h").read_text()
    ffi = cffi.FFI()
    ffi.cdef(text[text.index("/* CDEF-BEGIN */") + 16:text.index("/* CDEF-END */")])
    cm = M910B.to_c(ffi)
    assert (cm.clock_ghz, cm.dispatchers, cm.cube_cores, cm.vector_cores) == (1.8, 4, 24, 48)
    assert (cm.dispatch_ns, cm.completion_ns) == (140.0, 600.0)
    out = ffi.new("wsp_machine *")
    assert dataclasses.replace(M910B, dispatchers=2).to_c(ffi, out) is out and out.dispatchers == 2


def test_a_mixed_kernel_runs_on_a_vector_core_with_its_weights_streamed():
    """exp(x @ w) kept off the cube (as a task passing it a gather view keeps it: `vector_only`)
    runs on a vector core, as the Ascend emitter runs it, its matmul the vector matmul's calls;
    w streams from GM once per chunk, its loads in the V pipe's time (single-buffered), at the
    rate of the level w is placed in. (Off that list it is split between the cube and the
    vector cores: test_a_matmul_epilogue_kernel_is_its_cube_part_then_its_vector_part.)"""
    vo = frozenset({"k"})
    m, k, n = 16, 64, 64
    ops = (N.Op("param", (), (m, k), "f32", "x"), N.Op("param", (), (k, n), "f32", "w"),
           N.Op("matmul", (0, 1), (m, n), "f32"), N.Op("exp", (2,), (m, n), "f32"))
    params = (tile("x", m, k, "f32"), tile("w", k, n, "f32"), tile("y", m, n, "f32", "Out"))
    kern = N.Kernel("k", "k", params, ops, (("y", 3),))
    assert cost.kernel_unit(kern, vo) == cost.UNIT_VECTOR
    mm = cost.vector_matmul(kern, 2, M910B)
    # per (row, k): a scalar read, Muls and Add of a 64-column row (one repeat each), two
    # barriers; once: the Duplicate of C (16 x 64 f32: 16 repeats) and its barrier
    pairs = m * k
    assert mm.form == "streamed" and mm.copies == 1  # 16 KiB of w in one block
    assert mm.cycles == (pairs * (P.SCALAR_ACCESS_CYCLES + 1 + 1 + 2 * P.VECTOR_BARRIER_CYCLES)
                         + 16 + P.VECTOR_BARRIER_CYCLES)
    share = M910B.hbm_gbps / (M910B.clock_ghz * M910B.vector_cores)
    w_load = _cycles(k * n * 4, share)
    exp = 16 * 4  # 1024 f32 = 16 repeats, a transcendental 4x
    # x, y and the values fit the UB at once (one chunk of 16 rows): x read, the V work (w's
    # loads in it), y written, one after the other
    assert cost.vector_fit(kern).nchunks == 1
    xy = _cycles(m * k * 4, share) + _cycles(m * n * 4, share)
    assert kernel_cost(kern, M910B, vector_only=vo) == (cost.UNIT_VECTOR,
                                                        xy + mm.cycles + exp + w_load)
    ub = kernel_cost(kern, M910B, places={"w": "ub"}, vector_only=vo)[1]
    assert ub == xy + mm.cycles + exp + _cycles(k * n * 4, M910B.ub_bytes_per_cycle)


def test_a_topk_is_billed_as_the_sort_the_emitter_writes():
    """topk(x, 5) of x [8, 80] f32 (its values and indices: one sort, aicore/sorting.py), one
    chunk of 8 rows, counted by hand from what sorting.py writes, at the built-in machine's
    256 vector bytes a cycle, 16 cycles a barrier and 4 a scalar access:
    - staging: a read and two writes a column, 8 x 80 x 3 = 1,920 accesses; the pad of the
      last run (80 columns at a pitch of 96): 2 writes a pad column, 8 x 16 x 2 = 256;
    - Sort32: 8 x 96 / 32 = 24 runs of 32 pairs (256 bytes each): 24 cycles;
    - MrgSort: 80 = 32 + 32 + 16 is 3 lists, one pass of one group, 640 pairs of 8 bytes:
      20 cycles; barriers: S_V, after Sort32, after the pass, V_S: 4 x 16 = 64;
    - ties of the first 5 positions (a merge ran): 2 reads each, 8 x 10 = 80 accesses;
    - the values' read-back: the merged index, the source element, the result and the shared
      index, 8 x 5 x 4 = 160; the indices: the shared index and the result, 8 x 5 x 2 = 80.
    So (1,920 + 256 + 80 + 160 + 80) x 4 + 24 + 20 + 64 = 10,092 cycles, not the 2 an
    elementwise op over the [8, 5] results would be. On the scalar path (a kernel whose
    scratch does not fit) each op is its own n^2 rank loop: 8 x (80 + 6,400 + 5) reads and
    writes."""
    from ptowsp.backends.sort_plan import Sorts

    x = N.Op("param", (), (8, 80), "f32", "x")
    ops = (x, N.Op("sort_values", (0,), (8, 5), "f32", "desc"),
           N.Op("sort_indices", (0,), (8, 5), "i32", "desc"))
    k = N.Kernel("topk", "topk", (tile("x", 8, 80, "f32"), tile("v", 8, 5, "f32", "Out"),
                                  tile("i", 8, 5, "i32", "Out")), ops, (("v", 1), ("i", 2)))
    m = load_machine(None)
    assert (m.vector_bytes_per_cycle, P.VECTOR_BARRIER_CYCLES, P.SCALAR_ACCESS_CYCLES) == (256, 16, 4)
    assert cost.vector_cycles(k, m) == (1920 + 256 + 80 + 160 + 80) * 4 + 24 + 20 + 64
    assert cost.vector_cycles(k, m, sorts=Sorts(False)) == 2 * 8 * (80 + 80 * 80 + 5) * 4
    # the model's pipeline of the kernel bills it so: its V stage is those cycles
    pipe = cost.kernel_pipeline(k, m)
    assert pipe.busy()["V"] == 10092
    # by blocks of 64 (sorting.blocked_lines), the values of a [1, 80] row alone, k = 5:
    # block 0 (64 columns): staging 192, Sort32 2 runs, one merge pass of 64 pairs, 4
    # barriers, ties 10, its 5 winners kept (a read and a write of 2 words each) 20; block 1
    # (16 columns at a pitch of 32): staging 48 + pad 32, 1 run, no merge, 3 barriers, ties 10
    # (always, by blocks), kept 20; the blocks' lists merged: 5 results x (2 reads a block +
    # the source read and the result written) 30
    one = N.Kernel("row", "row", (tile("x", 1, 80, "f32"), tile("v", 1, 5, "f32", "Out")),
                   (N.Op("param", (), (1, 80), "f32", "x"),
                    N.Op("sort_values", (0,), (1, 5), "f32", "desc")), (("v", 1),))
    scalar = 192 + 10 + 20 + 48 + 32 + 10 + 20 + 30
    assert cost.vector_cycles(one, m, sorts=Sorts(True, 64)) == scalar * 4 + 3 + 2 + 7 * 16
