"""The seeds' collectives in a workload: `allreduce`, `allgather`, `reduce_scatter`,
`all_to_all` and `relayout` (docs/python.md, "Meshes, layouts and collectives").

Each records the `.wsp` collective statement of the same name (docs/distributed.md,
"Collectives") and returns its destination: the tensor given as `into=`, or a new scratch
tensor of the source's shape and dtype whose layout is the one the collective makes
(`y = allreduce(x)`, as the seeds write it). A mesh axis is written as the layouts write it (a
position or a name) and recorded as a placeholder `@mesh:...` that assembly resolves against
the workload's mesh (`spatial_map`); left out, it is the one axis the source's layout names for
the collective, else the mesh's only axis. The checker checks the statement as it checks
`.wsp`, at the call's line.
"""

from __future__ import annotations

from typing import Any, Optional

from ..frontend import ast as A
from .errors import CompileError, TypeCheckError, user_error
from .layouts import TensorLayout, _axis_ref
from .source import here
from .trace import current
from .values import Tensor

INFER = "@mesh:?"  # the mesh's only axis (assembly says so if there are several)


def axis_key(ref: Any) -> str:
    """The placeholder of mesh axis `ref` (a position or a name) in a recorded statement."""
    return f"@mesh:i:{ref}" if isinstance(ref, int) else f"@mesh:s:{ref}"


def axis_of_key(key: str) -> Any:
    """The mesh axis reference `axis_key` encoded (None: `INFER`)."""
    if key == INFER:
        return None
    kind, ref = key[len("@mesh:"):].split(":", 1)
    return int(ref) if kind == "i" else ref


_OPS = ("sum", "max", "min")


def _collective(kind: str, tensor: Any, mesh_axis: Any, op: Optional[str], dim: Any,
                into: Any, to: Optional[TensorLayout] = None) -> Tensor:
    span = here()
    t = current()
    if t is None:
        raise user_error(span, f"`{kind}` is a statement of a workload: call it in a "
                         "`@workload` function", "move the call into the workload's body")
    if not isinstance(tensor, Tensor):
        raise user_error(span, f"`{kind}` moves a whole tensor, not {tensor!r}",
                         "pass the `Tensor` itself (a view's layout is its tensor's)",
                         cls=TypeCheckError)
    if into is not None and not isinstance(into, Tensor):
        raise user_error(span, f"`into=` takes the destination `Tensor`, not {into!r}",
                         cls=TypeCheckError)
    if op is not None and op not in _OPS:
        raise user_error(span, f"`op={op!r}` is not a reduction of `{kind}`",
                         "write `op=\"sum\"`, `\"max\"` or `\"min\"`")
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int)
                            or not 0 <= dim < len(tensor.shape)):
        raise user_error(span, f"`dim={dim!r}` is not a dimension of the {len(tensor.shape)}-D "
                         f"tensor", cls=TypeCheckError)
    over = None
    if kind != "relayout":
        ref = _axis_ref(mesh_axis, span, "`mesh_axis=`") if mesh_axis is not None else \
            _implied_axis(kind, tensor.layout, dim)
        over = A.Name(INFER if ref is None else axis_key(ref), span=span)
    if into is None:
        into = Tensor(shape=tensor.shape, dtype=tensor.dtype, scratch=True)
        into._derive = (kind, tensor, None if over is None else axis_of_key(over.id), dim, to,
                        span)
    # only `.wsp` reduce_scatter says a dimension: the others read it off the layouts
    wsp_dim = A.IntLit(dim, span=span) if kind == "reduce_scatter" else None
    t.emit(A.Collective(kind, t.ref(tensor, span), t.ref(into, span), over,
                        None if op is None else A.Name(op, span=span), wsp_dim, span=span))
    return into


def _implied_axis(kind: str, layout: TensorLayout, dim: Optional[int]) -> Any:
    """The mesh axis the source's layout names for `kind`, when it names exactly one."""
    if kind in ("allreduce", "reduce_scatter"):
        cands = list(layout.partial)
    elif kind == "allgather" and dim is not None:
        cands = [layout.shard_axes()[dim]] if dim in layout.shard_axes() else []
    else:
        cands = list(layout.shard_axes().values())
    return cands[0] if len(cands) == 1 else None


def allreduce(tensor: Any, mesh_axis: Any = None, op: str = "sum", *, into: Any = None) -> Tensor:
    """`allreduce(A, into = B, over = ax, op = sum)`: every device along the axis gets the
    reduction of the addends (a partial source) or of the copies (a replicated one)."""
    return _collective("allreduce", tensor, mesh_axis, op, None, into)


def reduce_scatter(tensor: Any, dim: int = 0, mesh_axis: Any = None, op: str = "sum", *,
                   into: Any = None) -> Tensor:
    """`reduce_scatter(A, into = B, over = ax, dim = d, op = sum)`: each device gets its shard
    (along `dim`) of the reduction of a partial source."""
    return _collective("reduce_scatter", tensor, mesh_axis, op, dim, into)


def allgather(tensor: Any, dim: Optional[int] = None, mesh_axis: Any = None, *,
              into: Any = None) -> Tensor:
    """`allgather(A, into = B, over = ax)`: every device gets all shards of the dimension the
    axis shards (`dim` says which, when the axis is left out)."""
    return _collective("allgather", tensor, mesh_axis, None, dim, into)


def all_to_all(tensor: Any, dim: Optional[int] = None, mesh_axis: Any = None, *,
               into: Any = None) -> Tensor:
    """`all_to_all(A, into = B, over = ax)`: the axis's sharding moves from the dimension it
    shards to dimension `dim` (needed without `into=`, which says it)."""
    if dim is None and into is None:
        raise user_error(here(), "`all_to_all` needs the dimension the result is sharded on",
                         "write `all_to_all(x, dim=1)` (or give the destination: `into=Y`)",
                         cls=TypeCheckError)
    return _collective("all_to_all", tensor, mesh_axis, None, dim, into)


def relayout(tensor: Any, to: Any = None, *, into: Any = None) -> Tensor:
    """`relayout(A, into = B)`: the collectives that give the source the layout `to` (or
    `into`'s declared one)."""
    span = here()
    if into is None and not isinstance(to, TensorLayout):
        raise user_error(span, f"`relayout` takes the layout to give the tensor, not {to!r}",
                         "write `relayout(x, TensorLayout.replicated())` (or `into=Y`)",
                         cls=TypeCheckError)
    if into is not None and to is not None:
        raise user_error(span, "`relayout` takes the layout `to` or the destination `into=`, "
                         "not both", "the destination's layout is its declared one",
                         cls=CompileError)
    if to is not None and isinstance(tensor, Tensor):
        to = to.for_rank(len(tensor.shape))
    return _collective("relayout", tensor, None, None, None, into, to)


__all__ = ["allreduce", "reduce_scatter", "allgather", "all_to_all", "relayout", "INFER",
           "axis_key", "axis_of_key"]
