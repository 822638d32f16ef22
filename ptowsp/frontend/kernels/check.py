"""Kernel bodies: dtypes and tile shapes through every expression, and the statement rules.

`check_kernel_body` checks one kernel against its signature (built by `signatures.py`):
parameter defaults, `Constexpr` dtypes, extern languages, then (for tile bodies) every
statement: `let`, rebinding, `store`, and the straight-line rule. Expressions are typed with the
primitive table and operator rules of `primitives.py`. Every independent error is reported; an
expression found wrong gets the error type, which silences everything built on it, so one
mistake gives one diagnostic. The result, `KernelTypes`, records the inferred types for lowering.

Left to others: duplicate parameter names (the driver), how tasks bind arguments (workloads).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from ... import sym
from ...diagnostics import Diagnostics, Note, did_you_mean
from ...dtypes import ALIASES, DTYPES, INT_DTYPES, kind_of
from ...primitives import (
    ARITH_OPERATORS,
    COMPARE_OPERATORS,
    ERROR,
    LOGIC_OPERATORS,
    PRIMITIVES,
    Arg,
    Primitive,
    Type,
    Typing,
    compare,
    convertible,
    elementwise_binary,
    fits,
    literal_fits,
    literal_type,
    logic,
    scalar,
    tile,
    unary,
)
from .. import ast as A
from ..signatures import KernelSig, NotSymbolic, ParamSig, const_resolver, to_sym

EXTERN_LANGS = ("c", "ascend")

# Workload statements, by the keyword that spells them, for the straight-line rule.
_WORKLOAD_STMTS = {
    A.ForLoop: "for",
    A.When: "when",
    A.Combine: "combine",
    A.Sequential: "sequential",
    A.Pipe: "pipe",
    A.Process: "process",
    A.Send: "send",
    A.Consume: "consume",
    A.Record: "record",
    A.Synchronize: "synchronize",
    A.SlotSet: "slot_set",
    A.SlotLoad: "slot_load",
}

# Names users bring from NumPy/Triton that are not primitives here, with what to write instead.
_FUNCTION_HELP = {
    "min": "use `minimum(a, b)` for two values, or `rowmin`/`colmin` to reduce",
    "max": "use `maximum(a, b)` for two values, or `rowmax`/`colmax` to reduce",
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


@dataclass(frozen=True)
class KernelTypes:
    """What the checker inferred for one kernel body, for lowering.

    `lets`: each `let` in source order with its type (a `let` keeps one type; rebindings convert
    to it). `stores`: each `store` as (parameter, type of the value). `exprs`: the type of every
    expression checked, keyed by the (structurally compared) AST node: the temporaries.
    """

    name: str
    lets: tuple[tuple[str, Type], ...]
    stores: tuple[tuple[str, Type], ...]
    exprs: Mapping[A.Node, Type] = field(default_factory=dict)


def check_kernel_body(
    k: A.KernelDecl, sig: KernelSig, consts: Mapping[str, int], diags: Diagnostics
) -> Optional[KernelTypes]:
    """Check one kernel's parameters and its body (or its extern bodies) against its signature.

    Returns the inferred types of a tile body, or None for an extern kernel.
    """
    checker = _KernelChecker(k, sig, consts, diags)
    checker.check_params()
    if k.body is None:
        checker.check_externs()
        return None
    return checker.check_body(k.body)


class _KernelChecker:
    def __init__(
        self, k: A.KernelDecl, sig: KernelSig, consts: Mapping[str, int], diags: Diagnostics
    ):
        self.k, self.sig, self.consts, self.diags = k, sig, consts, diags
        # the first parameter of each name (a duplicate is reported by the driver)
        self.params: dict[str, tuple[ParamSig, A.KernelParam]] = {}
        for ps, p in zip(sig.params, k.params):
            self.params.setdefault(ps.name, (ps, p))
        self.constexprs = {n for n, (ps, _) in self.params.items() if ps.kind == "constexpr"}
        # decision: Constexpr parameters are assumed >= 1 in shape proofs (they size tiles)
        self.ranges = {n: sym.Interval(1, None) for n in self.constexprs}
        self.lets: dict[str, tuple[Type, A.Let]] = {}
        self.all_lets: dict[str, A.Let] = {}
        self.current_let: Optional[A.Let] = None
        self.stores: dict[str, A.Store] = {}
        self.store_list: list[tuple[str, Type]] = []
        self.let_list: list[tuple[str, Type]] = []
        self.exprs: dict[A.Node, Type] = {}
        # outputs a broken statement may have meant to store: not reported as never stored
        self.maybe_stored: set[str] = set()
        self.unknown_reported: set[str] = set()  # each unknown name is reported once per kernel
        self.read_out_reported: set[str] = set()
        # tile parameters whose dims were wrong (reported by `kernel_signature`): their shape is
        # unknown, so nothing is checked against it
        self.bad_shape = {
            n for n, (ps, p) in self.params.items() if ps.kind == "tile" and not self._dims_ok(p)
        }
        # a name declared twice (reported by the driver) means nothing reliable: uses stay quiet
        names = [p.name.id for p in k.params]
        self.duplicated = {n for n in names if names.count(n) > 1}

    # -- reporting
    def error(
        self,
        span: A.Span,
        code: str,
        message: str,
        help: Optional[str] = None,
        notes: tuple[Note, ...] = (),
    ) -> Type:
        self.diags.error(span, code, message, help, notes)
        return ERROR

    def _report(self, span: A.Span, code: str, message: str, help: Optional[str]) -> None:
        self.diags.error(span, code, message, help)

    def _typing(self, name: str, span: A.Span, args: Optional[dict[str, Arg]] = None) -> Typing:
        return Typing(name, span, args or {}, self.ranges, self._report)

    def _dims_ok(self, p: A.KernelParam) -> bool:
        quiet = Diagnostics()
        resolve = const_resolver(self.consts, quiet, {n: sym.var(n) for n in self.constexprs})
        try:
            for d in (p.type.tile.rows, p.type.tile.cols):
                v = sym.const_value(to_sym(d, resolve, quiet))
                if v is not None and v <= 0:
                    return False
        except NotSymbolic:
            return False
        return True

    def unknown(self, n: A.Name, message: str, help: Optional[str]) -> Type:
        """Report an unknown name at its first use only (one mistake, one diagnostic)."""
        if n.id not in self.unknown_reported:
            self.unknown_reported.add(n.id)
            self.error(n.span, "unknown-name", message, help)
        return ERROR

    def visible(self) -> list[str]:
        return list(self.lets) + list(self.params) + list(self.consts)

    # -- parameters
    def check_params(self) -> None:
        for ps, p in zip(self.sig.params, self.k.params):
            t = p.type
            if isinstance(t, A.TileParamType):
                if p.default is not None:
                    # decision: tile parameters take no default (tiles always come from the task's arguments)
                    self.error(
                        p.default.span,
                        "bad-default",
                        f"tile parameter `{ps.name}` cannot have a default",
                        "tiles come from the task's arguments; only `Scalar` and `Constexpr` "
                        "parameters take defaults",
                    )
                for dim, node in ((ps.tile.rows, t.tile.rows), (ps.tile.cols, t.tile.cols)):
                    v = sym.const_value(dim)
                    if v is not None and v <= 0:
                        self.error(
                            node.span, "bad-tile", f"tile dimensions must be positive, found {v}"
                        )
            elif isinstance(t, A.ConstexprParamType):
                # decision: `Constexpr` takes any integer dtype (i8 ... u64); its value is an exact integer either way
                if t.dtype not in INT_DTYPES:
                    self.error(
                        t.span,
                        "bad-constexpr",
                        f"`Constexpr` parameters are integers, found `{t.dtype}`",
                        "write `Constexpr[i32]`",
                    )
                self._check_default(
                    ps, p, t.dtype if t.dtype in INT_DTYPES else "i32", constexpr=True
                )
            else:
                self._check_default(ps, p, ps.dtype, constexpr=False)

    def _check_default(self, ps: ParamSig, p: A.KernelParam, dtype: str, constexpr: bool) -> None:
        d = p.default
        if d is None:
            return
        what = "Constexpr" if constexpr else "Scalar"
        # decision: a Scalar/Constexpr default is a literal (a negative number included) or the name of a module const
        if isinstance(d, A.IntLit):
            kind, value, text = "int", d.value, str(d.value)
        elif isinstance(d, A.FloatLit):
            kind, value, text = "float", d.value, d.text or repr(d.value)
        elif isinstance(d, A.BoolLit):
            kind, value, text = "bool", d.value, "true" if d.value else "false"
        elif isinstance(d, A.Name) and d.id in self.consts:
            kind, value, text = "int", self.consts[d.id], d.id
        else:
            self.error(
                d.span,
                "bad-default",
                f"the default of `{ps.name}` must be a literal",
                f"write e.g. `{ps.name}: {what}[{dtype}] = {_example(dtype)}`",
            )
            return
        target = kind_of(dtype)
        if constexpr and kind != "int":
            self.error(
                d.span,
                "bad-default",
                f"the default of Constexpr parameter `{ps.name}` must be an "
                f"integer, found {_literal_words(kind)} `{text}`",
            )
            return
        # decision: bool Scalars take `true`/`false` only; integer Scalars take integer literals only; float Scalars take integer or float literals
        if not (kind == target or (kind == "int" and target == "float")):
            self.error(
                d.span,
                "bad-default",
                f"`{ps.name}` is {scalar(dtype)}, but its default is "
                f"{_literal_words(kind)} `{text}`",
                f"write e.g. `= {_example(dtype)}`",
            )
            return
        # decision: an integer default must be representable in the Scalar's dtype (`Scalar[u8] = 300` is an error)
        if kind == "int" and target == "int" and not literal_fits(value, dtype):
            self.error(
                d.span,
                "bad-default",
                f"the default `{text}` of `{ps.name}` does not fit in {dtype}",
            )

    # -- extern kernels
    def check_externs(self) -> None:
        seen: dict[str, A.ExternBody] = {}
        for e in self.k.externs:
            if e.lang not in EXTERN_LANGS:
                self.error(
                    e.span,
                    "extern-lang",
                    f"unknown extern language `{e.lang}`",
                    did_you_mean(e.lang, EXTERN_LANGS)
                    or "extern bodies are `extern c` and `extern ascend`",
                )
                continue
            if e.lang in seen:
                self.error(
                    e.span,
                    "extern-twice",
                    f"`extern {e.lang}` is given twice for kernel `{self.k.name.id}`",
                    "keep one body per language",
                    notes=(Note(seen[e.lang].span, "first given here"),),
                )
                continue
            seen[e.lang] = e

    # -- statements
    def check_body(self, body: tuple[A.Stmt, ...]) -> KernelTypes:
        for s in body:
            if isinstance(s, A.Let):
                self.all_lets.setdefault(s.name.id, s)
        for s in body:
            self.stmt(s)
        for name, (ps, p) in self.params.items():
            if (
                ps.kind == "tile"
                and ps.tile.mode == "Out"
                and name not in self.stores
                and name not in self.maybe_stored
                and name not in self.duplicated
            ):
                self.error(
                    p.name.span,
                    "never-stored",
                    f"output `{name}` is never stored",
                    f"add `store({name}, value)`: every `Out` tile is stored exactly once",
                )
        return KernelTypes(self.k.name.id, tuple(self.let_list), tuple(self.store_list), self.exprs)

    def stmt(self, s: A.Stmt) -> None:
        if isinstance(s, A.Let):
            self.let(s)
        elif isinstance(s, A.Assign):
            self.assign(s)
        elif isinstance(s, A.Store):
            self.store(s)
        elif isinstance(s, A.CallStmt):
            self.call_stmt(s)
        elif isinstance(s, A.ExprStmt):
            self.expr_stmt(s)
        else:
            kw = _WORKLOAD_STMTS.get(type(s), type(s).__name__.lower())
            help = (
                "use `where(cond, a, b)` for choices; loops belong in workloads"
                if kw in ("for", "when")
                else f"`{kw}` belongs in a workload"
            )
            self.error(
                s.span,
                "not-straight-line",
                f"kernels are straight-line code: no `{kw}` in a kernel",
                help,
            )
            # a store inside the misplaced block is not also "never stored"
            for node in s.walk():
                if isinstance(node, A.Store) and isinstance(node.target, A.Name):
                    self.maybe_stored.add(node.target.id)

    def let(self, s: A.Let) -> None:
        name = s.name.id
        self.current_let = s
        t = self.expr(s.value)
        self.current_let = None
        if name in self.params:
            self.error(
                s.name.span,
                "shadow-param",
                f"`let {name}` would shadow the parameter `{name}`",
                "parameters keep their value for the whole kernel; choose another name",
                notes=(Note(self.params[name][1].name.span, "parameter declared here"),),
            )
        elif name in self.lets:
            self.error(
                s.name.span,
                "let-twice",
                f"`{name}` is already defined",
                f"to give it a new value write `{name} = ...` (without `let`)",
                notes=(Note(self.lets[name][1].name.span, "first defined here"),),
            )
        else:
            self.let_list.append((name, t))
        # after an error too: later uses most likely mean this value
        self.lets[name] = (t, s)

    def assign(self, s: A.Assign) -> None:
        name = s.name.id
        t = self.expr(s.value)
        if name in self.lets:
            # decision: a `let` keeps the type of its first value; `name = e` converts e to it by the rules of `store` (shape broadcast, conversions within a kind)
            target = self.lets[name][0]
            if not t.is_error and not target.is_error:
                self._check_rebind(name, target, t, s.value.span)
            return
        if name in self.params:
            ps = self.params[name][0]
            help = (
                f"write `store({name}, value)` to set an output"
                if ps.kind == "tile" and ps.tile.mode != "In"
                else f"bind a new name: `let {name}_new = ...`"
            )
            self.error(
                s.name.span,
                "assign-param",
                f"cannot assign to the parameter `{name}`: parameters are read-only",
                help,
            )
        elif name in self.all_lets:
            self.error(
                s.name.span,
                "let-order",
                f"`{name}` is assigned before its `let`",
                f"move `let {name} = ...` above this line",
                notes=(Note(self.all_lets[name].name.span, "defined here"),),
            )
        elif name in self.consts:
            self.error(
                s.name.span,
                "assign-const",
                f"cannot assign to the const `{name}`",
                f"bind a new name: `let {name.lower()}_value = ...`",
            )
        else:
            self.error(
                s.name.span,
                "unknown-name",
                f"`{name}` is not defined",
                did_you_mean(name, self.visible()) or f"declare it with `let {name} = ...`",
            )
            # recover as if it were a `let`, so later uses are not reported again
            self.lets[name] = (t, A.Let(s.name, s.value, span=s.span))

    def _check_rebind(self, name: str, target: Type, value: Type, span: A.Span) -> None:
        keep = "a `let` keeps the shape and dtype of its first value; bind a new name with `let`"
        if target.is_scalar and value.is_tile:
            self.error(
                span,
                "rebind-type",
                f"`{name}` is {target}, but the new value is a {value.shape_str()} tile",
                keep,
            )
            return
        if target.is_tile and fits(value, target.rows, target.cols, self.ranges) is not True:
            self.error(
                span,
                "rebind-type",
                f"`{name}` is {target.shape_str()}, but the new value is {value.shape_str()}",
                keep,
            )
            return
        if not convertible(value, target.dtype):
            self.error(
                span,
                "rebind-type",
                f"`{name}` is {target.dtype}, but the new value is {_values(value)}",
                f"write `cast(value, {target.dtype})`, or bind a new name with `let`",
            )

    def store(self, s: A.Store) -> None:
        value = self.expr(s.value)
        tgt = s.target
        if not (
            isinstance(tgt, A.Name)
            and tgt.id in self.params
            and self.params[tgt.id][0].kind == "tile"
            and self.params[tgt.id][0].tile.mode != "In"
        ):
            # a store with a wrong target was meant for some output: none is reported as never stored
            self.maybe_stored.update(n for n, (ps, _) in self.params.items() if ps.kind == "tile")
        if not isinstance(tgt, A.Name):
            self.error(
                tgt.span,
                "store-target",
                "the target of `store` must be an `Out` or `InOut` tile parameter",
                "write `store(out_param, value)`",
            )
            return
        name = tgt.id
        if name in self.duplicated:
            return
        if name not in self.params:
            outputs = [
                n
                for n, (ps, _) in self.params.items()
                if ps.kind == "tile" and ps.tile.mode != "In"
            ]
            if name in self.lets:
                self.error(
                    tgt.span,
                    "store-target",
                    f"cannot store to `{name}`: it is a `let`, not an output parameter",
                    f"to change a `let` write `{name} = ...`",
                )
            elif name in self.consts:
                self.error(
                    tgt.span,
                    "store-target",
                    f"cannot store to `{name}`: it is a const",
                    "`store` writes `Out` and `InOut` tile parameters",
                )
            else:
                self.unknown(
                    tgt,
                    f"unknown name `{name}`",
                    did_you_mean(name, outputs)
                    or "`store` writes `Out` and `InOut` tile parameters",
                )
            return
        ps, _ = self.params[name]
        if ps.kind != "tile":
            what = "a scalar" if ps.kind == "scalar" else "a Constexpr"
            self.error(
                tgt.span,
                "store-target",
                f"cannot store to `{name}`: it is {what} parameter",
                "`store` writes `Out` and `InOut` tile parameters",
            )
            return
        if ps.tile.mode == "In":
            self.error(
                tgt.span,
                "store-to-in",
                f"cannot store to `{name}`: it is an `In` parameter",
                "declare it `InOut[...]` to update it in place, or store into an `Out` parameter",
            )
            return
        first = self.stores.get(name)
        if first is not None:
            rule = (
                "an `Out` parameter is stored exactly once"
                if ps.tile.mode == "Out"
                else "an `InOut` parameter is stored at most once"
            )
            self.error(
                s.span,
                "stored-twice",
                f"`{name}` is stored twice; {rule}",
                "compute the final value with `let` and store it once",
                notes=(Note(first.span, "first stored here"),),
            )
        else:
            self.stores[name] = s
        self.store_list.append((name, value))
        if value.is_error or name in self.bad_shape:
            return
        ok = fits(value, ps.tile.rows, ps.tile.cols, self.ranges)
        target = f"[{sym.to_str(ps.tile.rows)}, {sym.to_str(ps.tile.cols)}]"
        if ok is not True:
            self.error(
                s.value.span,
                "store-shape",
                f"cannot store a {value.shape_str()} value into `{name}`, a {target} tile"
                + (" (the extents may differ)" if ok is None else ""),
                "the value must have the tile's shape or broadcast to it (extents equal or 1)",
            )
            return
        if not convertible(value, ps.tile.dtype):
            self.error(
                s.value.span,
                "store-dtype",
                f"cannot store {_values(value)} into `{name}` ({ps.tile.dtype}) without a cast",
                f"write `store({name}, cast(value, {ps.tile.dtype}))`",
            )

    def call_stmt(self, s: A.CallStmt) -> None:
        name = s.callee.id
        if s.coords is not None:
            self.error(
                s.span,
                "task-in-kernel",
                "a kernel cannot launch tasks",
                f"task calls such as `{name}[...](...)` belong in workloads",
            )
            return
        # A call standing as a statement is wrong as a whole (perhaps a mistyped `store`): one
        # diagnostic for it; its arguments are not checked, and its first one may be an output.
        for a in s.args[:1]:
            if isinstance(a, A.Name):
                self.maybe_stored.add(a.id)
        if name in PRIMITIVES:
            self.error(
                s.span,
                "unused-value",
                f"the value of `{name}(...)` is unused",
                "bind it with `let` or `store` it",
            )
            return
        self.error(
            s.callee.span,
            "unknown-function",
            f"unknown function `{name}`",
            did_you_mean(name, list(PRIMITIVES) + ["store"])
            or "kernel statements are `let name = value`, `name = value` and `store(out, value)`",
        )

    def expr_stmt(self, s: A.ExprStmt) -> None:
        e = s.expr
        if isinstance(e, A.Call):
            for a in e.args[:1]:
                if isinstance(a, A.Name):
                    self.maybe_stored.add(a.id)
            if e.prefix == "P" or e.func.id not in PRIMITIVES:
                shown = f"P.{e.func.id}" if e.prefix == "P" else e.func.id
                self.error(
                    e.func.span,
                    "unknown-function",
                    f"unknown function `{shown}`",
                    None
                    if e.prefix == "P"
                    else did_you_mean(e.func.id, list(PRIMITIVES) + ["store"]),
                )
                return
        what = f"`{e.func.id}(...)`" if isinstance(e, A.Call) else "this expression"
        self.error(
            s.span,
            "unused-value",
            f"the value of {what} is unused",
            "bind it with `let` or `store` it",
        )

    # -- expressions
    def expr(self, e: A.Expr) -> Type:
        t = self._expr(e)
        self.exprs[e] = t
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
            return self.error(
                e.span,
                "not-kernel-expr",
                "indexing is not available in kernels",
                "kernels work on whole tiles: pass the part you need as a tile argument "
                "(`x = X[b, t]`) from the workload",
            )
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
        # decision: `%` is not a kernel operator (language.md lists `+ - * /` for kernels)
        return self.error(
            e.op_span,
            "bad-operator",
            f"`{e.op}` is not available in kernels",
            "kernel arithmetic is `+ - * /` and the primitives of language.md section 4",
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
            if let is self.current_let:
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
                help = _FUNCTION_HELP.get(fname) or did_you_mean(fname, PRIMITIVES)
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
            else:
                args[p.name] = self._arg(node)
        return prim.rule(self._typing(fname, e.span, args))

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


def _values(t: Type) -> str:
    return str(t) if t.literal else f"{t.dtype} values"


def _literal_words(kind: str) -> str:
    return {"int": "the integer", "float": "the float", "bool": "the bool"}[kind]


def _example(dtype: str) -> str:
    return {"bool": "false", "float": "0.0", "int": "0"}[kind_of(dtype)]
