"""The compact plan of one schedule: the IR loop tree as plain int64 words the AICPU expander
(`aicpu/expand.aicpu`) interprets on the device with the bound symbols.

`build_plan(module, schedule) -> Plan` lowers the schedule's statements to a small bytecode
(instructions with jump targets, one flat array) whose operands are postfix integer
expressions (`sym` expressions and `when` predicates), plus tables of tensors, tasks,
run-time checks, channels, pipes and processes, and the schedule's policies. Every number the
expander needs is in `Plan.words`; the host copies exactly those words to the device
(`include/wsp_plan_data.h`), and the tests feed the same words to the expander compiled on the
host. `Plan` also keeps, for messages and tests, which IR task, check and blocking site each
index stands for.

The instruction set mirrors `backends/cpu/enumerate.py` and `csp.py` statement for statement:
a `P.seq` loop is `ORDER_PUSH; LOOP_INIT; head: LOOP_TEST; SEQ_NEXT; body; LOOP_STEP; ORDER_POP`,
a `sequential` block pushes a scope and steps it between statements, a `send` blocks until its
channel may take the item, a `consume` loops over the coroutine's share of the items, and a
`pipe` starts one coroutine per process replica (the CSP scheduler of `ir/nodes.py`).
Left alone: how tasks run (the AICore dispatcher) and what the host does with errors.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Optional

from ... import limits, sym
from ...diagnostics import InternalError
from ...dtypes import DTYPES, TABLE
from ...ir import nodes as N
from ...ir.visit import Visitor, loop_nest_tasks
from .abi import scalar_word

MAGIC = 0x314E414C50505357  # "WSPPLAN1" read as a little-endian int64
VERSION = 3  # 2: the mesh section and COMM (a mesh runs one process per device); 3: a
# collective's source and destination in the mesh section (its HCCL call overlaps computation)
MAX_DIMS = 8
MAX_TILES, MAX_SCALARS = limits.MAX_TILES, limits.MAX_SCALARS  # what a task passes (limits.py)
MAX_COORDS = 8
MAX_LEVELS = 32  # nested order scopes (P.seq, sequential) a coroutine may hold, borrowed included
EXPR_STACK = 64  # the evaluator's stack; build_plan refuses deeper expressions

# Postfix expression operations (`E_*` in wsp_plan.h). CONST, SYM, VAR, SLOT and QUERY take one
# operand word; the others pop their arguments and push the result; END closes an expression.
EXPR_OPS = ("END", "CONST", "SYM", "VAR", "SLOT", "ADD", "SUB", "MUL", "FDIV", "MOD", "CDIV",
            "MIN", "MAX", "ABS", "EQ", "NE", "LT", "LE", "GT", "GE", "AND", "OR", "NOT", "QUERY",
            "ADD_FITS", "SUB_FITS", "MUL_FITS")
# a check's relation (its word in the CHECKS table indexes this; expand.aicpu's `ops` agrees)
CHECK_OPS = ("==", "!=", "<", "<=", ">", ">=", "+fits", "-fits", "*fits")
E = {name: i for i, name in enumerate(EXPR_OPS)}
_CMP = {"==": "EQ", "!=": "NE", "<": "LT", "<=": "LE", ">": "GT", ">=": "GE"}

# Instructions (`I_*`) and their operands, in order; `pc` operands are code word offsets,
# `expr` operands offsets into the expression section, `var` a coroutine variable.
INSTRUCTIONS = (
    ("DONE", ()),                                 # the coroutine has finished
    ("JUMP", ("pc",)),
    ("BRANCH_FALSE", ("expr", "pc")),             # when-branch: jump unless the predicate holds
    ("LOOP_INIT", ("var", "var", "expr")),        # var = 0; n = extent (evaluated once)
    ("LOOP_TEST", ("var", "var", "pc")),          # leave the loop when var >= n
    ("LOOP_STEP", ("var", "pc")),                 # var++, back to the test
    ("SEQ_NEXT", ("var",)),                       # P.seq: a new step from the second iteration
    ("ORDER_PUSH", ()),
    ("ORDER_NEXT", ()),
    ("ORDER_POP", ()),
    ("CHECK", ("check",)),                        # a run-time fact; failing ends the run
    ("READ", ("var", "tensor", "n", "expr*")),    # var = tensor[index...] after its writers
    ("SLOT_SET", ("k", "expr")),
    ("TASK", ("task",)),
    ("SEND", ("channel", "var", "task", "site")),
    ("CONSUME_HEAD", ("channel", "var", "pc", "site")),  # next item, or leave when closed
    ("CONSUME_TAIL", ("channel", "var", "pc")),   # release the item, back to the head
    ("PIPE", ("pipe",)),                          # start the processes, wait for them
    ("PIPE_END", ("pipe",)),                      # (right after PIPE) close its channels
    ("MARK_BEGIN", ("channel", "var")),           # record(ev): open a generation (var: saved)
    ("MARK_END", ("channel", "var")),
    ("SYNC", ("channel",)),                       # synchronize(ev)
    ("COMM", ()),                                 # a mesh: a collective's tile tasks begin
)
OPCODE = {name: i for i, (name, _) in enumerate(INSTRUCTIONS)}

# Header words (`WSP_P_*`): counts, section offsets and the schedule's policies.
HEADER = ("MAGIC", "VERSION", "NSYMS", "NTENSORS", "NKERNELS", "NCHANNELS", "NVARS", "NTASKS",
          "NCHECKS", "NPIPES", "NPROCS", "MAX_COROUTINES", "TENSORS", "EXPRS", "CODE", "TASKS",
          "CHECKS", "CHANNELS", "PIPES", "PROCS", "MAIN_PC", "DISPATCH", "NDISPATCHERS",
          "DISPATCH_KEY", "NSTREAMS", "STREAM_KEY", "WINDOW", "WINDOW_MODE", "TIMING",
          "TIMING_ARG", "USES_CSP", "NDEVICES", "MESH", "WORDS")
H = {name: i for i, name in enumerate(HEADER)}

# `.dispatch(...)` as the expander places tasks (`WSP_DISPATCH_*`): NONE when not written
DISPATCH = ("NONE", "ROUND_ROBIN", "AFFINITY", "HASH", "DISPATCH_BY", "WORK_STEAL")
TIMING = ("immediate", "batched", "interleaved", "rate_limit")

# Scalar argument kinds (`WSP_SC_*`): an integer expression into `.i`, an integer expression
# converted to double into `.f`, or constant raw bits
# a float scalar given by an expression is rounded by the expander to its dtype (F32 / F16 /
# BF16, `wsp_scalar_f32`); a constant is already its word (BITS: `abi.scalar_word`)
SCALAR_KINDS = ("INT", "F32", "F16", "BF16", "BITS")

# Element types of the tensor table (`WSP_DT_*`) are numbered in the order of dtypes.DTYPES (an
# ABI); READ converts integer elements to int64
_MODE = {"r": 1, "w": 2, "rw": 3}  # WSP_READ / WSP_WRITE / WSP_READWRITE


@dataclass
class CheckInfo:
    """What a plan's check index stands for: the IR check, the coordinates a report names
    (their names; the expander reports the values), the call it guards, and whether it is a
    fact about data read during the run (`bad-data`) rather than a view (`bad-view`)."""

    check: N.ViewCheck
    scope: tuple[str, ...]
    task: Optional[str]
    data: bool


@dataclass
class SiteInfo:
    """A place a coroutine may block (a `send` or `consume`), for deadlock reports."""

    kind: str
    channel: str
    depth: int
    process: str
    replicated: bool
    span: object


@dataclass
class Plan:
    """The words of one schedule's plan and what their indices stand for."""

    schedule: str
    words: list[int]
    tasks: list[N.Task] = field(default_factory=list)
    checks: list[CheckInfo] = field(default_factory=list)
    sites: list[SiteInfo] = field(default_factory=list)
    pipes: list[N.Pipe] = field(default_factory=list)
    var_names: list[str] = field(default_factory=list)
    max_coroutines: int = 1
    # a mesh: the plan task of each collective (by its COMM index in the MESH section)
    comms: list[N.Task] = field(default_factory=list)


def c_defines() -> str:
    """The plan format as C enums, for `include/wsp_plan.h` (one source of truth)."""
    def enum(prefix: str, names) -> str:
        body = "\n".join(f"    {prefix}{n.upper()} = {i}," for i, n in enumerate(names))
        return f"enum {{\n{body}\n}};\n"

    return "\n".join([
        f"#define WSP_PLAN_MAGIC {MAGIC}LL",
        f"#define WSP_PLAN_VERSION {VERSION}",
        f"#define WSP_MAX_DIMS {MAX_DIMS}",
        f"#define WSP_MAX_TILES {MAX_TILES}",
        f"#define WSP_MAX_SCALARS {MAX_SCALARS}",
        f"#define WSP_MAX_COORDS {MAX_COORDS}",
        f"#define WSP_MAX_LEVELS {MAX_LEVELS}",
        f"#define WSP_EXPR_STACK {EXPR_STACK}",
        "",
        "/* header words of a plan */", enum("WSP_P_", HEADER),
        "/* postfix expression operations */", enum("WSP_E_", EXPR_OPS),
        "/* instructions */", enum("WSP_I_", (n for n, _ in INSTRUCTIONS)),
        "/* .dispatch(...) */", enum("WSP_DISPATCH_", DISPATCH),
        "/* .timing(...) */", enum("WSP_PLAN_TIMING_", TIMING),
        "/* scalar argument kinds */", enum("WSP_SC_", SCALAR_KINDS),
        "/* element types */", enum("WSP_DT_", DTYPES),
    ])


def float_bits(v: float) -> int:
    """The IEEE double `v` as a signed int64 word."""
    return struct.unpack("<q", struct.pack("<d", v))[0]


class _Builder(Visitor):
    """Lowers one schedule: statements to code words (one `visit_<Class>` per statement class),
    expressions to the expression section."""

    def __init__(self, m: N.Module, s: N.Schedule):
        self.m, self.s = m, s
        self.syms = {sd.name: i for i, sd in enumerate(m.syms)}
        self.tensors = {t.name: i for i, t in enumerate(m.tensors)}
        self.kernels = {k.name: i for i, k in enumerate(m.kernels)}
        self.channels = {c.name: i for i, c in enumerate(m.channels)}
        self.exprs: list[int] = []
        self.expr_at: dict[tuple, int] = {}
        self.code: list[int] = []
        self.vars: dict[str, int] = {}
        self.task_words: list[list[int]] = []
        self.check_words: list[list[int]] = []
        self.pipe_words: list[list[int]] = []
        self.proc_words: list[list[int]] = []
        self.pending: list[tuple[int, N.Process, list[str], int]] = []
        # coroutines that may be alive at once: main, plus every replica of every pipe times
        # the replicas of the processes around it (a pipe may run in each of them at once)
        self.coroutines = 1
        self.copies = 1  # replicas of the processes around the statements being built
        self.plan = Plan(s.name, [])
        self.scope: list[str] = []  # the coordinates a check report names
        self.csp = s.uses_csp
        self.syms_only = False
        self.process: Optional[N.Process] = None
        # a mesh (docs/distributed.md): per plan task its device expression and collective
        self.devices = _mesh_devices(m)
        self.mesh_words: list[list[int]] = []
        self.in_comm = False

    # -- variables and expressions
    def var(self, name: str) -> int:
        if name not in self.vars:
            self.vars[name] = len(self.vars)
            self.plan.var_names.append(name)
        return self.vars[name]

    def expr(self, e, syms_only: bool = False) -> int:
        """The offset of `e`'s code; `syms_only`: every name is a sym (tensor dims)."""
        code: list[int] = []
        self.syms_only = syms_only
        depth = self.emit_expr(sym.as_expr(e), code, 0)
        self.syms_only = False
        return self.intern(code, depth)

    def cond(self, c: N.Cond) -> int:
        code: list[int] = []
        depth = self.emit_cond(c, code, 0)
        return self.intern(code, depth)

    def intern(self, code: list[int], depth: int) -> int:
        if depth > EXPR_STACK:
            raise InternalError("ascend", f"plan: an expression needs {depth} stack entries")
        key = tuple(code)
        if key not in self.expr_at:
            self.expr_at[key] = len(self.exprs)
            self.exprs.extend(code)
            self.exprs.append(E["END"])
        return self.expr_at[key]

    def name(self, v: str, code: list[int]) -> None:
        k = N.slot_index(v)
        if k is not None:
            code += [E["SLOT"], k]
        elif v in self.syms and (self.syms_only or v not in self.vars):
            code += [E["SYM"], self.syms[v]]
        else:
            code += [E["VAR"], self.var(v)]

    def emit_expr(self, e: sym.Expr, code: list[int], depth: int) -> int:
        """Append postfix code for `e`; returns the most stack entries it uses (from `depth`)."""
        if isinstance(e, sym.Const):
            code += [E["CONST"], e.value]
            return depth + 1
        if isinstance(e, sym.Var):
            self.name(e.name, code)
            return depth + 1
        if isinstance(e, sym.Poly):
            return self.emit_poly(e, code, depth)
        if isinstance(e, (sym.Min, sym.Max)):
            most = self.emit_expr(e.args[0], code, depth)
            for a in e.args[1:]:
                most = max(most, self.emit_expr(a, code, depth + 1))
                code.append(E["MIN" if isinstance(e, sym.Min) else "MAX"])
            return most
        if isinstance(e, sym.Abs):
            most = self.emit_expr(e.arg, code, depth)
            code.append(E["ABS"])
            return most
        op = {sym.FloorDiv: "FDIV", sym.Mod: "MOD", sym.CeilDiv: "CDIV"}[type(e)]
        most = self.emit_expr(e.num, code, depth)
        most = max(most, self.emit_expr(e.den, code, depth + 1))
        code.append(E[op])
        return most

    def emit_poly(self, e: sym.Poly, code: list[int], depth: int) -> int:
        most = depth
        for i, (mono, coef) in enumerate(e.terms):
            at = depth + (1 if i else 0)
            factors = [a for a, p in mono for _ in range(p)]
            most = max(most, self.emit_expr(factors[0], code, at))
            for f in factors[1:]:
                most = max(most, self.emit_expr(f, code, at + 1))
                code.append(E["MUL"])
            if coef != 1:
                code += [E["CONST"], coef, E["MUL"]]
                most = max(most, at + 2)
            if i:
                code.append(E["ADD"])
        if e.const:
            code += [E["CONST"], e.const, E["ADD"]]
            most = max(most, depth + 2)
        return most

    def emit_cond(self, c: N.Cond, code: list[int], depth: int) -> int:
        if c.op == "const":
            code += [E["CONST"], int(bool(c.args[0]))]
            return depth + 1
        if c.op == "query":
            code += [E["QUERY"], self.channels[c.args[0]]]
            return depth + 1
        if c.op == "not":
            most = self.emit_cond(c.args[0], code, depth)
            code.append(E["NOT"])
            return most
        if c.op in ("and", "or"):
            most = self.emit_cond(c.args[0], code, depth)
            most = max(most, self.emit_cond(c.args[1], code, depth + 1))
            code.append(E[c.op.upper()])
            return most
        most = self.emit_expr(sym.as_expr(c.args[0]), code, depth)
        most = max(most, self.emit_expr(sym.as_expr(c.args[1]), code, depth + 1))
        code.append(E[_CMP[c.op]])
        return most

    # -- code
    def op(self, name: str, *operands: int) -> int:
        at = len(self.code)
        self.code.append(OPCODE[name])
        self.code.extend(operands)
        return at

    def patch(self, at: int, index: int, target: int) -> None:
        """Set operand `index` of the instruction at `at` (a jump target known later)."""
        self.code[at + 1 + index] = target

    # -- statements, by class (ir.visit.Visitor)
    def body(self, stmts) -> None:
        for st in stmts:
            if self.devices and not self.in_comm and self._comm_nest(st):
                # the loop nest of one collective's tile tasks: COMM marks where each run of
                # it begins, so the expander turns the tasks of one run into one collective the
                # host issues (its HCCL calls)
                self.op("COMM")
                self.in_comm = True
                self.visit(st)
                self.in_comm = False
            else:
                self.visit(st)

    def _comm_nest(self, st) -> bool:
        """`st` is loops around the tile tasks of one collective kernel, nothing else."""
        found = loop_nest_tasks((st,))
        if found is None or any(self.m.kernel(t.kernel).comm is None for t in found):
            return False
        return len({t.kernel for t in found}) == 1

    def visit_other(self, st) -> None:
        # a class with no instructions, which the expander could not run (a process is built
        # from its pipe's `pending` entry, never met in a statement list)
        raise InternalError("ascend", f"plan: unexpected statement {type(st).__name__}")

    def visit_Loop(self, lp: N.Loop) -> None:
        seq = lp.kind == "seq"
        v, n = self.var(lp.var), self.var(lp.var + "#n")
        if seq:
            self.op("ORDER_PUSH")
        self.op("LOOP_INIT", v, n, self.expr(lp.extent))
        head = self.op("LOOP_TEST", v, n, -1)
        if seq:
            self.op("SEQ_NEXT", v)
        self.scope.append(lp.var)
        self.body(lp.body)
        self.scope.pop()
        self.op("LOOP_STEP", v, head)
        self.patch(head, 2, len(self.code))
        if seq:
            self.op("ORDER_POP")

    def visit_Block(self, b: N.Block) -> None:
        if b.kind != "sequential":
            self.body(b.body)
            return
        self.op("ORDER_PUSH")
        for i, st in enumerate(b.body):
            if i:
                self.op("ORDER_NEXT")
            self.body((st,))
        self.op("ORDER_POP")

    def visit_Read(self, r: N.Read) -> None:
        for chk in r.checks:
            self.op("CHECK", self.check(chk, None, False))
        index = [self.expr(i) for i in r.index]
        self.op("READ", self.var(r.var), self.tensors[r.tensor], len(index), *index)

    def visit_Assert(self, a: N.Assert) -> None:
        self.op("CHECK", self.check(a.check, None, True))

    def visit_When(self, w: N.When) -> None:
        exits = []
        for pred, body in w.branches:
            at = self.op("BRANCH_FALSE", self.cond(pred), -1)
            self.body(body)
            exits.append(self.op("JUMP", -1))
            self.patch(at, 1, len(self.code))
        self.body(w.otherwise)
        for at in exits:
            self.patch(at, 0, len(self.code))

    def visit_SlotSet(self, st: N.SlotSet) -> None:
        self.op("SLOT_SET", st.slot, self.expr(st.value))

    def visit_Task(self, t: N.Task) -> None:
        self.op("TASK", self.task(t))

    def visit_Send(self, st: N.Send) -> None:
        site = self.site("send", st)
        item = self.var(st.item)
        self.op("SEND", self.channels[st.channel], item, self.task(st.task), site)

    def visit_Consume(self, st: N.Consume) -> None:
        ch, item = self.channels[st.channel], self.var(st.item)
        head = self.op("CONSUME_HEAD", ch, item, -1, self.site("consume", st))
        self.scope.append(st.item)
        self.body(st.body)
        self.scope.pop()
        self.op("CONSUME_TAIL", ch, item, head)
        self.patch(head, 2, len(self.code))

    def visit_Pipe(self, p: N.Pipe) -> None:
        pid = len(self.pipe_words)
        self.plan.pipes.append(p)
        words = [len(p.channels)]
        for name in p.channels:
            senders = sum(q.replicas for q in p.processes if name in q.sends)
            words += [self.channels[name], senders]
        words.append(len(p.processes))
        self.pipe_words.append(words)
        for proc in p.processes:
            words.append(len(self.proc_words))
            owned = [self.channels[c] for c in p.channels if c in proc.sends]
            id_var = self.var(proc.id_var) if proc.id_var is not None else -1
            self.proc_words.append([-1, proc.replicas, id_var, len(owned), *owned])
            self.pending.append((len(self.proc_words) - 1, proc, list(self.scope),
                                 self.copies * proc.replicas))
            self.coroutines += self.copies * proc.replicas
        self.op("PIPE", pid)
        self.op("PIPE_END", pid)

    def visit_Mark(self, st: N.Mark) -> None:
        saved = {ev: self.var(f"{ev}#mark{len(self.code)}") for ev in st.events}
        for ev in st.events:
            self.op("MARK_BEGIN", self.channels[ev], saved[ev])
        self.body(st.body)
        for ev in st.events:
            self.op("MARK_END", self.channels[ev], saved[ev])

    def visit_Sync(self, st: N.Sync) -> None:
        self.op("SYNC", self.channels[st.event])

    # -- tables
    def check(self, chk: N.ViewCheck, task: Optional[str], data: bool) -> int:
        c = chk.check
        scope = tuple(self.scope)
        op = CHECK_OPS.index(c.op)
        self.check_words.append([self.expr(c.lhs), op, self.expr(c.rhs), len(scope),
                                 *(self.var(v) for v in scope)])
        self.plan.checks.append(CheckInfo(chk, scope, task, data))
        return len(self.check_words) - 1

    def site(self, kind: str, st) -> int:
        ch = self.m.channel(st.channel)
        p = self.process
        self.plan.sites.append(SiteInfo(kind, ch.name, ch.depth, p.name if p else "",
                                        p is not None and p.id_var is not None, st.span))
        return len(self.plan.sites) - 1

    def task(self, t: N.Task) -> int:
        kernel = self.m.kernel(t.kernel)
        checks = [self.check(chk, t.text, False) for a in t.args if isinstance(a, N.TileArg)
                  for chk in a.checks]
        tiles = [p for p in kernel.params if p.kind == "tile"]
        scalars = [p for p in kernel.params if p.kind == "scalar"]
        by_param = {a.param: a for a in t.args}
        coords = [self.expr(c) for c in t.coords[:MAX_COORDS]]
        words = [self.kernels[kernel.name], len(coords), *coords,
                 len(tiles), len(t.extra), len(scalars), len(checks), *checks]
        for p in tiles:
            a = by_param[p.name]
            # flags: 1 and 2 a partial view's rows and columns; 4 a strided view, whose row
            # and column steps follow (language.md section 6, "Strided views"; its box is the
            # bounding one, from which the expander counts the elements)
            rk, ck = a.step(a.row_dim), a.step(a.col_dim)
            strided = rk != 1 or ck != 1
            words += [self.tensors[a.tensor], _MODE[a.mode], p.rows, p.cols,
                      -1 if a.row_dim is None else a.row_dim,
                      -1 if a.col_dim is None else a.col_dim,
                      int(a.partial[0]) | 2 * int(a.partial[1]) | 4 * int(strided)]
            if strided:
                words += [rk, ck]
            words += self.box(a.offsets, a.box_extents)
            words += self.gather(a.gather)
        for a in t.extra:
            words += [self.tensors[a.tensor], _MODE[a.mode]]
            words += self.box(a.offsets, a.extents)
        for p in scalars:
            words += self.scalar(p, by_param[p.name])
        gathers = sum(1 for p in tiles if by_param[p.name].gather is not None)
        if len(tiles) + gathers + len(t.extra) + len(self.recorded()) > MAX_TILES or \
                len(scalars) > MAX_SCALARS:
            raise InternalError("ascend", f"plan: task `{t.text}` has too many arguments")
        self.task_words.append(words)
        self.plan.tasks.append(t)
        if self.devices:
            comm, src, dst = -1, -1, -1
            if kernel.comm is not None:
                if not self.in_comm:
                    raise InternalError("ascend", f"plan: the tile tasks of `{t.text}` are not a "
                                        "loop nest of their own (one HCCL call per run)")
                comm = len(self.plan.comms)
                self.plan.comms.append(t)
                # what the call reads and writes: the expander holds back a later task of the
                # device that touches either until the call is done (docs/ascend.md)
                src, dst = comm_tensors(t)
                src, dst = self.tensors[src], self.tensors[dst]
            device = -1 if t.device is None else self.expr(t.device)
            self.mesh_words.append([device, comm, src, dst])
        return len(self.task_words) - 1

    def gather(self, g: Optional[N.Gather]) -> list[int]:
        """A tile's gather words: -1 (none), or the index tensor, its element kind (bytes,
        negative when signed), the dimension its slice runs along, and the slice's box (the
        task reads it; the AICore kernel reads the row numbers from there)."""
        if g is None:
            return [-1]
        ix = self.m.tensor(g.index)
        d = TABLE[ix.dtype]
        sdim = next((i for i, e in enumerate(g.extents) if sym.const_value(e) != 1),
                    len(g.extents) - 1)
        kind = -(d.bits // 8) if d.signed else d.bits // 8
        return [self.tensors[g.index], kind, sdim, *self.box(g.offsets, g.extents)]

    def box(self, offsets, extents) -> list[int]:
        words = [len(offsets)]
        for o, e in zip(offsets, extents):
            words += [self.expr(o), self.expr(sym.as_expr(o) + sym.as_expr(e))]
        return words

    def scalar(self, p: N.KParam, a: N.ScalarArg) -> list[int]:
        floating = TABLE[p.dtype].is_float
        if isinstance(a.value, sym.Expr):
            kind = p.dtype.upper() if floating else "INT"
            if kind not in SCALAR_KINDS:  # f64: the kernels' emitter refused it first
                raise InternalError("ascend", f"no AICore scalar of dtype {p.dtype}")
            return [SCALAR_KINDS.index(kind), self.expr(a.value)]
        if isinstance(a.value, bool):
            return [SCALAR_KINDS.index("BITS"), int(a.value)]
        if floating:
            return [SCALAR_KINDS.index("BITS"), scalar_word(p.dtype, float(a.value))]
        return [SCALAR_KINDS.index("BITS"), int(a.value)]

    def recorded(self) -> list[N.Channel]:
        return [c for c in self.m.channels if c.marks is not None] if self.csp else []

    # -- the whole plan
    def build(self) -> Plan:
        main_pc = len(self.code)
        self.body(self.s.body)
        self.op("DONE")
        while self.pending:
            index, proc, scope, copies = self.pending.pop(0)
            self.proc_words[index][0] = len(self.code)
            self.process, self.copies = proc, copies
            self.scope = scope + ([proc.id_var] if proc.id_var else [])
            self.body(proc.body)
            self.op("DONE")
        return self.assemble(main_pc)

    def assemble(self, main_pc: int) -> Plan:
        m, s = self.m, self.s
        header = dict.fromkeys(HEADER, 0)
        words: list[int] = []

        def section(rows: list[list[int]], indexed: bool) -> int:
            """Rows after an index of their offsets (indexed) or back to back."""
            start = len(HEADER) + len(words)
            if not indexed:
                for r in rows:
                    words.extend(r)
                return start
            at = start + len(rows)
            index = []
            for r in rows:
                index.append(at)
                at += len(r)
            words.extend(index)
            for r in rows:
                words.extend(r)
            return start

        tensor_rows = []
        for t in m.tensors:
            tensor_rows.append([DTYPES.index(t.dtype), TABLE[t.dtype].size, len(t.dims),
                                *(self.expr(d, syms_only=True) for d in t.dims)])
        policy = self.policy()  # may add key expressions: before the expression section
        channel_rows = [self.channel_row(c) for c in m.channels]
        header.update(policy)
        header.update(
            MAGIC=MAGIC, VERSION=VERSION, NSYMS=len(m.syms), NTENSORS=len(m.tensors),
            NKERNELS=len(m.kernels), NCHANNELS=len(m.channels), NVARS=len(self.vars),
            NTASKS=len(self.task_words), NCHECKS=len(self.check_words),
            NPIPES=len(self.pipe_words), NPROCS=len(self.proc_words),
            MAX_COROUTINES=self.max_coroutines(), MAIN_PC=main_pc,
            USES_CSP=int(s.uses_csp))
        header["TENSORS"] = section(tensor_rows, True)
        header["TASKS"] = section(self.task_words, True)
        header["CHECKS"] = section(self.check_words, True)
        header["CHANNELS"] = section(channel_rows, True)
        header["PIPES"] = section(self.pipe_words, True)
        header["PROCS"] = section(self.proc_words, True)
        header["EXPRS"] = section([self.exprs], False)
        header["CODE"] = section([self.code], False)
        if self.devices:  # per task: its device expression (-1: all), collective, the
            # collective's source and destination tensors (-1: not a collective's task)
            header["NDEVICES"] = self.devices
            header["MESH"] = section(self.mesh_words, False)
        header["WORDS"] = len(HEADER) + len(words)
        self.plan.words = [header[k] for k in HEADER] + words
        self.plan.max_coroutines = header["MAX_COROUTINES"]
        return self.plan

    def channel_row(self, c: N.Channel) -> list[int]:
        rows, cols = (c.elem[0], c.elem[1]) if c.elem is not None else (1, 1)
        slots = self.tensors[c.slots] if c.slots is not None else -1
        marks = self.tensors[c.marks] if c.marks is not None else -1
        return [c.nslots, int(c.depth == 0), slots, marks, rows, cols]

    def max_coroutines(self) -> int:
        """The coroutine records the expander needs (see `coroutines`); a run that needs
        more (a pipe run again before its previous run has ended) is reported by it."""
        return self.coroutines

    def policy(self) -> dict[str, int]:
        """The schedule's combinators as header words (language.md section 8)."""
        s = self.s
        out = dict(DISPATCH=0, NDISPATCHERS=0, DISPATCH_KEY=-1, NSTREAMS=0, STREAM_KEY=-1,
                   WINDOW=int(s.window or 0), WINDOW_MODE=int(s.window_mode == "abort"),
                   TIMING=TIMING.index(s.timing.name),
                   TIMING_ARG=self.timing_arg(s.timing))
        if "dispatch" in s.given:
            d = s.dispatch
            out["DISPATCH"] = DISPATCH.index(d.name.upper())
            out["NDISPATCHERS"] = dispatchers(s)
            if d.name in ("affinity", "hash", "dispatch_by"):
                out["DISPATCH_KEY"] = self.expr(d.args[0])
        if "streams" in s.given:
            out["NSTREAMS"] = int(s.streams)
            if s.stream_by is not None:
                out["STREAM_KEY"] = self.expr(s.stream_by)
        return out

    @staticmethod
    def timing_arg(t: N.Policy) -> int:
        if t.name in ("batched", "interleaved"):
            return int(t.args[0])
        if t.name == "rate_limit":
            return float_bits(float(t.args[0]))
        return 0


def dispatchers(s: N.Schedule, machine_dispatchers: Optional[int] = None) -> int:
    """The dispatcher count of a schedule's `.dispatch` (the machine's when it names none), as
    cpu_sim deals them (`backends/cpu/program.schedule_policy`)."""
    d = s.dispatch
    if machine_dispatchers is None:
        from ..machine import load_machine

        machine_dispatchers = load_machine(None).dispatchers
    if d.name == "round_robin":
        return int(d.args[0]) if d.args else machine_dispatchers
    return int(d.n) if d.n is not None else machine_dispatchers


def comm_tensors(t: N.Task) -> tuple[str, str]:
    """The source and destination tensors of a collective's tile task (what it reads, what
    it writes)."""
    reads = {a.tensor for a in t.args if isinstance(a, N.TileArg) and a.mode == "r"}
    writes = {a.tensor for a in t.args if isinstance(a, N.TileArg) and a.mode != "r"}
    if len(reads) != 1 or len(writes) != 1:
        raise InternalError("ascend", f"mesh: `{t.text}` has not one source and one destination")
    return reads.pop(), writes.pop()


def _mesh_devices(m: N.Module) -> int:
    """The devices of the mesh `m` was lowered to (`Module.devices`, `ir/devices.py`); 0
    without one (a mesh of one device is lowered to a single-device program)."""
    return 0 if m.devices is None else m.devices.count


def build_plan(module: N.Module, schedule: str) -> Plan:
    """The plan of `schedule` of `module` (an optimised IR module)."""
    return _Builder(module, module.schedule(schedule)).build()


def c_array(plan: Plan) -> str:
    """The words as a C initialiser, eight to a line."""
    lines = []
    for i in range(0, len(plan.words), 8):
        lines.append("    " + ", ".join(f"{w}LL" if -2**31 < w < 2**31 else _big(w)
                                        for w in plan.words[i:i + 8]) + ",")
    return "\n".join(lines)


def _big(w: int) -> str:
    if w == -2**63:
        return "(-9223372036854775807LL - 1)"
    return f"{w}LL"


def parse_c_array(text: str) -> list[int]:
    """The words of `WSP_PLAN` in a `wsp_plan_data.h` (the bytes the host copies)."""
    import re

    body = text.split("WSP_PLAN[WSP_PLAN_WORDS] = {", 1)[1].split("};", 1)[0]
    body = body.replace("(-9223372036854775807LL - 1)", str(-2**63))
    return [int(x) for x in re.findall(r"-?\d+", body.replace("LL", ""))]
