"""A workload body becomes a loop tree: statements, loops over dense, ragged and sparse axes,
`sequential` and `combine` blocks, `when`, slot statements, inlined workloads; the kernel
calls at its leaves are tasks (tasks.py), its CSP statements csp.py's.

What lowering decides here (each also written next to its code as `# decision:`):
- Loop variables keep their source names unless that would rebind a name bound by an enclosing
  loop or a sym (then `b_2`, ...): names are unique along every path of the loop tree, so
  schedule keys stay expressions over the loop variables' source names.
- `tok[b]` of `Ragged(outer, lengths)` has extent `lengths@n` (or the length expression with
  `_` = b), plus an `N.Assert` that it is not negative unless proved.
- `for e in P.sel(route[b])`: Reads of `indptr[b]`, `indptr[b + 1]`, Asserts 0 <= lo <= hi
  <= len(indices), a grid Loop over `e.pos` in [0, hi - lo) whose body starts with the Read
  `e = indices[lo + e.pos]`.
- `when` is an `N.When` of `N.Cond`s (decided predicates fold to the chosen body); `else when`
  predicates and the right side of `and` / `or` read elements only when reached.
- `slot_set` / `slot_load` are `N.SlotSet`s.
"""

from __future__ import annotations

from typing import Optional

from .. import sym
from ..diagnostics import Diagnostics, InternalError
from ..frontend import ast as A
from ..frontend.env import AxisInfo, ChannelInfo, ModuleEnv
from ..frontend.printer import expr_str
from ..frontend.signatures import to_sym
from ..frontend.workloads.collectives import same_shape_reason
from ..frontend.workloads.edges import task_binding
from ..ir import nodes as N
from .csp import CspLowering, marked, with_records
from .edges import EdgeLowering
from .kernels import Specialisations
from .scope import Alias, AxisParam, Let, LoopVar, Scope, SelVar, unlet
from .tasks import TaskLowering
from .unsupported import UNSUPPORTED, Unsupported
from .values import UNKNOWN, ValueLowering, not_


def _has_reads(e: A.Expr, scope: Scope) -> bool:
    """Whether evaluating `e` reads tensor elements or slots or divides by what is not a
    literal (then `and`/`or` must short-circuit: the reads' range checks, the divisors' and
    the overflow checks' Asserts hold only where the right side is evaluated); a `let` name
    reads what its expression reads."""
    e, scope = unlet(e, scope)
    if isinstance(e, A.Index) or _divides(e) or _slot(e):
        return True
    kids = e.args if isinstance(e, A.Call) else e.children()  # not a function's name
    return any(_has_reads(k, scope) for k in kids)


def _slot(n: A.Expr) -> bool:
    return isinstance(n, A.Call) and n.func.id == "slot"


def _divides(n: A.Expr) -> bool:
    if isinstance(n, A.Binary) and n.op in ("/", "%"):
        return not isinstance(n.right, A.IntLit)
    return isinstance(n, A.Call) and n.func.id == "ceildiv" and len(n.args) == 2 \
        and not isinstance(n.args[1], A.IntLit)


def _splits(e: A.Expr, scope: Scope) -> bool:
    """Whether a predicate is lowered as nested `When`s: an `and` / `or` (under any `not`s and
    `let` names) whose right side reads tensor elements."""
    e, scope = unlet(e, scope)
    while isinstance(e, A.Unary) and e.op == "not":
        e, scope = unlet(e.operand, scope)
    return isinstance(e, A.Binary) and e.op in ("and", "or") and _has_reads(e.right, scope)


class WorkloadLowerer(ValueLowering, TaskLowering, CspLowering, EdgeLowering):
    """One schedule's loop tree (inlined workloads included).

    The state below is shared by one mixin per concept: `ValueLowering` (values.py: scalar
    expressions, element reads, asserts, proofs), `TaskLowering` (tasks.py: tasks and their
    arguments), `CspLowering` (csp.py: pipes, processes, send, consume) and `EdgeLowering`
    (edges.py: task handles and `after`); this class adds the statements, loops, `when` and
    axes."""

    def __init__(self, env: ModuleEnv, specs: Specialisations, diags: Diagnostics):
        self.env = env
        self.specs = specs  # the kernel specialisations its tasks use
        self.diags = diags  # where a statement that is Unsupported is reported
        self.bound: dict[str, int] = {}  # IR loop (and P.sel) names bound on the current path
        self.renamed: set[str] = set()  # source names that had to be renamed somewhere
        # What the proofs know: the variables' ranges, the symbolic extents of the loops, and
        # the facts decided so far
        self.ranges: dict[str, sym.Interval] = {}
        self.extents: dict[str, sym.Expr] = {}
        self.proofs: dict[tuple, Optional[bool]] = {}
        self.given: dict[str, Optional[sym.Expr]] = {}  # each bound variable's extent as given
        # Reads and Asserts to place right before the statement being lowered (None: no
        # statement, e.g. a schedule key), and the reads it made so far (shared when repeated)
        self.pre: Optional[list[N.Stmt]] = None
        self.memo: dict[tuple, str] = {}
        self.nreads = 0
        self.dyn: set[str] = set()  # variables holding run-time values (Read variables, slots)
        # CSP: the items of the enclosing consume bodies (their tasks access the items' slots),
        # the send whose call is being lowered (channel, item variable), and the sends so far
        self.items: list[tuple[ChannelInfo, str]] = []
        self.sending: Optional[tuple[ChannelInfo, str]] = None
        self.nsends = 0
        self.edges_init("")

    # ---- entry points
    def scheduled(self, wname: str, args, kwargs, schedule: Optional[str] = None
                  ) -> list[N.Stmt]:
        decl = self.env.workloads[wname]
        self.edge_schedule = schedule or wname
        self.pre, self.memo = [], {}
        try:
            scope = self.bind_params(decl, args, kwargs, Scope())
            pre = self.pre
        finally:
            self.pre, self.memo = None, {}
        return pre + self.workload_body(decl.body, scope)

    def workload_body(self, body, scope: Scope) -> list[N.Stmt]:
        """A workload's statements (the schedule's, or one inlined), with its task handles."""
        self.edges_enter(body)
        try:
            return self.block(body, scope)
        finally:
            self.edges_leave()

    def bind_params(self, decl: A.WorkloadDecl, args, kwargs, caller: Scope) -> Scope:
        scope = Scope()
        bound: dict[str, A.Expr] = {p.name.id: a for p, a in zip(decl.params, args)}
        for kw in kwargs:
            bound[kw.name] = kw.value
        for p in decl.params:
            arg = bound[p.name.id]
            info = self.axis_info(arg, caller)
            if info is not None:
                scope.names[p.name.id] = AxisParam(None, info)
            else:
                scope.names[p.name.id] = AxisParam(self.axis_extent(arg, caller))
        return scope

    # ---- statements
    def block(self, stmts, scope: Scope) -> list[N.Stmt]:
        out: list[N.Stmt] = []
        for s, events, span in with_records(stmts):
            try:
                part = self.lowered(s, scope)
            except Unsupported as u:
                u.report(self.diags)
                continue
            out.extend(marked(part, events, span))
        return out

    def capture(self, fn, memo: Optional[dict] = None):
        """`fn()` with its own list of Reads and Asserts (and reads to share, starting from
        `memo`): returns (that list, fn's value)."""
        saved = (self.pre, self.memo)
        self.pre, self.memo = [], dict(memo or {})
        try:
            value = fn()
            return self.pre, value
        finally:
            self.pre, self.memo = saved

    def lowered(self, s: A.Stmt, scope: Scope) -> list[N.Stmt]:
        """One statement, preceded by the Reads and Asserts its expressions need."""
        pre, out = self.capture(lambda: self.stmt(s, scope))
        return pre + out

    def stmt(self, s: A.Stmt, scope: Scope) -> list[N.Stmt]:
        if isinstance(s, A.ForLoop):
            if s.kind == "sel":
                return [self.sel_loop(s, scope)]
            return [self.for_loop(s, scope)]
        if isinstance(s, A.CallStmt):
            if s.callee.id in self.env.workloads:
                decl = self.env.workloads[s.callee.id]
                inner = self.bind_params(decl, s.args, s.kwargs, scope)
                return self.workload_body(decl.body, inner)
            return [self.with_edges(self.task(s, scope), s, scope)]
        if isinstance(s, A.Combine):
            return [N.Block("combine", tuple(self.block(s.body, Scope(scope))))]
        if isinstance(s, A.Sequential):
            items: list[N.Stmt] = []
            for child, events, span in with_records(s.body):
                try:
                    part = marked(self.lowered(child, Scope(scope)), events, span)
                except Unsupported as u:
                    u.report(self.diags)
                    continue
                # decision: an inlined workload inside `sequential` is one step; its own statements stay unordered (a combine block)
                if len(part) == 1:
                    items.append(part[0])
                elif part:
                    items.append(N.Block("combine", tuple(part)))
            return [N.Block("sequential", tuple(items))]
        if isinstance(s, A.When):
            return self.when(list(s.branches), s.otherwise, scope)
        if isinstance(s, A.Let) and task_binding(s, self.env.kernel_sigs) is not None:
            return self.stmt(task_binding(s, self.env.kernel_sigs), scope)
        if isinstance(s, A.Let):
            kw = A.Keyword(s.name.id, s.value, span=s.name.span.merge(s.value.span))
            scope.names[s.name.id] = Let(s.value, scope, kw)
            return []
        if isinstance(s, A.SlotSet):
            k = self.slot_number(s.slot, scope)
            return [N.SlotSet(k, self.int_expr(s.value, scope), s.span)]
        if isinstance(s, A.SlotLoad):
            k = self.slot_number(s.slot, scope)
            kind, v = self.element(s.source, scope)
            if kind != "int":
                raise InternalError("lower", "`slot_load` of a bool tensor")
            return [N.SlotSet(k, v, s.span)]
        if isinstance(s, A.Pipe):
            return [self.pipe(s, scope)]
        if isinstance(s, A.Send):
            return [self.send(s, scope)]
        if isinstance(s, A.Consume):
            return [self.consume(s, scope)]
        if isinstance(s, A.Synchronize):
            return [N.Sync(s.event.id, s.event.span)]
        if isinstance(s, A.Collective):
            return self.same_shape(s) + [self.collective(s)]
        raise InternalError("lower", f"unexpected workload statement {type(s).__name__}")

    def same_shape(self, s: A.Collective) -> list[N.Stmt]:
        """A collective's two tensors have one shape: what the checker could not prove is
        checked when the run reaches the collective."""
        src, dst = self.env.tensors[s.source.id], self.env.tensors[s.into.id]
        out: list[N.Stmt] = []
        for a, b in zip(src.dims, dst.dims):
            if sym.prove_eq(a, b) is not True:
                reason = same_shape_reason(s.kind, src.name, dst.name)
                out.append(N.Assert(N.ViewCheck(sym.Check(a, "==", b, reason), reason, s.span)))
        return out

    def collective(self, s: A.Collective) -> N.Collective:
        """A collective statement as the checker accepted it (docs/distributed.md)."""
        dim = None
        if s.dim is not None:
            dim = sym.const_value(to_sym(s.dim, lambda n: sym.const(self.env.consts[n.id]),
                                         Diagnostics()))
            if dim is None:
                raise InternalError("lower", "a `reduce_scatter` dim the checker did not fold")
        op = s.op.id if s.op is not None else (
            "sum" if s.kind in ("allreduce", "reduce_scatter") else None)
        return N.Collective(s.kind, s.source.id, s.into.id, s.over.id if s.over else None, op,
                            dim, s.span)

    # ---- when / else when / otherwise
    def when(self, branches: list, otherwise, scope: Scope, memo: Optional[dict] = None
             ) -> list[N.Stmt]:
        """`when` as `N.When`s. Predicates are evaluated lazily: the element reads of an
        `else when` predicate happen only when the branches before it failed (sharing the reads
        of those predicates: no task runs in between), and those of the right side of `and` /
        `or` only when the left side did not decide."""
        if not branches:
            return self.block(otherwise or (), Scope(scope))
        br = branches[0]
        return self.test(br.pred, scope, lambda m: self.block(br.body, Scope(scope)),
                         lambda m: self.when(branches[1:], otherwise, scope, m), memo or {})

    def test(self, pred: A.Expr, scope: Scope, then, els, memo: dict) -> list[N.Stmt]:
        """Statements running `then(memo)` where `pred` holds and `els(memo)` elsewhere (`memo`:
        the element reads made so far that they may share). A thunk may be called twice,
        lowering its statements twice with fresh names. A `let` name is its expression."""
        pred, scope = unlet(pred, scope)
        if isinstance(pred, A.Unary) and pred.op == "not" and _splits(pred.operand, scope):
            return self.test(pred.operand, scope, els, then, memo)
        if isinstance(pred, A.Binary) and _splits(pred, scope):
            # decision: `and` / `or` short-circuit: the right side's element reads (and their range checks) happen only when the left side does not decide
            def right(m):
                return self.test(pred.right, scope, then, els, m)

            if pred.op == "and":
                return self.test(pred.left, scope, right, els, memo)
            return self.test(pred.left, scope, then, right, memo)
        seen: dict = {}

        def evaluate():
            value = self.scalar(pred, scope)
            seen.update(self.memo)
            return value

        pre, (kind, c) = self.capture(evaluate, memo)
        if kind != "bool":
            raise InternalError("lower", f"`{expr_str(pred)}` is not a condition")
        # decision: a predicate decided at compile time (constants, syms and loop ranges) lowers to the chosen body alone
        if c is True:
            return pre + then(seen)
        if c is False:
            return pre + els(seen)
        body, rest = tuple(then(seen)), tuple(els(seen))
        if not body:
            return pre + ([N.When(((not_(c), rest),))] if rest else [])
        if len(rest) == 1 and isinstance(rest[0], N.When):
            # `else when` whose predicate needs no new reads: one When with several branches
            return pre + [N.When(((c, body),) + rest[0].branches, rest[0].otherwise)]
        return pre + [N.When(((c, body),), rest)]

    # ---- loops
    def fresh(self, name: str) -> str:
        # decision: a loop variable keeps its source name unless an enclosing loop binds it or a sym has it (then `b_2`, `b_3`, ...): unique along every path, so sibling loops may share a name and keys stay over source names
        out, k = name, 1
        while out in self.env.syms or self.bound.get(out, 0) > 0:
            k += 1
            out = f"{name}_{k}"
        if out != name:
            self.renamed.add(name)
        self.bound[out] = self.bound.get(out, 0) + 1
        return out

    def bind_var(self, name: str, rng: sym.Interval, extent: Optional[sym.Expr],
                 saved: dict) -> None:
        """Give variable `name` a range (and a symbolic extent for the loop proofs), keeping
        what it had for `unbind`."""
        if name not in saved:
            saved[name] = (self.ranges.get(name), self.extents.get(name), name in self.dyn)
        self.ranges[name] = rng
        self.given[name] = extent  # names are unique along a path: the latest binding is in scope
        # decision: an extent that reads a slot is not used in proofs (a later slot_set in the body changes the slot, not the extent)
        if extent is not None and sym.const_value(extent) is None and not any(
                N.slot_index(v) is not None for v in sym.free_vars(extent)):
            self.extents[name] = extent
        else:
            self.extents.pop(name, None)

    def unbind(self, saved: dict) -> None:
        for name, (r, e, dyn) in saved.items():
            self.bound[name] = self.bound.get(name, 1) - 1
            for table, old in ((self.ranges, r), (self.extents, e)):
                if old is None:
                    table.pop(name, None)
                else:
                    table[name] = old
            if dyn:
                self.dyn.add(name)
            else:
                self.dyn.discard(name)

    def for_loop(self, s: A.ForLoop, scope: Scope) -> N.Loop:
        extents = [self.axis_extent(ax, scope) for ax in s.axes]
        inner = Scope(scope)
        names = []
        saved: dict[str, tuple] = {}
        try:
            for k, (v, ext) in enumerate(zip(s.vars, extents)):
                name = self.fresh(v.id)
                names.append(name)
                self.edge_loop(s, k, name, ext)
                inner.names[v.id] = LoopVar(name)
                hi = sym.bounds(ext, self.ranges).hi
                known = hi is not None and hi >= 1
                self.bind_var(name, sym.Interval(0, hi - 1) if known else sym.NONNEG, ext, saved)
                self.dyn.discard(name)
            body: tuple[N.Stmt, ...] = tuple(self.block(s.body, inner))
        finally:
            self.unbind(saved)
            self.edge_loop_end(len(names))
        kind = "seq" if s.kind == "seq" else "grid"
        # decision: `for a, b in P(x, y)` is one Loop per axis, nested in the order written (P.seq: lexicographic order)
        for name, ext in reversed(list(zip(names, extents))):
            body = (N.Loop(name, ext, kind, body),)
        return body[0]

    def sel_loop(self, s: A.ForLoop, scope: Scope) -> N.Loop:
        """`for e in P.sel(route[b])`: Reads lo = indptr[b] and hi = indptr[b + 1], Asserts that
        0 <= lo <= hi <= len(indices), then a grid loop over the position `e.pos` in
        [0, hi - lo) whose body starts by reading `e = indices[lo + e.pos]`."""
        if len(s.vars) != 1 or len(s.axes) != 1:
            raise InternalError("lower", "`P.sel` over several axes")
        (v,), (ax,) = s.vars, s.axes
        info = self.axis_info(ax.value, scope) if isinstance(ax, A.Index) else None
        if info is None or info.kind != "sparse" or len(ax.items) != 1:
            raise InternalError("lower",
                                f"`P.sel({expr_str(ax)})` is not a sparse axis at an index")
        item = ax.items[0]
        b = self.int_expr(item, scope)
        bt = expr_str(item)
        ip, ix = info.indptr, info.indices
        name = expr_str(ax.value)
        span = ax.span
        lo = self.read(ip, (b,), (bt,), f"{ip}[{bt}]", span)
        hi = self.read(ip, (sym.add(b, 1),), (f"{bt} + 1",), f"{ip}[{bt} + 1]", span)
        nnz = self.env.tensors[ix].dims[0]
        self.assert_(lo, ">=", sym.const(0),
                     f"`{ip}[{bt}]` of sparse axis `{name}` must not be negative", span)
        self.assert_(hi, ">=", lo,
                     f"`{ip}` of sparse axis `{name}` must not decrease: `{ip}[{bt} + 1]` must "
                     f"be at least `{ip}[{bt}]`", span)
        self.assert_(hi, "<=", nnz,
                     f"`{ip}[{bt} + 1]` of sparse axis `{name}` must be at most "
                     f"{sym.to_str(nnz)}, the length of `{ix}`", span)
        count = sym.sub(hi, lo)
        saved: dict[str, tuple] = {}
        try:
            # decision: the P.sel variable is a Read variable named like the source variable (renamed as loop variables are), so keys and coordinates name it; its position loop variable is `e.pos`
            elem = self.fresh(v.id)
            pos = f"{elem}.pos"
            self.bound[pos] = self.bound.get(pos, 0) + 1
            self.bind_var(pos, sym.NONNEG, count, saved)
            self.dyn.discard(pos)
            # decision: `e` holds `indices[k]`, any value the index data holds: views it indexes are checked at run time on both sides
            self.bind_var(elem, UNKNOWN, None, saved)
            self.dyn.add(elem)
            inner = Scope(scope)
            inner.names[v.id] = SelVar(elem, pos)
            # no checks: the Asserts above make lo + pos an index of `indices`
            first = N.Read(elem, ix, (sym.add(lo, sym.var(pos)),), (), v.span)
            self.edge_loop(s, 0, pos, count)  # a handle's coordinate here: the position
            try:
                body = (first,) + tuple(self.block(s.body, inner))
            finally:
                self.edge_loop_end(1)
        finally:
            self.unbind(saved)
        return N.Loop(pos, count, "grid", body)

    # ---- axes
    def axis_info(self, e: A.Expr, scope: Scope) -> Optional[AxisInfo]:
        """The ragged or sparse module axis a name denotes (directly or as a parameter)."""
        if not isinstance(e, A.Name):
            return None
        b = scope.lookup(e.id)
        if isinstance(b, AxisParam):
            return b.info
        if b is None and e.id in self.env.axes:
            info = self.env.axes[e.id]
            return info if info.kind in ("ragged", "sparse") else None
        return None

    def axis_extent(self, e: A.Expr, scope: Scope) -> sym.Expr:
        if isinstance(e, A.DenseAxis):
            return self.int_expr(e.extent, scope)
        if isinstance(e, A.DenseDynAxis):
            return self.dynamic_extent(self.int_expr(e.extent, scope), e)
        if isinstance(e, (A.RaggedAxis, A.SparseAxis)):
            raise Unsupported(e.span, f"inline ragged and sparse axes {UNSUPPORTED}")
        if isinstance(e, A.Name):
            info = self.axis_info(e, scope)
            if info is not None:
                raise InternalError("lower", f"{info.kind} axis `{e.id}` used without an index")
            b = scope.lookup(e.id)
            if isinstance(b, AxisParam):
                return b.extent
            if b is None and e.id in self.env.axes:
                info = self.env.axes[e.id]
                if info.kind == "densedyn":
                    self.axis_divisors(info.decl)
                return info.extent
        if isinstance(e, A.Index):
            info = self.axis_info(e.value, scope)
            if info is not None:
                if info.kind != "ragged" or len(e.items) != 1:
                    raise InternalError("lower",
                                        f"`{expr_str(e)}` is not a ragged axis at an index")
                return self.ragged_extent(info, e, scope)
        return self.dynamic_extent(self.int_expr(e, scope), e)

    def ragged_extent(self, info: AxisInfo, e: A.Index, scope: Scope) -> sym.Expr:
        """`tok[b]`: a Read of `lengths[b]` or the length expression at `_` = b, with an Assert
        that it is not negative."""
        item = e.items[0]
        b = self.int_expr(item, scope)
        bt = expr_str(item)
        if info.lengths_tensor is not None:
            t = info.lengths_tensor
            ext = self.read(t, (b,), (bt,), f"{t}[{bt}]", e.span)
        else:
            inner = Scope()
            inner.names["_"] = Alias(b)
            ext = self.int_expr(info.lengths_expr, inner)
        # decision: a negative ragged length is reported at the axis use (`tok[b]` in the loop), with the outer coordinates and the length found
        self.assert_(ext, ">=", sym.const(0), f"length of ragged axis `{expr_str(e.value)}` at "
                     f"`{bt}` must not be negative", e.span)
        return ext

    def dynamic_extent(self, ext: sym.Expr, node: A.Expr) -> sym.Expr:
        # decision: a loop extent computed from run-time values (element reads, slots) that may be negative is a run-time error; one over syms only still means an empty loop
        if self.is_dynamic(ext):
            self.assert_(ext, ">=", sym.const(0),
                         f"loop extent `{expr_str(node)}` must not be negative", node.span)
        return ext

    def is_dynamic(self, e: sym.Expr) -> bool:
        return any(v in self.dyn or N.slot_index(v) is not None for v in sym.free_vars(e))
