"""Workload bodies and schedules (STUB, being written)."""

from __future__ import annotations

from .diagnostics import Diagnostics
from .env import ModuleEnv


def check_workloads(env: ModuleEnv, diags: Diagnostics) -> None:
    """Check every workload body and every schedule of the module."""
