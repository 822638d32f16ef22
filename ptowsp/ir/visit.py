"""Walking and rewriting loop trees: the one table of which fields of a statement hold nested
statements, and every traversal built on it.

`FIELDS` maps each statement class that has nested statements to those fields, in
enumeration order, and says what each holds:

    STMTS     a statement list (a tuple of statements; `Loop.body`, `When.otherwise`, ...)
    BRANCHES  a `When`'s (Cond, statement list) pairs
    NODES     nested statements that are not a statement list: a `Pipe`'s processes
    NODE      one nested statement: a `Send`'s task

A statement list may gain, lose or split statements; NODES and NODE may not (a pipe holds
exactly its processes, a send exactly one task). The two kinds of traversal use that:

- `walk` (and `children`, and the queries below: `tasks`, `written_tensors`, ...) visit
  everything, a pipe's processes and a send's task included: the send's task is a task of the
  tree (enumerated, run, named by its kernel) like any other.
- `rewrite` hands its function only the members of statement lists, since the function may
  return several statements or none; it descends through a pipe's processes and a send's task
  to the statement lists inside them without handing it those. (A task holds no statement
  list, so for a send this means nothing is rewritten: the same as not entering it.)

A `Visitor` dispatches on the class (`visit_Loop`, ...); classes without a method get
`visit_other`, by default a visit of the nested statements.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Callable, Iterator, Optional, Sequence

from .. import sym
from ..spans import Span
from . import nodes as N

_END = object()  # the end of a statement list, for `walk`
STMTS, BRANCHES, NODES, NODE = "stmts", "branches", "nodes", "node"

FIELDS: dict[type, tuple[tuple[str, str], ...]] = {
    N.Loop: (("body", STMTS),),
    N.Block: (("body", STMTS),),
    N.When: (("branches", BRANCHES), ("otherwise", STMTS)),
    N.Pipe: (("processes", NODES),),
    N.Process: (("body", STMTS),),
    N.Send: (("task", NODE),),
    N.Consume: (("body", STMTS),),
    N.Mark: (("body", STMTS),),
}


def children(st) -> Iterator[Sequence]:
    """The statements nested directly in `st`, as sequences in enumeration order: each statement
    list (a `When`'s branch bodies, then `otherwise`), a pipe's processes, a send's task alone."""
    for name, kind in FIELDS.get(type(st), ()):
        value = getattr(st, name)
        if kind == BRANCHES:
            yield from (body for _, body in value)
        elif kind == NODE:
            yield (value,)
        else:
            yield value


def walk(stmts) -> Iterator:
    """Every statement of a loop tree, depth first, in enumeration order (a `Pipe` yields its
    `Process`es, a `Send` its `Task`). An explicit stack, not recursion: a generator nested
    per level would cost every statement its depth (deep trees walked quadratically)."""
    stack = [iter(stmts)]
    while stack:
        st = next(stack[-1], _END)
        if st is _END:
            stack.pop()
            continue
        yield st
        nested = list(children(st))
        for seq in reversed(nested):
            stack.append(iter(seq))


def map_lists(st, fn: Callable[[tuple], tuple]):
    """`st` with every statement list directly in it replaced by `fn(list)`, those of its
    processes (a pipe) included; the same object when `fn` returned every list unchanged."""
    changes = {}
    for name, kind in FIELDS.get(type(st), ()):
        old = getattr(st, name)
        if kind == STMTS:
            new = fn(old)
        elif kind == BRANCHES:
            new = tuple((c, fn(body)) for c, body in old)
            new = old if all(b is ob for (_, b), (_, ob) in zip(new, old)) else new
        elif kind == NODES:
            new = tuple(map_lists(x, fn) for x in old)
            new = old if all(a is b for a, b in zip(new, old)) else new
        else:
            new = map_lists(old, fn)
        if new is not old:
            changes[name] = new
    return replace(st, **changes) if changes else st


def rewrite(stmts: tuple, fn: Callable[[object], list]) -> tuple:
    """`stmts` with `fn(st)` applied to every statement of every statement list, innermost
    first: `fn` gets a statement whose nested lists are already rewritten and returns its
    replacement, a list of statements (none, itself, several). The same tuple comes back when
    nothing changed, so "unchanged" is `is`."""
    out: list = []
    changed = False
    for st in stmts:
        new = map_lists(st, lambda body: rewrite(body, fn))
        repl = fn(new)
        if new is not st or len(repl) != 1 or repl[0] is not st:
            changed = True
        out.extend(repl)
    return tuple(out) if changed else stmts


def map_schedules(m: N.Module, fn: Callable[[N.Schedule], tuple]) -> N.Module:
    """`m` with every schedule's body replaced by `fn(schedule)` (a tuple of statements); the
    same module when every body came back unchanged."""
    scheds = []
    for s in m.schedules:
        body = fn(s)
        scheds.append(s if body is s.body else replace(s, body=body))
    if all(a is b for a, b in zip(scheds, m.schedules)):
        return m
    return replace(m, schedules=tuple(scheds))


def substitute(x, env: dict):
    """`x` (an expression, a tuple, or any IR record) with the variables of `env` replaced in
    every expression in it, every field searched; the same object when nothing changed."""
    if not env:
        return x
    if isinstance(x, sym.Expr):
        return sym.substitute(x, env) if sym.free_vars(x) & env.keys() else x
    if isinstance(x, tuple):
        new = tuple(substitute(y, env) for y in x)
        return x if all(a is b for a, b in zip(new, x)) else new
    if isinstance(x, Span) or not is_dataclass(x) or isinstance(x, type):
        return x
    changes = {}
    for f in fields(x):
        v = getattr(x, f.name)
        nv = substitute(v, env)
        if nv is not v:
            changes[f.name] = nv
    return replace(x, **changes) if changes else x


class Visitor:
    """`visit(st, *args)` runs `self.visit_<Class>(st, *args)` for the statement's class, or
    `visit_other(st, *args)` when there is none."""

    def visit(self, st, *args):
        method = getattr(self, "visit_" + type(st).__name__, None)
        if method is None:
            return self.visit_other(st, *args)
        return method(st, *args)

    def visit_other(self, st, *args):
        """By default: visit every statement nested in `st` with the same arguments."""
        for seq in children(st):
            for x in seq:
                self.visit(x, *args)


# ---------------------------------------------------------------------------------------------
# What a walk tells


def schedule_keys(s: N.Schedule) -> list[sym.Expr]:
    """The key expressions of `s` evaluated per task (a keyed dispatch, `stream_by`, the
    ready and pool keys, `trace = cycles(key)`): each task must bind their loop variables."""
    keys: list[sym.Expr] = []
    if s.dispatch.name in ("affinity", "hash", "dispatch_by"):
        keys.extend(a for a in s.dispatch.args[:1] if isinstance(a, sym.Expr))
    if s.stream_by is not None:
        keys.append(s.stream_by)
    if s.trace_cost is not None and isinstance(s.trace_cost, sym.Expr):
        keys.append(s.trace_cost)
    keys.extend(a for a in s.ready.args + s.pools.args if isinstance(a, sym.Expr))
    return keys


def tasks(stmts) -> list[N.Task]:
    """Every task of a loop tree, in enumeration order of the tree (sends' tasks included)."""
    return [st for st in walk(stmts) if isinstance(st, N.Task)]


def loop_nest_tasks(stmts) -> Optional[list[N.Task]]:
    """The tasks of a tree made only of loops around tasks (a lowered collective's tile tasks);
    None when it holds any other statement."""
    found = []
    for st in walk(stmts):
        if isinstance(st, N.Task):
            found.append(st)
        elif not isinstance(st, N.Loop):
            return None
    return found


def written_tensors(stmts) -> set[str]:
    """The tensors some task of the tree writes."""
    return {a.tensor for t in tasks(stmts) for a in t.args
            if isinstance(a, N.TileArg) and a.mode != "r"}


def read_tensors(stmts) -> set[str]:
    """The tensors whose elements enumeration reads (N.Read): the data the task space needs."""
    return {st.tensor for st in walk(stmts) if isinstance(st, N.Read)}


def own_consumes(stmts) -> list[str]:
    """The channels consumed by these statements, not counting nested pipes' processes."""
    out: list[str] = []
    for st in stmts:
        if isinstance(st, N.Pipe):
            continue
        if isinstance(st, N.Consume) and st.channel not in out:
            out.append(st.channel)
        for seq in children(st):
            out.extend(c for c in own_consumes(seq) if c not in out)
    return out


def _cond_queries(c) -> bool:
    if not isinstance(c, N.Cond):
        return False
    if c.op == "query":
        return True
    return c.op in ("and", "or", "not") and any(_cond_queries(a) for a in c.args)


def uses_csp(stmts) -> bool:
    """Whether a loop tree uses CSP: a pipe, process, send, consume, record or synchronize, or
    a `query` predicate. (`Schedule.uses_csp` holds this for the schedule's body.)"""
    for st in walk(stmts):
        if isinstance(st, N.CSP_STMTS):
            return True
        if isinstance(st, N.When) and any(_cond_queries(c) for c, _ in st.branches):
            return True
    return False


__all__ = ["FIELDS", "STMTS", "BRANCHES", "NODES", "NODE", "children", "walk", "map_lists",
           "rewrite", "map_schedules", "substitute", "Visitor", "tasks", "written_tensors",
           "read_tensors", "own_consumes", "uses_csp"]
