"""Constructs the checker accepts but this build's back ends cannot run yet (element reads in
schedule keys, inline ragged axes, ...): lowering raises `Unsupported` at the construct, the
statement or schedule holding it reports it as an `unsupported` diagnostic, and lowering goes
on, so all of them are raised together as one `WspError` at the end."""

from __future__ import annotations

from ..diagnostics import Diagnostics
from ..spans import Span

UNSUPPORTED = "is not supported by this build's back ends yet"


class Unsupported(Exception):
    """A construct this build cannot lower: reported as one diagnostic at `span`."""

    def __init__(self, span: Span, message: str):
        super().__init__(message)
        self.span = span
        self.message = message

    def report(self, diags: Diagnostics) -> None:
        diags.error(self.span, "unsupported", self.message)
