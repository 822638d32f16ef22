"""Integer division in workload scalar expressions (language.md section 6): `/` floors, `%`
takes the divisor's sign, `ceildiv` rounds up, on `ref` (checked against NumPy here) and on
`cpu_sim` (checked against ref); and a divisor that is zero when the expression is evaluated
is a run-time error at the divisor, naming the expression as written, the same on both
targets: in a task's scalar argument, a loop extent, a view, a slot value and a `when`
predicate, over run-time values (tensor elements) and over syms alone. A division that `and`
/ `or` skips is never evaluated; a schedule key, which no statement evaluates, may only divide
by a divisor proved nonzero. The AICPU expander reports the same error
(tests/ascend/test_expander.py, `test_a_zero_divisor_is_the_same_error`).
"""

from __future__ import annotations

import numpy as np
import pytest

import ptowsp
from ptowsp.diagnostics import WspError

from .test_ref_dynamic import line_col

pytestmark = pytest.mark.usefixtures("wspc_cache")

TARGETS = ("ref", pytest.param("cpu_sim", marks=pytest.mark.cc))

# every way to divide, as a task's scalar argument: element b of the result is
# `EXPR` with n = N and d = L[b]
DIVIDE = """\
sym N
input  L: i32[4]
output Y: i32[4, 8]
kernel put(y: Out[Tile[1, 8, i32]], s: Scalar[i32]) {{ store(y, s) }}
workload w() {{
    for b in P(4) {{
        put(y = Y[b], s = {expr})
    }}
}}
"""
FORMS = {
    "N / L[b]": lambda n, d: n // d,
    "N % L[b]": lambda n, d: n % d,
    "ceildiv(N, L[b])": lambda n, d: -(-n // d),
    "(N - 9) / L[b] + 1": lambda n, d: (n - 9) // d + 1,
}

_COMPILED: dict = {}


def compiled(text: str, target: str):
    key = (text, target)
    if key not in _COMPILED:
        _COMPILED[key] = ptowsp.parse(text, "t.wsp").compile(target=target)
    return _COMPILED[key]


def error(text: str, target: str, bind: dict, arrays: dict):
    with pytest.raises(WspError) as info:
        compiled(text, target).run(bind=bind, **arrays)
    (d,) = info.value.diagnostics
    return d


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("expr", list(FORMS))
def test_division_by_run_time_values(target, expr):
    text = DIVIDE.format(expr=expr)
    for n, lens in ((7, [1, -3, 2, 5]), (0, [-1, 4, -7, 1]), (23, [-4, -5, 6, 7])):
        got = compiled(text, target).run(bind={"N": n}, L=np.array(lens, np.int32))["Y"]
        want = np.array([FORMS[expr](n, d) for d in lens], np.int32)
        np.testing.assert_array_equal(got, np.repeat(want[:, None], 8, 1), err_msg=f"{n} {lens}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("expr", list(FORMS))
def test_a_zero_divisor_in_a_scalar_argument(target, expr):
    text = DIVIDE.format(expr=expr)
    d = error(text, target, {"N": 7}, {"L": np.array([1, 0, 2, 5], np.int32)})
    assert (d.span.line, d.span.col) == line_col(text, "L[b]")
    assert d.message == (f"division by zero in `{expr.removesuffix(' + 1')}`: `L[b]` must not "
                         "be zero, found 0 (at b=1)")


# a divisor over syms alone, in a loop extent (no tensor element is read)
EXTENT = """\
sym N, M
input  X: f32[4, 8]
output Y: f32[4, 8]
kernel copy(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x) }
workload w() {
    for i in P(N / M) {
        copy(x = X[i % 4], y = Y[i % 4])
    }
}
"""


@pytest.mark.parametrize("target", TARGETS)
def test_a_zero_divisor_in_a_loop_extent(target):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    got = compiled(EXTENT, target).run(bind={"N": 9, "M": 3}, X=x)["Y"]
    np.testing.assert_array_equal(got[:3], x[:3])
    d = error(EXTENT, target, {"N": 4, "M": 0}, {"X": x})
    assert (d.span.line, d.span.col) == line_col(EXTENT, "M)")
    assert d.message == "division by zero in `N / M`: `M` must not be zero, found 0"


# divisors in module-level axes, over syms alone: reported at the divisor as the declaration
# writes it, where a loop uses the axis (directly, through `axis a = b`, or as an argument)
AXES = """\
sym N, M
axis rows = DenseDyn((N + 1) / (2 * M))
axis more = N % (M - 1)
axis same = rows
input  X: f32[4, 8]
output Y: f32[4, 8]
kernel copy(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x) }
workload w() { for i in P(rows) { copy(x = X[i % 4], y = Y[i % 4]) } }
workload u() { for i in P(same) { copy(x = X[i % 4], y = Y[i % 4]) } }
workload v(a: DenseDyn) { for i in P(a) { copy(x = X[i % 4], y = Y[i % 4]) } }
schedule main = w()
schedule alias = u()
schedule other = v(more)
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("schedule, ok, zero, expr, divisor", [
    ("main", 1, 0, "(N + 1) / (2 * M)", "2 * M"), ("alias", 1, 0, "(N + 1) / (2 * M)", "2 * M"),
    ("other", 3, 1, "N % (M - 1)", "M - 1")])
def test_a_zero_divisor_in_a_declared_axis(target, schedule, ok, zero, expr, divisor):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    p = ptowsp.parse(AXES, "t.wsp").compile(target=target, schedule=schedule)
    np.testing.assert_array_equal(p.run(bind={"N": 3, "M": ok}, X=x)["Y"][:1], x[:1])
    with pytest.raises(WspError) as info:
        p.run(bind={"N": 3, "M": zero}, X=x)
    (d,) = info.value.diagnostics
    assert (d.span.line, d.span.col) == line_col(AXES, divisor)
    assert d.message == f"division by zero in `{expr}`: `{divisor}` must not be zero, found 0"


# divisors in a view, a slot value and a `when` predicate, each zero for one b
PLACES = """\
sym N
input  L: i32[4]
input  X: f32[4, 8]
output Y: f32[4, 8]
output Z: f32[4, 8]
kernel copy(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x) }
workload w() {
    for b in P(4) {
        when b == 0 { copy(x = X[N / L[0] % 4], y = Y[0]) }
        when b == 1 { slot_set(0, N % L[1]) }
        when b == 2 and N / L[2] > 0 { copy(x = X[slot(0) % 4], y = Z[2]) }
    }
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("zero, expr, divisor", [
    (0, "N / L[0]", "L[0]"), (1, "N % L[1]", "L[1]"), (2, "N / L[2]", "L[2]")])
def test_a_zero_divisor_in_a_view_a_slot_and_a_predicate(target, zero, expr, divisor):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    lens = np.array([3, 5, 2, 1], np.int32)
    out = compiled(PLACES, target).run(bind={"N": 7}, L=lens, X=x)
    np.testing.assert_array_equal(out["Y"][0], x[7 // 3 % 4])
    np.testing.assert_array_equal(out["Z"][2], x[7 % 5 % 4])
    lens[zero] = 0
    d = error(PLACES, target, {"N": 7}, {"L": lens, "X": x})
    assert (d.span.line, d.span.col) == line_col(PLACES, divisor)
    assert d.message == (f"division by zero in `{expr}`: `{divisor}` must not be zero, "
                         f"found 0 (at b={zero})")


# `and` / `or` evaluate their right side only when the left side does not decide
GUARDED = """\
sym N, M
output Y: i32[2, 8]
kernel put(y: Out[Tile[1, 8, i32]], s: Scalar[i32]) { store(y, s) }
workload w() {
    when M > 0 and N / M > 1 { put(y = Y[0], s = N / M) } otherwise { put(y = Y[0], s = -1) }
    when M == 0 or N % M == 0 { put(y = Y[1], s = 1) } otherwise { put(y = Y[1], s = N % M) }
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("n, m, want", [(7, 0, (-1, 1)), (7, 2, (3, 1)), (7, 7, (-1, 1)),
                                        (8, 3, (2, 2))])
def test_a_division_that_and_or_skip_is_not_evaluated(target, n, m, want):
    got = compiled(GUARDED, target).run(bind={"N": n, "M": m})["Y"]
    np.testing.assert_array_equal(got[:, 0], want)


KEYED = """\
sym M
input  X: f32[4, 8]
output Y: f32[4, 8]
kernel copy(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x) }
workload w() { for b in P(4) { copy[b](x = X[b], y = Y[b]) } }
schedule main = w().dispatch(dispatch_by(KEY, n = 2))
"""


def test_a_schedule_key_divides_only_by_a_divisor_proved_nonzero():
    text = KEYED.replace("KEY", "b / M")
    with pytest.raises(WspError) as info:
        ptowsp.parse(text, "t.wsp").compile(target="ref")
    (d,) = info.value.diagnostics
    assert (d.span.line, d.span.col) == line_col(text, "M, n")
    assert d.message.startswith("dividing by `M` in a schedule key (`b / M`), which may be "
                                "zero, ")
    for key in ("b / (M + 1)", "b % 3", "ceildiv(b, 2)"):
        ptowsp.parse(KEYED.replace("KEY", key), "t.wsp").compile(target="ref")


# the one quotient past int64: INT64_MIN / -1 (C's `/` traps there, SIGFPE on x86)
WIDE = """\
input  L: i64[4]
output Y: i64[4, 8]
kernel put(y: Out[Tile[1, 8, i64]], s: Scalar[i64]) {{ store(y, s) }}
workload w() {{
    for b in P(4) {{
        put(y = Y[b], s = {expr})
    }}
}}
"""
WIDE_FORMS = {
    "L[0] / L[b]": lambda n, d: n // d,
    "L[0] % L[b]": lambda n, d: n % d,
    "ceildiv(L[0], L[b])": lambda n, d: -(-n // d),
}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("expr", list(WIDE_FORMS))
def test_int64_min_divided_by_minus_one_wraps(target, expr):
    """2**63 wraps to INT64_MIN, as a scalar argument's value past int64 does (and as the tile
    division of wsp_kernels.h): no crash, the same value on both targets."""
    lo = -2**63
    lens = np.array([lo, -1, 3, -7], np.int64)
    got = compiled(WIDE.format(expr=expr), target).run(L=lens)["Y"][:, 0]
    want = [(WIDE_FORMS[expr](lo, int(d)) + 2**63) % 2**64 - 2**63 for d in lens]
    np.testing.assert_array_equal(got, np.array(want, np.int64))


@pytest.mark.parametrize("target", TARGETS)
def test_an_axis_whose_extent_is_a_bare_sym(target):
    """`axis rows = N` (or `(N)`): the axis-divisor walk follows axis names only, not a sym's
    (before: KeyError, exit 70, found by `make fuzz`)."""
    text = """\
sym N
output Y: i32[N, 8]
kernel put(y: Out[Tile[1, 8, i32]], s: Scalar[i32]) { store(y, s) }
axis rows = (N)
workload w() { for r in P(rows) { put(y = Y[r], s = r * 2) } }
"""
    y = compiled(text, target).run(bind={"N": 3})["Y"]
    np.testing.assert_array_equal(y, np.repeat(np.arange(3, dtype=np.int32)[:, None] * 2, 8, axis=1))
