"""Workload bodies and schedules (language.md sections 5 to 8): `check_workloads(env, diags)`.

`module.py` is the driver: it checks every workload body once and every schedule with a `Body`
(body.py), then the CSP rules across workloads (csp_roots.py). A `Body` is one class composed
of one mixin per concept over the shared state of `BodyState` (state.py); the mixins call each
other through `self`:

    statements.py   StatementChecks  parameters, blocks, loops, `when`, task calls, slots
    lets.py         LetChecks        `let`: names for scalar expressions and views, poisoned
                                     after an error so one mistake gives one diagnostic
    csp.py          CspChecks        pipes, processes, channels, events, send/consume/record/
                                     synchronize (rendezvous cycles: deadlock.py)
    axes.py         AxisChecks       axis expressions, ragged/sparse inner axes, loop axes
    edges.py        EdgeChecks       task handles (`let t = k[i](...)`) and `after`: edges named
                                     one by one
    inline.py       InlineChecks     inlined workload calls, binding a workload's axis arguments
    calls.py        CallChecks       kernel calls: arguments by name, scalars, tiles, items, slots
    collectives.py  CollectiveChecks collective statements; where a task runs on the mesh
    views.py        ViewChecks       tensor views: indices and slices in range, view shapes
    scalars.py      ScalarChecks     scalar expressions (index arithmetic, elements, conditions)
    schedules.py    ScheduleChecks   schedules: combinators, policies, keys; the axis transforms
                                     are applied to a loop model by schedule_axes.py

What a name means in a body (axes, loop variables, items, processes, lets) is in scope.py; message
phrasing shared by the checks in wording.py. Every user error becomes a diagnostic; a broken
invariant raises `InternalError("check", ...)`.
"""

from .module import check_workloads

__all__ = ["check_workloads"]
