"""Accuracy checks for the tests that compare numbers, element by element.

An end-to-end comparison bounded by the largest error over the largest value (`max |a - b| /
max |b|`) cannot see a small element that is far off: its error hides under the scale of the
big ones. Every element is held to its own bound instead:

    |actual - expected| <= rtol * |expected| + atol

`atol` is for the elements near 0 only: where terms of a sum cancel, an element carries the
absolute rounding error of its terms, which is arbitrarily large relative to itself. It is
sized from the terms' magnitude (a small multiple of the working precision times the largest
term), never from the result's largest value, so it is negligible for every element that is
not near 0. The ulp tests (tests/backends/test_transcendentals.py,
tests/ascend/test_transcendentals.py, tests/backends/test_cpu_kernels.py) bound each
transcendental in ulps: what an end-to-end comparison cannot resolve.
"""

from __future__ import annotations

import numpy as np

# unit roundoff (half an ulp at 1) of each float type
UNIT = {"f16": 2.0**-11, "bf16": 2.0**-8, "f32": 2.0**-24, "f64": 2.0**-53}
MANTISSA = {"f16": 10, "bf16": 7, "f32": 23, "f64": 52}
MIN_EXPONENT = {"f16": -14, "bf16": -126, "f32": -126, "f64": -1022}


def assert_close(actual, expected, *, rtol: float, atol=0.0, what: str = "") -> None:
    """Every element within rtol of its expected value (plus atol, an array or a number, for
    the elements near 0); NaN where NaN is expected, equal infinities where they are expected.
    The message names the worst elements and the rtol they would need."""
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    assert a.shape == e.shape, (what, a.shape, e.shape)
    atol = np.broadcast_to(np.asarray(atol, np.float64), e.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(a - e)
        bound = rtol * np.abs(e) + atol
        ok = (a == e) | (np.isnan(a) & np.isnan(e)) | (diff <= bound)
    if ok.all():
        return
    bad = np.argwhere(~ok)
    worst = sorted(bad.tolist(), key=lambda i: -float(diff[tuple(i)] - bound[tuple(i)]))[:5]
    lines = [f"  at {tuple(i)}: got {a[tuple(i)]!r}, expected {e[tuple(i)]!r}, "
             f"|diff| {diff[tuple(i)]:.3g} > {bound[tuple(i)]:.3g} "
             f"(needs rtol {(diff[tuple(i)] - atol[tuple(i)]) / max(abs(e[tuple(i)]), 1e-300):.3g})"
             for i in worst]
    raise AssertionError(f"{what}: {len(bad)} of {e.size} elements off "
                         f"(rtol {rtol:g}):\n" + "\n".join(lines))


def used(actual, expected, *, rtol: float, atol=0.0) -> float:
    """The largest fraction of its bound an element's error uses (what assert_close checks is
    <= 1): for reports of how much room a comparison leaves."""
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.abs(a - e) / (rtol * np.abs(e) + atol)
    r = np.where((a == e) | (np.isnan(a) & np.isnan(e)), 0.0, r)
    return float(np.nan_to_num(r, nan=np.inf).max(initial=0.0))


def ulp_of(x, dt: str) -> np.ndarray:
    """The spacing of dt at |x| (the subnormal spacing at least)."""
    x = np.abs(np.asarray(x, np.float64))
    e = np.floor(np.log2(np.where(x > 0, x, 1.0)))
    e = np.maximum(np.where(x > 0, e, MIN_EXPONENT[dt]), MIN_EXPONENT[dt])
    return 2.0 ** (e - MANTISSA[dt])


def ulp_errors(actual, reference, dt: str) -> np.ndarray:
    """|actual - reference| in ulps of dt at the reference (float64 reference, actual in any
    float type); 0 where both are the same NaN or infinity, inf where only one is."""
    a = np.asarray(actual, np.float64)
    r = np.asarray(reference, np.float64)
    same = (a == r) | (np.isnan(a) & np.isnan(r))
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(a - r) / ulp_of(r, dt)
    err = np.where(same, 0.0, err)
    return np.where(np.isnan(err), np.inf, err)


def assert_ulps(actual, reference, dt: str, ulps, what: str = "", inputs=None,
                atol: float = 0.0) -> float:
    """Every element within `ulps` (a number or an array) of dt of the float64 reference, or
    within `atol` of it (for results below the smallest normal number, where a function may
    lose the subnormal spacing); returns the largest error in ulps. The message shows the
    worst inputs."""
    err = ulp_errors(actual, reference, dt)
    with np.errstate(invalid="ignore"):
        err = np.where(np.abs(np.asarray(actual, np.float64) - np.asarray(reference, np.float64))
                       <= atol, 0.0, err)
    limit = np.broadcast_to(np.asarray(ulps, np.float64), err.shape)
    bad = err > limit
    if bad.any():
        idx = np.argsort(-(err - limit), axis=None)[:5]
        shown = [(None if inputs is None else float(np.ravel(inputs)[i]),
                  float(np.ravel(actual)[i]), float(np.ravel(reference)[i]),
                  float(np.ravel(err)[i])) for i in idx]
        raise AssertionError(f"{what}: {int(bad.sum())} elements over the bound "
                             f"(max {float(err.max()):.2f} ulp); (input, got, reference, ulp): "
                             f"{shown}")
    return float(err.max(initial=0.0))
