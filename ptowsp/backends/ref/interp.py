"""The `ref` back end: a NumPy interpreter of the IR, the executable definition of its semantics.

`run(module, schedule, syms, arrays)` binds the symbols, checks and copies the inputs (a caller's
array is never written), zero-fills outputs and scratch, enumerates the schedule's tasks in
order, and returns the outputs and inouts. Enumeration order is always a valid execution order
(inferred dependencies only ever point backwards in it; `seq`, `sequential` and `combine` only
add order), so the interpreter runs each task to completion before the next.

Before a task runs, every `ViewCheck` of its arguments is evaluated; the first that fails raises
`RunError` (message, span, the task's loop coordinates, the values involved) and the task is not
run. Run-time values follow enumeration too: a `Read` checks its index, then takes the element
as the tasks run so far left it (a router kernel's output drives later loops); an `Assert`
that fails raises `RunError` the same way (nothing after it is enumerated); a `When` runs its
first branch whose `Cond` holds (`and` / `or` short-circuit); `SlotSet` sets one of the 64
slots, which start at 0 in every run and are the variables `slot#k` of expressions.

Kernels are evaluated op by op following `ir/nodes.py`:

- Values are NumPy arrays (0-d for scalars) in a compute dtype: f16/bf16/f32 values are held in
  float32, f64 in float64, integers and bool natively. f16/bf16 values are rounded (to nearest,
  ties to even) only by `convert`/`cast` to them, by `literal`/`scalar_param` ops of that dtype
  (a value *of* that type) and by stores. bf16 is rounded by bit manipulation on float32
  (add 0x7FFF plus the lowest kept bit, truncate; NaN stays a quiet NaN); f16 through
  `np.float16`. bf16 tensors are exchanged as uint16 arrays of raw bits (or an array whose dtype
  is named `bfloat16`, read as its bits).
- Integer arithmetic wraps; integer `div` is floor division and x / 0 is 0. Float division
  follows IEEE. `maximum`/`minimum`/reductions propagate NaN.
- `cast` (and `convert`) from float to integer rounds toward zero and saturates; NaN gives 0.
  Number to bool is `x != 0`; bool to number is 0 or 1.
- `gelu` is the tanh approximation, computed as x * sigmoid(2u) (accurate for x < 0),
  `sigmoid` is 1 / (1 + exp(-x)), `silu` x * sigmoid(x), `rsqrt` 1 / sqrt(x), `softmax`
  row-wise with the row maximum subtracted first.

CSP (language.md section 7) follows the coroutine enumeration of `ir/nodes.py` exactly: each
process replica is a Python generator that yields when it must wait (a send whose slot is not
free, a consume whose item is not sent, a pipe whose processes have not finished), and the
scheduler runs them round robin. Tasks still run as they are enumerated, so the results are
those of the dataflow semantics; `Access`es need nothing here (every task before has finished),
`Sync` waits for nothing and `query` holds. A pass in which no coroutine can proceed raises a
`RunError` (code `deadlock`) at the first blocked statement, naming every blocked process, with
notes at the others. `execute` reports per channel the items sent, the most items in flight
(sent and not yet freed) at once and the depth, and per event the records and synchronizes.

Extern kernels: the ref back end cannot run C. A Python implementation registered with
`register_extern(name, fn)` (or passed as `run(..., externs={name: fn})`) is called as
`fn(**params)`: `In` tiles are read-only 2-D arrays, `InOut` tiles writable copies of their
entry value, `Out` tiles zero-filled writable arrays (all in the compute dtype: f16/bf16 as
float32), scalars NumPy scalars, Constexpr values ints. The function writes its `Out`/`InOut`
arrays in place, or returns a dict of their new values; the values are then stored by the
rules of `store`. Without one, running the kernel raises `RunError` naming it.

This module binds a run and starts it; the rules above are implemented by `values.py` (values
and dtype conversions), `kernels.py` (ops and kernels), `runner.py` (statements, tasks,
externs) and `csp.py` (the coroutines).
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional

import numpy as np

from ... import sym
from ...dtypes import numpy_dtype
from ...ir import nodes as N
from .csp import Csp
from .runner import RunError, Runner, describe_check


def _bind(module: N.Module, syms: Mapping[str, int]) -> dict[str, int]:
    known = {s.name: s for s in module.syms}
    for name in syms:
        if name not in known:
            raise RunError(f"unknown symbol `{name}`")
    env: dict[str, int] = {}
    for s in module.syms:
        v = syms.get(s.name, s.default)
        if v is None:
            raise RunError(f"symbol `{s.name}` is not bound", s.span)
        v = int(v)
        if v < 0:
            raise RunError(f"symbol `{s.name}` is bound to {v}, but symbols are non-negative",
                           s.span, values={s.name: v})
        env[s.name] = v
    return env


def _accepts(arr: np.ndarray, dtype: str) -> Optional[np.ndarray]:
    """The array as stored for `dtype`, or None when its dtype is not exactly that."""
    if dtype == "bf16" and arr.dtype.name == "bfloat16":
        return arr.view(np.uint16)
    return arr if arr.dtype == numpy_dtype(dtype) else None


def run(module: N.Module, schedule: Optional[str] = None, syms: Optional[Mapping[str, int]] = None,
        arrays: Optional[Mapping[str, np.ndarray]] = None,
        externs: Optional[Mapping[str, Callable]] = None) -> dict[str, np.ndarray]:
    """Run `schedule` (default: the module's default) and return the outputs and inouts."""
    return execute(module, schedule, syms, arrays, externs)[0]


def execute(module: N.Module, schedule: Optional[str] = None,
            syms: Optional[Mapping[str, int]] = None,
            arrays: Optional[Mapping[str, np.ndarray]] = None,
            externs: Optional[Mapping[str, Callable]] = None) -> tuple[dict[str, np.ndarray], dict]:
    """`run`, also returning what the run did: `{"task_count": n}`, and for a schedule using
    CSP `channels` ({name: {"items", "max_in_flight", "depth"}} for every channel with slots)
    and `events` ({name: {"records", "synchronizes"}} for the events marked or waited for)."""
    syms = dict(syms or {})
    arrays = dict(arrays or {})
    name = schedule if schedule is not None else module.default_schedule
    if name is None:
        names = ", ".join(f"`{s.name}`" for s in module.schedules)
        raise RunError(f"choose a schedule to run: {names}" if names else
                       f"module `{module.name}` has no schedule to run")
    try:
        sched = module.schedule(name)
    except KeyError:
        raise RunError(f"module `{module.name}` has no schedule `{name}`") from None
    env = _bind(module, syms)
    for c in module.checks:
        try:
            ok = c.check.evaluate(env)
        except sym.SymError as err:
            raise RunError(f"{c.message}: {err}", c.span) from None
        if not ok:
            found, values = describe_check(c.check, env)
            raise RunError(f"{c.message}, {found}", c.span, values=values)
    tensors: dict[str, np.ndarray] = {}
    decls = {t.name: t for t in module.tensors}
    for n in arrays:
        if n not in decls:
            raise RunError(f"the module has no tensor `{n}`")
        if decls[n].kind not in ("input", "inout"):
            raise RunError(f"`{n}` is {decls[n].kind} tensor; only inputs and inouts take arrays",
                           decls[n].span)
    for t in module.tensors:
        shape = tuple(sym.evaluate(d, env) for d in t.dims)
        if t.kind in ("input", "inout"):
            if t.name not in arrays:
                raise RunError(f"no array is bound to {t.kind} `{t.name}`", t.span)
            given = np.asarray(arrays[t.name])
            arr = _accepts(given, t.dtype)
            if arr is None or arr.shape != shape:
                want = ("uint16 (bf16 bits)" if t.dtype == "bf16"
                        else numpy_dtype(t.dtype).name)
                raise RunError(f"`{t.name}` must be a {want} array of shape {shape}, found "
                               f"{given.dtype} {given.shape}", t.span)
            tensors[t.name] = np.array(arr, copy=True)  # never write the caller's array
        else:
            tensors[t.name] = np.zeros(shape, dtype=numpy_dtype(t.dtype))
    # decision: the 64 slots hold 0 at the start of every run; a slot keeps the exact integer set
    for k in range(N.NSLOTS):
        env[N.slot_var(k)] = 0
    runner = Runner(module, env, tensors, dict(externs or {}))
    info: dict = {}
    if sched.uses_csp:
        csp = Csp(runner, env)
        csp.run(sched.body)
        info["channels"] = {c.name: csp.channels.get(c.name, {"items": 0, "max_in_flight": 0,
                                                             "depth": c.depth})
                            for c in module.channels if c.slots is not None}
        if csp.events:
            info["events"] = csp.events
    else:
        runner.stmts(sched.body)
    outputs = {t.name: tensors[t.name] for t in module.tensors if t.kind in ("output", "inout")}
    return outputs, {"task_count": runner.task_count, **info}


class Backend:
    """The ref target behind `ptowsp.api.Program` (which binds and checks the arrays):
    `run(m, schedule, syms, inputs) -> (outputs, info)`. A `RunError` becomes a `WspError`
    with one diagnostic at its span, as the other targets report bad views."""

    def __init__(self, externs: Optional[Mapping[str, Callable]] = None):
        self.externs = dict(externs or {})

    def run(self, m: N.Module, schedule: str, syms: Mapping[str, int],
            inputs: Mapping[str, np.ndarray], workers: Optional[int] = None):
        try:
            return execute(m, schedule, syms, inputs, self.externs)
        except RunError as err:
            from ...diagnostics import Diagnostic, Note, WspError  # only when reporting

            code = err.code or ("bad-view" if err.coords or err.values else "run")
            notes = tuple(Note(sp, text) for sp, text in err.notes)
            raise WspError([Diagnostic(err.span, code, err.message, None, notes)],
                           dict(m.sources)) from None
