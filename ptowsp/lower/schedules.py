"""A schedule becomes an `N.Schedule`: its workload's loop tree (workloads.py) under the
policies of its combinators (`.dispatch`, `.streams`, `.stream_by`, `.timing`,
`.task_graph`), then rewritten by its axis combinators (`.split`, `.tile`, `.reorder`,
`.fuse_axes`, `.decompose`) with the transforms of `ir/axes.py`.

What lowering decides here (each also written next to its code as `# decision:`):
- A module without schedules whose only parameterless root workload (inlined by no other) is W
  gets the implicit schedule `W` with the defaults of language.md section 8: round_robin(1),
  one stream, immediate, no window.
- Dispatch policies: `round_robin(n)` is `Policy("round_robin", (n,))` (no count:
  `Policy("round_robin")`, the machine model's); `work_steal(n = N)` is `Policy("work_steal",
  (), N)`; the key policies are `Policy(name, (key,), N or None)`.
- A key is an expression over the loop variables' source names (the IR names, unless a loop
  variable had to be renamed: then the key is `Unsupported`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from .. import sym
from ..diagnostics import Diagnostics, InternalError
from ..frontend import ast as A
from ..frontend.env import ModuleEnv
from ..frontend.printer import expr_str
from ..frontend.workloads.schedule_axes import (
    AXIS_COMBINATORS,
    DEFAULT_BUCKETS,
    decompose_args,
    outermost_ragged,
    own_span,
)
from ..frontend.workloads.schedule_axes import build as build_axes
from ..ir import axes
from ..ir import nodes as N
from ..ir import visit as V
from .kernels import Specialisations
from .scope import LoopVar, Scope
from .unsupported import UNSUPPORTED, Unsupported
from .workloads import WorkloadLowerer


def lower_schedule(env: ModuleEnv, specs: Specialisations, diags: Diagnostics,
                   sd: A.ScheduleDecl) -> Optional[N.Schedule]:
    """The schedule `sd`, or None when its loop tree could not be lowered or transformed (the
    reason is in `diags`)."""
    wl = WorkloadLowerer(env, specs, diags)
    try:
        body = wl.scheduled(sd.workload.id, sd.args, sd.kwargs, sd.name.id)
    except Unsupported as u:
        u.report(diags)
        return None
    fields: dict = {}
    for c in sd.combinators:
        if c.name.id in AXIS_COMBINATORS:
            continue  # applied to the loop tree below
        try:
            fields.update(_policy_fields(wl, sd.workload.id, c))
        except Unsupported as u:
            u.report(diags)
    given = tuple(sorted({c.name.id for c in sd.combinators}))
    span = next((c.span for c in sd.combinators if c.name.id == "task_graph"), sd.name.span)
    spans: dict = {}
    for c in sd.combinators:
        spans.setdefault(c.name.id, c.name.span)
    sched = N.Schedule(sd.name.id, sd.workload.id, tuple(body), given=given, window_span=span,
                       uses_csp=V.uses_csp(body), combinator_spans=tuple(spans.items()),
                       **fields)
    if sched.deps == "explicit" and sched.uses_csp:
        # decision: CSP processes are coroutines whose order contexts borrow their parent's
        # steps; the declared-order check follows one stack of scopes, so it refuses them
        diags.error(span, "unsupported", "`deps = explicit` cannot check a workload that uses "
                    "CSP (processes order their tasks through channels, not declared steps)",
                    "use `deps = infer_tensor_map_exact` (the default) or `deps = hybrid`")
        return None
    return transform_axes(env, diags, sched, sd, wl)


def transform_axes(env: ModuleEnv, diags: Diagnostics, s: N.Schedule, sd: A.ScheduleDecl,
                   wl: WorkloadLowerer) -> Optional[N.Schedule]:
    """The schedule's axis combinators applied to its loop tree in the order written
    (ir/axes.py); a transform that could change the result is reported at its combinator."""
    # decision: axis transforms rewrite the lowered loop tree here, at every -O level: they
    # are the user's request, and passes then see the tree the program really enumerates
    done: list[str] = []
    # `.decompose(bucket(k))` without an axis takes the outermost ragged loop, and a split
    # of that loop before it leaves its outer half (`qi_o`) as the ragged loop
    default_ragged = (_outermost_ragged(env, sd.workload.id)
                      if any(c.name.id == "decompose" and len(c.args) == 1
                             for c in sd.combinators) else None)
    for c in sd.combinators:
        n = c.name.id
        if n not in AXIS_COMBINATORS:
            continue
        names = [a.id for a in c.args if isinstance(a, A.Name)]
        try:
            if n == "split":
                s = axes.split(s, names[0], wl.const_int(c.args[1]))
            elif n == "tile":
                s = axes.tile(s, names[0], names[1], wl.const_int(c.args[2]),
                              wl.const_int(c.args[3]))
            elif n == "reorder":
                s = axes.reorder(s, tuple(names))
            elif n == "fuse_axes":
                s = axes.fuse_axes(s, names[0], names[1])
            else:
                axis, kind, width, count = decompose_args(c)
                axis = axis or default_ragged
                ranges = axes.buckets(
                    kind, wl.const_int(width) if width is not None else None,
                    wl.const_int(count) if count is not None else DEFAULT_BUCKETS[kind])
                s = axes.decompose(s, axis, ranges)
        except axes.AxisError as e:
            diags.error(own_span(c), "axis-transform", e.message, e.help)
            return None
        if n == "split" and names[0] == default_ragged:
            default_ragged = f"{default_ragged}_o"
        parts = [expr_str(a) for a in c.args] + [f"{k.name} = {expr_str(k.value)}"
                                                  for k in c.kwargs]
        done.append(f"{n}({', '.join(parts)})")
    return replace(s, transforms=tuple(done)) if done else s


def implicit_schedule(env: ModuleEnv, specs: Specialisations,
                      diags: Diagnostics) -> Optional[N.Schedule]:
    """The schedule of a module that declares none, when it has one root workload to run."""
    inlined: set[str] = set()
    for w in env.workloads.values():
        for node in walk_stmts(w.body):
            if isinstance(node, A.CallStmt) and node.callee.id in env.workloads:
                inlined.add(node.callee.id)
    roots = [n for n, w in env.workloads.items() if n not in inlined and not w.params]
    if len(roots) != 1:
        return None
    # decision: the implicit schedule of a lone parameterless root workload W is named W and has every default (round_robin(1), one stream, immediate, no window)
    name = roots[0]
    try:
        body = WorkloadLowerer(env, specs, diags).scheduled(name, (), ())
    except Unsupported as u:
        u.report(diags)
        return None
    return N.Schedule(name, name, tuple(body), uses_csp=V.uses_csp(body))


def walk_stmts(stmts) -> list[A.Node]:
    """Every AST node of a block, statements nested in it included."""
    out: list[A.Node] = []
    for s in stmts:
        out.extend(s.walk())
    return out


# ---- the policy combinators


def _policy_fields(wl: WorkloadLowerer, workload: str, c: A.Combinator) -> dict:
    """The `N.Schedule` fields a policy combinator sets (`wl` lowered `workload`'s tree)."""
    n = c.name.id
    if n == "dispatch":
        return {"dispatch": _dispatch(wl, workload, c.args[0])}
    if n == "streams":
        return {"streams": wl.const_int(c.args[0])}
    if n == "stream_by":
        return {"stream_by": _key(wl, workload, c.args[0])}
    if n == "timing":
        p = _policy_call(c.args[0])
        f = p.func.id
        if f == "immediate":
            return {"timing": N.Policy("immediate")}
        given = list(p.args) + [kw.value for kw in p.kwargs if kw.name != "priority"]
        prio = [wl.const_int(kw.value) for kw in p.kwargs if kw.name == "priority"]
        if f == "rate_limit":
            kind, v = wl.scalar(given[0], Scope())
            rate = sym.const_value(v) if kind == "int" else v
            return {"timing": N.Policy("rate_limit", (rate,))}
        # interleaved(n, priority = s) is Policy("interleaved", (n, s))
        return {"timing": N.Policy(f, (wl.const_int(given[0]),) + tuple(prio))}
    if n == "task_graph":
        out: dict = {}
        for kw in c.kwargs:
            if kw.name == "window":
                out["window"] = wl.const_int(kw.value)
            elif kw.name == "mode":
                out["window_mode"] = kw.value.id
            elif kw.name in ("deps", "trace"):
                p = _policy_call(kw.value)
                out[kw.name] = p.func.id
                if kw.name == "trace" and p.args:  # cycles(key): each task's modelled cycles
                    out["trace_cost"] = _key(wl, workload, p.args[0])
            elif kw.name in ("ready", "pools"):
                p = _policy_call(kw.value)
                f = p.func.id
                key = (_key(wl, workload, p.args[0]),) if p.args else ()
                n = wl.const_int(p.kwargs[0].value) if p.kwargs else None
                out[kw.name] = N.Policy(f, key, n)
            elif kw.name == "start":
                p = _policy_call(kw.value)
                given = list(p.args) + [k.value for k in p.kwargs]
                out["start"] = N.Policy(p.func.id, tuple(wl.const_int(g) for g in given))
        return out
    raise InternalError("lower", f"unknown combinator `.{n}`")


def _dispatch(wl: WorkloadLowerer, workload: str, e: A.Expr) -> N.Policy:
    # decision: round_robin's count is its argument (`Policy("round_robin", (4,))`, none: the machine's); work_steal's and the key policies' count is `n`
    p = _policy_call(e)
    f = p.func.id
    kws = {kw.name: kw.value for kw in p.kwargs}
    if f == "round_robin":
        given = list(p.args) + list(kws.values())
        return N.Policy("round_robin", tuple(wl.const_int(g) for g in given))
    if f == "work_steal":
        given = list(p.args) + list(kws.values())
        return N.Policy("work_steal", (), wl.const_int(given[0]) if given else None)
    n = wl.const_int(kws["n"]) if "n" in kws else None
    return N.Policy(f, (_key(wl, workload, p.args[0]),), n)


def _key(wl: WorkloadLowerer, workload: str, e: A.Expr) -> sym.Expr:
    """A schedule key over the loop variables' source names (they are the IR names)."""
    scope = Scope()
    names = _loop_names(wl.env, workload)
    for n in names:
        scope.names[n] = LoopVar(n)
    for node in e.walk():
        if isinstance(node, A.Name) and node.id in names and node.id in wl.renamed:
            # decision: a key naming a loop variable that had to be renamed (it shadows an enclosing loop variable or a sym) is not supported
            raise Unsupported(e.span, f"a schedule key naming the rebound loop variable "
                              f"`{node.id}` {UNSUPPORTED}")
    return wl.int_expr(e, scope)


def _policy_call(e: A.Expr) -> A.Call:
    """A policy as a call (`immediate` is `immediate()`)."""
    return A.Call(e, (), (), span=e.span) if isinstance(e, A.Name) else e


def _outermost_ragged(env: ModuleEnv, wname: str) -> str:
    """The loop `.decompose` without an axis acts on (the checker made sure there is one)."""
    found = outermost_ragged(build_axes(env, env.workloads[wname]))
    if len(found) != 1:
        raise InternalError("lower", f"`{wname}` has no single outermost ragged loop")
    return found[0].name


def _loop_names(env: ModuleEnv, wname: str) -> set[str]:
    """Loop variable source names of a workload and of everything it inlines."""
    out: set[str] = set()
    seen: set[str] = set()
    stack = [wname]
    while stack:
        w = stack.pop()
        if w in seen or w not in env.workloads:
            continue
        seen.add(w)
        for node in walk_stmts(env.workloads[w].body):
            if isinstance(node, A.ForLoop):
                out.update(v.id for v in node.vars)
            elif isinstance(node, A.Consume):
                out.add(node.var.id)
            elif isinstance(node, A.CallStmt) and node.callee.id in env.workloads:
                stack.append(node.callee.id)
    return out
