"""Collective statements and where a task runs on the mesh (docs/distributed.md).

`stmt_Collective` checks `allreduce`, `reduce_scatter`, `allgather`, `all_to_all` and
`relayout`: a mesh, tensors on both sides of the same global shape and dtype, `over` a mesh
axis, and the source and destination layouts the collective needs (the table of "Collectives");
an error names the layout each side has and the one it needs.

`placement` checks a kernel call against the layouts of its operands ("Where a task runs"), as
far as declarations and views decide it here:
- a kernel cannot read (`In`) a partial tensor: only a collective reads addends;
- an operand sharded over an axis pins the task to one coordinate of it; a task pinned on an
  axis cannot write a tensor replicated over that axis (some replicas would be missed), and a
  task not pinned on an axis cannot write a tensor partial over it (it would add p times);
- a view provably crossing a shard boundary, and two operands provably on different
  coordinates of one axis, are errors.
What depends on run-time values (a view whose shard is known only from a loop variable's value,
operands whose coordinates cannot be compared, gather views) is left to the lowering to
devices, which checks it at run time like other view checks ("How it is built", `ir/devices.py`).
"""

from __future__ import annotations

from typing import Optional

from ... import sym
from ...diagnostics import Note, did_you_mean
from ...limits import int_text
from ...records import record
from .. import ast as A
from ..env import LayoutInfo
from ..mesh import NO_MESH_HELP, dim_words, mesh_axis
from .scope import Scope
from .wording import article, show

REDUCE_OPS = ("sum", "max", "min")


@record
class Operand:
    """A tensor view passed to a tile parameter: the argument, the tensor, the parameter's mode
    (`In`, `Out`, `InOut`) and the view's box (per dimension (offset, extent) or None; None
    for all: unknown here)."""

    kw: A.Keyword
    t: object
    mode: str
    box: Optional[list]


class CollectiveChecks:
    """Part of `Body`: collective statements and task placement on the mesh."""

    # -- collective statements
    def stmt_Collective(self, s: A.Collective, scope: Scope) -> None:
        env = self.env
        kind = s.kind
        if env.mesh is None:
            self.error(s.span, "no-mesh", f"`{kind}` moves data between the devices of a mesh, "
                       "but the module has no mesh", NO_MESH_HELP)
            return
        src = self.collective_tensor(s.source, scope, "source")
        dst = self.collective_tensor(s.into, scope, "destination")
        over = self.collective_words(s, scope)
        if src is None or dst is None or over is False:
            return
        if src.name == dst.name:
            self.error(s.into.span, "collective-same", f"`{kind}` reads `{src.name}` and writes "
                       "it: a collective names a different destination",
                       "a tensor's layout is its type: declare a second tensor with the layout "
                       "the collective makes")
            return
        if dst.kind == "input":
            self.error(s.into.span, "read-only", f"`{dst.name}` is an input and is read-only, "
                       f"but `{kind}` writes it", f"declare `{dst.name}` as `inout` or `scratch`")
            return
        same = (src.dtype == dst.dtype and len(src.dims) == len(dst.dims)
                and all(self.decide(a, "==", b) is not False for a, b in zip(src.dims, dst.dims)))
        if not same:
            self.error(s.span, "collective-shape", f"`{kind}` keeps the global shape and dtype, "
                       f"but `{src.name}` is {_type(src)} and `{dst.name}` is {_type(dst)}",
                       "declare both sides with the same type; only their layouts differ")
            return
        for a, b in zip(src.dims, dst.dims):
            if self.decide(a, "==", b) is None:
                self.env.checks.append(_check(a, "==", b, same_shape_reason(kind, src.name,
                                                                             dst.name), s.span))
        if not (src.sound and dst.sound) or {src.name, dst.name} & self.env.bad_layouts:
            return
        self.collective_layouts(s, src, dst, over)

    def collective_tensor(self, n: A.Name, scope: Scope, role: str):
        """The module tensor `n` names (reported otherwise)."""
        b = scope.lookup(n.id)
        t = self.env.tensors.get(n.id) if b is None else None
        if t is not None:
            return t
        kind = self.env.kind_of(n.id)
        if b is None and kind == "tensor":
            return None  # its declaration is wrong: reported
        if b is None and kind is None:
            self.error(n.span, "unknown-name", f"unknown tensor `{n.id}`",
                       did_you_mean(n.id, list(self.env.tensors)))
        else:
            what = "a local name" if b is not None else article(kind)
            self.error(n.span, "not-a-tensor", f"the {role} of a collective is a tensor; `{n.id}` "
                       f"is {what}")
        return None

    def collective_words(self, s: A.Collective, scope: Scope):
        """`over` (the axis name, None for `relayout`), after checking `over`, `op` and `dim`
        against what the collective takes; False after an error."""
        kind, ok = s.kind, True
        reduces = kind in ("allreduce", "reduce_scatter")
        if s.op is not None and not reduces:
            self.error(s.op.span, "collective-arg", f"`{kind}` does not reduce: it takes no `op`")
            ok = False
        elif s.op is not None and s.op.id not in REDUCE_OPS:
            self.error(s.op.span, "collective-arg", f"`{s.op.id}` is not a reduction of "
                       f"`{kind}`", "`op` is `sum`, `max` or `min`")
            ok = False
        if s.dim is not None and kind != "reduce_scatter":
            self.error(s.dim.span, "collective-arg", f"`{kind}` takes no `dim`",
                       "only `reduce_scatter` names the dimension it scatters")
            ok = False
        if s.dim is None and kind == "reduce_scatter":
            self.error(s.span, "collective-arg", "`reduce_scatter` needs the dimension it "
                       "scatters: `dim = d`")
            ok = False
        if kind == "relayout":
            if s.over is not None:
                self.error(s.over.span, "collective-arg", "`relayout` takes no `over`: it makes "
                           "the destination's layout from the source's, over every axis")
                return False
            return None if ok else False
        if s.over is None:
            self.error(s.span, "collective-arg", f"`{kind}` needs the mesh axis it runs over: "
                       "`over = axis`")
            return False
        if not mesh_axis(self.env, self.diags, s.over):
            return False
        return s.over.id if ok else False

    def collective_layouts(self, s: A.Collective, src, dst, over: Optional[str]) -> None:
        """The layouts the collective needs on each side (docs/distributed.md, the table)."""
        kind = s.kind
        a, b = src.layout_or_replicated(), dst.layout_or_replicated()
        call = f"{kind}({src.name}, into = {dst.name}{'' if over is None else f', over = {over}'})"

        def source_error(need: str) -> None:
            self.error(s.source.span, "collective-layout", f"`{kind}` over {over} needs a source "
                       f"{need}, but `{src.name}` is `{a.text()}`")

        def make(want: LayoutInfo) -> None:
            if (want.dims, set(want.partial)) != (b.dims, set(b.partial)):
                self.error(s.into.span, "collective-layout", f"`{call}` makes `{want.text()}`, "
                           f"but `{dst.name}` is declared `{b.text()}`",
                           f"declare `{dst.name}: {_type(dst)} @ {want.text()}`")

        if kind == "relayout":
            extra = [p for p in b.partial if p not in a.partial]
            if extra:
                self.error(s.into.span, "collective-layout", f"`relayout` cannot make addends: "
                           f"`{dst.name}` is `{b.text()}` but `{src.name}` is `{a.text()}`",
                           f"declare `{dst.name}` without `partial({', '.join(extra)})`")
            return
        d = a.sharded_dim(over)
        rest = tuple(p for p in a.partial if p != over)
        if kind == "allreduce":
            if d is not None:
                source_error(f"partial over {over} (or replicated over it)")
                return
            make(LayoutInfo(a.dims, rest))
        elif kind == "reduce_scatter":
            if over not in a.partial:
                source_error(f"partial over {over}")
                return
            k = self.compile_int(s.dim, Scope(), "a `dim`")
            if k is None:
                return
            if not 0 <= k < len(a.dims):
                self.error(s.dim.span, "collective-arg", f"`{src.name}` has {len(a.dims)} "
                           f"dimensions; `dim = {int_text(k)}` is not one of them")
                return
            if a.dims[k] is not None:
                self.error(s.dim.span, "collective-layout", f"`reduce_scatter` shards dimension "
                           f"{k} over {over}, but `{src.name}` (`{a.text()}`) already shards it "
                           f"over {a.dims[k]}")
                return
            make(LayoutInfo(_with(a.dims, k, over), rest))
        elif kind == "allgather":
            if d is None:
                source_error(f"sharded over {over} (`S({over})` on a dimension)")
                return
            make(LayoutInfo(_with(a.dims, d, None), a.partial))
        else:  # all_to_all: S(over) moves from dimension d to the one B shards over it
            if d is None:
                source_error(f"sharded over {over} (`S({over})` on a dimension)")
                return
            j = b.sharded_dim(over)
            if j is None or j == d:
                self.error(s.into.span, "collective-layout", f"`all_to_all` moves the sharding "
                           f"over {over} to another dimension, but `{dst.name}` is `{b.text()}` "
                           f"and `{src.name}` is `{a.text()}`",
                           f"declare `{dst.name}` with `S({over})` on a dimension other than {d}")
                return
            make(LayoutInfo(_with(_with(a.dims, d, None), j, over), a.partial))

    # -- where a task runs
    def placement(self, s: A.CallStmt, operands: list[Operand]) -> None:
        """The kernel call `s`'s operands against the mesh (see the module's docstring)."""
        mesh = self.env.mesh
        task = s.callee.id
        pins: dict[str, list[tuple[Operand, Optional[sym.Expr]]]] = {}
        if any(op.t.name in self.env.bad_layouts for op in operands):
            return  # a layout was wrong (reported): placement would be checked against a guess
        for op in operands:
            lay = op.t.layout_or_replicated()
            if lay.partial and op.mode == "In":
                ax = lay.partial[0]
                self.error(op.kw.span, "partial-read", f"`{op.t.name}` holds partial sums over "
                           f"{ax}: a kernel cannot read it",
                           f"insert `allreduce({op.t.name}, into = Z, over = {ax})` and read `Z` "
                           f"(declared without `partial({ax})`)")
            for d, ax in enumerate(lay.dims):
                if ax is None or mesh.axis(ax) is None:
                    continue
                coord = self.shard_of(op, d, mesh.axis(ax).size, ax)
                pins.setdefault(ax, []).append((op, coord))
        for ax, pinned in pins.items():
            first = pinned[0]
            for other in pinned[1:]:
                if first[1] is None or other[1] is None:
                    continue
                if self.decide(first[1], "!=", other[1]) is True:
                    self.error(s.callee.span, "no-device", f"`{task}` has no device to run on: "
                               f"`{first[0].t.name}` is on {ax} = {show(first[1])} and "
                               f"`{other[0].t.name}` on {ax} = {show(other[1])}",
                               "a task runs on the device that holds all its operands: take "
                               "views of the same shard, or move the data with a collective",
                               notes=[Note(first[0].kw.span, f"on {ax} = {show(first[1])}"),
                                      Note(other[0].kw.span, f"on {ax} = {show(other[1])}")])
                    break
        for op in operands:
            if op.mode == "In":
                continue
            lay = op.t.layout_or_replicated()
            for ax, pinned in pins.items():
                if ax in lay.dims or ax in lay.partial:
                    continue
                by = pinned[0][0]
                self.error(op.kw.span, "replica-write", f"`{op.t.name}` is replicated over {ax}, "
                           f"but `{task}` runs only on one {ax} coordinate (it reads "
                           f"`{by.t.name}` sharded over {ax}): the other replicas would miss "
                           "the write",
                           f"declare `{op.t.name}` sharded over {ax} (`S({ax})` on the dimension "
                           f"the view splits), or write a sharded tensor and `allgather(..., "
                           f"into = {op.t.name}, over = {ax})`")
            for ax in lay.partial:
                if ax in pins:
                    continue
                self.error(op.kw.span, "partial-write", f"`{op.t.name}` holds partial sums over "
                           f"{ax}, but `{task}` runs on every {ax} device: each would add its "
                           "contribution",
                           f"a task writes an addend of `{op.t.name}` from one {ax} coordinate: "
                           f"give it an operand sharded over {ax}")

    def shard_of(self, op: Operand, d: int, p: sym.Expr, ax: str) -> Optional[sym.Expr]:
        """The coordinate along `ax` of the shard `op`'s view lies in (dimension `d` of its
        tensor is sharded over `ax`, of size `p`), None when not known here; an error when the
        view provably spans two shards."""
        if op.box is None or op.box[d] is None:
            return None
        off, ext = op.box[d]
        n = op.t.dims[d]
        if sym.const_value(p) is None:
            return None
        shard = sym.floordiv(n, p)
        first = sym.floordiv(off, shard) if sym.const_value(shard) != 0 else None
        if first is None:
            return None
        last = sym.floordiv(sym.sub(sym.add(off, ext), 1), shard)
        crosses = self.decide(ext, ">", shard) is True or self.decide(first, "!=", last) is True
        if crosses:
            a, b = sym.const_value(first), sym.const_value(last)
            span = (f"the shards of {ax} = {a} {'and' if b == a + 1 else 'to'} {b}"
                    if a is not None and b is not None else f"more than one shard of {ax}")
            self.error(op.kw.span, "shard-crossing", f"`{self.text(op.kw)}` spans {span} "
                       f"({show(shard)} {dim_words(d, len(op.t.dims))} each): a task reads one device's "
                       "data",
                       f"split the view at shard boundaries, or `allgather` `{op.t.name}`")
            return None
        return first


def same_shape_reason(kind: str, source: str, into: str) -> str:
    """The run-time check of a collective whose two shapes could not be proved equal."""
    return f"`{kind}` needs `{source}` and `{into}` of the same shape"


def _with(dims: tuple, k: int, value) -> tuple:
    return dims[:k] + (value,) + dims[k + 1:]


def _type(t) -> str:
    return f"{t.dtype}[{', '.join(show(d) for d in t.dims)}]"


def _check(lhs: sym.Expr, op: str, rhs: sym.Expr, reason: str, span: A.Span):
    from ..env import RuntimeCheck

    return RuntimeCheck(sym.Check(lhs, op, rhs, reason), span)
