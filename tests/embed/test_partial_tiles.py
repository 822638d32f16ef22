"""Partial tiles and transposed views in the Python embedding (docs/python.md): `Pad(v)` after
a tile parameter's tile (the `.wsp` `pad = v`), views shorter than their tile
(`X[b, t*16 : P.min(t*16 + 16, L[b]), :]`), `pto.valid_rows`/`pto.valid_cols`, and `VIEW.T`.
The decorated program lowers to the IR of the textual one, and both run to the same outputs
on cpu_sim and ref, equal to a NumPy formula; the embedding's own errors (a pad that is not a
number, anything else after the tile) are at the user's line.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from pto_wsp import (
    DenseDyn,
    DType,
    In,
    InOut,
    KernelError,
    Out,
    P,
    Pad,
    Ragged,
    Tensor,
    Tile,
    TypeCheckError,
    ceildiv,
    kernel,
    pto,
    workload,
)
from tests.embed.helpers import assert_roundtrip, ir_text

pytestmark = pytest.mark.cc

SETTINGS = settings(max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture])
F32, I32 = DType.F32, DType.I32
BATCH, S, D = 3, 40, 8
HERE = Path(__file__).resolve()
LINES = HERE.read_text().splitlines()


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


# The same program twice: decorated Python, and the .wsp text a user would write.
TEXT = """\
module w
input X: f32[3, 40, 8]
input L: i32[3]
inout MX: f32[3, 40, 1]
inout SM: f32[3, 40, 1]
inout N: i32[3, 40, 2]
inout ACC: f32[3, 3, 8]
inout XT: f32[3, 8, 40]
axis batch = DenseDyn(3)
axis tiles = Ragged(batch, ceildiv(L[_], 16))
kernel rows(x: In[Tile[16, 8, f32], pad = -inf], z: In[Tile[16, 8, f32]], mx: Out[Tile[16, 1, f32]], sm: Out[Tile[16, 1, f32]], n: Out[Tile[16, 2, i32]]) {
    store(mx, rowmax(x))
    store(sm, rowsum(z) / valid_cols(z))
    store(n, where(col_index(16, 2) == 0, valid_rows(x), valid_cols(x)))
}
kernel tr(x: In[Tile[8, 16, f32]], acc: InOut[Tile[1, 8, f32], pad = 1.5], y: Out[Tile[8, 16, f32]]) {
    store(y, x * 2.0)
    store(acc, acc + transpose(rowsum(x)) + rowmax(acc))
}
workload w() {
    for b in P(batch) {
        for t in P(tiles[b]) {
            rows[b, t](x = X[b, t * 16 : min(t * 16 + 16, L[b]), :], z = X[b, t * 16 : min(t * 16 + 16, L[b]), :], mx = MX[b, t * 16 : min(t * 16 + 16, L[b]), :], sm = SM[b, t * 16 : min(t * 16 + 16, L[b]), :], n = N[b, t * 16 : min(t * 16 + 16, L[b]), :])
            tr[b, t](x = X[b, t * 16 : min(t * 16 + 16, L[b]), :].T, acc = ACC[b, t, 0 : min(8, L[b])], y = XT[b, :, t * 16 : min(t * 16 + 16, L[b])])
        }
    }
}
schedule main = w()
"""


@kernel
def rows(x: In[Tile[16, 8, F32], Pad(-math.inf)], z: In[Tile[16, 8, F32]],
         mx: Out[Tile[16, 1, F32]], sm: Out[Tile[16, 1, F32]], n: Out[Tile[16, 2, I32]]):
    pto.store(mx, pto.rowmax(x))
    pto.store(sm, pto.rowsum(z) / pto.valid_cols(z))
    pto.store(n, pto.where(pto.col_index(16, 2) == 0, pto.valid_rows(x), pto.valid_cols(x)))


@kernel
def tr(x: In[Tile[8, 16, F32]], acc: InOut[Tile[1, 8, F32], Pad(1.5)],
       y: Out[Tile[8, 16, F32]]):
    pto.store(y, x * 2.0)
    pto.store(acc, acc + pto.transpose(pto.rowsum(x)) + pto.rowmax(acc))


def build():
    """Fresh tensors (zeroed outputs) and the traced workload over them."""
    X = Tensor(data=np.zeros((BATCH, S, D), np.float32), dtype=F32)
    L = Tensor(data=np.ones(BATCH, np.int32), dtype=I32)
    MX = Tensor(data=np.zeros((BATCH, S, 1), np.float32), dtype=F32)
    SM = Tensor(data=np.zeros((BATCH, S, 1), np.float32), dtype=F32)
    N = Tensor(data=np.zeros((BATCH, S, 2), np.int32), dtype=I32)
    XT = Tensor(data=np.zeros((BATCH, D, S), np.float32), dtype=F32)
    ACC = Tensor(data=np.zeros((BATCH, 3, D), np.float32), dtype=F32)
    batch = DenseDyn(BATCH)
    tiles = Ragged(batch, lambda b: ceildiv(L[b], 16))

    @workload
    def w():
        for b in P(batch):
            for t in P(tiles[b]):
                r = X[b, t * 16: P.min(t * 16 + 16, L[b]), :]
                rows[b, t](x=r, z=r, mx=MX[b, t * 16: P.min(t * 16 + 16, L[b]), :],
                           sm=SM[b, t * 16: P.min(t * 16 + 16, L[b]), :],
                           n=N[b, t * 16: P.min(t * 16 + 16, L[b]), :])
                tr[b, t](x=X[b, t * 16: P.min(t * 16 + 16, L[b]), :].T,
                         acc=ACC[b, t, 0: P.min(8, L[b])],
                         y=XT[b, :, t * 16: P.min(t * 16 + 16, L[b])])

    return w(), {"X": X, "L": L, "MX": MX, "SM": SM, "N": N, "XT": XT, "ACC": ACC}


WORKLOAD, TENSORS = build()
_PROGRAMS: dict = {}


def test_the_decorated_program_is_the_textual_one():
    assert ir_text(WORKLOAD.module()) == ir_text(ptowsp.parse(TEXT, "t.wsp"))
    text = assert_roundtrip(WORKLOAD)
    assert "x: In[Tile[16, 8, f32], pad = -inf]" in text
    assert "acc: InOut[Tile[1, 8, f32], pad = 1.5]" in text
    assert "X[b, t * 16 : min(t * 16 + 16, L[b]), :].T" in text


def run_embedded(target: str, x: np.ndarray, lens: np.ndarray) -> dict:
    if target not in _PROGRAMS:
        _PROGRAMS[target] = WORKLOAD.compile(target=target)
    for name, t in TENSORS.items():
        t.data[...] = x if name == "X" else lens if name == "L" else 0
    prog = _PROGRAMS[target]
    prog.execute()
    prog.synchronize()
    return {name: t.data.copy() for name, t in TENSORS.items() if name not in ("X", "L")}


def run_textual(target: str, x: np.ndarray, lens: np.ndarray) -> dict:
    key = ("text", target)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = ptowsp.parse(TEXT, "t.wsp").compile(target=target)
    zeros = {n: np.zeros_like(t.data) for n, t in TENSORS.items() if n not in ("X", "L")}
    return _PROGRAMS[key].run(X=x, L=lens, **zeros)


@SETTINGS
@given(lens=st.lists(st.sampled_from([1, 3, 8, 15, 16, 17, 33, 40]), min_size=BATCH,
                     max_size=BATCH), seed=st.integers(0, 2**16))
def test_embedded_partial_tiles_match_the_textual_program_and_numpy(lens, seed):
    # small integers: every sum is exact, so every target and formula agrees bit for bit
    x = np.random.default_rng(seed).integers(-8, 9, (BATCH, S, D)).astype(np.float32)
    L = np.array(lens, np.int32)
    outs = [run_embedded("cpu_sim", x, L), run_embedded("ref", x, L),
            run_textual("cpu_sim", x, L), run_textual("ref", x, L)]
    for other in outs[1:]:
        for name in outs[0]:
            np.testing.assert_array_equal(other[name], outs[0][name], err_msg=name)
    out = outs[0]
    for b, n in enumerate(lens):
        xb = x[b, :n]
        np.testing.assert_array_equal(out["MX"][b, :n, 0], xb.max(axis=1))  # -inf pad unseen
        np.testing.assert_array_equal(out["SM"][b, :n, 0], xb.sum(axis=1) / D)
        np.testing.assert_array_equal(out["N"][b, :n, 0],
                                      np.minimum(16, n - np.arange(n) // 16 * 16))
        np.testing.assert_array_equal(out["N"][b, :n, 1], D)
        np.testing.assert_array_equal(out["XT"][b, :, :n], xb.T * 2)
        for name in ("MX", "SM", "N"):
            assert not out[name][b, n:].any(), name  # a store writes only the view
        assert not out["XT"][b, :, n:].any()
        # acc: a [1, min(8, n)] view (0s), padded with 1.5 when partial (rowmax sees it), plus
        # each tile's column sums
        for t in range(-(-n // 16)):
            want = xb[t * 16: t * 16 + 16].sum(axis=0)[:min(8, n)] + (1.5 if n < 8 else 0.0)
            np.testing.assert_array_equal(out["ACC"][b, t, :min(8, n)], want)
            assert not out["ACC"][b, t, min(8, n):].any()


def line_of(marker: str) -> int:
    return next(i + 1 for i, text in enumerate(LINES) if text.rstrip().endswith(f"# E:{marker}"))


def test_a_pad_on_an_out_parameter_is_the_checkers_error_at_the_python_line():
    @kernel
    def bad(x: In[Tile[4, 4, F32]], y: Out[Tile[4, 4, F32], Pad(0.0)]):  # E:pad-out
        pto.store(y, x)

    X, Y = Tensor(data=np.zeros((4, 4), np.float32)), Tensor(data=np.zeros((4, 4), np.float32))

    @workload
    def w():
        bad(x=X, y=Y)

    with pytest.raises(ptowsp.WspError) as info:
        w().compile(target="ref")
    assert any(d.span.file == str(HERE) and d.span.line == line_of("pad-out")
               for d in info.value.diagnostics), str(info.value)


def test_a_pad_that_is_not_a_number_is_a_kernel_error():
    @kernel
    def bad(x: In[Tile[4, 4, F32], Pad("zero")], y: Out[Tile[4, 4, F32]]):  # E:pad-str
        pto.store(y, x)

    with pytest.raises(KernelError) as info:
        bad.trace()
    assert "a pad is a number or a bool, not 'zero'" in str(info.value)
    assert f"{HERE}:{line_of('pad-str')}:" in str(info.value)


def test_only_a_pad_may_follow_the_tile():
    @kernel
    def bad(x: In[Tile[4, 4, F32], 0.0], y: Out[Tile[4, 4, F32]]):  # E:pad-bare
        pto.store(y, x)

    with pytest.raises(KernelError) as info:
        bad.trace()
    assert "after the tile, a tile parameter takes only its pad" in str(info.value)
    assert f"{HERE}:{line_of('pad-bare')}:" in str(info.value)


def test_a_transposed_view_that_does_not_fit_is_reported_at_the_argument():
    @kernel
    def cp(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
        pto.store(y, x)

    X, Y = Tensor(data=np.zeros((4, 8), np.float32)), Tensor(data=np.zeros((4, 8), np.float32))

    @workload
    def w():
        cp(x=X.T, y=Y)  # E:transposed

    with pytest.raises(TypeCheckError) as info:
        w().compile(target="ref")
    assert "`x = X.T` is a [8, 4] view but `x` takes Tile[4, 8, f32]" in str(info.value)
    assert f"{HERE}:{line_of('transposed')}:" in str(info.value)
