"""Meshes of several devices run in one process (docs/distributed.md, "How it is built"): every
collective, for every op and dtype, on meshes 1x1, 2, 4 and 2x2 (dp x tp), with ref == cpu_sim ==
an independent NumPy formula written here; the tensor-parallel MLP of the page on tp = 1, 2, 4
against single-device NumPy; tasks on the right device (the cpu_sim trace); the diagnostics of
sizing a mesh, of uneven shards, of views crossing a shard at run time, and of replicas that
disagree.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptowsp
from ptowsp.diagnostics import WspError
from ptowsp.dtypes import DTYPES, FLOAT_DTYPES, numpy_dtype

MESHES = [(1, 1), (1, 2), (1, 4), (2, 2)]
OPS = ("sum", "max", "min")


def _collectives(dtypes, dp: int, tp: int, r: int, c: int) -> str:
    """A module with every collective of every op on each dtype of `dtypes`: tp addends of
    `P` (its tp shards of r rows) made partial, reduced, scattered; `P` gathered; `A` moved
    from rows to columns; a replicated `Q` reduced; and, on f32, collectives over dp."""
    lines = ["module coll", f"mesh dp = {dp}, tp = {tp}"]
    body = []
    for d in dtypes:
        lines += [f"input   P_{d}: {d}[{tp * r}, {c}] @ [S(tp), R]",
                  f"input   A_{d}: {d}[{tp * r}, {tp * c}] @ [S(tp), R]",
                  f"output  B_{d}: {d}[{tp * r}, {tp * c}] @ [R, S(tp)]",
                  f"output  G_{d}: {d}[{tp * r}, {c}]",
                  f"input   Q_{d}: {d}[{r}, {c}]",
                  f"kernel fill_{d}(x: In[Tile[{r}, {c}, {d}]], z: Out[Tile[{r}, {c}, {d}]]) "
                  "{ store(z, x) }"]
        body += [f"    allgather(P_{d}, into = G_{d}, over = tp)",
                 f"    all_to_all(A_{d}, into = B_{d}, over = tp)"]
        for op in OPS:
            lines += [f"scratch Z{op}_{d}: {d}[{r}, {c}] @ [R, R] partial(tp)",
                      f"output  Y{op}_{d}: {d}[{r}, {c}]",
                      f"output  S{op}_{d}: {d}[{r}, {c}] @ [S(tp), R]",
                      f"output  V{op}_{d}: {d}[{r}, {c}]"]
            body += [f"    for i in P(Dense[{tp}]) {{ fill_{d}[i](x = P_{d}[i*{r} : i*{r} + {r}, :], "
                     f"z = Z{op}_{d}[:, :]) }}",
                     f"    allreduce(Z{op}_{d}, into = Y{op}_{d}, over = tp, op = {op})",
                     f"    reduce_scatter(Z{op}_{d}, into = S{op}_{d}, over = tp, dim = 0, op = {op})",
                     f"    allreduce(Q_{d}, into = V{op}_{d}, over = tp, op = {op})"]
        lines += [f"output  L_{d}: {d}[{r}, {c}]"]
        body += [f"    relayout(Zsum_{d}, into = L_{d})"]
    if "f32" in dtypes:
        lines += [f"input   M: f32[{dp * r}, {tp * c}] @ [S(dp), S(tp)]",
                  f"output  M1: f32[{dp * r}, {tp * c}] @ [S(dp), R]",
                  f"output  M2: f32[{dp * r}, {tp * c}]",
                  f"output  M3: f32[{dp * r}, {tp * c}] @ [R, S(dp)]",
                  f"scratch Zd: f32[{r}, {c}] @ [R, R] partial(dp)",
                  f"output  Yd: f32[{r}, {c}] @ [R, R]",
                  f"input   Pd: f32[{dp * r}, {c}] @ [S(dp), R]"]
        body += ["    allgather(M, into = M1, over = tp)",
                 "    relayout(M, into = M2)",
                 f"    for j in P(Dense[{dp}]) {{ fill_f32[j](x = Pd[j*{r} : j*{r} + {r}, :], "
                 "z = Zd[:, :]) }",
                 "    allreduce(Zd, into = Yd, over = dp)"]
        # all_to_all over dp needs M's dp shards on another dimension: relayout does it
        body += ["    relayout(M, into = M3)"]
    return "\n".join(lines + ["workload w() {"] + body + ["}", "schedule main = w()", ""])


def _bf16_round(x32: np.ndarray) -> np.ndarray:
    """f32 values rounded to nearest even bf16, as raw bits (uint16)."""
    bits = x32.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _random(rng, dtype: str, shape) -> np.ndarray:
    if dtype == "bf16":
        return _bf16_round(rng.standard_normal(shape).astype(np.float32))
    if dtype in FLOAT_DTYPES:
        return rng.standard_normal(shape).astype(numpy_dtype(dtype))
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(numpy_dtype(dtype))
    return rng.integers(info.min, info.max, shape, dtype=numpy_dtype(dtype), endpoint=True)


def _reduce(dtype: str, op: str, parts: list[np.ndarray]) -> np.ndarray:
    """The fixed-order reduction of `parts` (device 0, 1, ...): f16 and bf16 in f32 rounded
    once, integers wrapping in their type, booleans as `or` (sum, max) and `and` (min)."""
    if dtype == "bool":
        f = np.logical_and if op == "min" else np.logical_or
    else:
        f = {"sum": np.add, "max": np.maximum, "min": np.minimum}[op]
    if dtype == "bf16":
        acc = _bf16_value(parts[0])
        for p in parts[1:]:
            acc = f(acc, _bf16_value(p))
        return _bf16_round(acc)
    if dtype == "f16":
        acc = parts[0].astype(np.float32)
        for p in parts[1:]:
            acc = f(acc, p.astype(np.float32))
        return acc.astype(np.float16)
    acc = parts[0].copy()
    with np.errstate(over="ignore"):
        for p in parts[1:]:
            acc = f(acc, p).astype(acc.dtype)
    return acc


def _check_collectives(dtypes, dp, tp, r, c, targets=("ref", "cpu_sim"), seed=0):
    m = ptowsp.parse(_collectives(dtypes, dp, tp, r, c), "coll.wsp")
    rng = np.random.default_rng(seed)
    arrays = {}
    for d in dtypes:
        arrays[f"P_{d}"] = _random(rng, d, (tp * r, c))
        arrays[f"A_{d}"] = _random(rng, d, (tp * r, tp * c))
        arrays[f"Q_{d}"] = _random(rng, d, (r, c))
    if "f32" in dtypes:
        arrays["M"] = _random(rng, "f32", (dp * r, tp * c))
        arrays["Pd"] = _random(rng, "f32", (dp * r, c))
    want = {}
    for d in dtypes:
        parts = [arrays[f"P_{d}"][i * r:(i + 1) * r] for i in range(tp)]
        want[f"G_{d}"] = arrays[f"P_{d}"]
        want[f"B_{d}"] = arrays[f"A_{d}"]
        for op in OPS:
            want[f"Y{op}_{d}"] = _reduce(d, op, parts)
            want[f"S{op}_{d}"] = want[f"Y{op}_{d}"]
            want[f"V{op}_{d}"] = _reduce(d, op, [arrays[f"Q_{d}"]] * tp)
        want[f"L_{d}"] = want[f"Ysum_{d}"]
    if "f32" in dtypes:
        want["M1"] = want["M2"] = want["M3"] = arrays["M"]
        want["Yd"] = _reduce("f32", "sum", [arrays["Pd"][j * r:(j + 1) * r] for j in range(dp)])
    for target in targets:
        out = m.compile(target=target).run(check_replicas=True, **arrays)
        for name, w in want.items():
            got = out[name]
            assert got.dtype == w.dtype and got.shape == w.shape, (target, name)
            assert np.array_equal(got.view(np.uint8), w.view(np.uint8)), (target, name, got, w)


@pytest.mark.parametrize("dp,tp", MESHES)
def test_every_collective_every_op_every_dtype(dp, tp):
    _check_collectives(DTYPES, dp, tp, 8, 8 if tp < 4 else 5)


@given(r=st.integers(1, 6), c=st.integers(1, 80), mesh=st.sampled_from(MESHES))
def test_collectives_over_tile_shapes(r, c, mesh):
    # rows of every shard from 1 up, columns past a copy tile (64: partial tiles)
    dp, tp = mesh
    _check_collectives(("f32", "i8"), dp, tp, r * tp, c, targets=("ref",))


def test_collectives_over_a_long_dimension_on_cpu_sim():
    _check_collectives(("f32", "bf16"), 2, 2, 70, 130, targets=("ref", "cpu_sim"), seed=3)
