"""CSP in the Python embedding: channels, events, processes, `send`, `consume`, and the
tutorial's builder style (`process("loader").produces(ch).body(for_each(tiles, lambda t: ...))`,
`connect([...], [...])`, `task(kernel, [t], {...})`).

Each call records the statement of language.md section 7 it stands for. Builder-style calls made
outside any `@workload` build detached fragments that `process(...).body(...)` and `connect`
assemble; inside a workload they go into the block being traced. `connect(...)` outside a
workload is a `Workload` of its own, so this module stands above `workload.py`.
"""

from __future__ import annotations

from typing import Any, Optional

from ..frontend import ast as A
from .axes import AxisIndex, Sparse, axis_expr, flat_selection, wrap_row
from .calls import make_call, take_after
from .errors import ChannelClosed, ChannelFull, user_error
from .kernel import KERNELS, BoundKernel, KernelRef
from .names import wsp_ident
from .source import here, stored_name, user_frame
from .trace import Fragment, current, key_of, tracing
from .values import Channel, Event, LoopVar, ScalarExpr
from .workload import Workload


def _channel_name(t, ch: Any, span: A.Span, what: str) -> A.Name:
    if not isinstance(ch, (Channel, Event)):
        raise user_error(span, f"`{what}` takes a channel, not {ch!r}",
                         "create one with `Channel(\"name\", depth=2)`")
    return t.ref(ch, span)


def _one_call(t, frag: Any, span: A.Span, what: str) -> A.CallStmt:
    if isinstance(frag, BoundKernel):
        raise user_error(span, f"`{what}` takes a task: call the kernel", "write `k[i](...)`")
    if not isinstance(frag, Fragment):
        raise user_error(span, f"`{what}` takes a kernel call such as `load[i](src=X[i], dst=ch)`")
    stmts = t.take(frag)
    if len(stmts) != 1 or not isinstance(stmts[0], A.CallStmt):
        raise user_error(span, f"`{what}` takes one kernel call")
    return stmts[0]


def _closed(ch: Any, span: A.Span, what: str) -> None:
    """ChannelClosed when `ch` was closed (`ch.close()`)."""
    at = getattr(ch, "_closed_at", None)
    if at is not None:
        err = user_error(span, f"`{what}` to channel `{ch.name}`, which was closed at "
                         f"{at.file}:{at.line}", "close a channel after its last send",
                         cls=ChannelClosed)
        err.channel_name = ch.name
        raise err


def send(ch: Channel, call: Any) -> Optional[Fragment]:
    """`send(ch, k[i](..., dst=ch))`: the task's output (the parameter given `ch`) becomes the
    channel's next item; a token channel carries only the task's completion. Outside a
    workload, `send(ch, value)` of a value that is not a task puts it in the channel's
    host-side queue (the prototype's): `ChannelFull` when there is no room (nothing on the
    host can take an item out while it waits), `ChannelClosed` after `ch.close()`."""
    span = here()
    if isinstance(ch, Channel):
        _closed(ch, span, "send")
        if current() is None and not isinstance(call, Fragment):
            if ch.full():
                err = user_error(span, f"channel `{ch.name}` is full ({ch.size()} of "
                                 f"{ch.capacity} items) and nothing on the host takes items "
                                 "out: this send would wait forever",
                                 "use `try_send` (it returns False when the channel is full), "
                                 "or a deeper channel", cls=ChannelFull)
                err.channel_name, err.capacity = ch.name, ch.capacity
                raise err
            ch._items.append(call)
            return None
    with tracing() as t:
        name = _channel_name(t, ch, span, "send")
        return t.emit(A.Send(name, _one_call(t, call, span, "send"), span=span))


def try_send(ch: Channel, value: Any) -> bool:
    """The prototype's non-blocking host-side send: True when `value` went into `ch`'s
    host-side queue, False when the channel is full; `ChannelClosed` after `ch.close()`. Inside
    a workload a send waits for room: write `send`."""
    span = here()
    if current() is not None:
        raise user_error(span, "`try_send` is a host-side send; inside a workload, `send` waits "
                         "for room in the channel", "write `send(ch, k[i](...))`")
    if not isinstance(ch, Channel):
        raise user_error(span, f"`try_send` takes a `Channel`, not {ch!r}")
    _closed(ch, span, "try_send")
    if ch.full():
        return False
    ch._items.append(value)
    return True


class _Consume:
    """`with consume(ch) as t:` (the body runs once per item) or `consume(ch, lambda t: ...)`."""

    def __init__(self, ch: Channel, span: A.Span):
        self.ch, self.span = ch, span
        self.trace = None

    def __enter__(self) -> LoopVar:
        t = current()
        if t is None:
            raise user_error(self.span, "`with consume(ch)` only works inside a `@workload`",
                             "outside one, write `consume(ch, lambda t: ...)`")
        self.trace = t
        self.name = _channel_name(t, self.ch, self.span, "consume")
        self.var = stored_name(user_frame()) or "item"
        t.open()
        return LoopVar(self.var, "item", self.span)

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            return
        t = self.trace
        body = t.close()
        t.emit(A.Consume(self.name, A.Name(self.var, span=self.span), tuple(body), span=self.span))


def _param_name(fn: Any, default: str) -> str:
    code = getattr(fn, "__code__", None)
    if code is not None and code.co_argcount >= 1:
        return code.co_varnames[0]
    return default


def consume(ch: Channel, fn: Any = None):
    """Consume the items of `ch` in send order (see `_Consume`)."""
    span = here()
    if fn is None:
        return _Consume(ch, span)
    with tracing() as t:
        name = _channel_name(t, ch, span, "consume")
        var = _param_name(fn, "item")
        t.open()
        try:
            fn(LoopVar(var, "item", span))
        finally:
            body = t.close()
        return t.emit(A.Consume(name, A.Name(var, span=span), tuple(body), span=span))


def for_each(axis: Any, fn: Any, kind: str = "seq") -> Fragment:
    """`for_each(tiles, lambda t: ...)`: the loop `for t in P.seq(tiles) { ... }`. Outside any
    workload the loop is a `Workload` of its own (the prototype's `for_each(...).compile()`),
    as `combine` and `cond` are."""
    span = here()
    if current() is None:
        with tracing() as t:
            frag = for_each(axis, fn, kind)
        name = {"seq": "for_each", "grid": "parallel_for", "sel": "select"}[kind]
        return Workload.from_fragment(name, frag, span)
    with tracing() as t:
        ax = axis_expr(axis, t, span)
        var = _param_name(fn, "i")
        t.open()
        try:
            fn(LoopVar(var, "loop", span))
        finally:
            body = t.close()
        spelling = {"seq": "P.seq", "grid": "P", "sel": "P.sel"}[kind]
        return t.emit(A.ForLoop((A.Name(var, span=span),), kind, (ax,), tuple(body), spelling,
                                span=span))


def parallel_for(axis: Any, fn: Any) -> Fragment:
    """`parallel_for(batch, lambda b: ...)`: the loop `for b in P(batch) { ... }`."""
    return for_each(axis, fn, "grid")


def select(sparse: Any, fn: Any) -> Fragment:
    """The prototype's `select(routing[b], lambda e: ...)`: the loop
    `for e in P.sel(routing[b]) { ... }` over the coordinates a sparse axis selects (of a
    `Sparse(indices)`, `select(s, fn)` is `s[0]`'s)."""
    if isinstance(sparse, Sparse) and sparse.flat:
        span = here()
        if current() is None:  # a `Workload` of its own, as `for_each` outside one
            with tracing():
                frag = select(sparse, fn)
            return Workload.from_fragment("select", frag, span)
        with tracing() as t:
            index, row = flat_selection(sparse, span)
            t.open()
            try:
                for_each(index, fn, "sel")
            finally:
                body = t.close()
            return wrap_row(t, index, row, body, span)
    if not (isinstance(sparse, AxisIndex) and isinstance(sparse.axis, Sparse)):
        raise user_error(here(), "`select` iterates a sparse axis at an outer index",
                         "write `select(routing[b], lambda e: ...)` with `routing = Sparse(...)`")
    return for_each(sparse, fn, "sel")


def task(kernel: Any, coords: Any = None, args: Any = None, **kwargs: Any) -> Fragment:
    """The tutorial's `task(kernel, [t], {"x": X[t], ...})`: one task of `kernel` (a `@kernel`
    or its name) at `coords`, with arguments by name (a dict) or in parameter order (a list)."""
    span = here()
    if isinstance(kernel, str):
        k = KERNELS.get(kernel)
        if k is None:
            raise user_error(span, f"no `@kernel` is named `{kernel}`",
                             "pass the kernel object itself: `task(my_kernel, [t], {...})`")
        kernel = k
    if not isinstance(kernel, KernelRef):
        raise user_error(span, f"`task` takes a `@kernel`, not {kernel!r}")
    pos: tuple = ()
    kw = dict(kwargs)
    if isinstance(args, dict):
        kw.update(args)
    elif args is not None:
        pos = tuple(args)
    cs = None if coords is None else tuple(coords if isinstance(coords, (list, tuple)) else (coords,))
    after = take_after([p for p, _, _ in kernel.params()], kw)  # `task(k, [t], {...}, after=[h])`: edges (docs/python.md)
    with tracing() as t:
        frag = t.emit(make_call(t, kernel, cs, pos, kw, span, {"*": []}, after))
        frag.hint = stored_name(user_frame())
        return frag


class Process:
    """A process of a pipe: `process("loader").produces(ch).body(...)`, or
    `with process("loader"):` inside `with P.pipe():`; `replicate(p, 4)` runs four replicas
    that share the channel's items (`p.id` is the replica number)."""

    def __init__(self, name: str, replicas: Optional[int] = None):
        self._span = here()
        self.name = str(name)
        self._wsp_name = wsp_ident(self.name)
        self.replicas = replicas
        self.produced: list = []
        self.consumed: list = []
        self._stmts: Optional[list] = None
        self._refs: dict = {}
        self._trace = None

    def _copy(self) -> "Process":
        p = Process.__new__(Process)
        p.__dict__.update(self.__dict__)
        p.produced, p.consumed = list(self.produced), list(self.consumed)
        return p

    def produces(self, *channels: Channel) -> "Process":
        self.produced.extend(channels)
        return self

    def consumes(self, *channels: Channel) -> "Process":
        self.consumed.extend(channels)
        return self

    def body(self, *parts: Any) -> "Process":
        """The process body: fragments (`for_each(...)`, `consume(ch, ...)`, `task(...)`) or a
        function called to record it."""
        span = here()
        with tracing() as t:
            stmts: list = []
            for part in parts:
                if isinstance(part, Fragment):
                    stmts.extend(t.take(part))
                elif callable(part):
                    t.open()
                    try:
                        part()
                    finally:
                        stmts.extend(t.close())
                else:
                    raise user_error(span, f"a process body is made of workload statements, not "
                                     f"{part!r}")
            self._stmts = stmts
            self._refs = t.refs
        return self

    @property
    def id(self) -> ScalarExpr:
        """`NAME.id`: the replica number of a replicated process."""
        span = here()
        return ScalarExpr(A.Attr(A.Name(self._wsp_name, span=span), "id", span=span))

    def node(self, t) -> A.Process:
        if self._stmts is None:
            raise user_error(self._span, f"process `{self.name}` has no body",
                             "give it one: `.body(for_each(tiles, lambda t: ...))`")
        self._check_declared()
        t.adopt(self._refs)
        reps = None if self.replicas is None else A.IntLit(int(self.replicas), span=self._span)
        return A.Process(A.Name(self._wsp_name, span=self._span), reps, tuple(self._stmts),
                         span=self._span)

    def _check_declared(self) -> None:
        """`.produces(...)` / `.consumes(...)`, when given, must say what the body does."""
        sent, consumed = channels_used(self._stmts)
        for what, declared, used in (("produces", self.produced, sent),
                                     ("consumes", self.consumed, consumed)):
            if not declared:
                continue
            keys = {key_of(c) for c in declared}
            verb = "sends to" if what == "produces" else "consumes"
            for c in declared:
                if key_of(c) not in used:
                    raise user_error(self._span, f"process `{self.name}` {what} `{c.name}`, but "
                                     f"its body never {verb} it",
                                     f"remove it from `.{what}(...)` or {verb.split()[0]} it in the body")
            for key in used:
                if key not in keys:
                    name = getattr(self._refs.get(key), "name", key)
                    raise user_error(self._span, f"process `{self.name}` {verb} `{name}`, which "
                                     f"its `.{what}(...)` does not list",
                                     f"add it: `.{what}({name})`")

    # `with process("loader"):` inside `with P.pipe():`
    def __enter__(self) -> "Process":
        t = current()
        if t is None:
            raise user_error(self._span, "`with process(...)` only works inside a `@workload`")
        self._trace = t
        t.open()
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:
            return
        t = self._trace
        self._stmts = t.close()
        self._refs = t.refs
        t.emit(self.node(t))

    def start(self):  # the seeds' `pipeline.start()` on a connected pipeline only
        raise user_error(here(), "start a pipeline made with `connect(...)`, not a process")


def channels_used(stmts) -> tuple[set, set]:
    """The placeholder keys of the channels `stmts` send to and consume (nested pipes aside)."""
    sent: set = set()
    consumed: set = set()
    for top in stmts or ():
        for n in top.walk():
            if isinstance(n, A.Send):
                sent.add(n.channel.id)
            elif isinstance(n, A.Consume):
                consumed.add(n.channel.id)
    return sent, consumed


def process(name: str, replicas: Optional[int] = None) -> Process:
    return Process(name, replicas)


def replicate(p: Process, n: int) -> Process:
    """`n` replicas of process `p` sharing its channels' items (item k to replica k % n)."""
    if not isinstance(p, Process):
        raise user_error(here(), f"`replicate` takes a process, not {p!r}")
    q = p._copy()
    q.replicas = int(n)
    return q


def connect(processes: list, channels: Any = ()):
    """Wire processes into a pipeline: the `pipe { process ... }` of language.md section 7.
    Outside a workload it is a workload of its own (`.dispatch(...)`, `.compile()`, ...)."""
    span = here()
    for ch in channels or ():
        if not isinstance(ch, (Channel, Event)):
            raise user_error(span, f"`connect` takes the channels second, found {ch!r}")
    active = current()
    with tracing() as t:
        procs = []
        for p in processes:
            if not isinstance(p, Process):
                raise user_error(span, f"`connect` takes processes, not {p!r}",
                                 "make them with `process(\"name\").body(...)`")
            procs.append(p.node(t))
        sent, consumed = channels_used(procs)
        for ch in channels or ():
            if key_of(ch) not in sent | consumed:
                raise user_error(span, f"`connect` lists channel `{ch.name}`, but no process sends "
                                 "to it or consumes it")
        if channels:
            listed = {key_of(c) for c in channels}
            for key in sorted(sent | consumed):
                if key not in listed:
                    name = getattr(t.refs.get(key), "name", key)
                    raise user_error(span, f"the processes use channel `{name}`, which `connect` "
                                     "does not list", "add it to the channel list")
        names = [p.name.id for p in procs]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise user_error(span, f"process `{dup}` is connected twice",
                             "give each process its own name")
        frag = t.emit(A.Pipe(tuple(procs), span=span))
    if active is not None:
        return frag
    return Workload.from_fragment("pipeline", frag, span)


def record(ev: Event, after: Any = None) -> Fragment:
    """`record(ev)`: the statement just before is what `ev` marks; `record(ev, after=t)`
    marks `t` where it stands: the record goes right after `t`, and statements written
    between `t` and this call keep their place after it (they are not reordered)."""
    span = here()
    with tracing() as t:
        if not isinstance(ev, Event):
            raise user_error(span, f"`record` takes an `Event`, not {ev!r}")
        name = t.ref(ev, span)
        if after is None:
            return t.emit(A.Record(name, span=span))
        if not isinstance(after, Fragment):
            raise user_error(span, "`after=` takes the statement to mark (a task or a loop)")
        placed = t.insert_after(after, A.Record(name, span=span))
        if placed is None:
            raise user_error(span, "`after=` names a statement that another construct has "
                             "taken in (a `send`, `sequential` or `combine`)",
                             "record the event after that construct instead")
        return placed


def synchronize(ev: Event) -> Fragment:
    """`synchronize(ev)`: the statements after this one wait for the tasks `ev` marks."""
    span = here()
    with tracing() as t:
        if not isinstance(ev, Event):
            raise user_error(span, f"`synchronize` takes an `Event`, not {ev!r}")
        return t.emit(A.Synchronize(t.ref(ev, span), span=span))


def query(ev: Any) -> ScalarExpr:
    """`query(ev)`: true when the tasks `ev` marks have finished (a run-time condition)."""
    span = here()
    if not isinstance(ev, (Event, Channel)):
        raise user_error(span, f"`query` takes an event or a channel, not {ev!r}")
    key = key_of(ev)
    return ScalarExpr(A.Call(A.Name("query", span=span), (A.Name(key, span=span),), span=span),
                      {key: ev})


__all__ = ["send", "try_send", "consume", "for_each", "parallel_for", "select", "task", "process",
           "Process", "replicate", "connect", "record", "synchronize", "query",
           "channels_used"]
