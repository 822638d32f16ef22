"""Build AST nodes from grammar rules: one method per rule of `grammar/wsp.lark`.

The grammar parses types (`In[Tile[16, 128, f32]]`), axes (`Dense[8]`, `Ragged(b, L)`),
`P.seq(...)`, `P.when(...) { }`, `store(...)` and `slot_set(...)` as plain expressions and
statements; this module gives those spellings their meaning, so the grammar stays small and
the messages stay precise. Malformed constructs raise `ParseIssue`, which the parser turns
into a diagnostic. Operators arrive as a flat list and are grouped here by precedence.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from ..diagnostics import did_you_mean
from ..dtypes import DTYPES
from . import ast as A
from .lexer import Tok
from .nesting import MAX_DEPTH

KEYWORDS = frozenset(
    "module import sym const mesh input output inout scratch axis kernel workload schedule channel "
    "event let for in when else otherwise pipe process send consume as combine sequential record "
    "synchronize extern after and or not true false".split()
)
KERNEL_PREFIXES = ("tl", "pto")



# a tensor's placement hints (`input X: f32[N], location = ub`), nearest the cores last
LOCATIONS = ("global", "l2", "l1", "ub")

class ParseIssue(Exception):
    """A construct that parses but is malformed (e.g. `for i in batch`); becomes a diagnostic."""

    def __init__(self, span: A.Span, message: str, help: Optional[str] = None):
        super().__init__(message)
        self.span, self.message, self.help = span, message, help


@A.node
class RawCall(A.Node):
    """A call whose meaning depends on where it stands: `k[i](...)` or `obj.method(...)`."""

    func: Any
    args: tuple
    kwargs: tuple


@A.node
class _BlockMarker(A.Node):
    """`P.otherwise { }` standing alone; folded into the preceding `when` by `_fold_when`."""

    body: tuple


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
        self.prefixes = 0  # prefix operators being applied: each recursion of `unary`

    def run(self) -> A.Node:
        return self.expr(0)

    def expr(self, min_prec: int) -> A.Node:
        left = self.unary()
        last_comparison: Optional[Tok] = None
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
        if not isinstance(item, Tok):
            return item
        if item.value not in ("-", "+", "not"):
            raise ParseIssue(_tok_span(self.file, item), f"expected an expression, found `{item.value}`")
        self.prefixes += 1
        if self.prefixes > MAX_DEPTH:  # `- - - ... x`: the nesting limit, before recursing on
            raise ParseIssue(_tok_span(self.file, item),
                             f"expression nested more than {MAX_DEPTH:,} levels deep",
                             "each operator is a level: split the expression into smaller ones")
        operand = self.expr(_NOT_PREC + 1) if item.value == "not" else self.unary()
        self.prefixes -= 1
        span = _tok_span(self.file, item).merge(operand.span)
        if item.value == "+":
            return operand
        if item.value == "-" and isinstance(operand, A.IntLit):
            # `-3` is a literal, so `-1` and `-inf` read naturally in messages and dumps
            text = "-" + operand.text if operand.text and operand.text[0] != "-" else ""
            return A.IntLit(-operand.value, text, span=span)
        if item.value == "-" and isinstance(operand, A.FloatLit) and not operand.text.startswith("-"):
            return A.FloatLit(-operand.value, "-" + operand.text, span=span)
        return A.Unary(str(item.value), operand, span=span)


def _tok_span(file: str, tok: Tok) -> A.Span:
    return A.Span(file, tok.line, tok.column, tok.end_line, tok.end_column)


# decision: an integer literal has at most 400 digits, far past any value wspc can use (sizes and
# indices are int64; as a float, past 1e308 it is inf); converting a longer one would take time
# quadratic in its length, so it is an error at the literal
MAX_INT_DIGITS = 400


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


class AstBuilder:
    """One method per grammar rule (or alias), each returning an AST node.

    The LALR driver in `parser.py` calls them as it reduces, so every rule's children are seen
    once, bottom-up, and no parse tree is built. Spans come from the first and last child that
    has a position (tokens the grammar keeps by naming them, or AST nodes).
    """

    def __init__(self, file: str = "<string>"):
        self.file = file  # set by `parse` before each run: one builder serves every parse
        # calls whose meaning needs their context (`k[i](...)`, `w().dispatch(...)`), by id,
        # until a statement or schedule takes them; any left at the end stand where no call can
        self.raw_calls: dict[int, RawCall] = {}
        # operands with prefix operators, by id (the node is kept so the id stays unique)
        self.prefixed_parts: dict[int, tuple[Any, list]] = {}

    def reset(self, file: str) -> None:
        self.file = file
        self.raw_calls = {}
        self.prefixed_parts = {}

    def _taken(self, e: Any) -> Any:
        if isinstance(e, RawCall):
            self.raw_calls.pop(id(e), None)
        return e

    # ---- helpers
    def _ends(self, x: Any) -> Optional[tuple[int, int, int, int]]:
        """(line, col, end_line, end_col) of a child that has a position, else None."""
        if isinstance(x, Tok):
            return x[3], x[4], x[5], x[6]
        if isinstance(x, (A.Node, _Block)):
            sp = x.span
            if sp is not A.NO_SPAN:
                return sp.line, sp.col, sp.end_line, sp.end_col
        return None

    def _sp(self, c: list) -> A.Span:
        """The span from the first positioned child to the last one."""
        first = last = None
        for x in c:
            first = self._ends(x)
            if first is not None:
                break
        if first is None:
            return A.NO_SPAN
        for x in reversed(c):
            last = self._ends(x)
            if last is not None:
                break
        return A.Span(self.file, first[0], first[1], last[2], last[3])

    def _name(self, tok: Tok) -> A.Name:
        # (keywords never arrive here: the lexer gives them their own token types)
        return A.Name(tok[1], span=A.Span(self.file, tok[3], tok[4], tok[5], tok[6]))

    # ---- expressions
    def name(self, c):
        return self._name(c[0])

    def int_lit(self, c):
        digits = len(c[0].value.replace("_", ""))
        if digits > MAX_INT_DIGITS:
            raise ParseIssue(_tok_span(self.file, c[0]),
                             f"an integer literal of {digits} digits; wspc reads at most "
                             f"{MAX_INT_DIGITS}",
                             "sizes and indices are int64 (19 digits); write a large float as "
                             "`1e30`")
        return A.IntLit(_int(c[0].value), c[0].value, span=_tok_span(self.file, c[0]))

    def float_lit(self, c):
        text = c[0].value
        return A.FloatLit(float(text.replace("_", "")), text, span=_tok_span(self.file, c[0]))

    def str_lit(self, c):
        span = _tok_span(self.file, c[0])
        return A.StrLit(_unescape(c[0].value[1:-1], span), span=span)

    def bool_lit(self, c):
        return A.BoolLit(c[0].value == "true", span=_tok_span(self.file, c[0]))

    def prefixed(self, c):
        # Resolved at once for an operand standing alone (`-x`); `operators` takes the parts
        # back when binary operators follow, since `not` binds looser than a comparison.
        node = _Climber(self.file, c).run()
        self.prefixed_parts[id(node)] = (node, c)
        return node

    def operators(self, c):
        items: list = []
        for x in c:
            parts = self.prefixed_parts.get(id(x))
            if parts is not None and parts[0] is x:
                items.extend(parts[1])
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
        start, stop = c[0], c[2]
        step = c[4] if len(c) > 3 else None  # `a:b:` is `a:b`, as in NumPy
        return A.Slice(start, stop, step, span=self._sp(c))

    def index(self, c):
        value, items = c[0], tuple(x for x in c[1:-1] if x is not None)
        span = self._sp(c)
        if isinstance(value, A.Name) and value.id == "Dense":
            if len(items) != 1 or isinstance(items[0], A.Slice):
                raise ParseIssue(span, "`Dense[...]` takes one extent", "write `Dense[8]`")
            return A.DenseAxis(items[0], span=span)
        keywords = [x for x in items if isinstance(x, A.Keyword)]
        # decision: `name = value` in brackets is a tile parameter's option (`In[Tile[...], pad = 0]`)
        # and nothing else: an index or a type takes none
        if keywords and not (isinstance(value, A.Name) and value.id in ("In", "InOut", "Out")):
            raise ParseIssue(keywords[0].span, f"`{keywords[0].name} = ...` is not an index",
                             "only a tile parameter's type takes an option: "
                             "`In[Tile[16, 128, f32], pad = 0]`")
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

    def mesh_item(self, c):
        return A.MeshAxis(self._name(c[0]), c[1], span=self._sp(c))

    def mesh_decl(self, c):
        return A.MeshDecl(tuple(c[1:]), span=self._sp(c))

    def tensor_decl(self, c):
        kind, name, texpr, layout, *options = c
        location = "global"
        seen = False
        for opt in options:
            if opt.name != "location":
                raise ParseIssue(opt.span, f"unknown tensor option `{opt.name}`",
                                 "the only option is `location = global | l2 | l1 | ub`")
            if seen:
                raise ParseIssue(opt.span, "`location` is given twice")
            seen = True
            v = opt.value
            if not isinstance(v, A.Name) or v.id not in LOCATIONS:
                raise ParseIssue(v.span, "a tensor's location is one of "
                                 + ", ".join(f"`{x}`" for x in LOCATIONS),
                                 "write `location = ub` (a placement hint for the cycle model "
                                 "and the Ascend tree)")
            location = v.id
        return A.TensorDecl(str(kind.value), self._name(name), _tensor_type(texpr),
                            location=location, layout=layout, span=self._sp(c))

    def layout(self, c):
        # `@ [R, S(tp)] partial(tp)`: children AT, the entries (None for an empty list), RSQB,
        # then the optional `partial(...)`
        entries = [x for x in c[1:-2] if x is not None]
        tail = c[-1]
        dims = tuple(_layout_dim(e) for e in entries)
        partial: tuple[A.Name, ...] = ()
        if tail is not None:
            if not (isinstance(tail, A.Call) and tail.func.id == "partial" and not tail.prefix
                    and not tail.kwargs and tail.args
                    and all(isinstance(a, A.Name) for a in tail.args)):
                raise ParseIssue(tail.span, "after a layout's `[...]` only `partial(axis, ...)` "
                                 "may follow", "write `@ [R, R] partial(tp)`")
            partial = tuple(tail.args)
        return A.Layout(dims, partial, span=self._sp(c))

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

    def extern_include(self, c):
        word, header = c
        return A.ExternInclude(str(word.value), _unescape(header.value[1:-1], _tok_span(self.file, header)),
                               span=self._sp(c))

    def extern_body(self, c):
        _kw, lang, *includes, code = c
        text = code.value[3:-3] if code.type == "RAW_STRING" else _unescape(
            code.value[1:-1], _tok_span(self.file, code))
        return A.ExternBody(str(lang.value), text, tuple(includes), span=self._sp(c))

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
        return A.ScheduleDecl(name, node.func, node.args, tuple(combinators), node.kwargs, span=span)

    # ---- statements
    def block(self, c):
        return _Block(_fold_when([x for x in c[1:-1] if x is not None]), self._sp(c))

    def let_stmt(self, c):
        name, value, after = self._name(c[1]), c[2], c[3]
        span = self._sp(c[:3] + list(after or ()))
        if isinstance(value, RawCall) or (after is not None and isinstance(value, A.Call)):
            # `let t = k[i](...)`: a task handle (a bare `let t = k(...)` is one too, decided
            # by the checker, which knows the kernels: frontend/workloads/edges.py)
            stmt = _call_statement(self._taken(value), span)
            if not isinstance(stmt, A.CallStmt):
                raise ParseIssue(value.span, *_AFTER_TASK)
            return replace(stmt, label=name, after=after or ())
        if after is not None:
            raise ParseIssue(value.span, *_AFTER_TASK)
        return A.Let(name, _value(value), span=span)

    def after_clause(self, c):
        items = [x for x in c[1:] if x is not None and not isinstance(x, tuple)]
        out = []
        for x in items:
            if isinstance(x, A.Name):
                out.append(A.After(x, None, span=x.span))
            elif (isinstance(x, A.Index) and isinstance(x.value, A.Name)
                  and not any(isinstance(i, (A.Slice, A.Keyword)) for i in x.items)):
                out.append(A.After(x.value, tuple(x.items), span=x.span))
            else:
                raise ParseIssue(x.span, "`after` names task handles",
                                 "write `after t`, `after t[i - 1]` or `after [t1, t2]`, where "
                                 "`let t = k[i](...)` bound `t`")
        return tuple(out)

    def let_many_stmt(self, c):
        names = tuple(self._name(t) for t in c[1:-1])
        return A.LetMany(names, _value(c[-1]), span=self._sp(c))

    def assign_stmt(self, c):
        target, value = c
        if not isinstance(target, A.Name):
            raise ParseIssue(target.span, "only a `let` name can be assigned",
                             "use `store(out, value)` to write a tile parameter")
        return A.Assign(target, _value(value), span=self._sp(c))

    def expr_stmt(self, c):
        stmt = _call_statement(self._taken(c[0]), self._sp([c[0], *(c[1] or ())]))
        if c[1] is None:
            return stmt
        if not isinstance(stmt, A.CallStmt):
            raise ParseIssue(c[0].span, *_AFTER_TASK)
        return replace(stmt, after=c[1])

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
        names = [self._name(t) for t in c[1:] if isinstance(t, Tok)]
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


_AFTER_TASK = ("`after` follows a task call",
               "write `k[i](...) after t`, or `let u = k[i](...) after t` to name the task too")

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
    if isinstance(e, A.Call) and not e.prefix and e.func.id in A.COLLECTIVES:
        return _collective(e, span)
    if isinstance(e, A.Call) and not e.prefix:
        return A.CallStmt(e.func, None, e.args, e.kwargs, span=span)
    if isinstance(e, RawCall) and isinstance(e.func, A.Index) and isinstance(e.func.value, A.Name):
        for item in e.func.items:
            if isinstance(item, A.Slice):
                raise ParseIssue(item.span, "task coordinates cannot be slices")
        return A.CallStmt(e.func.value, e.func.items, e.args, e.kwargs, span=span)
    return A.ExprStmt(_value(e), span=span)


_LAYOUT_HELP = "each entry is `R` (replicated) or `S(axis)` (sharded over a mesh axis)"


def _layout_dim(e: Any) -> A.LayoutDim:
    """One layout entry: `R` or `S(axis)`."""
    if isinstance(e, A.Name) and e.id == "R":
        return A.LayoutDim(None, span=e.span)
    if (isinstance(e, A.Call) and e.func.id == "S" and not e.prefix and not e.kwargs
            and len(e.args) == 1 and isinstance(e.args[0], A.Name)):
        return A.LayoutDim(e.args[0], span=e.span)
    raise ParseIssue(getattr(e, "span", A.NO_SPAN), "a layout entry is `R` or `S(axis)`",
                     _LAYOUT_HELP)


def _collective(e: A.Call, span: A.Span) -> A.Collective:
    """`allreduce(A, into = B, over = tp, op = sum)` and its kin: the source positional, the
    rest by name; which names each collective needs is the checker's."""
    kind = e.func.id
    if len(e.args) != 1 or not isinstance(e.args[0], A.Name):
        raise ParseIssue(span, f"`{kind}` takes the source tensor, then keywords",
                         f"write `{kind}(A, into = B{'' if kind == 'relayout' else ', over = axis'})`")
    words: dict[str, A.Keyword] = {}
    for kw in e.kwargs:
        if kw.name not in ("into", "over", "op", "dim"):
            raise ParseIssue(kw.span, f"`{kind}` has no argument `{kw.name}`",
                             "its arguments are `into`, `over`, `op` and `dim`")
        if kw.name in words:
            raise ParseIssue(kw.span, f"`{kw.name}` is given twice")
        if kw.name != "dim" and not isinstance(kw.value, A.Name):
            raise ParseIssue(kw.value.span, f"`{kw.name}` takes a name")
        words[kw.name] = kw
    if "into" not in words:
        raise ParseIssue(span, f"`{kind}` needs its destination: `into = B`",
                         "a collective writes a tensor declared with the layout it makes")
    get = lambda k: words[k].value if k in words else None  # noqa: E731
    return A.Collective(kind, e.args[0], get("into"), get("over"), get("op"), get("dim"), span=span)


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
    if (isinstance(e, A.Index) and isinstance(e.value, A.Name) and e.value.id in ("In", "Out", "InOut")
            and e.items and not isinstance(e.items[0], A.Keyword)):
        pad = None
        for x in e.items[1:]:
            if not isinstance(x, A.Keyword):
                raise ParseIssue(x.span, f"`{e.value.id}[...]` takes one tile type",
                                 "write `In[Tile[16, 128, f32]]`, or `In[Tile[16, 128, f32], pad = 0]`")
            if x.name != "pad":
                raise ParseIssue(x.span, f"unknown tile parameter option `{x.name}`",
                                 "the one option is `pad = VALUE`: what a load of a partial view "
                                 "puts where the view has no element")
            if pad is not None:
                raise ParseIssue(x.span, "`pad` is given twice")
            pad = x.value
        return A.TileParamType(e.value.id, _tile_type(e.items[0]), pad, span=e.span)
    if isinstance(e, A.Index) and isinstance(e.value, A.Name) and len(e.items) == 1:
        mode, inner = e.value.id, e.items[0]
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
