"""Lowering of run-time values (`lower/`): element reads, ragged and sparse axes, `P.sel`,
`when` / `P.when`, slots; their shape in the IR, the checks and asserts with their messages and
spans, `verify` of the new nodes, and the printer (golden tests/golden/lower_dynamic.ir).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from ptowsp import sym
from ptowsp.diagnostics import InternalError, WspError
from ptowsp.frontend.checker import check_file, check_source
from ptowsp.ir import nodes as N
from ptowsp.ir.printer import print_module
from ptowsp.ir.verify import verify
from ptowsp.lower import lower

ROOT = Path(__file__).resolve().parents[2]

HEAD = """\
module t
sym N, B
input  X: f32[N, 4, 8]
input  Cnt: i32[N]
input  Ptr: i32[N + 1]
input  U: u32[4]
input  F: bool[N]
output Y: f32[N, 4, 8]
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) {
    store(y, x)
}
axis batch = DenseDyn(N)
axis tok = Ragged(batch, Cnt)
axis blk = Ragged(batch, ceildiv(Cnt[_], 4) - 1)
axis sp = Sparse(batch, Ptr, Cnt)
"""
LINE = HEAD.count("\n") + 2  # the line of the first statement of `body`


def lowered(body: str, extra: str = "") -> N.Module:
    text = HEAD + extra + "workload w() {\n" + textwrap.dedent(body).strip("\n") + "\n}\n"
    m = lower(check_source(text, "t.wsp"))
    verify(m)
    return m


def body(body: str, extra: str = "") -> tuple:
    return lowered(body, extra).schedules[0].body


def at(node) -> tuple[int, int]:
    return (node.span.line, node.span.col)


def messages(checks) -> list[str]:
    return [c.message for c in checks]


v = sym.var


# ---------------------------------------------------------------------------------------------
# Element reads


def test_read_in_a_loop_extent_goes_before_the_loop_with_an_assert():
    read, check, loop = body("for i in P(Cnt[0]) { copy[i](x = X[i], y = Y[i]) }")
    assert isinstance(read, N.Read) and (read.var, read.tensor, read.index) == (
        "Cnt@1", "Cnt", (sym.const(0),))
    assert messages(read.checks) == ["index `0` of `Cnt[0]` must be less than N"]
    assert at(read) == at(read.checks[0]) == (LINE, 12)  # the read `Cnt[0]`
    assert isinstance(check, N.Assert)
    assert check.check.message == "loop extent `Cnt[0]` must not be negative"
    assert (str(check.check.check), at(check.check)) == ("Cnt@1 >= 0", (LINE, 12))
    assert isinstance(loop, N.Loop) and loop.extent == v("Cnt@1")


def test_read_in_task_arguments_goes_right_before_the_task_and_is_shared():
    (loop,) = body("for i in P(N) { copy[i](x = X[Cnt[i]], y = Y[Cnt[i]]) }")
    read, task = loop.body
    assert (read.var, read.index, read.checks) == ("Cnt@1", (v("i"),), ())  # i < N: proved
    x, y = task.args
    assert x.offsets[0] == y.offsets[0] == v("Cnt@1")
    # the read value is unknown: the view is checked at run time on both sides
    assert messages(x.checks) == ["index `Cnt[i]` in `x = X[Cnt[i]]` must not be negative",
                                  "index `Cnt[i]` in `x = X[Cnt[i]]` must be less than N"]


def test_reads_of_reads_and_in_scalars_and_coordinates():
    (loop,) = body("""
        for i in P(N) { copy[Cnt[i]](x = X[Cnt[Cnt[i]]], y = Y[i]) }
    """)
    r1, r2, task = loop.body
    assert (r1.var, r1.index) == ("Cnt@1", (v("i"),))
    assert (r2.var, r2.index) == ("Cnt@2", (v("Cnt@1"),))
    assert messages(r2.checks) == ["index `Cnt[i]` of `Cnt[Cnt[i]]` must not be negative",
                                   "index `Cnt[i]` of `Cnt[Cnt[i]]` must be less than N"]
    assert task.coords == (v("Cnt@1"),)
    assert task.args[0].offsets[0] == v("Cnt@2")


def test_unsigned_extent_needs_no_assert():
    read, loop = body("for i in P(DenseDyn(U[1])) { copy[i](x = X[i], y = Y[i]) }")
    assert read.var == "U@1" and read.checks == ()  # 1 < 4: proved
    assert loop.extent == v("U@1")


def test_read_variables_never_clash_with_source_names():
    # a loop variable spelled like the tensor, a sym, and a shadowing loop keep their names
    (loop,) = body("for Cnt in P(N) { for i in P(Ptr[Cnt]) { copy[i](x = X[i], y = Y[i]) } }")
    assert loop.var == "Cnt"
    read = loop.body[0]
    assert read.var == "Ptr@1" and read.index == (v("Cnt"),)


# ---------------------------------------------------------------------------------------------
# Ragged axes


def test_ragged_tensor_lengths():
    (outer,) = body(
        "for b in P(batch) { for t in P.seq(tok[b]) { copy[b, t](x = X[t], y = Y[b]) } }")
    read, check, inner = outer.body
    assert (read.var, read.tensor, read.index, read.checks) == ("Cnt@1", "Cnt", (v("b"),), ())
    assert check.check.message == "length of ragged axis `tok` at `b` must not be negative"
    assert at(check.check) == (LINE, 36)  # the use `tok[b]`
    assert (inner.kind, inner.extent) == ("seq", v("Cnt@1"))
    (task,) = inner.body
    assert messages(task.args[0].checks) == ["index `t` in `x = X[t]` must be less than N"]


def test_ragged_expression_lengths():
    (outer,) = body("for b in P(batch) { for t in P(blk[b]) { copy[b, t](x = X[t], y = Y[b]) } }")
    read, check, inner = outer.body
    assert (read.var, read.index) == ("Cnt@1", (v("b"),))
    assert read.span.line == 14  # the read is written in the axis declaration
    ext = sym.ceildiv(v("Cnt@1"), 4) - 1
    assert inner.extent == ext and check.check.check.lhs == ext
    assert check.check.message == "length of ragged axis `blk` at `b` must not be negative"


def test_ragged_axis_passed_to_a_workload_parameter():
    m = lowered("inner(batch, tok)", extra="""
workload inner(r: DenseDyn, t: Ragged) {
    for b in P(r) { for j in P(t[b]) { copy[b, j](x = X[j], y = Y[b]) } }
}
""")
    (outer,) = m.schedule("w").body
    read, check, inner = outer.body
    assert read.tensor == "Cnt" and inner.extent == v(read.var)
    assert check.check.message == "length of ragged axis `t` at `b` must not be negative"


# ---------------------------------------------------------------------------------------------
# P.sel


def test_sel_reads_indptr_asserts_and_loops_over_positions():
    (outer,) = body("""
        for b in P(batch) { for e in P.sel(sp[b]) { copy[b, e](x = X[e], y = Y[e.pos]) } }
    """)
    lo, hi, a1, a2, a3, loop = outer.body
    assert (lo.var, lo.tensor, lo.index) == ("Ptr@1", "Ptr", (v("b"),))
    assert (hi.var, hi.index) == ("Ptr@2", (v("b") + 1,))
    assert lo.checks == hi.checks == ()  # b + 1 < N + 1: proved
    assert [str(a.check.check) for a in (a1, a2, a3)] == [
        "Ptr@1 >= 0", "Ptr@2 >= Ptr@1", "Ptr@2 <= N"]
    assert [a.check.message for a in (a1, a2, a3)] == [
        "`Ptr[b]` of sparse axis `sp` must not be negative",
        "`Ptr` of sparse axis `sp` must not decrease: `Ptr[b + 1]` must be at least `Ptr[b]`",
        "`Ptr[b + 1]` of sparse axis `sp` must be at most N, the length of `Cnt`"]
    assert {at(a.check) for a in (a1, a2, a3)} == {(LINE, 36)}  # the use `sp[b]`
    assert (loop.var, loop.kind, loop.extent) == ("e.pos", "grid", v("Ptr@2") - v("Ptr@1"))
    elem, task = loop.body
    assert (elem.var, elem.tensor, elem.index, elem.checks) == (
        "e", "Cnt", (v("Ptr@1") + v("e.pos"),), ())
    assert task.coords == (v("b"), v("e"))  # `e` as a coordinate is its value
    x, y = task.args
    assert messages(x.checks) == ["index `e` in `x = X[e]` must not be negative",
                                  "index `e` in `x = X[e]` must be less than N"]
    assert y.offsets[0] == v("e.pos")
    assert messages(y.checks) == ["index `e.pos` in `y = Y[e.pos]` must be less than N"]


def test_sel_variable_is_a_key_and_renamed_like_loop_variables():
    m = lowered("""
        for b in P(batch) { for e in P.sel(sp[b]) { copy[b, e](x = X[e], y = Y[b]) } }
        for e in P(2) { copy[e](x = X[e], y = Y[e]) }
    """, extra="schedule main = w().dispatch(affinity(e, n = 2))\n")
    s = m.schedule("main")
    assert s.dispatch.args == (v("e"),)
    assert s.body[1].var == "e"  # a sibling loop reuses the name
    nested = body("""
        for b in P(batch) { for e in P.sel(sp[b]) { for e in P.sel(sp[b]) {
            copy[b, e](x = X[e], y = Y[b]) } } }
    """)
    inner = nested[0].body[-1].body[-1]
    assert (inner.var, inner.body[0].var) == ("e_2.pos", "e_2")


# ---------------------------------------------------------------------------------------------
# when / P.when


def test_when_chain():
    (loop,) = body("""
        for b in P(batch) {
            when Cnt[b] > 4 { copy[b](x = X[b], y = Y[b]) }
            else when Cnt[b] > 0 and N > 2 { copy[b](x = X[0], y = Y[b]) }
            otherwise { copy(x = X[0], y = Y[0]) }
        }
    """)
    read, when = loop.body
    assert read.var == "Cnt@1"
    (c1, b1), (c2, b2) = when.branches
    assert c1 == N.Cond(">", (v("Cnt@1"), sym.const(4)))
    # the `else when` shares the read: no task runs between the two predicates
    assert c2 == N.Cond("and", (N.Cond(">", (v("Cnt@1"), sym.const(0))),
                                N.Cond(">", (v("N"), sym.const(2)))))
    assert [t.text for t in b1 + b2 + when.otherwise] == ["copy[b]", "copy[b]", "copy"]


def test_p_when_spelling_is_the_same():
    a = body("""
        for b in P(batch) {
            when Cnt[b] == 7 { copy[b](x = X[b], y = Y[b]) }
            otherwise { copy[b](x = X[0], y = Y[b]) }
        }
    """)
    b = body("""
        for b in P(batch) {
            P.when(Cnt[b] == 7) { copy[b](x = X[b], y = Y[b]) }
            P.otherwise { copy[b](x = X[0], y = Y[b]) }
        }
    """)

    def text(t):
        return re.sub(r" @\d+:\d+", "", print_module(
            N.Module("m", (), (), (), (N.Schedule("s", "w", t),), None)))

    assert text(a) == text(b)


def test_static_predicates_fold():
    assert [type(s) for s in body("when 1 < 2 { copy(x = X[0], y = Y[0]) }")] == [N.Task]
    assert body("when N < 0 { copy(x = X[0], y = Y[0]) }") == ()
    # loop ranges decide too: b < N inside `for b in P(N)`
    (loop,) = body("for b in P(N) { when b < N { copy[b](x = X[b], y = Y[b]) } }")
    assert [type(s) for s in loop.body] == [N.Task]
    (when,) = body("when N > 0 { copy(x = X[0], y = Y[0]) }")
    assert when.branches[0][0] == N.Cond(">", (v("N"), sym.const(0)))


def test_else_when_reads_only_after_earlier_branches_fail():
    (loop,) = body("""
        for b in P(batch) {
            when b == 0 { copy[b](x = X[b], y = Y[b]) }
            else when Cnt[b - 1] > 0 { copy[b](x = X[0], y = Y[b]) }
        }
    """)
    (when,) = loop.body
    assert when.branches[0][0] == N.Cond("==", (v("b"), sym.const(0)))
    read, inner = when.otherwise
    assert read.index == (v("b") - 1,)
    assert messages(read.checks) == ["index `b - 1` of `Cnt[b - 1]` must not be negative"]
    assert isinstance(inner, N.When) and inner.otherwise == ()


def test_and_or_short_circuit_element_reads():
    (loop,) = body("""
        for b in P(batch) {
            when F[b] and b + 1 < N and Cnt[b + 1] > 0 { copy[b](x = X[b], y = Y[b]) }
            otherwise { copy[b](x = X[0], y = Y[b]) }
        }
    """)
    read_f, when = loop.body
    assert read_f.tensor == "F"
    c, then = when.branches[0]
    assert c == N.Cond("and", (N.Cond("!=", (v("F@1"), sym.const(0))),
                               N.Cond("<", (v("b") + 1, v("N")))))
    read, inner = then  # Cnt[b + 1] is read only where b + 1 < N held
    assert read.tensor == "Cnt" and read.index == (v("b") + 1,)
    # the `otherwise` body is lowered once per place it can run
    assert [t.text for t in inner.otherwise + when.otherwise] == ["copy[b]", "copy[b]"]
    (loop,) = body("""
        for b in P(batch) {
            when not (b >= N - 1 or Cnt[b + 1] <= 0) { copy[b](x = X[b], y = Y[b]) }
        }
    """)
    (when,) = loop.body
    # not (A or B) = not A and not B: B's read happens only where A is false
    c, (read, inner) = when.branches[0]
    assert c == N.Cond("not", (N.Cond(">=", (v("b"), v("N") - 1)),)) and when.otherwise == ()
    assert read.tensor == "Cnt" and inner.branches[0][0] == N.Cond(
        "not", (N.Cond("<=", (v("Cnt@1"), sym.const(0))),))
    assert [t.text for t in inner.branches[0][1]] == ["copy[b]"] and inner.otherwise == ()


def test_bool_elements_and_bool_comparisons():
    (loop,) = body("""
        for b in P(batch) { when F[b] == (Cnt[b] > 0) { copy[b](x = X[b], y = Y[b]) } }
    """)
    rf, rc, when = loop.body
    f = N.Cond("!=", (v("F@1"), sym.const(0)))
    c = N.Cond(">", (v("Cnt@2"), sym.const(0)))
    assert when.branches[0][0] == N.Cond("or", (N.Cond("and", (f, c)),
                                                N.Cond("and", (N.Cond("not", (f,)),
                                                               N.Cond("not", (c,))))))


# ---------------------------------------------------------------------------------------------
# Slots


def test_slots():
    read, s3, fits, s4, check, loop = body("""
        slot_load(3, Cnt[0])
        slot_set(4, slot(3) * 2)
        for i in P(slot(4)) { copy[i](x = X[i], y = Y[i]) }
    """)
    assert (read.var, read.index) == ("Cnt@1", (sym.const(0),))
    assert s3 == N.SlotSet(3, v("Cnt@1"), s3.span) and at(s3) == (LINE, 1)
    assert s4.value == v(N.slot_var(3)) * 2
    assert fits.check.message == "`slot(3) * 2` overflows int64 with `slot(3)`"  # a slot is data
    assert check.check.message == "loop extent `slot(4)` must not be negative"
    assert loop.extent == v("slot#4")


# ---------------------------------------------------------------------------------------------
# What stays unsupported, compile errors, verify and the printer


def unsupported(text: str) -> list[tuple[int, int, str]]:
    env = check_source(HEAD + textwrap.dedent(text), "t.wsp")
    with pytest.raises(WspError) as info:
        lower(env)
    assert all(d.code == "unsupported" for d in info.value.diagnostics)
    return [(d.span.line, d.span.col, d.message) for d in info.value.diagnostics]


def test_element_reads_and_slots_in_schedule_keys_are_unsupported():
    assert unsupported("""
        workload w() { for b in P(batch) { copy[b](x = X[b], y = Y[b]) } }
        schedule main = w().dispatch(affinity(Cnt[b]))
    """) == [(LINE + 1, 39, "reading tensor elements in a schedule key (`Cnt[b]`) is not "
              "supported by this build's back ends yet")]
    assert unsupported("""
        workload w() { for b in P(batch) { copy[b](x = X[b], y = Y[b]) } }
        schedule main = w().dispatch(affinity(b + slot(0)))
    """) == [(LINE + 1, 43, "reading slots in a schedule key (`slot(0)`) is not supported by "
              "this build's back ends yet")]


@pytest.mark.parametrize("decl, where, message", [
    ("input L: i32[N - 1]\naxis t2 = Ragged(batch, L)", (17, 25),
     "`lengths` needs N elements for outer axis `batch`, but `L` has N - 1"),
    ("input L: i32[N]\naxis s2 = Sparse(batch, L, Cnt)", (17, 25),
     "`indptr` needs N + 1 elements for outer axis `batch`, but `L` has N"),
    ("input L: i32[3]\naxis d = Dense[4]\naxis t2 = Ragged(d, L)", (18, 21),
     "`lengths` needs 4 elements for outer axis `d`, but `L` has 3"),
])
def test_index_tensors_provably_too_short_are_compile_errors(decl, where, message):
    with pytest.raises(WspError) as info:
        check_source(HEAD + decl + "\n", "t.wsp")
    (d,) = info.value.diagnostics
    assert ((d.span.line, d.span.col), d.message) == (where, message)
    # long enough, or maybe long enough: accepted (checked at each read)
    check_source(HEAD + "input L: i32[N + 2]\ninput M: i32[B]\naxis t2 = Ragged(batch, L)\n"
                 "axis t3 = Ragged(batch, M)\n", "t.wsp")


def sched(*stmts) -> N.Module:
    m = lowered("copy(x = X[0], y = Y[0])")
    return N.Module(m.name, m.syms, m.tensors, m.kernels,
                    (N.Schedule("s", "w", tuple(stmts)),), None)


def test_verify_new_nodes():
    ok = lowered("""
        for b in P(batch) {
            when Cnt[b] > 0 { for e in P.sel(sp[b]) { copy[b, e](x = X[e], y = Y[b]) } }
            slot_set(63, b)
        }
    """)
    verify(ok)
    read = N.Read("r@1", "Cnt", (sym.const(0),))
    loop = N.Loop("i", v("r@1"), "grid", ())
    verify(sched(read, loop))
    bad = [
        (sched(loop, read), "the extent of `i` `r@1` uses unbound symbol `r@1`"),
        (sched(N.When(((N.Cond("<", (v("r@1"), sym.const(1))), (read,)),)), loop),
         "uses unbound symbol `r@1`"),  # a read inside a branch does not leak out
        (sched(read, read), "read variable `r@1` rebinds a name bound around it"),
        (sched(N.Read("x", "X", (sym.const(0),) * 3)), "only integer elements"),
        (sched(N.Read("x", "Cnt", (sym.const(0),) * 2)), "has 2 indices for a 1-D tensor"),
        (sched(N.SlotSet(64, sym.const(1))), "slot 64 does not exist"),
        (sched(N.When(((N.Cond("??", ()), ()),))), "unknown predicate `??`"),
        (sched(N.Assert(N.ViewCheck(sym.Check(v("q"), ">=", sym.const(0), "m"), "m"))),
         "uses unbound symbol `q`"),
        (sched(N.SlotSet(0, v("slot#64"))), "uses unbound symbol `slot#64`"),
    ]
    for m, message in bad:
        with pytest.raises(InternalError, match=re.escape(message)):
            verify(m)
    verify(sched(N.SlotSet(0, v("slot#63") + 1)))


def test_golden_dynamic(golden):
    parts = []
    for name in ("moe_sparse", "ragged_attention"):
        m = lower(check_file(str(ROOT / "tests" / "programs" / f"{name}.wsp")))
        verify(m)
        text = print_module(m)
        parts.append(text[text.index("\nschedule"):].lstrip("\n"))
    golden("lower_dynamic.ir", "\n".join(parts))
