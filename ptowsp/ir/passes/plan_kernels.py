"""plan_kernels: decide how each kernel's ops run, and attach it as the kernel's `KernelPlan`.

Per (non-extern) kernel, `plan_kernel(k)`:
1. Rewrites the ops to the ones the plan schedules: ops no store reaches are dropped; an op the
   primitive table expands becomes its ops (`softmax`: rowmax / sub / exp / rowsum / reciprocal
   / mul, so its max, exp-and-sum and scaling fuse with what surrounds them); a matmul's `b`
   that is not an f32 array already (a conversion, an f16 or integer tile, a view) gets a
   `convert` to f32 (the matmul reads it once per row of `a`), except `transpose(s)`: only its
   `s` gets that copy when it needs one, and the matmul reads `s` in place (`PlanStep.dot`:
   never a transposed copy); a store that would read a tile
   an earlier store overwrote gets an identity `convert` of its value (a snapshot, computed
   before any store runs).
2. Kernel-local fusion. Cheap elementwise ops (the table's `cheap`) of parameters and scalars
   (lowering's `convert` of a parameter, `x * 2`) are *inline*: recomputed wherever they are
   read. Every other tile op
   gets a *loop nest* (an iteration shape and a level): elementwise ops of one shape and level
   share a nest and are computed per element in registers; a value read outside its nest (by
   another nest, a view, a matmul or a store after the nests) is *materialised* in a local array.
   Reductions accumulate inside the nest of their input (row reductions in lane registers, the
   result a small [rows, 1] array; column reductions in their [1, cols] array). A value made at
   level L is readable from level L + 1 on. A store whose value is computed in a nest of the
   tile's shape is written from that nest (for an InOut tile only if nothing else reads its entry
   value); the others run after every step, in order. A blocked matmul only stored to an f32
   tile of its shape accumulates in that tile.
3. Steps, level by level: matmuls and selections (`sort_values`, `sort_indices`: a step of
   their own, row by row into an array), then nests; consecutive row-independent nests of the same
   rows run row by row (row i of each in turn), so a streaming kernel keeps a row in L1.
4. Buffer reuse by liveness: every materialised value is live from its step to the last step
   that reads it (the stores after the steps count as one last step). A buffer whose occupants
   are all dead before a step may take a value defined there of the same held dtype (f16/bf16
   are held in f32) and at most its size (the smallest such buffer). `temp_bytes_before` is one
   buffer per value, `temp_bytes_after` the buffers.

`plan_kernel(k, fuse=False)` is the trivial plan the cpu back end uses for a kernel without
one (-O0): the same rewriting of step 1, then one nest per op, every tile value materialised in
its own buffer, every store after the nests.

Leaves alone: extern kernels; kernels already planned (so the pass runs once: a later pass
that rewrote a planned kernel's ops would have to drop its plan). It must run after every pass
that changes kernel ops or fuses kernels: it is the last of the pipeline.

The plan targets the cpu back end's code shapes (16-lane row reductions, 6 x 16 register blocks
of a matmul: `MM_MR` x `MM_NR` of `ir/kernel_plan.py`, which holds the plan's data). The
matmul choices that are this pass's alone (K chunks, when to block, packing) live here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...diagnostics import InternalError
from ...primitives import OPS
from .. import nodes as N
from ..kernel_plan import MM_MR, MM_NR, KernelPlan, LoopNest, PlanStep, buffer_bytes, held

# the register-blocked matmul (MM_MR x MM_NR blocks of C): B packed MM_KC rows at a time
MM_KC = 256
MM_MIN_ROWS = 4
MM_APACK = 32 * 1024
# Cheap elementwise ops (`OpSpec.cheap` in the primitive table) are recomputed wherever they are
# read (as leaves are) when their operands are leaves, scalars or other such ops
_INLINE_COST = 3  # at most this many cheap ops are recomputed per read
_SLICES = ("slice_rows", "slice_cols")  # views that read their operand at an offset


def plan_kernels(m: N.Module) -> N.Module:
    """Every kernel's ops fused into loop nests, with temporaries in buffers reused by liveness."""
    kernels = tuple(plan_kernel(k) for k in m.kernels)
    if all(a is b for a, b in zip(kernels, m.kernels)):
        return m
    return replace(m, kernels=kernels)


def plan_kernel(k: N.Kernel, fuse: bool = True) -> N.Kernel:
    """`k` with the ops its plan schedules and the plan; `fuse=False`: the trivial plan."""
    if k.is_extern or k.plan is not None:
        return k
    ops, stores, copies = _prepare(k, frozenset())
    plan = _Planner(k, ops, stores, copies, fuse).run()
    if plan.hazards:  # snapshots, then plan again
        ops, stores, copies = _prepare(k, plan.hazards)
        plan = _Planner(k, ops, stores, copies, fuse).run()
        if plan.hazards:
            raise InternalError("plan-kernels", f"kernel `{k.name}`: a store still reads "
                                "a tile an earlier store overwrote after its snapshot")
    return replace(k, ops=tuple(ops), stores=tuple(stores), plan=plan.record())


# ---------------------------------------------------------------------------------------------
# 1. The ops the plan schedules


def _prepare(k: N.Kernel, snapshot: frozenset[int]):
    """(ops, stores, copies): the live ops, softmax expanded, matmul operands and stores in
    `snapshot` (indices into k.stores) copied; `copies` are the copies (never inline)."""
    ops: list[N.Op] = []
    new_of: dict[int, int] = {}
    copies: set[int] = set()

    def add(op: N.Op) -> int:
        ops.append(op)
        return len(ops) - 1

    def emit(name: str, args: tuple[int, ...], shape, dtype: str, attr=None) -> int:
        return add(N.Op(name, args, shape, dtype, attr))

    live = _live(k)
    for i, op in enumerate(k.ops):
        if i not in live:
            continue
        args = tuple(new_of[a] for a in op.args)
        expand = OPS[op.op].expand
        if expand is not None:  # softmax, argmax: spelled out as the ops they are made of
            new_of[i] = expand(op, args, emit, tuple(ops[a] for a in args))
        elif op.op == "matmul" and ops[args[1]].op == "transpose":
            # decision: matmul(a, transpose(s)) reads s's rows as B's columns (dot products),
            # so no transposed copy is made; s itself is converted to f32 if it is not an f32
            # array or tile already (the copy has s's layout)
            b = args[1]
            (s,) = ops[b].args
            if _needs_f32_copy(ops[s]):
                s = add(N.Op("convert", (s,), ops[s].shape, "f32"))
                copies.add(s)
                b = add(N.Op("transpose", (s,), ops[b].shape, "f32"))
            new_of[i] = add(N.Op(op.op, (args[0], b) + args[2:], op.shape, op.dtype, op.attr))
        elif op.op == "matmul" and _needs_f32_copy(ops[args[1]]):
            b = add(N.Op("convert", (args[1],), ops[args[1]].shape, "f32"))
            copies.add(b)
            new_of[i] = add(N.Op(op.op, (args[0], b) + args[2:], op.shape, op.dtype, op.attr))
        else:
            new_of[i] = add(N.Op(op.op, args, op.shape, op.dtype, op.attr))
    stores = []
    for n, (p, v) in enumerate(k.stores):
        v = new_of[v]
        if n in snapshot and ops[v].shape is not None:
            v = add(N.Op("convert", (v,), ops[v].shape, ops[v].dtype))
            copies.add(v)
        stores.append((p, v))
    return ops, stores, copies


def _needs_f32_copy(op: N.Op) -> bool:
    if op.dtype != "f32":
        return True
    spec = OPS[op.op]
    return spec.plan == "view" or spec.cheap


def _live(k: N.Kernel) -> set[int]:
    live: set[int] = set()
    todo = [v for _, v in k.stores]
    while todo:
        i = todo.pop()
        if i not in live:
            live.add(i)
            todo.extend(k.ops[i].args)
    return live


def _classify(op: N.Op) -> str:
    """The plan kind of a value: `scalar`, or its op's in the primitive table."""
    if op.shape is None:
        return "scalar"
    kind = OPS[op.op].plan
    if kind is None:
        raise InternalError("plan-kernels", f"no kernel plan for op `{op.op}`")
    return kind


# ---------------------------------------------------------------------------------------------
# Matmul shapes (the cpu back end's register-blocked matmul)


def mm_blocked(rows: int, cols: int, inner: int) -> bool:
    """Whether a matmul of this shape runs register-blocked (else i-k-j)."""
    return rows >= MM_MIN_ROWS and cols >= MM_NR and inner >= 4


def mm_small(rows: int, cols: int) -> bool:
    """Whether a matmul of this shape runs the small-M form: fewer rows than a blocked matmul
    takes, and at least one 8-column panel."""
    return rows < MM_MIN_ROWS and cols >= 8


def mm_dot(ops, b: int) -> bool:
    """Whether matmul operand `b` is `transpose(s)` of a value read in place (what `_prepare`
    leaves): the matmul then runs as dot products of a's rows and s's rows, at every level."""
    return ops[b].op == "transpose"


def mm_kc(rows: int, packed: bool = True) -> int:
    """K chunk of a blocked matmul: MM_KC (the B panel, MM_KC x MM_NR, stays in L1), less when
    a packed A chunk (rows rounded up to MM_MR, x the chunk) would outgrow MM_APACK bytes."""
    if not packed:
        return MM_KC
    rows_p = -(-rows // MM_MR) * MM_MR
    return max(16, min(MM_KC, MM_APACK // (4 * rows_p)) // 4 * 4)


def b_in_place(ops, mat, b: int) -> bool:
    """Whether a blocked matmul reads B's full MM_NR-column panels in place: an f32 tile
    parameter or an f32 array. Packing B costs a copy of B per call, which a call of few rows
    (a [16, 128] tile against a [128, 128] weight: ~17% of the kernel) cannot amortise."""
    # decision: read in place, a panel row is two unaligned vector loads from one 64-byte
    # line; rows of B are `stride` apart, which the L1 prefetcher follows. Partial panels (the
    # last cols % MM_NR columns) are still packed, zero-padded
    op = ops[b]
    if op.dtype != "f32" or op.shape is None or op.shape[1] < MM_NR:
        return False
    return op.op == "param" or b in mat


def a_in_place(ops, mat, a: int) -> bool:
    """Whether a blocked matmul reads its A operand in place: an f32 tile parameter (columns
    contiguous: the entry point copies strided ones) or an f32 array; otherwise A is converted
    or computed into a packed panel."""
    op = ops[a]
    if op.dtype != "f32" or op.shape is None or op.shape[0] < 2 or op.shape[1] < 2:
        return False
    return op.op == "param" or a in mat


# ---------------------------------------------------------------------------------------------
# 2. - 4. Planning


@dataclass
class _Nest:
    level: int
    shape: tuple[int, int]
    ops: list[int] = field(default_factory=list)
    rowreds: list[int] = field(default_factory=list)
    colreds: list[int] = field(default_factory=list)
    stores: list[tuple[str, int]] = field(default_factory=list)

    @property
    def first(self) -> int:
        return min(self.ops + self.rowreds + self.colreds)

    def record(self) -> LoopNest:
        return LoopNest(self.shape, self.level, tuple(self.ops), tuple(self.rowreds),
                          tuple(self.colreds), tuple(self.stores))


@dataclass
class _Result:
    hazards: frozenset[int]
    kinds: list[str] = field(default_factory=list)
    levels: list[int] = field(default_factory=list)
    steps: list[PlanStep] = field(default_factory=list)
    final: list[tuple[str, int]] = field(default_factory=list)
    into: dict[int, str] = field(default_factory=dict)
    buffers: list[tuple[str, int]] = field(default_factory=list)
    assign: dict[int, int] = field(default_factory=dict)
    before: int = 0
    after: int = 0

    def record(self) -> KernelPlan:
        return KernelPlan(tuple(self.kinds), tuple(self.levels), tuple(self.steps),
                            tuple(self.final), tuple(sorted(self.into.items())),
                            tuple(self.buffers), tuple(sorted(self.assign.items())),
                            self.before, self.after)


class _Planner:
    def __init__(self, k: N.Kernel, ops: list[N.Op], stores, copies: set[int], fuse: bool):
        self.k, self.ops, self.stores, self.copies, self.fuse = k, ops, stores, copies, fuse
        n = len(ops)
        self.kind = [_classify(op) for op in ops]
        self.level = [0] * n
        self.uses: list[list[int]] = [[] for _ in range(n)]
        self.stored: list[list[int]] = [[] for _ in range(n)]  # store indices reading each value
        for i, op in enumerate(ops):
            for a in op.args:
                self.uses[a].append(i)
        for s, (_, v) in enumerate(stores):
            self.stored[v].append(s)

    def avail(self, u: int) -> int:
        """The level from which u is readable as an array (or a leaf)."""
        return self.level[u] + 1 if self.kind[u] in ("ew", "red") else self.level[u]

    def run(self) -> _Result:
        ops, kind, level, uses, stored = self.ops, self.kind, self.level, self.uses, self.stored
        n = len(ops)
        if self.fuse:
            # decision: cheap elementwise ops of parameters (a `convert` of an f16 weight,
            # `x * 2`) are recomputed where they are read instead of being given a nest and an
            # array of their own; a stored value stays in a nest (stores of one shape then share
            # one loop)
            # decision: so are cheap ops of slices of parameters (`-x[:, 64:]` in a rotate_half):
            # a slice of a leaf is read in place, as cheaply as the leaf
            cost = [0] * n

            def in_place(a: int) -> bool:
                if kind[a] in ("scalar", "leaf", "inline"):
                    return True
                return ops[a].op in _SLICES and in_place(ops[a].args[0])

            for i, op in enumerate(ops):
                if kind[i] == "ew" and OPS[op.op].cheap and not stored[i] \
                        and i not in self.copies:
                    c = 1 + sum(cost[a] for a in op.args if kind[a] == "inline")
                    if all(in_place(a) for a in op.args) and c <= _INLINE_COST:
                        kind[i], cost[i] = "inline", c

        nests: dict[tuple, _Nest] = {}
        nest_of: dict[int, _Nest] = {}
        for i, op in enumerate(ops):
            kd = kind[i]
            if kd in ("scalar", "leaf", "inline"):
                level[i] = 0
            elif kd == "ew":
                lv = 0
                for a in op.args:
                    if self.fuse and kind[a] == "ew" and ops[a].shape == op.shape:
                        lv = max(lv, level[a])  # same shape: may be computed in the same nest
                    elif kind[a] not in ("scalar", "leaf", "inline"):
                        lv = max(lv, self.avail(a))
                level[i] = lv
                key = (lv, op.shape) if self.fuse else (lv, op.shape, i)
                nest = nests.setdefault(key, _Nest(lv, op.shape))
                nest.ops.append(i)
                nest_of[i] = nest
            elif kd == "red":
                (x,) = op.args
                lv = level[x] if self.fuse and kind[x] == "ew" else self.avail(x)
                level[i] = lv
                key = (lv, ops[x].shape) if self.fuse else (lv, ops[x].shape, i)
                nest = nests.setdefault(key, _Nest(lv, ops[x].shape))
                (nest.rowreds if OPS[op.op].axis == "row" else nest.colreds).append(i)
                nest_of[i] = nest
            else:  # views, matmul and selections read arrays
                level[i] = max((self.avail(a) for a in op.args), default=0)

        # Materialise every elementwise value read outside its own nest (in a nest: at the
        # element being computed, so the value is a register).
        mat: set[int] = {i for i in range(n) if kind[i] in ("red", "matmul", "select")}
        for i in range(n):
            if kind[i] == "ew" and (not self.fuse or any(
                    kind[u] not in ("ew", "red") or nest_of[u] is not nest_of[i] for u in uses[i])):
                mat.add(i)

        def read_here(u: int, nest: _Nest, shape) -> bool:
            """Whether every reader of u (a tile parameter's value, or an inline op of it) is
            in `nest` at the element being written; a store reading it runs after the nests."""
            if stored[u]:
                return False
            for c in uses[u]:
                if kind[c] == "inline":
                    if ops[c].shape != shape or not read_here(c, nest, shape):
                        return False
                elif kind[c] not in ("ew", "red") or nest_of[c] is not nest or nest.shape != shape:
                    return False
            return True

        # Stores: straight from the nest when the value is computed there at the tile's shape
        # and nothing reads the tile's entry value elsewhere.
        params = {p.name: p for p in self.k.params}
        param_ops: dict[str, list[int]] = {}
        for i, op in enumerate(ops):
            if op.op == "param":
                param_ops.setdefault(str(op.attr), []).append(i)
        final: list[tuple[int, str, int]] = []
        for s, (pname, v) in enumerate(self.stores):
            p = params[pname]
            ok = self.fuse and kind[v] == "ew" and ops[v].shape == (p.rows, p.cols)
            if ok and p.mode == "InOut":
                ok = all(read_here(po, nest_of[v], ops[v].shape) for po in param_ops.get(pname, ()))
            if ok:
                nest_of[v].stores.append((pname, v))
            else:
                final.append((s, pname, v))
                if kind[v] == "ew":
                    mat.add(v)

        # Stores after the steps run in order: one may not read (other than at the element it
        # writes) a tile that it or an earlier one writes.
        def direct_reads(v: int, identity: bool, out: dict[str, bool]) -> None:
            op = ops[v]
            if op.op == "param":
                out[str(op.attr)] = out.get(str(op.attr), True) and identity
            elif kind[v] in ("view", "inline"):
                for a in op.args:
                    same = kind[v] == "inline" and ops[a].shape == op.shape
                    direct_reads(a, identity and same, out)

        hazards = set()
        written: set[str] = set()
        for s, pname, v in final:
            reads: dict[str, bool] = {}
            direct_reads(v, True, reads)
            if any(q in written for q in reads) or reads.get(pname) is False:
                hazards.add(s)
            written.add(pname)
        if hazards:
            return _Result(frozenset(hazards))

        # decision: a blocked matmul whose value is only stored, to an f32 tile of its shape
        # that nothing else reads (but as its `acc`), accumulates in that tile: the copy of C in
        # and out of a temporary was ~10% of a 64^3 tile's time
        into: dict[int, str] = {}
        for _, pname, v in final if self.fuse else ():
            p, op = params[pname], ops[v]
            if kind[v] != "matmul" or uses[v] or len(stored[v]) != 1 or mm_dot(ops, op.args[1]):
                continue
            if op.dtype != "f32" or p.dtype != "f32" or op.shape != (p.rows, p.cols):
                continue
            inner = ops[op.args[0]].shape[1]
            if not mm_blocked(op.shape[0], op.shape[1], inner) \
                    or sum(q == pname for q, _ in self.stores) != 1:
                continue
            own = param_ops.get(pname, [])
            acc = op.args[2] if len(op.args) > 2 else None
            kc = mm_kc(op.shape[0], not a_in_place(ops, mat, op.args[0]))
            if acc is not None and (acc not in own or inner > kc):
                continue  # acc is added once, after the K chunks: not in place
            if any(a in own for a in op.args[:2]) or any(stored[po] for po in own):
                continue
            if any(u != v for po in own for u in uses[po]):
                continue
            into[v] = pname
        mat -= set(into)
        final = [f for f in final if f[2] not in into]

        # Steps, level by level: matmuls first (their inputs are ready), then the nests.
        steps: list[tuple[str, object]] = []
        by_level: dict[int, list[_Nest]] = {}
        for nest in nests.values():
            by_level.setdefault(nest.level, []).append(nest)
        for lv in range(max(level, default=0) + 2):
            steps += [("matmul", i) for i in range(n) if kind[i] == "matmul" and level[i] == lv]
            steps += [("select", i) for i in range(n) if kind[i] == "select" and level[i] == lv]
            steps += [("nest", t) for t in sorted(by_level.get(lv, []), key=lambda t: t.first)]
        if self.fuse:
            steps = self.row_groups(steps)
        else:
            steps = [("rows" if st == "nest" else st, [x] if st == "nest" else x)
                     for st, x in steps]

        res = _Result(frozenset(), kind, level, final=[(p, v) for _, p, v in final], into=into)
        for st, item in steps:
            if st == "matmul":
                op = ops[item]
                inner = ops[op.args[0]].shape[1]
                # decision: the trivial plan (-O0, -O1) runs every matmul i-k-j: register
                # blocking and the small-M form are this pass's choice, like fusing nests (both
                # sum each element over k in the order i-k-j does: the same bits). A transposed
                # B runs as dot products at every level, which sum in another order
                dot = mm_dot(ops, op.args[1])
                blocked = self.fuse and not dot and mm_blocked(op.shape[0], op.shape[1], inner)
                small = self.fuse and not dot and mm_small(op.shape[0], op.shape[1]) \
                    and (ops[op.args[1]].op == "param" or op.args[1] in mat)
                pack = not a_in_place(ops, mat, op.args[0])
                res.steps.append(PlanStep(matmul=item, blocked=blocked,
                                            kc=mm_kc(op.shape[0], pack) if blocked else 0,
                                            pack_a=blocked and pack,
                                            pack_b=not (blocked
                                                        and b_in_place(ops, mat, op.args[1])),
                                            small=small, dot=dot))
            elif st == "select":
                res.steps.append(PlanStep(select=item))
            else:
                res.steps.append(PlanStep(nests=tuple(t.record() for t in item)))
        self.buffers(res, mat)
        return res

    def row_groups(self, steps):
        """`steps` with runs of row-independent nests merged into ("rows", [nests]).

        A run is consecutive nests of the same number of rows (more than one) without column
        reductions (complete only after the last row), where no op reads a value produced in
        the run from another row (through a view that is not `row_local` in the primitive
        table, a `transpose`, a row `gather`; slices, interleave and broadcasting keep rows)."""
        # decision: row-independent nests run row by row (RMSNorm, softmax, most
        # normalisations): a streaming kernel then interleaves its loads and stores, which
        # measured 20-40% faster over large tensors than running each nest over the whole tile
        ops, kind = self.ops, self.kind

        def other_rows(u: int, produced: set[int], moved: bool) -> bool:
            """Whether reading u reads a value produced in the run at another row."""
            if u in produced:
                return moved
            if kind[u] in ("view", "inline"):
                moved = moved or not OPS[ops[u].op].row_local
                return any(other_rows(a, produced, moved) for a in ops[u].args)
            return False

        out: list[tuple[str, object]] = []
        run: list[_Nest] = []
        produced: set[int] = set()

        def flush():
            if run:
                out.append(("rows", list(run)))
            run.clear()
            produced.clear()

        for step, item in steps:
            if step != "nest" or item.colreds or item.shape[0] == 1:
                flush()
                out.append(("rows", [item]) if step == "nest" else (step, item))
                continue
            if run and item.shape[0] != run[0].shape[0]:
                flush()
            reads = [a for i in item.ops + item.rowreds for a in ops[i].args]
            if any(other_rows(a, produced, False) for a in reads):
                flush()
            run.append(item)
            produced.update(item.ops + item.rowreds)
        flush()
        return out

    def buffers(self, res: _Result, mat: set[int]) -> None:
        """Materialised values into buffers: reuse by liveness (see the module docstring);
        the trivial plan gives every value a buffer of its own."""
        ops = self.ops
        kinds = res.kinds
        nest_of = {i: t for s in res.steps for t in s.nests
                   for i in t.ops + t.rowreds + t.colreds}
        define: dict[int, int] = {}
        last: dict[int, int] = {}
        for s, step in enumerate(res.steps):
            own = step.matmul if step.matmul is not None else step.select
            if own is not None:
                define[own] = s
                for a in ops[own].args:
                    for u in value_reads(ops, kinds, mat, a):
                        last[u] = max(last.get(u, s), s)
            for t in step.nests:
                for i in t.ops + t.rowreds + t.colreds:
                    define[i] = s
                    for a in ops[i].args:
                        if kinds[a] == "ew" and nest_of.get(a) is t:
                            continue  # a register of this nest
                        for u in value_reads(ops, kinds, mat, a):
                            last[u] = max(last.get(u, s), s)
        end = len(res.steps)
        for _, v in res.final:
            for u in value_reads(ops, kinds, mat, v):
                last[u] = end
        occupants: list[list[int]] = []
        for s in range(end):
            for u in sorted((u for u in mat if define[u] == s),
                            key=lambda u: (-_elements(ops[u]), u)):
                dt, size = held(ops[u].dtype), _elements(ops[u])
                best = None
                for b, (bdt, bsize) in enumerate(res.buffers):
                    if not self.fuse or bdt != dt or bsize < size:
                        continue
                    if all(last.get(w, define[w]) < s for w in occupants[b]):
                        if best is None or bsize < res.buffers[best][1]:
                            best = b
                if best is None:
                    res.buffers.append((dt, size))
                    occupants.append([])
                    best = len(res.buffers) - 1
                occupants[best].append(u)
                res.assign[u] = best
        res.before = sum(buffer_bytes(held(ops[u].dtype), _elements(ops[u])) for u in mat)
        res.after = sum(buffer_bytes(dt, n) for dt, n in res.buffers)


def _elements(op: N.Op) -> int:
    return op.shape[0] * op.shape[1]


def value_reads(ops, kinds, mat, u: int) -> set[int]:
    """The materialised values read when value u is read outside its nest (through views and
    inline ops)."""
    if u in mat:
        return {u}
    if kinds[u] in ("view", "inline"):
        out: set[int] = set()
        for a in ops[u].args:
            out |= value_reads(ops, kinds, mat, a)
        return out
    return set()


__all__ = ["plan_kernels", "plan_kernel", "value_reads", "mm_blocked", "mm_small", "mm_dot",
           "mm_kc", "a_in_place",
           "b_in_place", "MM_KC", "MM_MIN_ROWS", "MM_APACK"]
