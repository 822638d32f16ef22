"""The AICPU side of the tree: `aicpu/expand.aicpu` (the plan interpreter, the same text for
every program), `include/wsp_expand.h` (what it shares with the host), `include/wsp_plan.h`
(the plain-data ABI of all three sides) and `include/wsp_plan_data.h` (this schedule's plan
words, which the host copies to the device). See plan.py for what the words mean."""

from __future__ import annotations

from ... import sym
from ...ir import nodes as N
from .abi import ABI_C
from .plan import Plan, build_plan, c_array, c_defines
from .render import render


def shared_files() -> dict[str, str]:
    """The files that do not depend on the program."""
    return {
        "include/wsp_plan.h": render("include/wsp_plan.h", abi=ABI_C, defines=c_defines()),
        "include/wsp_expand.h": render("include/wsp_expand.h"),
        "aicpu/expand.aicpu": render("aicpu/expand.aicpu"),
    }


def plan_data(module: N.Module, plan: Plan) -> str:
    """`include/wsp_plan_data.h`: the words, with a table of contents in comments."""
    tasks = [f"{i}: {t.text} ({t.span.line}:{t.span.col})" for i, t in enumerate(plan.tasks)]
    checks = [f"{i}: {c.check.message} ({c.check.span.line}:{c.check.span.col})"
              for i, c in enumerate(plan.checks)]
    return render("include/wsp_plan_data.h", module=module.name, schedule=plan.schedule,
                  words=c_array(plan), nwords=len(plan.words), tasks=tasks,
                  checks=[c.replace("*/", "* /") for c in checks],
                  kernels=[k.name for k in module.kernels],
                  tensors=[f"{t.name}: {t.kind} {t.dtype}[{_dims(t)}]" + _placed(t)
                           for t in module.tensors])


def _placed(t: N.TensorDecl) -> str:
    """A tensor's placement hint, as the tree records it: the tree itself keeps every tensor in
    global memory (the AICore kernels stage tiles through UB/L1 on their own)."""
    if t.location == "global":
        return ""
    return f" (location = {t.location}: a hint; allocated in global memory)"


def _dims(t: N.TensorDecl) -> str:
    return ", ".join(sym.to_str(d) for d in t.dims)


def plan_files(module: N.Module, schedule: str) -> tuple[Plan, dict[str, str]]:
    """The plan of `schedule` and its header file."""
    plan = build_plan(module, schedule)
    return plan, {"include/wsp_plan_data.h": plan_data(module, plan)}
