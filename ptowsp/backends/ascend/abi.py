"""The plain-data C ABI between the host, the AICPU expander and the AICore kernels of the
`ascend_npu` target: one `WspTile` per tile parameter and one `WspScalar` per scalar parameter of
a task, in the kernel's parameter order (the cpu back end's `wsp_tile` / `wsp_scalar`, with the
tile's address a 64-bit GM byte address so the same struct is valid on every processor).

`ABI_C` is C89-compatible text, guarded so that it may be pasted into several headers of one
translation unit (`include/wsp_plan.h`, `aicore/wsp_aicore.h`). It needs the fixed-width integer
types: `<stdint.h>` on the host and the AICPU, `kernel_operator.h` on the AICore.
"""

from __future__ import annotations

ABI_C = """\
#ifndef WSP_ABI_H
#define WSP_ABI_H
/* a tile argument: addr is the GM byte address of element [0, 0]; stride is the row stride in
   elements; rows and cols are the view's extents: the kernel's static tile shape, or fewer
   for a partial view (a load pads the rest, a store writes only them). A gather view has
   index != 0: row i of the tile is then GM row index[i * index_stride] (an integer of
   |index_kind| bytes, signed when index_kind < 0) counted from addr, index the GM byte address
   of the first index element. col_stride is the column stride in elements: 1, or a strided
   view's (`X[r, 0:64:2]`: the tensor's column stride times the step), whose copies move
   element by element */
typedef struct WspTile {
    uint64_t addr; int64_t rows; int64_t cols; int64_t stride;
    uint64_t index; int64_t index_stride; int64_t index_kind; int64_t col_stride;
} WspTile;
/* a scalar argument: float dtypes in .f (rounded to the parameter's dtype by the kernel),
   integer dtypes and bool (0 or 1) in .i */
typedef union WspScalar { double f; int64_t i; } WspScalar;
#endif /* WSP_ABI_H */
"""

__all__ = ["ABI_C"]
