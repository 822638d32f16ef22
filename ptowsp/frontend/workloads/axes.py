"""Axes inside a workload body: what an axis expression denotes, and which axes a loop may
iterate (language.md section 5).

An axis is a named module axis, a workload parameter, or an inline `Dense[N]` /
`DenseDyn(expr)`; a ragged or sparse axis is only defined at an index of its outer axis
(`tok[b]`). When a workload parameter is involved, whether `ragged[i]` indexes the right outer
axis is decided at the call sites (a `Need` in the body's `Summary`).
"""

from __future__ import annotations

from typing import Optional

from ... import sym
from ...diagnostics import Diagnostics
from .. import ast as A
from .scope import AxisVal, LetVal, LoopVar, Pending, Scope
from .state import Need


class AxisChecks:
    """Part of `Body`: axis expressions and loop axes."""

    def axis(self, e: A.Expr, scope: Scope) -> Optional[AxisVal]:
        """What an axis expression denotes (no usage rules); None after an error."""
        if isinstance(e, A.DenseAxis):
            n = self.compile_int(e.extent, scope, "a `Dense` extent")
            if n is None:
                return None
            if n < 0:
                self.error(e.extent.span, "negative-extent", f"axis extent is negative ({n})")
                return None
            return AxisVal("dense", self.text(e), sym.const(n), static=True)
        if isinstance(e, A.DenseDynAxis):
            v = self.int_expr(e.extent, scope, "an axis extent")
            return None if v.type == "error" else AxisVal("densedyn", self.text(e), v.expr)
        if isinstance(e, (A.RaggedAxis, A.SparseAxis)):
            kind = "Ragged" if isinstance(e, A.RaggedAxis) else "Sparse"
            # decision: ragged and sparse axes are declared at module level (`axis tok = Ragged(...)`), never inline
            self.error(
                e.span,
                "inline-axis",
                f"a `{kind}` axis must be declared with `axis NAME = {kind}(...)`",
                "declare it at module level and use its name here",
            )
            return None
        if isinstance(e, A.Name):
            named = self.named_axis(e.id, scope)
            if named is not None:
                return named
            b = scope.lookup(e.id)
            if isinstance(b, Pending):
                self.same_loop(e)
                return None
            if b is None and self.env.kind_of(e.id) == "axis":
                return None  # a module axis whose declaration is wrong (reported there)
        if isinstance(e, A.Index) and isinstance(e.value, A.Name):
            base = self.named_axis(e.value.id, scope)
            if base is not None:
                return self.inner_axis(base, e, scope)
            if scope.lookup(e.value.id) is None and self.env.kind_of(e.value.id) == "axis":
                return None
        v = self.int_expr(
            e,
            scope,
            "an axis (a named axis, `Dense[N]`, `DenseDyn(expr)` or an integer expression)",
        )
        return None if v.type == "error" else AxisVal("densedyn", self.text(e), v.expr)

    def named_axis(self, name: str, scope: Scope) -> Optional[AxisVal]:
        b = scope.lookup(name)
        if isinstance(b, AxisVal):
            return b
        if b is not None or self.env.kind_of(name) != "axis":
            return None
        info = self.env.axes.get(name)
        if info is None:
            return None  # the declaration is wrong and was reported
        canon = self.canon(name)
        outer = ("axis", self.canon(info.outer)) if info.outer else None
        return AxisVal(
            info.kind, name, info.extent, ("axis", canon), outer, info, static=info.kind == "dense"
        )

    def same_loop(self, n: A.Name) -> None:
        self.error(
            n.span,
            "same-loop-var",
            f"`{n.id}` is a variable of this same loop",
            f"nest the loops: `for {n.id} in P(...) {{ for ... in P(...[{n.id}]) {{ ... }} }}`",
        )

    def inner_axis(self, base: AxisVal, e: A.Index, scope: Scope) -> Optional[AxisVal]:
        """`ragged[b]` / `sparse[b]`: the inner axis at outer index `b`."""
        if base.kind not in ("ragged", "sparse"):
            self.error(
                e.span,
                "bad-axis-index",
                f"`{base.name}` is a {base.kind} axis; only ragged and sparse axes are indexed",
                f"iterate it directly: `P({base.name})`",
            )
            return None
        if len(e.items) != 1 or isinstance(e.items[0], A.Slice):
            self.error(
                e.span,
                "bad-axis-index",
                f"`{base.name}[...]` takes one outer index",
                f"write `{base.name}[b]` where `b` iterates its outer axis",
            )
            return None
        idx = e.items[0]
        outer = f" `{base.outer[1]}`" if base.outer else ""
        b = scope.lookup(idx.id) if isinstance(idx, A.Name) else None
        if isinstance(b, Pending):
            # decision: the axes of one `P(...)` are read in the enclosing scope; `P(batch, tok[b])` must nest
            self.same_loop(idx)
            return None
        if isinstance(b, LetVal) and b.poisoned:
            return None
        if not isinstance(b, LoopVar) or b.kind not in ("grid", "seq", "outer_index"):
            self.error(
                idx.span,
                "bad-outer-index",
                f"the index of `{base.name}` must be a loop variable over its outer axis{outer}",
                f"write `for b in P({base.outer[1] if base.outer else 'outer'}) {{ ... {base.name}[b] ... }}`",
            )
            return None
        if not self.check_need(Need(base.ref, b.axis_ref, e.span, self.text(e)), base, idx):
            return None
        if base.kind == "sparse":
            return AxisVal("selinner", self.text(e), None, None, info=base.info)
        return AxisVal("inner", self.text(e), self.ragged_extent(base, b), None, info=base.info)

    def check_need(self, need: Need, base: AxisVal, idx: A.Expr) -> bool:
        """Inside a body: decide `ragged[i]` now when both axes are module axes, else keep it."""
        kind = base.kind
        if need.index is None:
            outer = f"`{base.outer[1]}`" if base.outer else "its outer axis"
            self.error(
                idx.span,
                "bad-outer-index",
                f"{kind} axis `{base.name}` is only defined at an index of its outer axis"
                f"{' ' + outer if base.outer else ''}; `{self.text(idx)}` does not iterate {outer}",
            )
            return False
        if need.ragged and need.ragged[0] == "axis" and need.index[0] == "axis":
            o = base.outer[1] if base.outer else None
            if o is not None and need.index[1] != o:
                self.error(
                    idx.span,
                    "bad-outer-index",
                    f"{kind} axis `{base.name}` is only defined at an index of its outer axis `{o}`; "
                    f"`{self.text(idx)}` iterates `{need.index[1]}`",
                    f"index it with a variable of a loop over `{o}`",
                )
                return False
            return True
        # decision: when a workload parameter is involved, `ragged[i]` is checked at each call site
        # (inlined call or schedule) once both axes are module axes
        self.summary.needs.append(need)
        return True

    def ragged_extent(self, base: AxisVal, b: LoopVar) -> Optional[sym.Expr]:
        info = base.info
        at = sym.to_str(b.var)
        if info is not None and info.lengths_tensor is not None:
            t = self.env.tensors[info.lengths_tensor]
            return self.opaque(f"{t.name}[{at}]", t.dtype)
        if info is not None and info.lengths_expr is not None:
            scope = Scope()
            scope.names["_"] = LoopVar("_", b.var, "outer_index")
            saved, self.diags = self.diags, Diagnostics()  # reported once, at the declaration
            try:
                v = self.int_expr(info.lengths_expr, scope, "a ragged length")
            finally:
                self.diags = saved
            return v.expr if v.type == "int" else None
        return self.opaque(f"len({base.name}[{at}])", "i64")

    def loop_axis(self, e: A.Expr, scope: Scope, kind: str, spelling: str) -> Optional[AxisVal]:
        v = self.axis(e, scope)
        if v is None:
            return None
        if kind == "sel":
            if v.kind != "selinner":
                if v.kind == "sparse":
                    self.error(
                        e.span,
                        "bad-sel",
                        "`P.sel` needs the sparse axis at an outer index",
                        f"write `P.sel({v.name}[b])` inside a loop over its outer axis",
                    )
                else:
                    self.error(
                        e.span,
                        "bad-sel",
                        f"`P.sel` iterates the selected coordinates of a sparse axis; "
                        f"`{v.name}` is not sparse",
                        f"use `P({v.name})` or `P.seq({v.name})`",
                    )
                return None
            return v
        if v.kind == "ragged":
            outer = f" `{v.outer[1]}`" if v.outer else ""
            self.error(
                e.span,
                "unindexed-ragged",
                f"ragged axis `{v.name}` is only defined at an index of its outer axis{outer}",
                f"write `{spelling}({v.name}[b])` inside a loop `for b in P({v.outer[1] if v.outer else '...'})`",
            )
            return None
        if v.kind in ("sparse", "selinner"):
            self.error(
                e.span,
                "sparse-grid",
                f"sparse axis `{v.name}` is iterated with `P.sel`",
                f"write `for e in P.sel({v.name if v.kind == 'selinner' else v.name + '[b]'})`",
            )
            return None
        return v
