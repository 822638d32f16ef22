"""Dynamic programs on cpu_sim (language.md sections 5 and 6), checked against `ref` on the
programs of test_ref_dynamic.py (which checks `ref` against NumPy formulas): ragged lengths,
CSR routings, `when` tiers, slots, routers whose output drives enumeration in the same run
(wsp_await), every validation error at the same position as `ref`, and the data-dependent wait
seen in the trace: expert tasks start only after their router task, unrelated tasks do not wait.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.diagnostics import WspError

from . import test_ref_dynamic as R

pytestmark = pytest.mark.cc


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


_PROGRAMS: dict[tuple[str, str], object] = {}


def compiled(text: str, target: str, schedule: str | None = None):
    key = (text, target, schedule)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = ptowsp.parse(textwrap.dedent(text), "t.wsp").compile(
            target=target, schedule=schedule)
    return _PROGRAMS[key]


def both(text: str, bind: dict, arrays: dict, workers: int | None = None):
    cpu = compiled(text, "cpu_sim").run(bind=bind, workers=workers, **arrays)
    ref = compiled(text, "ref").run(bind=bind, **arrays)
    assert set(cpu) == set(ref)
    for k in ref:
        np.testing.assert_array_equal(cpu[k], ref[k], err_msg=k)
    return cpu


def same_error(text: str, bind: dict, arrays: dict) -> str:
    """Both targets fail at the same position; returns cpu_sim's message."""
    errs = []
    for target in ("cpu_sim", "ref"):
        with pytest.raises(WspError) as info:
            compiled(text, target).run(bind=bind, **arrays)
        (d,) = info.value.diagnostics
        errs.append(d)
    assert (errs[0].span.line, errs[0].span.col) == (errs[1].span.line, errs[1].span.col)
    # the same words, values and coordinates on both targets
    assert errs[0].message.removesuffix("; the task was not launched") == errs[1].message
    return errs[0].message


@R.SETTINGS
@given(s=st.integers(0, 5), data=st.data())
def test_ragged_rows(s, data):
    lens = np.array(data.draw(st.lists(st.integers(0, s), min_size=1, max_size=4)), np.int32)
    x = R.rand(np.random.default_rng(s), len(lens), s, 4)
    both(R.RAGGED, {"B": len(lens), "S": s}, {"lens": lens, "X": x})


def test_negative_ragged_length():
    msg = same_error(R.RAGGED, {"B": 3, "S": 4}, {"lens": np.array([2, -3, 1], np.int32),
                                                  "X": np.ones((3, 4, 4), np.float32)})
    assert "length of ragged axis `toks` at `b` must not be negative" in msg
    assert "b=1" in msg and "-3" in msg


@R.SETTINGS
@given(e=st.integers(1, 4), data=st.data())
def test_csr_routing(e, data):
    rows = data.draw(st.lists(st.lists(st.integers(0, e - 1), max_size=3), min_size=1,
                              max_size=4))
    syms, arrays = R.csr_arrays(rows, e, seed=len(rows))
    both(R.CSR, syms, arrays)


@pytest.mark.parametrize("indptr, indices, words", [
    ([0, 2, 1, 3], [0, 1, 2], ["must not decrease", "t=1"]),
    ([0, 1, 2, 4], [0, 1, 2], ["must be at most NNZ", "t=2"]),
    ([-1, 1, 2, 3], [0, 1, 2], ["must not be negative", "t=0"]),
])
def test_bad_indptr(indptr, indices, words):
    syms, arrays = R.csr_arrays([[0], [0], [0]], 3)
    arrays["indptr"] = np.array(indptr, np.int32)
    arrays["indices"] = np.array(indices, np.int32)
    syms["NNZ"], syms["K"] = len(indices), 3
    msg = same_error(R.CSR, syms, arrays)
    assert all(w in msg for w in words), msg


def test_expert_id_out_of_range():
    syms, arrays = R.csr_arrays([[0, 1], [3, 0]], 3)
    msg = same_error(R.CSR, syms, arrays)
    assert "must be less than E" in msg and "t=1" in msg and "3" in msg
    assert "not launched" in msg


@R.SETTINGS
@given(lens=st.lists(st.integers(-3, 8), min_size=1, max_size=6))
def test_when_tiers(lens):
    lens = np.array(lens, np.int32)
    both(R.TIERS, {"B": len(lens)}, {"lens": lens,
                                     "X": R.rand(np.random.default_rng(len(lens)), len(lens), 4)})


def test_read_index_out_of_range():
    text = R.TIERS.replace("when b + 1 < B and lens[b + 1] > lens[b]", "when lens[b + 1] > lens[b]")
    msg = same_error(text, {"B": 3}, {"lens": np.array([1, 2, 3], np.int32),
                                      "X": np.zeros((3, 4), np.float32)})
    assert "index `b + 1` of `lens[b + 1]` must be less than B" in msg and "b=2" in msg


@R.SETTINGS
@given(c0=st.integers(0, 3), c1=st.integers(0, 2), extra=st.integers(0, 2))
def test_slots_drive_extents(c0, c1, extra):
    n = max(2 * c0 + c1, 2) + extra
    x = R.rand(np.random.default_rng(n), n, 4)
    for _ in range(2):  # slots start at 0 in every run
        both(R.SLOTS, {"N": n}, {"cnt": np.array([c0, c1], np.int32), "X": x})


def test_negative_extent_from_a_slot():
    msg = same_error(R.SLOTS, {"N": 4}, {"cnt": np.array([-1, 0], np.int32),
                                         "X": np.zeros((4, 4), np.float32)})
    assert "loop extent `slot(4)` must not be negative" in msg and "-2" in msg


@R.SETTINGS
@given(t=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_tile_kernel_router_drives_a_ragged_axis(t, seed):
    x = R.rand(np.random.default_rng(seed), t, 8)
    for workers in (1, 2):
        both(R.COUNTER, {"T": t}, {"X": x}, workers=workers)


@settings(R.SETTINGS, suppress_health_check=[*R.SETTINGS.suppress_health_check,
                                             HealthCheck.function_scoped_fixture])
@given(t=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_extern_router_drives_p_sel_in_the_same_run(ref_extern, t, seed):
    # ref runs the extern C kernel's Python twin (registered for this test only: registering it
    # again for each example changes nothing, so the function-scoped fixture is safe here)
    ref_extern("topk", R.topk)
    rng = np.random.default_rng(seed)
    arrays = {"X": R.rand(rng, t, 4), "Wr": R.rand(rng, 4, 4), "We": R.rand(rng, 4, 4),
              "indptr": np.arange(0, 2 * t + 1, 2, dtype=np.int32)}
    both(R.MOE, {"T": t}, arrays)


# ---------------------------------------------------------------------------------------------
# The wait is for exactly the writers: seen in the trace

WAIT = """\
    module wait
    sym T
    sym G
    input  X: f32[T, 64]
    input  hold: i32[T]
    scratch counts: i32[T]
    output Y: f32[T, 8, 64]
    output U: f32[T, 64]
    kernel count(x: In[Tile[1, 64, f32]], c: Out[Tile[1, 1, i32]], hold: Scalar[i32],
                 gate: Scalar[i64]) extern c \"\"\"
        /* gate: two int64s. A router with `hold` waits until another router has run (polling
         * every 100 us; after 1.2 million polls, at least 120 s, it gives up: a hang guard) and
         * says in gate[1] whether one did; every other router counts itself in gate[0]. */
        extern int usleep(unsigned int);
        long long *g = (long long *)(intptr_t)gate;
        if (hold) {
            for (long tries = 0; !__atomic_load_n(&g[0], __ATOMIC_ACQUIRE) && tries < 1200000; tries++)
                usleep(100);
            __atomic_store_n(&g[1], __atomic_load_n(&g[0], __ATOMIC_ACQUIRE) != 0, __ATOMIC_RELEASE);
        } else {
            __atomic_fetch_add(&g[0], 1LL, __ATOMIC_ACQ_REL);
        }
        int n = 0;
        for (int j = 0; j < 64; j++) n += x.data[j] > 0;
        c.data[0] = n % 8;
    \"\"\"
    kernel put(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]]) { store(y, x * 2) }
    kernel other(x: In[Tile[1, 64, f32]], y: Out[Tile[1, 64, f32]]) { store(y, x + 1) }
    axis tokens = DenseDyn(T)
    axis pos = Ragged(tokens, counts)
    workload w() {
        for t in P(tokens) { count[t](x = X[t], c = counts[t : t + 1], hold = hold[t], gate = G) }
        for t in P(tokens) {
            for j in P(pos[t]) { put[t, j](x = X[t], y = Y[t, j]) }
        }
        for t in P(tokens) { other[t](x = X[t], y = U[t]) }
    }
    schedule main = w().dispatch(round_robin(2))
"""


def test_enumeration_waits_for_exactly_the_writers():
    """Router task 0 is held until another router has run: the expert tasks of token 0 start
    after it ends; the routers of the other tokens do not wait for it (one of them runs while
    it is held, or it would never be released)."""
    t = 4
    rng = np.random.default_rng(5)
    x = np.abs(R.rand(rng, t, 64)) * np.where(rng.random((t, 64)) < 0.5, 1, -1).astype(np.float32)
    hold = np.array([1, 0, 0, 0], np.int32)
    gate = np.zeros(2, np.int64)
    prog = compiled(WAIT, "cpu_sim")
    out = prog.run(bind={"T": t, "G": gate.ctypes.data}, trace=True, workers=2, X=x, hold=hold)
    assert gate[1] == 1  # router 0 was released by another router, not by its hang guard
    counts = (x > 0).sum(1) % 8
    for i in range(t):
        np.testing.assert_array_equal(out["Y"][i, :counts[i]], np.broadcast_to(x[i] * 2, (counts[i], 64)))
    ev = prog.trace.events  # structured array, one row per task in enumeration order
    names = prog.trace.kernel_names
    kern = np.array([names[k] for k in ev["kernel"]])
    count, put = ev[kern == "count"], ev[kern == "put"]
    slow_end = count["end_ns"][count["coords"][:, 0] == 0].max()
    put0 = put[put["coords"][:, 0] == 0]
    assert counts[0] > 0 and len(put0) == counts[0]
    assert (put0["start_ns"] >= slow_end).all()
    # another router started while router 0 was held: nobody waited for everything
    assert (count["start_ns"][count["coords"][:, 0] != 0] < slow_end).any()


def test_simulate_needs_the_data_that_decides_the_task_space():
    prog = compiled(R.RAGGED, "cpu_sim")
    with pytest.raises(WspError) as info:
        prog.simulate(bind={"B": 2, "S": 4})
    (d,) = info.value.diagnostics
    assert "needs the data of `lens`" in d.message and "simulate(lens=...)" in d.help
    lens = np.array([3, 1], np.int32)
    st_ = prog.simulate(bind={"B": 2, "S": 4}, lens=lens)
    assert st_.task_count == 4 + 1 + 0  # dbl per token, pair per two tokens
    prog.run(bind={"B": 2, "S": 4}, lens=lens, X=np.zeros((2, 4, 4), np.float32))
    assert prog.stats.task_count == st_.task_count


def test_simulate_runs_the_kernels_when_the_task_space_comes_from_them():
    prog = compiled(R.COUNTER, "cpu_sim")
    x = R.rand(np.random.default_rng(1), 3, 8)
    prog.run(bind={"T": 3}, X=x)
    real = prog.stats.task_count
    st_ = prog.simulate(bind={"T": 3}, X=x)
    assert st_.task_count == real == 3 + int((x > 0).sum()) + int(((x > 0).sum(1) >= 4).sum())
