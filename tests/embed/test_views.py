"""Views in the embedding, NumPy's way (issue 19, docs/python.md "Views"): `...`, slices with a
step on any dimension (the `.wsp` strided view: reads and writes) and indexing a view again
(offsets add, steps multiply).

Each view is checked on cpu_sim and ref against NumPy applying the very same subscripts to the
array; hypothesis draws chains of subscripts. Errors are at the user's line (`# E:name`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pto_wsp import (
    CompileError,
    Dense,
    DType,
    ExecutionError,
    In,
    Out,
    P,
    Tensor,
    Tile,
    kernel,
    pto,
    to_wsp,
    workload,
)

from . import helpers

pytestmark = pytest.mark.usefixtures("wspc_cache")

F32 = DType.F32
line_of, at = helpers.markers(__file__)
SHAPE = (2, 3, 40, 8)  # [batch, heads, rows, columns]
XN = np.arange(np.prod(SHAPE), dtype=np.float32).reshape(SHAPE)


@kernel
def copy(x: In[Tile[16, 8, F32]], y: Out[Tile[16, 8, F32]]):
    pto.store(y, x)


def _run(build, outputs: int) -> list:
    """The outputs of the workload `build(X, Ys)` makes, on ref and on cpu_sim (equal)."""
    got = []
    for target in ("ref", "cpu_sim"):
        ys = [np.zeros((16, 8), np.float32) for _ in range(outputs)]
        X, Ys = Tensor(data=XN.copy()), [Tensor(data=y) for y in ys]
        p = build(X, Ys).compile(target=target)
        p.execute()
        p.synchronize()
        got.append(ys)
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)
    return got[0]


def _padded(view: np.ndarray) -> np.ndarray:
    """What `copy` stores from a partial view: the view, zeros past it."""
    out = np.zeros((16, 8), np.float32)
    v = view.reshape(-1, view.shape[-1]) if view.ndim > 1 else view[None, :]
    out[:v.shape[0], :v.shape[1]] = v
    return out


def _apply(base, subs: list):
    for s in subs:
        base = base[s]
    return base


@st.composite
def chains(draw):
    """Subscript chains down to a [1..16, 1..8] view: the leading indices in one of NumPy's
    spellings, then row slices (steps 1-4) and column slices (steps 1-3), each inside the view
    so far, and sometimes an integer picking one row."""
    b, h = draw(st.integers(0, 1)), draw(st.integers(0, 2))
    subs = draw(st.sampled_from([[(b, h)], [b, h], [(b, Ellipsis), h], [(b, h, Ellipsis)],
                                 [(Ellipsis,), (b, h, slice(None), slice(None))]]))
    rows, cols = SHAPE[2], SHAPE[3]
    for _ in range(draw(st.integers(0, 3))):
        a = draw(st.integers(0, rows - 1))
        e = draw(st.integers(a + 1, rows))
        k = draw(st.integers(1, 4))
        n = -(-(e - a) // k)
        if draw(st.booleans()) and cols > 1:
            c0 = draw(st.integers(0, cols - 1))
            c1 = draw(st.integers(c0 + 1, cols))
            kc = draw(st.integers(1, 3))
            subs.append((slice(a, e, k), slice(c0, c1, kc)))
            cols = -(-(c1 - c0) // kc)
        else:
            subs.append(draw(st.sampled_from([slice(a, e, k), (slice(a, e, k), Ellipsis)])))
        rows = n
    if draw(st.booleans()) and not draw(st.booleans()):  # one row of the view: a [1, N] tile
        subs.append(draw(st.integers(0, rows - 1)))
    elif rows > 16:
        subs.append(slice(0, 16))
    return subs


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(chains())
def test_composed_views_match_numpy_on_both_targets(subs):
    def build(X, Ys):
        @workload
        def views():
            copy(x=_apply(X, subs), y=Ys[0])

        return views()

    (y,) = _run(build, 1)
    np.testing.assert_array_equal(y, _padded(_apply(XN, subs)))


def test_spellings_and_their_wsp_text():
    X = Tensor(data=XN)
    assert str(X[1][2]) == str(X[1, 2]) == str(X[1, ...][2]) == str(X[1][2, ...][...])
    assert str(X[1][2][4:30][1:20]) == str(X[1, 2, 5:24])
    assert str(X[1, 2, 8:40, :][2:6, 1:3]) == str(X[1, 2, 10:14, 1:3])
    assert str(X[1, 2, 8:40][3]) == str(X[1, 2, 11])
    assert X[1].shape == (3, 40, 8) and X[1, 2, 0:31:2].shape == (16, 8)
    assert X[..., 0:4].shape == (2, 3, 40, 4) and X[0, 0, 4:30][1:20:3, 2:5].shape == (7, 3)


def test_run_time_starts_compose_and_step():
    """Loop variables in the bounds: the gather's index row and offset are run-time values."""
    for target in ("ref", "cpu_sim"):
        yn = np.zeros((2, 16, 8), np.float32)
        X, Y = Tensor(data=XN), Tensor(data=yn)

        @workload
        def moving(X=X, Y=Y):
            for i in P(Dense[2]()):
                copy[i](x=X[1, 0][i * 8: i * 8 + 30][i:i + 28:2], y=Y[i])

        p = moving().compile(target=target)
        p.execute()
        p.synchronize()
        for i in range(2):
            np.testing.assert_array_equal(yn[i], _padded(XN[1, 0][i * 8: i * 8 + 30][i:i + 28:2]))
    text = to_wsp(moving())
    assert "X[1, 0, i * 8 + i : i * 8 + (i + 28) : 2]" in text, text


@settings(max_examples=5, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10), st.integers(0, 14), st.integers(1, 16), st.integers(1, 4))
def test_a_run_time_offset_composes_with_a_literal_slice(s, a, n, k):
    """`X[1, 0][S[0] : S[0] + 30][a : a + n : k]`: the offset read from data at run time."""
    n = min(n, 30 - a)
    got = []
    for target in ("ref", "cpu_sim"):
        yn = np.zeros((16, 8), np.float32)
        X, Y, S = Tensor(data=XN), Tensor(data=yn), Tensor(data=np.array([s], np.int32))

        @workload
        def offset(X=X, Y=Y, S=S):
            copy(x=X[1, 0][S[0]:S[0] + 30][a:a + n:k], y=Y)

        p = offset().compile(target=target)
        p.execute()
        p.synchronize()
        got.append(yn)
    np.testing.assert_array_equal(got[0], got[1])
    np.testing.assert_array_equal(got[0], _padded(XN[1, 0][s:s + 30][a:a + n:k]))


def test_a_stepped_view_is_written_element_by_element():
    """`Y[0:32:2]` and `Y[1:32:2, 0:16:3]` as `Out`: the stepped elements get the tile, the
    skipped ones keep the caller's values (NumPy's assignment through the same subscripts)."""
    for target in ("ref", "cpu_sim"):
        yn = np.full((32, 16), -1.0, np.float32)
        zn = np.full((32, 16), -1.0, np.float32)
        X, Y, Z = Tensor(data=XN), Tensor(data=yn), Tensor(data=zn)

        @kernel
        def copy6(x: In[Tile[16, 6, F32]], y: Out[Tile[16, 6, F32]]):
            pto.store(y, x)

        @workload
        def w(X=X, Y=Y, Z=Z):
            copy6(x=X[0, 0, 0:16, 0:6], y=Y[0:32:2, 0:6])
            copy6(x=X[0, 1, 0:32:2, 2:8], y=Z[1:32:2, 0:16:3])

        p = w().compile(target=target)
        p.execute()
        p.synchronize()
        want_y = np.full((32, 16), -1.0, np.float32)
        want_y[0:32:2, 0:6] = XN[0, 0, 0:16, 0:6]
        want_z = np.full((32, 16), -1.0, np.float32)
        want_z[1:32:2, 0:16:3] = XN[0, 1, 0:32:2, 2:8]
        np.testing.assert_array_equal(yn, want_y, err_msg=target)
        np.testing.assert_array_equal(zn, want_z, err_msg=target)


def test_rows_past_the_end_of_a_run_time_stepped_view_are_an_execution_error():
    X = Tensor(data=XN)
    Y = Tensor(data=np.zeros((16, 8), np.float32))
    L = Tensor(data=np.array([44], np.int32))

    @workload
    def w():
        copy(x=X[0, 0, 4:L[0]:4], y=Y)  # E:past

    p = w().compile(target="ref")
    with pytest.raises(ExecutionError) as e:
        p.execute()
        p.synchronize()
    assert "slice end `L[0]` in `x = X[0, 0, 4 : L[0] : 4]` must be at most 40, found 44" \
        in at(e.value, "past")


def test_view_errors_are_at_the_users_line():
    X = Tensor(data=XN)
    pos = Tensor(data=np.array([3, 1, 4, 1], np.int32))
    L = Tensor(data=np.array([2], np.int32))
    assert X[0, 0, pos[0:4]].shape == (None, 8)  # a gather view: its rows are data
    cases = {
        "dots": (lambda: X[0, ..., ...], "a view has at most one `...`"),  # E:dots
        "many": (lambda: X[0, 0][1, 2, 3], "3 indices for a view with 2 dimensions left"),  # E:many
        "name": (lambda: X[0, 0, 0:16][L[0]:40], "the slice `L[0]:40` is out of range of a "  # E:name
                 "sliced dimension of length 16 (at 40)"),
        "none": (lambda: X[None], "`None` (a new axis) here has no integer index next to it"),  # E:none
        "neg": (lambda: X[0, 0, 4:20][-1], "index -1 into a sliced view is negative"),  # E:neg
        "idx": (lambda: X[0, 0, 4:20][16], "index 16 is out of range of a sliced dimension of "  # E:idx
                "length 16"),
        "sfl": (lambda: X[0, 0, 0:8:0.5], "a view's step is a Python integer, not 0.5"),  # E:sfl
        "s0": (lambda: X[0, 0, 8:0:-1], "a view's step must be at least 1, found -1"),  # E:s0
        "clip": (lambda: X[0, 0, 0:32][0:40], "the slice `0:40` is out of range of a sliced "  # E:clip
                 "dimension of length 32 (at 40)"),
        "p48": (lambda: X[0, 0, 0:48:2], "the slice `0:48:2` is out of range of a dimension "  # E:p48
                 "of length 40 (at 48)"),
        "negs": (lambda: X[0, 0, 4:20][-4:], "the start -4 of a view's slice is negative"),  # E:negs
        "gath": (lambda: X[0, 0, pos[0:4]][1], "gathers its rows by data: indexing it again "  # E:gath
                 "is not supported"),
    }
    for marker, (make, message) in cases.items():
        with pytest.raises(CompileError) as e:
            make()
        assert message in at(e.value, marker), marker


def test_a_step_on_any_dimension_reads_what_numpy_reads():
    """Steps on the columns, on a leading dimension (extent 1 after the step) and on both rows
    and columns, composed: each the `.wsp` strided view, equal to NumPy's subscripts."""
    views = [
        lambda X: X[0, 0, 0:16, 0:8:2],
        lambda X: X[0:2:2, 0, 0:16],
        lambda X: X[0, 0, 0:32:2][:, 0:8:2],
        lambda X: X[1, 0:3:2][1, 3:40:3, 1::3],
    ]
    for view in views:
        def build(X, Ys, view=view):
            @workload
            def w():
                copy(x=view(X), y=Ys[0])

            return w()

        (y,) = _run(build, 1)
        np.testing.assert_array_equal(y, _padded(view(XN)))
    # a stepped leading dimension indexed again is a plain index: X[0][0:3:2][1] is X[0, 2]
    assert str(X_[0][0:3:2][1, 0:16]) == str(X_[0, 2, 0:16])


X_ = Tensor(data=XN)


@kernel
def copy_row(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
    pto.store(y, x)


NEW_AXIS = [  # NumPy's `None`: an axis of extent 1, made of the integer index beside it
    lambda X: X[1, 2, 5, None, :],
    lambda X: X[1, 2][None, 5],
    lambda X: X[0][1, 7, None],
    lambda X: X[1, 2, 3:9][4][None],
    lambda X: X[1, ..., 3, None, :],
    lambda X: X[0, None, 1, 3:5],
]


@pytest.mark.parametrize("sub", range(len(NEW_AXIS)))
def test_none_adds_an_axis_of_one_as_numpy_does(sub):
    X = Tensor(data=XN)
    assert NEW_AXIS[sub](X).shape == NEW_AXIS[sub](XN).shape


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_views_with_none_pass_rows_as_one_row_tiles(target):
    X = Tensor(data=XN.copy())
    y = np.zeros((2, 3, 8), np.float32)
    Y = Tensor(data=y)

    @workload
    def rows():
        for b in P(2):
            for h in P(3):
                copy_row[b, h](x=X[b, h, 5 + h, None, :], y=Y[b][h][None])

    assert "copy_row[b, h](x = X[b, h, 5 + h : 5 + h + 1, :], y = Y[b, h : h + 1])" in \
        to_wsp(rows())
    p = rows().compile(target=target)
    p.execute()
    p.synchronize()
    want = np.stack([np.stack([XN[b, h, 5 + h, None, :][0] for h in range(3)]) for b in range(2)])
    np.testing.assert_array_equal(y, want)
