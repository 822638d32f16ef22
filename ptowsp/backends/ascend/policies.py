"""What the ascend_npu target does with each schedule combinator (language.md section 8), and
the compile warnings for what it cannot honour. Nothing is dropped silently: every combinator
is either carried into the plan and enforced on the device, or named in a warning.

| combinator | on the NPU |
|---|---|
| `.dispatch(round_robin / affinity / hash / dispatch_by)` | carried: the expander computes each task's dispatcher exactly as cpu_sim; dispatcher d runs on AICore block d mod blocks |
| `.dispatch(work_steal)` | warned: blocks do not steal; each wave's tasks are dealt round robin over the blocks |
| `.streams(n)`, `.stream_by(key)` | carried: a task starts in a later wave than its stream's previous task (in order, never overlapping) |
| `.timing(immediate)` | carried (what the dispatcher does anyway) |
| `.timing(batched / interleaved / rate_limit)` | warned: a wave's tasks are issued as soon as the wave starts |
| `.task_graph(window = N, mode = stall)` | carried: a segment holds at most N tasks, all finished before the next is enumerated |
| `.task_graph(mode = abort)` | warned: the window never overflows (the expander stalls), so the run never aborts |
| `.task_graph(deps / ready / start / pools / trace = ...)` | warned when not the default: the expander issues each wave's tasks at once, with the exact dependencies, and keeps no trace |
| axis transforms (`split`, `tile`, ...) | applied by lowering: already in the loop tree |
"""

from __future__ import annotations

from typing import Mapping, Optional

from ... import sym
from ...diagnostics import Diagnostic
from ...ir import nodes as N
from ...spans import NO_SPAN, Span


def _warning(span: Optional[Span], name: str, message: str, help: Optional[str] = None) -> Diagnostic:
    return Diagnostic(span or NO_SPAN, "ascend-policy", message, help, severity="warning")


def policy_warnings(s: N.Schedule, spans: Mapping[str, Span]) -> list[Diagnostic]:
    """The warnings for schedule `s`; `spans` locates each combinator (by name) in the source."""
    out = []
    if "dispatch" in s.given and s.dispatch.name == "work_steal":
        out.append(_warning(
            spans.get("dispatch"), "dispatch",
            f"`.dispatch({_policy_text(s.dispatch)})` is not honoured on ascend_npu: AICore blocks do not "
            "steal tasks; each wave's tasks are dealt round robin over the blocks instead",
            "use round_robin, affinity, hash or dispatch_by to place tasks on the NPU"))
    if "timing" in s.given and s.timing.name != "immediate":
        out.append(_warning(
            spans.get("timing"), "timing",
            f"`.timing({_policy_text(s.timing)})` is not honoured on ascend_npu: the dispatcher "
            "issues every task of a wave as soon as the wave starts",
            "the cpu_sim target and its cycle model enforce it"))
    if "task_graph" in s.given and s.window_mode == "abort":
        out.append(_warning(
            spans.get("task_graph"), "task_graph",
            "`.task_graph(mode = abort)` never aborts on ascend_npu: the expander hands the "
            f"window's {s.window} tasks to the AICore and waits for them before it enumerates "
            "more, as `mode = stall` does"))
    knobs = graph_knobs(s)
    if knobs:
        out.append(_warning(
            spans.get("task_graph"), "task_graph",
            f"`.task_graph({', '.join(knobs)})` is not honoured on ascend_npu: the expander "
            "issues each wave's tasks at once, waits on the exact dependencies and keeps no "
            "trace", "the cpu_sim target and its cycle model enforce it"))
    return out


def graph_knobs(s: N.Schedule) -> list[str]:
    """The task-graph knobs of `s` other than their defaults, as written (`ready = fifo`)."""
    # hybrid (declared order and inferred edges) is what the expander does, as the default
    deps = "infer_tensor_map_exact" if s.deps == "hybrid" else s.deps
    given = [("deps", deps, "infer_tensor_map_exact"),
             ("ready", _policy_text(s.ready), "work_steal()"),
             ("start", _policy_text(s.start), "threshold(1)"),
             ("pools", _policy_text(s.pools), "single()"), ("trace", s.trace + (f"({sym.to_str(s.trace_cost)})" if s.trace_cost is not None
                                  else ""), "none")]
    return [f"{k} = {v}" for k, v, default in given if v != default]


def _policy_text(p: N.Policy) -> str:
    args = [sym.to_str(a) if isinstance(a, sym.Expr) else str(a) for a in p.args]
    if p.name == "interleaved" and len(args) == 2:
        args[1] = f"priority = {args[1]}"
    if p.n is not None:
        args.append(f"n = {p.n}")
    return f"{p.name}({', '.join(args)})"


def policy_summary(s: N.Schedule, ndispatchers: int) -> list[str]:
    """One line per combinator of `s`: what the NPU does with it (for the README)."""
    out = []
    if "dispatch" in s.given:
        d = _policy_text(s.dispatch)
        if s.dispatch.name == "work_steal":
            out.append(f"`.dispatch({d})`: not honoured (warned): each wave's tasks are dealt "
                       "round robin over the AICore blocks")
        else:
            out.append(f"`.dispatch({d})`: carried; dispatcher d of {ndispatchers} runs its "
                       "tasks on AICore block d mod blocks")
    else:
        out.append("no `.dispatch`: each wave's tasks are dealt round robin over the blocks")
    if "streams" in s.given:
        key = f", `.stream_by({sym.to_str(s.stream_by)})`" if s.stream_by is not None else ""
        out.append(f"`.streams({s.streams})`{key}: carried; a stream's tasks run in order, one "
                   "wave after another")
    if "timing" in s.given:
        t = _policy_text(s.timing)
        out.append(f"`.timing({t})`: " + ("carried" if s.timing.name == "immediate" else
                                           "not honoured (warned): a wave's tasks are issued "
                                           "at once"))
    if graph_knobs(s):
        out.append(f"`.task_graph({', '.join(graph_knobs(s))})`: not honoured (warned)")
    if s.window is not None:
        out.append(f"`.task_graph(window = {s.window}, mode = {s.window_mode})`: a segment "
                   f"holds at most {s.window} tasks" +
                   (" (abort never happens: warned)" if s.window_mode == "abort" else ""))
    for t in s.transforms:
        out.append(f"`.{t}`: applied when the loop tree was built")
    return out
