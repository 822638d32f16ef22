"""CSP on cpu_sim: every test of test_ref_csp.py again, with each run made on both targets.

The ref tests check against NumPy; here each of their runs (`run`, `deadlock`) also runs the
same module on cpu_sim (with 1 and 2 workers) and requires the same outcome: outputs equal to
rounding (bit-identical where the kernels are copies and additions), the same run
information (`channels`, `events`, task count), and for a failing run the same diagnostic:
code, span, message text and notes (a deadlock, a channel opened twice, a bad view).

Then what only cpu_sim has: order between coroutines in the real run (from the trace: at most
max(depth, 1) items of a channel in flight at any moment, on the host and in the cycle model,
and the counter tracks of the Chrome trace), `P.seq` around and inside pipes, `synchronize`
waiting for marked tasks of another process, `query` while marked tasks still run (a task held
until another releases it), and deadlocks found when no coroutine can move, many items in.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.cpu.artifact import build_module
from ptowsp.backends.cpu.emit import emit_module
from ptowsp.backends.cpu.program import Backend
from ptowsp.backends.ref import RunError, execute
from ptowsp.diagnostics import WspError
from tests.backends import test_ref_csp as base
from tests.backends.test_ref_csp import *  # noqa: F401,F403 - each ref test, run on both targets
from tests.guard import call_with_timeout

pytestmark = pytest.mark.cc

_BACKENDS: dict[int, Backend] = {}


def _backend(m) -> Backend:
    key = id(m)
    if key not in _BACKENDS:
        _BACKENDS.clear()  # one module at a time: modules are not kept alive by id
        _BACKENDS[key] = (Backend(build_module(m, emit_module(m))), m)
    return _BACKENDS[key][0]


def run_both(m, n: int, **arrays):
    """base.run on ref, then the same run on cpu_sim (1 and 2 workers), compared."""
    arrays.setdefault("X", np.random.default_rng(n).standard_normal((n, 4, 8)).astype(np.float32))
    syms = {"N": n}
    cpu = _backend(m)
    try:
        out, info = execute(m, None, syms, arrays)
    except RunError as err:
        for workers in (1, 2):
            with pytest.raises(WspError) as got:
                cpu.run(m, m.default_schedule, syms, dict(arrays), workers=workers)
            (d,) = got.value.diagnostics
            assert d.message.startswith(err.message), (d.message, err.message)
            assert (d.span.line, d.span.col) == (err.span.line, err.span.col)
            assert [(nt.span.line, nt.span.col, nt.message) for nt in d.notes] == \
                [(sp.line, sp.col, text) for sp, text in err.notes]
        raise
    for workers in (1, 2):
        got, ginfo = cpu.run(m, m.default_schedule, syms, dict(arrays), workers=workers)
        assert set(got) == set(out)
        for name in out:
            np.testing.assert_allclose(got[name], out[name], rtol=2e-6, atol=1e-6)
        for key in ("channels", "events", "task_count"):
            assert ginfo.get(key) == info.get(key), key
    return out, info


def deadlock_both(text: str, n: int = 2) -> WspError:
    """base.deadlock on ref; cpu_sim must report the same diagnostic (found when no coroutine
    can move, not by a timeout: the hang guard only turns a missed deadlock into a failure)."""
    ref_err = base_deadlock(text, n)
    prog = ptowsp.parse(base.HEAD + textwrap.dedent(text), "t.wsp").compile("cpu_sim")
    with pytest.raises(WspError) as info:
        call_with_timeout(lambda: prog.run(bind={"N": n}, X=np.zeros((n, 4, 8), np.float32)))
    (d,) = info.value.diagnostics
    (r,) = ref_err.diagnostics
    assert (d.code, d.message, d.span) == (r.code, r.message, r.span)
    assert [(x.span, x.message) for x in d.notes] == [(x.span, x.message) for x in r.notes]
    return ref_err


base_deadlock = base.deadlock


@pytest.fixture(autouse=True)
def _both_targets(monkeypatch):
    monkeypatch.setattr(base, "run", run_both)
    monkeypatch.setattr(base, "deadlock", deadlock_both)


# ---------------------------------------------------------------------------------------------
# What only cpu_sim shows: timing, order and the trace


def _prog(text: str):
    return ptowsp.parse(base.HEAD + textwrap.dedent(text), "t.wsp").compile("cpu_sim")


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 4])
def test_items_in_flight_never_exceed_the_depth_in_the_trace(depth):
    prog = _prog(f"""\
        channel l2c: Tile[4, 8, f32], depth = {depth}
        channel c2s: Tile[4, 8, f32], depth = {depth}
        workload w() {{
            pipe {{
                process loader {{ for i in P.seq(N) {{ send(l2c, copy[i](x = X[i], y = l2c)) }} }}
                process computer {{ consume(l2c) as t {{ send(c2s, inc[t](x = t, y = c2s)) }} }}
                process storer {{ consume(c2s) as r {{ copy[r](x = r, y = Y[r.index]) }} }}
            }}
        }}
    """)
    n = 40
    x = np.random.default_rng(depth).standard_normal((n, 4, 8)).astype(np.float32)
    out = prog.run(bind={"N": n}, X=x, workers=2, trace=True)
    np.testing.assert_array_equal(out["Y"], x + 1)
    bound = max(depth, 1)
    for clock in ("real", "sim"):
        occ = prog.trace.channel_occupancy(clock)
        assert set(occ) == {"l2c", "c2s"}
        for name, series in occ.items():
            assert max(k for _, k in series) <= bound, (clock, name, series)
            assert series[-1][1] == 0
            times = [t for t, _ in series]
            assert times == sorted(times)
    # with room for two items, the model overlaps loading and computing: both in flight at once
    if depth >= 2:
        assert max(k for _, k in prog.trace.channel_occupancy("sim")["l2c"]) >= 2
    counters = [e for e in prog.trace.to_chrome_trace()["traceEvents"] if e["ph"] == "C"]
    assert {e["name"] for e in counters} == {"channel l2c", "channel c2s"}
    assert {e["pid"] for e in counters} == {1, 2}


def test_occupancy_counts_each_pipe_run_separately():
    # item numbers restart at every run of the pipe; the count still returns to 0 in between
    prog = _prog("""\
        channel c: Tile[4, 8, f32], depth = 2
        workload w() {
            for j in P.seq(3) {
                pipe {
                    process a { for i in P.seq(N) { send(c, copy[i](x = X[i], y = c)) } }
                    process b { consume(c) as t { inc[t, j](x = t, y = Y[t]) } }
                }
            }
        }
    """)
    x = np.ones((4, 4, 8), np.float32)
    out = prog.run(bind={"N": 4}, X=x, trace=True)
    np.testing.assert_array_equal(out["Y"], x + 1)
    assert prog.stats.extra["channels"]["c"] == {"items": 12, "max_in_flight": 2, "depth": 2}
    series = prog.trace.channel_occupancy("real")["c"]
    assert max(k for _, k in series) <= 2 and series[-1][1] == 0


def test_seq_loop_around_a_pipe_orders_whole_pipe_runs():
    # iteration j+1's loader overwrites Y[0] after iteration j's storer wrote it: the order
    # comes only from the P.seq around the pipe (no data dependency between iterations)
    prog = _prog("""\
        channel c: Tile[4, 8, f32], depth = 1
        input S: f32[8, 4, 8]
        workload w() {
            for j in P.seq(8) {
                pipe {
                    process a { send(c, copy[j](x = S[j], y = c)) }
                    process b { consume(c) as t { inc[j](x = t, y = Y[0]) } }
                }
            }
        }
    """)
    s = np.arange(8, dtype=np.float32)[:, None, None] * np.ones((8, 4, 8), np.float32)
    for workers in (1, 2):
        out = prog.run(bind={"N": 1}, X=np.zeros((1, 4, 8), np.float32), S=s, workers=workers,
                       trace=True)
        np.testing.assert_array_equal(out["Y"][0], s[7] + 1)
        ev = prog.trace.events
        ends = {}
        for e in ev:
            ends.setdefault(int(e["coords"][0]), []).append((int(e["start_ns"]), int(e["end_ns"])))
        for j in range(7):  # every task of iteration j ends before any of j+1 starts
            assert max(t1 for _, t1 in ends[j]) <= min(t0 for t0, _ in ends[j + 1])


def test_seq_inside_a_process_orders_that_process_only():
    prog = _prog("""\
        channel c: Tile[4, 8, f32], depth = 4
        workload w() {
            pipe {
                process a {
                    for i in P.seq(N) { inc[i](x = X[i], y = Y[i]) }
                    send(c, copy(x = X[0], y = c))
                }
                process b { consume(c) as t { copy(x = t, y = Y[0]) } }
            }
        }
    """)
    n = 6
    x = np.random.default_rng(0).standard_normal((n, 4, 8)).astype(np.float32)
    out = prog.run(bind={"N": n}, X=x, workers=2, trace=True)
    want = x + 1
    want[0] = x[0]
    np.testing.assert_array_equal(out["Y"], want)
    inc = [e for e in prog.trace.events if prog.trace.kernel_names[e["kernel"]] == "inc"]
    for a, b in zip(inc, inc[1:]):  # P.seq: one after the other
        assert a["end_ns"] <= b["start_ns"]


def test_synchronize_waits_for_marked_tasks_of_another_process():
    # b's copies read Y, which a's marked tasks write; only `synchronize` orders them (the
    # token item is sent before a's tasks are enumerated... by a send with no data of theirs)
    prog = _prog("""\
        output Z: f32[N, 4, 8]
        event ev
        channel go, depth = 1
        workload w() {
            pipe {
                process a {
                    for i in P(N) { inc[i](x = X[i], y = Y[i]) }
                    record(ev)
                    send(go, copy(x = X[0], y = Z[0]))
                }
                process b {
                    consume(go) as t {
                        synchronize(ev)
                        for i in P(N) { inc[i](x = Y[i], y = Z[i]) }
                    }
                }
            }
        }
    """)
    n = 64
    x = np.random.default_rng(1).standard_normal((n, 4, 8)).astype(np.float32)
    for workers in (1, 2):
        out = prog.run(bind={"N": n}, X=x, workers=workers)
        # unordered, b would read Y's zeros (Z = X + 1 or 1): off by about 1, not by rounding
        np.testing.assert_allclose(out["Z"], (x + 1) + 1, rtol=1e-6, atol=1e-6)
        assert prog.stats.extra["events"] == {"ev": {"records": 1, "synchronizes": 1}}


# An extern C kernel held until another task releases it: `hold` waits until the int64 at
# address `gate` is nonzero, which `release` sets. The wait polls every 100 us (no core taken
# from a loaded machine); after at least 120 s (1.2 million polls: a hang guard, never what a
# test measures) it gives up and stores x + 100, which the test then sees.
HOLD = """\
    kernel hold(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]], gate: Scalar[i64]) extern c \"\"\"
        extern int usleep(unsigned int);
        long long *g = (long long *)(intptr_t)gate;
        for (long tries = 0; !__atomic_load_n(g, __ATOMIC_ACQUIRE) && tries < 1200000; tries++)
            usleep(100);
        float add = __atomic_load_n(g, __ATOMIC_ACQUIRE) ? 0.0f : 100.0f;
        for (int64_t r = 0; r < 4; r++)
            for (int64_t c = 0; c < 8; c++) y.data[r * y.stride + c] = x.data[r * x.stride + c] + add;
    \"\"\"
    kernel release(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]], gate: Scalar[i64]) extern c \"\"\"
        __atomic_store_n((long long *)(intptr_t)gate, 1LL, __ATOMIC_RELEASE);
        for (int64_t r = 0; r < 4; r++)
            for (int64_t c = 0; c < 8; c++) y.data[r * y.stride + c] = x.data[r * x.stride + c] + 1.0f;
    \"\"\"
"""


def test_query_sees_marked_tasks_still_running():
    # the marked task is held until the `otherwise` branch of the first query releases it: the
    # query must find it unfinished (else nothing releases it); after synchronize(ev) the query
    # finds it finished. Independent tasks: the two run at once on two workers.
    prog = _prog(HOLD + """\
        sym G
        output Z: f32[2, 4, 8]
        event ev
        workload w() {
            hold(x = X[0], y = Y[0], gate = G)
            record(ev)
            when query(ev) { copy(x = X[0], y = Z[0]) } otherwise { release(x = X[0], y = Z[0], gate = G) }
            synchronize(ev)
            when query(ev) { copy(x = X[0], y = Z[1]) } otherwise { inc(x = X[0], y = Z[1]) }
        }
    """)
    x = np.random.default_rng(3).standard_normal((1, 4, 8)).astype(np.float32)
    gate = np.zeros(1, np.int64)
    out = prog.run(bind={"N": 1, "G": gate.ctypes.data}, X=x, workers=2)
    assert gate[0] == 1  # released by the `otherwise` branch: the query saw `hold` running
    np.testing.assert_array_equal(out["Y"][0], x[0])  # held, then released (not the guard)
    np.testing.assert_array_equal(out["Z"][0], x[0] + 1)  # pending: the `otherwise` branch
    np.testing.assert_array_equal(out["Z"][1], x[0])  # finished: the `when` branch


def test_deadlock_with_many_items_is_reported_at_once():
    prog = _prog("""\
        channel a2b: Tile[4, 8, f32], depth = 4
        channel b2a: Tile[4, 8, f32], depth = 4
        workload w() {
            pipe {
                process a {
                    for i in P.seq(N) { send(a2b, copy[i](x = X[i], y = a2b)) }
                    consume(b2a) as t { copy[t](x = t, y = Y[t]) }
                }
                process b {
                    for i in P.seq(N) { send(b2a, copy[i](x = X[i], y = b2a)) }
                    consume(a2b) as t { copy[t](x = t, y = Y[t]) }
                }
            }
        }
    """)
    with pytest.raises(WspError) as info:
        call_with_timeout(lambda: prog.run(bind={"N": 1000}, X=np.zeros((1000, 4, 8), np.float32)))
    (d,) = info.value.diagnostics
    assert d.code == "deadlock"
    assert "process `a` waits to send item 4 on `a2b` (depth 4) until item 0 is consumed" \
        in d.message
