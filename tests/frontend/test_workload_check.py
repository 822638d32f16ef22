"""Workload bodies and schedules (`frontend/workloads/`, language.md sections 5 to 8).

Valid programs covering every statement of sections 6 and 7 and every combinator of section 8
must check; run-time checks are recorded exactly for the views that cannot be proved; errors are
reported once each, at the smallest wrong construct. One-situation error files live in
tests/errors/{workload,csp,schedule,view}_*.wsp.
"""

from __future__ import annotations

import textwrap

import pytest

from ptowsp.diagnostics import WspError
from ptowsp.frontend.checker import check_source


def source(*parts: str) -> str:
    """The program text: each part dedented on its own (the shared heads are module-level)."""
    return "".join(textwrap.dedent(p) for p in parts)


def check(*parts: str):
    return check_source(source(*parts), "t.wsp")


def errors(*parts: str) -> list[tuple[int, int, str, str | None]]:
    with pytest.raises(WspError) as info:
        check(*parts)
    return [(d.span.line, d.span.col, d.message, d.help) for d in info.value.diagnostics]


def checks_at(env, line: int) -> list[str]:
    return [str(c.check) for c in env.checks if c.span.line == line]


# ---------------------------------------------------------------------------------------------
# The examples of language.md

RMSNORM = """\
    // rmsnorm.wsp — one task per (batch, tile) pair
    module rmsnorm

    sym B, T                                   // sizes bound at run time

    input  X: f32[B, T, 16, 128]
    input  W: f32[1, 128]
    output Y: f32[B, T, 16, 128]

    kernel rmsnorm_tile(x: In[Tile[16, 128, f32]], w: In[Tile[1, 128, f32]],
                        y: Out[Tile[16, 128, f32]], eps: Scalar[f32] = 1e-6) {
        let ms = rowmean(x * x)                // [16, 1]
        store(y, x * rsqrt(ms + eps) * w)      // [16,128] * [16,1] * [1,128] broadcast
    }

    axis batch = DenseDyn(B)
    axis tiles = DenseDyn(T)

    workload norm() {
        for b, t in P(batch, tiles) {
            rmsnorm_tile[b, t](x = X[b, t], w = W, y = Y[b, t])
        }
    }

    schedule main = norm()
        .dispatch(round_robin(4))
        .task_graph(window = 8192, mode = stall)
"""

MEGAKERNEL = """\
    module mega
    sym N
    input  X: f32[N, 16, 128]
    output Y: f32[N, 16, 128]
    channel l2c: Tile[16, 128, f32], depth = 2     // two data slots: double buffering
    channel c2s: Tile[16, 128, f32], depth = 2

    kernel load_tile(src: In[Tile[16, 128, f32]], dst: Out[Tile[16, 128, f32]]) { store(dst, src) }
    kernel compute_tile(src: In[Tile[16, 128, f32]], dst: Out[Tile[16, 128, f32]]) { store(dst, src * 2.0) }
    kernel store_tile(src: In[Tile[16, 128, f32]], dst: Out[Tile[16, 128, f32]]) { store(dst, src) }

    axis tiles = DenseDyn(N)

    workload megakernel(tiles: DenseDyn) {
        pipe {
            process loader {
                for i in P.seq(tiles) {
                    send(l2c, load_tile[i](src = X[i], dst = l2c))
                }
            }
            process computer {
                consume(l2c) as t {
                    send(c2s, compute_tile[t](src = t, dst = c2s))
                }
            }
            process storer {
                consume(c2s) as r {
                    store_tile[r](src = r, dst = Y[r.index])
                }
            }
        }
    }

    schedule main = megakernel(tiles)
"""

SCHEDULES = """\
    module attn
    sym B, S
    const H = 8
    input  Q: f16[B, H, S, 64]
    output O: f16[B, H, S, 64]
    kernel attn_tile(q: In[Tile[64, 64, f16]], o: Out[Tile[64, 64, f16]], scale: Scalar[f32] = 0.125) {
        store(o, q)
    }
    axis batch = DenseDyn(B)
    axis heads = Dense[H]
    axis blocks = DenseDyn(ceildiv(S, 64))

    workload attention(batch: DenseDyn, heads: Dense[8]) {
        for b, h in P(batch, heads) {
            for s in P.seq(blocks) {
                attn_tile[b, h, s](q = Q[b, h, s*64 : s*64 + 64], o = O[b, h, s*64 : s*64 + 64], scale = 0.5)
            }
        }
    }

    schedule fast = attention(batch, heads)
        .dispatch(affinity(b))              // key expression over the task's coordinates
        .streams(4)
        .stream_by(h % 4)
        .timing(batched(16))
        .task_graph(window = 8192, unit = tasks, mode = stall)
    schedule rr = attention(batch, heads).dispatch(round_robin(num_aicpus = 4)).timing(immediate)
    schedule hashed = attention(batch, heads).dispatch(hash(b * 8 + h, n = 4)).timing(interleaved(2))
    schedule direct = attention(batch, heads).dispatch(dispatch_by(h % 2, n = 2)).timing(rate_limit(2.5))
    schedule stealing = attention(batch, heads).dispatch(work_steal(n = 4)).task_graph(window = 16, mode = abort)
    schedule affine = attention(batch, heads).dispatch(affinity(b, n = 4)).streams(2).stream_by(B)
"""

MOE = """\
    module moe
    sym T, E, NNZ
    const D = 128
    input  X: f32[T, 16, D]
    input  Wexp: f32[E, D, D]
    input  indptr: i32[T + 1]
    input  indices: i32[NNZ]
    scratch H: f32[T, 8, 16, D]
    output Idx: i32[NNZ]

    kernel router(x: In[Tile[16, 128, f32]], idx: Out[Tile[1, 2, i32]]) extern c \"\"\"
        idx.data[0] = 0; idx.data[1] = 1;
    \"\"\"
    kernel expert(x: In[Tile[16, 128, f32]], w: In[Tile[128, 128, f32]], y: InOut[Tile[16, 128, f32]],
                  k: Scalar[i32]) {
        store(y, matmul(x, w, acc = y))
    }

    axis tokens = DenseDyn(T)
    axis experts = Sparse(tokens, indptr, indices)

    workload moe_layer() {
        for t in P(tokens) {
            router[t](x = X[t], idx = Idx[t*2 : t*2+2])
        }
        for t in P(tokens) {
            for e in P.sel(experts[t]) {
                expert[t, e](x = X[t], w = Wexp[e], y = H[t, e.pos], k = e.pos)
            }
        }
    }
    schedule main = moe_layer().dispatch(affinity(t, n = 4))
"""

RAGGED = """\
    module ragged_attention
    sym B, S
    input  seq_lens: i32[B]
    input  Q: f32[B, S, 64]
    output O: f32[B, S, 64]
    kernel attn_block(q: In[Tile[64, 64, f32]], o: Out[Tile[64, 64, f32]]) { store(o, q) }
    axis batch = DenseDyn(B)
    axis blocks = Ragged(batch, ceildiv(seq_lens[_], 64))
    axis rows = Ragged(batch, seq_lens)

    workload per_batch(bs: DenseDyn, blk: Ragged) {
        for b in P(bs) {
            for s in P.seq(blk[b]) {
                attn_block[b, s](q = Q[b, s*64 : s*64 + 64, :], o = O[b, s*64 : s*64 + 64, :])
            }
        }
    }

    workload ragged_attn() {
        for b in P(batch) {
            when seq_lens[b] > 0 {
                for s in P(blocks[b]) {
                    attn_block[b, s](q = Q[b, s*64 : s*64 + 64, :], o = O[b, s*64 : s*64 + 64, :])
                }
            }
        }
        per_batch(batch, blocks)
        per_batch(bs = batch, blk = rows)
    }
    schedule main = ragged_attn().dispatch(affinity(b)).streams(2).stream_by(s)
"""

TIERED = """\
    module tiered
    sym B
    input  X: f32[B, 16, 128]
    input  seq_lens: i32[B]
    input  mask: bool[B]
    output Y: f32[B, 16, 128]
    event ev
    kernel rows(x: In[Tile[R, 128, f32]], y: Out[Tile[R, 128, f32]], R: Constexpr[i32] = 16) { store(y, x) }
    axis batch = DenseDyn(B)

    workload tiers() {
        for b in P(batch) {
            when seq_lens[b] > 1024 and not mask[b] {
                rows[b](x = X[b], y = Y[b])
            } else when seq_lens[b] > 64 or slot(2) == 1 {
                rows[b](x = X[b, 0:8, :], y = Y[b, 0:8, :], R = 8)
            } else when query(ev) {
                combine { rows[b](x = X[b], y = Y[b], R = 16) }
            } otherwise {
                sequential { rows[b](x = X[b, 8:16, :], y = Y[b, 8:16, :], R = 8) }
            }
        }
    }
"""

P_WHEN = """\
    module pwhen
    sym B
    input  X: f32[B, 16, 128]
    input  seq_lens: i32[B]
    output Y: f32[B, 16, 128]
    channel c: Tile[16, 128, f32], depth = 2
    kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
    axis batch = DenseDyn(B)

    workload w() {
        for b in P(batch) {
            P.when(seq_lens[b] > 64) {
                k[b](x = X[b], y = Y[b])
            }
            P.otherwise {
                k[b](x = X[b], y = Y[b])
            }
        }
        P.pipe {
            process p { for i in P.seq(batch) { send(c, k[i](x = X[i], y = c)) } }
            process q { consume(c) as t { k[t](x = t, y = Y[t]) } }
        }
    }
"""

SLOTS_EVENTS = """\
    module misc
    sym N
    input  X: f32[N, 4, 8]
    input  counts: i32[N]
    output Y: f32[N, 4, 8]
    output Z: f32[4, 8]
    event ev
    event go
    channel q: Tile[4, 8, f32], depth = 4
    channel done, depth = 1

    kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
    kernel fill(y: Out[Tile[4, 8, f32]], v: Scalar[f32] = 0.0, n: Scalar[i32] = 0) {
        store(y, full(4, 8, v, f32))
    }
    axis rows = DenseDyn(N)

    workload part(r) {
        for i in P(r) {
            copy[i](x = X[i], y = Y[i])
        }
    }

    workload all() {
        sequential {
            part(rows)
            record(ev)
            combine {
                fill(y = Z, v = 1.5, n = N * 2 - 1)
            }
        }
        synchronize(ev)
        slot_set(0, N * 2)
        slot_load(1, counts[0])
        when slot(1) > 0 and query(ev) {
            fill(y = Z, v = 2)
        }
        for i in P.seq(N) {
            slot_set(2, counts[i] + slot(2))
        }
        pipe {
            process feed {
                for i in P.seq(rows) {
                    send(q, copy[i](x = X[i], y = q))
                    send(done, fill[i](y = Z))
                }
                send(go, fill(y = Z))
            }
            process work * 4 {
                consume(q) as t {
                    copy[work.id, t](x = t, y = Y[t.index])
                }
            }
            process drain {
                consume(done) as d { fill[d](y = Z, n = d + 1) }
                consume(go) as g { fill[g](y = Z) }
            }
        }
    }

    schedule main = all().dispatch(work_steal(n = 2)).timing(immediate)
"""


@pytest.mark.parametrize(
    "src",
    [RMSNORM, MEGAKERNEL, SCHEDULES, MOE, RAGGED, TIERED, SLOTS_EVENTS],
    ids=["rmsnorm", "megakernel", "schedules", "moe", "ragged", "tiered", "slots_events"],
)
def test_valid_programs_check(src: str):
    env = check(src)
    assert env.workloads


def test_p_when_and_p_pipe_spellings_check():
    env = check(P_WHEN)
    assert "w" in env.workloads


# ---------------------------------------------------------------------------------------------
# Run-time checks: recorded exactly when a proof is out of reach


def test_provable_views_record_no_runtime_checks():
    env = check("""\
        sym B, T
        input  X: f32[B, T * 16, 128]
        output Y: f32[B, T * 16, 128]
        kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
        axis batch = DenseDyn(B)
        axis tiles = DenseDyn(T)
        workload w() {
            for b, t in P(batch, tiles) {
                k[b, t](x = X[b, t*16 : t*16 + 16, :], y = Y[b, t*16 : t*16 + 16, :])
            }
        }
    """)
    assert env.checks == []


def test_rmsnorm_records_no_runtime_checks():
    assert check(RMSNORM).checks == []


def test_unprovable_views_record_runtime_checks_at_the_argument():
    env = check("""\
        sym B, T, S
        input  X: f32[B, S, 128]
        output Y: f32[B, S, 128]
        kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
        axis batch = DenseDyn(B)
        axis tiles = DenseDyn(T)
        workload w() {
            for b, t in P(batch, tiles) {
                k[b, t](x = X[b, t*16 : t*16 + 16, :], y = Y[b, t : t + T, :])
            }
        }
    """)
    got = {(c.span.line, c.span.col, str(c.check)) for c in env.checks}
    # the slice end against S (unknown relation between T and S), and the extent T against 16
    assert (9, 17, "t * 16 + 16 <= S") in got
    assert (9, 48, "T + t <= S") in got
    assert (9, 48, "T <= 16") in got and (9, 48, "T >= 1") in got  # a partial tile fits
    assert all(c.span.line == 9 for c in env.checks)
    assert not any("b" in str(c.check) for c in env.checks)  # b < B is proved


def test_symbolic_extent_against_a_constexpr_tile_is_a_runtime_check():
    env = check("""\
        sym N, M
        input  X: f32[N, M, 128]
        output Y: f32[N, 16, 128]
        kernel rows(x: In[Tile[R, 128, f32]], y: Out[Tile[R, 128, f32]], R: Constexpr[i32]) { store(y, x) }
        axis n = DenseDyn(N)
        workload w() {
            for i in P(n) { rows[i](x = X[i], y = Y[i, 0:8, :], R = 8) }
        }
    """)
    assert checks_at(env, 7) == ["M <= 8", "M >= 1"]  # 1 <= M <= 8: a partial tile fits


def test_element_reads_and_sel_coordinates_record_runtime_checks():
    env = check(MOE)
    text = {str(c.check) for c in env.checks}
    assert {"e >= 0", "e < E", "e.pos < 8", "t * 2 + 2 <= NNZ"} <= text


def test_item_index_used_as_a_view_index_is_checked_at_run_time():
    env = check(MEGAKERNEL)
    assert "r.index < N" in {str(c.check) for c in env.checks}


# ---------------------------------------------------------------------------------------------
# Views and tiles

HEAD = """\
    sym B, T
    input  X: f32[B, T, 16, 128]
    output Y: f32[B, T, 16, 128]
    kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
    axis batch = DenseDyn(B)
    axis tiles = DenseDyn(T)
"""


def test_view_shape_message_names_both_shapes():
    [(line, col, msg, _)] = errors(
        HEAD,
        """\
        workload w() {
            for b in P(batch) { k[b](x = X[b], y = Y[b, 0]) }
        }
    """,
    )
    assert (line, col) == (8, 30)
    assert msg == "`x = X[b]` is a [T, 16, 128] view but `x` takes Tile[16, 128, f32]"


def test_leading_unit_dimensions_are_squeezed_and_short_views_promoted():
    env = check("""\
        sym N
        input  X: f32[N, 16, 128]
        input  Idx: i32[N]
        output Y: f32[N, 16, 128]
        output V: f32[4, 1, 16, 128]
        kernel k(x: In[Tile[16, 128, f32]], i: In[Tile[1, 2, i32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
        axis n = DenseDyn(N)
        workload w() {
            for t in P(n) { k[t](x = X[t : t + 1], i = Idx[t*2 : t*2+2], y = V[0]) }
        }
    """)
    assert "w" in env.workloads


def test_out_of_range_constant_index_and_negative_slice_start():
    got = errors("""\
        input  X: f32[16, 16, 128]
        output Y: f32[16, 16, 128]
        kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
        workload w() {
            for i in P(16) { k[i](x = X[20], y = Y[i, -2 : 14, :]) }
        }
    """)
    assert [(ln, c) for ln, c, _, _ in got] == [(5, 33), (5, 47)]
    assert "out of range for dimension 0 of `X` (size 16)" in got[0][2]
    assert "negative" in got[1][2]


def test_loop_variable_ranges_prove_constant_bounds():
    env = check("""\
        input  X: f32[16, 16, 128]
        output Y: f32[16, 16, 128]
        kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
        workload w() {
            for i in P(Dense[16]) { k[i](x = X[i], y = Y[15 - i]) }
        }
    """)
    assert env.checks == []


def test_dtype_and_read_only_are_independent_errors():
    got = errors(
        HEAD,
        """\
        input  H: f16[B, T, 16, 128]
        workload w() {
            for b, t in P(batch, tiles) { k[b, t](x = H[b, t], y = X[b, t]) }
        }
    """,
    )
    msgs = [m for _, _, m, _ in got]
    assert any("f16" in m and "Tile[16, 128, f32]" in m for m in msgs)
    assert any(m.startswith("`X` is an input and is read-only") for m in msgs)
    assert len(got) == 2


def test_unknown_tensor_in_a_view_is_one_error():
    got = errors(
        HEAD,
        """\
        workload w() {
            for b, t in P(batch, tiles) { k[b, t](x = XX[b, t], y = Y[b, t]) }
        }
    """,
    )
    assert got == [(8, 47, "unknown tensor `XX`", "did you mean `X`?")]


# ---------------------------------------------------------------------------------------------
# Calls


def test_kernel_call_binding_errors_are_all_reported():
    got = errors(
        HEAD,
        """\
        workload w() {
            for b, t in P(batch, tiles) {
                k[b, t](X[b, t], y = Y[b, t])
                k[b, t](x = X[b, t], y = Y[b, t], z = 1)
                k[b, t](y = Y[b, t])
            }
        }
    """,
    )
    assert [(ln, c) for ln, c, _, _ in got] == [(9, 17), (10, 43), (11, 9)]
    assert got[0][3] == "write `x = X[b, t]`"
    assert "does not bind parameter `x`" in got[2][2]


def test_misspelled_keyword_is_not_also_reported_missing():
    got = errors(
        HEAD,
        """\
        workload w() {
            for b, t in P(batch, tiles) { k[b, t](xx = X[b, t], y = Y[b, t]) }
        }
    """,
    )
    assert got == [(8, 43, "kernel `k` has no parameter `xx`", "did you mean `x`?")]


def test_unknown_callee_suggests_kernels_and_workloads():
    got = errors(
        HEAD,
        """\
        workload inner(a: DenseDyn) { for i in P(a) { k[i](x = X[i, 0], y = Y[i, 0]) } }
        workload w() { innr(batch) }
    """,
    )
    assert got == [(8, 16, "unknown kernel or workload `innr`", "did you mean `inner`?")]


def test_scalar_arguments():
    got = errors(
        HEAD,
        """\
        kernel ks(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]], n: Scalar[i32], f: Scalar[f32]) {
            store(y, x)
        }
        workload w() {
            for b, t in P(batch, tiles) {
                ks[b, t](x = X[b, t], y = Y[b, t], n = b + t, f = t * 0.5)
                ks[b, t](x = X[b, t], y = Y[b, t], n = 1.5, f = b > 0)
            }
        }
    """,
    )
    assert [(ln, c) for ln, c, _, _ in got] == [(13, 48), (13, 57)]
    assert "is a float" in got[0][2] and "is a condition" in got[1][2]


def test_parameters_and_loop_variables_shadow_module_names():
    env = check("""\
        sym B
        const T = 4
        input  X: f32[B, 4, 16, 128]
        output Y: f32[B, 4, 16, 128]
        kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
        axis batch = DenseDyn(B)
        workload w(B: DenseDyn) {
            for b in P(B) { for T in P(4) { k[b, T](x = X[b, T], y = Y[b, T]) } }
            for B in P(batch) { k[B](x = X[B, 0], y = Y[B, 0]) }
        }
        schedule main = w(batch)
    """)
    # line 8: `B` is the parameter (unknown extent), so `b < B` (the sym, in X's dims) is left for
    # run time; the loop variable `T` in [0, 4) is proved. Line 9: the loop variable `B` over
    # `batch` is proved below the sym `B`.
    assert sorted((c.span.line, str(c.check)) for c in env.checks) == [(8, "b < B"), (8, "b < B")]


# ---------------------------------------------------------------------------------------------
# Loops and axes


def test_integer_expression_and_inline_axes():
    env = check(
        HEAD,
        """\
        input  L: i32[B]
        workload w() {
            for b in P(batch) {
                for t in P.seq(min(L[b], T)) { k[b, t](x = X[b, t], y = Y[b, t]) }
                for t in P(DenseDyn(T)) { k[b, t](x = X[b, t], y = Y[b, t]) }
                for j in P.grid(Dense[4]) { k[b, j](x = X[b, 0], y = Y[b, 0]) }
            }
        }
    """,
    )
    assert "w" in env.workloads


def test_dependent_axes_in_one_grid_are_an_error():
    got = errors(
        HEAD,
        """\
        input  L: i32[B]
        axis tok = Ragged(batch, L)
        workload w() {
            for b, s in P(batch, tok[b]) { k[b, s](x = X[b, s], y = Y[b, s]) }
        }
    """,
    )
    assert len(got) == 1 and got[0][:2] == (10, 30) and "same loop" in got[0][2]


def test_sparse_axis_outside_p_sel():
    got = errors("""\
        sym T, NNZ
        input  X: f32[T, 16, 128]
        output Y: f32[T, 16, 128]
        input  indptr: i32[T + 1]
        input  indices: i32[NNZ]
        kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
        axis tokens = DenseDyn(T)
        axis experts = Sparse(tokens, indptr, indices)
        workload w() {
            for t in P(tokens) {
                for e in P(experts[t]) { k[t, e](x = X[t], y = Y[t]) }
                for e in P.sel(experts) { k[t, e](x = X[t], y = Y[t]) }
            }
        }
    """)
    assert [(ln, c) for ln, c, _, _ in got] == [(11, 20), (12, 24)]
    assert "P.sel" in got[0][2] and "P.sel" in got[1][2]


def test_ragged_parameter_checked_at_the_call_site():
    got = errors("""\
        sym B, S
        input  L: i32[B]
        input  Q: f32[B, S, 64]
        output O: f32[B, S, 64]
        kernel kb(q: In[Tile[64, 64, f32]], o: Out[Tile[64, 64, f32]]) { store(o, q) }
        axis batch = DenseDyn(B)
        axis other = DenseDyn(S)
        axis blocks = Ragged(batch, L)
        workload inner(bs: DenseDyn, blk: Ragged) {
            for b in P(bs) { for s in P(blk[b]) { kb[b, s](q = Q[b, s*64 : s*64 + 64, :], o = O[b, 0:64, :]) } }
        }
        workload outer() {
            inner(batch, blocks)
            inner(other, blocks)
        }
    """)
    assert len(got) == 1
    line, col, msg, _ = got[0]
    assert (line, col) == (14, 11)
    assert "loop over `other`" in msg and "outer axis `batch`" in msg


def test_inline_cycle_reported_once_at_the_closing_call():
    got = errors(
        HEAD,
        """\
        workload a() { b() }
        workload b() { c() }
        workload c() { a() }
    """,
    )
    assert [(ln, c) for ln, c, _, _ in got] == [(9, 16)]
    assert "`a` -> `b` -> `c` -> `a`" in got[0][2]


def test_when_predicates_must_be_conditions():
    got = errors(
        HEAD,
        """\
        input  seq_lens: i32[B]
        workload w() {
            for b in P(batch) {
                when seq_lens[b] { k[b](x = X[b, 0], y = Y[b, 0]) }
                else when seq_lens[b] > 2 and seq_lens[b] { k[b](x = X[b, 0], y = Y[b, 0]) }
            }
        }
    """,
    )
    assert got[0] == (
        10,
        14,
        "`when` needs a condition; `seq_lens[b]` is an integer",
        "compare it: `seq_lens[b] > 0`",
    )
    assert got[1][:2] == (11, 39) and "`and` needs conditions" in got[1][2]


# ---------------------------------------------------------------------------------------------
# CSP

CSP_HEAD = """\
    sym N
    input  X: f32[N, 16, 128]
    output Y: f32[N, 16, 128]
    kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
    axis tiles = DenseDyn(N)
"""


def test_send_and_consume_on_an_event_are_a_rendezvous():
    env = check(
        CSP_HEAD,
        """\
        event ping
        workload w() {
            pipe {
                process a { for i in P.seq(tiles) { send(ping, k[i](x = X[i], y = Y[i])) } }
                process b { consume(ping) as t { k[t](x = X[t], y = Y[t]) } }
            }
        }
    """,
    )
    assert "w" in env.workloads


def test_pairing_counts_inlined_bodies():
    env = check(
        CSP_HEAD,
        """\
        channel c: Tile[16, 128, f32], depth = 2
        workload producer() { for i in P.seq(tiles) { send(c, k[i](x = X[i], y = c)) } }
        workload w() {
            pipe {
                process a { producer() }
                process b { consume(c) as t { k[t](x = t, y = Y[t]) } }
            }
        }
    """,
    )
    assert "producer" in env.workloads


def test_pairing_is_per_root_workload():
    got = errors(
        CSP_HEAD,
        """\
        channel c: Tile[16, 128, f32], depth = 2
        workload sender() { for i in P.seq(tiles) { send(c, k[i](x = X[i], y = c)) } }
        workload receiver() { consume(c) as t { k[t](x = t, y = Y[t]) } }
    """,
    )
    assert [(ln, c) for ln, c, _, _ in got] == [(7, 50), (8, 31)]
    assert got[0][2] == "channel `c` is sent to but never consumed"
    assert got[1][2] == "channel `c` is consumed but never sent to"


def test_replicas_and_ids():
    got = errors(
        CSP_HEAD,
        """\
        channel c: Tile[16, 128, f32], depth = 2
        workload w() {
            pipe {
                process a { for i in P.seq(tiles) { send(c, k[i](x = X[i], y = c)) } }
                process b * N { consume(c) as t { k[b.id, t](x = t, y = Y[t]) } }
            }
        }
    """,
    )
    assert len(got) == 1 and got[0][:2] == (10, 21) and "compile-time integer" in got[0][2]


def test_rendezvous_deadlock_not_reported_with_a_buffered_channel():
    env = check(
        CSP_HEAD,
        """\
        channel a2b: Tile[16, 128, f32], depth = 1
        channel b2a: Tile[16, 128, f32], depth = 0
        workload w() {
            pipe {
                process a {
                    send(a2b, k(x = X[0], y = a2b))
                    consume(b2a) as t { k[t](x = t, y = Y[0]) }
                }
                process b {
                    send(b2a, k(x = X[1], y = b2a))
                    consume(a2b) as t { k[t](x = t, y = Y[1]) }
                }
            }
        }
    """,
    )
    assert "w" in env.workloads


def test_record_after_record_and_synchronize_across_inlined_workload():
    env = check(
        CSP_HEAD,
        """\
        event e1
        event e2
        workload first() {
            for i in P(tiles) { k[i](x = X[i], y = Y[i]) }
            record(e1)
            record(e2)
        }
        workload w() {
            first()
            synchronize(e1)
            synchronize(e2)
            for i in P(tiles) { k[i](x = Y[i], y = Y[i]) }
        }
    """,
    )
    assert "w" in env.workloads


def test_channel_misuse_errors():
    got = errors(
        CSP_HEAD,
        """\
        channel c: Tile[16, 128, f32], depth = 2
        channel d: Tile[16, 128, f32], depth = 2
        workload w() {
            pipe {
                process a {
                    for i in P.seq(tiles) { send(c, k[i](x = X[i], y = d)) }
                }
                process b {
                    consume(c) as t { k[t](x = t, y = t) }
                    consume(d) as u { k[u](x = X[u], y = Y[u]) }
                }
            }
        }
    """,
    )
    msgs = {(ln, c): m for ln, c, m, _ in got}
    assert "`d` is passed inside `send(c, ...)`" in msgs[(11, 60)]
    assert "does not write `c`" in msgs[(11, 45)]
    assert "read-only" in msgs[(14, 43)]
    assert "channel `d` is consumed but never sent to" in msgs[(15, 21)]
    assert len(got) == 4


# ---------------------------------------------------------------------------------------------
# Schedules

SCHED_HEAD = (
    HEAD
    + """\
    axis heads = Dense[8]
    workload norm() {
        for b, t in P(batch, tiles) { k[b, t](x = X[b, t], y = Y[b, t]) }
    }
"""
)


def test_every_dispatch_policy_and_timing_policy_checks():
    env = check(
        SCHED_HEAD,
        """\
        schedule s1 = norm().dispatch(round_robin(4))
        schedule s2 = norm().dispatch(round_robin(num_aicpus = 4))
        schedule s3 = norm().dispatch(affinity(b, n = 4))
        schedule s4 = norm().dispatch(hash(b * 16 + t, n = 8))
        schedule s5 = norm().dispatch(dispatch_by(t % 4, n = 4))
        schedule s6 = norm().dispatch(work_steal(n = 4))
        schedule s7 = norm().timing(immediate).streams(2).stream_by(b)
        schedule s8 = norm().timing(batched(16))
        schedule s9 = norm().timing(interleaved(2)).streams(2)
        schedule s10 = norm().timing(rate_limit(0.5))
        schedule s11 = norm().task_graph(window = 64)
        schedule s12 = norm().task_graph(window = 64, unit = tasks, mode = abort)
    """,
    )
    assert len(env.schedules) == 12


def test_key_not_bound_by_a_call_names_the_call():
    got = errors(
        SCHED_HEAD,
        """\
        workload both() {
            norm()
            for b, h in P(batch, heads) { k[b, h](x = X[b, h], y = Y[b, h]) }
        }
        schedule main = both().dispatch(affinity(h))
    """,
    )
    [(line, col, msg, help)] = got
    assert (line, col) == (15, 42)
    assert msg == "the key uses `h`, but the call `k[b, t]` does not bind `h`"
    assert help == "add `h` to the call's coordinates: `k[b, t, h]`"


def test_schedule_errors_are_independent():
    got = errors(
        SCHED_HEAD,
        """\
        schedule main = norm().dispatch(afinity(b)).timing(batched(0)).task_graph(window = 8, unit = bytes)
            .streams(2).streams(3).stream_by(q)
    """,
    )
    assert [(ln, c) for ln, c, _, _ in got] == [(11, 33), (11, 60), (11, 94), (12, 17), (12, 38)]
    assert got[0][3] == "did you mean `affinity`?"
    assert got[3][2] == "`.streams` is given twice"
    assert got[4][2] == "unknown name `q` in a schedule key"


def test_stream_by_without_streams_is_an_error():
    got = errors(SCHED_HEAD, "schedule main = norm().stream_by(b)\n")
    assert got[0][:3] == (
        11,
        24,
        "`.stream_by` needs `.streams(n)` to say how many streams there are",
    )


def test_schedule_arguments_match_parameter_kinds():
    got = errors(
        SCHED_HEAD,
        """\
        input  L: i32[B]
        axis tok = Ragged(batch, L)
        workload h8(h: Dense[8], r: Ragged) {
            for i in P(h) { k[i](x = X[0, i], y = Y[0, i]) }
        }
        schedule ok = h8(heads, tok)
        schedule bad = h8(Dense[4], batch)
    """,
    )
    assert [(ln, c) for ln, c, _, _ in got] == [(17, 19), (17, 29)]
    assert "extent 4" in got[0][2] and "`r` is Ragged" in got[1][2]


# ---------------------------------------------------------------------------------------------
# `let` (language.md section 6, "Names: `let`")

LET_HEAD = """\
    sym B
    input  X: f32[B, 64, 128]
    output Y: f32[B, 64, 128]
    input  L: i32[B]
    input  I: i32[B, 1, 1]
    output O: i32[B, 1, 1]
    kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]], n: Scalar[i32] = 0,
             s: Scalar[f32] = 1.0) { store(y, x) }
    kernel one(a: In[Tile[1, 1, i32]], b: Out[Tile[1, 1, i32]]) { store(b, a) }
    channel ch: Tile[16, 128, f32], depth = 2
    event done
    """


def test_lets_are_usable_wherever_their_expression_is():
    env = check(LET_HEAD, """\
        workload w() {
            for b in P(B) {
                let n = L[b]                          // an element: a scalar
                let blocks = ceildiv(n, 16)
                let f = 0.5                           // a float scalar
                let s = 1
                slot_set(s, n)                        // a slot number (compile-time)
                for t in P(blocks) {                  // a loop extent
                    let r0 = t * 16
                    let x = X[b, r0 : r0 + 16, :]     // a view
                    let live = n > r0 and L[b] > 0    // a condition
                    when live {
                        let y = Y[b, r0 : r0 + 16, :] // nested block: outer lets visible
                        k[b, r0](x = x, y = y, n = n - r0, s = f)
                    } otherwise {
                        let y = Y[b, r0 : r0 + 16, :] // a sibling block may reuse the name
                        let x2 = x                    // a `let` of a `let`
                        k[b, t](x = x2, y = y)
                    }
                }
                let e = I[b, 0, 0]                    // an element passed to a 1 x 1 tile
                one[b](a = e, b = O[b])
            }
        }
        """)
    assert env.workloads["w"]


def test_lets_in_csp_bodies():
    check(LET_HEAD, """\
        workload w() {
            let nw = 2
            pipe {
                process producer {
                    for i in P.seq(B) {
                        let src = X[i, 0:16, :]
                        send(ch, k[i](x = src, y = ch))
                    }
                }
                process workers * nw {
                    consume(ch) as t {
                        let row = t.index
                        let y = Y[row, 16:32, :]
                        k[t, workers.id](x = t, y = y)
                    }
                }
            }
        }
        """)


def test_a_let_view_is_checked_once_at_the_let_and_its_shape_at_each_use():
    env = check(LET_HEAD, """\
        workload w() {
            for b in P(B) {
                let r0 = L[b]
                let x = X[b, r0 : r0 + 16, :]
                k[b](x = x, y = Y[b, 0:16, :])
                k[b](x = x, y = Y[b, 16:32, :])
            }
        }
        """)
    # line 15 is the `let x`: its bounds over `r0 = L[b]`, once; the calls prove their shapes
    assert checks_at(env, 15) == ["L[b] >= 0", "L[b] + 16 <= 64"]
    assert checks_at(env, 16) == checks_at(env, 17) == []


def test_one_error_in_a_let_is_one_diagnostic_however_often_it_is_used():
    got = errors(LET_HEAD, """\
        workload w() {
            for b, t in P(B, 4) {
                let r0 = tt * 16
                let x = X[b, r0 : r0 + 16, :]
                let y = Y[b, r0 : r0 + 16, :]
                when r0 < 48 { k[b, r0](x = x, y = y, n = r0) }
                otherwise { k[b, r0](x = x, y = y, n = r0 + 1) }
            }
        }
        """)
    assert [(m, h) for _, _, m, h in got] == [("unknown name `tt`", "did you mean `t`?")]


def test_a_let_whose_name_is_taken_binds_nothing():
    # the loop variable keeps its meaning: the call after the bad `let` is checked as usual
    got = errors(LET_HEAD, """\
        workload w() {
            for b in P(B) {
                let b = 0
                k[b](x = X[b, 0:32, :], y = Y[b, 0:16, :])
            }
        }
        """)
    assert [m for _, _, m, _ in got] == [
        "`b` is already a loop variable here; a `let` cannot take its name",
        "`x = X[b, 0:32, :]` is a [32, 128] view but `x` takes Tile[16, 128, f32]"]


def test_a_let_view_mismatch_is_reported_at_the_argument_with_the_let_as_a_note():
    with pytest.raises(WspError) as info:
        check(LET_HEAD, """\
            workload w() {
                for b in P(B) {
                    let x = X[b, 0:32, :]
                    k[b](x = x, y = Y[b, 0:16, :])
                }
            }
            """)
    (d,) = info.value.diagnostics
    assert d.message == "`x = X[b, 0:32, :]` is a [32, 128] view but `x` takes Tile[16, 128, f32]"
    assert (d.span.line, d.span.col) == (15, 14)
    (note,) = d.notes
    assert (note.span.line, note.span.col, note.message) == (14, 13, "`x` is defined here")
