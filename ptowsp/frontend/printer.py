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
    if e is None:
        return ""
    if isinstance(e, A.Name):
        return e.id
    if isinstance(e, A.IntLit):
        return str(e.value)
    if isinstance(e, A.FloatLit):
        return e.text or repr(e.value)
    if isinstance(e, A.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, A.StrLit):
        return '"' + e.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(e, A.Binary):
        p = _PREC[e.op]
        # left-associative: the right operand needs parentheses at equal precedence
        text = f"{expr_str(e.left, p)} {e.op} {expr_str(e.right, p + 1)}"
        return f"({text})" if p < parent else text
    if isinstance(e, A.Unary):
        p = _UNARY_PREC[e.op]
        sep = " " if e.op == "not" else ""
        text = f"{e.op}{sep}{expr_str(e.operand, p)}"
        return f"({text})" if p < parent else text
    if isinstance(e, A.Call):
        prefix = f"{e.prefix}." if e.prefix else ""
        return f"{prefix}{e.func.id}({_args(e.args, e.kwargs)})"
    if isinstance(e, A.Keyword):
        return f"{e.name} = {expr_str(e.value)}"
    if isinstance(e, A.Attr):
        return f"{expr_str(e.value, 8)}.{e.attr}"
    if isinstance(e, A.Slice):
        start = expr_str(e.start) if e.start is not None else ""
        stop = expr_str(e.stop) if e.stop is not None else ""
        # PEP 8's habit: `0:8`, but `t * 16 : t * 16 + 16` when a bound is compound
        simple = all(b is None or isinstance(b, (A.Name, A.IntLit)) for b in (e.start, e.stop))
        return f"{start}:{stop}" if simple else f"{start} : {stop}".strip()
    if isinstance(e, A.Index):
        return f"{expr_str(e.value, 8)}[{', '.join(expr_str(i) for i in e.items)}]"
    if isinstance(e, A.DenseAxis):
        return f"Dense[{expr_str(e.extent)}]"
    if isinstance(e, A.DenseDynAxis):
        return f"DenseDyn({expr_str(e.extent)})"
    if isinstance(e, A.RaggedAxis):
        return f"Ragged({expr_str(e.outer)}, {expr_str(e.lengths)})"
    if isinstance(e, A.SparseAxis):
        return f"Sparse({expr_str(e.outer)}, {expr_str(e.indptr)}, {expr_str(e.indices)})"
    if isinstance(e, A.TensorType):
        return f"{e.dtype}[{', '.join(expr_str(d) for d in e.dims)}]"
    if isinstance(e, A.TileType):
        return f"Tile[{expr_str(e.rows)}, {expr_str(e.cols)}, {e.dtype}]"
    if isinstance(e, A.TileParamType):
        return f"{e.mode}[{expr_str(e.tile)}]"
    if isinstance(e, A.ScalarParamType):
        return f"Scalar[{e.dtype}]"
    if isinstance(e, A.ConstexprParamType):
        return f"Constexpr[{e.dtype}]"
    if isinstance(e, A.CallStmt):
        coords = "" if e.coords is None else f"[{', '.join(expr_str(c) for c in e.coords)}]"
        return f"{e.callee.id}{coords}({_args(e.args, e.kwargs)})"
    return f"<{type(e).__name__}>"


def _args(args, kwargs) -> str:
    return ", ".join([expr_str(a) for a in args] + [expr_str(k) for k in kwargs])


def _block(stmts: Optional[tuple], depth: int, out: list[str]) -> None:
    for s in stmts or ():
        _stmt(s, depth, out)


def _stmt(s: A.Node, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(s, A.Let):
        out.append(f"{pad}Let {s.name.id} = {expr_str(s.value)}")
    elif isinstance(s, A.Assign):
        out.append(f"{pad}Assign {s.name.id} = {expr_str(s.value)}")
    elif isinstance(s, A.Store):
        out.append(f"{pad}Store {expr_str(s.target)} <- {expr_str(s.value)}")
    elif isinstance(s, A.ExprStmt):
        out.append(f"{pad}ExprStmt {expr_str(s.expr)}")
    elif isinstance(s, A.CallStmt):
        out.append(f"{pad}Call {expr_str(s)}")
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
    else:
        out.append(f"{pad}<{type(s).__name__}>")


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
    elif isinstance(d, A.TensorDecl):
        out.append(f"{pad}Tensor {d.kind} {d.name.id}: {expr_str(d.type)}")
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
        out.append(f"{pad}Schedule {d.name.id} = {d.workload.id}({_args(d.args, d.kwargs)})")
        for c in d.combinators:
            out.append(f"{pad}  .{c.name.id}({_args(c.args, c.kwargs)})")
    else:
        out.append(f"{pad}<{type(d).__name__}>")


def dump(f: A.SourceFile) -> str:
    """The `--emit ast` outline of one file."""
    out = [f"SourceFile {f.path}"]
    for d in f.decls:
        _decl(d, out)
    return "\n".join(out) + "\n"
