"""`pto_wsp.scalar_expr`: the prototype's run-time scalar expressions with wspc's meaning: an
`Expr` (wspc's `ScalarExpr`) is an integer or boolean expression of the workload, evaluated at
run time: slots, symbols, loop variables by name (`axis("b")`) and operators on them.
`fnv1a_64` is the prototype's name hash. The prototype's C++ scalar IR and its task proxies
(`TaskExpr`, `task_param`, `trace_task_fn`, `to_cpp`) import but are errors when used: wspc's
expressions are its AST, checked and lowered with the workload (docs/python.md)."""

from typing import Any, Union

from ptowsp.embed.source import here
from ptowsp.embed.unsupported import TaskExpr, task_param, to_cpp, trace_task_fn
from ptowsp.embed.values import ScalarExpr as Expr
from ptowsp.embed.values import as_scalar, axis, slot_bool, slot_i64, slot_u64, symbol_u64

ScalarLiteral = Union[bool, int]

_FNV_OFFSET, _FNV_PRIME, _U64 = 0xCBF29CE484222325, 0x100000001B3, (1 << 64) - 1


def fnv1a_64(s: str) -> int:
    """The 64-bit FNV-1a hash of `s`'s UTF-8 bytes (the prototype names axes and symbols by it)."""
    h = _FNV_OFFSET
    for byte in str(s).encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & _U64
    return h


def as_expr(x: Any) -> Expr:
    """`x` (an integer, a bool, a symbol or an expression) as a run-time expression; anything
    else is a `CompileError` at the caller's line."""
    return as_scalar(x, here())


__all__ = ["fnv1a_64", "ScalarLiteral", "Expr", "as_expr", "TaskExpr", "symbol_u64", "slot_u64",
           "slot_i64", "slot_bool", "axis", "task_param", "trace_task_fn", "to_cpp"]
