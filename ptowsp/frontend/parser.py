"""Parse `.wsp` text into AST nodes (`frontend/ast.py`). The only module that imports Lark.

Three pieces:
- `WspLexer`, a lexer (one master regex built from the grammar's terminals) that also applies
  the statement-ending rules of language.md section 2 (newline, `;`, closing `}`, continuations);
- `AstBuilder`, a Lark transformer applied during LALR parsing (no parse tree is built) that
  turns rules into AST nodes at once and gives meaning to the spellings the grammar parses as
  plain expressions: types (`In[Tile[16, 128, f32]]`), axes (`Dense[8]`, `Ragged(b, L)`),
  `P.seq(...)`, `P.when(...) { }`, `store(...)`, `slot_set(...)`;
- `parse()`, which turns Lark's exceptions into diagnostics phrased in words.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, Iterator, Optional

from lark import Lark, Token, Transformer
from lark.lexer import Lexer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from . import ast as A
from .diagnostics import Diagnostic, Diagnostics, WspError

KEYWORDS = frozenset(
    "module import sym const input output inout scratch axis kernel workload schedule channel "
    "event let for in when else otherwise pipe process send consume as combine sequential record "
    "synchronize extern and or not true false".split()
)
DTYPES = ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool")
KERNEL_PREFIXES = ("tl", "pto")

# ---------------------------------------------------------------------------------------------
# Statement separators (language.md section 2)

# A line ending in one of these continues on the next line.
_CONTINUES_AFTER = frozenset(
    "+ - * / % < <= > >= == != = : , ( [ . and or not in as".split()
)
# A line starting with one of these continues the previous line. language.md names `.`, `else`
# and `otherwise`; `{` (a block opening on the next line) and `extern` (a kernel's second
# foreign body) can start no statement, so accepting them breaks no program.
_CONTINUES_BEFORE = frozenset([".", "else", "otherwise", "{", "extern"])
# After a `}` one of these may follow on the same line without a separator.
_FOLLOWS_BRACE = frozenset(["}", ")", "]", ",", ".", "else", "otherwise", ";"])
_STRINGS = ("STRING", "RAW_STRING")


def _text(tok: Token) -> Optional[str]:
    return None if tok.type in _STRINGS else str(tok.value)


class WspLexer(Lexer):
    """The lexer and the statement-separator rules of language.md section 2, in one pass.

    Lark's own lexer spends most of a parse on per-token bookkeeping; one master regular
    expression built from the grammar's terminals (so `grammar/wsp.lark` stays the single
    source of truth for token shapes) is several times faster.

    Separators: NL and `;` become `_SEP` where a statement ends and vanish where it goes on.
    Newlines inside `(...)` and `[...]` never end a statement (as in Python). Separators right
    after `{`, before `}`, at the start and at the end of the file, and repeated ones, are
    dropped. A `}` followed on the same line by the start of another statement ends it.
    """

    __future_interface__ = 2
    # Token shapes taken from the grammar, tried in this order (first match wins).
    _REGEX_TERMINALS = ("RAW_STRING", "STRING", "FLOAT", "INT", "NAME", "BINOP")

    def __init__(self, conf) -> None:
        terms = {t.name: t for t in conf.terminals}
        self.keywords: dict[str, str] = {}
        punct: dict[str, str] = {}
        for t in conf.terminals:
            if t.pattern.type == "str":
                if re.fullmatch(r"[A-Za-z_]\w*", t.pattern.value):
                    self.keywords[t.pattern.value] = t.name
                else:
                    punct[t.pattern.value] = t.name
        self.punct = punct
        ignored = "|".join(terms[n].pattern.to_regexp() for n in conf.ignore)
        groups = [f"(?P<WS>{ignored})", r"(?P<NL>\n)", r"(?P<SEMI>;)"]
        groups += [f"(?P<{n}>{terms[n].pattern.to_regexp()})" for n in self._REGEX_TERMINALS]
        groups.append("(?P<PUNCT>" + "|".join(re.escape(p) for p in sorted(punct, key=len, reverse=True)) + ")")
        self.master = re.compile("|".join(groups))
        self.open_braces: list[Token] = []  # of the parse in progress, for "never closed"

    def _raw(self, text: str) -> Iterator[Token]:
        match = self.master.match
        keywords, punct = self.keywords, self.punct
        pos, line, line_start, n = 0, 1, 0, len(text)
        while pos < n:
            m = match(text, pos)
            if m is None:
                raise UnexpectedCharacters(text, pos, line, pos - line_start + 1)
            kind, value, end = m.lastgroup, m.group(), m.end()
            col = pos - line_start + 1
            if kind == "WS" or kind == "NL" or kind == "RAW_STRING" or kind == "STRING":
                newlines = value.count("\n")
            else:
                newlines = 0
            if kind != "WS":
                if kind == "NAME":
                    kind = keywords.get(value, "NAME")
                elif kind == "PUNCT":
                    kind = punct[value]
                if newlines:
                    end_line, end_col = line + newlines, end - value.rfind("\n") - pos
                else:
                    end_line, end_col = line, col + len(value)
                yield Token(kind, value, pos, line, col, end_line, end_col, end)
            if newlines:
                line += newlines
                line_start = pos + value.rfind("\n") + 1
            pos = end

    def lex(self, lexer_state, parser_state) -> Iterator[Token]:
        text = lexer_state.text
        if not isinstance(text, str):
            text = text.text
        self.open_braces = []
        depth = 0
        prev: Optional[Token] = None
        pending: Optional[Token] = None  # a separator we may still drop
        pending_explicit = False  # it came from a `;`
        for tok in self._raw(text):
            kind = tok.type
            if kind == "NL" or kind == "SEMI":
                explicit = kind == "SEMI"
                if not explicit and (depth > 0 or (prev is not None and _text(prev) in _CONTINUES_AFTER)):
                    continue
                if prev is None or prev.type == "LBRACE":
                    continue
                if pending is None:
                    pending = Token.new_borrow_pos("_SEP", tok.value, tok)
                pending_explicit = pending_explicit or explicit
                continue
            value = _text(tok)
            if pending is not None:
                if not (kind == "RBRACE" or (not pending_explicit and value in _CONTINUES_BEFORE)):
                    yield pending
                pending, pending_explicit = None, False
            elif prev is not None and prev.type == "RBRACE" and depth == 0 and value not in _FOLLOWS_BRACE:
                yield Token.new_borrow_pos("_SEP", "", tok)
            if kind == "LPAR" or kind == "LSQB":
                depth += 1
            elif kind == "RPAR" or kind == "RSQB":
                depth = max(depth - 1, 0)
            elif kind == "LBRACE":
                depth = 0  # a brace ends any unbalanced bracket: keeps one typo from eating the file
                self.open_braces.append(tok)
            elif kind == "RBRACE":
                depth = 0
                if self.open_braces:
                    self.open_braces.pop()
            yield tok
            prev = tok


# ---------------------------------------------------------------------------------------------
# AST construction


class ParseIssue(Exception):
    """A construct that parses but is malformed (e.g. `for i in batch`); becomes a diagnostic."""

    def __init__(self, span: A.Span, message: str, help: Optional[str] = None):
        super().__init__(message)
        self.span, self.message, self.help = span, message, help


@dataclass(frozen=True, slots=True)
class RawCall(A.Node):
    """A call whose meaning depends on where it stands: `k[i](...)` or `obj.method(...)`."""

    func: Any
    args: tuple
    kwargs: tuple


@dataclass(frozen=True, slots=True)
class _BlockMarker(A.Node):
    """`P.otherwise { }` standing alone; folded into the preceding `when` by `_fold_when`."""

    body: tuple


class _Prefixed:
    """An operand with its prefix operators (`-x`, `not x`), grouped later by `_Climber`."""

    __slots__ = ("ops", "operand")

    def __init__(self, ops: tuple, operand: Any):
        self.ops, self.operand = ops, operand


# Binding strength of binary operators (higher binds tighter); `not` sits between `and` and the
# comparisons, unary minus above everything.
_BINARY_PREC = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4,
                "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
_NOT_PREC = 3
_COMPARISON = 4


class _Climber:
    """Precedence climbing over a flat list of operands, prefix and binary operator tokens."""

    def __init__(self, file: str, items: list):
        self.file, self.items, self.pos = file, items, 0

    def run(self) -> A.Node:
        return self.expr(0)

    def expr(self, min_prec: int) -> A.Node:
        left = self.unary()
        last_comparison: Optional[Token] = None
        while self.pos < len(self.items):
            op = self.items[self.pos]
            prec = _BINARY_PREC[op.value]
            if prec < min_prec:
                break
            if prec == _COMPARISON and last_comparison is not None:
                raise ParseIssue(_tok_span(self.file, op), "comparisons cannot be chained",
                                 "write `a < b and b < c`")
            self.pos += 1
            right = self.expr(prec + 1)
            left = A.Binary(str(op.value), left, right, _tok_span(self.file, op),
                            span=left.span.merge(right.span))
            last_comparison = op if prec == _COMPARISON else None
        return left

    def unary(self) -> A.Node:
        item = self.items[self.pos]
        self.pos += 1
        if not isinstance(item, Token):
            return item
        if item.value not in ("-", "+", "not"):
            raise ParseIssue(_tok_span(self.file, item), f"expected an expression, found `{item.value}`")
        operand = self.expr(_NOT_PREC + 1) if item.value == "not" else self.unary()
        span = _tok_span(self.file, item).merge(operand.span)
        if item.value == "+":
            return operand
        if item.value == "-" and isinstance(operand, A.IntLit):
            # `-3` is a literal, so `-1` and `-inf` read naturally in messages and dumps
            return A.IntLit(-operand.value, span=span)
        if item.value == "-" and isinstance(operand, A.FloatLit) and not operand.text.startswith("-"):
            return A.FloatLit(-operand.value, "-" + operand.text, span=span)
        return A.Unary(str(item.value), operand, span=span)


def _tok_span(file: str, tok: Token) -> A.Span:
    return A.Span(file, tok.line, tok.column, tok.end_line, tok.end_column)


def _int(text: str) -> int:
    return int(text.replace("_", ""), 0) if text.lower().startswith("0x") else int(text.replace("_", ""))


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'", "a": "\a",
            "b": "\b", "f": "\f", "v": "\v"}


def _unescape(body: str, span: A.Span) -> str:
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1] if i + 1 < len(body) else ""
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "x" and len(body) >= i + 4:
            out.append(chr(int(body[i + 2:i + 4], 16)))
            i += 4
        else:
            raise ParseIssue(span, f"unknown escape sequence `\\{nxt}` in string")
    return "".join(out)


def _fold_when(stmts: list) -> tuple:
    """Attach each `P.otherwise { }` to the `when` statement right before it."""
    out: list = []
    for s in stmts:
        if isinstance(s, _BlockMarker):
            prev = out[-1] if out else None
            if not isinstance(prev, A.When) or prev.otherwise is not None:
                raise ParseIssue(s.span, "`P.otherwise` must follow a `when` or `P.when` block",
                                 "write `P.when(PRED) { ... } P.otherwise { ... }`")
            out[-1] = replace(prev, otherwise=s.body, span=prev.span.merge(s.span))
        else:
            out.append(s)
    return tuple(out)


_AXIS_CTORS = {"DenseDyn": 1, "Ragged": 2, "Sparse": 3}


class _Block:
    """A `{ ... }` block on its way into a statement: its statements and its span."""

    __slots__ = ("stmts", "span")

    def __init__(self, stmts: tuple, span: A.Span):
        self.stmts, self.span = stmts, span


class AstBuilder(Transformer):
    """Lark callbacks, one per grammar rule, each returning an AST node.

    It runs inside the LALR parser (Lark's `transformer=` option), so it sees each rule's
    children once, bottom-up, and no parse tree is ever built. Spans come from the first and
    last child that has a position (tokens the grammar keeps by naming them, or AST nodes).
    """

    def __init__(self, file: str = "<string>"):
        super().__init__(visit_tokens=False)
        self.file = file  # set by `parse` before each run: one builder serves every parse
        # calls whose meaning needs their context (`k[i](...)`, `w().dispatch(...)`), by id,
        # until a statement or schedule takes them; any left at the end stand where no call can
        self.raw_calls: dict[int, RawCall] = {}

    def reset(self, file: str) -> None:
        self.file = file
        self.raw_calls = {}

    def _taken(self, e: Any) -> Any:
        if isinstance(e, RawCall):
            self.raw_calls.pop(id(e), None)
        return e

    # ---- helpers
    def _pos(self, x: Any) -> Optional[A.Span]:
        if isinstance(x, Token):
            return A.Span(self.file, x.line, x.column, x.end_line, x.end_column)
        if isinstance(x, (A.Node, _Block)):
            return None if x.span is A.NO_SPAN else x.span
        return None

    def _sp(self, c: list) -> A.Span:
        first = next((s for s in map(self._pos, c) if s is not None), None)
        last = next((s for s in map(self._pos, reversed(c)) if s is not None), None)
        if first is None:
            return A.NO_SPAN
        return first.merge(last)

    def _name(self, tok: Token) -> A.Name:
        span = _tok_span(self.file, tok)
        if tok.value in KEYWORDS:
            raise ParseIssue(span, f"`{tok.value}` is a keyword and cannot be used as a name")
        return A.Name(str(tok.value), span=span)

    # ---- expressions
    def name(self, c):
        return self._name(c[0])

    def int_lit(self, c):
        return A.IntLit(_int(c[0].value), span=_tok_span(self.file, c[0]))

    def float_lit(self, c):
        text = c[0].value
        return A.FloatLit(float(text.replace("_", "")), text, span=_tok_span(self.file, c[0]))

    def str_lit(self, c):
        span = _tok_span(self.file, c[0])
        return A.StrLit(_unescape(c[0].value[1:-1], span), span=span)

    def bool_lit(self, c):
        return A.BoolLit(c[0].value == "true", span=_tok_span(self.file, c[0]))

    def prefixed(self, c):
        return _Prefixed(tuple(c[:-1]), c[-1])

    def operators(self, c):
        if len(c) == 1 and not isinstance(c[0], _Prefixed):
            return c[0]
        items: list = []
        for x in c:
            if isinstance(x, _Prefixed):
                items.extend(x.ops)
                items.append(x.operand)
            else:
                items.append(x)
        return _Climber(self.file, items).run()

    def attr(self, c):
        value, tok = c
        return A.Attr(value, str(tok.value), span=self._sp(c))

    def keyword(self, c):
        tok, value = c
        return A.Keyword(str(tok.value), value, span=self._sp(c))

    def slice(self, c):
        start, _colon, stop = c
        return A.Slice(start, stop, span=self._sp(c))

    def index(self, c):
        value, items = c[0], tuple(x for x in c[1:-1] if x is not None)
        span = self._sp(c)
        if isinstance(value, A.Name) and value.id == "Dense":
            if len(items) != 1 or isinstance(items[0], A.Slice):
                raise ParseIssue(span, "`Dense[...]` takes one extent", "write `Dense[8]`")
            return A.DenseAxis(items[0], span=span)
        return A.Index(value, items, span=span)

    def call(self, c):
        func, items = c[0], [x for x in c[1:-1] if x is not None]
        span = self._sp(c)
        args = tuple(x for x in items if not isinstance(x, A.Keyword))
        kwargs = tuple(x for x in items if isinstance(x, A.Keyword))
        seen_kw = False
        for x in items:
            if isinstance(x, A.Keyword):
                seen_kw = True
            elif seen_kw:
                raise ParseIssue(x.span, "positional argument after a keyword argument")
        if isinstance(func, A.DenseAxis) and not items:
            return replace(func, span=span)  # `Dense[8]()`, the seeds' spelling
        if isinstance(func, A.Name):
            arity = _AXIS_CTORS.get(func.id)
            if arity is not None:
                if kwargs or len(args) != arity:
                    raise ParseIssue(span, f"`{func.id}` takes {arity} argument{'s' if arity > 1 else ''}",
                                     _AXIS_HELP[func.id])
                if func.id == "DenseDyn":
                    return A.DenseDynAxis(args[0], span=span)
                if func.id == "Ragged":
                    return A.RaggedAxis(args[0], args[1], span=span)
                return A.SparseAxis(args[0], args[1], args[2], span=span)
            return A.Call(func, args, kwargs, span=span)
        if (isinstance(func, A.Attr) and isinstance(func.value, A.Name)
                and func.value.id in KERNEL_PREFIXES + ("P",)):
            fname = A.Name(func.attr, span=A.Span(self.file, func.span.end_line,
                                                  func.span.end_col - len(func.attr),
                                                  func.span.end_line, func.span.end_col))
            return A.Call(fname, args, kwargs, func.value.id, span=span)
        raw = RawCall(func, args, kwargs, span=span)
        self.raw_calls[id(raw)] = raw
        return raw

    # ---- declarations
    def start(self, c):
        return [x for x in c if x is not None]

    def module_decl(self, c):
        return A.ModuleDecl(self._name(c[1]), span=self._sp(c))

    def import_decl(self, c):
        span = _tok_span(self.file, c[1])
        return A.Import(_unescape(c[1].value[1:-1], span), span=self._sp(c))

    def sym_item(self, c):
        return A.SymDecl(self._name(c[0]), c[1], span=self._sp(c))

    def sym_decl(self, c):
        return list(c)

    def const_decl(self, c):
        return A.ConstDecl(self._name(c[1]), c[2], span=self._sp(c))

    def tensor_decl(self, c):
        kind, name, texpr = c
        return A.TensorDecl(str(kind.value), self._name(name), _tensor_type(texpr), span=self._sp(c))

    def axis_decl(self, c):
        return A.AxisDecl(self._name(c[1]), c[2], span=self._sp(c))

    def channel_option(self, c):
        return A.Keyword(str(c[0].value), c[1], span=self._sp(c))

    def channel_decl(self, c):
        name, elem, options = self._name(c[1]), c[2], c[3:]
        depth = None
        for opt in options:
            if opt.name != "depth":
                raise ParseIssue(opt.span, f"unknown channel option `{opt.name}`",
                                 "the only option is `depth = D`")
            if depth is not None:
                raise ParseIssue(opt.span, "`depth` is given twice")
            depth = opt.value
        tile = _tile_type(elem) if elem is not None else None
        return A.ChannelDecl(name, tile, depth, span=self._sp(c))

    def event_decl(self, c):
        return A.EventDecl(self._name(c[1]), span=self._sp(c))

    def kernel_param(self, c):
        name, texpr, default = c
        return A.KernelParam(self._name(name), _param_type(texpr), default, span=self._sp(c))

    def extern_body(self, c):
        _kw, lang, code = c
        text = code.value[3:-3] if code.type == "RAW_STRING" else _unescape(
            code.value[1:-1], _tok_span(self.file, code))
        return A.ExternBody(str(lang.value), text, span=self._sp(c))

    def kernel_decl(self, c):
        name = self._name(c[1])
        rest = [x for x in c[2:] if x is not None]
        params = tuple(x for x in rest if isinstance(x, A.KernelParam))
        externs = tuple(x for x in rest if isinstance(x, A.ExternBody))
        block = next((x for x in rest if isinstance(x, _Block)), None)
        return A.KernelDecl(name, params, block.stmts if block else None, externs, span=self._sp(c))

    def workload_param(self, c):
        name, texpr = self._name(c[0]), c[1]
        kind, extent = _workload_param_type(texpr)
        return A.WorkloadParam(name, kind, extent, span=self._sp(c))

    def workload_decl(self, c):
        name = self._name(c[1])
        rest = [x for x in c[2:] if x is not None]
        params = tuple(x for x in rest if isinstance(x, A.WorkloadParam))
        block = next(x for x in rest if isinstance(x, _Block))
        return A.WorkloadDecl(name, params, block.stmts, span=self._sp(c))

    def schedule_decl(self, c):
        name, chain = self._name(c[1]), c[2]
        span = self._sp(c)
        combinators: list[A.Combinator] = []
        node = chain
        while isinstance(node, RawCall) and isinstance(node.func, A.Attr):
            self._taken(node)
            attr = node.func
            mspan = A.Span(self.file, attr.span.end_line, attr.span.end_col - len(attr.attr),
                           attr.span.end_line, attr.span.end_col)
            combinators.append(A.Combinator(A.Name(attr.attr, span=mspan), node.args, node.kwargs,
                                            span=mspan.merge(node.span)))
            node = attr.value
        if isinstance(node, A.Attr):
            raise ParseIssue(node.span, f"`.{node.attr}` in a schedule must be called",
                             f"write `.{node.attr}(...)`")
        if not isinstance(node, A.Call) or node.prefix:
            raise ParseIssue(getattr(node, "span", span), "a schedule starts with a workload call",
                             "write `schedule main = my_workload(axes...) .dispatch(...)`")
        combinators.reverse()
        return A.ScheduleDecl(name, node.func, node.args, tuple(combinators), span=span)

    # ---- statements
    def block(self, c):
        return _Block(_fold_when([x for x in c[1:-1] if x is not None]), self._sp(c))

    def let_stmt(self, c):
        return A.Let(self._name(c[1]), _value(c[2]), span=self._sp(c))

    def assign_stmt(self, c):
        target, value = c
        if not isinstance(target, A.Name):
            raise ParseIssue(target.span, "only a `let` name can be assigned",
                             "use `store(out, value)` to write a tile parameter")
        return A.Assign(target, _value(value), span=self._sp(c))

    def expr_stmt(self, c):
        return _call_statement(self._taken(c[0]), self._sp(c))

    def block_stmt(self, c):
        head, block = c
        span, body = self._sp(c), block.stmts
        if isinstance(head, A.Call) and head.prefix == "P":
            if head.func.id == "when" and len(head.args) == 1 and not head.kwargs:
                return A.When((A.WhenBranch(head.args[0], body, span=span),), None, span=span)
            if head.func.id in ("otherwise", "pipe") and not head.args and not head.kwargs:
                return _BlockMarker(body, span=span) if head.func.id == "otherwise" else A.Pipe(body, span=span)
        if isinstance(head, A.Attr) and isinstance(head.value, A.Name) and head.value.id == "P":
            if head.attr == "otherwise":
                return _BlockMarker(body, span=span)
            if head.attr == "pipe":
                return A.Pipe(body, span=span)
        raise ParseIssue(head.span, "a block `{ ... }` cannot follow this expression",
                         "blocks follow `for`, `when`, `P.when(...)`, `P.otherwise`, `combine`, "
                         "`sequential`, `pipe`, `process` and `consume`")

    def for_stmt(self, c):
        names = [self._name(t) for t in c[1:] if isinstance(t, Token)]
        iterable, block = c[-2], c[-1]
        span = self._sp(c)
        if not (isinstance(iterable, A.Call) and (iterable.prefix == "P" and iterable.func.id in ("grid", "seq", "sel")
                                                   or not iterable.prefix and iterable.func.id == "P")):
            raise ParseIssue(iterable.span, "a `for` loop iterates over `P(...)`, `P.grid(...)`, `P.seq(...)` or `P.sel(...)`",
                             "write `for b, t in P(batch, tiles) { ... }`")
        kind = "grid" if iterable.func.id in ("P", "grid") else iterable.func.id
        spelling = "P" if iterable.func.id == "P" else f"P.{iterable.func.id}"
        if iterable.kwargs:
            raise ParseIssue(iterable.kwargs[0].span, f"`{spelling}` takes axes only")
        if not iterable.args:
            raise ParseIssue(iterable.span, f"`{spelling}` needs at least one axis")
        if kind in ("seq", "sel") and len(iterable.args) != 1:
            raise ParseIssue(iterable.span, f"`{spelling}` takes exactly one axis")
        if len(names) != len(iterable.args):
            raise ParseIssue(iterable.span, f"{len(names)} loop variable{'s' if len(names) != 1 else ''} "
                             f"but {len(iterable.args)} ax{'es' if len(iterable.args) != 1 else 'is'}",
                             "write one loop variable per axis")
        return A.ForLoop(tuple(names), kind, tuple(iterable.args), block.stmts, spelling, span=span)

    def else_when(self, c):
        return A.WhenBranch(c[1], c[2].stmts, span=self._sp(c))

    def otherwise(self, c):
        return _BlockMarker(c[1].stmts, span=self._sp(c))

    def when_stmt(self, c):
        pred, block, rest = c[1], c[2], [x for x in c[3:] if x is not None]
        first = A.WhenBranch(pred, block.stmts, span=self._sp(c[:3]))
        branches = (first,) + tuple(x for x in rest if isinstance(x, A.WhenBranch))
        other = next((x.body for x in rest if isinstance(x, _BlockMarker)), None)
        return A.When(branches, other, span=self._sp(c))

    def combine_stmt(self, c):
        return A.Combine(c[1].stmts, span=self._sp(c))

    def sequential_stmt(self, c):
        return A.Sequential(c[1].stmts, span=self._sp(c))

    def pipe_stmt(self, c):
        return A.Pipe(c[1].stmts, span=self._sp(c))

    def process_stmt(self, c):
        name = self._name(c[1])
        star, replicas, block = c[2], c[3], c[4]
        if star is not None and star.value != "*":  # the grammar's BINOP stands there
            raise ParseIssue(_tok_span(self.file, star), f"expected `*` or `{{`, found `{star.value}`",
                             "write `process NAME * N { ... }` for N replicas")
        return A.Process(name, replicas, block.stmts, span=self._sp(c))

    def send_stmt(self, c):
        channel, call = self._name(c[1]), self._taken(c[2])
        stmt = _call_statement(call, call.span)
        if not isinstance(stmt, A.CallStmt):
            raise ParseIssue(call.span, "`send` takes a channel and a kernel call",
                             "write `send(ch, kernel[i](out = ch, ...))`")
        return A.Send(channel, stmt, span=self._sp(c))

    def consume_stmt(self, c):
        return A.Consume(self._name(c[1]), self._name(c[2]), c[3].stmts, span=self._sp(c))

    def record_stmt(self, c):
        return A.Record(self._name(c[1]), span=self._sp(c))

    def synchronize_stmt(self, c):
        return A.Synchronize(self._name(c[1]), span=self._sp(c))


_AXIS_HELP = {
    "DenseDyn": "write `DenseDyn(B)`",
    "Ragged": "write `Ragged(outer_axis, lengths)`",
    "Sparse": "write `Sparse(outer_axis, indptr, indices)`",
}

_STATEMENT_CALLS = {"store": 2, "slot_set": 2, "slot_load": 2}


_TASK_AS_VALUE = ("a task call is a statement, not a value",
                  "call kernels on their own line, or inside `send(ch, ...)`")


def _value(e: Any) -> Any:
    """An expression in value position: a bare task call is not a value."""
    if isinstance(e, RawCall):
        raise ParseIssue(e.span, *_TASK_AS_VALUE)
    return e


def _call_statement(e: Any, span: A.Span) -> A.Node:
    """Give a call standing as a statement its meaning: a task, store, slot write, or inline."""
    if isinstance(e, A.Call) and not e.prefix and e.func.id in _STATEMENT_CALLS:
        fname = e.func.id
        if e.kwargs or len(e.args) != 2:
            raise ParseIssue(span, f"`{fname}` takes 2 arguments",
                             {"store": "write `store(out_param, value)`",
                              "slot_set": "write `slot_set(k, value)`",
                              "slot_load": "write `slot_load(k, T[i, j])`"}[fname])
        if fname == "store":
            return A.Store(e.args[0], e.args[1], span=span)
        if fname == "slot_set":
            return A.SlotSet(e.args[0], e.args[1], span=span)
        return A.SlotLoad(e.args[0], e.args[1], span=span)
    if isinstance(e, A.Call) and e.prefix in KERNEL_PREFIXES and e.func.id == "store":
        return _call_statement(replace(e, prefix=""), span)
    if isinstance(e, A.Call) and not e.prefix:
        return A.CallStmt(e.func, None, e.args, e.kwargs, span=span)
    if isinstance(e, RawCall) and isinstance(e.func, A.Index) and isinstance(e.func.value, A.Name):
        for item in e.func.items:
            if isinstance(item, A.Slice):
                raise ParseIssue(item.span, "task coordinates cannot be slices")
        return A.CallStmt(e.func.value, e.func.items, e.args, e.kwargs, span=span)
    return A.ExprStmt(_value(e), span=span)


def _tensor_type(e: Any) -> A.TensorType:
    if isinstance(e, A.Index) and isinstance(e.value, A.Name):
        dims = e.items
        if e.value.id not in DTYPES:
            raise ParseIssue(e.value.span, f"unknown data type `{e.value.id}`", _dtype_help(e.value.id))
        for d in dims:
            if isinstance(d, A.Slice):
                raise ParseIssue(d.span, "a tensor dimension cannot be a slice")
        if not dims:
            raise ParseIssue(e.span, "a tensor needs at least one dimension", "write `f32[1]` for a single value")
        return A.TensorType(e.value.id, tuple(dims), span=e.span)
    raise ParseIssue(e.span, "expected a tensor type such as `f32[B, 128]`")


def _dtype_help(name: str) -> str:
    from .diagnostics import did_you_mean

    return did_you_mean(name, DTYPES) or "data types are " + ", ".join(f"`{d}`" for d in DTYPES)


def _dtype_name(e: Any) -> str:
    if isinstance(e, A.Name) and e.id in DTYPES:
        return e.id
    if isinstance(e, A.Name):
        raise ParseIssue(e.span, f"unknown data type `{e.id}`", _dtype_help(e.id))
    raise ParseIssue(e.span, "expected a data type such as `f32`")


def _tile_type(e: Any) -> A.TileType:
    if isinstance(e, A.Index) and isinstance(e.value, A.Name) and e.value.id == "Tile":
        if len(e.items) != 3 or any(isinstance(x, A.Slice) for x in e.items):
            raise ParseIssue(e.span, "`Tile` takes rows, columns and a data type",
                             "write `Tile[16, 128, f32]`")
        return A.TileType(e.items[0], e.items[1], _dtype_name(e.items[2]), span=e.span)
    raise ParseIssue(e.span, "expected a tile type such as `Tile[16, 128, f32]`")


_PARAM_HELP = ("parameter types are `In[Tile[M, N, DT]]`, `Out[...]`, `InOut[...]`, `Scalar[DT]` "
               "and `Constexpr[i32]`")


def _param_type(e: Any) -> A.ParamType:
    if isinstance(e, A.Index) and isinstance(e.value, A.Name) and len(e.items) == 1:
        mode, inner = e.value.id, e.items[0]
        if mode in ("In", "Out", "InOut"):
            return A.TileParamType(mode, _tile_type(inner), span=e.span)
        if mode == "Scalar":
            return A.ScalarParamType(_dtype_name(inner), span=e.span)
        if mode == "Constexpr":
            return A.ConstexprParamType(_dtype_name(inner), span=e.span)
    if isinstance(e, A.Index) and isinstance(e.value, A.Name) and e.value.id == "Tile":
        raise ParseIssue(e.span, "a tile parameter needs a mode", "write `In[Tile[...]]`, `Out[...]` or `InOut[...]`")
    raise ParseIssue(e.span, "expected a kernel parameter type", _PARAM_HELP)


_WORKLOAD_PARAM_KINDS = ("Dense", "DenseDyn", "Ragged", "Sparse")


def _workload_param_type(e: Any) -> tuple[str, Optional[A.Expr]]:
    if e is None:
        return "any", None
    if isinstance(e, A.Name) and e.id in _WORKLOAD_PARAM_KINDS:
        return e.id, None
    if isinstance(e, A.DenseAxis):
        return "Dense", e.extent
    raise ParseIssue(e.span, "expected an axis type", "axis types are `Dense[N]`, `DenseDyn`, `Ragged` and `Sparse`")


# ---------------------------------------------------------------------------------------------
# The parser object (built once per process; LALR tables cached on disk)

_PARSER: Optional[Lark] = None
_BUILDER = AstBuilder()


def grammar_text() -> str:
    try:
        return resources.files("ptowsp.grammar").joinpath("wsp.lark").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):  # running from a source tree without install
        return (Path(__file__).resolve().parents[2] / "grammar" / "wsp.lark").read_text(encoding="utf-8")


def cache_dir() -> Path:
    return Path(os.environ.get("WSPC_CACHE_DIR") or Path.home() / ".cache" / "wspc")


def _lark() -> Lark:
    global _PARSER
    if _PARSER is None:
        text = grammar_text()
        options = dict(parser="lalr", lexer=WspLexer,
                       maybe_placeholders=True,
                       # AST nodes are built during LALR reductions: no parse tree, no second pass
                       transformer=_BUILDER)
        try:
            d = cache_dir()
            d.mkdir(parents=True, exist_ok=True)
            import hashlib
            import lark as _lark_module

            key = hashlib.sha256((text + _lark_module.__version__).encode()).hexdigest()[:16]
            _PARSER = Lark(text, cache=str(d / f"grammar-{key}.lark.pickle"), **options)
        except OSError:  # unwritable cache: build the tables in memory
            _PARSER = Lark(text, **options)
    return _PARSER


# ---------------------------------------------------------------------------------------------
# Syntax errors in words

_TOKEN_WORDS = {
    "NAME": "a name", "INT": "an integer", "FLOAT": "a number", "STRING": "a string",
    "BINOP": "an operator",
    "RAW_STRING": "a `\"\"\"` string", "_SEP": "end of statement", "$END": "end of file",
    "OR": "`or`", "AND": "`and`",
    "NOT": "`not`", "TRUE": "`true`", "FALSE": "`false`",
}
_EXPR_START = {"NAME", "INT", "FLOAT", "STRING", "LPAR", "BINOP", "NOT", "TRUE", "FALSE"}
_DECL_START = {"MODULE", "IMPORT", "SYM", "CONST", "INPUT", "OUTPUT", "INOUT", "SCRATCH", "AXIS",
               "CHANNEL", "EVENT", "KERNEL", "WORKLOAD", "SCHEDULE"}


def _words(parser: Lark, expected: set[str]) -> str:
    expected = {e for e in expected if e not in ("NL", "SEMI")}
    parts: list[str] = []
    if expected & _DECL_START and len(expected & _DECL_START) >= 4:
        parts.append("a declaration (`kernel`, `workload`, `input`, `sym`, ...)")
        expected -= _DECL_START
    if len(expected & _EXPR_START) >= 4:
        parts.append("an expression")
        expected -= _EXPR_START
    operators = {"BINOP", "AND", "OR", "DOT", "LPAR", "LSQB", "EQUAL"}
    if len(expected & operators) >= 4:
        parts.append("an operator")
        expected -= operators
    stmt_start = {"LET", "FOR", "WHEN", "COMBINE", "SEQUENTIAL", "PIPE", "PROCESS", "SEND",
                  "CONSUME", "RECORD", "SYNCHRONIZE"}
    if len(expected & stmt_start) >= 4:
        parts[:0] = ["a statement"]
        expected -= stmt_start
        if "an expression" in parts:
            parts.remove("an expression")
    for name in sorted(expected, key=lambda n: (n not in ("RPAR", "RSQB", "RBRACE", "COMMA"), n)):
        if name in _TOKEN_WORDS:
            parts.append(_TOKEN_WORDS[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern.value
            parts.append(f"`{pattern}`")
        except KeyError:
            parts.append(name.lower())
    parts = sorted(dict.fromkeys(parts), key=lambda p: p in ("an expression", "an operator"))
    if len(parts) > 6:
        parts = parts[:6] + ["..."]
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def _found(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    if tok.type == "_SEP":
        return "`;`" if tok.value == ";" else "end of line"
    if tok.type == "NAME":
        return f"`{tok.value}`"
    value = str(tok.value)
    if len(value) > 20:
        value = value[:17] + "..."
    return f"`{value}`"


def _syntax_diagnostic(parser: Lark, err: UnexpectedInput, file: str, text: str) -> Diagnostic:
    if isinstance(err, UnexpectedToken):
        tok = err.token
        expected = set(err.accepts or err.expected)
        open_braces = parser.parser.lexer.open_braces
        if tok.type == "$END" and "RBRACE" in expected and open_braces:
            brace = open_braces[-1]
            return Diagnostic(_tok_span(file, brace), "syntax", "this `{` is never closed",
                              "add the missing `}`")
        if tok.type == "$END":
            lines = text.splitlines() or [""]
            line = len(lines)
            col = len(lines[-1]) + 1
            span = A.Span(file, line, col, line, col + 1)
        elif tok.type == "_SEP" and tok.value != ";":
            span = A.Span(file, tok.line, tok.column, tok.line, tok.column + 1)
        else:
            span = _tok_span(file, tok)
        help_text = None
        line_before = text.splitlines()[tok.line - 1][:tok.column - 1] if tok.type != "$END" else ""
        if re.search(r"\b(if|elif)\s*$", line_before) or (tok.type == "NAME" and tok.value in ("if", "elif")):
            help_text = "write `when PRED { ... } else when PRED { ... } otherwise { ... }`"
        elif tok.type == "_SEP" and "RPAR" in expected:
            help_text = "a `(` opened earlier is not closed"
        return Diagnostic(span, "syntax", f"expected {_words(parser, expected)}, found {_found(tok)}",
                          help_text)
    if isinstance(err, UnexpectedCharacters):
        ch = text[err.pos_in_stream] if err.pos_in_stream < len(text) else ""
        span = A.Span(file, err.line, err.column, err.line, err.column + 1)
        if ch == '"':
            return Diagnostic(span, "syntax", "unterminated string", "close the string with `\"` on the same line")
        if text.startswith("/*", err.pos_in_stream):
            return Diagnostic(span, "syntax", "unterminated block comment", "close it with `*/`")
        return Diagnostic(span, "syntax", f"unexpected character `{ch}`")
    if isinstance(err, UnexpectedEOF):
        lines = text.splitlines() or [""]
        span = A.Span(file, len(lines), len(lines[-1]) + 1, len(lines), len(lines[-1]) + 2)
        return Diagnostic(span, "syntax", "unexpected end of file")
    span = A.Span(file, getattr(err, "line", 1) or 1, getattr(err, "column", 1) or 1, 0, 0)
    return Diagnostic(span, "syntax", "syntax error")


def parse(text: str, file: str = "<string>") -> A.SourceFile:
    """Parse one file; raises `WspError` with a diagnostic on a syntax error."""
    parser = _lark()
    diags = Diagnostics({file: text})
    _BUILDER.reset(file)
    try:
        decls = parser.parse(text)
    except UnexpectedInput as err:
        diags.add(_syntax_diagnostic(parser, err, file, text))
        diags.raise_if_any()
        raise AssertionError("unreachable")
    except ParseIssue as issue:
        diags.error(issue.span, "syntax", issue.message, issue.help)
        diags.raise_if_any()
        raise AssertionError("unreachable")
    flat: list = []
    for d in decls:
        flat.extend(d if isinstance(d, list) else [d])
    source = A.SourceFile(file, tuple(flat), text, span=A.Span(file, 1, 1, 1, 1))
    for node in _BUILDER.raw_calls.values():
        if isinstance(node.func, A.Index):
            diags.error(node.span, "syntax", *_TASK_AS_VALUE)
        else:
            diags.error(node.span, "syntax", "a method call is only allowed in a schedule chain")
    diags.raise_if_any()
    return source
