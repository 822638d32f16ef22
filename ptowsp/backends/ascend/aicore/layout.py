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

FLOATS = ("f16", "bf16", "f32", "f64")
VFLOAT = ("f16", "bf16", "f32")  # held in f32: the vector unit's dtype
INTS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")
HELD = {  # the C++ type a value of each dtype is held in while a kernel computes
    "f16": "float", "bf16": "float", "f32": "float", "f64": "double",
    "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t", "bool": "uint8_t",
}
STORE = dict(HELD, f16="half", bf16="bfloat16_t")  # the C++ type of a tile element in GM
ESIZE = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8, "i8": 1, "i16": 2, "i32": 4, "i64": 8,
         "u8": 1, "u16": 2, "u32": 4, "u64": 8, "bool": 1}
HSIZE = {dt: (4 if dt in VFLOAT else ESIZE[dt]) for dt in ESIZE}  # bytes of a held element
COPY_T = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint32_t"}  # what DataCopy moves
_BITS = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
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
