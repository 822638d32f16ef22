"""Schedules (language.md section 8): the workload call, the combinators and their policies,
and keys against the coordinates of every reachable kernel call.

The axis transforms (`.split .tile .reorder .fuse_axes .decompose`) are applied to a model of
the workload's loops by schedule_axes.py; the other combinators are checked here, each by
`comb_<name>`.
"""

from __future__ import annotations

from typing import Optional, Union

from ... import sym
from ...diagnostics import Note, did_you_mean
from ...limits import INT32_MAX, int_text
from .. import ast as A
from .schedule_axes import AXIS_COMBINATORS, REPEATABLE, AxisChecker
from .scope import UNKNOWN, LoopVar, Scope
from .state import Summary
from .wording import article

COMBINATORS = ("dispatch", "streams", "stream_by", "timing", "task_graph") + AXIS_COMBINATORS
DISPATCH_POLICIES = ("round_robin", "affinity", "hash", "dispatch_by", "work_steal")
TIMING_POLICIES = ("immediate", "batched", "interleaved", "rate_limit")
TASK_GRAPH_MODES = ("stall", "abort")
# the task-graph knobs of `.task_graph(...)` beside the window (docs/schedules.md, "The task graph")
GRAPH_DEPS = ("infer_tensor_map_exact", "infer_bytes_overlap", "explicit", "hybrid")
GRAPH_READY = ("fifo", "work_steal", "priority")
GRAPH_START = ("threshold", "after_orchestration")
GRAPH_POOLS = ("single", "by_exec_unit", "custom")
GRAPH_TRACE = ("none", "cycles")


class ScheduleChecks:
    """Part of `Body`: one schedule (checked by a `Body` whose `decl` is None)."""

    def schedule(self, sd: A.ScheduleDecl) -> None:
        wname = sd.workload.id
        summary: Optional[Summary] = None
        keyscope = Scope()
        if wname not in self.env.workloads:
            kind = self.env.kind_of(wname)
            if kind is None:
                self.error(
                    sd.workload.span,
                    "unknown-name",
                    f"unknown workload `{wname}`",
                    did_you_mean(wname, self.env.workloads),
                )
            else:
                self.error(
                    sd.workload.span,
                    "not-workload",
                    f"`{wname}` is {article(kind)}, not a workload",
                    "a schedule starts with a workload call: `schedule main = my_workload(axes...)`",
                )
            for a in sd.args + tuple(k.value for k in sd.kwargs):
                self.axis(a, Scope())
        else:
            decl = self.env.workloads[wname]
            summary = self.mod.summaries.get(wname)
            mapping = self.bind_workload(decl, sd.args, sd.kwargs, self._schedule_call_span(sd), Scope())
            if summary is not None and mapping is not None:
                self.apply_needs(wname, summary.needs, mapping)
            names: set[str] = set()
            for part in self.mod.closure(wname):
                names |= part.loop_names
            # decision: keys may name any loop variable of the workload or of workloads it inlines, and
            # consumed items (`t`, meaning `t.index`); a key is an integer expression
            for n in sorted(names):
                v = self.fresh(n)
                self.ranges[v] = UNKNOWN
                keyscope.names[n] = LoopVar(n, sym.var(v), "key")
        seen: dict[str, A.Combinator] = {}
        axes: Optional[AxisChecker] = None
        if wname in self.env.workloads:
            inlined = {n for part in self.mod.closure(wname) if part.name != wname
                       for n in part.loop_names}
            axes = AxisChecker(self, self.env, wname, self.env.workloads[wname], inlined)
        for c in sd.combinators:
            n = c.name.id
            if n not in COMBINATORS:
                self.error(
                    c.name.span,
                    "unknown-combinator",
                    f"unknown schedule combinator `.{n}`",
                    did_you_mean(n, COMBINATORS)
                    or "combinators are " + ", ".join(f"`.{x}`" for x in COMBINATORS),
                )
                continue
            if n in seen and n not in REPEATABLE:
                self.error(
                    c.name.span,
                    "duplicate-combinator",
                    f"`.{n}` is given twice",
                    "keep one of them",
                    notes=[Note(seen[n].name.span, "first given here")],
                )
                continue
            seen.setdefault(n, c)
            if n in AXIS_COMBINATORS:
                if axes is not None:
                    axes.check(c)
                continue
            getattr(self, f"comb_{n}")(c, keyscope, wname, summary)
        self.check_priority(seen)
        if "stream_by" in seen and "streams" not in seen:
            # decision: `.stream_by(key)` needs `.streams(n)`: the key is taken mod n, and n has no default
            self.error(
                seen["stream_by"].name.span,
                "stream-by-without-streams",
                "`.stream_by` needs `.streams(n)` to say how many streams there are",
                "add `.streams(4)` (the key is taken modulo the stream count)",
            )

    def check_priority(self, seen: dict) -> None:
        """`interleaved(n, priority = s)`: s is one of the schedule's streams."""
        t = seen.get("timing")
        pol = t.args[0] if t is not None and len(t.args) == 1 else None
        if not isinstance(pol, A.Call) or pol.func.id != "interleaved":
            return
        prio = next((kw for kw in pol.kwargs if kw.name == "priority"), None)
        if prio is None:
            return
        s = self.compile_int(prio.value, Scope(), "a priority stream", report=False)
        if "streams" not in seen:
            self.error(prio.span, "priority-without-streams",
                       "`interleaved(priority = ...)` names the stream each dispatcher starts "
                       "with, and the schedule has no `.streams(n)`",
                       "add `.streams(2)`, or leave `priority` out")
            return
        st = seen["streams"].args
        n = self.compile_int(st[0], Scope(), "a stream count", report=False) if len(st) == 1 else None
        if s is not None and n is not None and not 0 <= s < n:
            self.error(prio.value.span, "bad-priority",
                       f"the priority stream must be one of the {n} streams (0 to {n - 1}), "
                       f"found {int_text(s)}")

    def _schedule_call_span(self, sd: A.ScheduleDecl) -> A.Span:
        span = sd.workload.span
        for a in sd.args:
            span = span.merge(a.span)
        return A.Span(
            span.file, span.line, span.col, span.end_line, span.end_col + (1 if sd.args else 2)
        )

    def kwargs(
        self, c: Union[A.Call, A.Combinator], allowed: tuple[str, ...], where: str
    ) -> dict[str, A.Keyword]:
        out: dict[str, A.Keyword] = {}
        for kw in c.kwargs:
            if kw.name not in allowed:
                self.error(
                    kw.span,
                    "unknown-option",
                    f"`{where}` has no option `{kw.name}`",
                    did_you_mean(kw.name, allowed)
                    or (
                        "its options are " + ", ".join(f"`{a}`" for a in allowed)
                        if allowed
                        else f"`{where}` takes no options"
                    ),
                )
            elif kw.name in out:
                self.error(
                    kw.span,
                    "duplicate-option",
                    f"`{kw.name}` is given twice",
                    notes=[Note(out[kw.name].span, "first given here")],
                )
            else:
                out[kw.name] = kw
        return out

    def positive_int(self, e: A.Expr, what: str) -> Optional[int]:
        n = self.compile_int(e, Scope(), what)
        if n is not None and n <= 0:
            self.error(e.span, "not-positive", f"{what} must be positive, found {int_text(n)}")
            return None
        # decision: a schedule's counts (dispatchers, streams, batches, the task window) are at
        # most 2^31 - 1, what the runtime's policy record holds
        if n is not None and n > INT32_MAX:
            self.error(e.span, "too-large", f"{what} must be at most {INT32_MAX}, found "
                       f"{int_text(n)}")
            return None
        return n

    def policy(self, e: A.Expr, choices: tuple[str, ...], what: str) -> Optional[A.Call]:
        """A policy value `name(args)`; a bare `name` means `name()`."""
        # decision: a policy that takes no arguments may be written without parentheses (`immediate`, `work_steal`)
        if isinstance(e, A.Name):
            e = A.Call(e, (), (), span=e.span)
        if not isinstance(e, A.Call) or e.prefix:
            self.error(
                e.span, "bad-policy", f"expected {what}: " + ", ".join(f"`{c}`" for c in choices)
            )
            return None
        if e.func.id not in choices:
            self.error(
                e.func.span,
                "unknown-policy",
                f"unknown {what} `{e.func.id}`",
                did_you_mean(e.func.id, choices)
                or f"{what}s are " + ", ".join(f"`{c}`" for c in choices),
            )
            return None
        return e

    def one_arg(self, c: Union[A.Call, A.Combinator], where: str, example: str) -> Optional[A.Expr]:
        if len(c.args) != 1 or c.kwargs:
            self.error(c.span, "arity", f"`{where}` takes one argument", f"write `{example}`")
            return None
        return c.args[0]

    def key(self, e: A.Expr, scope: Scope, wname: str, summary: Optional[Summary]) -> None:
        """A schedule key: an integer expression over loop variables that every call binds."""
        self.key_of = wname if summary is not None else None
        try:
            v = self.int_expr(e, scope, "a schedule key")
        finally:
            self.key_of = None
        if v.type == "error" or summary is None:
            return
        used = []
        for node in e.walk():
            if (
                isinstance(node, A.Name)
                and isinstance(scope.lookup(node.id), LoopVar)
                and node.id not in used
            ):
                used.append(node.id)
        if not used:
            return
        calls = [c for part in self.mod.closure(wname) for c in part.kernel_calls]
        bad: list[tuple[A.CallStmt, str]] = []
        for call in calls:
            bound = {c.id for c in call.coords or () if isinstance(c, A.Name)}
            for name in used:
                if name not in bound:
                    bad.append((call, name))
                    break
        if not bad:
            return
        call, name = bad[0]
        ctext = self.call_text(call)
        coords = [self.text(c) for c in call.coords or ()] + [name]
        notes = [Note(c.span, f"`{self.call_text(c)}` does not bind `{n}`") for c, n in bad]
        self.error(
            e.span,
            "key-unbound",
            f"the key uses `{name}`, but the call `{ctext}` does not bind `{name}`",
            f"add `{name}` to the call's coordinates: `{call.callee.id}[{', '.join(coords)}]`",
            notes=notes,
        )

    def comb_dispatch(
        self, c: A.Combinator, scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        arg = self.one_arg(c, ".dispatch", ".dispatch(round_robin(4))")
        if arg is None:
            return
        p = self.policy(arg, DISPATCH_POLICIES, "dispatch policy")
        if p is None:
            return
        f = p.func.id
        where = f"{f}(...)"
        if f == "round_robin":
            # decision: `round_robin` and `work_steal` take n positionally or as `n = N`; round_robin also as `num_aicpus = N`
            kws = self.kwargs(p, ("n", "num_aicpus") if f == "round_robin" else ("n",), where)
            given = list(p.args) + [kw.value for kw in kws.values()]
            if len(given) > 1:
                self.error(p.span, "arity", f"`{f}` takes one dispatcher count", f"write `{f}(4)`")
            elif given:
                self.positive_int(given[0], "a dispatcher count")
            return
        if f == "work_steal":
            kws = self.kwargs(p, ("n",), where)
            given = list(p.args) + [kw.value for kw in kws.values()]
            if len(given) > 1:
                self.error(
                    p.span,
                    "arity",
                    f"`{f}` takes one dispatcher count",
                    "write `work_steal(n = 4)`",
                )
            elif given:
                self.positive_int(given[0], "a dispatcher count")
            return
        # decision: key policies take the key positionally and the optional count only as `n = N`
        kws = self.kwargs(p, ("n",), where)
        if len(p.args) != 1:
            self.error(
                p.span,
                "arity",
                f"`{f}` takes one key expression (and optionally `n = N`)",
                f"write `{f}(b, n = 4)`",
            )
        else:
            self.key(p.args[0], scope, wname, summary)
        if "n" in kws:
            self.positive_int(kws["n"].value, "a dispatcher count")

    def comb_streams(
        self, c: A.Combinator, scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        arg = self.one_arg(c, ".streams", ".streams(4)")
        if arg is not None:
            self.positive_int(arg, "a stream count")

    def comb_stream_by(
        self, c: A.Combinator, scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        arg = self.one_arg(c, ".stream_by", ".stream_by(h % 4)")
        if arg is not None:
            self.key(arg, scope, wname, summary)

    def comb_timing(
        self, c: A.Combinator, scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        arg = self.one_arg(c, ".timing", ".timing(batched(16))")
        if arg is None:
            return
        p = self.policy(arg, TIMING_POLICIES, "timing policy")
        if p is None:
            return
        f = p.func.id
        if f == "immediate":
            if p.args or p.kwargs:
                self.error(p.span, "arity", "`immediate` takes no arguments")
            return
        # decision: `batched`/`interleaved` also accept `n = N`, `rate_limit` `tasks_per_ms = x` (int or float)
        kwname = "tasks_per_ms" if f == "rate_limit" else "n"
        # decision: `interleaved(n, priority = s)` names the stream every dispatcher starts with
        allowed = (kwname, "priority") if f == "interleaved" else (kwname,)
        kws = self.kwargs(p, allowed, f"{f}(...)")
        prio = kws.pop("priority", None)
        if prio is not None:
            self.compile_int(prio.value, Scope(), "a priority stream")
        given = list(p.args) + [kw.value for kw in kws.values()]
        if len(given) != 1:
            self.error(
                p.span,
                "arity",
                f"`{f}` takes one argument",
                f"write `{f}({'1.5' if f == 'rate_limit' else '16'})`",
            )
            return
        if f != "rate_limit":
            self.positive_int(
                given[0], "a group size" if f == "batched" else "an interleaving count"
            )
            return
        v = self.scalar(given[0], Scope())
        if v.type == "error":
            return
        value = (
            v.value if v.type == "float" else sym.const_value(v.expr) if v.type == "int" else None
        )
        if v.type == "bool" or value is None:
            self.error(
                given[0].span,
                "not-constant",
                "`rate_limit` takes a compile-time number of tasks per millisecond",
                "write `rate_limit(1.5)`",
            )
        elif not value > 0:
            self.error(
                given[0].span, "not-positive", f"`rate_limit` must be positive, found {value}"
            )

    def graph_knobs(
        self, kws: dict[str, A.Keyword], scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        """`deps`, `ready`, `start`, `pools` and `trace` of `.task_graph` (each a policy)."""
        if "deps" in kws:
            p = self.policy(kws["deps"].value, GRAPH_DEPS, "dependency mode")
            if p is not None and (p.args or p.kwargs):
                self.error(p.span, "arity", f"`{p.func.id}` takes no arguments")
        if "ready" in kws:
            p = self.policy(kws["ready"].value, GRAPH_READY, "ready policy")
            if p is not None:
                self.keyed(p, "priority", "priority(b)", scope, wname, summary)
        if "start" in kws:
            p = self.policy(kws["start"].value, GRAPH_START, "start policy")
            if p is not None and p.func.id == "threshold":
                kw = self.kwargs(p, ("n",), "threshold(...)")
                given = list(p.args) + [k.value for k in kw.values()]
                if len(given) != 1:
                    self.error(p.span, "arity", "`threshold` takes one argument",
                               "write `threshold(8)`")
                else:
                    self.positive_int(given[0], "a start threshold")
            elif p is not None and (p.args or p.kwargs):
                self.error(p.span, "arity", "`after_orchestration` takes no arguments")
        if "pools" in kws:
            p = self.policy(kws["pools"].value, GRAPH_POOLS, "pool policy")
            if p is not None and p.func.id == "custom":
                kw = self.kwargs(p, ("n",), "custom(...)")
                if len(p.args) != 1 or "n" not in kw:
                    self.error(p.span, "arity", "`custom` takes a key and `n = N`",
                               "write `custom(h, n = 2)`")
                else:
                    self.key(p.args[0], scope, wname, summary)
                    self.positive_int(kw["n"].value, "a pool count")
            elif p is not None and (p.args or p.kwargs):
                self.error(p.span, "arity", f"`{p.func.id}` takes no arguments")
        if "trace" in kws:
            p = self.policy(kws["trace"].value, GRAPH_TRACE, "trace policy")
            if p is not None and p.func.id == "cycles" and (p.args or p.kwargs):
                # decision: `cycles(key)` is the seeds' cost function: each task's cycles in the
                # cycle model, an integer key over the loop variables like `priority(key)`
                self.keyed(p, "cycles", "cycles(b * 100 + 50)", scope, wname, summary)
            elif p is not None and (p.args or p.kwargs):
                self.error(p.span, "arity", f"`{p.func.id}` takes no arguments")

    def keyed(self, p: A.Call, name: str, example: str, scope: Scope, wname: str,
              summary: Optional[Summary]) -> None:
        """A policy that takes one key when it is `name` (`priority(key)`), else none."""
        if p.func.id != name:
            if p.args or p.kwargs:
                self.error(p.span, "arity", f"`{p.func.id}` takes no arguments")
            return
        if len(p.args) != 1 or p.kwargs:
            self.error(p.span, "arity", f"`{name}` takes one key", f"write `{example}`")
            return
        self.key(p.args[0], scope, wname, summary)

    def comb_task_graph(
        self, c: A.Combinator, scope: Scope, wname: str, summary: Optional[Summary]
    ) -> None:
        # decision: `.task_graph` arguments are keywords only
        for a in c.args:
            self.error(
                a.span,
                "positional-arg",
                "`.task_graph` takes keyword arguments",
                f"write `.task_graph(window = {self.text(a)})`",
            )
        kws = self.kwargs(c, ("window", "unit", "mode", "deps", "ready", "start", "pools",
                              "trace"), ".task_graph")
        if "window" in kws:
            self.positive_int(kws["window"].value, "a task window")
        elif not c.args and not set(kws) - {"unit", "mode"}:
            # decision: a task graph must say something: a window size or one of its knobs
            self.error(
                c.name.span,
                "missing-option",
                "`.task_graph` needs `window = N`",
                "write `.task_graph(window = 8192)`",
            )
        self.graph_knobs(kws, scope, wname, summary)
        if "unit" in kws:
            u = kws["unit"].value
            if not (isinstance(u, A.Name) and u.id == "tasks"):
                self.error(
                    u.span,
                    "bad-option",
                    f"unknown task window unit `{self.text(u)}`; the only unit is `tasks`",
                )
        if "mode" in kws:
            m = kws["mode"].value
            if not (isinstance(m, A.Name) and m.id in TASK_GRAPH_MODES):
                text = m.id if isinstance(m, A.Name) else self.text(m)
                self.error(
                    m.span,
                    "bad-option",
                    f"unknown task window mode `{text}`",
                    did_you_mean(text, TASK_GRAPH_MODES) or "modes are `stall` and `abort`",
                )
