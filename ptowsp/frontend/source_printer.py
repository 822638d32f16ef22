"""Print a `SourceFile` as `.wsp` text: any checked AST, whoever built it (the parser or the
Python embedding API; `ptowsp.to_wsp(workload)` returns it), and `wspc fmt`'s canonical layout
of a file (`format_text`), which is the same printer given the file's comments and blank lines.

Expressions are printed by `printer.expr_str` (source syntax, parentheses by precedence);
this module lays out declarations and statement blocks, four spaces per level, and wraps a
line longer than `LINE_LENGTH` at the commas of its first call (docs/tools.md, "wspc fmt",
says the whole layout). The output parses back (`ptowsp.parse`) to an AST that checks and
lowers to the same IR.

Comments are not in the AST: `parser.layout` finds them (and the braces) in the text, and
`_Out` places each one as the AST is printed, by source position: a comment on a line of its
own goes before the statement or declaration that follows it (or before the `}` that closes
its block), one after code on the same line stays at the end of that statement's last line,
and one inside a statement that is printed differently (between two parameters, say) moves
to a line of its own before that statement. Without a layout (an AST built in Python) no
comments are placed and no blank lines are kept.
"""

from __future__ import annotations

import bisect
from typing import Optional

from ..diagnostics import InternalError
from . import ast as A
from .lexer import Comment
from .printer import call_text, collective_str, expr_str, layout_str

_PAD = "    "
LINE_LENGTH = 100
# a wrapped argument list lines up after its `(` unless that is further right than this; then
# the arguments go two levels in (not one, which would look like the block's body)
_ALIGN_MAX = 50
_TRY_CALLS = 16  # the calls of one line tried for a break, outermost and leftmost first

Pos = tuple[int, int]  # (line, col), 1-based
_NOWHERE: Pos = (0, 0)


def _start(node: A.Node) -> Pos:
    return (node.span.line, node.span.col)


def _end(node: A.Node) -> Pos:
    return (node.span.end_line, node.span.end_col)


class _Layout:
    """What the text says beyond the AST: comments, braces and blank lines."""

    def __init__(self, text: str, comments: list[Comment], braces: list[tuple[int, int, str]]):
        self.comments = comments
        self.blank = {n for n, line in enumerate(text.split("\n"), 1) if not line.strip()}
        self.opens: list[Pos] = []
        self.close_of: dict[Pos, Pos] = {}
        stack: list[Pos] = []
        for line, col, ch in braces:
            if ch == "{":
                self.opens.append((line, col))
                stack.append((line, col))
            elif stack:
                self.close_of[stack.pop()] = (line, col)

    def brace_after(self, pos: Pos) -> Optional[tuple[Pos, Pos]]:
        """The first `{` at or after `pos` and its `}`."""
        i = bisect.bisect_left(self.opens, pos)
        if i == len(self.opens):
            return None
        o = self.opens[i]
        return o, self.close_of.get(o, o)

    def blank_between(self, a: int, b: int) -> bool:
        """Is a line strictly between lines `a` and `b` blank?"""
        return any(n in self.blank for n in range(a + 1, b))


class _Out:
    """The printed lines, with the comments placed among them (see the module docstring)."""

    def __init__(self, layout: Optional[_Layout]):
        self.lay = layout
        self.rows: list[Optional[list]] = []  # [indent, code, trailing comment or None]; None: blank
        self.next = 0  # the next comment to place
        self.last = 0  # the source line where the last printed item ended
        self.opened = True  # at the start of the file or of a block: no blank line here
        self.want_blank = False  # a blank line before the next item (between declaration groups)

    def _blank_before(self, first_line: int) -> None:
        user = (self.lay is not None and first_line > 0 and self.last > 0
                and self.lay.blank_between(self.last, first_line))
        if (self.want_blank or (user and not self.opened)) and self.rows and self.rows[-1] is not None:
            self.rows.append(None)
        self.want_blank = False
        self.opened = False

    def _comment_row(self, depth: int, c: Comment) -> None:
        self.rows.append([_PAD * depth, c.text, None])

    def comments_before(self, pos: Pos, depth: int) -> None:
        """Place the comments before `pos`, each on a line of its own at `depth`."""
        lay = self.lay
        if lay is None:
            return
        cs = lay.comments
        while self.next < len(cs) and (cs[self.next].line, cs[self.next].col) < pos:
            c = cs[self.next]
            self._blank_before(c.line)
            self._comment_row(depth, c)
            self.last = c.end_line
            self.next += 1

    def emit(self, depth: int, text: str, first: Pos = _NOWHERE, last: Pos = _NOWHERE,
             inside: Optional[int] = None) -> None:
        """One statement, declaration or block line whose source runs from `first` to `last`
        (the end of its last token), wrapped when too long. The comments inside it go before
        it at `depth`, or at `inside` (a `} else when ... {` line: in the block it closes)."""
        self.comments_before(first, depth)
        self._blank_before(first[0])
        trailing = None
        lay = self.lay
        if lay is not None and first != _NOWHERE:
            cs = lay.comments
            # comments inside the statement: on lines of their own before it
            while self.next < len(cs) and (cs[self.next].line, cs[self.next].col) < last:
                self._comment_row(depth if inside is None else inside, cs[self.next])
                self.next += 1
            # comments after it on its last line stay there
            after = []
            while self.next < len(cs) and cs[self.next].line == last[0]:
                after.append(cs[self.next].text)
                self.next += 1
            if after:
                trailing = " ".join(after)
            self.last = max(last[0], cs[self.next - 1].end_line if after else 0)
        lines = _wrap(text, len(_PAD) * depth)
        for line in lines:
            self.rows.append([_PAD * depth, line, None])
        self.rows[-1][2] = trailing

    def open_block(self) -> None:
        self.opened = True

    def text(self) -> str:
        rows = self.rows
        while rows and rows[-1] is None:
            rows.pop()
        # trailing comments on consecutive lines line up, two spaces after the longest code
        i = 0
        while i < len(rows):
            if rows[i] is None or rows[i][2] is None:
                i += 1
                continue
            j = i
            while j < len(rows) and rows[j] is not None and rows[j][2] is not None:
                j += 1
            col = max(len(r[0]) + len(r[1].rsplit("\n", 1)[-1]) for r in rows[i:j]) + 2
            for r in rows[i:j]:
                width = len(r[0]) + len(r[1].rsplit("\n", 1)[-1])
                r[1] = r[1] + " " * (col - width) + r[2]
            i = j
        out = "\n".join("" if r is None else r[0] + r[1] for r in rows)
        return out + "\n" if out else ""


def _wrap(text: str, indent: int) -> list[str]:
    """`text` as lines of at most `LINE_LENGTH` columns (from `indent`) where it can: broken
    after the commas of one call's arguments, filled, and lined up after its `(`. The call is
    the first (outermost, then leftmost) whose breaking makes every line fit, else the one that
    leaves the shortest longest line, if that is at most two thirds of the text. A text with no
    call to break, or with a `\"\"\"` body, stays one line."""
    if indent + len(text) <= LINE_LENGTH or "\n" in text:
        return [text]
    best: Optional[list[str]] = None
    # the first few calls only: a generated line of thousands of calls would cost their square
    for open_at, commas, close_at in _calls(text)[:_TRY_CALLS]:
        lines = _wrap_at(text, indent, open_at, commas, close_at)
        widest = max(len(x) for x in lines) + indent
        if widest <= LINE_LENGTH:
            return lines
        if best is None or widest < max(len(x) for x in best) + indent:
            best = lines
    # no break makes it fit: the best one, if it at least leaves a much shorter longest line
    # (breaking a long chain of operators at one call's comma only makes it harder to read)
    if best is not None and max(len(x) for x in best) + indent <= (indent + len(text)) * 2 // 3:
        return best
    return [text]


def _wrap_at(text: str, indent: int, open_at: int, commas: list[int], close_at: int) -> list[str]:
    bounds = [open_at] + commas + [close_at]
    items = [text[a + 1:b].strip() for a, b in zip(bounds, bounds[1:])]
    head, tail = text[:open_at + 1], text[close_at:]
    pad = " " * (len(head) if indent + len(head) <= _ALIGN_MAX else 2 * len(_PAD))
    lines: list[str] = []
    cur = head
    for k, item in enumerate(items):
        piece = item + ("," if k < len(items) - 1 else tail)
        if cur is head or cur == pad:
            cur += piece
        elif indent + len(cur) + 1 + len(piece) <= LINE_LENGTH:
            cur += " " + piece
        else:
            lines.append(cur)
            cur = pad + piece
    lines.append(cur)
    return lines


def _calls(text: str) -> list[tuple[int, list[int], int]]:
    """The calls in a line of printed code with two or more arguments, outermost first: the
    index of each one's `(` (one that follows a name or `]`), of its commas and of its `)`."""
    calls = []
    stack: list[tuple[int, bool, list[int]]] = []
    quote = False
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = False
        elif ch == '"':
            quote = True
        elif ch in "([":
            call = ch == "(" and i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_]")
            stack.append((i, call, []))
        elif ch in ")]" and stack:
            open_at, call, commas = stack.pop()
            if call and commas:
                calls.append((len(stack), open_at, commas, i))
        elif ch == "," and stack:
            stack[-1][2].append(i)
        i += 1
    return [(o, c, e) for _, o, c, e in sorted(calls)]


def _args(args, kwargs) -> str:
    return ", ".join([expr_str(a) for a in args] + [expr_str(k) for k in kwargs])


class _Printer:
    def __init__(self, layout: Optional[_Layout]):
        self.lay = layout
        self.out = _Out(layout)

    # ---- blocks: `head {`, the body, `}`, with the positions of the braces when known

    def _braces(self, after: Pos) -> tuple[Pos, Pos]:
        if self.lay is None or after == _NOWHERE:
            return _NOWHERE, _NOWHERE
        found = self.lay.brace_after(after)
        if found is None:
            raise InternalError("print", f"no `{{` after {after[0]}:{after[1]}")
        return found

    def _close(self, depth: int, text: str, close: Pos, last: Pos) -> None:
        """`}` (or `} else ... {`): the comments left in the block first, inside it."""
        self.out.comments_before(close, depth + 1)
        self.out.opened = True  # no blank line before a `}`
        self.out.emit(depth, text, close, last, inside=depth + 1)

    def block(self, head: str, body, depth: int, start: Pos) -> None:
        o, c = self._braces(start)
        self.out.emit(depth, f"{head} {{", start, _after(o))
        self.stmts(body, depth + 1)
        self._close(depth, "}", c, _after(c))

    def stmts(self, stmts, depth: int) -> None:
        self.out.open_block()
        for s in stmts or ():
            self.stmt(s, depth)

    def line(self, depth: int, text: str, node: A.Node) -> None:
        real = self.lay is not None and node.span is not A.NO_SPAN and node.span.line > 0
        self.out.emit(depth, text, _start(node) if real else _NOWHERE, _end(node) if real else _NOWHERE)

    def start(self, node: A.Node) -> Pos:
        if self.lay is None or node.span is A.NO_SPAN or node.span.line <= 0:
            return _NOWHERE
        return _start(node)

    # ---- statements

    def stmt(self, s: A.Node, depth: int) -> None:
        if isinstance(s, A.Let):
            self.line(depth, f"let {s.name.id} = {expr_str(s.value)}", s)
        elif isinstance(s, A.LetMany):
            self.line(depth, f"let {', '.join(n.id for n in s.names)} = {expr_str(s.value)}", s)
        elif isinstance(s, A.Assign):
            self.line(depth, f"{s.name.id} = {expr_str(s.value)}", s)
        elif isinstance(s, A.Store):
            self.line(depth, f"store({expr_str(s.target)}, {expr_str(s.value)})", s)
        elif isinstance(s, A.ExprStmt):
            self.line(depth, expr_str(s.expr), s)
        elif isinstance(s, A.CallStmt):
            self.line(depth, call_text(s), s)
        elif isinstance(s, A.ForLoop):
            axes = ", ".join(expr_str(a) for a in s.axes)
            names = ", ".join(v.id for v in s.vars)
            self.block(f"for {names} in {s.spelling}({axes})", s.body, depth, self.start(s))
        elif isinstance(s, A.When):
            self.when(s, depth)
        elif isinstance(s, A.Combine):
            self.block("combine", s.body, depth, self.start(s))
        elif isinstance(s, A.Sequential):
            self.block("sequential", s.body, depth, self.start(s))
        elif isinstance(s, A.Pipe):
            self.block("pipe", s.body, depth, self.start(s))
        elif isinstance(s, A.Process):
            reps = f" * {expr_str(s.replicas)}" if s.replicas is not None else ""
            self.block(f"process {s.name.id}{reps}", s.body, depth, self.start(s))
        elif isinstance(s, A.Send):
            self.line(depth, f"send({s.channel.id}, {expr_str(s.call)})", s)
        elif isinstance(s, A.Consume):
            self.block(f"consume({s.channel.id}) as {s.var.id}", s.body, depth, self.start(s))
        elif isinstance(s, A.Record):
            self.line(depth, f"record({s.event.id})", s)
        elif isinstance(s, A.Synchronize):
            self.line(depth, f"synchronize({s.event.id})", s)
        elif isinstance(s, A.SlotSet):
            self.line(depth, f"slot_set({expr_str(s.slot)}, {expr_str(s.value)})", s)
        elif isinstance(s, A.SlotLoad):
            self.line(depth, f"slot_load({expr_str(s.slot)}, {expr_str(s.source)})", s)
        elif isinstance(s, A.Collective):
            self.line(depth, collective_str(s), s)
        else:  # every statement class is above
            raise InternalError("print", f"no source form for the statement {type(s).__name__}")

    def when(self, s: A.When, depth: int) -> None:
        # `when P {` ... `} else when Q {` ... `} otherwise {` ... `}`: each `}` is found after
        # the `{` before it
        start = prev_close = self.start(s)
        for i, br in enumerate(s.branches):
            o, c = self._braces(start)
            head = f"when {expr_str(br.pred)} {{"
            if i == 0:
                self.out.emit(depth, head, start, _after(o))
            else:
                self._close(depth, f"}} else {head}", prev_close, _after(o))
            self.stmts(br.body, depth + 1)
            start = prev_close = c
        if s.otherwise is not None:
            o, c = self._braces(start)
            self._close(depth, "} otherwise {", prev_close, _after(o))
            self.stmts(s.otherwise, depth + 1)
            prev_close = c
        self._close(depth, "}", prev_close, _after(prev_close))

    # ---- declarations

    def decl(self, d: A.Node, syms: tuple = ()) -> None:
        if isinstance(d, A.ModuleDecl):
            self.line(0, f"module {d.name.id}", d)
        elif isinstance(d, A.Import):
            self.line(0, f"import {expr_str(A.StrLit(d.path))}", d)
        elif isinstance(d, A.SymDecl):
            items = ", ".join(s.name.id + (f" = {expr_str(s.default)}" if s.default is not None else "")
                              for s in (d, *syms))
            self.out.emit(0, f"sym {items}", self.start(d),
                          _end((d, *syms)[-1]) if self.start(d) != _NOWHERE else _NOWHERE)
        elif isinstance(d, A.ConstDecl):
            self.line(0, f"const {d.name.id} = {expr_str(d.value)}", d)
        elif isinstance(d, A.MeshDecl):
            self.line(0, "mesh " + ", ".join(f"{a.name.id} = {expr_str(a.size)}" for a in d.axes), d)
        elif isinstance(d, A.TensorDecl):
            loc = f", location = {d.location}" if d.location != "global" else ""
            self.line(0, f"{d.kind} {d.name.id}: {expr_str(d.type)}{layout_str(d.layout)}{loc}", d)
        elif isinstance(d, A.AxisDecl):
            self.line(0, f"axis {d.name.id} = {expr_str(d.axis)}", d)
        elif isinstance(d, A.ChannelDecl):
            elem = f": {expr_str(d.elem)}" if d.elem is not None else ""
            depth = f", depth = {expr_str(d.depth)}" if d.depth is not None else ""
            self.line(0, f"channel {d.name.id}{elem}{depth}", d)
        elif isinstance(d, A.EventDecl):
            self.line(0, f"event {d.name.id}", d)
        elif isinstance(d, A.KernelDecl):
            self.kernel(d)
        elif isinstance(d, A.WorkloadDecl):
            params = ", ".join(p.name.id + (f": {p.kind}" if p.kind != "any" else "")
                               + (f"[{expr_str(p.extent)}]" if p.extent is not None else "")
                               for p in d.params)
            self.block(f"workload {d.name.id}({params})", d.body, 0, self.start(d))
        elif isinstance(d, A.ScheduleDecl):
            self.schedule(d)
        else:  # every declaration class is above
            raise InternalError("print", f"no source form for the declaration {type(d).__name__}")

    def kernel(self, d: A.KernelDecl) -> None:
        params = []
        for p in d.params:
            default = f" = {expr_str(p.default)}" if p.default is not None else ""
            params.append(f"{p.name.id}: {expr_str(p.type)}{default}")
        head = f"kernel {d.name.id}({', '.join(params)})"
        if d.body is not None:
            self.block(head, d.body, 0, self.start(d))
            return
        # the first foreign body follows the `)`, each further one starts a line of its own;
        # a body is printed as written (`\"\"\"` ... `\"\"\"`)
        bodies = [f"extern {x.lang}" + "".join(f' include "{i.header}"' for i in x.includes)
                  + f' """{x.code}"""' for x in d.externs]
        lines = _wrap(head, 0)
        lines[-1] += " " + bodies[0]
        text = "\n".join(lines + bodies[1:])
        start = self.start(d)
        self.out.emit(0, text, start, _end(d) if start != _NOWHERE else _NOWHERE)

    def schedule(self, d: A.ScheduleDecl) -> None:
        start = self.start(d)
        head = f"schedule {d.name.id} = {d.workload.id}({_args(d.args, d.kwargs)})"
        if self.one_line(d):
            self.line(0, head + "".join(f".{c.name.id}({_args(c.args, c.kwargs)})" for c in d.combinators), d)
            return
        head_end = _NOWHERE
        if start != _NOWHERE:
            head_end = max([_end(d.workload)] + [_end(a) for a in (*d.args, *d.kwargs)])
        self.out.emit(0, head, start, head_end)
        for c in d.combinators:
            self.out.opened = True  # no blank line inside the chain
            self.line(1, f".{c.name.id}({_args(c.args, c.kwargs)})", c)


    def one_line(self, d: A.Node) -> bool:
        """Is `d` printed on one line? A schedule's chain is when the text has it on one line
        and it fits (with no layout, or on several lines, one combinator per line)."""
        if isinstance(d, (A.KernelDecl, A.WorkloadDecl)):
            return False
        if not isinstance(d, A.ScheduleDecl) or not d.combinators:
            return True
        if self.start(d) == _NOWHERE or d.span.line != d.span.end_line:
            return False
        text = f"schedule {d.name.id} = {d.workload.id}({_args(d.args, d.kwargs)})" + "".join(
            f".{c.name.id}({_args(c.args, c.kwargs)})" for c in d.combinators)
        return len(text) <= LINE_LENGTH


def _after(p: Pos) -> Pos:
    """The position just after the one-character token at `p`."""
    return p if p == _NOWHERE else (p[0], p[1] + 1)


# Printing an AST with no text behind it (`to_wsp`): declarations of one group follow each other
# without a blank line; a blank line separates two groups, and surrounds every other declaration
# (kernels, workloads, schedules, ...).
_GROUPS = (A.Import, A.SymDecl, A.ConstDecl, A.TensorDecl, A.AxisDecl, (A.ChannelDecl, A.EventDecl))


def format_source(f: A.SourceFile, layout: Optional[_Layout] = None) -> str:
    """`.wsp` text for `f`: declarations in order, a blank line between groups; with the
    `layout` of the text `f` was parsed from, its comments and blank lines too."""
    p = _Printer(layout)
    prev = None
    prev_one_line = True
    decls = list(f.decls)
    i = 0
    while i < len(decls):
        d = decls[i]
        group = next((g for g in _GROUPS if isinstance(d, g)), None)
        one_line = p.one_line(d)
        if layout is None:
            # an AST built in Python: a blank line between groups
            p.out.want_blank = bool(p.out.rows) and (group is None or group is not prev)
        else:
            # a text's own blank lines between one-line declarations (at most one), and always
            # one around a declaration of several lines
            p.out.want_blank = bool(p.out.rows) and not (one_line and prev_one_line)
        i += 1
        syms: list = []
        if isinstance(d, A.SymDecl) and layout is not None and d.span.line > 0:
            # `sym B, T` declares two names: they stay on one line
            while (i < len(decls) and isinstance(decls[i], A.SymDecl)
                   and decls[i].span.line == d.span.line):
                syms.append(decls[i])
                i += 1
        p.decl(d, tuple(syms))
        prev, prev_one_line = group, one_line
    p.out.comments_before((1 << 62, 0), 0)
    return p.out.text()


def format_text(text: str, filename: str = "<string>") -> str:
    """`wspc fmt`: the canonical layout of module text, comments kept (a `WspError` with the
    parser's diagnostic when it does not parse)."""
    from .parser import layout, parse

    f = parse(text, filename)
    comments, braces = layout(text)
    return format_source(f, _Layout(text, comments, braces))
