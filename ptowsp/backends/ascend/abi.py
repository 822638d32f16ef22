"""The plain-data C ABI between the host, the AICPU expander and the AICore kernels of the
`ascend_npu` target: one `WspTile` per tile parameter and one `WspScalar` per scalar parameter of
a task, in the kernel's parameter order (the cpu back end's `wsp_tile` / `wsp_scalar`, with the
tile's address a 64-bit GM byte address so the same struct is valid on every processor).

`ABI_C` is C89-compatible text, guarded so that it may be pasted into several headers of one
translation unit (`include/wsp_plan.h`, `aicore/wsp_aicore.h`). It needs the fixed-width integer
types: `<stdint.h>` on the host and the AICPU, `kernel_operator.h` on the AICore.
"""

from __future__ import annotations

import struct

from ...dtypes import TABLE, literal_value

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
/* a scalar argument, one 64-bit word: integer dtypes and bool (0 or 1) as the value; f32, f16
   and bf16 as the bits of an f32 in the low 32 bits, the value already rounded to the
   parameter's dtype (so the AI Core, which has no double, only reinterprets them; f64 is not
   an AI Core type: such a kernel is a compile error) */
typedef struct WspScalar { int64_t i; } WspScalar;
#endif /* WSP_ABI_H */
"""



def scalar_word(dtype: str, value) -> int:
    """The `WspScalar` word (a signed int64) of scalar `value` passed to a parameter of `dtype`:
    a float as the bits of its f32 after rounding once to `dtype` (`dtypes.literal_value`, as
    ref rounds it); an integer wrapped; a bool 0 or 1. The expander computes the same word for a
    scalar given by an integer expression (`wsp_scalar_f32` in wsp_expand.h)."""
    if dtype == "f64":
        raise ValueError("f64 scalars have no AICore word (the AI Core has no double)")
    v = literal_value(value, dtype)
    if TABLE[dtype].kind == "float":
        return struct.unpack("<I", struct.pack("<f", v))[0]
    if TABLE[dtype].kind == "bool":
        return int(v)
    return struct.unpack("<q", struct.pack("<Q", int(v) & (2**64 - 1)))[0]


__all__ = ["ABI_C", "scalar_word"]
