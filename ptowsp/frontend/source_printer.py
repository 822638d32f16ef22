"""Print a `SourceFile` as `.wsp` text: any checked AST, whoever built it (the parser or the
Python embedding API; `ptowsp.to_wsp(workload)` returns it). `printer.py` beside it dumps the
AST as an outline instead; a `wspc fmt` would print through this module.

Expressions are printed by `printer.expr_str` (source syntax, parentheses by precedence);
this module lays out declarations and statement blocks, four spaces per level. The output
parses back (`ptowsp.parse`) to an AST that checks and lowers to the same IR.
"""

from __future__ import annotations

from ..diagnostics import InternalError
from . import ast as A
from .printer import call_text, collective_str, expr_str, layout_str

_PAD = "    "


def _args(args, kwargs) -> str:
    return ", ".join([expr_str(a) for a in args] + [expr_str(k) for k in kwargs])


def _block(stmts, depth: int, out: list[str]) -> None:
    for s in stmts or ():
        _stmt(s, depth, out)


def _open(head: str, body, depth: int, out: list[str]) -> None:
    out.append(f"{_PAD * depth}{head} {{")
    _block(body, depth + 1, out)
    out.append(f"{_PAD * depth}}}")


def _stmt(s: A.Node, depth: int, out: list[str]) -> None:
    pad = _PAD * depth
    if isinstance(s, A.Let):
        out.append(f"{pad}let {s.name.id} = {expr_str(s.value)}")
    elif isinstance(s, A.LetMany):
        out.append(f"{pad}let {', '.join(n.id for n in s.names)} = {expr_str(s.value)}")
    elif isinstance(s, A.Assign):
        out.append(f"{pad}{s.name.id} = {expr_str(s.value)}")
    elif isinstance(s, A.Store):
        out.append(f"{pad}store({expr_str(s.target)}, {expr_str(s.value)})")
    elif isinstance(s, A.ExprStmt):
        out.append(f"{pad}{expr_str(s.expr)}")
    elif isinstance(s, A.CallStmt):
        out.append(f"{pad}{call_text(s)}")
    elif isinstance(s, A.ForLoop):
        axes = ", ".join(expr_str(a) for a in s.axes)
        names = ", ".join(v.id for v in s.vars)
        _open(f"for {names} in {s.spelling}({axes})", s.body, depth, out)
    elif isinstance(s, A.When):
        for i, br in enumerate(s.branches):
            head = f"when {expr_str(br.pred)} {{"
            out.append(f"{pad}{head}" if i == 0 else f"{pad}}} else {head}")
            _block(br.body, depth + 1, out)
        if s.otherwise is not None:
            out.append(f"{pad}}} otherwise {{")
            _block(s.otherwise, depth + 1, out)
        out.append(f"{pad}}}")
    elif isinstance(s, A.Combine):
        _open("combine", s.body, depth, out)
    elif isinstance(s, A.Sequential):
        _open("sequential", s.body, depth, out)
    elif isinstance(s, A.Pipe):
        _open("pipe", s.body, depth, out)
    elif isinstance(s, A.Process):
        reps = f" * {expr_str(s.replicas)}" if s.replicas is not None else ""
        _open(f"process {s.name.id}{reps}", s.body, depth, out)
    elif isinstance(s, A.Send):
        out.append(f"{pad}send({s.channel.id}, {expr_str(s.call)})")
    elif isinstance(s, A.Consume):
        _open(f"consume({s.channel.id}) as {s.var.id}", s.body, depth, out)
    elif isinstance(s, A.Record):
        out.append(f"{pad}record({s.event.id})")
    elif isinstance(s, A.Synchronize):
        out.append(f"{pad}synchronize({s.event.id})")
    elif isinstance(s, A.SlotSet):
        out.append(f"{pad}slot_set({expr_str(s.slot)}, {expr_str(s.value)})")
    elif isinstance(s, A.SlotLoad):
        out.append(f"{pad}slot_load({expr_str(s.slot)}, {expr_str(s.source)})")
    elif isinstance(s, A.Collective):
        out.append(f"{pad}{collective_str(s)}")
    else:  # every statement class is above
        raise InternalError("print", f"no source form for the statement {type(s).__name__}")


def _decl(d: A.Node, out: list[str]) -> None:
    if isinstance(d, A.ModuleDecl):
        out.append(f"module {d.name.id}")
    elif isinstance(d, A.Import):
        out.append(f"import {expr_str(A.StrLit(d.path))}")
    elif isinstance(d, A.SymDecl):
        default = f" = {expr_str(d.default)}" if d.default is not None else ""
        out.append(f"sym {d.name.id}{default}")
    elif isinstance(d, A.ConstDecl):
        out.append(f"const {d.name.id} = {expr_str(d.value)}")
    elif isinstance(d, A.MeshDecl):
        out.append("mesh " + ", ".join(f"{a.name.id} = {expr_str(a.size)}" for a in d.axes))
    elif isinstance(d, A.TensorDecl):
        loc = f", location = {d.location}" if d.location != "global" else ""
        out.append(f"{d.kind} {d.name.id}: {expr_str(d.type)}{layout_str(d.layout)}{loc}")
    elif isinstance(d, A.AxisDecl):
        out.append(f"axis {d.name.id} = {expr_str(d.axis)}")
    elif isinstance(d, A.ChannelDecl):
        elem = f": {expr_str(d.elem)}" if d.elem is not None else ""
        depth = f", depth = {expr_str(d.depth)}" if d.depth is not None else ""
        out.append(f"channel {d.name.id}{elem}{depth}")
    elif isinstance(d, A.EventDecl):
        out.append(f"event {d.name.id}")
    elif isinstance(d, A.KernelDecl):
        params = []
        for p in d.params:
            default = f" = {expr_str(p.default)}" if p.default is not None else ""
            params.append(f"{p.name.id}: {expr_str(p.type)}{default}")
        head = f"kernel {d.name.id}({', '.join(params)})"
        if d.body is not None:
            _open(head, d.body, 0, out)
        else:
            out.append(" ".join([head] + [f'extern {x.lang}' + "".join(f' include "{i.header}"' for i in x.includes)
                                  + f' """{x.code}"""' for x in d.externs]))
    elif isinstance(d, A.WorkloadDecl):
        params = ", ".join(p.name.id + (f": {p.kind}" if p.kind != "any" else "")
                           + (f"[{expr_str(p.extent)}]" if p.extent is not None else "")
                           for p in d.params)
        _open(f"workload {d.name.id}({params})", d.body, 0, out)
    elif isinstance(d, A.ScheduleDecl):
        out.append(f"schedule {d.name.id} = {d.workload.id}({_args(d.args, d.kwargs)})")
        for c in d.combinators:
            out.append(f"{_PAD}.{c.name.id}({_args(c.args, c.kwargs)})")
    else:  # every declaration class is above
        raise InternalError("print", f"no source form for the declaration {type(d).__name__}")


_GROUPS = (A.SymDecl, A.TensorDecl, A.AxisDecl, (A.ChannelDecl, A.EventDecl))


def format_source(f: A.SourceFile) -> str:
    """`.wsp` text for `f`: declarations in order, a blank line between groups."""
    out: list[str] = []
    prev = None
    for d in f.decls:
        group = next((g for g in _GROUPS if isinstance(d, g)), None)
        if out and (group is None or group is not prev):
            out.append("")
        _decl(d, out)
        prev = group
    return "\n".join(out) + "\n"
