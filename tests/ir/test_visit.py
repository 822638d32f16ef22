"""`ir/visit.py`: the table of nested statements, `walk`, `rewrite`, `map_lists`, `substitute`,
the `Visitor` and the queries built on a walk."""

from __future__ import annotations

import dataclasses
import re
import typing

from ptowsp import sym
from ptowsp.ir import nodes as N
from ptowsp.ir import visit as V

STMT_CLASSES = typing.get_args(N.Stmt)


def task(text: str) -> N.Task:
    return N.Task("k", (), (), text)


def tree() -> tuple:
    """A loop over a `when`, then a pipe whose processes send and consume."""
    send = N.Send("q", "q@1", task("sent"))
    producer = N.Process("producer", 1, None, (send, task("p")))
    consumer = N.Process("consumer", 1, None, (N.Consume("q", "t", (task("c"),)),))
    when = N.When(((N.Cond("const", (True,)), (task("yes"),)),), (task("no"),))
    return (N.Loop("i", sym.const(4), "grid", (when,)),
            N.Pipe((producer, consumer), ("q",)))


def label(st) -> str:
    return st.text if isinstance(st, N.Task) else type(st).__name__


def test_the_table_names_every_field_that_holds_statements():
    names = "|".join(c.__name__ for c in STMT_CLASSES) + "|Stmt"
    for cls in STMT_CLASSES:
        holding = {f.name for f in dataclasses.fields(cls)
                   if re.search(rf"\b({names})\b", str(f.type))}
        assert {name for name, _ in V.FIELDS.get(cls, ())} == holding, cls.__name__
    for cls, spec in V.FIELDS.items():
        assert cls in STMT_CLASSES
        assert all(kind in (V.STMTS, V.BRANCHES, V.NODES, V.NODE) for _, kind in spec)


def test_walk_is_pre_order_in_enumeration_order_into_processes_and_send_tasks():
    assert [label(st) for st in V.walk(tree())] == [
        "Loop", "When", "yes", "no", "Pipe", "Process", "Send", "sent", "p", "Process",
        "Consume", "c"]
    assert [t.text for t in V.tasks(tree())] == ["yes", "no", "sent", "p", "c"]


def test_rewrite_returns_the_same_objects_when_nothing_changes():
    body = tree()
    assert V.rewrite(body, lambda st: [st]) is body
    assert V.map_lists(body[1], lambda stmts: stmts) is body[1]


def test_rewrite_hands_fn_list_members_only_innermost_first():
    seen = []

    def fn(st):
        seen.append(label(st))
        return [st]

    V.rewrite(tree(), fn)
    # never a process or a send's task: neither may become several statements or none
    assert seen == ["yes", "no", "When", "Loop", "Send", "p", "c", "Consume", "Pipe"]


def test_rewrite_rebuilds_only_the_path_to_a_change():
    body = tree()
    out = V.rewrite(body, lambda st: [] if label(st) == "c" else [st])
    assert out is not body and out[0] is body[0]
    producer, consumer = out[1].processes
    assert producer is body[1].processes[0]
    assert consumer.body[0].body == ()
    assert [label(st) for st in V.walk(out)][-2:] == ["Process", "Consume"]


def test_substitute_replaces_in_every_expression_and_keeps_the_rest():
    i = sym.var("i")
    loop = N.Loop("j", i + 1, "seq", (N.Task("k", (i,), (), "k[i]"),))
    out = V.substitute(loop, {"i": sym.var("x") * 2})
    assert sym.to_str(out.extent) == sym.to_str(sym.var("x") * 2 + 1)
    assert sym.to_str(out.body[0].coords[0]) == sym.to_str(sym.var("x") * 2)
    assert V.substitute(loop, {"z": sym.const(0)}) is loop


def test_visitor_dispatches_by_class_and_visits_nested_statements_by_default():
    class Count(V.Visitor):
        def __init__(self):
            self.tasks = []

        def visit_Task(self, st):
            self.tasks.append(st.text)

    c = Count()
    for st in tree():
        c.visit(st)
    assert c.tasks == ["yes", "no", "sent", "p", "c"]


def test_queries():
    assert V.uses_csp(tree()) and not V.uses_csp(tree()[:1])
    assert V.own_consumes(tree()[1].processes) == ["q"]
    assert V.own_consumes(tree()) == []  # consumed by a nested pipe's processes
