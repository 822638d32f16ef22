"""The mesh and tensor layouts of a module (docs/distributed.md): `mesh tp = 4` and
`input W: f32[D, F] @ [R, S(tp)] partial(dp)`, checked into `env.mesh` and each
`TensorInfo.layout`.

The rules, in the order the page decides them: at most one `mesh` per module; each axis size a
positive compile-time integer or a sym (a run-time check that it is at least 1); a layout needs
a mesh, has one entry per dimension, names mesh axes, shards a dimension over at most one axis
and an axis over at most one dimension, is not both sharded and partial over one axis, and an
`output` is never partial; a sharded dimension is a multiple of its axis's size, proved here
when both are constants, else a run-time check at the declaration (like other dimension checks).
"""

from __future__ import annotations

from typing import Callable, Optional

from .. import sym
from ..diagnostics import Diagnostics, Note, did_you_mean
from ..limits import int_text
from . import ast as A
from .env import LayoutInfo, MeshAxisInfo, MeshInfo, ModuleEnv, RuntimeCheck
from .signatures import NotSymbolic, to_sym

NO_MESH_HELP = "declare a mesh first: `mesh tp = 4`"


def declared(decls) -> list:
    """The declarations of a file that name something, a mesh's axes one by one."""
    out = []
    for d in decls:
        if isinstance(d, A.MeshDecl):
            out.extend(d.axes)
        else:
            out.append(d)
    return out


def check_mesh(env: ModuleEnv, diags: Diagnostics,
               resolve: Callable[[A.Name], sym.Expr]) -> None:
    """`env.mesh` from the module's `mesh` declaration (at most one across its files)."""
    meshes = [d for f in env.files for d in f.decls if isinstance(d, A.MeshDecl)]
    if not meshes:
        return
    first = meshes[0]
    for d in meshes[1:]:
        diags.error(d.span, "mesh-twice", "a module has at most one `mesh`",
                    "declare every axis in one line: `mesh dp = 2, tp = 4`",
                    notes=[Note(first.span, "the mesh is declared here")])
    axes: list[MeshAxisInfo] = []
    for ax in first.axes:
        if env.names.get(ax.name.id) is not ax:
            continue  # a duplicate name, reported by the namespace check
        size = _axis_size(env, diags, ax, resolve)
        if size is not None:
            axes.append(MeshAxisInfo(ax.name.id, size, ax))
    env.mesh = MeshInfo(tuple(axes), first)


def _axis_size(env: ModuleEnv, diags: Diagnostics, ax: A.MeshAxis,
               resolve: Callable[[A.Name], sym.Expr]) -> Optional[sym.Expr]:
    try:
        size = to_sym(ax.size, resolve, diags, "a mesh axis size")
    except NotSymbolic:
        return None
    v = sym.const_value(size)
    if v is not None:
        if v < 1:
            diags.error(ax.size.span, "mesh-size", f"mesh axis `{ax.name.id}` has {int_text(v)} "
                        "devices; an axis has at least 1")
            return None
        return size
    if not (isinstance(ax.size, A.Name) and env.kind_of(ax.size.id) == "sym"):
        # decision: a run-time size is one sym, so that `--mesh tp=4` binds exactly that sym
        diags.error(ax.size.span, "mesh-size", "a mesh axis size is a compile-time integer or "
                    "one sym", f"declare `sym {ax.name.id.upper()}` and write "
                    f"`{ax.name.id} = {ax.name.id.upper()}`")
        return None
    env.checks.append(RuntimeCheck(sym.Check(size, ">=", sym.const(1),
                                             f"mesh axis `{ax.name.id}` needs at least 1 device"),
                                   ax.size.span))
    return size


def dim_words(d: int, rank: int) -> str:
    """What the entries of dimension `d` of a tensor of `rank` dimensions are called."""
    if rank >= 2 and d == rank - 1:
        return "columns"
    if rank >= 2 and d == rank - 2:
        return "rows"
    return f"entries along dimension {d}" if rank > 1 else "elements"


def check_layout(env: ModuleEnv, diags: Diagnostics, d: A.TensorDecl,
                 dims: tuple[sym.Expr, ...]) -> Optional[LayoutInfo]:
    """The layout of tensor `d` (whose dimensions are `dims`), or None after an error."""
    lay = d.layout
    if lay is None:
        return None
    name = d.name.id
    layout = _layout(env, diags, d, dims, lay)
    if layout is None:
        env.bad_layouts.add(name)  # reported: its uses are not checked against a guess
    return layout


def _layout(env: ModuleEnv, diags: Diagnostics, d: A.TensorDecl, dims: tuple[sym.Expr, ...],
            lay: A.Layout) -> Optional[LayoutInfo]:
    name = d.name.id
    if env.mesh is None:
        diags.error(lay.span, "no-mesh", f"`{name}` has a layout, but the module has no mesh",
                    NO_MESH_HELP)
        return None
    ok = True
    if len(lay.dims) != len(dims):
        diags.error(lay.span, "layout-rank",
                    f"`{name}` has {len(dims)} dimension{'s' if len(dims) != 1 else ''}, but its "
                    f"layout gives {len(lay.dims)} entr{'ies' if len(lay.dims) != 1 else 'y'}",
                    "one entry per dimension: `R` or `S(axis)`")
        ok = False
    seen: dict[str, A.Node] = {}
    entries: list[Optional[str]] = []
    for i, e in enumerate(lay.dims):
        if e.axis is None:
            entries.append(None)
            continue
        axis = e.axis.id
        if not mesh_axis(env, diags, e.axis):
            ok = False
            entries.append(None)
            continue
        if axis in seen:
            # decision (docs/distributed.md): one mesh axis shards at most one dimension
            diags.error(e.span, "layout-axis-twice", f"`{name}` is sharded over `{axis}` twice",
                        "one mesh axis shards at most one dimension of a tensor",
                        notes=[Note(seen[axis].span, f"`{axis}` first shards here")])
            ok = False
        seen[axis] = e
        entries.append(axis)
        if i < len(dims):
            ok &= _divisible(env, diags, name, dims, i, axis, e)
    partial: list[str] = []
    for p in lay.partial:
        if not mesh_axis(env, diags, p):
            ok = False
            continue
        if p.id in partial:
            diags.error(p.span, "layout-axis-twice", f"`{p.id}` appears twice in `partial`")
            ok = False
            continue
        if p.id in seen:
            # decision: an addend per device of a shard has no collective that makes it; a
            # tensor is sharded or partial over an axis, not both
            diags.error(p.span, "partial-sharded",
                        f"`{name}` is both sharded and partial over `{p.id}`",
                        "a tensor holds shards or addends along an axis, not both",
                        notes=[Note(seen[p.id].span, f"`{p.id}` shards here")])
            ok = False
        partial.append(p.id)
    if partial and d.kind == "output":
        diags.error(lay.partial[0].span, "partial-output",
                    f"output `{name}` cannot be partial: the caller gets values, not addends",
                    f"make a scratch tensor partial and `allreduce` it into `{name}`")
        ok = False
    return LayoutInfo(tuple(entries), tuple(partial)) if ok else None


def mesh_axis(env: ModuleEnv, diags: Diagnostics, n: A.Name) -> bool:
    """`n` names an axis of the mesh (reported otherwise)."""
    if env.mesh is not None and env.mesh.axis(n.id) is not None:
        return True
    if env.mesh is not None and env.kind_of(n.id) == "mesh axis":
        return False  # its size was wrong: reported
    kind = env.kind_of(n.id)
    axes = [a.name for a in env.mesh.axes] if env.mesh is not None else []
    if kind is None:
        diags.error(n.span, "unknown-mesh-axis", f"`{n.id}` is not an axis of the mesh",
                    did_you_mean(n.id, axes) or (f"the mesh's axes: {', '.join(axes)}" if axes
                                                 else NO_MESH_HELP))
    else:
        diags.error(n.span, "unknown-mesh-axis", f"`{n.id}` is a {kind}, not a mesh axis",
                    f"the mesh's axes: {', '.join(axes)}" if axes else NO_MESH_HELP)
    return False


def _divisible(env: ModuleEnv, diags: Diagnostics, name: str, dims: tuple[sym.Expr, ...],
               i: int, axis: str, at: A.Node) -> bool:
    """Dimension `i` of `name`, sharded over `axis`, is a multiple of the axis's size."""
    info = env.mesh.axis(axis) if env.mesh is not None else None
    if info is None:
        return False
    n, p = dims[i], info.size
    nv, pv = sym.const_value(n), sym.const_value(p)
    words = dim_words(i, len(dims))
    if nv is not None and pv is not None:
        if nv % pv != 0:
            # decision (docs/distributed.md): shards are even, as HCCL moves equal counts
            diags.error(at.span, "uneven-shards",
                        f"`{name}` shards its {int_text(nv)} {words} over {axis} = {int_text(pv)}: "
                        f"{int_text(nv)} is not a multiple of {int_text(pv)}",
                        "shards are even: choose a size the axis divides, or replicate it (`R`)")
            return False
        return True
    if sym.prove_eq(sym.mod(n, p), 0) is True:
        return True  # an axis of one device, or a dimension written as a multiple of it
    env.checks.append(RuntimeCheck(
        sym.Check(sym.mod(n, p), "==", sym.const(0),
                  shard_reason(name, len(dims), i, axis)), at.span))
    return True


def shard_reason(name: str, rank: int, d: int, axis: str) -> str:
    """The run-time check that dimension `d` of `name` divides evenly over `axis`."""
    return (f"`{name}` shards its {dim_words(d, rank)} over {axis}: their number must be a "
            f"multiple of {axis}'s size")


def check_replicated_index(env: ModuleEnv, diags: Diagnostics, t, at: A.Node) -> None:
    """Tensor `t`, whose elements decide the task space (a scalar expression, a ragged or sparse
    axis), is replicated: every device enumerates the same tasks (docs/distributed.md, "Where a
    task runs")."""
    lay = t.layout
    if lay is None or t.name in env.bad_layouts:
        return
    axes = [a for a in lay.dims if a is not None] + list(lay.partial)
    if not axes:
        return
    how = "partial" if axes[0] in lay.partial else "sharded"
    diags.error(at.span, "index-not-replicated",
                f"`{t.name}` is {how} over {axes[0]}, but its elements decide the task space, "
                "which every device enumerates alike",
                f"declare `{t.name}` replicated (without `@`)")
