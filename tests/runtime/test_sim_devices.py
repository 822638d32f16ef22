"""The cycle model's devices and comm engines (runtime_c/sim.c, a `multi` run): each device of
`wsp_machine.devices` has its own cores and dispatchers, and a comm engine that runs the tasks
of WSP_UNIT_COMM kernels without a dispatcher or a core, one at a time, in (ready, index)
order. Hand-computed cases and hypothesis properties: more devices are never slower on
independent work, a message overlaps the kernels of its device, and the replay is a function
of its inputs."""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import ERR_USAGE, OK

pytestmark = pytest.mark.cc

VECTOR, CUBE, COMM = 0, 1, 2
R = namedtuple("R", "enumerated ready issue start finish core unit dispatcher group")
S = namedtuple("S", "total_cycles critical_path work comm_cycles serial_cycles")


@dataclass(frozen=True)
class T:
    kernel: int = 0
    dispatcher: int = 0  # device * (dispatchers per device) + the device's dispatcher
    preds: tuple = field(default_factory=tuple)


@dataclass
class Out:
    rc: int
    err: str
    results: list
    summary: tuple
    raw: bytes = b""


def replay(L, tasks, costs, *, devices=1, nd=1, cube=1, vector=1, dispatch_ns=0.0,
           completion_ns=0.0, steal=False, latencies=None) -> Out:
    """wsp_sim_replay on a machine of `devices` NPUs (clock 1 GHz: ns are cycles) with `nd`
    dispatchers in all (nd / devices each)."""
    ffi, lib = L.ffi, L.lib
    mach = ffi.new("wsp_machine *", {"clock_ghz": 1.0, "dispatchers": nd, "cube_cores": cube,
                                     "vector_cores": vector, "devices": devices,
                                     "dispatch_ns": dispatch_ns, "completion_ns": completion_ns})
    pol = ffi.new("wsp_policy *", {"ndispatchers": nd, "steal": int(steal), "timing": 0,
                                   "timing_n": 1})
    lat = latencies or [0] * len(costs)
    kc = ffi.new("wsp_kcost[]", [{"unit": u, "cycles": c, "latency": x}
                                 for (u, c), x in zip(costs, lat)] or 1)
    tk = ffi.new("wsp_simtask[]", [{"kernel": t.kernel, "dispatcher": t.dispatcher,
                                    "stream": -1, "npreds": len(t.preds)} for t in tasks] or 1)
    preds = ffi.new("int64_t[]", [j for t in tasks for j in t.preds] or 1)
    res = ffi.new("wsp_simresult[]", max(1, len(tasks)))
    summ = ffi.new("wsp_simsummary *")
    disp = ffi.new("wsp_simdisp[]", max(1, nd))
    err = ffi.new("char[]", 256)
    rc = lib.wsp_sim_replay(mach, pol, kc, len(costs), len(tasks), tk, preds, res, summ, disp,
                            err, 256)
    # copied out: a cdata element does not keep its array alive
    results = [R(*(getattr(res[k], f) for f in R._fields)) for k in range(len(tasks))]
    summary = S(summ.total_cycles, summ.critical_path, tuple(summ.work), summ.comm_cycles,
                summ.serial_cycles)
    raw = (bytes(ffi.buffer(res, ffi.sizeof("wsp_simresult") * max(1, len(tasks))))
           + bytes(ffi.buffer(summ)) if rc == OK else b"")
    return Out(rc, ffi.string(err).decode(), results if rc == OK else [], summary, raw)


def test_each_device_has_its_own_cores(rtlib):
    # two 10-cycle vector tasks, one vector core per NPU: on one device they queue, on two
    # (one dispatcher each) they run side by side
    one = replay(rtlib, [T(), T()], [(VECTOR, 10)], devices=1, nd=2)
    two = replay(rtlib, [T(dispatcher=0), T(dispatcher=1)], [(VECTOR, 10)], devices=2, nd=2)
    assert one.rc == two.rc == OK
    assert one.summary.total_cycles == 20
    assert two.summary.total_cycles == 10
    # each device's core 0: the core index is within its device
    assert [(r.start, r.core) for r in two.results] == [(0, 0), (0, 0)]


def test_a_task_waits_for_its_own_device(rtlib):
    # device 1's core is free, but the second task is device 0's: it waits for device 0's core
    out = replay(rtlib, [T(dispatcher=0), T(dispatcher=0), T(dispatcher=1)], [(VECTOR, 10)],
                 devices=2, nd=2)
    assert [r.start for r in out.results] == [0, 10, 0]


def test_a_message_runs_on_the_comm_engine_without_a_dispatcher(rtlib):
    # a long kernel and an independent message of device 0: the message starts at once (no
    # dispatch latency, no core) and ends while the kernel runs
    out = replay(rtlib, [T(kernel=0), T(kernel=1)], [(VECTOR, 1000), (COMM, 100)],
                 devices=1, nd=1, dispatch_ns=5)
    k, m = out.results
    assert (k.start, k.finish) == (5, 1005)
    assert (m.issue, m.start, m.finish, m.unit) == (0, 0, 100, COMM)
    assert m.finish < k.finish  # communication overlaps the computation
    assert out.summary.comm_cycles == 100 and tuple(out.summary.work) == (1000, 0)


def test_messages_of_one_device_go_one_at_a_time_in_ready_order(rtlib):
    # three messages of device 0 and one of device 1: device 0's engine runs its three one
    # after another; device 1's runs in parallel
    tasks = [T(kernel=0, dispatcher=0), T(kernel=0, dispatcher=0), T(kernel=0, dispatcher=1),
             T(kernel=0, dispatcher=0)]
    out = replay(rtlib, tasks, [(COMM, 7)], devices=2, nd=2)
    assert [(r.start, r.finish) for r in out.results] == [(0, 7), (7, 14), (0, 7), (14, 21)]
    assert out.summary.total_cycles == 21


def test_messages_pipeline_through_their_latency(rtlib):
    # messages of 10 cycles whose last 6 are latency: the engine starts the next one after 4
    out = replay(rtlib, [T(), T(), T()], [(COMM, 10)], latencies=[6])
    assert [(r.start, r.finish) for r in out.results] == [(0, 10), (4, 14), (8, 18)]
    assert out.summary.comm_cycles == 12  # the engine's busy time
    # a latency on a core, or beyond the cycles, is malformed
    for costs, lat in (([(VECTOR, 10)], [1]), ([(COMM, 10)], [11]), ([(COMM, 10)], [-1])):
        out = replay(rtlib, [T()], costs, latencies=lat)
        assert out.rc == ERR_USAGE and "latency" in out.err


def test_a_message_waits_for_its_predecessors_and_its_dependents_for_it(rtlib):
    # kernel -> message -> kernel on one device, with completion latency 3 between each
    tasks = [T(kernel=0), T(kernel=1, preds=(0,)), T(kernel=0, preds=(1,))]
    out = replay(rtlib, tasks, [(VECTOR, 10), (COMM, 20)], completion_ns=3)
    a, m, b = out.results
    assert m.ready == m.start == a.finish + 3
    assert b.ready == m.finish + 3
    # the critical path counts no dispatch for the message (0 here) and its completion latency
    assert out.summary.critical_path == out.summary.total_cycles == b.finish


def test_dispatchers_split_over_devices(rtlib):
    out = replay(rtlib, [T()], [(VECTOR, 1)], devices=2, nd=3)
    assert out.rc == ERR_USAGE and "3 dispatchers do not split over 2 devices" in out.err
    out = replay(rtlib, [T()], [(3, 1)], devices=2, nd=2)
    assert out.rc == ERR_USAGE and "unit 3" in out.err


def test_stealing_stays_within_a_device(rtlib):
    # device 0 has two dispatchers and two cores; device 1's idle dispatcher must not take
    # device 0's second task (it would issue it to device 0's cores from another NPU)
    tasks = [T(dispatcher=0), T(dispatcher=0), T(dispatcher=0)]
    out = replay(rtlib, tasks, [(VECTOR, 10)], devices=2, nd=4, vector=2, dispatch_ns=1,
                 steal=True)
    assert [(r.dispatcher, r.start) for r in out.results] == [(0, 1), (1, 1), (0, 12)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 24), cycles=st.integers(1, 50), dispatch=st.integers(0, 5),
       cores=st.integers(1, 3), nd=st.integers(1, 3))
def test_more_devices_never_slower_on_independent_tasks(rtlib, n, cycles, dispatch, cores, nd):
    # n independent tasks dealt round robin over D devices (each with nd dispatchers and the
    # same cores): the makespan never grows with D
    spans = []
    for d in (1, 2, 4, 8):
        tasks = [T(dispatcher=(k % d) * nd + (k // d) % nd) for k in range(n)]
        out = replay(rtlib, tasks, [(VECTOR, cycles)], devices=d, nd=d * nd, vector=cores,
                     dispatch_ns=dispatch)
        assert out.rc == OK, out.err
        spans.append(out.summary.total_cycles)
    assert spans == sorted(spans, reverse=True), spans


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), ndev=st.sampled_from([1, 2, 4]), n=st.integers(1, 30))
def test_random_graphs_keep_the_guarantees(rtlib, data, ndev, n):
    # random DAGs of vector, cube and comm tasks on random devices: the replay is deterministic,
    # starts every task after its predecessors' completion, keeps each comm engine to one
    # message at a time and total >= critical path
    costs = [(VECTOR, 7), (CUBE, 11), (COMM, 5), (COMM, 13)]
    tasks = []
    for k in range(n):
        preds = tuple(sorted(data.draw(st.sets(st.integers(0, k - 1), max_size=3)))) if k else ()
        tasks.append(T(kernel=data.draw(st.integers(0, 3)), dispatcher=data.draw(
            st.integers(0, ndev - 1)), preds=preds))
    a = replay(rtlib, tasks, costs, devices=ndev, nd=ndev, completion_ns=2, dispatch_ns=1)
    b = replay(rtlib, tasks, costs, devices=ndev, nd=ndev, completion_ns=2, dispatch_ns=1)
    assert a.rc == OK, a.err
    assert a.raw == b.raw
    for k, t in enumerate(tasks):
        r = a.results[k]
        assert all(r.start >= a.results[j].finish + 2 for j in t.preds)
        assert (r.unit == COMM) == (costs[t.kernel][0] == COMM)
    for dev in range(ndev):
        msgs = sorted((r.start, r.finish) for k, r in enumerate(a.results)
                      if r.unit == COMM and tasks[k].dispatcher == dev)
        assert all(x[1] <= y[0] for x, y in zip(msgs, msgs[1:]))
    assert a.summary.total_cycles >= a.summary.critical_path


@pytest.mark.parametrize("shapes", [None, {0: [32]}], ids=["hashed", "dense"])
def test_a_box_of_several_whole_tiles_keeps_the_tiling(rtlib, shapes):
    # the device lowering's collectives read every tile the previous collective of their device
    # wrote (one box over its row of the order tensor): the log takes such a box as one access
    # per tile, exact, where it used to make the tensor one record that every task waits for
    from .conftest import READ, WRITE
    from .test_sim_gates import ModelRun

    mr = ModelRun(rtlib, 1, [(VECTOR, 10)])
    try:
        mr.begin(shapes=shapes)
        mr.task(0, [(0, WRITE, [(0, 4)])])     # 0: tile 0
        mr.task(0, [(0, WRITE, [(4, 8)])])     # 1: tile 1
        mr.task(0, [(0, WRITE, [(8, 12)])])    # 2: tile 2
        mr.task(0, [(0, READ, [(0, 8)])])      # 3: tiles 0 and 1
        mr.task(0, [(0, WRITE, [(4, 8)])])     # 4: tile 1 again: after 1 and the reader 3
        mr.task(0, [(0, WRITE, [(8, 12)])])    # 5: tile 2 again: after 2 only
        mr.task(0, [(0, READ, [(2, 6)])])      # 6: not whole tiles: the whole-tensor record
        mr.end()
        ffi, lib = rtlib.ffi, rtlib.lib
        n = lib.wsp_trace_links(mr.r.rt, 2, 0, 0, ffi.NULL)
        out = ffi.new("int64_t[]", 2 * max(n, 1))
        lib.wsp_trace_links(mr.r.rt, 2, 0, n, out)
        edges = {(out[2 * i], out[2 * i + 1]) for i in range(n)}
        preds = {k: {a for a, b in edges if b == k} for k in range(7)}
        assert preds[3] == {0, 1}
        assert preds[4] == {1, 3}
        assert preds[5] == {2}
        assert preds[6] == {0, 3, 4, 5}   # every record's writers and readers so far
    finally:
        mr.free()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(msgs=st.integers(1, 6), transfer=st.integers(1, 40), latency=st.integers(0, 40),
       dispatch=st.integers(0, 20), extra=st.integers(1, 100), before=st.integers(0, 3))
def test_a_collective_independent_of_a_long_kernel_ends_first(rtlib, msgs, transfer, latency,
                                                              dispatch, extra, before):
    # a kernel longer than the whole collective (its messages pipelined: one latency plus each
    # transfer), with messages enumerated before or after it and nothing between them: the
    # collective has ended when the kernel ends, on the same device
    span = msgs * transfer + latency
    tasks = [T(kernel=1)] * min(before, msgs) + [T(kernel=0)] + [T(kernel=1)] * (msgs - min(before, msgs))
    out = replay(rtlib, tasks, [(VECTOR, span + extra), (COMM, transfer + latency)],
                 latencies=[0, latency], dispatch_ns=dispatch)
    kernel = next(r for r in out.results if r.unit == VECTOR)
    comm = [r for r in out.results if r.unit == COMM]
    assert max(r.finish for r in comm) == span < kernel.finish
