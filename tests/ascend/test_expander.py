"""Verification 1 of the ascend_npu target (docs/ascend.md): the AICPU expander, compiled with
the host C++ compiler behind a shim that only defines the AICPU qualifiers, produces exactly
the task stream cpu_sim enumerates (kernel, coordinates, every tile's tensor, byte offset,
shape and strides, every access box, every scalar's bits, dispatcher and stream), for every
schedule of every example and test program, ragged, sparse, `when`, slots and CSP included.

The oracle is cpu_sim's own enumerator C (backends/cpu), compiled against a recording runtime
(cpu_stub.c) that finishes tasks when the device would: at the end of a segment. So the
segment boundaries (a full segment, an element read or a `synchronize` that must wait for a
task of the segment) and the one timing-dependent outcome (`query`) are compared too, and so
are run-time errors (the failing check, its coordinates and values; deadlocks; a channel
opened twice).

The order of the device's waves is checked against the oracle's semantics: a task's wave is
exactly one past the largest wave of the tasks it must follow (an inferred data dependency, a
`P.seq` / `sequential` step, or its stream's previous task), the waves cpu_sim's runtime would
have to respect, with nothing serialised that need not be.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.ascend import expander
from ptowsp.backends.ascend.abi import scalar_word
from ptowsp.frontend.checker import check_source
from ptowsp.ir.passes import optimize
from ptowsp.lower import lower

from .streams import Harness, must_precede, segments, stream_of

pytestmark = pytest.mark.cc

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return Harness(tmp_path_factory.mktemp("expander"), expander.shared_files())


def ir_of(path: Path):
    m, _ = optimize(ptowsp.load(str(path)).ir, 2)
    return m


def ir_of_text(text: str):
    m, _ = optimize(lower(check_source(textwrap.dedent(text), "t.wsp")), 2)
    return m


def routing(tokens: int, experts: int, k: int, seed: int, empty_every: int = 5):
    """A CSR routing as a top-k router writes it: per token up to k distinct experts."""
    rng = np.random.default_rng(seed)
    indptr, indices = [0], []
    for t in range(tokens):
        n = 0 if t % empty_every == 3 else int(rng.integers(1, k + 1))
        indices += [int(e) for e in rng.choice(experts, n, replace=False)]
        indptr.append(len(indices))
    return np.asarray(indptr, np.int32), np.asarray(indices, np.int32)


def moe_data(tokens=30):
    indptr, indices = routing(tokens, 8, 2, seed=1)
    full = np.zeros(tokens * 2, np.int32)
    full[:len(indices)] = indices
    return {"T": tokens}, {"Indptr": indptr, "Indices": full}


def topk_moe_data(tokens=30):
    """moe.wsp: what its route tasks would write, K = 2 distinct experts of 8 per token."""
    rng = np.random.default_rng(2)
    experts = np.stack([rng.choice(8, 2, replace=False) for _ in range(tokens)])
    return {"T": tokens}, {"Experts": experts.astype(np.int32)}


def moe_sparse_data():
    return {"T": 5, "NNZ": 7}, {"indptr": np.asarray([0, 2, 2, 5, 6, 7], np.int32),
                                "indices": np.asarray([1, 3, 0, 2, 7, 5, 4], np.int32)}


def llama_data():
    """llama_layer.wsp: a prefill sequence over two token tiles, a decode one past a key block,
    an empty one (what enumeration reads: starts, ctx, pos)."""
    new, ctx = [20, 1, 0], [0, 300, 5]
    starts = np.concatenate([[0], np.cumsum(new)]).astype(np.int32)
    pos = np.concatenate([np.arange(c, c + n) for c, n in zip(ctx, new)]).astype(np.int32)
    return ({"B": 3, "T": 21, "MAXCTX": 320, "MAXPOS": 320},
            {"starts": starts, "ctx": np.asarray(ctx, np.int32), "pos": pos})


# (file, symbols, arrays): small bindings that reach every construct of each program
PROGRAMS = {
    "examples/rmsnorm.wsp": ({"B": 2, "T": 3}, {}),
    # partial tiles at the edges (R, M, K not multiples of the tile), whole ones (N)
    "examples/softmax.wsp": ({"R": 45}, {}),
    "examples/gemm.wsp": ({"M": 100, "N": 128, "K": 150}, {}),
    "examples/swiglu_ffn.wsp": ({"T": 32}, {}),
    # ragged: an empty sequence, a partial block, the whole of an S no multiple of the block
    "examples/attention_varlen.wsp": ({"B": 3, "H": 2, "S": 130},
                                      {"seq_lens": np.asarray([0, 70, 130], np.int32)}),
    "examples/attention_tiered.wsp": ({"B": 4, "H": 2, "S": 210},
                                      {"seq_lens": np.asarray([100, 0, 200, 30], np.int32)}),
    # sparse, read while the run writes it (the router's output drives the experts); 30
    # tokens: the last chunk of 16 is partial
    "examples/moe_extern.wsp": moe_data(),
    # top-k routing: each expert task reads the expert the route task wrote
    "examples/moe.wsp": topk_moe_data(),
    "examples/megakernel.wsp": ({"N": 5}, {}),
    "examples/llama_layer.wsp": llama_data(),
    "examples/worker_pool.wsp": ({"N": 7}, {}),
    # events, slots (slot_load of an element), `when` on slot(1) and query(ev), imports
    "tests/programs/events_slots_inline.wsp": ({"N": 3},
                                               {"counts": np.asarray([2, 0, 1], np.int32)}),
    "tests/programs/moe_sparse.wsp": moe_sparse_data(),
    "tests/programs/ragged_attention.wsp": ({"B": 3, "S": 192},
                                            {"seq_lens": np.asarray([0, 65, 2000], np.int32)}),
    "tests/programs/spec_first_program.wsp": ({"B": 2, "T": 2}, {}),
    # edges named one by one (`after`): the expander's waves wait on the order tensors' boxes
    "tests/programs/named_edges.wsp": ({"N": 4}, {}),
    "tests/programs/spec_megakernel.wsp": ({"N": 4}, {}),
    "tests/programs/spec_schedules.wsp": ({"B": 2}, {}),
    "tests/programs/rope_rotate_half.wsp": ({"T": 3}, {}),
    "tests/programs/embedding_gather.wsp": ({"T": 3}, {}),
}
# errors_demo.wsp is wrong on purpose; lib_shared.wsp only declares a const for an import
# rmsnorm_task_graph.wsp is rmsnorm.wsp with task-graph knobs, which the Ascend tree only warns
# about: its plan is rmsnorm.wsp's, covered above
# the multi-device examples: meshes sized by a sym (bound by --mesh), whose Ascend trees run one
# process per rank (this harness compares one device's streams); the per-rank expander and HCCL
# are covered by tests/ascend/test_hccl.py, their kernels by test_aicore.py, their runs by
# tests/test_mesh_examples.py
MESH_EXAMPLES = {f"examples/{n}.wsp" for n in ("tp_mlp", "tp_attention", "sp_rmsnorm", "ep_moe",
                                               "mesh_decoder_layer")}
# tp_csp_ffn.wsp is a pipe on a mesh, which ascend_npu refuses on several devices
# (tests/test_mesh_csp.py); its runs are tests/test_mesh_examples.py's
SKIPPED = {"examples/errors_demo.wsp", "tests/programs/lib_shared.wsp",
           "tests/programs/rmsnorm_task_graph.wsp", "examples/tp_csp_ffn.wsp", *MESH_EXAMPLES}


def test_every_program_is_covered():
    files = {str(p.relative_to(ROOT)) for d in ("examples", "tests/programs")
             for p in (ROOT / d).glob("*.wsp")}
    assert files - SKIPPED == set(PROGRAMS)


def compare(harness, m, schedule, syms, arrays, capacity=64, blocks=3):
    """Both streams of one schedule; asserts they agree and that the waves are right."""
    plan, files = expander.plan_files(m, schedule)
    cpu, npu = harness.streams(m, schedule, plan, files["include/wsp_plan_data.h"], syms,
                               arrays, capacity=capacity, blocks=blocks)
    assert npu.end == cpu.end
    for i, (a, b) in enumerate(zip(cpu.tasks, npu.tasks)):
        assert b == a, f"task {i} differs"
    assert len(npu.tasks) == len(cpu.tasks)
    assert npu.flushes == cpu.flushes
    check_waves(m.schedule(schedule), cpu, npu, blocks)
    return cpu, npu


def check_waves(s, cpu, npu, blocks):
    """Each task's wave is one past the largest wave of the tasks of its segment it must
    follow (0 without any); its core is its dispatcher's block when pinned, else its place
    among its wave's tasks in enumeration order, dealt round robin over the blocks."""
    streams = "streams" in s.given
    pinned = "dispatch" in s.given and s.dispatch.name != "work_steal"
    for seg in segments(len(cpu.tasks), cpu.flushes):
        for b in seg:
            need = 0
            for a in range(seg.start, b):
                if must_precede(cpu.tasks[a], cpu.tasks[b], cpu.paths[a], cpu.paths[b]) or \
                        (streams and stream_of(cpu.tasks[a]) == stream_of(cpu.tasks[b])):
                    need = max(need, npu.waves[a][0] + 1)
            assert npu.waves[b][0] == need, f"task {b}: wave {npu.waves[b][0]}, needs {need}"
            core = npu.waves[b][1]
            assert 0 <= core < blocks
            if pinned:
                disp = int(cpu.tasks[b].split(" disp=")[1].split()[0])
                assert core == disp % blocks
            else:
                dealt = sum(npu.waves[a][0] == npu.waves[b][0] for a in range(seg.start, b))
                assert core == dealt % blocks, f"task {b}: core {core}, dealt {dealt}"


@pytest.mark.parametrize("path", sorted(PROGRAMS))
def test_expander_matches_cpu_sim(harness, path):
    syms, arrays = PROGRAMS[path]
    m = ir_of(ROOT / path)
    for s in m.schedules:
        cpu, _ = compare(harness, m, s.name, syms, arrays)
        assert cpu.end[0] == "ok" or path.endswith("ragged_attention.wsp"), cpu.end
        assert cpu.tasks, f"{path} {s.name}: no task enumerated"


@pytest.mark.parametrize("path", ["examples/attention_varlen.wsp", "examples/moe_extern.wsp",
                                  "examples/moe.wsp",
                                  "examples/worker_pool.wsp", "tests/programs/events_slots_inline.wsp",
                                  "examples/gemm.wsp"])
def test_small_segments(harness, path):
    """Segments of 5 tasks: the expander stops and resumes mid-loop and mid-coroutine."""
    syms, arrays = PROGRAMS[path]
    m = ir_of(ROOT / path)
    cpu, _ = compare(harness, m, m.schedules[0].name, syms, arrays, capacity=5, blocks=2)
    assert len(cpu.flushes) >= len(cpu.tasks) // 5 > 0


@pytest.mark.parametrize("blocks", [1, 2, 7, 64])
@pytest.mark.parametrize("path, schedule", [("examples/gemm.wsp", "main"),
                                            ("examples/megakernel.wsp", "per_tile"),
                                            ("tests/programs/spec_schedules.wsp", "hashed")])
def test_the_index_of_runs_for_any_block_count(harness, path, schedule, blocks):
    """The index of runs (expand_driver's index_ok: every task once, in the run of its wave and
    block, in enumeration order) and each task's block, dealt or pinned, for one block, a few,
    and more blocks than a wave has tasks (empty runs)."""
    syms, arrays = PROGRAMS[path]
    m = ir_of(ROOT / path)
    compare(harness, m, schedule, syms, arrays, capacity=16, blocks=blocks)


def test_data_dependent_reads_end_segments(harness):
    """moe: each route chunk reads the Indptr element the previous chunk writes, and the
    expert loop reads what the routes wrote, so segments end right there (and only there)."""
    syms, arrays = PROGRAMS["examples/moe_extern.wsp"]
    m = ir_of(ROOT / "examples/moe_extern.wsp")
    cpu, _ = compare(harness, m, "main", syms, arrays)
    routes = [i for i, t in enumerate(cpu.tasks) if "call=route" in t]
    assert len(routes) == 2
    # chunk 1 reads Indptr[16], which chunk 0 wrote; the experts of tokens 16.. read what
    # chunk 1 wrote (tokens 0..15 read chunk 0's entries, finished with the first segment)
    second_half = next(i for i, t in enumerate(cpu.tasks)
                       if "call=expert" in t and int(t.split("coords=")[1].split(",")[0]) >= 16)
    assert cpu.flushes == [routes[1], second_half]


def test_topk_routing_ends_one_segment(harness):
    """moe: the first expert task reads Experts[0, 0], which route 0 writes, so the segment
    ends there; the route tasks have all run by then, so no later read ends another (the
    segments hold all 66 tasks)."""
    syms, arrays = PROGRAMS["examples/moe.wsp"]
    m = ir_of(ROOT / "examples/moe.wsp")
    cpu, _ = compare(harness, m, "main", syms, arrays, capacity=128)
    routes = [i for i, t in enumerate(cpu.tasks) if "call=route" in t]
    first_expert = next(i for i, t in enumerate(cpu.tasks) if "call=expert" in t)
    assert routes == [0, 1] and cpu.flushes == [first_expert]


def test_bad_ragged_length_is_the_same_error(harness):
    """A sequence longer than S: the same check fails at the same coordinates and values,
    after the same tasks."""
    m = ir_of(ROOT / "examples/attention_varlen.wsp")
    cpu, npu = compare(harness, m, "main", {"B": 2, "H": 1, "S": 128},
                       {"seq_lens": np.asarray([64, 130], np.int32)})
    assert cpu.end[0] == "check" and cpu.end[4:] == (130, 128), cpu.end
    assert "b=1" in cpu.end[3]


def test_bad_indptr_is_the_same_error(harness):
    m = ir_of(ROOT / "tests/programs/moe_sparse.wsp")
    syms, arrays = moe_sparse_data()
    arrays = dict(arrays, indptr=np.asarray([0, 2, 1, 5, 6, 7], np.int32))
    cpu, _ = compare(harness, m, "main", syms, arrays)
    assert cpu.end[0] == "check" and "must not decrease" in cpu.end[1], cpu.end


def test_query_sees_the_segment(harness):
    """events_slots_inline: `query(ev)` right after `synchronize(ev)` holds (the sync ended the
    segment), and with counts[0] = 0 the `when` branch is skipped."""
    m = ir_of(ROOT / "tests/programs/events_slots_inline.wsp")
    for counts, fills in (([2, 0, 1], 6), ([0, 1, 1], 5)):
        cpu, _ = compare(harness, m, "main", {"N": 3}, {"counts": np.asarray(counts, np.int32)})
        assert sum("call=fill" in t for t in cpu.tasks) == fills


# ---------------------------------------------------------------------------------------------
# CSP corners beyond the examples (programs of tests/backends/test_ref_csp.py's kind)

HEAD = """\
sym N
input  X: f32[N, 4, 8]
output Y: f32[N, 4, 8]
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
kernel inc(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x + 1.0) }
"""

CSP_CASES = {
    "pipe_in_a_seq_loop": """
        channel q: Tile[4, 8, f32], depth = 1
        workload w() {
            for r in P.seq(2) {
                pipe {
                    process p { for i in P.seq(N) { send(q, copy[r, i](x = X[i], y = q)) } }
                    process c { consume(q) as t { inc[r, t](x = t, y = Y[t.index]) } }
                }
            }
        }
        schedule main = w().dispatch(round_robin(2))
    """,
    "rendezvous_and_replicas": """
        channel q: Tile[4, 8, f32], depth = 0
        workload w() {
            pipe {
                process p { for i in P.seq(N) { send(q, copy[i](x = X[i], y = q)) } }
                process c * 3 { consume(q) as t { inc[t, c.id](x = t, y = Y[t.index]) } }
            }
        }
        schedule main = w().streams(2)
    """,
    "nested_pipe_in_a_consume": """
        channel a: Tile[4, 8, f32], depth = 2
        channel b: Tile[4, 8, f32], depth = 1
        workload w() {
            pipe {
                process p { for i in P(N) { send(a, copy[i](x = X[i], y = a)) } }
                process c {
                    consume(a) as t {
                        pipe {
                            process q { send(b, inc[t](x = t, y = b)) }
                            process r { consume(b) as u { copy[t](x = u, y = Y[t.index]) } }
                        }
                    }
                }
            }
        }
        schedule main = w()
    """,
    "record_synchronize_across_processes": """
        channel q, depth = 2
        event ev
        workload w() {
            pipe {
                process p {
                    for i in P.seq(N) {
                        copy[i](x = X[i], y = Y[i])
                        record(ev)
                        send(q, inc[i](x = X[i], y = Y[i]))
                    }
                }
                process c { consume(q) as t { synchronize(ev)
                                              copy[t](x = X[t.index], y = Y[t.index]) } }
            }
        }
        schedule main = w()
    """,
    "a_pipe_in_each_replica_at_once": """
        channel go, depth = 2
        workload w() {
            pipe {
                process k { for i in P.seq(N) { send(go, copy[i](x = X[i], y = Y[i])) } }
                process q * 2 {
                    consume(go) as g {
                        pipe { process a { inc[g](x = X[g.index], y = Y[g.index]) } }
                    }
                }
            }
        }
        schedule main = w()
    """,
    "deadlock_of_full_buffers": """
        channel a: Tile[4, 8, f32], depth = 1
        channel b: Tile[4, 8, f32], depth = 1
        workload w() {
            pipe {
                process p {
                    for i in P.seq(N) { send(a, copy[i](x = X[i], y = a)) }
                    for i in P.seq(N) { send(b, copy[i](x = X[i], y = b)) }
                }
                process c {
                    consume(b) as u { copy[u](x = u, y = Y[u.index]) }
                    consume(a) as t { copy[t](x = t, y = Y[t.index]) }
                }
            }
        }
        schedule main = w()
    """,
}


@pytest.mark.parametrize("name", sorted(CSP_CASES))
def test_csp_corners(harness, name):
    m = ir_of_text(HEAD + CSP_CASES[name])
    for capacity in (64, 3):
        cpu, _ = compare(harness, m, "main", {"N": 4}, {}, capacity=capacity)
        if name.startswith("deadlock"):
            assert cpu.end[0] == "deadlock" and len(cpu.end[1]) == 2, cpu.end
        else:
            assert cpu.end == ("ok",) and cpu.tasks


def test_a_channel_opened_twice_is_the_same_error(harness):
    """A pipe inside a replicated process: the second replica opens the open channel."""
    m = ir_of_text(HEAD + """
        channel c: Tile[4, 8, f32], depth = 1
        channel go, depth = 1
        workload w() {
            pipe {
                process k { send(go, copy(x = X[0], y = Y[0])) }
                process q * 2 {
                    consume(go) as g { }
                    pipe {
                        process a { send(c, copy(x = X[0], y = c)) }
                        process b { consume(c) as t { copy[t](x = t, y = Y[1]) } }
                    }
                }
            }
        }
    """)
    cpu, _ = compare(harness, m, m.schedules[0].name, {"N": 2}, {})
    assert cpu.end[0] == "reopen" and cpu.end[3] == "c", cpu.end


def test_columns_that_turn_out_strided_stop_the_run(harness):
    """A tile's column stride that only the bound symbols decide: 1 runs as on cpu_sim; more
    is an error before the task (the AICore's WspTile has no column stride)."""
    m = ir_of_text("""
        sym N, M
        input  X: f32[N, 4, 8, M]
        output Y: f32[N, 4, 8]
        kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
        workload w() { for i in P(N) { copy[i](x = X[i, :, :, 0], y = Y[i]) } }
        schedule main = w()
    """)
    cpu, npu = compare(harness, m, "main", {"N": 2, "M": 1}, {})
    assert cpu.end == ("ok",) and len(cpu.tasks) == 2
    plan, files = expander.plan_files(m, "main")
    _, npu = harness.streams(m, "main", plan, files["include/wsp_plan_data.h"], {"N": 2, "M": 3}, {})
    assert npu.tasks == [] and npu.end == ("error", 5, 0, 0, 0)  # WSP_ERR_LAYOUT, task 0


DIVIDE = """\
    sym N
    input  L: i32[4]
    input  X: f32[4, 8]
    output Y: f32[4, 8]
    kernel put(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]], s: Scalar[i32]) { store(y, x) }
    workload w() {
        for b in P(4) {
            put(x = X[N % L[b] % 4], y = Y[b], s = ceildiv(N, L[b]) + N / (L[b] - 1))
        }
    }
"""


def test_a_zero_divisor_is_the_same_error(harness):
    """Integer division in scalar expressions (language.md section 6): the same floors on
    both sides, and a divisor that is zero at run time is the same failed check, after the
    same tasks (cpu_sim and ref: tests/backends/test_scalar_division.py)."""
    m = ir_of_text(DIVIDE)
    x = np.zeros((4, 8), np.float32)
    cpu, _ = compare(harness, m, m.schedules[0].name, {"N": 7}, {"L": np.asarray([3, -2, 5, 2], np.int32),
                                                   "X": x})
    assert cpu.end == ("ok",) and len(cpu.tasks) == 4
    for lens, divisor, expr in (([3, 0, 5, 2], "L[b]", "N % L[b]"),
                                ([3, 1, 5, 2], "L[b] - 1", "N / (L[b] - 1)")):
        cpu, _ = compare(harness, m, m.schedules[0].name, {"N": 7}, {"L": np.asarray(lens, np.int32),
                                                       "X": x})
        line = textwrap.dedent(DIVIDE).splitlines()[7]
        at = (8, line.index(divisor) + 1)
        assert cpu.end[:4] == ("check", f"division by zero in `{expr}`: `{divisor}` must not "
                               "be zero", at, "b=1"), cpu.end
        assert len(cpu.tasks) == 1


WIDE = """\
    input  L: i64[4]
    input  X: f32[4, 8]
    output Y: f32[4, 8]
    kernel put(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]], a: Scalar[i64], b: Scalar[i64],
               c: Scalar[i64]) { store(y, x) }
    workload w() {
        for b in P(4) {
            put(x = X[b], y = Y[b], a = L[0] / L[b], b = L[0] % L[b], c = ceildiv(L[0], L[b]))
        }
    }
"""


def test_int64_min_divided_by_minus_one_is_the_same_value(harness):
    """The one quotient past int64 wraps on both sides, and traps on neither (C's `/` does)."""
    m = ir_of_text(WIDE)
    lens = np.asarray([-2**63, -1, 3, -7], np.int64)
    cpu, _ = compare(harness, m, m.schedules[0].name, {}, {"L": lens, "X": np.zeros((4, 8), np.float32)})
    assert cpu.end == ("ok",) and len(cpu.tasks) == 4


OVERFLOW = """\
    sym S
    input  L: i64[4]
    input  X: f32[4, 8]
    output Y: f32[4, 8]
    kernel put(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]], s: Scalar[i64]) { store(y, x) }
    workload w() {
        for b in P(4) {
            put(x = X[b], y = Y[b], s = abs(L[b]) + L[b] * S - -L[b])
        }
    }
"""


def test_an_overflow_is_the_same_error(harness):
    """`+`, `-`, `*`, negation and `abs` over run-time values past int64 (language.md section
    6): the same failed check on both sides, after the same tasks, and exact values up to
    int64's ends (cpu_sim and ref: tests/backends/test_scalar_overflow.py)."""
    m = ir_of_text(OVERFLOW)
    x = np.zeros((4, 8), np.float32)
    ok = np.asarray([3, -2**61, 2**61 - 1, -1], np.int64)
    cpu, _ = compare(harness, m, m.schedules[0].name, {"S": 1}, {"L": ok, "X": x})
    assert cpu.end == ("ok",) and len(cpu.tasks) == 4
    line = textwrap.dedent(OVERFLOW).splitlines()[7]
    for s, v, expr, named in ((1, -2**63, "abs(L[b])", "`L[b]`"),
                              (3, 2**62, "L[b] * S", "`L[b]` and `S`"),
                              (1, 2**62, "abs(L[b]) + L[b] * S", "`abs(L[b])` and `L[b] * S`"),
                              (0, 3 * 2**61, "abs(L[b]) + L[b] * S - -L[b]",
                               "`abs(L[b]) + L[b] * S` and `-L[b]`")):
        lens = np.asarray([3, v, 5, 2], np.int64)
        cpu, _ = compare(harness, m, m.schedules[0].name, {"S": s}, {"L": lens, "X": x})
        at = (8, line.index(expr) + 1)
        assert cpu.end[:4] == ("check", f"`{expr}` overflows int64 with {named}", at, "b=1"), \
            cpu.end
        assert len(cpu.tasks) == 1


FLOAT_SCALARS = """\
    input  L: i64[7]
    input  X: f32[7, 8]
    output Y: f32[7, 8]
    kernel put(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]], a: Scalar[f32], h: Scalar[f16],
               b: Scalar[bf16]) { store(y, x) }
    workload w() {
        for i in P(7) {
            put(x = X[i], y = Y[i], a = L[i], h = L[i], b = L[i])
        }
    }
"""


def test_float_scalars_reach_the_aicore_rounded(harness):
    """A float scalar given by an integer expression: the expander puts the f32 bits of its
    value rounded once to the parameter's dtype in the record (the AI Core has no double), the
    word `abi.scalar_word` gives cpu_sim's value: halfway cases of f16 and bf16, f16's overflow
    to inf, 2^24 + 1 in f32, int64's ends."""
    m = ir_of_text(FLOAT_SCALARS)
    lens = np.asarray([2049, 65519, 65520, 2**24 + 1, -(2**63), 2**63 - 1, 257 * 2**20 + 1],
                      np.int64)
    cpu, npu = compare(harness, m, m.schedules[0].name, {}, {"L": lens,
                                                             "X": np.zeros((7, 8), np.float32)})
    assert cpu.end == ("ok",) and len(npu.tasks) == 7
    words = [[int(w) for w in t.rsplit(" scal=", 1)[1].split(",")] for t in npu.tasks]
    assert words[0] == [scalar_word("f32", 2049.0), scalar_word("f16", 2049.0),
                        scalar_word("bf16", 2049.0)]
    assert np.uint32(words[2][1]).view(np.float32) == np.inf  # 65520 overflows f16
    assert np.uint32(words[6][2]).view(np.float32) == 2.0**28 + 2.0**21  # rounded up, once
