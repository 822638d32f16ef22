"""`topk` and `sort` of rows of at most 128 floats on the AICore's `Sort32` and `MrgSort`
(aicore/sorting.py),
compiled against the CPU Ascend C and run:

- test_sort32_equals_ref_and_numpy: hypothesis shapes (rows, n <= 128, k) in f32 / f16 / bf16,
  values drawn from a few levels (ties everywhere, +-inf, +0), both orders: the kernel equals
  ref bit for bit, and ref equals a NumPy formula written here (a stable argsort of the
  values, negated for the descending order); the emitted kernel calls Sort32.
- test_nan_and_negative_zero_take_the_scalar_path: a row with NaN or -0 (whose order Sort32
  does not document) is ordered by the scalar fallback, still equal to ref.
- test_stand_in_checks_mrgsort_rules: the CPU MrgSort merges greatest first, takes the later
  list's pair on a tie (an order the documentation leaves open, so the kernels' fix-up that
  puts equal scores in index order is exercised), and refuses misuse.
- test_stand_in_checks_sort32_rules: the CPU Sort32 refuses what its documentation rules out
  or leaves open (repeatTime past 255, a misaligned operand, dst over a source, NaN, +0 with
  -0), and orders equal scores by position.
Integer keys stay on the scalar path (Sort32 takes half and float scores): test_selection.py.
"""

from __future__ import annotations

import itertools
import subprocess

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptowsp.backends.ref import values as R

from .ascendc_cpu import harness as H

pytestmark = [pytest.mark.cc, pytest.mark.filterwarnings("ignore::RuntimeWarning")]


def _kernel(n: int, r: int, c: int, dt: str, k: int) -> str:
    return f"""
kernel s{n}(x: In[Tile[{r}, {c}, {dt}]], tv: Out[Tile[{r}, {k}, {dt}]],
            ti: Out[Tile[{r}, {k}, i32]], sv: Out[Tile[{r}, {c}, {dt}]],
            si: Out[Tile[{r}, {c}, i32]]) {{
    let v, i = topk(x, {k})
    store(tv, v)
    store(ti, i)
    let s, j = sort(x)
    store(sv, s)
    store(si, j)
}}
"""


def _numpy(x: np.ndarray, k: int) -> dict:
    """The formula: stable argsort (equal values in column order), of -x for the descending
    order (no NaN and no -0 here, so negation keeps every tie and order)."""
    d = np.argsort(-x, axis=1, kind="stable")[:, :k]
    a = np.argsort(x, axis=1, kind="stable")
    take = lambda o: np.take_along_axis(x, o, axis=1)  # noqa: E731
    return {"tv": take(d), "ti": d.astype(np.int32), "sv": take(a), "si": a.astype(np.int32)}


LEVELS = np.array([0.0, 1.5, -1.5, 2.0, 0.25, np.inf, -np.inf])


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=True)
@given(st.data())
def test_sort32_equals_ref_and_numpy(tmp_path_factory, data):
    cases = []
    for dt in ("f32", "f16", "bf16"):
        c = data.draw(st.integers(1, 128), label=f"n {dt}")
        cases.append((data.draw(st.integers(1, 5), label=f"rows {dt}"), c, dt,
                      data.draw(st.integers(1, c), label=f"k {dt}")))
    text = "module srt\n" + "".join(_kernel(n, *c) for n, c in enumerate(cases))
    lib, units = H.build_levels(text, "srt", tmp_path_factory.mktemp("sort32"), levels=(2,))
    unit = units[0]
    assert any("AscendC::Sort32(" in t for t in unit.files.values())
    rng = np.random.default_rng(len(text))
    for kern, (r, c, dt, k) in zip(unit.kernels, cases):
        task = H.random_task(kern, rng, strided=True)
        x = LEVELS[rng.integers(0, len(LEVELS), (r, c))].astype(np.float32)
        stored = R.bf16_bits(x) if dt == "bf16" else x.astype(H.NP[dt])
        task.inputs["x"] = stored
        H.tile_view(task, kern, "x")[...] = stored
        got = H.run_task(lib, unit.name, kern, task)
        want = H.ref_outputs(kern, task)
        H.compare(kern, got, want, f"sort32 {dt}")
        formula = _numpy(R.to_compute(stored, dt), k)
        for name, w in formula.items():
            np.testing.assert_array_equal(R.to_compute(want[name], dt) if name[1] == "v"
                                          else want[name], w, err_msg=name)


def test_nan_and_negative_zero_take_the_scalar_path(tmp_path):
    text = "module srtn\n" + _kernel(0, 4, 9, "f32", 3) + _kernel(1, 4, 70, "f32", 5)
    lib, units = H.build_levels(text, "srtn", tmp_path, levels=(2,))
    unit = units[0]
    assert any("AscendC::MrgSort(" in t for t in unit.files.values())  # the 70 columns
    rng = np.random.default_rng(5)
    for kern, odd in itertools.product(unit.kernels, (np.nan, -0.0, None)):
        task = H.random_task(kern, rng)
        x = LEVELS[rng.integers(0, len(LEVELS), (4, kern.params[0].cols))].astype(np.float32)
        if odd is not None:
            x[2, 5] = odd
        task.inputs["x"] = x
        H.tile_view(task, kern, "x")[...] = x
        H.compare(kern, H.run_task(lib, unit.name, kern, task), H.ref_outputs(kern, task),
                  f"odd={odd}")


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
