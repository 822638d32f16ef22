"""A mesh program as a single-device program, run by the driver before the optimiser, so no
pass and no back end sees a mesh, a layout or a `Collective` (docs/distributed.md, "How it is
built").

`lower_devices(m, mesh, bind)` first fixes the mesh's sizes (compile-time: a literal, `--mesh
tp=4`, or the bound sym that sizes an axis, substituted everywhere), then:
- a mesh of one device: `single_device` drops the layouts and makes each `Collective` a copy
  (a loop nest of tile tasks whose dependencies are inferred like any task's; a reduction over
  one device is its one addend);
- a mesh of several devices: `_Lowering` gives every tensor a leading device dimension and its
  local shape (`W: f32[D, F] @ [R, S(tp)]` on tp = 4 becomes `W: f32[4, D, F / 4]`), places
  each task on its device (an expression of its views where an operand is sharded, checked
  equal across operands, else a loop over the axis's coordinates), makes its views local, sets
  `Task.device`, and makes each collective tile tasks (`ir/collective_tiles.py`). The
  tensors' global shapes and layouts stay in `Module.devices`, by which `ir/device_arrays.py`
  scatters the caller's arrays before a run and gathers them after. Each pipe, and each
  `P.seq` or `sequential` block holding no collective, runs once per device (a *device region*:
  `_Lowering.device_region`), so that it orders each device's tasks among themselves and each
  device has its own instance of a pipe's channels (docs/distributed.md, "Channels, pipes and
  events on a mesh").
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional

from .. import sym
from ..diagnostics import Diagnostic, InternalError, Note, WspError, did_you_mean
from ..dtypes import FLOAT_DTYPES
from ..spans import Span
from . import nodes as N
from .collective_tiles import MOST_TILES, Tiler
from .visit import map_lists, schedule_keys, substitute, walk, written_tensors

BLOCK = 64  # the copy's tile edge along a dimension longer than this (or sized at run time)
_CLI = Span("<command line>", 0, 0, 0, 0)


def lower_devices(m: N.Module, mesh: Optional[Mapping[str, int]] = None,
                  bind: Optional[Mapping[str, int]] = None) -> N.Module:
    """`m` without its mesh (see the module's docstring), its axes sized by `mesh` (axis name:
    devices) and the syms of `bind` that size an axis; `m` itself when it has no mesh."""
    if m.mesh is None:
        if mesh:
            where = Span("--mesh " + ", ".join(f"{a}={n}" for a, n in mesh.items()), 0, 0, 0, 0)
            raise WspError([Diagnostic(where, "mesh", f"module `{m.name}` has no mesh, so "
                                       "there are no axes to size",
                                       "declare one (`mesh tp = 4`, docs/distributed.md), or "
                                       "run without --mesh")], dict(m.sources))
        return m
    sizes = mesh_sizes(m, mesh or {}, bind or {})
    m = _sized(m, sizes)
    devices = 1
    for n in sizes.values():
        devices *= n
    if devices == 1:
        return single_device(m)
    return _Lowering(m, sizes).run()


def mesh_sizes(m: N.Module, mesh: Mapping[str, int], bind: Mapping[str, int]) -> dict[str, int]:
    """Each axis's number of devices: `mesh` gives it (binding the sym that sizes the axis, or
    overriding a literal), else `bind` binds its sym, else the sym's default, else its literal;
    every inconsistency is a diagnostic (docs/running.md, "--mesh")."""
    assert m.mesh is not None
    names = [a.name for a in m.mesh.axes]
    syms = {s.name: s for s in m.syms}
    diags = []
    for name, n in mesh.items():
        if name not in names:
            diags.append(Diagnostic(Span(f"--mesh {name}={n}", 0, 0, 0, 0), "mesh",
                                    f"the mesh of `{m.name}` has no axis `{name}`",
                                    did_you_mean(name, names) or f"its axes: {', '.join(names)}"))
        elif isinstance(n, bool) or not isinstance(n, int) or n < 1:
            diags.append(Diagnostic(Span(f"--mesh {name}={n}", 0, 0, 0, 0), "mesh",
                                    f"mesh axis `{name}` needs at least 1 device, not {n!r}"))
    if diags:
        raise WspError(diags, dict(m.sources))
    out: dict[str, int] = {}
    by_sym: dict[str, tuple[str, int]] = {}  # sym: (what sized it, size)
    for a in m.mesh.axes:
        size = sym.const_value(a.size)
        var = None if size is not None else sym.to_str(a.size)
        if a.name in mesh:
            n, what = int(mesh[a.name]), f"--mesh {a.name}={mesh[a.name]}"
        elif var is not None and var in bind:
            n, what = int(bind[var]), f"--bind {var}={bind[var]}"
        elif var is not None and syms.get(var) is not None and syms[var].default is not None:
            n, what = syms[var].default, f"the default of `{var}`"
        elif var is not None:
            raise WspError([Diagnostic(a.span, "mesh", f"mesh axis `{a.name}` is sized by "
                                       f"`{var}`, which is not bound: the mesh's size is fixed "
                                       "when the module is compiled",
                                       f"give it with `--mesh {a.name}=N` or `--bind {var}=N` "
                                       f"(Python: `compile(mesh={{\"{a.name}\": N}})`)")],
                           dict(m.sources))
        else:
            n, what = size, "its declaration"
        if n < 1:
            raise WspError([Diagnostic(a.span, "mesh", f"mesh axis `{a.name}` needs at least 1 "
                                       f"device, but {what} makes it {n}")], dict(m.sources))
        if var is not None:
            if var in bind and int(bind[var]) != n:
                raise WspError([Diagnostic(a.span, "mesh", f"{what} and --bind {var}={bind[var]} "
                                           f"disagree: axis `{a.name}` is sized by `{var}`",
                                           "give the size once")], dict(m.sources))
            if var in by_sym and by_sym[var][1] != n:
                raise WspError([Diagnostic(a.span, "mesh", f"{what} and {by_sym[var][0]} "
                                           f"disagree: both axes are sized by `{var}`",
                                           "give the same size to both")], dict(m.sources))
            by_sym[var] = (what, n)
        out[a.name] = n
    return out


def _sized(m: N.Module, sizes: dict[str, int]) -> N.Module:
    """`m` with its mesh's sizes constant: a sym sizing an axis is substituted everywhere and
    defaults to that size (binding it otherwise at run time is an error there), and the
    run-time checks that shards divide evenly are made anew for these sizes."""
    assert m.mesh is not None
    env: dict[str, sym.Expr] = {}
    checks = []
    for a in m.mesh.axes:
        if sym.const_value(a.size) is None:
            var = sym.to_str(a.size)
            env[var] = sym.const(sizes[a.name])
            reason = f"the mesh was compiled with `{var}` = {sizes[a.name]}"
            checks.append(N.ViewCheck(sym.Check(sym.var(var), "==", sym.const(sizes[a.name]),
                                                reason), reason, a.span))
    mesh = replace(m.mesh, axes=tuple(replace(a, size=sym.const(sizes[a.name]))
                                      for a in m.mesh.axes))
    kept = tuple(c for c in m.checks if not _is_shard_check(c))
    body = replace(m, mesh=None, checks=kept)
    body = substitute(body, env) if env else body
    syms = tuple(replace(s, default=sizes[_axis_of(m, s.name)]) if s.name in env else s
                 for s in m.syms)
    shard = []
    for t in body.tensors:
        for d, ax in enumerate(t.layout.dims if t.layout else ()):
            if ax is None:
                continue
            n, p = t.dims[d], sizes[ax]
            if p == 1:
                continue  # one device holds it all
            words = _dim_words(d, len(t.dims))
            value = sym.const_value(n)
            if value is not None:
                if value % p:
                    raise WspError([Diagnostic(t.span, "layout", f"`{t.name}` shards its "
                                               f"{value} {words} over {ax} = {p}: {value} is "
                                               f"not a multiple of {p}", "uneven shards are "
                                               "refused (docs/distributed.md, \"Layouts\")")],
                                   dict(m.sources))
                continue
            reason = (f"`{t.name}` shards its `{sym.to_str(n)}` {words} over {ax} = {p}: "
                      f"`{sym.to_str(n)}` must be a multiple of {p}")
            shard.append(N.ViewCheck(sym.Check(sym.mod(n, p), "==", sym.const(0), reason),
                                     reason, t.span))
    return replace(body, mesh=mesh, syms=syms, checks=tuple(checks) + body.checks + tuple(shard))


def _axis_of(m: N.Module, var: str) -> str:
    return next(a.name for a in m.mesh.axes if sym.to_str(a.size) == var)


def _is_shard_check(c: N.ViewCheck) -> bool:
    """A check `lower/module.py` made that a shard divides evenly (for the declared sizes:
    `_sized` makes them anew for the compiled ones). Its wording is `shard_reason`'s."""
    return c.check.op == "==" and isinstance(c.check.lhs, sym.Mod) and \
        "must be a multiple of" in c.message and "'s size" in c.message


def _dim_words(d: int, rank: int) -> str:
    """What the entries of dimension `d` are called (as frontend/mesh.py's `dim_words`)."""
    if rank >= 2 and d == rank - 1:
        return "columns"
    if rank >= 2 and d == rank - 2:
        return "rows"
    return f"entries along dimension {d}" if rank > 1 else "elements"


def _dim_word(d: int, rank: int) -> tuple[str, str, str]:
    """(one, several, where) that name indices of dimension `d` in a message: `column 79`,
    `columns 48 .. 79`; `index 3 of dimension 0` for a dimension without a name."""
    if rank >= 2 and d == rank - 1:
        return "column", "columns", ""
    if rank >= 2 and d == rank - 2:
        return "row", "rows", ""
    return ("index", "indices", f" of dimension {d}") if rank > 1 else ("element", "elements", "")


def single_device(m: N.Module) -> N.Module:
    """`m` without its mesh of one device (see the module's docstring); `m` itself when it has
    none."""
    if m.mesh is None:
        return m
    if sym.const_value(m.mesh.devices) != 1:
        raise InternalError("devices", "single_device on a mesh of several devices")
    used = _names(m)  # the copies' loop variables are named apart from the module's
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

    schedules = tuple(replace(s, body=_bind_keys(lowered(s.body, ()), _key_vars(s, m),
                                                 frozenset()))
                      for s in m.schedules)
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


# ---------------------------------------------------------------------------------------------
# Several devices: the device dimension


class _Lowering:
    """The device lowering of a module whose mesh has several devices (constant sizes)."""

    def __init__(self, m: N.Module, sizes: dict[str, int]):
        assert m.mesh is not None
        self.m = m
        self.axes = tuple((a.name, sizes[a.name]) for a in m.mesh.axes)
        self.sizes = sizes
        self.placed = {t.name: N.Placed(t.name, t.dims, t.layout) for t in m.tensors}
        self.decls = {t.name: t for t in m.tensors}
        self.used = _names(m)
        self.diags: list[Diagnostic] = []
        self.tiler = Tiler(self.axes, self.placed, self.decls, lambda b: _fresh(b, self.used),
                           {k.name for k in m.kernels})
        # the events' `NAME@marks` tensors: an enumerator's tags, kept one per process
        self.marks = {c.marks for c in m.channels if c.marks is not None}
        # inside a device region (see `region`): each mesh axis's loop variable, else None
        self.region: Optional[dict[str, str]] = None
        self.regions = 0  # regions made so far: the number of the current one
        self.in_region = 0  # that number inside a region, 0 outside
        self.loops = 0  # loops around the statement being lowered
        self.region_in_loop = False  # whether the current region runs once per iteration
        self.in_send: Optional[N.Send] = None  # the send whose task is being placed
        # each event or channel named by a record, synchronize or query: (region, span) of
        # its first use, so that a use in another region is reported (see `schedule`)
        self.event_uses: dict[str, tuple[int, Span]] = {}

    def run(self) -> N.Module:
        m = self.m
        assert m.mesh is not None
        schedules = tuple(replace(s, body=_bind_keys(self.stmts(s.body, {}), _key_vars(s, m),
                                                     frozenset()))
                          for s in m.schedules)
        if self.diags:
            raise WspError(self.diags, dict(m.sources))
        devices = 1
        for _, p in self.axes:
            devices *= p
        tensors = []
        for t in m.tensors:
            if t.name in self.marks:
                tensors.append(t)  # a back end's per-process bookkeeping: no device dimension
                continue
            dims = tuple(sym.floordiv(n, self.sizes[ax]) if ax else n
                         for n, ax in zip(t.dims, t.layout.dims if t.layout else
                                          (None,) * len(t.dims)))
            tensors.append(replace(t, dims=(sym.const(devices), *dims), layout=None))
        order = self.tiler.order_tensor()
        if order is not None:
            # before the task handles' order tensors, which stay the module's last
            # (backends/cpu/program.py, edge_tensor_count)
            at = next((k for k, t in enumerate(tensors) if N.is_edge_tensor(t.name)),
                      len(tensors))
            tensors.insert(at, order)
            schedules = tuple(replace(s, body=substitute(s.body, {MOST_TILES: order.dims[2]}))
                              for s in schedules)
        devs = N.Devices(self.axes, tuple(self.placed[t.name] for t in m.tensors
                                          if t.name not in self.marks), m.mesh.span)
        return replace(m, mesh=None, tensors=tuple(tensors), schedules=schedules,
                       kernels=m.kernels + tuple(self.tiler.kernels.values()), devices=devs)

    def stmts(self, stmts: tuple, ranges: dict) -> tuple:
        out = []
        for st in stmts:
            self.note_events(st)
            if self.region is None and isinstance(st, N.Pipe):
                if _global(st) or _reads_own_write(st) is not None:
                    self.refuse_global_pipe(st)
                else:
                    out.append(self.device_region((st,), ranges))
                    continue
            elif self.region is None and _orders(st) and not _global(st) and \
                    _reads_own_write(st) is None and \
                    not any(_event_uses(x) for x in walk((st,))):
                # a P.seq or sequential block without events: once per device (with an event,
                # or an element read of what it writes, one order over every device: see
                # `note_events` and `_reads_own_write`)
                out.append(self.device_region((st,), ranges))
                continue
            if isinstance(st, N.Task):
                out.append(self.task(st, ranges))
            elif isinstance(st, N.Send):
                self.in_send = st
                placed = self.task(st.task, ranges)
                self.in_send = None
                out.append(replace(st, task=placed) if isinstance(placed, N.Task) else st)
            elif isinstance(st, N.Collective):
                out.append(self.tiler.tasks(st))
            elif isinstance(st, N.Read):
                out.append(replace(st, index=(sym.const(0), *st.index)))
            elif isinstance(st, N.Loop):
                n = sym.const_value(st.extent)
                inner = dict(ranges)
                if n is not None and n >= 1:
                    inner[st.var] = sym.Interval(0, n - 1)
                self.loops += 1
                out.append(replace(st, body=self.stmts(st.body, inner)))
                self.loops -= 1
            else:
                out.append(map_lists(st, lambda body: self.stmts(body, ranges)))
        return tuple(out)

    def device_region(self, stmts: tuple, ranges: dict) -> N.Stmt:
        """`stmts` once per device: a loop over each mesh axis's coordinates (a `P` loop: the
        devices are independent) around them, in which a task on every device runs on the
        region's device and a task pinned to one runs when that is the region's device
        (`when E == d`). So the ordering statements inside (`P.seq`, `sequential`, a pipe and
        its channels) order each device's tasks among themselves and nothing across devices
        (docs/distributed.md, "Where a task runs"): device 1's first step does not wait for
        device 0's last, and each device runs its own instance of a pipe and its channels, its
        items numbered as on one device. A region holds no collective (its tiles read the other
        devices' data, written by their instances later) and no `slot_set` (run once per
        device)."""
        names = {ax: _fresh(f"dev_{ax}", self.used) for ax, _ in self.axes}
        inner = dict(ranges)
        for ax, p in self.axes:
            inner[names[ax]] = sym.Interval(0, p - 1)
        saved = (self.region, self.in_region, self.region_in_loop)
        self.regions += 1
        self.region, self.in_region = names, self.regions
        self.region_in_loop = self.loops > 0
        try:
            body = self.stmts(stmts, inner)
        finally:
            self.region, self.in_region, self.region_in_loop = saved
        for ax, p in reversed(self.axes):
            body = (N.Loop(names[ax], sym.const(p), "grid", body),)
        return body[0]

    def refuse_global_pipe(self, st: N.Pipe) -> None:
        """A pipe holding a collective or a `slot_set` cannot run once per device: the
        collective's tiles read the other devices' data, which their own instance writes
        later; a slot would be set once per device."""
        for x in walk((st,)):
            if isinstance(x, N.Collective):
                self.diags.append(Diagnostic(
                    x.span, "mesh", f"`{x.kind}` inside a pipe: on a mesh of several devices "
                    "each device runs its own instance of a pipe, and a collective needs every "
                    "device at once", "move the collective after the pipe (docs/distributed.md, "
                    "\"Channels, pipes and events on a mesh\")"))
                return
            if isinstance(x, N.SlotSet):
                self.diags.append(Diagnostic(
                    x.span, "mesh", "`slot_set` inside a pipe: on a mesh of several devices "
                    "each device runs its own instance of a pipe, which would set the slot "
                    "once per device", "set the slot before the pipe"))
                return
        read = _reads_own_write(st)
        if read is not None:
            self.diags.append(Diagnostic(
                read.span, "mesh", f"the pipe reads an element of `{read.tensor}`, which a "
                "task of the same pipe writes: on a mesh of several devices each device runs "
                "its own instance of the pipe, and under MPI a device's copy is written only "
                "in its own instance, after the instances before it have read it",
                f"compute `{read.tensor}` before the pipe"))

    def note_events(self, st) -> None:
        """Checks that each event (or queried channel) of `st` keeps to one side of a pipe: a
        pipe runs once per device (`device_region`), each instance recording its own marked
        set, which a record, synchronize or query outside the pipe (or in another pipe) would
        see only for the last device. Events outside pipes are recorded and waited for over
        every device (docs/distributed.md, "Channels, pipes and events on a mesh")."""
        for name, span in _event_uses(st):
            if self.in_region and self.region_in_loop and not isinstance(st, N.Mark):
                # the pipe runs once per device per iteration: the next iteration's instance
                # would wait for the last device's record, not its own device's
                self.diags.append(Diagnostic(
                    span if span is not _NO_QUERY_SPAN else self.m.mesh.span, "mesh",
                    f"`{name}` is waited for in a pipe inside a loop: on a mesh of several "
                    "devices each device runs its own instance of the pipe, and the next "
                    "iteration's would wait for the last device's record, not its own",
                    "move the pipe out of the loop, or the loop into a process of the pipe"))
                continue
            first = self.event_uses.setdefault(name, (self.in_region, span))
            if first[0] == self.in_region:
                continue
            # a query has no span of its own: the other use's, else the mesh's
            at = next((x for x in (span, first[1]) if x is not _NO_QUERY_SPAN), self.m.mesh.span)
            notes = (Note(first[1], f"`{name}` is also used here"),) \
                if at is not first[1] and first[1] is not _NO_QUERY_SPAN else ()
            self.diags.append(Diagnostic(
                at, "mesh", f"`{name}` is used inside a pipe and outside it: on a mesh of "
                "several devices each device runs its own instance of the pipe, with its own "
                f"`{name}`, which the statements outside it would see only for the last device",
                f"record, synchronize and query `{name}` only inside the pipe, or only outside",
                notes))
            self.event_uses[name] = (self.in_region, span)  # one report per crossing

    def stride(self, axis: str) -> int:
        return self.tiler.stride(axis)

    def gathered(self, a: N.TileArg, d: int, ax: str, shard: sym.Expr, checks: list,
                 ranges: dict) -> sym.Expr:
        """The coordinate along `ax` of a gather view whose rows (dimension `d`) are sharded
        over it: its first row's shard; each other row is checked to be in the same one when
        the task is made (the rows are index values read at run time), naming the row, the
        device that holds it and the collective to write (docs/distributed.md, "Where a task
        runs")."""
        assert a.gather is not None
        rows = a.gather.rows
        coord = sym.floordiv(rows[0], shard)
        one, many, of = _dim_word(d, len(self.placed[a.tensor].dims))
        message = (f"`{_text(self.m, a.gather.span)}` gathers {many}{of} of `{a.tensor}` from "
                   f"more than one shard of {ax} ({sym.to_str(shard)} {many} each): a task "
                   f"reads one device's data; `allgather` `{a.tensor}` over {ax} into a tensor "
                   "replicated over it and gather from that")
        seen = {sym.to_str(rows[0])}
        for r in rows[1:]:
            if sym.to_str(r) in seen:
                continue  # a partial tile's padding repeats the last row read
            seen.add(sym.to_str(r))
            at = sym.floordiv(r, shard)
            if not sym.prove_eq(at, coord, ranges):
                found = (f"found {one} {{0}}{of} on {ax} = {{1}} and {one} {{2}} on {ax} = "
                         f"{{3}} (the task's)")
                checks.append(N.ViewCheck(sym.Check(at, "==", coord, message), message,
                                          a.gather.span, found, (r, at, rows[0], coord)))
        return coord

    def task(self, t: N.Task, ranges: dict) -> N.Stmt:
        """The task on its device (see the module's docstring)."""
        pins: dict[str, list[tuple[sym.Expr, N.TileArg]]] = {}
        local: list = []
        for a in t.args:
            if not isinstance(a, N.TileArg):
                local.append(a)
                continue
            placed = self.placed[a.tensor]
            offsets = list(a.offsets)
            extents = list(a.extents)
            checks = list(a.checks)
            for d, ax in enumerate(placed.layout.dims if placed.layout else ()):
                if ax is None:
                    continue
                shard = sym.floordiv(placed.dims[d], self.sizes[ax])
                if a.gather is not None and d == a.row_dim:
                    coord = self.gathered(a, d, ax, shard, checks, ranges)
                    extents[d] = shard  # the box: the shard's rows, every one (nodes.Gather)
                    pins.setdefault(ax, []).append((coord, a))
                    continue
                coord = sym.floordiv(a.offsets[d], shard)
                words = _dim_words(d, len(placed.dims))
                # inside one shard: offset % shard + extent <= shard (the form the bounds of
                # `sym` prove for views stepping by a divisor of the shard)
                inside = sym.add(sym.mod(a.offsets[d], shard), a.box_extents[d])
                fits = sym.prove_le(inside, shard, ranges)
                message = (f"`{_text(self.m, a.span)}` spans more than one shard of {ax} "
                           f"({sym.to_str(shard)} {words} each): a task reads one device's "
                           f"data; split the view at shard boundaries, or `allgather` "
                           f"`{a.tensor}`")
                if fits is False:
                    self.diags.append(Diagnostic(a.span, "mesh", message))
                elif fits is None:
                    # the failure names the view's first and last index and their devices
                    # (its `offset % shard + extent` would say nothing to the reader)
                    last = sym.sub(sym.add(a.offsets[d], a.extents[d]), sym.const(1))
                    one, many, of = _dim_word(d, len(placed.dims))
                    found = (f"found {many} {{0}} .. {{1}}{of}: {one} {{0}} is on {ax} = {{2}} "
                             f"and {one} {{1}} on {ax} = {{3}}")
                    checks.append(N.ViewCheck(sym.Check(inside, "<=", shard, message), message,
                                              a.span, found, (a.offsets[d], last, coord,
                                                              sym.floordiv(last, shard))))
                offsets[d] = sym.sub(a.offsets[d], sym.mul(coord, shard))
                pins.setdefault(ax, []).append((coord, a))
            local.append((a, tuple(offsets), tuple(extents), tuple(checks)))
        where: dict[str, sym.Expr] = {}
        agree: dict[int, list] = {}  # id of a TileArg: the checks that its coordinate agrees
        loops = []
        guards = []  # inside a region: (axis, the coordinate a pinned task runs on)
        for ax, p in self.axes:
            pinned = pins.get(ax)
            if not pinned and self.region is not None:
                where[ax] = sym.var(self.region[ax])
                continue
            if not pinned:
                var = _fresh(f"dev_{ax}", self.used)
                loops.append((var, p))
                where[ax] = sym.var(var)
                continue
            first, by = pinned[0]
            where[ax] = first
            if self.region is not None:
                guards.append((ax, first, by))
            for coord, arg in pinned[1:]:
                same = sym.prove_eq(coord, first, ranges)
                message = (f"`{t.text}` has no device to run on: `{_text(self.m, by.span)}` "
                           f"and `{_text(self.m, arg.span)}` are on different coordinates of "
                           f"{ax}; take views of the same shard, or move the data with a "
                           "collective")
                if same is False:
                    self.diags.append(Diagnostic(arg.span, "mesh", message))
                elif same is None:
                    agree.setdefault(id(arg), []).append(N.ViewCheck(
                        sym.Check(coord, "==", first, message), message, arg.span))
        device: sym.Expr = sym.const(0)
        for ax, _ in self.axes:
            device = sym.add(device, sym.mul(where[ax], self.stride(ax)))
        args = []
        for item in local:
            if not isinstance(item, tuple):
                args.append(item)
                continue
            a, offsets, extents, checks = item
            gather = a.gather
            if gather is not None:
                lay = self.placed[a.tensor].layout
                ax = lay.dims[a.row_dim] if lay is not None else None
                # sharded rows: the indices count from the shard's first row on this device
                base = sym.mul(where[ax], extents[a.row_dim]) if ax is not None else None
                gather = replace(gather, offsets=(device, *gather.offsets),
                                 extents=(sym.const(1), *gather.extents), base=base)
            args.append(replace(
                a, offsets=(device, *offsets), extents=(sym.const(1), *extents),
                steps=(1, *a.steps) if a.steps else (),
                row_dim=None if a.row_dim is None else a.row_dim + 1,
                col_dim=None if a.col_dim is None else a.col_dim + 1,
                checks=checks + tuple(agree.get(id(a), ())), gather=gather))
        # other accesses (a task handle's order boxes, lower/edges.py) are the device's own
        extra = tuple(x if x.tensor in self.marks else
                      replace(x, offsets=(device, *x.offsets), extents=(sym.const(1), *x.extents))
                      for x in t.extra)
        task: N.Stmt = replace(t, args=tuple(args), device=device, extra=extra)
        if guards and self.in_send is not None:
            ax, coord, by = guards[0]
            self.diags.append(Diagnostic(
                by.span, "mesh", f"`send({self.in_send.channel}, {t.text}(...))` runs only on "
                f"{ax} = {sym.to_str(coord)} (`{_text(self.m, by.span)}` is sharded over {ax}), "
                f"but each device runs its own instance of the pipe and of "
                f"`{self.in_send.channel}`, whose item the other devices would never get: a "
                "channel does not carry items between devices",
                "send what every device holds and do the sharded work in the consumer (its "
                "tasks run on the devices their views pick), or move the data with a "
                "collective after the pipe"))
            return task
        for ax, coord, _ in reversed(guards):
            task = N.When(((N.Cond("==", (coord, sym.var(self.region[ax]))), (task,)),))
        for var, p in reversed(loops):
            task = N.Loop(var, sym.const(p), "grid", (task,))
        return task


def _orders(st) -> bool:
    """Whether `st` orders the tasks inside it by its steps: a `P.seq` or a `sequential`
    block (docs/schedules.md)."""
    return (isinstance(st, N.Loop) and st.kind == "seq") or \
        (isinstance(st, N.Block) and st.kind == "sequential")


def _reads_own_write(st) -> Optional[N.Read]:
    """The first element read in `st` of a tensor a task of `st` writes, else None. Run once
    per device, such a read in device d's instance would come before device d + 1's instance
    writes its copy, which is the copy an MPI rank reads (its own), so `st` keeps one order."""
    written = written_tensors((st,))
    return next((x for x in walk((st,)) if isinstance(x, N.Read) and x.tensor in written), None)


def _global(st) -> bool:
    """Whether `st` must run once for every device, not once per device: it holds a
    collective (its tiles read other devices' data) or sets a run-time slot."""
    return any(isinstance(x, (N.Collective, N.SlotSet)) for x in walk((st,)))


def _event_uses(st) -> list[tuple[str, Span]]:
    """(name, span) of each event or channel `st` itself (not its nested statements) records,
    synchronizes or queries (a query has no span of its own: the mesh's place is given)."""
    if isinstance(st, N.Mark):
        return [(e, st.span) for e in st.events]
    if isinstance(st, N.Sync):
        return [(st.event, st.span)]
    if isinstance(st, N.When):
        out: list = []
        for c, _ in st.branches:
            out.extend((name, _NO_QUERY_SPAN) for name in _queried(c))
        return out
    return []


_NO_QUERY_SPAN = Span("<query>", 0, 0, 0, 0)


def _queried(c) -> list[str]:
    if not isinstance(c, N.Cond):
        return []
    if c.op == "query":
        return [c.args[0]]
    if c.op in ("and", "or", "not"):
        return [n for a in c.args for n in _queried(a)]
    return []


def _names(m: N.Module) -> set[str]:
    """Every variable name of the module: the lowering's loop variables are named apart."""
    used = {s.name for s in m.syms}
    for s in m.schedules:
        for st in walk(s.body):
            if isinstance(st, (N.Loop, N.Read)):
                used.add(st.var)
            elif isinstance(st, (N.Send, N.Consume)):
                used.add(st.item)
            elif isinstance(st, N.Process) and st.id_var is not None:
                used.add(st.id_var)
    return used


def _text(m: N.Module, span: Span) -> str:
    """The source text of `span` (one line), for messages that quote an argument."""
    text = dict(m.sources).get(span.file)
    if text is None or span.line < 1:
        return "the view"
    lines = text.splitlines()
    if span.line > len(lines):
        return "the view"
    line = lines[span.line - 1]
    end = span.end_col if span.end_line == span.line else len(line) + 1
    return line[span.col - 1:end - 1]


def _key_vars(s: N.Schedule, m: N.Module) -> frozenset:
    """The loop variables the schedule's keys use (not the module's syms)."""
    names = {d.name for d in m.syms}
    return frozenset(v for k in schedule_keys(s) for v in sym.free_vars(k) if v not in names)


def _bind_keys(stmts: tuple, keys: frozenset, bound: frozenset) -> tuple:
    """The lowering's own tasks (a collective's tiles) are under none of the user's loops, so a
    schedule key over a loop variable (`.stream_by(t % 2)`) has no value there: each such task
    gets a loop of one iteration per missing variable around it, which binds it to 0, so a
    collective's tiles take the key's value at coordinate 0 (stream 0 of `t % 2`).
    docs/distributed.md, "Collectives"."""
    if not keys:
        return stmts
    out = []
    for st in stmts:
        if isinstance(st, N.Task):
            for var in sorted(keys - bound):
                st = N.Loop(var, sym.const(1), "grid", (st,))
        elif isinstance(st, N.Read):
            bound = bound | {st.var}
        else:
            inner = bound | {getattr(st, "var", None), getattr(st, "item", None)} - {None}
            st = map_lists(st, lambda body, b=inner: _bind_keys(body, keys, b))
        out.append(st)
    return tuple(out)
