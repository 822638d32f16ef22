"""Kernel bodies: dtypes and tile shapes through every expression (STUB, being written)."""

from __future__ import annotations

from typing import Mapping

from . import ast as A
from .diagnostics import Diagnostics
from .signatures import KernelSig


def check_kernel_body(k: A.KernelDecl, sig: KernelSig, consts: Mapping[str, int],
                      diags: Diagnostics) -> None:
    """Check one kernel's body (or its extern bodies) against its signature."""
