"""Tensor layouts of the seeds' Python API (docs/python.md, "Meshes, layouts and collectives").

`TensorLayout` is the `.wsp` layout `@ [R, S(tp)] partial(tp)` (docs/distributed.md): one
`TensorReplicate()` (`R`) or `TensorShard(mesh_axis)` (`S(axis)`) per dimension, and the mesh
axes over which the tensor holds partial sums. A mesh axis is named here as the user wrote it:
an integer (the position of the axis in `spatial_map(grid=...)`) or a name (`"tp"`, a key of
`grid={...}`); assembly resolves both against the workload's mesh. `tensor_layout_join` is the
seeds' join (after Dato): `R ⊔ S(i) = S(i)`, `S(i) ⊔ S(j)` (i ≠ j) an error, and
`check_layouts_compatible` the prototype's check of several tensors with it. `MemLayout` is the
memory facet: how a tensor's elements lie in its storage (strides, dimension order). Kernels see
logical tiles whatever it is: wspc converts at the boundary (the caller's array, in that order,
is read into the program's row-major storage and the results are written back into it), so a
`MemLayout` decides the array behind `tensor.data` (`strides_for`; docs/python.md).
"""

from __future__ import annotations

import operator
from typing import Any, Optional

from .errors import TypeCheckError, user_error
from .source import here


class LayoutIncompatibleError(TypeCheckError):
    """Two layouts that cannot be joined (`S(i) ⊔ S(j)`, different ranks, different partial
    axes): raised by `tensor_layout_join` at the caller's line."""


def _axis_ref(axis: Any, span, what: str) -> Any:
    """A mesh axis as written: a non-negative Python integer (its position) or a name."""
    if isinstance(axis, bool) or not isinstance(axis, (int, str)) or (
            isinstance(axis, int) and axis < 0) or (isinstance(axis, str) and not axis):
        raise user_error(span, f"{what} names a mesh axis by its position (0, 1, ...) or its "
                         f"name, not {axis!r}", "write e.g. `mesh_axis=0` or `mesh_axis=\"tp\"`",
                         cls=TypeCheckError)
    return axis


class DistElem:
    """One dimension's distribution: `TensorReplicate()` or `TensorShard(mesh_axis)`."""

    axis: Any = None


class TensorReplicate(DistElem):
    """`R`: every device holds the whole dimension."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorReplicate)

    def __hash__(self) -> int:
        return hash("R")

    def __repr__(self) -> str:
        return "R"


class TensorShard(DistElem):
    """`S(mesh_axis)`: the dimension cut into even blocks over the mesh axis."""

    def __init__(self, mesh_axis: Any = 0):
        self.mesh_axis = _axis_ref(mesh_axis, here(), "`TensorShard`")

    @property
    def axis(self) -> Any:  # type: ignore[override]
        return self.mesh_axis

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorShard) and self.mesh_axis == other.mesh_axis

    def __hash__(self) -> int:
        return hash(("S", self.mesh_axis))

    def __repr__(self) -> str:
        return f"S({self.mesh_axis!r})" if isinstance(self.mesh_axis, str) else \
            f"S({self.mesh_axis})"


Shard = TensorShard
Replicate = TensorReplicate


class MemLayout:
    """The memory facet of a layout: the storage order of a tensor's elements. `strides` are
    each dimension's step in elements (positive, no two elements in one place: row padding is
    allowed, overlap is not); `order` the dimensions from the outermost (slowest) to the
    innermost (contiguous), the prototype's convention (`row_major` is `order=(0, 1, ...)`).
    Either alone, or both when they agree; neither is row-major. `swizzle` and `pack` are
    accepted as the prototype has them and must be None (they name no storage the seeds
    define). `strides_for(shape)` checks it against a tensor's shape."""

    def __init__(self, strides: Optional[tuple] = None, order: Optional[tuple] = None,
                 swizzle: Any = None, pack: Any = None):
        self.strides = None if strides is None else tuple(int(s) for s in strides)
        self.order = None if order is None else tuple(int(o) for o in order)
        self.swizzle, self.pack = swizzle, pack

    @staticmethod
    def row_major(shape: tuple) -> "MemLayout":
        """C order: the last dimension contiguous."""
        strides, step = [], 1
        for d in reversed(tuple(int(x) for x in shape)):
            strides.insert(0, step)
            step *= d
        return MemLayout(tuple(strides), tuple(range(len(shape))))

    @staticmethod
    def col_major(shape: tuple) -> "MemLayout":
        """Fortran order: the first dimension contiguous (a Fortran-ordered array)."""
        strides, step = [], 1
        for d in tuple(int(x) for x in shape):
            strides.append(step)
            step *= d
        return MemLayout(tuple(strides), tuple(reversed(range(len(shape)))))

    def permute(self, perm: tuple) -> "MemLayout":
        """The prototype's `permute`: the layout of the tensor whose dimension k is this one's
        dimension `perm[k]`, stored in the same places. Its strides are permuted as the
        prototype's are; its `order` (which the prototype keeps unchanged, then contradicting
        the strides) is renumbered to the new dimensions. Neither given: row-major either way,
        so itself."""
        span = here()
        rank = len(self.strides) if self.strides is not None else \
            len(self.order) if self.order is not None else None
        given = perm
        try:
            perm = tuple(operator.index(p) for p in perm)
        except TypeError:
            perm = None
        if perm is None or (rank is not None and sorted(perm) != list(range(rank))) or \
                sorted(perm) != list(range(len(perm))):
            raise user_error(span, f"`permute` takes an order of the layout's dimensions "
                             f"(0 to {'n' if rank is None else rank} - 1, each once), not "
                             f"{given!r}",
                             "write e.g. `layout.permute((1, 0))`", cls=TypeCheckError)
        strides = None if self.strides is None else tuple(self.strides[p] for p in perm)
        order = None if self.order is None else tuple(perm.index(o) for o in self.order)
        return MemLayout(strides, order, self.swizzle, self.pack)

    def strides_for(self, shape: tuple, span=None) -> tuple:
        """The element strides of a tensor of `shape` stored so, a `TypeCheckError` at `span`
        when this layout cannot hold it (another rank, a stride below 1, elements that would
        share a place, an order that is not a permutation or disagrees with the strides, a
        swizzle or a packing)."""
        span = span or here()
        shape = tuple(int(n) for n in shape)
        rank = len(shape)

        def bad(why: str, fix: str = "give `MemLayout(strides=...)` or `order=`, e.g. "
                "`MemLayout.col_major(shape)`") -> Exception:
            return user_error(span, f"{self!r} cannot store a tensor of shape {shape}: {why}",
                              fix, cls=TypeCheckError)

        if self.swizzle is not None or self.pack is not None:
            raise bad("wspc stores no swizzled or packed tensors (the seeds define neither)",
                      "leave `swizzle` and `pack` out")
        if self.strides is not None and len(self.strides) != rank:
            raise bad(f"it has {len(self.strides)} strides")
        order = self.order
        if order is not None and sorted(order) != list(range(rank)):
            raise bad(f"`order` {order} is not an order of its {rank} dimensions")
        if self.strides is None:
            order = order if order is not None else tuple(range(rank))
            strides, step = [0] * rank, 1
            for d in reversed(order):
                strides[d] = step
                step *= max(shape[d], 1)
            return tuple(strides)
        strides = self.strides
        if any(s < 1 for s in strides):
            raise bad("a stride below 1 (wspc tensors own every element)")
        # no two elements in one place: by increasing stride, each dimension steps past the
        # whole extent of the faster ones (dimensions of one element never step)
        used = sorted((s, n) for s, n in zip(strides, shape) if n > 1)
        reach = 1
        for s, n in used:
            if s < reach:
                raise bad("two elements would share a place (a stride smaller than the extent "
                          "of a faster dimension)")
            reach = s * n
        if order is not None and any(strides[a] < strides[b] for a, b in zip(order, order[1:])
                                     if shape[a] > 1 and shape[b] > 1):
            raise bad(f"`order` {order} disagrees with the strides {strides}",
                      "give one of them, or list the dimensions by decreasing stride")
        return strides

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemLayout) and (self.strides, self.order, self.swizzle,
                                                 self.pack) == (other.strides, other.order,
                                                                other.swizzle, other.pack)

    def __hash__(self) -> int:
        return hash((self.strides, self.order))

    def __repr__(self) -> str:
        parts = [f"{k}={v}" for k, v in (("strides", self.strides), ("order", self.order),
                                          ("swizzle", self.swizzle), ("pack", self.pack))
                 if v is not None]
        return f"MemLayout({', '.join(parts)})"


def _partial(partial: Any, span) -> tuple:
    if partial is None:
        return ()
    items = tuple(partial) if isinstance(partial, (tuple, list)) else (partial,)
    return tuple(_axis_ref(a, span, "`partial=`") for a in items)


class TensorLayout:
    """A tensor's layout: `dist` (one `DistElem` per dimension) and `mem` (a `MemLayout` or
    None), and `partial`, the mesh axes over which each device holds an addend (`.wsp`
    `partial(ax)`; wspc's spelling, the seeds have none).

    The factories take `rank=` as the seeds write it, or leave it out: the layout then fits the
    rank of the tensor it is given to (`TensorLayout.sharded(dim=1, mesh_axis="tp")`)."""

    def __init__(self, dist: Any = None, mem: Optional[MemLayout] = None, partial: Any = None,
                 *, _shards: Optional[dict] = None):
        span = here()
        self._span = span
        if mem is not None and not isinstance(mem, MemLayout):
            raise user_error(span, f"`mem=` takes a `MemLayout`, not {mem!r}",
                             cls=TypeCheckError)
        self.mem = mem
        self.partial = _partial(partial, span)
        self._shards = dict(_shards or {})  # dim -> axis, for a layout without a rank yet
        if dist is None:
            self._dist: Optional[tuple] = None
            return
        dist = tuple(dist)
        for d in dist:
            if not isinstance(d, DistElem):
                raise user_error(span, f"a layout's entries are `TensorReplicate()` or "
                                 f"`TensorShard(mesh_axis)`, not {d!r}", cls=TypeCheckError)
        self._dist = dist

    # -- the seeds' factories
    @staticmethod
    def default(rank: Optional[int] = None, partial: Any = None) -> "TensorLayout":
        """Replicated on every dimension (what a tensor without a layout is)."""
        return TensorLayout._make(rank, {}, partial)

    @staticmethod
    def replicated(rank: Optional[int] = None, partial: Any = None) -> "TensorLayout":
        """The same as `default`."""
        return TensorLayout._make(rank, {}, partial)

    @staticmethod
    def sharded(dim: int = 0, rank: Optional[int] = None, mesh_axis: Any = 0,
                partial: Any = None) -> "TensorLayout":
        """Dimension `dim` sharded over `mesh_axis`, the others replicated."""
        span = here()
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0 or (
                rank is not None and dim >= rank):
            raise user_error(span, f"`dim={dim!r}` is not a dimension of a layout of rank "
                             f"{rank}" if rank is not None else f"`dim=` takes a dimension "
                             f"(0, 1, ...), not {dim!r}", cls=TypeCheckError)
        return TensorLayout._make(rank, {dim: _axis_ref(mesh_axis, span, "`mesh_axis=`")},
                                  partial)

    @staticmethod
    def _make(rank: Optional[int], shards: dict, partial: Any) -> "TensorLayout":
        span = here()
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 1):
            raise user_error(span, f"`rank=` is a positive integer, not {rank!r}",
                             cls=TypeCheckError)
        lay = TensorLayout(None, None, partial, _shards=shards)
        if rank is not None:
            lay._dist = lay._entries(rank)
        return lay

    # -- queries
    @property
    def rank(self) -> Optional[int]:
        return None if self._dist is None else len(self._dist)

    @property
    def dist(self) -> Optional[tuple]:
        """One `DistElem` per dimension (None while the layout has no rank yet)."""
        return self._dist

    def _entries(self, rank: int) -> tuple:
        if self._dist is not None:
            return self._dist
        return tuple(_shard(self._shards[i]) if i in self._shards else TensorReplicate()
                     for i in range(rank))

    def for_rank(self, rank: int) -> "TensorLayout":
        """This layout with `rank` dimensions (a layout without a rank fits any rank above its
        sharded dimensions; a layout with one must have this one)."""
        span = here()
        if self._dist is not None and len(self._dist) != rank or any(d >= rank
                                                                       for d in self._shards):
            have = len(self._dist) if self._dist is not None else max(self._shards) + 1
            raise user_error(span, f"a layout of rank {have} is given to a tensor of rank "
                             f"{rank}", "give one entry per dimension of the tensor",
                             cls=TypeCheckError)
        return self._copy(self._entries(rank))

    def _copy(self, dist: Optional[tuple], partial: Optional[tuple] = None,
              shards: Optional[dict] = None) -> "TensorLayout":
        lay = object.__new__(TensorLayout)
        lay._span, lay.mem = self._span, self.mem
        lay.partial = self.partial if partial is None else partial
        lay._shards = dict(self._shards if shards is None else shards)
        lay._dist = dist
        return lay

    def is_replicated(self) -> bool:
        """No dimension sharded and no partial axis."""
        return not self.partial and not self.sharded_dims()

    def sharded_dims(self) -> list:
        if self._dist is None:
            return sorted(self._shards)
        return [i for i, d in enumerate(self._dist) if isinstance(d, TensorShard)]

    def shard_axes(self) -> dict:
        """dim -> the mesh axis sharding it."""
        if self._dist is None:
            return dict(self._shards)
        return {i: d.mesh_axis for i, d in enumerate(self._dist) if isinstance(d, TensorShard)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorLayout) and (self._dist, self.shard_axes(),
                                                    self.partial, self.mem) == (
            other._dist, other.shard_axes(), other.partial, other.mem)

    def __hash__(self) -> int:
        return hash((self._dist, tuple(sorted(self.shard_axes().items(), key=repr)),
                     self.partial))

    def __repr__(self) -> str:
        if self._dist is not None:
            body = ", ".join(repr(d) for d in self._dist)
        else:
            body = ", ".join(f"{i}: S({a!r})" for i, a in sorted(self._shards.items())) + \
                (", ..." if self._shards else "...")
        extra = (f", partial={self.partial}" if self.partial else "") + \
            (f", mem={self.mem}" if self.mem is not None else "")
        return f"TensorLayout({body}{extra})"


def _shard(axis: Any) -> TensorShard:
    s = object.__new__(TensorShard)
    s.mesh_axis = axis
    return s


def tensor_layout_join(a: TensorLayout, b: TensorLayout) -> TensorLayout:
    """The join of two layouts, dimension by dimension (the seeds' rules, after Dato):
    `R ⊔ R = R`, `R ⊔ S(i) = S(i) ⊔ R = S(i)`, `S(i) ⊔ S(i) = S(i)`, and `S(i) ⊔ S(j)` with
    i ≠ j a `LayoutIncompatibleError`; so is a rank mismatch, and two layouts whose partial
    axes differ (an addend joined with a value is not an addend of anything). Mesh axes compare
    as written (`0` and `"tp"` are different axes here, even when they name the same one).
    `mem`: the first layout's when it has one, else the second's."""
    span = here()
    for x in (a, b):
        if not isinstance(x, TensorLayout):
            raise user_error(span, f"`tensor_layout_join` takes two `TensorLayout`s, not {x!r}",
                             cls=TypeCheckError)
    if a.rank is not None and b.rank is not None and a.rank != b.rank:
        raise user_error(span, f"cannot join layouts of ranks {a.rank} and {b.rank}",
                         cls=LayoutIncompatibleError)
    if set(a.partial) != set(b.partial):
        raise user_error(span, f"cannot join a layout partial over {_axes(a.partial)} with one "
                         f"partial over {_axes(b.partial)}", "reduce the partial sums first "
                         "(`allreduce`)", cls=LayoutIncompatibleError)
    sa, sb = a.shard_axes(), b.shard_axes()
    joined = dict(sa)
    for dim, ax in sb.items():
        if dim in sa and sa[dim] != ax:
            raise user_error(span, f"cannot join the layouts at dimension {dim}: S({sa[dim]!r}) "
                             f"⊔ S({ax!r}) (a dimension is sharded over one mesh axis)",
                             "`relayout` one of them first", cls=LayoutIncompatibleError)
        joined[dim] = ax
    owners: dict = {}
    for dim, ax in sorted(joined.items()):
        if ax in owners:
            raise user_error(span, f"cannot join the layouts: mesh axis {ax!r} would shard "
                             f"dimensions {owners[ax]} and {dim}", "`relayout` one of them first",
                             cls=LayoutIncompatibleError)
        owners[ax] = dim
    rank = a.rank if a.rank is not None else b.rank
    out = a._copy(None, a.partial, joined)
    out.mem = a.mem if a.mem is not None else b.mem
    if rank is not None:
        out._dist = out._entries(rank)
    return out


def derive(kind: str, src: TensorLayout, over: Any, dim: Optional[int],
           to: Optional[TensorLayout], span) -> TensorLayout:
    """The layout the collective `kind` over mesh axis `over` makes of a source of layout `src`
    (docs/language.md section 11, the table of collective statements): what `y = allreduce(x)`
    declares `y` with. `dim` is reduce_scatter's and all_to_all's destination dimension (and
    allgather's sharded one, when given); `to` is relayout's. A source the collective cannot
    take still gives a layout: the checker reports the statement at its line."""
    shards = src.shard_axes()
    partial = src.partial
    if kind == "relayout":
        return to.for_rank(src.rank) if src.rank is not None else to
    if kind in ("allreduce", "reduce_scatter"):
        partial = tuple(a for a in partial if a != over)
    if kind == "reduce_scatter" and dim is not None:
        shards = {d: a for d, a in shards.items() if a != over}
        shards[dim] = over
    elif kind == "allgather":
        shards = {d: a for d, a in shards.items() if a != over and d != dim}
    elif kind == "all_to_all" and dim is not None:
        shards = {d: a for d, a in shards.items() if a != over}
        shards[dim] = over
    out = src._copy(None, partial, shards)
    out.mem = None
    if src.rank is not None:
        out._dist = out._entries(src.rank)
    return out


def check_layouts_compatible(*tensors: Any) -> Optional[TensorLayout]:
    """The prototype's check of several tensors' layouts: their join (`tensor_layout_join`,
    left to right) when they are compatible, None when two conflict; with fewer than two
    layouts, the one there is (or None). A tensor's layout is its `layout` (a `Tensor`'s: the
    one given, else replicated), an object without one is left out."""
    layouts = [lay for lay in (getattr(t, "layout", None) for t in tensors)
               if isinstance(lay, TensorLayout)]
    if len(layouts) < 2:
        return layouts[0] if layouts else None
    out = layouts[0]
    try:
        for lay in layouts[1:]:
            out = tensor_layout_join(out, lay)
    except LayoutIncompatibleError:
        return None
    return out


def _axes(axes: tuple) -> str:
    return "(" + ", ".join(repr(x) for x in axes) + ")" if axes else "no axis"


__all__ = ["LayoutIncompatibleError", "DistElem", "TensorReplicate", "TensorShard", "Shard",
           "Replicate", "MemLayout", "TensorLayout", "tensor_layout_join",
           "check_layouts_compatible", "derive"]
