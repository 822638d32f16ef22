"""Print an IR `Module` as stable, readable text: `print_module(m) -> str`.

Used by `wspc compile --emit ir` and the golden files. Deterministic: op numbers are positions
in each kernel's op list, loop variables print by their IR names, spans print as `line:col`
only (never file paths, so golden files do not depend on where the tests run).

    kernel rmsnorm_tile(x: In f32[16, 128], ..., eps: Scalar f32)
      %0 = param x : [16, 128] f32
      %1 = mul %0, %0 : [16, 128] f32
      store y = %8
    kernel gate__down(h: ...)  # gate+down
      # fused: gate (complex-out-fusable) -> down (complex-out-fusable) via H [whole tile]
    schedule main = norm  [default]
      dispatch round_robin(4)
      for b in grid(B):
        task rmsnorm_tile[b, t]
          x: r X[b, t, 0:16, 0:128] rows=2 cols=3

Run-time values print as `read T@1 = T[b]` (its index checks below it), `assert lhs >= rhs  #
message`, `when PRED:` / `else when PRED:` / `otherwise:` blocks and `slot_set k = value`.

CSP prints as `channel l2c: f32[16, 128] depth 2 slots l2c@slots` declarations, `pipe:  # opens
l2c` with `process NAME * N (id NAME.id):  # sends c2s` blocks, `send l2c item l2c@1:` over its
task, `consume l2c as t:`, `mark ev:` over the recorded statement, `sync ev`, `query(ev)` in
predicates, and a task's extra slot accesses as `+r l2c@slots[t % 2, 0, 0]`.
"""

from __future__ import annotations

from typing import Union

from .. import sym
from ..diagnostics import InternalError
from . import nodes as N
from .kernel_plan import LoopNest
from .visit import Visitor, children


def print_module(m: N.Module) -> str:
    """The whole module as text (ends with a newline)."""
    out: list[str] = [f"module {m.name}"]
    if m.syms or m.tensors or m.checks or m.mesh:
        out.append("")
    for s in m.syms:
        out.append(f"sym {s.name}" + (f" = {s.default}" if s.default is not None else ""))
    if m.mesh is not None:
        out.append("mesh " + ", ".join(f"{a.name} = {sym.to_str(a.size)}" for a in m.mesh.axes))
    if m.devices is not None:  # lowered to devices: the global shapes the caller sees
        out.append("devices " + ", ".join(f"{a} = {n}" for a, n in m.devices.axes))
        for p in m.devices.tensors:
            out.append(f"# {p.name}: [{', '.join(sym.to_str(d) for d in p.dims)}]"
                       + (f" @ {p.layout.text()}" if p.layout is not None else ""))
    for t in m.tensors:
        out.append(f"{t.kind} {t.name}: {t.dtype}[{', '.join(sym.to_str(d) for d in t.dims)}]"
                   + (f" @ {t.layout.text()}" if t.layout is not None else "")
                   + (f", location = {t.location}" if t.location != "global" else ""))
    for c in m.checks:
        out.append(_check(c))
    for c in m.channels:
        out.append(channel_line(c))
    for k in m.kernels:
        out.append("")
        out.extend(kernel_lines(k))
    for s in m.schedules:
        out.append("")
        out.extend(schedule_lines(s, s.name == m.default_schedule))
    return "\n".join(out) + "\n"


def channel_line(c: N.Channel) -> str:
    kind = "event" if c.is_event else "channel"
    elem = f": {c.elem[2]}[{c.elem[0]}, {c.elem[1]}]" if c.elem is not None else ""
    slots = f" slots {c.slots}" if c.slots is not None else ""
    marks = f" marks {c.marks}" if c.marks is not None else ""
    return f"{kind} {c.name}{elem} depth {c.depth}{slots}{marks}"


def _value(v: Union[int, float, bool, str, None]) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _shape(shape) -> str:
    return "" if shape is None else f"[{shape[0]}, {shape[1]}] "


def op_line(i: int, op: N.Op) -> str:
    """`%3 = mul %1, %2 : [16, 128] f32`."""
    parts = [f"%{a}" for a in op.args]
    if op.attr is not None:
        parts.insert(0, _value(op.attr))
    operands = (" " + ", ".join(parts)) if parts else ""
    return f"%{i} = {op.op}{operands} : {_shape(op.shape)}{op.dtype}"


def kernel_lines(k: N.Kernel) -> list[str]:
    params = []
    for p in k.params:
        if p.kind == "tile":
            params.append(f"{p.name}: {p.mode} {p.dtype}[{p.rows}, {p.cols}]"
                          + (f" pad={_value(p.pad)}" if p.pad != 0 else ""))
        else:
            params.append(f"{p.name}: Scalar {p.dtype}")
    head = f"kernel {k.name}({', '.join(params)})"
    if k.name != k.source or k.constexprs:
        head += f"  # {k.source}" + "".join(f" {n}={v}" for n, v in k.constexprs)
    if k.is_extern:  # each body as `extern LANG` and its `| ` lines, the first on the head
        lines = []
        for lang, code in (("c", k.extern_c), ("cpp", k.extern_cpp), ("ascend", k.extern_ascend)):
            if code is not None:
                incs = "".join(f' include "{h}"' for h in k.cpp_includes) if lang == "cpp" else ""
                lines.append(f"{head} extern {lang}{incs}" if not lines else f"  extern {lang}{incs}")
                body = code.strip("\n").splitlines()
                lines.extend(f"  | {line.rstrip()}".rstrip() for line in body)
        return lines
    lines = [head]
    lines.extend(f"  # fused: {note}" for note in k.fused)
    if k.comm is not None:
        c = k.comm
        lines.append(f"  # comm: {c.kind} over {c.over}, group {c.group}"
                     + (f", op {c.op}" if c.op else "") + f", {sym.to_str(c.bytes)} bytes a task")
    lines.extend("  " + op_line(i, op) for i, op in enumerate(k.ops))
    lines.extend(f"  store {name} = %{idx}" for name, idx in k.stores)
    if k.cycles is not None:
        lines.append(f"  add_cycles {sym.to_str(k.cycles)}")
    if k.plan is not None:  # after plan-kernels: nests, registers, buffers, temporary bytes
        lines.extend("  " + line for line in plan_lines(k))
    return lines


def plan_lines(k: N.Kernel) -> list[str]:
    """A planned kernel's plan as text (printed under its ops); [] without a plan."""
    plan = k.plan
    if plan is None:
        return []
    ops = k.ops
    buf_of = dict(plan.assign)

    def where(i: int) -> str:
        return f"%{i}"

    def nest_line(t: LoopNest) -> str:
        parts = [" ".join(where(i) for i in t.ops)] if t.ops else []
        parts += [f"{ops[r].op} {where(r)} (lanes)" for r in t.rowreds]
        parts += [f"{ops[r].op} {where(r)}" for r in t.colreds]
        parts += [f"store {p} = {where(v)}" for p, v in t.stores]
        return f"nest [{t.shape[0]}, {t.shape[1]}] level {t.level}: " + ", ".join(parts)

    lines = ["plan:"]
    for s in plan.steps:
        if s.matmul is not None:
            how = (f"blocked kc={s.kc}" + (" pack a" if s.pack_a else "")
                   + ("" if s.pack_b else " b in place")) if s.blocked \
                else "dot" if s.dot else "small" if s.small else "ikj"
            into = dict(plan.into).get(s.matmul)
            lines.append(f"  matmul {where(s.matmul)} {how}" + (f" into {into}" if into else ""))
        elif s.select is not None:
            lines.append(f"  select {where(s.select)}")
        elif len(s.nests) == 1:
            lines.append("  " + nest_line(s.nests[0]))
        else:
            lines.append(f"  rows {s.nests[0].shape[0]}, row by row:")
            lines.extend("    " + nest_line(t) for t in s.nests)
    lines.extend(f"  store {p} = {where(v)}" for p, v in plan.stores)
    inline = [i for i, kd in enumerate(plan.kinds) if kd == "inline"]
    regs = [i for i, kd in enumerate(plan.kinds) if kd == "ew" and i not in buf_of]
    if inline:
        lines.append("  inline: " + " ".join(where(i) for i in inline))
    if regs:
        lines.append("  registers: " + " ".join(where(i) for i in regs))
    if plan.buffers:
        for b, (dt, n) in enumerate(plan.buffers):
            vals = " ".join(where(u) for u, bb in plan.assign if bb == b)
            lines.append(f"  buffer b{b}: {dt}[{n}] <- {vals}")
    lines.append(f"  temporaries: {plan.temp_bytes_before} bytes -> {plan.temp_bytes_after} bytes")
    return lines


def _policy(p: N.Policy) -> str:
    args = [sym.to_str(a) if isinstance(a, sym.Expr) else _value(a) for a in p.args]
    if p.name == "interleaved" and len(args) == 2:
        args[1] = f"priority = {args[1]}"
    if p.n is not None:
        args.append(f"n = {p.n}")
    return f"{p.name}({', '.join(args)})" if args else p.name


def schedule_lines(s: N.Schedule, default: bool = False) -> list[str]:
    lines = [f"schedule {s.name} = {s.workload}" + ("  [default]" if default else "")]
    lines.append(f"  dispatch {_policy(s.dispatch)}")
    lines.append(f"  streams {s.streams}"
                 + (f" by {sym.to_str(s.stream_by)}" if s.stream_by is not None else ""))
    lines.append(f"  timing {_policy(s.timing)}")
    if s.window is not None:
        lines.append(f"  window {s.window} {s.window_mode}")
    # the task-graph knobs, only where a schedule sets one (the goldens stay as they were)
    knobs = [("deps", s.deps, "infer_tensor_map_exact"), ("ready", _policy(s.ready), "work_steal"),
             ("start", _policy(s.start), "threshold(1)"), ("pools", _policy(s.pools), "single"),
             ("trace", s.trace + (f"({sym.to_str(s.trace_cost)})" if s.trace_cost is not None
                                  else ""), "none")]
    graph = " ".join(f"{k} {v}" for k, v, default in knobs if v != default)
    if graph:
        lines.append(f"  graph {graph}")
    if s.uses_csp:
        lines.append("  csp")
    if s.transforms:
        lines.append("  axes " + "; ".join(s.transforms))
    for st in s.body:
        lines.extend(stmt_lines(st, 1))
    return lines


def stmt_lines(st: N.Stmt, depth: int) -> list[str]:
    """A statement and the statements nested in it, indented `depth` steps."""
    return _STMTS.visit(st, depth)


class _Statements(Visitor):
    """Each statement's own line(s) at `depth`, then its nested statements one step deeper
    (a `when` puts its branch heads between them)."""

    def nested(self, st, depth: int) -> list[str]:
        return [line for seq in children(st) for x in seq for line in self.visit(x, depth + 1)]

    def visit_other(self, st, depth: int) -> list[str]:
        raise InternalError("printer", f"no text for a {type(st).__name__}")

    def visit_Loop(self, st: N.Loop, depth: int) -> list[str]:
        return [f"{_pad(depth)}for {st.var} in {st.kind}({sym.to_str(st.extent)}):"] + \
            self.nested(st, depth)

    def visit_Block(self, st: N.Block, depth: int) -> list[str]:
        return [f"{_pad(depth)}{st.kind}:"] + self.nested(st, depth)

    def visit_Task(self, st: N.Task, depth: int) -> list[str]:
        return task_lines(st, depth)

    def visit_Read(self, st: N.Read, depth: int) -> list[str]:
        pad = _pad(depth)
        index = ", ".join(sym.to_str(i) for i in st.index)
        return [f"{pad}read {st.var} = {st.tensor}[{index}]"] + \
            [f"{pad}  {_check(c)}" for c in st.checks]

    def visit_Assert(self, st: N.Assert, depth: int) -> list[str]:
        return [f"{_pad(depth)}assert {_check(st.check)[len('check '):]}"]

    def visit_When(self, st: N.When, depth: int) -> list[str]:
        pad = _pad(depth)
        lines = []
        for i, (c, body) in enumerate(st.branches):
            lines.append(f"{pad}{'when' if i == 0 else 'else when'} {cond(c)}:")
            lines.extend(line for x in body for line in self.visit(x, depth + 1))
        if st.otherwise:
            lines.append(f"{pad}otherwise:")
            lines.extend(line for x in st.otherwise for line in self.visit(x, depth + 1))
        return lines

    def visit_SlotSet(self, st: N.SlotSet, depth: int) -> list[str]:
        return [f"{_pad(depth)}slot_set {st.slot} = {sym.to_str(st.value)}"]

    def visit_Pipe(self, st: N.Pipe, depth: int) -> list[str]:
        opens = f"  # opens {', '.join(st.channels)}" if st.channels else ""
        return [f"{_pad(depth)}pipe:{opens}"] + self.nested(st, depth)

    def visit_Process(self, st: N.Process, depth: int) -> list[str]:
        head = f"{_pad(depth)}process {st.name}"
        if st.id_var is not None:
            head += f" * {st.replicas} (id {st.id_var})"
        head += ":" + (f"  # sends {', '.join(st.sends)}" if st.sends else "")
        return [head] + self.nested(st, depth)

    def visit_Send(self, st: N.Send, depth: int) -> list[str]:
        return [f"{_pad(depth)}send {st.channel} item {st.item}:"] + self.nested(st, depth)

    def visit_Consume(self, st: N.Consume, depth: int) -> list[str]:
        return [f"{_pad(depth)}consume {st.channel} as {st.item}:"] + self.nested(st, depth)

    def visit_Mark(self, st: N.Mark, depth: int) -> list[str]:
        return [f"{_pad(depth)}mark {', '.join(st.events)}:"] + self.nested(st, depth)

    def visit_Sync(self, st: N.Sync, depth: int) -> list[str]:
        return [f"{_pad(depth)}sync {st.event}"]

    def visit_Collective(self, st: N.Collective, depth: int) -> list[str]:
        words = [f"into = {st.into}"]
        if st.over is not None:
            words.append(f"over = {st.over}")
        if st.dim is not None:
            words.append(f"dim = {st.dim}")
        if st.op is not None:
            words.append(f"op = {st.op}")
        return [f"{_pad(depth)}{st.kind}({st.source}, {', '.join(words)})"]


_STMTS = _Statements()


def _pad(depth: int) -> str:
    return "  " * depth


def cond(c: N.Cond, top: bool = True) -> str:
    """`a < b and not (c == 0)`: a run-time predicate as text."""
    if c.op == "const":
        return _value(c.args[0])
    if c.op == "query":
        return f"query({c.args[0]})"
    if c.op == "not":
        return f"not {cond(c.args[0], False)}"
    if c.op in ("and", "or"):
        text = f"{cond(c.args[0], False)} {c.op} {cond(c.args[1], False)}"
        return text if top else f"({text})"
    text = f"{sym.to_str(c.args[0])} {c.op} {sym.to_str(c.args[1])}"
    return text if top else f"({text})"


def task_lines(t: N.Task, depth: int) -> list[str]:
    pad = "  " * depth
    coords = f"[{', '.join(sym.to_str(c) for c in t.coords)}]" if t.coords else ""
    head = f"{pad}task {t.kernel}{coords}"
    if t.device is not None:  # a program lowered to devices (ir/devices.py)
        head += f" on device {sym.to_str(t.device)}"
    if t.text != f"{t.kernel}{coords}":
        head += f"  # {t.text}"
    lines = [head]
    for a in t.args:
        if isinstance(a, N.TileArg):
            part = [w for w, f in zip(("rows", "cols"), a.partial) if f]
            lines.append(f"{pad}  {a.param}: {a.mode} {box(a)} rows={_dim(a.row_dim)} "
                         f"cols={_dim(a.col_dim)}"
                         + (f" partial={','.join(part)}" if part else ""))
            if a.gather is not None:
                g = a.gather
                idx = ", ".join(sym.to_str(o) if sym.const_value(e) == 1 else
                                f"{sym.to_str(o)}:{sym.to_str(sym.add(o, e))}"
                                for o, e in zip(g.offsets, g.extents))
                lines.append(f"{pad}    gather rows from {g.index}[{idx}]: "
                             f"{', '.join(sym.to_str(r) for r in g.rows)}"
                             + (f" (from row {sym.to_str(g.base)})" if g.base is not None else ""))
            lines.extend(f"{pad}    {_check(c)}" for c in a.checks)
        else:
            v = sym.to_str(a.value) if isinstance(a.value, sym.Expr) else _value(a.value)
            lines.append(f"{pad}  {a.param} = {v} : {a.dtype}")
    for x in t.extra:
        parts = ", ".join(sym.to_str(o) if sym.const_value(e) == 1 else
                          f"{sym.to_str(o)}:{sym.to_str(sym.add(o, e))}"
                          for o, e in zip(x.offsets, x.extents))
        lines.append(f"{pad}  +{x.mode} {x.tensor}[{parts}]")
    return lines


def _dim(d) -> str:
    return "-" if d is None else str(d)


def box(a: N.TileArg) -> str:
    """`X[b, t * 16:t * 16 + 16, 0:128]`: an index where the extent is 1 off the tile's dims;
    a strided view's dimension is its bounding box and step, which name the same elements and
    stay inside the tensor (`X[r, 0:64:2]` prints `0:63:2`)."""
    parts = []
    for d, (off, ext) in enumerate(zip(a.offsets, a.box_extents)):
        k = a.step(d)
        if sym.const_value(ext) == 1 and d not in (a.row_dim, a.col_dim):
            parts.append(sym.to_str(off))
        else:
            parts.append(f"{sym.to_str(off)}:{sym.to_str(sym.add(off, ext))}"
                         + (f":{k}" if k != 1 else ""))
    return f"{a.tensor}[{', '.join(parts)}]"


def _check(c: N.ViewCheck) -> str:
    where = f" @{c.span.line}:{c.span.col}" if c.span.line else ""
    return f"check {c.check}  # {c.message}{where}"


__all__ = ["print_module", "kernel_lines", "plan_lines", "schedule_lines", "op_line", "box", "cond",
           "channel_line"]
