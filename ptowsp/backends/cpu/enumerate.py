"""The enumerator of a schedule: C that walks the loop tree with the bound symbols, checks
every view, and submits one `wsp_task` per task to the runtime (`wsp_runtime.h`).

`LoopEmitter` writes it for a schedule without CSP; `csp.CoEmitter` extends it with coroutines;
`emit.emit_enumerators` puts every schedule's into one translation unit after `PRELUDE`.

Python decides every expression here (`sym.to_c`); the file layout is the template's.
A failed view check calls `wsp_fail(rt, WSP_ERR_VIEW, "VIEW <k> <coords> <lhs> <rhs>")`, which
`program.py` turns back into a diagnostic at the check's span with the coordinates and values;
the task is not submitted, so it never launches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from ... import sym
from ...diagnostics import InternalError
from ...dtypes import FLOAT_DTYPES, TABLE, size_of
from ...ir import nodes as N
from ...ir import visit as V
from ...ir.independence import independent_nest
from ..cexpr import c_ident
from ..cube import vector_only_kernels
from .cost import kernel_unit
from .gather import gathered, wrapper, wrapper_name
from .kernels import kernel_symbol

_MODE = {"r": "WSP_READ", "w": "WSP_WRITE", "rw": "WSP_READWRITE"}  # an access's mode in C


# info: what the run reports besides its tasks (CSP counters; see Enumerators.info)
ENTRY_PARAMS = "wsp_runtime *rt, const int64_t *syms, void *const *tensors, int64_t *info"


def entry_symbol(s: N.Schedule) -> str:
    return c_ident("wsp_run_", s.name)


@dataclass
class Enumerators:
    """The C of every schedule's enumerator, and the run-time checks they may report."""

    source: str
    entries: dict[str, str]  # schedule name -> C function
    checks: list[N.ViewCheck] = field(default_factory=list)  # indexed by the `k` of a report
    # the `k` of checks on data read during enumeration (N.Assert): they stop enumeration
    data_checks: set[int] = field(default_factory=set)
    check_tasks: dict[int, str] = field(default_factory=dict)  # k -> the call it guards
    tasks: list[N.Task] = field(default_factory=list)  # indexed by `wsp_task.stmt`
    # CSP (csp.py): schedule -> what each entry of the `info` array counts, as
    # ("channels" | "events", name, key); the places a coroutine may block, indexed by the
    # numbers in a deadlock report; the pipes, indexed by the numbers in a double-open report
    info: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    sites: list = field(default_factory=list)
    pipes: list = field(default_factory=list)
    # gather views (gather.py): (kernel, ntiles, gathered) -> the wrapper's name, and its C
    wrappers: dict = field(default_factory=dict)
    wrapper_code: list = field(default_factory=list)


class LoopEmitter(V.Visitor):
    """The enumerator of a schedule without CSP: one C function walking the loop tree, one
    `visit_<Class>` per statement class. `csp.CoEmitter` extends it with coroutines for
    schedules that use CSP."""

    RET = "return rc;"  # how emitted code leaves after an error (rc holds the code)

    def __init__(self, module: N.Module, out: Enumerators):
        self.m = module
        self.out = out
        self.tensor_index = {t.name: i for i, t in enumerate(module.tensors)}
        self.kernel_index = {k.name: i for i, k in enumerate(module.kernels)}
        self.vector_only = vector_only_kernels(module)  # kept off the cube by their views
        self.lines: list[str] = []
        self.depth = 1
        self.loop_vars: list[str] = []
        self.read_vars: set[str] = set()  # N.Read variables: C locals of the enumerator
        self.written: set[str] = set()  # tensors the schedule's tasks write
        self.batched = False  # inside a loop nest already announced with wsp_batch

    # names in C
    def name_of(self, v: str) -> str:
        k = N.slot_index(v)
        if k is not None:
            return f"((int64_t)wsp_slots[{k}])"
        if v in self.loop_vars:
            return c_ident("v_", v)
        if v in self.read_vars:
            return c_ident("r_", v)
        return c_ident("s_", v)

    def c(self, e) -> str:
        return sym.to_c(sym.as_expr(e), self.name_of)

    def emit(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def schedule(self, s: N.Schedule) -> str:
        fn = entry_symbol(s)
        self.lines = []
        self.depth = 1
        self.sched = s
        for i, sd in enumerate(self.m.syms):
            self.emit(f"const int64_t {c_ident('s_', sd.name)} = syms[{i}];")
        for i, t in enumerate(self.m.tensors):
            dims = [self.c(d) for d in t.dims]
            for d, text in enumerate(dims):
                self.emit(f"const int64_t t{i}_d{d} = {text};")
            # row-major strides, in elements
            for d in range(len(dims)):
                rest = " * ".join(f"t{i}_d{e}" for e in range(d + 1, len(dims))) or "1"
                self.emit(f"const int64_t t{i}_s{d} = {rest};")
            self.emit(f"char *const t{i} = (char *)tensors[{i}];")
        if s.deps == "infer_bytes_overlap":  # every tensor's dims, for wsp_flat
            # (a task handle's order tensor has none: its boxes are coordinates, kept as boxes)
            dims = ["NULL" if N.is_edge_tensor(t.name) else
                    "(const int64_t[]){" + (", ".join(f"t{i}_d{d}" for d in range(len(t.dims)))
                                            or "1") + "}" for i, t in enumerate(self.m.tensors)]
            self.emit(f"const int64_t *const wsp_dims[] = {{{', '.join(dims) or 'NULL'}}};")
            self.emit("(void)wsp_dims;")
        self.emit("wsp_task task;")
        self.emit("memset(&task, 0, sizeof task);")
        # placement: the counts come from wsp_schedule (the policy's, or the machine's)
        self.emit("const int64_t wsp_nd = wsp_schedule_dispatchers(rt);")
        self.emit("const int64_t wsp_ns = wsp_schedule_streams(rt);")
        self.emit("int64_t wsp_k = 0;  /* tasks enumerated so far */")
        self.emit("(void)wsp_nd; (void)wsp_ns;")
        self.written = V.written_tensors(s.body)
        self.read_vars = set()
        self.emit(f"uint64_t wsp_slots[{N.NSLOTS}];  /* run-time slots, 0 at the start */")
        self.emit("memset(wsp_slots, 0, sizeof wsp_slots);")
        self.emit("int rc = 0;")
        self.emit("char msg[512];")
        self.emit("(void)msg; (void)info;")
        self.main(s)
        head = f"int {fn}({ENTRY_PARAMS})\n{{\n"
        return head + "\n".join(self.lines) + "\n}\n"

    def main(self, s: N.Schedule) -> None:
        """The schedule's statements, after the prologue."""
        self.body(s.body)
        self.emit("return 0;")

    # -- statements, by class (ir.visit.Visitor)
    def body(self, stmts) -> None:
        for st in stmts:
            self.visit(st)

    def visit_Assert(self, st: N.Assert) -> None:
        self.out.data_checks.add(len(self.out.checks))
        self.view_check(st.check)

    def visit_SlotSet(self, st: N.SlotSet) -> None:
        self.emit(f"wsp_slots[{st.slot}] = (uint64_t)({self.c(st.value)});")

    def visit_other(self, st) -> None:
        # a statement of any other class is emitted as a task, as it always has been here: the
        # task is the only one that comes here (csp.CoEmitter emits the CSP statements)
        self.task(st)

    def visit_Read(self, r: N.Read) -> None:
        """One element of an integer tensor into a C local; when the schedule's tasks write that
        tensor, first wait for the earlier-enumerated writers of the element (wsp_await)."""
        for chk in r.checks:
            self.view_check(chk)
        ti = self.tensor_index[r.tensor]
        t = self.m.tensors[ti]
        idx = [self.c(i) for i in r.index]
        if self.m.devices is not None and self.m.devices.placed(r.tensor) is not None:
            # the device dimension: this process's device's copy (wsp_device: 0 in one
            # process, which computes every copy; its own device under MPI, which computes
            # only its own)
            idx[0] = "(int64_t)wsp_device(rt)"
        text = f"{r.tensor}[{', '.join(sym.to_str(sym.as_expr(i)) for i in r.index)}]"
        self.emit(f"/* {text.replace('*/', '* /')} */")
        if r.tensor in self.written:
            self.emit("{")
            self.depth += 1
            self.emit("wsp_access acc;")
            self.emit(f"acc.tensor = {ti}; acc.mode = WSP_READ; acc.ndim = {len(idx)};")
            for d, i in enumerate(idx):
                self.emit(f"acc.lo[{d}] = {i}; acc.hi[{d}] = acc.lo[{d}] + 1;")
            if self.sched.deps == "infer_bytes_overlap":
                self.emit(f"wsp_flat(&acc, wsp_dims[{ti}]);")
            self.emit(f"if ((rc = wsp_await(rt, &acc))) {self.RET}")
            self.depth -= 1
            self.emit("}")
        offset = " + ".join(f"({i}) * t{ti}_s{d}" for d, i in enumerate(idx)) or "0"
        self.read_vars.add(r.var)
        self.bind(r.var, f"(int64_t)((const {TABLE[t.dtype].c_storage} *)t{ti})[{offset}]")

    def bind(self, var: str, value: str) -> None:
        """A variable of the enumerator (a read's value) takes `value` here."""
        self.emit(f"const int64_t {self.name_of(var)} = {value};")

    def cond(self, c: N.Cond) -> str:
        if c.op == "const":
            return "1" if c.args[0] else "0"
        if c.op == "not":
            return f"!({self.cond(c.args[0])})"
        if c.op in ("and", "or"):
            op = "&&" if c.op == "and" else "||"
            return f"({self.cond(c.args[0])}) {op} ({self.cond(c.args[1])})"
        return f"({self.c(c.args[0])}) {c.op} ({self.c(c.args[1])})"

    def visit_When(self, w: N.When) -> None:
        for i, (pred, body) in enumerate(w.branches):
            self.emit(f"{'if' if i == 0 else '} else if'} ({self.cond(pred)}) {{")
            self.depth += 1
            self.body(body)
            self.depth -= 1
        if w.otherwise:
            self.emit("} else {")
            self.depth += 1
            self.body(w.otherwise)
            self.depth -= 1
        self.emit("}")

    def visit_Loop(self, lp: N.Loop) -> None:
        extent = self.c(lp.extent)
        announce = False
        if lp.kind != "seq" and not self.batched:
            # the nest's task count lets the runtime pack consecutive tasks into batches, and
            # proven independence lets it run one batch's tasks on several workers (placement)
            count = _TaskCount(self.c).count((lp,), frozenset())
            if count is not None:
                flags = "WSP_BATCH_INDEPENDENT" if independent_nest(lp) else "0"
                self.emit(f"if ((rc = wsp_batch(rt, {count}, 0, {flags}))) {self.RET}")
                self.batched = announce = True
        self.loop_vars.append(lp.var)
        v = self.name_of(lp.var)
        if lp.kind == "seq":
            self.emit(f"if ((rc = wsp_order_push(rt))) {self.RET}")
        # the extent is evaluated once, as the loop starts (the body may change a slot it reads)
        self.emit(self.loop_head(lp.var, extent))
        self.depth += 1
        if lp.kind == "seq":
            self.emit(f"if ({v} > 0 && (rc = wsp_order_next(rt))) {self.RET}")
        self.body(lp.body)
        self.depth -= 1
        self.emit("}")
        if lp.kind == "seq":
            self.emit(f"if ((rc = wsp_order_pop(rt))) {self.RET}")
        self.loop_vars.pop()
        if announce:
            self.batched = False

    def loop_head(self, var: str, extent: str) -> str:
        v = self.name_of(var)
        return f"for (int64_t {v} = 0, {v}_n = {extent}; {v} < {v}_n; {v}++) {{"

    def visit_Block(self, b: N.Block) -> None:
        if b.kind != "sequential":
            self.body(b.body)
            return
        self.emit(f"if ((rc = wsp_order_push(rt))) {self.RET}")
        for i, st in enumerate(b.body):
            if i:
                self.emit(f"if ((rc = wsp_order_next(rt))) {self.RET}")
            self.body((st,))
        self.emit(f"if ((rc = wsp_order_pop(rt))) {self.RET}")

    def coords_format(self) -> tuple[str, str]:
        names = [v for v in self.loop_vars]
        fmt = ", ".join(f"{v.split(chr(39))[0]}=%lld" for v in names)
        args = ", ".join(f"(long long){self.name_of(v)}" for v in names)
        return fmt, args

    def task(self, t: N.Task) -> None:
        stmt = len(self.out.tasks)
        self.out.tasks.append(t)
        kernel = self.m.kernel(t.kernel)
        self.emit(f"/* {t.text} */")
        # run-time checks first: a task with a bad view is never submitted
        for a in t.args:
            if isinstance(a, N.TileArg):
                for chk in a.checks:
                    self.out.check_tasks[len(self.out.checks)] = t.text
                    self.view_check(chk)
        tiles = [p for p in kernel.params if p.kind == "tile"]
        scalars = [p for p in kernel.params if p.kind == "scalar"]
        by_param = {a.param: a for a in t.args}
        first_extra = len(tiles) + len(t.extra)
        gs = gathered(self.m, tiles, by_param, first_extra)
        fn = kernel_symbol(kernel)
        if gs:
            key = (kernel.name, first_extra + len(gs), tuple(gs))
            if key not in self.out.wrappers:
                name = wrapper_name(kernel.name, len(self.out.wrappers))
                self.out.wrappers[key] = name
                self.out.wrapper_code.append(wrapper(name, fn, first_extra + len(gs), gs))
            fn = self.out.wrappers[key]
        self.emit(f"task.fn = {fn};")
        self.emit(f"task.kernel = {self.kernel_index[kernel.name]};")
        self.emit(f"task.stmt = {stmt};")
        self.emit(f"task.ntiles = {first_extra + len(gs)};")
        self.emit(f"task.nscalars = {len(scalars)};")
        self.emit(f"task.ncoords = {len(t.coords)};")
        for i, c in enumerate(t.coords[:8]):
            self.emit(f"task.coords[{i}] = {self.c(c)};")
        for i, p in enumerate(tiles):
            self.tile(i, p, by_param[p.name])
        for i, a in enumerate(t.extra, start=len(tiles)):
            self.extra(i, a)
        for g in gs:
            self.index_tile(g.index_tile, by_param[g.param].gather)
        for i, p in enumerate(scalars):
            a = by_param[p.name]
            if isinstance(a.value, sym.Expr):
                field_ = "f" if p.dtype in FLOAT_DTYPES else "i"
                cast = "(double)" if field_ == "f" else ""
                self.emit(f"task.scalars[{i}].{field_} = {cast}({self.c(a.value)});")
            elif isinstance(a.value, bool):
                self.emit(f"task.scalars[{i}].i = {int(a.value)};")
            elif p.dtype in FLOAT_DTYPES:
                self.emit(f"task.scalars[{i}].f = {_c_double(float(a.value))};")
            else:
                self.emit(f"task.scalars[{i}].i = {int(a.value)};")
        self.before_submit(t)
        if t.device is not None:  # the mesh device it runs on (the cycle model's placement)
            self.emit(f"task.device = (int32_t)({self.c(t.device)});")
        elif self.m.devices is not None:
            # the field is set per task (the struct is cleared once): a task without one would
            # run on the last task's device
            raise InternalError("emit", f"task `{t.text}` of a mesh program has no device")
        self.placement()
        self.graph_keys(kernel, t, by_param)
        if self.sched.deps == "infer_bytes_overlap":
            self.emit("for (int32_t a = 0; a < task.ntiles; a++) "
                      "wsp_flat(&task.access[a], wsp_dims[task.access[a].tensor]);")
        self.emit(f"if ((rc = wsp_submit(rt, &task))) {self.RET}")
        self.emit("wsp_k++;")

    def before_submit(self, t: N.Task) -> None:
        """What a subclass adds to a filled task (csp.py: marks and trace notes)."""

    def placement(self) -> None:
        """task.dispatcher and task.stream by the schedule's policies (language.md section 8)."""
        s = self.sched
        if "dispatch" in s.given:
            p = s.dispatch
            if p.name == "round_robin":
                d = "wsp_mod(wsp_k, wsp_nd)"  # the k-th enumerated task to k % n
            elif p.name == "work_steal":
                # decision: as in Cilk or TBB, tasks start on the dispatcher that expands the
                # workload (0) and idle dispatchers steal them
                d = "0"
            elif p.name == "hash":
                d = f"wsp_mod((int64_t)(wsp_hash64((uint64_t)({self.c(p.args[0])})) >> 1), wsp_nd)"
            else:  # affinity, dispatch_by: the key (index) taken mod n
                d = f"wsp_mod({self.c(p.args[0])}, wsp_nd)"
            self.emit(f"task.dispatcher = (int32_t)({d});")
        if "streams" in s.given:
            # decision: `.streams(n)` without `.stream_by` deals tasks round robin over streams
            n = "wsp_ns"
            if self.m.devices is not None:
                # a mesh: each device its own n streams (device d's stream s is d * n + s;
                # schedule_policy asks for n per device), so a stream orders the tasks of one
                # device, never tasks of two (docs/distributed.md, "Where a task runs")
                n = f"(wsp_ns / {self.m.devices.count})"
            st = (f"wsp_mod({self.c(s.stream_by)}, {n})" if s.stream_by is not None
                  else f"wsp_mod(wsp_k, {n})")
            if self.m.devices is not None:
                st = f"(int64_t)task.device * {n} + {st}"
            self.emit(f"task.stream = (int32_t)({st});")

    def graph_keys(self, kernel: N.Kernel, t: N.Task, by_param: Optional[dict] = None) -> None:
        """task.priority and task.pool by `.task_graph(ready = priority(key), pools = ...)`; on
        a mesh of several devices the pool is the task's device (`graph_pools`: each device
        is served by its own share of the workers, docs/running.md, "--mesh"). task.cycles by
        `trace = cycles(key)` and the kernel's `add_cycles(n)` (n from the task's scalar
        arguments), which the model adds to (or, with a key, uses instead of) the kernel's cost
        (wsp_policy.task_cycles, set by `task_cycles_mode`)."""
        s = self.sched
        if task_cycles_mode(self.m, s):
            add = "0"
            if kernel.cycles is not None:
                env = {a.param: sym.as_expr(int(a.value)) if not isinstance(a.value, sym.Expr)
                       else a.value for a in (by_param or {}).values()
                       if a.param in sym.free_vars(kernel.cycles)}
                add = self.c(sym.substitute(kernel.cycles, env))
            key = self.c(s.trace_cost) if s.trace_cost is not None else "0"
            self.emit(f"task.cycles = (int64_t)({key}) + (int64_t)({add});")
        if s.ready.name == "priority":
            self.emit(f"task.priority = (int64_t)({self.c(s.ready.args[0])});")
        if self.m.devices is not None and t.device is not None:
            # the runtime's `device` (one device per process: runtime_c/devices.c) and, in
            # one process, the device's pool of workers
            self.emit(f"task.device = (int32_t)({self.c(t.device)});")
            self.emit("task.pool = task.device;")
        elif s.pools.name == "by_exec_unit":
            # decision: a kernel's pool is the unit the cycle model runs it on (the cube when
            # the Ascend emitter puts it there: backends/cube.runs_on_cube)
            self.emit(f"task.pool = {kernel_unit(kernel, self.vector_only)};")
        elif s.pools.name == "custom":
            self.emit(f"task.pool = (int32_t)wsp_mod({self.c(s.pools.args[0])}, {s.pools.n});")

    def tile(self, i: int, p: N.KParam, a: N.TileArg) -> None:
        ti = self.tensor_index[a.tensor]
        t = self.m.tensors[ti]
        size = size_of(t.dtype)
        offset = " + ".join(f"({self.c(o)}) * t{ti}_s{d}" for d, o in enumerate(a.offsets)) or "0"
        if a.gather is not None and a.gather.base is not None:
            # the wrapper adds index * row stride (gather.py); the indices count from `base`.
            # The pointer stays inside the tensor: base is the shard's first row on the
            # device this box starts at (ir/devices.py), whose rows lie after base rows
            offset = f"{offset} - ({self.c(a.gather.base)}) * t{ti}_s{a.row_dim}"
        self.emit(f"task.tiles[{i}].data = t{ti} + ({offset}) * {size};")
        # a partial view passes its own extents: the kernel runs it on a padded tile
        for which, d, full, part in (("rows", a.row_dim, p.rows, a.partial[0]),
                                     ("cols", a.col_dim, p.cols, a.partial[1])):
            ext = (self.c(a.extents[d]) if d is not None else "1") if part else full
            if part and which == "rows" and a.gather is not None:  # the index slice's length
                ext = self.c(a.gather.count)
            self.emit(f"task.tiles[{i}].{which} = {ext};")
        # a strided view (`X[r, 0:64:2]`) steps its descriptor's strides: the kernel's entry
        # copies a tile with col_stride != 1 in and out (wsp_kernels.h, wsp_call_copied), so
        # a store writes only the view's elements
        rk, ck = a.step(a.row_dim), a.step(a.col_dim)
        self.emit(f"task.tiles[{i}].stride = {f't{ti}_s{a.row_dim}' + (f' * {rk}' if rk != 1 else '') if a.row_dim is not None else p.cols};")
        self.emit(f"task.tiles[{i}].col_stride = {f't{ti}_s{a.col_dim}' + (f' * {ck}' if ck != 1 else '') if a.col_dim is not None else 1};")
        acc = f"task.access[{i}]"
        self.emit(f"{acc}.tensor = {ti}; {acc}.mode = {_MODE[a.mode]}; {acc}.ndim = {len(a.offsets)};")
        # dependencies on the bounding box of a strided view's elements (never missing one)
        for d, (o, e) in enumerate(zip(a.offsets, a.box_extents)):
            lo = self.c(o)
            self.emit(f"{acc}.lo[{d}] = {lo}; {acc}.hi[{d}] = {self.c(sym.as_expr(o) + sym.as_expr(e))};")

    def extra(self, i: int, a: N.Access) -> None:
        """An access box without a parameter (CSP): a one-element tile after the kernel's own,
        which the kernel never reads, so the runtime infers dependencies on its box."""
        ti = self.tensor_index[a.tensor]
        offset = " + ".join(f"({self.c(o)}) * t{ti}_s{d}" for d, o in enumerate(a.offsets)) or "0"
        size = size_of(self.m.tensors[ti].dtype)
        self.emit(f"task.tiles[{i}].data = t{ti} + ({offset}) * {size};")
        self.emit(f"task.tiles[{i}].rows = 1; task.tiles[{i}].cols = 1; "
                  f"task.tiles[{i}].stride = 1; task.tiles[{i}].col_stride = 1;")
        acc = f"task.access[{i}]"
        self.emit(f"{acc}.tensor = {ti}; {acc}.mode = {_MODE[a.mode]}; {acc}.ndim = {len(a.offsets)};")
        for d, (o, e) in enumerate(zip(a.offsets, a.extents)):
            self.emit(f"{acc}.lo[{d}] = {self.c(o)}; "
                      f"{acc}.hi[{d}] = {self.c(sym.as_expr(o) + sym.as_expr(e))};")

    def index_tile(self, i: int, g: N.Gather) -> None:
        """The index slice of a gather view (gather.py): a column of the indices after the
        kernel's tiles, whose box the task reads."""
        ti = self.tensor_index[g.index]
        size = size_of(self.m.tensors[ti].dtype)
        sdim = next((d for d, e in enumerate(g.extents) if sym.const_value(e) != 1),
                    len(g.extents) - 1)
        offset = " + ".join(f"({self.c(o)}) * t{ti}_s{d}" for d, o in enumerate(g.offsets)) or "0"
        self.emit(f"task.tiles[{i}].data = t{ti} + ({offset}) * {size};")
        self.emit(f"task.tiles[{i}].rows = {self.c(g.extents[sdim])}; task.tiles[{i}].cols = 1; "
                  f"task.tiles[{i}].stride = t{ti}_s{sdim}; task.tiles[{i}].col_stride = 1;")
        acc = f"task.access[{i}]"
        self.emit(f"{acc}.tensor = {ti}; {acc}.mode = WSP_READ; {acc}.ndim = {len(g.offsets)};")
        for d, (o, e) in enumerate(zip(g.offsets, g.extents)):
            self.emit(f"{acc}.lo[{d}] = {self.c(o)}; "
                      f"{acc}.hi[{d}] = {self.c(sym.as_expr(o) + sym.as_expr(e))};")

    def view_check(self, chk: N.ViewCheck) -> None:
        k = len(self.out.checks)
        self.out.checks.append(chk)
        c = chk.check
        lhs, rhs = self.c(c.lhs), self.c(c.rhs)
        fmt, args = self.coords_format()
        if c.op.endswith("fits"):  # an operation over run-time values within int64
            self.emit(f"if (!{c.to_c(self.name_of)}) {{")
        else:
            self.emit(f"if (!(({lhs}) {c.op} ({rhs}))) {{")
        self.depth += 1
        extra = f", {args}" if args else ""
        shown = "".join(f", (long long)({self.c(e)})" for e in chk.shown)
        self.emit(f'snprintf(msg, sizeof msg, "VIEW {k} {fmt}|%lld|%lld{"|%lld" * len(chk.shown)}"'
                  f"{extra}, (long long)({lhs}), (long long)({rhs}){shown});")
        self.emit(f"rc = wsp_fail(rt, WSP_ERR_VIEW, msg); {self.RET}")
        self.depth -= 1
        self.emit("}")


class _TaskCount(V.Visitor):
    """C for the number of tasks a statement list submits (`count`), or None when that is not
    known before the list starts: a loop extent depends on a variable in `bound` (the loops
    of the nest itself, values read or slots set inside it), or a statement decides at run
    time which tasks run (`when`; CSP, where a coroutine may switch inside). `c` writes an
    expression in C."""

    def __init__(self, c):
        self.c = c

    def count(self, stmts, bound: frozenset) -> str | None:
        terms = []
        for st in stmts:
            found = self.visit(st, bound)
            if found is None:
                return None
            term, bound = found  # a statement may bind variables for the ones after it
            if term is not None:
                terms.append(term)
        return " + ".join(terms) or "0"

    # each visit: (a C term or None for no tasks, the variables bound after it), or None
    def visit_Task(self, st: N.Task, bound: frozenset):
        return "1", bound

    def visit_Read(self, st: N.Read, bound: frozenset):
        return None, bound | {st.var}  # values read inside the nest are not known on entry

    def visit_Assert(self, st: N.Assert, bound: frozenset):
        return None, bound

    def visit_SlotSet(self, st: N.SlotSet, bound: frozenset):
        return None, bound | {N.slot_var(st.slot)}  # later extents may read the slot

    def visit_Block(self, st: N.Block, bound: frozenset):
        inner = self.count(st.body, bound)
        return None if inner is None else (inner, bound)

    def visit_Loop(self, st: N.Loop, bound: frozenset):
        if sym.free_vars(st.extent) & bound:
            return None
        inner = self.count(st.body, bound | {st.var})
        if inner is None:
            return None
        return f"wsp_max({self.c(st.extent)}, 0) * ({inner})", bound

    def visit_other(self, st, bound: frozenset):
        return None  # `when`, CSP statements, and any class not counted above


def _c_double(v: float) -> str:
    if v != v:
        return "NAN"
    if v in (float("inf"), float("-inf")):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(v)


PRELUDE = """\
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wsp_runtime.h"

/* floor division, modulo and ceildiv (Python's), computed without overflow: the one quotient
 * past int64, INT64_MIN / -1, wraps to INT64_MIN (as a value past int64 does in ref). A divisor
 * that may be zero has an Assert before the statement (lower/values.py), so b == 0 never gets
 * here: the 0 only keeps C defined */
/* `.task_graph(deps = infer_bytes_overlap)`: an access box becomes the range of elements (of one
 * dtype: bytes scaled) from its first element to its last, row-major over the tensor's dims, so
 * two boxes of a tensor conflict whenever their byte ranges overlap, boxes or not */
static inline void wsp_flat(wsp_access *a, const int64_t *dims) {
    if (!dims) return;  /* a task handle's order tensor: its boxes stay coordinates */
    int64_t first = 0, last = 0, stride = 1;
    int empty = 0;
    for (int d = a->ndim - 1; d >= 0; d--) {
        if (a->hi[d] <= a->lo[d]) empty = 1;
        first += a->lo[d] * stride;
        last += (a->hi[d] - 1) * stride;
        stride *= dims[d];
    }
    a->ndim = 1;
    a->lo[0] = empty ? 0 : first;
    a->hi[0] = empty ? 0 : last + 1;
}
static inline int64_t wsp_floordiv(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - (uint64_t)a);  /* INT64_MIN / -1 traps in C */
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t wsp_mod(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t wsp_ceildiv(int64_t a, int64_t b) {
    if (b == 0) return 0;
    if (b == -1) return (int64_t)(0 - (uint64_t)a);
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) == (b < 0))) ? q + 1 : q;
}
/* whether a + b, a - b, a * b are within int64: the Asserts of run-time overflow checks
 * (lower/values.py), which come before any use of the value */
static inline int wsp_add_fits(int64_t a, int64_t b) { int64_t r; return !__builtin_add_overflow(a, b, &r); }
static inline int wsp_sub_fits(int64_t a, int64_t b) { int64_t r; return !__builtin_sub_overflow(a, b, &r); }
static inline int wsp_mul_fits(int64_t a, int64_t b) { int64_t r; return !__builtin_mul_overflow(a, b, &r); }
static inline int64_t wsp_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t wsp_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t wsp_abs(int64_t a) { return a < 0 ? -a : a; }
static inline uint64_t wsp_hash64(uint64_t x) {  /* splitmix64's finaliser: spreads keys */
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27; x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
"""


def parse_view_failure(message: str) -> tuple[int, str, int, int, tuple[int, ...]] | None:
    """(check index, coordinates, lhs value, rhs value, the values of the check's `shown`) of
    a `VIEW ...` failure message."""
    m = re.fullmatch(r"VIEW (\d+) ([^|]*)\|(-?\d+)\|(-?\d+)((?:\|-?\d+)*)", message)
    if not m:
        return None
    shown = tuple(int(v) for v in m.group(5).split("|")[1:])
    return int(m.group(1)), m.group(2), int(m.group(3)), int(m.group(4)), shown


def task_cycles_mode(m: N.Module, s: N.Schedule) -> int:
    """wsp_policy.task_cycles for schedule `s`: 2 (WSP_TASK_CYCLES_SET) with a `trace =
    cycles(key)`, 1 (ADD) when a kernel of the module has `add_cycles`, else 0 (NONE)."""
    if s.trace_cost is not None:
        return 2
    return 1 if any(k.cycles is not None for k in m.kernels) else 0
