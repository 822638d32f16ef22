"""Diagnostics: what a user error says, and how it is shown.

A `Diagnostic` is a value (span, code, message, help, notes). Phases append them to a list and
raise `WspError` once at the end; `render` turns them into the text users read:

    model.wsp:12:13: error: unknown name `rowmaen`
       12 |     let ms = rowmaen(x * x)
          |              ^^^^^^^
       = help: did you mean `rowmean`?

Compiler bugs are not diagnostics: they raise `InternalError`, which names the stage.
"""

from __future__ import annotations

import difflib
import functools
from typing import Iterable, Mapping, Optional

from .files import FileError
from .records import record
from .spans import NO_SPAN, Span


@record
class Note:
    """A secondary location ("first declared here")."""

    span: Span
    message: str


@record
class Diagnostic:
    """One user error at a span, with an optional fix (`help`) and related locations."""

    span: Span
    code: str
    message: str
    help: Optional[str] = None
    notes: tuple[Note, ...] = ()
    severity: str = "error"

    def sort_key(self) -> tuple:
        return (self.span.file, self.span.line, self.span.col, self.message)


class WspError(Exception):
    """A user error: one or more diagnostics. Exit status 1."""

    def __init__(self, diagnostics: Iterable[Diagnostic], sources: Optional[Mapping[str, str]] = None):
        self.diagnostics = sorted(diagnostics, key=Diagnostic.sort_key)
        self.sources: dict[str, str] = dict(sources or {})
        super().__init__("\n".join(f"{d.span}: {d.message}" for d in self.diagnostics))

    def render(self, sources: Optional[Mapping[str, str]] = None) -> str:
        merged = dict(self.sources)
        merged.update(sources or {})
        return render_all(self.diagnostics, merged)


def file_error(err: FileError) -> WspError:
    """A `files.FileError` as the user's error, placed at the file it names."""
    return WspError([Diagnostic(Span(err.where, 0, 0, 0, 0), "io", err.message, err.help)])


class InternalError(Exception):
    """A compiler bug in the named stage. Exit status 70."""

    def __init__(self, stage: str, message: str):
        self.stage = stage
        self.message = message
        super().__init__(f"internal error in {stage}: {message}")


class Diagnostics:
    """A collector: phases `error(...)` into it and call `raise_if_any()` once at the end."""

    def __init__(self, sources: Optional[dict[str, str]] = None):
        self.items: list[Diagnostic] = []
        self.sources: dict[str, str] = sources if sources is not None else {}

    def error(self, span: Span, code: str, message: str, help: Optional[str] = None,
              notes: Iterable[Note] = ()) -> None:
        self.items.append(Diagnostic(span, code, message, help, tuple(notes)))

    def add(self, diag: Diagnostic) -> None:
        self.items.append(diag)

    def extend(self, diags: Iterable[Diagnostic]) -> None:
        self.items.extend(diags)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def raise_if_any(self) -> None:
        if self.items:
            raise WspError(_dedupe(self.items), self.sources)


def _dedupe(items: list[Diagnostic]) -> list[Diagnostic]:
    seen: set = set()
    out = []
    for d in items:
        key = (d.span, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def did_you_mean(name: str, candidates: Iterable[str]) -> Optional[str]:
    """A `help:` text for a near-miss name, or None."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None


def printable(text: str) -> str:
    """`text` (a file name, an import's path) safe to print: every character that is not
    printable (control characters, bidirectional overrides, and the bytes of a file name that
    was not UTF-8, which Python keeps as lone surrogates) is written as an escape (`\\r`,
    `\\x1b`, `\\u202e`, `\\xff` for the byte 0xff). Printable text is returned as it is, so
    `printable(printable(t)) == printable(t)`."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        o = ord(ch)
        if ch.isprintable():
            out.append(ch)
        elif 0xDC80 <= o <= 0xDCFF:  # os.fsdecode's stand-in for a byte that was not UTF-8
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif o < 0x100:
            out.append(f"\\x{o:02x}")
        else:
            out.append(f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
    return "".join(out)


_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# A source line longer than this many columns is shown as a window around the caret.
EXCERPT_WIDTH = 160


def _source_text(sources: Mapping[str, str], file: str) -> Optional[str]:
    text = sources.get(file)
    if text is None:  # a span named by the file's printable name (a C compiler's message)
        for name, t in sources.items():
            if printable(name) == file:
                return t
    return text


@functools.lru_cache(maxsize=4)  # every diagnostic of a file shows one of its lines
def _split(text: str) -> list[str]:
    # lines end at "\n" only, as the lexer counts them (splitlines would also split at a form
    # feed or U+2028 in a comment, and show the wrong line); a "\r" before it is not shown
    return text.split("\n")


def _lines(sources: Mapping[str, str], span: Span) -> Optional[list[str]]:
    """The source lines `span` covers (one or more; "" past the end), or None."""
    text = _source_text(sources, span.file)
    if text is None or span.line <= 0:
        return None
    lines = _split(text)
    last = max(span.end_line, span.line)
    if last > span.line and span.end_col <= 1:
        last -= 1  # the span ends where its last line starts: that line holds none of it
    return [lines[n - 1].removesuffix("\r") if n <= len(lines) else ""
            for n in range(span.line, last + 1)]


def _shown(line: str) -> str:
    """A source line as the terminal shows it: tabs as 4 columns, control characters as `?`
    (one column each, so that carets stay aligned, and no escape sequence reaches the terminal)."""
    line = line.expandtabs(4)
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() else "?" for c in line)


def _underlined(line: str, start: int, end: int, first: str, rest: str) -> tuple[str, str]:
    """`line` with 1-based columns `start` to `end` (exclusive) underlined, `first` under the
    first character and `rest` under the others: (shown line, underline), windowed if long."""
    shown_start = len(line[:start - 1].expandtabs(4))
    shown_end = max(len(line[:end - 1].expandtabs(4)), shown_start + 1)
    text = _shown(line)
    mark = " " * shown_start + first + rest * (shown_end - shown_start - 1)
    if len(text) > EXCERPT_WIDTH:
        lo = max(0, min(shown_start - EXCERPT_WIDTH // 4, len(text) - EXCERPT_WIDTH))
        hi = lo + EXCERPT_WIDTH
        text = ("..." if lo else "") + text[lo:hi] + ("..." if hi < len(text) else "")
        mark = ("   " if lo else "") + mark[lo:hi]
    return text.rstrip(), mark.rstrip()


def _excerpt(sources: Mapping[str, str], span: Span, label: str = "") -> list[str]:
    """The source lines under a diagnostic. A span on one line gets `^` under each of its
    characters; a span over several lines shows its first line with `^` under its start and `~`
    to the end of the line, and its last line with `~` up to the span's end (a `...` line
    stands for the lines between)."""
    lines = _lines(sources, span)
    if lines is None:
        return []
    width = len(str(max(span.line, span.end_line)))
    gutter = " " * max(width, 3)

    def row(n: int, text: str) -> str:
        return f" {str(n).rjust(len(gutter))} | {text}".rstrip()

    start = max(span.col, 1)
    if len(lines) == 1:
        end = max(span.end_col, start + 1) if span.end_line == span.line else len(lines[0]) + 1
        text, mark = _underlined(lines[0], start, end, "^", "^")
        return [row(span.line, text), f" {gutter} | {mark}" + (f" {label}" if label else "")]
    first, last = lines[0], lines[-1]
    text, mark = _underlined(first, start, max(len(first) + 1, start + 1), "^", "~")
    out = [row(span.line, text), f" {gutter} | {mark}"]
    if len(lines) > 2:
        out.append(f" {'.' * len(gutter)} |")
    indent = len(last) - len(last.lstrip())
    end = max(span.end_col, indent + 2)
    text, mark = _underlined(last, indent + 1, end, "~", "~")
    out += [row(span.end_line, text), f" {gutter} | {mark}" + (f" {label}" if label else "")]
    return out


def _where(span: Span) -> str:
    return f"{printable(span.file)}:{span.line}:{span.col}"


def render(diag: Diagnostic, sources: Mapping[str, str]) -> str:
    """`file:line:col: error: message`, the source lines with carets, notes and help."""
    span = diag.span
    head = f"{_where(span)}: {diag.severity}: {diag.message}"
    if span is NO_SPAN or span.line == 0:
        head = f"{printable(span.file)}: {diag.severity}: {diag.message}"
    lines = [head]
    lines.extend(_excerpt(sources, span))
    for note in diag.notes:
        lines.append(f"{_where(note.span)}: note: {note.message}")
        lines.extend(_excerpt(sources, note.span))
    if diag.help:
        lines.append(f"help: {diag.help}")
    return "\n".join(lines)


# decision: at most this many diagnostics are shown, then a count of the rest (clang stops at
# 20): a generated or mangled file can have tens of thousands, which no one reads, and
# printing them took minutes (a fuzzed 20,000-operand chain of misuses: 20,000 errors)
MAX_SHOWN = 100


def render_all(diags: Iterable[Diagnostic], sources: Mapping[str, str]) -> str:
    diags = list(diags)
    body = "\n".join(render(d, sources) for d in diags[:MAX_SHOWN])
    if len(diags) > MAX_SHOWN:
        rest = len(diags) - MAX_SHOWN
        body += f"\n... {rest} more diagnostic{'s' if rest > 1 else ''} not shown"
    n = sum(1 for d in diags if d.severity == "error")
    if n > 1:
        body += f"\n{n} errors"
    return body
