"""The check that the UB plan (`backends/ub_plan.py`) is what the Ascend emitter does, wrapped
around `KernelEmitter.measure` (tests/ascend/conftest.py applies it to every ascend test)."""

from __future__ import annotations

from ptowsp.backends import ub_plan

CHECKED: list = []  # (kernel, rows, read_acc, cols, sorts) of every measure checked


def buffers(reqs: dict) -> dict:
    """{key: (size, first step, last step, offset)} of an arena's requests."""
    return {key: (q.size, q.start, q.end, q.off) for key, q in reqs.items()}


def check_measure(measure):
    """`measure` (KernelEmitter.measure's function) that also asserts the plan's buffers, in
    the emitter's order, and footprint are the emitter's."""

    def checked(cls, k, rows, read_acc, cols, passes, sorts):
        em, fp = measure(cls, k, rows, read_acc, cols, passes, sorts)
        plan = ub_plan.UbPlan(k, rows, read_acc, cols, passes, sorts)
        where = (f"kernel `{k.name}` in chunks of {rows} rows (read_acc {read_acc}, columns "
                 f"{cols}, {sorts}): the emitter's buffers differ from ub_plan.UbPlan's; a "
                 "writer's temporaries (Frame.temp) must be declared in UbPlan too")
        got, want = buffers(em.reqs), buffers(plan.reqs)
        assert got == want, (where, {x: (got.get(x), want.get(x)) for x in got.keys() | want.keys()
                                     if got.get(x) != want.get(x)})
        assert list(em.reqs) == list(plan.reqs), where  # requested in the same order
        assert fp == plan.footprint, where
        CHECKED.append((k.name, rows, read_acc, cols, sorts))
        return em, fp

    return checked
