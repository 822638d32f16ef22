"""A collective on a mesh of several devices as tile tasks (docs/distributed.md, "How it is
built"): one task per (device, tile of the destination's local part), over the device
dimension that `ir/devices.py` gave every tensor.

One scheme covers the five statements. For each dimension of the tensor, the destination tile
of device d is a box in global coordinates inside one shard of the destination (d's) and one
shard of the source: the dimension is cut into segments of N / lcm(p_dst, p_src) (both shard
sizes are multiples of it), and each segment into tiles. Then, per mesh axis, the source
device is: the owner of the segment when the source shards a dimension over the axis; every
coordinate of the axis, in order 0, 1, ... when the collective reduces over it (`allreduce` and
`reduce_scatter` over `over`; `relayout` over the source's partial axes the destination drops);
d's own coordinate otherwise (d holds a replica, or its own addend). A reducing task's kernel
takes one `In` tile per device of the group (`src_0` .. `src_{g-1}`) and combines them in that
fixed order in one kernel (f16 and bf16 values are held in f32 until the store rounds them, so
they accumulate in f32 and round once), so results never depend on timing; the others copy.
`Kernel.comm` says what each task moves.

Program order among a device's collectives: every task of collective k of device d writes its
own element of `mesh@order[d, k, :]` and reads all of `mesh@order[d, k - 1, :]` (an `Access`,
no data), so collective k starts on d after every tile of collective k - 1 there has finished,
and the tiles of one collective stay independent of each other.
"""

from __future__ import annotations

from math import gcd
from typing import Optional

from .. import sym
from ..dtypes import FLOAT_DTYPES, size_of
from . import nodes as N

BLOCK = 64  # a tile's column edge along columns sized at run time
TILE_BYTES = 256 * 1024  # a tile's most bytes: one message on MPI (see tile_shape)
RUN_TIME_ROWS = 64  # a tile's most rows along rows sized at run time (see tile_shape)
ORDER = "mesh@order"  # the order tensor (no source name contains `@`)

_COMBINE = {"sum": "add", "max": "maximum", "min": "minimum"}


def tile_shape(rows: Optional[int], cols: Optional[int], esize: int) -> tuple[int, int]:
    """The edges (rows, columns) of a collective's tile over a segment of `rows` x `cols`
    elements of `esize` bytes (None: an extent sized at run time).

    A tile is one message between two devices on MPI, and the mpich wheel moves 16 KiB messages
    at a third of the bandwidth of 256 KiB ones (docs/running.md, "Running on MPI", Speed), so a
    tile takes whole rows of the segment up to TILE_BYTES: whole rows of a local array are
    contiguous, so the holder sends the tile from the tensor itself. Rows sized at run time stop
    at RUN_TIME_ROWS: the last tile of such a segment is partial, and a partial tile runs on a
    padded copy of the whole tile (a one-token decode step would copy TILE_BYTES); and the
    cycle model pipelines a collective's messages by tile, so its last tile is its tail (the
    tensor-parallel MLP's critical path at T = 256 grows by a tenth with 256-row tiles of its
    64 columns)."""
    if cols is not None and cols >= 1:
        c = cols if cols * esize <= TILE_BYTES else max(BLOCK, TILE_BYTES // esize // BLOCK * BLOCK)
    else:
        c = BLOCK
    r = max(1, TILE_BYTES // (c * esize))
    r = min(r, rows) if rows is not None and rows >= 1 else min(r, RUN_TIME_ROWS)
    return r, c


class Tiler:
    """Makes the tile tasks of the collectives of one module (see the module's docstring)."""

    def __init__(self, axes: tuple[tuple[str, int], ...], placed: dict[str, N.Placed],
                 tensors: dict[str, N.TensorDecl], fresh, taken: set[str]):
        self.axes = axes
        self.sizes = dict(axes)
        self.placed = placed
        self.tensors = tensors  # the lowered declarations (dtype)
        self.fresh = fresh  # base name -> a variable name used nowhere else
        self.taken = taken  # kernel names
        self.kernels: dict[str, N.Kernel] = {}
        self.count = 0  # collectives lowered so far (their index in program order)
        self.most_tiles: sym.Expr = sym.const(1)  # the most tiles one device's collective has

    def stride(self, axis: str) -> int:
        n = 1
        for name, p in reversed(self.axes):
            if name == axis:
                return n
            n *= p
        raise KeyError(axis)

    def tasks(self, st: N.Collective) -> N.Stmt:
        """The loop nest of the tile tasks of collective `st`."""
        src, dst = self.placed[st.source], self.placed[st.into]
        ls = src.layout or N.Layout((None,) * len(src.dims))
        ld = dst.layout or N.Layout((None,) * len(dst.dims))
        if st.kind in ("allreduce", "reduce_scatter"):
            reduce = (st.over,)
        elif st.kind == "relayout":
            reduce = tuple(a for a, _ in self.axes if a in ls.partial and a not in ld.partial)
        else:
            reduce = ()
        op = st.op or "sum"
        dtype = self.tensors[st.source].dtype
        rank = len(src.dims)
        tiled = list(range(max(rank - 2, 0), rank))
        coords = {a: self.fresh(f"{st.kind}_{a}") for a, _ in self.axes}
        cvar = {a: sym.var(v) for a, v in coords.items()}
        loops: list[tuple[str, sym.Expr]] = [(coords[a], sym.const(p)) for a, p in self.axes]
        tile_loops: list[tuple[str, sym.Expr]] = []
        dst_off, src_off, exts = [], [], []
        partial = [False, False]
        edges = []
        src_coord: dict[str, sym.Expr] = {}
        segs = [sym.floordiv(src.dims[d], self.lcm(ls.dims[d], ld.dims[d])) for d in range(rank)]
        shape = tile_shape(sym.const_value(segs[tiled[0]]) if len(tiled) == 2 else 1,
                           sym.const_value(segs[tiled[-1]]) if tiled else 1, size_of(dtype))
        for d in range(rank):
            n = src.dims[d]
            a_d, a_s = ld.dims[d], ls.dims[d]
            p_d = self.sizes[a_d] if a_d else 1
            lcm = self.lcm(a_s, a_d)
            seg = segs[d]
            base = sym.mul(cvar[a_d], sym.floordiv(n, p_d)) if a_d else sym.const(0)
            segc = sym.const_value(seg)
            if d in tiled:
                edge = shape[0] if len(tiled) == 2 and d == tiled[0] else shape[1]
            else:
                edge = 1
            edges.append(edge)
            full = segc is not None and segc % edge == 0
            local: sym.Expr = sym.const(0)
            nq = lcm // p_d
            if nq > 1:
                q = self.fresh(f"{st.kind}_seg{d}")
                tile_loops.append((q, sym.const(nq)))
                local = sym.mul(sym.var(q), seg)
            nk = sym.ceildiv(seg, edge)
            start: sym.Expr = sym.const(0)
            if sym.const_value(nk) != 1:
                k = self.fresh(f"{st.kind}_{d}")
                tile_loops.append((k, nk))
                start = sym.mul(sym.var(k), edge)
            ext = sym.const(edge) if full else sym.sub(sym.min_(seg, sym.add(start, edge)), start)
            dst_off.append(sym.add(local, start))
            glob = sym.add(sym.add(base, local), start)
            if a_s:
                shard = sym.floordiv(n, self.sizes[a_s])
                owner = sym.floordiv(sym.add(base, local), shard)
                src_coord[a_s] = owner
                src_off.append(sym.sub(glob, sym.mul(owner, shard)))
            else:
                src_off.append(glob)
            exts.append(ext)
            if d in tiled:
                partial[0 if len(tiled) == 2 and d == tiled[0] else 1] = not full
        rows = edges[tiled[0]] if len(tiled) == 2 else 1
        cols = edges[tiled[-1]] if tiled else 1
        dev = self.device({a: cvar[a] for a, _ in self.axes})
        members = self.members(reduce)
        sources = []
        for member in members:
            where = {a: src_coord.get(a, member.get(a, cvar[a])) for a, _ in self.axes}
            sources.append(self.device(where))
        group = len(members)
        row_dim = tiled[0] + 1 if len(tiled) == 2 else None
        col_dim = tiled[-1] + 1 if tiled else None
        one = (sym.const(1),)
        args = []
        for i, s_dev in enumerate(sources):
            args.append(N.TileArg(f"src_{i}" if group > 1 else "src", st.source, "r",
                                  (s_dev, *src_off), one + tuple(exts), row_dim, col_dim,
                                  partial=(partial[0], partial[1]), span=st.span))
        args.append(N.TileArg("dst", st.into, "w", (dev, *dst_off), one + tuple(exts), row_dim,
                              col_dim, partial=(partial[0], partial[1]), span=st.span))
        tile_bytes: sym.Expr = sym.const(size_of(dtype))
        for e in exts:
            tile_bytes = sym.mul(tile_bytes, e)
        if group > 1:
            moved = sym.mul(tile_bytes, group - 1)
        else:  # a copy moves its tile unless it is on the same device
            moved = sym.mul(tile_bytes, sym.min_(sym.abs_(sym.sub(sources[0], dev)), 1))
        kind, over = self.comm_kind(st, ls, ld, reduce)
        comm = N.Comm(kind, over, group if group > 1 else (self.sizes[over] if over else 1),
                      moved, op if reduce else None)
        kernel = self.kernel(dtype, rows, cols, sources, op if group > 1 else None, comm)
        # the order among the device's collectives (see the module's docstring)
        lin: sym.Expr = sym.const(0)
        tiles: sym.Expr = sym.const(1)
        for var, extent in tile_loops:
            lin = sym.add(sym.mul(lin, extent), sym.var(var))
            tiles = sym.mul(tiles, extent)
        self.most_tiles = sym.max_(self.most_tiles, tiles)
        k = self.count
        self.count += 1
        extra = [N.Access(ORDER, "w", (dev, sym.const(k), lin), (one * 3))]
        if k > 0:
            extra.append(N.Access(ORDER, "r", (dev, sym.const(k - 1), sym.const(0)),
                                  (sym.const(1), sym.const(1), _MOST)))
        words = ", ".join(w for w in (f"into = {st.into}", f"over = {st.over}" if st.over else "",
                                      f"op = {st.op}" if st.op else "") if w)
        task: N.Stmt = N.Task(kernel.name, tuple(sym.var(v) for v, _ in loops + tile_loops),
                              tuple(args), f"{st.kind}({st.source}, {words})", st.span,
                              tuple(extra), device=dev)
        for var, extent in reversed(loops + tile_loops):
            task = N.Loop(var, extent, "grid", (task,))
        return task

    def lcm(self, a: Optional[str], b: Optional[str]) -> int:
        """The number of segments a dimension sharded over axes `a` and `b` (None: not
        sharded) is cut into: each inside one shard of both."""
        p, q = (self.sizes[a] if a else 1), (self.sizes[b] if b else 1)
        return p * q // gcd(p, q)

    def device(self, where: dict[str, sym.Expr]) -> sym.Expr:
        """The row-major device number of the coordinates `where` (every axis)."""
        dev: sym.Expr = sym.const(0)
        for a, _ in self.axes:
            dev = sym.add(dev, sym.mul(where[a], self.stride(a)))
        return dev

    def members(self, reduce: tuple[str, ...]) -> list[dict[str, sym.Expr]]:
        """The coordinates of the reduce axes of each member of a group, row-major."""
        out: list[dict[str, sym.Expr]] = [{}]
        for a in reduce:
            out = [{**m, a: sym.const(i)} for m in out for i in range(self.sizes[a])]
        return out

    def comm_kind(self, st: N.Collective, ls: N.Layout, ld: N.Layout,
                  reduce: tuple[str, ...]) -> tuple[str, Optional[str]]:
        """The kind and axis `Comm` names (a `relayout` as the collective it amounts to)."""
        if st.kind != "relayout":
            return st.kind, st.over
        if reduce:
            a = reduce[0]
            return ("reduce_scatter" if a in ld.dims else "allreduce"), a
        moved = [a for a in ls.dims if a and a not in ld.dims]
        if moved:
            return ("all_to_all" if moved[0] in ld.dims else "allgather"), moved[0]
        changed = [a for a in ld.dims if a and a not in ls.dims]
        return "allgather", (changed[0] if changed else (self.axes[0][0]))

    def kernel(self, dtype: str, rows: int, cols: int, sources: list, op: Optional[str],
               comm: N.Comm) -> N.Kernel:
        """The kernel of a tile task: a copy of `src`, or the fixed-order combination of
        `src_0` .. `src_{g-1}` by `op`; one per shape, group and comm record."""
        group = len(sources)
        key = (dtype, rows, cols, group, op, comm.kind, comm.over, comm.group, comm.op,
               comm.bytes)
        if key in self.kernels:
            return self.kernels[key]
        base = f"mesh_{comm.kind}_{op + '_' if op else ''}{dtype}_{rows}x{cols}"
        name, i = base, 0
        while name in self.taken:
            i += 1
            name = f"{base}_{i}"
        self.taken.add(name)
        pad = 0.0 if dtype in FLOAT_DTYPES else (False if dtype == "bool" else 0)
        names = [f"src_{i}" for i in range(group)] if group > 1 else ["src"]
        params = tuple(N.KParam(p, "tile", dtype, "In", rows, cols, pad) for p in names)
        params += (N.KParam("dst", "tile", dtype, "Out", rows, cols, pad),)
        ops = [N.Op("param", (), (rows, cols), dtype, names[0])]
        combine = _COMBINE[op] if op else None
        if dtype == "bool":  # a sum or max of booleans is their `or` (NumPy adds them so)
            combine = "and" if op == "min" else "or"
        acc = 0
        for p in names[1:]:  # ((src_0 . src_1) . src_2) ...: the fixed order
            ops.append(N.Op("param", (), (rows, cols), dtype, p))
            ops.append(N.Op(combine, (acc, len(ops) - 1), (rows, cols), dtype))
            acc = len(ops) - 1
        kernel = N.Kernel(name, "copy" if group == 1 else f"{comm.kind}_{op}", params,
                          tuple(ops), (("dst", len(ops) - 1),), comm=comm)
        self.kernels[key] = kernel
        return kernel

    def order_tensor(self) -> Optional[N.TensorDecl]:
        """The scratch tensor of the order among collectives (None when there is none)."""
        if self.count == 0:
            return None
        devices = 1
        for _, p in self.axes:
            devices *= p
        return N.TensorDecl(ORDER, "scratch", "u8",
                            (sym.const(devices), sym.const(self.count), self.most_tiles))


# the extent of the read of the previous collective's order elements: all of them (the
# module's `most_tiles`, filled in when every collective is known: `ir/devices.py`)
_MOST = sym.var("mesh@most_tiles")
MOST_TILES = "mesh@most_tiles"
