"""The `dead-tasks` pass (ptowsp/ir/passes/dead_tasks.py): golden IR before and after,
`ir.verify` after it, the same object when nothing changes, idempotence, chains removed to a
fixed point with their kernels and scratch tensors, and every task it must keep: one writing an
output, a scratch read by a later task or by an element read, one with a run-time view check,
one in a CSP pipe. Results on ref are unchanged (fewer tasks run)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.ref.interp import execute
from ptowsp.ir import nodes as N
from ptowsp.ir import visit as V
from ptowsp.ir.passes import optimize
from ptowsp.ir.passes.dead_tasks import dead_tasks
from ptowsp.ir.printer import print_module
from ptowsp.ir.verify import verify


def ir(text: str) -> N.Module:
    return ptowsp.parse(textwrap.dedent(text), "t.wsp").ir


def eliminated(m: N.Module) -> N.Module:
    out = dead_tasks(m)
    verify(out)
    assert dead_tasks(out) is out  # idempotent
    return out


def golden_pair(golden, name: str, m: N.Module) -> N.Module:
    after = eliminated(m)
    golden(f"dead_tasks_{name}.ir", "; before\n" + print_module(m) + "\n; after dead-tasks\n"
           + print_module(after))
    return after


def texts(m: N.Module) -> list[str]:
    return [t.text for s in m.schedules for t in V.tasks(s.body)]


def names(items) -> set[str]:
    return {x.name for x in items}


def run(m: N.Module, arrays: dict | None = None, syms: dict | None = None):
    rng = np.random.default_rng(5)
    if arrays is None:
        arrays = {"X": rng.standard_normal((32, 16)).astype(np.float32)}
    out, info = execute(m, None, syms or {}, arrays)
    return out, info["task_count"]


def same_results(m: N.Module, after: N.Module, arrays=None, syms=None) -> tuple[int, int]:
    (a, na), (b, nb) = run(m, arrays, syms), run(after, arrays, syms)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    return na, nb


HEAD = """
    module dead
    input X: f32[32, 16]
    scratch S1: f32[32, 16]
    scratch S2: f32[32, 16]
    scratch S3: f32[32, 16]
    output Y: f32[32, 16]
    kernel a(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
    kernel b(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x + 1.0) }
    kernel c(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, exp(x)) }
    kernel live(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x - 3.0) }
    workload w() {
BODY
        for t in P(4) { live[t](x = X[t*8 : t*8 + 8, :], y = Y[t*8 : t*8 + 8, :]) }
    }
    schedule main = w()
"""


def prog(body: str, head: str = HEAD) -> N.Module:
    return ir(head.replace("BODY", textwrap.indent(textwrap.dedent(body), "        ")))


def test_dead_scratch_writer_removed(golden):
    m = prog("""
        for t in P(4) { a[t](x = X[t*8 : t*8 + 8, :], y = S1[t*8 : t*8 + 8, :]) }
    """)
    after = golden_pair(golden, "scratch", m)
    assert texts(after) == ["live[t]"]
    assert names(after.kernels) == {"live"}  # a, b, c: no task calls them
    assert names(after.tensors) == {"X", "Y"}  # the scratch tensors nothing touches
    assert same_results(m, after) == (8, 4)


def test_chain_removed_to_a_fixed_point(golden):
    # a -> S1 -> b -> S2 -> c -> S3, nobody reads S3: c is dead, then b, then a; the loops and
    # the sequential block they leave empty go too
    m = prog("""
        for t in P(4) { a[t](x = X[t*8 : t*8 + 8, :], y = S1[t*8 : t*8 + 8, :]) }
        sequential {
            for t in P.seq(4) { b[t](x = S1[t*8 : t*8 + 8, :], y = S2[t*8 : t*8 + 8, :]) }
            c[0](x = S2[0:8, :], y = S3[0:8, :])
        }
    """)
    after = golden_pair(golden, "chain", m)
    assert texts(after) == ["live[t]"] and len(after.schedules[0].body) == 1
    assert names(after.kernels) == {"live"} and names(after.tensors) == {"X", "Y"}
    assert same_results(m, after) == (13, 4)


def test_when_left_empty_removed(golden):
    # both branches' tasks are dead: the `when`, then its loop, go too
    m = prog("""
        for t in P(4) {
            when t < 2 { a[t](x = X[t*8 : t*8 + 8, :], y = S1[t*8 : t*8 + 8, :]) }
            otherwise { b[t](x = X[t*8 : t*8 + 8, :], y = S2[t*8 : t*8 + 8, :]) }
        }
    """)
    after = golden_pair(golden, "when", m)
    assert texts(after) == ["live[t]"] and len(after.schedules[0].body) == 1
    assert same_results(m, after) == (8, 4)


KEEP = {
    # the chain ends in an output: every task is live
    "output": ("""
        for t in P(4) { a[t](x = X[t*8 : t*8 + 8, :], y = S1[t*8 : t*8 + 8, :]) }
        for t in P(4) { b[t](x = S1[t*8 : t*8 + 8, :], y = Y[t*8 : t*8 + 8, :]) }
    """, ["a[t]", "b[t]"]),
    # a later task reads the scratch (a reader in another statement, in a sequential)
    "read_later": ("""
        sequential {
            a[0](x = X[0:8, :], y = S1[0:8, :])
            combine { b[0](x = S1[0:8, :], y = Y[8:16, :]) }
        }
    """, ["a[0]", "b[0]"]),
}


@pytest.mark.parametrize("case", sorted(KEEP))
def test_kept(golden, case):
    body, kept = KEEP[case]
    m = prog(body)
    after = eliminated(m)
    assert after.schedules is m.schedules  # every task kept (unused kernels and scratch go)
    assert texts(m)[:-1] == kept
    golden(f"dead_tasks_keep_{case}.ir", print_module(m))
    same_results(m, after)


def test_kept_scratch_read_by_an_element_read(golden):
    # C and E are scratch, written by tasks and read as a loop extent (`P(C[0, 0])`) and in a
    # predicate (`when E[b, 0] > 2`): their writers are live; the writer of D, which nobody
    # reads, is not
    m = ir("""
        module reads
        input N: i32[1, 1]
        input X: f32[32, 16]
        scratch C: i32[1, 1]
        scratch D: i32[1, 1]
        scratch E: i32[2, 1]
        output Y: f32[32, 16]
        kernel count(n: In[Tile[1, 1, i32]], c: Out[Tile[1, 1, i32]]) { store(c, n + 1) }
        kernel k(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
        workload w() {
            count(n = N, c = C)
            count(n = N, c = D)
            for b in P(2) { count[b](n = N, c = E[b : b + 1, :]) }
            for j in P(C[0, 0]) { k[j](x = X[j*8 : j*8 + 8, :], y = Y[j*8 : j*8 + 8, :]) }
            for b in P(2) {
                when E[b, 0] > 2 { k[b](x = X[b*8 + 16 : b*8 + 24, :], y = Y[b*8 + 16 : b*8 + 24, :]) }
            }
        }
        schedule main = w()
    """)
    after = golden_pair(golden, "element_read", m)
    assert texts(after) == ["count", "count[b]", "k[j]", "k[b]"]
    assert {"C", "E"} <= names(after.tensors) and "D" not in names(after.tensors)
    x = np.random.default_rng(1).standard_normal((32, 16)).astype(np.float32)
    # 4 tasks count, n + 1 tasks k[j], 2 tasks k[b] when n + 1 > 2
    for n, tasks in ((1, (6, 5)), (2, (9, 8))):
        arrays = {"N": np.array([[n]], np.int32), "X": x}
        assert same_results(m, after, arrays) == tasks


CHECKED = """
    module checked
    sym T = 32
    input X: f32[32, 16]
    scratch S: f32[T, 16]
    output Y: f32[32, 16]
    kernel a(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
    workload w() {
        for t in P(4) { a[t](x = X[t*8 : t*8 + 8, :], y = S[t*8 : t*8 + 8, :]) }
        for t in P(4) { a[t](x = X[t*8 : t*8 + 8, :], y = Y[t*8 : t*8 + 8, :]) }
    }
    schedule main = w()
"""


def test_kept_with_a_run_time_view_check(golden):
    # S's rows are T: `S[t*8 : t*8 + 8]` is checked at run time; the task stays (removing it
    # would hide the error a too small T reports)
    mod = ptowsp.parse(textwrap.dedent(CHECKED), "checked.wsp")
    m = mod.ir
    t0 = V.tasks(m.schedules[0].body)[0]
    assert any(a.checks for a in t0.args if isinstance(a, N.TileArg))
    assert dead_tasks(m) is m
    golden("dead_tasks_keep_checked.ir", print_module(m))
    # the error stays at every level
    x = np.zeros((32, 16), np.float32)
    for level in (0, 3):
        with pytest.raises(ptowsp.WspError, match="must be at most T"):
            mod.compile("ref", opt_level=level).run({"T": 16}, X=x)


def test_kept_in_a_pipe(golden):
    # the consumer's task writes a scratch nobody reads (a constant box: no view check), and
    # the producer's only reader is the channel: both stay (they carry and hold items)
    m = ir("""
        module piped
        input X: f32[32, 16]
        scratch S: f32[32, 16]
        output Y: f32[32, 16]
        channel c: Tile[8, 16, f32], depth = 2
        kernel a(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
        workload w() {
            pipe {
                process prod {
                    for i in P.seq(4) { send(c, a[i](x = X[i*8 : i*8 + 8, :], y = c)) }
                }
                process cons {
                    consume(c) as t { a[t](x = t, y = S[0:8, :]) }
                }
            }
            for t in P(4) { a[t](x = X[t*8 : t*8 + 8, :], y = Y[t*8 : t*8 + 8, :]) }
        }
        schedule main = w()
    """)
    assert not any(a.checks for t in V.tasks(m.schedules[0].body) for a in t.args)
    assert dead_tasks(m) is m
    golden("dead_tasks_keep_pipe.ir", print_module(m))
    same_results(m, m)


def test_nothing_to_do_is_the_same_object():
    for name in ("rmsnorm", "swiglu_ffn", "moe", "moe_extern", "attention_varlen", "megakernel"):
        mod = ptowsp.load(f"examples/{name}.wsp").ir
        assert dead_tasks(mod) is mod, name


def test_in_the_pipeline_and_the_python_class():
    from ptowsp.passes import DeadTaskPass, PassManager

    m = prog("for t in P(4) { a[t](x = X[t*8 : t*8 + 8, :], y = S1[t*8 : t*8 + 8, :]) }")
    pm = PassManager([DeadTaskPass()], verify_each=True)
    assert texts(pm.run(m)) == ["live[t]"]
    assert pm.timings[0].name == "dead-tasks" and pm.timings[0].changed
    o1, pm1 = optimize(m, 1, verify_each=True)
    assert texts(o1) == ["live[t]"] and [t.name for t in pm1.timings][-1] == "dead-tasks"
    assert texts(optimize(m, 0)[0]) == ["a[t]", "live[t]"]


def test_dead_task_under_a_run_time_when():
    # the dead task is under a predicate on an element read: it goes, the read and the `when`
    # (now empty) stay, and so does the live task of the other branch
    m = ir("""
        module guarded
        input L: i32[4, 1]
        input X: f32[32, 16]
        scratch S: f32[32, 16]
        output Y: f32[32, 16]
        kernel a(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
        workload w() {
            for b in P(4) {
                when L[b, 0] > 0 { a[b](x = X[b*8 : b*8 + 8, :], y = S[b*8 : b*8 + 8, :]) }
                otherwise { a[b](x = X[b*8 : b*8 + 8, :], y = Y[b*8 : b*8 + 8, :]) }
            }
        }
        schedule main = w()
    """)
    after = eliminated(m)
    (loop,) = after.schedules[0].body
    assert [type(x).__name__ for x in loop.body] == ["Read", "When"]
    (when,) = [x for x in loop.body if isinstance(x, N.When)]
    assert when.branches[0][1] == () and [t.text for t in when.otherwise] == ["a[b]"]
    assert "S" not in names(after.tensors)
    arrays = {"L": np.array([[1], [0], [3], [0]], np.int32),
              "X": np.random.default_rng(2).standard_normal((32, 16)).astype(np.float32)}
    assert same_results(m, after, arrays) == (4, 2)
