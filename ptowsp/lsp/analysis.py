"""What the language server knows about one document: the checker's diagnostics, and the ASTs
and checked module it answers hover, definition, completion and symbols from.

Positions here are the checker's: 1-based lines and columns counted in characters (code points),
as `Span` has them; `server.py` converts to and from the client's units (UTF-16 by default).

`analyse` runs the check `wspc check` runs, through `driver.check_text_partial`: the same
diagnostics, and the environment kept whatever they are. A module that checks gives its
`ModuleEnv`: its files' ASTs, every kernel expression's inferred type, the tensors' symbolic
shapes and layouts. A module with errors still gives its environment as far as the check got:
the files that parse, the declarations that were right, the types of the kernels that checked,
so hover, definition, completion and symbols go on working around the error. A document that
does not parse has only its diagnostics (and completion the names of its last analysis that
parsed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Optional

from ..diagnostics import Diagnostic
from ..frontend import ast as A
from ..frontend.env import DECL_KINDS, ModuleEnv

# What completion offers besides the primitives and the module's names: the grammar's keywords
# (grammar/wsp.lark), and the names the language gives a meaning that no declaration makes:
# statements written as calls, the loop form, axis and parameter types (docs/language.md).
KEYWORDS = ("after", "and", "as", "axis", "channel", "combine", "const", "consume", "else", "event",
            "extern", "false", "for", "import", "in", "inout", "input", "kernel", "let", "mesh",
            "module", "not", "or", "otherwise", "output", "pipe", "process", "record", "schedule",
            "scratch", "send", "sequential", "sym", "synchronize", "true", "when", "workload")
BUILTIN_NAMES = ("store", "slot_set", "slot_load", "P", "Dense", "DenseDyn", "Ragged", "Sparse",
                 "In", "Out", "InOut", "Tile", "Scalar", "Constexpr")


@dataclass
class Analysis:
    """One document's analysis. `env`: the checked module, or with `diagnostics` as far as its
    check got (what the declarations that were right say); `files`: the files that parsed, the
    document first unless it does not parse, then its imports."""

    filename: str
    text: str
    env: ModuleEnv
    diagnostics: list[Diagnostic] = field(default_factory=list)

    @property
    def files(self) -> list[A.SourceFile]:
        return self.env.files

    @property
    def sources(self) -> dict[str, str]:
        return self.env.sources

    @property
    def main(self) -> Optional[A.SourceFile]:
        return self.files[0] if self.files and self.files[0].path == self.filename else None


def analyse(text: str, filename: str, proofs: Optional[dict] = None) -> Analysis:
    """Check `text` as the file `filename` (its imports read from disk, relative to it), as
    `wspc check` does. Raises only what the checker raises for a bug (`InternalError`): the
    server logs those. `proofs`: the checker's proofs, kept from one analysis to the next."""
    from ..driver import check_text_partial

    env, diagnostics = check_text_partial(text, filename, proofs)
    return Analysis(filename, text, env, diagnostics)


# ---------------------------------------------------------------------------------------------
# Finding the nodes under a position


def _covers(span: A.Span, line: int, col: int) -> bool:
    """`span` holds the position, or ends right at it (the cursor just after a name)."""
    if span.line <= 0:
        return False
    return (span.line, span.col) <= (line, col) <= (span.end_line, span.end_col)


def chain_at(f: A.SourceFile, line: int, col: int) -> list[A.Node]:
    """The nodes of `f` covering the position, from its declaration to the innermost node."""
    for d in f.decls:
        if _covers(d.span, line, col):
            return [n for n in d.walk() if _covers(n.span, line, col)]
    return []


def _decl_at_line(f: A.SourceFile, line: int) -> Optional[A.Node]:
    """The declaration whose lines hold `line` (for completion inside text that may not parse)."""
    for d in f.decls:
        if d.span.line <= line <= d.span.end_line:
            return d
    return None


def declarations(files: list[A.SourceFile]) -> Iterator[A.Node]:
    """Every declaration that names something, in every file (a mesh's axes one by one)."""
    from ..frontend.mesh import declared

    for f in files:
        for d in declared(f.decls):
            if isinstance(d, tuple(DECL_KINDS)):
                yield d


def global_decl(a: Analysis, name: str) -> Optional[A.Node]:
    if name in a.env.names:
        return a.env.names[name]
    # a name declared twice, or in a file whose check stopped early: its first declaration
    return next((d for d in declarations(a.files) if d.name.id == name), None)


def local_binding(decl: A.Node, chain: list[A.Node], name: str) -> Optional[A.Name]:
    """The `Name` that binds `name` inside a kernel or workload: a loop variable of an enclosing
    `for`, the item of an enclosing `consume`, a parameter, or (the first) `let`, task handle
    or `process` (`workers.id`)."""
    for n in reversed(chain):
        if isinstance(n, A.ForLoop):
            for v in n.vars:
                if v.id == name:
                    return v
        if isinstance(n, A.Consume) and n.var.id == name:
            return n.var
    for p in getattr(decl, "params", ()) if isinstance(decl, (A.KernelDecl, A.WorkloadDecl)) else ():
        if p.name.id == name:
            return p.name
    if isinstance(decl, (A.KernelDecl, A.WorkloadDecl)):
        for n in decl.walk():
            if isinstance(n, A.Let) and n.name.id == name:
                return n.name
            if isinstance(n, A.LetMany):
                for v in n.names:
                    if v.id == name:
                        return v
            if isinstance(n, (A.CallStmt, A.Process)):
                bound = n.label if isinstance(n, A.CallStmt) else n.name
                if bound is not None and bound.id == name:
                    return bound
    return None


# ---------------------------------------------------------------------------------------------
# Hover


def source_of(a: Analysis, span: A.Span) -> str:
    """The source text a span covers."""
    text = a.sources.get(span.file)
    if text is None or span.line <= 0:
        return ""
    lines = text.split("\n")
    if span.line == span.end_line:
        return lines[span.line - 1][span.col - 1:span.end_col - 1]
    parts = [lines[span.line - 1][span.col - 1:]]
    parts += lines[span.line:span.end_line - 1]
    parts.append(lines[span.end_line - 1][:span.end_col - 1] if span.end_line <= len(lines) else "")
    return "\n".join(parts)


def _type_text(t) -> str:
    """A kernel value's type as hover shows it: `[16, 128] f32 tile`, `f32 scalar`."""
    if t.is_tile:
        return f"{t.shape_str()} {t.dtype} tile"
    return f"{t.dtype} scalar" + (" (literal)" if t.literal else "")


def decl_hover(a: Analysis, d: A.Node) -> str:
    """What a declaration says, as hover shows it: a code block of WSP and a line of facts."""
    kind = DECL_KINDS.get(type(d), "")
    if isinstance(d, A.KernelDecl):
        params = ", ".join(source_of(a, p.span) for p in d.params)
        ext = "".join(f" extern {e.lang}" for e in d.externs) if d.body is None else ""
        code = f"kernel {d.name.id}({params}){ext}"
        return _block(code)
    if isinstance(d, A.WorkloadDecl):
        params = ", ".join(source_of(a, p.span) for p in d.params)
        return _block(f"workload {d.name.id}({params})")
    if isinstance(d, A.TensorDecl):
        code = source_of(a, d.span)
        info = a.env.tensors.get(d.name.id)
        if info is not None and info.sound:
            from .. import sym

            shape = "[" + ", ".join(sym.to_str(x) for x in info.dims) + "]"
            layout = info.layout.text() if info.layout is not None else "replicated"
            facts = f"{info.kind} tensor: dtype `{info.dtype}`, shape `{shape}`, layout `{layout}`"
        else:
            dims = ", ".join(source_of(a, x.span) for x in d.type.dims)
            layout = source_of(a, d.layout.span) if d.layout is not None else "replicated"
            facts = (f"{d.kind} tensor: dtype `{d.type.dtype}`, shape `[{dims}]`, "
                     f"layout `{layout}`")
        if d.location != "global":
            facts += f", location `{d.location}`"
        return _block(code) + "\n\n" + facts
    code = source_of(a, d.span)
    lines = code.split("\n")
    if len(lines) > 12:  # a long schedule chain: its head
        code = "\n".join(lines[:12] + ["    ..."])
    return _block(code) + (f"\n\n{kind}" if kind else "")


def _block(code: str) -> str:
    return f"```wsp\n{code}\n```"


def hover(a: Analysis, line: int, col: int) -> Optional[tuple[str, A.Span]]:
    """The hover text at a position of the main file and the span it describes, or None."""
    f = a.main
    if f is None:
        return None
    chain = chain_at(f, line, col)
    if not chain:
        return None
    decl = chain[0]
    types = a.env.kernel_types.get(decl.name.id) if isinstance(decl, A.KernelDecl) else None
    for i in range(len(chain) - 1, -1, -1):
        node = chain[i]
        if types is not None:
            t = types.exprs.get(id(node))
            if t is not None and not t.is_error:
                return _block(f"{source_of(a, node.span)}: {_type_text(t)}"), node.span
        if not isinstance(node, A.Name):
            continue
        parent = chain[i - 1] if i else None
        if isinstance(parent, A.Combinator) and parent.name is node:
            args = ", ".join(source_of(a, x.span) for x in (*parent.args, *parent.kwargs))
            return _block(f".{node.id}({args})") + "\n\na schedule combinator (docs/schedules.md)", \
                node.span
        if isinstance(decl, A.ScheduleDecl) and isinstance(parent, A.Call) and parent.func is node:
            kind = _POLICY_KINDS.get(node.id)
            if kind is not None:
                return _block(source_of(a, parent.span)) + f"\n\n{kind} (docs/schedules.md)", node.span
        if isinstance(parent, A.Call) and parent.func is node:
            text = _call_hover(a, parent, types)
            if text is not None:
                return text, node.span
            continue
        if node is getattr(decl, "name", None) or isinstance(decl, A.MeshDecl):
            target = decl if node is getattr(decl, "name", None) else global_decl(a, node.id)
            if target is not None:
                return decl_hover(a, target), node.span
        text = _local_hover(a, decl, chain, node, types)
        if text is not None:
            return text, node.span
        target = global_decl(a, node.id)
        if target is not None:
            return decl_hover(a, target), node.span
    return None


def _policy_kinds() -> dict[str, str]:
    from ..frontend.workloads.schedules import DISPATCH_POLICIES, TIMING_POLICIES

    kinds = {p: "a dispatch policy" for p in DISPATCH_POLICIES}
    kinds.update({p: "a timing policy" for p in TIMING_POLICIES})
    return kinds


_POLICY_KINDS = _policy_kinds()


def _call_hover(a: Analysis, call: A.Call, types) -> Optional[str]:
    """On the name of a call: a primitive's signature and summary, with the type of this call
    when the kernel checked; a kernel's or workload's declaration."""
    from ..primitives import PRIMITIVES

    p = PRIMITIVES.get(call.func.id)
    if p is not None:
        text = _block(p.signature) + f"\n\n{p.summary}"
        t = types.exprs.get(id(call)) if types is not None else None
        if t is not None and not t.is_error:
            text += f"\n\n`{source_of(a, call.span)}`: {_type_text(t)}"
        return text
    target = global_decl(a, call.func.id)
    return None if target is None else decl_hover(a, target)


def _local_hover(a: Analysis, decl, chain, node: A.Name, types) -> Optional[str]:
    binder = local_binding(decl, chain, node.id)
    if binder is None:
        return None
    if isinstance(decl, A.KernelDecl):
        for p in decl.params:
            if p.name is binder:
                return _block(source_of(a, p.span)) + "\n\nparameter of kernel " + f"`{decl.name.id}`"
        if types is not None:
            for name, t in types.lets:
                if name == node.id:
                    return _block(f"let {name}: {_type_text(t)}")
        return _block(f"let {node.id}")
    for p in getattr(decl, "params", ()):
        if p.name is binder:
            return _block(source_of(a, p.span)) + f"\n\naxis parameter of workload `{decl.name.id}`"
    for n in chain:
        if isinstance(n, A.ForLoop) and binder in n.vars:
            axes = ", ".join(source_of(a, x.span) for x in n.axes)
            return _block(f"for {', '.join(v.id for v in n.vars)} in {n.spelling}({axes})") \
                + "\n\nloop variable"
        if isinstance(n, A.Consume) and binder is n.var:
            return _block(f"consume({n.channel.id}) as {n.var.id}") + "\n\nan item of the channel"
    for n in decl.walk():
        if isinstance(n, A.Process) and n.name is binder:
            replicas = f" * {source_of(a, n.replicas.span)}" if n.replicas is not None else ""
            return _block(f"process {n.name.id}{replicas}")
        if isinstance(n, A.CallStmt) and n.label is binder:
            return _block(f"let {binder.id} = {n.callee.id}[...](...)") + "\n\na task handle"
    return _block(f"let {node.id}")


# ---------------------------------------------------------------------------------------------
# Definition


def definition(a: Analysis, line: int, col: int) -> Optional[A.Span]:
    """Where the name at a position of the main file is declared (a span of `a.sources`'s
    files), or None. On an `import`, the imported file's start."""
    f = a.main
    if f is None:
        return None
    chain = chain_at(f, line, col)
    if not chain:
        return None
    decl = chain[0]
    if isinstance(decl, A.Import):
        from ..frontend.checker import import_target

        target = import_target(f.path, decl.path)
        return None if target is None else A.Span(str(target), 1, 1, 1, 1)
    name = next((n for n in reversed(chain) if isinstance(n, A.Name)), None)
    if name is None:
        return None
    if isinstance(decl, A.ScheduleDecl) and any(isinstance(n, A.Combinator) and n.name is name
                                                for n in chain):
        return None  # `.dispatch`, `.split`: the language's, declared nowhere
    binder = local_binding(decl, chain, name.id) if not isinstance(decl, A.ScheduleDecl) else None
    if binder is not None:
        return binder.span
    target = global_decl(a, name.id)
    return None if target is None else target.name.span


# ---------------------------------------------------------------------------------------------
# Completion


@dataclass(frozen=True)
class Item:
    label: str
    kind: str  # primitive | combinator | keyword | local | one of env.DECL_KINDS's kinds
    detail: str = ""


def completions(a: Analysis, line: int, col: int, after_dot: Optional[str]) -> list[Item]:
    """What may be written at a position: after `.` in a schedule the combinators (after `P.`
    the loop forms), else the primitives, the module's names, the names bound in the enclosing
    kernel or workload, and the keywords. `after_dot`: the word before a `.` just typed."""
    from ..frontend.workloads.schedules import COMBINATORS
    from ..primitives import PRIMITIVES

    if after_dot == "P":
        return [Item(x, "keyword", f"P.{x}(...)") for x in ("grid", "seq", "sel")]
    if after_dot is not None:
        return [Item(c, "combinator", f".{c}(...)") for c in COMBINATORS]
    items = [Item(p.name, "primitive", f"{p.signature}: {p.summary}") for p in PRIMITIVES.values()]
    seen = {i.label for i in items}
    for d in declarations(a.files):
        if d.name.id not in seen:
            seen.add(d.name.id)
            items.append(Item(d.name.id, DECL_KINDS[type(d)], source_of(a, d.span).split("\n")[0]))
    f = a.main or (a.files[0] if a.files else None)
    decl = _decl_at_line(f, line) if f is not None else None
    if isinstance(decl, (A.KernelDecl, A.WorkloadDecl)):
        for n in decl.walk():
            names = ()
            if isinstance(n, (A.KernelParam, A.WorkloadParam, A.Let)):
                names = (n.name,)
            elif isinstance(n, (A.LetMany, A.ForLoop)):
                names = n.names if isinstance(n, A.LetMany) else n.vars
            for v in names:
                if v.id not in seen and v.id != "_":
                    seen.add(v.id)
                    items.append(Item(v.id, "local", f"in `{decl.name.id}`"))
    from ..dtypes import TABLE

    items += [Item(k, "keyword") for k in (*KEYWORDS, *BUILTIN_NAMES, *TABLE) if k not in seen]
    return items


# ---------------------------------------------------------------------------------------------
# Symbols


def symbols(a: Analysis) -> list[tuple[A.Node, str]]:
    """The main file's declarations that name something, each with its kind."""
    f = a.main
    if f is None:
        return []
    return [(d, DECL_KINDS[type(d)]) for d in declarations([f])]
