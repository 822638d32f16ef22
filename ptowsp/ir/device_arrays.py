"""The caller's global arrays and a program's per-device ones (docs/distributed.md, "Layouts"):
a module lowered to devices (`Module.devices`, `ir/devices.py`) holds each tensor as
`dtype[devices, local dims...]`; these functions move data between the two by layout.

- `scatter`: device d gets its block of each dimension sharded over an axis (coordinate i of
  the axis holds `[i*N/p, (i+1)*N/p)`), all of a replicated one; of a tensor partial over
  axes, the devices at coordinate 0 of those axes hold the value and the others zeros (their
  sum is the value).
- `gather`: the global array from the blocks, each replicated part from the device at
  coordinate 0 of the axes that replicate it (device 0 for a replicated tensor); of a tensor
  partial over axes (an `inout`), each block the sum of its addends along those axes, in
  device order, as an `allreduce` sums them (f16 and bf16 in f32, rounded once).
- `first_disagreement`: where two replicas of a tensor differ (`--check-replicas`).

`global_view` is the module as the caller sees it (global shapes), which the binding checks
arrays against.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Optional

from ..dtypes import to_compute, to_storage
from . import nodes as N

if TYPE_CHECKING:
    import numpy as np


def global_view(m: N.Module) -> N.Module:
    """`m` with each tensor of its global shape (`m` when it was not lowered to devices)."""
    if m.devices is None:
        return m
    return replace(m, tensors=tuple(
        replace(t, dims=p.dims, layout=p.layout) if (p := m.devices.placed(t.name)) else t
        for t in m.tensors if m.devices.placed(t.name) is not None))


def _coords(devices: N.Devices, d: int) -> dict[str, int]:
    """The coordinates of device `d` (row-major, the last axis fastest)."""
    out = {}
    for name, p in reversed(devices.axes):
        out[name] = d % p
        d //= p
    return out


def _block(devices: N.Devices, placed: N.Placed, shape: tuple, coords: dict[str, int]) -> tuple:
    """The global slices device `coords` holds of a tensor of global `shape`."""
    sizes = dict(devices.axes)
    dims = placed.layout.dims if placed.layout else (None,) * len(shape)
    out = []
    for n, ax in zip(shape, dims):
        if ax is None:
            out.append(slice(None))
        else:
            p = sizes[ax]
            out.append(slice(coords[ax] * (n // p), (coords[ax] + 1) * (n // p)))
    return tuple(out)


def scatter(devices: N.Devices, name: str, a: "np.ndarray") -> "np.ndarray":
    """The per-device array of tensor `name` from the caller's global array `a`."""
    import numpy as np

    placed = devices.placed(name)
    assert placed is not None
    partial = placed.layout.partial if placed.layout else ()
    blocks = []
    for d in range(devices.count):
        c = _coords(devices, d)
        block = a[_block(devices, placed, a.shape, c)]
        if any(c[ax] != 0 for ax in partial):
            block = np.zeros_like(block)
        blocks.append(block)
    return np.ascontiguousarray(np.stack(blocks))


def _replicating(devices: N.Devices, placed: N.Placed) -> list[str]:
    """The axes along which the tensor's devices hold copies (not shards, not addends)."""
    dims = placed.layout.dims if placed.layout else ()
    partial = placed.layout.partial if placed.layout else ()
    return [ax for ax, _ in devices.axes if ax not in dims and ax not in partial]


def gather(devices: N.Devices, name: str, local: "np.ndarray", dtype: str) -> "np.ndarray":
    """The caller's global array of tensor `name` (of element type `dtype`) from its
    per-device array `local`."""
    import numpy as np

    placed = devices.placed(name)
    assert placed is not None
    sizes = dict(devices.axes)
    dims = placed.layout.dims if placed.layout else (None,) * (local.ndim - 1)
    shape = tuple(n * (sizes[ax] if ax else 1) for n, ax in zip(local.shape[1:], dims))
    copies = _replicating(devices, placed)
    partial = placed.layout.partial if placed.layout else ()
    if partial:
        return _summed(devices, placed, local, shape, copies, dtype)
    out = np.empty(shape, local.dtype)
    for d in range(devices.count):
        c = _coords(devices, d)
        if any(c[ax] != 0 for ax in copies):
            continue
        out[_block(devices, placed, shape, c)] = local[d]
    return out


def _summed(devices: N.Devices, placed: N.Placed, local: "np.ndarray", shape: tuple,
            copies: list[str], dtype: str) -> "np.ndarray":
    """The global array of a tensor partial over some axes: each block the sum of its
    addends (the devices differing only in the partial axes), added in device order
    (((a_0 + a_1) + a_2) ...) in the compute type and stored once, the order and the rounding
    of an `allreduce`'s kernel (ir/collective_tiles.py), so a caller's sum equals the one an
    `allreduce` into an output would give. A boolean's sum is its `or`, as there."""
    import numpy as np

    acc: dict[tuple, "np.ndarray"] = {}  # the block's slices: its running sum
    for d in range(devices.count):
        c = _coords(devices, d)
        if any(c[ax] != 0 for ax in copies):
            continue
        where = _block(devices, placed, shape, c)
        key = tuple((s.start, s.stop) for s in where)
        value = to_compute(local[d], dtype)
        if key not in acc:
            acc[key] = value
        elif dtype == "bool":
            acc[key] = np.logical_or(acc[key], value)
        else:
            with np.errstate(over="ignore", invalid="ignore"):  # integers wrap, floats overflow
                acc[key] = acc[key] + value
    out = np.empty(shape, local.dtype)
    for key, value in acc.items():
        out[tuple(slice(a, b) for a, b in key)] = to_storage(value, dtype)
    return out


def first_disagreement(devices: N.Devices, name: str,
                       local: "np.ndarray") -> Optional[tuple[int, int, tuple, object, object]]:
    """(device, its replica's device 0 along the replicating axes, index, value there, value
    at the replica) of the first element (devices in order, then row-major) where a replica
    of tensor `name` differs from the one `gather` returns; None when all agree. Values are
    compared bit for bit (a NaN agrees with the same NaN)."""
    import numpy as np

    placed = devices.placed(name)
    assert placed is not None
    copies = _replicating(devices, placed)
    if not copies:
        return None
    strides = {}
    n = 1
    for ax, p in reversed(devices.axes):
        strides[ax] = n
        n *= p
    raw = local.view(np.uint8).reshape(local.shape + (-1,)) if local.dtype.itemsize else local
    for d in range(devices.count):
        c = _coords(devices, d)
        ref = d - sum(c[ax] * strides[ax] for ax in copies)
        if ref == d:
            continue
        diff = np.any(raw[d] != raw[ref], axis=-1)
        if diff.any():
            index = tuple(int(i) for i in np.argwhere(diff)[0])
            return d, ref, index, local[d][index], local[ref][index]
    return None


def coordinates_text(devices: N.Devices, d: int) -> str:
    """`tp = 2` / `dp = 1, tp = 0`: device `d`'s coordinates, for messages."""
    c = _coords(devices, d)
    return ", ".join(f"{ax} = {c[ax]}" for ax, _ in devices.axes)


__all__ = ["global_view", "scatter", "gather", "first_disagreement", "coordinates_text"]
