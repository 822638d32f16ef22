"""CSP on the `ref` back end (language.md section 7; the contract is the "CSP" part of
`ir/nodes.py`): pipes of processes enumerated as coroutines, checked against NumPy.

Covered: the megakernel (loader -> computer -> storer) for depths 0..4, worker pools with
1..4 replicas, `t` / `t.index` / `NAME.id`, token channels and events (as token channels and
with record / synchronize / query), channels with several senders closing when all have
finished, at most D items in flight per channel (from the run info), nested pipes, and
deadlocks reported at the blocked statements (with every blocked process named).
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.backends.ref import RunError, execute
from ptowsp.diagnostics import WspError
from ptowsp.frontend.checker import check_source
from ptowsp.ir.verify import verify
from ptowsp.lower import lower
from tests.guard import call_with_timeout

HEAD = """\
sym N
input  X: f32[N, 4, 8]
output Y: f32[N, 4, 8]
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
kernel inc(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x + 1.0) }
"""


def module(text: str, head: str = HEAD):
    m = lower(check_source(head + textwrap.dedent(text), "t.wsp"))
    verify(m)
    return m


def run(m, n: int, **arrays):
    arrays.setdefault("X", np.random.default_rng(n).standard_normal((n, 4, 8)).astype(np.float32))
    return execute(m, None, {"N": n}, arrays)


def silu(x):
    return x / (1 + np.exp(-x))


# ---------------------------------------------------------------------------------------------
# The megakernel of language.md section 7


MEGAKERNEL = """\
sym N
input  X: f32[N, 16, 128]
output Y: f32[N, 16, 128]

channel l2c: Tile[16, 128, f32], depth = {D}
channel c2s: Tile[16, 128, f32], depth = {D2}

kernel load_tile(src: In[Tile[16, 128, f32]], dst: Out[Tile[16, 128, f32]]) {{
    store(dst, load(src))
}}
kernel compute_tile(src: In[Tile[16, 128, f32]], dst: Out[Tile[16, 128, f32]]) {{
    store(dst, silu(src) * 2.0)
}}
kernel store_tile(src: In[Tile[16, 128, f32]], dst: Out[Tile[16, 128, f32]]) {{
    store(dst, src)
}}

axis tiles = DenseDyn(N)

workload megakernel(tiles: DenseDyn) {{
    pipe {{
        process loader {{
            for i in P.seq(tiles) {{
                send(l2c, load_tile[i](src = X[i], dst = l2c))
            }}
        }}
        process computer {{
            consume(l2c) as t {{
                send(c2s, compute_tile[t](src = t, dst = c2s))
            }}
        }}
        process storer {{
            consume(c2s) as r {{
                store_tile[r](src = r, dst = Y[r.index])
            }}
        }}
    }}
}}

schedule main = megakernel(tiles)
"""


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_megakernel_matches_numpy(depth, n):
    m = lower(check_source(MEGAKERNEL.format(D=depth, D2=depth), "mk.wsp"))
    verify(m)
    x = np.random.default_rng(depth).standard_normal((n, 16, 128)).astype(np.float32)
    out, info = execute(m, None, {"N": n}, {"X": x})
    np.testing.assert_allclose(out["Y"], silu(x) * 2, rtol=1e-6, atol=1e-6)
    assert info["task_count"] == 3 * n
    for ch in ("l2c", "c2s"):
        c = info["channels"][ch]
        assert c["items"] == n and c["depth"] == depth
        # the loader runs ahead until back-pressure stops it: exactly min(S, n) in flight
        assert c["max_in_flight"] == min(max(depth, 1), n)


@settings(max_examples=15, deadline=None)
@given(d1=st.integers(0, 4), d2=st.integers(0, 4), n=st.integers(0, 7))
def test_megakernel_any_depths(d1, d2, n):
    m = lower(check_source(MEGAKERNEL.format(D=d1, D2=d2), "mk.wsp"))
    x = np.random.default_rng(n).standard_normal((n, 16, 128)).astype(np.float32)
    out, info = execute(m, None, {"N": n}, {"X": x})
    np.testing.assert_allclose(out["Y"], silu(x) * 2, rtol=1e-6, atol=1e-6)
    assert info["channels"]["l2c"]["max_in_flight"] <= max(d1, 1)
    assert info["channels"]["c2s"]["max_in_flight"] <= max(d2, 1)


def test_megakernel_program_through_the_api():
    prog = ptowsp.load("tests/programs/spec_megakernel.wsp").compile("ref")
    x = np.random.default_rng(0).standard_normal((3, 16, 128)).astype(np.float32)
    y = prog.run(X=x)["Y"]
    np.testing.assert_allclose(y, silu(x) * 2, rtol=1e-6, atol=1e-6)
    assert prog.stats.extra["channels"]["l2c"] == {"items": 3, "max_in_flight": 2, "depth": 2}


# ---------------------------------------------------------------------------------------------
# Worker pools: replicas share the items, item k to replica k % R


POOL = """\
output Who: i32[N, 1]
kernel work(src: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]], who: Out[Tile[1, 1, i32]],
            id: Scalar[i32]) {{
    store(y, src * 3.0 + 1.0)
    store(who, id)
}}
channel q: Tile[4, 8, f32], depth = {D}
workload w() {{
    pipe {{
        process loader {{ for i in P.seq(N) {{ send(q, copy[i](x = X[i], y = q)) }} }}
        process workers * {R} {{
            consume(q) as t {{
                work[t, workers.id](src = t, y = Y[t], who = Who[t.index], id = workers.id)
            }}
        }}
    }}
}}
"""


@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("depth", [0, 1, 3])
def test_worker_pool_matches_numpy(replicas, depth):
    m = module(POOL.format(D=depth, R=replicas))
    n = 7
    out, info = run(m, n)
    x = np.random.default_rng(n).standard_normal((n, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(out["Y"], x * 3 + 1, rtol=1e-6)
    np.testing.assert_array_equal(out["Who"][:, 0], np.arange(n) % replicas)
    assert info["channels"]["q"]["max_in_flight"] <= max(depth, 1)


@settings(max_examples=10, deadline=None)
@given(replicas=st.integers(1, 4), depth=st.integers(0, 4), n=st.integers(0, 9))
def test_worker_pool_any_size(replicas, depth, n):
    m = module(POOL.format(D=depth, R=replicas))
    out, info = run(m, n)
    x = np.random.default_rng(n).standard_normal((n, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(out["Y"], x * 3 + 1, rtol=1e-6)
    np.testing.assert_array_equal(out["Who"][:, 0], np.arange(n) % replicas)
    assert info["channels"]["q"]["items"] == n


def test_item_as_coordinate_index_and_scalar():
    # `t` as a coordinate, `t.index` in a view and `t` in a scalar argument all mean the item number
    m = module("""\
        output K: i32[N, 1]
        kernel num(y: Out[Tile[1, 1, i32]], v: Scalar[i32]) { store(y, v) }
        channel c, depth = 2
        workload w() {
            pipe {
                process p { for i in P.seq(N) { send(c, copy[i](x = X[N - 1 - i], y = Y[i])) } }
                process q { consume(c) as t { num[t](y = K[t.index], v = t * 10 + 1) } }
            }
        }
    """)
    out, _ = run(m, 4)
    np.testing.assert_array_equal(out["K"][:, 0], np.arange(4) * 10 + 1)


def test_replica_ids_in_nested_loops_and_senders():
    # replicated senders: items are numbered in enumeration order (replica 0 runs first)
    m = module("""\
        output Z: f32[N, 4, 8]
        channel c: Tile[4, 8, f32], depth = 4
        workload w() {
            pipe {
                process p * 2 {
                    for i in P.seq(N / 2) { send(c, copy[p.id, i](x = X[2 * i + p.id], y = c)) }
                }
                process s { consume(c) as t { copy[t](x = t, y = Z[t]) } }
            }
        }
    """)
    out, info = run(m, 4)
    x = np.random.default_rng(4).standard_normal((4, 4, 8)).astype(np.float32)
    # replica 0 sends X[0], X[2] (4 slots, no back-pressure), then replica 1 X[1], X[3]
    np.testing.assert_array_equal(out["Z"], x[[0, 2, 1, 3]])
    assert info["channels"]["c"]["items"] == 4


# ---------------------------------------------------------------------------------------------
# Token channels and events


def test_token_channel_carries_completion():
    m = module("""\
        output Z: f32[N, 4, 8]
        channel done, depth = 1
        workload w() {
            pipe {
                process producer { for i in P.seq(N) { send(done, inc[i](x = X[i], y = Y[i])) } }
                process consumer { consume(done) as t { inc[t](x = Y[t], y = Z[t]) } }
            }
        }
    """)
    out, info = run(m, 5)
    x = np.random.default_rng(5).standard_normal((5, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(out["Z"], x + 2, rtol=1e-6)
    assert info["channels"]["done"] == {"items": 5, "max_in_flight": 1, "depth": 1}


def test_event_as_rendezvous_token_channel():
    m = module("""\
        output Z: f32[N, 4, 8]
        event ready
        workload w() {
            pipe {
                process producer { for i in P.seq(N) { send(ready, inc[i](x = X[i], y = Y[i])) } }
                process consumer { consume(ready) as e { inc[e](x = Y[e], y = Z[e]) } }
            }
        }
    """)
    out, info = run(m, 3)
    x = np.random.default_rng(3).standard_normal((3, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(out["Z"], x + 2, rtol=1e-6)
    assert info["channels"]["ready"] == {"items": 3, "max_in_flight": 1, "depth": 0}


def test_record_synchronize_query():
    m = module("""\
        output Z: f32[N, 4, 8]
        event ev
        workload w() {
            for i in P(N) { inc[i](x = X[i], y = Y[i]) }
            record(ev)
            synchronize(ev)
            when query(ev) { for i in P(N) { inc[i](x = Y[i], y = Z[i]) } }
            otherwise { for i in P(N) { copy[i](x = X[i], y = Z[i]) } }
        }
    """)
    out, info = run(m, 3)
    x = np.random.default_rng(3).standard_normal((3, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(out["Z"], x + 2, rtol=1e-6)  # in ref, query always holds
    assert info["events"] == {"ev": {"records": 1, "synchronizes": 1}}


def test_events_slots_inline_program():
    prog = ptowsp.load("tests/programs/events_slots_inline.wsp").compile("ref")
    x = np.random.default_rng(1).standard_normal((3, 4, 8)).astype(np.float32)
    out = prog.run(X=x, counts=np.array([2, 0, 0], np.int32))
    np.testing.assert_array_equal(out["Y"], x)
    np.testing.assert_array_equal(out["Z"], np.zeros((4, 8), np.float32))  # fill() runs last


def test_record_and_synchronize_across_processes():
    # a process marks its tasks; another synchronizes on them (order only: results unchanged)
    m = module("""\
        output Z: f32[N, 4, 8]
        event ev
        channel c, depth = 1
        workload w() {
            pipe {
                process a {
                    for i in P(N) { inc[i](x = X[i], y = Y[i]) }
                    record(ev)
                    send(c, copy(x = X[0], y = Z[0]))
                }
                process b {
                    consume(c) as t {
                        synchronize(ev)
                        for i in P(N) { inc[i](x = Y[i], y = Z[i]) }
                    }
                }
            }
        }
    """)
    out, info = run(m, 3)
    x = np.random.default_rng(3).standard_normal((3, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(out["Z"], x + 2, rtol=1e-6)
    assert info["events"]["ev"] == {"records": 1, "synchronizes": 1}


# ---------------------------------------------------------------------------------------------
# Closing, numbering, several senders, nested pipes


def test_channel_closes_when_every_sender_has_finished():
    head = HEAD + "input W: f32[M, 4, 8]\nsym M\noutput Z: f32[N + M, 4, 8]\n"
    m = module("""\
        channel c: Tile[4, 8, f32], depth = 2
        workload w() {
            pipe {
                process a { for i in P.seq(N) { send(c, copy[i](x = X[i], y = c)) } }
                process b { for i in P.seq(M) { send(c, copy[i](x = W[i], y = c)) } }
                process s { consume(c) as t { copy[t](x = t, y = Z[t]) } }
            }
        }
    """, head)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 8)).astype(np.float32)
    wv = rng.standard_normal((2, 4, 8)).astype(np.float32)
    out, info = execute(m, None, {"N": 3, "M": 2}, {"X": x, "W": wv})
    # the order the coroutine enumeration gives (nodes.py): a sends 0, 1; b waits for slot 0;
    # s takes 0, 1; a sends 2 and ends; b sends 3, 4; s takes them all, then the channel closes
    np.testing.assert_array_equal(out["Z"], np.concatenate([x, wv]))
    assert info["channels"]["c"]["items"] == 5
    # one sender with nothing to send closes nothing early
    out, info = execute(m, None, {"N": 0, "M": 2}, {"X": x[:0], "W": wv})
    np.testing.assert_array_equal(out["Z"], wv)


def test_pipe_in_a_loop_renumbers_items():
    m = module("""\
        output Z: f32[2, N, 4, 8]
        channel c: Tile[4, 8, f32], depth = 1
        workload w() {
            for r in P.seq(2) {
                pipe {
                    process a { for i in P.seq(N) { send(c, inc[r, i](x = X[N - 1 - i], y = c)) } }
                    process b { consume(c) as t { copy[r, t](x = t, y = Z[r, t]) } }
                }
            }
        }
    """)
    out, info = run(m, 3)
    x = np.random.default_rng(3).standard_normal((3, 4, 8)).astype(np.float32)
    for r in range(2):
        np.testing.assert_allclose(out["Z"][r], x[::-1] + 1, rtol=1e-6)
    assert info["channels"]["c"] == {"items": 6, "max_in_flight": 1, "depth": 1}


def test_nested_pipe_inside_a_consume_body():
    m = module("""\
        output Z: f32[N, 4, 8]
        channel outer: Tile[4, 8, f32], depth = 2
        channel inner, depth = 0
        workload w() {
            pipe {
                process a { for i in P.seq(N) { send(outer, inc[i](x = X[i], y = outer)) } }
                process b {
                    consume(outer) as t {
                        pipe {
                            process c { send(inner, inc[t](x = t, y = Y[t])) }
                            process d { consume(inner) as u { inc[t](x = Y[t], y = Z[t]) } }
                        }
                    }
                }
            }
        }
    """)
    out, info = run(m, 4)
    x = np.random.default_rng(4).standard_normal((4, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(out["Y"], x + 2, rtol=1e-6)
    np.testing.assert_allclose(out["Z"], x + 3, rtol=1e-6)
    assert info["channels"]["inner"]["items"] == 4


def test_inlined_producer_and_a_token_chain():
    m = module("""\
        output Z: f32[N, 4, 8]
        channel c: Tile[4, 8, f32], depth = 2
        channel done, depth = 1
        workload produce() { for i in P.seq(N) { send(c, copy[i](x = X[i], y = c)) } }
        workload finish() { consume(done) as d { inc[d](x = Y[d], y = Z[d]) } }
        workload w() {
            pipe {
                process a { produce() }
                process s { consume(c) as t { send(done, inc[t](x = t, y = Y[t])) } }
                process f { finish() }
            }
        }
    """)
    out, info = run(m, 5)
    x = np.random.default_rng(5).standard_normal((5, 4, 8)).astype(np.float32)
    np.testing.assert_allclose(out["Y"], x + 1, rtol=1e-6)
    np.testing.assert_allclose(out["Z"], x + 2, rtol=1e-6)
    assert info["channels"]["done"]["items"] == 5


def test_request_response_with_too_small_buffers_deadlocks():
    # the producer sends everything before reading the replies: `back` (depth 1) fills up
    m = module("""\
        channel c: Tile[4, 8, f32], depth = 2
        channel back, depth = 1
        workload w() {
            pipe {
                process a {
                    for i in P.seq(N) { send(c, copy[i](x = X[i], y = c)) }
                    consume(back) as b { }
                }
                process s { consume(c) as t { send(back, inc[t](x = t, y = Y[t])) } }
            }
        }
    """)
    with pytest.raises(RunError) as info:
        run(m, 5)
    assert info.value.message == (
        "deadlock: no process can make progress: process `a` waits to send item 3 on `c` "
        "(depth 2) until item 1 is consumed (at i=3); process `s` waits to send item 1 on "
        "`back` (depth 1) until item 0 is consumed (at t=1)")
    # with few items the buffers suffice, but `c` closes only when `a` has finished, which
    # waits for `back` to close, which waits for `s`, which waits for `c` to close
    with pytest.raises(RunError) as info:
        run(m, 2)
    assert info.value.message.endswith(
        "process `a` waits for item 2 on `back`; process `s` waits for item 2 on `c`")


def test_slots_are_shared_by_processes():
    m = module("""\
        channel c, depth = 1
        workload w() {
            pipe {
                process a { slot_set(3, N - 1); send(c, copy(x = X[0], y = Y[0])) }
                process b { consume(c) as t { copy[t](x = X[slot(3)], y = Y[slot(3)]) } }
            }
        }
    """)
    out, _ = run(m, 3)
    x = np.random.default_rng(3).standard_normal((3, 4, 8)).astype(np.float32)
    np.testing.assert_array_equal(out["Y"][[0, 2]], x[[0, 2]])


def test_view_errors_inside_processes_name_their_coordinates():
    m = module("""\
        channel c: Tile[4, 8, f32], depth = 1
        workload w() {
            pipe {
                process a { for i in P.seq(N + 1) { send(c, copy[i](x = X[0], y = c)) } }
                process b { consume(c) as t { copy[t](x = t, y = Y[t]) } }
            }
        }
    """)
    with pytest.raises(RunError) as info:
        run(m, 2)
    assert "must be less than N, found 2 and 2 (task `copy[t]` at t=2)" in str(info.value)


def test_a_channel_serves_one_pipe_at_a_time():
    m = module("""\
        channel c: Tile[4, 8, f32], depth = 1
        channel go, depth = 1
        workload w() {
            pipe {
                process k { send(go, copy(x = X[0], y = Y[0])) }
                process q * 2 {
                    consume(go) as g { }
                    pipe {
                        process a { send(c, copy(x = X[0], y = c)) }
                        process b { consume(c) as t { copy[t](x = t, y = Y[1]) } }
                    }
                }
            }
        }
    """)
    with pytest.raises(RunError) as info:
        run(m, 2)
    assert (info.value.span.line, info.value.span.col) == (13, 13)
    assert "channel `c` is still open in another run of the pipe at 13:13" in info.value.message


# ---------------------------------------------------------------------------------------------
# Deadlocks at run time


def deadlock(text: str, n: int = 2) -> WspError:
    """The deadlock diagnostic of a run (found when no process can move; the hang guard only
    turns a missed deadlock into a failure)."""
    prog = ptowsp.parse(HEAD + textwrap.dedent(text), "t.wsp").compile("ref")
    with pytest.raises(WspError) as info:
        call_with_timeout(lambda: prog.run(bind={"N": n}, X=np.zeros((n, 4, 8), np.float32)))
    (d,) = info.value.diagnostics
    assert d.code == "deadlock"
    return info.value


def test_deadlock_of_full_buffers():
    err = deadlock("""\
        channel a2b: Tile[4, 8, f32], depth = 1
        channel b2a: Tile[4, 8, f32], depth = 1
        workload w() {
            pipe {
                process a {
                    for i in P.seq(2) { send(a2b, copy[i](x = X[i], y = a2b)) }
                    consume(b2a) as t { copy[t](x = t, y = Y[t]) }
                }
                process b {
                    for i in P.seq(2) { send(b2a, copy[i](x = X[i], y = b2a)) }
                    consume(a2b) as t { copy[t](x = t, y = Y[t]) }
                }
            }
        }
    """)
    (d,) = err.diagnostics
    assert (d.span.line, d.span.col) == (11, 38)
    assert d.message == (
        "deadlock: no process can make progress: process `a` waits to send item 1 on `a2b` "
        "(depth 1) until item 0 is consumed (at i=1); process `b` waits to send item 1 on `b2a` "
        "(depth 1) until item 0 is consumed (at i=1)")
    assert [(n.span.line, n.span.col, n.message) for n in d.notes] == [
        (15, 38, "process `b` is blocked here")]
    assert err.render().startswith("t.wsp:11:38: error: deadlock: no process can make progress")


def test_deadlock_of_consumers_waiting_for_each_other():
    err = deadlock("""\
        channel a2b: Tile[4, 8, f32], depth = 2
        channel b2a: Tile[4, 8, f32], depth = 2
        workload w() {
            pipe {
                process a {
                    consume(b2a) as t { copy[t](x = t, y = Y[t]) }
                    send(a2b, copy(x = X[0], y = a2b))
                }
                process b {
                    consume(a2b) as t { copy[t](x = t, y = Y[t]) }
                    send(b2a, copy(x = X[1], y = b2a))
                }
            }
        }
    """)
    (d,) = err.diagnostics
    assert (d.span.line, d.span.col) == (11, 21)
    assert d.message.endswith("process `a` waits for item 0 on `b2a`; process `b` waits for "
                              "item 0 on `a2b`")


def test_rendezvous_deadlock_the_compiler_cannot_decide():
    # the sends are under `when`, so the compile-time check leaves them to the run
    err = deadlock("""\
        channel a2b: Tile[4, 8, f32], depth = 0
        channel b2a: Tile[4, 8, f32], depth = 0
        workload w() {
            pipe {
                process a {
                    when N > 1 { send(a2b, copy(x = X[0], y = a2b)) }
                    consume(b2a) as t { copy[t](x = t, y = Y[0]) }
                }
                process b {
                    when N > 1 { send(b2a, copy(x = X[1], y = b2a)) }
                    consume(a2b) as t { copy[t](x = t, y = Y[1]) }
                }
            }
        }
    """)
    (d,) = err.diagnostics
    assert (d.span.line, d.span.col) == (11, 31)
    assert "process `a` waits to send item 0 on `a2b` (depth 0) until a process waits to " \
           "consume it" in d.message


def test_deadlock_of_a_three_process_ring_and_replicas():
    err = deadlock("""\
        channel x: Tile[4, 8, f32], depth = 1
        channel y: Tile[4, 8, f32], depth = 1
        channel z: Tile[4, 8, f32], depth = 1
        workload w() {
            pipe {
                process a * 2 {
                    consume(z) as t { copy[t](x = t, y = Y[0]) }
                    send(x, copy(x = X[0], y = x))
                }
                process b { consume(x) as t { send(y, copy[t](x = t, y = y)) } }
                process c { consume(y) as t { send(z, copy[t](x = t, y = z)) } }
            }
        }
    """)
    (d,) = err.diagnostics
    assert "process `a` (replica 0) waits for item 0 on `z` (at a.id=0); process `a` " \
           "(replica 1) waits for item 1 on `z` (at a.id=1); process `b` waits for item 0 on " \
           "`x`; process `c` waits for item 0 on `y`" in d.message
    assert len(d.notes) == 3


def test_a_consumer_that_never_consumes_deadlocks_its_sender():
    err = deadlock("""\
        channel c: Tile[4, 8, f32], depth = 1
        workload w() {
            pipe {
                process a { for i in P.seq(N) { send(c, copy[i](x = X[i], y = c)) } }
                process b { when N > 5 { consume(c) as t { copy[t](x = t, y = Y[t]) } } }
            }
        }
    """, n=3)
    (d,) = err.diagnostics
    assert d.message.endswith("process `a` waits to send item 1 on `c` (depth 1) until item 0 "
                              "is consumed (at i=1)")


def test_unconsumed_items_are_dropped_when_the_pipe_ends():
    m = module("""\
        channel c: Tile[4, 8, f32], depth = 4
        workload w() {
            pipe {
                process a { for i in P.seq(N) { send(c, copy[i](x = X[i], y = c)) } }
                process b { when N > 5 { consume(c) as t { copy[t](x = t, y = Y[t]) } } }
            }
        }
    """)
    out, info = run(m, 3)
    assert not out["Y"].any()
    assert info["channels"]["c"] == {"items": 3, "max_in_flight": 3, "depth": 4}


THREE_STAGE = """\
channel l2w: Tile[4, 8, f32], depth = {D1}
channel w2s: Tile[4, 8, f32], depth = {D2}
workload w() {{
    pipe {{
        process loader {{ for i in P.seq(N) {{ send(l2w, copy[i](x = X[i], y = l2w)) }} }}
        process workers * {R} {{ consume(l2w) as t {{ send(w2s, inc[t](x = t, y = w2s)) }} }}
        process storer {{ consume(w2s) as r {{ copy[r](x = r, y = Y[r.index]) }} }}
    }}
}}
"""


@settings(max_examples=20, deadline=None)
@given(d1=st.integers(0, 3), d2=st.integers(0, 3), replicas=st.integers(1, 4),
       n=st.integers(0, 8))
def test_replicated_middle_stage(d1, d2, replicas, n):
    # replicas send to `w2s` in enumeration order, so the storer sees a deterministic
    # permutation of the items: every input row arrives exactly once, incremented
    m = module(THREE_STAGE.format(D1=d1, D2=d2, R=replicas))
    out, info = run(m, n)
    again, _ = run(m, n)
    np.testing.assert_array_equal(out["Y"], again["Y"])
    x = np.random.default_rng(n).standard_normal((n, 4, 8)).astype(np.float32)
    order = sorted(range(n), key=lambda i: float(x[i, 0, 0]))
    got = sorted(range(n), key=lambda i: float(out["Y"][i, 0, 0]))
    np.testing.assert_allclose(out["Y"][got], x[order] + 1, rtol=1e-6)
    assert info["channels"]["l2w"]["max_in_flight"] <= max(d1, 1)
    assert info["channels"]["w2s"]["max_in_flight"] <= max(d2, 1)
    assert info["channels"]["w2s"]["items"] == n
