"""Scalar expressions of a workload (extents, view bounds, predicates, scalar arguments,
coordinates) as `sym` expressions and `N.Cond`s, the run-time values they read, and the
proofs that leave out the checks already known to hold.

Run-time values (language.md sections 5 and 6) become statements of the loop tree:
- An element read `T[i, j]` in a scalar expression is an `N.Read` into a fresh variable
  `T@n` (n counts the schedule's reads), placed right before the statement using it (a loop's
  extent: before the Loop; a task's arguments: before the Task), shared by repeated reads of
  one element in one statement, with `ViewCheck`s for the index bounds not proved here.
- A fact that must hold at run time (a ragged length is not negative, ...) is an `N.Assert`
  before the statement, unless proved.
- `slot(k)` is the variable `N.slot_var(k)`.
Schedule keys are over the task's coordinates only: a key reading elements, slots or `query`
is `Unsupported`.
"""

from __future__ import annotations

from typing import Optional

from .. import sym
from ..diagnostics import InternalError
from ..dtypes import TABLE
from ..frontend import ast as A
from ..frontend.printer import expr_str
from ..ir import nodes as N
from ..spans import Span
from .scope import Alias, ItemVar, Let, LoopVar, ProcVar, Scope, SelVar
from .unsupported import UNSUPPORTED, Unsupported

Scalar = tuple  # (kind, value): ("int", sym.Expr) | ("float", float) | ("bool", bool | N.Cond)
UNKNOWN = sym.Interval(None, None)
# decision: an element read gives the element's value as a signed 64-bit integer; the range the
# proofs assume follows the dtype (an unsigned integer narrower than 64 bits or a bool is
# within its limits, the rest unknown)
READ_RANGES = {name: sym.Interval(*d.limits) for name, d in TABLE.items()
               if d.kind != "float" and not d.signed and d.bits < 64}


def not_(c):
    """The negation of a condition (a bool or an `N.Cond`)."""
    if isinstance(c, bool):
        return not c
    if c.op == "not":
        return c.args[0]
    return N.Cond("not", (c,))


def and_(a, b):
    """The conjunction of two conditions, folded when one is decided."""
    if a is False or b is False:
        return False
    if a is True:
        return b
    if b is True:
        return a
    return N.Cond("and", (a, b))


def or_(a, b):
    """The disjunction of two conditions, folded when one is decided."""
    if a is True or b is True:
        return True
    if a is False:
        return b
    if b is False:
        return a
    return N.Cond("or", (a, b))


def zero_divisor(whole: str, divisor: str) -> str:
    """The message of a divisor found zero at run time (after it: `, found 0`)."""
    return f"division by zero in `{whole}`: `{divisor}` must not be zero"


class ValueLowering:
    """Scalar expressions, element reads, asserts and proofs: a mixin of
    `workloads.WorkloadLowerer`, whose `__init__` sets the state used here (`env`; `pre`, `memo`,
    `nreads` and `dyn` for the reads; `ranges`, `extents`, `given` and `proofs` for the proofs)."""

    # ---- run-time values: element reads and asserts
    def read(self, tensor: str, index: tuple, texts: tuple, what: str, span: Span,
             checks: Optional[tuple] = None) -> sym.Expr:
        """A Read of `tensor[index]` placed before the current statement (shared within it):
        its variable. `texts` spell the indices and `what` the read in messages; `checks`, when
        given, replace the checks of the indices (a gather view checks its slice instead)."""
        key = (tensor, tuple(index))
        if key in self.memo:
            return sym.var(self.memo[key])
        if self.pre is None:
            # decision: schedule keys are over the task's coordinates only: reading tensor elements or slots in a key is unsupported
            raise Unsupported(span, f"reading tensor elements in a schedule key (`{what}`) "
                              f"{UNSUPPORTED}")
        t = self.env.tensors[tensor]
        given = checks
        checks: list[N.ViewCheck] = [] if given is None else list(given)
        for text, i, dim in zip(texts, index, t.dims) if given is None else ():
            self.require(checks, i, ">=", sym.const(0),
                         f"index `{text}` of `{what}` must not be negative", span)
            self.require(checks, i, "<", dim,
                         f"index `{text}` of `{what}` must be less than {sym.to_str(dim)}", span)
        self.nreads += 1
        # decision: a Read variable is `TENSOR@n` (n counts the reads of the schedule): never a source name
        var = f"{tensor}@{self.nreads}"
        self.pre.append(N.Read(var, tensor, tuple(index), tuple(checks), span))
        self.ranges[var] = READ_RANGES.get(t.dtype, UNKNOWN)
        self.dyn.add(var)
        self.memo[key] = var
        return sym.var(var)

    def assert_(self, lhs: sym.Expr, op: str, rhs: sym.Expr, message: str, span: Span) -> None:
        """An Assert before the current statement, unless the fact is proved."""
        if self.decide(lhs, op, rhs) is True:
            return
        if self.pre is None:
            raise InternalError("lower", "an Assert outside a statement")
        self.pre.append(N.Assert(N.ViewCheck(sym.Check(lhs, op, rhs, message), message, span)))

    def divisor(self, d: sym.Expr, whole: A.Expr, node: A.Expr) -> None:
        """`d`, the value of `node`, divides in `whole` (`/`, `%`, `ceildiv`): an Assert that it
        is not zero before the current statement, unless proved (a zero divisor is an error, not
        a value); in a schedule key, which no statement evaluates, it must be proved."""
        # decision: integer division by zero in a workload scalar expression is a run-time error at the divisor, on every target (the checker rejects a divisor that is zero at compile time)
        if self.pre is not None:
            self.assert_(d, "!=", sym.const(0), zero_divisor(expr_str(whole), expr_str(node)),
                         node.span)
        elif self.decide(d, "!=", sym.const(0)) is not True:
            raise Unsupported(node.span, f"dividing by `{expr_str(node)}` in a schedule key "
                              f"(`{expr_str(whole)}`), which may be zero, {UNSUPPORTED}")

    def overflow(self, op: str, a: sym.Expr, b: sym.Expr, whole: A.Expr, operands) -> None:
        """`a op b` (`+`, `-`, `*`; negation and `abs` are `0 - b`), the value of `whole`: an
        Assert that it is within int64 before the current statement, when an operand depends
        on data (the check before the run bounds the rest, docs/running.md) and it is not
        proved. `operands` are the operands as written (the constant ones are not named)."""
        # decision: a value past int64 in a scalar expression over run-time values is a run-time error at the expression, on every target (they would wrap or be undefined)
        if self.pre is None or not (self.late(a) or self.late(b)):
            return
        key = ("fits", op, a, b)  # once per statement (self.memo is the statement's)
        if key in self.memo:
            return
        self.memo[key] = True
        value = {"+": sym.add, "-": sym.sub, "*": sym.mul}[op](a, b)
        r = sym.bounds(value, self.data_ranges(value, dict(self.ranges)))
        if r.lo is not None and r.hi is not None and sym.INT64[0] <= r.lo and r.hi <= sym.INT64[1]:
            return
        values = (a, b)[-len(operands):]  # negation: `operands` holds b's only
        named = " and ".join(f"`{expr_str(o)}`" for o, v in zip(operands, values)
                             if not sym.is_const(v))
        message = f"`{expr_str(whole)}` overflows int64 with {named}"
        self.pre.append(N.Assert(N.ViewCheck(sym.Check(a, op + "fits", b, message), message,
                                             whole.span)))

    def late(self, e: sym.Expr) -> bool:
        """Whether the range of `e` depends on data (element reads, slots, loops over them,
        CSP items): what the check before the run cannot bound."""
        for v in sym.free_vars(e):
            if v in self.env.syms:
                continue
            if v in self.dyn or N.slot_index(v) is not None:
                return True
            r = self.ranges.get(v)
            if r is not None and r.lo is not None and r.hi is not None:
                continue
            ext = self.given.get(v)  # None: a CSP item, or a variable unknown here
            if ext is None or self.late(ext):
                return True
        return False

    def data_ranges(self, e: sym.Expr, ranges: dict) -> dict:
        """`ranges` with what the overflow proofs may add for the variables of `e`: a read
        variable (`T@n`) is within its tensor's dtype (a 64-bit element: int64), and a loop
        variable over an extent computed from one is below that extent's bound. (The other
        proofs keep READ_RANGES: a signed element there is unknown.)"""
        for v in sym.free_vars(e):
            tensor = v.rpartition("@")[0]
            if v in self.dyn and tensor in self.env.tensors:
                d = TABLE[self.env.tensors[tensor].dtype]
                ranges[v] = sym.Interval(*d.limits) if d.bits < 64 else sym.Interval(*sym.INT64)
            elif v in self.extents and ranges.get(v, sym.NONNEG).hi is None:
                hi = sym.bounds(self.extents[v], self.data_ranges(self.extents[v], ranges)).hi
                if hi is not None and hi >= 1:
                    ranges[v] = sym.Interval(0, hi - 1)
        return ranges

    def axis_divisors(self, decl: A.AxisDecl) -> None:
        """The divisors of a module-level axis's extent (`axis rows = DenseDyn(N / M)`, over
        syms and consts), asserted as `divisor` does before the statement using the axis, at
        the divisor as written in the declaration."""
        ax = decl.axis
        while isinstance(ax, A.Name) and ax.id in self.env.axes:  # `axis a = b`: b's extent
            ax = self.env.axes[ax.id].decl.axis
        self.int_expr(ax.extent if isinstance(ax, (A.DenseAxis, A.DenseDynAxis)) else ax, Scope())

    def element(self, e: A.Expr, scope: Scope) -> Scalar:
        """`T[i, j]` in a scalar expression: a Read (a bool element is the condition `!= 0`)."""
        if not (isinstance(e, A.Index) and isinstance(e.value, A.Name)
                and e.value.id in self.env.tensors):
            raise InternalError("lower", f"`{expr_str(e)}` is not a tensor element")
        t = self.env.tensors[e.value.id]
        index = tuple(self.int_expr(i, scope) for i in e.items)
        v = self.read(t.name, index, tuple(expr_str(i) for i in e.items), expr_str(e), e.span)
        if t.dtype == "bool":
            return ("bool", N.Cond("!=", (v, sym.const(0))))
        return ("int", v)

    # ---- scalar expressions
    def int_expr(self, e: A.Expr, scope: Scope) -> sym.Expr:
        kind, v = self.scalar(e, scope)
        if kind != "int":
            raise InternalError("lower", f"`{expr_str(e)}` is not an integer expression")
        return v

    def scalar(self, e: A.Expr, scope: Scope) -> Scalar:
        if isinstance(e, A.IntLit):
            return ("int", sym.const(e.value))
        if isinstance(e, A.FloatLit):
            return ("float", e.value)
        if isinstance(e, A.BoolLit):
            return ("bool", e.value)
        if isinstance(e, A.Name):
            b = scope.lookup(e.id)
            if isinstance(b, (LoopVar, SelVar, ItemVar)):
                return ("int", sym.var(b.name))
            if isinstance(b, Alias):
                return ("int", b.value)
            if isinstance(b, Let):  # as if its expression were written here
                return self.scalar(b.expr, b.scope)
            if b is None and e.id in self.env.consts:
                return ("int", sym.const(self.env.consts[e.id]))
            if b is None and e.id in self.env.syms:
                return ("int", sym.var(e.id))
            raise InternalError("lower", f"`{e.id}` is not a scalar here")
        if isinstance(e, A.Index):
            return self.element(e, scope)
        if isinstance(e, A.Attr):
            b = scope.lookup(e.value.id) if isinstance(e.value, A.Name) else None
            if e.attr == "pos" and isinstance(b, SelVar):
                return ("int", sym.var(b.pos))
            if e.attr == "index" and isinstance(b, ItemVar):
                return ("int", sym.var(b.name))
            if e.attr == "id" and isinstance(b, ProcVar) and b.var is not None:
                return ("int", sym.var(b.var))
            raise InternalError("lower", f"`{expr_str(e)}` is not a scalar here")
        if isinstance(e, A.Call):
            f = e.func.id
            if f == "query":
                if self.pre is None:
                    raise Unsupported(e.span, f"`query` in a schedule key {UNSUPPORTED}")
                # decision: `query(X)` is the run-time predicate Cond("query", (X,)): every task marked by X's latest `record` and sent to X so far has finished
                return ("bool", N.Cond("query", (e.args[0].id,)))
            if f == "slot":
                k = self.slot_number(e.args[0], scope)
                if self.pre is None:
                    raise Unsupported(e.span, f"reading slots in a schedule key "
                                      f"(`{expr_str(e)}`) {UNSUPPORTED}")
                name = N.slot_var(k)
                self.ranges[name] = UNKNOWN
                return ("int", sym.var(name))
            args = [self.scalar(a, scope) for a in e.args]
            if all(k == "int" for k, _ in args):
                if f == "ceildiv":
                    self.divisor(args[1][1], e, e.args[1])
                if f == "abs":  # |INT64_MIN| is past int64
                    self.overflow("-", sym.const(0), args[0][1], e, e.args)
                fn = {"min": sym.min_, "max": sym.max_, "abs": sym.abs_, "ceildiv": sym.ceildiv}[f]
                return ("int", fn(*(v for _, v in args)))
            nums = [self.number(k, v, e) for k, v in args]
            return ("float", float({"min": min, "max": max, "abs": abs}[f](*nums)))
        if isinstance(e, A.Unary):
            k, v = self.scalar(e.operand, scope)
            if e.op == "not":
                return ("bool", not_(v))
            if k == "int":
                self.overflow("-", sym.const(0), v, e, (e.operand,))
            return (k, sym.neg(v) if k == "int" else -v)
        if isinstance(e, A.Binary):
            return self.scalar_binary(e, scope)
        raise InternalError("lower", f"unexpected scalar expression {type(e).__name__}")

    def number(self, kind: str, v, e: A.Expr) -> float:
        if kind == "float":
            return v
        c = sym.const_value(v)
        if c is None:
            raise Unsupported(e.span, f"float arithmetic on run-time values (`{expr_str(e)}`) "
                              f"{UNSUPPORTED}")
        return c

    def scalar_binary(self, e: A.Binary, scope: Scope) -> Scalar:
        (lk, lv), (rk, rv) = self.scalar(e.left, scope), self.scalar(e.right, scope)
        op = e.op
        if op in ("and", "or"):
            return ("bool", and_(lv, rv) if op == "and" else or_(lv, rv))
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if lk == "int" and rk == "int":
                r = self.decide(lv, op, rv)
                return ("bool", r if r is not None else N.Cond(op, (lv, rv)))
            if lk == "bool" or rk == "bool":
                if isinstance(lv, bool) and isinstance(rv, bool):
                    return ("bool", (lv == rv) if op == "==" else (lv != rv))
                same = or_(and_(lv, rv), and_(not_(lv), not_(rv)))
                return ("bool", same if op == "==" else not_(same))
            a, b = self.number(lk, lv, e.left), self.number(rk, rv, e.right)
            return ("bool", {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b,
                             "!=": a != b}[op])
        if lk == "int" and rk == "int":
            if op in ("/", "%"):
                self.divisor(rv, e, e.right)
            else:
                self.overflow(op, lv, rv, e, (e.left, e.right))
            fn = {"+": sym.add, "-": sym.sub, "*": sym.mul, "/": sym.floordiv, "%": sym.mod}[op]
            return ("int", fn(lv, rv))
        a, b = self.number(lk, lv, e.left), self.number(rk, rv, e.right)
        return ("float", {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                          "/": lambda: a / b, "%": lambda: a % b}[op]())

    # ---- proofs (the checker's: intervals, then loop variables written as `E - 1 - u`)
    def decide(self, lhs: sym.Expr, op: str, rhs: sym.Expr) -> Optional[bool]:
        return sym.prove_in_loops(lhs, op, rhs, self.ranges, self.extents, self.proofs)

    def require(self, checks: list, lhs: sym.Expr, op: str, rhs: sym.Expr, reason: str,
                span: Span) -> None:
        # decision: a fact not proved here is a ViewCheck, even one that is always false: the task may never be enumerated, and the error belongs to the task that is
        if self.decide(lhs, op, rhs) is not True:
            checks.append(N.ViewCheck(sym.Check(lhs, op, rhs, reason), reason, span))

    def const_int(self, e: A.Expr, scope: Optional[Scope] = None) -> int:
        v = sym.const_value(self.int_expr(e, scope or Scope()))
        if v is None:
            raise InternalError("lower", f"`{expr_str(e)}` is not a compile-time integer")
        return v

    def slot_number(self, e: A.Expr, scope: Optional[Scope] = None) -> int:
        k = self.const_int(e, scope)
        if not 0 <= k < N.NSLOTS:
            raise InternalError("lower", f"slot {k} does not exist")
        return k

