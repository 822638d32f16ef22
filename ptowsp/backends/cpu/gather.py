"""Gather views on cpu_sim (language.md section 6, "Gather views"): the C wrapper a task of a
kernel with gathered tile arguments calls instead of the kernel.

The enumerator passes a gathered argument as the tensor's rows from row 0 (`data`, `stride`
as for any view) and the index slice as one more tile after the kernel's own, whose box the
task reads (its dependencies); the wrapper copies row `index[i]` to row i of a buffer, points
the tile at it and calls the kernel. The indices were read and checked by the enumerator
before the task was submitted; every later writer of the index slice waits for this task, so
the wrapper reads the same values. A short index slice (a partial tile) gathers its own
length of rows (`rows` of the tile, as for any partial view): the kernel pads the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...dtypes import TABLE, size_of
from ...ir import nodes as N
from ..cexpr import c_ident


@dataclass(frozen=True)
class Gathered:
    """One gathered argument: the kernel's tile `tile` (its index among the kernel's tiles),
    its rows from the extra tile `index_tile`, whose elements are `index_ctype`."""

    tile: int
    index_tile: int
    index_ctype: str
    size: int  # bytes per element of the gathered tensor
    rows: int
    cols: int
    param: str


def gathered(module: N.Module, tiles: list[N.KParam], by_param: dict, first_extra: int
             ) -> list[Gathered]:
    """The gathered arguments of a task whose kernel has tile parameters `tiles` and whose
    extra tiles start at `first_extra` (the index tiles are appended there, in this order)."""
    out = []
    for i, p in enumerate(tiles):
        a = by_param[p.name]
        if isinstance(a, N.TileArg) and a.gather is not None:
            ix, data = module.tensor(a.gather.index), module.tensor(a.tensor)
            out.append(Gathered(i, first_extra + len(out), TABLE[ix.dtype].c_storage,
                                size_of(data.dtype), p.rows, p.cols, p.name))
    return out


def wrapper(name: str, kernel_fn: str, ntiles: int, gs: list[Gathered]) -> str:
    """C of a wrapper `name` that gathers the rows of `gs` and calls `kernel_fn`."""
    lines = [f"static int {name}(const wsp_tile *tiles, const wsp_scalar *scalars)", "{",
             f"    wsp_tile t[{ntiles}];",
             "    memcpy(t, tiles, sizeof t);"]
    for k, g in enumerate(gs):
        lines.append(f"    char *buf{k} = (char *)malloc({g.rows * g.cols * g.size});")
    cond = " || ".join(f"!buf{k}" for k in range(len(gs)))
    frees = " ".join(f"free(buf{k});" for k in range(len(gs)))
    lines.append(f"    if ({cond}) {{ {frees} return wsp_kernel_fail(\"out of memory gathering "
                 "rows\"); }")
    for k, g in enumerate(gs):
        lines += [
            "    {",
            f"        const char *src = (const char *)tiles[{g.tile}].data;",
            f"        const {g.index_ctype} *ix = (const {g.index_ctype} *)tiles[{g.index_tile}].data;",
            f"        const int64_t is = tiles[{g.index_tile}].stride;",
            f"        const int64_t rs = tiles[{g.tile}].stride, cs = tiles[{g.tile}].col_stride;",
            f"        for (int64_t r = 0; r < tiles[{g.tile}].rows; r++) {{  /* a partial tile: its count */",
            f"            const char *row = src + (int64_t)ix[r * is] * rs * {g.size};",
            f"            for (int64_t c = 0; c < {g.cols}; c++)",
            f"                memcpy(buf{k} + (r * {g.cols} + c) * {g.size}, "
            f"row + c * cs * {g.size}, {g.size});",
            "        }",
            f"        t[{g.tile}].data = buf{k}; t[{g.tile}].stride = {g.cols}; "
            f"t[{g.tile}].col_stride = 1;",
            "    }",
        ]
    lines += [f"    int rc = {kernel_fn}(t, scalars);", f"    {frees}", "    return rc;", "}"]
    return "\n".join(lines) + "\n"


def wrapper_name(kernel: str, n: int) -> str:
    return c_ident(f"wsp_gather{n}_", kernel)
