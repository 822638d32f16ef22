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
    DType,
    Event,
    ExecutionError,
    In,
    Out,
    P,
    Pass,
    PassManager,
    Ragged,
    Tensor,
    Tile,
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
