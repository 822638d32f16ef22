"""The entry point of lowering: `lower(env)` lowers every schedule (schedules.py), then the
kernels the schedules' tasks use (kernels.py), and puts them together with the module's
declarations — syms, tensors, channels and their scratch tensors — into one `nodes.Module`.

Every construct this build cannot lower is reported where it is and lowering goes on, so all
of them are raised together as one `WspError` at the end (unsupported.py).
"""

from __future__ import annotations

from .. import sym
from ..diagnostics import Diagnostics
from ..frontend import ast as A
from ..frontend.env import ModuleEnv
from ..frontend.printer import expr_str
from ..frontend.signatures import to_sym
from ..ir import nodes as N
from .csp import channel_decls
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
        N.TensorDecl(t.name, t.kind, t.dtype, tuple(t.dims), t.decl.span, t.decl.location)
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
        tensors=tensors + slot_tensors,
        kernels=tuple(kernels),
        schedules=tuple(schedules),
        default_schedule=default,
        checks=_dimension_checks(env),
        sources=tuple(env.sources.items()),
        channels=channels,
    )


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
