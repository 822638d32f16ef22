"""Integer overflow in workload scalar expressions over run-time values (language.md section
6): `+`, `-`, `*`, negation and `abs` whose value is past int64 are a run-time error at the
expression, naming it as written with the operands' values, on `ref` and on `cpu_sim` alike
(before, ref computed exact Python integers and cpu_sim's C wrapped or was undefined, so a
hostile index file made the two disagree: cpu_sim read `X[1]` where ref reported an index
past the tensor). Values within int64, up to its ends, are exact. Operations proved to fit
(a u8 element times 4) get no check. The AICPU expander reports the same error
(tests/ascend/test_expander.py, `test_an_overflow_is_the_same_error`).
"""

from __future__ import annotations

import numpy as np
import pytest

from .test_ref_dynamic import line_col
from .test_scalar_division import compiled, error  # one compile cache for both files

pytestmark = pytest.mark.usefixtures("wspc_cache")

TARGETS = ("ref", pytest.param("cpu_sim", marks=pytest.mark.cc))
MAX, MIN = 2**63 - 1, -2**63

# each form as a task's scalar argument: element b of the result is EXPR with S and L[b]
FORM = """\
sym S
input  L: i64[4]
output Y: i64[4, 8]
kernel put(y: Out[Tile[1, 8, i64]], s: Scalar[i64]) {{ store(y, s) }}
workload w() {{
    for b in P(4) {{
        put(y = Y[b], s = {expr})
    }}
}}
"""
FORMS = {  # expression: (its value, (S, L[1]) that overflow, what the message names)
    "L[b] * S": (lambda s, v: v * s, (3, 2**62), "`L[b]` and `S`"),
    "L[b] + S": (lambda s, v: v + s, (1, MAX), "`L[b]` and `S`"),
    "S - L[b]": (lambda s, v: s - v, (0, MIN), "`S` and `L[b]`"),
    "-L[b]": (lambda s, v: -v, (0, MIN), "`L[b]`"),
    "abs(L[b])": (lambda s, v: abs(v), (0, MIN), "`L[b]`"),
    "L[b] * 4 + 1": (lambda s, v: v * 4 + 1, (0, 2**61), "`L[b]`"),
}

@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("expr", list(FORMS))
def test_values_up_to_the_ends_of_int64_are_exact(target, expr):
    fn = FORMS[expr][0]
    text = FORM.format(expr=expr)
    for s, lens in ((5, [1, -3, 2**40, 7]), (1, [MAX - 1, 0, MIN + 1, MIN]),
                    (0, [2**61 - 1, MAX, -2**61, MIN + 1]), (2, [2**62 - 1, -2**62, MAX, -1])):
        lens = [v if MIN <= fn(s, v) <= MAX else 1 for v in lens]  # the ends that fit
        want = np.array([fn(s, v) for v in lens], np.int64)
        got = compiled(text, target).run(bind={"S": s}, L=np.array(lens, np.int64))["Y"]
        np.testing.assert_array_equal(got[:, 0], want, err_msg=f"{s} {lens}")


def _operands(expr: str, s: int, v: int) -> str:
    names = FORMS[expr][2]
    if names == "`L[b]` and `S`":
        return f"found {v} and {s}"
    if names == "`S` and `L[b]`":
        return f"found {s} and {v}"
    return f"found {v}"


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("expr", list(FORMS))
def test_a_value_past_int64_is_an_error_at_the_expression(target, expr):
    text = FORM.format(expr=expr)
    s, v = FORMS[expr][1]
    d = error(text, target, {"S": s}, {"L": np.array([1, v, 2, 3], np.int64)})
    whole = expr.removesuffix(" + 1")
    assert (d.span.line, d.span.col) == line_col(text, whole)
    assert d.message == (f"`{whole}` overflows int64 with {FORMS[expr][2]}, "
                         f"{_operands(expr, s, v)} (at b=1)")


# where cpu_sim and ref disagreed: a view index computed past int64 (C wrapped it to 1, a
# valid row), a loop extent (ref counted to 2**64, C to 0) and a slot
PLACES = """\
sym S
input  L: i64[4]
input  X: f32[4, 8]
output Y: f32[4, 8]
output Z: f32[4, 8]
kernel copy(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x) }
workload w() {
    for b in P(4) {
        when b == 0 { copy(x = X[L[0] * 4 + 1], y = Y[0]) }
        when b == 1 { for i in P(L[1] * S) { copy(x = X[i % 4], y = Y[1]) } }
        when b == 2 { slot_set(0, L[2] * S) }
        when b == 3 { copy(x = X[slot(0) % 4], y = Z[3]) }
    }
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("zero, expr, found", [
    (0, "L[0] * 4", f"found {2**62}"), (1, "L[1] * S", f"found {2**62} and 4"),
    (2, "L[2] * S", f"found {2**62} and 4")])
def test_a_view_a_loop_extent_and_a_slot(target, zero, expr, found):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    lens = np.array([0, 1, 3, 0], np.int64)
    out = compiled(PLACES, target).run(bind={"S": 4}, L=lens, X=x)
    np.testing.assert_array_equal(out["Y"][0], x[1])
    np.testing.assert_array_equal(out["Z"][3], x[12 % 4])
    lens[zero] = 2**62
    d = error(PLACES, target, {"S": 4}, {"L": lens, "X": x})
    assert (d.span.line, d.span.col) == line_col(PLACES, expr)
    names = "`L[0]`" if zero == 0 else f"`L[{zero}]` and `S`"
    assert d.message == f"`{expr}` overflows int64 with {names}, {found} (at b={zero})"


# proved to fit: no check is made (reading the IR), and the values are exact
PROVED = """\
sym S
input  L: u8[4]
input  K: i32[4]
output Y: i64[4, 8]
kernel put(y: Out[Tile[1, 8, i64]], s: Scalar[i64]) { store(y, s) }
workload w() { for b in P(4) { put(y = Y[b], s = L[b] * 4 + K[b] * S - L[b]) } }
"""


def test_only_what_may_overflow_is_checked():
    from ptowsp import driver
    from ptowsp.ir.printer import print_module

    text = print_module(driver.lower(driver.check_text(PROVED, "t.wsp")))
    checked = [line.split("# ")[1].rsplit(" @", 1)[0] for line in text.splitlines()
               if "overflows int64" in line]
    # `L[b] * 4` (a u8 times 4) fits; `K[b] * S` (S unbounded) and the sums over it may not
    assert checked == ["`K[b] * S` overflows int64 with `K[b]` and `S`",
                       "`L[b] * 4 + K[b] * S` overflows int64 with `L[b] * 4` and `K[b] * S`",
                       "`L[b] * 4 + K[b] * S - L[b]` overflows int64 with `L[b] * 4 + K[b] * S` "
                       "and `L[b]`"], text
    lens, ks = np.array([255, 0, 7, 1], np.uint8), np.array([-2**31, 2**31 - 1, 0, -5], np.int32)
    got = compiled(PROVED, "ref").run(bind={"S": 2**31}, L=lens, K=ks)["Y"][:, 0]
    want = [int(v) * 3 + int(k) * 2**31 for v, k in zip(lens, ks)]
    np.testing.assert_array_equal(got, np.array(want, np.int64))


# `and` / `or` evaluate their right side only when the left side does not decide: its
# overflow checks too (over elements and slots)
GUARDED = """\
sym S
input  L: i64[2]
output Y: i64[2, 8]
kernel put(y: Out[Tile[1, 8, i64]], s: Scalar[i64]) { store(y, s) }
workload w() {
    slot_set(0, L[1])
    when L[0] < 8 and L[0] * S > 0 { put(y = Y[0], s = 1) } otherwise { put(y = Y[0], s = 2) }
    when slot(0) >= 8 or slot(0) * S > 0 { put(y = Y[1], s = 1) } otherwise { put(y = Y[1], s = 2) }
}
"""


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lens, want", [([2**62, 2**62], (2, 1)), ([1, -1], (1, 2))])
def test_an_operation_that_and_or_skip_is_not_checked(target, lens, want):
    got = compiled(GUARDED, target).run(bind={"S": 4}, L=np.array(lens, np.int64))["Y"]
    np.testing.assert_array_equal(got[:, 0], want)
