"""`@kernel` / `@jit_kernel` and the `pto` (alias `tl`) tile language: a decorated function's
body is traced once into a `KernelDecl` of the AST, the node `kernel NAME(...) { ... }` of a
`.wsp` file would parse to.

Why one file: the `pto` namespace records the events that building the body turns into
statements, and `@kernel`'s tracing runs both; they share the trace stack and its `Value`s.

Tracing calls the function with a `Value` per parameter. `pto.mul(x, x)`, `x * y`, `-x` and the
other primitives return new `Value`s and record them; `pto.store(out, v)` records a store. When
the function returns, the recorded values become statements in the order they were made:

- a value the Python code stored in a variable (`sq = pto.mul(x, x)`) becomes `let sq = ...`
  (the variable name comes from the instruction after the call; a name taken or reserved gets a
  suffix), as does a value used twice;
- a value used once and never named is written inline where it is used;
- a value never used and never named becomes an expression statement, which the checker
  reports as an unused value at its line;
- a primitive with two results (`topk`, `sort`) is a pair of values, `v, i = pto.topk(x, k)`,
  bound by one `let v, i = topk(x, k)` (`_` for a result never used).

The prototype's PTO-ISA helpers (`pto.iota_u32`, `pto.tsort32`, `pto.extract_topk_indices`) are
spelled with primitives of the language: their values are recorded unnamed, so only the result
gets the user's variable name.

Every node's span is the Python expression that made it, so the checker's messages ("operands
of `+` do not broadcast") point at the user's line and columns. `@kernel(cpp_src=...)` (or
`cpp_body_path=`, with `cpp_includes=[...]`) gives an `extern cpp` body instead (language.md
section 4).
"""

from __future__ import annotations

import ast as pyast
import inspect
import linecache
import math
import numbers
import operator
import os
from typing import Any, Optional

from ..diagnostics import WspError, did_you_mean
from ..dtypes import DTYPES
from ..frontend import ast as A
from ..frontend.builder import KEYWORDS
from ..primitives import PRIMITIVES
from .calls import make_call, take_after
from .errors import KernelError, from_wsp, user_error
from .names import substitute, wsp_ident
from .signature import CompiledKernel, KernelSignature, signature_of
from .source import (
    def_span,
    expression_at,
    frame_span,
    here,
    keyword_spans,
    node_span,
    param_spans,
    source_text,
    stored_name,
    stored_names,
    user_frame,
)
from .trace import tracing
from .values import (
    Constexpr,
    ConstexprSpec,
    DType,
    ParamSpec,
    ScalarSpec,
    TileSpec,
    dtype_name,
    literal,
)

# ---------------------------------------------------------------------------------------------
# Values inside a kernel body


class Value:
    """A tile or scalar inside a traced kernel body: a parameter or the result of an operation."""

    __slots__ = ("kind", "op", "args", "kwargs", "span", "hint", "name")
    __hash__ = object.__hash__

    def __init__(self, kind: str, op: str = "", args: tuple = (), kwargs: tuple = (),
                 span: A.Span = A.NO_SPAN, hint: Optional[str] = None, name: str = ""):
        self.kind, self.op, self.args, self.kwargs = kind, op, args, kwargs
        self.span, self.hint, self.name = span, hint, name

    def _bin(self, op: str, other: Any, reverse: bool = False) -> "Value":
        a, b = (other, self) if reverse else (self, other)
        return _record("bin", op, (a, b))

    def __add__(self, o): return self._bin("+", o)
    def __radd__(self, o): return self._bin("+", o, True)
    def __sub__(self, o): return self._bin("-", o)
    def __rsub__(self, o): return self._bin("-", o, True)
    def __mul__(self, o): return self._bin("*", o)
    def __rmul__(self, o): return self._bin("*", o, True)
    def __truediv__(self, o): return self._bin("/", o)
    def __rtruediv__(self, o): return self._bin("/", o, True)
    def __lt__(self, o): return self._bin("<", o)
    def __le__(self, o): return self._bin("<=", o)
    def __gt__(self, o): return self._bin(">", o)
    def __ge__(self, o): return self._bin(">=", o)
    def __eq__(self, o): return self._bin("==", o)  # type: ignore[override]
    def __ne__(self, o): return self._bin("!=", o)  # type: ignore[override]
    def __and__(self, o): return self._bin("and", o)
    def __or__(self, o): return self._bin("or", o)

    def __matmul__(self, o): return _record("op", "matmul", (self, o))
    def __rmatmul__(self, o): return _record("op", "matmul", (o, self))
    def __pow__(self, o): return _record("op", "pow", (self, o))
    def __neg__(self): return _record("un", "-", (self,))
    def __invert__(self): return _record("un", "not", (self,))
    def __abs__(self): return _record("op", "abs", (self,))

    def __floordiv__(self, o):
        raise user_error(here(), "`//` is not a kernel operator",
                         "`/` on integer tiles is floor division; cast to a float type for a quotient")

    def __mod__(self, o):
        raise user_error(here(), "`%` is not a kernel operator")

    def __bool__(self):
        raise user_error(here(), "a tile value cannot decide a Python `if`, `and`, `or` or `not`: "
                         "kernels are straight-line code",
                         "select with `pto.where(cond, a, b)` and combine conditions with `&` / `|`")

    def __iter__(self):
        raise user_error(here(), "a tile value cannot be iterated: kernels are straight-line code")

    def __repr__(self) -> str:
        return f"Value({self.name or self.hint or self.op})"


class _KernelTrace:
    def __init__(self, kernel: "KernelRef"):
        self.kernel = kernel
        # ("value", Value) | ("store", target Value, value, span) | ("parts", pair, (a, b))
        self.events: list = []


_KSTACK: list[_KernelTrace] = []


def _record(kind: str, op: str, args: tuple, kwargs: tuple = (), named: bool = True) -> Value:
    """Record one value made by the user's current line; `named=False` for a step of a helper
    spelled with several primitives (only its result takes the variable's name)."""
    if not _KSTACK:
        raise user_error(here(), f"`{op}` on tile values only works inside a `@kernel` body")
    frame = user_frame()
    v = Value(kind, op, args, kwargs, frame_span(frame) if frame else A.NO_SPAN,
              stored_name(frame) if named else None)
    _KSTACK[-1].events.append(("value", v))
    return v


def _record_pair(op: str, args: tuple, kwargs: tuple = (), named: bool = True) -> tuple:
    """Record a primitive with two results (`topk`, `sort`): one `pair` event, and its two
    results as `part` values (named after `v, i = ...` when the user unpacks them)."""
    pair = _record("pair", op, args, kwargs, named=False)
    names = stored_names(user_frame()) if named else None
    hints = names if names and len(names) == 2 else (None, None)
    parts = tuple(Value("part", str(i), (pair,), (), pair.span, hints[i]) for i in range(2))
    _KSTACK[-1].events.append(("parts", pair, parts))
    return parts


# ---------------------------------------------------------------------------------------------
# The pto / tl namespace


class _PtoNamespace:
    """`pto.NAME(...)` (also `tl.NAME`) for every primitive of language.md section 4."""

    def __init__(self, spelling: str):
        self._spelling = spelling

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in PRIMITIVES:
            raise user_error(here(), f"`{self._spelling}.{name}` is not a tile primitive",
                             did_you_mean(name, PRIMITIVES)
                             or 'see docs/language.md section 4, "Primitives"')
        if PRIMITIVES[name].pair is not None:
            def prim(*args, **kwargs):  # `v, i = pto.topk(x, k)`: .wsp's `let v, i = ...`
                return _record_pair(name, tuple(args), tuple(kwargs.items()))
        else:
            def prim(*args, **kwargs):
                return _record("op", name, tuple(args), tuple(kwargs.items()))

        prim.__name__ = name
        return prim

    # adapters where the seeds' signature differs from the language's
    def store(self, dst: Any, src: Any, offset: Any = (0, 0), mask: Any = None) -> None:
        """`store(dst, value)`: the value of an `Out`/`InOut` parameter when the kernel ends."""
        if not _KSTACK:
            raise user_error(here(), "`pto.store` only works inside a `@kernel` body")
        span = here()
        _whole_tile("store", offset, mask, span)
        if not (isinstance(dst, Value) and dst.kind == "param"):
            raise user_error(span, "`pto.store` writes an `Out` or `InOut` parameter",
                             "write `pto.store(out, value)` with `out` a parameter of the kernel")
        _KSTACK[-1].events.append(("store", dst, src, span))

    def load(self, src: Any, offset: Any = (0, 0), mask: Any = None) -> Value:
        """`load(x)`: the parameter's value (`_whole_tile` for the prototype's keywords)."""
        _whole_tile("load", offset, mask, here())
        return _record("op", "load", (src,))

    def constant(self, value: Any, dtype: Any = DType.F32) -> Value:
        """The prototype's `constant(value, dtype=F32)`: f32 unless a dtype is given."""
        return _record("op", "constant", (value, dtype))

    def matmul(self, a: Any, b: Any, acc: Any = None) -> Value:
        """`matmul(a, b)` (f32), or `acc + a @ b` fused when `acc` is given."""
        if acc is None:
            return _record("op", "matmul", (a, b))
        return _record("op", "matmul", (a, b), (("acc", acc),))

    def broadcast(self, x: Any, rows: Any, cols: Any = None) -> Value:
        """`broadcast(x, M, N)`; the seeds' `broadcast(x, (M, N))` too."""
        if cols is None and isinstance(rows, (tuple, list)) and len(rows) == 2:
            rows, cols = rows
        return _record("op", "broadcast", (x, rows, cols))

    def alloc(self, shape: Any, dtype: Any = DType.F32, value: Any = 0) -> Value:
        """The seeds' `alloc(shape, dtype)`: a tile filled with `value` (`full`)."""
        rows, cols = shape
        return _record("op", "full", (rows, cols, value, dtype))

    def full(self, rows: Any, cols: Any, value: Any, dtype: Any = DType.F32) -> Value:
        return _record("op", "full", (rows, cols, value, dtype))

    # the prototype's PTO-ISA helpers (its kernel.py), on the language's primitives
    def iota_u32(self, cols: Any) -> Value:
        """`[1, cols]` u32 holding 0 .. cols-1: `cast(col_index(1, cols), u32)`."""
        _in_kernel("iota_u32")
        n = _count(cols, "pto.iota_u32", "cols", here())
        return _record("op", "cast", (_record("op", "col_index", (1, n), named=False), DType.U32))

    def tsort32(self, scores: Any, idx: Any) -> Value:
        """The prototype's TSORT32: each row of `scores` sorted descending, as (score, index)
        pairs, the index taken from `idx` at the score's column and stored as f32: `[M, 2N]`,
        `interleave(values, cast(gather(idx, order, axis = 1), f32))` of
        `let values, order = sort(scores, descending = true)` (ties keep column order)."""
        _in_kernel("tsort32")
        values, order = _record_pair("sort", (scores,), (("descending", True),), named=False)
        picked = _record("op", "gather", (idx, order), (("axis", 1),), named=False)
        as_f32 = _record("op", "cast", (picked, DType.F32), named=False)
        return _record("op", "interleave", (values, as_f32))

    def extract_topk_indices(self, pairs: Any, k: Any) -> Value:
        """The indices of the first `k` pairs of a `tsort32` result, as i32 `[M, k]`:
        `cast(slice_odd(pairs)[:, 0 : k], i32)` (k past the pairs is the checker's error)."""
        _in_kernel("extract_topk_indices")
        n = _count(k, "pto.extract_topk_indices", "k", here())
        odd = _record("op", "slice_odd", (pairs,), named=False)
        first = _record("slice", "", (odd,), (("cols", (0, n)),), named=False)
        return _record("op", "cast", (first, DType.I32))


def _whole_tile(op: str, offset: Any, mask: Any, span: A.Span) -> None:
    """The prototype's `offset=(0, 0)` and `mask=None` of `load` / `store`: a tile parameter is
    the whole view the call gives, so those defaults are the only values (a view of another
    part is taken at the call, `X[b, r:r + 16]`; a partial view is padded, `Pad(v)`)."""
    if mask is not None or not (isinstance(offset, (tuple, list)) and list(offset) == [0, 0]):
        given = f"mask={mask!r}" if mask is not None else f"offset={offset!r}"
        raise user_error(span, f"`pto.{op}` of a parameter takes its whole tile: `offset` "
                         f"(0, 0) and no `mask`, not `{given}`",
                         "take the part at the call (`k[b](x=X[b, r:r + 16, :])`); a partial "
                         "view is padded with `Pad(v)` on the parameter", cls=KernelError)


def _in_kernel(helper: str) -> None:
    if not _KSTACK:
        raise user_error(here(), f"`pto.{helper}` only works inside a `@kernel` body")


def _count(v: Any, what: str, param: str, span: A.Span) -> int:
    """A helper's extent: a positive Python integer (it is a tile's shape)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or int(v) <= 0:
        raise user_error(span, f"`{what}` takes a positive Python integer as `{param}`, not "
                         f"{v!r}", "the extent is part of the tile's shape, known when the "
                         "kernel is traced", cls=KernelError)
    return int(v)


pto = _PtoNamespace("pto")
tl = _PtoNamespace("tl")


# ---------------------------------------------------------------------------------------------
# Building the body


def _arg_node(v: Any, names: dict, span: A.Span) -> A.Expr:
    if isinstance(v, Value):
        # a parameter or a `let` is named at the expression using it (for carets)
        if v.kind == "param":
            return A.Name(v.name, span=span)
        if v.kind == "part":  # bound by its pair's `let a, b = ...`
            return A.Name(names[v].id, span=span)
        if v in names:
            return A.Name(names[v].id, span=span)
        return _inline(v, names)
    if isinstance(v, DType):
        return A.Name(v.value, span=span)
    if isinstance(v, tuple) and len(v) == 2 and all(isinstance(p, Value) and p.kind == "part"
                                                   for p in v):
        op = v[0].args[0].op
        raise user_error(span, f"`{op}` gives two tiles (values and indices), used here as one",
                         f"unpack them: `values, indices = pto.{op}(...)`", cls=KernelError)
    if isinstance(v, str):  # a data type spelled as text, or a Constexpr parameter by name
        return A.Name(v if v in DTYPES else wsp_ident(v), span=span)
    lit = literal(v, span)
    if lit is not None:
        return lit
    dt = dtype_name(v)
    if dt is not None:
        return A.Name(dt, span=span)
    raise user_error(span, f"a {type(v).__name__} cannot be used in a kernel body",
                     "use tile values, numbers and `DType`s")


def _inline(v: Value, names: dict) -> A.Expr:
    span = v.span
    if v.kind == "param":
        return A.Name(v.name, span=span)
    spans, kwspans = _operand_spans(span, len(v.args))
    if v.kind == "bin":
        a, b = (_arg_node(x, names, sp) for x, sp in zip(v.args, spans))
        return A.Binary(v.op, a, b, _op_span(v, span), span=span)
    if v.kind == "un":
        return A.Unary(v.op, _arg_node(v.args[0], names, spans[0]), span=span)
    if v.kind == "slice":  # `x[:, a : b]`, made by a helper (kwargs: (("cols", (a, b)),))
        a, b = dict(v.kwargs)["cols"]
        return A.Index(_arg_node(v.args[0], names, span),
                       (A.Slice(None, None, span=span),
                        A.Slice(A.IntLit(a, span=span), A.IntLit(b, span=span), span=span)),
                       span=span)
    return A.Call(A.Name(v.op, span=span), *_call_args(v, names), span=span)


def _call_args(v: Value, names: dict) -> tuple:
    """The positional and keyword argument nodes of the primitive call `v`."""
    span = v.span
    spans, kwspans = _operand_spans(span, len(v.args))
    args = tuple(_arg_node(x, names, sp) for x, sp in zip(v.args, spans))
    kwargs = tuple(A.Keyword(k, _arg_node(x, names, kwspans.get(k, span)), span=kwspans.get(k, span))
                   for k, x in v.kwargs)
    return args, kwargs


def _operand_spans(span: A.Span, n: int) -> tuple[list, dict]:
    """The spans of the operands of the Python expression at `span` (`a + b`, `-a`,
    `pto.f(a, b, acc=c)`), so carets can point at one operand; `span` where unknown."""
    node = expression_at(span)
    operands: list = []
    kw: dict = {}
    if isinstance(node, pyast.BinOp):
        operands = [node.left, node.right]
    elif isinstance(node, pyast.Compare) and len(node.ops) == 1:
        operands = [node.left, node.comparators[0]]
    elif isinstance(node, pyast.UnaryOp):
        operands = [node.operand]
    elif isinstance(node, pyast.Call):
        operands = list(node.args)
        kw = {k.arg: node_span(span.file, k.value) for k in node.keywords if k.arg}
    out = [node_span(span.file, o) for o in operands[:n]]
    return out + [span] * (n - len(out)), kw


def _op_span(v: Value, span: A.Span) -> A.Span:
    """The span of the operator token of `a OP b` (for carets under `+`)."""
    node = expression_at(span)
    if isinstance(node, pyast.BinOp):
        left, right = node.left, node.right
    elif isinstance(node, pyast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
    else:
        return span
    if left.end_lineno != right.lineno:
        return span
    line = linecache.getline(span.file, left.end_lineno)
    seg = line[left.end_col_offset:right.col_offset]
    stripped = seg.strip().strip("()").strip()
    if not stripped:
        return span
    col = left.end_col_offset + seg.index(stripped[0])
    return A.Span(span.file, left.end_lineno, col + 1, left.end_lineno, col + 1 + len(stripped))


def _uses(events: list) -> dict:
    uses: dict = {}

    def count(x: Any) -> None:
        if isinstance(x, Value):
            uses[x] = uses.get(x, 0) + 1

    for ev in events:
        if ev[0] == "value":
            for a in ev[1].args:
                count(a)
            for _, a in ev[1].kwargs:
                count(a)
        elif ev[0] == "store":
            count(ev[2])
    return uses


def _body(events: list, params: set[str]) -> tuple:
    uses = _uses(events)
    names: dict = {}
    taken = set(params) | set(PRIMITIVES) | set(KEYWORDS) | {"store", "slot", "tl", "pto"}
    counter = 0

    def fresh(hint: Optional[str]) -> str:
        nonlocal counter
        if hint:  # the Python variable; a taken name gets a suffix (`x` -> `x_1`)
            base = wsp_ident(hint)
            name, n = base, 1
            while name in taken:
                name, n = f"{base}_{n}", n + 1
        else:  # used twice but never named: `t0`, `t1`, ...
            name = f"t{counter}"
            while name in taken:
                counter += 1
                name = f"t{counter}"
        taken.add(name)
        return name

    stmts: list = []
    for ev in events:
        if ev[0] == "cycles":  # `add_cycles(n)`, n's AST made by its caller (ptoisa.py)
            stmts.append(A.CallStmt(A.Name("add_cycles", span=ev[2]), None, (ev[1],), (),
                                    span=ev[2]))
            continue
        if ev[0] == "store":
            _, target, value, span = ev
            (tspan, vspan), _ = _operand_spans(span, 2)
            stmts.append(A.Store(A.Name(target.name, span=tspan), _arg_node(value, names, vspan),
                                 span=span))
            continue
        if ev[0] == "parts":  # `let a, b = topk(...)`; `_` for a result never used nor named
            _, pair, parts = ev
            bound = []
            for p in parts:
                if uses.get(p, 0) or (p.hint and p.hint != "_"):
                    names[p] = A.Name(fresh(p.hint), span=p.span)
                bound.append(names.get(p, A.Name("_", span=p.span)))
            value = A.Call(A.Name(pair.op, span=pair.span), *_call_args(pair, names),
                           span=pair.span)
            stmts.append(A.LetMany(tuple(bound), value, span=pair.span))
            continue
        v = ev[1]
        if v.kind == "pair":
            continue  # bound at its "parts" event, which follows
        n = uses.get(v, 0)
        if v.hint is None and n == 1:
            continue  # written inline where it is used
        if v.hint is None and n == 0:
            stmts.append(A.ExprStmt(_inline(v, names), span=v.span))
            continue
        name = fresh(v.hint)
        value = _inline(v, names)
        names[v] = A.Name(name, span=v.span)
        stmts.append(A.Let(A.Name(name, span=v.span), value, span=v.span))
    return tuple(stmts)


# ---------------------------------------------------------------------------------------------
# Kernels


# kernels by name, for the tutorial's `task("name", ...)` (the latest definition of a name wins)
KERNELS: dict = {}



class KernelRef:
    """A decorated kernel. `k[b, h](x=X[b], ...)` inside a workload is one task; `k.trace()`
    shows its IR."""

    def __init__(self, fn, cpp_src: Optional[str] = None, cpp_includes=(),
                 cpp_body_path: Optional[str] = None, name: Optional[str] = None):
        self.fn = self.func = fn  # `func`: the prototype's name
        self.options: dict = {}
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.name = name or self.__name__
        self._wsp_name = wsp_ident(self.name)
        self._span = def_span(fn)
        self._cpp_src = cpp_src
        self._cpp_includes = tuple(cpp_includes or ())
        self._cpp_body_path = cpp_body_path
        self._body_file: Optional[str] = None
        if cpp_body_path is not None:
            # decision: the body file is read when the function is decorated (a path relative
            # to the current directory, as `open` takes it), so a missing file is reported at
            # the `def`, not at a later compile
            try:
                with open(cpp_body_path, encoding="utf-8") as fh:
                    self._cpp_src = fh.read()
                # a source of the module: the compiler's errors are reported at its lines
                self._body_file = os.path.abspath(cpp_body_path)
            except (OSError, UnicodeDecodeError) as err:
                reason = getattr(err, "strerror", None) or str(err)
                raise user_error(self._span, f"kernel `{self.name}`: cannot read its "
                                 f"`cpp_body_path` {cpp_body_path!r}: {reason}",
                                 "give the path of a UTF-8 file holding the C++ body",
                                 cls=KernelError) from None
        frame = user_frame()
        self._locals = dict(frame.f_locals) if frame is not None else {}
        self._decl: Optional[A.KernelDecl] = None
        self._params: Optional[list] = None  # [(python name, wsp name, KernelParam)]
        KERNELS[self.name] = self

    # -- signature
    def _annotation(self, pname: str, ann: Any, span: A.Span) -> Any:
        if isinstance(ann, str):
            env = dict(self.fn.__globals__)
            code = self.fn.__code__
            for n, cell in zip(code.co_freevars, self.fn.__closure__ or ()):
                try:
                    env[n] = cell.cell_contents
                except ValueError:
                    pass
            env.update(self._locals)
            try:
                return eval(ann, env)  # noqa: S307 - the user's own annotation text
            except Exception as err:  # noqa: BLE001
                raise user_error(span, f"cannot evaluate the annotation of `{pname}`: {err}",
                                 cls=KernelError) from None
        return ann

    def _param_type(self, pname: str, ann: Any, span: A.Span, pmap: dict) -> A.Node:
        if ann is inspect.Parameter.empty:
            raise user_error(span, f"parameter `{pname}` needs a type annotation",
                             "annotate it: `x: In[Tile[16, 128, DType.F32]]`, `eps: Scalar[DType.F32]`",
                             cls=KernelError)
        if isinstance(ann, ParamSpec):
            tile = ann.inner
            if not isinstance(tile, TileSpec):
                what = getattr(tile, "__name__", repr(tile))
                raise user_error(span, f"`{ann.mode}[{what}]` does not give the tile's shape and "
                                 "data type, which wspc needs to check and compile the kernel",
                                 f"write `{ann.mode}[Tile[M, N, DType.F32]]` with the tile's "
                                 "rows and columns", cls=KernelError)
            if ann.extra:
                raise user_error(span, f"`{ann!r}`: after the tile, a tile parameter takes only "
                                 "its pad", "write `In[Tile[16, 128, DType.F32], Pad(-math.inf)]`",
                                 cls=KernelError)
            return A.TileParamType(ann.mode, A.TileType(self._dim(tile.rows, span, pmap),
                                                        self._dim(tile.cols, span, pmap),
                                                        self._dtype(tile.dtype, span), span=span),
                                   self._pad(ann.pad, span), span=span)
        if isinstance(ann, ScalarSpec):
            return A.ScalarParamType(self._dtype(ann.dtype, span), span=span)
        if isinstance(ann, ConstexprSpec) or ann is Constexpr:
            dt = "i32" if ann is Constexpr else self._dtype(ann.dtype, span)
            return A.ConstexprParamType(dt, span=span)
        if isinstance(ann, TileSpec):
            raise user_error(span, f"tile parameter `{pname}` needs a mode",
                             "write `In[Tile[...]]`, `Out[Tile[...]]` or `InOut[Tile[...]]`",
                             cls=KernelError)
        raise user_error(span, f"`{getattr(ann, '__name__', ann)!s}` is not a kernel parameter type",
                         "parameter types are `In[Tile[M, N, DT]]`, `Out[...]`, `InOut[...]`, "
                         "`Scalar[DT]` and `Constexpr[int]`", cls=KernelError)

    def _pad(self, pad: Any, span: A.Span) -> Optional[A.Expr]:
        """`Pad(v)` as the `.wsp` option's literal: a negative number is `-` of one, as the
        parser reads `pad = -inf` (the checker then rules on its kind and mode)."""
        if pad is None:
            return None
        v = pad.value
        # NumPy's numbers are numbers.Real; bools (Python's and NumPy's) are never negative
        neg = (isinstance(v, numbers.Real) and not isinstance(v, bool)
               and (v < 0 or (v == 0 and math.copysign(1.0, float(v)) < 0)))
        lit = literal(-v if neg else v, span)
        if lit is None:
            raise user_error(span, f"a pad is a number or a bool, not {v!r}",
                             "write `Pad(0)`, `Pad(-math.inf)` or `Pad(True)`", cls=KernelError)
        return A.Unary("-", lit, span=span) if neg else lit

    def _dim(self, d: Any, span: A.Span, pmap: dict) -> A.Expr:
        if isinstance(d, bool):
            raise user_error(span, f"a tile dimension must be an integer, not {d!r}", cls=KernelError)
        if isinstance(d, str):
            return A.Name(pmap.get(d, wsp_ident(d)), span=span)
        try:
            return A.IntLit(int(operator.index(d)), span=span)  # ints and NumPy integers
        except TypeError:
            pass
        raise user_error(span, f"a tile dimension must be an integer or the name of a "
                         f"`Constexpr` parameter, not {d!r}", cls=KernelError)

    def _dtype(self, dt: Any, span: A.Span) -> str:
        name = dtype_name(dt)
        if name is None:
            raise user_error(span, f"unknown data type {dt!r}", "use a `DType` such as `DType.F32`",
                             cls=KernelError)
        return name

    def params(self) -> list:
        """[(python name, wsp name, KernelParam)] in order, read from the annotations once
        (the body is not traced for them)."""
        if self._params is None:
            self._params = self._read_params()
        return self._params

    @property
    def symbol(self) -> str:
        """The kernel's name in the module: its `.wsp` name, which traces, `Task.kernel` and
        the generated code's function names (`wsp_k_<symbol>` in cpu_sim's C) derive from."""
        return self._wsp_name

    @property
    def signature(self) -> KernelSignature:
        """The parameters: names, kinds (In, Out, InOut, Scalar, Constexpr), tile shapes,
        dtypes, defaults and pads (`signature.KernelSignature`; `str()` is the declaration)."""
        return signature_of(self._wsp_name, self.params())

    # -- the declaration
    def _read_params(self) -> list:
        sig = inspect.signature(self.fn)
        spans = param_spans(self.fn)
        pmap = {p: wsp_ident(p) for p in sig.parameters}
        triples = []
        for pname, p in sig.parameters.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise user_error(spans.get(pname, (self._span,) * 3)[0],
                                 "kernels take named parameters only (no `*args` / `**kwargs`)",
                                 cls=KernelError)
            whole, nspan, aspan = spans.get(pname, (self._span, self._span, None))
            ann = self._annotation(pname, p.annotation, aspan or whole)
            ptype = self._param_type(pname, ann, aspan or whole, pmap)
            default = None
            if p.default is not inspect.Parameter.empty:
                default = literal(p.default, whole)
                if default is None:
                    raise user_error(whole, f"the default of `{pname}` must be a number",
                                     cls=KernelError)
            kp = A.KernelParam(A.Name(pmap[pname], span=nspan), ptype, default, span=whole)
            triples.append((pname, pmap[pname], kp))
        return triples

    def decl(self) -> A.KernelDecl:
        if self._decl is not None:
            return self._decl
        triples = self.params()
        params = [kp for _, _, kp in triples]
        if self._cpp_src is not None:
            body, externs = None, (self._cpp_body(),)
        else:
            body, externs = self._trace_body(triples), ()
        self._decl = A.KernelDecl(A.Name(self._wsp_name, span=self._span), tuple(params), body,
                                  externs, span=self._span)
        return self._decl

    def _cpp_body(self) -> A.ExternBody:
        """The `extern cpp` body: `cpp_includes` as its `include "h"` headers (`<h>` and `"h"`
        spellings are the same header: each is found on the include path, then the system's)."""
        code = self._cpp_src or ""
        if '"""' in code:
            raise user_error(self._span, 'an extern body cannot contain `"""`', cls=KernelError)
        includes = tuple(A.ExternInclude("include", str(inc).strip().strip('<>"'), span=self._span)
                         for inc in self._cpp_includes)
        span = self._span
        if self._body_file is not None:
            last = code.split("\n")
            span = A.Span(self._body_file, 1, 1, len(last), len(last[-1]) + 1)
        return A.ExternBody("cpp", code, includes, span=span)

    def _trace_body(self, triples: list) -> tuple:
        kt = _KernelTrace(self)
        proxies = self._proxies(triples)
        sig = inspect.signature(self.fn)
        args, kwargs = [], {}
        for pname, p in sig.parameters.items():
            if p.kind == p.KEYWORD_ONLY:
                kwargs[pname] = proxies[pname]
            else:
                args.append(proxies[pname])
        _KSTACK.append(kt)
        try:
            self.fn(*args, **kwargs)
        finally:
            _KSTACK.pop()
        if not kt.events:
            raise user_error(self._span, f"kernel `{self.name}` has an empty body: no "
                             f"{self._traced_ops} was traced", self._empty_help, cls=KernelError)
        return _body(kt.events, {w for _, w, _ in triples})

    # what the body is written with (`@ptoisa_kernel`, ptoisa.py, has its own)
    _traced_ops = "`pto.*` operation or `pto.store`"
    _empty_help = "write the body with `pto.*` calls, or give a C body with `@kernel(cpp_src=...)`"

    def _proxies(self, triples: list) -> dict:
        """What the body's function is called with: a parameter `Value` per parameter."""
        return {pname: Value("param", span=kp.name.span, name=wname)
                for pname, wname, kp in triples}

    # -- use in workloads
    def __getitem__(self, coords: Any) -> "BoundKernel":
        coords = coords if isinstance(coords, tuple) else (coords,)
        return BoundKernel(self, coords)

    def at(self, **axes: Any) -> "BoundKernel":
        return BoundKernel(self, tuple(axes.values()))

    def __call__(self, *args: Any, **kwargs: Any):
        """One task without coordinates (inside a workload, or a builder-style fragment)."""
        if _KSTACK:
            raise user_error(here(), f"kernel `{self.name}` is called inside a kernel body",
                             "kernels cannot call kernels; call it from a `@workload`",
                             cls=KernelError)
        return BoundKernel(self, None)(*args, **kwargs)

    # -- inspection
    def trace(self, **constexprs: Any) -> "KernelIR":
        """The kernel's IR (ops in dependency order); Constexpr parameters need values."""
        return kernel_ir(self, constexprs)

    @property
    def ir(self) -> "KernelIR":
        return self.trace()

    def compile(self, target: str = "cpu_sim", **constexprs: Any) -> CompiledKernel:
        """The kernel's generated source for `target` (`CompiledKernel.code`), exactly as a
        workload compiled for that target generates it; Constexpr values as keywords
        (`k.compile(target="cpu_sim", R=64)`)."""
        return compile_kernel(self, target, constexprs)

    def lower(self, *args, **kwargs):
        return self.trace()

    def __repr__(self) -> str:
        return f"<kernel {self.name}>"


class BoundKernel:
    """`k[b, h]`: a kernel with its task coordinates, called with its arguments."""

    def __init__(self, kernel: KernelRef, coords: Optional[tuple]):
        self.kernel, self.coords = kernel, coords

    def __call__(self, *args: Any, **kwargs: Any):
        span = here()
        after = take_after([p for p, _, _ in self.kernel.params()], kwargs)
        with tracing() as t:
            stmt = make_call(t, self.kernel, self.coords, args, kwargs, span, keyword_spans(span),
                             after)
            frag = t.emit(stmt)
            frag.hint = stored_name(user_frame())
            return frag


def kernel(fn=None, *, cpp_src: Optional[str] = None, cpp_includes=(), cpp_body_path=None,
           name: Optional[str] = None, num_warps: int = 4, num_stages: int = 2,
           cpp_tu_path: Optional[str] = None, **options: Any):
    """`@kernel` (body traced through `pto.*`) or `@kernel(cpp_src=...)` (an `extern cpp` body).
    The prototype's tuning options (`num_warps`, `num_stages`, any other keyword) are kept in
    `k.options` as the prototype keeps them (neither generates code from them); its
    `cpp_tu_path` (a translation unit in its task ABI) is a `KernelError` at the decorator."""
    if cpp_tu_path is not None:
        raise user_error(here(), "`cpp_tu_path` is not supported: it is a whole C++ file in the "
                         "prototype's task ABI (`KernelTaskDesc`), while wspc's C++ kernel is a "
                         "body over the parameters by name",
                         "give the body as `cpp_src=` or `cpp_body_path=` (docs/python.md)",
                         cls=KernelError)
    opts = {"num_warps": num_warps, "num_stages": num_stages, **options}

    def make(f):
        k = KernelRef(f, cpp_src, cpp_includes, cpp_body_path, name)
        k.options = opts
        return k

    return make if fn is None else make(fn)


jit_kernel = kernel


# ---------------------------------------------------------------------------------------------
# `kernel.trace()`


class KernelIR:
    """A kernel's IR: `ops` (printable, in dependency order), `dump()` the whole kernel."""

    def __init__(self, k):
        from ..ir.printer import kernel_lines, op_line

        self.kernel = k
        self.ops = [_Op(op, op_line(i, op)) for i, op in enumerate(k.ops)]
        self._text = "\n".join(kernel_lines(k))

    def dump(self) -> str:
        return self._text

    def __str__(self) -> str:
        return self._text


class _Op:
    """One IR op (its fields: `op`, `args`, `shape`, `dtype`); `str()` is its IR line."""

    def __init__(self, op, text: str):
        self._op, self.text = op, text.strip()

    def __getattr__(self, name):
        return getattr(self._op, name)

    def __repr__(self) -> str:
        return self.text


def kernel_ir(k: KernelRef, constexprs: dict) -> KernelIR:
    module = _kernel_module(k, constexprs, "trace", here())
    try:
        ir = module.ir
    except WspError as err:
        raise from_wsp(err) from None
    return KernelIR(ir.kernels[0])


def compile_kernel(k: KernelRef, target: str, constexprs: dict) -> CompiledKernel:
    """`k.compile(target=..., **constexprs)`: the kernel alone in a module, specialised to the
    Constexpr values, through the driver to the target's kernel source."""
    import dataclasses

    from .. import driver
    from ..backends.target import TargetError

    span = here()
    module = _kernel_module(k, constexprs, "compile", span)
    try:
        ir = module.ir
        kir = ir.kernels[0]
        # a specialisation's source is the kernel's own name, as lowering gives it for a task
        ir = dataclasses.replace(ir, kernels=(dataclasses.replace(kir, source=k.symbol),))
        code = driver.kernel_code(ir, driver.target(target), kir.name)
    except WspError as err:
        raise from_wsp(err) from None
    except TargetError as err:
        raise user_error(span, str(err), "targets are `cpu_sim`, `ref` and `ascend_npu`") from None
    if code is None:
        raise user_error(span, f"target `{target}` generates no kernel source: it interprets the "
                         "kernel's IR (`k.trace()` shows it)",
                         "compile for `cpu_sim` (C) or `ascend_npu` (Ascend C)", cls=KernelError)
    values = {p: constexprs.get(p, _default(kp)) for p, _, kp in k.params()
              if isinstance(kp.type, A.ConstexprParamType)}
    return CompiledKernel(kir.name, target, code.code, code.entry, values)


def _default(kp: A.KernelParam) -> Any:
    return getattr(kp.default, "value", None)


def _kernel_module(k: KernelRef, constexprs: dict, verb: str, span: A.Span):
    """A checked module holding only `k`, its Constexpr parameters replaced by `constexprs`
    (or their defaults) and the kernel named as a workload's task would specialise it."""
    from ..api import Module
    from ..driver import check_sources
    from ..lower.kernels import specialised_name

    decl = k.decl()
    cparams = {w: (p, kp) for p, w, kp in k.params() if isinstance(kp.type, A.ConstexprParamType)}
    pmap = {p: w for p, w, _ in k.params()}
    values: dict = {}
    for n, v in constexprs.items():
        w = pmap.get(n)
        if w not in cparams:
            known = ", ".join(f"`{p}`" for p, _ in cparams.values()) or "none"
            raise user_error(span, f"kernel `{k.name}` has no Constexpr parameter `{n}` (its "
                             f"Constexpr parameters: {known})", cls=KernelError)
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise user_error(span, f"Constexpr `{n}` of kernel `{k.name}` takes an integer, "
                             f"not {v!r}", cls=KernelError)
        values[w] = int(v)
    for w, (_, kp) in cparams.items():
        if w not in values and isinstance(kp.default, A.IntLit):
            values[w] = kp.default.value
    missing = [p for w, (p, _) in cparams.items() if w not in values]
    if missing:
        raise user_error(span, f"kernel `{k.name}` needs the value of its Constexpr "
                         f"parameter{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(f'`{m}`' for m in missing)}",
                         f"write `{k.name}.{verb}({', '.join(f'{m}=...' for m in missing)})`",
                         cls=KernelError)
    if cparams:
        name = specialised_name(decl.name.id, values)
        decl = A.KernelDecl(A.Name(name, span=decl.name.span),
                            tuple(p for p in decl.params if p.name.id not in cparams),
                            decl.body, decl.externs, span=decl.span)
        decl = substitute(decl, {n: A.IntLit(v, span=decl.span) for n, v in values.items()})
    sf = A.SourceFile(k.fn.__code__.co_filename, (decl,), span=decl.span)
    sources = {}
    text = source_text(sf.path)
    if text is not None:
        sources[sf.path] = text
    try:
        return Module(check_sources([sf], sources))
    except WspError as err:
        raise from_wsp(err) from None


__all__ = ["kernel", "jit_kernel", "pto", "tl", "KernelRef", "BoundKernel", "Value", "KernelIR",
           "KERNELS", "CompiledKernel", "KernelSignature"]
