"""`AicoreError`: a kernel the AICore emitter cannot give the AICore (too big for the Unified
Buffer, an op without AICore code); `emit_aicore` turns it into a diagnostic at the kernel."""

from __future__ import annotations

from typing import Optional

from ....ir import nodes as N


class AicoreError(Exception):
    """A kernel this emitter cannot give the AICore: `message` at `span` (the kernel)."""

    def __init__(self, message: str, span=N.NO_SPAN, help: Optional[str] = None):
        super().__init__(message)
        self.message, self.span, self.help = message, span, help


class UbOverflow(AicoreError):
    """A kernel whose buffers do not fit the Unified Buffer even in the smallest chunks:
    reported at the call that creates its specialisation when it has `Constexpr` values
    (`emit_aicore`), else at the kernel."""
