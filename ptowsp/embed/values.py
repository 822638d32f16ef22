"""The values of the Python embedding: data types, parameter annotations, scalar expressions,
symbols, tensors and their views, channels and events (the axes are in `axes.py`).

Nothing here computes: a `Tensor` wraps the caller's NumPy array, `X[b, t]` is a `TensorView`
holding the AST of `X[b, t]`, `b * 16` on a loop variable is a `ScalarExpr` holding `b * 16`.
Module-level objects (tensors, axes, channels, events, symbols) appear in the AST as placeholder
names (`trace.key_of`) until module assembly (`assemble.py`) names them for real.

Why one file: a view is a scalar expression (`L[b]` is an element read as well as a view), a
tensor makes views, and composing views builds scalar expressions and index tensors, so the
three refer to each other; the embedding's layers (`__init__.py`) forbid modules that do.
"""

from __future__ import annotations

import enum
import math
import operator
from typing import Any, Optional

from ..dtypes import DTYPES, TABLE, numpy_dtype, size_of
from ..frontend import ast as A
from .errors import CompileError, TypeCheckError, user_error
from .layouts import TensorLayout, derive
from .names import substitute, wsp_ident
from .source import here, stored_name, user_frame
from .trace import Trace, key_of


class _ByValue(str, enum.Enum):
    """An enum whose `str()` is its value."""

    def __str__(self) -> str:
        return self.value


# the seeds' enum of element types: a member per type of `ptowsp.dtypes` (`DType.F32` is "f32")
DType = _ByValue("DType", [(name.upper(), name) for name in DTYPES], module=__name__,
                 qualname="DType")
DType.__doc__ = "Element types (the seeds' enum); the value is the `.wsp` spelling."


def _location(v: Any, span: A.Span) -> str:
    """`Tensor(location=...)` as the `.wsp` word: a `Location`, or its value as text."""
    if v is None:
        return "global"
    word = v.value if isinstance(v, Location) else str(v).lower() if isinstance(v, str) else None
    if word not in {m.value for m in Location}:
        raise user_error(span, f"unknown tensor location {v!r}", "write `Location.Global`, "
                         "`Location.L2`, `Location.L1` or `Location.UB`")
    return word


class Location(str, enum.Enum):
    """Memory locations of the seeds' `Tensor`: a placement hint, the `.wsp`
    `location = ...` of the tensor's declaration (the cycle model charges an on-chip tensor's
    bytes at that level's rate; docs/python.md)."""

    Global = "global"
    L2 = "l2"
    UB = "ub"
    L1 = "l1"


# NumPy dtype names: each type's array dtype, except bf16's, whose arrays are u16's (raw bits);
# an ml_dtypes `bfloat16` array is bf16
_NUMPY_NAMES = {d.numpy: name for name, d in TABLE.items() if name != "bf16"} | {"bfloat16": "bf16"}


def dtype_name(x: Any) -> Optional[str]:
    """`DType.F32`, `"f32"`, `np.float32` or `np.dtype("float32")` as `"f32"`; None otherwise."""
    if isinstance(x, DType):
        return x.value
    if isinstance(x, str):
        return x if x in DTYPES else None
    if x is float:
        return "f32"
    if x is int:
        return "i32"
    if x is bool:
        return "bool"
    name = getattr(x, "__name__", None) or getattr(x, "name", None)
    if name is None:
        try:
            import numpy as np

            name = np.dtype(x).name
        except Exception:  # noqa: BLE001 - anything else is not a dtype
            return None
    return _NUMPY_NAMES.get(str(name))


# ---------------------------------------------------------------------------------------------
# Parameter annotations: In[Tile[16, 128, DType.F32]], Scalar[DType.F32], Constexpr[int]


class TileSpec:
    """`Tile[M, N, DT]`: M and N are integers or names of `Constexpr` parameters (strings)."""

    def __init__(self, rows: Any, cols: Any, dtype: Any):
        self.rows, self.cols, self.dtype = rows, cols, dtype

    def __repr__(self) -> str:
        return f"Tile[{self.rows}, {self.cols}, {dtype_name(self.dtype) or self.dtype}]"


class Tile:
    """`Tile[M, N, DT]`, the type of a tile parameter (inside `In`, `Out` or `InOut`)."""

    def __class_getitem__(cls, params) -> TileSpec:
        if not isinstance(params, tuple) or len(params) != 3:
            raise user_error(here(), "`Tile` takes rows, columns and a data type",
                             "write `Tile[16, 128, DType.F32]`")
        return TileSpec(*params)


class Pad:
    """`Pad(v)` after a tile parameter's tile, `In[Tile[16, 128, DType.F32], Pad(-math.inf)]`:
    the `.wsp` option `pad = v`, what a load of a partial view puts where the view has no
    element (language.md section 4, "Partial tiles"). `v` is a Python or NumPy number or bool
    (`math.inf`, `-math.inf` and `math.nan` included)."""

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:
        return f"Pad({self.value!r})"


class ParamSpec:
    """`In[...]`, `Out[...]`, `InOut[...]`; `pad` the `Pad(v)` given after the tile, or None."""

    def __init__(self, mode: str, inner: Any):
        self.pad: Optional[Pad] = None
        self.extra: tuple = ()  # anything else after the tile, reported by the kernel
        if isinstance(inner, tuple) and inner:
            inner, rest = inner[0], inner[1:]
            pads = [x for x in rest if isinstance(x, Pad)]
            self.pad = pads[0] if pads else None
            self.extra = tuple(x for x in rest if x is not self.pad)
        self.mode, self.inner = mode, inner

    def __repr__(self) -> str:
        more = "".join(f", {x!r}" for x in ((self.pad,) if self.pad else ()) + self.extra)
        return f"{self.mode}[{self.inner!r}{more}]"


class In:
    """A read-only tile parameter: `In[Tile[M, N, DT]]` (`In[Tile[...], Pad(v)]`: the pad)."""

    def __class_getitem__(cls, inner) -> ParamSpec:
        return ParamSpec("In", inner)


class Out:
    """A write-only tile parameter: `Out[Tile[M, N, DT]]` (every element must be stored)."""

    def __class_getitem__(cls, inner) -> ParamSpec:
        return ParamSpec("Out", inner)


class InOut:
    """A read-write tile parameter: `InOut[Tile[M, N, DT]]` (accumulators; `Pad(v)` as `In`)."""

    def __class_getitem__(cls, inner) -> ParamSpec:
        return ParamSpec("InOut", inner)


class ScalarSpec:
    def __init__(self, dtype: Any):
        self.dtype = dtype


class Scalar:
    """A run-time scalar parameter: `Scalar[DType.F32]` (a default may follow: `= 1e-6`)."""

    def __class_getitem__(cls, dtype) -> ScalarSpec:
        return ScalarSpec(dtype)


class ConstexprSpec:
    def __init__(self, dtype: Any):
        self.dtype = dtype


class Constexpr:
    """A compile-time integer parameter: `Constexpr[int]` (or bare `Constexpr`); usable in the
    kernel's own tile dimensions by name: `In[Tile["R", 128, DType.F32]]`."""

    def __class_getitem__(cls, dtype) -> ConstexprSpec:
        return ConstexprSpec(dtype)


# ---------------------------------------------------------------------------------------------
# Scalar expressions (indices, slice bounds, predicates, scalar arguments, schedule keys)


def literal(v: Any, span: A.Span) -> Optional[A.Expr]:
    """A Python or NumPy number (or bool) as an AST literal; None for anything else."""
    if isinstance(v, bool):
        return A.BoolLit(v, span=span)
    if isinstance(v, int):
        return A.IntLit(int(v), span=span)
    if isinstance(v, float):
        text = repr(float(v))
        return A.FloatLit(float(v), text, span=span)
    import numpy as np

    if isinstance(v, np.bool_):
        return A.BoolLit(bool(v), span=span)
    if isinstance(v, np.integer):
        return A.IntLit(int(v), span=span)
    if isinstance(v, np.floating):
        return A.FloatLit(float(v), repr(float(v)), span=span)
    return None


def _combine_objs(*parts: Any) -> dict:
    out: dict = {}
    for p in parts:
        if isinstance(p, ScalarExpr):
            out.update(p.objs)
    return out


class HostDecision(CompileError):
    """Python control flow on a run-time value (`if b < 2:`, `int(b)`): a `CompileError` at
    that line; a schedule key function that raises it runs on the host instead
    (host_keys.py)."""


class ScalarExpr:
    """An integer (or boolean) expression evaluated at run time: loop variables, tensor elements,
    slots, symbols and arithmetic on them. `node` is its AST; `objs` the objects it names."""

    __slots__ = ("node", "objs")
    __hash__ = object.__hash__

    def __init__(self, node: A.Expr, objs: Optional[dict] = None):
        self.node = node
        self.objs = objs or {}

    # -- building
    def _bin(self, op: str, other: Any, reverse: bool = False) -> "ScalarExpr":
        span = here(3)
        rhs = as_scalar(other, span)
        left, right = (rhs, self) if reverse else (self, rhs)
        node = A.Binary(op, left.node, right.node, span, span=span)
        return ScalarExpr(node, _combine_objs(left, right))

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __floordiv__(self, o): return self._bin("/", o)
    def __rfloordiv__(self, o): return self._bin("/", o, True)
    def __mod__(self, o): return self._bin("%", o)
    def __rmod__(self, o): return self._bin("%", o, True)
    def __lt__(self, o): return self._bin("<", o)
    def __le__(self, o): return self._bin("<=", o)
    def __gt__(self, o): return self._bin(">", o)
    def __ge__(self, o): return self._bin(">=", o)
    def __eq__(self, o): return self._bin("==", o)  # type: ignore[override]
    def __ne__(self, o): return self._bin("!=", o)  # type: ignore[override]
    def __and__(self, o): return self._bits("&", o)
    def __rand__(self, o): return self._bits("&", o, True)
    def __or__(self, o): return self._bits("|", o)
    def __ror__(self, o): return self._bits("|", o, True)
    def __xor__(self, o): return self._bits("^", o)
    def __rxor__(self, o): return self._bits("^", o, True)
    def __lshift__(self, o): return self._bits("<<", o)
    def __rshift__(self, o): return self._bits(">>", o)

    def _bits(self, op: str, o: Any, reverse: bool = False) -> "ScalarExpr":
        """`&` / `|` of conditions are `and` / `or` (the seeds' spelling). On integers they
        are the prototype's u64 bit operations, which the language has only where they are
        arithmetic: `x & (2**k - 1)` is `x % 2**k`, `x << k` is `x * 2**k` and `x >> k` is
        `x // 2**k` for a Python integer k (slots, symbols and coordinates are not negative).
        Any other bit operation is an error at the line, never a silent `and`."""
        span = here(3)
        other = as_scalar(o, span)
        if op in ("&", "|") and (_is_condition(self.node) or _is_condition(other.node)):
            return self._bin("and" if op == "&" else "or", o, reverse)
        k = o if isinstance(o, int) and not isinstance(o, bool) and not reverse else None
        if op == "&" and k is not None and k >= 0 and k & (k + 1) == 0:
            return self._bin("%", k + 1)
        if op in ("<<", ">>") and k is not None and 0 <= k < 63:
            return self._bin("*" if op == "<<" else "/", 1 << k)
        raise user_error(span, f"`{op}` on the run-time integer `{self}` is a bit operation, "
                         "which wspc's expressions do not have",
                         "masks `x & (2**k - 1)` and shifts `x << k`, `x >> k` by a Python integer "
                         "k work (as `%`, `*`, `//`); for conditions, compare first: "
                         "`(x > 0) & (y > 0)`")

    def where(self, then: Any, otherwise: Any) -> "ScalarExpr":
        """The prototype's `pred.where(a, b)`: `a` where the condition holds, else `b`, as
        `b + (a - b) * ind`, `ind` the condition's 0/1 value (`_indicator`)."""
        span = here()
        if not _is_condition(self.node):
            raise user_error(span, f"`{self}` is not a condition, so it has no `where`",
                             "compare it first: `(x > 0).where(a, b)`")
        a, b = as_scalar(then, span), as_scalar(otherwise, span)
        node = A.Binary("+", b.node, A.Binary("*", A.Binary("-", a.node, b.node, span, span=span),
                                              _indicator(self.node, span), span, span=span),
                        span, span=span)
        return ScalarExpr(node, _combine_objs(self, a, b))

    def cast_bool(self) -> "ScalarExpr":
        """A condition as it is; an integer `x` as `x != 0`."""
        if _is_condition(self.node):
            return self
        span = here()
        return ScalarExpr(A.Binary("!=", self.node, A.IntLit(0, span=span), span, span=span),
                          self.objs)

    def cast_i64(self) -> "ScalarExpr":
        """An integer as it is (64-bit throughout); a condition as its 0/1 value."""
        if _is_condition(self.node):
            return ScalarExpr(_indicator(self.node, here()), self.objs)
        return self

    cast_u64 = cast_i64

    def to_debug_str(self) -> str:
        """The expression as `.wsp` writes it (the prototype's debug rendering)."""
        return repr(self)

    def __truediv__(self, o):
        raise user_error(here(), "`/` on a run-time integer is not Python's true division",
                         "write `//` (floor division), as the `.wsp` `/` on integers is")

    __rtruediv__ = __truediv__

    def __neg__(self):
        span = here()
        return ScalarExpr(A.Unary("-", self.node, span=span), self.objs)

    def __invert__(self):
        span = here()
        return ScalarExpr(A.Unary("not", self.node, span=span), self.objs)

    def __abs__(self):
        span = here()
        return ScalarExpr(A.Call(A.Name("abs", span=span), (self.node,), span=span), self.objs)

    def __bool__(self):
        raise user_error(here(), f"`{self}` is a run-time value: a Python `if`, `and`, `or` or "
                         "`not` cannot decide on it while the workload is traced",
                         "use `with P.when(PRED):` / `with P.otherwise():`, and `&`, `|`, `~` "
                         "to combine conditions", cls=HostDecision)

    def __index__(self):
        raise user_error(here(), f"`{self}` is a run-time value, not a Python integer",
                         "index a `Tensor` with it (`X[b]`), not a Python list or range",
                         cls=HostDecision)

    def __iter__(self):
        raise user_error(here(), f"`{self}` is a run-time value and cannot be iterated",
                         cls=HostDecision)

    def __repr__(self) -> str:
        from ..frontend.printer import expr_str

        return expr_str(self.node)

    __str__ = __repr__


def as_scalar(v: Any, span: A.Span) -> ScalarExpr:
    """`v` (a ScalarExpr, a Python number, a symbol ...) as a ScalarExpr."""
    if isinstance(v, ScalarExpr):
        return v
    if isinstance(v, Symbol):
        return v.expr(span)
    lit = literal(v, span)
    if lit is not None:
        return ScalarExpr(lit)
    raise user_error(span, f"a {type(v).__name__} cannot be used in a run-time expression",
                     "use loop variables, tensor elements (`L[b]`), slots, symbols and integers")


def _call(name: str, args: tuple, span: A.Span) -> ScalarExpr:
    parts = [as_scalar(a, span) for a in args]
    return ScalarExpr(A.Call(A.Name(name, span=span), tuple(p.node for p in parts), span=span),
                      _combine_objs(*parts))


def ceildiv(a: Any, b: Any) -> ScalarExpr:
    """`ceildiv(a, b)` of run-time integers."""
    return _call("ceildiv", (a, b), here())


def smin(a: Any, b: Any) -> ScalarExpr:
    """`min(a, b)` of run-time integers (Python's `min` would need to compare them now)."""
    return _call("min", (a, b), here())


def smax(a: Any, b: Any) -> ScalarExpr:
    """`max(a, b)` of run-time integers."""
    return _call("max", (a, b), here())


def slot_u64(i: int) -> ScalarExpr:
    """The value of run-time slot `i` (written by `slot_set_u64` / `slot_load_u64`)."""
    span = here()
    return ScalarExpr(A.Call(A.Name("slot", span=span), (A.IntLit(int(i), span=span),), span=span))


slot_i64 = slot_u64


def slot_bool(i: int) -> ScalarExpr:
    """Slot `i` as a condition (`slot(i) != 0`)."""
    span = here()
    s = slot_u64(i)
    return ScalarExpr(A.Binary("!=", s.node, A.IntLit(0, span=span), span, span=span))


def axis(name: str) -> ScalarExpr:
    """The loop variable (or consumed item) called `name`, for predicates and keys."""
    span = here()
    return ScalarExpr(A.Name(str(name), span=span))


class Symbol:
    """A run-time integer symbol of the module (`sym NAME`), bound with
    `program.set_symbol_u64(NAME, value)` (or its default)."""

    _all: dict[str, "Symbol"] = {}

    def __new__(cls, name: str, default: Optional[int] = None):
        s = cls._all.get(name)
        if s is None:
            s = super().__new__(cls)
            s.name, s.default, s._span = name, default, here(3)
            cls._all[name] = s
        elif default is not None:
            s.default = default
        return s

    def expr(self, span: A.Span) -> ScalarExpr:
        key = key_of(self)
        return ScalarExpr(A.Name(key, span=span), {key: self})

    def _b(self, op, o, rev=False):
        return getattr(self.expr(here(3)), op)(o)

    def __add__(self, o): return self._b("__add__", o)
    def __radd__(self, o): return self._b("__radd__", o)
    def __sub__(self, o): return self._b("__sub__", o)
    def __rsub__(self, o): return self._b("__rsub__", o)
    def __mul__(self, o): return self._b("__mul__", o)
    def __rmul__(self, o): return self._b("__rmul__", o)
    def __floordiv__(self, o): return self._b("__floordiv__", o)
    def __mod__(self, o): return self._b("__mod__", o)
    def __lt__(self, o): return self._b("__lt__", o)
    def __le__(self, o): return self._b("__le__", o)
    def __gt__(self, o): return self._b("__gt__", o)
    def __ge__(self, o): return self._b("__ge__", o)
    def __eq__(self, o): return self._b("__eq__", o)  # type: ignore[override]
    def __ne__(self, o): return self._b("__ne__", o)  # type: ignore[override]
    __hash__ = object.__hash__

    def __and__(self, o): return self._b("__and__", o)
    def __or__(self, o): return self._b("__or__", o)
    def __xor__(self, o): return self._b("__xor__", o)
    def __lshift__(self, o): return self._b("__lshift__", o)
    def __rshift__(self, o): return self._b("__rshift__", o)

    def cast_i64(self) -> "Symbol":
        return self

    cast_u64 = cast_i64

    def cast_bool(self) -> ScalarExpr:
        return self.expr(here()).cast_bool()

    def to_debug_str(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"symbol({self.name!r})"


def symbol_u64(name: str, default: Optional[int] = None) -> Symbol:
    """The run-time symbol `name` (one object per name)."""
    return Symbol(str(name), default)


_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


def _is_condition(node: A.Expr) -> bool:
    """Whether a scalar expression is a condition (comparisons, `and`, `or`, `not`, a bool)."""
    if isinstance(node, A.BoolLit):
        return True
    if isinstance(node, A.Unary):
        return node.op == "not"
    return isinstance(node, A.Binary) and node.op in (*_COMPARISONS, "and", "or")


def _indicator(node: A.Expr, span: A.Span) -> A.Expr:
    """The condition `node` as an integer, 1 where it holds and 0 elsewhere, in the operators
    the language has (no conditional expression, no bool-to-int cast): on integers `x > y`
    holds exactly when `min(1, max(0, x - y))` is 1, and `x == y` when `abs(x - y)` is 0."""
    def call(name: str, *args: A.Expr) -> A.Expr:
        return A.Call(A.Name(name, span=span), tuple(args), span=span)

    def binary(op: str, a: A.Expr, b: A.Expr) -> A.Expr:
        return A.Binary(op, a, b, span, span=span)

    one, zero = A.IntLit(1, span=span), A.IntLit(0, span=span)
    if isinstance(node, A.BoolLit):
        return one if node.value else zero
    if isinstance(node, A.Unary):  # `not`
        return binary("-", one, _indicator(node.operand, span))
    op, a, b = node.op, node.left, node.right
    if op == "and":
        return binary("*", _indicator(a, span), _indicator(b, span))
    if op == "or":
        return call("max", _indicator(a, span), _indicator(b, span))
    if op in ("<", "<="):
        op, a, b = {"<": ">", "<=": ">="}[op], b, a
    if op == ">":
        return call("min", one, call("max", zero, binary("-", a, b)))
    if op == ">=":
        return call("min", one, call("max", zero, binary("+", binary("-", a, b), one)))
    differs = call("min", one, call("abs", binary("-", a, b)))
    return differs if op == "!=" else binary("-", one, differs)


class LoopVar(ScalarExpr):
    """A loop variable of `P(...)`, `P.seq`, `P.sel`, `for_each`, or a consumed item. It is one
    symbolic value standing for every iteration: the loop body runs once, recording."""

    __slots__ = ("name", "kind")

    def __init__(self, name: str, kind: str = "loop", span: A.Span = A.NO_SPAN):
        super().__init__(A.Name(name, span=span))
        self.name, self.kind = name, kind

    @property
    def pos(self) -> ScalarExpr:
        """`e.pos` of a `P.sel` variable: the position among the selected coordinates."""
        span = here()
        return ScalarExpr(A.Attr(A.Name(self.name, span=span), "pos", span=span))

    @property
    def index(self) -> ScalarExpr:
        """`t.index` of a consumed item: its sequence number."""
        span = here()
        return ScalarExpr(A.Attr(A.Name(self.name, span=span), "index", span=span))

    def __repr__(self) -> str:
        return self.name


# the seeds' `AxisVar` (spec 6.1, 6.3): the loop variable a `P(...)` loop binds, which
# `k[b, h]` and `k.at(b=b)` take; an annotation and an isinstance test
AxisVar = LoopVar


class _IntVarKind(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, (Symbol, ScalarExpr))


class IntVar(metaclass=_IntVarKind):
    """The seeds' `IntVar`: an integer known only at run time, such as the size in
    `DenseDyn(size: int | IntVar)`. `IntVar("n", 4)` is `symbol_u64("n", 4)` (bound with
    `program.set_symbol_u64`); every symbol and integer expression (loop variables, `n + 1`)
    is an instance."""

    def __new__(cls, name: str, default: Optional[int] = None) -> Symbol:  # type: ignore[misc]
        return symbol_u64(name, default)


# ---------------------------------------------------------------------------------------------
# Tensors and views


class Tensor:
    """A tensor of the caller's: `Tensor(data=array, shape=array.shape, dtype=DType.F32)`.

    The program reads `data` when `program.execute()` starts and writes the results back into
    it (in place, as the seeds' tensors are) when the run ends; reading `data` meanwhile waits
    for them. `X[b]`, `X[b, t]`, `X[b][t]` and slices
    (`X[b, t*16:t*16+16, :]`) are views for kernel arguments; `L[b]` of an integer tensor is
    also an element read in run-time expressions.

    `Tensor(shape=..., dtype=..., scratch=True)` (or `scratch(shape, dtype)`) is an
    intermediate of the program's own, the `.wsp` `scratch` declaration: it has no data of the
    caller's, the program allocates it, and the optimiser may fuse it away."""

    _default_name = "tensor"
    scratch = False  # also for the index tensors `_index_tensor` makes of lists
    _landing: Any = None  # a run of `Program.execute` that will write this tensor's array
    _layout: Any = None  # the `TensorLayout` given (None: replicated)
    _derive: Any = None  # (kind, source, over, dim, to, span): a collective's result

    @property
    def data(self) -> Any:
        """The array; while a started run will write it (`program.execute()`), reading it
        waits until the run's results are in it (or the run failed)."""
        run = self._landing
        if run is not None:
            run.wait()
        return self._data

    @data.setter
    def data(self, value: Any) -> None:
        self._data = value

    def __init__(self, data: Any = None, shape: Any = None, dtype: Any = None,
                 location: Any = None, layout: Any = None, name: Optional[str] = None,
                 scratch: bool = False):
        import numpy as np

        span = here()
        self._span = span
        self.scratch = bool(scratch)
        self.location = _location(location, span)
        if self.scratch:
            self._scratch(data, shape, dtype, span)
            self._wsp_name = name or stored_name(user_frame())
            self._layout = _tensor_layout(layout, self._shape, span)
            return
        dt = dtype_name(dtype) if dtype is not None else None
        if dtype is not None and dt is None:
            raise user_error(span, f"unknown data type {dtype!r}", "use a `DType` such as `DType.F32`")
        mem = layout.mem if isinstance(layout, TensorLayout) else None
        if data is None:
            if shape is None or dt is None:
                raise user_error(span, "a tensor without `data` needs `shape` and `dtype`",
                                 "write `Tensor(data=np.zeros(shape, np.float32), ...)`")
            data = _stored(None, tuple(int(d) for d in shape), numpy_dtype(dt), mem, span)
        elif not isinstance(data, np.ndarray):
            data = np.asarray(data)
        if mem is not None and shape is not None and data.ndim == 1 and \
                tuple(int(d) for d in shape) != tuple(data.shape):
            data = _stored(data, tuple(int(d) for d in shape), data.dtype, mem, span)
        got = _NUMPY_NAMES.get(data.dtype.name)
        if dt is None:
            dt = got
            if dt is None:
                raise user_error(span, f"arrays of dtype {data.dtype} cannot be tensors")
        elif not (got == dt or data.dtype == numpy_dtype(dt)):
            raise user_error(span, f"`dtype` is {dt}, but the array has dtype {data.dtype}",
                             "convert the array first: wspc never casts silently"
                             + (" (bf16 data is passed as uint16 raw bits)" if dt == "bf16" else ""))
        if shape is not None and tuple(int(d) for d in shape) != tuple(data.shape):
            raise user_error(span, f"`shape` is {tuple(shape)}, but the array has shape "
                             f"{tuple(data.shape)}")
        if data.ndim == 0:
            raise user_error(span, "a tensor needs at least one dimension")
        self.data = data
        self.dtype = DType(dt)
        self._layout = _tensor_layout(layout, tuple(data.shape), span)
        # the variable it is stored to (`X = Tensor(...)`); else a name found at assembly
        self._wsp_name = name or stored_name(user_frame())

    def _scratch(self, data: Any, shape: Any, dtype: Any, span: A.Span) -> None:
        """A scratch tensor: a shape and a dtype, no array (the program allocates it)."""
        if data is not None:
            raise user_error(span, "a scratch tensor has no data: the program allocates it",
                             "leave `data` out and give `shape` and `dtype`")
        if shape is None or dtype is None:
            raise user_error(span, "a scratch tensor needs `shape` and `dtype`",
                             "write `Tensor(shape=(M, N), dtype=DType.F32, scratch=True)`")
        dt = dtype_name(dtype)
        if dt is None:
            raise user_error(span, f"unknown data type {dtype!r}", "use a `DType` such as `DType.F32`")
        dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        try:  # Python and NumPy integers, as an array's shape has them
            sizes = tuple(operator.index(d) for d in dims if not isinstance(d, bool))
        except TypeError:
            sizes = ()
        if not dims or len(sizes) != len(dims) or min(sizes) < 0:
            raise user_error(span, f"the shape of a scratch tensor is non-negative whole "
                             f"numbers, not {shape!r}")
        self.data = None
        self._shape = sizes
        self.dtype = DType(dt)

    @property
    def shape(self) -> tuple:
        return self._shape if self.scratch else tuple(self.data.shape)

    @property
    def layout(self) -> TensorLayout:
        """The tensor's `TensorLayout`: the one given (`layout=`), the one a collective made
        (`y = allreduce(x)`: its mesh axes as written), else replicated on every dimension."""
        return self.layout_with(lambda axis, span: axis)

    def layout_with(self, resolve: Any) -> TensorLayout:
        """The layout with its mesh axes passed through `resolve(axis, span)` (assembly names
        them after the workload's mesh); a collective's result is derived from its source's."""
        if self._derive is not None:
            kind, src, over, dim, to, span = self._derive
            return derive(kind, src.layout_with(resolve),
                          None if kind == "relayout" else resolve(over, span), dim,
                          None if to is None else _resolved(to, resolve, span), span)
        if self._layout is None:
            return TensorLayout.default(len(self.shape))
        return _resolved(self._layout, resolve, self._span)

    @property
    def base(self) -> "Tensor":
        """The prototype's base tensor of a view: a tensor is its own."""
        return self

    @property
    def index_exprs(self) -> tuple:
        """The indices that reach this view from `base`: none for a tensor."""
        return ()

    def with_layout(self, layout: Any) -> "Tensor":
        """The prototype's `with_layout`: this tensor's array as a tensor of another layout
        annotation, without moving data (`relayout` moves it). The two are one array, so a
        workload may use only one of them (assembly checks; `_alias_of`)."""
        span = here()
        if self.scratch:
            raise user_error(span, "`with_layout` of a scratch tensor: the program owns its "
                             "storage, so another layout would be another tensor",
                             "give the layout where the scratch tensor is made "
                             "(`scratch(shape, dtype, layout=L)`)", cls=TypeCheckError)
        t = Tensor.__new__(Tensor)
        t.__dict__.update(self.__dict__)
        t._span, t._derive = span, None
        t._layout = _tensor_layout(layout, self.shape, span)
        t._wsp_name = stored_name(user_frame())
        t._alias_of = self._alias_of or self
        return t

    _alias_of: Any = None  # the tensor whose array a `with_layout` result shares

    def nbytes(self) -> int:
        if self.scratch:
            return math.prod(self._shape) * size_of(self.dtype.value)
        return int(self.data.nbytes)

    def __getitem__(self, idx: Any) -> "TensorView":
        return TensorView(self, (), here()).__getitem__(idx, here())

    def slice(self, start: Any, end: Any) -> "TensorView":
        return TensorView(self, (), here()).__getitem__(slice(start, end), here())

    @property
    def T(self) -> ScalarExpr:
        """`X.T`: the whole tensor as a transposed view (see `TensorView.T`)."""
        return transposed(TensorView(self, (), here()), here())

    def __repr__(self) -> str:
        kind = "scratch " if self.scratch else ""
        return f"Tensor({kind}{self._wsp_name}: {self.dtype.value}{list(self.shape)})"


def scratch(shape: Any, dtype: Any, name: Optional[str] = None, layout: Any = None) -> Tensor:
    """`scratch((M, N), DType.F32)`: `Tensor(shape=(M, N), dtype=..., scratch=True)`."""
    return Tensor(shape=shape, dtype=dtype, name=name, scratch=True,
                  layout=layout)  # spans: the user's line


def _tensor_layout(layout: Any, shape: tuple, span: A.Span) -> Optional[TensorLayout]:
    """`Tensor(layout=...)` checked against the tensor: a `TensorLayout` of its rank (one
    without a rank is fitted), whose memory facet, if any, can store its shape."""
    if layout is None:
        return None
    if not isinstance(layout, TensorLayout):
        raise user_error(span, f"`layout=` takes a `TensorLayout`, not {layout!r}",
                         "write e.g. `layout=TensorLayout.sharded(dim=0, mesh_axis=0)`",
                         cls=TypeCheckError)
    if layout.mem is not None:
        layout.mem.strides_for(shape, span)
    return layout.for_rank(len(shape))


def _stored(buffer: Any, shape: tuple, dtype: Any, mem: Any, span: A.Span) -> Any:
    """The array of a tensor of `shape` whose elements lie as `mem` says (docs/python.md,
    "MemLayout"): a view of `buffer` (the caller's flat storage, whose writes then land
    there), or of new zeroed storage when `buffer` is None. Row-major without a `mem`."""
    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    if mem is None:
        if buffer is None:
            return np.zeros(shape, dtype)
        raise user_error(span, f"`shape` is {shape}, but the array has shape "
                         f"{tuple(buffer.shape)}")
    strides = mem.strides_for(shape, span)
    need = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    if buffer is None:
        buffer = np.zeros(need, dtype)
    elif not buffer.flags.c_contiguous or buffer.size < need:
        raise user_error(span, f"a flat buffer stored as {mem!r} for shape {shape} needs "
                         f"{need} contiguous elements; the array has {buffer.size}"
                         + ("" if buffer.flags.c_contiguous else ", not contiguous"),
                         "pass the whole storage as one contiguous 1-D array",
                         cls=TypeCheckError)
    item = buffer.dtype.itemsize
    return as_strided(buffer, shape, tuple(s * item for s in strides), writeable=True)


def _resolved(layout: TensorLayout, resolve: Any, span: A.Span) -> TensorLayout:
    """`layout` with every mesh axis passed through `resolve`."""
    shards = {d: resolve(a, span) for d, a in layout.shard_axes().items()}
    out = layout._copy(None, tuple(resolve(a, span) for a in layout.partial), shards)
    if layout.rank is not None:
        out._dist = out._entries(layout.rank)
    return out


class _Slice:
    """One sliced dimension of a view: `start`, `stop` (ScalarExprs, None for the edge) and a
    Python integer `step` >= 1; `span` is where the step was written (a stepped dimension
    becomes a gather view, whose errors are reported there)."""

    __slots__ = ("start", "stop", "step", "span")

    def __init__(self, start: Optional[ScalarExpr], stop: Optional[ScalarExpr], step: int,
                 span: A.Span):
        self.start, self.stop, self.step, self.span = start, stop, step, span


def named(e: ScalarExpr) -> str:
    """`e` as text for a message, its tensors and symbols by their names (where known) rather
    than the placeholders assembly replaces."""
    from ..frontend.printer import expr_str

    names = {k: getattr(o, "_wsp_name", None) or getattr(o, "name", None) for k, o in e.objs.items()}
    return expr_str(substitute(e.node, {k: n for k, n in names.items() if isinstance(n, str)}))


def _gathers(d: Any) -> bool:
    """Whether the index `d` of a view is a slice of an index tensor (a gather view's rows)."""
    return isinstance(d, TensorView) and any(isinstance(x, _Slice) for x in d.dims)


def _static(e: Optional[ScalarExpr]) -> Optional[int]:
    """The value of an integer literal (possibly negated), else None."""
    if e is None:
        return None
    n = e.node
    if isinstance(n, A.IntLit):
        return n.value
    if isinstance(n, A.Unary) and n.op == "-" and isinstance(n.operand, A.IntLit):
        return -n.operand.value
    return None


def _int(v: int, span: A.Span) -> ScalarExpr:
    return ScalarExpr(A.IntLit(int(v), span=span))


def _arith(op: str, a: ScalarExpr, b: ScalarExpr, span: A.Span) -> ScalarExpr:
    """`a op b`, folded when both are literals and simplified around 0 and 1 (so that a view
    composed of plain slices prints as the one the user could have written)."""
    x, y = _static(a), _static(b)
    if x is not None and y is not None:
        v = {"+": x + y, "-": x - y, "*": x * y,
             "/": x // y if y else None, "%": x % y if y else None}[op]
        if v is not None:
            return _int(v, span)
    if op == "-":  # (s + u) - (s + v) is u - v: a composed view's length without its offset
        (sa, ua), (sb, ub) = _offset(a), _offset(b)
        if repr(sa) == repr(sb) and (ua is not a or ub is not b):
            return _arith("-", ua, ub, span)
    if (op == "+" and x == 0) or (op == "*" and x == 1):
        return b
    if (op in "+-" and y == 0) or (op in "*/" and y == 1):
        return a
    if op == "%" and y == 1:
        return _int(0, span)
    return ScalarExpr(A.Binary(op, a.node, b.node, span, span=span), _combine_objs(a, b))


def _offset(e: ScalarExpr) -> tuple:
    """`s + u` as (s, u); anything else `e` as (e, 0)."""
    n = e.node
    if isinstance(n, A.Binary) and n.op == "+":
        return ScalarExpr(n.left, e.objs), ScalarExpr(n.right, e.objs)
    return e, _int(0, n.span)


def _bound(v: Any, span: A.Span, what: str) -> Optional[ScalarExpr]:
    """A slice bound as a ScalarExpr (None stays None); a negative literal is an error, as in
    `.wsp` views (NumPy would count it from the end)."""
    if v is None:
        return None
    e = as_scalar(v, span)
    n = _static(e)
    if n is not None and n < 0:
        raise user_error(span, f"the {what} {n} of a view's slice is negative: views do not "
                         "count from the end", "write the position from the start (`N - k`)")
    return e


class TensorView(ScalarExpr):
    """`X[...]`: a view of a tensor for a kernel argument, or an element read in expressions.

    `dims` holds one entry per tensor dimension indexed so far (a ScalarExpr for an integer
    index, a `_Slice` for a slice); the dimensions after them are whole. Indexing a view again
    indexes its remaining dimensions, NumPy's way: `X[b][h, :]` is `X[b, h, :]`, and
    `X[0:32, :][8:16, :]` is `X[8:16, :]` (offsets add, steps multiply). Its AST (`node`) is
    built when first read: a stepped rows dimension becomes a gather view (`_gather`)."""

    __slots__ = ("tensor", "dims", "span", "_built")

    def __init__(self, tensor: Tensor, dims: tuple, span: A.Span):
        self.tensor, self.dims, self.span = tensor, tuple(dims), span
        self._built: Optional[tuple] = None

    # ScalarExpr's `node` and `objs`, built on first use
    @property  # type: ignore[override]
    def node(self) -> A.Expr:
        return self._build()[0]

    @node.setter
    def node(self, value: A.Expr) -> None:  # pragma: no cover - never set
        raise AttributeError("a view's AST is derived from its dimensions")

    @property  # type: ignore[override]
    def objs(self) -> dict:
        return self._build()[1]

    @objs.setter
    def objs(self, value: dict) -> None:  # pragma: no cover - never set
        raise AttributeError("a view's objects are derived from its dimensions")

    def _build(self) -> tuple:
        if self._built is None:
            key = key_of(self.tensor)
            objs: dict = {key: self.tensor}
            items = []
            for d in self.dims:
                if isinstance(d, ScalarExpr):
                    objs.update(d.objs)
                    items.append(d.node)
                else:
                    # a step (`X[b, a:e:k]`) is the `.wsp` strided view's (language.md
                    # section 6, "Strided views"): every dimension, reads and writes
                    for b in (d.start, d.stop):
                        if b is not None:
                            objs.update(b.objs)
                    items.append(A.Slice(None if d.start is None else d.start.node,
                                         None if d.stop is None else d.stop.node,
                                         None if d.step == 1 else A.IntLit(d.step, span=d.span),
                                         span=d.span))
            base = A.Name(key, span=self.span)
            node = A.Index(base, tuple(items), span=self.span) if items else base
            self._built = (node, objs)
        return self._built

    def _free(self) -> list:
        """The positions of the dimensions a further index applies to, in order: the sliced
        ones, then the whole ones after `dims`."""
        return ([i for i, d in enumerate(self.dims) if isinstance(d, _Slice) or _gathers(d)]
                + list(range(len(self.dims), len(self.tensor.shape))))

    def _extent(self, i: int) -> Optional[int]:
        """The length of dimension `i` of the view when it is known now."""
        size = self.tensor.shape[i]
        if i >= len(self.dims):
            return size
        d = self.dims[i]
        if not isinstance(d, _Slice):  # a gather's rows: its index slice's length
            return None
        a = 0 if d.start is None else _static(d.start)
        e = size if d.stop is None else _static(d.stop)
        if a is None or e is None:
            return None
        return max(0, -(-(e - a) // d.step))

    def __getitem__(self, idx: Any, span: Optional[A.Span] = None) -> "TensorView":
        span = span or here()
        parts = list(idx) if isinstance(idx, tuple) else [idx]
        # `None` (NumPy's new axis) takes no dimension: each is placed after the indices
        # before it, and made of an integer index next to it once the others are composed
        news = [sum(1 for q in parts[:i] if q is not None) for i, p in enumerate(parts)
                if p is None]
        parts = [p for p in parts if p is not None]
        free = self._free()
        dots = [i for i, p in enumerate(parts) if p is Ellipsis]  # `in` would call `==`
        if len(dots) > 1:
            raise user_error(span, "a view has at most one `...`")
        if dots:  # `...` is the whole dimensions it stands for: none written when trailing
            at = dots[0]
            fill = 0 if at == len(parts) - 1 else len(free) - (len(parts) - 1)
            parts[at:at + 1] = [slice(None)] * max(fill, 0)
        if len(parts) > len(free):
            raise user_error(span, f"{len(parts)} indices for a view with {len(free)} "
                             f"dimension{'s' if len(free) != 1 else ''} left",
                             f"`{named(self)}` has the shape {list(self.tensor.shape)} of which "
                             f"{len(free)} dimension{'s are' if len(free) != 1 else ' is'} "
                             "not indexed yet")
        if dots and news:  # a None after the `...` sits after the dimensions it stands for
            at = dots[0]
            fill = 0 if at == len(parts) - 1 else len(free) - (len(parts) - 1)
            news = [k + max(fill, 0) - 1 if k > at else k for k in news]
        dims = list(self.dims)
        for pos, p in zip(free, parts):  # the free positions past `dims` come in order
            if pos == len(dims):
                dims.append(self._compose(pos, None, p, span))
            else:
                dims[pos] = self._compose(pos, dims[pos], p, span)
        for k in news:
            self._new_axis(dims, free, k, span)
        return TensorView(self.tensor, tuple(dims), span)

    def _new_axis(self, dims: list, free: list, k: int, span: A.Span) -> None:
        """`None` before the k-th free dimension (after the last when k is past them): a
        dimension of extent 1 there, which a `.wsp` view (whose dimensions are the tensor's)
        has when an integer index right before or after that place becomes a unit slice:
        `X[b, None, :]` is `X[b:b+1, :]`, `X[b, h, None]` is `X[b, h:h+1, :]`. The elements
        and the order of the view's dimensions are NumPy's."""
        rank = len(self.tensor.shape)
        at = free[k] if k < len(free) else rank  # the tensor position the new axis precedes
        for p in (at - 1, at):
            d = dims[p] if 0 <= p < len(dims) else None
            if isinstance(d, ScalarExpr):
                dims[p] = _Slice(d, _arith("+", d, _int(1, span), span), 1, span)
                return
        raise user_error(span, "`None` (a new axis) here has no integer index next to it: a "
                         "new axis is made of an indexed dimension beside it (`X[b, None, :]` "
                         "is `X[b:b+1, :]`), since a view's dimensions are the tensor's",
                         "index the dimension next to it with an integer, or write the unit "
                         "slice `i:i+1` where the new axis should be")

    def _compose(self, pos: int, base: Optional[_Slice], p: Any, span: A.Span):
        """Index `p` (an integer or a slice) applied to dimension `pos`, sliced by `base`.
        Into a slice, positions are checked here when they are literals (NumPy's IndexError
        or clipping would be a silent surprise); on a whole dimension the checker checks
        them, as for `.wsp` views."""
        if base is not None and not isinstance(base, _Slice):
            raise user_error(span, f"`{named(self)}` gathers its rows by data: indexing it again is "
                             "not supported", "write every index in one subscript: "
                             "`X[pos[a:b], c0:c1]`")
        whole = base is None or (base.start is None and base.stop is None and base.step == 1)
        length = self._extent(pos)
        if not isinstance(p, slice):
            i = as_scalar(p, span)
            if whole:
                return i
            si = _static(i)
            if si is not None and si < 0:
                raise user_error(span, f"index {si} into a sliced view is negative: views do "
                                 "not count from the end", "write the position from the start")
            if si is not None and length is not None and si >= length:
                raise user_error(span, f"index {si} is out of range of a sliced dimension of "
                                 f"length {length}", "views never wrap around or clip as NumPy "
                                 "does: index inside the slice")
            return _arith("+", base.start if base.start is not None else _int(0, span),
                          _arith("*", i, _int(base.step, span), span), span)
        step = _step(p.step, span)
        if whole and step == 1:
            a = None if p.start is None else as_scalar(p.start, span)
            b = None if p.stop is None else as_scalar(p.stop, span)
            return _Slice(a, b, 1, span)
        a, b = _bound(p.start, span, "start"), _bound(p.stop, span, "end")
        sa, sb = _static(a), _static(b)
        if length is not None and ((sb is not None and sb > length)
                                   or (sa is not None and sa >= length)):
            bad = sb if sb is not None and sb > length else sa
            raise user_error(span, f"the slice `{_slice_text(a, b, step)}` is out of range of "
                             f"a{' sliced' if not whole else ''} dimension of length {length} "
                             f"(at {bad})", "views never clip as NumPy does: the slice must "
                             "lie inside the view")
        if whole:
            return _Slice(a, b, step, span)
        k = _int(base.step, span)
        s0 = base.start if base.start is not None else _int(0, span)
        start = _arith("+", s0, _arith("*", a, k, span), span) if a is not None else base.start
        # positions below b of a dimension stepped by k end at its element b - 1: the stop
        # just past it stays inside the tensor where s0 + b*k may not (`X[0:10:3][0:4]` is
        # `X[0:10:3]`, elements 0, 3, 6, 9: its stop is 10, not 12)
        stop = (None if b is None else _arith("+", s0, b, span) if base.step == 1
                else _arith("+", s0, _arith("+", _arith("*", _arith("-", b, _int(1, span), span),
                                                      k, span), _int(1, span), span), span))
        if stop is None:
            stop = base.stop
        return _Slice(start, stop, base.step * step, span)

    @property
    def base(self) -> Tensor:
        """The prototype's base tensor: the tensor this view indexes."""
        return self.tensor

    @property
    def index_exprs(self) -> tuple:
        """The prototype's index expressions: one per indexed dimension of `base`, in order,
        an integer index as its expression and a slice as a Python `slice` of expressions
        (None for a bound left out). Indexing again composes them (`X[b][t]` is `X[b, t]`)."""
        return tuple(d if isinstance(d, ScalarExpr)
                     else slice(d.start, d.stop, None if d.step == 1 else d.step)
                     for d in self.dims)

    @property
    def shape(self) -> tuple:
        """The view's extents, NumPy's way (None where a bound is a run-time value)."""
        return tuple(self._extent(i) for i in self._free())

    @property
    def T(self) -> ScalarExpr:
        """`X[b, a:a+64, :].T`: the view passed to a tile transposed, the `.wsp` `VIEW.T`
        (language.md section 6, "Transposed views")."""
        return transposed(self, here())


def _step(v: Any, span: A.Span) -> int:
    """A slice's step: a Python (or NumPy) integer of at least 1; None is 1."""
    if v is None:
        return 1
    import numpy as np

    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise user_error(span, f"a view's step is a Python integer, not {v!r}",
                         "steps are fixed when the workload is traced")
    if v < 1:
        raise user_error(span, f"a view's step must be at least 1, found {int(v)}",
                         "views do not run backwards: reverse the rows in the kernel")
    return int(v)


def _slice_text(a: Optional[ScalarExpr], b: Optional[ScalarExpr], step: int) -> str:
    text = f"{'' if a is None else named(a)}:{'' if b is None else named(b)}"
    return text + (f":{step}" if step != 1 else "")


def transposed(view: "TensorView", span: A.Span) -> ScalarExpr:
    """`VIEW.T` as an argument: the checker gives it its meaning and its errors."""
    return ScalarExpr(A.Attr(view.node, "T", span=span), dict(view.objs))


# ---------------------------------------------------------------------------------------------
# Channels and events (language.md section 7)


class Channel:
    """A bounded channel: `Channel("l2c", depth=2)`, `Channel[Tile](depth=2)`,
    `Channel(capacity=4)`. Its element type is the tile type of the `Out` parameter it is passed
    to in `send` (or `Channel[Tile[16, 128, DType.F32]]`); a channel never passed to a task is a
    token channel. Depth 0 is a rendezvous."""

    def __class_getitem__(cls, elem: Any):
        def make(*args, **kwargs):
            kwargs.setdefault("elem", elem)
            return cls(*args, **kwargs)

        return make

    def __init__(self, name: Optional[str] = None, depth: Optional[int] = None,
                 capacity: Optional[int] = None, elem: Any = None):
        self._span = here()
        if depth is not None and capacity is not None and depth != capacity:
            raise user_error(self._span, "`depth` and `capacity` say different things",
                             "give one of them")
        self.depth = depth if depth is not None else capacity
        self.elem = elem if isinstance(elem, TileSpec) else None
        self.name = name or stored_name(user_frame()) or "ch"
        self._wsp_name = wsp_ident(self.name)
        self._items: list = []  # host-side items (`try_send` / `send` of a value, outside a workload)
        self._closed_at: Optional[A.Span] = None  # where `close()` was called

    def __repr__(self) -> str:
        return f"Channel({self.name!r}, depth={self.depth})"

    # the prototype's host-side queue: values sent from Python outside any workload
    @property
    def capacity(self) -> int:
        """The items it holds at most: its depth (1 when not given; 0 is a rendezvous)."""
        return 1 if self.depth is None else int(self.depth)

    def is_open(self) -> bool:
        return self._closed_at is None

    def size(self) -> int:
        """The values sent from the host and held now."""
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        """No room for a host-side send (a rendezvous channel is always full on the host: no
        receiver can be waiting)."""
        return len(self._items) >= self.capacity

    def close(self) -> None:
        """No more sends: a later `send` / `try_send` (and a workload's `send` to it) raises
        `ChannelClosed`. Closing twice is harmless."""
        if self._closed_at is None:
            self._closed_at = here()


class Event:
    """A rendezvous channel for `record` / `synchronize` / `query` (language.md section 7).
    `depth` is the prototype's (its `Event` is a `Channel`): wspc's `record` never blocks and
    keeps no count of signals, so any depth means the same (docs/python.md)."""

    def __init__(self, name: Optional[str] = None, depth: int = 0):
        self._span = here()
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            raise user_error(self._span, f"an event's depth is a non-negative integer, not "
                             f"{depth!r}", "the prototype writes `Event(\"e\", depth=0)`")
        self.name = name or stored_name(user_frame()) or "ev"
        self._wsp_name = wsp_ident(self.name)
        self.depth = depth

    def __repr__(self) -> str:
        return f"Event({self.name!r})"


def value_node(v: Any, t: Trace, span: A.Span) -> A.Expr:
    """A kernel argument or scalar value as an AST expression (objects registered in `t`)."""
    if isinstance(v, ScalarExpr):
        t.adopt(v.objs)
        return v.node
    if isinstance(v, (Tensor, Channel)):
        return t.ref(v, span)
    if isinstance(v, Symbol):
        e = v.expr(span)
        t.adopt(e.objs)
        return e.node
    lit = literal(v, span)
    if lit is not None:
        return lit
    if callable(v) and not isinstance(v, type):
        raise user_error(span, f"a Python function cannot be an argument here ({v!r})")
    raise user_error(span, f"a {type(v).__name__} cannot be passed to a task",
                     "pass tensor views (`X[b]`), whole tensors, channels, consumed items or "
                     "numbers")
