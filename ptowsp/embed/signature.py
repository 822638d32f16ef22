"""What a kernel offers without its body being compiled: `KernelRef.signature` (its parameters,
read from the declaration the decorator built) and `CompiledKernel`, what `kernel.compile(...)`
returns (the generated text of the kernel for one target).

A signature is read from the `KernelParam` nodes of the kernel's AST, the same nodes the checker
reads, so what it says is what the `.wsp` declaration says: `str(k.signature)` is the kernel's
declaration line, `rmsnorm(x: In[Tile[16, 128, f32]], out: Out[Tile[16, 128, f32]])`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterator, Optional, Union

from ..frontend import ast as A
from ..frontend.printer import expr_str
from .errors import KernelError, user_error
from .source import here
from .values import DType


class ParamInfo:
    """One kernel parameter: `name` (as the Python function spells it), `kind` (`"In"`,
    `"Out"`, `"InOut"`, `"Scalar"` or `"Constexpr"`), `shape` (a tile's `(rows, cols)`, each an
    int or the name of a Constexpr parameter; None for scalars), `dtype` (a `DType`),
    `default` (a scalar's or Constexpr's default value, else None) and `pad` (a tile's pad
    value, else None). `str()` is the parameter as the `.wsp` declaration writes it."""

    __slots__ = ("name", "wsp_name", "kind", "shape", "dtype", "default", "pad", "_text")

    def __init__(self, name: str, wsp_name: str, kind: str, shape: Optional[tuple],
                 dtype: DType, default: Any, pad: Any, text: str):
        self.name, self.wsp_name, self.kind, self.shape = name, wsp_name, kind, shape
        self.dtype, self.default, self.pad, self._text = dtype, default, pad, text

    @property
    def direction(self) -> str:
        """The prototype's lower-case kind: `"in"`, `"out"`, `"inout"`, `"scalar"`,
        `"constexpr"`."""
        return self.kind.lower()

    @property
    def is_tile(self) -> bool:
        return self.shape is not None

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<param {self._text}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParamInfo) and str(self) == str(other) and self.name == other.name

    __hash__ = object.__hash__


class KernelSignature(Mapping):
    """A kernel's parameters in order, also a mapping from each parameter's (Python) name to
    its `ParamInfo`. `symbol` is the kernel's name in the module; `str()` its declaration
    line."""

    def __init__(self, symbol: str, params: tuple):
        self.symbol = symbol
        self.params: tuple[ParamInfo, ...] = params
        self._by_name = {p.name: p for p in params}

    def __getitem__(self, key: Union[str, int]) -> ParamInfo:
        if isinstance(key, int):
            return self.params[key]
        return self._by_name[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self.params)

    def of_kind(self, *kinds: str) -> tuple:
        """The parameters of the given kinds (`"In"`, `"Out"`, ...), in order."""
        return tuple(p for p in self.params if p.kind in kinds)

    def __str__(self) -> str:
        return f"{self.symbol}({', '.join(str(p) for p in self.params)})"

    def __repr__(self) -> str:
        return f"<signature {self}>"


def _value(e: Optional[A.Expr]) -> Any:
    """A literal's Python value (`-x` of one too); None for no expression."""
    if e is None:
        return None
    if isinstance(e, A.Unary) and e.op == "-":
        return -_value(e.operand)
    return getattr(e, "value", None)


def _dim(e: A.Expr, py_names: dict) -> Union[int, str]:
    if isinstance(e, A.IntLit):
        return e.value
    return py_names.get(e.id, e.id)  # a Constexpr parameter, by its Python name


def signature_of(symbol: str, triples: list) -> KernelSignature:
    """The signature of the kernel `symbol` whose parameters are `triples` (`KernelRef.params()`:
    (Python name, `.wsp` name, `KernelParam`))."""
    py_names = {w: p for p, w, _ in triples}
    params = []
    for pname, wname, kp in triples:
        t = kp.type
        default = _value(kp.default)
        text = f"{pname}: "
        if isinstance(t, A.TileParamType):
            shape = (_dim(t.tile.rows, py_names), _dim(t.tile.cols, py_names))
            pad = _value(t.pad)
            kind, dtype = t.mode, t.tile.dtype  # `In`, `Out`, `InOut`
            text += f"{kind}[Tile[{shape[0]}, {shape[1]}, {dtype}]"
            text += f", pad = {expr_str(t.pad)}]" if t.pad is not None else "]"
        else:
            shape, pad = None, None
            kind = "Scalar" if isinstance(t, A.ScalarParamType) else "Constexpr"
            dtype = t.dtype
            text += f"{kind}[{dtype}]"
        if kp.default is not None:
            text += f" = {expr_str(kp.default)}"
        params.append(ParamInfo(pname, wname, kind, shape, DType(dtype), default, pad, text))
    return KernelSignature(symbol, tuple(params))


class CompiledKernel:
    """`kernel.compile(target=..., **constexprs)`: `code` is the kernel's generated source for
    `target` (cpu_sim: the C function the cpu_sim build compiles, `entry` its name;
    ascend_npu: the AICore kernel header of the CANN tree, `entry` its `__aicore__`
    function), `name` the kernel's name in the module (its `symbol`, specialised by the
    Constexpr values), `constexprs` those values."""

    def __init__(self, name: str, target: str, code: str, entry: str, constexprs: dict):
        self.name, self.target, self.code, self.entry = name, target, code, entry
        self.constexprs = dict(constexprs)

    def __str__(self) -> str:
        return self.code

    def __repr__(self) -> str:
        return f"<compiled kernel {self.name} for {self.target}>"

    def __call__(self, *args: Any, **kwargs: Any):
        raise user_error(here(), f"a compiled kernel (`{self.name}`) is generated source, not a "
                         "function to call: kernels run as the tasks of a workload",
                         "call it inside a `@workload` and run `workload().compile()`",
                         cls=KernelError)


__all__ = ["ParamInfo", "KernelSignature", "CompiledKernel", "signature_of"]
