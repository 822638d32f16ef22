"""Kernel statements: `let`, rebinding, `store`, and the straight-line rule (no loops, no task
calls, no workload statements in a kernel); every `Out` tile stored exactly once.
"""

from __future__ import annotations

from ... import sym
from ...diagnostics import Note, did_you_mean
from ...dtypes import INT_DTYPES
from ...primitives import ERROR, PRIMITIVES, Type, convertible, fits, with_dtype
from .. import ast as A
from ..signatures import NotSymbolic, to_sym
from .state import KernelTypes

# Workload statements, by the keyword that spells them, for the straight-line rule.
_WORKLOAD_STMTS = {
    A.ForLoop: "for",
    A.When: "when",
    A.Combine: "combine",
    A.Sequential: "sequential",
    A.Pipe: "pipe",
    A.Process: "process",
    A.Send: "send",
    A.Consume: "consume",
    A.Record: "record",
    A.Synchronize: "synchronize",
    A.SlotSet: "slot_set",
    A.SlotLoad: "slot_load",
}


class StatementChecks:
    """Part of `KernelChecker`: the statements of a tile body."""

    def check_body(self, body: tuple[A.Stmt, ...]) -> KernelTypes:
        for s in body:
            if isinstance(s, A.Let):
                self.all_lets.setdefault(s.name.id, s)
            elif isinstance(s, A.LetMany):
                for n in s.names:
                    if n.id != "_":
                        self.all_lets.setdefault(n.id, A.Let(n, s.value, span=s.span))
        for s in body:
            self.stmt(s)
        for name, (ps, p) in self.params.items():
            if (
                ps.kind == "tile"
                and ps.tile.mode == "Out"
                and name not in self.stores
                and name not in self.maybe_stored
                and name not in self.duplicated
            ):
                self.error(
                    p.name.span,
                    "never-stored",
                    f"output `{name}` is never stored",
                    f"add `store({name}, value)`: every `Out` tile is stored exactly once",
                )
        return KernelTypes(self.k.name.id, tuple(self.let_list), tuple(self.store_list), self.exprs)

    def stmt(self, s: A.Stmt) -> None:
        if isinstance(s, A.Let):
            self.let(s)
        elif isinstance(s, A.LetMany):
            self.let_many(s)
        elif isinstance(s, A.Assign):
            self.assign(s)
        elif isinstance(s, A.Store):
            self.store(s)
        elif isinstance(s, A.CallStmt):
            self.call_stmt(s)
        elif isinstance(s, A.ExprStmt):
            self.expr_stmt(s)
        else:
            kw = s.kind if isinstance(s, A.Collective) else _WORKLOAD_STMTS.get(
                type(s), type(s).__name__.lower())
            help = (
                "use `where(cond, a, b)` for choices; loops belong in workloads"
                if kw in ("for", "when")
                else f"`{kw}` belongs in a workload"
            )
            self.error(
                s.span,
                "not-straight-line",
                f"kernels are straight-line code: no `{kw}` in a kernel",
                help,
            )
            # a store inside the misplaced block is not also "never stored"
            for node in s.walk():
                if isinstance(node, A.Store) and isinstance(node.target, A.Name):
                    self.maybe_stored.add(node.target.id)

    def let(self, s: A.Let) -> None:
        self.current_let = s
        t = self.expr(s.value)
        self.current_let = None
        self.bind(s, t)

    def let_many(self, s: A.LetMany) -> None:
        """`let v, i = topk(x, k)` / `sort(x)`: the values and their i32 column numbers."""
        lets = [self.all_lets.get(n.id) for n in s.names]
        self.current_many = tuple(x for x in lets if x is not None)
        e = s.value
        prim = PRIMITIVES.get(e.func.id) if isinstance(e, A.Call) and e.prefix != "P" else None
        if prim is not None and prim.pair is not None:
            self.pair_call = e
        t = self.expr(e)
        self.pair_call, self.current_many = None, ()
        n = len(s.names)
        if prim is None or prim.pair is None:
            if not t.is_error:
                what = f"`{e.func.id}(...)`" if prim is not None else "this value"
                self.error(
                    s.span,
                    "let-many",
                    f"{what} is one value, but `let` names {n}",
                    "`let a, b = ...` binds the two results of `topk` and `sort`; "
                    f"write `let {s.names[0].id} = ...`",
                )
            results = [ERROR] * n
        elif n != 2:
            self.error(
                s.span,
                "let-many",
                f"`{prim.name}` returns two tiles (the values and their indices), "
                f"but `let` names {n}",
                f"write `let values, indices = {prim.name}(...)`; `_` names a result you do not "
                "need",
            )
            results = [ERROR] * n
        else:
            results = [t, t if t.is_error else with_dtype(t, "i32")]
        for name, r in zip(s.names, results):
            if name.id != "_":
                self.bind(A.Let(name, e, span=s.span), r)

    def bind(self, s: A.Let, t: Type) -> None:
        """Bind the name of a `let` (or one of `let a, b = ...`) to a value of type t."""
        name = s.name.id
        if name in self.params:
            self.error(
                s.name.span,
                "shadow-param",
                f"`let {name}` would shadow the parameter `{name}`",
                "parameters keep their value for the whole kernel; choose another name",
                notes=(Note(self.params[name][1].name.span, "parameter declared here"),),
            )
        elif name in self.lets:
            self.error(
                s.name.span,
                "let-twice",
                f"`{name}` is already defined",
                f"to give it a new value write `{name} = ...` (without `let`)",
                notes=(Note(self.lets[name][1].name.span, "first defined here"),),
            )
        else:
            self.let_list.append((name, t))
        # after an error too: later uses most likely mean this value
        self.lets[name] = (t, s)

    def assign(self, s: A.Assign) -> None:
        name = s.name.id
        t = self.expr(s.value)
        if name in self.lets:
            # decision: a `let` keeps the type of its first value; `name = e` converts e to it by the rules of `store` (shape broadcast, conversions within a kind)
            target = self.lets[name][0]
            if not t.is_error and not target.is_error:
                self._check_rebind(name, target, t, s.value.span)
            return
        if name in self.params:
            ps = self.params[name][0]
            help = (
                f"write `store({name}, value)` to set an output"
                if ps.kind == "tile" and ps.tile.mode != "In"
                else f"bind a new name: `let {name}_new = ...`"
            )
            self.error(
                s.name.span,
                "assign-param",
                f"cannot assign to the parameter `{name}`: parameters are read-only",
                help,
            )
        elif name in self.all_lets:
            self.error(
                s.name.span,
                "let-order",
                f"`{name}` is assigned before its `let`",
                f"move `let {name} = ...` above this line",
                notes=(Note(self.all_lets[name].name.span, "defined here"),),
            )
        elif name in self.consts:
            self.error(
                s.name.span,
                "assign-const",
                f"cannot assign to the const `{name}`",
                f"bind a new name: `let {name.lower()}_value = ...`",
            )
        else:
            self.error(
                s.name.span,
                "unknown-name",
                f"`{name}` is not defined",
                did_you_mean(name, self.visible()) or f"declare it with `let {name} = ...`",
            )
            # recover as if it were a `let`, so later uses are not reported again
            self.lets[name] = (t, A.Let(s.name, s.value, span=s.span))

    def _check_rebind(self, name: str, target: Type, value: Type, span: A.Span) -> None:
        keep = "a `let` keeps the shape and dtype of its first value; bind a new name with `let`"
        if target.is_scalar and value.is_tile:
            self.error(
                span,
                "rebind-type",
                f"`{name}` is {target}, but the new value is a {value.shape_str()} tile",
                keep,
            )
            return
        if target.is_tile and fits(value, target.rows, target.cols, self.ranges) is not True:
            self.error(
                span,
                "rebind-type",
                f"`{name}` is {target.shape_str()}, but the new value is {value.shape_str()}",
                keep,
            )
            return
        if not convertible(value, target.dtype):
            self.error(
                span,
                "rebind-type",
                f"`{name}` is {target.dtype}, but the new value is {_values(value)}",
                f"write `cast(value, {target.dtype})`, or bind a new name with `let`",
            )

    def store(self, s: A.Store) -> None:
        value = self.expr(s.value)
        tgt = s.target
        if not (
            isinstance(tgt, A.Name)
            and tgt.id in self.params
            and self.params[tgt.id][0].kind == "tile"
            and self.params[tgt.id][0].tile.mode != "In"
        ):
            # a store with a wrong target was meant for some output: none is reported as never stored
            self.maybe_stored.update(n for n, (ps, _) in self.params.items() if ps.kind == "tile")
        if isinstance(tgt, A.Index) and isinstance(tgt.value, A.Name):
            # decision: a slice is not a store target (an output is stored whole, exactly once):
            # build the whole value, halves joined by `concat`
            self.maybe_stored.add(tgt.value.id)
            self.error(
                tgt.span,
                "store-slice",
                f"cannot store to a slice of `{tgt.value.id}`: `store` writes the whole tile",
                f"join the parts with `concat` and store once: "
                f"`store({tgt.value.id}, concat(left, right, axis = 1))`",
            )
            return
        if not isinstance(tgt, A.Name):
            self.error(
                tgt.span,
                "store-target",
                "the target of `store` must be an `Out` or `InOut` tile parameter",
                "write `store(out_param, value)`",
            )
            return
        name = tgt.id
        if name in self.duplicated:
            return
        if name not in self.params:
            outputs = [
                n
                for n, (ps, _) in self.params.items()
                if ps.kind == "tile" and ps.tile.mode != "In"
            ]
            if name in self.lets:
                self.error(
                    tgt.span,
                    "store-target",
                    f"cannot store to `{name}`: it is a `let`, not an output parameter",
                    f"to change a `let` write `{name} = ...`",
                )
            elif name in self.consts:
                self.error(
                    tgt.span,
                    "store-target",
                    f"cannot store to `{name}`: it is a const",
                    "`store` writes `Out` and `InOut` tile parameters",
                )
            else:
                self.unknown(
                    tgt,
                    f"unknown name `{name}`",
                    did_you_mean(name, outputs)
                    or "`store` writes `Out` and `InOut` tile parameters",
                )
            return
        ps, _ = self.params[name]
        if ps.kind != "tile":
            what = "a scalar" if ps.kind == "scalar" else "a Constexpr"
            self.error(
                tgt.span,
                "store-target",
                f"cannot store to `{name}`: it is {what} parameter",
                "`store` writes `Out` and `InOut` tile parameters",
            )
            return
        if ps.tile.mode == "In":
            self.error(
                tgt.span,
                "store-to-in",
                f"cannot store to `{name}`: it is an `In` parameter",
                "declare it `InOut[...]` to update it in place, or store into an `Out` parameter",
            )
            return
        first = self.stores.get(name)
        if first is not None:
            rule = (
                "an `Out` parameter is stored exactly once"
                if ps.tile.mode == "Out"
                else "an `InOut` parameter is stored at most once"
            )
            self.error(
                s.span,
                "stored-twice",
                f"`{name}` is stored twice; {rule}",
                "compute the final value with `let` and store it once",
                notes=(Note(first.span, "first stored here"),),
            )
        else:
            self.stores[name] = s
        self.store_list.append((name, value))
        if value.is_error or name in self.bad_shape:
            return
        ok = fits(value, ps.tile.rows, ps.tile.cols, self.ranges)
        target = f"[{sym.to_str(ps.tile.rows)}, {sym.to_str(ps.tile.cols)}]"
        if ok is not True:
            self.error(
                s.value.span,
                "store-shape",
                f"cannot store a {value.shape_str()} value into `{name}`, a {target} tile"
                + (" (the extents may differ)" if ok is None else ""),
                "the value must have the tile's shape or broadcast to it (extents equal or 1)",
            )
            return
        if not convertible(value, ps.tile.dtype):
            self.error(
                s.value.span,
                "store-dtype",
                f"cannot store {_values(value)} into `{name}` ({ps.tile.dtype}) without a cast",
                f"write `store({name}, cast(value, {ps.tile.dtype}))`",
            )

    def call_stmt(self, s: A.CallStmt) -> None:
        name = s.callee.id
        if name == "add_cycles" and s.coords is None:
            self.add_cycles(s)
            return
        if s.coords is not None:
            self.error(
                s.span,
                "task-in-kernel",
                "a kernel cannot launch tasks",
                f"task calls such as `{name}[...](...)` belong in workloads",
            )
            return
        # A call standing as a statement is wrong as a whole (perhaps a mistyped `store`): one
        # diagnostic for it; its arguments are not checked, and its first one may be an output.
        for a in s.args[:1]:
            if isinstance(a, A.Name):
                self.maybe_stored.add(a.id)
        if name in PRIMITIVES:
            self.error(
                s.span,
                "unused-value",
                f"the value of `{name}(...)` is unused",
                "bind it with `let` or `store` it",
            )
            return
        self.error(
            s.callee.span,
            "unknown-function",
            f"unknown function `{name}`",
            did_you_mean(name, list(PRIMITIVES) + ["store"])
            or "kernel statements are `let name = value`, `name = value` and `store(out, value)`",
        )

    def add_cycles(self, s: A.CallStmt) -> None:
        """`add_cycles(n)`: n more cycles for each task of the kernel in the cycle model (the
        prototype's `cpu_sim_add_cycles`); n an integer expression of numbers, consts, Constexpr
        and integer `Scalar` parameters, evaluated per task. At most one per kernel."""
        if len(s.args) != 1 or s.kwargs:
            self.error(s.span, "arity", "`add_cycles` takes one integer expression",
                       "write `add_cycles(100)` or `add_cycles(n)` for a `Scalar[i32]` `n`")
            return
        if self.cycles_stmt is not None:
            self.error(s.span, "add-cycles-twice", "a kernel adds its cycles once",
                       "write one `add_cycles(a + b)`",
                       notes=(Note(self.cycles_stmt.span, "first added here"),))
            return
        self.cycles_stmt = s
        ints = {n for n, (ps, _) in self.params.items()
                if ps.kind == "scalar" and ps.dtype in INT_DTYPES}

        def resolve(n: A.Name) -> sym.Expr:
            if n.id in self.constexprs or n.id in ints:
                return sym.var(n.id)
            if n.id in self.consts and isinstance(self.consts[n.id], int):
                return sym.const(self.consts[n.id])
            what = ("a float or bool scalar" if n.id in self.params
                    and self.params[n.id][0].kind == "scalar" else "a tile" if n.id in self.params
                    else "a tile value" if n.id in self.all_lets else "unknown")
            self.error(n.span, "add-cycles-operand",
                       f"`add_cycles` counts cycles from numbers, consts and integer scalar "
                       f"parameters; `{n.id}` is {what}",
                       "pass the count as a `Scalar[i32]` parameter (one value per task)")
            raise NotSymbolic()

        try:
            v = to_sym(s.args[0], resolve, self.diags, "a cycle count")
        except NotSymbolic:
            return
        c = sym.const_value(v)
        if c is not None and c < 0:
            self.error(s.args[0].span, "add-cycles-negative",
                       f"`add_cycles` adds a count of cycles, not {c}")

    def expr_stmt(self, s: A.ExprStmt) -> None:
        e = s.expr
        if isinstance(e, A.Call):
            for a in e.args[:1]:
                if isinstance(a, A.Name):
                    self.maybe_stored.add(a.id)
            if e.prefix == "P" or e.func.id not in PRIMITIVES:
                shown = f"P.{e.func.id}" if e.prefix == "P" else e.func.id
                self.error(
                    e.func.span,
                    "unknown-function",
                    f"unknown function `{shown}`",
                    None
                    if e.prefix == "P"
                    else did_you_mean(e.func.id, list(PRIMITIVES) + ["store"])
                    or 'the primitives are listed in docs/language.md section 4, "Primitives"',
                )
                return
        what = f"`{e.func.id}(...)`" if isinstance(e, A.Call) else "this expression"
        self.error(
            s.span,
            "unused-value",
            f"the value of {what} is unused",
            "bind it with `let` or `store` it",
        )


def _values(t: Type) -> str:
    return str(t) if t.literal else f"{t.dtype} values"
