"""Kernel slices (`x[r0:r1, c0:c1]`) and the axis of `concat` and `gather`: static bounds, checked against
the tile's shape (symbolic with `Constexpr` dims), typed as the tile they select.

The bounds are compile-time integers (literals, consts, `Constexpr` parameters and integer
arithmetic on them) with NumPy's meaning, except that every decision below is an error where
NumPy would quietly do something else (docs/language.md section 4, "Slices and concat").
"""

from __future__ import annotations

from typing import Optional

from ... import sym
from ...diagnostics import did_you_mean
from ...primitives import ERROR, Type, tile
from .. import ast as A
from ..printer import expr_str
from ..signatures import NotSymbolic, to_sym

_AXES = ("rows", "columns")


class SliceChecks:
    """Part of `KernelChecker`: slices of tiles, and the axis of `concat` and `gather`."""

    def index(self, e: A.Index) -> Type:
        x = self.expr(e.value)
        if x.is_error:
            for it in e.items:  # their own mistakes still count
                self._bound_nodes(it)
            return ERROR
        if not x.is_tile:
            return self.error(
                e.value.span,
                "slice-scalar",
                f"only a tile can be sliced, found {x}",
                "a slice selects rows and columns of a tile: `x[0:8, :]`",
            )
        if len(e.items) > 2:
            return self.error(
                e.span,
                "slice-arity",
                f"a tile has two dimensions, found {len(e.items)} ranges",
                "write `x[r0:r1, c0:c1]`",
            )
        bounds = []
        ok = True
        # decision: `x[r0:r1]` slices rows and keeps every column, as in NumPy
        items = list(e.items) + [A.Slice(None, None, span=e.span)] * (2 - len(e.items))
        for axis, (it, extent) in enumerate(zip(items, (x.rows, x.cols))):
            b = self._range(it, extent, axis, x)
            ok = ok and b is not None
            bounds.append(b)
        if not ok:
            return ERROR
        (r0, r1), (c0, c1) = bounds
        return tile(sym.sub(r1, r0), sym.sub(c1, c0), x.dtype)

    def _bound_nodes(self, it) -> None:
        """Check the bounds of a slice whose tile was wrong, for their own errors."""
        for n in (it.start, it.stop) if isinstance(it, A.Slice) else (it,):
            if n is not None:
                self._bound(n)

    def _range(self, it, extent: sym.Expr, axis: int, x: Type) -> Optional[tuple]:
        what = _AXES[axis]
        if not isinstance(it, A.Slice):
            # decision: an integer index is an error: it would drop a dimension, and tiles are 2-D
            self._bound(it)
            text = f"{it.value}:{it.value + 1}" if isinstance(it, A.IntLit) else "i:i + 1"
            self.error(
                it.span,
                "slice-index",
                f"an index would drop a dimension of the tile; select {what} with a range",
                f"write `{text}` for one of the {what}: the result stays a tile",
            )
            return None
        if it.step is not None:
            # decision: a tile slice has no step (a tile is contiguous in the kernel); steps are
            # the workload's views' (language.md section 6, "Strided views")
            self._bound_nodes(it)
            self.error(
                it.step.span,
                "slice-step",
                f"a slice of a tile has no step; `{expr_str(it)}` steps through the {what}",
                "take every other column with `slice_even(x)` / `slice_odd(x)`, or pass a "
                "strided view of the tensor (`X[r, 0:64:2]`) to the kernel",
            )
            return None
        # one diagnostic per range: the stop is not checked after a bad start
        start = sym.const(0) if it.start is None else self._bound(it.start)
        if start is None:
            return None
        stop = extent if it.stop is None else self._bound(it.stop)
        if stop is None:
            return None
        for node, v in ((it.start, start), (it.stop, stop)):
            if node is not None and sym.prove_ge(v, 0, self.ranges) is not True:
                # decision: negative bounds are errors (NumPy counts them from the end)
                self.error(
                    node.span,
                    "slice-bound",
                    f"slice bound `{sym.to_str(v)}` "
                    f"{'is' if sym.const_value(v) is not None else 'may be'} negative",
                    "bounds count from the tile's first row or column: write `N - k` for "
                    "NumPy's `-k`",
                )
                return None
        span = it.span
        lo, hi = sym.to_str(start), sym.to_str(stop)
        nonempty = sym.prove_lt(start, stop, self.ranges)
        if nonempty is not True:
            # decision: an empty (or reversed) slice is an error: a tile has at least one row and column
            self.error(
                span,
                "slice-empty",
                f"slice `{lo}:{hi}` of the {what} "
                f"{'is' if nonempty is False else 'may be'} empty",
                "a tile has at least one row and one column: the stop must exceed the start",
            )
            return None
        inside = sym.prove_le(stop, extent, self.ranges)
        if inside is not True:
            # decision: a bound past the tile is an error (NumPy would clip it)
            self.error(
                span,
                "slice-range",
                f"slice `{lo}:{hi}` {'is' if inside is False else 'may be'} out of range for "
                f"the {what} of {x.shape_str()}",
                f"the {what} of the tile are 0 to {sym.to_str(extent)}",
            )
            return None
        return (start, stop)

    def _bound(self, node: A.Expr) -> Optional[sym.Expr]:
        """A slice bound: a compile-time integer, or None (reported)."""

        def resolve(n: A.Name) -> sym.Expr:
            if n.id in self.constexprs:
                return sym.var(n.id)
            if n.id in self.consts:
                return sym.const(self.consts[n.id])
            if n.id in self.lets or n.id in self.params or n.id in self.all_lets:
                self.error(
                    n.span,
                    "not-constant",
                    f"`{n.id}` is not a compile-time integer",
                    "slice bounds are literals, consts and Constexpr parameters",
                )
                raise NotSymbolic()
            self.error(
                n.span,
                "unknown-name",
                f"unknown name `{n.id}`",
                did_you_mean(n.id, list(self.consts) + list(self.constexprs)),
            )
            raise NotSymbolic()

        try:
            return to_sym(node, resolve, self.diags, "a slice bound")
        except NotSymbolic:
            return None

    def _axis(self, prim, node: A.Expr) -> Optional[int]:
        """`concat`'s and `gather`'s axis: the literal 0 or 1."""
        if isinstance(node, A.IntLit) and node.value in (0, 1):
            return node.value
        # decision: the axis is the literal 0 or 1 (no negative axes, no names)
        self.error(
            node.span,
            "bad-axis",
            f"the axis of `{prim.name}` is 0 (rows) or 1 (columns)",
            _AXIS_HELP.get(prim.name),
        )
        return None


_AXIS_HELP = {
    "concat": "write `concat(a, b, axis = 1)` to put columns side by side",
    "gather": "write `gather(x, idx)` to pick whole rows, `gather(x, idx, axis = 1)` to pick "
              "elements within each row",
}
