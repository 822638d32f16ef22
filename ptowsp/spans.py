"""Source spans, shared by the AST, the IR and run-time error reports."""

from __future__ import annotations

from .records import record as node


@node
class Span:
    """A source range: 1-based line and column of the first character, end exclusive."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def merge(self, other: "Span") -> "Span":
        """The smallest span covering both (same file)."""
        start = min((self.line, self.col), (other.line, other.col))
        end = max((self.end_line, self.end_col), (other.end_line, other.end_col))
        return Span(self.file, start[0], start[1], end[0], end[1])

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NO_SPAN = Span("<builtin>", 0, 0, 0, 0)
