"""Edges named one by one: task handles (`let t = k[i](...)`) and `after` clauses
(`k[i](...) after t`, `after t[i - 1]`, `after [t1, t2]`; docs/schedules.md, "Named edges").

The rules here are structural, so they are checked in one walk over the workload's statements
after the statements themselves (`check_edges`); the coordinates' types are checked with the
call (`after_coords`). What a handle stands for:

- a handle is the tasks of one call statement; its coordinates are the variables of the loops
  around that call, outermost first (a loop with two variables is two loops);
- `after t` at a call names `t`'s tasks at the current iteration of the loops around both
  calls, and every iteration of `t`'s other loops; `after t[e1, ..., ek]` gives `t`'s first k
  coordinates, the rest as for `after t`;
- a handle is visible from its call to the end of the workload, out of the loops and blocks
  around it (as a Python variable is after the loop that set it), so an edge can name every
  iteration of a loop from after the loop.

Every edge must name tasks enumerated before the call, whatever order the schedule's axis
transforms give the loops: a coordinate of a loop around both calls is that loop's variable or
`v - c` (an earlier iteration; the loops count up in every order), and a call before `t`'s in
the text (or `t`'s own) names an earlier iteration of one of them. A `P.sel` loop's iterations
have no order, so its coordinate is its own variable or left out. Edges inside CSP processes are
not supported (channels order those tasks), nor across the branches of one `when` (the two tasks
never both run).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ...diagnostics import Note, did_you_mean
from .. import ast as A
from .scope import Scope


def task_binding(s: A.Node, kernels) -> Optional[A.CallStmt]:
    """The task call a `let t = k(...)` binds (a call without coordinates, which the parser
    cannot tell from a value's `let`), or None when `s` is not one. `kernels`: the names."""
    if (isinstance(s, A.Let) and isinstance(s.value, A.Call) and not s.value.prefix
            and s.value.func.id in kernels):
        v = s.value
        return A.CallStmt(v.func, None, v.args, v.kwargs, label=s.name, span=s.span)
    return None


@dataclass(frozen=True)
class Loop:
    """A loop around a call: `key` (the ForLoop's identity, which of its variables) is the same
    for the checker and the lowering, which both walk the one AST."""

    key: tuple
    var: str
    kind: str


@dataclass(frozen=True)
class Site:
    call: A.CallStmt
    loops: tuple  # the Loops around the call, outermost first
    branches: tuple  # ((id of the When, branch number), ...)
    csp: bool
    order: int  # the call's position among the workload's calls, in the text


def loop_keys(s: A.ForLoop) -> tuple:
    """The keys of the loops a `for` statement makes, one per variable."""
    return tuple((id(s), k) for k in range(len(s.vars)))


def call_sites(stmts: tuple, kernels) -> list[Site]:
    """Every call of a workload body (kernel tasks, `let t = k(...)` bindings as calls, and
    inlined workloads), in the text's order, with the loops, `when` branches and CSP around it."""
    out: list[Site] = []
    _walk(stmts, (), (), False, kernels, out)
    return out


def _walk(stmts, loops: tuple, branches: tuple, csp: bool, kernels, out: list) -> None:
    for s in stmts:
        bound = task_binding(s, kernels)
        if bound is not None:
            s = bound
        if isinstance(s, A.CallStmt):
            out.append(Site(s, loops, branches, csp, len(out)))
        elif isinstance(s, A.ForLoop):
            inner = loops + tuple(Loop(key, v.id, s.kind) for key, v in zip(loop_keys(s), s.vars))
            _walk(s.body, inner, branches, csp, kernels, out)
        elif isinstance(s, A.When):
            for k, br in enumerate(s.branches):
                _walk(br.body, loops, branches + ((id(s), k),), csp, kernels, out)
            if s.otherwise is not None:
                _walk(s.otherwise, loops, branches + ((id(s), -1),), csp, kernels, out)
        elif isinstance(s, (A.Combine, A.Sequential)):
            _walk(s.body, loops, branches, csp, kernels, out)
        elif isinstance(s, (A.Pipe, A.Process, A.Consume)):
            _walk(s.body, loops, branches, True, kernels, out)
        elif isinstance(s, A.Send):
            _walk((s.call,), loops, branches, True, kernels, out)


def _offset(e: A.Expr, var: str) -> Optional[int]:
    """c when `e` is `var` (0) or `var - c` with c a literal, else None."""
    if isinstance(e, A.Name) and e.id == var:
        return 0
    if (isinstance(e, A.Binary) and e.op == "-" and isinstance(e.left, A.Name)
            and e.left.id == var and isinstance(e.right, A.IntLit)):
        return e.right.value
    return None


class EdgeChecks:
    """Part of `Body`: task handles and `after`."""

    def after_coords(self, s: A.CallStmt, scope: Scope) -> None:
        for a in s.after:
            for e in a.index or ():
                self.int_expr(e, scope, "a task handle's coordinate")

    def check_edges(self, body) -> None:
        sites = []
        for s in call_sites(tuple(body), self.env.kernel_sigs):
            if (s.call.label is not None or s.call.after) and s.call.callee.id in self.env.workloads:
                self.error(s.call.callee.span, "edge-workload",
                           f"`{s.call.callee.id}` is a workload: a task handle and `after` "
                           "belong to a kernel call",
                           "bind the calls inside the workload, or order it with `sequential`")
                continue
            sites.append(s)
        handles: dict[str, Site] = {}
        for site in sites:
            label = site.call.label
            if label is None:
                continue
            first = handles.get(label.id)
            if first is not None:
                self.error(label.span, "duplicate-handle",
                           f"task handle `{label.id}` is bound twice in this workload",
                           "give each task call its own handle",
                           notes=[Note(first.call.label.span, "first bound here")])
                continue
            handles[label.id] = site
        for site in sites:
            if site.csp and (site.call.label is not None or site.call.after):
                span = site.call.label.span if site.call.label is not None else site.call.after[0].span
                self.error(span, "edge-csp",
                           "task handles and `after` are not supported inside CSP processes",
                           "a channel orders a process's tasks: `send` and `consume` them")
                continue
            for a in site.call.after:
                self._edge(a, site, handles)

    def _edge(self, a: A.After, site: Site, handles: dict) -> None:
        name = a.handle.id
        h = handles.get(name)
        if h is None:
            self.error(a.handle.span, "unknown-handle",
                       f"`{name}` is not a task handle of this workload",
                       did_you_mean(name, list(handles))
                       or f"bind one with `let {name} = kernel[i](...)` before this call")
            return
        if h.csp:
            return  # reported at its binding
        note = [Note(h.call.label.span, f"`{name}` is bound here")]
        for x, y in zip(h.branches, site.branches):
            if x[0] == y[0] and x[1] != y[1]:
                self.error(a.handle.span, "handle-scope",
                           f"`{name}` is bound in another branch of this `when`: the two tasks "
                           "never both run", notes=note)
                return
            if x != y:
                break
        index = a.index or ()
        if len(index) > len(h.loops):
            loops = ", ".join(f"`{x.var}`" for x in h.loops) or "none"
            many = "s" if len(h.loops) != 1 else ""
            self.error(a.span, "handle-index",
                       f"`{name}` has {len(h.loops)} coordinate{many} (the loops around its "
                       f"call: {loops}), but {len(index)} are given", notes=note)
            return
        shared = 0
        while (shared < min(len(h.loops), len(site.loops))
               and h.loops[shared].key == site.loops[shared].key):
            shared += 1
        earlier = False
        for k, e in enumerate(index):
            loop = h.loops[k]
            if k >= shared:
                if loop.kind == "sel":
                    self.error(e.span, "edge-order",
                               f"coordinate {k + 1} of `{name}` is the `P.sel` loop `{loop.var}`, "
                               "whose iterations have no order or position to name",
                               "leave it out: the edge then names every iteration", notes=note)
                    return
                continue
            c = _offset(e, loop.var)
            if c is not None and any(x.var == loop.var for x in site.loops[k + 1:]):
                c = None  # an inner loop's variable of the same name
            if c is None or (c > 0 and loop.kind == "sel"):
                want = f"`{loop.var}`" if loop.kind == "sel" else f"`{loop.var}` or `{loop.var} - c`"
                self.error(e.span, "edge-order",
                           f"coordinate {k + 1} of `{name}` is for the loop `{loop.var}` around "
                           f"both calls: it must be {want}, or the edge could name a task "
                           "enumerated after this one",
                           f"name the same iteration (`{loop.var}`)" if loop.kind == "sel" else
                           f"name the same iteration, or an earlier one (`{loop.var} - 1`)",
                           notes=note)
                return
            earlier = earlier or c > 0
        if site.order <= h.order and not earlier:
            where = "this call's own handle" if site.order == h.order else \
                f"bound by a later call (line {h.call.span.line})"
            self.error(a.span, "edge-later",
                       f"`{name}` is {where}: an edge to it would wait for a task not "
                       "enumerated yet (a cycle)",
                       "name an earlier iteration of a loop around both calls (`t[i - 1]`), or "
                       "bind the handle before this call", notes=note)
