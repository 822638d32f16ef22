"""`@ptoisa_kernel` and `ptoisa`: kernels written as the prototype's PTO-ISA instruction trace
(`ptoisa.tload`, `ptoisa.TADD`, `ptoisa.TSORT32`, ...), lowered to the same kernel AST that a
`@kernel` body traces to, so an ISA-level kernel is checked, optimised and run like any other
(ref and cpu_sim run it, ascend_npu generates it).

A `@ptoisa_kernel` is a `KernelRef` whose body is called with parameter objects of its own: a
tile parameter (`IsaParam`) is global memory, which only `tload` reads and `tstore` (or
`store_topk_indices_i32`) writes; a scalar parameter (`IsaScalar`) is an operand of the scalar
instructions (`TADDS`, ...). Every instruction returns an `IsaTile`, a tile register holding the
traced kernel `Value` and its static shape and dtype, and is one primitive of the language:

    tload(p) -> p's value            TADD/TSUB/TMUL/TDIV/TMAX/TMIN -> add/sub/mul/div/maximum/minimum
    TMOV(a) -> a (values are immutable, a move is the value itself)
    TROWEXPAND*(a, b[M, 1]), TCOLEXPAND*(a, b[1, N]) -> the same primitives, broadcasting b
    TADDS/TSUBS/TMULS/TDIVS/TMAXS/TMINS(a, s) -> the primitive with the scalar (cast to a's dtype)
    TEXP/TLOG/TSQRT/TRSQRT/TABS/TNEG/TRELU(a) -> exp/log/sqrt/rsqrt/abs/neg/relu
    iota_u32(n), TSORT32(src, idx) -> `pto.iota_u32`, `pto.tsort32` (kernel.py)
    store_topk_indices_i32(dst, pairs, k) -> store(dst, `pto.extract_topk_indices(pairs, k)`)
    tstore(dst, v) -> store(dst, v)

The instructions check their operands' shapes and dtypes as the ISA states them (equal shapes
and dtypes for the binary instructions) and report a mismatch at the user's line; what they
cannot know (a `Constexpr` extent) the checker checks. The prototype's `cpu_sim_add_cycles(n)`
is the kernel's `add_cycles(n)` (cycles the cycle model adds per task); its operand helpers
`scalar_expr(x)` and `tile_expr(x)`, which render an operand as C++ text there, return the
operand itself here (an operand is a value, not text).
"""

from __future__ import annotations

import numbers
from typing import Any, Optional

from ..diagnostics import did_you_mean
from ..dtypes import kind_of
from ..frontend import ast as A
from .errors import KernelError, user_error
from .kernel import _KSTACK, KernelRef, Value, _record, pto
from .source import here

# instruction -> (kind, primitive, operand shape rule): "same" (equal shapes), "row" (b is
# [M, 1]), "col" (b is [1, N]), "scalar" (b is a scalar), "unary"
_INSTRUCTIONS: dict[str, tuple[str, str]] = {
    "TADD": ("same", "add"), "TSUB": ("same", "sub"), "TMUL": ("same", "mul"),
    "TDIV": ("same", "div"), "TMAX": ("same", "maximum"), "TMIN": ("same", "minimum"),
    "TROWEXPANDADD": ("row", "add"), "TROWEXPANDSUB": ("row", "sub"),
    "TROWEXPANDMUL": ("row", "mul"), "TROWEXPANDDIV": ("row", "div"),
    "TROWEXPANDMAX": ("row", "maximum"), "TROWEXPANDMIN": ("row", "minimum"),
    "TCOLEXPANDADD": ("col", "add"), "TCOLEXPANDSUB": ("col", "sub"),
    "TCOLEXPANDMUL": ("col", "mul"), "TCOLEXPANDDIV": ("col", "div"),
    "TCOLEXPANDMAX": ("col", "maximum"), "TCOLEXPANDMIN": ("col", "minimum"),
    "TADDS": ("scalar", "add"), "TSUBS": ("scalar", "sub"), "TMULS": ("scalar", "mul"),
    "TDIVS": ("scalar", "div"), "TMAXS": ("scalar", "maximum"), "TMINS": ("scalar", "minimum"),
    "TEXP": ("unary", "exp"), "TLOG": ("unary", "log"), "TSQRT": ("unary", "sqrt"),
    "TRSQRT": ("unary", "rsqrt"), "TABS": ("unary", "abs"), "TNEG": ("unary", "neg"),
    "TRELU": ("unary", "relu"),
}
_HELPERS = ("tload", "tstore", "TMOV", "TSORT32", "iota_u32", "store_topk_indices_i32",
            "cpu_sim_add_cycles", "scalar_expr", "tile_expr")
NAMES = tuple(_INSTRUCTIONS) + _HELPERS

# a shape or dtype not known when the kernel is traced (a Constexpr extent) is None
Spec = tuple  # (rows: Optional[int], cols: Optional[int], dtype: str)


def _show(spec: Spec) -> str:
    r, c, dt = spec
    return f"[{'?' if r is None else r}, {'?' if c is None else c}] {dt}"


class IsaParam:
    """A tile parameter of a `@ptoisa_kernel`: global memory, read by `ptoisa.tload` and
    written by `ptoisa.tstore` (`name` is its name in the kernel, as the prototype's)."""

    __slots__ = ("name", "value", "mode", "spec")

    def __init__(self, name: str, value: Value, mode: str, spec: Spec):
        self.name, self.value, self.mode, self.spec = name, value, mode, spec

    def __repr__(self) -> str:
        return f"<ptoisa param {self.name}: {self.mode} {_show(self.spec)}>"


class IsaScalar:
    """A scalar parameter of a `@ptoisa_kernel`: an operand of `TADDS`, `TMULS`, ..."""

    __slots__ = ("name", "value", "dtype")

    def __init__(self, name: str, value: Value, dtype: str):
        self.name, self.value, self.dtype = name, value, dtype

    def __repr__(self) -> str:
        return f"<ptoisa scalar {self.name}: {self.dtype}>"


class IsaTile:
    """A tile register of a `@ptoisa_kernel`: the value an instruction made, with its shape and
    dtype (`rows`, `cols`, `dtype`). Instructions combine tiles; Python operators do not."""

    __slots__ = ("value", "spec")

    def __init__(self, value: Value, spec: Spec):
        self.value, self.spec = value, spec

    @property
    def rows(self) -> Optional[int]:
        return self.spec[0]

    @property
    def cols(self) -> Optional[int]:
        return self.spec[1]

    @property
    def dtype(self) -> str:
        return self.spec[2]

    def _operator(self, *_: Any):
        raise user_error(here(), "a ptoisa tile is combined by instructions, not by Python "
                         "operators", "write `ptoisa.TADD(a, b)`, `ptoisa.TMULS(a, 2.0)`, ...",
                         cls=KernelError)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _operator
    __truediv__ = __rtruediv__ = __neg__ = __matmul__ = __pow__ = _operator

    def __bool__(self):
        raise user_error(here(), "a ptoisa tile cannot decide a Python `if`: kernels are "
                         "straight-line code", cls=KernelError)

    def __repr__(self) -> str:
        return f"<ptoisa tile {_show(self.spec)}>"


class IsaKernelRef(KernelRef):
    """A `@ptoisa_kernel`: traced with `IsaParam` / `IsaScalar` arguments, used in workloads
    exactly as a `@kernel`."""

    _traced_ops = "`ptoisa.*` instruction"
    _empty_help = "load with `ptoisa.tload(x)`, compute with `ptoisa.*` instructions and write " \
                  "with `ptoisa.tstore(out, v)`"

    def _proxies(self, triples: list) -> dict:
        out: dict = {}
        for pname, wname, kp in triples:
            value = Value("param", span=kp.name.span, name=wname)
            t = kp.type
            if isinstance(t, A.TileParamType):
                spec = (_extent(t.tile.rows), _extent(t.tile.cols), t.tile.dtype)
                out[pname] = IsaParam(wname, value, t.mode, spec)
            elif isinstance(t, A.ScalarParamType):
                out[pname] = IsaScalar(wname, value, t.dtype)
            else:
                raise user_error(kp.span, f"a `@ptoisa_kernel` takes tile and scalar "
                                 f"parameters; `{pname}` is a Constexpr",
                                 "write the extent as a number in the tile's shape",
                                 cls=KernelError)
        return out


def _extent(e: A.Node) -> Optional[int]:
    return e.value if isinstance(e, A.IntLit) else None


def ptoisa_kernel(fn=None, *, cpp_includes=None, name: Optional[str] = None):
    """`@ptoisa_kernel`, `@ptoisa_kernel(name=...)` or `@ptoisa_kernel(cpp_includes=[...])`.

    In the prototype `cpp_includes` are the headers its emitted C++ body includes (the ISA's
    wrappers, the user's helpers). Here the body is lowered to kernel IR and no C++ is emitted,
    so there is nothing to include them in; they are checked (a list of header names, each a
    non-empty string) and kept as the kernel's `cpp_includes` (`k.cpp_includes`), never
    compiled. A header the ISA-level body needed is the ISA's, which wspc's IR replaces."""
    includes = _includes(cpp_includes)

    def make(f):
        k = IsaKernelRef(f, name=name)
        k.cpp_includes = includes
        return k

    return make if fn is None else make(fn)


def _includes(given: Any) -> tuple:
    if given is None:
        return ()
    if isinstance(given, str) or not all(isinstance(h, str) and h.strip("<>\" ")
                                         for h in given):
        raise user_error(here(), f"`@ptoisa_kernel(cpp_includes=...)` takes a list of header "
                         f"names, not {given!r}", "write `cpp_includes=[\"my_helpers.hpp\"]`",
                         cls=KernelError)
    return tuple(h.strip("<>\" ") for h in given)


# ---------------------------------------------------------------------------------------------
# The instructions


def _in_isa_kernel(what: str) -> None:
    if not _KSTACK or not isinstance(_KSTACK[-1].kernel, IsaKernelRef):
        where = "a `@kernel` body" if _KSTACK else "Python code outside a kernel"
        raise user_error(here(), f"`ptoisa.{what}` is used in {where}; ptoisa instructions "
                         "only work inside a `@ptoisa_kernel` body",
                         "decorate the function with `@ptoisa_kernel`" if _KSTACK else
                         "call it in the body of a function decorated with `@ptoisa_kernel`",
                         cls=KernelError)


def _tile(what: str, x: Any, operand: str) -> IsaTile:
    if isinstance(x, IsaTile):
        return x
    if isinstance(x, IsaParam):
        raise user_error(here(), f"`ptoisa.{what}`: {operand} `{x.name}` is a tile parameter "
                         "(global memory), not a tile register",
                         f"load it first: `{x.name}_t = ptoisa.tload({x.name})`", cls=KernelError)
    raise user_error(here(), f"`ptoisa.{what}`: {operand} must be a ptoisa tile (made by "
                     f"`ptoisa.tload` or another instruction), not {_what(x)}", cls=KernelError)


def _what(x: Any) -> str:
    if isinstance(x, IsaScalar):
        return f"the scalar parameter `{x.name}`"
    return f"a {type(x).__name__} ({x!r})" if not isinstance(x, str) else f"the string {x!r}"


def _param(what: str, x: Any, write: bool) -> IsaParam:
    if not isinstance(x, IsaParam):
        raise user_error(here(), f"`ptoisa.{what}` {'writes' if write else 'reads'} a tile "
                         f"parameter of the kernel, not {_what(x)}", cls=KernelError)
    if write and x.mode == "In":
        raise user_error(here(), f"`ptoisa.{what}`: `{x.name}` is an `In` parameter, which is "
                         "never written", "declare it `Out[Tile[...]]` (or `InOut`)",
                         cls=KernelError)
    if not write and x.mode == "Out":
        raise user_error(here(), f"`ptoisa.{what}`: `{x.name}` is an `Out` parameter, which is "
                         "never read", "declare it `In[Tile[...]]` (or `InOut`)", cls=KernelError)
    return x


def _same(a: Optional[int], b: Optional[int]) -> bool:
    return a is None or b is None or a == b


def _mismatch(what: str, a: Spec, b: Spec, need: str) -> None:
    raise user_error(here(), f"`ptoisa.{what}`: operands {_show(a)} and {_show(b)}: {need}",
                     cls=KernelError)


def _binary(what: str, rule: str, prim: str, a: Any, b: Any) -> IsaTile:
    _in_isa_kernel(what)
    ta = _tile(what, a, "the first operand")
    if rule == "scalar":
        return IsaTile(_record("op", prim, (ta.value, _scalar(what, b, ta.dtype))), ta.spec)
    tb = _tile(what, b, "the second operand")
    (ar, ac, adt), (br, bc, bdt) = ta.spec, tb.spec
    if adt != bdt:
        _mismatch(what, ta.spec, tb.spec, "the instruction takes two tiles of one dtype")
    if rule == "same" and not (_same(ar, br) and _same(ac, bc)):
        _mismatch(what, ta.spec, tb.spec, "the instruction takes two tiles of one shape")
    if rule == "row" and not (_same(ar, br) and bc == 1):
        _mismatch(what, ta.spec, tb.spec, "the second operand is a column `[M, 1]` of one "
                  "value per row of the first")
    if rule == "col" and not (_same(ac, bc) and br == 1):
        _mismatch(what, ta.spec, tb.spec, "the second operand is a row `[1, N]` of one value "
                  "per column of the first")
    return IsaTile(_record("op", prim, (ta.value, tb.value)), ta.spec)


def _scalar(what: str, s: Any, dtype: str) -> Any:
    """The scalar operand as the tile's dtype (the ISA converts it to the element type)."""
    if isinstance(s, IsaScalar):
        if s.dtype == dtype:
            return s.value
        return _record("op", "cast", (s.value, dtype), named=False)
    if isinstance(s, numbers.Real) and not isinstance(s, bool):
        if isinstance(s, numbers.Integral) or kind_of(dtype) == "float":
            return s  # a literal takes the tile's type
        return _record("op", "cast", (s, dtype), named=False)  # a float number, an integer tile
    help = None
    if isinstance(s, str):
        help = ("wspc's kernels are not C++ text: pass a number or a `Scalar` parameter of the "
                "kernel")
    raise user_error(here(), f"`ptoisa.{what}` takes a number or a scalar parameter as its "
                     f"scalar, not {_what(s)}", help, cls=KernelError)


class _IsaNamespace:
    """`ptoisa.NAME(...)`: the instructions above; any other name is an error naming the
    closest."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in _INSTRUCTIONS:
            raise user_error(here(), f"`ptoisa.{name}` is not a ptoisa instruction",
                             did_you_mean(name, NAMES) or "the instructions are listed in "
                             "docs/python.md, \"PTO-ISA kernels\"", cls=KernelError)
        rule, prim = _INSTRUCTIONS[name]
        if rule == "unary":
            def instr(a):
                _in_isa_kernel(name)
                ta = _tile(name, a, "the operand")
                return IsaTile(_record("op", prim, (ta.value,)), ta.spec)
        else:
            def instr(a, b):
                return _binary(name, rule, prim, a, b)
        instr.__name__ = name
        return instr

    def __dir__(self):
        return sorted(NAMES)

    # memory
    def tload(self, src: Any) -> IsaTile:
        """The tile parameter `src`'s value (its pad past a partial view, as any load)."""
        _in_isa_kernel("tload")
        p = _param("tload", src, write=False)
        return IsaTile(p.value, p.spec)

    def tstore(self, dst: Any, src: Any) -> None:
        """`src` as the value of the `Out`/`InOut` parameter `dst` (its shape and dtype)."""
        _in_isa_kernel("tstore")
        p = _param("tstore", dst, write=True)
        t = _tile("tstore", src, "the value")
        if t.dtype != p.spec[2] or not (_same(t.rows, p.spec[0]) and _same(t.cols, p.spec[1])):
            raise user_error(here(), f"`ptoisa.tstore`: a {_show(t.spec)} tile stored to "
                             f"`{p.name}`, a {_show(p.spec)} parameter",
                             "TSTORE writes a tile of the parameter's shape and dtype",
                             cls=KernelError)
        pto.store(p.value, t.value)

    def TMOV(self, a: Any) -> IsaTile:  # noqa: N802 - the ISA's spelling
        """A copy of `a`: the same value (kernel values are never modified in place)."""
        _in_isa_kernel("TMOV")
        t = _tile("TMOV", a, "the operand")
        return IsaTile(t.value, t.spec)

    # sort and top-k
    def iota_u32(self, cols: Any) -> IsaTile:
        """`[1, cols]` u32 holding 0 .. cols-1."""
        _in_isa_kernel("iota_u32")
        v = pto.iota_u32(cols)
        return IsaTile(v, (1, int(cols), "u32"))

    def TSORT32(self, src: Any, idx: Any) -> IsaTile:  # noqa: N802 - the ISA's spelling
        """The 32 scores of `src` ([1, 32] f32) sorted descending, as (score, index) pairs in a
        [1, 64] f32 tile, each index taken from `idx` ([1, 32] u32) at its score's column and
        held as f32; equal scores keep their column order."""
        _in_isa_kernel("TSORT32")
        s, i = _tile("TSORT32", src, "the scores"), _tile("TSORT32", idx, "the indices")
        if s.spec != (1, 32, "f32"):
            raise user_error(here(), f"`ptoisa.TSORT32` sorts a [1, 32] f32 tile, not "
                             f"{_show(s.spec)}", cls=KernelError)
        if i.spec != (1, 32, "u32"):
            raise user_error(here(), f"`ptoisa.TSORT32` takes its indices as a [1, 32] u32 "
                             f"tile, not {_show(i.spec)}", "make them with "
                             "`ptoisa.iota_u32(32)`", cls=KernelError)
        return IsaTile(pto.tsort32(s.value, i.value), (1, 64, "f32"))

    def store_topk_indices_i32(self, dst: Any, pairs: Any, k: Any) -> None:
        """The indices of the first `k` pairs of a `TSORT32` result, stored as i32 to `dst`
        (an `Out` [1, k] i32 parameter)."""
        _in_isa_kernel("store_topk_indices_i32")
        p = _param("store_topk_indices_i32", dst, write=True)
        t = _tile("store_topk_indices_i32", pairs, "the pairs")
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 0 < int(k):
            raise user_error(here(), f"`ptoisa.store_topk_indices_i32` takes a positive Python "
                             f"integer as `k`, not {k!r}", cls=KernelError)
        k = int(k)
        if t.rows != 1 or t.dtype != "f32" or t.cols is None or k > t.cols // 2:
            raise user_error(here(), f"`ptoisa.store_topk_indices_i32`: the pairs are "
                             f"{_show(t.spec)}; it takes the [1, 2n] f32 pairs of `TSORT32` and "
                             "k <= n", cls=KernelError)
        if p.spec[2] != "i32" or not (_same(p.spec[0], 1) and _same(p.spec[1], k)):
            raise user_error(here(), f"`ptoisa.store_topk_indices_i32`: `{p.name}` is "
                             f"{_show(p.spec)}; the k = {k} indices are stored to a [1, {k}] "
                             "i32 parameter", cls=KernelError)
        pto.store(p.value, pto.extract_topk_indices(t.value, k))

    # the prototype's cycle hint and operand helpers
    def cpu_sim_add_cycles(self, cycles: Any) -> None:
        """`cycles` more cycles for each task of this kernel in the cycle model (cpu_sim's
        `--stats`, traces, `program.stats`): the kernel's `add_cycles(n)`. `cycles` is a
        non-negative Python integer or an integer `Scalar` parameter (then each task adds its
        own argument); several calls add up. Results never depend on it."""
        _in_isa_kernel("cpu_sim_add_cycles")
        count = cycles
        if isinstance(count, IsaScalar):
            if kind_of(count.dtype) != "int":
                raise user_error(here(), f"`ptoisa.cpu_sim_add_cycles` counts cycles with an "
                                 f"integer; `{count.name}` is a {count.dtype} scalar",
                                 "declare it `Scalar[DType.I32]`", cls=KernelError)
            node: A.Expr = A.Name(count.name, span=here())
        elif isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 0:
            raise user_error(here(), f"`ptoisa.cpu_sim_add_cycles` takes a non-negative "
                             f"integer or an integer `Scalar` parameter, not {_what(count)}",
                             "wspc's kernels are not C++ text: pass the `Scalar` parameter "
                             "itself" if isinstance(count, str) else None, cls=KernelError)
        else:
            node = A.IntLit(int(count), span=here())
        events = _KSTACK[-1].events
        for i, ev in enumerate(events):  # the kernel's one `add_cycles`: later counts add up
            if ev[0] == "cycles":
                events[i] = ("cycles", A.Binary("+", ev[1], node, ev[2], span=ev[2]), ev[2])
                return
        events.append(("cycles", node, here()))

    def scalar_expr(self, x: Any) -> Any:
        """The scalar operand `x` (a number or a `Scalar` parameter) as the instructions take
        it: the prototype's `scalar_expr` renders an operand for its C++ text; here an operand
        is the value itself, so this returns `x`. Text (a C++ expression) is an error."""
        _in_isa_kernel("scalar_expr")
        if isinstance(x, IsaScalar) or (isinstance(x, numbers.Real) and not isinstance(x, bool)):
            return x
        raise user_error(here(), f"`ptoisa.scalar_expr` takes a number or a `Scalar` "
                         f"parameter of the kernel, not {_what(x)}",
                         "wspc's kernels are not C++ text" if isinstance(x, str) else None,
                         cls=KernelError)

    def tile_expr(self, x: Any) -> IsaTile:
        """The tile operand `x` (a tile register) as the instructions take it: the prototype's
        `tile_expr` renders a register for its C++ text; here it returns the register."""
        _in_isa_kernel("tile_expr")
        return _tile("tile_expr", x, "the operand")

    def __repr__(self) -> str:
        return "<ptoisa instructions>"


ptoisa = _IsaNamespace()

__all__ = ["ptoisa", "ptoisa_kernel", "IsaKernelRef", "IsaParam", "IsaScalar", "IsaTile",
           "NAMES"]
