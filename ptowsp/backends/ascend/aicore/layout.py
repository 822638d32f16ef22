"""How a kernel's values lie in the Unified Buffer (UB) of one AICore vector core: its size
and the part Ascend C keeps, the row pitch of a UB tile (`pc`), the elements a vector
instruction covers (`vcount`), and the C++ types values are held and moved in.

A value of shape [rows, cols] occupies rows x pc elements, pc = cols rounded up to 32 elements,
whatever its dtype: a row starts 32-byte aligned (what vector instructions and DataCopy need)
and values of different dtypes index alike (Cast, Compare and Select work on whole buffers).
Vector instructions run over the buffer rounded up to whole 256-byte repeats; the padding
columns hold garbage that never reaches a result (reductions count `cols` elements, copies
move `cols`).
"""

from __future__ import annotations

from ....dtypes import element_bits
from ...vector_plan import (  # noqa: F401 (re-exported: one definition, below both back ends)
    ADV_TMP,
    API_RESERVE,
    CXX_SIZE,
    MAX_LIVE,
    REPEAT,
    ROW_ALIGN,
    STREAM_BYTES,
    UB_BUDGET,
    UB_BYTES,
    VFLOAT,
    ceil_to,
    held_size,
    pc,
    vcount,
)

COPY_T = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint32_t"}  # what DataCopy moves


def pad_word(p) -> str:
    """A tile parameter's pad as the bits of one element (a C uint64_t literal): what a load
    of a partial view fills the rest of the tile with (language.md section 4)."""
    return f"{element_bits(p.pad, p.dtype)}ull"
