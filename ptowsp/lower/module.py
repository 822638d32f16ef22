"""The entry point of lowering: `lower(env)` lowers every schedule (schedules.py), then the
kernels the schedules' tasks use (kernels.py), and puts them together with the module's
declarations — syms, tensors, channels and their scratch tensors — into one `nodes.Module`.

Every construct this build cannot lower is reported where it is and lowering goes on, so all
of them are raised together as one `WspError` at the end (unsupported.py).
"""

from __future__ import annotations

from typing import Optional

from .. import sym
from ..diagnostics import Diagnostics
from ..frontend import ast as A
from ..frontend.env import ModuleEnv
from ..frontend.mesh import shard_reason
from ..frontend.printer import expr_str
from ..frontend.signatures import to_sym
from ..ir import nodes as N
from .csp import channel_decls
from .edges import edge_tensors
from .kernels import Specialisations, lower_kernels
from .schedules import implicit_schedule, lower_schedule
from .values import zero_divisor


def lower(env: ModuleEnv) -> N.Module:
    """The IR of a checked module (pure). Raises `WspError` for constructs not supported yet."""
    diags = Diagnostics(dict(env.sources))
    specs = Specialisations(env.kernels)
    syms = tuple(
        N.SymDecl(name, env.sym_defaults.get(name), d.span) for name, d in env.syms.items()
    )
    tensors = tuple(
        N.TensorDecl(t.name, t.kind, t.dtype, tuple(t.dims), t.decl.span,
                     location=t.decl.location, layout=_layout(t))
        for t in env.tensors.values()
    )
    schedules = [lower_schedule(env, specs, diags, sd) for sd in env.schedules.values()]
    if not env.schedules:
        implicit = implicit_schedule(env, specs, diags)
        if implicit is not None:
            schedules.append(implicit)
    schedules = [s for s in schedules if s is not None]
    # after the schedules: their tasks say which Constexpr specialisations exist
    kernels = lower_kernels(env, specs)
    diags.raise_if_any()
    names = [s.name for s in schedules]
    default = "main" if "main" in names else names[0] if len(names) == 1 else None
    channels, slot_tensors = channel_decls(env, schedules)
    return N.Module(
        name=env.name,
        syms=syms,
        tensors=tensors + slot_tensors + edge_tensors(schedules),
        kernels=tuple(kernels),
        schedules=tuple(schedules),
        default_schedule=default,
        checks=_mesh_checks(env) + _dimension_checks(env),
        sources=tuple(env.sources.items()),
        channels=channels,
        mesh=_mesh(env),
    )


def _mesh(env: ModuleEnv) -> Optional[N.Mesh]:
    if env.mesh is None:
        return None
    return N.Mesh(tuple(N.MeshAxis(a.name, a.size, a.decl.span) for a in env.mesh.axes),
                  env.mesh.decl.span)


def _layout(t) -> Optional[N.Layout]:
    """The tensor's layout; None when it is replicated everywhere (no `@`, or `@ [R, ...]`)."""
    lay = t.layout
    if lay is None or (not lay.partial and all(a is None for a in lay.dims)):
        return None
    return N.Layout(lay.dims, lay.partial)


def _mesh_checks(env: ModuleEnv) -> tuple[N.ViewCheck, ...]:
    """What the checker could not prove of the mesh (docs/distributed.md): a sym-sized axis has
    at least one device, and a dimension sharded over it is a multiple of its size (at the
    layout entry, like the divisor checks below)."""
    if env.mesh is None:
        return ()
    out = []
    for a in env.mesh.axes:
        if sym.const_value(a.size) is None:
            reason = f"mesh axis `{a.name}` needs at least 1 device"
            out.append(N.ViewCheck(sym.Check(a.size, ">=", sym.const(1), reason), reason,
                                   a.decl.size.span))
    for t in env.tensors.values():
        if t.layout is None:
            continue
        for d, (ax, entry) in enumerate(zip(t.layout.dims, t.decl.layout.dims)):
            info = env.mesh.axis(ax) if ax is not None else None
            if info is None:
                continue
            n, p = t.dims[d], info.size
            if sym.prove_eq(sym.mod(n, p), 0) is True or (
                    sym.const_value(n) is not None and sym.const_value(p) is not None):
                continue  # always true (an axis of 1), or decided by the checker
            reason = shard_reason(t.name, len(t.dims), d, ax)
            out.append(N.ViewCheck(sym.Check(sym.mod(n, p), "==", sym.const(0), reason), reason,
                                   entry.span))
    return tuple(out)


def _dimension_checks(env: ModuleEnv) -> tuple[N.ViewCheck, ...]:
    """Tensor dimensions that may be negative (the checker's rule, kept per dimension), each
    after its divisors that may be zero (`!=` checks: api.py's binding evaluates them before
    any shape)."""
    out = []
    for t in env.tensors.values():
        for dim, node in zip(t.dims, t.decl.type.dims):
            out += _divisor_checks(env, node)
            if sym.const_value(dim) is None and sym.prove_ge(dim, 0) is not True:
                reason = f"dimension of `{t.name}` must not be negative"
                out.append(N.ViewCheck(sym.Check(dim, ">=", sym.const(0), reason), reason,
                                       node.span))
    return tuple(out)


def _divisor_checks(env: ModuleEnv, dim: A.Expr) -> list[N.ViewCheck]:
    """A divisor in a tensor dimension (`f32[N / M, 8]`) that may be zero: a check that it is
    not, at the divisor, inner divisions first (a zero divisor is that error, not a dimension
    that cannot be computed)."""
    def resolve(n: A.Name) -> sym.Expr:
        return sym.const(env.consts[n.id]) if n.id in env.consts else sym.var(n.id)

    out = []
    for n in reversed(list(dim.walk())):
        if isinstance(n, A.Binary) and n.op in ("/", "%"):
            d = n.right
        elif isinstance(n, A.Call) and n.func.id == "ceildiv" and len(n.args) == 2:
            d = n.args[1]
        else:
            continue
        value = to_sym(d, resolve, Diagnostics())  # the checker converted it already
        if sym.prove_ne(value, 0) is not True:
            reason = zero_divisor(expr_str(n), expr_str(d))
            out.append(N.ViewCheck(sym.Check(value, "!=", sym.const(0), reason), reason, d.span))
    return out
