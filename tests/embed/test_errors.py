"""Errors in decorated code are wspc diagnostics at the user's Python line: the same
`file:line:col: error:` text with the source line and a caret, raised as the seeds' error
classes (which are also `ptowsp.WspError`s). Each marked line below (`# E:name`) is where the
error must point."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pto_wsp import (
    Channel,
    ChannelError,
    CompileError,
    Dense,
    DispatchPolicy,
    DType,
    ExecutionError,
    In,
    KernelError,
    Out,
    P,
    ScheduleError,
    Tensor,
    Tile,
    TypeCheckError,
    kernel,
    pto,
    send,
    symbol_u64,
    workload,
)

from . import helpers

F32, I32 = DType.F32, DType.I32
HERE = Path(__file__).resolve()
line_of, at = helpers.markers(__file__)


def _arrays(*shapes, dtype=np.float32):
    return [Tensor(data=np.zeros(s, dtype)) for s in shapes]


@kernel
def transposed_add(x: In[Tile[16, 32, F32]], y: Out[Tile[16, 32, F32]]):
    t = pto.transpose(x)
    pto.store(y, x + t)  # E:broadcast


def test_kernel_type_error_points_at_the_operator():
    X, Y = _arrays((2, 16, 32), (2, 16, 32))

    @workload
    def w():
        for b in P(Dense[2]):
            transposed_add[b](x=X[b], y=Y[b])

    with pytest.raises(TypeCheckError) as info:
        w().compile(target="ref")
    text = at(info.value, "broadcast")
    assert "operands of `+` do not broadcast: [16, 32] and [32, 16]" in text
    caret = text.splitlines()[2]
    source = text.splitlines()[1]
    assert caret.index("^") == source.index("+") and caret.count("^") == 1


@kernel
def copy16(x: In[Tile[16, 32, F32]], y: Out[Tile[16, 32, F32]]):
    pto.store(y, x)


def test_view_that_does_not_fit_points_at_the_argument():
    X, Z = _arrays((2, 16, 32), (2, 24, 32))

    @workload
    def w():
        for b in P(Dense[2]):
            copy16[b](x=X[b],
                      y=Z[b])  # E:view

    with pytest.raises(TypeCheckError) as info:
        w().compile(target="ref")
    text = at(info.value, "view")
    assert "`y = Z[b]` is a [24, 32] view but `y` takes Tile[16, 32, f32]" in text
    source, caret = text.splitlines()[1:3]
    assert caret.index("^") == source.index("y=Z[b]") and caret.count("^") == len("y=Z[b]")


@kernel
def forgets(x: In[Tile[4, 4, F32]],
            y: Out[Tile[4, 4, F32]],  # E:never
            z: Out[Tile[4, 4, F32]]):
    pto.store(z, pto.exp(x))


def test_out_parameter_never_stored_points_at_the_parameter():
    X, Y, Z = _arrays((4, 4), (4, 4), (4, 4))

    @workload
    def w():
        forgets(x=X, y=Y, z=Z)

    with pytest.raises(CompileError) as info:
        w().compile(target="ref")
    assert "never stored" in at(info.value, "never")


def test_unknown_primitive_is_reported_while_tracing():
    @kernel
    def k(x: In[Tile[4, 4, F32]], y: Out[Tile[4, 4, F32]]):
        pto.store(y, pto.rowmaen(x))  # E:unknown

    X, Y = _arrays((4, 4), (4, 4))

    @workload
    def w():
        k(x=X, y=Y)

    with pytest.raises(CompileError) as info:
        w()
    text = at(info.value, "unknown")
    assert "`pto.rowmaen` is not a tile primitive" in text and "did you mean `rowmean`?" in text


def test_tensor_annotation_without_shape_is_a_kernel_error():
    from pto_wsp import Tensor as T

    @kernel
    def attn(Q: In[T],  # E:tensor
             O: Out[Tile[4, 4, F32]]):  # noqa: E741 - the seeds' Q, K, V, O
        ...

    X, Y = _arrays((4, 4), (4, 4))

    @workload
    def w():
        attn(Q=X, O=Y)

    with pytest.raises(KernelError) as info:
        w()
    assert "`In[Tensor]` does not give the tile's shape" in at(info.value, "tensor")


def test_python_if_on_a_loop_variable():
    X, Y = _arrays((4, 16, 32), (4, 16, 32))

    @workload
    def w():
        for b in P(Dense[4]):
            if b < 2:  # E:if
                copy16[b](x=X[b], y=Y[b])

    with pytest.raises(CompileError) as info:
        w()
    text = at(info.value, "if")
    assert "run-time value: a Python `if`, `and`, `or` or `not` cannot decide on it while the " \
           "workload is traced" in text and "P.when" in text


def test_schedule_key_naming_no_coordinate():
    X, Y = _arrays((4, 16, 32), (4, 16, 32))
    batch = Dense[4]

    @workload
    def w():
        for b in P(batch):
            copy16[b](x=X[b], y=Y[b])

    with pytest.raises(ScheduleError) as info:
        w().dispatch(DispatchPolicy.affinity(lambda t: t.get("expert")))  # E:key
    text = at(info.value, "key")
    assert "`expert`" in text and "`b`" in text and "`batch`" in text


def test_otherwise_without_when():
    X, Y = _arrays((4, 16, 32), (4, 16, 32))

    @workload
    def w():
        for b in P(Dense[4]):
            with P.otherwise():  # E:otherwise
                copy16[b](x=X[b], y=Y[b])

    with pytest.raises(CompileError) as info:
        w()
    assert "`P.otherwise()` must follow" in at(info.value, "otherwise")


def test_channel_sent_but_never_consumed():
    X, = _arrays((4, 16, 32))
    ch = Channel("orphan", depth=1)

    @workload
    def w():
        with P.pipe():
            for i in P.seq(4):
                send(ch, copy16[i](x=X[i], y=ch))  # E:orphan

    with pytest.raises(CompileError) as info:
        w().compile(target="ref")
    assert "orphan" in at(info.value, "orphan")


def test_dtype_mismatch_at_tensor_creation():
    with pytest.raises(CompileError) as info:
        Tensor(data=np.zeros((2, 2)), dtype=DType.F32)  # E:dtype
    assert "`dtype` is f32, but the array has dtype float64" in at(info.value, "dtype")


@kernel
def gather_row(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
    pto.store(y, x)


def test_runtime_view_error_is_an_execution_error_at_the_argument():
    X, Y = _arrays((4, 8), (4, 8))
    idx = Tensor(data=np.array([0, 1, 7, 2], dtype=np.int32))

    @workload
    def w():
        for b in P(Dense[4]):
            gather_row[b](x=X[idx[b]:idx[b] + 1, :],  # E:runtime
                          y=Y[b:b + 1, :])

    program = w().compile()
    program.execute()  # found while the run goes on: synchronize() raises it
    with pytest.raises(ExecutionError) as info:
        program.synchronize()
    text = at(info.value, "runtime")
    assert "b=2" in text
    assert program.is_complete()  # the run has ended (in an error)


def test_unbound_symbol_and_unknown_symbol():
    X, Y = _arrays((4, 16, 32), (4, 16, 32))
    cut = symbol_u64("cut_emb")

    @workload
    def w():
        for b in P(Dense[4]):
            with P.when(b < cut):
                copy16[b](x=X[b], y=Y[b])

    program = w().compile(target="ref")
    with pytest.raises(ExecutionError) as info:
        program.execute()
    assert "sym `cut_emb` is not bound" in str(info.value)
    with pytest.raises(ExecutionError) as info:
        program.set_symbol_u64("nope", 1)  # E:nosym
    assert "no symbol `nope`" in at(info.value, "nosym")


def test_deadlock_is_a_channel_error():
    from pto_wsp import consume, process

    X, Y = _arrays((2, 16, 32), (2, 16, 32))
    a = Channel("a", depth=0)
    b = Channel("b", depth=0)

    @workload
    def w():
        with P.pipe():
            with process("p"):
                with consume(b) as t:  # E:blocked
                    send(a, copy16[t](x=t, y=a))
            with process("q"):
                send(b, copy16[0](x=X[0], y=b))
                with consume(a) as t:
                    copy16[t](x=t, y=Y[0])
                send(b, copy16[1](x=X[1], y=b))

    program = w().compile(target="ref")
    program.execute()
    with pytest.raises(ChannelError) as info:
        program.synchronize()
    text = at(info.value, "blocked")
    assert "deadlock: no process can make progress" in text


def test_process_declarations_must_match_the_body():
    from pto_wsp import connect, for_each, process

    X, = _arrays((2, 16, 32))
    a, b = Channel("a", depth=1), Channel("b", depth=1)
    loader = (process("loader")  # E:produces
              .produces(a)
              .body(for_each(Dense[2], lambda i: send(b, copy16[i](x=X[i], y=b)))))
    with pytest.raises(CompileError) as info:
        connect([loader], [a, b])
    assert "process `loader` produces `a`, but its body never sends to it" in at(info.value,
                                                                                 "produces")


def test_reading_an_out_parameter_points_at_the_operand():
    @kernel
    def k(x: In[Tile[4, 4, F32]], y: Out[Tile[4, 4, F32]]):
        a = pto.exp(x)
        pto.store(y, a + y)  # E:readout

    X, Y = _arrays((4, 4), (4, 4))

    @workload
    def w():
        k(x=X, y=Y)

    with pytest.raises(CompileError) as info:
        w().compile(target="ref")
    text = at(info.value, "readout")
    source, caret = text.splitlines()[1:3]
    assert caret.index("^") == source.index("y)") and caret.count("^") == 1
