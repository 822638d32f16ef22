"""The files of `wspc fmt` (docs/tools.md, "wspc fmt"): which files a command line names, reading
one (or standard input) as source, and writing one back. The layout itself is
`source_printer.format_text`, reached through `driver.format_text`.

Each problem is a `WspError` at the file as a whole (`file: error: ...`), so that the command
reports it and goes on with the next file.
"""

from __future__ import annotations

import difflib
import os
import sys

from ..diagnostics import Diagnostic, WspError
from ..files import os_reason, write_atomic
from ..limits import MAX_SOURCE_BYTES
from ..spans import Span
from .checker import read_main

STDIN = "-"


def files_of(paths: tuple[str, ...]) -> list[str]:
    """The files `paths` name: each file as given (`read` refuses one that is not `.wsp`),
    and for a directory the `.wsp` files below it in name order, names starting with `.` left
    out (a directory with none stays in the list: `read` says so)."""
    out = []
    for path in paths:
        if path != STDIN and os.path.isdir(path):
            found = []
            for root, dirs, names in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(root, n) for n in sorted(names)
                          if n.endswith(".wsp") and not n.startswith(".")]
            out += found or [path]
        else:
            out.append(path)
    return out


def name_of(path: str) -> str:
    return "<stdin>" if path == STDIN else path


def read(path: str) -> str:
    """The source text of `path` (`-`: standard input, bounded and UTF-8 as a file is)."""
    here = Span(name_of(path), 0, 0, 0, 0)  # the file as a whole: `name: error: ...`
    if path == STDIN:
        data = sys.stdin.buffer.read(MAX_SOURCE_BYTES + 1)
        if len(data) > MAX_SOURCE_BYTES:
            raise WspError([Diagnostic(here, "io", f"larger than {MAX_SOURCE_BYTES >> 20} MiB, the limit "
                                                   "for a source file")])
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise WspError([Diagnostic(here, "io", "not UTF-8 text", "save the file as UTF-8")]) from None
    if os.path.isdir(path):
        raise WspError([Diagnostic(here, "io", "no `.wsp` file below this directory")])
    return read_main(path)


def write(path: str, text: str) -> None:
    """Replace the file `path` with `text`, atomically (`files.write_atomic`)."""
    try:
        write_atomic(path, text)
    except OSError as err:
        raise WspError([Diagnostic(Span(path, 0, 0, 0, 0), "io",
                                   f"cannot write the file: {os_reason(err)}")]) from None


def diff(path: str, old: str, new: str) -> str:
    """A unified diff from `old` to `new`."""
    name = name_of(path)
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), name, name + " (formatted)"))
