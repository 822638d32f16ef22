"""Programs written the seed documents' way run unchanged through the front end, checker, IR
and back ends, and compute what an independent NumPy formula says; each also survives the
`to_wsp` round trip (same IR from the `.wsp` text)."""

from __future__ import annotations

import numpy as np
import pytest

from pto_wsp import (
    Channel,
    Dense,
    DenseDyn,
    DispatchPolicy,
    DType,
    In,
    InOut,
    Out,
    P,
    Scalar,
    TaskWindow,
    Tensor,
    Tile,
    TimingPolicy,
    WindowMode,
    connect,
    consume,
    for_each,
    kernel,
    process,
    pto,
    send,
    slot_load_u64,
    slot_u64,
    task,
    tl,
    workload,
)

from .helpers import assert_roundtrip

F16, F32, I32 = DType.F16, DType.F32, DType.I32
RNG = np.random.default_rng(2024)


def _t(a: np.ndarray) -> Tensor:
    return Tensor(data=a, shape=a.shape, dtype={np.float32: F32, np.float16: F16,
                                                np.int32: I32}[a.dtype.type])


# ---------------------------------------------------------------------------------------------
# RMSNorm (weight, eps default), the tutorial's kernel style with tl.*


@kernel
def rmsnorm_tile(x: In[Tile[16, 64, F32]], w: In[Tile[1, 64, F32]], y: Out[Tile[16, 64, F32]],
                 eps: Scalar[F32] = 1e-6):
    data = tl.load(x)
    mean = tl.rowmean(tl.mul(data, data))
    tl.store(y, data * tl.rsqrt(mean + eps) * w)


def test_rmsnorm():
    x = RNG.standard_normal((2, 3, 16, 64)).astype(np.float32)
    w = RNG.standard_normal((1, 64)).astype(np.float32)
    y = np.zeros_like(x)
    X, W, Y = _t(x), _t(w), _t(y)
    batch, tiles = Dense[2](), DenseDyn(3)

    @workload
    def norm():
        for b, t in P(batch, tiles):
            rmsnorm_tile[b, t](x=X[b, t], w=W, y=Y[b, t])

    program = (norm()
               .dispatch(DispatchPolicy.round_robin(num_aicpus=2))
               .task_graph(window=TaskWindow(16, "tasks", WindowMode.STALL))
               .compile())
    program.execute()
    assert not y.any()  # results arrive with synchronize()
    program.synchronize()
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    assert program.stats.task_count == 6 and program.stats().task_count == 6
    assert program.is_complete()
    assert_roundtrip(norm().dispatch(DispatchPolicy.round_robin(2)))


# ---------------------------------------------------------------------------------------------
# Softmax over three loop nests: a running max and a running sum (InOut, P.seq), then the
# normalisation


@kernel
def running_max(x: In[Tile[8, 32, F32]], m: InOut[Tile[8, 1, F32]]):
    pto.store(m, pto.maximum(m, pto.rowmax(x)))


@kernel
def running_sum(x: In[Tile[8, 32, F32]], m: In[Tile[8, 1, F32]], s: InOut[Tile[8, 1, F32]]):
    pto.store(s, s + pto.rowsum(pto.exp(x - m)))


@kernel
def normalise(x: In[Tile[8, 32, F32]], m: In[Tile[8, 1, F32]], s: In[Tile[8, 1, F32]],
              y: Out[Tile[8, 32, F32]]):
    pto.store(y, pto.exp(x - m) / s)


def test_softmax_three_loop_nests():
    R, C = 16, 96  # 2 row blocks of 8, 3 column blocks of 32
    x = (RNG.standard_normal((R, C)) * 3).astype(np.float32)
    m = np.full((R, 1), -np.inf, dtype=np.float32)  # the caller initialises the running max
    s = np.zeros((R, 1), dtype=np.float32)
    y = np.zeros_like(x)
    X, M, S, Y = _t(x), _t(m), _t(s), _t(y)
    rows, cols = Dense[R // 8], Dense[C // 32]

    @workload
    def softmax():
        for r in P(rows):
            for c in P.seq(cols):
                running_max[r, c](x=X[r * 8:r * 8 + 8, c * 32:c * 32 + 32], m=M[r * 8:r * 8 + 8, :])
        for r in P(rows):
            for c in P.seq(cols):
                running_sum[r, c](x=X[r * 8:r * 8 + 8, c * 32:c * 32 + 32],
                                  m=M[r * 8:r * 8 + 8, :], s=S[r * 8:r * 8 + 8, :])
        for r, c in P(rows, cols):
            normalise[r, c](x=X[r * 8:r * 8 + 8, c * 32:c * 32 + 32], m=M[r * 8:r * 8 + 8, :],
                            s=S[r * 8:r * 8 + 8, :], y=Y[r * 8:r * 8 + 8, c * 32:c * 32 + 32])

    program = softmax().compile()
    program.execute()
    program.synchronize()
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m[:, 0], x.max(axis=1), rtol=0, atol=0)
    assert program.stats.task_count == 3 * 6
    assert_roundtrip(softmax())


# ---------------------------------------------------------------------------------------------
# Batched GEMM: f16 inputs, an f32 InOut accumulator over a sequential k loop


@kernel
def gemm_tile(a: In[Tile[16, 32, F16]], b: In[Tile[32, 16, F16]], c: InOut[Tile[16, 16, F32]]):
    pto.store(c, pto.matmul(a, b, acc=c))


def test_batched_gemm_f16_inputs_f32_accumulator():
    NB, M, N, K = 2, 32, 32, 64
    a = RNG.standard_normal((NB, M, K)).astype(np.float16)
    b = RNG.standard_normal((NB, K, N)).astype(np.float16)
    c = np.zeros((NB, M, N), dtype=np.float32)
    A, B, C = _t(a), _t(b), _t(c)
    batch, mt, nt, kt = Dense[NB](), Dense[M // 16](), Dense[N // 16](), Dense[K // 32]()

    @workload
    def bgemm():
        for z in P(batch):
            for i, j in P(mt, nt):
                for k in P.seq(kt):
                    gemm_tile[z, i, j, k](a=A[z, i * 16:i * 16 + 16, k * 32:k * 32 + 32],
                                          b=B[z, k * 32:k * 32 + 32, j * 16:j * 16 + 16],
                                          c=C[z, i * 16:i * 16 + 16, j * 16:j * 16 + 16])

    program = bgemm().dispatch(DispatchPolicy.affinity(lambda t: t.get("z"), num_aicpus=2)).compile()
    program.execute()
    program.synchronize()
    ref = np.einsum("zmk,zkn->zmn", a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3)
    assert program.stats.task_count == NB * 2 * 2 * 2
    text = assert_roundtrip(bgemm().dispatch(DispatchPolicy.affinity(lambda t: t.get("z"), num_aicpus=2)))
    assert "input A: f16[2, 32, 64]" in text and "inout C: f32[2, 32, 32]" in text


# ---------------------------------------------------------------------------------------------
# Attention over P(batch, heads), called positionally as in the seeds' examples


@kernel
def attn(Q: In[Tile[32, 16, F32]], K: In[Tile[32, 16, F32]], V: In[Tile[32, 16, F32]],
         O: Out[Tile[32, 16, F32]], scale: Scalar[F32] = 0.25):  # noqa: E741 - the seeds' O
    s = pto.matmul(Q, pto.transpose(K)) * scale
    pto.store(O, pto.matmul(pto.softmax(s), V))


def test_attention_over_batch_and_heads():
    NB, NH = 2, 4
    q = RNG.standard_normal((NB, NH, 32, 16)).astype(np.float32)
    k = RNG.standard_normal((NB, NH, 32, 16)).astype(np.float32)
    v = RNG.standard_normal((NB, NH, 32, 16)).astype(np.float32)
    o = np.zeros_like(q)
    Q, K, V, O = _t(q), _t(k), _t(v), _t(o)  # noqa: E741 - the seeds' names
    batch, heads = DenseDyn(NB), Dense[NH]

    @workload
    def attention(batch, heads):
        for b, h in P(batch, heads):
            attn[b, h](Q[b, h], K[b, h], V[b, h], O[b, h])

    w = (attention(batch, heads)
         .dispatch(DispatchPolicy.affinity(lambda t: t.get("batch")))
         .streams(2)
         .stream_by(lambda t: t.get("head") % 2)
         .timing(TimingPolicy.immediate))
    program = w.compile()
    program.execute()
    program.synchronize()
    s = np.einsum("bhqd,bhkd->bhqk", q.astype(np.float64), k) * 0.25
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)
    np.testing.assert_allclose(o, ref, rtol=1e-5, atol=1e-5)
    text = assert_roundtrip(w)
    assert ".dispatch(affinity(b))" in text and ".stream_by(h % 2)" in text


# ---------------------------------------------------------------------------------------------
# A single task: no loop, whole tensors, no coordinates


@kernel
def scale_shift(x: In[Tile[8, 16, F32]], y: Out[Tile[8, 16, F32]], a: Scalar[F32],
                b: Scalar[F32] = 1.0):
    pto.store(y, x * a + b)


def test_single_task_without_loop():
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    y = np.zeros_like(x)
    X, Y = _t(x), _t(y)

    @workload
    def one():
        scale_shift(x=X, y=Y, a=3.0)

    program = one().compile(target="ref")
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(y, x * 3.0 + 1.0, rtol=1e-6)
    text = assert_roundtrip(one())
    assert "scale_shift(x = X, y = Y, a = 3.0)" in text
    # the same program on cpu_sim, run twice on new input data (read at each execute)
    program = one().compile()
    x[:] = 2.0
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(y, np.full_like(x, 7.0))


# ---------------------------------------------------------------------------------------------
# gather: an embedding lookup and a per-row pick, `tl.gather` as in .wsp


@kernel
def lookup(table: In[Tile[8, 16, F32]], ids: In[Tile[4, 1, I32]], cols: In[Tile[4, 3, I32]],
           y: Out[Tile[4, 16, F32]], z: Out[Tile[4, 3, F32]]):
    rows = tl.gather(table, ids)
    tl.store(y, rows)
    tl.store(z, tl.gather(rows, cols, axis=1))


def test_gather_rows_and_elements_within_rows():
    table = RNG.standard_normal((8, 16)).astype(np.float32)
    ids = np.array([[7], [0], [-1], [8]], np.int32)  # the last two out of range: zero rows
    cols = np.array([[0, 15, 16], [3, -3, 3], [1, 2, 4], [5, 5, 0]], np.int32)
    y, z = np.zeros((4, 16), np.float32), np.zeros((4, 3), np.float32)
    T, ID, C, Y, Z = _t(table), _t(ids), _t(cols), _t(y), _t(z)

    @workload
    def embed():
        lookup(table=T, ids=ID, cols=C, y=Y, z=Z)

    want_y = np.where((ids >= 0) & (ids < 8), np.take(table, np.clip(ids[:, 0], 0, 7), axis=0),
                      0)
    ok = (cols >= 0) & (cols < 16)
    want_z = np.where(ok, np.take_along_axis(want_y, np.where(ok, cols, 0), axis=1), 0)
    for target in ("ref", "cpu_sim"):
        y[:], z[:] = 1.0, 1.0
        program = embed().compile(target=target)
        program.execute()
        program.synchronize()
        np.testing.assert_array_equal(y, want_y, err_msg=target)
        np.testing.assert_array_equal(z, want_z, err_msg=target)
    assert "gather(rows, cols, axis = 1)" in assert_roundtrip(embed())


# ---------------------------------------------------------------------------------------------
# Data-driven branching: a kernel's output, loaded into a slot, picks nested P.when branches


@kernel
def sign_flag(x: In[Tile[1, 16, F32]], flag: Out[Tile[1, 1, I32]]):
    pto.store(flag, pto.where(pto.rowsum(x) > 0.0, 1, 0))


@kernel
def times(x: In[Tile[1, 16, F32]], y: Out[Tile[1, 16, F32]], k: Scalar[F32]):
    pto.store(y, x * k)


def test_data_driven_branching_with_slots():
    NB = 6
    x = RNG.standard_normal((NB, 1, 16)).astype(np.float32)
    x[0] = np.abs(x[0])
    x[1] = -np.abs(x[1])
    flags = np.zeros((NB, 1, 1), dtype=np.int32)
    y = np.zeros_like(x)
    X, Fl, Y = _t(x), _t(flags), _t(y)
    batch = Dense[NB]()

    @workload
    def branchy():
        for b in P(batch):
            sign_flag[b](x=X[b], flag=Fl[b])
            slot_load_u64(0, Fl[b], row=0, col=0)
            with P.when(slot_u64(0) != 0):
                with P.when(b % 2 == 0):
                    times[b](x=X[b], y=Y[b], k=2.0)
                with P.otherwise():
                    times[b](x=X[b], y=Y[b], k=3.0)
            with P.otherwise():
                times[b](x=X[b], y=Y[b], k=-1.0)

    program = branchy().compile()
    program.execute()
    program.synchronize()
    positive = x.sum(axis=(1, 2)) > 0
    k = np.where(positive, np.where(np.arange(NB) % 2 == 0, 2.0, 3.0), -1.0)
    np.testing.assert_allclose(y, x * k[:, None, None], rtol=1e-6)
    np.testing.assert_array_equal(flags[:, 0, 0], positive.astype(np.int32))
    assert program.stats.task_count == 2 * NB
    text = assert_roundtrip(branchy())
    assert "slot_load(0, Fl[b, 0, 0])" in text and "when slot(0) != 0 {" in text
    # the ref back end agrees (same IR, the NumPy oracle)
    y2 = np.zeros_like(x)
    Y.data = y2
    ref_prog = branchy().compile(target="ref")
    ref_prog.execute()
    ref_prog.synchronize()
    np.testing.assert_array_equal(y2, y)


# ---------------------------------------------------------------------------------------------
# The tutorial's builder-style CSP pipeline: process(...).produces(...).consumes(...).body(...)


@kernel
def load_tile(src: In[Tile[8, 32, F32]], dst: Out[Tile[8, 32, F32]]):
    pto.store(dst, pto.load(src))


@kernel
def compute_tile(src: In[Tile[8, 32, F32]], dst: Out[Tile[8, 32, F32]]):
    pto.store(dst, pto.exp(src) + 1.0)


@kernel
def store_tile(src: In[Tile[8, 32, F32]], dst: Out[Tile[8, 32, F32]]):
    pto.store(dst, src * 0.5)


def _pipeline(X, Y, tiles):
    load_to_compute = Channel(capacity=2)
    compute_to_store = Channel(capacity=2)

    loader = (process("loader")
              .produces(load_to_compute)
              .body(for_each(tiles, lambda t:
                             send(load_to_compute, task("load_tile", [t],
                                                        {"src": X[t], "dst": load_to_compute})))))
    computer = (process("computer")
                .consumes(load_to_compute)
                .produces(compute_to_store)
                .body(consume(load_to_compute, lambda t:
                              send(compute_to_store, task(compute_tile, [t],
                                                          {"src": t, "dst": compute_to_store})))))
    storer = (process("storer")
              .consumes(compute_to_store)
              .body(consume(compute_to_store, lambda t:
                            task(store_tile, [t], {"src": t, "dst": Y[t.index]}))))
    return connect([loader, computer, storer], [load_to_compute, compute_to_store])


def test_builder_style_csp_pipeline():
    x = RNG.standard_normal((5, 8, 32)).astype(np.float32)
    y = np.zeros_like(x)
    X, Y = _t(x), _t(y)
    tiles = Dense[5]()
    pipeline = _pipeline(X, Y, tiles)
    program = pipeline.dispatch(DispatchPolicy.round_robin(num_aicpus=2)).compile()
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(y, (np.exp(x.astype(np.float64)) + 1.0) * 0.5, rtol=1e-6)
    assert program.stats.task_count == 15
    text = assert_roundtrip(pipeline)
    assert "channel load_to_compute: Tile[8, 32, f32], depth = 2" in text
    assert "process computer {" in text and "consume(load_to_compute) as t {" in text
    # the seeds' start()/join() run it too
    y[:] = 0
    pipeline.start()
    pipeline.join()
    np.testing.assert_allclose(y, (np.exp(x.astype(np.float64)) + 1.0) * 0.5, rtol=1e-6)


@pytest.mark.parametrize("depth", [0, 1])
def test_channel_depth_does_not_change_results(depth):
    x = RNG.standard_normal((3, 8, 32)).astype(np.float32)
    y = np.zeros_like(x)
    X, Y = _t(x), _t(y)
    ch = Channel("c", depth=depth)

    @workload
    def two_stage():
        with P.pipe():
            with process("producer"):
                for i in P.seq(3):
                    send(ch, load_tile[i](src=X[i], dst=ch))
            with process("consumer"):
                with consume(ch) as item:
                    store_tile[item](src=item, dst=Y[item.index])

    program = two_stage().compile(target="ref")
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(y, x * 0.5)
    assert_roundtrip(two_stage())


def test_spec_pipe_scope_with_implicit_processes():
    """The API specification's section 3.7 form: a `Channel[Tile]` whose element type comes from
    the task it is passed to, `with P.pipe():` holding a producer loop and a `consume` block
    (each its own process), positional kernel arguments."""
    x = RNG.standard_normal((4, 8, 32)).astype(np.float32)
    y = np.zeros_like(x)
    data, out = _t(x), _t(y)

    @workload
    def pipeline(tiles):
        ch = Channel[Tile](depth=2)

        with P.pipe():                          # Pipeline scope
            for i in P.seq(tiles):              # Producer
                send(ch, load_tile[i](data[i], ch))

            with consume(ch) as tile:           # Consumer
                store_tile[tile](tile, out[tile.index])

    program = pipeline(Dense[4]()).compile()
    program.execute()
    program.synchronize()
    np.testing.assert_allclose(y, x * 0.5)
    text = assert_roundtrip(pipeline(Dense[4]()))
    assert "channel ch: Tile[8, 32, f32], depth = 2" in text
    assert "process stage0 {" in text and "process stage1 {" in text
