"""Emit C for kernels: `emit_kernel(k) -> KernelC` (one function) and `emit_kernels(kernels) -> str`
(one translation unit). Strings only: nothing here writes, compiles or loads a file.

The ABI is `wsp_runtime.h`'s: `int wsp_k_<name>(const wsp_tile *tiles, const wsp_scalar *scalars)`,
`tiles` in the order of the kernel's tile parameters, `scalars` in the order of its scalar
parameters (float dtypes in `.f` as a double, integers and bool in `.i`, bool as 0/1). It
returns 0; WSP_ERR_INTERNAL (4) when the copying slow path runs out of memory; WSP_ERR_USAGE (5)
when a tile's rows/cols differ from the kernel's static shape (a bug in the caller).

How a tile kernel becomes C (each step is a function below):
1. The plan (`ir/passes/plan_kernels.py`, the `plan-kernels` pass at -O2 and up) is attached to
   the kernel: its ops (dead ops dropped, `softmax` expanded, copies), which are inline, which
   share a loop nest at which level, which reductions accumulate in which nest, which values
   are materialised in local arrays and which buffer each array is (buffers reused by
   liveness), the steps in order (nests, nests run row by row, matmuls with their blocking),
   and the stores after them. This file decides none of that: it follows the plan. A kernel
   without one (-O0) gets `plan_kernel(k, fuse=False)`: one nest per op, every value in an
   array of its own, every store after the nests.
2. `_Emitter`: the C body (each value's expression from `kernel_values.py`), with `restrict`
   pointers, static trip counts and inner loops over columns that gcc -O3 vectorises (row
   reductions use 16 lane accumulators, so a float sum vectorises without -ffast-math;
   floating-point choices are branch-free bit selects).
3. The entry point (template `kernel.c.j2`) checks that every tile has contiguous columns and
   that no written tile overlaps another one, and otherwise runs the same body on contiguous
   copies (`wsp_call_copied` in `wsp_kernels.h`), so the body's `restrict` promises always hold
   and a kernel whose output aliases its input still reads entry values. A partial view runs on
   a padded copy (`wsp_call_padded`), except `In` tiles with fewer rows than the tile that
   some call passes (`row_partial_tiles`): a second body reads those in place, a row past the
   view reading a row of pad values (`_Emitter.row_at`), where every form that reads them
   addresses their rows through it (the register-blocked matmul reading one in place does
   not: that kernel keeps the copy).

`extern c` kernels (template `extern_kernel.c.j2`): the body becomes a `static void` function
whose parameters are the kernel's, named as in the source: a tile `p` is a `wsp_in_<dtype>` /
`wsp_out_<dtype>` struct (`p.data`, `p.rows`, `p.cols`, `p.stride`), a scalar a plain C value.
Strided tiles are copied to contiguous buffers around the call. A `#line` directive maps the
body to its `.wsp` file, so C compiler errors point into the user's source.

Value semantics are nodes.py's (see `kernel_values.py`, which writes each value's C).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping, Optional

from ...diagnostics import InternalError, printable
from ...dtypes import kind_of, round_float, size_of
from ...ir import kernel_plan as KP
from ...ir import nodes as N
from ...ir import visit as V
from ...ir.passes import plan_kernels as PK
from ...primitives import GATHER_OPS, OPS, VALID_OPS
from .. import cexpr as C
from ..cexpr import Expr, Raw
from ..templates import template_env
from .kernel_values import (
    CTYPE,
    STORAGE,
    convert,
    elementwise,
    literal,
    load,
    pad_bits,
    reduce_init,
    reduce_step,
    scalar_param,
    select,
    store_value,
)
from .matmul_forms import MatmulForms

_MODE_BITS = {"In": 1, "Out": 2, "InOut": 3}

ELEMENTWISE = frozenset(n for n, s in OPS.items() if s.plan == "ew")
LANES = 16  # accumulators per row reduction: two AVX2 vectors of f32
# decision: temporaries up to 64 KiB live on the stack (worker threads have at least that);
# larger kernels take one malloc'd block per call
STACK_LIMIT = 64 * 1024

_HERE = Path(__file__).resolve().parent


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


def _env():
    return template_env(str(_HERE / "templates"))


@lru_cache(maxsize=None)
def support_header() -> str:
    """The text of `wsp_kernels.h` (pasted into every kernel translation unit)."""
    return (_HERE / "wsp_kernels.h").read_text()


_RESTORE = "/* wsp:restore-line */"


def emit_kernels(kernels: Iterable[N.Kernel], filename: str = "kernels.c",
                 sources: Optional[Mapping[str, str]] = None,
                 row_partial: Optional[Mapping[str, frozenset]] = None) -> str:
    """One C translation unit defining every kernel's entry point (needs `wsp_runtime.h` on the
    include path; `filename` is the name it is compiled under, for `#line` after extern bodies;
    `sources` the module's source texts, where `#line` finds each extern body; `row_partial`
    the tiles of each kernel some call passes views of fewer rows: `row_partial_tiles`)."""
    parts = [emit_kernel(k, sources, (row_partial or {}).get(k.name, frozenset()))
             for k in kernels]
    text = _env().get_template("kernels.c.j2").render(support=support_header(), kernels=parts)
    if _RESTORE not in text:
        return text
    lines = text.split("\n")
    quoted = C.line_file_lit(filename)
    for n, line in enumerate(lines):
        if line == _RESTORE:
            lines[n] = f"#line {n + 2} {quoted}"
    return "\n".join(lines)


def row_partial_tiles(m: N.Module) -> dict[str, frozenset]:
    """{kernel: its tiles that some call reads through a view that may have fewer rows than
    the tile, and all its columns}: those get a body reading them in place
    (`_emit_tile_kernel`)."""
    found: dict[str, set] = {}
    for sc in m.schedules:
        for task in V.tasks(sc.body):
            for a in task.args:
                if isinstance(a, N.TileArg) and a.partial == (True, False) and a.mode == "r" \
                        and a.gather is None and not a.transposed:
                    found.setdefault(task.kernel, set()).add(a.param)
    return {k: frozenset(v) for k, v in found.items()}


def emit_kernel(k: N.Kernel, sources: Optional[Mapping[str, str]] = None,
                row_partial: frozenset = frozenset()) -> KernelC:
    """The C of one kernel (see the module docstring for the ABI)."""
    tiles = tuple(p.name for p in k.params if p.kind == "tile")
    scalars = tuple(p.name for p in k.params if p.kind == "scalar")
    if k.is_extern:  # `emit_module` rejects extern kernels without an `extern c` body
        source = _emit_extern(k, sources or {})
    else:
        source = _emit_tile_kernel(k, row_partial)
    return KernelC(k.name, kernel_symbol(k), source, tiles, scalars)


def _comment(s: str) -> str:
    # ASCII, whatever names the embedding gave (the unit is written in the locale's encoding)
    return s.encode("ascii", "backslashreplace").decode("ascii").replace("*/", "* /")


# ---------------------------------------------------------------------------------------------
# extern c kernels


def _body_line(k: N.Kernel, sources: Mapping[str, str],
               lang: str = "c") -> Optional[tuple[str, int, bool]]:
    """The file and line where the kernel's `extern <lang>` body starts (in a .wsp file the
    character after its opening quote), and whether the body is a raw string. Without the
    file's text (an IR built by hand) the body is taken to be a raw string ending the
    declaration."""
    if not k.span.line or k.span.file == N.NO_SPAN.file:
        return None
    file = k.span.file
    text = sources.get(file)
    if text is None:
        start = k.span.end_line - (getattr(k, f"extern_{lang}") or "").count("\n")
        return (file, start, True) if k.span.line <= start else None
    lines = text.split("\n")
    if k.span.end_line > len(lines):
        return None
    start = sum(len(x) + 1 for x in lines[:k.span.line - 1]) + k.span.col - 1
    end = sum(len(x) + 1 for x in lines[:k.span.end_line - 1]) + k.span.end_col - 1
    m = _EXTERN_BODY[lang].search(text, start, end)
    if m is not None:
        return file, text.count("\n", 0, m.end()) + 1, m.group(1) == '"""'
    # decision: a body the embedding gave (`@kernel(cpp_src=...)` in a .py file) maps to where
    # its text stands in the file when it stands there once, verbatim; a body read from a file
    # (`cpp_body_path`, which the embedding makes a source of the module) maps to that file
    # when it is the file's whole text; otherwise (a body with escapes) each of its lines maps
    # to the kernel's line
    body = getattr(k, f"extern_{lang}") or ""
    if body.strip() and text.count(body) == 1:
        return file, text.count("\n", 0, text.index(body)) + 1, True
    for other, whole in sources.items():
        if body.strip() and whole.rstrip("\n") == body.rstrip("\n"):
            return other, 1, True
    return file, k.span.line, False


# `extern c` and its opening quote (a raw string's body starts right after its quotes; a
# one-line string's escapes are not line breaks, so only its first line maps exactly)
_EXTERN_BODY = {"c": re.compile(r'\bextern\s+c\s*("""|")'),
                "cpp": re.compile(r'\bextern\s+cpp(?:\s+include\s*"[^"\n]*")*\s*("""|")')}


def body_with_line(k: N.Kernel, sources: Mapping[str, str], lang: str) -> tuple[Optional[str], str]:
    """The `#line` directive mapping kernel `k`'s `extern <lang>` body to its `.wsp` file (None
    when the file is unknown) and the body, with a one-line string's lines each mapped."""
    body = getattr(k, f"extern_{lang}") or ""
    where = _body_line(k, sources, lang)
    if where is None:
        return None, body
    # the file's printable name (diagnostics.printable): what the compiler says about the
    # body is then text, and names the file as wspc's diagnostics do
    file, start, raw = where
    line = f"#line {start} {C.line_file_lit(printable(file))}"
    if not raw:  # a one-line string (its `\n` escapes are not lines of the file), or a body
        # whose lines are not the file's: every line is mapped
        parts = body.split("\n")
        body = "\n".join(part if n == 0 or parts[n - 1].endswith("\\") else f"{line}\n{part}"
                         for n, part in enumerate(parts))
    return line, body


def extern_formals(k: N.Kernel, cxx: bool = False) -> list[str]:
    """The parameters of the function an extern body becomes (C, or C++ for `extern cpp`: the
    same structs, `bool` for `_Bool`)."""
    formals = []
    for p in k.params:
        if p.kind == "tile":
            formals.append(f"wsp_{'in' if p.mode == 'In' else 'out'}_{p.dtype} {_extern_name(p.name)}")
        elif p.kind == "scalar":
            # decision: extern scalars are plain C values: float for f32/f16/bf16 (f16/bf16
            # rounded), double for f64, the fixed-width integer types, and _Bool for bool
            ctype = ("bool" if cxx else "_Bool") if p.dtype == "bool" else CTYPE[p.dtype]
            formals.append(f"{ctype} {_extern_name(p.name)}")
    return formals


def _emit_extern(k: N.Kernel, sources: Mapping[str, str]) -> str:
    sym = kernel_symbol(k)
    tiles = [p for p in k.params if p.kind == "tile"]
    scalars = [p for p in k.params if p.kind == "scalar"]
    formals, actuals = extern_formals(k), []
    for t, p in enumerate(tiles):
        struct = f"wsp_{'in' if p.mode == 'In' else 'out'}_{p.dtype}"
        const = "const " if p.mode == "In" else ""
        actuals.append(f"({struct}){{({const}{STORAGE[p.dtype]} *)tiles[{t}].data, "
                       f"tiles[{t}].rows, tiles[{t}].cols, tiles[{t}].stride}}")
    for s, p in enumerate(scalars):
        actuals.append(C.to_c(scalar_param(p.dtype, s)))
    # decision: a kernel with an `extern cpp` body runs it (cpu_sim prefers C++ when both are
    # given); its function is defined in the C++ unit (cpp_kernels.py), declared here
    cpp = k.extern_cpp is not None
    line, body = (None, "") if cpp else body_with_line(k, sources, "c")
    writes = [t for t, p in enumerate(tiles) if p.mode != "In"]
    return _env().get_template("extern_kernel.c.j2").render(
        name=_comment(k.name), source=_comment(k.source), symbol=sym,
        user_symbol=extern_symbol(k), cpp=cpp, call_symbol=C.c_ident("wsp_kc_", k.name),
        formals=formals or ["void"], actuals=actuals, body=body, line=line, restore=_RESTORE,
        esize=[size_of(p.dtype) for p in tiles], modes=[_MODE_BITS[p.mode] for p in tiles],
        order=writes, ntiles=len(tiles),
        shapes=[(p.rows, p.cols) for p in tiles], pads=[pad_bits(p) for p in tiles],
    )


def extern_symbol(k: N.Kernel) -> str:
    """The function an extern body becomes (static in C; `extern "C"` in the C++ unit)."""
    return C.c_ident("wsp_ku_", k.name)


def _extern_name(name: str) -> str:
    # decision: an extern kernel's parameters keep their names (the body refers to them); a name
    # that is a C keyword cannot be referred to from C anyway and becomes `wsp_p_<name>`
    return name if C.is_c_name(name) else C.c_ident("wsp_p_", name)


# ---------------------------------------------------------------------------------------------
# 3. Emitting the body


def _at(shape: tuple[int, int], i: Expr, j: Expr) -> tuple[Expr, Expr]:
    """The index of an element (i, j) of a broadcast value of `shape` (extent 1: index 0)."""
    return (i if shape[0] > 1 else Raw("0"), j if shape[1] > 1 else Raw("0"))


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


class _Emitter(MatmulForms):
    """The body of one tile kernel from its plan (the small-M and dot-product matmul forms:
    `matmul_forms.py`)."""

    def __init__(self, k: N.Kernel, guard: frozenset = frozenset()):
        plan = k.plan
        self.k, self.plan, self.ops = k, plan, k.ops
        self.kind = plan.kinds
        self.nest_of = {i: t for s in plan.steps for t in s.nests
                        for i in t.ops + t.rowreds + t.colreds}
        self.buf = dict(plan.assign)  # materialised value -> its buffer
        self.into = dict(plan.into)
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
        self.uses_tiles = False  # the body reads tiles[] (decls, or a valid_rows/valid_cols)
        self.scratch: list[tuple[str, str, int]] = []  # (C type, name, elements) of selections
        # tiles read in place although their view may have fewer rows than the tile: a row at
        # or past tiles[t].rows reads a row of pad values instead (`row_at`). A form that
        # addresses such a tile otherwise sets `unguarded`: the variant is then not made
        self.guard = guard
        self.unguarded = False

    # -- names
    def ptr(self, t: int) -> str:
        self.used_ptr.add(t)
        return f"p{t}"

    def rs(self, t: int) -> str:
        self.used_rs.add(t)
        return f"p{t}_rs"

    def row_at(self, t: int, row: str) -> str:
        """The C address of row `row` of tile t (guarded tiles: of the pad row past the view)."""
        if self.tiles[t].rows == 1:
            return self.ptr(t)
        at = f"{self.ptr(t)} + ({row}) * {self.rs(t)}"
        return f"(({row}) < p{t}_vr ? {at} : p{t}_pz)" if t in self.guard else at

    def exponent_of(self, op: N.Op) -> Optional[float]:
        if op.op != "pow":
            return None
        e = self.ops[op.args[1]]
        if e.op == "literal" and isinstance(e.attr, (int, float)):
            v = float(e.attr)
            if kind_of(e.dtype) == "float":
                v = round_float(v, e.dtype)
            return v
        return None

    # -- reading values
    def access(self, u: int, i: Expr, j: Expr) -> Expr:
        """Value u at (i, j) of its own shape, for a value readable outside a nest."""
        op = self.ops[u]
        kd = self.kind[u]
        if kd == "scalar":
            return Raw(f"s{u}")
        if op.op == "param":
            t = self.tile_index[str(op.attr)]
            p = self.tiles[t]
            if t in self.guard and p.rows > 1:
                row = Raw(f"({self.row_at(t, C.to_c(i))})")
                return load(C.index(row, j if p.cols > 1 else Raw("0")), p.dtype)
            off = C.iadd(C.imul(i, self.rs(t)) if p.rows > 1 else Raw("0"), j if p.cols > 1 else 0)
            return load(C.index(self.ptr(t), off), p.dtype)
        if op.op == "literal":
            return literal(op.attr, op.dtype)
        if op.op == "iota_row":
            return convert(C.cast("int64_t", i), "i64", op.dtype)
        if op.op == "iota_col":
            return convert(C.cast("int64_t", j), "i64", op.dtype)
        if u in self.buf:
            rows, cols = op.shape
            off = C.iadd(C.imul(i, cols) if rows > 1 else Raw("0"), j if cols > 1 else 0)
            return C.index(self.arr(u), off)
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
        raise InternalError("cpu emit", f"value {u} ({op.op}) is not readable here")

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
            return select(C.binop("==", C.binop("&", j, 1), 0), va, vb, op.dtype)
        # a slice reads its operand in place at an offset (no copy unless the plan made one)
        if op.op == "slice_rows":
            return self.access(a, C.iadd(i, op.attr), j)
        if op.op == "slice_cols":
            return self.access(a, i, C.iadd(j, op.attr))
        if op.op in ("concat_rows", "concat_cols"):
            # a conditional (not the branch-free select, which reads both sides): the other
            # side's index is out of its range
            b = op.args[1]
            if op.op == "concat_rows":
                n = self.ops[a].shape[0]
                first, ib, jb = C.binop("<", i, n), C.binop("-", i, n), j
            else:
                n = self.ops[a].shape[1]
                first, ib, jb = C.binop("<", j, n), i, C.binop("-", j, n)
            va = convert(self.access(a, i, j), self.ops[a].dtype, op.dtype)
            vb = convert(self.access(b, ib, jb), self.ops[b].dtype, op.dtype)
            return C.cond(first, va, vb)
        if op.op in GATHER_OPS:
            # x read at the index idx holds (the row of gather_rows, the column of gather_cols)
            # under a conditional, so an index out of range reads nothing and gives 0; as
            # uint64_t a negative index is past every extent too (no wrap-around)
            b = op.args[1]
            by_rows = op.op == "gather_rows"
            k = self.access(b, i, Raw("0")) if by_rows else self.access(b, i, j)
            n = self.ops[a].shape[0 if by_rows else 1]
            ok = C.binop("<", C.cast("uint64_t", k), C.int_lit(n, "u64"))
            at = C.cast("int64_t", k)
            va = self.access(a, at, j) if by_rows else self.access(a, i, at)
            return C.cond(ok, va, literal(0, op.dtype))
        raise InternalError("cpu emit", f"`{op.op}` is not a view")

    def operand(self, u: int, nest: Optional[KP.LoopNest]) -> Expr:
        """Value u as an operand of an op computed at (i, j) of `nest` (None: a scalar op)."""
        if self.kind[u] == "scalar":
            return Raw(f"s{u}")
        if nest is not None and self.nest_of.get(u) is nest and self.kind[u] == "ew":
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

    def value(self, i: int, nest: Optional[KP.LoopNest]) -> Expr:
        op = self.ops[i]
        args = [self.operand(a, nest) for a in op.args]
        return elementwise(op, args, [self.ops[a].dtype for a in op.args], self.exponent_of(op))

    # -- the body
    def emit(self) -> str:
        out = self.out
        for step in self.plan.steps:
            if step.matmul is not None:
                self.matmul(step)
            elif step.select is not None:
                self.select_step(step.select)
            elif len(step.nests) > 1:
                self.nests_by_row(step.nests)
            else:
                self.nest(step.nests[0])
        for pname, v in self.plan.stores:
            self.final_store(pname, v)
        body = "\n".join(out.lines)
        # scalars, computed once; only those the body reads (a `pow` by a literal exponent
        # does not read its exponent, for instance)
        defs: list[str] = []
        used = set(re.findall(r"\bs(\d+)\b", body))
        for i in reversed(range(len(self.ops))):
            op = self.ops[i]
            if self.kind[i] != "scalar" or str(i) not in used:
                continue
            if op.op == "scalar_param":
                e = scalar_param(op.dtype, self.scalar_index[str(op.attr)])
                self.uses_scalars = True
            elif op.op == "literal":
                e = literal(op.attr, op.dtype)
            elif op.op in VALID_OPS:
                # the view's extent: tiles[t].rows/cols (a partial view's, else the tile's)
                which = "rows" if op.op == "valid_rows" else "cols"
                e = Raw(f"(int32_t)tiles[{self.tile_index[str(op.attr)]}].{which}")
                self.uses_tiles = True
            elif op.op in ELEMENTWISE:
                e = self.value(i, None)
            else:
                raise InternalError("cpu emit", f"no C for scalar op `{op.op}`")
            text = C.to_c(e)
            used |= set(re.findall(r"\bs(\d+)\b", text))
            defs.append(f"    const {CTYPE[op.dtype]} s{i} = {text};")
        return "\n".join(defs[::-1] + [body])

    def arr(self, u: int) -> str:
        """The local array holding materialised value u: its buffer (shared by liveness)."""
        return f"b{self.buf[u]}"

    def temps(self) -> list[tuple[str, str, int]]:
        """(C type, name, elements) of every buffer."""
        return [(CTYPE[dt], f"b{b}", n)
                for b, (dt, n) in enumerate(self.plan.buffers)] + self.scratch

    def nests_by_row(self, group: tuple[KP.LoopNest, ...]) -> None:
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

    def nest_header(self, nest: KP.LoopNest) -> None:
        rows, cols = nest.shape
        what = ", ".join(f"{self.ops[i].op}#{i}"
                         for i in sorted(nest.ops + nest.rowreds + nest.colreds))
        self.out(f"/* [{rows}, {cols}] level {nest.level}: {what} */")

    def nest(self, nest: KP.LoopNest) -> None:
        out = self.out
        rows, cols = nest.shape
        self.nest_header(nest)
        for r in nest.colreds:
            dt = self.ops[r].dtype
            out(f"for (int64_t j = 0; j < {cols}; ++j) {self.arr(r)}[j] = "
                f"{C.to_c(reduce_init(self.ops[r].op, dt))};")
        out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
        self.nest_row(nest)
        out.close()
        for r in nest.colreds:
            if self.ops[r].op == "colmean":
                d = C.float_lit(float(rows), CTYPE[self.ops[r].dtype])
                t = self.arr(r)
                out(f"for (int64_t j = 0; j < {cols}; ++j) {t}[j] = {t}[j] / {C.to_c(d)};")

    def nest_row(self, nest: KP.LoopNest) -> None:
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
                f"{C.to_c(reduce_init(op.op, op.dtype))};")
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
                for lane in range(w):
                    step = reduce_step(op.op, Raw(f"a{r}[{lane}]"), Raw(f"a{r}[{lane + w}]"),
                                       op.dtype)
                    out(f"a{r}[{lane}] = {C.to_c(step)};")
                w //= 2
            res = Raw(f"a{r}[0]")
            if op.op == "rowmean":
                res = C.binop("/", res, C.float_lit(float(cols), CTYPE[op.dtype]))
            out(f"{self.arr(r)}[{'i' if rows > 1 else '0'}] = {C.to_c(res)};")

    def element(self, nest: KP.LoopNest, lane: Optional[str]) -> None:
        """The per-element statements of a nest at (i, j)."""
        out = self.out
        self.memo = {}
        rows, cols = nest.shape
        here = C.iadd(C.imul("i", cols) if rows > 1 else Raw("0"), "j" if cols > 1 else 0)
        for i in nest.ops:
            op = self.ops[i]
            out(f"const {CTYPE[op.dtype]} v{i} = {C.to_c(self.value(i, nest))};")
            if i in self.buf:
                out(f"{self.arr(i)}[{C.to_c(here)}] = v{i};")
        for r in nest.rowreds:
            x = self.operand(self.ops[r].args[0], nest)
            step = reduce_step(self.ops[r].op, Raw(f"a{r}[{lane}]"), x, self.ops[r].dtype)
            out(f"a{r}[{lane}] = {C.to_c(step)};")
        for r in nest.colreds:
            x = self.operand(self.ops[r].args[0], nest)
            jj = "j" if cols > 1 else "0"
            cell = f"{self.arr(r)}[{jj}]"
            step = reduce_step(self.ops[r].op, Raw(cell), x, self.ops[r].dtype)
            out(f"{cell} = {C.to_c(step)};")
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

    def select_step(self, m: int) -> None:
        """`sort_values` / `sort_indices` m, row by row: the operand's row copied (converted to
        its held type) into a scratch row, its order by `wsp_order_<T>` (wsp_kernels.h), then
        the first k values or columns into m's array."""
        out = self.out
        op = self.ops[m]
        (a,) = op.args
        rows, n = self.ops[a].shape
        k = op.shape[1]
        ct = CTYPE[self.ops[a].dtype]
        x, idx, tmp = f"q{m}x", f"q{m}i", f"q{m}t"
        self.scratch += [(ct, x, n), ("int32_t", idx, n), ("int32_t", tmp, n)]
        out(f"/* [{rows}, {k}] {op.op}#{m} {op.attr} of [{rows}, {n}] */")
        out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
        row = C.to_c(self.access(a, *_at((rows, n), Raw("i"), Raw("j"))))
        out(f"for (int64_t j = 0; j < {n}; ++j) {x}[j] = {row};")
        desc = 1 if op.attr == "desc" else 0
        out(f"wsp_order_{ct}({x}, {n}, {k}, {desc}, {idx}, {tmp});")
        here = f"i * {k} + j" if rows > 1 else "j"
        got = f"{x}[{idx}[j]]" if op.op == "sort_values" else f"{idx}[j]"
        out(f"for (int64_t j = 0; j < {k}; ++j) {self.arr(m)}[{here}] = {got};")
        out.close()

    def matmul(self, step: KP.PlanStep) -> None:
        out = self.out
        m = step.matmul
        op = self.ops[m]
        a, b = op.args[0], op.args[1]
        rows, cols = op.shape
        inner = self.ops[a].shape[1]
        out(f"/* [{rows}, {cols}] matmul#{m}: K = {inner} */")
        here = C.iadd(C.imul("i", cols) if rows > 1 else Raw("0"), "j" if cols > 1 else 0)
        cell = "" if m in self.into else f"{self.arr(m)}[{C.to_c(here)}]"
        if len(op.args) > 2:
            acc = op.args[2]
            sa = self.ops[acc].shape
            init = self.access(acc, *_at(sa, Raw("i"), Raw("j"))) if sa else Raw(f"s{acc}")
            init = convert(init, self.ops[acc].dtype, "f32")
        else:
            init = C.float_lit(0.0, "float")
        if step.dot:
            self.matmul_dot(step, init)
            return
        if step.small:
            self.matmul_small(step, init)
            return
        if step.blocked:
            # decision: the product is summed from 0 and `acc` added once at the end, as in
            # the reference (acc + a @ b): in one K chunk by the block's store (t holds acc),
            # over several chunks (partial sums in t) by a last pass
            chunked = inner > step.kc
            if m in self.into:  # the tile already holds acc, if there is one
                self.matmul_blocked(step, "kc" if chunked else "add" if len(op.args) > 2 else "set")
                return
            if len(op.args) > 2 and not chunked:
                out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
                out(f"for (int64_t j = 0; j < {cols}; ++j) {cell} = {C.to_c(init)};")
                out.close()
            self.matmul_blocked(step, "kc" if chunked else "add" if len(op.args) > 2 else "set")
            if len(op.args) > 2 and chunked:
                out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
                out(f"for (int64_t j = 0; j < {cols}; ++j) {cell} = {C.to_c(init)} + {cell};")
                out.close()
            return
        # decision: summed from 0 and `acc` added at the end, as the blocked matmul does, so
        # -O0 (i-k-j) and -O2 (blocked) give the same bits
        out.open(f"for (int64_t i = 0; i < {rows}; ++i)")
        out(f"for (int64_t j = 0; j < {cols}; ++j) {cell} = 0.0f;")

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
        if len(op.args) > 2:
            out(f"for (int64_t j = 0; j < {cols}; ++j) {cell} = {C.to_c(init)} + {cell};")
        out.close()


def _emit_tile_kernel(k: N.Kernel, row_partial: frozenset = frozenset()) -> str:
    """The kernel's body function and entry point; with `row_partial` (names of `In` tiles some
    call passes views with fewer rows than the tile), also a body that reads those tiles in
    place, rows past the view reading the pad (language.md section 4, "Partial tiles")."""
    if k.plan is None:
        # decision: a kernel without a plan (-O0: the plan-kernels pass did not run) gets the
        # trivial plan: one loop nest per op, every value in an array of its own, every store
        # after the nests. Correct and slow on purpose: -O2's plan is what makes kernels fast
        k = PK.plan_kernel(k, fuse=False)
    body_symbol = C.c_ident("wsp_kb_", k.name)
    em, main = _tile_body(k, frozenset())
    tiles = em.tiles
    guard = frozenset(t for t, p in enumerate(tiles)
                      if p.name in row_partial and p.mode == "In" and p.rows > 1)
    rows_body = None
    if guard:
        # decision: a partial key block of decode attention (126 of 256 rows on average) ran
        # on a padded copy in 5.5 us where a whole block takes 4.4: reading the view in place
        # and a row of pad past it costs a compare per row, and no copy
        gem, gbody = _tile_body(k, guard)
        if not gem.unguarded:
            rows_body = {**gbody, "symbol": C.c_ident("wsp_kbr_", k.name),
                         "check": " && ".join(
                             f"tiles[{t}].rows >= 1 && tiles[{t}].rows <= {p.rows} && "
                             f"tiles[{t}].cols == {p.cols}" if t in guard else
                             f"tiles[{t}].rows == {p.rows} && tiles[{t}].cols == {p.cols}"
                             for t, p in enumerate(tiles))}
    order = [em.tile_index[pn] for pn, _ in k.stores]
    return _env().get_template("kernel.c.j2").render(
        name=_comment(k.name), source=_comment(k.source), symbol=kernel_symbol(k),
        body_symbol=body_symbol, params=[_comment(_describe(p)) for p in k.params],
        main=main, rows_body=rows_body,
        ntiles=len(tiles), esize=[size_of(p.dtype) for p in tiles],
        modes=[_MODE_BITS[p.mode] for p in tiles], order=order,
        shapes=[(p.rows, p.cols) for p in tiles], pads=[pad_bits(p) for p in tiles],
    )


def _tile_body(k: N.Kernel, guard: frozenset) -> tuple["_Emitter", dict]:
    """The emitter and what the template needs of one body function (`guard`: `_Emitter`)."""
    em = _Emitter(k, guard)
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
        if t in guard:
            decls.append(f"const int64_t p{t}_vr = tiles[{t}].rows;")
            decls.append(_pad_row(t, p))
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
    return em, {"decls": decls, "temps": arena, "heap": total if heap else 0, "body": body,
                "uses_scalars": em.uses_scalars, "uses_tiles": bool(decls) or em.uses_tiles}


def _pad_row(t: int, p: N.KParam) -> str:
    """A row of tile t's pad values (`p{t}_pz`), what a guarded read past the view reads."""
    bits = pad_bits(p)  # "0u", "4286578688u"
    if bits == "0u":  # zero-initialised
        return f"static _Alignas(64) const {STORAGE[p.dtype]} p{t}_pz[{p.cols}];"
    width = 8 * size_of(p.dtype)
    return (f"static _Alignas(64) const union {{ uint{width}_t u[{p.cols}]; "
            f"{STORAGE[p.dtype]} x[{p.cols}]; }} p{t}_pzu = {{ .u = {{ "
            + ", ".join([bits] * p.cols) + f" }} }}; const {STORAGE[p.dtype]} *const "
            f"p{t}_pz = p{t}_pzu.x;")


def _describe(p: N.KParam) -> str:
    if p.kind == "tile":
        return f"{p.name}: {p.mode}[Tile[{p.rows}, {p.cols}, {p.dtype}]]"
    return f"{p.name}: Scalar[{p.dtype}]"


def _csize(ctype: str) -> int:
    return {"float": 4, "double": 8, "int8_t": 1, "int16_t": 2, "int32_t": 4, "int64_t": 8,
            "uint8_t": 1, "uint16_t": 2, "uint32_t": 4, "uint64_t": 8}[ctype]


def _aligned(n: int) -> int:
    return (n + 63) // 64 * 64


__all__ = ["KernelC", "emit_kernel", "emit_kernels", "kernel_symbol", "row_partial_tiles",
           "support_header"]
