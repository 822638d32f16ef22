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

from ....dtypes import TABLE, element_bits
from ...vector_plan import VFLOAT  # noqa: F401 (held in f32: the vector unit's dtypes, one definition)

# bytes of each C++ element type a UB tensor is declared with (f16 and bf16 as half and
# bfloat16_t; a value held as float, double or an integer)
CXX_SIZE = {d.ascend: d.size for d in TABLE.values()}
COPY_T = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint32_t"}  # what DataCopy moves
ROW_ALIGN = 32  # elements: a UB row is a multiple of 32 elements of any dtype
REPEAT = 64  # elements: vector instructions run over whole 256-byte repeats of f32
ADV_TMP = 8 * 1024  # sharedTmpBuffer of Tanh/Sin/Cos/Power (their minimum is far below)
MAX_LIVE = 8  # tensors one TPosition may have allocated at once (910B)
STREAM_BYTES = 16 * 1024  # a block of matmul weights streamed from GM

# The Unified Buffer of one 910B vector core
UB_BYTES = 192 * 1024
# Ascend C keeps the top 8 KiB of UB for its own temporaries (TMP_UB_OFFSET = 184 KiB,
# TMP_UB_SIZE = 8 KiB in the CANN headers; Select stages its mask address there): a kernel's
# buffers must stay below it
API_RESERVE = 8 * 1024
UB_BUDGET = UB_BYTES - API_RESERVE


def ceil_to(a: int, b: int) -> int:
    """`a` rounded up to a multiple of `b`."""
    return -(-a // b) * b


def pc(cols: int) -> int:
    """Elements between the rows of a UB tile of `cols` columns."""
    return ceil_to(max(cols, 1), ROW_ALIGN)


def vcount(rows: int, cols: int) -> int:
    """Elements a vector instruction covers for a UB tile: whole 256-byte f32 repeats."""
    return ceil_to(rows * pc(cols), REPEAT)


def held_size(dtype: str) -> int:
    """Bytes of a value of `dtype` as a kernel holds it (f16 and bf16 as f32)."""
    return CXX_SIZE[TABLE[dtype].c_compute]


def pad_word(p) -> str:
    """A tile parameter's pad as the bits of one element (a C uint64_t literal): what a load
    of a partial view fills the rest of the tile with (language.md section 4)."""
    return f"{element_bits(p.pad, p.dtype)}ull"
