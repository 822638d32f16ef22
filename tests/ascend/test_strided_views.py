"""Strided views on ascend_npu (language.md section 6, "Strided views"), end to end as
test_views.py runs a tree: the emitted host program, expander, dispatcher and AICore kernels
compiled with g++ against the stand-in ACL and the CPU Ascend C (rule checks on), each output
equal to ref's, and ref's equal to NumPy's slicing.

Covered: column steps of 1 to 33 in every element size (the element-by-element copy-in on the
scalar unit, the copy-out's DataCopyPad passes of one element per 32-byte UB block), row
steps (the stride word), `Out` and `InOut` stores that leave the skipped elements as they
were, a partial strided view (a run-time stop) padded past its columns, the columns of a
gather view stepped, and the compile error for a column-strided view passed to an extern
kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

import ptowsp
from ptowsp.diagnostics import WspError

from .test_views import same_as_ref

pytestmark = [pytest.mark.cc]

NP = {"f32": np.float32, "f16": np.float16, "i8": np.int8, "i32": np.int32, "i64": np.int64}

# x (In) read with steps (RK, CK); y (Out) and z (InOut) written with steps (2, CK) and (1, CK)
# from columns C0; the elements the steps skip keep the caller's values.
PROGRAM = """\
    input  X: DT[16, W]
    output Y: DT[16, W]
    inout  Z: DT[8, W]
    kernel k(x: In[Tile[4, N, DT]], y: Out[Tile[4, N, DT]], z: InOut[Tile[4, N, DT]]) {
        store(y, x + x)
        store(z, z + x)
    }
    axis halves = Dense[2]
    workload w() {
        for h in P(halves) {
            k[h](x = X[h : h + 4 * RK : RK, 0 : N * CK : CK],
                 y = Y[h * 8 : h * 8 + 8 : 2, C0 : C0 + N * CK : CK],
                 z = Z[h * 4 : h * 4 + 4, C0 : C0 + N * CK : CK])
        }
    }
    schedule main = w()
"""


def program(dt: str, n: int, rk: int, ck: int, c0: int) -> tuple[str, int]:
    width = c0 + n * ck + 3
    text = (PROGRAM.replace("DT", dt).replace("RK", str(rk)).replace("CK", str(ck))
            .replace("C0", str(c0)).replace("W", str(width)).replace("N", str(n)))
    return text, width


@pytest.mark.parametrize("dt, n, rk, ck, c0", [
    ("f32", 16, 1, 2, 0),     # every other f32: 4 elements per 32-byte block
    ("f32", 8, 2, 9, 3),      # a step past a block: one element per block
    ("f16", 24, 3, 3, 1),     # 16 per block, a row step of 3
    ("i8", 40, 1, 5, 2),      # 32 per block, more than one block of slots
    ("i64", 5, 2, 33, 1),     # 8-byte elements, a step past several blocks
])
def test_strided_reads_and_writes_match_ref_and_numpy(tmp_path_factory, dt, n, rk, ck, c0):
    text, width = program(dt, n, rk, ck, c0)
    rng = np.random.default_rng(n * 100 + ck)
    X = rng.integers(-20, 20, (16, width)).astype(NP[dt])
    Z = rng.integers(-20, 20, (8, width)).astype(NP[dt])
    out = same_as_ref(tmp_path_factory, text, {}, {"X": X, "Z": Z})
    want_y = np.zeros((16, width), NP[dt])
    want_z = Z.copy()
    for h in range(2):
        x = X[h : h + 4 * rk : rk, 0 : n * ck : ck]
        want_y[h * 8 : h * 8 + 8 : 2, c0 : c0 + n * ck : ck] = x + x
        want_z[h * 4 : h * 4 + 4, c0 : c0 + n * ck : ck] += x
    np.testing.assert_array_equal(out["Y"], want_y)
    np.testing.assert_array_equal(out["Z"], want_z)


# A run-time stop: ceildiv(L - 1, 4) valid columns of a Tile[4, 16], padded with -inf under a
# row max; the store writes only them.
PARTIAL = """\
    sym L
    input  X: f32[4, 64]
    inout  Y: f32[4, 64]
    output M: f32[4, 1]
    kernel k(x: In[Tile[4, 16, f32], pad = -inf], y: InOut[Tile[4, 16, f32]], m: Out[Tile[4, 1, f32]]) {
        store(m, rowmax(x))
        store(y, y - x)
    }
    workload w() {
        k(x = X[:, 1 : L : 4], y = Y[:, 1 : L : 4], m = M)
    }
    schedule main = w()
"""


@pytest.mark.parametrize("L", [2, 7, 30, 64])
def test_a_partial_strided_view_pads_and_stores_only_its_elements(tmp_path_factory, L):
    rng = np.random.default_rng(L)
    X = rng.integers(-50, 50, (4, 64)).astype(np.float32)
    Y = rng.integers(-50, 50, (4, 64)).astype(np.float32)
    out = same_as_ref(tmp_path_factory, PARTIAL, {"L": L}, {"X": X, "Y": Y})
    want = Y.copy()
    want[:, 1:L:4] -= X[:, 1:L:4]
    np.testing.assert_array_equal(out["Y"], want)
    np.testing.assert_array_equal(out["M"][:, 0], X[:, 1:L:4].max(axis=1))


# The columns of a gather view stepped: rows by data, every third column from 1.
GATHER = """\
    input  pos: i32[4]
    input  T: f32[10, 24]
    output Y: f32[4, 8]
    kernel k(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x * 3.0) }
    workload w() { k(x = T[pos[0:4], 1:24:3], y = Y) }
    schedule main = w()
"""


def test_a_gather_views_columns_may_be_stepped(tmp_path_factory):
    pos = np.array([3, 0, 9, 5], np.int32)
    T = np.arange(240, dtype=np.float32).reshape(10, 24)
    out = same_as_ref(tmp_path_factory, GATHER, {}, {"pos": pos, "T": T})
    np.testing.assert_array_equal(out["Y"], T[pos][:, 1:24:3] * 3)


def test_a_column_strided_view_into_an_extern_kernel_is_refused():
    text = """\
    input  X: f32[4, 64]
    output Y: f32[4, 32]
    kernel e(x: In[Tile[4, 32, f32]], y: Out[Tile[4, 32, f32]]) extern ascend \"\"\"\"\"\"
    workload w() { e(x = X[:, 0:64:2], y = Y) }
    schedule main = w()
    """
    import textwrap

    module = ptowsp.parse(textwrap.dedent(text), "t.wsp")
    with pytest.raises(WspError) as e:
        module.compile(target="ascend_npu")
    message = str(e.value)
    assert ("the columns of `x` are a strided view of `X` (step 2), which the ascend_npu target "
            "does not pass to the extern kernel `e`") in message, message
