"""Shared checks for the embedding tests: the `to_wsp` round trip."""

from __future__ import annotations

import re

import ptowsp
from ptowsp.ir.printer import print_module


def ir_text(module) -> str:
    """The IR dump without source positions (the Python and `.wsp` spans differ)."""
    return re.sub(r" @\d+:\d+", "", print_module(module.ir if hasattr(module, "ir") else module))


def assert_roundtrip(w) -> str:
    """`parse(to_wsp(w))` checks and lowers to the IR the decorators built; returns the text."""
    text = ptowsp.to_wsp(w)
    reparsed = ptowsp.parse(text, "<to_wsp>")
    assert ir_text(reparsed) == ir_text(w.module()), text
    assert ptowsp.to_wsp(w) == text  # deterministic
    return text
