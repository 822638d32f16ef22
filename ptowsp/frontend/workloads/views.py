"""Tensor views in task arguments and element reads: indices and slices in range, and a view's
shape against a tile's (language.md section 6).

A bound that is provably wrong is a compile error; one that cannot be decided becomes a
`RuntimeCheck` appended to `env.checks`, blamed on the argument or the element read.
"""

from __future__ import annotations

from typing import Optional

from ... import sym
from ...diagnostics import InternalError
from ...dtypes import kind_of
from .. import ast as A
from ..env import RuntimeCheck
from ..signatures import ParamSig
from .scope import Scope, SVal
from .wording import show


def is_transpose(e) -> bool:
    """`e` is `VIEW.T`, a transposed view (language.md section 6, "Transposed views")."""
    return isinstance(e, A.Attr) and e.attr == "T"


def untranspose(e: A.Expr) -> tuple[A.Expr, bool]:
    """The view under any `.T`s of `e`, and whether they transpose it (an odd number)."""
    flip = False
    while is_transpose(e):
        e, flip = e.value, not flip
    return e, flip


def not_a_view_message(text: str, what: str) -> str:
    """`.T` on something that is not a tensor view (a scalar, an item, a channel)."""
    return f"`{text}`: `.T` transposes a tensor view passed to a tile, not {what}"


def gather_item(item, tensors, scope: Scope) -> Optional[A.Index]:
    """`item` if it is a gather item of a view (`pos[t*16 : t*16 + 16]`: a tensor that no
    local name hides, indexed with a slice), else None."""
    if (isinstance(item, A.Index) and isinstance(item.value, A.Name)
            and item.value.id in tensors and scope.lookup(item.value.id) is None
            and any(isinstance(x, A.Slice) for x in item.items)):
        return item
    return None


class ViewChecks:
    """Part of `Body`: tensor views and their shapes."""

    def view(self, v: A.Expr, t, scope: Scope, kw: A.Node) -> Optional[list[sym.Expr]]:
        """The extents of `T` or `T[items]` after selection; checks each index and slice.
        Also leaves the view's box in `self.last_box`: per dimension of `T`, (offset, extent),
        or None where it is unknown (an error, a gather); placement on a mesh reads it."""
        box: list = [(sym.const(0), d) for d in t.dims]
        self.last_box = box
        if isinstance(v, A.Name):
            return list(t.dims)
        if not isinstance(v, A.Index):
            raise InternalError("check", f"a view is a name or an index, not {type(v).__name__}")
        if len(v.items) > len(t.dims):
            self.error(
                v.span,
                "too-many-indices",
                f"`{t.name}` has {len(t.dims)} "
                f"dimension{'s' if len(t.dims) != 1 else ''}, but {len(v.items)} indices are given",
            )
            return None
        shape: list[sym.Expr] = []
        ok = True
        kwtext = self.text(kw)
        if not self.sound_tensor(t.name):
            for item in v.items:  # names in the indices are still checked
                for x in (item.start, item.stop, item.step) if isinstance(item, A.Slice) else (item,):
                    if x is not None:
                        self.int_expr(x, scope, "a tensor index")
            return None
        for axis, (item, dim) in enumerate(zip(v.items, t.dims)):
            if isinstance(item, A.Slice):
                # one diagnostic per slice: a wrong step makes `63:0:-2` no "negative length"
                step = self.slice_step(item, scope)
                bounds = (self.slice_bounds(item, dim, axis, t.name, scope, kw, kwtext)
                          if step is not None else None)
                if bounds is None or step is None:
                    ok = False
                    continue
                # `a:e:k` selects a, a + k, ... below e: ceildiv(e - a, k) elements; the box
                # (placement on a mesh) is the bounding one, `a:e`
                shape.append(sym.ceildiv(sym.sub(bounds[1], bounds[0]), step))
                box[axis] = (bounds[0], sym.sub(bounds[1], bounds[0]))
            elif gather_item(item, self.env.tensors, scope) is not None:
                box[axis] = None
                n = self.gather(item, axis, v, t, scope, kw, kwtext)
                if n is None:
                    ok = False
                    continue
                shape.append(n)
            else:
                i = self.int_expr(item, scope, "a tensor index")
                if i.type == "error":
                    ok = False
                    box[axis] = None
                    continue
                box[axis] = (i.expr, sym.const(1))
                ok &= self.index_in_range(i.expr, item, dim, axis, t.name, kw.span, kwtext)
        shape.extend(t.dims[len(v.items) :])
        return shape if ok else None

    def transpose_shape(self, shape: list[sym.Expr], at: A.Node, text: str,
                        notes=()) -> Optional[list[sym.Expr]]:
        """The extents of the view `text` transposed (the `.T` at `at`): its two dimensions
        swapped after dropping leading extents provably 1 (a 1-D view is a row, its `.T` a
        column); None after an error at `at` (a view of more than two dimensions)."""
        dims = list(shape)
        while len(dims) > 2 and self.decide(dims[0], "==", sym.const(1)) is True:
            dims.pop(0)
        if len(dims) > 2:
            # decision: `.T` swaps a 2-D view's dimensions; a view of more dimensions has no one transpose
            self.error(
                at.span,
                "transpose-rank",
                f"`.T` transposes a 2-D view, but `{text}` is a "
                f"[{', '.join(show(d) for d in shape)}] view",
                f"select {len(dims) - 2} more leading dimension{'s' if len(dims) > 3 else ''} "
                "with an index, then transpose",
                notes=notes,
            )
            return None
        while len(dims) < 2:
            dims.insert(0, sym.const(1))
        return [dims[1], dims[0]]

    def gather_transposed(self, at: A.Node, v: A.Expr, scope: Scope, notes=()) -> bool:
        """A gather view under `.T` is an error at `at`; True when `v` is one."""
        if isinstance(v, A.Index) and any(gather_item(x, self.env.tensors, scope) is not None
                                          for x in v.items):
            # decision: a gather view cannot be transposed: it gathers the tile's rows
            self.error(
                at.span,
                "transpose-gather",
                f"a gather view cannot be transposed: `{self.text(v)}` gathers the tile's rows",
                "gather the rows into a tensor with one task, and pass a transposed view of it",
                notes=notes,
            )
            return True
        return False

    def gather_read_only(self, kw: A.Node, p: ParamSig, v: A.Expr, scope: Scope, notes=()) -> None:
        """A gather view passed to an `Out`/`InOut` parameter is an error at the argument."""
        # decision: a gather view is read-only (writing rows chosen by data, a scatter, would make two tasks' boxes overlap in ways dependencies cannot see)
        if (p.tile.mode != "In" and isinstance(v, A.Index)
                and any(gather_item(x, self.env.tensors, scope) is not None for x in v.items)):
            self.error(
                kw.span,
                "gather-write",
                f"a gather view is read-only, but `{p.name}` is an `{p.tile.mode}` parameter",
                notes=notes,
            )

    def slice_bounds(self, item: A.Slice, dim: sym.Expr, axis: int, tname: str, scope: Scope,
                     kw: A.Node, kwtext: str) -> Optional[tuple[sym.Expr, sym.Expr]]:
        """`start : stop` of dimension `axis` of `tname` (size `dim`) checked: in range, not
        negative in length; None after an error."""
        start = (
            self.int_expr(item.start, scope, "a slice bound")
            if item.start is not None
            else SVal("int", sym.const(0))
        )
        stop = (
            self.int_expr(item.stop, scope, "a slice bound")
            if item.stop is not None
            else SVal("int", dim)
        )
        if start.type == "error" or stop.type == "error":
            return None
        ok = True
        if item.start is not None:
            ok &= self.require(
                start.expr,
                ">=",
                sym.const(0),
                error_span=item.start.span,
                error=f"slice start `{self.text(item.start)}` is negative; there is no "
                "wrap-around",
                check_span=kw.span,
                reason=f"slice start `{self.text(item.start)}` in `{kwtext}` must not be negative",
            )
        if item.stop is not None:
            ok &= self.require(
                stop.expr,
                "<=",
                dim,
                error_span=item.stop.span,
                error=f"slice end `{self.text(item.stop)}` is past the end of dimension {axis} "
                f"of `{tname}` (size {show(dim)})",
                check_span=kw.span,
                reason=f"slice end `{self.text(item.stop)}` in `{kwtext}` must be at most "
                f"{show(dim)}",
            )
        if item.start is not None or item.stop is not None:
            ok &= self.require(
                start.expr,
                "<=",
                stop.expr,
                error_span=item.span,
                error=f"slice `{self.text(item)}` has a negative length",
                check_span=kw.span,
                reason=f"slice `{self.text(item)}` in `{kwtext}` must not have a negative length",
            )
        return (start.expr, stop.expr) if ok else None

    def slice_step(self, item: A.Slice, scope: Scope) -> Optional[int]:
        """The step of a view's slice (1 when none is written): a compile-time integer of at
        least 1 (language.md section 6, "Strided views"); None after an error."""
        if item.step is None:
            return 1
        k = self.compile_int(item.step, scope, "a slice step")
        if k is None:
            return None
        if k < 1:
            text = self.text(item.step)
            if k == 0:
                self.error(item.step.span, "slice-step",
                           f"slice step `{text}` is zero; a step is at least 1",
                           "write `a:e:1` (or `a:e`) for every element, `a:e:2` for every other")
            else:
                # decision: negative steps are refused: a view runs forwards (its box, its
                # copies and its partial edge all start at its first element)
                self.error(item.step.span, "slice-step",
                           f"slice step `{text}` is negative; a view does not run backwards",
                           "write the elements' forward slice with a positive step and reverse "
                           "their order in the kernel")
            return None
        return k

    def gather(self, item: A.Index, axis: int, v: A.Index, t, scope: Scope, kw: A.Node,
               kwtext: str) -> Optional[sym.Expr]:
        """A gather item `pos[a : b]` at dimension `axis` of the view `v` of `t`: the number of
        rows it gathers, after checking the index tensor (integer, a 1-D slice of it in range)
        and the item's place (the tile's rows); None after an error. Each gathered index is
        checked at run time (lowering), since it is data."""
        ix = self.env.tensors[item.value.id]
        name = ix.name
        if kind_of(ix.dtype) != "int":
            self.error(
                item.value.span,
                "gather-index",
                f"the indices of a gather view must be integers, but `{name}` is {ix.dtype}",
            )
            return None
        slices = [x for x in item.items if isinstance(x, A.Slice)]
        if len(item.items) != len(ix.dims) or len(slices) != 1:
            self.error(
                item.span,
                "gather-index",
                f"the indices of a gather view are a 1-D slice, but `{self.text(item)}` is not "
                f"one: `{name}` has {len(ix.dims)} dimension{'s' if len(ix.dims) != 1 else ''}",
                "slice one dimension of the index tensor and index every other one with an "
                f"integer (`{name}[b, t*16 : t*16 + 16]`)",
            )
            return None
        before = v.items[:axis]
        after = len(v.items) - axis - 1 + len(t.dims) - len(v.items)
        if any(isinstance(x, A.Slice) or gather_item(x, self.env.tensors, scope) is not None
               for x in before) or after != 1:
            self.error(
                item.span,
                "gather-rows",
                f"a gather view gathers the tile's rows, but `{self.text(item)}` selects "
                f"dimension {axis} of `{t.name}`, which is not the view's rows",
                "index every dimension before the gathered one with an integer and leave "
                "exactly one dimension (the columns) after it",
            )
            return None
        extent: Optional[sym.Expr] = None
        ok = True
        for d, (x, dim) in enumerate(zip(item.items, ix.dims)):
            if isinstance(x, A.Slice) and x.step is not None:
                # decision: an index slice has no step: the gathered rows are its elements in order
                self.error(x.step.span, "gather-step",
                           f"the index slice of a gather view has no step, but "
                           f"`{self.text(item)}` has one",
                           "keep the indices you want in a tensor of their own, or slice the "
                           "view's rows with a step instead of gathering them")
                ok = False
            elif isinstance(x, A.Slice):
                b = self.slice_bounds(x, dim, d, name, scope, kw, kwtext)
                if b is None:
                    ok = False
                else:
                    extent = sym.sub(b[1], b[0])
            else:
                i = self.int_expr(x, scope, "a tensor index")
                if i.type == "error":
                    ok = False
                else:
                    ok &= self.index_in_range(i.expr, x, dim, d, name, kw.span, kwtext)
        return extent if ok else None

    def index_in_range(
        self,
        i: sym.Expr,
        item: A.Expr,
        dim: sym.Expr,
        axis: int,
        tname: str,
        check_span: A.Span,
        where: str,
    ) -> bool:
        text = self.text(item)
        ok = self.require(
            i,
            ">=",
            sym.const(0),
            error_span=item.span,
            error=f"index `{text}` is negative; there is no wrap-around",
            check_span=check_span,
            reason=f"index `{text}` in `{where}` must not be negative",
        )
        ok &= self.require(
            i,
            "<",
            dim,
            error_span=item.span,
            error=f"index `{text}` is out of range for dimension {axis} of `{tname}` "
            f"(size {show(dim)})",
            check_span=check_span,
            reason=f"index `{text}` in `{where}` must be less than {show(dim)}",
        )
        return ok

    def match_shape(
        self,
        shape: list[sym.Expr],
        rows: sym.Expr,
        cols: sym.Expr,
        kw: A.Keyword,
        kwtext: str,
        p: ParamSig,
        tile_text: str,
        at: Optional[A.Node] = None,
        notes=(),
    ) -> None:
        """The view's extents against the tile's: a mismatch is an error at `at` (default:
        the argument `kw`), an undecided extent a run-time check at `kw` (the view)."""
        at = kw if at is None else at
        dims = list(shape)
        while len(dims) < 2:
            dims.insert(0, sym.const(1))
        shown = f"[{', '.join(show(d) for d in (shape if len(shape) >= 2 else dims))}]"
        # decision: extra leading view dimensions of provable extent 1 are squeezed (`X[b, t:t+1]` fits a 2-D tile)
        while len(dims) > 2 and self.decide(dims[0], "==", sym.const(1)) is True:
            dims.pop(0)
        message = f"`{kwtext}` is a {shown} view but `{p.name}` takes {tile_text}"
        if len(dims) > 2:
            # decision: a leading dimension not provably 1 (e.g. `T`) is a compile error, not a run-time check
            self.error(
                at.span,
                "shape-mismatch",
                message,
                f"select {len(dims) - 2} more leading dimension{'s' if len(dims) > 3 else ''} with an index",
                notes=notes,
            )
            return
        # decision: a view may be shorter than its tile along either dimension (a partial tile:
        # loads pad, stores write only the view), never longer and never empty
        pending: list[sym.Check] = []
        for got, want, which in ((dims[0], rows, "rows"), (dims[1], cols, "columns")):
            if sym.free_vars(want):
                continue  # a Constexpr without a value: reported at the call
            if self.decide(got, "==", want) is True:
                continue
            over = self.decide(got, "<=", want)
            if over is False:
                self.error(at.span, "shape-mismatch", message,
                           "a view may be shorter than its tile (a partial tile), never longer",
                           notes=notes)
                return
            if self.decide(got, ">=", sym.const(1)) is False:
                self.error(at.span, "shape-mismatch", f"`{kwtext}` is an empty {shown} view",
                           f"a view passed to a tile has at least one element; `{p.name}` takes "
                           f"{tile_text}", notes=notes)
                return
            if over is None:
                pending.append(too_long(got, kwtext, want, which, tile_text))
            pending.append(too_short(got, kwtext, which))
        for c in pending:
            if self.decide(c.lhs, c.op, c.rhs) is not True:
                self.env.checks.append(RuntimeCheck(c, kw.span))


def too_long(got: sym.Expr, kwtext: str, want: sym.Expr, which: str, tile_text: str) -> sym.Check:
    """The run-time check of a view's extent against its tile's (also lowering's)."""
    return sym.Check(got, "<=", want, f"`{kwtext}` must have at most {show(want)} {which} to fit "
                     f"{tile_text}")


def too_short(got: sym.Expr, kwtext: str, which: str) -> sym.Check:
    """The run-time check that a view passed to a tile is not empty (also lowering's)."""
    return sym.Check(got, ">=", sym.const(1), f"`{kwtext}` must have at least 1 {which[:-1]}")
