"""`pto_wsp.scalar_expr`: the seeds' run-time scalar expressions (slots, symbols, loop
variables by name), as in `from pto_wsp.scalar_expr import slot_u64`."""

from ptowsp.embed.values import ScalarExpr as Expr
from ptowsp.embed.values import axis, slot_bool, slot_i64, slot_u64, symbol_u64

__all__ = ["Expr", "axis", "slot_u64", "slot_i64", "slot_bool", "symbol_u64"]
