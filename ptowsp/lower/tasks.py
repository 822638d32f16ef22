"""Kernel calls in a workload become tasks: `N.Task` with the name of the kernel's
specialisation, its coordinates, and one argument per parameter — a view becomes a `TileArg`
box (offsets, extents, the two dimensions that are the tile's rows and columns) carrying the
`ViewCheck`s that could not be proved here, a scalar a `ScalarArg`.

A view follows the checker's rules and messages: an index must lie in its dimension, a slice
must be in bounds and not negative, and the view's extents must be at least 1 and at most the
tile's (shorter: a partial tile, `TileArg.partial`).
"""

from __future__ import annotations

from typing import Optional, Union

from .. import sym
from ..diagnostics import InternalError
from ..dtypes import FLOAT_DTYPES, as_float
from ..frontend import ast as A
from ..frontend.printer import expr_str
from ..frontend.signatures import ParamSig
from ..frontend.workloads.views import is_transpose, too_long, too_short
from ..ir import nodes as N
from ..limits import MAX_COORDS, MAX_SCALARS, MAX_TILE_ELEMENTS, MAX_TILES, count_text
from .scope import ItemVar, Let, Scope
from .unsupported import UNSUPPORTED, Unsupported


def _is_gather(item, tensors, scope: Scope) -> bool:
    """A gather item of a view (`pos[t*16 : t*16 + 16]`), as the checker's `gather_item`."""
    return (isinstance(item, A.Index) and isinstance(item.value, A.Name)
            and item.value.id in tensors and scope.lookup(item.value.id) is None
            and any(isinstance(x, A.Slice) for x in item.items))


def _within_a_task(t: N.Task, s: A.CallStmt) -> None:
    """A task passes at most MAX_TILES tiles, MAX_SCALARS scalars and MAX_COORDS coordinates
    (the runtime's task record): more is an error at the call, on every target."""
    tiles = [a for a in t.args if isinstance(a, N.TileArg)]
    ntiles = len(tiles) + len(t.extra) + sum(a.gather is not None for a in tiles)
    nscalars = len(t.args) - len(tiles)
    for n, most, what in ((ntiles, MAX_TILES, "tiles (tile parameters, gather indices and "
                           "channel slots)"), (nscalars, MAX_SCALARS, "scalar arguments"),
                          (len(t.coords), MAX_COORDS, "coordinates")):
        if n > most:
            raise Unsupported(s.callee.span, f"the call `{t.text}` passes {n} {what}, more than a "
                              f"task can take ({most}): split the kernel, or pass fewer, larger tiles")


# A tile parameter's mode as the access mode of its argument.
ACCESS_MODES = {"In": "r", "Out": "w", "InOut": "rw"}


class TaskLowering:
    """Tasks and their arguments: a mixin of `workloads.WorkloadLowerer` (`env`; `specs`, the
    kernel specialisations tasks use), over its scalar expressions (values.py) and CSP slots
    (csp.py)."""

    def task(self, s: A.CallStmt, scope: Scope) -> N.Task:
        sig = self.env.kernel_sigs[s.callee.id]
        bound = {kw.name: kw for kw in s.kwargs}
        cvals: dict[str, int] = {}
        for p in sig.params:
            if p.kind != "constexpr":
                continue
            node = bound[p.name].value if p.name in bound else p.default
            v = sym.const_value(self.int_expr(node, Scope() if p.name not in bound else scope))
            if v is None:
                raise InternalError("lower", f"Constexpr `{p.name}` is not a compile-time integer")
            cvals[p.name] = v
        kname = self.specs.specialise(sig.name, cvals)
        coords = tuple(self.int_expr(c, scope) for c in s.coords or ())
        args: list[Union[N.TileArg, N.ScalarArg]] = []
        for p in sig.params:
            if p.kind == "tile":
                args.append(self.tile_arg(bound[p.name], p, cvals, scope))
            elif p.kind == "scalar":
                args.append(self.scalar_arg(bound.get(p.name), p, scope))
        text = s.callee.id
        if s.coords is not None:
            text += f"[{', '.join(expr_str(c) for c in s.coords)}]"
        task = N.Task(kname, coords, tuple(args), text, s.span, self.csp_accesses(args))
        _within_a_task(task, s)
        return task

    def scalar_arg(self, kw: Optional[A.Keyword], p: ParamSig, scope: Scope) -> N.ScalarArg:
        node = kw.value if kw is not None else p.default
        kind, v = self.scalar(node, scope if kw is not None else Scope())
        if p.dtype == "bool":
            if not isinstance(v, bool):
                raise Unsupported(node.span, f"passing a condition on run-time values "
                                  f"(`{expr_str(node)}`) to a bool scalar {UNSUPPORTED}")
            return N.ScalarArg(p.name, v, p.dtype)
        if p.dtype in FLOAT_DTYPES:
            if kind == "int":
                c = sym.const_value(v)
                # decision: an integer expression passed to a float Scalar stays symbolic when it is not constant; the back end converts its value
                return N.ScalarArg(p.name, as_float(c) if c is not None else v, p.dtype)
            return N.ScalarArg(p.name, as_float(self.number(kind, v, node)), p.dtype)
        if kind != "int":
            raise InternalError("lower", f"`{expr_str(node)}` is not an integer")
        return N.ScalarArg(p.name, v, p.dtype)

    def tile_arg(self, kw: A.Keyword, p: ParamSig, cvals: dict[str, int],
                 scope: Scope) -> N.TileArg:
        # a `let` name is its view, lowered in the `let`'s scope; the view's run-time checks are
        # reported at the `let`, named as it is written there (`q = Q[b, r0:r0 + RT, :]`)
        # `.T` (a transposed view, language.md section 6) may wrap the view or a `let` of one;
        # each `.T` swaps the tile's rows and columns
        view_kw = kw
        v = kw.value
        flip = False
        while True:
            if is_transpose(v):
                flip, v = not flip, v.value
            elif isinstance(v, A.Name) and isinstance(scope.lookup(v.id), Let):
                let = scope.lookup(v.id)
                v, scope, view_kw = let.expr, let.scope, let.keyword
            else:
                break
        base = v.value if isinstance(v, A.Index) else v
        if isinstance(v, A.Name):
            b = scope.lookup(v.id)
            if isinstance(b, ItemVar):
                return self.slot_arg(p, b.channel, b.name)
            if (b is None and self.sending is not None and v.id == self.sending[0].name):
                return self.slot_arg(p, self.sending[0], self.sending[1])
        if not isinstance(base, A.Name) or base.id not in self.env.tensors:
            raise InternalError("lower", f"`{expr_str(kw)}` is not a view")
        t = self.env.tensors[base.id]
        mapping = {k: sym.const(c) for k, c in cvals.items()}
        rows = sym.substitute(p.tile.rows, mapping)
        cols = sym.substitute(p.tile.cols, mapping)
        tile_text = f"Tile[{sym.to_str(rows)}, {sym.to_str(cols)}, {p.tile.dtype}]"
        nr, nc = sym.const_value(rows), sym.const_value(cols)
        if nr is not None and nc is not None and nr * nc > MAX_TILE_ELEMENTS:
            raise Unsupported(kw.span, f"`{p.name}` is a {tile_text} of {count_text(nr * nc)} elements, "
                              f"more than a tile can hold ({MAX_TILE_ELEMENTS:,}): use smaller "
                              "tiles and more tasks")
        kwtext = expr_str(view_kw)
        items = v.items if isinstance(v, A.Index) else ()
        offsets: list[sym.Expr] = []
        extents: list[sym.Expr] = []
        vdims: list[int] = []
        checks: list[N.ViewCheck] = []
        span = view_kw.span
        gather: Optional[N.Gather] = None
        steps = [1] * len(t.dims)
        # the checker's view rules and messages
        for axis, (item, dim) in enumerate(zip(items, t.dims)):
            if _is_gather(item, self.env.tensors, scope):
                gather = self.gather(item, dim, rows, kwtext, scope, span, checks, tile_text)
                offsets.append(sym.const(0))  # every row: the dependencies are conservative
                extents.append(dim)
                vdims.append(axis)
            elif isinstance(item, A.Slice):
                start, stop = self.slice_bounds(item, dim, kwtext, scope, span, checks)
                if item.start is not None or item.stop is not None:
                    self.require(checks, start, "<=", stop,
                                 f"slice `{expr_str(item)}` in `{kwtext}` must not have a negative "
                                 "length", span)
                # a strided slice `a:e:k` (the checker proved k a constant >= 1) selects
                # ceildiv(e - a, k) elements from a, k apart
                k = 1 if item.step is None else self.const_int(item.step, scope)
                steps[axis] = k
                offsets.append(start)
                extents.append(sym.sub(stop, start) if k == 1
                               else sym.ceildiv(sym.sub(stop, start), k))
                vdims.append(axis)
            else:
                i = self.int_expr(item, scope)
                text = expr_str(item)
                self.require(checks, i, ">=", sym.const(0),
                             f"index `{text}` in `{kwtext}` must not be negative", span)
                self.require(checks, i, "<", dim,
                             f"index `{text}` in `{kwtext}` must be less than {sym.to_str(dim)}",
                             span)
                offsets.append(i)
                extents.append(sym.const(1))
        for axis in range(len(items), len(t.dims)):
            offsets.append(sym.const(0))
            extents.append(t.dims[axis])
            vdims.append(axis)
        # decision: leading view dimensions beyond the tile's two are squeezed (the checker proved them 1); fewer than two are promoted with leading 1s (row_dim/col_dim None)
        for axis in vdims[:-2]:
            self.require(checks, extents[axis], "==", sym.const(1),
                         f"dimension {axis} of `{kwtext}` must have extent 1 to fit {tile_text}",
                         span)
        kept = vdims[-2:]
        row_dim = kept[0] if len(kept) == 2 else None
        col_dim = kept[-1] if kept else None
        if flip:
            # decision: a transposed view's tile runs its rows along the view's columns; the box
            # (and so the dependencies) is the untransposed view's, the same elements
            row_dim, col_dim = col_dim, row_dim
        # a view shorter than its tile is a partial tile (language.md section 6): 1 <= extent <= tile
        partial = []
        for dim_, want, which in ((row_dim, rows, "rows"), (col_dim, cols, "columns")):
            if gather is not None and dim_ == row_dim:
                # the index slice's length, checked before its elements are read
                partial.append(gather.count is not None)
                continue
            got = extents[dim_] if dim_ is not None else sym.const(1)
            full = self.decide(got, "==", want) is True
            partial.append(not full)
            if not full:
                for c in (too_long(got, kwtext, want, which, tile_text),
                          too_short(got, kwtext, which)):
                    self.require(checks, c.lhs, c.op, c.rhs, c.reason, span)
        mode = ACCESS_MODES[p.tile.mode]
        return N.TileArg(p.name, t.name, mode, tuple(offsets), tuple(extents), row_dim, col_dim,
                         tuple(checks), gather, (partial[0], partial[1]), span,
                         tuple(steps) if any(k != 1 for k in steps) else ())

    def slice_bounds(self, item: A.Slice, dim: sym.Expr, kwtext: str, scope: Scope, span,
                     checks: list[N.ViewCheck]) -> tuple[sym.Expr, sym.Expr]:
        """A slice's start and stop in a dimension of `dim` (an open end is 0 or `dim`), with
        the checks of the bounds written: a start not negative, an end at most `dim`."""
        start = self.int_expr(item.start, scope) if item.start is not None else sym.const(0)
        stop = self.int_expr(item.stop, scope) if item.stop is not None else dim
        if item.start is not None:
            self.require(checks, start, ">=", sym.const(0),
                         f"slice start `{expr_str(item.start)}` in `{kwtext}` must not be "
                         "negative", span)
        if item.stop is not None:
            self.require(checks, stop, "<=", dim,
                         f"slice end `{expr_str(item.stop)}` in `{kwtext}` must be at most "
                         f"{sym.to_str(dim)}", span)
        return start, stop

    def gather(self, item: A.Index, dim: sym.Expr, rows: sym.Expr, kwtext: str, scope: Scope,
               span, checks: list[N.ViewCheck], tile_text: str) -> N.Gather:
        """The gather item `pos[a : b]` of a view whose tile has `rows` rows: a Read of each
        index before the task (the index slice's bounds and length checked before the first),
        each index's range appended to `checks` (the task's, named `pos[a + i]`)."""
        ix = self.env.tensors[item.value.id]
        n = sym.const_value(rows)
        if n is None:
            raise InternalError("lower", f"a gather view of {sym.to_str(rows)} rows")
        first: list[N.ViewCheck] = []
        offsets: list[sym.Expr] = []
        extents: list[sym.Expr] = []
        sdim, start_text, count, stop = 0, "", sym.const(n), sym.const(n)
        for d, (x, idim) in enumerate(zip(item.items, ix.dims)):
            if isinstance(x, A.Slice):
                start, stop = self.slice_bounds(x, idim, kwtext, scope, span, first)
                count = sym.sub(stop, start)
                if self.decide(count, "==", rows) is not True:  # a partial tile: 1 <= count <= rows
                    for c in (too_long(count, kwtext, rows, "rows", tile_text),
                              too_short(count, kwtext, "rows")):
                        self.require(first, c.lhs, c.op, c.rhs, c.reason, span)
                offsets.append(start)
                extents.append(count)
                sdim, start_text = d, expr_str(x.start) if x.start is not None else ""
            else:
                i = self.int_expr(x, scope)
                self.require(first, i, ">=", sym.const(0),
                             f"index `{expr_str(x)}` in `{kwtext}` must not be negative", span)
                self.require(first, i, "<", idim,
                             f"index `{expr_str(x)}` in `{kwtext}` must be less than "
                             f"{sym.to_str(idim)}", span)
                offsets.append(i)
                extents.append(sym.const(1))
        full = self.decide(count, "==", rows) is True
        texts = [expr_str(x) for x in item.items]
        vars_: list[sym.Expr] = []
        for r in range(n):
            at = list(offsets)
            at[sdim] = sym.add(offsets[sdim], sym.const(r))
            if not full and r:  # past a short slice: its last index again, read but padded
                at[sdim] = sym.min_(at[sdim], sym.sub(stop, 1))
            texts[sdim] = (f"{start_text} + {r}" if start_text and r else start_text or str(r))
            what = f"{ix.name}[{', '.join(texts)}]"
            v = self.read(ix.name, tuple(at), tuple(texts), what, item.span,
                          checks=tuple(first) if r == 0 else ())
            vars_.append(v)
            self.require(checks, v, ">=", sym.const(0),
                         f"index `{what}` in `{kwtext}` must not be negative", span)
            self.require(checks, v, "<", dim,
                         f"index `{what}` in `{kwtext}` must be less than {sym.to_str(dim)}", span)
        return N.Gather(tuple(vars_), ix.name, tuple(offsets), tuple(extents), span,
                        None if full else count)
