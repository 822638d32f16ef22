"""Module assembly for the Python embedding: a traced `Workload` becomes one `SourceFile`.

Every module-level object its statements name through placeholders (`@<id>`: tensors, axes,
kernels, channels, events, symbols) gets a declaration and its final name (from the Python
variable it was stored to, else a variable naming it where the workload was built; clashes and
`.wsp` keywords get a suffix). A tensor some task writes is `inout` (the seeds' tensors are
updated in place), every other one `input`; a channel's element type is the tile type of the
parameter it is passed to in a `send`. The schedule `main` carries the workload's combinators.
`build_module` runs the result through the driver's checker, exactly as a parsed file.
"""

from __future__ import annotations

import dataclasses

from ..diagnostics import InternalError, WspError
from ..dtypes import DTYPES
from ..frontend import ast as A
from ..frontend.builder import KEYWORDS
from .axes import Axis
from .collectives import axis_of_key
from .errors import TypeCheckError, from_wsp, user_error
from .kernel import KernelRef
from .layouts import TensorShard
from .names import rewrite, substitute, wsp_ident
from .source import source_text
from .trace import TaskHandle, Trace, key_of
from .values import Channel, Event, Symbol, Tensor, dtype_name


@dataclasses.dataclass
class Assembled:
    """A workload as one source file, with the Python objects behind its declarations."""

    source: A.SourceFile
    sources: dict
    tensors: dict  # name -> Tensor
    kinds: dict  # name -> input / inout / scratch
    syms: dict  # name -> Symbol
    events: dict = dataclasses.field(default_factory=dict)  # name -> Event
    recorded: frozenset = frozenset()  # names of the events some `record` marks
    axes: dict = dataclasses.field(default_factory=dict)  # name -> Axis

    def arrays(self) -> dict:
        """The caller's arrays by tensor name (a scratch tensor has none: the program's own)."""
        return {n: t.data for n, t in self.tensors.items() if not t.scratch}


def _local_names(stmts) -> set:
    out: set = set()
    for s in stmts:
        for n in s.walk():
            if isinstance(n, A.ForLoop):
                out.update(v.id for v in n.vars)
            elif isinstance(n, A.Consume):
                out.add(n.var.id)
            elif isinstance(n, A.Process):
                out.add(n.name.id)
    return out


_RESERVED = frozenset({"P", "tl", "pto", "Dense", "DenseDyn", "Ragged", "Sparse", "In", "Out",
                       "InOut", "Tile", "Scalar", "Constexpr", "main", "_"}) | KEYWORDS | set(DTYPES)


def _label_handles(stmts: tuple, refs: dict) -> tuple:
    """Each kernel call an `after=` names, bound to its handle (`let t = k[i](...)`): the
    handle's placeholder, named below as every object is (trace.py, `TaskHandle`)."""
    labels = {id(h.stmt): key for key, h in refs.items() if isinstance(h, TaskHandle)}
    if not labels:
        return stmts

    def fn(n):
        key = labels.get(id(n))
        if key is None or not isinstance(n, A.CallStmt):
            return None
        return dataclasses.replace(n, label=A.Name(key, span=n.span))

    return rewrite(stmts, fn)


def _mesh_resolver(w):
    """`resolve(axis, span)`: the name of the mesh axis a layout or collective wrote as a
    position or a name (None: the mesh's only axis), an error at `span` if there is none."""
    axes = [name for name, _ in w.mesh[0]] if w.mesh is not None else []

    def resolve(ref, span: A.Span) -> str:
        if not axes:
            raise user_error(span, f"mesh axis {'`' + str(ref) + '`' if ref is not None else ''}"
                             f"{' ' if ref is not None else ''}is named here, but the workload "
                             "declares no mesh", "declare its devices: `.spatial_map(grid=(4,))`"
                             " or `.spatial_map(grid={\"tp\": 4})`", cls=TypeCheckError)
        if ref is None:
            if len(axes) == 1:
                return axes[0]
            raise user_error(span, f"which mesh axis? The mesh has {len(axes)} "
                             f"({', '.join(axes)}) and the source's layout names none for this",
                             f"write `mesh_axis={axes[-1]!r}` (or its position)",
                             cls=TypeCheckError)
        if isinstance(ref, int):
            if ref < len(axes):
                return axes[ref]
            raise user_error(span, f"mesh axis {ref} does not exist: the mesh has {len(axes)} "
                             f"{'axes' if len(axes) > 1 else 'axis'} ({', '.join(axes)})",
                             f"positions go from 0 to {len(axes) - 1}", cls=TypeCheckError)
        if ref in axes:
            return ref
        raise user_error(span, f"`{ref}` is not an axis of the mesh ({', '.join(axes)})",
                         "name an axis given to `spatial_map(grid={...})`, or its position",
                         cls=TypeCheckError)

    return resolve


def _mesh_names(stmts: tuple, resolve) -> tuple:
    """The statements with each collective's mesh axis placeholder (`@mesh:...`) resolved."""
    names: dict = {}
    for s in stmts:
        for n in s.walk():
            if isinstance(n, A.Collective) and n.over is not None and n.over.id not in names:
                names[n.over.id] = resolve(axis_of_key(n.over.id), n.over.span)
    return substitute(stmts, names) if names else stmts


def _layout_node(tensor: Tensor, resolve, span: A.Span):
    """The `.wsp` layout of `tensor` (None when it is replicated: what no layout means)."""
    lay = tensor.layout_with(resolve)
    if lay.is_replicated():
        return None
    dims = tuple(A.LayoutDim(None if not isinstance(d, TensorShard) else
                             A.Name(d.mesh_axis, span=span), span=span) for d in lay.dist)
    return A.Layout(dims, tuple(A.Name(a, span=span) for a in lay.partial), span=span)


def _mesh_decl(w):
    axes, span = w.mesh
    return A.MeshDecl(tuple(A.MeshAxis(A.Name(n, span=span), A.IntLit(int(k), span=span),
                                       span=span) for n, k in axes), span=span)


def assemble(w) -> Assembled:
    t = Trace()
    t.refs = dict(w.refs)
    resolve = _mesh_resolver(w)
    stmts = _mesh_names(_label_handles(tuple(w.stmts), t.refs), resolve)
    # every object reachable from the statements (axes name tensors and other axes)
    axis_decls: dict[str, A.Node] = {}
    kernel_decls: dict[str, A.KernelDecl] = {}
    done: set = set()
    while True:
        todo = [k for k in t.refs if k not in done]
        if not todo:
            break
        for key in todo:
            done.add(key)
            obj = t.refs[key]
            if isinstance(obj, Axis):
                axis_decls[key] = obj.decl(t)
            elif isinstance(obj, KernelRef):
                kernel_decls[key] = obj.decl()
    # placeholders in first-use order
    order: list[str] = []
    seen: set = set()

    def note(nodes) -> None:
        for top in nodes:
            for n in top.walk():
                if isinstance(n, A.Name) and n.id.startswith("@") and n.id not in seen:
                    seen.add(n.id)
                    order.append(n.id)

    note(stmts)
    note(axis_decls.values())
    for key in t.refs:
        if key not in seen:
            seen.add(key)
            order.append(key)
    # final names
    taken = set(_RESERVED) | _local_names(stmts) | {n for n, _ in (w.mesh or ((), None))[0]}
    names: dict[str, str] = {}
    for key in order:
        obj = t.refs[key]
        if isinstance(obj, Symbol):
            if obj.name in taken and obj.name not in names.values():
                raise user_error(obj._span, f"symbol `{obj.name}` has the name of a loop variable "
                                 "or of a `.wsp` keyword", "rename the symbol")
            names[key] = obj.name
            taken.add(obj.name)
    for key in order:
        if key in names:
            continue
        obj = t.refs[key]
        base = wsp_ident(getattr(obj, "_wsp_name", None) or w._hints.get(id(obj))
                         or getattr(obj, "_default_name", "x"))
        name, n = base, 2
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        names[key] = name
    wname = w.name
    n = 2
    while wname in taken:
        wname, n = f"{w.name}_{n}", n + 1
    stmts = substitute(stmts, names)
    # tensor kinds: a tensor some task writes is inout (updated in place), else input; a
    # scratch tensor is the program's own (`Tensor(..., scratch=True)`)
    written: set = set()
    for s in stmts:
        for node in s.walk():
            if isinstance(node, A.CallStmt):
                _writes(node, kernel_decls, names, t.refs, written)
            elif isinstance(node, A.Collective):
                written.add(node.into.id)
    decls: list = []
    file = w._decl_span.file if w._decl_span.line else w.span.file
    decls.append(A.ModuleDecl(A.Name(w.module_name or w.name, span=w._decl_span), span=w._decl_span))
    if w.mesh is not None:
        decls.append(_mesh_decl(w))
    tensors, kinds, syms, events, axes = {}, {}, {}, {}, {}
    by_kind: dict[str, list] = {"sym": [], "tensor": [], "axis": [], "channel": [], "kernel": []}
    elems = _channel_elems(stmts, kernel_decls, names, t.refs)
    arrays: dict = {}  # id of a tensor (or of the tensor a `with_layout` copies): its user
    for key in order:
        obj, name = t.refs[key], names[key]
        if isinstance(obj, Symbol):
            d = None if obj.default is None else A.IntLit(int(obj.default), span=obj._span)
            by_kind["sym"].append(A.SymDecl(A.Name(name, span=obj._span), d, span=obj._span))
            syms[name] = obj
        elif isinstance(obj, Tensor):
            root = obj._alias_of or obj  # `with_layout` results share their tensor's array
            other = arrays.setdefault(id(root), obj)
            if other is not obj:
                later, first = (obj, other) if obj._span.line >= other._span.line else (other, obj)
                raise user_error(later._span, f"`{names[key_of(later)]}` and "
                                 f"`{names[key_of(first)]}` are one array (one is "
                                 "the other's `with_layout`), and the workload uses both",
                                 "use one of them in the workload: `with_layout` renames the "
                                 "tensor, it does not copy it", cls=TypeCheckError)
            kind = "scratch" if obj.scratch else "inout" if name in written else "input"
            sp = obj._span
            ttype = A.TensorType(obj.dtype.value, tuple(A.IntLit(int(d), span=sp) for d in obj.shape),
                                 span=sp)
            lay_span = obj._derive[-1] if obj._derive is not None else sp
            by_kind["tensor"].append(A.TensorDecl(kind, A.Name(name, span=sp), ttype,
                                                  getattr(obj, "location", "global"),
                                                  _layout_node(obj, resolve, lay_span), span=sp))
            tensors[name], kinds[name] = obj, kind
        elif isinstance(obj, Axis):
            d = substitute(axis_decls[key], names)
            by_kind["axis"].append(A.AxisDecl(A.Name(name, span=obj._span), d, span=obj._span))
            axes[name] = obj
        elif isinstance(obj, Channel):
            sp = obj._span
            elem = elems.get(name)
            if obj.elem is not None:
                elem = _tile_type(obj.elem, sp)
            d = obj.depth if obj.depth is not None else getattr(obj, "_pipe_depth", (None,))[0]
            depth = None if d is None else A.IntLit(int(d), span=sp)  # P.pipe(depth=N)'s
            by_kind["channel"].append(A.ChannelDecl(A.Name(name, span=sp), elem, depth, span=sp))
        elif isinstance(obj, Event):
            events[name] = obj
            by_kind["channel"].append(A.EventDecl(A.Name(name, span=obj._span), span=obj._span))
        elif isinstance(obj, KernelRef):
            d = kernel_decls[key]
            by_kind["kernel"].append(dataclasses.replace(d, name=A.Name(name, span=d.name.span)))
        elif isinstance(obj, TaskHandle):
            pass  # a task handle is bound by its call (`let t = k[i](...)`), not declared
        else:  # pragma: no cover - only the classes above are referenced
            raise InternalError("embed", f"a placeholder stands for {obj!r}, which has no "
                                "declaration")
    for kind in ("sym", "tensor", "axis", "channel", "kernel"):
        decls.extend(by_kind[kind])
    decls.append(A.WorkloadDecl(A.Name(wname, span=w._decl_span), (), stmts, span=w._decl_span))
    sched_span = w.combinators[0].span if w.combinators else w.span
    decls.append(A.ScheduleDecl(A.Name("main", span=sched_span), A.Name(wname, span=w.span), (),
                                w.combinators, span=sched_span))
    sf = A.SourceFile(file, tuple(decls), source_text(file) or "", span=w._decl_span)
    sources: dict = {}
    for d in decls:
        for node in d.walk():
            f = node.span.file
            if f not in sources and node.span.line:
                text = source_text(f)
                if text is not None:
                    sources[f] = text
    recorded = frozenset(n.event.id for s in stmts for n in s.walk() if isinstance(n, A.Record))
    return Assembled(sf, sources, tensors, kinds, syms, events, recorded, axes)


def _tile_type(spec, span: A.Span) -> A.TileType:
    return A.TileType(A.IntLit(int(spec.rows), span=span), A.IntLit(int(spec.cols), span=span),
                      dtype_name(spec.dtype) or "f32", span=span)


def _param_modes(kdecl: A.KernelDecl) -> dict:
    out = {}
    for p in kdecl.params:
        if isinstance(p.type, A.TileParamType):
            out[p.name.id] = (p.type.mode, p.type.tile)
    return out


def _kernel_of(call: A.CallStmt, kernel_decls: dict, names: dict):
    inv = {v: k for k, v in names.items()}
    key = inv.get(call.callee.id)
    return kernel_decls.get(key) if key is not None else None


def _writes(call: A.CallStmt, kernel_decls: dict, names: dict, refs: dict, out: set) -> None:
    k = _kernel_of(call, kernel_decls, names)
    if k is None:
        return
    modes = _param_modes(k)
    for kw in call.kwargs:
        mode = modes.get(kw.name, (None,))[0]
        if mode not in ("Out", "InOut"):
            continue
        base = kw.value.value if isinstance(kw.value, A.Index) else kw.value
        if isinstance(base, A.Name):
            out.add(base.id)


def _channel_elems(stmts, kernel_decls: dict, names: dict, refs: dict) -> dict:
    """{channel name: the tile type of the parameter it is passed to in a `send`}."""
    inv = {v: k for k, v in names.items()}
    out: dict = {}
    for s in stmts:
        for node in s.walk():
            if not isinstance(node, A.Send):
                continue
            k = _kernel_of(node.call, kernel_decls, names)
            if k is None:
                continue
            modes = _param_modes(k)
            for kw in node.call.kwargs:
                if isinstance(kw.value, A.Name) and isinstance(refs.get(inv.get(kw.value.id)), Channel):
                    m = modes.get(kw.name)
                    if m is not None:
                        out.setdefault(kw.value.id, m[1])
    return out


def build_module(w):
    """The checked `runtime.Module` of `w` and its assembly (the seeds' errors on failure)."""
    from ..api import Module
    from ..driver import check_sources

    asm = assemble(w)
    try:
        env = check_sources([asm.source], asm.sources)
    except WspError as err:
        raise from_wsp(err) from None
    return Module(env), asm


__all__ = ["Assembled", "assemble", "build_module"]
