"""The ref interpreter's task runner: `Runner` enumerates a schedule's statements in order
(loops, element reads, asserts, `when`, slots) and runs every task to completion as it is
enumerated (its view checks, the tile reads, the kernel or a registered Python extern, the
stores). `RunError` is a run-time error of the program. The rules are the semantics in
`interp.py`."""

from __future__ import annotations

from typing import Callable, Mapping, Optional

import numpy as np

from ... import sym
from ...diagnostics import InternalError
from ...dtypes import kind_of, numpy_compute_dtype, to_compute, to_storage
from ...ir import nodes as N
from ...ir.visit import Visitor
from ...spans import NO_SPAN, Span
from .kernels import eval_kernel
from .values import convert, scalar_value, value_dtype


class RunError(Exception):
    """A run-time error of the program: `message` is reported at `span` (the argument or
    declaration to blame) with the task's loop coordinates (`coords`: ((name, value), ...)) and
    the values involved (`values`: {expression text: value}). `partial` holds the outputs and
    inouts as they were when the error was raised (the failing task wrote nothing)."""

    def __init__(self, message: str, span: Span = NO_SPAN, coords: tuple = (),
                 values: Optional[dict] = None, partial: Optional[dict] = None,
                 code: Optional[str] = None, notes: tuple = ()):
        super().__init__(message)
        self.message = message
        self.span = span
        self.coords = tuple(coords)
        self.values = dict(values or {})
        self.partial = partial
        self.code = code  # None: `bad-view` or `run` (see Backend.run)
        self.notes = tuple(notes)  # ((span, text), ...): the other places involved

    def __str__(self) -> str:
        if self.span.line:
            return f"{self.span}: {self.message}"
        return self.message


_EXTERNS: dict[str, Callable] = {}


def register_extern(name: str, fn: Callable) -> None:
    """Run extern kernel `name` (its name in the program) with `fn` in the ref back end."""
    _EXTERNS[name] = fn


def unregister_extern(name: str) -> None:
    _EXTERNS.pop(name, None)


def describe_check(c: sym.Check, env: Mapping[str, int]) -> tuple[str, dict]:
    """What a failed check found (`found 3`) and the values of its non-constant sides."""
    values = {}
    lv, rv = sym.evaluate(c.lhs, env), sym.evaluate(c.rhs, env)
    if not sym.is_const(c.lhs):
        values[sym.to_str(c.lhs)] = lv
    if not sym.is_const(c.rhs):
        values[sym.to_str(c.rhs)] = rv
    if sym.is_const(c.rhs):
        found = f"found {lv}"
    elif sym.is_const(c.lhs):
        found = f"found {rv}"
    else:
        found = f"found {lv} and {rv}"
    return found, values


class Runner(Visitor):
    """Runs the statements of one schedule over bound symbols and tensors (`execute`), one
    `visit_<Class>` per statement class."""

    def __init__(self, module: N.Module, env: dict[str, int], tensors: dict[str, np.ndarray],
                 externs: Mapping[str, Callable]):
        self.m = module
        self.env = env
        self.tensors = tensors
        self.externs = externs
        self.kernels = {k.name: k for k in module.kernels}
        self.decls = {t.name: t for t in module.tensors}
        self.loops: list[tuple[str, int]] = []
        self.task_count = 0

    def partial(self) -> dict[str, np.ndarray]:
        return {n: a.copy() for n, a in self.tensors.items()
                if self.decls[n].kind in ("output", "inout")}

    def error(self, message: str, span: Span = NO_SPAN, values: Optional[dict] = None):
        raise RunError(message, span, tuple(self.loops), values, self.partial())

    def where(self, task: Optional[N.Task] = None) -> str:
        at = ", ".join(f"{n}={v}" for n, v in self.loops)
        text = f"task `{task.text}`" if task is not None else "enumeration"
        return f" ({text}{' at ' + at if at else ''})"

    def eval(self, e: sym.Expr, span: Span = NO_SPAN, task: Optional[N.Task] = None) -> int:
        try:
            return sym.evaluate(e, self.env)
        except sym.SymError as err:
            # a zero divisor has an Assert before its statement (lower/values.py, `divisor`)
            # and the syms are bound and checked before the run: nothing else can fail here
            raise InternalError("ref", f"cannot evaluate `{sym.to_str(e)}`: {err}"
                                       f"{self.where(task)}") from None

    def at(self) -> str:
        """` (at b=1, e.pos=0)`: the loop coordinates of a failed read or assert."""
        at = ", ".join(f"{n}={v}" for n, v in self.loops)
        return f" (at {at})" if at else ""

    def check(self, vc: N.ViewCheck, where: str) -> None:
        """Raise the RunError of `vc` if it does not hold (`where`: the coordinates text)."""
        try:
            ok = vc.check.evaluate(self.env)
        except sym.SymError as err:
            self.error(f"{vc.message}: {err}{where}", vc.span)
        if not ok:
            found, values = describe_check(vc.check, self.env)
            if vc.found:
                found = vc.found.format(*(sym.evaluate(e, self.env) for e in vc.shown))
            self.error(f"{vc.message}, {found}{where}", vc.span, values)

    # -- statements, by class (ir.visit.Visitor)
    def stmts(self, body) -> None:
        for st in body:
            self.visit(st)

    def visit_Loop(self, st: N.Loop) -> None:
        # decision: a loop's extent is evaluated once, when the loop starts
        n = self.eval(st.extent)
        saved = self.env.get(st.var)
        for i in range(max(n, 0)):
            self.env[st.var] = i
            self.loops.append((st.var, i))
            try:
                self.stmts(st.body)
            finally:
                self.loops.pop()
        if saved is None:
            self.env.pop(st.var, None)
        else:
            self.env[st.var] = saved

    def visit_Block(self, st: N.Block) -> None:
        self.stmts(st.body)

    def visit_Assert(self, st: N.Assert) -> None:
        self.check(st.check, self.at())

    def visit_When(self, st: N.When) -> None:
        for c, branch in st.branches:
            if self.cond(c):
                self.stmts(branch)
                break
        else:
            self.stmts(st.otherwise)

    def visit_SlotSet(self, st: N.SlotSet) -> None:
        self.env[N.slot_var(st.slot)] = self.eval(st.value, st.span)

    def visit_other(self, st) -> None:
        # a statement of any other class runs as a task, as it always has here: the task is the
        # only one that comes here (csp.py's `Csp` runs the CSP statements and hands it the rest)
        self.task(st)

    def visit_Read(self, r: N.Read) -> None:
        """One element, after every check of its index; earlier tasks have all run, so it is
        the value their writes left."""
        for vc in r.checks:
            self.check(vc, self.at())
        idx = tuple(self.eval(i, r.span) for i in r.index)
        arr = self.tensors[r.tensor]
        if any(not 0 <= i < n for i, n in zip(idx, arr.shape)):
            raise InternalError("ref", f"read `{r.var}` of `{r.tensor}{list(idx)}` is outside "
                                       "the tensor and no check said so")
        v = int(arr[idx])
        # decision: an element is read as a signed 64-bit integer (a u64 element past 2**63 - 1 wraps, as in C)
        if v >= 2**63:
            v -= 2**64
        self.env[r.var] = v

    def cond(self, c: N.Cond) -> bool:
        if c.op == "const":
            return bool(c.args[0])
        if c.op == "query":
            # decision: in ref every task enumerated so far has finished, so `query` always holds
            return True
        if c.op == "not":
            return not self.cond(c.args[0])
        if c.op == "and":
            return self.cond(c.args[0]) and self.cond(c.args[1])
        if c.op == "or":
            return self.cond(c.args[0]) or self.cond(c.args[1])
        a, b = (self.eval(x) for x in c.args)
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
                ">=": a >= b}[c.op]

    def task(self, t: N.Task) -> None:
        k = self.kernels[t.kernel]
        self.task_count += 1
        # every check of every argument before anything runs
        for a in t.args:
            if isinstance(a, N.TileArg):
                for vc in a.checks:
                    self.check(vc, self.where(t))
        boxes: dict[str, tuple] = {}
        inputs: dict[str, np.ndarray] = {}
        params = {p.name: p for p in k.params}
        for a in t.args:
            p = params[a.param]
            if isinstance(a, N.TileArg):
                offs = [self.eval(o, t.span, t) for o in a.offsets]
                exts = [self.eval(e, t.span, t) for e in a.extents]
                arr = self.tensors[a.tensor]
                steps = a.steps or (1,) * len(offs)
                # the bounding box of the view's elements (a strided view's last one is at
                # o + (e - 1) * k); NumPy's basic slicing `o:o + (e - 1) * k + 1:k` picks them
                ends = [o + (e - 1) * k + 1 if e > 0 else o for o, e, k in zip(offs, exts, steps)]
                if any(o < 0 or end > n or e < 0 for o, e, end, n in zip(offs, exts, ends, arr.shape)):
                    raise InternalError("ref", f"the box of `{a.param}` in `{t.text}` is "
                                               f"outside `{a.tensor}` and no check said so")
                box = tuple(slice(o, end, k) for o, end, k in zip(offs, ends, steps))
                boxes[a.param] = box
                # a partial view: its extents, 1 <= e <= the tile's (checked above)
                vr = exts[a.row_dim] if a.row_dim is not None else 1
                vc = exts[a.col_dim] if a.col_dim is not None else 1
                if a.gather is not None:
                    # row i is row rows[i] of the row dimension (each checked above), for the
                    # `count` rows of the index slice (the rest of a partial tile is padding)
                    vr = self.eval(a.gather.count, t.span, t) if a.gather.count is not None else p.rows
                    base = self.eval(a.gather.base, t.span, t) if a.gather.base is not None else 0
                    rows = [self.eval(r, t.span, t) - base for r in a.gather.rows[:vr]]
                    gathered = np.take(arr[box], rows, axis=a.row_dim)
                inputs[f"valid_rows:{a.param}"] = np.int32(vr)
                inputs[f"valid_cols:{a.param}"] = np.int32(vc)
                if a.mode != "w":
                    src = (gathered.reshape(vr, vc) if a.gather is not None
                           else tile_view(arr, box, a))
                    view = to_compute(src, p.dtype)
                    if (vr, vc) != (p.rows, p.cols):
                        # decision: a load of a partial view fills the rest with the parameter's pad
                        tile = np.empty((p.rows, p.cols), dtype=view.dtype)
                        tile[...] = scalar_value(p.pad, p.dtype)
                        tile[:vr, :vc] = view
                        view = tile
                    inputs[a.param] = view
            else:
                v = a.value
                if isinstance(v, sym.Expr):
                    v = self.eval(v, t.span, t)
                # decision: a scalar argument is a value of its parameter's dtype (an f16 Scalar is rounded to f16, an integer wraps)
                with np.errstate(over="ignore"):
                    inputs[a.param] = scalar_value(v, a.dtype)
        if k.is_extern:
            outs = self.extern(k, inputs)
        else:
            outs = eval_kernel(k, inputs)
        # stores take effect as the kernel finishes
        for name, value in outs.items():
            a = next(x for x in t.args if x.param == name)
            vr, vc = inputs[f"valid_rows:{name}"], inputs[f"valid_cols:{name}"]
            # a store writes only the view (all of the tile unless the view is partial), through
            # the same NumPy view a load reads (a transposed view writes the transpose back)
            tile_view(self.tensors[a.tensor], boxes[name], a)[...] = (
                to_storage(value, params[name].dtype)[:vr, :vc])

    def extern(self, k: N.Kernel, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        # decision: extern kernels run only through a registered Python function (by source name, for every specialisation), called with NumPy tiles in the compute dtype; its Out/InOut arrays (or a returned dict) are stored by the rules of `store`
        fn = self.externs.get(k.source) or _EXTERNS.get(k.source)
        if fn is None:
            self.error(f"kernel `{k.source}` is an extern kernel, which the ref back end cannot "
                       "run; register a Python implementation with "
                       f"`ptowsp.backends.ref.register_extern({k.source!r}, fn)`", k.span)
        kwargs: dict = {}
        for p in k.params:
            if p.kind == "scalar":
                kwargs[p.name] = inputs[p.name][()]
            elif p.mode == "In":
                x = np.array(inputs[p.name])
                x.setflags(write=False)
                kwargs[p.name] = x
            elif p.mode == "InOut":
                kwargs[p.name] = np.array(inputs[p.name])
            else:
                kwargs[p.name] = np.zeros((p.rows, p.cols), dtype=numpy_compute_dtype(p.dtype))
        kwargs.update(dict(k.constexprs))
        result = fn(**kwargs)
        out = {}
        for p in k.params:
            if p.kind != "tile" or p.mode == "In":
                continue
            if isinstance(result, Mapping) and p.name in result:
                v = np.asarray(result[p.name])
            else:
                v = kwargs[p.name]
            if v.dtype.kind == "f" or kind_of(p.dtype) == "float":
                v, src = v.astype(np.float64), "f64"
            else:
                src = value_dtype(v)
            with np.errstate(all="ignore"):
                v = convert(v, src, p.dtype)
            out[p.name] = np.array(np.broadcast_to(v, (p.rows, p.cols)))
        return out




def tile_view(arr: np.ndarray, box: tuple, a: N.TileArg) -> np.ndarray:
    """The 2-D NumPy view of `a`'s box of `arr` (no copy), element (i, j) the tile's: the
    dimensions that are not the tile's (extent 1) dropped, a promoted 1 added, and a
    transposed view (`a.row_dim` after `a.col_dim`) read as `.T`."""
    sub = arr[box]
    keep = tuple(d for d in (a.row_dim, a.col_dim) if d is not None)
    sub = sub[tuple(slice(None) if d in keep else 0 for d in range(sub.ndim))]
    if a.row_dim is None:
        return sub.reshape(1, -1) if sub.ndim else sub.reshape(1, 1)
    if a.col_dim is None:
        return sub.reshape(-1, 1)
    return sub.T if a.transposed else sub
