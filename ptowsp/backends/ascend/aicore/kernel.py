"""AICore kernels in Ascend C: `emit_aicore(module) -> {relative path: text}` and
`kernel_entry(kernel) -> str`. Strings only: nothing here writes or compiles a file.

Every kernel becomes `aicore/kernel_<name>.h`, defining

    __aicore__ inline void <kernel_entry(k)>(const WspTile *tiles, const WspScalar *scalars)

(`tiles` in the order of the kernel's tile parameters, `scalars` in the order of its scalar
parameters; `abi.ABI_C`), run once per task on one vector core (AIV). `aicore/wsp_aicore.h`
holds what the kernels share (ABI, scalar-unit helpers, row copies). A kernel with an
`extern ascend` body gets that body verbatim, with a `#line` directive into the .wsp file.

How a tile kernel becomes Ascend C:
1. Ops. The kernel's plan (`ir/passes/plan_kernels.py`; `plan_kernel(k, fuse=False)` when the
   pass did not run) gives the ops to compute: dead ops dropped, `softmax` spelled out as
   rowmax / sub / exp / rowsum / reciprocal / mul, snapshot copies where a store would read an
   overwritten tile. On a vector machine every tile value lives in the Unified Buffer (the
   plan's registers and inline recomputation have no counterpart): each op is one or a few
   vector instructions over a whole UB tile, and the buffers are reused by liveness.
2. Layout. A value of shape [rows, cols] occupies rows x pc elements, pc = cols rounded up to
   32 elements, whatever its dtype: a row starts 32-byte aligned (what vector instructions and
   DataCopy need) and values of different dtypes index alike (Cast, Compare and Select work on
   whole buffers). Vector instructions run over the buffer rounded up to whole 256-byte
   repeats; the padding columns hold garbage that never reaches a result (reductions count
   `cols` elements, copies move `cols`).
3. Chunks (tiles sized to the Unified Buffer). The row extent M of the stored tiles is split
   into chunks of R rows, R the largest divisor of M whose footprint fits the UB (192 KiB less
   the 8 KiB Ascend C keeps for its own temporaries): every value computed row by row
   (elementwise ops, row reductions, broadcasts, slices, matmul in its left operand) is
   computed per chunk; a value that needs all rows (the operand of a `transpose`, a column
   reduction, a matmul's right operand that is computed in the kernel, and everything they
   depend on) is *resident*: loaded and computed once, before the chunk loop. A matmul's right
   operand that is a parameter (possibly converted to f32) is never resident: it streams from
   GM in blocks of rows through a queue of its own, so weights need not fit the UB. Inputs of
   a chunk come in through `TQue<VECIN>` and results go out through `TQue<VECOUT>`,
   double-buffered (two buffers each) when there is more than one chunk, in the canonical
   CopyIn / Compute / CopyOut order, so the copy-in of chunk c + 1 overlaps the compute of
   chunk c. If even R = 1 does not fit, the kernel is a compile error at its span.
4. Units. Float values (f16/bf16 held in f32, as nodes.py says) are computed by the vector
   unit: Add, Sub, Mul, Div, Max, Min, Adds, Muls, Exp, Ln, Sqrt, Abs, Relu, Tanh, Sin, Cos,
   Power, Compare, Select, Cast, ReduceSum/Max/Min, Duplicate, Copy. Everything else (integer
   and bool arithmetic, f64, float -> integer casts, transpose, slices, interleave, iota) runs
   on the scalar unit over GetValue / SetValue: slow, exact, and documented as the fallback.
   `matmul` runs on the vector unit too (C[i, :] += a[i, k] * B[k, :] with Muls and Add, in k
   order, accumulating in f32): the cube unit (Mmad, L0A/L0B/L0C) is not used by this emitter.
5. Value semantics are ref's (nodes.py), chosen against the real API's behaviour where the two
   differ: Cast rounds with CAST_RINT to f16/bf16 (f16 overflow gives inf), float -> integer
   casts go through the scalar unit (truncate, saturate, NaN -> 0), Max/Min/Relu and the max/min
   reductions get an explicit NaN fix-up (Compare(x, x, NE) + Select) because the hardware
   select does not propagate NaN, rsqrt is 1 / Sqrt (not the approximate Rsqrt), sigmoid / silu
   / gelu are composed exactly as ref spells them. Row sums use ReduceSum, whose order (a tree
   per 256-byte repeat) differs from NumPy's: sums agree to a tolerance, not bit for bit.
6. Pipes. Vector instructions that depend on each other are separated by
   PipeBarrier<PIPE_V>; a hand-off between the vector pipe, the scalar unit and the copy
   engines is a SetFlag/WaitFlag pair (`wsp_sync<E>`) unless a queue's EnQue/DeQue makes it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ....diagnostics import Diagnostic, WspError
from ....dtypes import literal_value, round_float
from ....ir import nodes as N
from ....ir.passes import plan_kernels as PK
from ....version import __version__
from ... import template_env
from ..abi import ABI_C

_HERE = Path(__file__).resolve().parents[1]  # backends/ascend
FLOATS = ("f16", "bf16", "f32", "f64")
VFLOAT = ("f16", "bf16", "f32")  # held in f32: the vector unit's dtype
INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
HELD = {  # the C++ type a value of each dtype is held in while a kernel computes
    "f16": "float", "bf16": "float", "f32": "float", "f64": "double",
    "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "bool": "uint8_t",
}
STORE = dict(HELD, f16="half", bf16="bfloat16_t")  # the C++ type of a tile element in GM
ESIZE = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
         "u8": 1, "u16": 2, "u32": 4, "u64": 8, "bool": 1}
HSIZE = {dt: (4 if dt in VFLOAT else ESIZE[dt]) for dt in ESIZE}  # bytes of a held element
COPY_T = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint32_t"}  # what DataCopy moves
_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
ROW_ALIGN = 32  # elements: a UB row is a multiple of 32 elements of any dtype
REPEAT = 64  # elements: vector instructions run over whole 256-byte repeats of f32
ADV_TMP = 8 * 1024  # sharedTmpBuffer of Tanh/Sin/Cos/Power (their minimum is far below)
MAX_LIVE = 8  # tensors one TPosition may have allocated at once (910B)
STREAM_BYTES = 16 * 1024  # a block of matmul weights streamed from GM


def _ub_bytes() -> int:
    """The Unified Buffer of one vector core: `ub_bytes` of machines/ascend910b.toml, else
    192 KiB (the 910B's)."""
    path = _HERE.parents[1] / "machines" / "ascend910b.toml"
    try:
        import tomllib

        value = tomllib.loads(path.read_text()).get("ub_bytes")
    except (OSError, ValueError, ImportError):
        value = None
    return int(value) if isinstance(value, int) and value > 0 else 192 * 1024


UB_BYTES = _ub_bytes()
# Ascend C keeps the top 8 KiB of UB for its own temporaries (TMP_UB_OFFSET = 184 KiB,
# TMP_UB_SIZE = 8 KiB in the CANN headers; Select stages its mask address there): a kernel's
# buffers must stay below it
API_RESERVE = 8 * 1024
UB_BUDGET = UB_BYTES - API_RESERVE


def _ceil(a: int, b: int) -> int:
    return -(-a // b) * b


def pc(cols: int) -> int:
    """Elements between the rows of a UB tile of `cols` columns."""
    return _ceil(max(cols, 1), ROW_ALIGN)


def vcount(rows: int, cols: int) -> int:
    """Elements a vector instruction covers for a UB tile: whole 256-byte f32 repeats."""
    return _ceil(rows * pc(cols), REPEAT)


def kernel_entry(kernel: N.Kernel) -> str:
    """The AICore function of `kernel` (a C identifier made from its unique name)."""
    return "wsp_aicore_" + re.sub(r"[^A-Za-z0-9_]", lambda m: f"_{ord(m.group()):x}_", kernel.name)


def header_path(kernel: N.Kernel) -> str:
    """The relative path `emit_aicore` gives the kernel's header."""
    return f"aicore/kernel_{kernel_entry(kernel)[len('wsp_aicore_'):]}.h"


class AicoreError(Exception):
    """A kernel this emitter cannot give the AICore: `message` at `span` (the kernel)."""

    def __init__(self, message: str, span=N.NO_SPAN, help: Optional[str] = None):
        super().__init__(message)
        self.message, self.span, self.help = message, span, help


# ---------------------------------------------------------------------------------------------
# Templates


def _env():
    return template_env(str(_HERE / "templates" / "aicore"))


def support_header() -> str:
    """The text of `aicore/wsp_aicore.h`."""
    return _env().get_template("wsp_aicore.h.j2").render(abi=ABI_C, version=__version__)


def emit_aicore(module: N.Module) -> dict[str, str]:
    """Every kernel of `module` as Ascend C: {"aicore/wsp_aicore.h": ..., "aicore/kernel_<name>.h":
    ...}. Raises WspError with a diagnostic at the span of every kernel that cannot run on the
    AICore (too big for the UB even in chunks, an op it has no code for, an extern kernel
    without an `extern ascend` body)."""
    from ..host import source_names

    out = {"aicore/wsp_aicore.h": support_header()}
    diags: list[Diagnostic] = []
    sources = dict(module.sources)
    names = source_names(module)
    for k in module.kernels:
        try:
            out[header_path(k)] = emit_kernel(k, module.name, sources, names)
        except AicoreError as e:
            diags.append(Diagnostic(e.span, "ascend-kernel", e.message, e.help))
        except ValueError:  # extern c only (language.md section 4)
            diags.append(Diagnostic(
                k.name_span if k.name_span.line else k.span, "extern-no-ascend",
                f"kernel `{k.source}` has no `extern ascend` body, which the ascend_npu target "
                "needs", "add an `extern ascend \"\"\"...\"\"\"` body (Ascend C) after its "
                "`extern c` body"))
    if diags:
        raise WspError(diags, sources)
    return dict(sorted(out.items()))


def emit_kernel(k: N.Kernel, module: str = "wsp", sources: Optional[dict] = None,
                names: Optional[dict] = None) -> str:
    """The header of one kernel (raises AicoreError, or ValueError for an extern kernel without
    an `extern ascend` body). `sources` (path -> text) locates an `extern ascend` body for its
    `#line`; `names` (path -> name in the tree, `host.source_names`; default: the base name)
    is the file that `#line` names, as `../wsp/<name>`: the copy in the tree, relative to the
    header, so the tree holds no absolute path."""
    if k.extern_ascend is not None:
        return _emit_extern(k, module, k.extern_ascend, sources or {}, names or {})
    if k.is_extern:
        raise ValueError(f"kernel `{k.source}` has only an `extern c` body: the AICore needs "
                         "an `extern ascend` body")
    return _KernelEmitter.emit(k, module)


def _guard(module: str, k: N.Kernel) -> str:
    name = re.sub(r"[^A-Za-z0-9]", "_", f"{module}_{k.name}").upper()
    return f"WSP_AICORE_{name}_H"


def _describe(p: N.KParam) -> str:
    if p.kind == "tile":
        return f"{p.name}: {p.mode}[Tile[{p.rows}, {p.cols}, {p.dtype}]]"
    return f"{p.name}: Scalar[{p.dtype}]"


def _cstr(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# ---------------------------------------------------------------------------------------------
# extern ascend kernels

_CXX_KEYWORDS = frozenset(
    "alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t "
    "char32_t class compl const constexpr const_cast continue decltype default delete do double "
    "dynamic_cast else enum explicit export extern false float for friend goto if inline int "
    "long mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected "
    "public register reinterpret_cast return short signed sizeof static static_assert "
    "static_cast struct switch template this thread_local throw true try typedef typeid "
    "typename union unsigned using virtual void volatile wchar_t while xor xor_eq tiles "
    "scalars".split())

_RESTORE = "// wsp:restore-line"


def _extern_line(k: N.Kernel, body: str, sources: dict) -> Optional[int]:
    """The .wsp line where the `extern ascend` body starts (for `#line`): the body as written
    after `extern ascend` in the kernel's declaration."""
    text = sources.get(k.span.file)
    if text is None or not k.span.line:
        return None
    lines = text.split("\n")
    start = sum(len(x) + 1 for x in lines[: k.span.line - 1])
    m = re.compile(r"extern\s+ascend\s+(\"\"\"|\")").search(text, start)
    if m is None:
        return None
    at = text.find(body, m.end())
    if at < 0:
        return None
    return text.count("\n", 0, at) + 1


def _emit_extern(k: N.Kernel, module: str, body: str, sources: dict, names: dict) -> str:
    tiles = [p for p in k.params if p.kind == "tile"]
    scalars = [p for p in k.params if p.kind == "scalar"]
    binds = []
    for t, p in enumerate(tiles):
        name = p.name if p.name not in _CXX_KEYWORDS else f"wsp_p_{p.name}"
        binds.append(f"const WspTile &{name} = tiles[{t}];")
        binds.append(f"(void){name};")
    for s, p in enumerate(scalars):
        name = p.name if p.name not in _CXX_KEYWORDS else f"wsp_p_{p.name}"
        ctype = "bool" if p.dtype == "bool" else HELD[p.dtype]
        binds.append(f"const {ctype} {name} = {_scalar_param(p.dtype, s)};")
        binds.append(f"(void){name};")
    line = _extern_line(k, body, sources)
    copy = names.get(k.span.file) or os.path.basename(k.span.file)
    directive = f"#line {line} {_cstr('../wsp/' + copy)}" if line else ""
    text = _env().get_template("kernel_extern.h.j2").render(
        name=k.name, source=k.source, module=module, version=__version__,
        params=[_describe(p) for p in k.params], guard=_guard(module, k), entry=kernel_entry(k),
        binds=binds, line=directive, body=body, restore=_RESTORE if directive else "")
    if not directive:
        return text
    out = text.split("\n")
    for n, ln in enumerate(out):
        if ln == _RESTORE:
            out[n] = f"#line {n + 2} {_cstr(header_path(k))}"
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Scalar C++ (the scalar unit): literals, conversions, elementwise ops

def _float_lit(v: float, ctype: str) -> str:
    import math
    import struct

    if math.isnan(v) or math.isinf(v):
        if ctype == "float":
            bits = struct.unpack("<I", struct.pack("<f", v))[0]
            return f"wsp_f32_from_bits(0x{bits:08x}u)"
        bits = struct.unpack("<Q", struct.pack("<d", v))[0]
        return f"wsp_f64_from_bits(0x{bits:016x}ull)"
    if ctype == "float":
        text = f"{v:.9g}"
        if not re.search(r"[.eE]", text):
            text += ".0"
        return f"({text}f)" if text.startswith("-") else text + "f"
    text = repr(float(v))
    if not re.search(r"[.eE]", text):
        text += ".0"
    return f"({text})" if text.startswith("-") else text


def _int_lit(v: int, dtype: str) -> str:
    bits = _BITS[dtype]
    v %= 1 << bits
    if dtype.startswith("i") and v >= 1 << (bits - 1):
        v -= 1 << bits
    if dtype == "u64":
        return f"{v}ull"
    if dtype == "i64":
        if v == -(1 << 63):
            return "(-9223372036854775807ll - 1)"
        return f"({v}ll)" if v < 0 else f"{v}ll"
    if dtype in ("i32", "u32"):
        if dtype == "i32" and v == -(1 << 31):
            return "(-2147483647 - 1)"
        return f"({v})" if v < 0 else (f"{v}u" if dtype == "u32" else f"{v}")
    return f"(({HELD[dtype]}){v})"


def _lit(value, dtype: str) -> str:
    v = literal_value(value, dtype)
    if dtype == "bool":
        return "((uint8_t)1)" if v else "((uint8_t)0)"
    if dtype in FLOATS:
        return _float_lit(v, HELD[dtype])
    return _int_lit(v, dtype)


def _scalar_param(dtype: str, s: int) -> str:
    """Scalar parameter `s` as a held value of `dtype` (floats rounded once, from the double)."""
    if dtype == "f32":
        return f"(float)scalars[{s}].f"
    if dtype == "f64":
        return f"scalars[{s}].f"
    if dtype == "f16":
        return f"wsp_round_f16_d(scalars[{s}].f)"
    if dtype == "bf16":
        return f"wsp_round_bf16_d(scalars[{s}].f)"
    if dtype == "bool":
        return f"(uint8_t)(scalars[{s}].i != 0)"
    return f"({HELD[dtype]})scalars[{s}].i"


def _kind(dt: str) -> str:
    return "bool" if dt == "bool" else "float" if dt in FLOATS else "int"


def _unsigned(dt: str) -> str:
    return "uint64_t" if _BITS[dt] == 64 else "uint32_t"


_F2I = {  # (lo, hi, max) of a float -> integer cast
    "i8": ("-128.0", "128.0", "127"), "i16": ("-32768.0", "32768.0", "32767"),
    "i32": ("-2147483648.0", "2147483648.0", "2147483647"),
    "i64": ("-9223372036854775808.0", "9223372036854775808.0", "9223372036854775807ll"),
    "u8": ("0.0", "256.0", "255"), "u16": ("0.0", "65536.0", "65535"),
    "u32": ("0.0", "4294967296.0", "4294967295u"),
    "u64": ("0.0", "18446744073709551616.0", "18446744073709551615ull"),
}


def sconvert(e: str, src: str, dst: str) -> str:
    """A held value of dtype `src` as a held value of dtype `dst` (convert and cast)."""
    if src == dst:
        return e
    ks, kd = _kind(src), _kind(dst)
    if kd == "bool":
        return f"(uint8_t)(({e}) != 0)"
    if kd == "float":
        if ks != "float":  # integers and bool: exact in double up to 2^53, then one rounding
            if dst == "f32":
                return f"(float)({e})"
            if dst == "f64":
                return f"(double)({e})"
            return f"wsp_round_{dst}_d((double)({e}))"
        if dst == "f64":
            return f"(double)({e})"
        if src == "f64":
            return f"(float)({e})" if dst == "f32" else f"wsp_round_{dst}_d({e})"
        if dst == "f32":
            return e
        return f"wsp_round_{dst}({e})"
    if ks == "float":
        lo, hi, mx = _F2I[dst]
        ft = HELD[src]
        suffix = "f" if ft == "float" else ""
        return (f"wsp_f2i<{HELD[dst]}, {ft}>({e}, ({ft}){lo}{suffix}, ({ft}){hi}{suffix}, "
                f"({HELD[dst]}){mx})")
    return f"({HELD[dst]})({e})"


_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def sexpr(name: str, dt: str, xs: list[str], xdts: list[str], exponent=None) -> str:
    """The held value of elementwise op `name` (dtype `dt`) from its operands, on the scalar
    unit. Raises AicoreError for float math the scalar unit has no instruction for."""
    ct = HELD[dt]
    fl = _kind(dt) == "float"
    if name in ("convert", "cast"):
        return sconvert(xs[0], xdts[0], dt)
    if name in _CMP:
        a, b = xs[0], sconvert(xs[1], xdts[1], xdts[0])
        return f"(uint8_t)(({a}) {_CMP[name]} ({b}))"
    if name == "where":
        c = sconvert(xs[0], xdts[0], "bool")
        a, b = (sconvert(x, d, dt) for x, d in zip(xs[1:], xdts[1:]))
        return f"(({c}) ? ({a}) : ({b}))"
    v = [sconvert(x, d, dt) for x, d in zip(xs, xdts)]
    if name in ("and", "or"):
        return f"(uint8_t)(({v[0]}) {'&' if name == 'and' else '|'} ({v[1]}))"
    if name == "not":
        return f"(uint8_t)(({v[0]}) ^ 1u)"
    if name in ("add", "sub", "mul"):
        op = {"add": "+", "sub": "-", "mul": "*"}[name]
        if fl:
            return f"(({v[0]}) {op} ({v[1]}))"
        u = _unsigned(dt)
        return f"({ct})(({u})({v[0]}) {op} ({u})({v[1]}))"
    if name == "div":
        if fl:
            return f"(({v[0]}) / ({v[1]}))"
        if dt.startswith("u"):
            return f"wsp_fdiv_u<{ct}>({v[0]}, {v[1]})"
        return f"wsp_fdiv_s<{ct}, {_unsigned(dt)}>({v[0]}, {v[1]})"
    if name in ("maximum", "minimum"):
        if fl:
            return f"wsp_f{'max' if name == 'maximum' else 'min'}<{ct}>({v[0]}, {v[1]})"
        cmp = ">" if name == "maximum" else "<"
        return f"((({v[0]}) {cmp} ({v[1]})) ? ({v[0]}) : ({v[1]}))"
    if name == "neg":
        if fl:
            return f"(-({v[0]}))"
        u = _unsigned(dt)
        return f"({ct})(({u})0 - ({u})({v[0]}))"
    if name == "abs":
        if fl:
            return f"wsp_fabs(({ct})({v[0]}))"
        if dt.startswith("u"):
            return v[0]
        u = _unsigned(dt)
        return f"({ct})((({v[0]}) < 0) ? (({u})0 - ({u})({v[0]})) : ({u})({v[0]}))"
    if name == "relu":
        if fl:
            return f"wsp_fmax<{ct}>({v[0]}, ({ct})0)"
        return f"((({v[0]}) > 0) ? ({v[0]}) : ({ct})0)"
    if name == "pow" and fl and exponent in (0.0, 1.0, 2.0, -1.0):
        if exponent == 2.0:
            return f"(({v[0]}) * ({v[0]}))"
        if exponent == 1.0:
            return v[0]
        if exponent == -1.0:
            return f"(({ct})1 / ({v[0]}))"
        return f"({ct})1"
    raise AicoreError(f"`{name}` on {dt} scalars or f64 tiles has no AICore implementation "
                      "(the scalar unit has no math library)",
                      help="compute it in f32 tiles, or pass the value in as a scalar parameter")


# ---------------------------------------------------------------------------------------------
# Which values are computed per chunk of rows


def _streams(ops: tuple, stored: frozenset = frozenset()) -> dict[int, tuple[int, Optional[int]]]:
    """matmul op -> (param op, convert op or None) for a right operand read straight from GM in
    blocks of rows (a parameter, possibly converted to f32, that nothing else reads and the
    kernel does not store to: its GM rows must keep their entry values while the chunks run):
    it is never resident, so the weights of a matmul need not fit the UB."""
    users: dict[int, list[int]] = {}
    for i, op in enumerate(ops):
        for a in op.args:
            users.setdefault(a, []).append(i)

    def only_b(u: int) -> bool:
        return all(ops[c].op == "matmul" and ops[c].args[1] == u and u not in ops[c].args[:1] +
                   ops[c].args[2:] for c in users.get(u, []))

    out = {}
    for i, op in enumerate(ops):
        if op.op != "matmul":
            continue
        b = op.args[1]
        src = ops[b].args[0] if ops[b].op in ("convert", "cast") else b
        if ops[src].op != "param" or str(ops[src].attr) in stored:
            continue
        if ops[b].op == "param" and ops[b].dtype in VFLOAT and only_b(b):
            out[i] = (b, None)
        elif (ops[b].op in ("convert", "cast") and ops[b].dtype in VFLOAT and only_b(b)
              and ops[ops[b].args[0]].op == "param" and ops[ops[b].args[0]].dtype in VFLOAT
              and all(c == b or (ops[c].op in ("convert", "cast") and only_b(c))
                      for c in users.get(ops[b].args[0], []))):
            out[i] = (ops[b].args[0], b)
    return out


def _chunking(ops: tuple, params: dict, stores: tuple):
    """(M, chunked, streams, skip): the row extent the chunks split, the ops computed per
    chunk, the matmuls whose right operand streams from GM (`_streams`) and the ops that are
    therefore never materialised. Every other tile value is resident (all its rows in UB,
    computed once before the chunk loop)."""
    streams = _streams(ops, frozenset(p for p, _ in stores))
    skip = {x for pair in streams.values() for x in pair if x is not None}
    forced: set[int] = set()

    def force(i: int) -> None:
        todo = [i]
        while todo:
            u = todo.pop()
            if u in forced or ops[u].shape is None:
                continue
            forced.add(u)
            todo.extend(ops[u].args)

    for i, op in enumerate(ops):
        if op.op == "transpose" or op.op.startswith("col"):
            force(op.args[0])
            force(i)
        elif op.op == "matmul" and i not in streams:
            force(op.args[1])
    rows = [params[p].rows for p, _ in stores]
    m = max(rows, default=1)
    if m <= 1:
        return m, set(), streams, skip
    chunked: set[int] = set()
    for i, op in enumerate(ops):
        if op.shape is None or i in forced or i in skip or op.shape[0] != m:
            continue
        if op.op == "param":
            # a parameter is loaded per chunk only when every reader reads it row by row
            if all(u not in forced for u, o in enumerate(ops) if i in o.args):
                chunked.add(i)
            continue
        chunked.add(i)
    return m, chunked, streams, skip


# ---------------------------------------------------------------------------------------------
# The emitter of one tile kernel


@dataclass
class _Req:
    """A UB buffer of the arena: `size` bytes live over steps [start, end]."""

    key: tuple
    size: int
    start: int
    end: int
    off: int = 0


@dataclass
class _Input:
    """A tile parameter read by the kernel: its queue, and the value its param ops stand for."""

    name: str
    t: int  # index in `tiles`
    chunked: bool
    ops: list = field(default_factory=list)


class _Lines:
    def __init__(self, depth: int = 1):
        self.lines: list[str] = []
        self.depth = depth

    def __call__(self, text: str) -> None:
        for ln in text.split("\n"):
            self.lines.append(("    " * self.depth + ln) if ln else "")

    def open(self, text: str) -> None:
        self(f"{text} {{" if text else "{")
        self.depth += 1

    def close(self, text: str = "}") -> None:
        self.depth -= 1
        self(text)


class _KernelEmitter:
    """Ascend C for one planned tile kernel with chunks of `rows` rows (see the module doc)."""

    @classmethod
    def emit(cls, k: N.Kernel, module: str) -> str:
        if k.plan is None:
            k = PK.plan_kernel(k, fuse=False)
        probe = cls(k, 0)
        m, chunked = probe.m, probe.chunked
        candidates = [r for r in range(m, 0, -1) if m % r == 0] if chunked else [m]
        best, smallest = None, None
        for r in candidates:  # the largest chunk that fits
            em = cls(k, r)
            em.run(final=False)
            fp = em.footprint()
            smallest = fp if smallest is None else min(smallest, fp)
            if fp <= UB_BUDGET:
                best = em
                break
        if best is None:
            how = ("even in chunks of 1 row" if chunked and m > 1 else
                   "(its rows must all be resident: a transpose, a column reduction or the right "
                   "operand of a matmul needs them)" if m > 1 else "")
            raise AicoreError(
                " ".join(f"kernel `{k.source}` needs {smallest} bytes of Unified Buffer {how}; an "
                         f"AICore vector core has {UB_BUDGET} (of {UB_BYTES}: Ascend C keeps "
                         f"{API_RESERVE} for itself)".split()), k.span,
                help="use smaller tiles (fewer columns, or split the work over more tasks)")
        best.run(final=True)
        return best.render(module)

    def __init__(self, k: N.Kernel, rows: int):
        self.k = k
        self.ops = k.ops
        self.params = {p.name: p for p in k.params}
        self.tiles = [p for p in k.params if p.kind == "tile"]
        self.tile_index = {p.name: t for t, p in enumerate(self.tiles)}
        self.scalar_index = {p.name: s for s, p in enumerate(p for p in k.params
                                                               if p.kind == "scalar")}
        self.stores = tuple(k.stores)
        self.m, self.chunked, self.streams, self.skip = _chunking(self.ops, self.params,
                                                                  self.stores)
        self.r = rows if self.chunked else self.m
        self.nchunks = self.m // self.r if self.chunked and self.r else 1
        self.bufnum = 2 if self.nchunks > 1 else 1

    # -- shapes, places
    def rows_of(self, i: int) -> int:
        """Rows of value i's UB tile (R for a chunked value)."""
        return self.r if i in self.chunked else self.ops[i].shape[0]

    def count(self, i: int) -> int:
        return vcount(self.rows_of(i), self.ops[i].shape[1])

    def slack(self, i: int) -> int:
        """Extra elements after a resident value read a chunk at a time (the last chunk's
        instructions cover whole repeats past its end)."""
        op = self.ops[i]
        if self.nchunks > 1 and i not in self.chunked and op.shape and op.shape[0] == self.m:
            return REPEAT
        return 0

    # -- the plan of the whole kernel: which ops run where, and when
    def schedule(self):
        ops = self.ops
        inputs: dict[str, _Input] = {}
        for i, op in enumerate(ops):
            if op.op == "param" and i not in self.skip:
                name = str(op.attr)
                inp = inputs.setdefault(name, _Input(name, self.tile_index[name],
                                                     i in self.chunked))
                inp.ops.append(i)
        for inp in inputs.values():
            # all param ops of one parameter agree (the analysis looks at each; be safe)
            if any(i not in self.chunked for i in inp.ops):
                inp.chunked = False
                self.chunked.difference_update(inp.ops)
        self.inputs = inputs
        pro = [i for i, op in enumerate(ops) if op.shape is not None and i not in self.chunked
               and op.op != "param" and i not in self.skip]
        loop = [i for i in range(len(ops)) if i in self.chunked and ops[i].op != "param"]
        cstores = [(p, v) for p, v in self.stores if v in self.chunked]
        estores = [(p, v) for p, v in self.stores if v not in self.chunked]
        # steps: 0 resident inputs, 1.. prologue, then chunk inputs, the loop, chunk stores,
        # epilogue stores
        t = 1
        when: dict[int, int] = {}
        for inp in inputs.values():
            if not inp.chunked:
                for i in inp.ops:
                    when[i] = 0
        for i in pro:
            when[i] = t
            t += 1
        loop_start = t
        t += 1
        for inp in inputs.values():
            if inp.chunked:
                for i in inp.ops:
                    when[i] = loop_start
        for i in loop:
            when[i] = t
            t += 1
        cstore_t = t
        t += 1
        loop_end = t - 1
        estore_t = {}
        for s in estores:
            estore_t[s] = t
            t += 1
        self.when, self.pro, self.loop = when, pro, loop
        self.cstores, self.estores = cstores, estores
        self.loop_start, self.loop_end, self.cstore_t, self.estore_t = (loop_start, loop_end,
                                                                        cstore_t, estore_t)
        # last step reading each value
        last: dict[int, int] = {}
        for i, op in enumerate(ops):
            if op.shape is None or i not in when:
                continue
            for a in op.args:
                if a in self.skip:
                    continue
                last[a] = max(last.get(a, -1), when[i])
        for p, v in cstores:
            last[v] = max(last.get(v, -1), cstore_t)
        for s in estores:
            last[s[1]] = max(last.get(s[1], -1), estore_t[s])
        for u in list(last):
            if u not in self.chunked and last[u] >= loop_start and when.get(u, 0) < loop_start:
                last[u] = max(last[u], loop_end)  # read by every chunk
        self.last = last

    # -- running the emission (twice: to size the arena, then with offsets)
    def run(self, final: bool) -> None:
        self.final = final
        self.schedule()
        if not final:
            self.reqs: list[_Req] = []
        self.req_at = 0
        self.temp_at = 0
        self.out = _Lines(1)
        self.scalars: dict[int, str] = {}  # scalar op -> its C++ local
        self.tensor: dict[int, str] = {}  # tile op -> its LocalTensor
        self.body()
        if not final:
            self.allocate()

    def request(self, key: tuple, size: int, start: int, end: int) -> int:
        """The arena offset of a buffer (0 while sizing)."""
        size = _ceil(max(size, 32), 256)
        if not self.final:
            self.reqs.append(_Req(key, size, start, end))
            return 0
        req = self.reqs[self.req_at]
        self.req_at += 1
        assert req.key == key and req.size == size, "the two emission passes diverged"
        return req.off

    def allocate(self) -> None:
        placed: list[_Req] = []
        for req in sorted(self.reqs, key=lambda q: (q.start, -q.size)):
            off = 0
            clash = sorted((p.off, p.off + p.size) for p in placed
                           if p.start <= req.end and req.start <= p.end)
            for lo, hi in clash:
                if off + req.size <= lo:
                    break
                off = max(off, hi)
            req.off = off
            placed.append(req)
        self.arena = max((q.off + q.size for q in self.reqs), default=0)

    def queue_bytes(self) -> list[tuple[str, str, int, int]]:
        """(name, position, buffers, bytes per buffer) of every queue."""
        out = []
        for inp in self.inputs.values():
            p = self.params[inp.name]
            rows = self.r if inp.chunked else p.rows
            slack = REPEAT if (not inp.chunked and self.nchunks > 1 and p.rows == self.m) else 0
            n = vcount(rows, p.cols) + slack
            out.append((f"q_in{inp.t}", "VECIN", self.bufnum if inp.chunked else 1,
                        _ceil(n * ESIZE[p.dtype], 32)))
        for pname, v in self.stores:
            p = self.params[pname]
            t = self.tile_index[pname]
            chunk = v in self.chunked
            rows = self.r if chunk else p.rows
            out.append((f"q_out{t}", "VECOUT", self.bufnum if chunk else 1,
                        _ceil(vcount(rows, p.cols) * ESIZE[p.dtype], 32)))
        for mm, (src, _) in sorted(self.streams.items()):
            p = self.params[str(self.ops[src].attr)]
            out.append((f"q_mm{mm}", "VECIN", 1,
                        _ceil(vcount(self.kblock(mm), p.cols) * ESIZE[p.dtype], 32)))
        return out

    def kblock(self, mm: int) -> int:
        """Rows of a streamed matmul operand per block (about STREAM_BYTES of UB)."""
        src = self.streams[mm][0]
        p = self.params[str(self.ops[src].attr)]
        return max(1, min(p.rows, STREAM_BYTES // (pc(p.cols) * 4)))

    def footprint(self) -> int:
        return sum(n * b for _, _, n, b in self.queue_bytes()) + self.arena

    # -- pipes: which unit wrote last, so hand-offs get a SetFlag/WaitFlag pair
    def reset_pipes(self) -> None:
        self.v_dirty = self.s_dirty = True  # conservative at a phase start
        self.mte2_s = True

    def need_s(self) -> None:
        if self.v_dirty:
            self.out("wsp_sync<AscendC::HardEvent::V_S>();")
            self.v_dirty = False
        if self.mte2_s:
            self.out("wsp_sync<AscendC::HardEvent::MTE2_S>();")
            self.mte2_s = False

    def need_v(self) -> None:
        if self.s_dirty:
            self.out("wsp_sync<AscendC::HardEvent::S_V>();")
            self.s_dirty = False

    def vec(self, text: str) -> None:
        """One vector instruction, then the barrier its readers need."""
        self.need_v()
        self.out(text)
        self.out("AscendC::PipeBarrier<PIPE_V>();")
        self.v_dirty = True

    # -- buffers
    def temp(self, dtype_ct: str, elems: int) -> str:
        """A temporary LocalTensor of `elems` elements of C++ type `dtype_ct`, for this step."""
        size = elems * {"float": 4, "half": 2, "bfloat16_t": 2, "uint8_t": 1, "int32_t": 4,
                        "uint32_t": 4, "double": 8, "int8_t": 1, "int16_t": 2, "int64_t": 8,
                        "uint16_t": 2, "uint64_t": 8}[dtype_ct]
        key = ("t", self.temp_at)
        self.temp_at += 1
        off = self.request(key, size, self.cur, self.cur)
        name = f"w{self.temp_at}"
        self.out(f"const AscendC::LocalTensor<{dtype_ct}> {name} = "
                 f"calc.GetWithOffset<{dtype_ct}>({elems}, {off});")
        return name

    def value_buffer(self, i: int) -> str:
        """Declare value i's arena tensor (in the current scope) and return its name."""
        op = self.ops[i]
        ct = HELD[op.dtype]
        n = self.count(i) + self.slack(i)
        end = self.last.get(i, self.when[i])
        off = self.request(("v", i), n * HSIZE[op.dtype], self.when[i], max(end, self.when[i]))
        name = f"v{i}"
        self.out(f"const AscendC::LocalTensor<{ct}> {name} = calc.GetWithOffset<{ct}>({n}, {off});")
        self.tensor[i] = name
        return name

    def at(self, u: int, op_chunked: bool) -> str:
        """Value u as a tensor whose row 0 is the first row the current op needs."""
        name = self.tensor[u]
        sh = self.ops[u].shape
        if op_chunked and u not in self.chunked and sh[0] == self.m and self.nchunks > 1:
            return f"{name}[c0 * {pc(sh[1])}]"
        return name

    def row_offset(self, u: int, op_chunked: bool) -> str:
        """The C++ row of value u that row `i` of the current op reads (scalar path)."""
        sh = self.ops[u].shape
        if op_chunked and u not in self.chunked and sh[0] == self.m and self.nchunks > 1:
            return "(c0 + i)"
        return "i"

    # -- the body
    def body(self) -> None:
        out = self.out
        self.reset_pipes()
        ops = self.ops
        # declarations: pipe, queues, arena
        out("AscendC::TPipe pipe;")
        for name, pos, nbuf, size in self.queue_bytes():
            out(f"AscendC::TQue<AscendC::TPosition::{pos}, {nbuf}> {name};")
        out("AscendC::TBuf<AscendC::TPosition::VECCALC> calc;")
        for name, pos, nbuf, size in self.queue_bytes():
            out(f"pipe.InitBuffer({name}, {nbuf}, {size});")
        arena = getattr(self, "arena", 0) if self.final else 0
        out(f"pipe.InitBuffer(calc, {max(arena, 256)});")
        live_in = len(self.inputs) + (1 if self.streams else 0)
        if live_in > MAX_LIVE:
            raise AicoreError(f"kernel `{self.k.source}` reads {live_in} tiles; an AICore "
                              f"queue position holds at most {MAX_LIVE} tensors at once",
                              self.k.span)
        # scalars, computed once
        self.cur = 0
        for i, op in enumerate(ops):
            if op.shape is None:
                self.scalar(i)
        # resident inputs, the prologue
        self.cur = 0
        res_inputs = [inp for inp in self.inputs.values() if not inp.chunked]
        if res_inputs or self.pro:
            out("// resident values: every row, computed once")
        self.copy_in(res_inputs, "0")
        for i in self.pro:
            self.cur = self.when[i]
            self.op(i)
        # the chunk loop
        chunk_inputs = [inp for inp in self.inputs.values() if inp.chunked]
        if self.loop or self.cstores or chunk_inputs:
            overlap = " (copy-in of the next overlaps the compute of this one)"
            out(f"// {self.nchunks} chunk{'s' if self.nchunks > 1 else ''} of {self.r} rows"
                f"{overlap if self.bufnum > 1 else ''}")
            out.open(f"for (int32_t c = 0; c < {self.nchunks}; ++c)")
            out(f"const int32_t c0 = c * {self.r};")
            out("(void)c0;")
            self.reset_pipes()
            self.cur = self.loop_start
            self.copy_in(chunk_inputs, "c0")
            for i in self.loop:
                self.cur = self.when[i]
                self.op(i)
            self.cur = self.cstore_t
            for s in self.cstores:  # one VECOUT tensor live at a time (at most 8 may be)
                self.store_all([s], "c0", chunk=True)
                self.copy_out([s], "c0", chunk=True)
            for inp in chunk_inputs:
                out(f"q_in{inp.t}.FreeTensor(in{inp.t});")
            out.close()
            self.reset_pipes()
        for s in self.estores:
            self.cur = self.estore_t[s]
            self.store_all([s], "0", chunk=False)
            self.copy_out([s], "0", chunk=False)
        for inp in res_inputs:
            out(f"q_in{inp.t}.FreeTensor(in{inp.t});")
        # the next task's kernel builds its own TPipe over the same UB: let every pipe drain
        # (the last copy-out included), then release this one ("repeated TPipes" in the docs)
        out("AscendC::PipeBarrier<PIPE_ALL>();")
        out("pipe.Destroy();")

    def scalar(self, i: int) -> None:
        op = self.ops[i]
        ct = HELD[op.dtype]
        if op.op == "scalar_param":
            e = _scalar_param(op.dtype, self.scalar_index[str(op.attr)])
        elif op.op == "literal":
            e = _lit(op.attr, op.dtype)
        else:
            if op.op not in PK.ELEMENTWISE:
                raise AicoreError(f"scalar op `{op.op}` has no AICore implementation", self.k.span)
            try:
                e = sexpr(op.op, op.dtype, [self.scalars[a] for a in op.args],
                          [self.ops[a].dtype for a in op.args], self.exponent(op))
            except AicoreError as err:
                raise AicoreError(err.message, self.k.span, err.help) from None
        name = f"s{i}"
        self.out(f"const {ct} {name} = {e};")
        self.out(f"(void){name};")
        self.scalars[i] = name

    def exponent(self, op: N.Op) -> Optional[float]:
        if op.op != "pow":
            return None
        e = self.ops[op.args[1]]
        if e.op == "literal":
            v = literal_value(e.attr, e.dtype)
            return float(v)
        return None

    # -- copies between GM and UB
    def copy_in(self, inputs: list, row0: str) -> None:
        if not inputs:
            return
        out = self.out
        for inp in inputs:
            p = self.params[inp.name]
            st = STORE[p.dtype]
            cp = COPY_T[ESIZE[p.dtype]]
            rows = self.r if inp.chunked else p.rows
            out(f"AscendC::LocalTensor<{st}> in{inp.t} = q_in{inp.t}.AllocTensor<{st}>();")
            out(f"wsp_copy_in<{cp}>(in{inp.t}.ReinterpretCast<{cp}>(), tiles[{inp.t}], {row0}, "
                f"{rows}, {p.cols * ESIZE[p.dtype]}, {pc(p.cols) * ESIZE[p.dtype]}, "
                f"{ESIZE[p.dtype]});")
            out(f"q_in{inp.t}.EnQue(in{inp.t});")
        for inp in inputs:
            p = self.params[inp.name]
            st = STORE[p.dtype]
            out(f"in{inp.t} = q_in{inp.t}.DeQue<{st}>();")
        self.mte2_s = True
        for inp in inputs:
            p = self.params[inp.name]
            first = inp.ops[0]
            if p.dtype in ("f16", "bf16"):  # held in f32 from here on
                for i in inp.ops:
                    self.when[i] = self.when[first]
                    self.last[first] = max(self.last.get(first, 0), self.last.get(i, 0))
                self.cur = self.when[first]
                name = self.value_buffer(first)
                self.vec(f"AscendC::Cast({name}, in{inp.t}, AscendC::RoundMode::CAST_NONE, "
                         f"{self.count(first)});")
            else:
                name = f"in{inp.t}"
                if p.dtype == "bool":  # a nonzero byte is true: make every byte 0 or 1
                    self.need_s()
                    rows = self.r if inp.chunked else p.rows
                    self.out(f"for (uint32_t e = 0; e < {rows * pc(p.cols)}; ++e) "
                             f"{name}.SetValue(e, (uint8_t)({name}.GetValue(e) != 0));")
                    self.s_dirty = True
            for i in inp.ops:
                self.tensor[i] = name

    def store_all(self, stores: list, row0: str, chunk: bool) -> None:
        """Each stored value converted and copied into its VECOUT tensor, enqueued."""
        for pname, v in stores:
            p = self.params[pname]
            t = self.tile_index[pname]
            st = STORE[p.dtype]
            op = self.ops[v]
            self.out.open("")
            src, sdt = self.tensor[v] if op.shape else None, op.dtype
            if op.shape is None:  # a scalar: a tile of it
                src = self.fill(v, (p.rows if not chunk else self.r, p.cols), p.dtype)
                sdt = p.dtype
            elif op.shape != (p.rows, p.cols):
                src = self.materialise(v, (self.r if chunk else p.rows, p.cols), chunk)
            else:
                src = self.at(v, chunk)
            n = vcount(self.r if chunk else p.rows, p.cols)
            if sdt != p.dtype:
                src = self.convert_tile(src, sdt, p.dtype, n)
            self.out(f"AscendC::LocalTensor<{st}> out{t} = q_out{t}.AllocTensor<{st}>();")
            if p.dtype in ("f16", "bf16"):
                self.vec(f"AscendC::Cast(out{t}, {src}, AscendC::RoundMode::CAST_RINT, {n});")
            else:
                words = n * ESIZE[p.dtype] // 4
                self.need_v()
                self.out(f"wsp_copy_words(out{t}.ReinterpretCast<uint32_t>(), "
                         f"{src}.ReinterpretCast<uint32_t>(), {words});")
                self.v_dirty = True
            self.out(f"q_out{t}.EnQue(out{t});")
            self.out.close()

    def copy_out(self, stores: list, row0: str, chunk: bool) -> None:
        for pname, v in stores:
            p = self.params[pname]
            t = self.tile_index[pname]
            st = STORE[p.dtype]
            cp = COPY_T[ESIZE[p.dtype]]
            rows = self.r if chunk else p.rows
            self.out.open("")
            self.out(f"AscendC::LocalTensor<{st}> out{t} = q_out{t}.DeQue<{st}>();")
            self.out(f"wsp_copy_out<{cp}>(tiles[{t}], out{t}.ReinterpretCast<{cp}>(), {row0}, "
                     f"{rows}, {p.cols * ESIZE[p.dtype]}, {pc(p.cols) * ESIZE[p.dtype]}, "
                     f"{ESIZE[p.dtype]});")
            self.out(f"q_out{t}.FreeTensor(out{t});")
            self.out.close()

    # -- one op
    def op(self, i: int) -> None:
        op = self.ops[i]
        chunk = i in self.chunked
        self.out(f"// %{i} = {op.op}{self.describe_args(op)} -> "
                 f"[{op.shape[0]}, {op.shape[1]}] {op.dtype}")
        dst = self.value_buffer(i)
        self.out.open("")
        try:
            if self.vector_ok(op):
                self.vector_op(i, dst, chunk)
            else:
                self.scalar_op(i, dst, chunk)
        except AicoreError as err:
            raise AicoreError(err.message, self.k.span, err.help) from None
        self.out.close()

    def describe_args(self, op: N.Op) -> str:
        parts = [f"%{a}" for a in op.args]
        if op.op in ("param", "scalar_param"):
            parts.append(str(op.attr))
        return f"({', '.join(parts)})"

    def vector_ok(self, op: N.Op) -> bool:
        name, dt = op.op, op.dtype
        args = [self.ops[a] for a in op.args]
        adts = [a.dtype for a in args]
        if name in ("literal", "iota_row", "iota_col", "transpose", "slice_even", "slice_odd",
                    "interleave"):
            return False
        if name == "matmul":
            return True
        if name == "broadcast":
            return dt in VFLOAT and adts[0] in VFLOAT
        if name in N.REDUCTIONS:
            return dt in VFLOAT and adts[0] in VFLOAT
        if name in ("convert", "cast"):
            src = adts[0]
            return dt in VFLOAT and (src in VFLOAT or src == "bool"
                                     or (src == "i32" and dt != "bf16"))
        if name in _CMP:
            return all(d in VFLOAT for d in adts)
        if name == "where":
            return dt in VFLOAT and adts[0] == "bool" and all(d in VFLOAT for d in adts[1:])
        if name == "pow":
            return dt in VFLOAT and adts[0] in VFLOAT and args[1].shape is None
        if name in ("and", "or", "not"):
            return False
        if name in PK.ELEMENTWISE:
            return dt in VFLOAT and all(d in VFLOAT for d in adts)
        return False

    # -- vector path
    def urows(self, u: int, chunk: bool) -> int:
        """Rows of value u as the current op sees it (R for a chunked op reading M rows)."""
        rows = self.ops[u].shape[0]
        return self.r if chunk and rows == self.m else rows

    def operand(self, u: int, ishape: tuple, chunk: bool) -> str:
        """Value u as a tile of the op's IR shape `ishape` (broadcasts and scalars
        materialised in temporaries of the op's UB shape)."""
        op = self.ops[u]
        ushape = (self.r if chunk and ishape[0] == self.m else ishape[0], ishape[1])
        if op.shape is None:
            return self.fill(u, ushape, op.dtype if op.dtype in VFLOAT else "f32")
        if op.shape == ishape:
            return self.at(u, chunk)
        return self.materialise(u, ushape, chunk)

    def fill(self, u: int, shape: tuple, dtype: str) -> str:
        """A tile of `shape` holding scalar u (converted to `dtype`)."""
        ct = HELD[dtype]
        n = vcount(*shape)
        t = self.temp(ct, n)
        val = sconvert(self.scalars[u], self.ops[u].dtype, dtype)
        if ct == "float" or ct in ("int32_t", "uint32_t", "int16_t", "uint16_t"):
            self.vec(f"AscendC::Duplicate({t}, ({ct})({val}), {n});")
        else:
            self.need_s()
            self.out(f"for (uint32_t e = 0; e < {n}; ++e) {t}.SetValue(e, ({ct})({val}));")
            self.s_dirty = True
        return t

    def materialise(self, u: int, shape: tuple, chunk: bool) -> str:
        """Value u (a tile) broadcast to `shape` in a temporary."""
        op = self.ops[u]
        rows, cols = shape
        ct = HELD[op.dtype]
        n = vcount(rows, cols)
        t = self.temp(ct, n)
        src = self.at(u, chunk)
        words = pc(cols) * HSIZE[op.dtype] // 4
        dup = ct in ("float", "int32_t", "uint32_t", "int16_t", "uint16_t")
        if op.shape == (1, 1) and dup:
            self.need_s()
            self.out(f"{{ const {ct} b = {src}.GetValue(0); AscendC::Duplicate({t}, b, {n}); }}")
            self.out("AscendC::PipeBarrier<PIPE_V>();")
            self.v_dirty = True
        elif op.shape[1] == 1 and self.urows(u, chunk) == rows and dup:
            self.need_s()
            self.out(f"wsp_bcast_cols<{ct}>({t}, {src}, {rows}, {pc(1)}, {pc(cols)}, {pc(cols)});")
            self.v_dirty = True
        elif op.shape[0] == 1 and op.shape[1] == cols:
            self.need_v()  # rows of any dtype are whole 32-bit words
            self.out(f"wsp_bcast_rows({t}.ReinterpretCast<uint32_t>(), "
                     f"{src}.ReinterpretCast<uint32_t>(), {rows}, {words});")
            self.v_dirty = True
        else:  # anything else (a [rows, 1] of a narrow dtype): the scalar unit
            self.need_s()
            ri = "0" if op.shape[0] == 1 else self.row_offset(u, chunk)
            cj = "0" if op.shape[1] == 1 else "j"
            self.out(f"for (int32_t i = 0; i < {rows}; ++i) for (int32_t j = 0; j < {cols}; ++j) "
                     f"{t}.SetValue(i * {pc(cols)} + j, {self.tensor[u]}.GetValue({ri} * "
                     f"{pc(op.shape[1])} + {cj}));")
            self.s_dirty = True
        return t

    def convert_tile(self, src: str, sdt: str, ddt: str, n: int) -> str:
        """A converted copy of tile `src` (dtype sdt) as dtype ddt, n elements."""
        if ddt in VFLOAT and (sdt in VFLOAT or sdt == "bool" or (sdt == "i32" and ddt != "bf16")):
            t = self.temp("float", n)
            self.vector_convert(t, src, sdt, ddt, n)
            return t
        t = self.temp(HELD[ddt], n)
        self.need_s()
        self.out(f"for (uint32_t e = 0; e < {n}; ++e) {t}.SetValue(e, "
                 f"{sconvert(f'{src}.GetValue(e)', sdt, ddt)});")
        self.s_dirty = True
        return t

    def vector_convert(self, dst: str, src: str, sdt: str, ddt: str, n: int) -> None:
        if sdt == "bool":
            h = self.temp("half", n)
            self.vec(f"AscendC::Cast({h}, {src}, AscendC::RoundMode::CAST_NONE, {n});")
            self.vec(f"AscendC::Cast({dst}, {h}, AscendC::RoundMode::CAST_NONE, {n});")
            return
        if sdt == "i32":
            self.vec(f"AscendC::Cast({dst}, {src}, AscendC::RoundMode::CAST_RINT, {n});")
            src = dst
        elif sdt in VFLOAT and ddt not in ("f16", "bf16"):
            self.need_v()
            self.out(f"wsp_copy_words({dst}.ReinterpretCast<uint32_t>(), "
                     f"{src}.ReinterpretCast<uint32_t>(), {n});")
            self.v_dirty = True
            return
        if ddt == "f16":
            h = self.temp("half", n)
            self.vec(f"AscendC::Cast({h}, {src}, AscendC::RoundMode::CAST_RINT, {n});")
            self.vec(f"AscendC::Cast({dst}, {h}, AscendC::RoundMode::CAST_NONE, {n});")
        elif ddt == "bf16":
            h = self.temp("bfloat16_t", n)
            self.vec(f"AscendC::Cast({h}, {src}, AscendC::RoundMode::CAST_RINT, {n});")
            self.vec(f"AscendC::Cast({dst}, {h}, AscendC::RoundMode::CAST_NONE, {n});")

    def bool_from_mask(self, dst: str, mask: str, n: int) -> None:
        """dst (uint8_t 0/1) from a Compare bit mask."""
        one = self.temp("float", n)
        h = self.temp("half", n)
        self.vec(f"AscendC::Duplicate({one}, 1.0f, {n});")
        self.vec(f"AscendC::Select({one}, {mask}, {one}, 0.0f, "
                 f"AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, {n});")
        self.vec(f"AscendC::Cast({h}, {one}, AscendC::RoundMode::CAST_RINT, {n});")
        self.vec(f"AscendC::Cast({dst}, {h}, AscendC::RoundMode::CAST_NONE, {n});")

    def mask_of_bool(self, src: str, n: int) -> str:
        """A Compare bit mask of a bool (uint8_t) tile: nonzero -> 1."""
        h = self.temp("half", n)
        f = self.temp("float", n)
        z = self.temp("float", n)
        mask = self.temp("uint8_t", n // 8)
        self.vec(f"AscendC::Cast({h}, {src}, AscendC::RoundMode::CAST_NONE, {n});")
        self.vec(f"AscendC::Cast({f}, {h}, AscendC::RoundMode::CAST_NONE, {n});")
        self.vec(f"AscendC::Duplicate({z}, 0.0f, {n});")
        self.vec(f"AscendC::Compare({mask}, {f}, {z}, AscendC::CMPMODE::NE, {n});")
        return mask

    def nan_fix(self, dst: str, a: str, b: str, n: int) -> None:
        mask = self.temp("uint8_t", n // 8)
        self.need_v()
        self.out(f"wsp_nan_fix({dst}, {a}, {b}, {mask}, {n});")
        self.v_dirty = True

    def adv_tmp(self) -> str:
        return self.temp("uint8_t", ADV_TMP)

    def vector_op(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        name, shape = op.op, op.shape
        n = self.count(i)
        args = op.args
        A = lambda u: self.operand(u, shape, chunk)  # noqa: E731
        if name in ("add", "sub", "mul", "div"):
            a, b = args
            sa, sb = self.ops[a].shape is None, self.ops[b].shape is None
            api = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div"}[name]
            if name in ("add", "mul") and (sa or sb):
                t, s = (b, a) if sa else (a, b)
                self.vec(f"AscendC::{api}s({dst}, {A(t)}, (float)({self.scalars[s]}), {n});")
            elif name == "sub" and sb:
                self.vec(f"AscendC::Adds({dst}, {A(a)}, -(float)({self.scalars[b]}), {n});")
            elif name == "sub" and sa:
                self.vec(f"AscendC::Muls({dst}, {A(b)}, -1.0f, {n});")
                self.vec(f"AscendC::Adds({dst}, {dst}, (float)({self.scalars[a]}), {n});")
            else:
                ta, tb = A(a), A(b)
                self.vec(f"AscendC::{api}({dst}, {ta}, {tb}, {n});")
            return
        if name in ("maximum", "minimum"):
            ta, tb = A(args[0]), A(args[1])
            self.vec(f"AscendC::{'Max' if name == 'maximum' else 'Min'}({dst}, {ta}, {tb}, {n});")
            self.nan_fix(dst, ta, tb, n)
            return
        if name in _CMP:
            ta, tb = A(args[0]), A(args[1])
            mask = self.temp("uint8_t", n // 8)
            mode = {"lt": "LT", "le": "LE", "gt": "GT", "ge": "GE", "eq": "EQ", "ne": "NE"}[name]
            self.vec(f"AscendC::Compare({mask}, {ta}, {tb}, AscendC::CMPMODE::{mode}, {n});")
            self.bool_from_mask(dst, mask, n)
            return
        if name == "where":
            c, a, b = args
            cop = self.ops[c]
            if cop.shape is None:
                ct = self.temp("uint8_t", n)
                self.need_s()
                self.out(f"for (uint32_t e = 0; e < {n}; ++e) {ct}.SetValue(e, "
                         f"{sconvert(self.scalars[c], cop.dtype, 'bool')});")
                self.s_dirty = True
            else:
                ct = self.at_or_bcast(c, shape, chunk)
            mask = self.mask_of_bool(ct, n)
            ta, tb = A(a), A(b)
            self.vec(f"AscendC::Select({dst}, {mask}, {ta}, {tb}, "
                     f"AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")
            return
        if name in ("convert", "cast"):
            (a,) = args
            self.vector_convert(dst, A(a) if self.ops[a].dtype in VFLOAT else
                                self.at_or_bcast(a, shape, chunk), self.ops[a].dtype, op.dtype, n)
            return
        if name == "broadcast":
            (a,) = args
            src = self.operand(a, shape, chunk)
            self.need_v()
            self.out(f"wsp_copy_words({dst}.ReinterpretCast<uint32_t>(), "
                     f"{src}.ReinterpretCast<uint32_t>(), {n});")
            self.v_dirty = True
            return
        if name == "pow":
            a = args[0]
            e = self.exponent(op)
            ta = A(a)
            if e == 2.0:
                self.vec(f"AscendC::Mul({dst}, {ta}, {ta}, {n});")
            elif e == 1.0:
                self.need_v()
                self.out(f"wsp_copy_words({dst}.ReinterpretCast<uint32_t>(), "
                         f"{ta}.ReinterpretCast<uint32_t>(), {n});")
                self.v_dirty = True
            elif e == 0.0:
                self.vec(f"AscendC::Duplicate({dst}, 1.0f, {n});")
            elif e == -1.0:
                one = self.temp("float", n)
                self.vec(f"AscendC::Duplicate({one}, 1.0f, {n});")
                self.vec(f"AscendC::Div({dst}, {one}, {ta}, {n});")
            else:
                tmp = self.adv_tmp()
                s = self.scalars[args[1]]
                self.vec(f"AscendC::Power({dst}, {ta}, (float)({s}), {tmp}, {n});")
            return
        if name in N.REDUCTIONS:
            self.reduction(i, dst, chunk)
            return
        if name == "matmul":
            self.matmul(i, dst, chunk)
            return
        # unary float math
        (a,) = args
        ta = A(a)
        if name == "neg":
            self.vec(f"AscendC::Muls({dst}, {ta}, -1.0f, {n});")
        elif name in ("abs", "exp", "log", "sqrt"):
            api = {"abs": "Abs", "exp": "Exp", "log": "Ln", "sqrt": "Sqrt"}[name]
            self.vec(f"AscendC::{api}({dst}, {ta}, {n});")
        elif name == "rsqrt":  # 1 / sqrt(x), as ref: the Rsqrt instruction is approximate
            one = self.temp("float", n)
            self.vec(f"AscendC::Sqrt({dst}, {ta}, {n});")
            self.vec(f"AscendC::Duplicate({one}, 1.0f, {n});")
            self.vec(f"AscendC::Div({dst}, {one}, {dst}, {n});")
        elif name == "relu":
            self.vec(f"AscendC::Relu({dst}, {ta}, {n});")
            self.nan_fix(dst, ta, ta, n)
        elif name in ("tanh", "sin", "cos"):
            tmp = self.adv_tmp()
            api = {"tanh": "Tanh", "sin": "Sin", "cos": "Cos"}[name]
            self.vec(f"AscendC::{api}({dst}, {ta}, {tmp}, {n});")
        elif name in ("sigmoid", "silu"):
            s = dst if name == "sigmoid" else self.temp("float", n)
            self.sigmoid(s, ta, n)
            if name == "silu":
                self.vec(f"AscendC::Mul({dst}, {ta}, {s}, {n});")
                self.neg_inf_zero(dst, ta, n)
        elif name == "gelu":
            self.gelu(dst, ta, n)
        else:
            raise AicoreError(f"`{name}` has no AICore vector implementation")

    def at_or_bcast(self, u: int, ishape: tuple, chunk: bool) -> str:
        """Value u (any dtype) as a tile of the op's IR shape, in its own dtype."""
        op = self.ops[u]
        ushape = (self.r if chunk and ishape[0] == self.m else ishape[0], ishape[1])
        if op.shape is None:
            return self.fill(u, ushape, op.dtype)
        if op.shape == ishape:
            return self.at(u, chunk)
        return self.materialise(u, ushape, chunk)

    def sigmoid(self, dst: str, x: str, n: int) -> None:
        """ref: e = exp(-|x|); where(x >= 0, 1, e) / (1 + e)."""
        e = self.temp("float", n)
        one = self.temp("float", n)
        mask = self.temp("uint8_t", n // 8)
        self.vec(f"AscendC::Abs({e}, {x}, {n});")
        self.vec(f"AscendC::Muls({e}, {e}, -1.0f, {n});")
        self.vec(f"AscendC::Exp({e}, {e}, {n});")
        self.vec(f"AscendC::Duplicate({one}, 0.0f, {n});")
        self.vec(f"AscendC::Compare({mask}, {x}, {one}, AscendC::CMPMODE::GE, {n});")
        self.vec(f"AscendC::Duplicate({one}, 1.0f, {n});")
        self.vec(f"AscendC::Select({one}, {mask}, {one}, {e}, "
                 f"AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")
        self.vec(f"AscendC::Adds({e}, {e}, 1.0f, {n});")
        self.vec(f"AscendC::Div({dst}, {one}, {e}, {n});")

    def neg_inf_zero(self, dst: str, x: str, n: int) -> None:
        """dst = -0 where x is -inf (silu and gelu tend to -0 there; x * 0 would be NaN)."""
        t = self.temp("float", n)
        mask = self.temp("uint8_t", n // 8)
        self.vec(f"AscendC::Duplicate({t}, {_float_lit(float('-inf'), 'float')}, {n});")
        self.vec(f"AscendC::Compare({mask}, {x}, {t}, AscendC::CMPMODE::EQ, {n});")
        self.vec(f"AscendC::Duplicate({t}, -0.0f, {n});")
        self.vec(f"AscendC::Select({dst}, {mask}, {t}, {dst}, "
                 f"AscendC::SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")

    def gelu(self, dst: str, x: str, n: int) -> None:
        """ref, operation by operation: 0.5 * x * (1 + tanh(c * (x + 0.044715 * x * x * x)))."""
        import math

        c = _float_lit(round_float(math.sqrt(2.0 / math.pi), "f32"), "float")
        k = _float_lit(round_float(0.044715, "f32"), "float")
        b = self.temp("float", n)
        e = self.temp("float", n)
        tmp = self.adv_tmp()
        self.vec(f"AscendC::Muls({b}, {x}, {k}, {n});")
        self.vec(f"AscendC::Mul({b}, {b}, {x}, {n});")
        self.vec(f"AscendC::Mul({b}, {b}, {x}, {n});")
        self.vec(f"AscendC::Add({b}, {x}, {b}, {n});")
        self.vec(f"AscendC::Muls({b}, {b}, {c}, {n});")
        self.vec(f"AscendC::Tanh({e}, {b}, {tmp}, {n});")
        self.vec(f"AscendC::Adds({e}, {e}, 1.0f, {n});")
        self.vec(f"AscendC::Muls({dst}, {x}, 0.5f, {n});")
        self.vec(f"AscendC::Mul({dst}, {dst}, {e}, {n});")
        self.neg_inf_zero(dst, x, n)

    def reduction(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        (a,) = op.args
        src_op = self.ops[a]
        x = self.at(a, chunk)
        rows = self.rows_of(i) if op.op.startswith("row") else self.rows_of(a)
        cols = src_op.shape[1]
        pcx = pc(cols)
        nx = vcount(rows, cols)
        n = self.count(i)
        what = op.op[3:]
        if op.op.startswith("row"):
            work = self.temp("float", _ceil(max(-(-cols // REPEAT), 1), 8))
            api = {"sum": "ReduceSum", "mean": "ReduceSum", "max": "ReduceMax",
                   "min": "ReduceMin"}[what]
            self.need_v()
            self.out(f"for (int32_t i = 0; i < {rows}; ++i) AscendC::{api}({dst}[i * {pc(1)}], "
                     f"{x}[i * {pcx}], {work}, {cols});")
            self.out("AscendC::PipeBarrier<PIPE_V>();")
            self.v_dirty = True
            if what == "mean":
                d = self.temp("float", n)
                self.vec(f"AscendC::Duplicate({d}, {_float_lit(float(cols), 'float')}, {n});")
                self.vec(f"AscendC::Div({dst}, {dst}, {d}, {n});")
            if what in ("max", "min"):  # NaN anywhere in the row gives NaN
                mask = self.temp("uint8_t", nx // 8)
                t = self.temp("float", nx)
                s = self.temp("float", n)
                self.vec(f"AscendC::Compare({mask}, {x}, {x}, AscendC::CMPMODE::NE, {nx});")
                self.vec(f"AscendC::Select({t}, {mask}, {x}, 0.0f, "
                         f"AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, {nx});")
                self.out(f"for (int32_t i = 0; i < {rows}; ++i) "
                         f"AscendC::ReduceSum({s}[i * {pc(1)}], {t}[i * {pcx}], {work}, {cols});")
                self.out("AscendC::PipeBarrier<PIPE_V>();")
                self.nan_fix(dst, s, s, n)
            return
        # column reductions: the rows added (or max'ed) in order, as NumPy does
        api = {"sum": "Add", "mean": "Add", "max": "Max", "min": "Min"}[what]
        self.need_v()
        self.out(f"wsp_copy_words({dst}.ReinterpretCast<uint32_t>(), "
                 f"{x}.ReinterpretCast<uint32_t>(), {pcx});")
        self.out(f"for (int32_t i = 1; i < {rows}; ++i) {{ AscendC::{api}({dst}, {dst}, "
                 f"{x}[i * {pcx}], {pcx}); AscendC::PipeBarrier<PIPE_V>(); }}")
        self.v_dirty = True
        if what == "mean":
            d = self.temp("float", n)
            self.vec(f"AscendC::Duplicate({d}, {_float_lit(float(rows), 'float')}, {n});")
            self.vec(f"AscendC::Div({dst}, {dst}, {d}, {n});")
        if what in ("max", "min"):
            mask = self.temp("uint8_t", nx // 8)
            t = self.temp("float", nx)
            s = self.temp("float", n)
            self.vec(f"AscendC::Compare({mask}, {x}, {x}, AscendC::CMPMODE::NE, {nx});")
            self.vec(f"AscendC::Select({t}, {mask}, {x}, 0.0f, "
                     f"AscendC::SELMODE::VSEL_TENSOR_SCALAR_MODE, {nx});")
            self.out(f"wsp_copy_words({s}.ReinterpretCast<uint32_t>(), "
                     f"{t}.ReinterpretCast<uint32_t>(), {pcx});")
            self.out(f"for (int32_t i = 1; i < {rows}; ++i) {{ AscendC::Add({s}, {s}, "
                     f"{t}[i * {pcx}], {pcx}); AscendC::PipeBarrier<PIPE_V>(); }}")
            self.nan_fix(dst, s, s, n)

    def as_float(self, u: int, chunk: bool) -> str:
        """Value u as an f32 tile (a matmul operand)."""
        op = self.ops[u]
        src = self.at(u, chunk)
        if op.dtype in VFLOAT:
            return src
        return self.convert_tile(src, op.dtype, "f32", vcount(self.urows(u, chunk), op.shape[1]))

    def matmul(self, i: int, dst: str, chunk: bool) -> None:
        """C = a @ b (+ acc) on the vector unit: C[r, :] += a[r, k] * b[k, :] in k order (the
        scalar unit reads a[r, k]; Muls and Add do a row of C). A right operand that is a
        parameter streams from GM in blocks of rows through its own VECIN queue."""
        op = self.ops[i]
        a, b = op.args[0], op.args[1]
        rows, cols = self.rows_of(i), op.shape[1]
        inner = self.ops[a].shape[1]
        n = self.count(i)
        out = self.out
        ta = self.as_float(a, chunk)
        prod = self.temp("float", pc(cols))
        pa, pn = pc(inner), pc(cols)
        if i in self.streams:
            src, conv = self.streams[i]
            p = self.params[str(self.ops[src].attr)]
            t = self.tile_index[p.name]
            kb = self.kblock(i)
            st, cp = STORE[p.dtype], COPY_T[ESIZE[p.dtype]]
            nb = vcount(kb, cols)
            want = self.ops[conv].dtype if conv is not None else p.dtype
            tb = self.temp("float", nb) if (p.dtype != "f32" or want != "f32") else None
            self.vec(f"AscendC::Duplicate({dst}, 0.0f, {n});")
            self.need_s()
            out(f"for (int32_t kb = 0; kb < {inner}; kb += {kb}) {{")
            out.depth += 1
            out(f"const int32_t nk = {inner} - kb < {kb} ? {inner} - kb : {kb};")
            out(f"AscendC::LocalTensor<{st}> bq = q_mm{i}.AllocTensor<{st}>();")
            out(f"wsp_copy_in<{cp}>(bq.ReinterpretCast<{cp}>(), tiles[{t}], kb, (uint32_t)nk, "
                f"{p.cols * ESIZE[p.dtype]}, {pn * ESIZE[p.dtype]}, {ESIZE[p.dtype]});")
            out(f"q_mm{i}.EnQue(bq);")
            out(f"bq = q_mm{i}.DeQue<{st}>();")
            b_t = "bq"
            if tb is not None:
                if p.dtype != "f32":
                    self.vec(f"AscendC::Cast({tb}, bq, AscendC::RoundMode::CAST_NONE, {nb});")
                    if want not in ("f32", p.dtype):  # held f32 -> rounded to `want`
                        self.vector_convert(tb, tb, "f32", want, nb)
                else:
                    self.vector_convert(tb, "bq", "f32", want, nb)
                b_t = tb
            out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
            out(f"    for (int32_t k = 0; k < nk; ++k) {{")
            out(f"        const float aik = {ta}.GetValue(i * {pa} + kb + k);")
            out(f"        AscendC::Muls({prod}, {b_t}[k * {pn}], aik, {pn});")
            out("        AscendC::PipeBarrier<PIPE_V>();")
            out(f"        AscendC::Add({dst}[i * {pn}], {dst}[i * {pn}], {prod}, {pn});")
            out("        AscendC::PipeBarrier<PIPE_V>();")
            out("    }")
            out("}")
            out(f"q_mm{i}.FreeTensor(bq);")
            out.depth -= 1
            out("}")
            self.v_dirty = True
        else:
            tb = self.as_float(b, False)
            self.vec(f"AscendC::Duplicate({dst}, 0.0f, {n});")
            self.need_s()
            out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
            out(f"    for (int32_t k = 0; k < {inner}; ++k) {{")
            out(f"        const float aik = {ta}.GetValue(i * {pa} + k);")
            out(f"        AscendC::Muls({prod}, {tb}[k * {pn}], aik, {pn});")
            out("        AscendC::PipeBarrier<PIPE_V>();")
            out(f"        AscendC::Add({dst}[i * {pn}], {dst}[i * {pn}], {prod}, {pn});")
            out("        AscendC::PipeBarrier<PIPE_V>();")
            out("    }")
            out("}")
            self.v_dirty = True
        if len(op.args) > 2:  # acc + a @ b, the product first (as ref)
            acc = op.args[2]
            if self.ops[acc].dtype in VFLOAT:
                tacc = self.operand(acc, op.shape, chunk)
            else:
                tacc = self.convert_tile(self.at_or_bcast(acc, op.shape, chunk),
                                         self.ops[acc].dtype, "f32", n)
            self.vec(f"AscendC::Add({dst}, {tacc}, {dst}, {n});")

    # -- scalar path
    def sread(self, u: int, i: str, j: str, chunk: bool) -> str:
        """Element (i, j) of the op's index space, read from value u (broadcast)."""
        op = self.ops[u]
        if op.shape is None:
            return self.scalars[u]
        ri = "0" if op.shape[0] == 1 else (self.row_offset(u, chunk) if i == "i" else i)
        cj = "0" if op.shape[1] == 1 else j
        return f"{self.tensor[u]}.GetValue(({ri}) * {pc(op.shape[1])} + ({cj}))"

    def scalar_op(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        name = op.op
        rows, cols = self.rows_of(i), op.shape[1]
        p = pc(cols)
        self.need_s()
        out = self.out
        if name in N.REDUCTIONS:
            self.scalar_reduction(i, dst, chunk)
            self.s_dirty = True
            return
        if name == "iota_row":
            e = "(int64_t)(c0 + i)" if chunk and self.nchunks > 1 else "(int64_t)i"
            e = sconvert(e, "i64", op.dtype)
        elif name == "iota_col":
            e = sconvert("(int64_t)j", "i64", op.dtype)
        elif name == "transpose":
            (a,) = op.args
            e = f"{self.tensor[a]}.GetValue(j * {pc(self.ops[a].shape[1])} + i)"
        elif name in ("slice_even", "slice_odd"):
            (a,) = op.args
            k = "2 * j" if name == "slice_even" else "2 * j + 1"
            e = self.sread(a, "i", k, chunk)
        elif name == "interleave":
            a, b = op.args
            va = sconvert(self.sread(a, "i", "(j >> 1)", chunk), self.ops[a].dtype, op.dtype)
            vb = sconvert(self.sread(b, "i", "(j >> 1)", chunk), self.ops[b].dtype, op.dtype)
            e = f"(((j & 1) == 0) ? ({va}) : ({vb}))"
        elif name == "broadcast":
            (a,) = op.args
            e = sconvert(self.sread(a, "i", "j", chunk), self.ops[a].dtype, op.dtype)
        elif name == "matmul":
            raise AicoreError("matmul operands must be numeric tiles")
        elif name in PK.ELEMENTWISE:
            xs = [self.sread(a, "i", "j", chunk) for a in op.args]
            e = sexpr(name, op.dtype, xs, [self.ops[a].dtype for a in op.args],
                      self.exponent(op))
        else:
            raise AicoreError(f"op `{name}` has no AICore implementation")
        out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
        out(f"    for (int32_t j = 0; j < {cols}; ++j) {{")
        out(f"        {dst}.SetValue(i * {p} + j, ({HELD[op.dtype]})({e}));")
        out("    }")
        out("}")
        self.s_dirty = True

    def scalar_reduction(self, i: int, dst: str, chunk: bool) -> None:
        op = self.ops[i]
        (a,) = op.args
        dt = op.dtype
        ct = HELD[dt]
        fl = _kind(dt) == "float"
        what = op.op[3:]
        sa = self.ops[a].shape
        rows = self.urows(a, chunk)
        cols = sa[1]
        if what in ("sum", "mean"):
            init = f"({ct})0"
        elif fl:
            init = _float_lit(float("-inf") if what == "max" else float("inf"), ct)
        else:
            lo = -(1 << (_BITS[dt] - 1)) if dt.startswith("i") else 0
            hi = (1 << (_BITS[dt] - 1)) - 1 if dt.startswith("i") else (1 << _BITS[dt]) - 1
            init = _int_lit(lo if what == "max" else hi, dt)

        def step(acc: str, x: str) -> str:
            if what in ("sum", "mean"):
                return sexpr("add", dt, [acc, x], [dt, dt])
            return sexpr("maximum" if what == "max" else "minimum", dt, [acc, x], [dt, dt])

        x = sconvert(self.sread(a, "i" if op.op.startswith("row") else "r", "j"
                                if op.op.startswith("row") else "j", chunk), self.ops[a].dtype, dt)
        out = self.out
        if op.op.startswith("row"):
            out(f"for (int32_t i = 0; i < {rows}; ++i) {{")
            out(f"    {ct} acc = {init};")
            out(f"    for (int32_t j = 0; j < {cols}; ++j) acc = {step('acc', x)};")
            if what == "mean":
                out(f"    acc = ({ct})((double)acc / {cols}.0);" if not fl else
                    f"    acc = acc / ({ct}){cols};")
            out(f"    {dst}.SetValue(i * {pc(1)}, acc);")
            out("}")
        else:
            out(f"for (int32_t j = 0; j < {cols}; ++j) {{")
            out(f"    {ct} acc = {init};")
            out(f"    for (int32_t r = 0; r < {rows}; ++r) acc = {step('acc', x)};")
            if what == "mean":
                out(f"    acc = ({ct})((double)acc / {rows}.0);" if not fl else
                    f"    acc = acc / ({ct}){rows};")
            out(f"    {dst}.SetValue(j, acc);")
            out("}")

    # -- the file
    def render(self, module: str) -> str:
        k = self.k
        units = sorted({"vector" if self.vector_ok(self.ops[i]) else "scalar"
                        for i in self.pro + self.loop})
        summary = [
            f"UB: {self.footprint()} of {UB_BUDGET} bytes ({self.arena} arena, "
            f"{self.footprint() - self.arena} queues); rows {self.m} "
            + (f"in {self.nchunks} chunk{'s' if self.nchunks > 1 else ''} of {self.r}"
               if self.chunked else "resident"),
            "units: " + (", ".join(units) or "copies only")
            + ("; matmul on the vector unit (C[i,:] += a[i,k] * B[k,:]), not the cube"
               if any(op.op == "matmul" for op in self.ops) else ""),
        ]
        return _env().get_template("kernel.h.j2").render(
            name=k.name, source=k.source, module=module, version=__version__,
            params=[_describe(p) for p in k.params], summary=summary, guard=_guard(module, k),
            entry=kernel_entry(k), body=self.out.lines)


__all__ = ["emit_aicore", "emit_kernel", "kernel_entry", "header_path", "support_header",
           "AicoreError", "UB_BYTES", "UB_BUDGET", "API_RESERVE", "pc", "vcount"]
