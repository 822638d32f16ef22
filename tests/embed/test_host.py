"""The host side of a program and the workload passes (issue 19): `program.query(ev)` and
`program.synchronize(ev)`, `program.set_symbol_ptr(name, array)`, and user `Pass`es that take
and return a Workload (`workload.compile(passes=[...])`, `PassManager().run(workload)`)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from pto_wsp import (
    CompileError,
    Dense,
    DispatchPolicy,
    DType,
    Event,
    ExecutionError,
    In,
    Out,
    P,
    Pass,
    PassManager,
    Ragged,
    ScheduleError,
    Tensor,
    Tile,
    TimingPolicy,
    kernel,
    pto,
    record,
    workload,
)

from . import helpers

F32 = DType.F32
line_of, at = helpers.markers(__file__)


@kernel
def plus1(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
    pto.store(y, x + 1.0)


@kernel
def times2(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
    pto.store(y, x * 2.0)


def _held(program):
    """The program with its runs held at the start until the returned event is set."""
    release = threading.Event()
    run = program.run_arrays

    def held(*args, **kwargs):
        assert release.wait(30)
        return run(*args, **kwargs)

    program.run_arrays = held
    return release


# -- query / synchronize on the host


def test_query_is_false_until_the_run_lands_and_synchronize_ev_waits():
    x = np.full((2, 4, 8), 1.0, np.float32)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)
    done = Event("done")

    @workload
    def w():
        for i in P(Dense[2]):
            plus1[i](x=X[i], y=Y[i])
        record(done)

    for target in ("cpu_sim", "ref"):
        y[:] = 0
        program = w().compile(target=target)
        assert not program.query(done)  # no run yet
        release = _held(program)
        program.execute()
        assert not program.query(done)  # held at its start: the record point is not passed
        release.set()
        program.synchronize(done)
        assert program.query(done) and program.is_complete()
        np.testing.assert_array_equal(y, 2.0)


def test_query_after_a_failed_run_is_false():
    lens = Tensor(data=np.array([1, 9], np.int32))  # 9 rows: past the tensor's 2
    X, Y = Tensor(data=np.zeros((2, 4, 8), np.float32)), Tensor(data=np.zeros((2, 4, 8), np.float32))
    done = Event("done")
    batch = Dense[2]()
    rows = Ragged(batch, lens)

    @workload
    def w():
        for b in P(batch):
            for r in P(rows[b]):
                plus1[b, r](x=X[r], y=Y[r])
        record(done)

    program = w().compile()
    program.execute()
    with pytest.raises(ExecutionError):
        program.synchronize(done)
    assert not program.query(done)


def test_query_of_an_event_the_workload_does_not_record():
    X, Y = Tensor(data=np.zeros((4, 8), np.float32)), Tensor(data=np.zeros((4, 8), np.float32))
    other = Event("other")

    @workload
    def w():
        plus1[0](x=X, y=Y)

    program = w().compile()
    with pytest.raises(ExecutionError) as err:
        program.query(other)  # E:never
    text = at(err.value, "never")
    assert ("the program's workload never records event `other`, so no run passes a point "
            "for it") in text
    with pytest.raises(ExecutionError) as err:
        program.synchronize("done")  # E:not-event
    assert "`program.synchronize` takes an `Event` of the workload, not 'done'" in at(
        err.value, "not-event")


# -- set_symbol_ptr


def test_set_symbol_ptr_rebinds_an_input_tensor_for_later_runs():
    lens_a = np.array([1, 2], np.int32)
    X = Tensor(data=np.arange(3 * 4 * 8, dtype=np.float32).reshape(3, 4, 8))
    Y = Tensor(data=np.zeros((3, 4, 8), np.float32))
    lens = Tensor(data=lens_a)
    batch = Dense[2]()
    rows = Ragged(batch, lens)

    @workload
    def w():
        for b in P(batch):
            for r in P(rows[b]):
                plus1[b, r](x=X[r], y=Y[r])

    program = w().compile()
    program.execute()
    program.synchronize()
    np.testing.assert_array_equal(Y.data[:2], X.data[:2] + 1)
    assert not Y.data[2].any()
    Y.data[:] = 0
    program.set_symbol_ptr("lens", np.array([3, 0], np.int32))
    program.execute()
    program.synchronize()
    np.testing.assert_array_equal(Y.data, X.data + 1)  # row 2 now too: the bound array
    np.testing.assert_array_equal(lens.data, lens_a)  # the Tensor's own array is untouched
    with pytest.raises(ExecutionError) as err:
        program.set_symbol_ptr("Y", np.zeros((3, 4, 8), np.float32))  # E:written
    assert ("`set_symbol_ptr`: `Y` is written by the workload, so its results land in its "
            "`Tensor`; only input tensors can be bound (this program's: `X`, `lens`)") in at(
        err.value, "written")
    with pytest.raises(ExecutionError) as err:
        program.set_symbol_ptr("nope", lens_a)  # E:unknown
    assert "`nope` is not a tensor of the workload" in at(err.value, "unknown")
    with pytest.raises(ExecutionError) as err:
        program.set_symbol_ptr("lens", [1, 2])  # E:list
    assert "`set_symbol_ptr` binds a NumPy array, not list" in at(err.value, "list")
    program.set_symbol_ptr("lens", np.array([1, 2, 3], np.int32))
    with pytest.raises(ExecutionError):
        program.execute()  # the wrong shape, checked as the tensor's own data


# -- passes


def _pair():
    x = np.random.default_rng(5).random((2, 4, 8)).astype(np.float32)
    return x, Tensor(data=x), Tensor(data=np.zeros_like(x))


class SwapKernel(Pass):
    """A workload pass: the same loop with `times2` in place of `plus1` (a new Workload)."""

    def __init__(self, X, Y):
        self.X, self.Y = X, Y
        self.seen = []

    def run(self, wl):
        self.seen.append(wl.name)
        X, Y = self.X, self.Y

        @workload
        def doubled():
            for i in P(Dense[2]):
                times2[i](x=X[i], y=Y[i])

        return doubled()


def test_compile_with_a_workload_pass_runs_what_the_pass_returned():
    x, X, Y = _pair()

    @workload
    def w():
        for i in P(Dense[2]):
            plus1[i](x=X[i], y=Y[i])

    swap = SwapKernel(X, Y)
    for target in ("cpu_sim", "ref"):
        Y.data[:] = 0
        program = w().compile(target=target, passes=[swap])
        program.execute()
        program.synchronize()
        np.testing.assert_allclose(Y.data, x * 2.0, rtol=1e-6)
    assert swap.seen == ["w", "w"]
    out = PassManager().add(swap).run(w())
    assert out.name == "doubled" and helpers.ir_text(out) == helpers.ir_text(
        swap.run(w()))


def test_workload_pass_then_ir_passes():
    from ptowsp.passes import FlattenCombinePass, PrintPass

    x, X, Y = _pair()

    @workload
    def w():
        for i in P(Dense[2]):
            plus1[i](x=X[i], y=Y[i])

    seen = []

    class Count(Pass):
        def run(self, m):  # after wspc's own pass: the IR
            seen.append(len(m.kernels))
            return m

    swap = SwapKernel(X, Y)
    import io

    out = io.StringIO()
    program = w().compile(passes=[swap, FlattenCombinePass(), PrintPass("after", out), Count()])
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(Y.data, x * 2.0, rtol=1e-6)
    assert seen == [1] and "times2" in out.getvalue() and swap.seen == ["w"]


def test_pass_errors():
    _, X, Y = _pair()

    @workload
    def w():
        for i in P(Dense[2]):
            plus1[i](x=X[i], y=Y[i])

    class Broken(Pass):
        def run(self, wl):
            return None

    with pytest.raises(CompileError) as err:
        w().compile(passes=[Broken()])  # E:returned
    assert ("pass `Broken` returned NoneType, not a `Workload`") in at(err.value, "returned")
    with pytest.raises(CompileError) as err:
        w().compile(passes=Broken())  # E:not-list
    assert "`passes=` takes a list of `Pass` objects, not Broken" in at(err.value, "not-list")
    with pytest.raises(CompileError) as err:
        w().compile(passes=[lambda wl: wl])  # E:not-pass
    assert "a pass is an instance of a `Pass` subclass, not <function" in at(
        err.value, "not-pass")


# -- TimingPolicy.interleaved(priority=...)


def test_interleaved_priority_issues_the_priority_stream_first():
    x = np.random.default_rng(7).random((8, 4, 8)).astype(np.float32)
    X, Y = Tensor(data=x), Tensor(data=np.zeros_like(x))

    @workload
    def w():
        for i in P(Dense[8]):
            plus1[i](x=X[i], y=Y[i])

    firsts = []
    for timing in (TimingPolicy.interleaved(2), TimingPolicy.interleaved(priority=1)):
        sched = w().streams(2).stream_by(lambda t: t.get("i") // 4).timing(timing)
        program = sched.compile()
        program.enable_tracing()
        program.execute()
        program.synchronize()
        np.testing.assert_allclose(Y.data, x + 1.0)
        order = np.argsort(program.trace.sim["issue"], kind="stable")
        firsts.append((int(program.trace.events["stream"][order[0]]), int(order[0])))
    assert firsts == [(0, 0), (1, 4)]
    assert ".timing(interleaved(1, priority = 1))" in helpers.assert_roundtrip(
        w().streams(2).timing(TimingPolicy.interleaved(priority=1)))


def test_interleaved_priority_errors():
    _, X, Y = _pair()

    @workload
    def w():
        for i in P(Dense[2]):
            plus1[i](x=X[i], y=Y[i])

    with pytest.raises(ScheduleError) as err:
        TimingPolicy.interleaved(priority="high")  # E:prio-type
    assert "`interleaved(priority=...)` takes the number of a stream, not 'high'" in at(
        err.value, "prio-type")
    with pytest.raises(ScheduleError) as err:
        TimingPolicy.interleaved()  # E:no-n
    assert "`interleaved` takes the number of tasks a stream issues in a row" in at(
        err.value, "no-n")
    prio = TimingPolicy.interleaved(priority=1)  # E:no-streams
    with pytest.raises(CompileError) as err:
        w().timing(prio).compile()
    assert ("`interleaved(priority = ...)` names the stream each dispatcher starts with, and "
            "the schedule has no `.streams(n)`") in at(err.value, "no-streams")
    prio = TimingPolicy.interleaved(2, priority=3)  # E:too-big
    with pytest.raises(CompileError) as err:
        w().streams(2).timing(prio).compile()
    assert "the priority stream must be one of the 2 streams (0 to 1), found 3" in at(
        err.value, "too-big")


# -- schedule keys that decide with an `if` (host_keys.py)


def _grid():
    x = np.random.default_rng(11).random((6, 4, 8)).astype(np.float32)
    return x, Tensor(data=x), Tensor(data=np.zeros_like(x))


def route(t):
    """The seeds' kind of dispatch function: a Python `if` on the task's coordinates."""
    if t.get("i") < 2:
        return 3
    elif t.get("i") == 4:
        return 0
    return 1 + t.get("i") % 2


def test_dispatch_by_a_python_function_with_if_places_as_the_function_says():
    x, X, Y = _grid()

    @workload
    def w():
        for i in P(Dense[6]):
            plus1[i](x=X[i], y=Y[i])

    program = w().dispatch(DispatchPolicy.dispatch_by(route, num_aicpus=4)).compile()
    program.enable_tracing()
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(Y.data, x + 1.0)
    ev = program.trace.events
    placed = {int(c[0]): int(d) for c, d in zip(ev["coords"], ev["dispatcher"])}
    assert placed == {i: route(_Fixed(i)) for i in range(6)}
    text = helpers.assert_roundtrip(w().dispatch(DispatchPolicy.dispatch_by(route, num_aicpus=4)))
    assert "dispatch_by(" in text and "min(" in text


class _Fixed:
    def __init__(self, i):
        self.i = i

    def get(self, name):
        return self.i


def test_stream_by_a_lambda_with_a_conditional_expression_over_two_variables():
    x = np.random.default_rng(12).random((3, 4, 4, 8)).astype(np.float32)
    X, Y = Tensor(data=x), Tensor(data=np.zeros_like(x))

    @workload
    def w():
        for b, h in P(Dense[3], Dense[4]):
            plus1[b, h](x=X[b, h], y=Y[b, h])

    def key(t):
        return 0 if t.get("b") == 1 and t.get("h") > 1 else 1

    program = w().streams(2).stream_by(key).compile()
    program.enable_tracing()
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(Y.data, x + 1.0)
    ev = program.trace.events
    for c, s in zip(ev["coords"], ev["stream"]):
        b, h = int(c[0]), int(c[1])
        assert int(s) == (0 if b == 1 and h > 1 else 1)


def test_host_key_errors():
    x = np.zeros((64, 4, 8), np.float32)
    X, Y = Tensor(data=x), Tensor(data=np.zeros_like(x))

    @workload
    def w():
        for i in P(Dense[64]):
            plus1[i](x=X[i], y=Y[i])

    def zigzag(t):
        return 1 if t.get("i") % 2 else 0

    with pytest.raises(ScheduleError) as err:
        w().dispatch(DispatchPolicy.dispatch_by(zigzag, num_aicpus=2))  # E:steps
    assert ("the schedule key function changes value 63 times over the task space; wspc writes "
            "a host-decided key as an expression of at most 24 steps") in at(err.value, "steps")

    def text(t):
        return "a" if t.get("i") else "b"

    with pytest.raises(ScheduleError) as err:
        w().dispatch(DispatchPolicy.dispatch_by(text, num_aicpus=2))  # E:not-int
    assert "a schedule key function returned 'b', not an integer" in at(err.value, "not-int")


def test_host_key_over_too_many_points(monkeypatch):
    from ptowsp.embed import host_keys

    monkeypatch.setattr(host_keys, "MAX_POINTS", 8)  # the real bound, 2^16, needs as many tasks
    x = np.zeros((12, 4, 8), np.float32)
    X, Y = Tensor(data=x), Tensor(data=np.zeros_like(x))

    @workload
    def w():
        for i in P(Dense[12]):
            plus1[i](x=X[i], y=Y[i])

    with pytest.raises(ScheduleError) as err:
        w().dispatch(DispatchPolicy.dispatch_by(route, num_aicpus=4))  # E:points
    assert ("the schedule key function reads i, whose values span 12 points: more than the 8 "
            "wspc tabulates on the host") in at(err.value, "points")


# -- P.pipe(depth=...)


@kernel
def load_t(src: In[Tile[4, 8, F32]], dst: Out[Tile[4, 8, F32]]):
    pto.store(dst, src)


@kernel
def halve_t(src: In[Tile[4, 8, F32]], dst: Out[Tile[4, 8, F32]]):
    pto.store(dst, src * 0.5)


def _piped(depth, positional=False):
    from pto_wsp import Channel, consume, process, send

    x = np.random.default_rng(13).random((6, 4, 8)).astype(np.float32)
    X, Y = Tensor(data=x), Tensor(data=np.zeros_like(x))
    ch = Channel("tiles")  # no depth of its own: the pipe's

    @workload
    def two_stage():
        with P.pipe(depth=depth):
            with process("producer"):
                for i in P.seq(Dense[6]):
                    send(ch, load_t[i](src=X[i], dst=ch))
            with process("consumer"):
                with consume(ch) as t:
                    halve_t[t](src=t, dst=Y[t.index])

    return x, Y, two_stage


def test_pipe_depth_bounds_the_items_in_flight_on_its_channels():
    seen = {}
    for depth in (1, 3):
        x, Y, w = _piped(depth)
        text = helpers.assert_roundtrip(w())
        assert f"channel tiles: Tile[4, 8, f32], depth = {depth}" in text
        for target in ("ref", "cpu_sim"):
            Y.data[:] = 0
            program = w().compile(target=target)
            program.execute()
            program.synchronize()
            np.testing.assert_allclose(Y.data, x * 0.5)
        ref = w().compile(target="ref")
        ref.execute()
        ref.synchronize()
        seen[depth] = ref.stats.extra["channels"]["tiles"]
    # the producer runs ahead of the consumer by as many items as the depth lets it
    assert seen[1]["depth"] == 1 and seen[1]["max_in_flight"] == 1
    assert seen[3]["depth"] == 3 and seen[3]["max_in_flight"] == 3


def test_pipe_of_stages_given_as_arguments():
    from pto_wsp import Channel, consume, parallel_for, send

    x = np.random.default_rng(14).random((4, 4, 8)).astype(np.float32)
    X, Y = Tensor(data=x), Tensor(data=np.zeros_like(x))
    ch = Channel("c")

    @workload
    def w():
        prod = parallel_for(Dense[4], lambda i: send(ch, load_t[i](src=X[i], dst=ch)))
        cons = consume(ch, lambda t: halve_t[t](src=t, dst=Y[t.index]))
        P.pipe([prod, cons], depth=2)

    program = w().compile()
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(Y.data, x * 0.5)
    assert "channel c: Tile[4, 8, f32], depth = 2" in helpers.assert_roundtrip(w())


def test_pipe_depth_errors():
    with pytest.raises(CompileError) as err:
        P.pipe(depth=-1)  # E:depth
    assert "`P.pipe(depth=...)` takes a number of items (0 or more), not -1" in at(
        err.value, "depth")
    with pytest.raises(CompileError) as err:
        P.pipe([1])  # E:outside
    assert "`P.pipe(stages)` only works inside a `@workload` function" in at(err.value, "outside")
    x, Y, _ = _piped(1)
    from pto_wsp import Channel, consume, process, send

    ch = Channel("shared")
    X = Tensor(data=x)

    @workload
    def w():
        with P.pipe(depth=1):
            with process("a"):
                for i in P.seq(Dense[6]):
                    send(ch, load_t[i](src=X[i], dst=ch))
            with process("b"):
                with consume(ch) as t:
                    halve_t[t](src=t, dst=Y[t.index])
        with P.pipe(depth=2):  # E:two-depths
            with process("c"):
                for i in P.seq(Dense[6]):
                    send(ch, load_t[i](src=X[i], dst=ch))
            with process("d"):
                with consume(ch) as t:
                    halve_t[t](src=t, dst=Y[t.index])

    with pytest.raises(CompileError) as err:
        w()
    assert ("channel `shared` has no depth of its own and is used in pipes of depth 1 and 2"
            in at(err.value, "two-depths"))


# -- Tensor(location=...)


@kernel
def double_wide(x: In[Tile[16, 512, F32]], y: Out[Tile[16, 512, F32]]):
    pto.store(y, x * 2.0)


def _wide(X, Y):
    @workload
    def w():
        for i in P(Dense[8]):
            double_wide[i](x=X[i], y=Y[i])

    return w


def test_a_hot_tensor_placed_in_ub_costs_fewer_simulated_cycles():
    from pto_wsp import Location

    x = np.random.default_rng(15).random((8, 16, 512)).astype(np.float32)
    cycles = {}
    for loc in (None, Location.L2, Location.UB, Location.L1):
        X, Y = Tensor(data=x, location=loc), Tensor(data=np.zeros_like(x))
        w = _wide(X, Y)
        program = w().dispatch(DispatchPolicy.round_robin(4)).compile()
        program.execute()
        program.synchronize()
        np.testing.assert_array_equal(Y.data, x * 2.0)
        cycles[str(getattr(loc, "value", loc))] = program.stats.total_cycles
        if loc is Location.UB:
            assert "input X: f32[8, 16, 512], location = ub" in helpers.assert_roundtrip(w())
    assert cycles["None"] > cycles["l2"] > cycles["l1"] > cycles["ub"]
    # the words, in any case, are the members (`Location.Global` is the default's cost)
    X = Tensor(data=x, location="L1")
    assert X.location == Location.L1.value == "l1"
    X, Y = Tensor(data=x, location=Location.Global), Tensor(data=np.zeros_like(x))
    program = _wide(X, Y)().dispatch(DispatchPolicy.round_robin(4)).compile()
    program.execute()
    program.synchronize()
    assert program.stats.total_cycles == cycles["None"]


def test_unknown_location():
    with pytest.raises(CompileError) as err:
        Tensor(data=np.zeros(4, np.float32), location="hbm")  # E:loc
    assert "unknown tensor location 'hbm'" in at(err.value, "loc")


def test_a_pass_named_through_the_prototypes_constructor():
    _, X, Y = _pair()

    @workload
    def w():
        for i in P(Dense[2]):
            plus1[i](x=X[i], y=Y[i])

    class Named(Pass):
        def __init__(self):
            super().__init__("renamer")

        def run(self, wl):
            return 7

    with pytest.raises(CompileError, match="pass `renamer` returned int, not a `Workload`"):
        w().compile(passes=[Named()])
