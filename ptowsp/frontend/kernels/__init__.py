"""Kernel bodies: dtypes and tile shapes through every expression, and the statement rules.

`check_kernel_body` (check.py) checks one kernel against its signature (built by
`signatures.py`): parameter defaults, `Constexpr` dtypes, extern languages, then (for tile
bodies) every statement: `let`, rebinding, `store`, and the straight-line rule. Expressions are
typed with the primitive table and operator rules of `ptowsp/primitives`. Every independent
error is reported; an expression found wrong gets the error type, which silences everything
built on it, so one mistake gives one diagnostic. The result, `KernelTypes` (state.py), records the
inferred types for lowering.

`KernelChecker` is one class composed of one mixin per concept over the shared `KernelState`
(state.py); the mixins call each other through `self`:

    params.py       ParamChecks      tile dimensions, Constexpr dtypes, defaults, extern bodies
    statements.py   StatementChecks  `let`, rebinding, `store`, the straight-line rule
    expressions.py  ExprChecks       names, literals, operators, primitive calls and their types

Left to others: duplicate parameter names (the driver), how tasks bind arguments (workloads).
"""

from .check import check_kernel_body
from .state import KernelTypes

__all__ = ["check_kernel_body", "KernelTypes"]
