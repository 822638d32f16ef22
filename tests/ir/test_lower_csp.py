"""Lowering CSP (language.md section 7) to the IR contract of `ir/nodes.py`: channels and their
slot tensors, pipes, processes, sends, consumes, the slot accesses that order them, records,
synchronizes and `query`; the verifier's CSP invariants; `reject_csp`; golden IR of a small
pipe (tests/golden/lower_csp.ir, `pytest --update-golden` rewrites it).
"""

from __future__ import annotations

import dataclasses
import re
import textwrap

import pytest

from ptowsp import sym
from ptowsp.diagnostics import InternalError, WspError
from ptowsp.frontend.checker import check_source
from ptowsp.ir import nodes as N
from ptowsp.ir import visit as V
from ptowsp.ir.printer import print_module
from ptowsp.ir.verify import verify
from ptowsp.lower import lower, reject_csp

HEAD = """\
sym N
input  X: f32[N, 4, 8]
output Y: f32[N, 4, 8]
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
"""

SMALL = """\
module small_pipe
sym N
input  X: f32[N, 4, 8]
output Y: f32[N, 4, 8]
output Z: f32[N, 4, 8]

channel q: Tile[4, 8, f32], depth = 2
channel done, depth = 0
event ev

kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
kernel scale(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]], s: Scalar[f32]) { store(y, x * s) }

workload pool() {
    pipe {
        process loader {
            for i in P.seq(N) { send(q, copy[i](x = X[i], y = q)) }
        }
        process workers * 2 {
            consume(q) as t {
                send(done, scale[t, workers.id](x = t, y = Y[t], s = workers.id))
                copy[t](x = X[t], y = Z[t])
            }
        }
        process waiter {
            consume(done) as d { }
        }
    }
    record(ev)
    synchronize(ev)
    when query(ev) { copy(x = X[0], y = Z[0]) }
}

schedule main = pool()
"""


def lowered(text: str, head: str = HEAD) -> N.Module:
    m = lower(check_source(head + textwrap.dedent(text), "t.wsp"))
    verify(m)
    return m


def body(m: N.Module) -> tuple:
    return m.schedules[0].body


def find(stmts, cls) -> list:
    return [st for st in V.walk(stmts) if isinstance(st, cls)]


def test_golden_small_pipe(golden):
    m = lower(check_source(SMALL, "small_pipe.wsp"))
    verify(m)
    text = print_module(m)
    assert text == print_module(lower(check_source(SMALL, "small_pipe.wsp")))
    golden("lower_csp.ir", text)


def test_channels_and_slot_tensors():
    m = lower(check_source(SMALL, "small_pipe.wsp"))
    assert [(c.name, c.depth, c.elem, c.slots, c.is_event) for c in m.channels] == [
        ("q", 2, (4, 8, "f32"), "q@slots", False),
        ("done", 0, None, "done@slots", False),
        ("ev", 0, None, None, True),  # used only by record / synchronize: no slots
    ]
    slots = {t.name: t for t in m.tensors if t.name.endswith("@slots")}
    assert {n: (t.kind, t.dtype, tuple(sym.const_value(d) for d in t.dims))
            for n, t in slots.items()} == {"q@slots": ("scratch", "f32", (2, 4, 8)),
                                          "done@slots": ("scratch", "u8", (1, 1, 1))}
    assert m.schedules[0].uses_csp


def test_pipe_processes_sends_and_consumes():
    m = lower(check_source(SMALL, "small_pipe.wsp"))
    (pipe,) = find(body(m), N.Pipe)
    assert pipe.channels == ("q", "done")
    assert [(p.name, p.replicas, p.id_var, p.sends) for p in pipe.processes] == [
        ("loader", 1, None, ("q",)), ("workers", 2, "workers.id", ("done",)),
        ("waiter", 1, None, ())]
    send_q, send_done = find(body(m), N.Send)
    assert (send_q.channel, send_q.item) == ("q", "q@1")
    (dst,) = [a for a in send_q.task.args if a.param == "y"]
    assert (dst.tensor, dst.mode, [sym.to_str(o) for o in dst.offsets],
            [sym.to_str(e) for e in dst.extents], dst.row_dim, dst.col_dim) == (
        "q@slots", "w", ["q@1 % 2", "0", "0"], ["1", "4", "8"], 1, 2)
    assert send_q.task.extra == ()
    # a token channel's send writes its slot through an Access; the item `t` is read by a tile
    (src,) = [a for a in send_done.task.args if a.param == "x"]
    assert (src.tensor, src.mode, sym.to_str(src.offsets[0])) == ("q@slots", "r", "t % 2")
    assert [(x.tensor, x.mode, [sym.to_str(o) for o in x.offsets]) for x in
            send_done.task.extra] == [("done@slots", "w", ["0", "0", "0"])]
    assert [sym.to_str(c) for c in send_done.task.coords] == ["t", "workers.id"]
    (s,) = [a for a in send_done.task.args if a.param == "s"]
    assert sym.to_str(s.value) == "workers.id"
    consume_q, consume_done = find(body(m), N.Consume)
    assert (consume_q.channel, consume_q.item, consume_done.item) == ("q", "t", "d")
    # a task of the body that does not pass `t` still reads its slot (so the slot is freed last)
    copy = consume_q.body[1]
    assert [(x.tensor, x.mode, sym.to_str(x.offsets[0])) for x in copy.extra] == [
        ("q@slots", "r", "t % 2")]


def test_records_synchronize_and_query():
    m = lower(check_source(SMALL, "small_pipe.wsp"))
    mark, sync, when = body(m)
    assert isinstance(mark, N.Mark) and mark.events == ("ev",)
    assert isinstance(mark.body[0], N.Pipe)
    assert (mark.span.line, mark.span.col) == (29, 5)
    assert sync == N.Sync("ev", sync.span) and (sync.span.line, sync.span.col) == (30, 17)
    assert when.branches[0][0] == N.Cond("query", ("ev",))


def test_consecutive_records_and_records_in_sequential():
    m = lowered("""\
        event a
        event b
        workload w() {
            sequential {
                for i in P(N) { copy[i](x = X[i], y = Y[i]) }
                record(a)
                record(b)
                record(a)
                synchronize(b)
                copy(x = X[0], y = Y[0])
            }
        }
    """)
    (seq,) = body(m)
    assert [type(s).__name__ for s in seq.body] == ["Mark", "Sync", "Task"]
    assert seq.body[0].events == ("a", "b")
    assert isinstance(seq.body[0].body[0], N.Loop)


def test_inlined_workloads_and_nested_pipes():
    m = lowered("""\
        channel outer: Tile[4, 8, f32], depth = 2
        channel inner, depth = 1
        workload produce() { for i in P.seq(N) { send(outer, copy[i](x = X[i], y = outer)) } }
        workload w() {
            pipe {
                process a { produce() }
                process b {
                    consume(outer) as t {
                        pipe {
                            process c { send(inner, copy[t](x = t, y = Y[t])) }
                            process d { consume(inner) as u { copy[t, u](x = X[u], y = Y[t]) } }
                        }
                    }
                }
            }
        }
    """)
    outer, inner = find(body(m), N.Pipe)
    assert outer.channels == ("outer",) and inner.channels == ("inner",)
    assert [p.sends for p in outer.processes] == [("outer",), ("inner",)]
    # the innermost task reads both items' slots: `outer`'s item t and `inner`'s item u
    (task,) = [t for t in V.tasks(body(m)) if t.kernel == "copy" and len(t.coords) == 2]
    assert [(x.tensor, sym.to_str(x.offsets[0])) for x in task.extra] == [
        ("outer@slots", "t % 2"), ("inner@slots", "0")]


def test_item_variable_renamed_when_it_shadows_a_loop():
    m = lowered("""\
        channel c: Tile[4, 8, f32], depth = 1
        workload w() {
            for t in P.seq(2) {
                pipe {
                    process a { send(c, copy[t](x = X[t], y = c)) }
                    process b { consume(c) as t { copy[t](x = t, y = Y[t]) } }
                }
            }
        }
    """)
    (cons,) = find(body(m), N.Consume)
    assert cons.item == "t_2"
    (task,) = cons.body
    assert [sym.to_str(c) for c in task.coords] == ["t_2"]
    assert sym.to_str(task.args[0].offsets[0]) == "0"  # depth 1: one slot


def test_schedules_without_csp_are_not_marked():
    m = lowered("workload w() { for i in P(N) { copy[i](x = X[i], y = Y[i]) } }\n")
    assert not m.schedules[0].uses_csp and m.channels == ()


def test_reject_csp():
    m = lower(check_source(SMALL, "small_pipe.wsp"))
    with pytest.raises(WspError) as info:
        reject_csp(m, "cpu_sim")
    (d,) = info.value.diagnostics
    assert (d.code, d.span.line, d.span.col) == ("unsupported", 15, 5)
    assert d.message == ("schedule `main` uses CSP (pipes, channels, events), which the cpu_sim "
                         "target does not support yet")
    reject_csp(m, "cpu_sim", schedules=())  # only the schedules asked for
    plain = lowered("workload w() { copy(x = X[0], y = Y[0]) }\n")
    reject_csp(plain, "cpu_sim")


# ---------------------------------------------------------------------------------------------
# verify: the CSP invariants


def broken(m: N.Module, **changes) -> N.Module:
    s = dataclasses.replace(m.schedules[0], **changes)
    return dataclasses.replace(m, schedules=(s,))


def replace_first(stmts, cls, fn):
    """The tree with the first statement of type `cls` replaced by `fn(it)`."""
    done = [False]

    def go(sts):
        out = []
        for st in sts:
            if not done[0] and isinstance(st, cls):
                done[0] = True
                out.append(fn(st))
                continue
            fields = {}
            for f in ("body", "otherwise"):
                if hasattr(st, f) and isinstance(getattr(st, f), tuple):
                    fields[f] = go(getattr(st, f))
            if isinstance(st, N.Pipe):
                fields["processes"] = go(st.processes)
            if isinstance(st, N.Send):
                fields["task"] = go((st.task,))[0]
            out.append(dataclasses.replace(st, **fields) if fields else st)
        return tuple(out)

    return go(stmts)


def test_verify_catches_broken_csp():
    m = lower(check_source(SMALL, "small_pipe.wsp"))
    verify(m)
    b = m.schedules[0].body
    cases = [
        (broken(m, uses_csp=False), "`uses_csp` is False"),
        (broken(m, body=replace_first(b, N.Pipe, lambda p: dataclasses.replace(p, channels=()))),
         "a pipe owns [], but its processes consume ['q', 'done']"),
        (broken(m, body=replace_first(b, N.Process,
                                      lambda p: dataclasses.replace(p, sends=()))),
         "`sends` is [], but the body sends to ['q']"),
        (broken(m, body=replace_first(b, N.Process,
                                      lambda p: dataclasses.replace(p, replicas=0))),
         "process `loader`: 0 replicas"),
        (broken(m, body=replace_first(b, N.Send, lambda s: dataclasses.replace(s, item="i"))),
         "send item variable `i` rebinds a name bound around it"),
        (broken(m, body=replace_first(b, N.Send, lambda s: dataclasses.replace(
            s, task=dataclasses.replace(s.task, args=s.task.args[:1] + (dataclasses.replace(
                s.task.args[1], offsets=(sym.const(0),) * 3),))))),
         "must write the slot box of `q@1` exactly once"),
        (broken(m, body=replace_first(b, N.Consume, lambda c: dataclasses.replace(
            c, body=(c.body[0], dataclasses.replace(c.body[1], extra=()))))),
         "task `copy[t]`: does not read the slot of item `t` of `q`"),
        (broken(m, body=replace_first(b, N.Sync, lambda s: N.Sync("q", s.span))),
         "a `Sync` of `q`, which is not an event"),
        (broken(m, body=(N.Send("q", "k", V.tasks(b)[0]),)), "a send to `q` outside a process"),
        (broken(m, body=(N.Process("p", 1, None, ()),)), "process `p` outside a pipe"),
        (dataclasses.replace(m, channels=m.channels[:1] + (dataclasses.replace(
            m.channels[1], slots="zz"),) + m.channels[2:]), "slot tensor `zz` should be"),
    ]
    for bad, message in cases:
        with pytest.raises(InternalError, match=re.escape(message)):
            verify(bad)
    # a query of a channel that does not exist
    when = b[-1]
    q = N.When(((N.Cond("query", ("nope",)), when.branches[0][1]),))
    with pytest.raises(InternalError, match=re.escape("`query(nope)` of a channel that does not")):
        verify(broken(m, body=b[:-1] + (q,)))
