"""The `ref` back end: a NumPy interpreter of the IR, the executable definition of its semantics.

`run(module, schedule, syms, arrays)` binds the symbols, checks and copies the inputs (a caller's
array is never written), zero-fills outputs and scratch, enumerates the schedule's tasks in
order, and returns the outputs and inouts. Enumeration order is always a valid execution order
(inferred dependencies only ever point backwards in it; `seq`, `sequential` and `combine` only
add order), so the interpreter runs each task to completion before the next.

Before a task runs, every `ViewCheck` of its arguments is evaluated; the first that fails raises
`RunError` (message, span, the task's loop coordinates, the values involved) and the task is not
run. Run-time values follow enumeration too: a `Read` checks its index, then takes the element
as the tasks run so far left it (a router kernel's output drives later loops); an `Assert`
that fails raises `RunError` the same way (nothing after it is enumerated); a `When` runs its
first branch whose `Cond` holds (`and` / `or` short-circuit); `SlotSet` sets one of the 64
slots, which start at 0 in every run and are the variables `slot#k` of expressions.

Kernels are evaluated op by op following `ir/nodes.py`:

- Values are NumPy arrays (0-d for scalars) in a compute dtype: f16/bf16/f32 values are held in
  float32, f64 in float64, integers and bool natively. f16/bf16 values are rounded (to nearest,
  ties to even) only by `convert`/`cast` to them, by `literal`/`scalar_param` ops of that dtype
  (a value *of* that type) and by stores. bf16 is rounded by bit manipulation on float32
  (add 0x7FFF plus the lowest kept bit, truncate; NaN stays a quiet NaN); f16 through
  `np.float16`. bf16 tensors are exchanged as uint16 arrays of raw bits (or an array whose dtype
  is named `bfloat16`, read as its bits).
- Integer arithmetic wraps; integer `div` is floor division and x / 0 is 0. Float division
  follows IEEE. `maximum`/`minimum`/reductions propagate NaN.
- `cast` (and `convert`) from float to integer rounds toward zero and saturates; NaN gives 0.
  Number to bool is `x != 0`; bool to number is 0 or 1.
- `gelu` is the tanh approximation, `sigmoid` is 1 / (1 + exp(-x)), `silu` x * sigmoid(x),
  `rsqrt` 1 / sqrt(x), `softmax` row-wise with the row maximum subtracted first.

CSP (language.md section 7) follows the coroutine enumeration of `ir/nodes.py` exactly: each
process replica is a Python generator that yields when it must wait (a send whose slot is not
free, a consume whose item is not sent, a pipe whose processes have not finished), and the
scheduler runs them round robin. Tasks still run as they are enumerated, so the results are
those of the dataflow semantics; `Access`es need nothing here (every task before has finished),
`Sync` waits for nothing and `query` holds. A pass in which no coroutine can proceed raises a
`RunError` (code `deadlock`) at the first blocked statement, naming every blocked process, with
notes at the others. `execute` reports per channel the items sent, the most items in flight
(sent and not yet freed) at once and the depth, and per event the records and synchronizes.

Extern kernels: the ref back end cannot run C. A Python implementation registered with
`register_extern(name, fn)` (or passed as `run(..., externs={name: fn})`) is called as
`fn(**params)`: `In` tiles are read-only 2-D arrays, `InOut` tiles writable copies of their
entry value, `Out` tiles zero-filled writable arrays (all in the compute dtype: f16/bf16 as
float32), scalars NumPy scalars, Constexpr values ints. The function writes its `Out`/`InOut`
arrays in place, or returns a dict of their new values; the values are then stored by the
rules of `store`. Without one, running the kernel raises `RunError` naming it.
"""

from __future__ import annotations

from typing import Callable, Mapping, Optional

import numpy as np

from ... import sym
from ...ir import nodes as N
from ...spans import NO_SPAN, Span

FLOATS = ("f16", "bf16", "f32", "f64")
_INT_NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
           "u16": np.uint16, "u32": np.uint32, "u64": np.uint64}
# storage / exchange dtype of a tensor
STORAGE = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
           "bool": np.bool_, **_INT_NP}
# dtype kernel values are computed in
COMPUTE = {"f16": np.float32, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
           "bool": np.bool_, **_INT_NP}


class RunError(Exception):
    """A run-time error of the program: `message` is reported at `span` (the argument or
    declaration to blame) with the task's loop coordinates (`coords`: ((name, value), ...)) and
    the values involved (`values`: {expression text: value}). `partial` holds the outputs and
    inouts as they were when the error was raised (the failing task wrote nothing)."""

    def __init__(self, message: str, span: Span = NO_SPAN, coords: tuple = (),
                 values: Optional[dict] = None, partial: Optional[dict] = None,
                 code: Optional[str] = None, notes: tuple = ()):
        super().__init__(message)
        self.message = message
        self.span = span
        self.coords = tuple(coords)
        self.values = dict(values or {})
        self.partial = partial
        self.code = code  # None: `bad-view` or `run` (see Backend.run)
        self.notes = tuple(notes)  # ((span, text), ...): the other places involved

    def __str__(self) -> str:
        if self.span.line:
            return f"{self.span}: {self.message}"
        return self.message


_EXTERNS: dict[str, Callable] = {}


def register_extern(name: str, fn: Callable) -> None:
    """Run extern kernel `name` (its name in the program) with `fn` in the ref back end."""
    _EXTERNS[name] = fn


def unregister_extern(name: str) -> None:
    _EXTERNS.pop(name, None)


# ---------------------------------------------------------------------------------------------
# Dtype conversions


def kind_of(dtype: str) -> str:
    if dtype == "bool":
        return "bool"
    return "float" if dtype in FLOATS else "int"


def bf16_round(x) -> np.ndarray:
    """float32 values rounded to the nearest bf16 (ties to even), as float32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    r = np.where(np.isnan(x), (b | 0x00400000) & 0xFFFF0000, r)  # NaN stays a quiet NaN
    return (r & 0xFFFFFFFF).astype(np.uint32).view(np.float32).reshape(x.shape)


def bf16_bits(x) -> np.ndarray:
    return (bf16_round(x).view(np.uint32) >> 16).astype(np.uint16)


def bf16_from_bits(bits) -> np.ndarray:
    b = np.ascontiguousarray(bits, dtype=np.uint16).astype(np.uint32) << 16
    return b.view(np.float32)


def _f32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """f64 values as f32, truncated toward zero with the last bit set when inexact."""
    with np.errstate(over="ignore", invalid="ignore"):
        near = x.astype(np.float32)
        bits = near.view(np.uint32).copy()
        # where rounding to nearest went away from zero, step back one ulp toward zero
        away = np.isfinite(near) & (np.abs(near.astype(np.float64)) > np.abs(x))
        bits = np.where(away, bits - 1, bits).astype(np.uint32)
        trunc = bits.view(np.float32)
        inexact = np.isfinite(x) & (trunc.astype(np.float64) != x)
        bits = np.where(inexact, bits | 1, bits).astype(np.uint32)
        out = bits.view(np.float32)
        # values past f32's range: rounding to odd gives the largest finite f32 (bf16 then rounds)
        big = np.isfinite(x) & ~np.isfinite(near)
        out = np.where(big, np.copysign(np.float32(np.finfo(np.float32).max), x).astype(np.float32), out)
        return np.where(np.isnan(x), np.float32(np.nan), out).astype(np.float32).reshape(x.shape)


def _float_to_int(x: np.ndarray, dtype: str) -> np.ndarray:
    nt = _INT_NP[dtype]
    info = np.iinfo(nt)
    t = np.trunc(np.asarray(x, dtype=np.float64))
    nan = np.isnan(t)
    hi = t >= float(info.max)
    lo = t <= float(info.min)
    safe = np.where(nan | hi | lo, 0.0, t).astype(nt)
    out = np.where(hi, nt(info.max), np.where(lo, nt(info.min), safe))
    return np.asarray(out, dtype=nt)


def convert(x, src: str, dst: str) -> np.ndarray:
    """A value of dtype `src` (compute representation) as dtype `dst` (`convert` and `cast`)."""
    x = np.asarray(x)
    ks, kd = kind_of(src), kind_of(dst)
    if kd == "bool":
        return np.asarray(x != 0, dtype=np.bool_)
    if ks == "bool":
        x = x.astype(np.int8)
    if kd == "float":
        if dst == "f16":
            return x.astype(np.float16).astype(np.float32)
        if dst == "bf16":
            if x.dtype == np.float32:
                return bf16_round(x)
            # one rounding from f64 (or an integer): round to odd into f32 first, which keeps
            # the bits a nearest-even rounding to bf16 needs (rounding through f32 would round twice)
            return bf16_round(_f32_round_to_odd(np.asarray(x, dtype=np.float64)))
        return x.astype(COMPUTE[dst])
    if ks == "float":
        return _float_to_int(x, dst)
    return x.astype(COMPUTE[dst])  # integer to integer wraps


def scalar_value(v, dtype: str) -> np.ndarray:
    """A Python number as a 0-d value of `dtype` (literals, scalar arguments)."""
    k = kind_of(dtype)
    if k == "bool":
        return np.asarray(bool(v), dtype=np.bool_)
    if k == "float":
        return convert(np.asarray(float(v), dtype=np.float64), "f64", dtype)
    bits = np.iinfo(_INT_NP[dtype]).bits
    n = int(v) % (1 << bits)
    if dtype.startswith("i") and n >= 1 << (bits - 1):
        n -= 1 << bits
    return np.asarray(n, dtype=_INT_NP[dtype])


def to_compute(stored: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return bf16_from_bits(stored)
    return np.array(stored, dtype=COMPUTE[dtype])


def to_storage(value: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return bf16_bits(value)
    with np.errstate(over="ignore"):  # values past f16's range were already rounded to inf
        if dtype == "f16":
            return np.asarray(value, dtype=np.float32).astype(np.float16)
        return np.asarray(value).astype(STORAGE[dtype])


# ---------------------------------------------------------------------------------------------
# Kernels


def _idiv(a, b):
    zero = b == 0
    q = np.floor_divide(a, np.where(zero, b.dtype.type(1), b))
    return np.where(zero, a.dtype.type(0), q)


def _sigmoid(x):
    # e = exp(-|x|) never overflows, so sigmoid stays accurate far into the negatives
    # (1 / (1 + exp(-x)) underflows to 0 below about -88 in f32)
    one = x.dtype.type(1)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, one, e) / (one + e)


def _at_minus_inf_zero(x, y):
    """`y` with the limit -0 where x is -inf (x * sigmoid(x) and gelu tend to -0 there)."""
    return np.where(np.isneginf(x), x.dtype.type(-0.0), y)


def _silu(x):
    with np.errstate(invalid="ignore"):
        return _at_minus_inf_zero(x, x * _sigmoid(x))


def _gelu(x):
    t = x.dtype.type
    c = t(np.sqrt(2.0 / np.pi))
    with np.errstate(over="ignore", invalid="ignore"):
        return _at_minus_inf_zero(x, t(0.5) * x * (t(1) + np.tanh(c * (x + t(0.044715) * x * x * x))))


# decision: maximum/minimum (and rowmax/rowmin) propagate NaN, as NumPy's maximum does
_BINARY: dict[str, Callable] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "pow": np.power, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
    "and": np.logical_and, "or": np.logical_or,
}
_UNARY: dict[str, Callable] = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: x.dtype.type(1) / np.sqrt(x), "tanh": np.tanh, "sigmoid": _sigmoid,
    "sin": np.sin, "cos": np.cos, "relu": lambda x: np.maximum(x, x.dtype.type(0)),
    "gelu": _gelu, "silu": lambda x: _silu(x), "not": np.logical_not,
}


def _reduce(name: str, x: np.ndarray) -> np.ndarray:
    axis = 1 if name.startswith("row") else 0
    what = name[3:]
    if what == "sum":
        return np.sum(x, axis=axis, keepdims=True, dtype=x.dtype)
    if what == "mean":
        s = np.sum(x, axis=axis, keepdims=True, dtype=x.dtype)
        return s / x.dtype.type(x.shape[axis])
    if what == "max":
        return np.max(x, axis=axis, keepdims=True)
    return np.min(x, axis=axis, keepdims=True)


def eval_op(op: N.Op, args: list[np.ndarray], inputs: Mapping[str, np.ndarray]) -> np.ndarray:
    """One op's value from its arguments' values (`inputs`: parameter values by name)."""
    name = op.op
    if name in ("param", "scalar_param"):
        return inputs[op.attr]
    if name == "literal":
        # decision: a literal is its value converted to the op's dtype (an f16 literal is rounded to f16)
        return scalar_value(op.attr, op.dtype)
    if name in ("iota_row", "iota_col"):
        r, c = op.shape
        idx = np.arange(r if name == "iota_row" else c, dtype=COMPUTE[op.dtype])
        return np.broadcast_to(idx[:, None] if name == "iota_row" else idx[None, :], (r, c))
    if name in ("convert", "cast"):
        return convert(args[0], _dtype_of(args[0]), op.dtype)
    if name == "div":
        if kind_of(op.dtype) == "int":
            return _idiv(args[0], args[1])
        return np.divide(args[0], args[1])
    if name in _BINARY:
        return _BINARY[name](args[0], args[1])
    if name in _UNARY:
        return _UNARY[name](args[0])
    if name == "where":
        return np.where(args[0], args[1], args[2])
    if name in N.REDUCTIONS:
        return _reduce(name, args[0])
    if name == "broadcast":
        return np.broadcast_to(args[0], op.shape)
    if name == "matmul":
        # decision: matmul converts both operands to f32 (f64 rounds, integers convert) and multiplies in f32; `acc` is added to the product
        out = np.matmul(args[0].astype(np.float32), args[1].astype(np.float32))
        if len(args) == 3:
            out = args[2] + out
        return out
    if name == "transpose":
        return args[0].T
    if name == "softmax":
        # decision: e * (1 / rowsum(e)), e = exp(x - rowmax(x)): one division per row, as the
        # C kernels compute it and as the plan-kernels pass spells it out in ops (so -O0 and
        # -O2 agree to the bit)
        x = args[0]
        e = np.exp(x - np.max(x, axis=1, keepdims=True))
        s = np.sum(e, axis=1, keepdims=True)
        return e * (np.ones_like(s) / s)
    if name == "slice_even":
        return args[0][:, 0::2]
    if name == "slice_odd":
        return args[0][:, 1::2]
    if name == "interleave":
        a, b = args
        out = np.empty((a.shape[0], a.shape[1] * 2), dtype=a.dtype)
        out[:, 0::2] = a
        out[:, 1::2] = b
        return out
    raise RuntimeError(f"ref: no rule for op `{name}`")


def _dtype_of(x: np.ndarray) -> str:
    """The IR dtype of a convert's operand, from its NumPy dtype (f32 also stands for f16/bf16:
    they are held in f32 and convert identically)."""
    dt = np.asarray(x).dtype
    if dt == np.bool_:
        return "bool"
    if dt == np.float64:
        return "f64"
    if dt == np.float32:
        return "f32"
    for k, v in _INT_NP.items():
        if dt == v:
            return k
    raise RuntimeError(f"ref: unexpected value dtype {dt}")


def eval_kernel(k: N.Kernel, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate a tile-bodied kernel: `inputs` maps In/InOut tiles and scalars to compute
    values; returns each stored parameter's value (param dtype, tile shape)."""
    params = {p.name: p for p in k.params}
    vals: list[np.ndarray] = []
    with np.errstate(all="ignore"):
        for op in k.ops:
            v = eval_op(op, [vals[a] for a in op.args], inputs)
            v = np.asarray(v, dtype=COMPUTE[op.dtype])
            if op.shape is not None and v.shape != op.shape:
                v = np.broadcast_to(v, op.shape)
            vals.append(v)
        out = {}
        for name, idx in k.stores:
            p = params[name]
            v = vals[idx]
            if k.ops[idx].dtype != p.dtype:
                v = convert(v, _dtype_of(v), p.dtype)
            out[name] = np.array(np.broadcast_to(v, (p.rows, p.cols)), dtype=COMPUTE[p.dtype])
    return out


# ---------------------------------------------------------------------------------------------
# Running a schedule


def _describe(c: sym.Check, env: Mapping[str, int]) -> tuple[str, dict]:
    values = {}
    lv, rv = sym.evaluate(c.lhs, env), sym.evaluate(c.rhs, env)
    if not sym.is_const(c.lhs):
        values[sym.to_str(c.lhs)] = lv
    if not sym.is_const(c.rhs):
        values[sym.to_str(c.rhs)] = rv
    if sym.is_const(c.rhs):
        found = f"found {lv}"
    elif sym.is_const(c.lhs):
        found = f"found {rv}"
    else:
        found = f"found {lv} and {rv}"
    return found, values


class _Runner:
    def __init__(self, module: N.Module, env: dict[str, int], tensors: dict[str, np.ndarray],
                 externs: Mapping[str, Callable]):
        self.m = module
        self.env = env
        self.tensors = tensors
        self.externs = externs
        self.kernels = {k.name: k for k in module.kernels}
        self.decls = {t.name: t for t in module.tensors}
        self.loops: list[tuple[str, int]] = []
        self.task_count = 0

    def partial(self) -> dict[str, np.ndarray]:
        return {n: a.copy() for n, a in self.tensors.items()
                if self.decls[n].kind in ("output", "inout")}

    def error(self, message: str, span: Span = NO_SPAN, values: Optional[dict] = None):
        raise RunError(message, span, tuple(self.loops), values, self.partial())

    def where(self, task: Optional[N.Task] = None) -> str:
        at = ", ".join(f"{n}={v}" for n, v in self.loops)
        text = f"task `{task.text}`" if task is not None else "enumeration"
        return f" ({text}{' at ' + at if at else ''})"

    def eval(self, e: sym.Expr, span: Span = NO_SPAN, task: Optional[N.Task] = None) -> int:
        try:
            return sym.evaluate(e, self.env)
        except sym.SymError as err:
            self.error(f"cannot evaluate `{sym.to_str(e)}`: {err}{self.where(task)}", span)

    def at(self) -> str:
        """` (at b=1, e.pos=0)`: the loop coordinates of a failed read or assert."""
        at = ", ".join(f"{n}={v}" for n, v in self.loops)
        return f" (at {at})" if at else ""

    def check(self, vc: N.ViewCheck, where: str) -> None:
        """Raise the RunError of `vc` if it does not hold (`where`: the coordinates text)."""
        try:
            ok = vc.check.evaluate(self.env)
        except sym.SymError as err:
            self.error(f"{vc.message}: {err}{where}", vc.span)
        if not ok:
            found, values = _describe(vc.check, self.env)
            self.error(f"{vc.message}, {found}{where}", vc.span, values)

    def stmts(self, body) -> None:
        for st in body:
            if isinstance(st, N.Loop):
                # decision: a loop's extent is evaluated once, when the loop starts
                n = self.eval(st.extent)
                saved = self.env.get(st.var)
                for i in range(max(n, 0)):
                    self.env[st.var] = i
                    self.loops.append((st.var, i))
                    try:
                        self.stmts(st.body)
                    finally:
                        self.loops.pop()
                if saved is None:
                    self.env.pop(st.var, None)
                else:
                    self.env[st.var] = saved
            elif isinstance(st, N.Block):
                self.stmts(st.body)
            elif isinstance(st, N.Read):
                self.read(st)
            elif isinstance(st, N.Assert):
                self.check(st.check, self.at())
            elif isinstance(st, N.When):
                for c, branch in st.branches:
                    if self.cond(c):
                        self.stmts(branch)
                        break
                else:
                    self.stmts(st.otherwise)
            elif isinstance(st, N.SlotSet):
                self.env[N.slot_var(st.slot)] = self.eval(st.value, st.span)
            else:
                self.task(st)

    def read(self, r: N.Read) -> None:
        """One element, after every check of its index; earlier tasks have all run, so it is
        the value their writes left."""
        for vc in r.checks:
            self.check(vc, self.at())
        idx = tuple(self.eval(i, r.span) for i in r.index)
        arr = self.tensors[r.tensor]
        if any(not 0 <= i < n for i, n in zip(idx, arr.shape)):
            raise RuntimeError(f"ref: read `{r.var}` of `{r.tensor}{list(idx)}` is outside the "
                               "tensor and no check said so")
        v = int(arr[idx])
        # decision: an element is read as a signed 64-bit integer (a u64 element past 2**63 - 1 wraps, as in C)
        if v >= 2**63:
            v -= 2**64
        self.env[r.var] = v

    def cond(self, c: N.Cond) -> bool:
        if c.op == "const":
            return bool(c.args[0])
        if c.op == "query":
            # decision: in ref every task enumerated so far has finished, so `query` always holds
            return True
        if c.op == "not":
            return not self.cond(c.args[0])
        if c.op == "and":
            return self.cond(c.args[0]) and self.cond(c.args[1])
        if c.op == "or":
            return self.cond(c.args[0]) or self.cond(c.args[1])
        a, b = (self.eval(x) for x in c.args)
        return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
                ">=": a >= b}[c.op]

    def task(self, t: N.Task) -> None:
        k = self.kernels[t.kernel]
        self.task_count += 1
        # every check of every argument before anything runs
        for a in t.args:
            if isinstance(a, N.TileArg):
                for vc in a.checks:
                    self.check(vc, self.where(t))
        boxes: dict[str, tuple] = {}
        inputs: dict[str, np.ndarray] = {}
        params = {p.name: p for p in k.params}
        for a in t.args:
            p = params[a.param]
            if isinstance(a, N.TileArg):
                offs = [self.eval(o, t.span, t) for o in a.offsets]
                exts = [self.eval(e, t.span, t) for e in a.extents]
                arr = self.tensors[a.tensor]
                if any(o < 0 or o + e > n or e < 0 for o, e, n in zip(offs, exts, arr.shape)):
                    raise RuntimeError(f"ref: the box of `{a.param}` in `{t.text}` is outside "
                                       f"`{a.tensor}` and no check said so")
                box = tuple(slice(o, o + e) for o, e in zip(offs, exts))
                boxes[a.param] = box
                if a.mode != "w":
                    inputs[a.param] = to_compute(arr[box], p.dtype).reshape(p.rows, p.cols)
            else:
                v = a.value
                if isinstance(v, sym.Expr):
                    v = self.eval(v, t.span, t)
                # decision: a scalar argument is a value of its parameter's dtype (an f16 Scalar is rounded to f16, an integer wraps)
                with np.errstate(over="ignore"):
                    inputs[a.param] = scalar_value(v, a.dtype)
        if k.is_extern:
            outs = self.extern(k, inputs)
        else:
            outs = eval_kernel(k, inputs)
        # stores take effect as the kernel finishes
        for name, value in outs.items():
            a = next(x for x in t.args if x.param == name)
            arr = self.tensors[a.tensor]
            region = arr[boxes[name]]
            arr[boxes[name]] = to_storage(value, params[name].dtype).reshape(region.shape)

    def extern(self, k: N.Kernel, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        # decision: extern kernels run only through a registered Python function (by source name, for every specialisation), called with NumPy tiles in the compute dtype; its Out/InOut arrays (or a returned dict) are stored by the rules of `store`
        fn = self.externs.get(k.source) or _EXTERNS.get(k.source)
        if fn is None:
            self.error(f"kernel `{k.source}` is an extern kernel, which the ref back end cannot "
                       "run; register a Python implementation with "
                       f"`ptowsp.backends.ref.register_extern({k.source!r}, fn)`", k.span)
        kwargs: dict = {}
        for p in k.params:
            if p.kind == "scalar":
                kwargs[p.name] = inputs[p.name][()]
            elif p.mode == "In":
                x = np.array(inputs[p.name])
                x.setflags(write=False)
                kwargs[p.name] = x
            elif p.mode == "InOut":
                kwargs[p.name] = np.array(inputs[p.name])
            else:
                kwargs[p.name] = np.zeros((p.rows, p.cols), dtype=COMPUTE[p.dtype])
        kwargs.update(dict(k.constexprs))
        result = fn(**kwargs)
        out = {}
        for p in k.params:
            if p.kind != "tile" or p.mode == "In":
                continue
            if isinstance(result, Mapping) and p.name in result:
                v = np.asarray(result[p.name])
            else:
                v = kwargs[p.name]
            if v.dtype.kind == "f" or kind_of(p.dtype) == "float":
                v, src = v.astype(np.float64), "f64"
            else:
                src = _dtype_of(v)
            with np.errstate(all="ignore"):
                v = convert(v, src, p.dtype)
            out[p.name] = np.array(np.broadcast_to(v, (p.rows, p.cols)))
        return out


# ---------------------------------------------------------------------------------------------
# CSP: coroutines


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


class _Csp:
    """The coroutine scheduler and the CSP statements, over a `_Runner` (ir/nodes.py, "CSP")."""

    def __init__(self, runner: "_Runner", shared: dict):
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
            raise RuntimeError("ref: the CSP enumeration stalled with no blocked send or consume")
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

    # -- statements (a generator per statement list; only CSP statements ever yield)
    def stmts(self, co: _Co, body):
        r = self.r
        for st in body:
            if isinstance(st, N.Loop):
                n = r.eval(st.extent)
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
            elif isinstance(st, N.Block):
                yield from self.stmts(co, st.body)
            elif isinstance(st, N.When):
                for c, branch in st.branches:
                    if r.cond(c):
                        yield from self.stmts(co, branch)
                        break
                else:
                    yield from self.stmts(co, st.otherwise)
            elif isinstance(st, N.SlotSet):
                self.shared[N.slot_var(st.slot)] = r.eval(st.value, st.span)
            elif isinstance(st, N.Pipe):
                yield from self.pipe(co, st)
            elif isinstance(st, N.Send):
                yield from self.send(co, st)
            elif isinstance(st, N.Consume):
                yield from self.consume(co, st)
            elif isinstance(st, N.Mark):
                yield from self.stmts(co, st.body)
                for ev in st.events:
                    self.events.setdefault(ev, {"records": 0, "synchronizes": 0})["records"] += 1
            elif isinstance(st, N.Sync):
                # every task enumerated so far has finished: nothing to wait for
                self.events.setdefault(st.event, {"records": 0, "synchronizes": 0})[
                    "synchronizes"] += 1
            elif isinstance(st, N.Read):
                r.read(st)
            elif isinstance(st, N.Assert):
                r.check(st.check, r.at())
            else:
                r.task(st)

    def pipe(self, co: _Co, p: N.Pipe):
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
            raise RuntimeError(f"ref: channel `{name}` is used outside the pipe that owns it")
        return inst

    def waiting_for(self, inst: _Inst, k: int) -> bool:
        """Whether some coroutine is blocked consuming item k of `inst` (a rendezvous)."""
        return any(not c.finished and c.wait is not None and c.wait.kind == "consume"
                   and c.wait.inst is inst and c.wait.item == k for c in self.cos)

    def send(self, co: _Co, st: N.Send):
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

    def consume(self, co: _Co, st: N.Consume):
        inst = self.instance(st.channel)
        key = id(inst)
        saved = co.env.get(st.item)
        while True:
            k = co.cursor.get(key, co.replica)
            yield from self.block(_Wait("consume", lambda: k < inst.sent or inst.closed(),
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


def _bind(module: N.Module, syms: Mapping[str, int]) -> dict[str, int]:
    known = {s.name: s for s in module.syms}
    for name in syms:
        if name not in known:
            raise RunError(f"unknown symbol `{name}`")
    env: dict[str, int] = {}
    for s in module.syms:
        v = syms.get(s.name, s.default)
        if v is None:
            raise RunError(f"symbol `{s.name}` is not bound", s.span)
        v = int(v)
        if v < 0:
            raise RunError(f"symbol `{s.name}` is bound to {v}, but symbols are non-negative",
                           s.span, values={s.name: v})
        env[s.name] = v
    return env


def _accepts(arr: np.ndarray, dtype: str) -> Optional[np.ndarray]:
    """The array as stored for `dtype`, or None when its dtype is not exactly that."""
    if dtype == "bf16" and arr.dtype.name == "bfloat16":
        return arr.view(np.uint16)
    return arr if arr.dtype == np.dtype(STORAGE[dtype]) else None


def run(module: N.Module, schedule: Optional[str] = None, syms: Optional[Mapping[str, int]] = None,
        arrays: Optional[Mapping[str, np.ndarray]] = None,
        externs: Optional[Mapping[str, Callable]] = None) -> dict[str, np.ndarray]:
    """Run `schedule` (default: the module's default) and return the outputs and inouts."""
    return execute(module, schedule, syms, arrays, externs)[0]


def execute(module: N.Module, schedule: Optional[str] = None,
            syms: Optional[Mapping[str, int]] = None,
            arrays: Optional[Mapping[str, np.ndarray]] = None,
            externs: Optional[Mapping[str, Callable]] = None) -> tuple[dict[str, np.ndarray], dict]:
    """`run`, also returning what the run did: `{"task_count": n}`, and for a schedule using
    CSP `channels` ({name: {"items", "max_in_flight", "depth"}} for every channel with slots)
    and `events` ({name: {"records", "synchronizes"}} for the events marked or waited for)."""
    syms = dict(syms or {})
    arrays = dict(arrays or {})
    name = schedule if schedule is not None else module.default_schedule
    if name is None:
        names = ", ".join(f"`{s.name}`" for s in module.schedules)
        raise RunError(f"choose a schedule to run: {names}" if names else
                       f"module `{module.name}` has no schedule to run")
    try:
        sched = module.schedule(name)
    except KeyError:
        raise RunError(f"module `{module.name}` has no schedule `{name}`") from None
    env = _bind(module, syms)
    for c in module.checks:
        try:
            ok = c.check.evaluate(env)
        except sym.SymError as err:
            raise RunError(f"{c.message}: {err}", c.span) from None
        if not ok:
            found, values = _describe(c.check, env)
            raise RunError(f"{c.message}, {found}", c.span, values=values)
    tensors: dict[str, np.ndarray] = {}
    decls = {t.name: t for t in module.tensors}
    for n in arrays:
        if n not in decls:
            raise RunError(f"the module has no tensor `{n}`")
        if decls[n].kind not in ("input", "inout"):
            raise RunError(f"`{n}` is {decls[n].kind} tensor; only inputs and inouts take arrays",
                           decls[n].span)
    for t in module.tensors:
        shape = tuple(sym.evaluate(d, env) for d in t.dims)
        if t.kind in ("input", "inout"):
            if t.name not in arrays:
                raise RunError(f"no array is bound to {t.kind} `{t.name}`", t.span)
            given = np.asarray(arrays[t.name])
            arr = _accepts(given, t.dtype)
            if arr is None or arr.shape != shape:
                want = ("uint16 (bf16 bits)" if t.dtype == "bf16"
                        else np.dtype(STORAGE[t.dtype]).name)
                raise RunError(f"`{t.name}` must be a {want} array of shape {shape}, found "
                               f"{given.dtype} {given.shape}", t.span)
            tensors[t.name] = np.array(arr, copy=True)  # never write the caller's array
        else:
            tensors[t.name] = np.zeros(shape, dtype=STORAGE[t.dtype])
    # decision: the 64 slots hold 0 at the start of every run; a slot keeps the exact integer set
    for k in range(N.NSLOTS):
        env[N.slot_var(k)] = 0
    runner = _Runner(module, env, tensors, dict(externs or {}))
    info: dict = {}
    if sched.uses_csp:
        csp = _Csp(runner, env)
        csp.run(sched.body)
        info["channels"] = {c.name: csp.channels.get(c.name, {"items": 0, "max_in_flight": 0,
                                                             "depth": c.depth})
                            for c in module.channels if c.slots is not None}
        if csp.events:
            info["events"] = csp.events
    else:
        runner.stmts(sched.body)
    outputs = {t.name: tensors[t.name] for t in module.tensors if t.kind in ("output", "inout")}
    return outputs, {"task_count": runner.task_count, **info}


class Backend:
    """The ref target behind `ptowsp.api.Program` (which binds and checks the arrays):
    `run(m, schedule, syms, inputs) -> (outputs, info)`. A `RunError` becomes a `WspError`
    with one diagnostic at its span, as the other targets report bad views."""

    def __init__(self, externs: Optional[Mapping[str, Callable]] = None):
        self.externs = dict(externs or {})

    def run(self, m: N.Module, schedule: str, syms: Mapping[str, int],
            inputs: Mapping[str, np.ndarray], workers: Optional[int] = None):
        try:
            return execute(m, schedule, syms, inputs, self.externs)
        except RunError as err:
            from ...diagnostics import Diagnostic, Note, WspError  # only when reporting

            code = err.code or ("bad-view" if err.coords or err.values else "run")
            notes = tuple(Note(sp, text) for sp, text in err.notes)
            raise WspError([Diagnostic(err.span, code, err.message, None, notes)],
                           dict(m.sources)) from None


__all__ = ["run", "execute", "Backend", "RunError", "register_extern", "unregister_extern",
           "bf16_round", "convert", "eval_kernel"]
