"""Channels, pipes, events and ordering statements on a mesh of several devices
(docs/distributed.md, "Channels, pipes and events on a mesh"): each device runs its own instance
of a pipe and its channels, a task in it on the devices its views pick; a `P.seq`, a
`sequential` block and a stream order each device's tasks among themselves.

- A CSP pipeline sharded over tp (a loader sends X's row tiles, a consumer runs each device's
  column blocks of an MLP into a partial scratch) with an allreduce after: ref == cpu_sim == the
  MLP in float64 NumPy on meshes of 1, 2, 4 and 2x2 devices; cpu_sim bit-identical on every
  mesh size's replicas (`check_replicas`).
- An event between two tasks on each device (record and synchronize in a pipe's process), and
  one recorded and waited for outside a pipe (one order over every device): against NumPy; a
  `query` of a channel (every device's sends) in a consumer.
- The order is per device, from the cycle model's trace: in a `sequential` block and a `P.seq`
  whose first step runs on device 0 only, device 1's next step starts before device 0's first
  one has finished; with streams, the tasks of one stream number on each device apart.
- What is refused, each at its place: a send whose task one device holds (an item the other
  devices' instances never get), a collective or a `slot_set` inside a pipe, an event used inside
  and outside a pipe, an event waited for in a pipe inside a loop, and mesh CSP for ascend_npu.
"""

from __future__ import annotations

import numpy as np
import pytest

import ptowsp
from ptowsp.diagnostics import WspError
from tests.accuracy import assert_close

MESHES = [(1, 1), (1, 2), (1, 4), (2, 2)]

# the loader sends each row tile of X (replicated: every device's instance sends all of them);
# the consumer's tasks each read a column block of W1 and a row block of W2, so each runs on
# the tp device that holds it (`when` its device) and adds its block's product into its addend
PIPELINE = """module csp_mlp
mesh dp = DP, tp = TP
sym DP = 1
sym TP = 1
sym N = 4
const D = 32
const F = 64
const FB = 16
input   X:  f32[N, 8, D]
input   W1: f32[D, F] @ [R, S(tp)]
input   W2: f32[F, D] @ [S(tp), R]
scratch Zp: f32[N, 8, D] @ [R, R, R] partial(tp)
output  Y:  f32[N, 8, D]
channel xs: Tile[8, 32, f32], depth = 2

kernel load_tile(src: In[Tile[8, 32, f32]], dst: Out[Tile[8, 32, f32]]) {
    store(dst, load(src))
}
kernel mlp_block(x: In[Tile[8, 32, f32]], w1: In[Tile[32, 16, f32]], w2: In[Tile[16, 32, f32]],
                 acc: InOut[Tile[8, 32, f32]]) {
    store(acc, acc + matmul(relu(matmul(x, w1)), w2))
}
axis cols = Dense[F / FB]

workload w() {
    pipe {
        process loader {
            for k in P.seq(N) { send(xs, load_tile[k](src = X[k], dst = xs)) }
        }
        process mlp {
            consume(xs) as k {
                for f in P.seq(cols) {
                    mlp_block[k, f](x = k, w1 = W1[:, f*FB : f*FB + FB],
                                    w2 = W2[f*FB : f*FB + FB, :], acc = Zp[k.index])
                }
            }
        }
    }
    allreduce(Zp, into = Y, over = tp)
}
schedule main = w()
schedule streamed = w().streams(2)
"""


def _pipeline_inputs(n: int = 4) -> dict:
    rng = np.random.default_rng(11)
    return {"X": rng.standard_normal((n, 8, 32)).astype(np.float32),
            "W1": (rng.standard_normal((32, 64)) / 4).astype(np.float32),
            "W2": (rng.standard_normal((64, 32)) / 4).astype(np.float32)}


def _mlp(x, w1, w2) -> np.ndarray:
    x, w1, w2 = (a.astype(np.float64) for a in (x, w1, w2))
    return np.maximum(x @ w1, 0) @ w2


@pytest.mark.parametrize("dp, tp", MESHES)
@pytest.mark.parametrize("schedule", ["main", "streamed"])
def test_a_csp_pipeline_sharded_over_tp_then_allreduced_is_the_mlp(dp, tp, schedule):
    m = ptowsp.parse(PIPELINE, "csp_mlp.wsp")
    inputs = _pipeline_inputs()
    want = _mlp(inputs["X"], inputs["W1"], inputs["W2"])
    got = {}
    for target in ("ref", "cpu_sim"):
        p = m.compile(target, schedule=schedule, mesh={"dp": dp, "tp": tp})
        got[target] = p.run(check_replicas=True, **inputs)["Y"]
        assert_close(got[target], want, rtol=1e-5, atol=1e-5, what=f"{target} {dp}x{tp}")
    assert_close(got["cpu_sim"], got["ref"], rtol=1e-5, atol=1e-5)


def test_each_device_runs_its_own_instance_of_the_pipe():
    # the loader's sends are replicated: each of the 4 devices' instances numbers its own
    # N items from 0 (ref counts the items of every instance: 4 x N)
    m = ptowsp.parse(PIPELINE, "csp_mlp.wsp")
    p = m.compile("ref", mesh={"tp": 4})
    p.run(**_pipeline_inputs())
    assert p.stats.extra["channels"]["xs"]["items"] == 4 * 4
    assert p.stats.task_count == 4 * 4 + 4 * 4 + 4 * 4  # loads, blocks, allreduce tiles


EVENTS = """module ev_mesh
mesh tp = 2
const D = 64
input   X: f32[8, D] @ [R, S(tp)]
scratch H: f32[8, D] @ [R, S(tp)]
output  Y: f32[8, D] @ [R, S(tp)]
output  Z: f32[8, D] @ [R, S(tp)]
event e
event g

kernel twice(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
kernel plus(x: In[Tile[8, 16, f32]], h: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) {
    store(y, x + h)
}
axis cols = Dense[D / 16]

workload w() {
    pipe {
        process p {
            for f in P(cols) { twice[f](x = X[:, f*16 : f*16 + 16], y = H[:, f*16 : f*16 + 16]) }
            record(e)
            synchronize(e)
            for f in P(cols) {
                plus[f](x = X[:, f*16 : f*16 + 16], h = H[:, f*16 : f*16 + 16],
                        y = Y[:, f*16 : f*16 + 16])
            }
        }
    }
    for f in P(cols) { twice[f](x = Y[:, f*16 : f*16 + 16], y = Z[:, f*16 : f*16 + 16]) }
    record(g)
    synchronize(g)
    when query(g) {
        for f in P(cols) { twice[f](x = Y[:, f*16 : f*16 + 16], y = Z[:, f*16 : f*16 + 16]) }
    }
}
schedule main = w()
"""


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_an_event_between_two_tasks_on_each_device(target):
    m = ptowsp.parse(EVENTS, "ev_mesh.wsp")
    x = np.random.default_rng(3).standard_normal((8, 64)).astype(np.float32)
    out = m.compile(target).run(X=x)
    np.testing.assert_array_equal(out["Y"], x * np.float32(3))  # x + 2x, exact in f32
    np.testing.assert_array_equal(out["Z"], x * np.float32(6))


QUERY = """module q_mesh
mesh tp = 2
sym N = 6
input  X: f32[N, 8, 16]
output Y: f32[N, 8, 16]
channel c: Tile[8, 16, f32], depth = 2
kernel cp(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x) }
kernel neg(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, 0.0 - x) }
workload w() {
    pipe {
        process a { for i in P.seq(N) { send(c, cp[i](x = X[i], y = c)) } }
        process b {
            consume(c) as t {
                when query(c) { neg[t](x = t, y = Y[t.index]) }
                otherwise { neg[t](x = t, y = Y[t.index]) }
            }
        }
    }
}
schedule main = w()
"""


def test_a_query_of_a_channel_on_a_mesh_asks_every_devices_sends():
    # whichever way the query goes (it depends on timing), both branches write -X
    m = ptowsp.parse(QUERY, "q_mesh.wsp")
    x = np.random.default_rng(5).standard_normal((6, 8, 16)).astype(np.float32)
    for target in ("ref", "cpu_sim"):
        out = m.compile(target).run(X=x, check_replicas=True)
        np.testing.assert_array_equal(out["Y"], -x)


def _sim_spans(p) -> list[tuple[int, str, int, int]]:
    """(device, kernel, start, finish) of each task in the cycle model, in enumeration order."""
    t = p.trace
    dev = t._sim_device()
    return [(int(dev[i]), t.kernel_names[int(t.events["kernel"][i])], int(t.sim["start"][i]),
             int(t.sim["finish"][i])) for i in range(len(t))]


ORDERED = """module ordered
mesh tp = 2
input  X: f32[8, 64] @ [R, S(tp)]
output Y: f32[8, 64] @ [R, S(tp)]
output H: f32[8, 64] @ [R, S(tp)]
kernel up(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
kernel dn(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x + 1.0) }
workload w() {
    {stmt}
}
schedule main = w()
"""
# the first step's tasks read columns 0 .. 31, device 0's; the second step's run on both
SEQUENTIAL = """sequential {
        for f in P(Dense[2]) { up[f](x = X[:, f*16 : f*16 + 16], y = H[:, f*16 : f*16 + 16]) }
        for f in P(Dense[4]) { dn[f](x = X[:, f*16 : f*16 + 16], y = Y[:, f*16 : f*16 + 16]) }
    }"""
SEQ_LOOP = """for s in P.seq(Dense[2]) {
        when s == 0 {
            for f in P(Dense[2]) { up[f](x = X[:, f*16 : f*16 + 16], y = H[:, f*16 : f*16 + 16]) }
        } otherwise {
            for f in P(Dense[4]) { dn[f](x = X[:, f*16 : f*16 + 16], y = Y[:, f*16 : f*16 + 16]) }
        }
    }"""


@pytest.mark.parametrize("stmt", [SEQUENTIAL, SEQ_LOOP], ids=["sequential", "P.seq"])
def test_an_ordering_statement_orders_each_devices_tasks_not_the_devices_between_them(stmt):
    m = ptowsp.parse(ORDERED.replace("{stmt}", stmt), "ordered.wsp")
    p = m.compile("cpu_sim")
    x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    out = p.run(X=x, trace=True)
    np.testing.assert_array_equal(out["Y"], x + 1)
    np.testing.assert_array_equal(out["H"][:, :32], x[:, :32] * 2)
    spans = _sim_spans(p)
    up0 = [s for s in spans if s[1] == "up"]
    dn0 = [s for s in spans if s[1] == "dn" and s[0] == 0]
    dn1 = [s for s in spans if s[1] == "dn" and s[0] == 1]
    assert {s[0] for s in up0} == {0} and len(dn0) == len(dn1) == 2
    # device 0's second step waits for its first; device 1's has nothing before it on its own
    # device, so it starts before device 0's first step has finished
    assert min(s[2] for s in dn0) >= max(s[3] for s in up0)
    assert min(s[2] for s in dn1) < max(s[3] for s in up0)


def test_a_stream_orders_the_tasks_of_one_device():
    m = ptowsp.parse(PIPELINE, "csp_mlp.wsp")
    p = m.compile("cpu_sim", schedule="streamed", mesh={"tp": 2})
    p.run(trace=True, **_pipeline_inputs())
    ev = p.trace.events
    dev = p.trace._sim_device()
    streams = {(int(d), int(s)) for d, s in zip(dev, ev["stream"]) if s >= 0}
    # device d's streams are 2d and 2d + 1: no stream holds tasks of two devices
    assert streams == {(0, 0), (0, 1), (1, 2), (1, 3)}


# ---- what is refused ---------------------------------------------------------------------------


def _messages(fn) -> list:
    with pytest.raises(WspError) as info:
        fn()
    return info.value.diagnostics


def _pipe(body: str, decls: str = "") -> str:
    return ("module r\nmesh tp = 2\ninput X: f32[8, 32]\ninput W: f32[8, 32] @ [R, S(tp)]\n"
            "output Y: f32[8, 32]\nscratch Zp: f32[8, 32] @ [R, R] partial(tp)\n"
            "channel c: Tile[8, 16, f32], depth = 1\nevent e\n" + decls +
            "kernel cp(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x) }\n"
            "kernel cp2(x: In[Tile[8, 32, f32]], y: Out[Tile[8, 32, f32]]) { store(y, x) }\n"
            "workload w() {\n" + body + "\n}\nschedule main = w()\n")


def test_a_send_whose_task_one_device_holds_is_refused_at_the_view():
    text = _pipe("    pipe {\n"
                 "        process a { for f in P.seq(Dense[2]) { "
                 "send(c, cp[f](x = W[:, f*16 : f*16 + 16], y = c)) } }\n"
                 "        process b { consume(c) as t { cp(x = t, y = Y[:, 0:16]) } }\n"
                 "    }")
    m = ptowsp.parse(text, "r.wsp")
    (d,) = _messages(lambda: m.compile("ref"))
    assert d.message == (
        "`send(c, cp[f](...))` runs only on tp = f (`x = W[:, f*16 : f*16 + 16]` is sharded "
        "over tp), but each device runs its own instance of the pipe and of `c`, whose item "
        "the other devices would never get: a channel does not carry items between devices")
    assert (d.span.line, d.span.col) == (13, 62)
    assert "do the sharded work in the consumer" in d.help


def test_a_collective_or_a_slot_set_in_a_pipe_is_refused():
    coll = _pipe("    pipe {\n        process a { cp(x = W[:, 0:16], y = Zp[:, 0:16])\n"
                 "            allreduce(Zp, into = Y, over = tp) }\n    }")
    (d,) = _messages(lambda: ptowsp.parse(coll, "r.wsp").compile("ref"))
    assert d.message == ("`allreduce` inside a pipe: on a mesh of several devices each device "
                         "runs its own instance of a pipe, and a collective needs every device "
                         "at once")
    assert d.span.line == 14
    slot = _pipe("    pipe {\n        process a { slot_set(0, 1)\n            cp2(x = X, y = Y) }\n"
                 "    }")
    (d,) = _messages(lambda: ptowsp.parse(slot, "r.wsp").compile("ref"))
    assert d.message == ("`slot_set` inside a pipe: on a mesh of several devices each device "
                         "runs its own instance of a pipe, which would set the slot once per "
                         "device")


def test_a_pipe_reading_an_element_it_writes_is_refused_and_a_seq_loop_keeps_one_order():
    decls = "output K: i32[1, 4]\nkernel pick(y: Out[Tile[1, 4, i32]]) { store(y, 1) }\n"
    body = ("        process a {{ pick(y = K)\n            let n = K[0, 0]\n"
            "            for i in P(n) {{ cp2[i](x = X, y = Y) }} }}")
    text = _pipe("    pipe {\n" + body.format() + "\n    }", decls)
    (d,) = _messages(lambda: ptowsp.parse(text, "r.wsp").compile("ref"))
    assert d.message == (
        "the pipe reads an element of `K`, which a task of the same pipe writes: on a mesh of "
        "several devices each device runs its own instance of the pipe, and under MPI a device's "
        "copy is written only in its own instance, after the instances before it have read it")
    assert d.span.line == 16
    # a P.seq doing the same keeps one order over every device (as on one device) and runs
    seq = _pipe("    for s in P.seq(Dense[1]) {\n        pick(y = K)\n        let n = K[0, 0]\n"
                "        for i in P(n) { cp2[i](x = X, y = Y) }\n    }", decls)
    x = np.random.default_rng(2).standard_normal((8, 32)).astype(np.float32)
    for target in ("ref", "cpu_sim"):
        out = ptowsp.parse(seq, "r.wsp").compile(target).run(X=x, W=x, check_replicas=True)
        np.testing.assert_array_equal(out["Y"], x)
        np.testing.assert_array_equal(out["K"], np.ones((1, 4), np.int32))


def test_an_event_used_inside_and_outside_a_pipe_is_refused():
    text = _pipe("    pipe {\n        process a { cp2(x = X, y = Y)\n            record(e) }\n"
                 "    }\n    synchronize(e)\n    cp2(x = X, y = Y)")
    (d,) = _messages(lambda: ptowsp.parse(text, "r.wsp").compile("cpu_sim"))
    assert d.message == (
        "`e` is used inside a pipe and outside it: on a mesh of several devices each device "
        "runs its own instance of the pipe, with its own `e`, which the statements outside it "
        "would see only for the last device")
    assert d.span.line == 16 and d.notes[0].span.line == 14


def test_an_event_waited_for_in_a_pipe_inside_a_loop_is_refused():
    text = _pipe("    for i in P.seq(Dense[2]) {\n        pipe {\n"
                 "            process a { cp2(x = X, y = Y)\n                record(e)\n"
                 "                synchronize(e)\n                cp2(x = X, y = Y) }\n"
                 "        }\n    }")
    (d,) = _messages(lambda: ptowsp.parse(text, "r.wsp").compile("ref"))
    assert d.message == (
        "`e` is waited for in a pipe inside a loop: on a mesh of several devices each device "
        "runs its own instance of the pipe, and the next iteration's would wait for the last "
        "device's record, not its own")
    assert d.span.line == 16
    # on one device the same program runs
    ptowsp.parse(text.replace("mesh tp = 2", "mesh tp = 1"), "r.wsp").compile("ref")


def test_ascend_npu_refuses_a_pipe_on_a_mesh_of_several_devices():
    m = ptowsp.parse(PIPELINE, "csp_mlp.wsp")
    (d,) = _messages(lambda: m.compile("ascend_npu", mesh={"tp": 2}))
    assert d.message == ("the ascend_npu target does not run pipes, channels or events on a "
                         "mesh of several devices yet")
    assert d.span.line == 2
    m.compile("ascend_npu", mesh={"tp": 1})  # one device: the single-device tree
