"""Parse `.wsp` text into AST nodes. The only module that imports Lark.

Lark reads `grammar/wsp.lark` and computes its LALR(1) tables; we keep those tables (and the
terminal shapes the lexer needs) as plain data in a `marshal` file in the cache directory, keyed
by the grammar's hash, so an ordinary run neither imports Lark nor rebuilds tables. A small driver
below runs the tables: per reduction it shapes the children exactly as Lark's tree builder
would (anonymous tokens dropped, `_rule` children spliced in, `?rule` with one child passed
through, `[optional]` parts as None) and calls the `AstBuilder` method named after the rule.
Measured on a 2,000-line module, this is about twice as fast as Lark's own parse loop and
saves Lark's import (~80 ms) on every run.

Syntax errors become diagnostics that say in words what was expected.
"""

from __future__ import annotations

import hashlib
import marshal
import re
from pathlib import Path
from typing import Any, Optional

from ..diagnostics import Diagnostic, Diagnostics, InternalError
from ..files import FileError, cache_dir, read_bounded, write_with
from . import ast as A
from .builder import _TASK_AS_VALUE, KEYWORDS, AstBuilder, ParseIssue
from .lexer import Comment, Lexer, LexSpec, Tok, UnexpectedCharacter, layout_scan
from .nesting import MAX_BLOCKS, MAX_DEPTH, nesting_errors

__all__ = ["parse", "grammar_text", "layout"]

_TABLES_FORMAT = 4  # bump when the pickled layout below changes


# The tables are plain data (dicts, tuples, strings, ints), so that `marshal` can keep them:
#   states:  {state: {terminal or nonterminal name: next state (>= 0) or -1 - rule index}}
#   rules:   ((origin, size, callback or None, include or None, append_none, expand1), ...)
#            callback None: a `_rule`, whose children are spliced into its parent;
#            include: (child index, splice?, Nones before it) as Lark's tree builder shapes it;
#            expand1: a `?rule`, whose single child is passed through
#   lex:     a LexSpec as a tuple; literal_of: terminal name -> its text, for messages
Tables = dict


def grammar_text() -> str:
    # ptowsp/grammar is a link to the repository's grammar/ folder, shipped as package data
    return (Path(__file__).resolve().parents[1] / "grammar" / "wsp.lark").read_text(encoding="utf-8")


# The lexer tries pattern terminals in this order (first match wins); literal terminals
# (keywords, punctuation) are recognised by their text.
_PATTERN_ORDER = ("RAW_STRING", "STRING", "FLOAT", "INT", "NAME", "BINOP")


def build_tables(text: str) -> Tables:
    """Run Lark's LALR analysis on the grammar and keep what the driver needs."""
    from lark import Lark
    from lark.parsers.lalr_analysis import Shift

    lk = Lark(text, parser="lalr", lexer="basic", maybe_placeholders=True)
    table = lk.parser.parser.parser.parse_table
    rule_index = {rule: i for i, rule in enumerate(lk.rules)}
    builder_methods = {name for name in dir(AstBuilder) if not name.startswith("__")}
    rules = []
    for rule in lk.rules:
        opts = rule.options
        name = rule.alias or rule.origin.name
        expansion = rule.expansion
        # Lark's maybe_create_child_filter, as data: which children stay, which are spliced
        if opts.empty_indices:
            bits = "".join(str(int(b)) for b in opts.empty_indices)
            nones = [len(ones) for ones in bits.split("0")]
        else:
            nones = [0] * (len(expansion) + 1)
        include, pending = [], 0
        for i, sym in enumerate(expansion):
            pending += nones[i]
            if opts.keep_all_tokens or not (sym.is_term and sym.filter_out):
                include.append((i, (not sym.is_term) and sym.name.startswith("_"), pending))
                pending = 0
        pending += nones[len(expansion)]
        shaped = bool(opts.empty_indices) or len(include) < len(expansion) or any(s for _, s, _ in include)
        callback = name if name in builder_methods else None
        if callback is None and not name.startswith("_") and not (opts.expand1 and not rule.alias):
            raise InternalError("parse", f"grammar rule `{name}` has no AstBuilder method")
        rules.append((str(rule.origin.name), len(expansion), callback and str(callback),
                      tuple(include) if shaped else None, pending if shaped else 0,
                      bool(opts.expand1 and not rule.alias)))
    # Lark names symbols with its own str subclass; plain str keys keep Lark out of the pickle
    # (loading it would import Lark) and make every lookup a plain string comparison.
    # actions as ints: a shift (or goto) to state s is s, a reduction by rule r is -1 - r
    states = {
        int(s): {str(sym): int(arg) if action is Shift else -1 - rule_index[arg]
            for sym, (action, arg) in actions.items()}
        for s, actions in table.states.items()
    }
    terms = {t.name: t for t in lk.terminals}
    lex = (
        tuple((n, str(terms[n].pattern.to_regexp())) for n in _PATTERN_ORDER),
        tuple(str(terms[n].pattern.to_regexp()) for n in lk.ignore_tokens),
        tuple((str(t.pattern.value), str(t.name)) for t in lk.terminals if t.pattern.type == "str"),
    )
    literal_of = {str(t.name): str(t.pattern.value) for t in lk.terminals if t.pattern.type == "str"}
    return {"states": states, "rules": tuple(rules), "start": int(table.start_states["start"]),
            "end": int(table.end_states["start"]), "lex": lex, "literal_of": literal_of}


def _cache_key(text: str) -> str:
    # The tables and the way the driver shapes children are computed together from the grammar
    # and stored together, so the grammar's text (and this file's format) is the whole key; no
    # Lark version is needed (and looking one up costs more than loading the tables).
    return hashlib.sha256(f"{_TABLES_FORMAT}\0{text}".encode()).hexdigest()[:20]


def load_tables() -> Tables:
    """The tables from the cache, building (and caching, atomically) them when missing or
    damaged. The file is the SHA-256 of the marshalled tables, then the tables: anything else
    (truncated, overwritten, another format's) is rebuilt, never loaded."""
    text = grammar_text()
    try:
        path = cache_dir() / f"grammar-{_cache_key(text)}.marshal"
    except FileError:  # no place for a cache: build the tables each time
        return build_tables(text)
    try:
        # a special file there (a FIFO) is refused, never waited on; the bound: the tables
        # are ~30 KB
        raw = read_bounded(path, 4 << 20)
        if hashlib.sha256(raw[32:]).digest() == raw[:32]:
            return marshal.loads(raw[32:])
    except (FileError, OSError, EOFError, ValueError, TypeError):
        pass
    tables = build_tables(text)
    data = marshal.dumps(tables)
    try:
        # concurrent runs each write whole files; the last rename wins
        write_with(path, lambda fh: fh.write(hashlib.sha256(data).digest() + data))
    except OSError:
        pass  # an unwritable cache only costs the rebuild next time
    return tables


class _Parser:
    """Tables, lexer and builder, made once per process."""

    def __init__(self, tables: Tables):
        self.tables = tables
        self.lexer = Lexer(LexSpec(*tables["lex"]))
        self.builder = AstBuilder()
        self.rules = [
            (origin, size, getattr(self.builder, callback) if callback else None,
             include, append_none, expand1,
             # a unit rule that passes its one child through (`?postfix: atom`, ...): most
             # reductions are these, and they need only a new state, not a new value
             size == 1 and include is None and expand1)
            for origin, size, callback, include, append_none, expand1 in tables["rules"]
        ]

    def run(self, text: str) -> Any:
        """Drive the LALR tables over the token stream; returns the value of `start`."""
        states, rules = self.tables["states"], self.rules
        end_state = self.tables["end"]
        state_stack = [self.tables["start"]]
        value_stack: list = []
        push_state, push_value = state_stack.append, value_stack.append
        for tok in self.lexer.tokens(text):
            ttype = tok[0]
            # what this token's reductions took off the state stack, to rebuild the stack as
            # it was before them for an error message (copying the stack per token instead
            # made deeply nested input cost depth x tokens)
            undo: list = []
            while True:
                action = states[state_stack[-1]].get(ttype)
                if action is None:
                    raise _UnexpectedToken(tok, self.accepts(_undone(state_stack, undo)))
                if action >= 0:
                    push_state(action)
                    push_value(tok)
                    break
                origin, size, fn, include, append_none, expand1, unit = rules[-1 - action]
                if unit:
                    undo.append(state_stack[-1])
                    state_stack[-1] = states[state_stack[-2]][origin]
                    if ttype == "$END" and state_stack[-1] == end_state:
                        return value_stack[-1]
                    continue
                if size:
                    children = value_stack[-size:]
                    del value_stack[-size:]
                    undo.append(state_stack[-size:])
                    del state_stack[-size:]
                else:
                    children = []
                    undo.append([])
                if include is not None:
                    shaped: list = []
                    steps = include
                    if include and include[0] == (0, True, 0) and type(children[0]) is list:
                        # a left-recursive repetition (`(op operand)+` is `_plus: x | _plus x`):
                        # its list of the items so far was made by its own reduction and is
                        # referenced nowhere else, so it grows in place; copying it on every
                        # reduction made an n-operand chain cost n^2
                        shaped, steps = children[0], include[1:]
                    for i, splice, nones in steps:
                        if nones:
                            shaped.extend([None] * nones)
                        if splice:
                            shaped.extend(children[i])
                        else:
                            shaped.append(children[i])
                    if append_none:
                        shaped.extend([None] * append_none)
                    children = shaped
                if expand1 and len(children) == 1:
                    value = children[0]
                elif fn is None:
                    value = children  # a `_rule`: its parent splices these in
                else:
                    value = fn(children)
                push_state(states[state_stack[-1]][origin])
                push_value(value)
                if ttype == "$END" and state_stack[-1] == end_state:
                    return value_stack[-1]
        raise InternalError("parse", "the token stream ended without `$END`")


    def accepts(self, stack: list[int]) -> set[str]:
        """The terminals that could come next: those the tables would shift after reducing.

        LALR merges lookaheads, so the actions of the state where an error shows up also list
        tokens that fit only other contexts; trying each terminal on the stack as it was before
        the offending token gives an honest "expected ..." (as Lark's `accepts()` does)."""
        states, rules = self.tables["states"], self.tables["rules"]
        terminals = {t for row in states.values() for t in row if t.isupper()}
        out = set()
        for t in terminals:
            st = list(stack)
            while True:
                action = states[st[-1]].get(t)
                if action is None:
                    break
                if action >= 0:
                    out.add(t)
                    break
                origin, size = rules[-1 - action][:2]
                if size:
                    del st[-size:]
                st.append(states[st[-1]][origin])
        return out


def _undone(stack: list[int], undo: list) -> list[int]:
    """`stack` as it was before the reductions logged in `undo` (an int: a unit reduction
    replaced the top state, which was that int; a list: the states a reduction popped before
    pushing one)."""
    stack = list(stack)
    for step in reversed(undo):
        if type(step) is int:
            stack[-1] = step
        else:
            stack.pop()
            stack.extend(step)
    return stack


class _UnexpectedToken(Exception):
    def __init__(self, token: Tok, expected: set[str]):
        super().__init__(f"unexpected {token!r}")
        self.token, self.expected = token, expected


_PARSER: Optional[_Parser] = None


def _parser() -> _Parser:
    global _PARSER
    if _PARSER is None:
        _PARSER = _Parser(load_tables())
    return _PARSER


# ---------------------------------------------------------------------------------------------
# Syntax errors in words

_TOKEN_WORDS = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "STRING": "a string",
    "BINOP": "an operator", "RAW_STRING": "a `\"\"\"` string", "_SEP": "end of statement",
    "$END": "end of file", "OR": "`or`", "AND": "`and`", "NOT": "`not`", "TRUE": "`true`",
    "FALSE": "`false`",
}
_EXPR_START = {"NAME", "INT", "FLOAT", "STRING", "LPAR", "BINOP", "NOT", "TRUE", "FALSE"}
_DECL_START = {"MODULE", "IMPORT", "SYM", "CONST", "MESH", "INPUT", "OUTPUT", "INOUT", "SCRATCH", "AXIS",
               "CHANNEL", "EVENT", "KERNEL", "WORKLOAD", "SCHEDULE"}
_OPERATORS = {"BINOP", "AND", "OR", "DOT", "LPAR", "LSQB", "EQUAL"}
_STMT_START = {"LET", "FOR", "WHEN", "COMBINE", "SEQUENTIAL", "PIPE", "PROCESS", "SEND", "CONSUME",
               "RECORD", "SYNCHRONIZE"}


def _words(literal_of: dict[str, str], expected: set[str]) -> str:
    parts: list[str] = []
    if len(expected & _DECL_START) >= 4:
        parts.append("a declaration (`kernel`, `workload`, `input`, `sym`, ...)")
        expected -= _DECL_START
    if len(expected & _EXPR_START) >= 4:
        parts.append("an expression")
        expected -= _EXPR_START
    if len(expected & _OPERATORS) >= 4:
        parts.append("an operator")
        expected -= _OPERATORS
    if len(expected & _STMT_START) >= 4:
        parts[:0] = ["a statement"]
        expected -= _STMT_START
        if "an expression" in parts:
            parts.remove("an expression")
    for name in sorted(expected, key=lambda n: (n not in ("RPAR", "RSQB", "RBRACE", "COMMA"), n)):
        if name in _TOKEN_WORDS:
            parts.append(_TOKEN_WORDS[name])
        elif name in literal_of:
            parts.append(f"`{literal_of[name]}`")
        else:
            parts.append(name.lower())
    parts = sorted(dict.fromkeys(parts), key=lambda p: p in ("an expression", "an operator"))
    if len(parts) > 6:
        parts = parts[:6] + ["..."]
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def _found(tok: Tok) -> str:
    if tok.type == "$END":
        return "end of file"
    if tok.type == "_SEP":
        return "`;`" if tok.value == ";" else "end of line"
    value = tok.value
    if len(value) > 20:
        value = value[:17] + "..."
    return f"`{value}`"


def _tok_span(file: str, tok: Tok) -> A.Span:
    return A.Span(file, tok.line, tok.column, tok.end_line, tok.end_column)


def _unexpected_token(p: _Parser, err: _UnexpectedToken, file: str, text: str) -> Diagnostic:
    tok, expected = err.token, set(err.expected)
    if tok.type == "$END" and "RBRACE" in expected and p.lexer.open_braces:
        return Diagnostic(_tok_span(file, p.lexer.open_braces[-1]), "syntax", "this `{` is never closed",
                          "add the missing `}`")
    if tok.type == "$END":
        expected.discard("_SEP")  # a statement may always end at the end of the file
    if tok.type == "_SEP" and tok.value != ";":
        span = A.Span(file, tok.line, tok.column, tok.line, tok.column + 1)
    else:
        span = _tok_span(file, tok)
    help_text = None
    line_before = text.split("\n")[tok.line - 1][:tok.column - 1] if tok.type != "$END" else ""
    if re.search(r"\b(if|elif)\s*$", line_before) or (tok.type == "NAME" and tok.value in ("if", "elif")):
        help_text = "write `when PRED { ... } else when PRED { ... } otherwise { ... }`"
    elif tok.type == "_SEP" and "RPAR" in expected:
        help_text = "a `(` opened earlier is not closed"
    elif tok.type in KEYWORD_TYPES and "NAME" in expected:
        help_text = f"`{tok.value}` is a keyword; choose another name"
    words = _words(p.tables["literal_of"], expected)
    return Diagnostic(span, "syntax", f"expected {words}, found {_found(tok)}", help_text)


KEYWORD_TYPES = frozenset(k.upper() for k in KEYWORDS)


def _unexpected_character(err: UnexpectedCharacter, file: str, text: str) -> Diagnostic:
    ch = text[err.pos]
    span = A.Span(file, err.line, err.column, err.line, err.column + 1)
    if text.startswith('"""', err.pos):
        return Diagnostic(span, "syntax", 'unterminated `"""` string', 'close it with `"""`')
    if ch == '"':
        return Diagnostic(span, "syntax", "unterminated string", "close the string with `\"` on the same line")
    if text.startswith("/*", err.pos):
        return Diagnostic(span, "syntax", "unterminated block comment", "close it with `*/`")
    return Diagnostic(span, "syntax", f"unexpected character `{ch}`")


def parse(text: str, file: str = "<string>") -> A.SourceFile:
    """Parse one file; raises `WspError` with a diagnostic on a syntax error."""
    p = _parser()
    diags = Diagnostics({file: text})
    p.builder.reset(file)
    try:
        decls = p.run(text)
    except _UnexpectedToken as err:
        diags.add(_unexpected_token(p, err, file, text))
    except UnexpectedCharacter as err:
        diags.add(_unexpected_character(err, file, text))
    except ParseIssue as issue:
        diags.error(issue.span, "syntax", issue.message, issue.help)
    diags.raise_if_any()
    flat: list = []
    for d in decls:
        flat.extend(d if isinstance(d, list) else [d])
    for node in p.builder.raw_calls.values():
        if isinstance(node.func, A.Index):
            diags.error(node.span, "syntax", *_TASK_AS_VALUE)
        else:
            diags.error(node.span, "syntax", "a method call is only allowed in a schedule chain")
    diags.raise_if_any()
    sf = A.SourceFile(file, tuple(flat), text, span=A.Span(file, 1, 1, 1, 1))
    # every level of nesting takes a character of the text, and every block a `{`: a shorter
    # text cannot pass the limits, and most files skip the walk (or walk only the statements)
    deep_text = len(text) > MAX_DEPTH
    if deep_text or text.count("{") > MAX_BLOCKS:
        diags.extend(nesting_errors([sf], blocks_only=not deep_text))
        diags.raise_if_any()
    return sf



def layout(text: str) -> tuple[list[Comment], list[tuple[int, int, str]]]:
    """The comments and brace positions of text that `parse` accepted (`lexer.layout_scan`)."""
    return layout_scan(_parser().lexer, text)
