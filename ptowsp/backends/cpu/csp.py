"""Enumerators of schedules that use CSP: the coroutines of `ir/nodes.py` ("CSP") in C.

The ref back end defines the enumeration (`backends/ref/csp.py`, `Csp`); this emits the
same scheduler, pass for pass, so item numbers, the order in which tasks are enumerated (and
so every inferred dependency), run information and deadlock reports agree on both targets.

The shape of the C (one function per schedule, protothread style):

- Every coroutine is a `wsp_co` (the prelude) whose `x` array holds, per channel, its consume
  cursor and its current `record` generation, then every variable of the schedule: loop
  variables and extents, reads, items, replica ids. Coroutines live on the heap; a `pipe`
  copies its coroutine into each new replica (variables bound around the pipe come along).
- The scheduler is a loop of passes over the coroutines in creation order; a coroutine runs
  from `switch (co->state)` until it blocks or finishes. A blocking statement records why it
  waits (`co->wait`, the channel, the item) and its resume label, and jumps out; the `case`
  label right after it resumes there. Only `send`, `consume` and `pipe` ever switch.
- Each coroutine has its own stack of order scopes in the runtime (`wsp_order_fork` at the
  pipe, `wsp_order_switch` at every resume), borrowed from its parent's, so `P.seq` inside a
  process orders that process's tasks and a `P.seq` around a pipe orders whole pipe runs.
- Channel state (items sent, released, senders alive, the pipe that opened it) is shared.
- Orderings between processes are data dependencies on the channels' slot tensors (lowering
  put them in the tasks' boxes); a task's `extra` accesses become tiles after the kernel's.
- `record(ev)` tags the tasks of its statement (processes of a pipe inside it included) with a
  read of `ev@marks[generation % 64]`; `synchronize(ev)` is `wsp_await` of that element as a
  writer would (waits for those readers); `query(X)` probes it and X's slots without waiting.
- Errors the enumerator finds: a deadlock (`info` gets one record per blocked coroutine after
  the counters; the message is "CSP DEADLOCK") and a channel opened twice ("CSP OPEN p q c").
  `program.py` turns both into the ref back end's diagnostics.
"""

from __future__ import annotations

from ... import sym
from ...ir import nodes as N
from ..cexpr import c_ident
from .enumerate import LoopEmitter

SEND, CONSUME, PIPE = 1, 2, 3
REPORT_WORDS = 8192  # int64s for a deadlock report, after the counters (see program.py)

CO_PRELUDE = """\
/* CSP coroutines (backends/cpu/csp.py) */
typedef struct wsp_co {
    int32_t state, wait, wch, site, proc, replica, nrep, finished;
    int32_t ctx, unused;
    int64_t live, witem;
    struct wsp_co *parent;
    int64_t x[];
} wsp_co;
typedef struct wsp_chan {
    int64_t sent, nrel, senders, maxf, nslots;
    int32_t open, rdv;
    int64_t *rel;   /* rel[k % nslots] == k once item k is released */
} wsp_chan;
enum { WSP_CO_SEND = 1, WSP_CO_CONSUME = 2, WSP_CO_PIPE = 3 };
static inline int wsp_co_consumer_waits(wsp_co *const *cos, int64_t n, int32_t ch, int64_t k) {
    for (int64_t i = 0; i < n; i++) {
        const wsp_co *o = cos[i];
        if (!o->finished && o->wait == WSP_CO_CONSUME && o->wch == ch && o->witem == k) return 1;
    }
    return 0;
}
static inline int wsp_co_slot_free(const wsp_chan *c) {
    int64_t j = c->sent - c->nslots;
    return j < 0 || c->rel[j % c->nslots] == j;
}
static inline int wsp_co_send_ready(const wsp_chan *chans, int32_t ch, wsp_co *const *cos, int64_t n) {
    const wsp_chan *c = &chans[ch];
    return wsp_co_slot_free(c) && (!c->rdv || wsp_co_consumer_waits(cos, n, ch, c->sent));
}
static inline int wsp_co_ready(const wsp_co *co, const wsp_chan *chans, wsp_co *const *cos, int64_t n) {
    switch (co->wait) {
    case WSP_CO_SEND: return wsp_co_send_ready(chans, co->wch, cos, n);
    case WSP_CO_CONSUME: return co->witem < chans[co->wch].sent || chans[co->wch].senders == 0;
    case WSP_CO_PIPE: return co->live == 0;
    default: return 1;
    }
}
static inline int wsp_co_append(wsp_co ***cos, int64_t *n, int64_t *cap, wsp_co *c) {
    if (*n == *cap) {
        int64_t nc = *cap ? *cap * 2 : 16;
        wsp_co **p = (wsp_co **)realloc(*cos, (size_t)nc * sizeof *p);
        if (!p) return 1;
        *cos = p;
        *cap = nc;
    }
    (*cos)[(*n)++] = c;
    return 0;
}
/* 1 when nothing X's query waits for is unfinished: the tasks of its latest record (a read of
 * marks[gen % 64]) and of its sends (writers of its slots). */
static inline int wsp_co_query(wsp_runtime *rt, int32_t marks, int64_t gen, int32_t slots,
                               int64_t nslots, int64_t rows, int64_t cols, int flat,
                               int64_t devs) {
    wsp_access a;
    memset(&a, 0, sizeof a);
    if (marks >= 0 && gen >= 0) {
        a.tensor = marks; a.mode = WSP_READWRITE; a.ndim = 1;
        a.lo[0] = gen % 64; a.hi[0] = a.lo[0] + 1;
        if (wsp_probe(rt, &a) > 0) return 0;
    }
    if (slots >= 0) {
        a.tensor = slots; a.mode = WSP_READ; a.ndim = 3;
        a.lo[0] = a.lo[1] = a.lo[2] = 0; a.hi[0] = nslots; a.hi[1] = rows; a.hi[2] = cols;
        if (devs > 0) {  /* a mesh: the slots of every device (ir/devices.py) */
            a.ndim = 4; a.lo[3] = 0; a.hi[3] = cols; a.hi[2] = rows; a.hi[1] = nslots;
            a.hi[0] = devs;
        }
        if (flat) { a.ndim = 1; a.hi[0] = (devs > 0 ? devs : 1) * nslots * rows * cols; }
        if (wsp_probe(rt, &a) > 0) return 0;
    }
    return 1;
}
"""


class CoEmitter(LoopEmitter):
    """The enumerator of a schedule using CSP (see the module's docstring)."""

    RET = "goto wsp_end;"

    def schedule(self, s: N.Schedule) -> str:
        m = self.m
        self.syms = {sd.name for sd in m.syms}
        self.chans = list(m.channels)
        self.ch_index = {c.name: i for i, c in enumerate(self.chans)}
        self.nch = max(len(self.chans), 1)
        self.vars: dict[str, int] = {}
        self.nstates = 0
        self.scope: list[str] = []  # the coordinates a message names (ref's `co.loops`)
        self.process: N.Process | None = None  # the process whose body is being emitted
        self.pending: list[tuple[N.Process, int, N.Pipe, list[str]]] = []
        self.procs: list[tuple[N.Process, N.Pipe]] = []
        self.pipe_ids: dict[int, int] = {}
        self.consumes: list[tuple[int, str]] = []  # (channel, item variable) around here
        self.recorded = [c for c in self.chans if c.marks is not None]
        layout = [("channels", c.name, k) for c in self.chans if c.slots is not None
                  for k in ("items", "max_in_flight")]
        layout += [("events", c.name, k) for c in self.recorded
                   for k in ("records", "synchronizes")]
        self.info_at = {(kind, name, key): i for i, (kind, name, key) in enumerate(layout)}
        self.out.info[s.name] = layout
        return super().schedule(s)

    # -- names: every variable lives in the coroutine
    def slot(self, name: str) -> int:
        if name not in self.vars:
            self.vars[name] = len(self.vars)
        return 2 * self.nch + self.vars[name]

    def name_of(self, v: str) -> str:
        k = N.slot_index(v)
        if k is not None:
            return f"((int64_t)wsp_slots[{k}])"
        if v in self.syms:
            return c_ident("s_", v)
        return f"co->x[{self.slot(v)}]"

    def bind(self, var: str, value: str) -> None:
        self.emit(f"{self.name_of(var)} = {value};")

    def loop_head(self, var: str, extent: str) -> str:
        v, n = self.name_of(var), f"co->x[{self.slot(var + '#n')}]"
        return f"for ({v} = 0, {n} = {extent}; {v} < {n}; {v}++) {{"

    def visit_Loop(self, lp: N.Loop) -> None:
        self.scope.append(lp.var)
        super().visit_Loop(lp)
        self.scope.pop()

    def coords_format(self) -> tuple[str, str]:
        fmt = ", ".join(f"{v.split(chr(39))[0]}=%lld" for v in self.scope)
        args = ", ".join(f"(long long){self.name_of(v)}" for v in self.scope)
        return fmt, args

    def cond(self, c: N.Cond) -> str:
        if c.op != "query":
            return super().cond(c)
        ch = self.m.channel(c.args[0])
        i = self.ch_index[ch.name]
        marks = self.tensor_index[ch.marks] if ch.marks is not None else -1
        gen = f"wsp_ev_cur[{i}]"
        if ch.slots is None:
            return f"wsp_co_query(rt, {marks}, {gen}, -1, 0, 0, 0, 0, 0)"
        rows, cols, _ = ch.elem if ch.elem is not None else (1, 1, "u8")
        flat = int(self.sched.deps == "infer_bytes_overlap")
        # decision: on a mesh a channel's query asks for the sends of every device's instance
        # (the enumerator does not know which instance it is in): more often false, never wrong
        devs = self.m.devices.count if self.m.devices is not None else 0
        return (f"wsp_co_query(rt, {marks}, {gen}, {self.tensor_index[ch.slots]}, "
                f"{ch.nslots}, {rows}, {cols}, {flat}, {devs})")

    def state(self) -> int:
        self.nstates += 1
        return self.nstates

    def block_here(self, wait: int, ch: str, site: int, item: str = "0") -> None:
        """Suspend the coroutine (its reason recorded) and resume right here."""
        k = self.state()
        self.emit(f"co->wait = {wait}; co->wch = {ch}; co->site = {site}; co->witem = {item}; "
                  f"co->state = {k}; goto wsp_co_yield;")
        self.emit(f"case {k}:;")

    def site(self, kind: str, st) -> int:
        ch = self.m.channel(st.channel)
        p = self.process
        self.out.sites.append((kind, st.span, ch.name, ch.depth, p.name if p else "",
                               p is not None and p.id_var is not None, tuple(self.scope),
                               {v: self.slot(v) - 2 * self.nch for v in self.scope}))
        return len(self.out.sites) - 1

    # -- the function
    def main(self, s: N.Schedule) -> None:
        chans, nch = self.chans, self.nch
        self.emit("/* CSP state: channels, record generations, coroutines (csp.py) */")
        for i, c in enumerate(chans):
            self.emit(f"int64_t wsp_rel{i}[{c.nslots}];")
        rels = ", ".join(f"wsp_rel{i}" for i in range(len(chans))) or "NULL"
        self.emit(f"int64_t *const wsp_rels[{nch}] = {{{rels}}};")
        self.emit(f"wsp_chan ch[{nch}];")
        self.emit("memset(ch, 0, sizeof ch);")
        for i, c in enumerate(chans):
            self.emit(f"ch[{i}].open = -1; ch[{i}].nslots = {c.nslots}; ch[{i}].rdv = "
                      f"{int(c.depth == 0)}; ch[{i}].rel = wsp_rels[{i}];")
        self.emit(f"int64_t wsp_ev_cur[{nch}], wsp_ev_gen[{nch}];  /* latest record; count */")
        self.emit(f"for (int i = 0; i < {nch}; i++) wsp_ev_cur[i] = -1, wsp_ev_gen[i] = 0;")
        self.emit("wsp_co **cos = NULL;")
        self.emit("int64_t ncos = 0, capcos = 0;")
        size_at = len(self.lines)  # the coroutine size is known once the bodies are emitted
        self.emit("wsp_co *co = (wsp_co *)calloc(1, wsp_cosize), *wsp_main = co;")
        self.emit("if (!co || wsp_co_append(&cos, &ncos, &capcos, co)) {")
        self.emit("    free(co); rc = wsp_fail(rt, WSP_ERR_INTERNAL, \"out of memory (coroutines)\"); "
                  "goto wsp_end;")
        self.emit("}")
        self.emit(f"for (int i = 0; i < {nch}; i++) co->x[{nch} + i] = -1;  /* no record open */")
        self.emit("/* the scheduler: passes over the coroutines in creation order; one created "
                  "during a pass runs in it */")
        self.emit("for (;;) {")
        self.depth += 1
        self.emit("int progressed = 0;")
        self.emit("for (int64_t ci = 0; ci < ncos; ci++) {")
        self.depth += 1
        self.emit("co = cos[ci];")
        self.emit("if (co->finished || (co->wait && !wsp_co_ready(co, ch, cos, ncos))) continue;")
        self.emit("progressed = 1;")
        self.emit("co->wait = 0;")
        self.emit(f"if ((rc = wsp_order_switch(rt, co->ctx))) {self.RET}")
        self.emit("switch (co->state) {")
        self.emit("case 0:")
        self.depth += 1
        self.body(s.body)
        self.emit("goto wsp_co_done;")
        self.depth -= 1
        while self.pending:
            proc, entry, pipe, scope = self.pending.pop(0)
            self.emit(f"case {entry}:  /* process {proc.name} */")
            self.depth += 1
            outer = (self.process, self.scope, self.consumes)
            self.process, self.scope, self.consumes = proc, list(scope), []
            if proc.id_var is not None:
                self.scope.append(proc.id_var)
            self.body(proc.body)
            self.process, self.scope, self.consumes = outer
            self.emit("goto wsp_co_done;")
            self.depth -= 1
        self.emit("default: break;")
        self.emit("}")
        self.emit("wsp_co_done:")
        self.finish()
        self.emit("wsp_co_yield:;")
        self.depth -= 1
        self.emit("}")
        self.emit("if (wsp_main->finished) break;")
        self.emit("int64_t live = 0;  /* drop finished coroutines, keeping the order */")
        self.emit("for (int64_t ci = 0; ci < ncos; ci++) {")
        self.emit("    if (cos[ci]->finished) free(cos[ci]); else cos[live++] = cos[ci];")
        self.emit("}")
        self.emit("ncos = live;")
        self.emit("if (!progressed) {")
        self.depth += 1
        self.deadlock()
        self.depth -= 1
        self.emit("}")
        self.depth -= 1
        self.emit("}")
        self.emit("rc = 0;")
        self.depth -= 1
        self.emit("wsp_end:")
        self.depth += 1
        self.emit("for (int64_t ci = 0; ci < ncos; ci++) free(cos[ci]);")
        self.emit("free(cos);")
        self.emit("return rc;")
        words = 2 * nch + max(len(self.vars), 1)
        self.lines.insert(size_at, "    " * self.depth +
                          f"const size_t wsp_cosize = sizeof(wsp_co) + {words} * sizeof(int64_t);")

    def finish(self) -> None:
        """A coroutine has finished: its pipe's channels lose a sender, its parent a child."""
        self.emit("co->finished = 1;")
        cases = []
        for i, (proc, pipe) in enumerate(self.procs):
            owned = [c for c in pipe.channels if c in proc.sends]
            if owned:
                dec = " ".join(f"ch[{self.ch_index[c]}].senders--;" for c in owned)
                cases.append(f"case {i}: {dec} break;")
        if cases:
            self.emit("if (co != wsp_main) switch (co->proc) {")
            for c in cases:
                self.emit("    " + c)
            self.emit("    default: break;")
            self.emit("}")
        self.emit("if (co->parent) co->parent->live--;")
        self.emit(f"if (co != wsp_main && (rc = wsp_order_end(rt, co->ctx))) {self.RET}")

    def deadlock(self) -> None:
        """No coroutine could run in a whole pass: write a record per blocked one into `info`
        (after the counters) and fail; program.py words it as the ref back end does."""
        base = len(self.out.info[self.sched.name])
        nvars = len(self.vars)
        self.emit(f"int64_t at = {base + 1}, end = {base} + {REPORT_WORDS};")
        self.emit("for (int64_t ci = 0; ci < ncos; ci++) {")
        self.depth += 1
        self.emit("const wsp_co *b = cos[ci];")
        self.emit("if (b->wait != WSP_CO_SEND && b->wait != WSP_CO_CONSUME) continue;")
        self.emit(f"if (at + 5 + {nvars} > end) break;")
        self.emit("const wsp_chan *c = &ch[b->wch];")
        self.emit("info[at++] = b->site; info[at++] = b->replica;")
        self.emit("info[at++] = b->wait == WSP_CO_SEND ? c->sent : b->witem;")
        self.emit("info[at++] = b->wait == WSP_CO_SEND ? wsp_co_slot_free(c) : 1;")
        self.emit(f"info[at++] = {nvars};")
        self.emit(f"for (int i = 0; i < {nvars}; i++) info[at++] = b->x[{2 * self.nch} + i];")
        self.depth -= 1
        self.emit("}")
        self.emit(f"info[{base}] = at - {base + 1};")
        self.emit(f'rc = wsp_fail(rt, WSP_ERR_VIEW, "CSP DEADLOCK"); {self.RET}')

    # -- statements, by class (ir.visit.Visitor; LoopEmitter emits the others)
    def visit_Pipe(self, p: N.Pipe) -> None:
        pid = len(self.out.pipes)
        self.out.pipes.append((p.span, p.channels))
        self.emit("/* pipe */")
        for name in p.channels:
            i = self.ch_index[name]
            self.emit(f"if (ch[{i}].open >= 0) {{")
            self.emit(f'    snprintf(msg, sizeof msg, "CSP OPEN {pid} %d {i}", (int)ch[{i}].open);')
            self.emit(f"    rc = wsp_fail(rt, WSP_ERR_VIEW, msg); {self.RET}")
            self.emit("}")
            senders = sum(q.replicas for q in p.processes if name in q.sends)
            self.emit(f"ch[{i}].open = {pid}; ch[{i}].sent = ch[{i}].nrel = ch[{i}].maxf = 0; "
                      f"ch[{i}].senders = {senders};")
            self.emit(f"for (int64_t j = 0; j < ch[{i}].nslots; j++) ch[{i}].rel[j] = -1;")
        self.emit("{")
        self.depth += 1
        self.emit("wsp_co *parent = co;")
        total = 0
        for proc in p.processes:
            entry = self.state()
            pi = len(self.procs)
            self.procs.append((proc, p))
            self.pending.append((proc, entry, p, list(self.scope)))
            total += proc.replicas
            self.emit(f"for (int64_t r = 0; r < {proc.replicas}; r++) {{  /* {proc.name} */")
            self.depth += 1
            self.emit("wsp_co *c = (wsp_co *)malloc(wsp_cosize);")
            self.emit("if (!c || wsp_co_append(&cos, &ncos, &capcos, c)) {")
            self.emit("    free(c); rc = wsp_fail(rt, WSP_ERR_INTERNAL, \"out of memory "
                      f"(coroutines)\"); {self.RET}")
            self.emit("}")
            self.emit("memcpy(c, parent, wsp_cosize);  /* the variables bound around the pipe */")
            self.emit(f"c->state = {entry}; c->wait = 0; c->finished = 0; c->proc = {pi}; "
                      f"c->replica = (int32_t)r; c->nrep = {proc.replicas};")
            self.emit("c->parent = parent; c->live = 0;")
            self.emit(f"for (int i = 0; i < {self.nch}; i++) c->x[i] = r;  /* cursors */")
            if proc.id_var is not None:
                self.emit(f"c->x[{self.slot(proc.id_var)}] = r;")
            self.emit("c->ctx = wsp_order_fork(rt);")
            self.emit(f"if (c->ctx < 0) {{ rc = wsp_error_code(rt); if (!rc) rc = wsp_fail(rt, "
                      f"WSP_ERR_INTERNAL, \"out of memory (order contexts)\"); {self.RET} }}")
            self.depth -= 1
            self.emit("}")
        self.emit(f"parent->live = {total};")
        self.depth -= 1
        self.emit("}")
        self.block_here(PIPE, "-1", -1)
        for name in p.channels:
            i = self.ch_index[name]
            items = self.info_at[("channels", name, "items")]
            most = self.info_at[("channels", name, "max_in_flight")]
            self.emit(f"ch[{i}].open = -1; info[{items}] += ch[{i}].sent; "
                      f"if (ch[{i}].maxf > info[{most}]) info[{most}] = ch[{i}].maxf;")

    def visit_Send(self, st: N.Send) -> None:
        i = self.ch_index[st.channel]
        site = self.site("send", st)
        self.emit(f"/* send {st.channel} */")
        self.emit(f"if (!wsp_co_send_ready(ch, {i}, cos, ncos)) {{")
        self.depth += 1
        self.block_here(SEND, str(i), site)
        self.depth -= 1
        self.emit("}")
        self.bind(st.item, f"ch[{i}].sent")
        self.notes = [(2 * i, self.name_of(st.item))]
        self.task(st.task)
        self.notes = []
        self.emit(f"ch[{i}].sent++;")
        self.emit(f"if (ch[{i}].sent - ch[{i}].nrel > ch[{i}].maxf) "
                  f"ch[{i}].maxf = ch[{i}].sent - ch[{i}].nrel;")

    def visit_Consume(self, st: N.Consume) -> None:
        i = self.ch_index[st.channel]
        site = self.site("consume", st)
        cur = f"co->x[{i}]"
        self.emit(f"for (;;) {{  /* consume {st.channel} as {st.item} */")
        self.depth += 1
        self.emit(f"if (!({cur} < ch[{i}].sent || ch[{i}].senders == 0)) {{")
        self.depth += 1
        self.block_here(CONSUME, str(i), site, cur)
        self.depth -= 1
        self.emit("}")
        self.emit(f"if ({cur} >= ch[{i}].sent) break;  /* closed: every sender has finished */")
        self.bind(st.item, cur)
        self.emit(f"{cur} += co->nrep;")
        self.scope.append(st.item)
        self.consumes.append((i, st.item))
        self.body(st.body)
        self.consumes.pop()
        self.scope.pop()
        item = self.name_of(st.item)
        self.emit(f"ch[{i}].rel[{item} % ch[{i}].nslots] = {item}; ch[{i}].nrel++;  /* released */")
        self.depth -= 1
        self.emit("}")

    def visit_Mark(self, st: N.Mark) -> None:
        self.emit(f"/* record {', '.join(st.events)} */")
        saved = {}
        for ev in st.events:
            i = self.ch_index[ev]
            saved[ev] = self.slot(f"{ev}#mark{id(st)}")
            self.emit(f"co->x[{saved[ev]}] = co->x[{self.nch + i}]; "
                      f"co->x[{self.nch + i}] = wsp_ev_gen[{i}]++;")
        self.body(st.body)
        for ev in st.events:
            i = self.ch_index[ev]
            self.emit(f"wsp_ev_cur[{i}] = co->x[{self.nch + i}]; "
                      f"co->x[{self.nch + i}] = co->x[{saved[ev]}]; "
                      f"info[{self.info_at[('events', ev, 'records')]}]++;")

    def visit_Sync(self, st: N.Sync) -> None:
        ch = self.m.channel(st.event)
        i = self.ch_index[ch.name]
        self.emit(f"/* synchronize {st.event}: wait for the tasks of its latest record */")
        self.emit(f"info[{self.info_at[('events', ch.name, 'synchronizes')]}]++;")
        self.emit(f"if (wsp_ev_cur[{i}] >= 0) {{")
        self.depth += 1
        self.emit("wsp_access acc;")
        self.emit("memset(&acc, 0, sizeof acc);")
        self.emit(f"acc.tensor = {self.tensor_index[ch.marks]}; acc.mode = WSP_READWRITE; "
                  "acc.ndim = 1;")
        self.emit(f"acc.lo[0] = wsp_ev_cur[{i}] % {N.MARKS}; acc.hi[0] = acc.lo[0] + 1;")
        self.emit(f"if ((rc = wsp_await(rt, &acc))) {self.RET}")
        self.depth -= 1
        self.emit("}")

    # -- tasks: marks and trace notes
    notes: list = []

    def before_submit(self, t: N.Task) -> None:
        """Marked tasks read their record generation's element; with tracing on, the runtime
        notes the items a task sends (tag 2c) and holds (tag 2c + 1) for channel c."""
        for c in self.recorded:
            i = self.ch_index[c.name]
            ti = self.tensor_index[c.marks]
            self.emit(f"if (co->x[{self.nch + i}] >= 0) {{  /* marked for {c.name} */")
            self.depth += 1
            self.emit("wsp_tile *mt = &task.tiles[task.ntiles]; wsp_access *ma = "
                      "&task.access[task.ntiles++];")
            self.emit(f"const int64_t e = co->x[{self.nch + i}] % {N.MARKS};")
            self.emit(f"mt->data = t{ti} + e; mt->rows = mt->cols = mt->stride = mt->col_stride = 1;")
            self.emit(f"ma->tensor = {ti}; ma->mode = WSP_READ; ma->ndim = 1; ma->lo[0] = e; "
                      "ma->hi[0] = e + 1;")
            self.depth -= 1
            self.emit("}")
        for tag, value in self.notes:
            self.emit(f"wsp_note(rt, {tag}, {value});")
        held = []
        for a in (*t.args, *t.extra):
            tensor = getattr(a, "tensor", None)
            if tensor is None or a.mode != "r" or not tensor.endswith("@slots"):
                continue
            name = tensor[: -len("@slots")]
            item = [v for v in sym.free_vars(a.offsets[0])]
            if len(item) == 1 and (name, item[0]) not in held:
                held.append((name, item[0]))
        for name, item in held:
            self.emit(f"wsp_note(rt, {2 * self.ch_index[name] + 1}, {self.name_of(item)});")


__all__ = ["CoEmitter", "CO_PRELUDE", "REPORT_WORDS"]
