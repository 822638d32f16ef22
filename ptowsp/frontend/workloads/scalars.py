"""Scalar expressions in workloads and schedules: integer index arithmetic over loop variables,
consts, syms, integer tensor elements, slots and `query`; conditions; compile-time floats.

Each expression gets an `SVal` (its type and, for integers, its symbolic value) or `ERR` after
a reported error, which silences everything built on it.
"""

from __future__ import annotations

from typing import Optional

from ... import sym, sym_size
from ...diagnostics import Diagnostics, did_you_mean
from ...dtypes import FLOAT_DTYPES
from ...limits import INT64_MAX, MAX_INT_EXPR, int_text
from .. import ast as A
from ..mesh import check_replicated_index
from ..signatures import SIZE_HELP
from .scope import ERR, AxisVal, Item, LetVal, LoopVar, Pending, ProcessName, Scope, SVal, describe
from .views import not_a_view_message
from .wording import article, type_words

SCALAR_FUNCS = ("slot", "query", "min", "max", "abs", "ceildiv")


class ScalarChecks:
    """Part of `Body`: scalar expressions."""

    def int_expr(self, e: A.Expr, scope: Scope, what: str) -> SVal:
        v = self.scalar(e, scope)
        if v.type in ("error", "int"):
            return v
        text = self.text(e)
        found = "a condition" if v.type == "bool" else "a float"
        self.error(e.span, "not-integer", f"{what} must be an integer, but `{text}` is {found}")
        return ERR

    def compile_int(self, e: A.Expr, scope: Scope, what: str, report: bool = True) -> Optional[int]:
        """A compile-time integer (literals and consts); None after an error."""
        saved, saved_exact = self.diags, self.exact_ints
        if not report:
            self.diags = Diagnostics()
        # a compile-time integer is folded exactly; its consumer checks the range (a schedule's
        # counts, a Constexpr), and reports the value however large
        self.exact_ints = True
        try:
            v = self.int_expr(e, scope, what)
            if v.type == "error":
                return None
            n = sym.const_value(v.expr)
            if n is None:
                self.error(
                    e.span,
                    "not-constant",
                    f"{what} must be a compile-time integer, but `{self.text(e)}` "
                    "is only known at run time",
                    "use literals and consts",
                )
            return n
        finally:
            self.diags, self.exact_ints = saved, saved_exact

    def scalar(self, e: A.Expr, scope: Scope) -> SVal:
        v = self._scalar(e, scope)
        if (v.type == "int" and v.expr is not None and not self.exact_ints
                and sym_size.largest_const(v.expr) > INT64_MAX):
            # decision: the code computes every integer of a workload in int64 (a folded
            # constant included), so a number past it is an error where it first appears
            self.error(e.span, "int64", f"`{self.text(e)}` holds {int_text(sym_size.largest_const(v.expr))}, "
                       "past int64 (every integer of a workload is computed in int64)")
            return ERR
        return v

    def _scalar(self, e: A.Expr, scope: Scope) -> SVal:
        if isinstance(e, A.IntLit):
            return SVal("int", sym.const(e.value))
        if isinstance(e, A.FloatLit):
            return SVal("float", value=e.value)
        if isinstance(e, A.BoolLit):
            return SVal("bool")
        if isinstance(e, A.Name):
            return self.scalar_name(e, scope)
        if isinstance(e, A.Attr):
            return self.scalar_attr(e, scope)
        if isinstance(e, A.Index):
            return self.element(e, scope)
        if isinstance(e, A.Call):
            return self.scalar_call(e, scope)
        if isinstance(e, A.Unary):
            return self.scalar_unary(e, scope)
        if isinstance(e, A.Binary):
            return self.scalar_binary(e, scope)
        if isinstance(e, (A.DenseAxis, A.DenseDynAxis, A.RaggedAxis, A.SparseAxis)):
            self.error(e.span, "not-scalar", "an axis is not a scalar value")
            return ERR
        if isinstance(e, A.StrLit):
            self.error(e.span, "not-scalar", "a string is not a scalar value")
            return ERR
        self.error(e.span, "not-scalar", "expected a scalar expression")
        return ERR

    def scalar_name(self, n: A.Name, scope: Scope) -> SVal:
        b = scope.lookup(n.id)
        if isinstance(b, LoopVar):
            return SVal("int", b.var)
        if isinstance(b, LetVal):
            return self.let_scalar(n, b)
        if isinstance(b, Item):
            return SVal("int", b.var)  # `t` in a scalar expression means `t.index`
        if isinstance(b, Pending):
            self.same_loop(n)
            return ERR
        if isinstance(b, AxisVal):
            self.error(
                n.span,
                "not-scalar",
                f"`{n.id}` is an axis, not a scalar",
                f"iterate it: `for i in P({n.id}) {{ ... }}`",
            )
            return ERR
        if isinstance(b, ProcessName):
            self.error(
                n.span,
                "not-scalar",
                f"`{n.id}` is a process, not a scalar",
                f"`{n.id}.id` is its replica number" if b.replicas is not None else None,
            )
            return ERR
        env = self.env
        if n.id in env.consts:
            return SVal("int", sym.const(env.consts[n.id]))
        kind = env.kind_of(n.id)
        if kind == "sym":
            return SVal("int", sym.var(n.id))
        if kind == "const":
            return ERR  # its declaration is wrong and was reported
        if kind is None and self.key_of is not None:
            loops = sorted(v for v in scope.visible() if isinstance(scope.lookup(v), LoopVar))
            self.error(
                n.span,
                "unknown-name",
                f"unknown name `{n.id}` in a schedule key",
                did_you_mean(n.id, loops)
                or (
                    f"keys use the loop variables of `{self.key_of}`: "
                    + ", ".join(f"`{v}`" for v in loops)
                    if loops
                    else f"`{self.key_of}` has no loop variables"
                ),
            )
            return ERR
        later = scope.later_let(n.id) if kind is None else None
        if later is not None:
            self.let_too_early(n, later)
            return ERR
        if kind is None:
            self.error(
                n.span,
                "unknown-name",
                f"unknown name `{n.id}`",
                did_you_mean(n.id, list(env.names) + scope.visible()),
            )
            return ERR
        help = None
        if kind == "tensor" and n.id in env.tensors:
            dims = len(env.tensors[n.id].dims)
            help = (
                f"read one element with `{n.id}[{', '.join('ijkl'[k % 4] for k in range(dims))}]`"
            )
        self.error(n.span, "not-scalar", f"`{n.id}` is {article(kind)}, not a scalar", help)
        return ERR

    def scalar_attr(self, e: A.Attr, scope: Scope) -> SVal:
        base = e.value
        b = scope.lookup(base.id) if isinstance(base, A.Name) else None
        if isinstance(b, LetVal) and b.poisoned:
            return ERR
        text = self.text(e)
        if e.attr == "T":
            # decision: `.T` belongs to tensor views passed to tiles; a scalar has no transpose
            self.error(e.span, "transpose-not-view", not_a_view_message(text, "a scalar"))
            return ERR
        if e.attr == "pos":
            if isinstance(b, LoopVar) and b.kind == "sel" and b.pos is not None:
                return SVal("int", b.pos)
            self.error(
                e.span, "bad-attr", f"`{text}`: `.pos` is only defined on a `P.sel` loop variable"
            )
            return ERR
        if e.attr == "index":
            if isinstance(b, Item):
                return SVal("int", b.var)
            self.error(
                e.span,
                "bad-attr",
                f"`{text}`: `.index` is only defined on the item of `consume(ch) as t`",
            )
            return ERR
        if e.attr == "id":
            if isinstance(b, ProcessName) and b.var is not None:
                return SVal("int", b.var)
            if isinstance(b, ProcessName):
                # decision: `NAME.id` needs `process NAME * N` (a process without replicas has no ids)
                self.error(
                    e.span,
                    "bad-attr",
                    f"`{text}`: process `{b.name}` has no replicas",
                    f"declare replicas with `process {b.name} * N`",
                )
                return ERR
            self.error(
                e.span,
                "bad-attr",
                f"`{text}`: `.id` is only defined inside `process NAME * N`, on NAME",
            )
            return ERR
        self.error(
            e.span,
            "bad-attr",
            f"unknown attribute `.{e.attr}`",
            "scalar attributes are `e.pos` (P.sel), `t.index` (consume) and `NAME.id` (process replicas)",
        )
        return ERR

    def element(self, e: A.Index, scope: Scope) -> SVal:
        """`T[i, j]`: one element of an integer (or bool) tensor.

        decision: element reads get the same range checks as views (compile error when provably out
        of range, else a run-time check blamed on the read)."""
        if not isinstance(e.value, A.Name):
            self.error(
                e.span, "not-scalar", "only tensor elements can be read in a scalar expression"
            )
            return ERR
        name = e.value.id
        b = scope.lookup(name)
        if b is not None or name not in self.env.tensors:
            if isinstance(b, AxisVal) or (b is None and self.env.kind_of(name) == "axis"):
                self.error(e.span, "not-scalar", f"`{self.text(e)}` is an axis, not a scalar")
                return ERR
            if isinstance(b, LetVal) and b.poisoned:
                return ERR
            if b is not None:
                self.error(
                    e.value.span, "not-scalar", f"`{name}` is {describe(b)}; it cannot be indexed"
                )
                return ERR
            kind = self.env.kind_of(name)
            later = scope.later_let(name)
            if kind is None and later is not None:
                self.let_too_early(e.value, later)
            elif kind is None:
                self.error(
                    e.value.span,
                    "unknown-name",
                    f"unknown name `{name}`",
                    did_you_mean(name, list(self.env.names) + scope.visible()),
                )
            elif kind != "tensor":
                self.error(
                    e.value.span,
                    "not-scalar",
                    f"`{name}` is {article(kind)}; only tensor elements can be read here",
                )
            return ERR
        t = self.env.tensors[name]
        if t.dtype in FLOAT_DTYPES:
            # decision: scalar expressions are integer index arithmetic; float data is read by kernels, never here
            self.error(
                e.span,
                "float-element",
                f"`{self.text(e)}` is an element of {t.dtype} tensor `{name}`; scalar "
                "expressions read only integer tensor elements",
                "read float data inside a kernel",
            )
            return ERR
        check_replicated_index(self.env, self.diags, t, e.value)
        if len(e.items) != len(t.dims):
            self.error(
                e.span,
                "element-indices",
                f"`{name}` has {len(t.dims)} dimension"
                f"{'s' if len(t.dims) != 1 else ''}; reading an element needs exactly one index per dimension, "
                f"but {len(e.items)} {'is' if len(e.items) == 1 else 'are'} given",
            )
            return ERR
        idx: list[sym.Expr] = []
        ok = True
        for axis, (item, dim) in enumerate(zip(e.items, t.dims)):
            if isinstance(item, A.Slice):
                self.error(
                    item.span,
                    "element-slice",
                    "a slice selects many elements; a scalar expression reads one",
                    "index every dimension with an integer",
                )
                ok = False
                continue
            v = self.int_expr(item, scope, "a tensor index")
            if v.type == "error":
                ok = False
                continue
            if self.sound_tensor(name):
                ok &= self.index_in_range(v.expr, item, dim, axis, name, e.span, self.text(e))
            idx.append(v.expr)
        if not ok:
            return ERR
        if t.dtype == "bool":
            # decision: elements of bool tensors are conditions
            return SVal("bool")
        return SVal("int", self.opaque(f"{name}[{', '.join(sym.to_str(i) for i in idx)}]", t.dtype))

    def scalar_call(self, e: A.Call, scope: Scope) -> SVal:
        f = e.func.id
        if e.prefix:
            self.error(
                e.span,
                "not-scalar",
                f"`{e.prefix}.{f}` is a kernel primitive, not a scalar function",
            )
            return ERR
        if f in self.env.kernels or f in self.env.workloads:
            self.error(
                e.span,
                "not-scalar",
                "a task call is a statement, not a value",
                "call kernels on their own line",
            )
            return ERR
        if f not in SCALAR_FUNCS:
            self.error(
                e.func.span,
                "unknown-function",
                f"unknown scalar function `{f}`",
                did_you_mean(f, SCALAR_FUNCS)
                or "scalar functions are " + ", ".join(f"`{x}`" for x in SCALAR_FUNCS),
            )
            return ERR
        arity = {"slot": 1, "query": 1, "abs": 1}.get(f, 2)
        if e.kwargs or len(e.args) != arity:
            self.error(e.span, "arity", f"`{f}` takes {arity} argument{'s' if arity > 1 else ''}")
            return ERR
        if f == "slot":
            k = self.slot_index(e.args[0], scope)
            return ERR if k is None else SVal("int", self.opaque(f"slot({k})", "u64"))
        if f == "query":
            a = e.args[0]
            if not isinstance(a, A.Name):
                self.error(a.span, "bad-query", "`query` takes an event", "write `query(ev)`")
                return ERR
            # decision: `query` takes an event or a channel
            return SVal("bool") if self.channel(a, scope, "query") is not None else ERR
        args = [self.scalar(a, scope) for a in e.args]
        if any(a.type == "error" for a in args):
            return ERR
        for a, v in zip(e.args, args):
            if v.type == "bool":
                self.error(
                    a.span,
                    "not-number",
                    f"`{f}` needs numbers, but `{self.text(a)}` is a condition",
                )
                return ERR
        if any(v.type == "float" for v in args):
            if f == "ceildiv":
                bad = next(a for a, v in zip(e.args, args) if v.type == "float")
                self.error(
                    bad.span,
                    "not-integer",
                    f"`ceildiv` needs integers, but `{self.text(bad)}` is a float",
                )
                return ERR
            vals = [v.value if v.type == "float" else sym.const_value(v.expr) for v in args]
            value = None
            if all(x is not None for x in vals):
                value = {"min": min, "max": max, "abs": abs}[f](*vals)
            return SVal("float", value=value)
        xs = [v.expr for v in args]
        if f == "ceildiv" and sym.const_value(xs[1]) == 0:
            self.error(e.args[1].span, "division-by-zero", "`ceildiv` by zero")
            return ERR
        fn = {"min": sym.min_, "max": sym.max_, "abs": sym.abs_, "ceildiv": sym.ceildiv}[f]
        return self.sized(fn(*xs), e.span)

    def scalar_unary(self, e: A.Unary, scope: Scope) -> SVal:
        v = self.scalar(e.operand, scope)
        if v.type == "error":
            return ERR
        if e.op == "not":
            if v.type != "bool":
                self.error(
                    e.operand.span,
                    "not-bool",
                    f"`not` needs a condition, but `{self.text(e.operand)}` is {type_words(v.type)}",
                )
                return ERR
            return SVal("bool")
        if v.type == "bool":
            self.error(
                e.operand.span,
                "not-number",
                f"`{e.op}` needs a number, but `{self.text(e.operand)}` is a condition",
            )
            return ERR
        if v.type == "float":
            return SVal("float", value=-v.value if v.value is not None else None)
        return SVal("int", sym.neg(v.expr))

    def sized(self, value: sym.Expr, span: A.Span) -> SVal:
        if sym_size.too_large(value, MAX_INT_EXPR):
            self.error(span, "expression-size", "this integer expression is too large: more than "
                       f"{MAX_INT_EXPR} terms and factors once expanded", SIZE_HELP)
            return ERR
        return SVal("int", value)

    def scalar_binary(self, e: A.Binary, scope: Scope) -> SVal:
        lhs, rhs = self.scalar(e.left, scope), self.scalar(e.right, scope)
        if lhs.type == "error" or rhs.type == "error":
            return ERR
        op = e.op
        if op in ("and", "or"):
            for side, v in ((e.left, lhs), (e.right, rhs)):
                if v.type != "bool":
                    self.error(
                        side.span,
                        "not-bool",
                        f"`{op}` needs conditions, but `{self.text(side)}` is {type_words(v.type)}",
                        f"compare it: `{self.text(side)} > 0`",
                    )
                    return ERR
            return SVal("bool")
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if (lhs.type == "bool") != (rhs.type == "bool") or (
                lhs.type == "bool" and op not in ("==", "!=")
            ):
                self.error(
                    e.op_span,
                    "bad-compare",
                    f"`{op}` cannot compare {type_words(lhs.type)} with {type_words(rhs.type)}",
                )
                return ERR
            return SVal("bool")
        for side, v in ((e.left, lhs), (e.right, rhs)):
            if v.type == "bool":
                self.error(
                    side.span,
                    "not-number",
                    f"`{op}` needs numbers, but `{self.text(side)}` is a condition",
                )
                return ERR
        if lhs.type == "float" or rhs.type == "float":
            # decision: scalar arithmetic mixing floats gives a float (usable only as a float scalar argument)
            lv = lhs.value if lhs.type == "float" else sym.const_value(lhs.expr)
            rv = rhs.value if rhs.type == "float" else sym.const_value(rhs.expr)
            value = None
            if lv is not None and rv is not None:
                try:
                    value = {
                        "+": lambda a, b: a + b,
                        "-": lambda a, b: a - b,
                        "*": lambda a, b: a * b,
                        "/": lambda a, b: a / b,
                        "%": lambda a, b: a % b,
                    }[op](lv, rv)
                except ZeroDivisionError:
                    self.error(e.op_span, "division-by-zero", f"`{op}` by zero")
                    return ERR
            return SVal("float", value=value)
        if op in ("/", "%") and sym.const_value(rhs.expr) == 0:
            self.error(e.op_span, "division-by-zero", f"`{op}` by zero")
            return ERR
        fn = {"+": sym.add, "-": sym.sub, "*": sym.mul, "/": sym.floordiv, "%": sym.mod}[op]
        try:
            return self.sized(fn(lhs.expr, rhs.expr), e.op_span)
        except sym.SymError:
            self.error(e.op_span, "division-by-zero", f"`{op}` by zero")
            return ERR
