"""CSP in the ref interpreter (language.md section 7): the coroutine enumeration of
`ir/nodes.py` ("CSP"), as the semantics in `interp.py` describe it. `Csp` runs the schedule body
and every process replica as Python generators, round robin, over a `Runner`; a coroutine
yields when it must wait (`_Wait`: a send whose slot is not free, a consume whose item is not
sent, a pipe whose processes have not finished). `_Inst` is one opening of a channel by its
pipe. A pass in which nothing can proceed is a deadlock, reported as a `RunError`."""

from __future__ import annotations

from typing import Callable, Optional

from ...diagnostics import InternalError
from ...ir import nodes as N
from ...ir.visit import Visitor
from ...spans import NO_SPAN, Span
from .runner import RunError, Runner


class _Wait:
    """Why a coroutine is blocked: `kind` "send", "consume" or "pipe"; `ready()` says whether it
    may proceed; `inst` and `item` for sends and consumes (the item waited for), `span` the
    statement."""

    __slots__ = ("kind", "ready", "inst", "item", "span")

    def __init__(self, kind: str, ready: Callable[[], bool], inst=None, item: int = 0,
                 span: Span = NO_SPAN):
        self.kind, self.ready, self.inst, self.item, self.span = kind, ready, inst, item, span


class _Co:
    """A coroutine of the CSP enumeration: the schedule body (`process` None) or one replica of a
    process. `env` holds its own variables over the shared syms and slots."""

    def __init__(self, env, loops: list, process: Optional[N.Process] = None, replica: int = 0):
        self.env = env
        self.loops = loops
        self.process = process
        self.replica = replica
        self.nreplicas = process.replicas if process is not None else 1
        self.gen = None
        self.wait: Optional[_Wait] = None
        self.finished = False
        self.cursor: dict[int, int] = {}  # id(channel instance) -> next item to consume

    def who(self) -> str:
        if self.process is None:
            return "the schedule"
        if self.process.id_var is not None:
            return f"process `{self.process.name}` (replica {self.replica})"
        return f"process `{self.process.name}`"


class _Inst:
    """One opening of a channel by its pipe: items sent, items released, who sends."""

    def __init__(self, ch: N.Channel, span: Span):
        self.ch = ch
        self.span = span
        self.sent = 0
        self.released: set[int] = set()
        self.senders: list[_Co] = []
        self.max_in_flight = 0

    def closed(self) -> bool:
        return all(c.finished for c in self.senders)

    def free(self, k: int) -> bool:
        """Whether item k's slot is free: item k - S has been released (or there is none)."""
        j = k - self.ch.nslots
        return j < 0 or j in self.released


class Csp(Visitor):
    """The coroutine scheduler and the CSP statements, over a `Runner` (ir/nodes.py, "CSP")."""

    def __init__(self, runner: Runner, shared: dict):
        self.r = runner
        self.shared = shared  # syms and slots: every coroutine's env looks through to these
        self.cos: list[_Co] = []
        self.open: dict[str, _Inst] = {}
        self.channels: dict[str, dict] = {}
        self.events: dict[str, dict] = {}

    # -- the scheduler
    def run(self, body) -> None:
        from collections import ChainMap

        main = _Co(ChainMap({}, self.shared), [])
        main.gen = self.stmts(main, body)
        self.cos = [main]
        while not main.finished:
            progressed = False
            i = 0
            while i < len(self.cos):  # coroutines created during a pass run in it
                c = self.cos[i]
                i += 1
                if c.finished or (c.wait is not None and not c.wait.ready()):
                    continue
                self.resume(c)
                progressed = True
            self.cos = [c for c in self.cos if not c.finished]
            if not progressed:
                self.deadlock()

    def resume(self, c: _Co) -> None:
        r = self.r
        r.env, r.loops = c.env, c.loops
        c.wait = None
        try:
            c.wait = c.gen.send(None)
        except StopIteration:
            c.finished = True

    def block(self, wait: _Wait):
        """Yield (block) until `wait` is ready."""
        while not wait.ready():
            yield wait

    def deadlock(self) -> None:
        blocked = [c for c in self.cos if not c.finished and c.wait is not None
                   and c.wait.kind in ("send", "consume")]
        if not blocked:
            raise InternalError("ref", "the CSP enumeration stalled with no blocked send or "
                                "consume")
        parts = []
        for c in blocked:
            w = c.wait
            ch = w.inst.ch
            at = ", ".join(f"{n}={v}" for n, v in c.loops)
            at = f" (at {at})" if at else ""
            if w.kind == "send":
                k = w.inst.sent
                why = (f"until item {k - ch.nslots} is consumed" if not w.inst.free(k)
                       else "until a process waits to consume it")
                parts.append(f"{c.who()} waits to send item {k} on `{ch.name}` (depth "
                             f"{ch.depth}) {why}{at}")
            else:
                parts.append(f"{c.who()} waits for item {w.item} on `{ch.name}`{at}")
        first = blocked[0]
        notes = tuple((c.wait.span, f"{c.who()} is blocked here") for c in blocked[1:])
        self.r.loops = first.loops
        raise RunError("deadlock: no process can make progress: " + "; ".join(parts),
                       first.wait.span, tuple(first.loops), None, self.r.partial(),
                       code="deadlock", notes=notes)

    # -- statements, by class (ir.visit.Visitor): `stmts` is a generator per statement list;
    # a `visit_<Class>` that may wait (a CSP statement, or one holding statements) is a
    # generator too, the others run at once and return None. Only CSP statements ever yield.
    def stmts(self, co: _Co, body):
        for st in body:
            steps = self.visit(st, co)
            if steps is not None:
                yield from steps

    def visit_Loop(self, st: N.Loop, co: _Co):
        n = self.r.eval(st.extent)
        saved = co.env.get(st.var)
        for i in range(max(n, 0)):
            co.env[st.var] = i
            co.loops.append((st.var, i))
            try:
                yield from self.stmts(co, st.body)
            finally:
                co.loops.pop()
        if saved is None:
            co.env.pop(st.var, None)
        else:
            co.env[st.var] = saved

    def visit_Block(self, st: N.Block, co: _Co):
        yield from self.stmts(co, st.body)

    def visit_When(self, st: N.When, co: _Co):
        for c, branch in st.branches:
            if self.r.cond(c):
                yield from self.stmts(co, branch)
                break
        else:
            yield from self.stmts(co, st.otherwise)

    def visit_SlotSet(self, st: N.SlotSet, co: _Co) -> None:
        self.shared[N.slot_var(st.slot)] = self.r.eval(st.value, st.span)

    def visit_Mark(self, st: N.Mark, co: _Co):
        yield from self.stmts(co, st.body)
        for ev in st.events:
            self.events.setdefault(ev, {"records": 0, "synchronizes": 0})["records"] += 1

    def visit_Sync(self, st: N.Sync, co: _Co) -> None:
        # every task enumerated so far has finished: nothing to wait for
        self.events.setdefault(st.event, {"records": 0, "synchronizes": 0})["synchronizes"] += 1

    def visit_other(self, st, co: _Co) -> None:
        # a statement that never waits (a read, an assert, a task) runs as the Runner runs it,
        # which treats every class it does not know as a task
        self.r.visit(st)

    def visit_Pipe(self, p: N.Pipe, co: _Co):
        from collections import ChainMap

        insts = []
        for name in p.channels:
            if name in self.open:
                other = self.open[name].span
                raise RunError(f"channel `{name}` is still open in another run of the pipe at "
                               f"{other.line}:{other.col}; a channel serves one pipe at a time",
                               p.span, tuple(co.loops), None, self.r.partial(), code="run")
            inst = _Inst(self.r.m.channel(name), p.span)
            self.open[name] = inst
            insts.append(inst)
        children = []
        for proc in p.processes:
            for rep in range(proc.replicas):
                env = ChainMap(dict(co.env.maps[0]), self.shared)
                loops = list(co.loops)
                if proc.id_var is not None:
                    env[proc.id_var] = rep
                    loops.append((proc.id_var, rep))
                child = _Co(env, loops, proc, rep)
                child.gen = self.stmts(child, proc.body)
                children.append(child)
        for inst in insts:
            inst.senders = [c for c in children if inst.ch.name in c.process.sends]
        self.cos.extend(children)
        yield from self.block(_Wait("pipe", lambda: all(c.finished for c in children)))
        for inst in insts:
            del self.open[inst.ch.name]
            info = self.channels.setdefault(inst.ch.name, {"items": 0, "max_in_flight": 0,
                                                           "depth": inst.ch.depth})
            info["items"] += inst.sent
            info["max_in_flight"] = max(info["max_in_flight"], inst.max_in_flight)

    def instance(self, name: str) -> _Inst:
        inst = self.open.get(name)
        if inst is None:
            raise InternalError("ref", f"channel `{name}` is used outside the pipe that owns it")
        return inst

    def waiting_for(self, inst: _Inst, k: int) -> bool:
        """Whether some coroutine is blocked consuming item k of `inst` (a rendezvous)."""
        return any(not c.finished and c.wait is not None and c.wait.kind == "consume"
                   and c.wait.inst is inst and c.wait.item == k for c in self.cos)

    def visit_Send(self, st: N.Send, co: _Co):
        inst = self.instance(st.channel)
        if inst.ch.depth == 0:
            def ready():
                return inst.free(inst.sent) and self.waiting_for(inst, inst.sent)
        else:
            def ready():
                return inst.free(inst.sent)
        yield from self.block(_Wait("send", ready, inst, 0, st.span))
        k = inst.sent
        co.env[st.item] = k
        self.r.task(st.task)
        co.env.pop(st.item, None)
        inst.sent += 1
        inst.max_in_flight = max(inst.max_in_flight, inst.sent - len(inst.released))

    def visit_Consume(self, st: N.Consume, co: _Co):
        inst = self.instance(st.channel)
        key = id(inst)
        saved = co.env.get(st.item)
        while True:
            k = co.cursor.get(key, co.replica)
            yield from self.block(_Wait("consume", lambda k=k: k < inst.sent or inst.closed(),
                                        inst, k, st.span))
            if k >= inst.sent:
                break  # closed: every sender has finished
            co.cursor[key] = k + co.nreplicas
            co.env[st.item] = k
            co.loops.append((st.item, k))
            try:
                yield from self.stmts(co, st.body)
            finally:
                co.loops.pop()
            inst.released.add(k)
        if saved is None:
            co.env.pop(st.item, None)
        else:
            co.env[st.item] = saved


