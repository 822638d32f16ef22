"""The surface of the embedding API: exports and the `pto_wsp` alias, axes, tensors and views,
kernels (traced, `Constexpr`, extern C), composition, CSP builders, events, symbols, the
program object (stats, tracing, enumeration, passes), and the seed features wspc reports as
unsupported instead of ignoring them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pto_wsp
import ptowsp
from pto_wsp import (
    Channel,
    CompileError,
    Constexpr,
    Dense,
    DenseDyn,
    DispatchPolicy,
    DType,
    Event,
    ExecutionError,
    In,
    KernelError,
    Out,
    P,
    Pass,
    PassManager,
    Ragged,
    Scalar,
    ScheduleError,
    Sparse,
    Tensor,
    Tile,
    TimingPolicy,
    TraceLevel,
    ceildiv,
    combine,
    connect,
    consume,
    for_each,
    jit_kernel,
    kernel,
    process,
    pto,
    record,
    replicate,
    send,
    sequential,
    symbol_u64,
    synchronize,
    task,
    tl,
    workload,
)

from .helpers import assert_roundtrip, ir_text

ROOT = Path(__file__).resolve().parents[2]
F32, I32 = DType.F32, DType.I32

BRIEF_NAMES = """kernel jit_kernel workload P pto tl In Out InOut Constexpr Tile Scalar Dense DenseDyn
Ragged Sparse Tensor DType combine sequential Channel process send consume connect replicate Event
record synchronize query slot_set_u64 slot_load_u64 slot_u64 DispatchPolicy TimingPolicy TaskWindow
WindowMode Program TraceLevel PassManager Pass PtoError CompileError TypeCheckError
IRConversionError ExecutionError KernelError ScheduleError ChannelError ChannelClosed ChannelFull
for_each task to_wsp""".split()


def test_exports_and_alias():
    for name in BRIEF_NAMES:
        assert getattr(pto_wsp, name) is getattr(ptowsp, name), name
    assert set(BRIEF_NAMES) <= set(dir(ptowsp)) and set(BRIEF_NAMES) <= set(pto_wsp.__all__)
    from pto_wsp.scalar_expr import slot_u64

    assert slot_u64 is ptowsp.slot_u64
    assert issubclass(ptowsp.CompileError, ptowsp.WspError)
    assert issubclass(ptowsp.TypeCheckError, ptowsp.CompileError)
    assert issubclass(ptowsp.ChannelError, ptowsp.ExecutionError)
    assert issubclass(ptowsp.ExecutionError, ptowsp.PtoError)
    assert ptowsp.jit_kernel is ptowsp.kernel and ptowsp.tl is not None


def test_frames_of_the_embedding_are_not_the_users():
    """Spans point at the first frame outside the embedding: its folder and the alias."""
    import pto_wsp.scalar_expr
    import ptowsp.api
    from ptowsp.embed import csp, source, values

    for mod in (source, values, csp, pto_wsp, pto_wsp.scalar_expr):
        assert source.is_internal(mod.__file__), mod.__file__
    for mod in (ptowsp, ptowsp.api):
        assert not source.is_internal(mod.__file__), mod.__file__
    assert not source.is_internal(__file__)


def test_import_ptowsp_stays_light():
    code = ("import sys, ptowsp\nptowsp.__version__\n"
            "bad = [m for m in ('numpy', 'lark', 'cffi') if m in sys.modules]\n"
            "bad += [m for m in sys.modules if m.startswith('ptowsp.embed.')]\n"
            "assert not bad, bad\n"
            "import pto_wsp\nassert 'numpy' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr


# ---------------------------------------------------------------------------------------------
# Axes, tensors, views


def test_axes_and_views():
    assert Dense[8].size == 8 and Dense[8]().size == 8 and Dense(8).size == 8
    r = Sparse(DenseDyn(4), [0, 2, 5, 7, 10], [1, 3, 0, 2, 4, 1, 5, 0, 3, 7])
    assert r.nnz() == 10 and r.row_nnz(1) == 3 and r.indptr[-1] == 10
    rag = Ragged(Dense[3], [2, 0, 5])
    assert rag.total() == 7 and rag.length(2) == 5
    X = Tensor(data=np.zeros((2, 3, 4, 5), np.float32))
    assert X.shape == (2, 3, 4, 5) and X.dtype is DType.F32 and X.nbytes() == 480
    assert str(X[1][2]) == str(X[1, 2])
    assert X[1, 2].shape == (4, 5)
    assert X[0:2:2].shape == (1, 3, 4, 5) and X[1, ..., 0:2].shape == (3, 4, 2)  # tests/embed/test_views.py
    with pytest.raises(CompileError, match="needs `shape` and `dtype`"):
        Tensor(shape=(2, 2))
    z = Tensor(shape=(2, 2), dtype=DType.I32)
    assert z.data.dtype == np.int32 and not z.data.any()
    with pytest.raises(CompileError, match="`Dense` takes a Python integer"):
        Dense[DenseDyn(3)]


@kernel
def shift(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]], k: Scalar[F32] = 1.0):
    pto.store(y, x + k)


def test_ragged_loops_and_hash_keys():
    lens = Tensor(data=np.array([2, 0, 3], np.int32))
    batch = Dense[3]()
    toks = Ragged(batch, lens)
    halves = Ragged(batch, lambda b: ceildiv(lens[b], 2))
    x = np.random.default_rng(1).random((3, 4, 1, 8)).astype(np.float32)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)

    @workload
    def rag():
        for b in P(batch):
            for t in P(toks[b]):
                shift[b, t](x=X[b, t], y=Y[b, t])
            for t in P.seq(halves[b]):
                shift[b, t](x=Y[b, t], y=Y[b, t + 2], k=10.0)

    w = rag().dispatch(DispatchPolicy.hash(lambda t: (t.get("b"), t.get("t"))))
    program = w.compile()
    program.execute()
    program.synchronize()
    ref = np.zeros_like(x)
    for b, n in enumerate([2, 0, 3]):
        ref[b, :n] = x[b, :n] + 1
        for t in range((n + 1) // 2):
            ref[b, t + 2] = ref[b, t] + 10
    np.testing.assert_allclose(y, ref, rtol=1e-6)
    assert program.stats.task_count == 2 + 3 + 1 + 2
    text = assert_roundtrip(w)
    assert "axis halves = Ragged(batch, ceildiv(lens[_], 2))" in text
    assert ".dispatch(hash(b * 1000003 + t))" in text


# ---------------------------------------------------------------------------------------------
# Kernels


@jit_kernel
def rmsnorm(x: In[Tile[32, 128, DType.F16]], out: Out[Tile[32, 128, DType.F16]]):
    data = tl.load(x)
    sq = tl.mul(data, data)
    mean = tl.rowmean(sq)
    rsqrt_val = tl.rsqrt(mean)
    result = tl.mul(data, rsqrt_val)
    tl.store(out, result)


def test_kernel_trace_shows_the_ir():
    ir = rmsnorm.trace()
    assert [op.op for op in ir.ops] == ["param", "mul", "rowmean", "rsqrt", "mul"]
    assert str(ir.ops[2]) == "%2 = rowmean %1 : [32, 1] f16"
    assert "store out = %4" in ir.dump()
    # compiled alone: the generated source (tests/embed/test_kernel_api.py)
    assert "__aicore__ inline void wsp_aicore_rmsnorm(" in rmsnorm.compile(target="ascend_npu").code


@kernel
def head_rows(x: In[Tile["R", 8, F32]], y: Out[Tile["R", 8, F32]], R: Constexpr[int]):  # noqa: F821 - "R" names the Constexpr parameter
    pto.store(y, pto.neg(x))


@kernel(cpp_src="""
    for (int64_t r = 0; r < x.rows; r++)
        for (int64_t c = 0; c < x.cols; c++)
            y.data[r * y.stride + c] = x.data[r * x.stride + c] * 2.0f + (float)c;
""", cpp_includes=["math.h"])
def double_plus_col(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
    pass


def test_constexpr_and_extern_c_kernels_with_events():
    x = np.random.default_rng(2).random((2, 4, 8)).astype(np.float32)
    y, z = np.zeros_like(x), np.zeros_like(x)
    X, Y, Z = Tensor(data=x), Tensor(data=y), Tensor(data=z)
    done = Event("done")
    pairs = Dense[2]()

    @workload
    def w():
        for i in P(pairs):
            double_plus_col[i](x=X[i], y=Y[i])
        record(done)
        synchronize(done)
        for i in P(pairs):
            head_rows[i](x=Y[i, 0:3, :], y=Z[i, 0:3, :], R=3)

    program = w().compile()
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(y, x * 2 + np.arange(8), rtol=1e-6)
    np.testing.assert_allclose(z[:, :3], -y[:, :3])
    assert not z[:, 3:].any()
    text = assert_roundtrip(w())
    assert 'extern cpp include "math.h" """' in text and "event done" in text and "R: Constexpr[i32]" in text
    assert head_rows.trace(R=2).ops[0].shape == (2, 8)


@kernel
def plus3(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
    pto.store(y, x + 3.0)


@kernel
def copy_tile(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
    pto.store(y, x)


def test_record_after_marks_the_task_where_it_stands():
    """`record(ev, after=t)` with statements between `t` and the call: `t` keeps its place
    (a reader of what `t` writes, written after it, sees its result), and the record stands
    right after `t`, so a `synchronize` waits for `t` alone."""
    x = np.full((4, 8), 2.0, np.float32)
    a, b = np.zeros_like(x), np.zeros_like(x)
    X, A_, B = Tensor(data=x), Tensor(data=a), Tensor(data=b)
    done = Event("written")

    @workload
    def w():
        t = plus3[0](x=X, y=A_)
        copy_tile[0](x=A_, y=B)
        record(done, after=t)
        synchronize(done)

    program = w().compile()
    program.execute()
    program.synchronize()
    np.testing.assert_array_equal(a, 5.0)
    np.testing.assert_array_equal(b, 5.0)
    text = assert_roundtrip(w())
    assert text.index("plus3[") < text.index("record(written)") < text.index("copy_tile[")


def test_record_after_a_statement_another_construct_took():
    done = Event("e")
    X, Y = Tensor(data=np.zeros((4, 8), np.float32)), Tensor(data=np.zeros((4, 8), np.float32))

    @workload
    def w():
        t = plus3[0](x=X, y=Y)
        sequential(t)
        record(done, after=t)

    with pytest.raises(CompileError, match="another construct has taken"):
        w()


@pytest.mark.parametrize("target", ["cpu_sim", "ref"])
def test_query_in_a_workload_after_synchronize_is_true(target):
    """The prototype's `pto_wsp.csp` events in a workload: `query(ev)` is a run-time condition,
    true once the tasks `record(ev)` marks have finished, which `synchronize(ev)` has waited
    for; so `P.when(query(ev))` runs and `P.when(~query(ev))` does not."""
    from pto_wsp.csp import Event as CspEvent
    from pto_wsp.csp import query, record, synchronize

    x = np.full((4, 8), 2.0, np.float32)
    a, b, c = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
    X, A_, B, C = Tensor(data=x), Tensor(data=a), Tensor(data=b), Tensor(data=c)
    ev = CspEvent("wrote_a", depth=0)  # the prototype's rendezvous spelling
    with pytest.raises(CompileError, match="an event's depth is a non-negative integer, not -1"):
        CspEvent("bad", depth=-1)

    @workload
    def w():
        plus3[0](x=X, y=A_)
        record(ev)
        synchronize(ev)
        with P.when(query(ev)):
            copy_tile[0](x=A_, y=B)
        with P.when(~query(ev)):
            copy_tile[0](x=X, y=C)

    program = w().compile(target=target)
    program.execute()
    program.synchronize()
    np.testing.assert_array_equal(b, x + 3)
    assert not c.any()
    assert "when query(wrote_a) {" in assert_roundtrip(w())


def test_compile_for_ascend_npu_writes_the_cann_tree(tmp_path, monkeypatch):
    """The seeds' `workload.compile(target="ascend_npu")`: the tree a toolchain builds, in
    `codegen_artifact_dir` (the build cache by default, or `output_dir=`), the same files the
    `.wsp` front end emits; it does not run here, and says so."""
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path / "cache"))
    x = np.full((4, 8), 2.0, np.float32)
    X, Y = Tensor(data=x), Tensor(data=np.zeros_like(x))

    @workload
    def w():
        plus3[0](x=X, y=Y)

    program = w().compile(target="ascend_npu", soc_version="Ascend910B1")
    tree = Path(program.codegen_artifact_dir)
    assert tree.parent == tmp_path / "cache" / "ascend" and tree.name.startswith("w-")
    want = ptowsp.parse(ptowsp.to_wsp(w()), "w.wsp").compile(target="ascend_npu",
                                                              soc_version="Ascend910B1").files
    assert set(program.files) - {"wsp/test_api.py"} == set(want) - {"wsp/w.wsp"}
    kernels = [k for k in want if k.startswith("aicore/")]
    assert kernels and all(program.files[k] == want[k] for k in kernels)
    assert "Generated by wspc from `wsp/test_api.py`" in program.files["README.md"]  # the source
    assert {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()} == \
        set(program.files)
    assert all((tree / k).read_text() == v for k, v in program.files.items())
    assert w().compile(target="ascend_npu", soc_version="Ascend910B1").codegen_artifact_dir \
        == str(tree)  # the same tree, the same place
    assert not program.is_complete() and not program.using_cpp_backend
    with pytest.raises(ExecutionError, match="does not run here"):
        program.execute()

    out = w().compile(target="ascend_npu", output_dir=tmp_path / "tree")
    assert out.codegen_artifact_dir == str(tmp_path / "tree")
    assert (tmp_path / "tree" / "CMakeLists.txt").is_file()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(CompileError, match="mine"):
        w().compile(target="ascend_npu", output_dir=mine)
    assert (mine / "notes.txt").read_text() == "keep"
    with pytest.raises(CompileError, match="output_dir"):
        w().compile(output_dir=tmp_path / "x")
    with pytest.raises(CompileError, match="no option `workers`"):
        w().compile(target="ascend_npu", workers=2)


def _held(program):
    """The program with its runs held at the start until the returned event is set."""
    import threading

    release = threading.Event()
    run = program.run_arrays

    def held(*args, **kwargs):
        assert release.wait(30)
        return run(*args, **kwargs)

    program.run_arrays = held
    return release


def test_execute_starts_a_run_that_lands_in_the_callers_arrays():
    """execute() returns while the run goes on; is_complete() turns true once the results are
    in the caller's arrays (no synchronize() needed for them to land); synchronize() waits."""
    import threading

    x = np.full((4, 8), 2.0, np.float32)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)

    @workload
    def w():
        plus3[0](x=X, y=Y)

    program = w().compile()
    assert not program.is_complete()  # nothing started yet
    release = _held(program)
    program.execute()
    assert not program.is_complete() and not y.any()  # started, still going
    release.set()
    tick = threading.Event()  # never set: a 1 ms pause between polls
    for _ in range(30_000):  # polled, as a host loop doing other work would
        if program.is_complete():
            break
        tick.wait(0.001)
    else:
        pytest.fail("the run did not end")
    np.testing.assert_array_equal(y, 5.0)  # landed before is_complete() said so
    program.synchronize()  # nothing left to wait for
    assert program.is_complete() and program.stats.task_count == 1


def test_reading_an_output_tensor_waits_for_the_run():
    import threading

    x = np.full((4, 8), 1.0, np.float32)
    X, Y = Tensor(data=x), Tensor(data=np.zeros_like(x))

    @workload
    def w():
        plus3[0](x=X, y=Y)

    program = w().compile()
    release = _held(program)
    program.execute()
    seen = []
    reader = threading.Thread(target=lambda: seen.append(Y.data.copy()))
    reader.start()
    reader.join(0.2)
    assert reader.is_alive()  # blocked: the run has not written Y yet
    release.set()
    reader.join(30)
    np.testing.assert_array_equal(seen[0], 4.0)
    assert X.data is x  # an input is never waited for


def test_a_script_that_ends_after_execute_gets_its_results(tmp_path):
    """The seeds' example 8.2 calls execute() alone: the run still ends, and its results
    land, before the interpreter exits (atexit handlers run after the run's thread ends)."""
    script = tmp_path / "run.py"
    script.write_text(f"""
import atexit
import numpy as np
from pto_wsp import DType, In, Out, Tensor, Tile, kernel, pto, workload
F32 = DType.F32

@kernel
def plus3(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
    pto.store(y, x + 3.0)

y = np.zeros((4, 8), np.float32)
X, Y = Tensor(data=np.full((4, 8), 2.0, np.float32)), Tensor(data=y)

@workload
def w():
    plus3[0](x=X, y=Y)

atexit.register(lambda: np.save({str(tmp_path / "y.npy")!r}, y))
program = w().compile(target="ref")
run = program.run_arrays
def slow(*args, **kwargs):  # a run still going when the script ends
    import time
    time.sleep(0.5)
    return run(*args, **kwargs)
program.run_arrays = slow
program.execute()
""")
    subprocess.run([sys.executable, str(script)], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(Path(ptowsp.__file__).parents[1])})
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), 5.0)


def test_host_side_channels_try_send_close_and_their_errors():
    """The prototype's host-side channel: `try_send` returns False when full, a blocking host
    `send` into a full channel raises ChannelFull (it would wait forever), and after `close()`
    every send (a workload's too) raises ChannelClosed at the line of the send."""
    from pto_wsp import ChannelClosed, ChannelFull, try_send

    ch = Channel("q", depth=2)
    assert ch.is_open() and ch.empty() and not ch.full()
    assert try_send(ch, 1) and try_send(ch, 2)
    assert ch.size() == 2 and ch.full()
    assert try_send(ch, 3) is False and ch.size() == 2  # full: not sent, not an error
    with pytest.raises(ChannelFull, match="channel `q` is full \\(2 of 2 items\\)") as full:
        send(ch, 3)
    assert (full.value.channel_name, full.value.capacity) == ("q", 2)  # the prototype's fields
    assert Channel("r", depth=0).full()  # a rendezvous has no room on the host
    assert try_send(Channel("one"), 1) is True  # depth 1 by default
    ch.close()
    ch.close()  # harmless
    assert not ch.is_open()
    with pytest.raises(ChannelClosed, match="`try_send` to channel `q`, which was closed at .*test_api.py:"):
        try_send(ch, 4)
    with pytest.raises(ChannelClosed, match="`send` to channel `q`") as closed:
        send(ch, 4)
    assert closed.value.channel_name == "q"
    assert issubclass(ChannelClosed, pto_wsp.ChannelError) and issubclass(ChannelFull, pto_wsp.ChannelError)

    X = Tensor(data=np.zeros((4, 8), np.float32))

    @workload
    def w():
        with P.pipe():
            send(ch, plus3[0](x=X, y=ch))  # E:send-closed
            with consume(ch) as t:
                copy_tile[t](x=t, y=X)

    with pytest.raises(ChannelClosed) as info:
        w()
    assert info.value.diagnostics[0].span.line == _line_of("# E:send-closed")

    @workload
    def v():
        try_send(Channel("s"), 1)

    with pytest.raises(CompileError, match="`try_send` is a host-side send"):
        v()


def _line_of(marker: str) -> int:
    return next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1)
                if line.rstrip().endswith(marker))


@kernel
def double_row(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
    pto.store(y, x * 2.0)


@pytest.mark.parametrize("target", ["cpu_sim", "ref"])
def test_tutorial_ragged_offsets(target):
    """The tutorial's one-argument `Ragged(offsets)`: row b spans offsets[b] ..
    offsets[b + 1] - 1, and its outer axis is `.outer`."""
    x = np.random.default_rng(5).random((8, 8)).astype(np.float32)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)
    offsets = [1, 3, 3, 6]
    rows = Ragged(offsets)
    off = Tensor(data=np.array(offsets, np.int32))
    assert rows.outer_size == 3 and rows.lengths == [2, 0, 3] and rows.total() == 5

    @workload
    def w():
        for b in P(rows.outer):
            for i in P(rows[b]):
                double_row[b, i](x=X[off[b] + i: off[b] + i + 1, :],
                                 y=Y[off[b] + i: off[b] + i + 1, :])

    program = w().compile(target=target)
    program.execute()
    program.synchronize()
    want_y = np.zeros_like(x)
    want_y[1:6] = x[1:6] * 2
    np.testing.assert_array_equal(y, want_y)
    assert program.stats.task_count == 5


@pytest.mark.parametrize("target", ["cpu_sim", "ref"])
@pytest.mark.parametrize("form", ["P", "P.sel", "select", "select outside"])
def test_tutorial_sparse_indices(target, form):
    """The tutorial's one-argument `Sparse(indices)`: one selection, iterated unindexed by
    `P(s)`, `P.sel(s)` or the prototype's `select(s, fn)`; each index is visited once, in
    order."""
    from pto_wsp.primitives import select

    x = np.random.default_rng(6).random((6, 8)).astype(np.float32)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)
    chosen = [4, 1, 5]
    experts = Sparse(np.array(chosen))

    def body(e):
        double_row[e](x=X[e], y=Y[e])

    if form == "select outside":
        program = select(experts, lambda e: body(e)).compile(target=target)
    else:
        @workload
        def w():
            if form == "P":
                for e in P(experts):
                    body(e)
            elif form == "P.sel":
                for e in P.sel(experts):
                    body(e)
            else:
                select(experts, body)

        program = w().compile(target=target)
        text = assert_roundtrip(w())
        assert ("for experts_row in P(experts_outer) {\n        for e in P.sel(experts[experts_row])"
                in text)
        assert [t.get("e") for t in w().enumerate()] == chosen
    program.execute()
    program.synchronize()
    want = np.zeros_like(x)
    want[chosen] = x[chosen] * 2
    np.testing.assert_array_equal(y, want)


def test_tutorial_sparse_indices_is_iterated_alone():
    s = Sparse([1, 2])
    X = Tensor(data=np.zeros((4, 8), np.float32))

    @workload
    def w():
        for e in P.seq(s):
            double_row[e](x=X[e], y=X[e])

    with pytest.raises(CompileError, match="`Sparse\\(indices\\)` is iterated alone, as a selection") as info:
        w()
    assert "write `for e in P(s):` or `for e in P.sel(s):`" in str(info.value)


def test_tutorial_axis_forms_with_bad_offsets():
    with pytest.raises(CompileError, match="the offsets must not decrease, but offsets\\[1\\] = 4 "
                       "and offsets\\[2\\] = 2"):
        Ragged([0, 4, 2])
    with pytest.raises(CompileError, match="needs at least one offset"):
        Ragged(np.zeros(0, np.int64))
    assert Ragged([3]).outer_size == 0  # one offset: no rows
    with pytest.raises(CompileError, match="`Sparse` takes the outer axis, `indptr` and `indices`"):
        Sparse([0.5, 1.5])  # not indices: the CSR form, short of its arguments
    with pytest.raises(CompileError, match="`Ragged` takes the outer axis and the lengths"):
        Ragged(4)  # an extent alone is not a list of offsets


def test_an_include_no_directory_holds_is_an_error_at_the_kernel():
    @kernel(cpp_includes=["pto/cpu/TMrgSort.hpp"], cpp_src="/* */")
    def topk(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
        pass

    X, Y = Tensor(data=np.zeros((1, 8), np.float32)), Tensor(data=np.zeros((1, 8), np.float32))

    @workload
    def w():
        topk(x=X, y=Y)

    with pytest.raises(CompileError, match="in `extern cpp` body: pto/cpu/TMrgSort.hpp") as info:
        w().compile()
    assert f"test_api.py:{topk.fn.__code__.co_firstlineno + 1}:" in str(info.value)


# ---------------------------------------------------------------------------------------------
# Composition, symbols, the program object


def test_combine_sequential_symbols_stats_trace_enumerate():
    x = np.arange(3 * 1 * 8, dtype=np.float32).reshape(3, 1, 8)
    y, z = np.zeros_like(x), np.zeros_like(x)
    X, Y, Z = Tensor(data=x), Tensor(data=y), Tensor(data=z)
    n = symbol_u64("rows_n", 3)
    rows = DenseDyn(n)

    @workload
    def first():
        for i in P(rows):
            shift[i](x=X[i], y=Y[i])

    @workload
    def second():
        for i in P(rows):
            shift[i](x=Y[i], y=Z[i], k=2.0)

    w = sequential(first(), second())
    program = w.compile()
    assert program.stats.compile_time_ms > 0
    program.set_symbol_u64("rows_n", 2)  # the loop extent is a run-time symbol
    program.enable_tracing(TraceLevel.TIMING)
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(z[:2], x[:2] + 3)
    assert not z[2].any()
    stats = program.stats
    assert stats.task_count == 4 and stats().total_cycles == stats.total_cycles > 0
    assert stats.execute_time_ms > 0
    chrome = program.trace.to_chrome_trace()
    assert sum(1 for e in chrome["traceEvents"] if e.get("ph") == "X" and e.get("pid") == 1) == 4
    summary = program.trace.summary()
    assert summary["tasks"] == 4 and summary["kernel_time_ms"] > 0 and "4 tasks" in str(summary)
    assert len(program.trace.get_kernel_events("shift")) == 4
    tasks = w.enumerate()
    assert [(t.kernel, t.get("i")) for t in tasks] == [("shift", i) for i in (0, 1, 2)] * 2
    assert tasks[0].get("rows") == 0  # an axis name means its loop variable
    text = assert_roundtrip(w)
    assert "sym rows_n = 3" in text and "sequential {" in text
    both = combine(first(), second())
    assert "combine {" in assert_roundtrip(both)


def test_passes_take_a_workload():
    from ptowsp.passes import FlattenCombinePass

    X, Y = Tensor(data=np.zeros((2, 1, 8), np.float32)), Tensor(data=np.zeros((2, 1, 8), np.float32))

    @workload
    def w():
        for i in P(Dense[2]):
            shift[i](x=X[i], y=Y[i])

    seen = []

    class Count(Pass):
        name = "count"

        def run(self, m):
            seen.append(len(m.kernels))
            return m

    pm = PassManager()
    pm.add(FlattenCombinePass())
    pm.add(Count())
    out = pm.run(w())
    assert seen == [1] and ir_text(out) == ir_text(w().ir)


def test_ref_and_cpu_sim_agree_and_runs_read_current_data():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 1, 8)).astype(np.float32)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)

    @workload
    def w():
        for i in P(Dense[4]):
            shift[i](x=X[i], y=Y[i], k=0.5)

    cpu, ref = w().compile(), w().compile(target="ref")
    assert cpu.codegen_artifact_dir and ref.codegen_artifact_dir is None
    for program in (cpu, ref):
        y[:] = 0
        program.execute()
        program.execute()  # the first run's results are written back before the second runs
        program.synchronize()
        np.testing.assert_array_equal(y, x + np.float32(0.5))
    x[:] = 1.0
    cpu.execute()
    cpu.synchronize()
    np.testing.assert_array_equal(y, np.full_like(x, 1.5))
    with pytest.raises(CompileError, match="targets are"):
        w().compile(target="tpu")


# ---------------------------------------------------------------------------------------------
# CSP builders


@kernel
def fetch(src: In[Tile[1, 8, F32]], dst: Out[Tile[1, 8, F32]]):
    pto.store(dst, pto.load(src))


@kernel
def work(x: In[Tile[1, 8, F32]], p: Out[Tile[1, 8, F32]], owner: Out[Tile[1, 1, I32]],
         id: Scalar[I32]):
    pto.store(p, x * 2.0)
    pto.store(owner, id)


def test_replicated_workers_share_a_queue():
    N = 8
    x = np.random.default_rng(4).random((N, 1, 8)).astype(np.float32)
    ps, owners = np.zeros_like(x), np.zeros((N, 1, 1), np.int32)
    Xs, Ps, Own = Tensor(data=x), Tensor(data=ps), Tensor(data=owners)
    work_queue = Channel("work_queue", depth=2)
    items = Dense[N]()
    generator = process("generator").produces(work_queue).body(
        for_each(items, lambda i: send(work_queue, fetch[i](src=Xs[i], dst=work_queue))))
    worker = process("worker").consumes(work_queue)
    worker.body(consume(work_queue, lambda t: task(work, [t], {
        "x": t, "p": Ps[t.index], "owner": Own[t.index], "id": worker.id})))
    pool = connect([generator, replicate(worker, 4)], [work_queue])
    program = pool.compile()
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(ps, x * 2)
    np.testing.assert_array_equal(owners.ravel(), np.arange(N) % 4)
    text = assert_roundtrip(pool)
    assert "process worker * 4 {" in text and "id = worker.id" in text


# ---------------------------------------------------------------------------------------------
# Seed features with no counterpart: reported, never ignored


def test_unsupported_seed_features_are_errors():
    with pytest.raises(CompileError, match="layout"):
        Tensor(data=np.zeros((2, 2), np.float32), layout=object())
    X, Y = Tensor(data=np.zeros((2, 1, 8), np.float32)), Tensor(data=np.zeros((2, 1, 8), np.float32))

    @workload
    def w():
        for i in P(Dense[2]):
            shift[i](x=X[i], y=Y[i])

    with pytest.raises(ScheduleError, match="deps"):
        w().task_graph(deps=ptowsp.Deps)

    @kernel
    def k(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
        pto.store(y, pto.topk(x))

    with pytest.raises(KernelError, match=r"`topk` gives two tiles \(values and indices\), "
                       "used here as one"):
        k.trace()
    with pytest.raises(CompileError, match="outside a workload"):
        for _ in P(Dense[2]):
            pass
    with pytest.raises(ScheduleError, match="must be positive"):
        w().timing(TimingPolicy.batched(4)).dispatch(DispatchPolicy.round_robin(0)).compile()


def test_slots_and_cond_in_builder_style():
    """The prototype docs' form: `sequential(slot_load_u64(...), cond(slot_u64(0) != 0, ...))`
    built outside any `@workload`, plus `slot_set_u64`."""
    from pto_wsp import cond, parallel_for, slot_load_u64, slot_set_u64, slot_u64

    flag = np.array([[0, 7]], dtype=np.int32)
    x = np.ones((2, 1, 8), np.float32)
    y = np.zeros_like(x)
    F, X, Y = Tensor(data=flag), Tensor(data=x), Tensor(data=y)
    w = sequential(
        slot_load_u64(0, F, row=0, col=1),
        slot_set_u64(1, 5),
        cond(slot_u64(0) == slot_u64(1) + 2,
             parallel_for(Dense[2], lambda i: shift[i](x=X[i], y=Y[i], k=1.0)),
             parallel_for(Dense[2], lambda i: shift[i](x=X[i], y=Y[i], k=-1.0))),
    )
    program = w.compile(target="ref")
    program.execute()
    program.synchronize()
    np.testing.assert_array_equal(y, x + 1)
    flag[0, 1] = 0
    program.execute()
    program.synchronize()
    np.testing.assert_array_equal(y, x - 1)
    text = assert_roundtrip(w)
    assert "slot_load(0, F[0, 1])" in text and "slot_set(1, 5)" in text
    assert "when slot(0) == slot(1) + 2 {" in text and "} otherwise {" in text


@pytest.mark.parametrize("chain, expected", [
    (lambda w: w.dispatch(DispatchPolicy.dispatch_by(lambda t: t.get("i") % 2, num_aicpus=2)),
     ".dispatch(dispatch_by(i % 2, n = 2))"),
    (lambda w: w.dispatch(DispatchPolicy.work_steal(num_aicpus=3)), ".dispatch(work_steal(3))"),
    (lambda w: w.dispatch(DispatchPolicy.hash("i")), ".dispatch(hash(i))"),
    (lambda w: w.timing(TimingPolicy.batched(batch_size=16)), ".timing(batched(16))"),
    (lambda w: w.timing(TimingPolicy.interleaved(2)).streams(2), ".timing(interleaved(2))"),
    (lambda w: w.timing(TimingPolicy.rate_limit(1.5)), ".timing(rate_limit(1.5))"),
    (lambda w: w.task_graph(window=64, mode=ptowsp.WindowMode.ABORT),
     ".task_graph(window = 64, mode = abort)"),
    # the prototype's keywords (its schedule.py)
    (lambda w: w.dispatch(DispatchPolicy.affinity(key_fn=lambda t: t.get("i"), num_aicpus=2)),
     ".dispatch(affinity(i, n = 2))"),
    (lambda w: w.dispatch(DispatchPolicy.hash(key_fn=lambda t: t.get("i") * 3)),
     ".dispatch(hash(i * 3))"),
    (lambda w: w.dispatch(DispatchPolicy.dispatch_by(fn=lambda t: t.get("i") % 2)),
     ".dispatch(dispatch_by(i % 2))"),
    (lambda w: w.timing(TimingPolicy.interleaved(streams=2)).streams(2),
     ".timing(interleaved(2))"),
    (lambda w: w.timing(TimingPolicy.rate_limit(tasks_per_ms=4)), ".timing(rate_limit(4))"),
    (lambda w: w.task_graph(window=ptowsp.TaskWindow(size=16, unit="tasks",
                                                    mode=ptowsp.WindowMode.STALL)),
     ".task_graph(window = 16, unit = tasks, mode = stall)"),
])
def test_schedule_policies_print_and_round_trip(chain, expected):
    X, Y = Tensor(data=np.zeros((4, 1, 8), np.float32)), Tensor(data=np.zeros((4, 1, 8), np.float32))

    @workload
    def w():
        for i in P(Dense[4]):
            shift[i](x=X[i], y=Y[i])

    assert expected in assert_roundtrip(chain(w()))
