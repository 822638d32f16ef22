"""CSP (language.md section 7; the contract is the "CSP" part of `ir/nodes.py`): channels and
events, pipes, processes, `send`, `consume`, `record`, `synchronize` and `query` as IR.

- Every channel and event is an `N.Channel` of the module; one used by `send`/`consume` gets
  a scratch tensor `NAME@slots` of `max(depth, 1)` slots (`N.slots_name`).
- `pipe` is an `N.Pipe` owning the channels its processes consume, `process` an `N.Process`
  (replica variable `NAME.id`), `send(ch, CALL)` an `N.Send` whose task writes the slot
  `ch@slots[k % S]` of its item variable `ch@n` (a token channel: an `N.Access` "w"),
  `consume(ch) as t` an `N.Consume` binding `t` (its item number); `t` passed to a tile is a
  read of its slot, and every task of the body that does not read it gets an `N.Access` "r".
- A statement followed by `record(ev)`s is wrapped in an `N.Mark`; `synchronize(ev)` is an
  `N.Sync`; `query(X)` the predicate `N.Cond("query", (X,))` (values.py). A schedule using any
  of these has `uses_csp`; `reject_csp` is how a back end without the CSP enumerator refuses
  it.
"""

from __future__ import annotations

from .. import sym
from ..diagnostics import Diagnostic, InternalError, WspError
from ..frontend import ast as A
from ..frontend.env import ChannelInfo, ModuleEnv
from ..frontend.signatures import ParamSig
from ..ir import nodes as N
from ..ir import visit as V
from ..spans import Span
from .scope import ItemVar, ProcVar, Scope
from .tasks import ACCESS_MODES


def channel_decls(env: ModuleEnv, schedules) -> tuple[tuple[N.Channel, ...],
                                                      tuple[N.TensorDecl, ...]]:
    """Every channel and event, and the slot tensors of those some schedule sends to or
    consumes (in declaration order)."""
    used = {st.channel for s in schedules for st in V.walk(s.body)
            if isinstance(st, (N.Send, N.Consume))}
    recorded = {name for s in schedules for name in event_uses(s.body)}
    channels, tensors = [], []
    for c in env.channels.values():
        slots = N.slots_name(c.name) if c.name in used else None
        marks = N.marks_name(c.name) if c.name in recorded else None
        ch = N.Channel(c.name, c.depth, c.elem, slots, c.is_event, c.decl.span, marks)
        channels.append(ch)
        if marks is not None:
            # decision: a recorded, synchronized or queried name gets a scratch `NAME@marks: u8[64]`; no kernel touches it, and ref ignores it; cpu_sim tags marked tasks with a read of one element per `record` generation, so synchronize and query wait for or probe exactly those tasks
            tensors.append(N.TensorDecl(marks, "scratch", "u8", (sym.const(N.MARKS),),
                                        c.decl.span))
        if slots is None:
            continue
        # decision: a channel's items live in a scratch tensor `NAME@slots` of max(depth, 1) slots (depth 0 has one); a token channel's slots are u8[S, 1, 1], touched by no kernel, so its items order tasks like a data channel's
        rows, cols, dtype = c.elem if c.elem is not None else (1, 1, "u8")
        dims = (sym.const(ch.nslots), sym.const(rows), sym.const(cols))
        tensors.append(N.TensorDecl(slots, "scratch", dtype, dims, c.decl.span))
    return tuple(channels), tuple(tensors)


def event_uses(stmts) -> set[str]:
    """The names recorded (`Mark`), synchronized or queried in a loop tree."""
    out: set[str] = set()

    def cond(c) -> None:
        if isinstance(c, N.Cond):
            if c.op == "query":
                out.add(c.args[0])
            elif c.op in ("and", "or", "not"):
                for a in c.args:
                    cond(a)

    for st in V.walk(stmts):
        if isinstance(st, N.Mark):
            out.update(st.events)
        elif isinstance(st, N.Sync):
            out.add(st.event)
        elif isinstance(st, N.When):
            for c, _ in st.branches:
                cond(c)
    return out


def csp_span(s: N.Schedule) -> Span:
    """Where a schedule first uses CSP (its first pipe, send or consume, else its first record
    or synchronize; a schedule using `query` alone: the schedule)."""
    for kinds in ((N.Pipe, N.Send, N.Consume), (N.Mark, N.Sync)):
        for st in V.walk(s.body):
            if isinstance(st, kinds) and st.span.line:
                return st.span
    return s.window_span


def reject_csp(m: N.Module, target: str, schedules=None) -> None:
    """Raise a `WspError` (one `unsupported` diagnostic per schedule, at its first CSP
    construct) when one of `schedules` (default: all of the module's) uses CSP: for a back end
    whose enumerator does not implement the coroutines of `ir/nodes.py` yet."""
    names = set(schedules) if schedules is not None else None
    diags = []
    for s in m.schedules:
        if s.uses_csp and (names is None or s.name in names):
            diags.append(Diagnostic(
                csp_span(s), "unsupported",
                f"schedule `{s.name}` uses CSP (pipes, channels, events), which the {target} "
                "target does not support yet",
                "run it with the `ref` target"))
    if diags:
        raise WspError(diags, dict(m.sources))


def with_records(stmts) -> list[tuple[A.Stmt, tuple[str, ...], Span]]:
    """The statements of a block without its `record`s: (statement, the events recorded right
    after it, the first such `record`)."""
    out: list[list] = []
    for s in stmts:
        if isinstance(s, A.Record):
            if not out:
                raise InternalError("lower", "a `record` with no statement before it")
            # decision: consecutive `record`s mark the statement before the first; an event recorded twice there is marked once
            if s.event.id not in out[-1][1]:
                out[-1][1].append(s.event.id)
            if out[-1][2] is None:
                out[-1][2] = s.span
            continue
        out.append([s, [], None])
    return [(s, tuple(ev), span) for s, ev, span in out]


def marked(part: list, events: tuple[str, ...], span) -> list:
    """A lowered statement, wrapped in a `Mark` of `events` when it is recorded."""
    if not events:
        return part
    return [N.Mark(events, tuple(part), span)]


class CspLowering:
    """Pipes, processes, send and consume, and the slots their tasks access: a mixin of
    `workloads.WorkloadLowerer`, using its CSP state (`items`, `sending`, `nsends`), the
    variable binding of its loops (`fresh`, `bind_var`, `unbind`) and its tasks."""

    def pipe(self, s: A.Pipe, scope: Scope) -> N.Pipe:
        procs = []
        for st in s.body:
            if not isinstance(st, A.Process):
                raise InternalError("lower", "a `pipe` holds a statement that is not a process")
            procs.append(self.process(st, scope))
        owned: list[str] = []
        for p in procs:
            for c in V.own_consumes(p.body):
                if c not in owned:
                    owned.append(c)
        return N.Pipe(tuple(procs), tuple(owned), s.span)

    def process(self, s: A.Process, scope: Scope) -> N.Process:
        n = self.const_int(s.replicas, scope) if s.replicas is not None else 1
        inner = Scope(scope)
        saved: dict[str, tuple] = {}
        id_var = None
        try:
            if s.replicas is not None:
                # decision: the replica number `NAME.id` is a variable named `NAME.id` (renamed as loop variables are), in [0, N)
                id_var = self.fresh(f"{s.name.id}.id")
                self.bind_var(id_var, sym.Interval(0, n - 1), None, saved)
                self.dyn.discard(id_var)
            inner.names[s.name.id] = ProcVar(id_var)
            body = tuple(self.block(s.body, inner))
        finally:
            self.unbind(saved)
        sends: list[str] = []
        for st in V.walk(body):
            if isinstance(st, N.Send) and st.channel not in sends:
                sends.append(st.channel)
        return N.Process(s.name.id, n, id_var, body, tuple(sends), s.name.span)

    def send(self, s: A.Send, scope: Scope) -> N.Send:
        ch = self.env.channels[s.channel.id]
        self.nsends += 1
        # decision: a send's item variable is `CHANNEL@n` (n counts the schedule's sends): never a source name
        var = f"{ch.name}@{self.nsends}"
        saved: dict[str, tuple] = {}
        self.bound[var] = self.bound.get(var, 0) + 1
        self.bind_var(var, sym.NONNEG, None, saved)
        self.dyn.discard(var)
        outer, self.sending = self.sending, (ch, var)
        try:
            task = self.task(s.call, scope)
        finally:
            self.sending = outer
            self.unbind(saved)
        return N.Send(ch.name, var, task, s.channel.span)

    def consume(self, s: A.Consume, scope: Scope) -> N.Consume:
        ch = self.env.channels[s.channel.id]
        saved: dict[str, tuple] = {}
        try:
            # decision: the item variable keeps the source name `t` (renamed as loop variables are): `t`, `t.index` and schedule keys over `t` name it
            var = self.fresh(s.var.id)
            self.bind_var(var, sym.NONNEG, None, saved)
            self.dyn.discard(var)
            inner = Scope(scope)
            inner.names[s.var.id] = ItemVar(var, ch)
            self.items.append((ch, var))
            try:
                body = tuple(self.block(s.body, inner))
            finally:
                self.items.pop()
        finally:
            self.unbind(saved)
        return N.Consume(ch.name, var, body, s.channel.span)

    def slot_box(self, ch: ChannelInfo, item: str) -> tuple[tuple, tuple]:
        """The box of item `item`'s slot in `ch`'s slot tensor: (offsets, extents)."""
        rows, cols = (ch.elem[0], ch.elem[1]) if ch.elem is not None else (1, 1)
        offsets = (sym.mod(sym.var(item), max(ch.depth, 1)), sym.const(0), sym.const(0))
        return offsets, (sym.const(1), sym.const(rows), sym.const(cols))

    def slot_arg(self, p: ParamSig, ch: ChannelInfo, item: str) -> N.TileArg:
        """A consumed item (`In`) or the slot a send writes (`Out`) bound to tile `p`."""
        offsets, extents = self.slot_box(ch, item)
        mode = ACCESS_MODES[p.tile.mode]
        return N.TileArg(p.name, N.slots_name(ch.name), mode, offsets, extents, 1, 2)

    def csp_accesses(self, args) -> tuple[N.Access, ...]:
        """The slot accesses a task needs beyond its tile arguments: a read of the item of every
        enclosing consume body it does not read through a tile, and the token slot a send to a
        token channel writes."""
        out: list[N.Access] = []
        boxes = {(a.tensor, a.offsets, a.extents) for a in args
                 if isinstance(a, N.TileArg) and a.mode != "w"}
        for ch, item in self.items:
            offsets, extents = self.slot_box(ch, item)
            slots = N.slots_name(ch.name)
            # decision: every task of a consume body reads its item's slot box (an `Access` when no tile argument does), so the item is freed only when all of them have finished
            if (slots, offsets, extents) not in boxes and not any(
                    x.tensor == slots and x.offsets == offsets for x in out):
                out.append(N.Access(slots, "r", offsets, extents))
        if self.sending is not None and self.sending[0].elem is None:
            ch, item = self.sending
            offsets, extents = self.slot_box(ch, item)
            out.append(N.Access(N.slots_name(ch.name), "w", offsets, extents))
        return tuple(out)
