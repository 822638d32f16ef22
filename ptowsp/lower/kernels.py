"""Kernel bodies become op DAGs over static tiles (`N.Kernel`), one per Constexpr
specialisation a task uses.

A kernel with `Constexpr` parameters is lowered once per distinct assignment used by a task,
named `rows__R_4` (a negative value: `R_m4`); one without keeps its name. `Specialisations`
collects the assignments while the schedules lower, and `lower_kernels` lowers them after.

What lowering decides in a kernel body (each also written next to its code as `# decision:`):
- A primitive call is the IR op the primitive table names for it (`rowmul/rowadd/...` the plain
  elementwise op with broadcasting), its value arguments the operands; `load`, `full`,
  `constant`, `broadcast`, `concat` and `gather` are written out here, and a slice `x[r0:r1, c0:c1]` is
  a `slice_rows` and/or `slice_cols` view.
- Implicit conversions are explicit `convert` ops; a store's value is converted and broadcast
  to the parameter's tile by explicit ops, so every stored op has the parameter's shape and
  dtype.
- Literals take the dtype of what they meet (one `literal` op of that dtype); a compound
  literal expression (`1 / 2`) is computed in its default dtype (i32 / f32) and converted.
- An extern kernel lowers with the bodies it has; the target that needs a missing one says so.
The checker already typed every body: a typing error here is an `InternalError`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Optional, Union

from .. import sym
from ..diagnostics import Diagnostics, InternalError
from ..dtypes import as_float, kind_of, literal_value
from ..frontend import ast as A
from ..frontend.env import ModuleEnv
from ..frontend.printer import expr_str
from ..frontend.signatures import KernelSig, NotSymbolic, ParamSig, to_sym
from ..ir import nodes as N
from ..primitives import (
    ARITH_OPERATORS,
    COMPARE_OPERATORS,
    GATHER_OPS,
    LOGIC_OPERATORS,
    PRIMITIVES,
    UNARY_OPERATORS,
    Arg,
    Type,
    Typing,
    combine,
    compare,
    elementwise_binary,
    literal_type,
    logic,
    unary,
    with_dtype,
)
from ..spans import Span


class Specialisations:
    """The kernel specialisations tasks use, in order of first use: (kernel, Constexpr
    assignment) -> the name of its IR kernel."""

    def __init__(self, kernels: Collection[str]):
        self.kernels = kernels  # the module's kernel names, which a specialisation must avoid
        self.names: dict[tuple[str, tuple[tuple[str, int], ...]], str] = {}

    def specialise(self, kernel: str, cvals: dict[str, int]) -> str:
        """The name of `kernel` specialised to `cvals`, recorded on first use."""
        key = (kernel, tuple(sorted(cvals.items())))
        name = self.names.get(key)
        if name is None:
            name = specialised_name(kernel, cvals)
            if cvals:
                while name in self.kernels:  # a user kernel spelled like a specialisation
                    name += "_"
            self.names[key] = name
        return name


def specialised_name(kernel: str, cvals: dict[str, int]) -> str:
    """The IR name of `kernel` specialised to the Constexpr values `cvals` (`k__R_64`), before
    any clash with a user kernel of that name is resolved."""
    if not cvals:
        return kernel
    parts = [f"{k}_{v}" if v >= 0 else f"{k}_m{-v}" for k, v in sorted(cvals.items())]
    return "__".join([kernel] + parts)


def lower_kernels(env: ModuleEnv, specs: Specialisations) -> list[N.Kernel]:
    """Every kernel in declaration order: one without Constexpr parameters once, one with them
    once per assignment in `specs` (the schedules are lowered first)."""
    out = []
    for kname, decl in env.kernels.items():
        sig = env.kernel_sigs[kname]
        if not sig.constexprs:
            specs.specialise(kname, {})
        # decision: a Constexpr kernel is lowered once per assignment used by a task, sorted by values; an unused one is not lowered
        for (k, assignment), name in sorted(specs.names.items(), key=lambda kv: kv[0]):
            if k == kname:
                out.append(_KernelLowerer(env, decl, sig, dict(assignment), name).run())
    return out


@dataclass(frozen=True)
class _V:
    """A kernel value while lowering: its checker type (concrete dims), the op holding it, or
    for a bare literal (`2`, `1e-6`, a const, a Constexpr) the number, emitted where it meets a
    dtype."""

    type: Type
    idx: Optional[int] = None
    lit: Union[int, float, bool, None] = None

    @property
    def shape(self) -> Optional[tuple[int, int]]:
        return _shape(self.type)


def _shape(t: Type) -> Optional[tuple[int, int]]:
    if not t.is_tile:
        return None
    r, c = sym.const_value(t.rows), sym.const_value(t.cols)
    if r is None or c is None:
        raise InternalError("lower", f"a tile shape is not static after specialisation: {t}")
    return (r, c)


def _internal_report(span, code, message, help=None):
    raise InternalError("lower", f"the checker let through a kernel error: {message}")


class _KernelLowerer:
    """One specialisation of one kernel: its body as a list of ops in dependency order."""

    def __init__(self, env: ModuleEnv, decl: A.KernelDecl, sig: KernelSig,
                 cvals: dict[str, int], name: str):
        self.env, self.decl, self.sig, self.cvals, self.name = env, decl, sig, cvals, name
        self.ops: list[N.Op] = []
        self.memo: dict[tuple, int] = {}
        self.lets: dict[str, _V] = {}
        self.params: dict[str, ParamSig] = {p.name: p for p in sig.params}
        self.param_vals: dict[str, _V] = {}

    def run(self) -> N.Kernel:
        kparams = []
        for p in self.sig.params:
            if p.kind == "tile":
                r, c = self.tile_dims(p)
                pad = p.tile.pad
                if kind_of(p.dtype) == "float" and not isinstance(pad, bool):
                    pad = as_float(pad)
                kparams.append(N.KParam(p.name, "tile", p.dtype, p.tile.mode, r, c, pad))
            elif p.kind == "scalar":
                kparams.append(N.KParam(p.name, "scalar", p.dtype))
        constexprs = tuple(sorted(self.cvals.items()))
        if self.decl.body is None:
            # decision: an extern kernel lowers with whichever bodies it has (one per language);
            # a target that needs another language reports it where the target is chosen
            bodies = {e.lang: e.code for e in self.decl.externs}
            return N.Kernel(self.name, self.sig.name, tuple(kparams), (), (), bodies.get("c"),
                            constexprs, self.decl.span, extern_ascend=bodies.get("ascend"),
                            name_span=self.decl.name.span, extern_cpp=bodies.get("cpp"),
                            cpp_includes=tuple(i.header for e in self.decl.externs
                                               if e.lang == "cpp" for i in e.includes))
        stores: list[tuple[str, int]] = []
        cycles: Optional[sym.Expr] = None
        for s in self.decl.body:
            if isinstance(s, A.Let):
                self.lets[s.name.id] = self.expr(s.value)
            elif isinstance(s, A.LetMany):
                # the values and their indices (`topk`, `sort`); `_` binds nothing
                for n, v in zip(s.names, self.call(s.value, pair=True)):
                    if n.id != "_":
                        self.lets[n.id] = v
            elif isinstance(s, A.Assign):
                self.lets[s.name.id] = self.rebind(self.lets[s.name.id], self.expr(s.value))
            elif isinstance(s, A.Store):
                p = self.params[s.target.id]
                shape = self.tile_dims(p)
                idx = self.fit(self.expr(s.value), p.dtype, shape)
                stores.append((p.name, idx))
            elif isinstance(s, A.CallStmt) and s.callee.id == "add_cycles":
                cycles = self.cycle_count(s.args[0])
            else:
                raise InternalError("lower", f"unexpected kernel statement {type(s).__name__}")
        return N.Kernel(self.name, self.sig.name, tuple(kparams), tuple(self.ops), tuple(stores),
                        None, constexprs, self.decl.span, name_span=self.decl.name.span,
                        cycles=cycles)

    def cycle_count(self, node: A.Expr) -> sym.Expr:
        """`add_cycles(n)`'s n over the kernel's scalar parameters (Constexprs substituted)."""
        def resolve(n: A.Name) -> sym.Expr:
            if n.id in self.cvals:
                return sym.const(self.cvals[n.id])
            if n.id in self.env.consts:
                return sym.const(self.env.consts[n.id])
            if n.id in self.params:
                return sym.var(n.id)
            raise NotSymbolic()

        try:
            return to_sym(node, resolve, Diagnostics())
        except NotSymbolic:
            raise InternalError("lower", f"`{expr_str(node)}` is not a cycle count") from None

    def tile_dims(self, p: ParamSig) -> tuple[int, int]:
        mapping = {k: sym.const(v) for k, v in self.cvals.items()}
        r = sym.const_value(sym.substitute(p.tile.rows, mapping))
        c = sym.const_value(sym.substitute(p.tile.cols, mapping))
        if r is None or c is None:
            raise InternalError("lower",
                                f"tile `{p.name}` of `{self.sig.name}` has no static shape")
        return (r, c)

    # -- the op list (a DAG in dependency order; identical ops are shared)
    def emit(self, op: str, args: tuple[int, ...], shape: Optional[tuple[int, int]], dtype: str,
             attr=None) -> int:
        key = (op, args, shape, dtype, type(attr).__name__, repr(attr))
        idx = self.memo.get(key)
        if idx is None:
            idx = len(self.ops)
            self.ops.append(N.Op(op, args, shape, dtype, attr))
            self.memo[key] = idx
        return idx

    def coerce(self, v: _V, dtype: str) -> int:
        """The op holding `v` as `dtype`: a literal of that dtype, `v` itself, or a convert."""
        if v.lit is not None:
            # decision: a bare literal takes the dtype of what it meets as one `literal` op of that dtype
            lit = v.lit
            if isinstance(lit, int) and not isinstance(lit, bool) and abs(lit) > 2**64:
                lit = literal_value(lit, dtype)  # its value in the dtype: wrapped, or infinite
            return self.emit("literal", (), None, dtype, lit)
        if v.idx is None:
            raise InternalError("lower", "a kernel value without an op")
        if v.type.dtype == dtype:
            return v.idx
        # decision: where the checker promoted an operand, an explicit `convert` op says so
        return self.emit("convert", (v.idx,), v.shape, dtype)

    def materialise(self, v: _V) -> int:
        # decision: a compound literal expression (`1 / 2`, `exp(2)`) is computed in its default dtype (i32, f32, bool) and converted where it meets a typed value: `1 / 2` is 0
        return self.coerce(v, v.type.dtype)

    def fit(self, v: _V, dtype: str, shape: Optional[tuple[int, int]]) -> int:
        """`v` converted to `dtype` and broadcast to `shape` (stores and rebinding)."""
        idx = self.coerce(v, dtype)
        if shape is not None and v.shape != shape:
            # decision: a store (or rebinding) of a smaller value broadcasts with an explicit `broadcast` op, so every stored op has the parameter's exact shape and dtype
            idx = self.emit("broadcast", (idx,), shape, dtype)
        return idx

    def rebind(self, target: _V, value: _V) -> _V:
        if target.type.literal and value.lit is not None:
            return _V(target.type, None, value.lit)
        return _V(target.type, self.fit(value, target.type.dtype, target.shape))

    # -- expressions
    def typing(self, name: str, span: Span, args: Optional[dict] = None) -> Typing:
        return Typing(name, span, args or {}, {}, _internal_report)

    def expr(self, e: A.Expr) -> _V:
        if isinstance(e, A.IntLit):
            return _V(literal_type("int"), lit=e.value)
        if isinstance(e, A.FloatLit):
            return _V(literal_type("float"), lit=e.value)
        if isinstance(e, A.BoolLit):
            return _V(literal_type("bool"), lit=e.value)
        if isinstance(e, A.Name):
            return self.name_value(e)
        if isinstance(e, A.Unary):
            x = self.expr(e.operand)
            t = unary(self.typing(e.op, e.span), e.op, Arg(x.type, e.operand.span))
            if x.lit is not None:
                return _V(t, lit=(not x.lit) if e.op == "not" else -x.lit)
            op = UNARY_OPERATORS[e.op]
            return _V(t, self.emit(op, (self.coerce(x, t.dtype),), _shape(t), t.dtype))
        if isinstance(e, A.Binary):
            return self.binary(e)
        if isinstance(e, A.Call):
            return self.call(e)
        if isinstance(e, A.Index):
            return self.slice(e)
        raise InternalError("lower", f"unexpected kernel expression {type(e).__name__}")

    def slice(self, e: A.Index) -> _V:
        # decision: `x[r0:r1, c0:c1]` is a `slice_rows` and/or a `slice_cols` view (attr: the
        # first index), none for a whole extent: an index map the back ends read in place
        v = self.expr(e.value)
        if v.idx is None or v.shape is None:
            raise InternalError("lower", "a slice of a value that is not a tile")
        idx, (rows, cols) = v.idx, v.shape
        items = list(e.items) + [A.Slice(None, None)] * (2 - len(e.items))
        for op, it, extent in zip(("slice_rows", "slice_cols"), items, (rows, cols)):
            if not isinstance(it, A.Slice):
                raise InternalError("lower", "the checker let through an integer index")
            start = 0 if it.start is None else self.dim(it.start)
            stop = extent if it.stop is None else self.dim(it.stop)
            if (start, stop) == (0, extent):
                continue
            if op == "slice_rows":
                rows = stop - start
            else:
                cols = stop - start
            idx = self.emit(op, (idx,), (rows, cols), v.type.dtype, start)
        t = Type("tile", v.type.dtype, sym.const(rows), sym.const(cols))
        return _V(t, idx)

    def name_value(self, n: A.Name) -> _V:
        if n.id in self.lets:
            return self.lets[n.id]
        p = self.params.get(n.id)
        if p is not None:
            if p.name not in self.param_vals:
                if p.kind == "tile":
                    r, c = self.tile_dims(p)
                    t = Type("tile", p.dtype, sym.const(r), sym.const(c))
                    v = _V(t, self.emit("param", (), (r, c), p.dtype, p.name))
                elif p.kind == "scalar":
                    v = _V(Type("scalar", p.dtype), self.emit("scalar_param", (), None, p.dtype,
                                                              p.name))
                else:
                    v = _V(literal_type("int"), lit=self.cvals[p.name])
                self.param_vals[p.name] = v
            return self.param_vals[p.name]
        if n.id in self.env.consts:
            return _V(literal_type("int"), lit=self.env.consts[n.id])
        raise InternalError("lower", f"unknown kernel name `{n.id}`")

    def binary(self, e: A.Binary) -> _V:
        a, b = self.expr(e.left), self.expr(e.right)
        aa, ba = Arg(a.type, e.left.span), Arg(b.type, e.right.span)
        t = self.typing(e.op, e.span)
        if e.op in ARITH_OPERATORS:
            rt = elementwise_binary(t, e.op, aa, ba, e.op_span)
            op, dt = ARITH_OPERATORS[e.op], rt.dtype
        elif e.op in COMPARE_OPERATORS:
            rt = compare(t, e.op, aa, ba, e.op_span)
            op, dt = COMPARE_OPERATORS[e.op], combine(a.type, b.type).dtype
        elif e.op in LOGIC_OPERATORS:
            rt = logic(t, e.op, aa, ba, e.op_span)
            op, dt = LOGIC_OPERATORS[e.op], "bool"
        else:
            raise InternalError("lower", f"unexpected kernel operator `{e.op}`")
        # decision: comparison operands are converted to their combined dtype (as for arithmetic), then compared
        args = (self.coerce(a, dt), self.coerce(b, dt))
        return _V(rt, self.emit(op, args, _shape(rt), rt.dtype))

    def dim(self, node: A.Expr) -> int:
        def resolve(n: A.Name) -> sym.Expr:
            if n.id in self.cvals:
                return sym.const(self.cvals[n.id])
            if n.id in self.env.consts:
                return sym.const(self.env.consts[n.id])
            raise NotSymbolic()

        try:
            v = sym.const_value(to_sym(node, resolve, Diagnostics()))
        except NotSymbolic:
            v = None
        if v is None:
            raise InternalError("lower", f"`{expr_str(node)}` is not a compile-time dimension")
        return v

    def call(self, e: A.Call, pair: bool = False):
        # `tl.NAME` / `pto.NAME` are stored by the parser as NAME with a prefix: the same primitive
        prim = PRIMITIVES.get(e.func.id)
        if prim is None:
            raise InternalError("lower", f"unknown primitive `{e.func.id}`")
        nodes_: dict[str, A.Expr] = {p.name: a for p, a in zip(prim.params, e.args)}
        for kw in e.kwargs:
            nodes_[kw.name] = kw.value
        vals: dict[str, _V] = {}
        dims: dict[str, int] = {}
        flags: dict[str, bool] = {}
        args: dict[str, Arg] = {}
        for p in prim.params:
            node = nodes_.get(p.name)
            if node is None:
                continue
            if p.kind == "dim":
                dims[p.name] = self.dim(node)
                args[p.name] = Arg(literal_type("int"), node.span, dim=sym.const(dims[p.name]))
            elif p.kind == "dtype":
                args[p.name] = Arg(Type("error"), node.span, dtype=node.id)
            elif p.kind == "axis":
                dims[p.name] = self.dim(node)
                args[p.name] = Arg(literal_type("int"), node.span, dim=sym.const(dims[p.name]))
            elif p.kind == "flag":
                flags[p.name] = node.value
                args[p.name] = Arg(Type("error"), node.span, flag=node.value)
            elif p.kind == "tile":
                flags[p.name] = node.id  # the parameter's name: the op's attr
                args[p.name] = Arg(Type("error"), node.span)
            else:
                vals[p.name] = self.expr(node)
                args[p.name] = Arg(vals[p.name].type, node.span)
        rt = prim.rule(self.typing(prim.name, e.span, args))
        if rt.is_error:
            raise InternalError("lower", f"`{prim.name}` did not type")
        shape, dt = _shape(rt), rt.dtype
        if prim.name == "load":
            # decision: `load(x)` is the value of x itself (parameters are immutable values)
            return vals["x"]
        if prim.name in ("full", "constant", "broadcast"):
            # decision: `full(M, N, v, DT)`, `constant(v, DT)` and `broadcast(x, M, N)` are their
            # value converted and broadcast as a store would (a broadcast op only where the
            # shape differs)
            return _V(rt, self.fit(vals["x" if "x" in vals else "value"], dt, shape))
        if prim.name == "concat":
            # decision: `concat(a, b, axis)` is `concat_rows` (axis 0) or `concat_cols` (axis 1)
            # of a and b converted to the promoted dtype
            op = "concat_cols" if dims.get("axis", 0) == 1 else "concat_rows"
            operands = (self.coerce(vals["a"], dt), self.coerce(vals["b"], dt))
            return _V(rt, self.emit(op, operands, shape, dt))
        if prim.name == "gather":
            # decision: `gather(x, idx, axis)` is `gather_rows` (axis 0) or `gather_cols`
            # (axis 1) of x and idx, each in its own dtype (the value is x's)
            op = GATHER_OPS[dims.get("axis", 0)]
            operands = (self.materialise(vals["x"]), self.materialise(vals["idx"]))
            return _V(rt, self.emit(op, operands, shape, dt))
        if prim.op is None:
            raise InternalError("lower", f"primitive `{prim.name}` has no lowering")
        # every other primitive is its op of the value arguments, each converted as its
        # parameter says (to the call's dtype unless the table says otherwise)
        operands = tuple(self.operand(vals[p.name], p.as_dtype, dt)
                         for p in prim.params if p.name in vals)
        attr = prim.attr(flags) if prim.attr is not None else None
        v = _V(rt, self.emit(prim.op, operands, shape, dt, attr))
        if not pair:
            return v
        if prim.pair is None:
            raise InternalError("lower", f"`{prim.name}` has one result")
        # decision: the second result (the indices) is an op of its own over the same operand:
        # the IR stays one value per op, and a back end may compute both in one pass
        it = with_dtype(rt, "i32")
        return v, _V(it, self.emit(prim.pair, operands, shape, "i32", attr))

    def operand(self, v: _V, as_dtype: str, dtype: str) -> int:
        """`v` as an operand of an op of `dtype`, converted to `as_dtype` (a parameter's)."""
        if as_dtype == "own":
            return self.materialise(v)
        return self.coerce(v, dtype if as_dtype == "result" else as_dtype)
