"""`Module` and `Program`: the Python face of a compiled WSP module, shared by every back end.

    m = ptowsp.load("rmsnorm.wsp")            # checked; raises WspError with the diagnostics
    prog = m.compile(target="cpu_sim")        # or "ref", the NumPy oracle
    out = prog.run(bind={"B": 4}, X=x, W=w)   # {"Y": array}; prog.stats has the counts

What this module owns is language.md section 9: binding symbols (explicit, inferred from the
shapes of bound arrays, or defaults), checking every array's dtype and shape against its
declaration, filling unbound inputs with reproducible random data on request, and allocating
outputs and scratch. Every mistake there is a diagnostic at the declaration concerned.
Compiling is the driver's (`driver.py`); running the tasks is the runnable's that the target
opened (`backends/ref`, `backends/cpu`), asked what it can do (`cycle_model`) rather than which
target it is.
"""

from __future__ import annotations

import collections
import operator
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Optional, Union

from . import sym
from .diagnostics import Diagnostic, Note, WspError
from .dtypes import FLOAT_DTYPES, numpy_dtype, size_of
from .limits import INT64_MAX, MAX_WORKERS, MemoryLimit, int_text, memory_limit, size_text
from .spans import Span

if TYPE_CHECKING:  # numpy is imported only when something runs
    import numpy as np

    from .frontend.env import ModuleEnv
    from .ir import nodes


def _is_bf16_array(a) -> bool:
    return getattr(a.dtype, "name", "") == "bfloat16"  # ml_dtypes.bfloat16


@dataclass
class Stats:
    """What a run cost: counts and times. `total_cycles` comes with the cycle model."""

    task_count: int = 0
    compile_time_ms: float = 0.0
    execute_time_ms: float = 0.0
    total_cycles: int = 0
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"task_count": self.task_count, "compile_time_ms": round(self.compile_time_ms, 3),
                "execute_time_ms": round(self.execute_time_ms, 3), "total_cycles": self.total_cycles,
                **self.extra}


class Binding:
    """The symbols and arrays of one run, checked against the declarations (section 9)."""

    def __init__(self, module: "nodes.Module"):
        self.module = module
        self.sources = dict(module.sources)
        self.diags: list[Diagnostic] = []

    def error(self, span, message: str, help: Optional[str] = None, notes=()) -> None:
        self.diags.append(Diagnostic(span, "binding", message, help, tuple(notes)))

    def raise_if_any(self) -> None:
        if self.diags:
            raise WspError(self.diags, self.sources)

    def bind(self, bind: Mapping[str, int], arrays: Mapping[str, Any], random_seed: Optional[int],
             sources: Optional[Mapping[str, str]] = None,
             max_memory: Union[None, int, str, MemoryLimit] = None,
             check_memory: bool = True,
             schedule: Optional[str] = None,
             records: Optional[tuple[int, int]] = None,
             syms_only: bool = False,
             memo: Optional[dict] = None) -> tuple[dict[str, int], dict[str, Any]]:
        """Symbols and input arrays for a run. `sources` names where each array came from
        (`x.npy`) for messages; unknown names and every inconsistency are diagnostics. Once
        every sym is known, and before anything is allocated, the bytes of every tensor are
        checked against `max_memory` (default: the machine's memory; `limits.memory_limit`),
        and the integers `schedule` computes from them (every schedule's when None) against
        int64. `records` (bytes per task, most tasks: a target's cycle model keeps a record per
        task) adds the records of the tasks the syms alone make to the memory check, even
        without `check_memory`; `self.record_limit` is then the bytes left for them. With
        `syms_only`, it stops once the syms `bind`, the arrays' shapes and the defaults give are
        known (`simulate` says itself which others it needs) and returns them and the arrays.
        `memo` (a dict the caller keeps between runs) remembers the sym values whose checks
        passed: those checks depend on nothing else, and a service runs the same sizes again
        and again (they took 0.1-0.2 ms of a decode step)."""
        import numpy as np

        m = self.module
        sources = dict(sources or {})
        syms = {s.name: s for s in m.syms}
        tensors = {t.name: t for t in m.tensors}
        values: dict[str, int] = {}
        origin: dict[str, str] = {}
        for name, v in bind.items():
            if name not in syms:
                raise WspError([Diagnostic(_NO_SPAN, "binding", f"`{name}` is not a sym of module `{m.name}`",
                                           _near(name, syms))], self.sources)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
                self.error(syms[name].span, f"sym `{name}` is bound to {v!r}, but syms are non-negative integers")
                continue
            if v > INT64_MAX:
                self.error(syms[name].span, f"sym `{name}` is bound to {v}, more than a sym can "
                           "be (2^63 - 1: the runtime computes in int64)")
                continue
            values[name] = int(v)
            origin[name] = f"--bind {name}={v}"
        inputs: dict[str, Any] = {}
        for name, a in arrays.items():
            t = tensors.get(name)
            if t is None:
                raise WspError([Diagnostic(_NO_SPAN, "binding", f"`{name}` is not a tensor of module `{m.name}`",
                                           _near(name, tensors))], self.sources)
            if t.kind in ("output", "scratch"):
                self.error(t.span, f"`{name}` is {'an' if t.kind == 'output' else 'a'} {t.kind}; "
                           "it takes no input array", "pass inputs and inouts only")
                continue
            inputs[name] = a
        # infer syms from the bare-symbol dimensions of bound arrays: the first binding fixes
        for name, a in inputs.items():
            t = tensors[name]
            shape = tuple(getattr(a, "shape", ()))
            if len(shape) != len(t.dims):
                continue  # reported below with the shape check
            for d, n in zip(t.dims, shape):
                if not isinstance(d, sym.Var):
                    continue
                where = f"the shape {list(shape)} of `{name}` ({sources.get(name, 'the array')})"
                if d.name in values:
                    if values[d.name] != n:
                        self.error(tensors[name].span,
                                   f"`{d.name}` is {values[d.name]} from {origin[d.name]}, "
                                   f"but {where} makes it {n}",
                                   notes=[Note(syms[d.name].span, f"`{d.name}` is declared here")])
                else:
                    values[d.name] = int(n)
                    origin[d.name] = where
        for name, s in syms.items():
            if name not in values and s.default is not None:
                values[name] = s.default
                origin[name] = "its default"
        self.raise_if_any()
        if syms_only:
            return values, inputs
        for s in (s for n, s in syms.items() if n not in values):
            users = [t.name for t in m.tensors if t.kind in ("input", "inout")
                     and any(isinstance(d, sym.Var) and d.name == s.name for d in t.dims)]
            help = f"bind it with `--bind {s.name}=N`" + (
                f" or pass an array for `{users[0]}`" if users else "")
            self.error(s.span, f"sym `{s.name}` is not bound", help)
        self.raise_if_any()
        limit = memory_limit(max_memory) if check_memory or records else None
        key = (tuple(sorted(values.items())), schedule, check_memory, records,
               limit.bytes if limit else None)
        passed = memo.get(key) if memo is not None else None
        if passed is None:
            self._sym_checks(values, limit, check_memory, records, schedule)
        else:
            self.record_limit = passed
        # random data for unbound inputs
        if random_seed is not None:
            rng = np.random.default_rng(random_seed)
            for t in m.tensors:
                if t.kind in ("input", "inout") and t.name not in inputs:
                    shape = self._shape(t, values)
                    if shape is not None:  # else: a negative dimension, reported
                        inputs[t.name] = _random_array(rng, t.dtype, shape)
        self.raise_if_any()
        # every input present, with exactly its declared dtype and shape
        for t in m.tensors:
            if t.kind not in ("input", "inout"):
                continue
            if t.name not in inputs:
                self.error(t.span, f"{t.kind} `{t.name}` has no array",
                           f"pass it with `--input {t.name}=FILE.npy` (or `--random-inputs SEED`)")
                continue
            a = inputs[t.name]
            want_shape = self._shape(t, values)
            want = np.dtype(numpy_dtype(t.dtype))
            got_dtype = getattr(a, "dtype", None)
            if t.dtype == "bf16" and got_dtype is not None and _is_bf16_array(a):
                a = a.view(np.uint16)
                inputs[t.name] = a
            elif got_dtype != want:
                shown = "bfloat16 (as uint16 raw bits)" if t.dtype == "bf16" else str(want)
                self.error(t.span, f"`{t.name}` is declared {t.dtype}, but its array "
                           f"({sources.get(t.name, 'the array')}) has dtype {got_dtype}",
                           f"convert it first, e.g. `x.astype(np.{shown.split(' ')[0]})`: wspc never casts silently")
                continue
            if want_shape is not None and tuple(a.shape) != want_shape:
                self.error(t.span, f"`{t.name}` is declared {t.dtype}[{', '.join(map(sym.to_str, t.dims))}] = "
                           f"{list(want_shape)}, but its array ({sources.get(t.name, 'the array')}) "
                           f"has shape {list(a.shape)}")
        self.raise_if_any()
        if passed is None:
            self._module_checks(values, divisors=False)
            self.raise_if_any()
            if memo is not None:
                if len(memo) >= 64:  # sizes that keep changing: forget the oldest
                    del memo[next(iter(memo))]
                memo[key] = self.record_limit
        return values, inputs

    def _sym_checks(self, values: Mapping[str, int], limit: Optional[MemoryLimit],
                    check_memory: bool, records: Optional[tuple[int, int]],
                    schedule: Optional[str]) -> None:
        """The checks the sym values alone decide, before any array is looked at: divisors,
        the tensors' and the records' memory, int64 (sets `record_limit`)."""
        # a dimension's divisors first (lower/module.py: its `!=` checks): every shape needs them
        self._module_checks(values, divisors=True)
        self.raise_if_any()
        self.record_limit = 0
        if limit is not None:
            tensors = self._check_memory(values, limit) if check_memory else 0
            self.raise_if_any()
            if records:
                self.record_limit = self._check_tasks(values, limit, tensors, records, schedule)
                self.raise_if_any()
        self._check_int64(values, schedule)
        self.raise_if_any()

    def _module_checks(self, values: Mapping[str, int], divisors: bool) -> None:
        """The module's run-time checks with the bound syms: its divisors that must not be zero
        (`divisors`) or the rest."""
        for c in self.module.checks:
            if (c.check.op == "!=") != divisors:
                continue
            try:
                ok = c.check.evaluate(values)
            except sym.SymError:
                ok = False
            if not ok:
                used = sym.free_vars(c.check.lhs) | sym.free_vars(c.check.rhs)
                self.error(c.span, f"{c.message} (with {_show_syms(values, used)})")

    def _check_int64(self, values: Mapping[str, int], schedule: Optional[str]) -> None:
        """Every integer the runtime computes from the syms (loop extents, view offsets and
        checks, with each `P` loop variable over its range) stays within int64: the C code
        would wrap around silently. Reported at the largest sym it involves."""
        found = _past_int64(self.module, schedule, values)
        if found is None:
            return
        e, reach, span, used = found
        names = sorted(used, key=lambda n: (-values[n], n))
        at = next((s.span for s in self.module.syms if names and s.name == names[0]), span)
        self.error(at, f"with {_show_syms(values, used)}, `{sym.to_str(e)}` may "
                   f"reach {int_text(reach)}, past the runtime's int64 arithmetic (2^63 - 1)",
                   "bind smaller values", notes=[Note(span, "computed here")] if span != at else ())

    def _check_memory(self, values: Mapping[str, int], limit: MemoryLimit) -> int:
        """The tensors' bytes against `limit`: every tensor once (an inout twice: the caller's
        array and the copy the run updates), reported at the sym that makes the largest one
        large (or at that tensor, when only constants size it). Returns the bytes."""
        sized = []
        for t in self.module.tensors:
            shape = self._shape(t, values)
            if shape is None:
                return 0  # a negative dimension: reported
            n = size_of(t.dtype)
            for d in shape:
                n *= d
            sized.append((n, t))
        total = sum(n * (2 if t.kind == "inout" else 1) for n, t in sized)
        if total <= limit.bytes:
            return total
        sized.sort(key=lambda nt: -nt[0])
        big = sized[0][1]
        names = sorted(set().union(*(sym.free_vars(d) for d in big.dims)),
                       key=lambda n: (-values[n], n))
        span = next((s.span for s in self.module.syms if names and s.name == names[0]), big.span)
        used = set().union(*(sym.free_vars(d) for _, t in sized for d in t.dims))
        shown = ", ".join(f"`{t.name}` {size_text(n)}" for n, t in sized[:4] if n) + \
            (", ..." if len([n for n, _ in sized if n]) > 4 else "")
        with_syms = f" with {_show_syms(values, used)}" if used else ""
        self.error(span, f"the tensors need {size_text(total)} of memory{with_syms} ({shown}), "
                   f"more than {limit.what}",
                   "bind smaller sizes, or set another limit (`--max-memory SIZE`; in Python, "
                   "`max_memory=`)",
                   notes=[Note(big.span, f"`{big.name}` is declared "
                                         f"{big.dtype}[{', '.join(map(sym.to_str, big.dims))}] here")]
                   if span != big.span else ())
        return total

    def _check_tasks(self, values: Mapping[str, int], limit: MemoryLimit, tensors: int,
                     records: tuple[int, int], schedule: Optional[str]) -> int:
        """The tasks the syms alone make (`_known_tasks`) against the most the cycle model
        replays, and their records (`records[0]` bytes each) with the tensors' `tensors` bytes
        against `limit`; reported at the sym that makes the most-enumerated call large. Returns
        the bytes left for the records (what the runtime then enforces, for tasks whose number
        depends on data too)."""
        per_task, most = records
        counts = _known_tasks(self.module, schedule, values)
        total = sum(n for n, _, _ in counts)
        left = limit.bytes - tensors
        if counts and (total > most or total * per_task > left):
            n, task, used = max(counts, key=lambda c: c[0])
            names = sorted(used, key=lambda v: (-values[v], v))
            span = next((s.span for s in self.module.syms if names and s.name == names[0]),
                        task.span)
            with_syms = f" with {_show_syms(values, used)}" if used else ""
            notes = [Note(task.span, f"this call of `{task.text}` is enumerated {n} times")] \
                if span != task.span else []
            if total > most:
                self.error(span, f"the run makes {total} tasks{with_syms}, more than the cycle "
                           f"model replays in one run ({most})", "bind smaller sizes", notes)
            else:
                after = f", with the tensors' {size_text(tensors)}," if tensors else ","
                self.error(span, f"the run's {total} tasks{with_syms} need "
                           f"{size_text(total * per_task)} for the cycle model's records "
                           f"({per_task} bytes a task){after} more than {limit.what}",
                           "bind smaller sizes, or set another limit (`--max-memory SIZE`; "
                           "in Python, `max_memory=`)", notes)
        return max(left, 1)

    def _shape(self, t: "nodes.TensorDecl", values: Mapping[str, int]) -> Optional[tuple[int, ...]]:
        try:
            dims = tuple(sym.evaluate(d, values) for d in t.dims)
        except sym.SymError:
            return None
        for d, n in zip(t.dims, dims):
            if n < 0:
                self.error(t.span, f"dimension `{sym.to_str(d)}` of `{t.name}` is {n} "
                           f"(with {_show_syms(values, sym.free_vars(d))})")
                return None
        return dims


def _known_tasks(m: "nodes.Module", schedule: Optional[str], values: Mapping[str, int]):
    """(count, task, syms) of each task call of `schedule` (every schedule's when None) that
    runs a number of times the syms alone decide: the product of the extents of the loops
    around it, and the syms in them. Calls under a loop whose extent depends on data or on an
    outer loop, a `when`, or a CSP construct are left out (the runtime checks them as they
    come): the sum is a lower bound of the run's tasks."""
    from .ir import nodes as N

    found: list = []

    def visit(stmts, times: int, used: frozenset) -> None:
        for st in stmts:
            if isinstance(st, N.Task):
                found.append((times, st, used))
            elif isinstance(st, N.Block):
                visit(st.body, times, used)
            elif isinstance(st, N.Loop):
                try:
                    extent = sym.evaluate(st.extent, values)
                except (sym.SymError, TypeError):
                    continue
                visit(st.body, times * max(extent, 0), used | sym.free_vars(st.extent))

    for sc in m.schedules:
        if schedule is None or sc.name == schedule:
            visit(sc.body, 1, frozenset())
    return found


# the result of `_past_int64` for the last few (module, schedule, syms): a service runs the
# same shapes again and again, and the walk costs ~13 ms on a whole decoder layer (its
# per-statement expressions are kept too, so new syms cost only the bounds)
_INT64_SEEN: "collections.OrderedDict" = collections.OrderedDict()
_EXPRS: "collections.OrderedDict" = collections.OrderedDict()  # id(module) -> (module, memo)


def _past_int64(m: "nodes.Module", schedule: Optional[str], values: Mapping[str, int]):
    key = (id(m), schedule, tuple(sorted(values.items())))
    hit = _INT64_SEEN.get(key)
    if hit is not None and hit[0] is m:
        _INT64_SEEN.move_to_end(key)
        return hit[1]
    found = _past_int64_walk(m, schedule, values)
    _INT64_SEEN[key] = (m, found)
    while len(_INT64_SEEN) > 32:
        _INT64_SEEN.popitem(last=False)
    return found


def _past_int64_walk(m: "nodes.Module", schedule: Optional[str], values: Mapping[str, int]):
    """(expression, magnitude, span, syms) of the first integer expression of `schedule`
    (every schedule when None) and the module's tensors and checks whose value or any
    intermediate may pass 2^63 - 1 with the syms `values`, and the syms that make it large
    (through the ranges of its loop variables too); None when all fit. An expression over
    variables whose range is not known here (data-dependent loops) is left to the runtime's
    checks."""
    from dataclasses import fields, is_dataclass

    from .ir import visit as V
    from .spans import NO_SPAN

    def reach(e, ranges) -> Optional[tuple[int, int]]:
        """(a bound on |value|, a bound on |value| and every |intermediate|); None when a
        variable's range is unknown."""
        if isinstance(e, sym.Const):
            return abs(e.value), abs(e.value)
        if isinstance(e, sym.Var):
            r = ranges.get(e.name)
            return None if r is None else (r, r)
        if isinstance(e, sym.Poly):
            total, peak = abs(e.const), 0
            for mono, c in e.terms:
                term = abs(c)
                for atom, p in mono:
                    r = reach(atom, ranges)
                    if r is None:
                        return None
                    term *= max(r[0], 1) ** p  # each partial product stays below the whole
                    peak = max(peak, r[1])
                total += term
            return total, max(total, peak)
        if isinstance(e, (sym.Min, sym.Max, sym.Abs)):
            rs = [reach(x, ranges) for x in getattr(e, "args", None) or (e.arg,)]
            return None if None in rs else (max(r[0] for r in rs), max(r[1] for r in rs))
        n, d = reach(e.num, ranges), reach(e.den, ranges)
        if n is None or d is None:
            return None
        peak = max(n[1], d[1])
        if isinstance(e, sym.Mod):  # |n mod d| < |d|; C adds d back to a negative remainder
            return d[0], max(peak, 2 * d[0])
        if isinstance(e.den, sym.Const) and e.den.value:
            return -(-n[0] // abs(e.den.value)), peak
        return n[0], peak  # an integer divisor is at least 1 in magnitude

    def exprs(value, span, out):
        if isinstance(value, sym.Expr):
            out.append((value, span))
        elif isinstance(value, sym.Check):
            out += [(value.lhs, span), (value.rhs, span)]
        elif isinstance(value, (tuple, list)):
            for v in value:
                exprs(v, span, out)
        elif is_dataclass(value) and not isinstance(value, type):
            inner = getattr(value, "span", NO_SPAN)
            span = inner if inner != NO_SPAN else span
            for f in fields(value):
                exprs(getattr(value, f.name), span, out)

    def over(e, ranges):
        r = reach(e, ranges)
        return r is not None and r[1] > INT64_MAX, r and r[1]

    def syms_of(e, deps) -> frozenset:
        return frozenset().union(*(deps.get(v, frozenset()) for v in sym.free_vars(e)))

    held = _EXPRS.get(id(m))
    if held is None or held[0] is not m:
        held = _EXPRS[id(m)] = (m, {})
        while len(_EXPRS) > 8:
            _EXPRS.popitem(last=False)
    per_statement = held[1]

    def statement_exprs(st) -> list:
        got = per_statement.get(id(st))
        if got is not None and got[0] is st:
            return got[1]
        nested = {name for name, _ in V.FIELDS.get(type(st), ())}
        found: list = []
        for f in fields(st):
            if f.name not in nested:
                exprs(getattr(st, f.name), getattr(st, "span", NO_SPAN), found)
        per_statement[id(st)] = (st, found)
        return found

    def visit(stmts, ranges, deps):
        for st in stmts:
            for e, span in statement_exprs(st):
                bad, r = over(e, ranges)
                if bad:
                    return e, r, span, syms_of(e, deps)
            inner, inner_deps = ranges, deps
            if isinstance(st, N.Loop):
                try:  # an extent of syms alone is known exactly
                    extent: Optional[int] = abs(sym.evaluate(st.extent, values))
                except (sym.SymError, TypeError):
                    r = reach(st.extent, ranges)
                    extent = None if r is None else r[0]
                inner = {**ranges, st.var: max(extent - 1, 0)} if extent is not None else \
                    {k: v for k, v in ranges.items() if k != st.var}
                inner_deps = {**deps, st.var: syms_of(st.extent, deps)}
            for body in V.children(st):
                hit = visit(body, inner, inner_deps)
                if hit is not None:
                    return hit
        return None

    from .ir import nodes as N

    top = dict(values)
    deps = {name: frozenset((name,)) for name in values}
    for t in m.tensors:
        for d in t.dims:
            bad, r = over(d, top)
            if bad:
                return d, r, t.span, syms_of(d, deps)
    for c in m.checks:
        for e in (c.check.lhs, c.check.rhs):
            bad, r = over(e, top)
            if bad:
                return e, r, c.span, syms_of(e, deps)
    for sc in m.schedules:
        if schedule is None or sc.name == schedule:
            hit = visit(sc.body, top, deps)
            if hit is not None:
                return hit
    return None


def check_workers(workers: Optional[int]) -> None:
    """`workers` is None (the host's cores) or 1 to `MAX_WORKERS`; else a ValueError."""
    if workers is None:
        return
    try:
        n = operator.index(workers) if not isinstance(workers, bool) else None
    except TypeError:
        n = None
    if n is None or not 1 <= n <= MAX_WORKERS:
        raise ValueError(f"workers must be a whole number from 1 to {MAX_WORKERS}, not {workers!r}")


def _show_syms(values: Mapping[str, int], names) -> str:
    return ", ".join(f"{n} = {int_text(values[n])}" for n in sorted(names) if n in values) or "no syms"


def _near(name: str, names) -> Optional[str]:
    from .diagnostics import did_you_mean

    return did_you_mean(name, list(names))


def _random_array(rng, dtype: str, shape):
    import numpy as np

    if dtype in FLOAT_DTYPES:
        a = rng.standard_normal(shape, dtype=np.float32)
        if dtype == "bf16":
            return (a.view(np.uint32) >> 16).astype(np.uint16)
        return a.astype(numpy_dtype(dtype))
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    return rng.integers(0, 8, shape).astype(numpy_dtype(dtype))


_NO_SPAN = Span("<command line>", 0, 0, 0, 0)


class Program:
    """A module compiled for one target and schedule: call `run` as often as you like.
    `backend` is what the target opened: `run(module, schedule, syms, inputs, workers=...)`,
    and `cycle_model` (then `run` also takes `trace`, `machine` and `execute`); a backend whose
    runs keep a record per task has `records` = (bytes per task, most tasks a run may have),
    and its `run` takes `record_limit` (the bytes the memory limit leaves for them)."""

    def __init__(self, module: "nodes.Module", schedule: str, target: str, backend: Any,
                 compile_time_ms: float):
        from .ir.device_arrays import global_view

        # a program lowered to devices runs `_lowered` (per-device arrays); callers, the binding
        # and the command line see the global shapes (docs/distributed.md, "Layouts")
        self._lowered = module
        self.module = global_view(module)
        self.schedule = schedule
        self.target = target
        self._backend = backend
        self.stats = Stats(compile_time_ms=compile_time_ms)
        self._last: Optional[dict] = None
        self._bind_memo: dict = {}  # sym values whose checks passed (Binding.bind)
        self.machine: Any = None  # the cycle model's machine (None: the built-in ascend910b)
        self.trace: Any = None  # a `ptowsp.backends.cpu.trace.Trace` after a run with trace=True
        self.opt_level: Optional[int] = None  # the optimiser level it was compiled at
        self.passes: Any = None  # the `ir.passes.PassManager` that ran (timings), if any

    def run(self, bind: Optional[Mapping[str, int]] = None, random_inputs: Optional[int] = None,
            workers: Optional[int] = None, trace: bool = False,
            max_memory: Union[None, int, str] = None, inplace: bool = False,
            check_replicas: bool = False, **arrays) -> dict[str, "np.ndarray"]:
        """Run with `bind` symbols and the input arrays by name; returns the outputs and inouts
        (new arrays: the caller's arrays are never modified, inouts included, unless `inplace`:
        then the inout arrays, which must be writeable C-contiguous NumPy arrays, are updated
        where they are and returned). With `trace`, `self.trace` then holds the run's trace
        (real and simulated). `workers` is 1 to `limits.MAX_WORKERS`; the tensors may need at
        most `max_memory` (bytes, or a size such as "8G"; default: the machine's memory),
        checked before anything is allocated. On a mesh of several devices, the arrays are the
        global ones (scattered by layout, outputs gathered: replicated parts from device 0);
        `check_replicas` then compares every replica of the outputs and inouts first, and
        reports the first disagreement."""
        return self.run_arrays(arrays, bind, random_inputs, workers, trace=trace,
                               max_memory=max_memory, inplace=inplace,
                               check_replicas=check_replicas)

    def run_arrays(self, arrays: Mapping[str, Any], bind: Optional[Mapping[str, int]] = None,
                   random_inputs: Optional[int] = None, workers: Optional[int] = None,
                   sources: Optional[Mapping[str, str]] = None,
                   trace: bool = False,
                   max_memory: Union[None, int, str, MemoryLimit] = None,
                   inplace: bool = False,
                   check_replicas: bool = False) -> dict[str, "np.ndarray"]:
        """`run`, with `sources` naming where each array came from (for messages)."""
        check_workers(workers)
        limit = memory_limit(max_memory)
        # a trace and the machine are the cycle model's: only a runnable with one takes them
        model = {"trace": trace, "machine": self.machine} if self._backend.cycle_model else {}
        records = getattr(self._backend, "records", None)
        try:
            binding = Binding(self.module)
            syms, inputs = binding.bind(bind or {}, arrays, random_inputs, sources, limit,
                                        schedule=self.schedule, records=records,
                                        memo=self._bind_memo)
            if records:
                model["record_limit"] = binding.record_limit
            updated = self._inplace(arrays, inputs) if inplace else {}
            devices = self._lowered.devices
            native = bool(updated) and getattr(self._backend, "inplace", False) and not devices
            if native:
                model["inplace"] = True
            t0 = time.perf_counter()
            if devices is None:
                outputs, info = self._backend.run(self.module, self.schedule, syms, inputs,
                                                  workers=workers, **model)
            else:
                outputs, info = self._run_devices(syms, inputs, workers, model, check_replicas)
            for name, caller in updated.items():  # a back end that copies: its result copied back
                if outputs[name] is not inputs[name]:
                    inputs[name][...] = outputs[name]
                outputs[name] = caller
        except MemoryError:  # the check passed, but the memory is taken (by other processes)
            raise WspError([Diagnostic(_NO_SPAN, "memory", "the run ran out of memory (its "
                                       f"tensors fit in {limit.what}, but the machine has less "
                                       "free)", "free memory, or run smaller sizes")],
                           dict(self.module.sources)) from None
        self._record(info, t0)
        self._last = outputs
        return outputs

    def _run_devices(self, syms: dict, inputs: dict, workers, model: dict,
                     check_replicas: bool) -> tuple[dict, dict]:
        """A run of a program lowered to devices: the global `inputs` scattered by layout,
        the outputs gathered (after `check_replicas`, if asked)."""
        from .ir import device_arrays as D

        devices = self._lowered.devices
        local = {name: D.scatter(devices, name, a) for name, a in inputs.items()}
        outputs, info = self._backend.run(self._lowered, self.schedule, syms, local,
                                          workers=workers, **model)
        if check_replicas:
            diags = []
            for name, a in outputs.items():
                found = D.first_disagreement(devices, name, a)
                if found is None:
                    continue
                d, ref, index, mine, theirs = found
                t = self.module.tensor(name)
                diags.append(Diagnostic(t.span, "replicas", f"the replicas of `{name}` "
                                        f"disagree: at {list(index)}, device {d} "
                                        f"({D.coordinates_text(devices, d)}) has {mine.item()!r} "
                                        f"and device {ref} ({D.coordinates_text(devices, ref)}) "
                                        f"has {theirs.item()!r}", "a task wrote some replicas and not "
                                        "others, or computed them differently"))
            if diags:
                raise WspError(diags, dict(self.module.sources))
        return {name: D.gather(devices, name, a, self._lowered.tensor(name).dtype)
                for name, a in outputs.items()}, info

    def _inplace(self, arrays: Mapping[str, Any], inputs: dict) -> dict[str, Any]:
        """{inout: the caller's array} for `run(inplace=True)`, each checked to be updatable
        where it is (after the binding checked its dtype and shape)."""
        import numpy as np

        out = {}
        for t in self.module.tensors:
            if t.kind != "inout":
                continue
            given, a = arrays.get(t.name), inputs[t.name]
            ok = (isinstance(given, np.ndarray) and isinstance(a, np.ndarray)
                  and np.shares_memory(given, a) and a.flags.c_contiguous and a.flags.writeable)
            if not ok:
                raise WspError([Diagnostic(
                    t.span, "binding", f"inout `{t.name}` is updated in place (inplace=True), so "
                    "its array must be a writeable C-contiguous NumPy array",
                    "pass `np.ascontiguousarray(x)` (and keep that array), or run without "
                    "inplace")], dict(self.module.sources))
            out[t.name] = given
        return out

    def _record(self, info: dict, t0: float) -> None:
        """Stats (and the trace, if one was taken) of the run that started at t0."""
        self.stats.execute_time_ms = (time.perf_counter() - t0) * 1000
        self.stats.task_count = int(info.get("task_count", 0))
        self.stats.total_cycles = int(info.get("total_cycles", 0))
        self.trace = info.pop("trace", None)
        self.stats.extra = {k: v for k, v in info.items()
                            if k not in ("task_count", "total_cycles")}

    def simulate(self, bind: Optional[Mapping[str, int]] = None, trace: bool = False,
                 max_memory: Union[None, int, str] = None, **arrays) -> Stats:
        """The cycle model alone: tasks are enumerated, ordered and replayed on the machine, no
        kernel runs and no data is needed: a sym comes from `bind`, the shape of an array
        given (as in `run`) or its default, and a tensor not given stands in as zeros.
        Returns `self.stats` (`total_cycles`, utilisation, dispatcher loads in `extra`).

        A schedule whose task space depends on data (a ragged length, a CSR routing, a `when`
        on a tensor element) needs those tensors: pass them by name as in `run`. When it reads
        what its own tasks write (a router's output), the kernels must run to produce it, so
        such a schedule is simulated on a real run (all inputs needed)."""
        import numpy as np

        if not self._backend.cycle_model:
            raise ValueError(f"simulate needs a target with a cycle model, such as cpu_sim "
                             f"({self.target} has none)")
        from .ir import nodes as N
        from .ir import visit as V

        m = self.module
        name = self.schedule or m.default_schedule
        names = {s.name for s in m.schedules}
        body = m.schedule(name).body if name in names else ()  # else: run() reports it
        read, produced = V.read_tensors(body), V.written_tensors(body)
        execute = bool(read & produced)
        # the syms from `bind`, the given arrays' shapes and the defaults (errors in them raise)
        syms, _ = Binding(m).bind(bind or {}, arrays, None, syms_only=True)
        diags = [self._sym_needed(s) for s in m.syms if s.name not in syms]
        for t in sorted(read):
            if t not in arrays and t not in produced:
                at = next(st.span for st in V.walk(body) if isinstance(st, N.Read) and st.tensor == t)
                diags.append(Diagnostic(m.tensor(t).span, "binding",
                                        f"simulating this schedule needs the data of `{t}`: "
                                        "its elements decide which tasks exist",
                                        f"pass it: simulate({t}=...)",
                                        (Note(at, "read here to enumerate the tasks"),)))
        if diags:
            raise WspError(diags, dict(m.sources))
        if execute:
            check = Binding(self.module)  # the stand-ins below are real arrays: they must fit
            check._check_memory(syms, memory_limit(max_memory))
            check.raise_if_any()
        fake = dict(arrays)
        for t in self.module.tensors:  # zero-strided stand-ins: the binding checks their shapes
            if t.kind in ("input", "inout") and t.name not in fake and all(
                    v in syms for d in t.dims for v in sym.free_vars(d)):
                try:
                    shape = tuple(sym.evaluate(d, syms) for d in t.dims)
                except sym.SymError:  # a divisor 0: the binding reports it, at the divisor
                    continue
                zero = np.zeros((), numpy_dtype(t.dtype))
                # kernels that run read real (contiguous) arrays; otherwise nothing is read
                fake[t.name] = np.zeros(shape, zero.dtype) if execute else np.broadcast_to(zero, shape)
        # without kernels nothing is touched: the sizes need not fit in memory (the cycle
        # model's records of the tasks must)
        binding = Binding(self.module)
        records = getattr(self._backend, "records", None)
        syms, inputs = binding.bind(bind or {}, fake, None, None, max_memory,
                                    check_memory=execute, schedule=self.schedule,
                                    records=records)
        t0 = time.perf_counter()
        if self._lowered.devices is not None:  # per-device arrays (docs/distributed.md)
            from .ir import device_arrays as D

            inputs = {n: D.scatter(self._lowered.devices, n, np.asarray(a))
                      for n, a in inputs.items()}
        _, info = self._backend.run(self._lowered, self.schedule, syms, inputs, trace=trace,
                                    machine=self.machine, execute=execute,
                                    **({"record_limit": binding.record_limit} if records else {}))
        self._record(info, t0)
        return self.stats

    def _sym_needed(self, s: "nodes.SymDecl") -> Diagnostic:
        """`s` has no value for `simulate`: which arrays' shapes would give it."""
        users = [t.name for t in self.module.tensors if t.kind in ("input", "inout")
                 and any(isinstance(d, sym.Var) and d.name == s.name for d in t.dims)]
        arrays = " or ".join(f"`{u}`" for u in users)
        return Diagnostic(s.span, "binding", f"sym `{s.name}` is not bound, and simulating "
                          "needs its value (it sizes the tensors and the task space)",
                          f"bind it: simulate(bind={{\"{s.name}\": N}})" + (
                              f", or pass an array for {arrays} (its shape gives it)"
                              if users else ""))


class Module:
    """A checked module (from `ptowsp.load` or `ptowsp.parse`)."""

    def __init__(self, env: "ModuleEnv"):
        self.env = env
        self.name = env.name
        self._ir: Optional["nodes.Module"] = None

    @property
    def ir(self) -> "nodes.Module":
        """The lowered module (raises WspError for constructs no back end supports yet)."""
        if self._ir is None:
            from . import driver

            self._ir = driver.lower(self.env)
        return self._ir

    def compile(self, target: str = "cpu_sim", schedule: Optional[str] = None,
                opt_level: Optional[int] = None, *, verify_each: bool = False,
                print_after=(), time_passes: bool = False,
                mesh: Optional[Mapping[str, int]] = None, **options) -> Program:
        """A `Program` for `target` ("cpu_sim", or "ref": the NumPy oracle), after the
        optimiser's `-O<opt_level>` pipeline (default 2; 0 runs no pass). For a target that
        does not run here ("ascend_npu") it is the target's product instead: the CANN project
        (`.files`, `.warnings`, `.write(directory)`). `options` are the target's settings
        (cpu_sim: `workers`; ascend_npu: `AscendOptions`' fields); a name the target does not
        take is a `ValueError`. `verify_each`, `print_after` (pass names) and `time_passes` are
        the pass manager's (`ir/passes`); the timings are in `Program.passes`. `mesh` sizes
        the module's mesh axes (`{"tp": 4}`: docs/running.md, "--mesh"); a mesh's size is fixed
        here, at compile time."""
        from . import driver

        check_workers(options.get("workers"))
        t = driver.target(target)
        compiled = driver.compile_ir(self.ir, t, schedule, opt_level, options,
                                     verify_each=verify_each, print_after=print_after,
                                     time_passes=time_passes, mesh=mesh)
        if not t.runs_here:
            return compiled.runnable  # the product to ship (docs/ascend.md, "Python API")
        return program(compiled)

    def kernel_code(self, kernel: str, target: str = "cpu_sim", opt_level: Optional[int] = None,
                    **options) -> Any:
        """The generated source of kernel `kernel` on `target` (`backends.target.KernelCode`:
        `entry`, the function's name, and `code`), as compiling the module for that target
        generates it after `-O<opt_level>`; None for a target that generates none ("ref")."""
        from . import driver

        return driver.kernel_code(self.ir, driver.target(target), kernel, opt_level, options)


def program(compiled) -> Program:
    """The `Program` of a module through the driver's stages (`driver.Compiled`)."""
    prog = Program(compiled.module, compiled.schedule, compiled.target.name, compiled.runnable,
                   compiled.compile_time_ms)
    prog.opt_level = compiled.opt_level
    prog.passes = compiled.passes
    return prog


def load_artifact(directory, schedule: Optional[str] = None, workers: Optional[int] = None,
                  target: str = "cpu_sim") -> Program:
    """A `Program` from an artifact directory written by `wspc compile -o DIR`."""
    from . import driver

    check_workers(workers)
    return program(driver.load_artifact(directory, driver.target(target), schedule,
                                        {"workers": workers}))


def program_for_file(path, target: str = "cpu_sim", schedule: Optional[str] = None,
                     workers: Optional[int] = None, opt_level: Optional[int] = None,
                     include_dirs=(), mesh: Optional[Mapping[str, int]] = None,
                     bind: Optional[Mapping[str, int]] = None, **passes) -> Program:
    """Compile a .wsp file, reusing the last build of the same sources when there is one (a
    warm `wspc run` then skips checking, lowering and code generation). `passes` are
    `Module.compile`'s pass manager switches; `include_dirs` cpu_sim's (`extern cpp` headers);
    `mesh` and the syms of `bind` that size the mesh fix its size (`driver.optimize`)."""
    from . import driver

    check_workers(workers)
    options: dict = {"workers": workers}
    if include_dirs:
        options["include_dirs"] = tuple(include_dirs)
    return program(driver.compile_file(path, driver.target(target), schedule, opt_level,
                                       options, mesh=mesh, bind=bind, **passes))
