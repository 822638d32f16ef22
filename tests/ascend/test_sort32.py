"""`topk` and `sort` on the AICore's `Sort32` and `MrgSort` (aicore/sorting.py): rows of up to
8192 values of every float and integer dtype, compiled against the CPU Ascend C and run:

- test_merge_passes_obey_mrgsort: the plan of merge passes for every row length up to 8192
  groups 2 to 4 lists back to back, no list past 4095 pairs, and ends in one list of n; 8193
  does not fit and stays on the scalar unit.
- test_sort_equals_ref_and_a_python_sort: hypothesis shapes (rows, n up to 2000, k) in every
  key dtype, values drawn from a few levels (ties everywhere; for floats +-inf, NaN, +0 and
  -0; for 32- and 64-bit integers now and then their limits and neighbours whose f32 scores
  are equal, which the tie pass orders by the exact key), topk and both orders of sort: the kernel equals ref bit for bit, and ref
  equals Python's stable sort on a key written here (NaN the greatest, -0 equal to +0, equal
  values in column order); the emitted kernel calls Sort32 (and MrgSort past 32 columns).
- test_row_lengths_around_the_runs: n at and around multiples of 32 and 128, descending and
  ascending, against the same formula (i64 keys at their limits among them: no scalar
  rank loop is emitted).
- test_chunks_of_rows: tiles of 64 to 128 rows in chunks, one Sort32 a topk, equal to the
  formula.
- test_rows_past_8192_go_by_blocks: top-k of rows of 8193 to 10000 (blocks of 2048, each
  sorted and merged, their first k merged by the scalar unit) against the formula.
- test_blocks_equal_ref: the blocked path with blocks of 64 (one block, a partial last block,
  k below and above the block width, every kind of key) against the formula.
- test_scratch_past_the_ub_falls_back_to_blocks_then_the_scalar_sort: a row whose whole-row
  scratch cannot fit the UB is sorted by blocks of 512 (no error) and still equals ref; one
  whose blocks' winners cannot fit either is emitted on the scalar path.
- test_a_row_wider_than_the_ub_is_a_diagnostic_naming_the_constexpr: a row the UB cannot
  hold is `file:line:col: error:` at the specialising call, naming N, exit 1.
- test_stand_in_merges_uneven_lists: the CPU MrgSort on lists of uneven lengths (the last list
  of a row is shorter) equals a Python merge of them (ties: the later list first).
- test_stand_in_checks_mrgsort_rules / test_stand_in_checks_sort32_rules: the CPU MrgSort and
  Sort32 refuse what their documentation rules out or leaves open (NaN, +0 with -0 in one
  Sort32 repeat, unsorted lists, lists past 4095, misaligned operands, overlaps).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.backends.ascend import aicore
from ptowsp.backends.ascend.aicore import kernel as aicore_kernel
from ptowsp.backends.ascend.aicore import sorting
from ptowsp.backends.ref import values as R

from .ascendc_cpu import harness as H

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

ROOT = Path(__file__).resolve().parents[2]

KEY_DTYPES = ("f32", "f16", "bf16", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")


def _kernel(n: int, r: int, c: int, dt: str, k: int) -> str:
    return f"""
kernel s{n}(x: In[Tile[{r}, {c}, {dt}]], tv: Out[Tile[{r}, {k}, {dt}]],
            ti: Out[Tile[{r}, {k}, i32]], sv: Out[Tile[{r}, {c}, {dt}]],
            si: Out[Tile[{r}, {c}, i32]], dv: Out[Tile[{r}, {c}, {dt}]],
            di: Out[Tile[{r}, {c}, i32]]) {{
    let v, i = topk(x, {k})
    store(tv, v)
    store(ti, i)
    let s, j = sort(x)
    store(sv, s)
    store(si, j)
    let d, e = sort(x, descending = true)
    store(dv, d)
    store(di, e)
}}
"""


def _order(row, desc: bool) -> list:
    """Python's stable sort of one row's columns: NaN the greatest value, -0 equal to +0 (the
    comparison of floats says so), equal values in column order; integers compared exactly."""
    def key(j):
        v = row[j]
        nan = isinstance(v, float) and math.isnan(v)
        if desc:
            return (0 if nan else 1, 0 if nan else -v, j)
        return (1 if nan else 0, 0 if nan else v, j)
    return sorted(range(len(row)), key=key)


def _formula(x: np.ndarray, k: int) -> dict:
    """The kernel's stores by the formula: orders per row, values taken by index."""
    rows = [[v.item() for v in r] for r in x]
    d = np.array([_order(r, True) for r in rows], dtype=np.int64).reshape(x.shape)
    a = np.array([_order(r, False) for r in rows], dtype=np.int64).reshape(x.shape)
    take = lambda o: np.take_along_axis(x, o, axis=1)  # noqa: E731
    return {"tv": take(d[:, :k]), "ti": d[:, :k], "sv": take(a), "si": a, "dv": take(d), "di": d}


FLOAT_LEVELS = np.array([0.0, -0.0, 1.5, -1.5, 2.0, 0.25, np.inf, -np.inf, np.nan])


def _values(dt: str, shape, rng, wide: bool) -> np.ndarray:
    """Few distinct values (ties everywhere); floats with NaN, +-inf and signed zeros;
    integers with their limits when `wide` (for 32 and 64 bits, neighbours whose f32
    scores are equal: 2^24 and 2^24 + 1, the limits and their neighbours)."""
    if dt in ("f32", "f16", "bf16"):
        x = FLOAT_LEVELS[rng.integers(0, len(FLOAT_LEVELS), shape)].astype(np.float32)
        return R.bf16_bits(x) if dt == "bf16" else x.astype(H.NP[dt])
    info = np.iinfo(H.NP[dt])
    pool = [0, 1, 2, 3, min(info.max, 1 << 24), max(info.min, -(1 << 24))]
    if wide:
        pool += [info.min, info.max, min(info.max, (1 << 24) + 1), info.max - 1, info.max - 2,
                 info.min + 1]
    return np.array(pool, dtype=object)[rng.integers(0, len(pool), shape)].astype(H.NP[dt])


def _topk_kernel(n: int, r: int, c: int, dt: str, k: int) -> str:
    return f"""
kernel s{n}(x: In[Tile[{r}, {c}, {dt}]], tv: Out[Tile[{r}, {k}, {dt}]],
            ti: Out[Tile[{r}, {k}, i32]]) {{
    let v, i = topk(x, {k})
    store(tv, v)
    store(ti, i)
}}
"""


def _run_cases(tmp, cases, seed: int, wide: bool = False, kernel=_kernel) -> list:
    """Build the kernels of `cases` (rows, n, dtype, k), run each on the stand-in and check it
    against ref and ref against the formula; the emitted sources."""
    text = "module srt\n" + "".join(kernel(n, *c) for n, c in enumerate(cases))
    lib, units = H.build_levels(text, "srt", tmp, levels=(2,))
    unit = units[0]
    rng = np.random.default_rng(seed)
    for kern, (r, c, dt, k) in zip(unit.kernels, cases):
        task = H.random_task(kern, rng, strided=True)
        stored = _values(dt, (r, c), rng, wide)
        task.inputs["x"] = stored
        H.tile_view(task, kern, "x")[...] = stored
        got = H.run_task(lib, unit.name, kern, task)
        want = H.ref_outputs(kern, task)
        H.compare(kern, got, want, f"sort {dt} n={c} k={k}")
        x = R.to_compute(stored, dt) if dt in ("f16", "bf16") else stored
        for name, w in _formula(x, k).items():
            if name not in want:
                continue
            have = want[name]
            if name[1] == "v" and dt in ("f16", "bf16"):
                have = R.to_compute(have, dt)
            np.testing.assert_array_equal(have, w.astype(have.dtype) if name[1] == "i" else w,
                                          err_msg=f"{name} {dt} n={c}")
    return list(unit.files.values())


def test_merge_passes_obey_mrgsort():
    for n in list(range(1, 600)) + [2000, 4095, 4096, 4097, 8191, 8192]:
        lens = [min(32, n - o) for o in range(0, n, 32)]
        for groups in sorting.merge_passes(n):
            at, new = 0, []
            for off, g in groups:
                assert 2 <= len(g) <= 4 and all(ln <= 4095 for ln in g), (n, g)
                assert off == sum(new)  # back to back: a group lands where its first list was
                assert list(g) == lens[at:at + len(g)], (n, groups)
                at += len(g)
                new.append(sum(g))
            assert at == len(lens)
            lens = new
        assert lens == [n]
        assert sorting.sort32_fits("f32", n) and sorting.sort32_fits("u8", n)
    assert not sorting.sort32_fits("f32", 8193)
    assert not sorting.sort32_fits("bool", 8) and not sorting.sort32_fits("f64", 8)


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(st.data())
def test_sort_equals_ref_and_a_python_sort(tmp_path_factory, data):
    cases = []
    for dt in KEY_DTYPES:
        c = data.draw(st.one_of(st.integers(1, 160), st.integers(1, 2000)), label=f"n {dt}")
        cases.append((data.draw(st.integers(1, 3), label=f"rows {dt}"), c, dt,
                      data.draw(st.integers(1, c), label=f"k {dt}")))
    wide = data.draw(st.booleans(), label="integer limits")
    files = _run_cases(tmp_path_factory.mktemp("sort32"), cases, len(str(cases)), wide)
    assert any("AscendC::Sort32(" in t for t in files)
    if max(c[1] for c in cases) > 32:
        assert any("AscendC::MrgSort(" in t for t in files)


def test_row_lengths_around_the_runs(tmp_path):
    ns = (1, 31, 32, 33, 64, 127, 128, 129, 160, 161, 511, 513, 1000)
    cases = [(2, n, ("f32", "i16", "bf16", "i64")[t % 4], max(1, n // 3))
             for t, n in enumerate(ns)]
    files = _run_cases(tmp_path, cases, 7, wide=True)
    assert not any("for (int32_t l = 0;" in t for t in files)  # no scalar rank loop


def test_chunks_of_rows(tmp_path):
    """Tiles of many rows run in chunks (the sort scratch sized with the rest by the UB plan),
    each chunk's topk sorted once for its values and indices."""
    cases = [(128, 128, "f32", 8), (96, 200, "i32", 3), (64, 33, "f16", 33)]
    files = _run_cases(tmp_path, cases, 17, wide=True, kernel=_topk_kernel)
    assert any(re.search(r"// \d+ chunks of \d+ rows", t) for t in files)
    assert sum(t.count("AscendC::Sort32(") for t in files) == len(cases)


def test_rows_past_8192_go_by_blocks(tmp_path):
    # a merge of a row past 8192 would need lists past 4095 pairs: blocks of 2048 columns,
    # each sorted and merged, their first k pairs merged by the scalar unit
    cases = [(2, 9000, "f32", 5), (1, 8193, "i32", 40), (1, 10000, "bf16", 1)]
    files = _run_cases(tmp_path, cases, 11, kernel=_topk_kernel)
    # one sort a topk: its values and indices share it (`sorting.sort_pairs`)
    assert sum(t.count("int32_t h[") for t in files) == 3


def test_blocks_equal_ref(tmp_path, monkeypatch):
    """The blocked path with blocks of 64 columns: rows of one block, of a block and a bit,
    of several and a partial one, k below and above the block, every kind of key."""
    monkeypatch.setattr(aicore_kernel.KernelEmitter, "sort_block", 64)
    cases = [(2, 1, "f32", 1), (3, 64, "f16", 10), (2, 65, "f32", 65), (2, 130, "i16", 70),
             (1, 300, "bf16", 3), (2, 200, "u8", 200), (2, 129, "i64", 5)]
    files = _run_cases(tmp_path, cases, 13, wide=True)
    assert any("int32_t h[" in t for t in files)


def test_scratch_past_the_ub_falls_back_to_blocks_then_the_scalar_sort(tmp_path):
    # 8000 f32 a row: the input, the indices and Sort32 / MrgSort's 16 bytes an element are
    # past the 184 KiB a kernel may use: blocks of 512 columns (16 blocks)
    text = """module wide

kernel w(x: In[Tile[1, 8000, f32]], si: Out[Tile[1, 8000, i32]]) {
    let _, i = sort(x, descending = true)
    store(si, i)
}
"""
    lib, units = H.build_levels(text, "wide", tmp_path, levels=(2,))
    unit = units[0]
    assert any("int32_t h[16]" in t for t in unit.files.values())
    (kern,) = unit.kernels
    rng = np.random.default_rng(3)
    task = H.random_task(kern, rng)
    x = _values("f32", (1, 8000), rng, False)
    task.inputs["x"] = x
    H.tile_view(task, kern, "x")[...] = x
    want = H.ref_outputs(kern, task)
    H.compare(kern, H.run_task(lib, unit.name, kern, task), want, "wide")
    np.testing.assert_array_equal(want["si"][0], _order([v.item() for v in x[0]], True))
    # 12000 a row: not even the blocks' winners (8 bytes a column) fit; the scalar sort needs
    # no scratch (emitted only: its n^2 compares are slow on the stand-in)
    files = aicore.emit_aicore(ptowsp.parse(text.replace("8000", "12000"), "wide.wsp").ir)
    assert not any("AscendC::Sort32(" in t for t in files.values())
    assert any("sort_indices" in t for t in files.values())


WIDER = """module widest
input X: f32[2, 60000]
output I: i32[2, 60000]

kernel order(x: In[Tile[1, N, f32]], i: Out[Tile[1, N, i32]], N: Constexpr[i32]) {
    let _, j = sort(x)
    store(i, j)
}

workload w() {
    order(x = X[0:1, 0:64], i = I[0:1, 0:64], N = 64)
    order(x = X[1:2, :], i = I[1:2, :], N = 60000)
}
"""


def test_a_row_wider_than_the_ub_is_a_diagnostic_naming_the_constexpr(tmp_path):
    """A sort reads its row whole from the UB: a row of 60000 f32 (234 KiB) is a compile
    error at the call that makes N = 60000, saying why; the call with N = 64 is not."""
    (tmp_path / "widest.wsp").write_text(WIDER)
    done = subprocess.run([sys.executable, "-m", "ptowsp", "compile", "widest.wsp", "--target",
                           "ascend_npu", "-o", "tree"], capture_output=True, text=True,
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    err = " ".join(done.stderr.split())
    assert done.returncode == 1 and "Traceback" not in err, done.stderr
    assert err.startswith("widest.wsp:12:5: error: kernel `order` with N = 60000 needs "), err
    assert "a sort, a matmul" in err and "smaller Constexpr values than N = 60000" in err, err


_UNEVEN = r'''
#include "kernel_operator.h"
#include <cstdio>
using namespace AscendC;
int main()
{
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64 * 1024);
    LocalTensor<float> p = buf.GetWithOffset<float>(2048, 0);
    LocalTensor<float> d = buf.GetWithOffset<float>(2048, 8192);
    LocalTensor<uint32_t> b = p.ReinterpretCast<uint32_t>();
    const uint16_t lens[4] = {40, 12, 29, 0};
    uint32_t at = 0;
    for (int q = 0; q < 3; ++q)
        for (int e = 0; e < lens[q]; ++e, ++at) {  // list q: scores falling in steps of 1
            p.SetValue(2 * at, (float)(lens[q] - e) / 2.0f);
            b.SetValue(2 * at + 1, 100 * q + e);
        }
    detail::SyncAll();
    MrgSort(d, MrgSortSrcList<float>(p, p[80], p[104], p), MrgSort4Info(lens, false, 7, 1));
    detail::SyncAll();
    LocalTensor<uint32_t> o = d.ReinterpretCast<uint32_t>();
    for (int e = 0; e < 81; ++e) std::printf("%g:%u ", (double)d.GetValue(2 * e), o.GetValue(2 * e + 1));
    std::printf("\n");
    return 0;
}
'''


def test_stand_in_merges_uneven_lists(tmp_path):
    run = H.misuse_program(tmp_path, _UNEVEN)
    r = run("0")
    assert r.returncode == 0, r.stdout
    pairs = [(ln - e) / 2 for ln in (40, 12, 29) for e in range(ln)]
    items = [(pairs[sum((40, 12, 29)[:q]) + e], q, e) for q, ln in enumerate((40, 12, 29))
             for e in range(ln)]
    # the Python merge: greatest score first, on a tie the later list, then list order
    want = sorted(items, key=lambda t: (-t[0], -t[1], t[2]))
    assert r.stdout.split() == [f"{s:g}:{100 * q + e}" for s, q, e in want]


_MERGE = r'''
#include "kernel_operator.h"
#include <cstdio>
using namespace AscendC;
int main(int argc, char **argv)
{
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64 * 1024);
    LocalTensor<float> s = buf.GetWithOffset<float>(256, 0);
    LocalTensor<uint32_t> ix = buf.GetWithOffset<uint32_t>(256, 1024);
    LocalTensor<float> p = buf.GetWithOffset<float>(512, 2048);
    LocalTensor<float> d = buf.GetWithOffset<float>(512, 4096);
    for (int e = 0; e < 64; ++e) { s.SetValue(e, (float)(e % 2)); ix.SetValue(e, e); }
    detail::SyncAll();
    Sort32(p, s, ix, 2);  // two runs of 32: sixteen 1s then sixteen 0s each
    PipeBarrier<PIPE_V>();
    uint16_t lens[4] = {32, 32, 0, 0};
    uint16_t vb = argv[1][0] == '1' ? 5 : 3;
    if (argv[1][0] == '3') lens[0] = 4096;
    try {
        switch (argv[1][0]) {
        case '0': case '1': case '3':
            MrgSort(d, MrgSortSrcList<float>(p, p[64], p, p), MrgSort4Info(lens, false, vb, 1)); break;
        case '2': MrgSort(d, MrgSortSrcList<float>(p[64], p, p, p), MrgSort4Info(lens, true, 3, 1)); break;
        case '4': MrgSort(d, MrgSortSrcList<float>(ix.ReinterpretCast<float>(), p[64], p, p), MrgSort4Info(lens, false, 3, 1)); break;
        case '5': MrgSort(p[64], MrgSortSrcList<float>(p, p[64], p, p), MrgSort4Info(lens, false, 3, 1)); break;
        }
    } catch (const ShimError &e) {
        std::printf("%s\n", e.what());
        return 1;
    }
    detail::SyncAll();
    LocalTensor<uint32_t> b = d.ReinterpretCast<uint32_t>();
    for (int e = 0; e < 4; ++e) std::printf("%g:%u ", (double)d.GetValue(2 * e), b.GetValue(2 * e + 1));
    std::printf("\n");
    return 0;
}
'''


def test_stand_in_checks_mrgsort_rules(tmp_path):
    """MrgSort merges greatest first, equal scores of different lists in an order its
    documentation does not state: the model takes the later list's first (so the kernels'
    tie fix-up is exercised); misuse is refused."""
    src = tmp_path / "merge.cpp"
    src.write_text(_MERGE)
    exe = tmp_path / "merge"
    subprocess.run(["g++", "-std=c++17", "-w", "-I", str(H.HERE), "-o", str(exe), str(src)],
                   check=True)
    run = lambda c: subprocess.run([str(exe), c], capture_output=True, text=True)  # noqa: E731
    ok = run("0")
    assert ok.returncode == 0 and ok.stdout.split() == ["1:33", "1:35", "1:37", "1:39"], ok.stdout
    for case, words in (("1", "validBit"), ("2", "exhausted suspension"),
                        ("3", "longer than 4095"), ("4", "not sorted greatest first"),
                        ("5", "dst overlaps a list")):
        r = run(case)
        assert r.returncode == 1 and words in r.stdout, (case, r.stdout)


_MISUSE = r'''
#include "kernel_operator.h"
#include <cmath>
#include <cstdio>
using namespace AscendC;
int main(int argc, char **argv)
{
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64 * 1024);
    LocalTensor<float> s = buf.GetWithOffset<float>(256, 0);
    LocalTensor<uint32_t> ix = buf.GetWithOffset<uint32_t>(256, 1024);
    LocalTensor<float> d = buf.GetWithOffset<float>(512, 2048);
    for (int e = 0; e < 256; ++e) { s.SetValue(e, (float)(e % 3)); ix.SetValue(e, e); }
    if (argv[1][0] == '4') s.SetValue(7, NAN);
    if (argv[1][0] == '5') { s.SetValue(3, -0.0f); s.SetValue(4, 0.0f); }
    detail::SyncAll();  // the scalar writes above, waited for
    try {
        switch (argv[1][0]) {
        case '0': case '4': case '5': Sort32(d, s, ix, 2); break;
        case '1': Sort32(d, s, ix, 256); break;
        case '2': Sort32(d, s[1], ix, 1); break;
        case '3': Sort32(s, s, ix, 1); break;
        }
    } catch (const ShimError &e) {
        std::printf("%s\n", e.what());
        return 1;
    }
    detail::SyncAll();
    // the first pairs of repeat 0: the 2s by position, then the 1s
    LocalTensor<uint32_t> b = d.ReinterpretCast<uint32_t>();
    for (int e = 0; e < 12; ++e) std::printf("%g:%u ", (double)d.GetValue(2 * e), b.GetValue(2 * e + 1));
    std::printf("\n");
    return 0;
}
'''


def test_stand_in_checks_sort32_rules(tmp_path):
    run = H.misuse_program(tmp_path, _MISUSE)
    ok = run("0")
    assert ok.returncode == 0, ok.stdout
    twos = [i for i in range(32) if i % 3 == 2]
    ones = [i for i in range(32) if i % 3 == 1]
    want = [f"2:{i}" for i in twos] + [f"1:{i}" for i in ones]
    assert ok.stdout.split() == want[:12], ok.stdout
    for case, words in (("1", "repeatTime out of [0, 255]"), ("2", "not 32-byte aligned"),
                        ("3", "dst overlaps a source"), ("4", "a NaN score"),
                        ("5", "+0 and -0 in one repeat")):
        r = run(case)
        assert r.returncode == 1 and words in r.stdout, (case, r.stdout)
