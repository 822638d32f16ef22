"""Seed and prototype spellings that used to be refused and now have their meaning (issue 19):
`Workload.layout(...)` (a DeprecationWarning, the workload unchanged), `KernelRef.symbol` and
`.signature`, `kernel.compile(target=..., **constexprs)` (the generated kernel source of the
target), the four `TraceLevel`s (each keeps what docs/python.md says and no more),
`Task.resources` of `Workload.enumerate()`, and `AxisVar` / `IntVar`."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from pto_wsp import (
    AxisVar,
    CompiledKernel,
    CompileError,
    Constexpr,
    Dense,
    DenseDyn,
    DType,
    ExecutionError,
    In,
    InOut,
    IntVar,
    KernelError,
    KernelSignature,
    Out,
    P,
    Pad,
    Scalar,
    Tensor,
    Tile,
    TraceLevel,
    kernel,
    pto,
    symbol_u64,
    workload,
)

from . import helpers

F32, I32 = DType.F32, DType.I32
HERE = Path(__file__).resolve()
line_of, at = helpers.markers(__file__)


@kernel
def scaled_rms(x: In[Tile[4, 16, F32], Pad(-math.inf)], out: Out[Tile[4, 16, F32]],
               eps: Scalar[F32] = 1e-6):
    pto.store(out, pto.mul(x, pto.rsqrt(pto.rowmean(pto.mul(x, x)) + eps)))


@kernel
def head_rows(x: In[Tile["R", 8, F32]], y: Out[Tile["R", 8, F32]], R: Constexpr[int]):  # noqa: F821 - "R" names the Constexpr parameter
    pto.store(y, pto.neg(x))


@kernel
def keyword_params(input: In[Tile[1, 8, F32]], acc: InOut[Tile[1, 8, F32]]):
    pto.store(acc, acc + input)


def _rms_workload(x: np.ndarray, y: np.ndarray):
    X, Y = Tensor(data=x), Tensor(data=y)

    @workload
    def rms_all():
        for b in P(Dense[x.shape[0]]):
            scaled_rms[b](x=X[b], out=Y[b])

    return rms_all


# ---------------------------------------------------------------------------------------------
# Workload.layout


def test_layout_warns_that_it_is_deprecated_and_changes_nothing():
    x = np.ones((2, 4, 16), np.float32)
    w = _rms_workload(x, np.zeros_like(x))()
    with pytest.warns(DeprecationWarning, match=r"use TensorLayout \+ relayout") as seen:
        same = w.layout(x, 0, 1)
    assert seen[0].filename == str(HERE)  # the warning names the caller's line
    assert same is w
    assert ptowsp.to_wsp(same) == ptowsp.to_wsp(w)


# ---------------------------------------------------------------------------------------------
# KernelRef.symbol and .signature


def test_symbol_is_the_kernels_name_in_the_module_and_its_traces():
    x = np.ones((2, 4, 16), np.float32)
    w = _rms_workload(x, np.zeros_like(x))()
    assert scaled_rms.symbol == "scaled_rms"
    assert f"kernel {scaled_rms.symbol}(" in ptowsp.to_wsp(w)
    assert {t.kernel for t in w.enumerate()} == {scaled_rms.symbol}


def test_signature_names_kinds_shapes_dtypes_defaults_and_pads():
    sig = scaled_rms.signature
    assert isinstance(sig, KernelSignature)
    assert str(sig) == ("scaled_rms(x: In[Tile[4, 16, f32], pad = -inf], "
                        "out: Out[Tile[4, 16, f32]], eps: Scalar[f32] = 1e-06)")
    assert list(sig) == ["x", "out", "eps"] and len(sig) == 3
    assert [p.kind for p in sig.params] == ["In", "Out", "Scalar"]
    assert [p.direction for p in sig.params] == ["in", "out", "scalar"]
    x = sig["x"]
    assert x.shape == (4, 16) and x.dtype is DType.F32 and x.pad == -math.inf and x.is_tile
    assert sig["eps"].shape is None and sig["eps"].default == pytest.approx(1e-6)
    assert sig[1] is sig["out"] and str(sig["out"]) == "out: Out[Tile[4, 16, f32]]"
    assert [p.name for p in sig.of_kind("In", "InOut")] == ["x"]

    rows = head_rows.signature
    assert str(rows) == "head_rows(x: In[Tile[R, 8, f32]], y: Out[Tile[R, 8, f32]], R: Constexpr[i32])"
    assert rows["x"].shape == ("R", 8) and rows["R"].kind == "Constexpr"
    # a keyword parameter keeps its Python name; the module spells it `input_`
    assert list(keyword_params.signature) == ["input", "acc"]
    assert keyword_params.signature["acc"].kind == "InOut"


def test_signature_needs_no_body():
    @kernel
    def empty(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
        pass

    assert str(empty.signature) == "empty(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]])"
    with pytest.raises(KernelError, match="has an empty body"):
        empty.compile()


# ---------------------------------------------------------------------------------------------
# kernel.compile


def test_compile_gives_the_c_function_a_workload_build_compiles():
    x = np.ones((2, 4, 16), np.float32)
    compiled = scaled_rms.compile(target="cpu_sim")
    assert isinstance(compiled, CompiledKernel)
    assert (compiled.name, compiled.target, compiled.entry) == ("scaled_rms", "cpu_sim",
                                                                "wsp_k_scaled_rms")
    assert f"int {compiled.entry}(const wsp_tile *tiles, const wsp_scalar *scalars)" in compiled.code
    assert str(compiled) == compiled.code and scaled_rms.compile().code == compiled.code
    program = _rms_workload(x, np.zeros_like(x))().compile()
    built = (Path(program.codegen_artifact_dir) / "kernels.c").read_text()
    assert compiled.code in built


def test_compile_for_ascend_gives_the_aicore_header_of_the_tree():
    x = np.ones((2, 4, 16), np.float32)
    compiled = scaled_rms.compile(target="ascend_npu")
    assert compiled.entry == "wsp_aicore_scaled_rms"
    assert f"__aicore__ inline void {compiled.entry}(" in compiled.code
    tree = _rms_workload(x, np.zeros_like(x))().compile(target="ascend_npu")
    header = tree.files["aicore/kernel_scaled_rms.h"]
    # the same header but for the module's name (the workload's there, this file's here)
    mine = compiled.code.replace("test_kernel_api", "M").replace("TEST_KERNEL_API", "M")
    assert mine == header.replace("rms_all", "M").replace("RMS_ALL", "M")


def test_compile_takes_constexpr_values_as_keywords():
    compiled = head_rows.compile(target="cpu_sim", R=4)
    assert compiled.name == "head_rows__R_4" and compiled.constexprs == {"R": 4}
    assert "x: In[Tile[4, 8, f32]]" in compiled.code

    x = np.arange(2 * 4 * 8, dtype=np.float32).reshape(2, 4, 8)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)

    @workload
    def w():
        for b in P(Dense[2]):
            head_rows[b](x=X[b], y=Y[b], R=4)

    program = w().compile()
    assert compiled.code in (Path(program.codegen_artifact_dir) / "kernels.c").read_text()
    program.execute()
    program.synchronize()
    np.testing.assert_array_equal(y, -x)

    @kernel
    def with_default(x: In[Tile["R", 8, F32]], y: Out[Tile["R", 8, F32]], R: Constexpr[int] = 2):  # noqa: F821
        pto.store(y, x + x)

    assert with_default.compile().name == "with_default__R_2"


def test_compile_errors_name_what_is_wrong():
    with pytest.raises(KernelError) as info:
        head_rows.compile(target="cpu_sim")  # E:missing
    assert "kernel `head_rows` needs the value of its Constexpr parameter `R`" in at(info.value, "missing")
    assert "head_rows.compile(R=...)" in str(info.value)
    with pytest.raises(KernelError) as info:
        head_rows.trace()  # E:missing-trace
    assert "head_rows.trace(R=...)" in at(info.value, "missing-trace")
    with pytest.raises(KernelError) as info:
        head_rows.compile(R=4, Q=2)  # E:unknown
    assert ("kernel `head_rows` has no Constexpr parameter `Q` (its Constexpr parameters: `R`)"
            in at(info.value, "unknown"))
    with pytest.raises(KernelError, match="Constexpr `R` of kernel `head_rows` takes an integer, not 2.5"):
        head_rows.compile(R=2.5)
    with pytest.raises(KernelError) as info:
        scaled_rms.compile(target="ref")  # E:ref
    assert "target `ref` generates no kernel source: it interprets the kernel's IR" in at(info.value, "ref")
    with pytest.raises(CompileError) as info:
        scaled_rms.compile(target="tpu")  # E:target
    assert "unknown target 'tpu'" in at(info.value, "target")
    compiled = scaled_rms.compile()
    with pytest.raises(KernelError) as info:
        compiled(1, 2)  # E:call
    assert "is generated source, not a function to call" in at(info.value, "call")


def test_compile_of_an_extern_kernel():
    @kernel(cpp_src="for (int j = 0; j < 8; ++j) y[j] = x[j] * 2.0f;")
    def twice(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
        pass

    assert "y[j] = x[j] * 2.0f;" in twice.compile().code
    with pytest.raises(CompileError, match="has no `extern ascend` body"):
        twice.compile(target="ascend_npu")


# ---------------------------------------------------------------------------------------------
# TraceLevel


def _two_step_program():
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 1, 8)
    y, z = np.zeros_like(x), np.zeros_like(x)
    X, Y, Z = Tensor(data=x), Tensor(data=y), Tensor(data=z)

    @kernel
    def double(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
        pto.store(y, x + x)

    @workload
    def twice():
        for i in P(Dense[4]):
            double[i](x=X[i], y=Y[i])
            double[i](x=Y[i], y=Z[i])  # waits for the task before it: an edge per i

    return twice().compile(), x, z


def _phases(chrome: dict) -> dict:
    out: dict = {}
    for e in chrome["traceEvents"]:
        out[(e["ph"], e.get("pid"))] = out.get((e["ph"], e.get("pid")), 0) + 1
    return out


def test_each_trace_level_keeps_what_it_says_and_no_more():
    program, x, z = _two_step_program()
    assert TraceLevel.NONE < TraceLevel.SUMMARY < TraceLevel.TIMING < TraceLevel.FULL

    program.execute()
    program.synchronize()
    assert program.trace is None  # NONE, the default: no trace

    assert program.enable_tracing(TraceLevel.SUMMARY) is program
    program.execute()
    program.synchronize()
    np.testing.assert_array_equal(z, 4 * x)
    tr = program.trace
    assert tr.level is TraceLevel.SUMMARY and len(tr) == 8
    summary = tr.summary()
    assert summary["tasks"] == 8 and summary["kernels"][0]["tasks"] == 8
    assert summary["total_cycles"] == program.stats.total_cycles > 0
    assert "8 tasks" in str(summary) and "per kernel" in str(summary)
    assert tr._trace is None  # no per-task events are kept
    with pytest.raises(ExecutionError) as info:
        tr.to_chrome_trace()  # E:summary-only
    assert ("the trace was kept at TraceLevel.SUMMARY, which keeps the summary and no per-task "
            "events" in at(info.value, "summary-only"))
    with pytest.raises(ExecutionError, match="per-task events"):
        tr.get_task_events()
    with pytest.raises(ExecutionError, match="keeps the summary"):
        tr.events  # noqa: B018 - the attribute of the backend trace

    program.enable_tracing(TraceLevel.TIMING)
    program.execute()
    program.synchronize()
    tr = program.trace
    phases = _phases(tr.to_chrome_trace())
    assert phases[("X", 1)] == 8 and phases[("X", 2)] == 8  # real and simulated times per task
    assert ("s", 1) not in phases and ("f", 2) not in phases  # no dependency arrows
    assert len(tr.edges) == len(tr.model_edges) == 0
    events = tr.get_task_events()
    assert len(events) == 8 and all(e["end_ns"] >= e["start_ns"] for e in events)
    assert tr.summary()["tasks"] == 8
    # the prototype's ExecutionTrace / TraceEvent spellings, on the same events
    e = events[0]
    assert (e.name, e.category, e.task_id, e.thread_id) == (e["kernel"], "task", 0, e["worker"])
    assert e.duration_us == (e.end_ns - e.start_ns) / 1e3 and e.metadata["coords"] == e["coords"]
    assert tr.get_events() == tr.get_events("kernel") == events and tr.get_events("sync") == []
    assert tr.get_kernel_events() == events
    s = tr.summary()
    assert s["task_count"] == s["total_events"] == s["kernel_invocations"] == 8
    assert s["unique_kernels"] == len({d["kernel"] for d in events})
    assert tr.total_time_ms() == s["total_time_ms"] == s["wall_time_ms"] > 0
    assert tr.kernel_time_ms() == s["kernel_time_ms"] == pytest.approx(sum(d.duration_ms for d in events))

    program.enable_tracing("full")
    program.execute()
    program.synchronize()
    tr = program.trace
    phases = _phases(tr.to_chrome_trace())
    assert phases[("X", 1)] == 8 and phases[("X", 2)] == 8
    assert phases[("s", 1)] == phases[("f", 1)] >= 4  # the runtime's edges, as arrows
    assert phases[("s", 2)] == phases[("f", 2)] >= 4  # the model's
    assert len(tr.edges) >= 4 and len(tr.model_edges) >= 4

    program.disable_tracing()
    program.execute()
    program.synchronize()
    assert program.trace is None
    with pytest.raises(ExecutionError) as info:
        program.enable_tracing(7)  # E:level
    assert "7 is not a trace level" in at(info.value, "level")


# ---------------------------------------------------------------------------------------------
# Task.resources, AxisVar, IntVar


def test_enumerated_tasks_name_the_regions_they_access():
    x = np.arange(2 * 8 * 8, dtype=np.float32).reshape(2, 8, 8)
    acc = np.zeros((2, 8, 8), np.float32)
    X, ACC = Tensor(data=x), Tensor(data=acc)

    @workload
    def w():
        for b in P(Dense[2]):
            for t in P(Dense[2]):
                keyword_params[b, t](input=X[b, t * 4 + 1, 0:8], acc=ACC[b, t * 4, :])

    tasks = w().enumerate()
    assert len(tasks) == 4
    t = tasks[3]
    assert (t.get("b"), t.get("t")) == (1, 1)
    # the prototype's Task: `bindings`, positional `get_axis_value`, and `get`'s default 0
    assert t.bindings == {"b": 1, "t": 1} and tasks[2].get_axis_value(0) == 1
    assert tasks[2].get_axis_value(1) == 0 and t.get_axis_value(2) == 0
    assert t.get("nothing") == 0 and t.get("nothing", -1) == -1
    res = t.resources
    assert list(res) == ["input", "acc"]
    src, dst = res["input"], res["acc"]
    assert (src.mode, dst.mode) == ("In", "InOut")
    assert src.tensor is X and src.tensor_name == "X" and dst.tensor is ACC
    # an indexed dimension is an int (the tile's single row is promoted), a spanned one a slice
    assert src.index == (1, 5, slice(0, 8)) and str(src) == "X[1, 5, 0:8]"
    np.testing.assert_array_equal(src.data, x[1, 5, 0:8])
    assert str(dst) == "ACC[1, 4, 0:8]" and repr(dst) == "<InOut acc = ACC[1, 4, 0:8]>"
    assert not src.transposed and not src.gather


def test_a_transposed_view_is_a_transposed_resource():
    x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
    y = np.zeros((1, 4, 8), np.float32)
    X, Y = Tensor(data=x), Tensor(data=y)

    @kernel
    def copy(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
        pto.store(y, x + 0.0)

    @workload
    def w():
        for i in P(Dense[1]):
            copy[i](x=X.T, y=Y[i])

    (t,) = w().enumerate()
    r = t.resources["x"]
    assert r.transposed and str(r) == "X[0:8, 0:4].T"
    np.testing.assert_array_equal(r.data, x.T)


def test_a_strided_view_is_a_strided_resource():
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    y = np.zeros((4, 8), np.float32)
    X, Y = Tensor(data=x), Tensor(data=y)

    @kernel
    def copy(x: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
        pto.store(y, x + 0.0)

    @workload
    def w():
        copy(x=X[1:8:2, 0:16:2], y=Y)

    (t,) = w().enumerate()
    r = t.resources["x"]
    assert r.index == (slice(1, 8, 2), slice(0, 15, 2)) and str(r) == "X[1:8:2, 0:15:2]"
    np.testing.assert_array_equal(r.data, x[1:8:2, 0:16:2])


def test_resources_need_the_coordinates_the_views_use():
    X, Y = Tensor(data=np.zeros((2, 1, 8), np.float32)), Tensor(data=np.zeros((2, 1, 8), np.float32))

    @kernel
    def copy(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
        pto.store(y, x + 0.0)

    @workload
    def w():
        for i in P(Dense[2]):
            copy(x=X[i], y=Y[i])  # a task without coordinates: `i` is not recorded

    tasks = w().enumerate()
    with pytest.raises(ExecutionError) as info:
        _ = tasks[0].resources  # E:resources
    assert "depend on `i`, which its coordinates do not give" in at(info.value, "resources")


def test_axis_var_and_int_var():
    seen = []
    x = np.arange(3 * 8, dtype=np.float32).reshape(3, 1, 8)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)
    n = IntVar("kapi_rows", 3)
    assert n is symbol_u64("kapi_rows") and isinstance(n, IntVar) and isinstance(n + 1, IntVar)
    assert not isinstance(3, IntVar)

    @kernel
    def copy(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
        pto.store(y, x + 1.0)

    @workload
    def w():
        for i in P(DenseDyn(n)):
            seen.append(isinstance(i, AxisVar) and isinstance(i, IntVar))
            copy[i](x=X[i], y=Y[i])

    program = w().compile()
    program.set_symbol_u64("kapi_rows", 2)
    program.execute()
    program.synchronize()
    assert seen == [True]
    np.testing.assert_array_equal(y[:2], x[:2] + 1)
    assert not y[2].any()
