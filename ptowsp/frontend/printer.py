"""Print AST nodes: expressions back in source syntax, files as a stable indented outline.

`expr_str` is used in messages ("`x = X[b]` is a [T, 16, 128] view"); `dump` is what
`wspc compile --emit ast` prints. Both are deterministic and never show spans, so golden
files do not change when a program is merely re-indented.
"""

from __future__ import annotations

from typing import Optional

from . import ast as A

# Binding strength of binary operators (higher binds tighter).
_PREC = {"or": 1, "and": 2, "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4,
         "+": 5, "-": 5, "*": 6, "/": 6, "%": 6}
_UNARY_PREC = {"not": 3, "-": 7}


def expr_str(e: Optional[A.Node], parent: int = 0) -> str:
    """Source text of an expression with the parentheses its precedence needs."""
    out: list[str] = []
    _expr(e, parent, out)
    return "".join(out)


def call_text(s: A.CallStmt) -> str:
    """A task call statement as written: `let t = ` before it when it binds a handle, its
    `after` clause after it."""
    text = expr_str(s)
    if s.label is not None:
        text = f"let {s.label.id} = {text}"
    if s.after:
        items = [a.handle.id + ("" if a.index is None else
                                "[" + ", ".join(expr_str(i) for i in a.index) + "]")
                 for a in s.after]
        text += " after " + (items[0] if len(items) == 1 else "[" + ", ".join(items) + "]")
    return text


def _expr(e: Optional[A.Node], parent: int, out: list[str]) -> None:
    # the pieces go into one list, joined once: building each operand's text as a string made a
    # chain of n operators cost n^2
    if e is None:
        return
    if isinstance(e, A.Name):
        out.append(e.id)
    elif isinstance(e, A.IntLit):
        out.append(e.text or str(e.value))
    elif isinstance(e, A.FloatLit):
        out.append(e.text or repr(e.value))
    elif isinstance(e, A.BoolLit):
        out.append("true" if e.value else "false")
    elif isinstance(e, A.StrLit):
        out.append('"' + e.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"')
    elif isinstance(e, A.Binary):
        p = _PREC[e.op]
        out.append("(" if p < parent else "")
        # left-associative: the right operand needs parentheses at equal precedence
        _expr(e.left, p, out)
        out.append(f" {e.op} ")
        _expr(e.right, p + 1, out)
        out.append(")" if p < parent else "")
    elif isinstance(e, A.Unary):
        p = _UNARY_PREC[e.op]
        out.append("(" if p < parent else "")
        out.append(f"{e.op} " if e.op == "not" else e.op)
        _expr(e.operand, p, out)
        out.append(")" if p < parent else "")
    elif isinstance(e, A.Call):
        out.append(f"{e.prefix}.{e.func.id}(" if e.prefix else f"{e.func.id}(")
        _args(e.args, e.kwargs, out)
        out.append(")")
    elif isinstance(e, A.Keyword):
        out.append(f"{e.name} = ")
        _expr(e.value, 0, out)
    elif isinstance(e, A.Attr):
        _expr(e.value, 8, out)
        out.append(f".{e.attr}")
    elif isinstance(e, A.Slice):
        # PEP 8's habit: `0:8`, but `t * 16 : t * 16 + 16` when a bound is compound
        parts = (e.start, e.stop) if e.step is None else (e.start, e.stop, e.step)
        simple = all(b is None or isinstance(b, (A.Name, A.IntLit)) for b in parts)
        if simple:
            for k, b in enumerate(parts):
                if k:
                    out.append(":")
                _expr(b, 0, out)
        else:
            out.append(" : ".join(expr_str(b) if b is not None else "" for b in parts).strip())
    elif isinstance(e, A.Index):
        _expr(e.value, 8, out)
        out.append("[")
        _list(e.items, out)
        out.append("]")
    elif isinstance(e, A.DenseAxis):
        _wrap("Dense[", (e.extent,), "]", out)
    elif isinstance(e, A.DenseDynAxis):
        _wrap("DenseDyn(", (e.extent,), ")", out)
    elif isinstance(e, A.RaggedAxis):
        _wrap("Ragged(", (e.outer, e.lengths), ")", out)
    elif isinstance(e, A.SparseAxis):
        _wrap("Sparse(", (e.outer, e.indptr, e.indices), ")", out)
    elif isinstance(e, A.TensorType):
        _wrap(f"{e.dtype}[", e.dims, "]", out)
    elif isinstance(e, A.TileType):
        _wrap("Tile[", (e.rows, e.cols), f", {e.dtype}]", out)
    elif isinstance(e, A.TileParamType):
        _wrap(f"{e.mode}[", (e.tile,) + ((A.Keyword("pad", e.pad),) if e.pad is not None else ()),
              "]", out)
    elif isinstance(e, A.ScalarParamType):
        out.append(f"Scalar[{e.dtype}]")
    elif isinstance(e, A.ConstexprParamType):
        out.append(f"Constexpr[{e.dtype}]")
    elif isinstance(e, A.CallStmt):
        out.append(e.callee.id)
        if e.coords is not None:
            _wrap("[", e.coords, "]", out)
        out.append("(")
        _args(e.args, e.kwargs, out)
        out.append(")")
    else:
        out.append(f"<{type(e).__name__}>")


def _list(items, out: list[str]) -> None:
    for i, x in enumerate(items):
        if i:
            out.append(", ")
        _expr(x, 0, out)


def _wrap(head: str, items, tail: str, out: list[str]) -> None:
    out.append(head)
    _list(items, out)
    out.append(tail)


def _args(args, kwargs, out: list[str]) -> None:
    _list(tuple(args) + tuple(kwargs), out)


def _args_str(args, kwargs) -> str:
    out: list[str] = []
    _args(args, kwargs, out)
    return "".join(out)


def _block(stmts: Optional[tuple], depth: int, out: list[str]) -> None:
    for s in stmts or ():
        _stmt(s, depth, out)


def _stmt(s: A.Node, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(s, A.Let):
        out.append(f"{pad}Let {s.name.id} = {expr_str(s.value)}")
    elif isinstance(s, A.LetMany):
        out.append(f"{pad}Let {', '.join(n.id for n in s.names)} = {expr_str(s.value)}")
    elif isinstance(s, A.Assign):
        out.append(f"{pad}Assign {s.name.id} = {expr_str(s.value)}")
    elif isinstance(s, A.Store):
        out.append(f"{pad}Store {expr_str(s.target)} <- {expr_str(s.value)}")
    elif isinstance(s, A.ExprStmt):
        out.append(f"{pad}ExprStmt {expr_str(s.expr)}")
    elif isinstance(s, A.CallStmt):
        out.append(f"{pad}Call {call_text(s)}")
    elif isinstance(s, A.ForLoop):
        axes = ", ".join(expr_str(a) for a in s.axes)
        out.append(f"{pad}For[{s.kind}] {', '.join(v.id for v in s.vars)} in {s.spelling}({axes})")
        _block(s.body, depth + 1, out)
    elif isinstance(s, A.When):
        for i, br in enumerate(s.branches):
            out.append(f"{pad}{'When' if i == 0 else 'ElseWhen'} {expr_str(br.pred)}")
            _block(br.body, depth + 1, out)
        if s.otherwise is not None:
            out.append(f"{pad}Otherwise")
            _block(s.otherwise, depth + 1, out)
    elif isinstance(s, (A.Combine, A.Sequential, A.Pipe)):
        out.append(f"{pad}{type(s).__name__}")
        _block(s.body, depth + 1, out)
    elif isinstance(s, A.Process):
        reps = f" * {expr_str(s.replicas)}" if s.replicas is not None else ""
        out.append(f"{pad}Process {s.name.id}{reps}")
        _block(s.body, depth + 1, out)
    elif isinstance(s, A.Send):
        out.append(f"{pad}Send {s.channel.id} <- {expr_str(s.call)}")
    elif isinstance(s, A.Consume):
        out.append(f"{pad}Consume {s.channel.id} as {s.var.id}")
        _block(s.body, depth + 1, out)
    elif isinstance(s, (A.Record, A.Synchronize)):
        out.append(f"{pad}{type(s).__name__} {s.event.id}")
    elif isinstance(s, A.SlotSet):
        out.append(f"{pad}SlotSet {expr_str(s.slot)} = {expr_str(s.value)}")
    elif isinstance(s, A.SlotLoad):
        out.append(f"{pad}SlotLoad {expr_str(s.slot)} <- {expr_str(s.source)}")
    elif isinstance(s, A.Collective):
        out.append(f"{pad}Collective {collective_str(s)}")
    else:
        out.append(f"{pad}<{type(s).__name__}>")


def layout_str(lay) -> str:
    """A tensor's layout as written after its type (` @ [R, S(tp)] partial(dp)`), or ""."""
    if lay is None:
        return ""
    dims = ", ".join("R" if e.axis is None else f"S({e.axis.id})" for e in lay.dims)
    tail = f" partial({', '.join(p.id for p in lay.partial)})" if lay.partial else ""
    return f" @ [{dims}]{tail}"


def collective_str(s: A.Collective) -> str:
    """A collective statement as written: `allreduce(Zp, into = Y, over = tp, op = sum)`."""
    words = [s.source.id, f"into = {s.into.id}"]
    if s.over is not None:
        words.append(f"over = {s.over.id}")
    if s.dim is not None:
        words.append(f"dim = {expr_str(s.dim)}")
    if s.op is not None:
        words.append(f"op = {s.op.id}")
    return f"{s.kind}({', '.join(words)})"


def _decl(d: A.Node, out: list[str]) -> None:
    pad = "  "
    if isinstance(d, A.ModuleDecl):
        out.append(f"{pad}Module {d.name.id}")
    elif isinstance(d, A.Import):
        out.append(f"{pad}Import {expr_str(A.StrLit(d.path))}")
    elif isinstance(d, A.SymDecl):
        default = f" = {expr_str(d.default)}" if d.default is not None else ""
        out.append(f"{pad}Sym {d.name.id}{default}")
    elif isinstance(d, A.ConstDecl):
        out.append(f"{pad}Const {d.name.id} = {expr_str(d.value)}")
    elif isinstance(d, A.MeshDecl):
        out.append(f"{pad}Mesh " + ", ".join(f"{a.name.id} = {expr_str(a.size)}" for a in d.axes))
    elif isinstance(d, A.TensorDecl):
        loc = f" @{d.location}" if d.location != "global" else ""
        out.append(f"{pad}Tensor {d.kind} {d.name.id}: {expr_str(d.type)}{layout_str(d.layout)}{loc}")
    elif isinstance(d, A.AxisDecl):
        out.append(f"{pad}Axis {d.name.id} = {expr_str(d.axis)}")
    elif isinstance(d, A.ChannelDecl):
        elem = f": {expr_str(d.elem)}" if d.elem is not None else ""
        depth = f", depth = {expr_str(d.depth)}" if d.depth is not None else ""
        out.append(f"{pad}Channel {d.name.id}{elem}{depth}")
    elif isinstance(d, A.EventDecl):
        out.append(f"{pad}Event {d.name.id}")
    elif isinstance(d, A.KernelDecl):
        out.append(f"{pad}Kernel {d.name.id}")
        for p in d.params:
            default = f" = {expr_str(p.default)}" if p.default is not None else ""
            out.append(f"{pad}  Param {p.name.id}: {expr_str(p.type)}{default}")
        for x in d.externs:
            out.append(f"{pad}  Extern {x.lang} ({len(x.code.splitlines())} lines)")
        if d.body is not None:
            out.append(f"{pad}  Body")
            _block(d.body, 3, out)
    elif isinstance(d, A.WorkloadDecl):
        params = ", ".join(p.name.id + (f": {p.kind}" if p.kind != "any" else "")
                           + (f"[{expr_str(p.extent)}]" if p.extent is not None else "") for p in d.params)
        out.append(f"{pad}Workload {d.name.id}({params})")
        _block(d.body, 2, out)
    elif isinstance(d, A.ScheduleDecl):
        out.append(f"{pad}Schedule {d.name.id} = {d.workload.id}({_args_str(d.args, d.kwargs)})")
        for c in d.combinators:
            out.append(f"{pad}  .{c.name.id}({_args_str(c.args, c.kwargs)})")
    else:
        out.append(f"{pad}<{type(d).__name__}>")


def dump(f: A.SourceFile) -> str:
    """The `--emit ast` outline of one file."""
    out = [f"SourceFile {f.path}"]
    for d in f.decls:
        _decl(d, out)
    return "\n".join(out) + "\n"
