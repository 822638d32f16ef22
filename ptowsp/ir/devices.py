"""A mesh program as a single-device program: `single_device(m)`, run by the driver before the
optimiser, so no pass and no back end sees a mesh, a layout or a `Collective`.

This is the first slice of the lowering that docs/distributed.md plans ("How it is built
(plan)"): today it handles a mesh of exactly one device, where every layout means "all of it
here" and every collective moves nothing, so each `Collective` becomes a copy of its source
into its destination: a loop nest of tasks over tiles of the tensor (rows and columns in
blocks, leading dimensions one at a time), whose dependencies are inferred like any task's
(the copy waits for the source's writers, and later readers of the destination wait for it).
A reduction over one device is its one addend, so `allreduce` and `reduce_scatter` copy too.

A mesh of more than one device (or one sized by a sym, known only at run time) is refused
here, at its declaration, for every target, until the device dimension is lowered.
"""

from __future__ import annotations

from dataclasses import replace

from .. import sym
from ..diagnostics import Diagnostic, WspError
from ..dtypes import FLOAT_DTYPES
from . import nodes as N
from .visit import map_lists, walk

NOT_YET = "meshes of more than one device are not yet run by wspc (docs/distributed.md)"
BLOCK = 64  # the copy's tile edge along a dimension longer than this (or sized at run time)


def single_device(m: N.Module) -> N.Module:
    """`m` without its mesh (see the module's docstring); `m` itself when it has none."""
    if m.mesh is None:
        return m
    if sym.const_value(m.mesh.devices) != 1:
        sized = [a for a in m.mesh.axes if sym.const_value(a.size) is None]
        help_text = (f"`{sized[0].name} = {sym.to_str(sized[0].size)}` is known only at run "
                     "time; only a mesh of one device (`mesh tp = 1`) runs today"
                     if sized else "only a mesh of one device (`mesh tp = 1`) runs today")
        raise WspError([Diagnostic(m.mesh.span, "mesh", NOT_YET, help_text)], dict(m.sources))
    # every variable name of the module: the copies' loop variables are named apart from them
    used = {s.name for s in m.syms}
    for s in m.schedules:
        for st in walk(s.body):
            if isinstance(st, (N.Loop, N.Read)):
                used.add(st.var)
            elif isinstance(st, (N.Send, N.Consume)):
                used.add(st.item)
            elif isinstance(st, N.Process) and st.id_var is not None:
                used.add(st.id_var)
    kernels: dict[str, N.Kernel] = {}
    tensors = {t.name: t for t in m.tensors}

    taken = {k.name for k in m.kernels}
    channels = {c.name: c for c in m.channels}

    def lowered(stmts: tuple, items: tuple) -> tuple:
        """`stmts` with each collective a copy; `items` are the (channel, item variable) of
        the enclosing consumes, whose slot boxes each copy reads (as every task of a consume
        body does, so that the item is freed after it: ir/nodes.py, "CSP")."""
        out = []
        for st in stmts:
            if isinstance(st, N.Collective):
                extra = tuple(_slot_access(channels[ch], item) for ch, item in items)
                out.append(_copy(st, tensors[st.source], tensors[st.into], kernels, used, taken,
                                 extra))
            elif isinstance(st, N.Consume):
                out.append(replace(st, body=lowered(st.body, items + ((st.channel, st.item),))))
            else:
                out.append(map_lists(st, lambda body: lowered(body, items)))
        return tuple(out)

    schedules = tuple(replace(s, body=lowered(s.body, ())) for s in m.schedules)
    return replace(m, mesh=None, tensors=tuple(replace(t, layout=None) for t in m.tensors),
                   schedules=schedules, kernels=m.kernels + tuple(kernels.values()))


def _slot_access(c: N.Channel, item: str) -> N.Access:
    """A read of the slot box of item `item` of channel `c`."""
    return N.Access(c.slots, "r", *c.slot_box(item))


def _fresh(base: str, used: set[str]) -> str:
    name, k = base, 0
    while name in used:
        k += 1
        name = f"{base}_{k}"
    used.add(name)
    return name


def _copy(st: N.Collective, src: N.TensorDecl, dst: N.TensorDecl, kernels: dict,
          used: set[str], taken: set[str], extra: tuple = ()) -> N.Stmt:
    """The loop nest copying `src` into `dst` (same shape and dtype) tile by tile."""
    dims = src.dims
    rank = len(dims)
    tiled = list(range(max(rank - 2, 0), rank))  # the dimensions a tile spans
    edges = []
    for d in tiled:
        n = sym.const_value(dims[d])
        edges.append(n if n is not None and 1 <= n <= BLOCK else BLOCK)
    rows = edges[0] if len(tiled) == 2 else 1
    cols = edges[-1] if tiled else 1
    kernel = _kernel(src.dtype, rows, cols, kernels, taken)
    offsets: list[sym.Expr] = []
    extents: list[sym.Expr] = []
    partial = [False, False]
    loops: list[tuple[str, sym.Expr]] = []
    for d in range(rank):
        var = _fresh(f"{st.kind}_{d}", used)
        if d not in tiled:
            loops.append((var, dims[d]))
            offsets.append(sym.var(var))
            extents.append(sym.const(1))
            continue
        edge = edges[tiled.index(d)]
        loops.append((var, sym.ceildiv(dims[d], edge)))
        start = sym.mul(sym.var(var), edge)
        ext = sym.sub(sym.min_(dims[d], sym.add(start, edge)), start)
        full = sym.const_value(dims[d]) is not None and sym.const_value(dims[d]) % edge == 0
        if full:
            ext = sym.const(edge)
        offsets.append(start)
        extents.append(ext)
        partial[(0 if len(tiled) == 2 and d == tiled[0] else 1)] = not full
    row_dim = tiled[0] if len(tiled) == 2 else None
    col_dim = tiled[-1] if tiled else None
    args = tuple(
        N.TileArg(param, t.name, mode, tuple(offsets), tuple(extents), row_dim, col_dim,
                  partial=(partial[0], partial[1]), span=st.span)
        for param, t, mode in (("src", src, "r"), ("dst", dst, "w")))
    words = ", ".join(w for w in (f"into = {st.into}",
                                  f"over = {st.over}" if st.over else "") if w)
    task: N.Stmt = N.Task(kernel.name, tuple(sym.var(v) for v, _ in loops), args,
                          f"{st.kind}({st.source}, {words})", st.span, extra)
    for var, extent in reversed(loops):
        task = N.Loop(var, extent, "grid", (task,))
    return task


def _kernel(dtype: str, rows: int, cols: int, kernels: dict, taken: set[str]) -> N.Kernel:
    """The copy kernel of `dtype` tiles of `rows` x `cols` (one per shape, shared; named
    apart from the program's kernels)."""
    key = f"mesh_copy_{dtype}_{rows}x{cols}"
    if key not in kernels:
        name = _fresh(key, taken)
        pad = 0.0 if dtype in FLOAT_DTYPES else (False if dtype == "bool" else 0)
        params = (N.KParam("src", "tile", dtype, "In", rows, cols, pad),
                  N.KParam("dst", "tile", dtype, "Out", rows, cols, pad))
        kernels[key] = N.Kernel(name, "copy", params,
                                 (N.Op("param", (), (rows, cols), dtype, "src"),), (("dst", 0),))
    return kernels[key]
