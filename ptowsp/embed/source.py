"""Where in the user's Python source a traced construct stands: spans, names, sub-expressions.

The decorator API builds AST nodes while the user's code runs, so each node's `Span` comes from
the frame that is executing: the first frame outside the embedding's own modules, and the exact
columns of its current instruction (`code.co_positions()`, Python 3.11+; older versions get the
whole line). Three more things are read from the user's code:

- the names an expression's value is stored to (`sq = pto.mul(x, x)`, `for b, h in P(...)`,
  `with consume(ch) as t`), from the instructions that follow the current one;
- the spans of a call's keyword arguments (`x=X[b]`), by parsing the call's source text;
- the spans of a function's parameters, by parsing the file the function is in.

Source texts come from `linecache`, as tracebacks do, and go into the diagnostics' sources.
"""

from __future__ import annotations

import ast
import bisect
import dis
import linecache
import os
import sys
from typing import Optional

from ..spans import Span

# every module of the embedding is in this folder; `pto_wsp` is a package beside `ptowsp`
_HERE = os.path.dirname(os.path.abspath(__file__))
_EMBED_PREFIX = _HERE + os.sep
_ALIAS_DIR = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "pto_wsp") + os.sep


def is_internal(filename: str) -> bool:
    """A frame of the embedding itself (or of the `pto_wsp` alias), not of the user."""
    return filename.startswith(_EMBED_PREFIX) or filename.startswith(_ALIAS_DIR)


def user_frame(depth: int = 1):
    """The innermost frame outside the embedding's modules (the user's code)."""
    f = sys._getframe(depth)
    while f is not None and is_internal(f.f_code.co_filename):
        f = f.f_back
    return f


def source_text(filename: str) -> Optional[str]:
    lines = linecache.getlines(filename)
    return "".join(lines) if lines else None


def _line(filename: str, line: int) -> str:
    return linecache.getline(filename, line).rstrip("\n")


def _chars(text: str, byte_col: int) -> int:
    """A UTF-8 byte offset in `text` as a character offset (co_positions counts bytes)."""
    if text.isascii():
        return byte_col
    return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


_POSITIONS: dict = {}


def _positions(code) -> list:
    pos = _POSITIONS.get(code)
    if pos is None:
        pos = list(code.co_positions()) if hasattr(code, "co_positions") else []
        _POSITIONS[code] = pos
    return pos


def line_span(filename: str, line: int) -> Span:
    """The whole line `line` (without its indentation)."""
    text = _line(filename, line)
    start = len(text) - len(text.lstrip()) + 1
    return Span(filename, line, start, line, max(len(text) + 1, start + 1))


def frame_span(frame) -> Span:
    """The span of the instruction `frame` is executing."""
    code = frame.f_code
    filename = code.co_filename
    pos = _positions(code)
    i = frame.f_lasti // 2
    if 0 <= i < len(pos):
        line, end_line, col, end_col = pos[i]
        if line is not None and col is not None and end_line is not None and end_col is not None:
            c0 = _chars(_line(filename, line), col) + 1
            c1 = _chars(_line(filename, end_line), end_col) + 1
            return Span(filename, line, c0, end_line, c1)
    return line_span(filename, frame.f_lineno)


def here(depth: int = 2) -> Span:
    """The span of the user's code that is running now (the caller of the API function)."""
    f = user_frame(depth)
    if f is None:
        return Span("<python>", 0, 0, 0, 0)
    return frame_span(f)


# ---------------------------------------------------------------------------------------------
# Names a value is stored to


_INSTRS: dict = {}


def _instructions(code):
    got = _INSTRS.get(code)
    if got is None:
        instrs = list(dis.get_instructions(code))
        got = (instrs, [ins.offset for ins in instrs])
        _INSTRS[code] = got
    return got


_STORE_OPS = ("STORE_FAST", "STORE_NAME", "STORE_GLOBAL", "STORE_DEREF")


def stored_names(frame) -> Optional[list[str]]:
    """The variables the value being produced by `frame`'s current instruction is stored to:
    `x = f()` gives ["x"], `for b, h in it` (at FOR_ITER) gives ["b", "h"], `with m as t`
    (at BEFORE_WITH) gives ["t"]; None when the value is not stored to plain names."""
    if frame is None:
        return None
    instrs, offsets = _instructions(frame.f_code)
    # f_lasti may point into the instruction's inline caches (3.11+): the instruction is the
    # last one starting at or before it
    i = bisect.bisect_right(offsets, frame.f_lasti) - 1
    if i < 0 or i + 1 >= len(instrs):
        return None
    nxt = instrs[i + 1]
    if nxt.opname == "UNPACK_SEQUENCE":
        names = []
        for ins in instrs[i + 2:]:
            if len(names) == nxt.arg:
                break
            if ins.opname in _STORE_OPS:
                names.append(ins.argval)
            elif ins.opname == "STORE_FAST_STORE_FAST":  # Python 3.13
                names.extend(ins.argval)
            else:
                return None
        return names if len(names) == nxt.arg else None
    if nxt.opname in _STORE_OPS:
        return [nxt.argval]
    return None


def stored_name(frame) -> Optional[str]:
    names = stored_names(frame)
    return names[0] if names and len(names) == 1 else None


# ---------------------------------------------------------------------------------------------
# Sub-expressions of a span, functions' parameters


_SEGMENTS: dict = {}


def _segment_text(span: Span) -> Optional[str]:
    lines = linecache.getlines(span.file)
    if not lines or span.line <= 0 or span.end_line > len(lines):
        return None
    part = lines[span.line - 1:span.end_line]
    if span.line == span.end_line:
        return part[0][span.col - 1:span.end_col - 1]
    part[-1] = part[-1][:span.end_col - 1]
    part[0] = part[0][span.col - 1:]
    return "".join(part)


def expression_at(span: Span) -> Optional[ast.expr]:
    """The Python expression that `span` covers, parsed, with positions made absolute (line
    numbers of the file, 0-based character columns as `ast` gives them)."""
    key = (span.file, span.line, span.col, span.end_line, span.end_col)
    if key in _SEGMENTS:
        return _SEGMENTS[key]
    node = None
    text = _segment_text(span)
    if text is not None:
        try:
            tree = ast.parse("(" + text + "\n)", mode="eval")
            node = tree.body
            for n in ast.walk(tree):
                if hasattr(n, "lineno"):
                    for attr, line_attr in (("col_offset", "lineno"), ("end_col_offset", "end_lineno")):
                        ln = getattr(n, line_attr, None)
                        c = getattr(n, attr, None)
                        if ln is None or c is None:
                            continue
                        if ln == 1:  # the first line: after the `(` we added, from span.col
                            c = c - 1 + span.col - 1
                        setattr(n, attr, c)
                        setattr(n, line_attr, ln + span.line - 1)
        except SyntaxError:
            node = None
    _SEGMENTS[key] = node
    return node


def node_span(file: str, n: ast.AST) -> Span:
    """The span of a node from `expression_at` or `function_def` (absolute positions)."""
    return Span(file, n.lineno, n.col_offset + 1, n.end_lineno, n.end_col_offset + 1)


def keyword_spans(call_span: Span) -> dict:
    """For the call expression at `call_span`: {keyword: span of `name=value`} and
    {index: span} of its positional arguments (under the key `"*"`)."""
    node = expression_at(call_span)
    out: dict = {"*": []}
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg is not None and hasattr(kw, "lineno"):
                out[kw.arg] = node_span(call_span.file, kw)
        out["*"] = [node_span(call_span.file, a) for a in node.args]
    return out


_FILE_TREES: dict = {}


def _file_tree(filename: str) -> Optional[ast.Module]:
    text = source_text(filename)
    if text is None:
        return None
    key = (filename, hash(text))
    tree = _FILE_TREES.get(key)
    if tree is None:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return None
        _FILE_TREES[key] = tree
    return tree


def function_def(fn) -> Optional[ast.FunctionDef]:
    """The `def` of `fn` in its file (found by its first line), or None."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    tree = _file_tree(code.co_filename)
    if tree is None:
        return None
    first = code.co_firstlineno
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn.__name__:
            start = min([n.lineno] + [d.lineno for d in n.decorator_list])
            if start == first or n.lineno == first:
                return n
    return None


def def_span(fn) -> Span:
    """The span of `def NAME` of `fn` (its name), or its first line."""
    d = function_def(fn)
    code = fn.__code__
    if d is not None:
        text = _line(code.co_filename, d.lineno)
        col = text.find(fn.__name__, d.col_offset)
        if col >= 0:
            return Span(code.co_filename, d.lineno, col + 1, d.lineno, col + 1 + len(fn.__name__))
        return line_span(code.co_filename, d.lineno)
    return line_span(code.co_filename, code.co_firstlineno)


def param_spans(fn) -> dict:
    """{parameter: (span of the whole `name: annotation`, span of the name, span of the
    annotation or None)} for `fn`'s parameters."""
    d = function_def(fn)
    out: dict = {}
    if d is None:
        return out
    file = fn.__code__.co_filename
    args = d.args
    for a in list(args.posonlyargs) + list(args.args) + list(args.kwonlyargs):
        whole = node_span(file, a)
        name = Span(file, a.lineno, a.col_offset + 1, a.lineno, a.col_offset + 1 + len(a.arg))
        ann = node_span(file, a.annotation) if a.annotation is not None else None
        out[a.arg] = (whole, name, ann)
    return out
