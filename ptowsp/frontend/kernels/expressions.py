"""Kernel expressions: names, literals, operators and primitive calls, each typed (dtype and
tile shape) by the primitive table and operator rules of `ptowsp/primitives`.

An expression found wrong gets the error type, which silences everything built on it.
"""

from __future__ import annotations

from typing import Optional

from ... import sym
from ...diagnostics import Note, did_you_mean
from ...dtypes import ALIASES, DTYPES
from ...primitives import (
    ARITH_OPERATORS,
    COMPARE_OPERATORS,
    ERROR,
    LOGIC_OPERATORS,
    PRIMITIVES,
    Arg,
    Primitive,
    Type,
    compare,
    elementwise_binary,
    literal_type,
    logic,
    scalar,
    tile,
    unary,
)
from .. import ast as A
from ..printer import expr_str
from ..signatures import NotSymbolic, to_sym

# Names users bring from NumPy/Triton that are not primitives here, with what to write instead.
_FUNCTION_HELP = {
    "sum": "use `rowsum` or `colsum`",
    "mean": "use `rowmean` or `colmean`",
    "dot": "use `matmul(a, b)`",
    "zeros": "use `full(M, N, 0, f32)`",
    "ones": "use `full(M, N, 1, f32)`",
    "alloc": "use `full(M, N, 0, f32)`",
    "zeros_like": "use `full(M, N, 0, f32)`",
    "clamp": "use `minimum(maximum(x, lo), hi)`",
    "exp2": "use `exp(x * 0.6931471805599453)`",
}


class ExprChecks:
    """Part of `KernelChecker`: expressions and their types."""

    def expr(self, e: A.Expr) -> Type:
        t = self._expr(e)
        self.exprs[id(e)] = t
        return t

    def _arg(self, e: A.Expr) -> Arg:
        return Arg(self.expr(e), e.span)

    def _expr(self, e: A.Expr) -> Type:
        if isinstance(e, A.Name):
            return self.name_type(e)
        if isinstance(e, A.IntLit):
            return literal_type("int")
        if isinstance(e, A.FloatLit):
            return literal_type("float")
        if isinstance(e, A.BoolLit):
            return literal_type("bool")
        if isinstance(e, A.Unary):
            return unary(self._typing(e.op, e.span), e.op, self._arg(e.operand))
        if isinstance(e, A.Binary):
            return self.binary(e)
        if isinstance(e, A.Call):
            return self.call(e)
        if isinstance(e, A.StrLit):
            return self.error(e.span, "not-kernel-expr", "strings are not kernel values")
        if isinstance(e, A.Index):
            return self.index(e)
        if isinstance(e, A.Attr):
            return self.error(e.span, "not-kernel-expr", f"`.{e.attr}` is not available in kernels")
        return self.error(e.span, "not-kernel-expr", "axes belong in workloads, not in kernels")

    def binary(self, e: A.Binary) -> Type:
        a, b = self._arg(e.left), self._arg(e.right)
        t = self._typing(e.op, e.span)
        if e.op in ARITH_OPERATORS:
            return elementwise_binary(t, e.op, a, b, e.op_span)
        if e.op in COMPARE_OPERATORS:
            return compare(t, e.op, a, b, e.op_span)
        if e.op in LOGIC_OPERATORS:
            return logic(t, e.op, a, b, e.op_span)
        if a.type.is_error or b.type.is_error:
            return ERROR
        # decision: `%` is not a kernel operator (docs/language.md section 4, "Primitives": `+ - * /`)
        return self.error(
            e.op_span,
            "bad-operator",
            f"`{e.op}` is not available in kernels",
            'kernel arithmetic is `+ - * /` and the primitives of docs/language.md section 4, "Primitives"',
        )

    def name_type(self, n: A.Name) -> Type:
        name = n.id
        if name in self.lets:
            return self.lets[name][0]
        if name in self.duplicated:
            return ERROR
        if name in self.params:
            ps = self.params[name][0]
            if ps.kind == "tile":
                if name in self.bad_shape:
                    return ERROR
                if ps.tile.mode == "Out":
                    # decision: reading an `Out` parameter is an error (its entry value is unspecified); `InOut` reads give the entry value
                    if name in self.read_out_reported:
                        return ERROR
                    # reported once, and not also as never stored: perhaps it was meant to be `In`
                    self.read_out_reported.add(name)
                    self.maybe_stored.add(name)
                    return self.error(
                        n.span,
                        "read-out",
                        f"`{name}` is an `Out` parameter; its value cannot be read",
                        "declare it `InOut[...]` to read the value it holds at entry",
                    )
                return tile(ps.tile.rows, ps.tile.cols, ps.tile.dtype)
            if ps.kind == "scalar":
                return scalar(ps.dtype)
            # decision: consts and Constexpr parameters behave like integer literals (they take the dtype of what they meet)
            return literal_type("int")
        if name in self.consts:
            return literal_type("int")
        if name in self.all_lets:
            let = self.all_lets[name]
            if let is self.current_let or any(let is m for m in self.current_many):
                return self.error(
                    n.span,
                    "let-order",
                    f"`{name}` is used in its own definition",
                    did_you_mean(name, self.visible()),
                )
            return self.error(
                n.span,
                "let-order",
                f"`{name}` is used before its `let`",
                did_you_mean(name, self.visible()) or f"move `let {name} = ...` above this use",
                notes=(Note(let.name.span, "defined here"),),
            )
        if name in DTYPES:
            return self.error(
                n.span,
                "dtype-value",
                f"`{name}` is a data type, not a value",
                f"write `constant(v, {name})` for a scalar or `cast(x, {name})` to convert",
            )
        if name in PRIMITIVES:
            return self.error(
                n.span, "function-value", f"`{name}` is a function; call it: `{name}(...)`"
            )
        return self.unknown(n, f"unknown name `{name}`", did_you_mean(name, self.visible()))

    def call(self, e: A.Call) -> Type:
        fname = e.func.id
        if e.prefix == "P":
            self._args_only(e)
            return self.error(
                e.span,
                "unknown-function",
                f"`P.{fname}` is a workload construct, not a kernel primitive",
            )
        if fname == "store":
            # one diagnostic for the misplaced store; its target counts as meant to be stored
            for a in e.args[:1]:
                if isinstance(a, A.Name):
                    self.maybe_stored.add(a.id)
            return self.error(
                e.span,
                "store-value",
                "`store` is a statement, not a value",
                "write `store(out, value)` on its own line",
            )
        prim = PRIMITIVES.get(fname)
        if prim is None:
            self._args_only(e)
            if fname in DTYPES or fname in ALIASES:
                help = f"to convert, write `cast(x, {ALIASES.get(fname, fname)})`"
            else:
                help = (_FUNCTION_HELP.get(fname) or did_you_mean(fname, PRIMITIVES)
                        or 'the primitives are listed in docs/language.md section 4, "Primitives"')
            return self.error(e.func.span, "unknown-function", f"unknown function `{fname}`", help)
        bound = self._bind(prim, e)
        if bound is None:
            self._args_only(e)
            return ERROR
        args: dict[str, Arg] = {}
        for p in prim.params:
            node = bound.get(p.name)
            if node is None:
                continue
            if p.kind == "dim":
                d = self._dim(prim, p.name, node)
                args[p.name] = Arg(
                    literal_type("int") if d is not None else ERROR, node.span, dim=d
                )
            elif p.kind == "dtype":
                args[p.name] = Arg(ERROR, node.span, dtype=self._dtype(prim, node))
            elif p.kind == "axis":
                a = self._axis(prim, node)
                if a is None:
                    return ERROR
                args[p.name] = Arg(literal_type("int"), node.span, dim=sym.const(a))
            elif p.kind == "flag":
                args[p.name] = Arg(ERROR, node.span, flag=self._flag(prim, p.name, node))
            elif p.kind == "tile":
                # decision: `valid_rows(x)` takes a tile parameter's name (any mode: it reads the
                # view's extent, not the tile's value), never an expression
                ps = self.params.get(node.id)[0] if isinstance(node, A.Name) and \
                    node.id in self.params and node.id not in self.lets else None
                if ps is None or ps.kind != "tile":
                    self._args_only(e)
                    return self.error(node.span, "needs-tile-param",
                                      f"`{fname}` takes the name of a tile parameter, found "
                                      f"`{expr_str(node)}`", f"write e.g. `{fname}(x)` for a "
                                      "parameter `x: In[Tile[...]]`")
                args[p.name] = Arg(ERROR, node.span)
            else:
                args[p.name] = self._arg(node)
        t = prim.rule(self._typing(fname, e.span, args))
        if prim.pair is not None and e is not self.pair_call and not t.is_error:
            # decision: a primitive with two results is bound by `let v, i = ...` only; its
            # values alone are not a value of their own (`let _, i = ...` drops one)
            return self.error(
                e.span,
                "two-results",
                f"`{fname}` returns two tiles, the values and their indices: bind both with "
                f"`let v, i = {fname}(...)`",
                "`_` names a result you do not need: `let v, _ = ...`",
            )
        return t

    def _flag(self, prim: Primitive, pname: str, node: A.Expr) -> Optional[bool]:
        """A `true` / `false` argument (`sort`'s `descending`), written as such."""
        if isinstance(node, A.BoolLit):
            return node.value
        self.error(
            node.span,
            "bad-flag",
            f"`{pname}` of `{prim.name}` must be `true` or `false`, written as such",
            f"write `{prim.name}(x, {pname} = true)`",
        )
        return None

    def _args_only(self, e: A.Call) -> None:
        """Type the arguments of a call that cannot be typed as a whole, for their own errors."""
        for a in list(e.args) + [kw.value for kw in e.kwargs]:
            if isinstance(a, A.Name) and (a.id in DTYPES or a.id in ALIASES):
                continue
            self.expr(a)

    def _bind(self, prim: Primitive, e: A.Call) -> Optional[dict[str, A.Expr]]:
        params = prim.params
        required = sum(1 for p in params if not p.optional)
        count = (
            f"{required} argument{'s' if required != 1 else ''}"
            if required == len(params)
            else f"{required} or {len(params)} arguments"
        )
        given = len(e.args) + len(e.kwargs)
        if len(e.args) > len(params):
            self.error(
                e.span,
                "arity",
                f"`{prim.name}` takes {count}, found {given}",
                f"write `{prim.signature}`",
            )
            return None
        out: dict[str, A.Expr] = {p.name: a for p, a in zip(params, e.args)}
        names = [p.name for p in params]
        for kw in e.kwargs:
            if kw.name not in names:
                self.error(
                    kw.span,
                    "unknown-argument",
                    f"`{prim.name}` has no parameter `{kw.name}`",
                    did_you_mean(kw.name, names) or f"write `{prim.signature}`",
                )
                return None
            if kw.name in out:
                self.error(
                    kw.span,
                    "argument-twice",
                    f"argument `{kw.name}` of `{prim.name}` is given twice",
                )
                return None
            out[kw.name] = kw.value
        if any(not p.optional and p.name not in out for p in params):
            self.error(
                e.span,
                "arity",
                f"`{prim.name}` takes {count}, found {given}",
                f"write `{prim.signature}`",
            )
            return None
        return out

    def _dim(self, prim: Primitive, pname: str, node: A.Expr) -> Optional[sym.Expr]:
        """A compile-time positive integer argument (`full`, `broadcast`, `row_index`, ...)."""

        def resolve(n: A.Name) -> sym.Expr:
            if n.id in self.constexprs:
                return sym.var(n.id)
            if n.id in self.lets or n.id in self.params or n.id in self.all_lets:
                self.error(
                    n.span,
                    "not-constant",
                    f"`{n.id}` is not a compile-time integer",
                    "tile sizes are literals, consts and Constexpr parameters",
                )
                raise NotSymbolic()
            if n.id in self.consts:
                return sym.const(self.consts[n.id])
            self.error(
                n.span,
                "unknown-name",
                f"unknown name `{n.id}`",
                did_you_mean(n.id, list(self.consts) + list(self.constexprs)),
            )
            raise NotSymbolic()

        try:
            d = to_sym(node, resolve, self.diags, "a tile dimension")
        except NotSymbolic:
            return None
        v = sym.const_value(d)
        if v is not None and v <= 0:
            self.error(
                node.span, "bad-dim", f"`{prim.name}` needs a positive number of {pname}, found {v}"
            )
            return None
        if v is None and sym.prove_gt(d, 0, self.ranges) is not True:
            self.error(
                node.span,
                "bad-dim",
                f"`{prim.name}` needs a positive number of {pname}, "
                f"but `{sym.to_str(d)}` may be zero or negative",
            )
            return None
        return d

    def _dtype(self, prim: Primitive, node: A.Expr) -> Optional[str]:
        if isinstance(node, A.Name) and node.id in DTYPES:
            return node.id
        if isinstance(node, A.Name):
            alias = ALIASES.get(node.id)
            help = (
                f"did you mean `{alias}`?"
                if alias
                else did_you_mean(node.id, DTYPES)
                or "data types are " + ", ".join(f"`{d}`" for d in DTYPES)
            )
            self.error(
                node.span,
                "bad-dtype",
                f"expected a data type such as `f32`, found `{node.id}`",
                help,
            )
            return None
        self.error(
            node.span,
            "bad-dtype",
            f"`{prim.name}` needs a data type such as `f32` here",
            f"write `{prim.signature}`",
        )
        return None
