"""Kernel signatures and AST-to-symbolic conversion, shared by the module and kernel checkers.

`kernel_signature` reads a kernel's parameter list into a `KernelSig` whose tile dimensions are
symbolic integers (`sym.py`) over the kernel's own `Constexpr` parameters, with consts
folded. `to_sym` turns an integer AST expression into a `sym.Expr`, asking a caller-supplied
`resolve` function what each name means.
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional, Union

from .. import sym
from ..diagnostics import Diagnostics, did_you_mean
from ..records import record
from . import ast as A


@record
class TileSig:
    """The tile a parameter takes: mode (`In`, `Out`, `InOut`), symbolic rows and cols, dtype."""

    mode: str
    rows: sym.Expr
    cols: sym.Expr
    dtype: str
    sound: bool = True  # False: a dimension was wrong (reported); a placeholder stands for it
    pad: Union[int, float, bool] = 0  # `pad = v` (checked by kernels/params.py; 0 if not a literal)


@record
class ParamSig:
    """One kernel parameter: `kind` is `tile`, `scalar` or `constexpr`."""

    name: str
    kind: str
    dtype: str
    tile: Optional[TileSig]
    default: Optional[A.Expr]
    span: A.Span


@record
class KernelSig:
    """What a call site needs to know about a kernel."""

    name: str
    params: tuple[ParamSig, ...]
    is_extern: bool
    span: A.Span

    def param(self, name: str) -> Optional[ParamSig]:
        for p in self.params:
            if p.name == name:
                return p
        return None

    @property
    def constexprs(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.kind == "constexpr")


class NotSymbolic(Exception):
    """Raised by a `resolve` callback (or `to_sym`) after it has reported a diagnostic."""


_BINARY = {"+": sym.add, "-": sym.sub, "*": sym.mul, "/": sym.floordiv, "%": sym.mod}
_FUNCS = {"min": (2, sym.min_), "max": (2, sym.max_), "ceildiv": (2, sym.ceildiv), "abs": (1, sym.abs_)}


def to_sym(e: A.Expr, resolve: Callable[[A.Name], sym.Expr], diags: Diagnostics,
           what: str = "an integer expression") -> sym.Expr:
    """Convert an integer expression (`+ - * / %`, `min max ceildiv abs`, literals, names).

    `resolve(name)` returns the name's symbolic value or reports a diagnostic and raises
    `NotSymbolic`. Anything else is reported here and raises `NotSymbolic`.
    """
    if isinstance(e, A.IntLit):
        return sym.const(e.value)
    if isinstance(e, A.Name):
        return resolve(e)
    if isinstance(e, A.Unary) and e.op == "-":
        return sym.neg(to_sym(e.operand, resolve, diags, what))
    if isinstance(e, A.Binary) and e.op in _BINARY:
        left = to_sym(e.left, resolve, diags, what)
        right = to_sym(e.right, resolve, diags, what)
        if e.op in "/%" and sym.const_value(right) == 0:
            diags.error(e.op_span, "division-by-zero", f"`{e.op}` by zero in {what}")
            raise NotSymbolic()
        return _BINARY[e.op](left, right)
    if isinstance(e, A.Call) and not e.prefix and e.func.id in _FUNCS and not e.kwargs:
        arity, fn = _FUNCS[e.func.id]
        if len(e.args) != arity:
            diags.error(e.span, "arity", f"`{e.func.id}` takes {arity} argument{'s' if arity > 1 else ''}")
            raise NotSymbolic()
        args = [to_sym(a, resolve, diags, what) for a in e.args]
        if e.func.id == "ceildiv" and sym.const_value(args[1]) == 0:
            diags.error(e.args[1].span, "division-by-zero", f"`ceildiv` by zero in {what}")
            raise NotSymbolic()
        return fn(*args)
    if isinstance(e, A.Call) and not e.prefix:
        help = did_you_mean(e.func.id, _FUNCS)
        diags.error(e.func.span, "not-integer",
                    f"`{e.func.id}` cannot be used in {what}",
                    help or "integer expressions use `+ - * / %`, `min`, `max`, `ceildiv` and `abs`")
        raise NotSymbolic()
    if isinstance(e, A.FloatLit):
        diags.error(e.span, "not-integer", f"expected {what}, found the float `{e.text or e.value}`")
        raise NotSymbolic()
    diags.error(e.span, "not-integer", f"expected {what}")
    raise NotSymbolic()


def const_resolver(consts: Mapping[str, int], diags: Diagnostics, extra: Mapping[str, sym.Expr] = {},
                   what: str = "a compile-time integer") -> Callable[[A.Name], sym.Expr]:
    """A `resolve` for compile-time contexts: consts, plus `extra` names (Constexpr params)."""

    def resolve(n: A.Name) -> sym.Expr:
        if n.id in extra:
            return extra[n.id]
        if n.id in consts:
            return sym.const(consts[n.id])
        diags.error(n.span, "not-constant", f"`{n.id}` is not a compile-time integer; {what} is needed here",
                    did_you_mean(n.id, list(consts) + list(extra)))
        raise NotSymbolic()

    return resolve


def literal_of(e: A.Expr, consts: Mapping[str, int]):
    """(kind, value, text) of a literal (a negative number included) or a module const's name,
    or None: what a `Scalar` default and a tile's `pad` may be."""
    neg = isinstance(e, A.Unary) and e.op == "-" and isinstance(e.operand, (A.IntLit, A.FloatLit))
    x = e.operand if neg else e
    if isinstance(x, A.IntLit):
        v = -x.value if neg else x.value
        return "int", v, str(v)
    if isinstance(x, A.FloatLit):
        v = -x.value if neg else x.value
        return "float", v, ("-" if neg else "") + (x.text or repr(x.value))
    if isinstance(x, A.BoolLit):
        return "bool", x.value, "true" if x.value else "false"
    if isinstance(x, A.Name) and x.id in consts:
        return "int", consts[x.id], x.id
    return None


def kernel_signature(k: A.KernelDecl, consts: Mapping[str, int], diags: Diagnostics) -> KernelSig:
    """Read a kernel's parameters. Reports bad tile dimensions; never raises."""
    constexprs = {p.name.id: sym.var(p.name.id) for p in k.params
                  if isinstance(p.type, A.ConstexprParamType)}
    resolve = const_resolver(consts, diags, constexprs, "a compile-time integer (a literal, const or "
                             "Constexpr parameter)")
    params = []
    for p in k.params:
        t = p.type
        if isinstance(t, A.TileParamType):
            dims, sound = [], True
            for d in (t.tile.rows, t.tile.cols):
                try:
                    dims.append(to_sym(d, resolve, diags, "a tile dimension"))
                except NotSymbolic:
                    dims.append(sym.const(1))
                    sound = False
            lit = literal_of(t.pad, consts) if t.pad is not None else None
            tile = TileSig(t.mode, dims[0], dims[1], t.tile.dtype, sound,
                           lit[1] if lit is not None else 0)
            params.append(ParamSig(p.name.id, "tile", t.tile.dtype, tile, p.default, p.span))
        elif isinstance(t, A.ScalarParamType):
            params.append(ParamSig(p.name.id, "scalar", t.dtype, None, p.default, p.span))
        else:
            params.append(ParamSig(p.name.id, "constexpr", t.dtype, None, p.default, p.span))
    return KernelSig(k.name.id, tuple(params), k.body is None, k.span)
