"""AICore kernels in Ascend C (see `kernel.py`): the entry points."""

from .kernel import (
    API_RESERVE,
    UB_BUDGET,
    UB_BYTES,
    AicoreError,
    emit_aicore,
    emit_kernel,
    header_path,
    kernel_entry,
    pc,
    support_header,
    vcount,
)

__all__ = ["emit_aicore", "emit_kernel", "kernel_entry", "header_path", "support_header",
           "AicoreError", "UB_BYTES", "UB_BUDGET", "API_RESERVE", "pc", "vcount"]
