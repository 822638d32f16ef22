"""Emit C for kernels: `emit_kernel(k) -> KernelC` (one function) and `emit_kernels(kernels) -> str`
(one translation unit). Strings only: nothing here writes, compiles or loads a file.

The ABI is `wsp_runtime.h`'s: `int wsp_k_<name>(const wsp_tile *tiles, const wsp_scalar *scalars)`,
`tiles` in the order of the kernel's tile parameters, `scalars` in the order of its scalar
parameters (float dtypes in `.f` as a double, integers and bool in `.i`, bool as 0/1). It
returns 0; WSP_ERR_INTERNAL (4) when the copying slow path runs out of memory; WSP_ERR_USAGE (5)
when a tile's rows/cols differ from the kernel's static shape (a bug in the caller).

How a tile kernel becomes C (each step is a function below):
1. `_prepare`: the op DAG minus dead ops, with `softmax` expanded into rowmax / sub / exp /
   rowsum / reciprocal / mul.
2. `_plan`: cheap elementwise ops over parameters and scalars (lowering's `convert` of a
   parameter, `x * 2`) are *inline*: recomputed wherever they are read, like the parameters
   themselves. Every other tile op is put in a *loop nest* (an iteration shape and a level).
   Elementwise ops of one shape and level share a nest and are computed per element as C locals
   (`v12`); a value read by another nest, a view or a matmul is *materialised* in a local array
   (`t12`). Reductions accumulate inside the nest of their input; `broadcast`, `transpose`,
   `slice_*` and `interleave` are index maps (no code of their own); `matmul` is a loop nest of
   its own. A value produced at level L is readable from level L+1 on, so nests and matmuls run
   level by level. A store whose value is computed in a nest of the parameter's shape writes the
   tile from that nest (for an InOut tile only if nothing else reads its entry value); other
   stores run after every nest, in order, and a store value that would read a tile an earlier
   store overwrote is copied first (`_copy`, a second planning round): stores take effect as the
   kernel ends.
3. `_Emitter`: the C body, with `restrict` pointers, static trip counts and inner loops over
   columns that gcc -O3 vectorises (row reductions use 16 lane accumulators, so a float sum
   vectorises without -ffast-math; floating-point choices are branch-free bit selects).
4. The entry point (template `kernel.c.j2`) checks that every tile has contiguous columns and
   that no written tile overlaps another one, and otherwise runs the same body on contiguous
   copies (`wsp_call_copied` in `wsp_kernels.h`), so the body's `restrict` promises always hold
   and a kernel whose output aliases its input still reads entry values.

`extern c` kernels (template `extern_kernel.c.j2`): the body becomes a `static void` function
whose parameters are the kernel's, named as in the source: a tile `p` is a `wsp_in_<dtype>` /
`wsp_out_<dtype>` struct (`p.data`, `p.rows`, `p.cols`, `p.stride`), a scalar a plain C value.
Strided tiles are copied to contiguous buffers around the call. A `#line` directive maps the
body to its `.wsp` file, so C compiler errors point into the user's source.

Value semantics are nodes.py's: f16/bf16 are held in f32 and rounded (to nearest even) only by
convert/cast, literals and scalar parameters of that type, and stores; integer arithmetic wraps;
integer division floors and x / 0 == 0; float -> integer casts truncate, saturate and send NaN
to 0; bool is a uint8_t 0/1; maximum/minimum and max/min reductions propagate NaN.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

from ...ir import nodes as N
from . import cexpr as C
from .cexpr import Expr, Raw

FLOATS = ("f16", "bf16", "f32", "f64")
UNSIGNED = ("u8", "u16", "u32", "u64")
CTYPE = {  # the C type a value of each dtype is held in while a kernel computes
    "f16": "float", "bf16": "float", "f32": "float", "f64": "double",
    "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "bool": "uint8_t",
}
STORAGE = dict(CTYPE, f16="uint16_t", bf16="uint16_t")  # the C type of a tile element in memory
ESIZE = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
         "u8": 1, "u16": 2, "u32": 4, "u64": 8, "bool": 1}
_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
_MODE_BITS = {"In": 1, "Out": 2, "InOut": 3}

ELEMENTWISE = frozenset(N.ELEMENTWISE_BINARY + N.ELEMENTWISE_UNARY + ("where", "_copy"))
VIEWS = frozenset(("broadcast", "transpose", "slice_even", "slice_odd", "interleave"))
LANES = 16  # accumulators per row reduction: two AVX2 vectors of f32
# decision: temporaries up to 64 KiB live on the stack (worker threads have at least that);
# larger kernels take one malloc'd block per call
STACK_LIMIT = 64 * 1024
# the register-blocked matmul: MM_MR x MM_NR blocks of C, B packed MM_KC rows at a time
MM_MR, MM_NR, MM_KC = 6, 16, 256
MM_MIN_ROWS = 4
MM_APACK = 32 * 1024

_HERE = Path(__file__).resolve().parent


def kind_of(dtype: str) -> str:
    return "bool" if dtype == "bool" else "float" if dtype in FLOATS else "int"


def kernel_symbol(k: N.Kernel) -> str:
    """The C function of kernel `k` (the same name `enumerate.py` calls)."""
    return C.c_ident("wsp_k_", k.name)


@dataclass(frozen=True)
class KernelC:
    """The C of one kernel: `source` defines `symbol` (and static functions `wsp_kb_<name>`,
    `wsp_ku_<name>`, `wsp_kc_<name>`: other prefixes, so no kernel name can collide);
    `tiles` and `scalars` are the parameter names in the order of the ABI's arrays."""

    name: str
    symbol: str
    source: str
    tiles: tuple[str, ...]
    scalars: tuple[str, ...]

    @property
    def declaration(self) -> str:
        return f"int {self.symbol}(const wsp_tile *tiles, const wsp_scalar *scalars);"


# ---------------------------------------------------------------------------------------------
# Templates and the support header


@lru_cache(maxsize=None)
def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


@lru_cache(maxsize=None)
def support_header() -> str:
    """The text of `wsp_kernels.h` (pasted into every kernel translation unit)."""
    return (_HERE / "wsp_kernels.h").read_text()


_RESTORE = "/* wsp:restore-line */"


def emit_kernels(kernels: Iterable[N.Kernel], filename: str = "kernels.c") -> str:
    """One C translation unit defining every kernel's entry point (needs `wsp_runtime.h` on the
    include path; `filename` is the name it is compiled under, for `#line` after extern bodies)."""
    parts = [emit_kernel(k) for k in kernels]
    text = _env().get_template("kernels.c.j2").render(support=support_header(), kernels=parts)
    if _RESTORE not in text:
        return text
    lines = text.split("\n")
    quoted = _c_string(filename)
    for n, line in enumerate(lines):
        if line == _RESTORE:
            lines[n] = f"#line {n + 2} {quoted}"
    return "\n".join(lines)


def emit_kernel(k: N.Kernel) -> KernelC:
    """The C of one kernel (see the module docstring for the ABI)."""
    tiles = tuple(p.name for p in k.params if p.kind == "tile")
    scalars = tuple(p.name for p in k.params if p.kind == "scalar")
    if k.extern_c is not None:
        source = _emit_extern(k)
    else:
        source = _emit_tile_kernel(k)
    return KernelC(k.name, kernel_symbol(k), source, tiles, scalars)


def _c_string(s: str) -> str:
    out = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{out}"'


def _comment(s: str) -> str:
    return s.replace("*/", "* /")


# ---------------------------------------------------------------------------------------------
# extern c kernels


def _emit_extern(k: N.Kernel) -> str:
    sym = kernel_symbol(k)
    tiles = [p for p in k.params if p.kind == "tile"]
    scalars = [p for p in k.params if p.kind == "scalar"]
    formals, actuals = [], []
    for t, p in enumerate(tiles):
        struct = f"wsp_{'in' if p.mode == 'In' else 'out'}_{p.dtype}"
        const = "const " if p.mode == "In" else ""
        formals.append(f"{struct} {_extern_name(p.name)}")
        actuals.append(f"({struct}){{({const}{STORAGE[p.dtype]} *)tiles[{t}].data, "
                       f"tiles[{t}].rows, tiles[{t}].cols, tiles[{t}].stride}}")
    for s, p in enumerate(scalars):
        # decision: extern scalars are plain C values: float for f32/f16/bf16 (f16/bf16 rounded),
        # double for f64, the fixed-width integer types, and _Bool for bool
        ctype = "_Bool" if p.dtype == "bool" else CTYPE[p.dtype]
        formals.append(f"{ctype} {_extern_name(p.name)}")
        actuals.append(C.to_c(_scalar_param(p.dtype, s)))
    line = None
    body = k.extern_c or ""
    if k.span.file != N.NO_SPAN.file and k.span.end_line:
        # the body is the raw string that ends on the declaration's last line
        start = k.span.end_line - body.count("\n")
        if start >= k.span.line:
            line = f"#line {start} {_c_string(k.span.file)}"
    writes = [t for t, p in enumerate(tiles) if p.mode != "In"]
    return _env().get_template("extern_kernel.c.j2").render(
        name=_comment(k.name), source=_comment(k.source), symbol=sym,
        user_symbol=C.c_ident("wsp_ku_", k.name), call_symbol=C.c_ident("wsp_kc_", k.name),
        formals=formals or ["void"], actuals=actuals, body=body, line=line, restore=_RESTORE,
        esize=[ESIZE[p.dtype] for p in tiles], modes=[_MODE_BITS[p.mode] for p in tiles],
        order=writes, ntiles=len(tiles),
    )


def _extern_name(name: str) -> str:
    # decision: an extern kernel's parameters keep their names (the body refers to them); a name
    # that is a C keyword cannot be referred to from C anyway and becomes `wsp_p_<name>`
    return name if C.is_c_name(name) else C.c_ident("wsp_p_", name)


def _scalar_param(dtype: str, index: int) -> Expr:
    """Scalar parameter `index` as a held value of `dtype`."""
    # decision: a float scalar (f16/bf16/f32/f64) arrives as a double in `.f` and is rounded to
    # its dtype here (f16/bf16 once, from the double); integers arrive in `.i` and wrap to their
    # width; a bool is `.i != 0`
    if dtype == "f32":
        return C.cast("float", f"scalars[{index}].f")
    if dtype == "f64":
        return Raw(f"scalars[{index}].f")
    if dtype == "f16":
        return C.call("wsp_round_f16_d", f"scalars[{index}].f")
    if dtype == "bf16":
        return C.call("wsp_round_bf16_d", f"scalars[{index}].f")
    if dtype == "bool":
        return C.cast("uint8_t", C.binop("!=", f"scalars[{index}].i", 0))
    return C.cast(CTYPE[dtype], f"scalars[{index}].i")


# ---------------------------------------------------------------------------------------------
# 1. Preparing the op list


def _prepare(k: N.Kernel, snapshot: frozenset[int] = frozenset()
             ) -> tuple[list[N.Op], list[tuple[str, int]]]:
    """The ops the stores need, softmax expanded, and a `_copy` op (an elementwise identity
    that is never inlined) for the value of every store whose index is in `snapshot`."""
    ops: list[N.Op] = []
    new_of: dict[int, int] = {}

    def add(op: N.Op) -> int:
        ops.append(op)
        return len(ops) - 1

    live = _live(k)
    for i, op in enumerate(k.ops):
        if i not in live:
            continue
        args = tuple(new_of[a] for a in op.args)
        if op.op == "softmax":
            # decision: softmax(x) = e * (1 / rowsum(e)), e = exp(x - rowmax(x)): expanded so
            # that the max, the exp-and-sum and the scaling fuse with what surrounds them; one
            # division per row and a multiply per element (within an ulp of e / sum)
            (x,) = args
            rows = (op.shape[0], 1)
            m = add(N.Op("rowmax", (x,), rows, op.dtype))
            d = add(N.Op("sub", (x, m), op.shape, op.dtype))
            e = add(N.Op("exp", (d,), op.shape, op.dtype))
            s = add(N.Op("rowsum", (e,), rows, op.dtype))
            one = add(N.Op("literal", (), None, op.dtype, 1.0))
            r = add(N.Op("div", (one, s), rows, op.dtype))
            new_of[i] = add(N.Op("mul", (e, r), op.shape, op.dtype))
        elif op.op == "matmul" and _needs_f32_copy(ops[args[1]]):
            # decision: a matmul's b is read once per row of a: one that is not already an f32
            # array (a conversion, an f16 or integer tile, a transposed view) is converted into
            # a contiguous f32 array first
            b = add(N.Op("_copy", (args[1],), ops[args[1]].shape, "f32"))
            new_of[i] = add(N.Op(op.op, (args[0], b) + args[2:], op.shape, op.dtype, op.attr))
        else:
            new_of[i] = add(N.Op(op.op, args, op.shape, op.dtype, op.attr))
    stores = []
    for n, (p, v) in enumerate(k.stores):
        v = new_of[v]
        if n in snapshot and ops[v].shape is not None:
            v = add(N.Op("_copy", (v,), ops[v].shape, ops[v].dtype))
        stores.append((p, v))
    return ops, stores


def _needs_f32_copy(op: N.Op) -> bool:
    if op.dtype != "f32":
        return True
    return op.op in VIEWS or op.op in _CHEAP


def _live(k: N.Kernel) -> set[int]:
    live: set[int] = set()
    todo = [v for _, v in k.stores]
    while todo:
        i = todo.pop()
        if i not in live:
            live.add(i)
            todo.extend(k.ops[i].args)
    return live


# ---------------------------------------------------------------------------------------------
# 2. Planning: nests, levels, materialisation, stores

# Elementwise ops cheap enough to recompute wherever they are read (as leaves are) when their
# operands are leaves, scalars or other such ops: lowering's `convert` of a parameter, `x * 2`.
_CHEAP = frozenset(("convert", "cast", "neg", "abs", "add", "sub", "mul", "maximum", "minimum",
                    "relu", "not", "and", "or", "lt", "le", "gt", "ge", "eq", "ne", "where"))
_INLINE_COST = 3  # at most this many cheap ops are recomputed per read


@dataclass
class _Nest:
    level: int
    shape: tuple[int, int]
    ops: list[int] = field(default_factory=list)  # elementwise ops, in DAG order
    rowreds: list[int] = field(default_factory=list)
    colreds: list[int] = field(default_factory=list)
    stores: list[tuple[str, int]] = field(default_factory=list)  # fused stores

    @property
    def first(self) -> int:
        return min(self.ops + self.rowreds + self.colreds)


@dataclass
class _Plan:
    ops: list[N.Op]
    kind: list[str]  # scalar | leaf | inline | ew | red | view | matmul
    level: list[int]  # ew/red: the nest's level; others: the level from which it is readable
    nest_of: dict[int, _Nest]
    mat: set[int]  # values held in arrays t<i>
    steps: list[tuple[str, object]]  # ("nest", _Nest) | ("matmul", op index), in order
    final_stores: list[tuple[str, int]]
    hazards: frozenset[int]  # stores (indices into k.stores) that need a snapshot
    into: dict[int, str]  # blocked matmuls computed in place in the tile they are stored to


def _classify(op: N.Op) -> str:
    if op.shape is None:
        return "scalar"
    if op.op in ("param", "iota_row", "iota_col", "literal"):
        return "leaf"
    if op.op in ELEMENTWISE:
        return "ew"
    if op.op in N.REDUCTIONS:
        return "red"
    if op.op in VIEWS:
        return "view"
    if op.op == "matmul":
        return "matmul"
    raise NotImplementedError(f"the cpu back end has no code for op `{op.op}`")


def _plan(k: N.Kernel) -> _Plan:
    """The plan of `k`; stores that would read a tile an earlier store overwrote get their
    value copied first (a second planning round)."""
    plan = _plan_once(k, frozenset())
    if plan.hazards:
        plan = _plan_once(k, plan.hazards)
        assert not plan.hazards, "snapshots must remove every store hazard"
    return plan


def _plan_once(k: N.Kernel, snapshot: frozenset[int]) -> _Plan:
    ops, stores = _prepare(k, snapshot)
    n = len(ops)
    kind = [_classify(op) for op in ops]
    level = [0] * n
    uses: list[list[int]] = [[] for _ in range(n)]
    stored: list[list[int]] = [[] for _ in range(n)]  # store indices reading each value
    for i, op in enumerate(ops):
        for a in op.args:
            uses[a].append(i)
    for s, (_, v) in enumerate(stores):
        stored[v].append(s)

    # decision: cheap elementwise ops of parameters (a `convert` of an f16 weight, `x * 2`) are
    # recomputed where they are read instead of being given a nest and an array of their own
    cost = [0] * n
    for i, op in enumerate(ops):
        # a stored value stays in a nest: stores of one shape then share one loop
        if kind[i] == "ew" and op.op in _CHEAP and not stored[i]:
            c = 1 + sum(cost[a] for a in op.args if kind[a] == "inline")
            if all(kind[a] in ("scalar", "leaf", "inline") for a in op.args) and c <= _INLINE_COST:
                kind[i], cost[i] = "inline", c

    def avail(u: int) -> int:
        """The level from which u is readable as an array (or a leaf)."""
        if kind[u] in ("ew", "red"):
            return level[u] + 1
        return level[u]

    nests: dict[tuple, _Nest] = {}
    nest_of: dict[int, _Nest] = {}
    for i, op in enumerate(ops):
        kd = kind[i]
        if kd in ("scalar", "leaf", "inline"):
            level[i] = 0
        elif kd == "ew":
            lv = 0
            for a in op.args:
                if kind[a] == "ew" and ops[a].shape == op.shape:
                    lv = max(lv, level[a])  # same shape: may be computed in the same nest
                elif kind[a] not in ("scalar", "leaf", "inline"):
                    lv = max(lv, avail(a))
            level[i] = lv
            nest = nests.setdefault((lv, op.shape), _Nest(lv, op.shape))
            nest.ops.append(i)
            nest_of[i] = nest
        elif kd == "red":
            (x,) = op.args
            lv = level[x] if kind[x] == "ew" else avail(x)
            level[i] = lv
            nest = nests.setdefault((lv, ops[x].shape), _Nest(lv, ops[x].shape))
            (nest.rowreds if op.op.startswith("row") else nest.colreds).append(i)
            nest_of[i] = nest
        else:  # views and matmul read arrays
            level[i] = max((avail(a) for a in op.args), default=0)

    # Materialise every elementwise value read outside its own nest (in a nest: at the
    # element being computed, so the value is a local).
    mat: set[int] = {i for i in range(n) if kind[i] in ("red", "matmul")}
    for i in range(n):
        if kind[i] == "ew" and any(kind[u] not in ("ew", "red") or nest_of[u] is not nest_of[i]
                                   for u in uses[i]):
            mat.add(i)

    def read_here(u: int, nest: _Nest, shape) -> bool:
        """Whether every reader of u (a tile parameter's value, or an inline op of it) is in
        `nest` at the element being written; a store reading it runs after the nests."""
        if stored[u]:
            return False
        for c in uses[u]:
            if kind[c] == "inline":
                if ops[c].shape != shape or not read_here(c, nest, shape):
                    return False
            elif kind[c] not in ("ew", "red") or nest_of[c] is not nest or nest.shape != shape:
                return False
        return True

    # Stores: straight from the nest when the value is computed there at the tile's shape and
    # nothing reads the tile's entry value elsewhere.
    params = {p.name: p for p in k.params}
    param_ops: dict[str, list[int]] = {}
    for i, op in enumerate(ops):
        if op.op == "param":
            param_ops.setdefault(str(op.attr), []).append(i)
    final: list[tuple[int, str, int]] = []
    for s, (pname, v) in enumerate(stores):
        p = params[pname]
        ok = kind[v] == "ew" and ops[v].shape == (p.rows, p.cols)
        if ok and p.mode == "InOut":
            ok = all(read_here(po, nest_of[v], ops[v].shape) for po in param_ops.get(pname, ()))
        if ok:
            nest_of[v].stores.append((pname, v))
        else:
            final.append((s, pname, v))
            if kind[v] == "ew":
                mat.add(v)

    # Stores after the nests run in order: one may not read (other than at the element it
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

    # decision: a blocked matmul whose value is only stored, to an f32 tile of its shape that
    # nothing else reads (but as its `acc`), accumulates in that tile: the copy of C in and
    # out of a temporary was ~10% of a 64^3 tile's time
    into: dict[int, str] = {}
    for s, pname, v in final:
        p, op = params[pname], ops[v]
        if kind[v] != "matmul" or s in hazards or uses[v] or len(stored[v]) != 1:
            continue
        if op.dtype != "f32" or p.dtype != "f32" or op.shape != (p.rows, p.cols):
            continue
        inner = ops[op.args[0]].shape[1]
        if not _mm_blocked(op.shape[0], op.shape[1], inner) or sum(q == pname for q, _ in stores) != 1:
            continue
        own = param_ops.get(pname, [])
        acc = op.args[2] if len(op.args) > 2 else None
        kc = _mm_kc(op.shape[0], not _a_in_place(ops, mat, op.args[0]))
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
        steps += [("nest", nest) for nest in sorted(by_level.get(lv, []), key=lambda t: t.first)]
    return _Plan(ops, kind, level, nest_of, mat, steps, [(p, v) for _, p, v in final],
                 frozenset(hazards), into)


# ---------------------------------------------------------------------------------------------
# 3. Emitting the body


def _at(shape: tuple[int, int], i: Expr, j: Expr) -> tuple[Expr, Expr]:
    """The index of an element (i, j) of a broadcast value of `shape` (extent 1: index 0)."""
    return (i if shape[0] > 1 else Raw("0"), j if shape[1] > 1 else Raw("0"))


def _unsigned_for(dtype: str) -> str:
    return "uint64_t" if _BITS[dtype] == 64 else "uint32_t"


def _sel(c: Expr, a: Expr, b: Expr, dtype: str) -> Expr:
    """`c ? a : b` for held values; branch-free for floats (see wsp_kernels.h)."""
    ct = CTYPE[dtype]
    if ct == "float":
        return C.call("wsp_self", c, a, b)
    if ct == "double":
        return C.call("wsp_seld", c, a, b)
    return C.cond(c, a, b)


def convert(e: Expr, src: str, dst: str) -> Expr:
    """A held value of dtype `src` as a held value of dtype `dst` (convert and cast)."""
    # decision: every conversion to f16/bf16 rounds once, to nearest even, from the exact
    # value: f64 through round-to-odd f32 (wsp_f64_to_f32_odd), integers through double (exact
    # up to 2^53; an i64/u64 beyond that may round twice, both times to nearest)
    if src == dst:
        return e
    ks, kd = kind_of(src), kind_of(dst)
    if kd == "bool":
        return C.cast("uint8_t", C.binop("!=", e, 0))
    if kd == "float":
        if ks != "float":  # integers and bool: exact in double up to 2^53, then one rounding
            if dst == "f32":
                return C.cast("float", e)
            if dst == "f64":
                return C.cast("double", e)
            return C.call(f"wsp_round_{dst}_d", C.cast("double", e))
        if dst == "f64":
            return C.cast("double", e)
        if src == "f64":
            return C.cast("float", e) if dst == "f32" else C.call(f"wsp_round_{dst}_d", e)
        if dst == "f32":  # f16/bf16 held in f32 are f32 values already
            return e
        return C.call(f"wsp_round_{dst}", e)
    # integer destination
    if ks == "float":
        return C.call(f"wsp_{'d' if src == 'f64' else 'f'}2i_{dst}", e)
    return C.cast(CTYPE[dst], e)  # bool 0/1, or integer wrap-around (modulo 2^bits)


def load(e: Expr, dtype: str) -> Expr:
    """A tile element in memory (`e`) as a held value."""
    # decision: bool is one byte holding 0 or 1; a nonzero byte read from a tile counts as true
    if dtype == "f16":
        return C.call("wsp_f16_to_f32", e)
    if dtype == "bf16":
        return C.call("wsp_bf16_to_f32", e)
    if dtype == "bool":
        return C.cast("uint8_t", C.binop("!=", e, 0))
    return e


def store_value(e: Expr, src: str, dst: str) -> Expr:
    """A held value of dtype `src` as the memory representation of dtype `dst`."""
    if dst in ("f16", "bf16"):
        if src == "f64":
            return C.call(f"wsp_f64_to_{dst}", e)
        if kind_of(src) != "float":
            return C.call(f"wsp_f64_to_{dst}", C.cast("double", e))
        return C.call(f"wsp_f32_to_{dst}", e)
    return convert(e, src, dst)


def literal(value, dtype: str) -> Expr:
    """A literal op's value as a held value of `dtype`."""
    if isinstance(value, bool):
        value = int(value)
    if dtype == "bool":
        return C.cast("uint8_t", 1 if value else 0)
    if kind_of(dtype) == "float":
        v = float(value)
        v = {"f32": C.f32_value, "f16": C.f16_value, "bf16": C.bf16_value}.get(dtype, float)(v)
        return C.float_lit(v, CTYPE[dtype])
    if isinstance(value, float):
        value = int(value) if value == value and abs(value) != float("inf") else 0
    e = C.int_lit(int(value), dtype)
    return e if dtype in ("i32", "i64", "u32", "u64") else C.cast(CTYPE[dtype], e)


def _wrap_arith(cop: str, a: Expr, b: Expr, dtype: str) -> Expr:
    if dtype in ("u32", "u64"):
        return C.binop(cop, a, b)
    u = _unsigned_for(dtype)
    return C.cast(CTYPE[dtype], C.binop(cop, C.cast(u, a), C.cast(u, b)))


_FLOAT_FN = {  # op -> (f32 function, f64 function)
    "exp": ("wsp_expf", "exp"), "log": ("wsp_logf", "log"), "sqrt": ("sqrtf", "sqrt"),
    "tanh": ("wsp_tanhf", "tanh"), "sigmoid": ("wsp_sigmoidf", "wsp_sigmoid"),
    "sin": ("sinf", "sin"), "cos": ("cosf", "cos"), "gelu": ("wsp_geluf", "wsp_gelu"),
    "silu": ("wsp_siluf", "wsp_silu"), "abs": ("fabsf", "fabs"),
}
_COMPARE = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def elementwise(op: N.Op, args: list[Expr], arg_dtypes: list[str],
                exponent: Optional[float] = None) -> Expr:
    """The held value of elementwise `op` (tile or scalar) from its operands' held values."""
    name, dt = op.op, op.dtype
    ct = CTYPE[dt]
    fl = kind_of(dt) == "float"
    if name in ("convert", "cast", "_copy"):
        return convert(args[0], arg_dtypes[0], dt)
    if name in _COMPARE:
        common = arg_dtypes[0]
        a, b = args[0], convert(args[1], arg_dtypes[1], common)
        return C.cast("uint8_t", C.binop(_COMPARE[name], a, b))
    if name == "where":
        c = convert(args[0], arg_dtypes[0], "bool")
        a, b = (convert(x, d, dt) for x, d in zip(args[1:], arg_dtypes[1:]))
        return _sel(c, a, b, dt)
    # every other operand has the op's dtype (lowering inserts converts; be lenient anyway)
    xs = [convert(x, d, dt) for x, d in zip(args, arg_dtypes)]
    if name in ("and", "or"):
        return C.cast("uint8_t", C.binop("&" if name == "and" else "|", xs[0], xs[1]))
    if name == "not":
        return C.cast("uint8_t", C.binop("^", xs[0], Raw("1u")))
    if name in ("add", "sub", "mul"):
        cop = {"add": "+", "sub": "-", "mul": "*"}[name]
        return C.binop(cop, xs[0], xs[1]) if fl else _wrap_arith(cop, xs[0], xs[1], dt)
    if name == "div":
        return C.binop("/", xs[0], xs[1]) if fl else C.call(f"wsp_fdiv_{dt}", xs[0], xs[1])
    if name in ("maximum", "minimum"):
        if fl:
            fn = ("wsp_max" if name == "maximum" else "wsp_min") + ("d" if ct == "double" else "f")
            return C.call(fn, xs[0], xs[1])
        return C.cond(C.binop(">" if name == "maximum" else "<", xs[0], xs[1]), xs[0], xs[1])
    if name == "pow":
        # decision: pow by the literal exponents 0, 1, 2 and -1 is exact arithmetic (the same
        # value as powf, but vectorisable); any other exponent calls libm's powf / pow
        if exponent == 2.0:
            return C.binop("*", xs[0], xs[0])
        if exponent == 1.0:
            return xs[0]
        if exponent == -1.0:
            return C.binop("/", C.float_lit(1.0, ct), xs[0])
        if exponent == 0.0:
            return C.float_lit(1.0, ct)
        return C.call("powf" if ct == "float" else "pow", xs[0], xs[1])
    if name == "neg":
        if fl:
            return C.neg(xs[0])
        u = _unsigned_for(dt)
        return C.cast(ct, C.binop("-", C.cast(u, 0), C.cast(u, xs[0])))
    if name == "abs" and not fl:
        if dt in UNSIGNED:
            return xs[0]
        u = _unsigned_for(dt)
        negated = C.binop("-", C.cast(u, 0), C.cast(u, xs[0]))
        return C.cast(ct, C.cond(C.binop("<", xs[0], 0), negated, C.cast(u, xs[0])))
    if name == "relu":
        if fl:
            fn = "wsp_maxd" if ct == "double" else "wsp_maxf"
            return C.call(fn, xs[0], C.float_lit(0.0, ct))
        if dt in UNSIGNED:
            return xs[0]
        return C.cond(C.binop(">", xs[0], 0), xs[0], C.cast(ct, 0))
    if name == "rsqrt":
        sq = "sqrtf" if ct == "float" else "sqrt"
        return C.binop("/", C.float_lit(1.0, ct), C.call(sq, xs[0]))
    if name in _FLOAT_FN:
        f32, f64 = _FLOAT_FN[name]
        return C.call(f64 if ct == "double" else f32, xs[0])
    raise NotImplementedError(f"the cpu back end has no code for elementwise op `{name}`")


class _Lines:
    def __init__(self):
        self.lines: list[str] = []
        self.depth = 1

    def __call__(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def open(self, text: str) -> None:
        self(f"{text} {{" if text else "{")
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        self("}")


def _reduce_init(name: str, dt: str) -> Expr:
    ct = CTYPE[dt]
    kind = name[3:]
    if kind in ("sum", "mean"):
        return C.float_lit(0.0, ct) if kind_of(dt) == "float" else C.cast(ct, 0)
    if kind_of(dt) == "float":
        e = C.float_lit(float("inf"), ct)
        return C.neg(e) if kind == "max" else e
    lo, hi = C._INT_LIMITS[dt]
    return literal(lo if kind == "max" else hi, dt)


def _reduce_step(name: str, acc: Expr, x: Expr, dt: str) -> Expr:
    kind = name[3:]
    fl = kind_of(dt) == "float"
    ct = CTYPE[dt]
    if kind in ("sum", "mean"):
        return C.binop("+", acc, x) if fl else _wrap_arith("+", acc, x, dt)
    if fl:
        fn = ("wsp_max" if kind == "max" else "wsp_min") + ("d" if ct == "double" else "f")
        return C.call(fn, acc, x)
    return C.cond(C.binop(">" if kind == "max" else "<", x, acc), x, acc)


class _Emitter:
    """The body of one tile kernel from its plan."""

    def __init__(self, k: N.Kernel, plan: _Plan):
        self.k, self.plan, self.ops = k, plan, plan.ops
        self.tiles = [p for p in k.params if p.kind == "tile"]
        self.tile_index = {p.name: t for t, p in enumerate(self.tiles)}
        scalars = [q for q in k.params if q.kind == "scalar"]
        self.scalar_index = {p.name: s for s, p in enumerate(scalars)}
        self.used_ptr: set[int] = set()
        self.used_rs: set[int] = set()
        self.out = _Lines()
        self.memo: dict[str, str] = {}  # access text -> local name, per nest body
        self.nlocal = 0
        self.uses_scalars = False

    # -- names
    def ptr(self, t: int) -> str:
        self.used_ptr.add(t)
        return f"p{t}"

    def rs(self, t: int) -> str:
        self.used_rs.add(t)
        return f"p{t}_rs"

    def exponent_of(self, op: N.Op) -> Optional[float]:
        if op.op != "pow":
            return None
        e = self.ops[op.args[1]]
        if e.op == "literal" and isinstance(e.attr, (int, float)):
            v = float(e.attr)
            if kind_of(e.dtype) == "float":
                v = {"f32": C.f32_value, "f16": C.f16_value, "bf16": C.bf16_value}.get(
                    e.dtype, float)(v)
            return v
        return None

    # -- reading values
    def access(self, u: int, i: Expr, j: Expr) -> Expr:
        """Value u at (i, j) of its own shape, for a value readable outside a nest."""
        op = self.ops[u]
        kd = self.plan.kind[u]
        if kd == "scalar":
            return Raw(f"s{u}")
        if op.op == "param":
            t = self.tile_index[str(op.attr)]
            p = self.tiles[t]
            off = C.iadd(C.imul(i, self.rs(t)) if p.rows > 1 else Raw("0"), j if p.cols > 1 else 0)
            return load(C.index(self.ptr(t), off), p.dtype)
        if op.op == "literal":
            return literal(op.attr, op.dtype)
        if op.op == "iota_row":
            return convert(C.cast("int64_t", i), "i64", op.dtype)
        if op.op == "iota_col":
            return convert(C.cast("int64_t", j), "i64", op.dtype)
        if u in self.plan.mat:
            rows, cols = op.shape
            off = C.iadd(C.imul(i, cols) if rows > 1 else Raw("0"), j if cols > 1 else 0)
            return C.index(f"t{u}", off)
        if kd == "view":
            return self.view(u, i, j)
        if kd == "inline":
            args = []
            for a in op.args:
                sa = self.ops[a].shape
                if sa is None:
                    args.append(Raw(f"s{a}"))
                else:
                    args.append(self.access(a, *_at(sa, i, j)))
            return elementwise(op, args, [self.ops[a].dtype for a in op.args], self.exponent_of(op))
        raise AssertionError(f"value {u} ({op.op}) is not readable here")

    def view(self, u: int, i: Expr, j: Expr) -> Expr:
        op = self.ops[u]
        a = op.args[0]
        if op.op == "broadcast":
            sa = self.ops[a].shape
            if sa is None:
                return self.access(a, i, j)
            return convert(self.access(a, *_at(sa, i, j)), self.ops[a].dtype, op.dtype)
        if op.op == "transpose":
            return self.access(a, j, i)
        if op.op == "slice_even":
            return self.access(a, i, C.imul(2, j))
        if op.op == "slice_odd":
            return self.access(a, i, C.iadd(C.imul(2, j), 1))
        if op.op == "interleave":
            b = op.args[1]
            half = C.binop(">>", j, 1)
            va = convert(self.access(a, i, half), self.ops[a].dtype, op.dtype)
            vb = convert(self.access(b, i, half), self.ops[b].dtype, op.dtype)
            return _sel(C.binop("==", C.binop("&", j, 1), 0), va, vb, op.dtype)
        raise AssertionError(op.op)

    def operand(self, u: int, nest: Optional[_Nest]) -> Expr:
        """Value u as an operand of an op computed at (i, j) of `nest` (None: a scalar op)."""
        if self.plan.kind[u] == "scalar":
            return Raw(f"s{u}")
        if nest is not None and self.plan.nest_of.get(u) is nest and self.plan.kind[u] == "ew":
            return Raw(f"v{u}")
        e = self.access(u, *_at(self.ops[u].shape, Raw("i"), Raw("j")))
        if nest is None or isinstance(e, Raw):
            return e
        text = C.to_c(e)
        name = self.memo.get(text)
        if name is None:
            name = f"x{self.nlocal}"
            self.nlocal += 1
            self.memo[text] = name
            self.out(f"const {CTYPE[self.ops[u].dtype]} {name} = {text};")
        return Raw(name)

    def value(self, i: int, nest: Optional[_Nest]) -> Expr:
        op = self.ops[i]
        args = [self.operand(a, nest) for a in op.args]
        return elementwise(op, args, [self.ops[a].dtype for a in op.args], self.exponent_of(op))

    # -- the body
    def emit(self) -> str:
        out = self.out
        for kind, item in _row_groups(self.plan):
            if kind == "matmul":
                self.matmul(item)
            elif kind == "rows":
                self.nests_by_row(item)
            else:
                self.nest(item)
        for pname, v in self.plan.final_stores:
            self.final_store(pname, v)
        body = "\n".join(out.lines)
        # scalars, computed once; only those the body reads (a `pow` by a literal exponent
        # does not read its exponent, for instance)
        defs: list[str] = []
        used = set(re.findall(r"\bs(\d+)\b", body))
        for i in reversed(range(len(self.ops))):
            op = self.ops[i]
            if self.plan.kind[i] != "scalar" or str(i) not in used:
                continue
            if op.op == "scalar_param":
                e = _scalar_param(op.dtype, self.scalar_index[str(op.attr)])
                self.uses_scalars = True
            elif op.op == "literal":
                e = literal(op.attr, op.dtype)
            elif op.op in ELEMENTWISE:
                e = self.value(i, None)
            else:
                raise NotImplementedError(f"scalar op `{op.op}`")
            text = C.to_c(e)
            used |= set(re.findall(r"\bs(\d+)\b", text))
            defs.append(f"    const {CTYPE[op.dtype]} s{i} = {text};")
        return "\n".join(defs[::-1] + [body])

    def temps(self) -> list[tuple[str, str, int]]:
        """(C type, name, elements) of every array temporary."""
        out = []
        for u in sorted(self.plan.mat):
            op = self.ops[u]
            out.append((CTYPE[op.dtype], f"t{u}", op.shape[0] * op.shape[1]))
        return out

    def nests_by_row(self, group: list[_Nest]) -> None:
        """Nests whose rows are independent, one row of each in turn: what a nest reads from
        the one before is still in L1, and the loads and stores of a streaming kernel
        interleave (measured: RMSNorm over [524288, 128] 14-19 GB/s row by row, 11 GB/s nest
        by nest; blocks of 2-8 rows fall in between)."""
        out = self.out
        out(f"/* {len(group)} nests, row by row */")
        out.open(f"for (int64_t i = 0; i < {group[0].shape[0]}; ++i)")
        for nest in group:
            self.nest_header(nest)
            out.open("")
            self.nest_row(nest)
            out.close()
        out.close()

    def nest_header(self, nest: _Nest) -> None:
        rows, cols = nest.shape
        what = ", ".join(f"{self.ops[i].op}#{i}"
                         for i in sorted(nest.ops + nest.rowreds + nest.colreds))
        self.out(f"/* [{rows}, {cols}] level {nest.level}: {what} */")

    def nest(self, nest: _Nest) -> None:
        out = self.out
        rows, cols = nest.shape
        self.nest_header(nest)
        for r in nest.colreds:
            dt = self.ops[r].dtype
            out(f"for (int64_t j = 0; j < {cols}; ++j) t{r}[j] = "
                f"{C.to_c(_reduce_init(self.ops[r].op, dt))};")
        out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
        self.nest_row(nest)
        out.close()
        for r in nest.colreds:
            if self.ops[r].op == "colmean":
                d = C.float_lit(float(rows), CTYPE[self.ops[r].dtype])
                out(f"for (int64_t j = 0; j < {cols}; ++j) t{r}[j] = t{r}[j] / {C.to_c(d)};")

    def nest_row(self, nest: _Nest) -> None:
        """Row i of a nest: every element, and the row reductions' lanes."""
        out = self.out
        rows, cols = nest.shape
        if not nest.rowreds:
            out.open(f"for (int64_t j = 0; j < {cols}; ++j)")
            self.element(nest, None)
            out.close()
            return
        for r in nest.rowreds:
            op = self.ops[r]
            out(f"{CTYPE[op.dtype]} a{r}[{LANES}];")
            out(f"for (int l = 0; l < {LANES}; ++l) a{r}[l] = "
                f"{C.to_c(_reduce_init(op.op, op.dtype))};")
        main = cols - cols % LANES
        if main:
            out.open(f"for (int64_t jb = 0; jb < {main}; jb += {LANES})")
            out("WSP_LANE_LOOP")
            out.open(f"for (int64_t l = 0; l < {LANES}; ++l)")
            out("const int64_t j = jb + l;")
            self.element(nest, "l")
            out.close()
            out.close()
        if cols % LANES:
            out.open(f"for (int64_t j = {main}; j < {cols}; ++j)")
            self.element(nest, f"j - {main}" if main else "j")
            out.close()
        for r in nest.rowreds:
            op = self.ops[r]
            # decision: the lanes are folded in halves, written out: as a loop over the halving
            # width gcc emitted a scalar loop that took a third of an in-cache RMSNorm row
            w = LANES // 2
            while w:
                for l in range(w):
                    step = _reduce_step(op.op, Raw(f"a{r}[{l}]"), Raw(f"a{r}[{l + w}]"), op.dtype)
                    out(f"a{r}[{l}] = {C.to_c(step)};")
                w //= 2
            res = Raw(f"a{r}[0]")
            if op.op == "rowmean":
                res = C.binop("/", res, C.float_lit(float(cols), CTYPE[op.dtype]))
            out(f"t{r}[{'i' if rows > 1 else '0'}] = {C.to_c(res)};")

    def element(self, nest: _Nest, lane: Optional[str]) -> None:
        """The per-element statements of a nest at (i, j)."""
        out = self.out
        self.memo = {}
        rows, cols = nest.shape
        here = C.iadd(C.imul("i", cols) if rows > 1 else Raw("0"), "j" if cols > 1 else 0)
        for i in nest.ops:
            op = self.ops[i]
            out(f"const {CTYPE[op.dtype]} v{i} = {C.to_c(self.value(i, nest))};")
            if i in self.plan.mat:
                out(f"t{i}[{C.to_c(here)}] = v{i};")
        for r in nest.rowreds:
            x = self.operand(self.ops[r].args[0], nest)
            step = _reduce_step(self.ops[r].op, Raw(f"a{r}[{lane}]"), x, self.ops[r].dtype)
            out(f"a{r}[{lane}] = {C.to_c(step)};")
        for r in nest.colreds:
            x = self.operand(self.ops[r].args[0], nest)
            jj = "j" if cols > 1 else "0"
            step = _reduce_step(self.ops[r].op, Raw(f"t{r}[{jj}]"), x, self.ops[r].dtype)
            out(f"t{r}[{jj}] = {C.to_c(step)};")
        for pname, v in nest.stores:
            self.store_at(pname, Raw(f"v{v}"), self.ops[v].dtype, Raw("i"), Raw("j"))

    def store_at(self, pname: str, e: Expr, dtype: str, i: Expr, j: Expr) -> None:
        t = self.tile_index[pname]
        p = self.tiles[t]
        off = C.iadd(C.imul(i, self.rs(t)) if p.rows > 1 else Raw("0"), j if p.cols > 1 else 0)
        self.out(f"{self.ptr(t)}[{C.to_c(off)}] = {C.to_c(store_value(e, dtype, p.dtype))};")

    def final_store(self, pname: str, v: int) -> None:
        out = self.out
        p = self.tiles[self.tile_index[pname]]
        out(f"/* store {_comment(pname)} */")
        out.open(f"for (int64_t i = 0; i < {p.rows}; ++i)")
        out.open(f"for (int64_t j = 0; j < {p.cols}; ++j)")
        sv = self.ops[v].shape
        if sv is None:
            e: Expr = Raw(f"s{v}")
        else:
            e = self.access(v, *_at(sv, Raw("i"), Raw("j")))
        self.store_at(pname, e, self.ops[v].dtype, Raw("i"), Raw("j"))
        out.close()
        out.close()

    def matmul(self, m: int) -> None:
        out = self.out
        op = self.ops[m]
        a, b = op.args[0], op.args[1]
        rows, cols = op.shape
        inner = self.ops[a].shape[1]
        out(f"/* [{rows}, {cols}] matmul#{m}: K = {inner} */")
        here = C.iadd(C.imul("i", cols) if rows > 1 else Raw("0"), "j" if cols > 1 else 0)
        cell = f"t{m}[{C.to_c(here)}]"
        if len(op.args) > 2:
            acc = op.args[2]
            sa = self.ops[acc].shape
            init = self.access(acc, *_at(sa, Raw("i"), Raw("j"))) if sa else Raw(f"s{acc}")
            init = convert(init, self.ops[acc].dtype, "f32")
        else:
            init = C.float_lit(0.0, "float")
        if _mm_blocked(rows, cols, inner):
            # decision: the product is summed from 0 and `acc` added once at the end, as in
            # the reference (acc + a @ b): in one K chunk by the block's store (t holds acc),
            # over several chunks (partial sums in t) by a last pass
            chunked = inner > _mm_kc(rows, self.a_rows(a) is None)
            if m in self.plan.into:  # the tile already holds acc, if there is one
                self.matmul_blocked(m, "kc" if chunked else "add" if len(op.args) > 2 else "set")
                return
            if len(op.args) > 2 and not chunked:
                out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
                out(f"for (int64_t j = 0; j < {cols}; ++j) {cell} = {C.to_c(init)};")
                out.close()
            self.matmul_blocked(m, "kc" if chunked else "add" if len(op.args) > 2 else "set")
            if len(op.args) > 2 and chunked:
                out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
                out(f"for (int64_t j = 0; j < {cols}; ++j) {cell} = {C.to_c(init)} + {cell};")
                out.close()
            return
        out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
        out(f"for (int64_t j = 0; j < {cols}; ++j) {cell} = {C.to_c(init)};")

        def a_at(k: Expr) -> str:
            e = self.access(a, Raw("i") if rows > 1 else Raw("0"), k if inner > 1 else Raw("0"))
            return C.to_c(convert(e, self.ops[a].dtype, "f32"))

        def b_at(k: Expr) -> str:
            e = self.access(b, k if inner > 1 else Raw("0"), Raw("j") if cols > 1 else Raw("0"))
            return C.to_c(convert(e, self.ops[b].dtype, "f32"))

        # decision: a small matmul (fewer than MM_MIN_ROWS rows or MM_NR columns) runs i-k-j
        # (the inner loop over the output's columns vectorises), k unrolled by 4 with the
        # partial sum in a register; the sum is accumulated in f32 in k order with fused
        # multiply-adds where the target has them
        step = 4 if inner >= 4 else 1
        main = inner - inner % step
        out.open(f"for (int64_t k = 0; k < {main}; k += {step})")
        ks = [Raw("k")] + [C.binop("+", "k", d) for d in range(1, step)]
        for d, kk in enumerate(ks):
            out(f"const float a{d} = {a_at(kk)};")
        out.open(f"for (int64_t j = 0; j < {cols}; ++j)")
        out(f"float c = {cell};")
        for d, kk in enumerate(ks):
            out(f"c = WSP_FMAF(a{d}, {b_at(kk)}, c);")
        out(f"{cell} = c;")
        out.close()
        out.close()
        if main < inner:
            out.open(f"for (int64_t k = {main}; k < {inner}; ++k)")
            out(f"const float a0 = {a_at(Raw('k'))};")
            out(f"for (int64_t j = 0; j < {cols}; ++j) "
                f"{cell} = WSP_FMAF(a0, {b_at(Raw('k'))}, {cell});")
            out.close()
        out.close()

    def matmul_blocked(self, m: int, mode: str) -> None:
        """t{m} (already holding acc, or 0) += a @ b, register-blocked: B is packed, MM_KC rows
        at a time, into a contiguous zero-padded panel of MM_NR columns; an MM_MR x MM_NR block
        of C is held in 2 * MM_MR vectors of 8 floats (GCC vector extensions, no intrinsics
        header) and accumulated over k with one broadcast of a per row and vector FMAs."""
        # decision: 6 x 16 blocks (12 accumulators + 2 rows of B + 1 broadcast = 15 of the 16
        # AVX2 registers); the last rows % 6 rows run as one smaller block, the last cols % 16
        # columns through a 16-wide copy of C and the zero-padded panel; measured on 64^3
        # tiles of 1024-wide matrices 45-54 GFLOP/s per core against 20-22 for the i-k-j loop
        # (noisy machine); the 1024^3 gemm example went from ~25 to ~38 GFLOP/s on 2 workers.
        # Besides the temporaries, bp, cb and ap take up to ~49 KiB of stack
        out = self.out
        op = self.ops[m]
        a, b = op.args[0], op.args[1]
        rows, cols = op.shape
        inner = self.ops[a].shape[1]
        mr, nr = MM_MR, MM_NR
        nblk = -(-rows // mr)
        kc_max = _mm_kc(rows, self.a_rows(a) is None)
        kc_len = min(inner, kc_max)
        out.open("")
        out("typedef float wsp_v8 __attribute__((vector_size(32)));")
        out("typedef float wsp_v8u __attribute__((vector_size(32), aligned(4)));")
        out("#if defined(__FMA__) && defined(__AVX__)")
        out("#define WSP_MM_FMA(x, y, z) __builtin_ia32_vfmaddps256((x), (y), (z))")
        out("#else")
        out("#define WSP_MM_FMA(x, y, z) ((x) * (y) + (z))")
        out("#endif")
        out(f"_Alignas(64) float bp[{kc_len * nr}];")
        out(f"_Alignas(64) float cb[{mr * nr}];")
        if self.a_rows(a) is None:
            out(f"_Alignas(64) float ap[{nblk * mr * kc_len}];")
        if inner > kc_max:
            out.open(f"for (int64_t kc = 0; kc < {inner}; kc += {kc_max})")
            out(f"const int64_t kn = {inner} - kc < {kc_max} ? {inner} - kc : {kc_max};")
        else:
            out.open("")
            out("const int64_t kc = 0, kn = " + str(inner) + ";")
        if self.a_rows(a) is None:
            # A's chunk, converted to f32, as [row block][k][row in block]
            ea = self.access(a, Raw("i") if rows > 1 else Raw("0"),
                             C.iadd("kc", "k") if inner > 1 else Raw("0"))
            out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
            out(f"for (int64_t k = 0; k < kn; ++k) ap[(i / {mr}) * ({mr} * kn) + k * {mr} + i % {mr}]"
                f" = {C.to_c(convert(ea, self.ops[a].dtype, 'f32'))};")
            out.close()
        out.open(f"for (int64_t jb = 0; jb < {cols}; jb += {nr})")
        out(f"const int64_t jn = {cols} - jb < {nr} ? {cols} - jb : {nr};")
        kk = C.iadd("kc", "k")

        def b_at(j: Expr) -> str:
            e = self.access(b, kk, C.iadd("jb", j) if cols > 1 else Raw("0"))
            return C.to_c(convert(e, self.ops[b].dtype, "f32"))

        # decision: a full panel row is packed as 8-element vector initialisers (gcc makes
        # them vector loads); a copy loop became a `rep movsl` per 64 bytes, measured 27% of
        # the kernel on 64^3 tiles
        out.open(f"if (jn == {nr})")
        out.open("for (int64_t k = 0; k < kn; ++k)")
        for v in range(nr // 8):
            elems = ", ".join(b_at(Raw(str(8 * v + l))) for l in range(8))
            out(f"*(wsp_v8 *)(bp + k * {nr} + {8 * v}) = (wsp_v8){{{elems}}};")
        out.close()
        out.close()
        out.open("else")
        out.open("for (int64_t k = 0; k < kn; ++k)")
        out(f"for (int64_t l = 0; l < jn; ++l) bp[k * {nr} + l] = {b_at(Raw('l'))};")
        out(f"for (int64_t l = jn; l < {nr}; ++l) bp[k * {nr} + l] = 0.0f;")
        out.close()
        out.close()
        full = rows - rows % mr
        if full:
            out.open(f"for (int64_t i0 = 0; i0 < {full}; i0 += {mr})")
            self.matmul_block(m, mr, mode)
            out.close()
        if rows % mr:
            out.open("")
            out(f"const int64_t i0 = {full};")
            self.matmul_block(m, rows % mr, mode)
            out.close()
        out.close()  # jb
        out.close()  # kc
        out("#undef WSP_MM_FMA")
        out.close()

    def a_rows(self, a: int) -> Optional[tuple[str, str]]:
        """(pointer, row stride) of a matmul's A operand read in place (_a_in_place), or None
        when it is packed."""
        # decision: reading A in place (a micro-block reads 6 rows, each sequentially) instead
        # of packing it measured 70-89 against 52-63 GFLOP/s on 64^3 tiles in cache, and
        # ~50 against ~44 on the tiles of 1024-wide matrices (noisy machine, one core): the
        # scalar packing loop cost more than the strided rows it avoided
        if not _a_in_place(self.ops, self.plan.mat, a):
            return None
        op = self.ops[a]
        if op.op == "param":
            t = self.tile_index[str(op.attr)]
            return self.ptr(t), self.rs(t)
        return f"t{a}", str(op.shape[1])

    def matmul_block(self, m: int, r: int, mode: str) -> None:
        """Rows i0 .. i0 + r of C, columns jb .. jb + jn, summed over k in kc .. kc + kn and
        stored into t{m} (`set`), added to it (`add`), or set when kc == 0 and added otherwise
        (`kc`)."""
        out = self.out
        op = self.ops[m]
        cols = op.shape[1]
        nr, nv = MM_NR, MM_NR // 8
        if m in self.plan.into:
            t = self.tile_index[self.plan.into[m]]
            dst, stride = self.ptr(t), self.rs(t)
        else:
            dst, stride = f"t{m}", str(cols)
        out(f"float *cp = &{dst}[i0 * {stride} + jb];")
        out(f"int64_t cs = {stride};")
        out.open(f"if (jn != {nr})")
        if mode != "set":
            out(f"for (int64_t q = 0; q < {r}; ++q) for (int64_t l = 0; l < {nr}; ++l) "
                f"cb[q * {nr} + l] = l < jn ? cp[q * {stride} + l] : 0.0f;")
        out(f"cp = cb; cs = {nr};")
        out.close()
        for q in range(r):
            out("wsp_v8 " + ", ".join(f"c{q}_{v} = {{0}}" for v in range(nv)) + ";")
        direct = self.a_rows(op.args[0])
        if direct is None:
            out(f"const float *ak = ap + (i0 / {MM_MR}) * ({MM_MR} * kn);")
        else:
            out(f"const float *ak = {direct[0]} + i0 * {direct[1]} + kc;")
        out.open("for (int64_t k = 0; k < kn; ++k)")
        out("const float *bk = bp + k * " + str(nr) + ";")
        for v in range(nv):
            out(f"const wsp_v8 b{v} = *(const wsp_v8 *)(bk + {8 * v});")
        for q in range(r):
            at = f"ak[k * {MM_MR} + {q}]" if direct is None else f"ak[{q} * {direct[1]} + k]"
            out(f"const float a{q} = {at};")
            out(f"const wsp_v8 av{q} = {{{', '.join([f'a{q}'] * 8)}}};")
            for v in range(nv):
                out(f"c{q}_{v} = WSP_MM_FMA(av{q}, b{v}, c{q}_{v});")
        out.close()
        def store(add: bool) -> None:
            for q in range(r):
                for v in range(nv):
                    at = f"*(wsp_v8u *)(cp + {q} * cs + {8 * v})"
                    out(f"{at} = {at + ' + ' if add else ''}c{q}_{v};")
        if mode == "kc":
            out.open("if (kc == 0)")
            store(False)
            out.close()
            out.open("else")
            store(True)
            out.close()
        else:
            store(mode == "add")
        out.open(f"if (jn != {nr})")
        out(f"for (int64_t q = 0; q < {r}; ++q) for (int64_t l = 0; l < jn; ++l) "
            f"{dst}[(i0 + q) * {stride} + jb + l] = cb[q * {nr} + l];")
        out.close()


def _a_in_place(ops: list[N.Op], mat: set[int], a: int) -> bool:
    """Whether a blocked matmul reads its A operand in place: an f32 tile parameter (columns
    contiguous: the entry point copies strided ones) or an f32 temporary; otherwise A is
    converted or computed into a packed panel."""
    op = ops[a]
    if op.dtype != "f32" or op.shape is None or op.shape[0] < 2 or op.shape[1] < 2:
        return False
    return op.op == "param" or a in mat


def _mm_blocked(rows: int, cols: int, inner: int) -> bool:
    """Whether a matmul of this shape runs register-blocked (else i-k-j)."""
    return rows >= MM_MIN_ROWS and cols >= MM_NR and inner >= 4


def _mm_kc(rows: int, packed: bool = True) -> int:
    """K chunk of a blocked matmul: MM_KC (the B panel, MM_KC x MM_NR, stays in L1), less when
    a packed A chunk (rows rounded up to MM_MR, x the chunk) would outgrow MM_APACK bytes."""
    if not packed:
        return MM_KC
    rows_p = -(-rows // MM_MR) * MM_MR
    return max(16, min(MM_KC, MM_APACK // (4 * rows_p)) // 4 * 4)


def _row_groups(plan: _Plan) -> list[tuple[str, object]]:
    """The plan's steps with runs of row-independent nests merged into ("rows", [nests]).

    A run is consecutive nests of the same number of rows (more than one) without column
    reductions (complete only after the last row), where no op reads a value produced in the
    run from another row (a `transpose` of it; slices, interleave and broadcasting keep rows).
    """
    # decision: row-independent nests run row by row (RMSNorm, softmax, most normalisations):
    # a streaming kernel then interleaves its loads and stores, which measured 20-40% faster
    # over large tensors than running each nest over the whole tile
    ops, kind = plan.ops, plan.kind

    def other_rows(u: int, produced: set[int], moved: bool) -> bool:
        """Whether reading u reads a value produced in the run at another row."""
        if u in produced:
            return moved
        if kind[u] in ("view", "inline"):
            moved = moved or ops[u].op == "transpose"
            return any(other_rows(a, produced, moved) for a in ops[u].args)
        return False

    out: list[tuple[str, object]] = []
    run: list[_Nest] = []
    produced: set[int] = set()

    def flush():
        if len(run) > 1:
            out.append(("rows", list(run)))
        elif run:
            out.append(("nest", run[0]))
        run.clear()
        produced.clear()

    for step, item in plan.steps:
        if step != "nest" or item.colreds or item.shape[0] == 1:
            flush()
            out.append((step, item))
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


def _emit_tile_kernel(k: N.Kernel) -> str:
    plan = _plan(k)
    em = _Emitter(k, plan)
    body = em.emit()
    tiles = em.tiles
    decls = []
    for t in sorted(em.used_ptr | em.used_rs):
        p = tiles[t]
        const = "const " if p.mode == "In" else ""
        if t in em.used_ptr:
            decls.append(f"{const}{STORAGE[p.dtype]} *restrict const p{t} = "
                         f"({const}{STORAGE[p.dtype]} *)tiles[{t}].data;")
        if t in em.used_rs:
            decls.append(f"const int64_t p{t}_rs = tiles[{t}].stride;")
    temps = em.temps()
    total = sum(_aligned(n * _csize(ct)) for ct, _, n in temps)
    heap = total > STACK_LIMIT
    arena = []
    offset = 0
    for ct, name, n in temps:
        if heap:
            arena.append(f"{ct} *restrict const {name} = ({ct} *)(wsp_arena + {offset});")
            offset += _aligned(n * _csize(ct))
        else:
            arena.append(f"_Alignas(64) {ct} {name}[{n}];")
    order = [em.tile_index[pn] for pn, _ in k.stores]
    return _env().get_template("kernel.c.j2").render(
        name=_comment(k.name), source=_comment(k.source), symbol=kernel_symbol(k),
        body_symbol=C.c_ident("wsp_kb_", k.name), params=[_comment(_describe(p)) for p in k.params],
        decls=decls, temps=arena, heap=total if heap else 0, body=body,
        uses_scalars=em.uses_scalars,
        uses_tiles=bool(decls),
        ntiles=len(tiles), esize=[ESIZE[p.dtype] for p in tiles],
        modes=[_MODE_BITS[p.mode] for p in tiles], order=order,
        shapes=[(p.rows, p.cols) for p in tiles],
    )


def _describe(p: N.KParam) -> str:
    if p.kind == "tile":
        return f"{p.name}: {p.mode}[Tile[{p.rows}, {p.cols}, {p.dtype}]]"
    return f"{p.name}: Scalar[{p.dtype}]"


def _csize(ctype: str) -> int:
    return {"float": 4, "double": 8, "int8_t": 1, "int16_t": 2, "int32_t": 4, "int64_t": 8,
            "uint8_t": 1, "uint16_t": 2, "uint32_t": 4, "uint64_t": 8}[ctype]


def _aligned(n: int) -> int:
    return (n + 63) // 64 * 64


__all__ = ["KernelC", "emit_kernel", "emit_kernels", "kernel_symbol", "support_header"]
