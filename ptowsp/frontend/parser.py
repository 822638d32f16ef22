"""Parse `.wsp` text into AST nodes (`frontend/ast.py`). The only module that imports Lark.

Three pieces:
- `StatementSeparators`, a Lark post-lexer implementing the statement-ending rules of
  language.md section 2 (newline, `;`, closing `}`, and the continuation rules);
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

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

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


class StatementSeparators:
    """Post-lexer: NL and `;` become SEP where a statement ends, and vanish where it goes on.

    Newlines inside `(...)` and `[...]` never end a statement (as in Python). Separators right
    after `{`, before `}`, at the start and at the end of the file, and repeated ones, are
    dropped. A `}` followed on the same line by the start of another statement ends it.
    """

    always_accept = ("NL", "SEMI")

    def __init__(self) -> None:
        self.open_braces: list[Token] = []  # of the parse in progress, for "never closed"

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        self.open_braces = []
        depth = 0
        prev: Optional[Token] = None
        pending: Optional[Token] = None  # a separator we may still drop
        pending_explicit = False  # it came from a `;`
        for tok in stream:
            if tok.type in ("NL", "SEMI"):
                explicit = tok.type == "SEMI"
                if not explicit and (depth > 0 or (prev is not None and _text(prev) in _CONTINUES_AFTER)):
                    continue
                if prev is None or _text(prev) == "{":
                    continue
                if pending is None:
                    pending = Token.new_borrow_pos("_SEP", tok.value, tok)
                pending_explicit = pending_explicit or explicit
                continue
            text = _text(tok)
            if pending is not None:
                if text == "}" or (not pending_explicit and text in _CONTINUES_BEFORE):
                    pass
                else:
                    yield pending
                pending, pending_explicit = None, False
            elif prev is not None and _text(prev) == "}" and depth == 0 and text not in _FOLLOWS_BRACE:
                yield Token.new_borrow_pos("_SEP", "", tok)
            if text in ("(", "["):
                depth += 1
            elif text in (")", "]"):
                depth = max(depth - 1, 0)
            elif text in ("{", "}"):
                depth = 0  # a brace ends any unbalanced bracket: keeps one typo from eating the file
                if text == "{":
                    self.open_braces.append(tok)
                elif self.open_braces:
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


def _tok_span(file: str, tok: Token) -> A.Span:
    return A.Span(file, tok.line, tok.column, tok.end_line, tok.end_column)


def _span_of(*nodes: Any) -> A.Span:
    spans = [n.span for n in nodes if isinstance(n, A.Node) and n.span is not A.NO_SPAN]
    out = spans[0]
    for s in spans[1:]:
        out = out.merge(s)
    return out


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


@v_args(meta=True)
class AstBuilder(Transformer):
    """Lark callbacks, one per grammar rule, each returning an AST node."""

    def __init__(self, file: str):
        super().__init__(visit_tokens=False)
        self.file = file

    # ---- helpers
    def _span(self, meta) -> A.Span:
        if getattr(meta, "empty", True):
            return A.NO_SPAN
        return A.Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column)

    def _name(self, tok: Token) -> A.Name:
        span = _tok_span(self.file, tok)
        if tok.value in KEYWORDS:
            raise ParseIssue(span, f"`{tok.value}` is a keyword and cannot be used as a name")
        return A.Name(str(tok.value), span=span)

    # ---- expressions
    def name(self, meta, c):
        return self._name(c[0])

    def int_lit(self, meta, c):
        return A.IntLit(_int(c[0].value), span=_tok_span(self.file, c[0]))

    def float_lit(self, meta, c):
        text = c[0].value
        return A.FloatLit(float(text.replace("_", "")), text, span=_tok_span(self.file, c[0]))

    def str_lit(self, meta, c):
        span = _tok_span(self.file, c[0])
        return A.StrLit(_unescape(c[0].value[1:-1], span), span=span)

    def bool_lit(self, meta, c):
        return A.BoolLit(c[0].value == "true", span=_tok_span(self.file, c[0]))

    def binary(self, meta, c):
        left, op, right = c
        return A.Binary(str(op.value), left, right, _tok_span(self.file, op), span=self._span(meta))

    def unary(self, meta, c):
        op, operand = c
        if op.value == "+":
            return operand
        if op.value == "-" and isinstance(operand, (A.IntLit, A.FloatLit)):
            # Fold `-3` into a literal so `-inf` and `-1` read naturally in messages and dumps.
            if isinstance(operand, A.IntLit):
                return A.IntLit(-operand.value, span=self._span(meta))
            return A.FloatLit(-operand.value, "-" + operand.text, span=self._span(meta))
        return A.Unary(str(op.value), operand, span=self._span(meta))

    def attr_name(self, meta, c):
        return c[0]

    def attr(self, meta, c):
        value, tok = c
        return A.Attr(value, str(tok.value), span=self._span(meta))

    def keyword(self, meta, c):
        tok, value = c
        return A.Keyword(str(tok.value), value, span=self._span(meta))

    def slice(self, meta, c):
        start, stop = c
        return A.Slice(start, stop, span=self._span(meta))

    def index(self, meta, c):
        value, items = c[0], tuple(x for x in c[1:] if x is not None)
        span = self._span(meta)
        if isinstance(value, A.Name) and value.id == "Dense":
            if len(items) != 1 or isinstance(items[0], A.Slice):
                raise ParseIssue(span, "`Dense[...]` takes one extent", "write `Dense[8]`")
            return A.DenseAxis(items[0], span=span)
        return A.Index(value, items, span=span)

    def call(self, meta, c):
        func, items = c[0], [x for x in c[1:] if x is not None]
        span = self._span(meta)
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
        return RawCall(func, args, kwargs, span=span)

    # ---- declarations
    def start(self, meta, c):
        return [x for x in c if x is not None]

    def module_decl(self, meta, c):
        return A.ModuleDecl(self._name(c[0]), span=self._span(meta))

    def import_decl(self, meta, c):
        span = _tok_span(self.file, c[0])
        return A.Import(_unescape(c[0].value[1:-1], span), span=self._span(meta))

    def sym_item(self, meta, c):
        return A.SymDecl(self._name(c[0]), c[1], span=self._span(meta))

    def sym_decl(self, meta, c):
        return list(c)

    def const_decl(self, meta, c):
        return A.ConstDecl(self._name(c[0]), c[1], span=self._span(meta))

    def tensor_kind(self, meta, c):
        return c[0]

    def tensor_decl(self, meta, c):
        kind, name, texpr = c
        return A.TensorDecl(str(kind.value), self._name(name), _tensor_type(texpr),
                            span=self._span(meta))

    def axis_decl(self, meta, c):
        return A.AxisDecl(self._name(c[0]), c[1], span=self._span(meta))

    def channel_option(self, meta, c):
        return A.Keyword(str(c[0].value), c[1], span=self._span(meta))

    def channel_decl(self, meta, c):
        name, elem, options = self._name(c[0]), c[1], c[2:]
        depth = None
        for opt in options:
            if opt.name != "depth":
                raise ParseIssue(opt.span, f"unknown channel option `{opt.name}`",
                                 "the only option is `depth = D`")
            if depth is not None:
                raise ParseIssue(opt.span, "`depth` is given twice")
            depth = opt.value
        tile = _tile_type(elem) if elem is not None else None
        return A.ChannelDecl(name, tile, depth, span=self._span(meta))

    def event_decl(self, meta, c):
        return A.EventDecl(self._name(c[0]), span=self._span(meta))

    def kernel_param(self, meta, c):
        name, texpr, default = c
        return A.KernelParam(self._name(name), _param_type(texpr), default, span=self._span(meta))

    def extern_body(self, meta, c):
        lang, code = c
        text = code.value[3:-3] if code.type == "RAW_STRING" else _unescape(
            code.value[1:-1], _tok_span(self.file, code))
        return A.ExternBody(str(lang.value), text, span=self._span(meta))

    def kernel_decl(self, meta, c):
        name = self._name(c[0])
        rest = [x for x in c[1:] if x is not None]
        params = tuple(x for x in rest if isinstance(x, A.KernelParam))
        externs = tuple(x for x in rest if isinstance(x, A.ExternBody))
        body = next((x for x in rest if isinstance(x, tuple)), None)
        return A.KernelDecl(name, params, body, externs, span=self._span(meta))

    def workload_param(self, meta, c):
        name, texpr = self._name(c[0]), c[1]
        kind, extent = _workload_param_type(texpr)
        return A.WorkloadParam(name, kind, extent, span=self._span(meta))

    def workload_decl(self, meta, c):
        name = self._name(c[0])
        rest = [x for x in c[1:] if x is not None]
        params = tuple(x for x in rest if isinstance(x, A.WorkloadParam))
        body = next(x for x in rest if isinstance(x, tuple))
        return A.WorkloadDecl(name, params, body, span=self._span(meta))

    def schedule_decl(self, meta, c):
        name, chain = self._name(c[0]), c[1]
        combinators: list[A.Combinator] = []
        node = chain
        while isinstance(node, RawCall) and isinstance(node.func, A.Attr):
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
            raise ParseIssue(getattr(node, "span", self._span(meta)),
                             "a schedule starts with a workload call",
                             "write `schedule main = my_workload(axes...) .dispatch(...)`")
        combinators.reverse()
        return A.ScheduleDecl(name, node.func, node.args, tuple(combinators), span=self._span(meta))

    # ---- statements
    def block(self, meta, c):
        return _fold_when([x for x in c if x is not None])

    def let_stmt(self, meta, c):
        return A.Let(self._name(c[0]), _value(c[1]), span=self._span(meta))

    def assign_stmt(self, meta, c):
        target, value = c
        if not isinstance(target, A.Name):
            raise ParseIssue(target.span, "only a `let` name can be assigned",
                             "use `store(out, value)` to write a tile parameter")
        return A.Assign(target, _value(value), span=self._span(meta))

    def expr_stmt(self, meta, c):
        return _call_statement(c[0], self._span(meta))

    def block_stmt(self, meta, c):
        head, body = c
        span = self._span(meta)
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

    def for_stmt(self, meta, c):
        names = [self._name(t) for t in c if isinstance(t, Token)]
        rest = [x for x in c if not isinstance(x, Token)]
        iterable, body = rest
        span = self._span(meta)
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
        if len(names) != len(iterable.args):
            raise ParseIssue(iterable.span, f"{len(names)} loop variable{'s' if len(names) != 1 else ''} "
                             f"but {len(iterable.args)} ax{'es' if len(iterable.args) != 1 else 'is'}",
                             "write one loop variable per axis")
        if kind in ("seq", "sel") and len(names) != 1:
            raise ParseIssue(iterable.span, f"`{spelling}` takes exactly one axis")
        return A.ForLoop(tuple(names), kind, tuple(iterable.args), body, spelling, span=span)

    def else_when(self, meta, c):
        return A.WhenBranch(c[0], c[1], span=self._span(meta))

    def otherwise(self, meta, c):
        return _BlockMarker(c[0], span=self._span(meta))

    def when_stmt(self, meta, c):
        pred, body, rest = c[0], c[1], [x for x in c[2:] if x is not None]
        span = self._span(meta)
        first = A.WhenBranch(pred, body, span=span)
        branches = (first,) + tuple(x for x in rest if isinstance(x, A.WhenBranch))
        other = next((x.body for x in rest if isinstance(x, _BlockMarker)), None)
        return A.When(branches, other, span=span)

    def combine_stmt(self, meta, c):
        return A.Combine(c[0], span=self._span(meta))

    def sequential_stmt(self, meta, c):
        return A.Sequential(c[0], span=self._span(meta))

    def pipe_stmt(self, meta, c):
        return A.Pipe(c[0], span=self._span(meta))

    def process_stmt(self, meta, c):
        name = self._name(c[0])
        star, replicas, body = c[1], c[2], c[3]
        if star is not None and star.value != "*":
            raise ParseIssue(_tok_span(self.file, star), f"expected `*` or `{{`, found `{star.value}`",
                             "write `process NAME * N { ... }` for N replicas")
        return A.Process(name, replicas, body, span=self._span(meta))

    def send_stmt(self, meta, c):
        channel, call = self._name(c[0]), c[1]
        stmt = _call_statement(call, call.span)
        if not isinstance(stmt, A.CallStmt):
            raise ParseIssue(call.span, "`send` takes a channel and a kernel call",
                             "write `send(ch, kernel[i](out = ch, ...))`")
        return A.Send(channel, stmt, span=self._span(meta))

    def consume_stmt(self, meta, c):
        return A.Consume(self._name(c[0]), self._name(c[1]), c[2], span=self._span(meta))

    def record_stmt(self, meta, c):
        return A.Record(self._name(c[0]), span=self._span(meta))

    def synchronize_stmt(self, meta, c):
        return A.Synchronize(self._name(c[0]), span=self._span(meta))


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
        # The basic lexer, not the contextual one: the post-lexer looks one token ahead, so the
        # parser state a contextual lexer would consult is not yet known.
        options = dict(parser="lalr", lexer="basic", propagate_positions=True,
                       maybe_placeholders=True, postlex=StatementSeparators())
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
    "RAW_STRING": "a `\"\"\"` string", "_SEP": "end of statement", "$END": "end of file",
    "COMP_OP": "a comparison",
    "ADD_OP": "`+` or `-`", "MUL_OP": "`*`, `/` or `%`", "OR": "`or`", "AND": "`and`",
    "NOT": "`not`", "TRUE": "`true`", "FALSE": "`false`",
}
_EXPR_START = {"NAME", "INT", "FLOAT", "STRING", "LPAR", "ADD_OP", "NOT", "TRUE", "FALSE"}
_DECL_START = {"MODULE", "IMPORT", "SYM", "CONST", "INPUT", "OUTPUT", "INOUT", "SCRATCH", "AXIS", "CHANNEL", "EVENT",
               "KERNEL", "WORKLOAD", "SCHEDULE"}


def _words(parser: Lark, expected: set[str]) -> str:
    expected = {e for e in expected if e not in ("NL", "SEMI")}
    parts: list[str] = []
    if expected & _DECL_START and len(expected & _DECL_START) >= 4:
        parts.append("a declaration (`kernel`, `workload`, `input`, `sym`, ...)")
        expected -= _DECL_START
    if len(expected & _EXPR_START) >= 4:
        parts.append("an expression")
        expected -= _EXPR_START
    operators = {"ADD_OP", "MUL_OP", "COMP_OP", "AND", "OR", "DOT", "LPAR", "LSQB", "EQUAL"}
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
        open_braces = parser.options.postlex.open_braces
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
    builder = AstBuilder(file)
    try:
        tree = parser.parse(text)
        decls = builder.transform(tree)
    except UnexpectedInput as err:
        diags.add(_syntax_diagnostic(parser, err, file, text))
        diags.raise_if_any()
        raise AssertionError("unreachable")
    except VisitError as err:
        if isinstance(err.orig_exc, ParseIssue):
            issue = err.orig_exc
            diags.error(issue.span, "syntax", issue.message, issue.help)
            diags.raise_if_any()
        raise
    flat: list = []
    for d in decls:
        flat.extend(d if isinstance(d, list) else [d])
    source = A.SourceFile(file, tuple(flat), text, span=A.Span(file, 1, 1, 1, 1))
    for node in source.walk():
        if isinstance(node, RawCall) and isinstance(node.func, A.Index):
            diags.error(node.span, "syntax", *_TASK_AS_VALUE)
        elif isinstance(node, RawCall):
            diags.error(node.span, "syntax", "a method call is only allowed in a schedule chain")
    diags.raise_if_any()
    return source
