"""Tokens of a `.wsp` file, with the statement-separator rules of language.md section 2.

The token shapes come from the terminals of `grammar/wsp.lark` (the parser hands them over as
a `LexSpec`), so the grammar stays the one place that says what a token looks like. One master
regular expression does the matching: much faster than a general lexer's per-token work.

Separators: newlines and `;` become `_SEP` tokens where a statement ends and vanish where it
goes on. A line ending in an operator, `(`, `[`, `,` or `.` continues; so does a line starting
with `.`, `else` or `otherwise`. Newlines inside `(...)` and `[...]` never end a statement (as
in Python). Separators right after `{`, before `}`, at the start and at the end of the file, and
repeated ones, are dropped. A `}` followed on the same line by another statement ends it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from operator import itemgetter
from typing import Iterator, Optional

# A line ending in one of these continues on the next line.
_CONTINUES_AFTER = frozenset("+ - * / % < <= > >= == != = : , ( [ . and or not in as".split())
# A line starting with one of these continues the previous line. language.md names `.`, `else`
# and `otherwise`; `{` (a block opening on the next line) and `extern` (a kernel's second
# foreign body) can start no statement, so accepting them breaks no program.
_CONTINUES_BEFORE = frozenset([".", "else", "otherwise", "{", "extern"])
# After a `}` one of these may follow on the same line without a separator.
_FOLLOWS_BRACE = frozenset(["}", ")", "]", ",", ".", "else", "otherwise", ";"])


class Tok(tuple):
    """A token: its terminal name, text and position (1-based line and column, end exclusive).

    A tuple underneath: made by one C call, which matters at tens of thousands per file."""

    __slots__ = ()
    type = property(itemgetter(0))
    value = property(itemgetter(1))
    pos = property(itemgetter(2))
    line = property(itemgetter(3))
    column = property(itemgetter(4))
    end_line = property(itemgetter(5))
    end_column = property(itemgetter(6))

    def __new__(cls, type: str, value: str, pos: int, line: int, column: int, end_line: int,
                end_column: int) -> "Tok":
        return tuple.__new__(cls, (type, value, pos, line, column, end_line, end_column))

    def __repr__(self) -> str:
        return f"Tok({self[0]}, {self[1]!r}, {self[3]}:{self[4]})"

    def retyped(self, type: str, value: Optional[str] = None) -> "Tok":
        return _new_tok((type, self[1] if value is None else value) + self[2:])


_new_tok = partial(tuple.__new__, Tok)


class UnexpectedCharacter(Exception):
    """No token starts at `pos`: an unknown character, or the opening `"`, `\"\"\"` or `/*` of a
    string or comment that is never closed (the parser tells them apart by the text there)."""

    def __init__(self, pos: int, line: int, column: int):
        super().__init__(f"unexpected character at {line}:{column}")
        self.pos, self.line, self.column = pos, line, column


@dataclass(frozen=True)
class LexSpec:
    """What the lexer needs from the grammar: regexes of the pattern terminals (in the order
    they are tried), the ignored ones, and the literal terminals (keywords and punctuation)."""

    patterns: tuple[tuple[str, str], ...]
    ignored: tuple[str, ...]
    literals: tuple[tuple[str, str], ...]  # (text, terminal name)


class Lexer:
    """Turns text into tokens; `open_braces` keeps the unclosed `{` of the last run."""

    def __init__(self, spec: LexSpec) -> None:
        self.keywords: dict[str, str] = {}
        self.punct: dict[str, str] = {}
        for text, name in spec.literals:
            if re.fullmatch(r"[A-Za-z_]\w*", text):
                self.keywords[text] = name
            else:
                self.punct[text] = name
        groups = [f"(?P<WS>{'|'.join(spec.ignored)})", r"(?P<NL>\n)", r"(?P<SEMI>;)"]
        groups += [f"(?P<{name}>{regex})" for name, regex in spec.patterns]
        punct = sorted(self.punct, key=len, reverse=True)
        groups.append("(?P<PUNCT>" + "|".join(re.escape(p) for p in punct) + ")")
        self.master = re.compile("|".join(groups))
        self.open_braces: list[Tok] = []
        # the separator rules by token type (each of these texts is exactly one terminal)
        by_text = {**self.keywords, **self.punct}
        binop = next(name for name, _ in spec.patterns if name == "BINOP")
        self.cont_after = frozenset(by_text.get(t, binop) for t in _CONTINUES_AFTER)
        self.cont_before = frozenset(by_text[t] for t in _CONTINUES_BEFORE)
        self.follows_brace = frozenset(by_text[t] for t in _FOLLOWS_BRACE if t != ";")

    def tokens(self, text: str) -> Iterator[Tok]:
        """The token stream the grammar sees: separators applied, ending with `$END`."""
        # One loop for matching and separators: this is the hottest code of the front end.
        match, keywords, punct = self.master.match, self.keywords, self.punct
        cont_after, cont_before, follows_brace = self.cont_after, self.cont_before, self.follows_brace
        new = _new_tok
        self.open_braces = open_braces = []
        pos, line, line_start, n = 0, 1, 0, len(text)
        depth = 0
        prev_type: Optional[str] = None
        pending: Optional[Tok] = None  # a separator we may still drop
        pending_explicit = False  # it came from a `;`
        while pos < n:
            m = match(text, pos)
            if m is None:
                raise UnexpectedCharacter(pos, line, pos - line_start + 1)
            kind, end = m.lastgroup, m.end()
            if kind == "WS":
                value = m.group()
                if "\n" in value:  # a block comment spanning lines
                    line += value.count("\n")
                    line_start = pos + value.rfind("\n") + 1
                pos = end
                continue
            col = pos - line_start + 1
            if kind == "NL" or kind == "SEMI":
                explicit = kind == "SEMI"
                tok = new(("_SEP", ";" if explicit else "\n", pos, line, col, line, col + 1))
                if kind == "NL":
                    line += 1
                    line_start = end
                pos = end
                if not explicit and (depth > 0 or prev_type in cont_after):
                    continue
                if prev_type is None or prev_type == "LBRACE":
                    continue
                if pending is None:
                    pending = tok
                pending_explicit = pending_explicit or explicit
                continue
            value = m.group()
            if kind == "NAME":
                kind = keywords.get(value, "NAME")
            elif kind == "PUNCT":
                kind = punct[value]
            if kind == "RAW_STRING" or kind == "STRING":
                # `"""` not closed: RAW_STRING (tried first) failed, STRING matched the `""`
                if value == '""' and text.startswith('"', end):
                    raise UnexpectedCharacter(pos, line, col)
                newlines = value.count("\n")
            else:
                # `/*` not closed: BLOCK_COMMENT (tried first) failed, BINOP matched the `/`
                if kind == "BINOP" and value == "/" and text.startswith("*", end):
                    raise UnexpectedCharacter(pos, line, col)
                newlines = 0
            if newlines:
                tok = new((kind, value, pos, line, col, line + newlines, end - pos - value.rfind("\n")))
                line += newlines
                line_start = pos + value.rfind("\n") + 1
            else:
                tok = new((kind, value, pos, line, col, line, col + end - pos))
            pos = end
            if pending is not None:
                if not (kind == "RBRACE" or (not pending_explicit and kind in cont_before)):
                    yield pending
                pending, pending_explicit = None, False
            elif prev_type == "RBRACE" and depth == 0 and kind not in follows_brace:
                yield tok.retyped("_SEP", "")
            if kind == "LPAR" or kind == "LSQB":
                depth += 1
            elif kind == "RPAR" or kind == "RSQB":
                depth = max(depth - 1, 0)
            elif kind == "LBRACE":
                depth = 0  # a brace ends any unbalanced bracket: keeps one typo from eating the file
                open_braces.append(tok)
            elif kind == "RBRACE":
                depth = 0
                if open_braces:
                    open_braces.pop()
            yield tok
            prev_type = kind
        lines = text.rstrip().split("\n")  # "end of file" is shown after the last visible text
        end_line, end_col = len(lines), len(lines[-1]) + 1
        yield new(("$END", "", len(text), end_line, end_col, end_line, end_col + 1))


@dataclass(frozen=True)
class Comment:
    """A `//` or `/* */` comment: where it starts (1-based), the line it ends on, its text, and
    whether only blanks precede it on its line (`alone`: a comment line of its own)."""

    line: int
    col: int
    end_line: int
    text: str
    alone: bool


def layout_scan(lexer: Lexer, text: str) -> tuple[list[Comment], list[tuple[int, int, str]]]:
    """What `wspc fmt` needs beyond the AST: the comments (which `tokens` skips as blanks) and
    the positions of the braces, `(line, col, "{" or "}")`, in source order.

    A second pass with the same master regex, so a `//` inside a string or a `\"\"\"` body is
    never taken for a comment; only the formatter pays for it. Call it on text that lexed."""
    match = lexer.master.match
    comments: list[Comment] = []
    braces: list[tuple[int, int, str]] = []
    pos, line, line_start, n = 0, 1, 0, len(text)
    while pos < n:
        m = match(text, pos)
        if m is None:
            raise UnexpectedCharacter(pos, line, pos - line_start + 1)
        value, end, kind = m.group(), m.end(), m.lastgroup
        col = pos - line_start + 1
        if kind == "WS" and value[:2] in ("//", "/*"):
            alone = not text[line_start:pos].strip()
            comments.append(Comment(line, col, line + value.count("\n"), value.rstrip(), alone))
        elif kind == "PUNCT" and value in ("{", "}"):
            braces.append((line, col, value))
        newlines = value.count("\n")
        if newlines:
            line += newlines
            line_start = pos + value.rfind("\n") + 1
        pos = end
    return comments, braces
