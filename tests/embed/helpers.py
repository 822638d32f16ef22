"""Shared checks for the embedding tests: the `to_wsp` round trip, and errors placed at a line
of the test file marked `# E:name`."""

from __future__ import annotations

import re
from pathlib import Path

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


def line_of(path: Path, marker: str) -> int:
    """The line of `path` that ends with `# E:marker`."""
    lines = path.read_text().splitlines()
    return next(i + 1 for i, text in enumerate(lines) if text.rstrip().endswith(f"# E:{marker}"))


def at_line(path: Path, err: ptowsp.WspError, marker: str) -> str:
    """The rendered error, after checking its first diagnostic is on the marked line of `path`
    and the source line is shown."""
    from pto_wsp import PtoError

    assert isinstance(err, ptowsp.WspError) and isinstance(err, PtoError)
    text = str(err)
    assert text == err.render()
    line = line_of(path, marker)
    assert any(d.span.file == str(path) and d.span.line == line for d in err.diagnostics), text
    assert f"{path}:{line}:" in text
    assert path.read_text().splitlines()[line - 1].rstrip() in text  # the source line is shown
    return text


def markers(file: str):
    """(line_of(marker), at(err, marker)) for the test file `file` (`__file__`)."""
    path = Path(file).resolve()
    return (lambda marker: line_of(path, marker)), (lambda err, marker: at_line(path, err, marker))
