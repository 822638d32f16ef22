"""`check_kernel_body`: one kernel's parameters and body against its signature.

`KernelChecker` is one class composed of one mixin per concept over `KernelState` (state.py):
parameters and extern bodies (params.py), statements (statements.py), expressions
(expressions.py), slices (slices.py); the mixins call each other through `self`.
"""

from __future__ import annotations

from typing import Mapping, Optional

from ...diagnostics import Diagnostics
from .. import ast as A
from ..signatures import KernelSig
from .expressions import ExprChecks
from .params import ParamChecks
from .slices import SliceChecks
from .state import KernelState, KernelTypes
from .statements import StatementChecks


def check_kernel_body(
    k: A.KernelDecl, sig: KernelSig, consts: Mapping[str, int], diags: Diagnostics
) -> Optional[KernelTypes]:
    """Check one kernel's parameters and its body (or its extern bodies) against its signature.

    Returns the inferred types of a tile body, or None for an extern kernel.
    """
    checker = KernelChecker(k, sig, consts, diags)
    checker.check_params()
    if k.body is None:
        checker.check_externs()
        return None
    return checker.check_body(k.body)


class KernelChecker(StatementChecks, ExprChecks, SliceChecks, ParamChecks, KernelState):
    """Checks one kernel: `check_params`, then `check_externs` or `check_body`."""
