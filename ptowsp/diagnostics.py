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
from typing import Iterable, Mapping, Optional

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


def _source_line(sources: Mapping[str, str], span: Span) -> Optional[str]:
    text = sources.get(span.file)
    if text is None or span.line <= 0:
        return None
    lines = text.splitlines()
    if span.line > len(lines):
        return ""
    return lines[span.line - 1]


def _excerpt(sources: Mapping[str, str], span: Span, label: str = "") -> list[str]:
    line = _source_line(sources, span)
    if line is None:
        return []
    width = len(str(span.line))
    gutter = " " * max(width, 3)
    start = max(span.col, 1)
    end = max(span.end_col, start + 1) if span.end_line == span.line else max(len(line) + 1, start + 1)
    # tabs are shown as 4 columns and the caret moves with them (message columns count characters)
    shown_start = len(line[:start - 1].expandtabs(4))
    shown_end = len(line[:end - 1].expandtabs(4))
    carets = " " * shown_start + "^" * max(shown_end - shown_start, 1)
    return [f" {str(span.line).rjust(len(gutter))} | {line.expandtabs(4)}".rstrip(),
            f" {gutter} | {carets}" + (f" {label}" if label else "")]


def render(diag: Diagnostic, sources: Mapping[str, str]) -> str:
    """`file:line:col: error: message`, the source line, a caret line, notes and help."""
    span = diag.span
    head = f"{span.file}:{span.line}:{span.col}: {diag.severity}: {diag.message}"
    if span is NO_SPAN or span.line == 0:
        head = f"{span.file}: {diag.severity}: {diag.message}"
    lines = [head]
    lines.extend(_excerpt(sources, span))
    for note in diag.notes:
        lines.append(f"{note.span.file}:{note.span.line}:{note.span.col}: note: {note.message}")
        lines.extend(_excerpt(sources, note.span))
    if diag.help:
        lines.append(f"help: {diag.help}")
    return "\n".join(lines)


def render_all(diags: Iterable[Diagnostic], sources: Mapping[str, str]) -> str:
    diags = list(diags)
    body = "\n".join(render(d, sources) for d in diags)
    n = sum(1 for d in diags if d.severity == "error")
    if n > 1:
        body += f"\n{n} errors"
    return body
