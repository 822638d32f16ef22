"""Index maps on the AICore's vector unit (aicore/moves.py: `Gather` over byte offsets built by
vector instructions; vector.py's `copy_ok`: whole 32-byte blocks copied in words): slices and
concatenations off a 32-byte block, `slice_even` / `slice_odd`, `interleave`, `transpose` and
`gather_cols`,
and the row moves (`slice_rows`, `concat_rows`, `gather_rows`), in every element size the
language has, emitted at -O0 and -O2, compiled against the CPU Ascend C (its rule checks on:
Gather's byte offsets, alignment, 16- / 32-bit types only) and run on the host. Every output
equals a NumPy formula written here bit for bit (NaN and -0 in the float inputs: a move never
touches a value's bits), and equals ref's. A tile past the UB runs in row chunks, its offset
tensors counted in the kernel's UB plan.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.ascend import aicore
from ptowsp.ir.passes import optimize

from .ascendc_cpu import harness as H

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

DTYPES = ("f32", "f16", "bf16", "i8", "u8", "bool", "i16", "u16", "i32", "u32", "i64")
M, N, K = 5, 38, 11  # 38 columns: no slice or concatenation below falls on a 32-byte block


def moves(dt: str) -> str:
    """The Gather-backed ops (`mv_`) and the row moves (`rw_`) of one dtype."""
    return f"""
kernel mv_{dt}(x: In[Tile[{M}, {N}, {dt}]], y: In[Tile[{M}, {N}, {dt}]],
               c: In[Tile[{M}, {K}, i32]],
               sc: Out[Tile[{M}, {N - 3}, {dt}]], ev: Out[Tile[{M}, {N // 2}, {dt}]],
               od: Out[Tile[{M}, {N // 2}, {dt}]], il: Out[Tile[{M}, {2 * N}, {dt}]],
               cc: Out[Tile[{M}, {2 * N - 5}, {dt}]], gc: Out[Tile[{M}, {K}, {dt}]],
               tr: Out[Tile[{N}, {M}, {dt}]]) {{
    store(sc, x[:, 3:])
    store(ev, slice_even(x))
    store(od, slice_odd(y))
    store(il, interleave(x, y))
    store(cc, concat(x, y[:, 5:], axis = 1))
    store(gc, gather(x, c, axis = 1))
    store(tr, transpose(y))
}}
kernel rw_{dt}(x: In[Tile[{M}, {N}, {dt}]], y: In[Tile[{M}, {N}, {dt}]],
               r: In[Tile[3, 1, i32]],
               sr: Out[Tile[2, {N}, {dt}]], cr: Out[Tile[{2 * M}, {N}, {dt}]],
               gr: Out[Tile[3, {N}, {dt}]]) {{
    store(sr, x[1:3])
    store(cr, concat(x, y))
    store(gr, gather(x, r))
}}
"""


def interleave(a, b):
    out = np.empty((a.shape[0], 2 * a.shape[1]), a.dtype)
    out[:, 0::2], out[:, 1::2] = a, b
    return out


def take(x, idx, axis):
    """x at idx along `axis`, 0 where the index is out of range (every target's rule)."""
    n = x.shape[axis]
    ok = (idx >= 0) & (idx < n)
    safe = np.where(ok, idx, 0)
    if axis == 1:
        return np.where(ok, np.take_along_axis(x, safe, 1), np.zeros((), x.dtype))
    return np.where(ok, x[safe[:, 0]], np.zeros((), x.dtype))


def formula(name: str, v: dict) -> np.ndarray:
    x, y = v["x"], v["y"]
    return {
        "sc": lambda: x[:, 3:], "ev": lambda: x[:, 0::2], "od": lambda: y[:, 1::2],
        "il": lambda: interleave(x, y), "cc": lambda: np.concatenate((x, y[:, 5:]), axis=1),
        "gc": lambda: take(x, v["c"], 1), "tr": lambda: y.T, "sr": lambda: x[1:3],
        "cr": lambda: np.concatenate((x, y), axis=0), "gr": lambda: take(x, v["r"], 0),
    }[name]()


def _specials(arr: np.ndarray, dt: str, rng) -> None:
    """NaN (with a payload), +-inf and -0 among the float inputs' storage bits."""
    if dt not in ("f32", "f16", "bf16"):
        return
    bits = {"f32": [0x7FC12345, 0xFF800000, 0x80000000], "f16": [0x7E55, 0xFC00, 0x8000],
            "bf16": [0x7FC5, 0xFF80, 0x8000]}[dt]
    view = arr.view(np.uint32 if dt == "f32" else np.uint16)
    flat = view.reshape(-1)
    for b in bits:
        flat[rng.integers(0, flat.size)] = b


def _indices(shape, extent: int, rng) -> np.ndarray:
    out = np.array([-1, -extent, extent, extent + 7, -(2**31), 2**31 - 1], np.int64)
    inside = rng.integers(0, extent, shape)
    return np.where(rng.random(shape) < 0.6, inside,
                    out[rng.integers(0, len(out), shape)]).astype(np.int32)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return H.build_levels("".join(moves(dt) for dt in DTYPES), "moves",
                          tmp_path_factory.mktemp("aicore_moves"))


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


@pytest.mark.parametrize("level", (0, 2))
def test_moves_equal_the_formula_and_ref_in_every_element_size(lib, level):
    built, units = lib
    unit = units[level // 2]
    rng = np.random.default_rng(23 + level)
    for k in unit.kernels:
        for strided in (False, True):
            task = H.random_task(k, rng, strided=strided)
            for name in ("x", "y"):
                if name in task.inputs:
                    _specials(task.inputs[name], k.params[0].dtype, rng)
                    H.tile_view(task, k, name)[...] = task.inputs[name]
            for name, extent in (("c", N), ("r", M)):
                if name in task.inputs:
                    task.inputs[name][...] = _indices(task.inputs[name].shape, extent, rng)
                    H.tile_view(task, k, name)[...] = task.inputs[name]
            got = H.run_task(built, unit.name, k, task)
            what = f"-O{level} {k.name} (strided={strided})"
            for name, g in got.items():
                want = formula(name, task.inputs)
                np.testing.assert_array_equal(_bits(g), _bits(np.ascontiguousarray(want)),
                                              err_msg=f"{what}: {name} against the formula")
            H.compare(k, got, H.ref_outputs(k, task), what)


@pytest.mark.parametrize("dt", [d for d in DTYPES if d != "i64"])
def test_no_element_of_a_move_crosses_the_scalar_unit(lib, dt):
    """Up to 32-bit values, the moves kernel is vector work only: Gather, Copy, no GetValue /
    SetValue."""
    _, units = lib
    for unit in units:
        (k,) = [k for k in unit.kernels if k.name == f"mv_{dt}"]
        text = unit.files[aicore.header_path(k)]
        assert "AscendC::Gather(" in text
        assert "units: vector\n" in text or "units: vector;" in text, text[:1500]
        # bool's copy-in makes each input byte 0 / 1 (`inN.SetValue(e, ...)`): not a move
        body = [ln for ln in text.splitlines() if not re.search(r"\bin\d+\.SetValue\(e, ", ln)]
        assert not [ln for ln in body if "SetValue" in ln or "GetValue" in ln], dt


def test_i64_moves_gather_word_pairs_but_a_gather_within_rows(lib):
    """A 64-bit element moves as its two 32-bit words (A2 / A3 have no 64-bit Gather): every
    i64 move but the gather within rows (its offsets are per element) is a Gather."""
    _, units = lib
    for unit in units:
        (k,) = [k for k in unit.kernels if k.name == "mv_i64"]
        text = unit.files[aicore.header_path(k)]
        # sc, ev, od, il, cc, tr (and y[:, 5:] where it is a value of its own)
        assert text.count("AscendC::Gather(") >= 6
        body = text.split("gather_cols(")[1].split("// %")[0]
        assert "SetValue" in body and "AscendC::Gather(" not in body


BIG = """
module moves_big
kernel big(x: In[Tile[2048, 100, f32]], c: In[Tile[2048, 64, i32]], h: In[Tile[2048, 100, f16]],
           il: Out[Tile[2048, 200, f32]], gc: Out[Tile[2048, 64, f32]],
           cc: Out[Tile[2048, 197, f16]]) {
    store(il, interleave(x, x * 2.0))
    store(gc, gather(x, c, axis = 1))
    store(cc, concat(h, h[:, 3:], axis = 1))
}
"""


def test_tiles_past_the_ub_run_in_chunks_with_their_offsets_planned(tmp_path):
    """[2048, 200] results do not fit the UB: the kernel runs in row chunks, each chunk's
    staging and offset tensors in the arena its footprint counts (the header's UB line), and
    equals the NumPy formula."""
    m, _ = optimize(ptowsp.parse(BIG, "big.wsp").ir, 2)
    m = dataclasses.replace(m, name="moves_big")
    (k,) = m.kernels
    files = aicore.emit_aicore(m)
    text = files[aicore.header_path(k)]
    assert "chunks of" in text and text.count("AscendC::Gather(") == 4  # h[:, 3:] too
    # the static maps' offsets are built by the first chunk and kept (gc's follow its indices)
    assert text.count("if (c == 0)") == 3
    ub = int(text.split("UB: ")[1].split(" of ")[0])
    assert ub <= aicore.UB_BUDGET
    built = H.build([H.Unit(m.name, files, [k])], tmp_path)
    rng = np.random.default_rng(3)
    task = H.random_task(k, rng)
    task.inputs["c"][...] = _indices(task.inputs["c"].shape, 100, rng)
    H.tile_view(task, k, "c")[...] = task.inputs["c"]
    got = H.run_task(built, m.name, k, task)
    x, c, h = task.inputs["x"], task.inputs["c"], task.inputs["h"]
    np.testing.assert_array_equal(got["il"], interleave(x, x * np.float32(2.0)))
    np.testing.assert_array_equal(got["gc"], take(x, c, 1))
    np.testing.assert_array_equal(got["cc"], np.concatenate((h, h[:, 3:]), axis=1))


INDEX_DTYPES = ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")


def picks() -> str:
    """A gather within rows per index dtype over 300 columns, and 16-bit ones over 2100."""
    return "".join(f"""
kernel pk_{it}_{n}(x: In[Tile[4, {n}, i16]], c: In[Tile[4, 40, {it}]], y: Out[Tile[4, 40, i16]]) {{
    store(y, gather(x, c, axis = 1))
}}""" for it, n in [(it, 300) for it in INDEX_DTYPES] + [("i16", 2100), ("u16", 2100)])


def test_gather_cols_takes_every_index_dtype_to_the_vector_unit(tmp_path):
    """Indices of every integer dtype become f32 on the vector unit (64-bit ones as two words
    taken apart by Gathers: the high word must be 0; 16-bit ones through half, for rows of at
    most 2048 columns: wider rows keep the scalar path); an index out of range (negative, the
    extent, the dtype's extremes, 2^32 + a column for the 64-bit ones) gives 0."""
    m, _ = optimize(ptowsp.parse(picks(), "picks.wsp").ir, 2)
    m = dataclasses.replace(m, name="picks")
    files = aicore.emit_aicore(m)
    built = H.build([H.Unit(m.name, files, list(m.kernels))], tmp_path)
    rng = np.random.default_rng(9)
    for k in m.kernels:
        it, n = k.name.split("_")[1], int(k.name.split("_")[2])
        text = files[aicore.header_path(k)]
        assert ("AscendC::Gather(" in text) == (n <= 2048), k.name
        task = H.random_task(k, rng)
        info = np.iinfo(H.NP[it])
        outside = [v for v in (-1, -n, n, n + 1, 2049, 2**32 + 5, int(info.min), int(info.max))
                   if info.min <= v <= info.max]
        shape = task.inputs["c"].shape
        c = np.where(rng.random(shape) < 0.5, rng.integers(0, min(n, int(info.max)), shape),
                     np.array(outside, dtype=object)[rng.integers(0, len(outside), shape)])
        task.inputs["c"][...] = c.astype(H.NP[it])
        H.tile_view(task, k, "c")[...] = task.inputs["c"]
        got = H.run_task(built, m.name, k, task)
        want = take(task.inputs["x"], task.inputs["c"].astype(np.int64), 1)
        np.testing.assert_array_equal(got["y"], want, err_msg=k.name)
        H.compare(k, got, H.ref_outputs(k, task), k.name)


TIGHT = """
module moves_tight
kernel tr(x: In[Tile[96, 128, f32]], y: Out[Tile[128, 96, f32]]) {
    store(y, transpose(x))
}
kernel tr_small(x: In[Tile[64, 128, f32]], y: Out[Tile[128, 64, f32]]) {
    store(y, transpose(x))
}
"""


def test_a_kernel_whose_move_offsets_do_not_fit_moves_on_the_scalar_unit(tmp_path):
    """A resident transpose of [96, 128] f32: input, result and output take 144 KiB, and the
    offsets another 48: past the UB. The kernel then keeps its transpose on the scalar unit
    (no offsets), as before the vector moves, and is still right; the smaller one gathers."""
    m, _ = optimize(ptowsp.parse(TIGHT, "tight.wsp").ir, 2)
    m = dataclasses.replace(m, name="moves_tight")
    files = aicore.emit_aicore(m)
    big, small = (files[aicore.header_path(k)] for k in m.kernels)
    assert "AscendC::Gather(" not in big and "units: scalar" in big
    assert "AscendC::Gather(" in small
    built = H.build([H.Unit(m.name, files, list(m.kernels))], tmp_path)
    rng = np.random.default_rng(1)
    for k in m.kernels:
        task = H.random_task(k, rng)
        got = H.run_task(built, m.name, k, task)
        np.testing.assert_array_equal(got["y"], task.inputs["x"].T, err_msg=k.name)


def test_the_plan_and_the_cycle_model_take_the_same_scalar_moves_fallback():
    """The UB plan's search (below both back ends) falls back to scalar moves exactly where the
    emitter does, so cpu_sim's cycle model bills the big transpose as the scalar unit's
    element-by-element moves (a GetValue and a SetValue of each of its 128 x 96 elements, 4
    cycles each) and the small one as one vector pass over its 32 KiB."""
    from ptowsp.backends import ub_plan
    from ptowsp.backends.cpu import cost
    from ptowsp.backends.machine import load_machine

    m, _ = optimize(ptowsp.parse(TIGHT, "tight.wsp").ir, 2)
    big, small = (ub_plan.fit(k) for k in m.kernels)
    assert big is not None and not big.sorts.moves
    assert small is not None and small.sorts.moves
    machine = load_machine(None)
    got = [cost.vector_cycles(f.plan.k, machine, f.nchunks, f.sorts) for f in (big, small)]
    assert got == [128 * 96 * 2 * 4, -(-64 * 128 * 4 // machine.vector_bytes_per_cycle)]
