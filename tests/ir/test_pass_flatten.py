"""The `flatten` pass (ptowsp/ir/passes/flatten.py): golden IR before and after, `ir.verify`
after it, the same object when nothing changes, idempotence, and what it must keep: the order
of enumeration and every ordering a `sequential` block asks for (as pairs of tasks, closed
transitively), a `combine` that is a step of a `sequential`; results on ref unchanged."""

from __future__ import annotations

import textwrap

import numpy as np

import ptowsp
from ptowsp.backends.ref.interp import execute
from ptowsp.ir import nodes as N
from ptowsp.ir import visit as V
from ptowsp.ir.passes.flatten import flatten
from ptowsp.ir.printer import print_module
from ptowsp.ir.verify import verify


def ir(text: str) -> N.Module:
    return ptowsp.parse(textwrap.dedent(text), "t.wsp").ir


def flattened(m: N.Module) -> N.Module:
    out = flatten(m)
    verify(out)
    assert flatten(out) is out  # idempotent
    return out


def golden_pair(golden, name: str, m: N.Module) -> N.Module:
    after = flattened(m)
    golden(f"flatten_{name}.ir", "; before\n" + print_module(m) + "\n; after flatten\n"
           + print_module(after))
    return after


def order(stmts) -> set[tuple[str, str]]:
    """Every (before, after) pair of task texts that a `sequential` block orders, closed
    transitively (P.seq loops order their iterations the same before and after: not modelled)."""
    pairs = set()
    for st in V.walk(stmts):
        if isinstance(st, N.Block) and st.kind == "sequential":
            steps = [[t.text for t in V.tasks((x,))] for x in st.body]
            for i, a in enumerate(steps):
                for b in steps[i + 1:]:
                    pairs |= {(x, y) for x in a for y in b}
    while True:
        more = {(a, d) for a, b in pairs for c, d in pairs if b == c} - pairs
        if not more:
            return pairs
        pairs |= more


def texts(m: N.Module) -> list[str]:
    return [t.text for s in m.schedules for t in V.tasks(s.body)]


def blocks(m: N.Module) -> list[str]:
    return [st.kind for s in m.schedules for st in V.walk(s.body) if isinstance(st, N.Block)]


def same_results(m: N.Module, after: N.Module) -> None:
    x = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    for s in m.schedules:
        (a, ia), (b, ib) = execute(m, s.name, {}, {"X": x}), execute(after, s.name, {}, {"X": x})
        assert ia["task_count"] == ib["task_count"]
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


HEAD = """
    module blocks
    input X: f32[32, 16]
    output Y: f32[32, 16]
    output Z: f32[32, 16]
    kernel a(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
    kernel b(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x + 1.0) }
    workload w() {
BODY
    }
    schedule main = w()
"""


def prog(body: str) -> N.Module:
    return ir(HEAD.replace("BODY", textwrap.indent(textwrap.dedent(body), "        ")))


CASES = {
    # combine in combine in combine: every task joins the schedule body
    "nested_combine": """
        combine {
            a[0](x = X[0:8, :], y = Y[0:8, :])
            combine {
                b[0](x = Y[0:8, :], y = Z[0:8, :])
                combine { a[1](x = X[8:16, :], y = Y[8:16, :]) }
            }
        }
    """,
    # sequential { sequential { a; b }; c }: three steps
    "seq_in_seq": """
        sequential {
            sequential {
                a[2](x = X[16:24, :], y = Y[16:24, :])
                b[2](x = Y[16:24, :], y = Y[16:24, :])
            }
            b[3](x = Y[16:24, :], y = Z[16:24, :])
        }
    """,
    # a combine that is a step of a sequential stays; a one-step sequential is its step
    "combine_in_seq": """
        sequential {
            combine {
                a[4](x = X[24:32, :], y = Y[24:32, :])
                b[4](x = X[24:32, :], y = Z[24:32, :])
            }
            sequential { b[5](x = Y[24:32, :], y = Z[24:32, :]) }
        }
    """,
    # one-statement blocks in a loop body, a branch, and around a loop
    "one_statement": """
        for t in P.seq(2) {
            sequential { a[t](x = Z[t*8 : t*8 + 8, :], y = Z[t*8 : t*8 + 8, :]) }
        }
        combine {
            for t in P(2) {
                combine { b[t](x = X[t*8 : t*8 + 8, :], y = Y[t*8 : t*8 + 8, :]) }
            }
        }
        sequential { }
    """,
}

EXPECT = {  # (kinds of the blocks left, task order)
    "nested_combine": ([], ["a[0]", "b[0]", "a[1]"]),
    "seq_in_seq": (["sequential"], ["a[2]", "b[2]", "b[3]"]),
    "combine_in_seq": (["sequential", "combine"], ["a[4]", "b[4]", "b[5]"]),
    "one_statement": ([], ["a[t]", "b[t]"]),
}


def test_cases(golden):
    for name, body in CASES.items():
        m = prog(body)
        after = golden_pair(golden, name, m)
        assert after is not m, name
        kinds, order_ = EXPECT[name]
        assert blocks(after) == kinds, name
        assert texts(after) == texts(m) == order_, name  # enumeration order kept
        assert order(after.schedules[0].body) == order(m.schedules[0].body), name
        same_results(m, after)


def test_seq_in_seq_is_three_steps():
    after = flattened(prog(CASES["seq_in_seq"]))
    (seq,) = after.schedules[0].body
    assert seq.kind == "sequential" and [t.text for t in seq.body] == ["a[2]", "b[2]", "b[3]"]
    assert order(after.schedules[0].body) == {("a[2]", "b[2]"), ("a[2]", "b[3]"),
                                              ("b[2]", "b[3]")}


def test_combine_in_seq_keeps_its_tasks_unordered():
    after = flattened(prog(CASES["combine_in_seq"]))
    pairs = order(after.schedules[0].body)
    assert pairs == {("a[4]", "b[5]"), ("b[4]", "b[5]")}  # not a[4] -> b[4]


def test_deeper_nesting_in_one_module_and_pipes():
    """All cases at once, blocks in branches, and a pipe: combine blocks in process and consume
    bodies join them (regression: a process body was not flattened, `rewrite_stmts` never
    hands a pipe's processes to the pass)."""
    body = "\n".join(textwrap.dedent(b) for b in CASES.values()) + """
        sequential {
            combine { combine { a[6](x = X[0:8, :], y = Y[0:8, :]) } }
            sequential { sequential { b[6](x = Y[0:8, :], y = Z[0:8, :]) } }
            sequential { combine { sequential {
                a[7](x = X[8:16, :], y = Y[8:16, :])
                b[7](x = Y[8:16, :], y = Z[8:16, :])
            } } }
        }
    """
    m = prog(body)
    after = flattened(m)
    assert texts(after) == texts(m)
    assert order(after.schedules[0].body) == order(m.schedules[0].body)
    same_results(m, after)

    pipes = ir("""
        module pipes
        input X: f32[32, 16]
        output Y: f32[32, 16]
        output Z: f32[32, 16]
        channel c: Tile[8, 16, f32], depth = 2
        kernel a(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
        kernel b(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x + 1.0) }
        workload w() {
            pipe {
                process prod {
                    combine {
                        for i in P.seq(3) { send(c, a[i](x = X[i*8 : i*8 + 8, :], y = c)) }
                        b[9](x = X[24:32, :], y = Z[24:32, :])
                    }
                }
                process cons {
                    consume(c) as t {
                        combine {
                            b[t](x = t, y = Y[t.index*8 : t.index*8 + 8, :])
                            combine { a[t](x = t, y = Z[t.index*8 : t.index*8 + 8, :]) }
                        }
                    }
                }
            }
        }
        schedule main = w()
    """)
    after = flattened(pipes)
    assert blocks(after) == []
    (pipe,) = after.schedules[0].body
    prod, cons = pipe.processes
    assert [type(x).__name__ for x in prod.body] == ["Loop", "Task"]
    # (the Asserts: `t.index*8 + 8` over an item index is checked against int64)
    assert [type(x).__name__ for x in cons.body[0].body if type(x).__name__ != "Assert"] == \
        ["Task", "Task"]
    assert texts(after) == texts(pipes)
    same_results(pipes, after)


def test_nothing_to_do_is_the_same_object():
    m = prog("""
        sequential {
            a[0](x = X[0:8, :], y = Y[0:8, :])
            combine {
                b[0](x = Y[0:8, :], y = Z[0:8, :])
                a[1](x = X[8:16, :], y = Y[8:16, :])
            }
        }
        for t in P(2) { b[t](x = X[t*8 : t*8 + 8, :], y = Y[t*8 : t*8 + 8, :]) }
    """)
    assert flatten(m) is m
    for name in ("rmsnorm", "swiglu_ffn", "worker_pool"):
        mod = ptowsp.load(f"examples/{name}.wsp").ir
        assert flatten(mod) is mod, name


def test_the_python_class():
    from ptowsp.passes import FlattenCombinePass, PassManager

    pm = PassManager([FlattenCombinePass()], verify_each=True)
    out = pm.run(ptowsp.parse(textwrap.dedent(HEAD.replace("BODY", CASES["nested_combine"])),
                              "b.wsp"))
    assert blocks(out) == [] and pm.timings[0].name == "flatten" and pm.timings[0].changed
