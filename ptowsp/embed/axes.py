"""The axes of the Python embedding (language.md section 5): `Dense[N]`, `DenseDyn(n)`,
`Ragged(outer, lengths)` and `Sparse(outer, indptr, indices)`, `ragged[b]` as an inner axis,
and the axis arguments of `P(...)`. Index data given as lists becomes index tensors
(`values.Tensor`) of the program.
"""

from __future__ import annotations

from typing import Any, Optional

from ..diagnostics import InternalError
from ..frontend import ast as A
from .errors import CompileError, user_error
from .source import here, stored_name, user_frame
from .trace import Trace
from .values import DType, LoopVar, ScalarExpr, Symbol, Tensor, as_scalar


class Axis:
    """An iteration space (language.md section 5), declared at module level when used."""

    _kind = "axis"
    _default_name = "axis"

    def _init(self, name: Optional[str], depth: int = 3) -> None:
        self._span = here(depth)
        self._wsp_name = name or stored_name(user_frame())

    @property
    def _base_name(self) -> str:
        return self._wsp_name or self._default_name

    def decl(self, t: Trace) -> A.Node:  # pragma: no cover - subclasses
        raise InternalError("embed", f"axis kind {type(self).__name__} has no declaration")

    def __getitem__(self, b: Any) -> "AxisIndex":
        return AxisIndex(self, b, here())


class AxisIndex:
    """`ragged[b]` / `sparse[b]`: the inner axis at outer index `b`."""

    def __init__(self, axis: Axis, b: Any, span: A.Span):
        self.axis, self.index, self.span = axis, as_scalar(b, span), span


class _DenseMeta(type):
    def __getitem__(cls, n: Any) -> "Dense":
        d = cls(n, _depth=4)
        return d


class Dense(Axis, metaclass=_DenseMeta):
    """A static extent: `Dense[8]` (also `Dense[8]()` and `Dense(8)`)."""

    _kind = "Dense"
    _default_name = "dense"

    def __init__(self, size: Any, name: Optional[str] = None, _depth: int = 3):
        if isinstance(size, bool) or not isinstance(size, int):
            import numpy as np

            if not isinstance(size, np.integer):
                raise user_error(here(), f"`Dense` takes a Python integer, not {size!r}",
                                 "use `DenseDyn(n)` for an extent known at run time")
        if int(size) < 0:
            raise user_error(here(), f"axis extent is negative ({int(size)})")
        self.size = int(size)
        self._init(name, _depth)

    def __call__(self) -> "Dense":
        name = stored_name(user_frame())
        if name:
            self._wsp_name = name
        return self

    def decl(self, t: Trace) -> A.Node:
        return A.DenseAxis(A.IntLit(self.size, span=self._span), span=self._span)

    def __repr__(self) -> str:
        return f"Dense[{self.size}]"


class DenseDyn(Axis):
    """An extent known at run time: `DenseDyn(n)` for a Python integer or a run-time
    expression of symbols (`DenseDyn(symbol_u64("B"))`)."""

    _kind = "DenseDyn"

    def __init__(self, size: Any, name: Optional[str] = None):
        self._init(name)
        self._extent = as_scalar(size, self._span)
        self.size = size if isinstance(size, int) else None

    def decl(self, t: Trace) -> A.Node:
        t.adopt(self._extent.objs)
        return A.DenseDynAxis(self._extent.node, span=self._span)

    def __repr__(self) -> str:
        return f"DenseDyn({self._extent})"


def _index_tensor(values: Any, name: str, span: A.Span) -> Tensor:
    import numpy as np

    if isinstance(values, Tensor):
        return values
    arr = np.asarray(values)
    if arr.dtype.kind not in "iu" and arr.size:
        raise user_error(span, f"`{name}` must hold integers, found {arr.dtype}")
    t = Tensor.__new__(Tensor)
    t.data = np.ascontiguousarray(arr, dtype=np.int32).reshape(-1)
    t.dtype = DType.I32
    t.location = "global"
    t._span = span
    t._wsp_name = name
    return t


def _index_data(v: Any) -> bool:
    """A list, tuple, array or Tensor of integers: the tutorial's one-argument
    `Ragged(offsets)`, as opposed to an outer axis or extent."""
    import numpy as np

    if isinstance(v, Tensor):
        return not v.scratch and v.dtype.value in ("i32", "i64", "u32", "u8", "i8", "i16", "u16",
                                                   "u64")
    if isinstance(v, (list, tuple)):
        return all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in v)
    return isinstance(v, np.ndarray) and v.dtype.kind in "iu"


def _offsets(values: Any, owner: str, span: A.Span) -> Any:
    """The row offsets of `Ragged(offsets)` as int64 data: at least one, non-decreasing."""
    import numpy as np

    arr = np.asarray(values.data if isinstance(values, Tensor) else values, dtype=np.int64)
    arr = arr.reshape(-1)
    if arr.size == 0:
        raise user_error(span, f"`{owner}`: `Ragged(offsets)` needs at least one offset",
                         "row b is offsets[b] .. offsets[b + 1] - 1: n rows take n + 1 offsets")
    bad = np.flatnonzero(np.diff(arr) < 0)
    if bad.size:
        i = int(bad[0])
        raise user_error(span, f"`{owner}`: the offsets must not decrease, but offsets[{i}] = "
                         f"{int(arr[i])} and offsets[{i + 1}] = {int(arr[i + 1])}",
                         "row b is offsets[b] .. offsets[b + 1] - 1")
    return arr


def _outer_axis(outer: Any, owner: str, span: A.Span) -> Axis:
    if isinstance(outer, Axis):
        return outer
    if isinstance(outer, int) or isinstance(outer, ScalarExpr) or isinstance(outer, Symbol):
        ax = DenseDyn.__new__(DenseDyn)
        ax._span, ax._wsp_name = span, f"{owner}_outer"
        ax._extent = as_scalar(outer, span)
        ax.size = outer if isinstance(outer, int) else None
        return ax
    raise user_error(span, f"the outer index space must be an axis or an integer, not {outer!r}")


class Ragged(Axis):
    """Per outer index `i`, an inner extent `lengths[i]`: `Ragged(batch, lengths)` where
    `lengths` is an i32 `Tensor`, a list, or a function of the outer index
    (`lambda b: ceildiv(seq_lens[b], 64)`). `Ragged(offsets)` (the tutorial's form) is the same
    with `len(offsets) - 1` outer indices and lengths `offsets[b + 1] - offsets[b]`, read when
    the axis is made; its outer axis is `ragged.outer`."""

    _kind = "Ragged"
    _default_name = "ragged"

    def __init__(self, outer_size: Any, lengths: Any = None, name: Optional[str] = None):
        self._init(name)
        if lengths is None and _index_data(outer_size):
            # the tutorial's `Ragged(offsets)`: row b spans offsets[b] .. offsets[b + 1] - 1
            offsets = _offsets(outer_size, self._base_name, self._span)
            outer_size, lengths = len(offsets) - 1, offsets[1:] - offsets[:-1]
        if lengths is None:
            raise user_error(self._span, "`Ragged` takes the outer axis and the lengths",
                             "write `Ragged(batch, lengths)`")
        self.outer = _outer_axis(outer_size, self._base_name, self._span)
        self._lengths_fn = None
        self.lengths_tensor = None
        if callable(lengths) and not isinstance(lengths, Tensor):
            self._lengths_fn = lengths
        else:
            self.lengths_tensor = _index_tensor(lengths, f"{self._base_name}_lengths", self._span)
        self.outer_size = getattr(self.outer, "size", None)

    def length(self, idx: int) -> int:
        """The inner extent at outer index `idx` (lengths given as data only)."""
        return int(self._lengths_data("length").data[idx])

    def total(self) -> int:
        """The sum of the inner extents (lengths given as data only)."""
        return int(self._lengths_data("total").data.sum())

    def _lengths_data(self, what: str) -> Tensor:
        if self.lengths_tensor is None:
            raise user_error(here(), f"`{what}()` needs the lengths as data, but this axis's "
                             "lengths are a run-time expression, known only when it runs")
        return self.lengths_tensor

    @property
    def lengths(self) -> list:
        return [] if self.lengths_tensor is None else self.lengths_tensor.data.tolist()

    def decl(self, t: Trace) -> A.Node:
        outer = t.ref(self.outer, self._span)
        if self.lengths_tensor is not None:
            lengths: A.Expr = t.ref(self.lengths_tensor, self._span)
        else:
            v = self._lengths_fn(LoopVar("_", "outer", self._span))
            e = as_scalar(v, self._span)
            t.adopt(e.objs)
            lengths = e.node
        return A.RaggedAxis(outer, lengths, span=self._span)


class Sparse(Axis):
    """CSR selection: for outer index `i`, the coordinates `indices[indptr[i]:indptr[i+1]]`:
    `Sparse(outer, indptr, indices)` with i32 `Tensor`s or lists. `Sparse(indices)` (the
    tutorial's form) is one selection: the coordinates `indices` at the one outer index 0,
    iterated unindexed (`flat_selection`)."""

    _kind = "Sparse"
    _default_name = "sparse"

    def __init__(self, outer_size: Any, indptr: Any = None, indices: Any = None,
                 name: Optional[str] = None):
        self._init(name)
        self.flat = indptr is None and indices is None and _index_data(outer_size)
        if self.flat:
            # the tutorial's `Sparse(indices)`: one selection, the CSR form with one outer
            # index (indptr [0, n]); `P(s)`, `P.sel(s)` and `select(s, fn)` iterate `s[0]`
            indices = _index_tensor(outer_size, f"{self._base_name}_indices", self._span)
            outer_size, indptr = 1, [0, int(indices.data.size)]
        if indptr is None or indices is None:
            raise user_error(self._span, "`Sparse` takes the outer axis, `indptr` and `indices`",
                             "write `Sparse(batch, indptr, indices)` (CSR)")
        self.outer = _outer_axis(outer_size, self._base_name, self._span)
        self.indptr_tensor = _index_tensor(indptr, f"{self._base_name}_indptr", self._span)
        self.indices_tensor = _index_tensor(indices, f"{self._base_name}_indices", self._span)
        self.outer_size = getattr(self.outer, "size", None)

    @property
    def indptr(self) -> list:
        return self.indptr_tensor.data.tolist()

    @property
    def indices(self) -> list:
        return self.indices_tensor.data.tolist()

    def nnz(self) -> int:
        return int(self.indptr_tensor.data[-1])

    def row_nnz(self, row: int) -> int:
        p = self.indptr_tensor.data
        return int(p[row + 1] - p[row])

    def decl(self, t: Trace) -> A.Node:
        return A.SparseAxis(t.ref(self.outer, self._span), t.ref(self.indptr_tensor, self._span),
                            t.ref(self.indices_tensor, self._span), span=self._span)


def flat_selection(a: Any, span: A.Span) -> tuple:
    """`Sparse(indices)` given where a selection is iterated (`P(s)`, `P.sel(s)`,
    `select(s, fn)`): `(s[row], row)`, its one row at a loop variable `row` over its outer
    axis (the language indexes a sparse axis by such a variable only; the caller wraps the
    selection in `for row in P(s.outer)`, one iteration); anything else is `(a, None)`."""
    if isinstance(a, Sparse) and a.flat:
        row = f"{a._base_name}_row"
        return AxisIndex(a, LoopVar(row, "loop", span), span), row
    return a, None


def wrap_row(t: Trace, a: AxisIndex, row: str, body: list, span: A.Span) -> Any:
    """Emit `for row in P(s.outer) { body }`: the one row of a `Sparse(indices)`."""
    return t.emit(A.ForLoop((A.Name(row, span=span),), "grid", (t.ref(a.axis.outer, span),),
                     tuple(body), "P", span=span))


def axis_expr(a: Any, t: Trace, span: A.Span) -> A.Expr:
    """An axis argument of `P(...)`: an axis object, `ragged[b]`, or an integer extent."""
    if isinstance(a, Sparse) and a.flat:
        raise user_error(span, "`Sparse(indices)` is iterated alone, as a selection",
                         "write `for e in P(s):` or `for e in P.sel(s):` (or `select(s, fn)`)")
    if isinstance(a, Axis):
        return t.ref(a, span)
    if isinstance(a, AxisIndex):
        t.adopt(a.index.objs)
        return A.Index(t.ref(a.axis, a.span), (a.index.node,), span=a.span)
    if isinstance(a, type) and issubclass(a, Axis):
        raise user_error(span, f"`{a.__name__}` needs its extent", "write `Dense[8]`")
    try:
        e = as_scalar(a, span)
    except CompileError:
        raise user_error(span, f"`{a!r}` is not an axis",
                         "iterate over `Dense[N]`, `DenseDyn(n)`, `ragged[b]`, `sparse[b]` or an "
                         "integer") from None
    t.adopt(e.objs)
    return e.node
