"""The PTO-WSP prototype's import layout and kernel spellings (issue 19, docs/python.md):

- each of its submodules (`pto_wsp.csp`, `.primitives`, `.schedule`, `.types`, `.program`,
  `.kernel`, `.builder`, `.errors`, `.scalar_expr`, `.ptoisa_jit`, `.type_checker`) imports
  with the prototype's names, each either wspc's object or a refusal that is a `CompileError`
  at the user's line saying why;
- `select(routing[b], fn)` is `P.sel`;
- the kernel spellings `pto.max` / `pto.min` / `pto.constant` / `pto.iota_u32` /
  `pto.tsort32` / `pto.extract_topk_indices`, and `v, i = pto.topk(x, k)` / `pto.sort`, run on
  cpu_sim and ref and match NumPy;
- the prototype-style examples (examples/python/proto_*.py) run and match NumPy on both
  targets.

The name lists below are the prototype's public module-level names (its
`python/pto_wsp/<module>.py`), kept here so the test runs on any clone.
"""

from __future__ import annotations

import importlib
import re
import runpy
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from pto_wsp import DType, In, Out, Tensor, Tile, kernel, pto
from ptowsp.embed.unsupported import Unsupported

from .helpers import assert_roundtrip

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"
HERE = str(Path(__file__).resolve())
F32, I32 = DType.F32, DType.I32

PROTOTYPE_NAMES = {
    "csp": "T Channel Event process ProcessBuilder Process send try_send consume connect "
           "replicate record synchronize query Workload",
    "primitives": "T parallel_for for_each select cond task combine sequential slot_set_u64 "
                  "slot_load_u64 Workload",
    "schedule": "WindowMode DispatchPolicy TimingPolicy TaskWindow DepsMode Deps ReadyPolicy "
                "StartPolicy TracePolicy Pools TaskGraphConfig",
    "types": "N Dense DenseDyn Ragged Sparse Symbol DType Location MemLayout DistElem "
             "TensorReplicate TensorShard TensorLayout LayoutIncompatibleError "
             "tensor_layout_join Tensor relayout allreduce allgather reduce_scatter",
    "program": "TraceLevel TraceEvent ExecutionTrace ProgramStats ExecutionContext Program "
               "TaskInstance ExecutionPlan",
    "kernel": "TileType ScalarType Constexpr T In Out InOut Tile Scalar ValueId Value OpKind Op "
              "KernelIR pto tl CompiledKernel JITKernel jit_kernel kernel DType Location Tensor",
    "builder": "LoopFrame ConditionalFrame KernelParam extract_kernel_params WorkloadBuilder "
               "get_current_builder push_builder pop_builder workload_decorator Kernel kernel "
               "KernelRef T In Out InOut Constexpr get_direction get_inner_type DType",
    "errors": "PtoError CompileError TypeCheckError IRConversionError ExecutionError KernelError "
              "ScheduleError ChannelError ChannelClosed ChannelFull",
    "scalar_expr": "fnv1a_64 ScalarLiteral Expr as_expr TaskExpr symbol_u64 slot_u64 slot_i64 "
                   "slot_bool axis task_param trace_task_fn to_cpp",
    "ptoisa_jit": "ptoisa ptoisa_kernel",
    "type_checker": "TypeErrorKind TypeErrorInfo TypeCheckContext TypeChecker Layout LayoutShard "
                    "LayoutReplicate layout_join LayoutCompatibilityError check_kernel_call "
                    "check_layouts_compatible validate_axis_index",
}

# the names that are wspc's own objects under the prototype's name (module, name, ptowsp name)
SAME = [
    ("csp", "Channel", "Channel"), ("csp", "Event", "Event"), ("csp", "send", "send"),
    ("csp", "consume", "consume"), ("csp", "connect", "connect"), ("csp", "process", "process"),
    ("csp", "replicate", "replicate"), ("csp", "record", "record"), ("csp", "query", "query"),
    ("csp", "synchronize", "synchronize"), ("csp", "try_send", "try_send"),
    ("primitives", "parallel_for", "parallel_for"), ("primitives", "for_each", "for_each"),
    ("primitives", "select", "select"), ("primitives", "cond", "cond"),
    ("primitives", "task", "task"), ("primitives", "combine", "combine"),
    ("primitives", "sequential", "sequential"), ("primitives", "slot_set_u64", "slot_set_u64"),
    ("primitives", "slot_load_u64", "slot_load_u64"),
    ("schedule", "DispatchPolicy", "DispatchPolicy"), ("schedule", "TaskWindow", "TaskWindow"),
    ("schedule", "TimingPolicy", "TimingPolicy"), ("schedule", "WindowMode", "WindowMode"),
    ("types", "Dense", "Dense"), ("types", "Sparse", "Sparse"), ("types", "Ragged", "Ragged"),
    ("types", "DenseDyn", "DenseDyn"), ("types", "DType", "DType"), ("types", "Tensor", "Tensor"),
    ("types", "Location", "Location"), ("types", "TensorLayout", "TensorLayout"),
    ("program", "Program", "Program"), ("program", "TraceLevel", "TraceLevel"),
    ("kernel", "kernel", "kernel"), ("kernel", "jit_kernel", "jit_kernel"),
    ("kernel", "pto", "pto"), ("kernel", "tl", "tl"), ("kernel", "Tile", "Tile"),
    ("kernel", "In", "In"), ("kernel", "Scalar", "Scalar"), ("kernel", "JITKernel", "KernelRef"),
    ("kernel", "CompiledKernel", "CompiledKernel"),
    ("builder", "workload_decorator", "workload"), ("builder", "Kernel", "KernelRef"),
    ("builder", "KernelRef", "KernelRef"), ("builder", "Constexpr", "Constexpr"),
    ("errors", "CompileError", "CompileError"), ("errors", "ChannelFull", "ChannelFull"),
    ("scalar_expr", "slot_u64", "slot_u64"), ("scalar_expr", "symbol_u64", "symbol_u64"),
    ("scalar_expr", "axis", "axis"),
    ("ptoisa_jit", "ptoisa", "ptoisa"), ("ptoisa_jit", "ptoisa_kernel", "ptoisa_kernel"),
    ("type_checker", "Layout", "TensorLayout"), ("type_checker", "LayoutShard", "TensorShard"),
    ("type_checker", "LayoutReplicate", "TensorReplicate"),
]


@pytest.mark.parametrize("module", sorted(PROTOTYPE_NAMES))
def test_every_prototype_name_imports(module):
    mod = importlib.import_module(f"pto_wsp.{module}")
    names = PROTOTYPE_NAMES[module].split()
    missing = [n for n in names if not hasattr(mod, n)]
    assert not missing, missing
    assert set(names) <= set(mod.__all__)
    exec(f"from pto_wsp.{module} import {', '.join(names)}", {})


@pytest.mark.parametrize("module, name, wspc", SAME)
def test_prototype_names_are_wspcs_objects(module, name, wspc):
    assert getattr(importlib.import_module(f"pto_wsp.{module}"), name) is getattr(ptowsp, wspc)


def test_kernel_is_the_decorator_and_a_submodule():
    """As in the prototype: importing `pto_wsp.kernel` leaves `pto_wsp.kernel` the decorator."""
    import sys

    import pto_wsp
    import pto_wsp.kernel  # noqa: F401

    assert pto_wsp.kernel is ptowsp.kernel
    from pto_wsp import kernel as k

    assert k is ptowsp.kernel and sys.modules["pto_wsp.kernel"].pto is ptowsp.pto


def test_the_prototypes_package_names_from_its_submodules():
    """Names the prototype's package exports that only its submodules define here."""
    import pto_wsp
    from pto_wsp import ExecutionTrace, Kernel, KernelIR, TaskGraphConfig, Value  # noqa: F401
    from ptowsp.embed import kernel as ekernel
    from ptowsp.embed import program

    assert ExecutionTrace is program.ProgramTrace and Kernel is ptowsp.KernelRef
    assert Value is ekernel.Value and KernelIR is ekernel.KernelIR
    from ptowsp.embed.schedule import TaskGraphConfig as config

    assert TaskGraphConfig is config  # a real class now (docs/python.md "Task-graph knobs")
    for name in pto_wsp._FROM_SUBMODULES:
        assert name in pto_wsp.__all__ and getattr(pto_wsp, name) is not None


def test_renamed_records_are_wspcs():
    from pto_wsp.program import ExecutionTrace, ProgramStats, TaskInstance
    from pto_wsp.scalar_expr import Expr
    from ptowsp.embed import program, values

    assert ExecutionTrace is program.ProgramTrace and TaskInstance is program.Task
    assert ProgramStats is program.ProgramStats and Expr is values.ScalarExpr


def _refusal(fn, name: str, why: str) -> str:
    with pytest.raises(ptowsp.CompileError) as info:
        fn()
    (d,) = info.value.diagnostics
    assert d.span.file == HERE  # at the user's line, not inside the embedding
    assert d.message == f"`{name}` is not supported by wspc: {why}"
    return d.help


INTERP = ("wspc runs a workload through its compiler and runtime, not the prototype's Python "
          "task interpreter")
KERNEL_IR = "the prototype's kernel IR is not wspc's: a kernel body lowers to wspc's IR"
BUILDER = "it is the prototype's workload builder, whose work wspc's own tracer does"
SCALAR_IR = ("run-time expressions are wspc's AST, checked and lowered with the workload, not "
             "the prototype's C++ scalar IR")
TYPE_CHECKER = ("wspc checks every kernel call, argument, axis and view when the workload is "
                "traced and compiled, and reports each error at the user's line")
REFUSED = [
    ("type_checker", "TypeChecker", TYPE_CHECKER), ("type_checker", "TypeCheckContext", TYPE_CHECKER),
    ("type_checker", "TypeErrorInfo", TYPE_CHECKER), ("type_checker", "TypeErrorKind", TYPE_CHECKER),
    ("type_checker", "check_kernel_call", TYPE_CHECKER),
    ("type_checker", "validate_axis_index", TYPE_CHECKER),
    ("types", "Symbol", "a kernel's scalar argument is given in the call or by its default, "
                        "not read from a table of run-time symbols"),
    ("program", "ExecutionContext", INTERP), ("program", "ExecutionPlan", INTERP),
    ("program", "TraceEvent", "trace events are made by a traced run, as dicts"),
    ("kernel", "TileType", KERNEL_IR), ("kernel", "ScalarType", KERNEL_IR),
    ("kernel", "ValueId", KERNEL_IR), ("kernel", "OpKind", KERNEL_IR), ("kernel", "Op", KERNEL_IR),
    ("builder", "LoopFrame", BUILDER), ("builder", "ConditionalFrame", BUILDER),
    ("builder", "KernelParam", BUILDER), ("builder", "extract_kernel_params", BUILDER),
    ("builder", "WorkloadBuilder", BUILDER), ("builder", "get_current_builder", BUILDER),
    ("builder", "push_builder", BUILDER), ("builder", "pop_builder", BUILDER),
    ("scalar_expr", "TaskExpr", SCALAR_IR), ("scalar_expr", "task_param", SCALAR_IR),
    ("scalar_expr", "trace_task_fn", SCALAR_IR), ("scalar_expr", "to_cpp", SCALAR_IR),
]


@pytest.mark.parametrize("module, name, why", REFUSED)
def test_the_prototypes_own_machinery_is_refused_at_the_users_line(module, name, why):
    obj = getattr(importlib.import_module(f"pto_wsp.{module}"), name)
    assert isinstance(obj, Unsupported)
    assert _refusal(lambda: obj("x"), name, why)
    _refusal(lambda: obj.anything(), f"{name}.anything", why)


def test_every_prototype_name_works_or_is_refused():
    """A name is wspc's object, a small adapter, or a refusal: none is left as a stand-in."""
    same = {(m, n) for m, n, _ in SAME} | {(m, n) for m, n, _ in REFUSED}
    adapters = {("builder", "get_direction"), ("builder", "get_inner_type"),
                ("scalar_expr", "fnv1a_64"), ("scalar_expr", "as_expr")}
    for module, names in PROTOTYPE_NAMES.items():
        mod = importlib.import_module(f"pto_wsp.{module}")
        for n in names.split():
            obj = getattr(mod, n)
            ok = ((module, n) in same | adapters or isinstance(obj, Unsupported)
                  or getattr(obj, "__module__", "").startswith(("ptowsp.", "typing"))
                  or type(obj).__module__ == "typing")
            assert ok, (module, n, obj)


ADD_BODY = """
for (int64_t r = 0; r < O.rows; r++)
    for (int64_t c = 0; c < O.cols; c++)
        O.data[r * O.stride + c] = Q.data[r * Q.stride + c] + 2.0f * K.data[r * K.stride + c];
"""


@pytest.mark.cc
def test_the_deprecated_external_kernel_takes_its_tiles_from_its_first_call(tmp_path,
                                                                           wspc_cache):
    from pto_wsp import ExternalKernel, KernelError, P, to_wsp, workload

    body = tmp_path / "add2.cpp"
    body.write_text(ADD_BODY)
    add2 = ExternalKernel(name="add2", impl_path=str(body), inputs=["Q", "K"], outputs=["O"])
    rng = np.random.default_rng(19)
    q, k = (rng.standard_normal((3, 4, 8)).astype(np.float32) for _ in range(2))
    Q, K = Tensor(data=q), Tensor(data=k)
    res = Tensor(data=np.zeros((3, 4, 8), np.float32), dtype=DType.F32)

    @workload
    def w():
        for b in P(3):
            add2[b](Q[b], K[b], O=res[b])  # positionally: the inputs, then the outputs

    assert "kernel add2(Q: In[Tile[4, 8, f32]], K: In[Tile[4, 8, f32]], O: Out[Tile[4, 8, " \
           "f32]])" in to_wsp(w())
    assert str(add2.kernel.signature) == ("add2(Q: In[Tile[4, 8, f32]], K: In[Tile[4, 8, f32]], "
                                          "O: Out[Tile[4, 8, f32]])")
    p = w().compile(target="cpu_sim")
    p.execute()
    p.synchronize()
    np.testing.assert_allclose(res.data, q + 2 * k, rtol=1e-6)

    @workload
    def other():
        add2[0](Q=Q[0, 0:2], K=K[0, 0:2], O=res[0, 0:2])  # E:other

    with pytest.raises(KernelError) as info:
        other()
    assert "`add2` is called with tiles (Q: [2, 8] f32, K: [2, 8] f32, O: [2, 8] f32) other " \
           "than at its first call (Q: [4, 8] f32, K: [4, 8] f32, O: [4, 8] f32, line " in \
           str(info.value)
    with pytest.raises(KernelError) as info:
        ExternalKernel(name="gone", impl_path=str(tmp_path / "no.cpp"), inputs=["Q"],
                       outputs=["O"])
    assert "`ExternalKernel` `gone`: cannot read its `impl_path`" in str(info.value)
    with pytest.raises(KernelError) as info:
        ExternalKernel(name="dup", impl_path=str(body), inputs=["Q"], outputs=["Q"])
    assert "`ExternalKernel` takes its parameters as distinct names in `inputs` and " \
           "`outputs`" in str(info.value)

    @workload
    def whole():
        add2(Q=Q, K=K, O=res)

    with pytest.raises(KernelError) as info:
        whole()
    assert "`add2`: argument `Q` has the shape [3, 4, 8], which gives no tile" in str(info.value)


def test_layout_incompatible_error_is_the_joins_error_under_both_names():
    from pto_wsp.type_checker import LayoutCompatibilityError, layout_join
    from pto_wsp.types import LayoutIncompatibleError, TensorLayout

    assert LayoutCompatibilityError is LayoutIncompatibleError
    assert issubclass(LayoutIncompatibleError, ptowsp.TypeCheckError)
    with pytest.raises(LayoutCompatibilityError):  # a prototype's `except` clause catches it
        layout_join(TensorLayout.sharded(0, 2, mesh_axis=0), TensorLayout.sharded(0, 2, 1))


def test_builder_reads_annotations():
    from pto_wsp.builder import Constexpr, In, InOut, Out, get_direction, get_inner_type

    tile = Tile[16, 128, F32]
    assert [get_direction(h) for h in (In[tile], Out[tile], InOut[tile])] == ["in", "out", "inout"]
    assert get_direction(Constexpr[int]) == get_direction(Constexpr) == "constexpr"
    assert get_direction("Out[Tile[4, 4, F32]]") == "out" and get_direction(int) == "unknown"
    assert get_inner_type(In[tile]) is tile and get_inner_type(int) is None
    assert get_inner_type(Constexpr[int]) is int


def test_scalar_expr_module():
    from pto_wsp.scalar_expr import Expr, as_expr, fnv1a_64

    # the FNV-1a reference values: the offset basis, and "a"
    assert fnv1a_64("") == 0xCBF29CE484222325 and fnv1a_64("a") == 0xAF63DC4C8601EC8C
    assert isinstance(as_expr(3), Expr) and str(as_expr(3) + 1) == "3 + 1"
    with pytest.raises(ptowsp.CompileError) as info:
        as_expr("three")
    (d,) = info.value.diagnostics
    assert d.span.file == HERE
    assert d.message == "a str cannot be used in a run-time expression"


@kernel
def copy_row(x: In[Tile[1, 4, F32]], y: Out[Tile[1, 4, F32]]):
    pto.store(y, x)


@pytest.mark.parametrize("target", ["cpu_sim", "ref"])
def test_scalar_expr_operators_as_the_prototype_writes_them(target):
    """The prototype's `Expr` operators on wspc's expressions: `pred.where(a, b)`, the casts
    between conditions and integers, masks `x & (2**k - 1)` and shifts by a Python integer,
    `&` / `|` / `~` of conditions; each row index below is checked against the same formula
    computed in Python."""
    from pto_wsp import P, workload
    from pto_wsp.primitives import slot_set_u64
    from pto_wsp.scalar_expr import axis, slot_bool, slot_i64, slot_u64

    x = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
    outs = [np.full((8, 4), -1.0, np.float32) for _ in range(5)]
    X, Y0, Y1, Y2, Y3, Y4 = Tensor(data=x), *(Tensor(data=o) for o in outs)

    @workload
    def w():
        slot_set_u64(0, 5)
        slot_set_u64(1, 1)
        for b in P(8):
            copy_row[b](x=X[(b < 4).where(b + 4, b - 4) + slot_i64(2)], y=Y0[b])  # halves swapped
            copy_row[b](x=X[b >> 1], y=Y1[b])
            copy_row[b](x=X[(b << 1) % 8], y=Y2[b])
            copy_row[b](x=X[b + ((b == 3) | (b >= slot_u64(0))).cast_i64() - (b >= 5).cast_u64()],
                        y=Y3[b])
            with P.when(((b & 1) == 1) & ~(axis("b") > 6) & (b * 0 + 1).cast_bool() & slot_bool(1)):
                copy_row[b](x=X[b], y=Y4[b])

    assert "(b < 4).where" not in (text := assert_roundtrip(w()))
    assert "when b % 2 == 1 and not b > 6 and b * 0 + 1 != 0 and slot(1) != 0 {" in text
    p = w().compile(target=target)
    p.execute()
    p.synchronize()
    rows = {0: [b + 4 if b < 4 else b - 4 for b in range(8)],
            1: [b >> 1 for b in range(8)],
            2: [(b << 1) % 8 for b in range(8)],
            3: [b + int(b == 3 or b >= 5) - int(b >= 5) for b in range(8)]}
    for i, want in rows.items():
        np.testing.assert_array_equal(outs[i], x[want], err_msg=f"Y{i}")
    picked = [b for b in range(8) if b & 1 and not b > 6]
    np.testing.assert_array_equal(outs[4][picked], x[picked])
    assert (outs[4][[b for b in range(8) if b not in picked]] == -1).all()


def test_scalar_expr_bit_operations_wspc_has_not_are_errors_at_the_line():
    from pto_wsp import P, workload
    from pto_wsp.scalar_expr import slot_u64, symbol_u64

    X = Tensor(data=np.zeros((8, 4), np.float32))

    def rows_by(op):
        @workload
        def w():
            for b in P(8):
                copy_row[b](x=X[op(b)], y=X[b])

        return w

    for op in (lambda b: b ^ 1, lambda b: b & 6, lambda b: b | 1, lambda b: b << b,
               lambda b: symbol_u64("bits") & 5):
        with pytest.raises(ptowsp.CompileError) as info:
            rows_by(op)()
        (d,) = info.value.diagnostics
        assert d.span.file == HERE
        assert "is a bit operation, which wspc's expressions do not have" in d.message
    with pytest.raises(ptowsp.CompileError, match="is not a condition, so it has no `where`"):
        slot_u64(1).where(1, 2)
    assert slot_u64(2).to_debug_str() == "slot(2)" and symbol_u64("bits").to_debug_str() == "bits"


def test_the_prototypes_program_and_workload_methods():
    """`program.set_axis_sizes` sizes a `DenseDyn` axis whose extent is a symbol (checked
    against NumPy), `Workload.type_errors` / `has_type_errors()` are the checker's findings,
    and the prototype's simulator and IR hooks (`register_kernel`, `set_symbol_f32`,
    `with_params`) are errors at the user's line saying what to write."""
    from pto_wsp import Dense, DenseDyn, ExecutionError, P, symbol_u64, workload

    x = np.arange(6 * 4, dtype=np.float32).reshape(6, 4)
    y = np.zeros_like(x)
    X, Y = Tensor(data=x), Tensor(data=y)
    batch = DenseDyn(symbol_u64("nb", 6))
    fixed = DenseDyn(6)

    def over(ax):
        @workload
        def w():
            for b in P(ax):
                copy_row[b](x=X[b], y=Y[b])

        return w

    p = over(batch)().compile()
    p.set_axis_sizes({"batch": 2})
    p.execute()
    p.synchronize()
    np.testing.assert_array_equal(y, np.where(np.arange(6)[:, None] < 2, x, 0))
    p = over(fixed)().compile()
    p.set_axis_sizes({"fixed": 6})  # its compiled extent: nothing to change
    for sizes, msg in [({"fixed": 3}, "`fixed` is `DenseDyn(6)`, whose extent is fixed when the "
                                      "workload compiles, so it cannot be 3"),
                       ({"rows": 1}, "the program has no axis `rows` (its axes: `fixed`)"),
                       ({"fixed": -1}, "the size of `fixed` must be a non-negative integer")]:
        with pytest.raises(ExecutionError) as info:
            p.set_axis_sizes(sizes)
        (d,) = info.value.diagnostics
        assert d.span.file == HERE and msg in d.message
    with pytest.raises(ExecutionError, match="`set_symbol_f32` is not supported"):
        p.set_symbol_f32("eps", 1e-6)
    with pytest.raises(ptowsp.CompileError, match="`register_kernel` is not supported by wspc"):
        p.register_kernel("copy_row", lambda x, y: None)

    assert over(batch)().type_errors == [] and not over(batch)().has_type_errors()

    @workload
    def wide():
        for b in P(Dense[5]):
            copy_row[b](x=X[b], y=Y[b:b + 2])

    (d,) = wide().type_errors
    assert wide().has_type_errors() and d.span.file == HERE
    assert d.message == "`y = Y[b : b + 2]` is a [2, 4] view but `y` takes Tile[1, 4, f32]"
    with pytest.raises(ptowsp.CompileError, match="`with_params` is not supported"):
        wide().with_params(("b", Dense[5]))


def test_loop_variables_named_by_the_prototypes_names_keywords():
    """`P.grid(..., names=[...])`, `P(..., names=...)`, `P.seq(ax, name=...)` and
    `P.sel(s, name=...)` name the loop variables (the names keys and tasks use), whatever the
    `for` target is called; a count that does not match the axes is an error at the line."""
    from pto_wsp import P, workload
    from pto_wsp.types import Dense, Sparse

    x = np.arange(6 * 4, dtype=np.float32).reshape(6, 4)
    y, z = np.zeros_like(x), np.zeros_like(x)
    X, Y, Z = Tensor(data=x), Tensor(data=y), Tensor(data=z)
    one = Dense[1]
    routing = Sparse(one, [0, 2], [5, 2])

    @workload
    def w():
        for i, j in P.grid(Dense[2], Dense[3], names=["b", "h"]):
            copy_row[i, j](x=X[i * 3 + j], y=Y[i * 3 + j])
        for r in P.seq(one, name="step"):
            for e in P.sel(routing[r], name="expert"):
                copy_row[r, e](x=X[e], y=Z[e])

    text = assert_roundtrip(w())
    assert "for b, h in P.grid(" in text and "for step in P.seq(" in text
    assert "for expert in P.sel(routing[step])" in text
    tasks = w().enumerate()
    assert [(t.get("b"), t.get("h")) for t in tasks[:6]] == \
        [(b, h) for b in range(2) for h in range(3)]
    assert [t.get("expert") for t in tasks[6:]] == [5, 2]
    program = w().compile()
    program.execute()
    program.synchronize()
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, np.where(np.isin(np.arange(6), [2, 5])[:, None], x, 0))
    with pytest.raises(ptowsp.CompileError) as info:
        P.grid(Dense[2], names=["a", "b"])
    (d,) = info.value.diagnostics
    assert d.span.file == HERE
    assert d.message == "`P.grid` names its 1 loop variable with as many strings, not ['a', 'b']"


def test_the_prototypes_decorator_options():
    """`@kernel(num_warps=, num_stages=, ...)` keeps its options in `k.options` and runs as
    the same kernel; `k.func` is the function; `@workload_decorator(type_check=...,
    fail_on_type_error=...)` works; `cpp_tu_path=` and an unknown workload option are errors
    at the line."""
    from pto_wsp import P
    from pto_wsp.builder import workload_decorator
    from pto_wsp.types import Dense

    @kernel(num_warps=8, num_stages=3, block=64)
    def tuned(x: In[Tile[1, 4, F32]], y: Out[Tile[1, 4, F32]]):
        pto.store(y, x * 2.0)

    assert tuned.options == {"num_warps": 8, "num_stages": 3, "block": 64}
    assert tuned.func.__name__ == "tuned" and tuned.name == "tuned"
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    X, Y = Tensor(data=x), Tensor(data=np.zeros_like(x))

    @workload_decorator(type_check=True, fail_on_type_error=True)
    def w():
        for i in P(Dense[2]):
            tuned[i](x=X[i], y=Y[i])

    _run(w(), "cpu_sim")
    np.testing.assert_array_equal(Y.data, 2 * x)
    with pytest.raises(ptowsp.KernelError, match="`cpp_tu_path` is not supported"):
        kernel(cpp_tu_path="body.cpp")
    with pytest.raises(ptowsp.CompileError, match="`@workload` has no option `strict`"):
        workload_decorator(strict=True)


def test_the_prototypes_errors_are_made_from_a_message():
    """A program's own `raise CompileError("...", workload_name=...)` works as in the
    prototype: one diagnostic at that line, the class's fields set (None unless given), the
    classes still wspc's (`WspError`s, caught by their bases)."""
    from pto_wsp.errors import (
        ChannelClosed,
        ChannelFull,
        CompileError,
        ExecutionError,
        KernelError,
        ScheduleError,
        TypeCheckError,
    )

    with pytest.raises(CompileError) as info:
        raise KernelError("tile too wide", workload_name="attn", target="cpu_sim")
    e = info.value
    (d,) = e.diagnostics
    assert d.span.file == HERE and d.message == "tile too wide"
    assert (e.workload_name, e.target) == ("attn", "cpu_sim") and isinstance(e, ptowsp.WspError)
    assert "error: tile too wide" in str(e)
    e = TypeCheckError("bad dtype", "f32", "f16")
    assert (e.expected, e.actual, e.workload_name) == ("f32", "f16", None)
    e = ExecutionError("kernel failed", task_id=3, kernel_name="rms")
    assert (e.task_id, e.kernel_name) == (3, "rms")
    assert ScheduleError("no", primitive="dispatch").primitive == "dispatch"
    full = ChannelFull(channel_name="q", capacity=2)
    assert full.diagnostics[0].message == "Channel is full" and full.capacity == 2
    assert ChannelClosed().diagnostics[0].message == "Operation on closed channel"
    with pytest.raises(TypeError, match="takes a message and channel_name"):
        ChannelClosed("closed", "q", 3)


# ---------------------------------------------------------------------------------------------
# select is P.sel


def _moe_pieces():
    from pto_wsp.types import DenseDyn, Sparse

    x = np.arange(3 * 1 * 4, dtype=np.float32).reshape(3, 1, 4)
    y = np.zeros((3, 4, 1, 4), np.float32)
    batch = DenseDyn(3)
    routing = Sparse(batch, [0, 2, 2, 3], [1, 3, 0])

    @kernel
    def scale(x: In[Tile[1, 4, F32]], y: Out[Tile[1, 4, F32]]):
        pto.store(y, x * 2.0)

    return x, y, batch, routing, scale


def test_select_is_p_sel():
    from pto_wsp.primitives import parallel_for, select, task

    x, y, batch, routing, scale = _moe_pieces()
    X, Y = Tensor(data=x), Tensor(data=y)
    w = parallel_for(batch, lambda b: select(routing[b], lambda e:
                                             task(scale, [b, e], {"x": X[b], "y": Y[b, e]})))
    assert isinstance(w, ptowsp.Workload)  # outside a workload, the loop is one
    text = assert_roundtrip(w)
    assert "for e in P.sel(routing[b]) {" in text
    for target in ("cpu_sim", "ref"):
        y[:] = 0
        p = w.compile(target=target)
        p.execute()
        p.synchronize()
        expect = np.zeros_like(y)
        for b, e in [(0, 1), (0, 3), (2, 0)]:
            expect[b, e] = 2 * x[b]
        np.testing.assert_array_equal(y, expect)


def test_task_by_kernel_name_with_a_list_of_resources():
    """The prototype's legacy `task("name", [t], [res, ...])`: the kernel by its name, the
    resources in parameter order."""
    from pto_wsp.primitives import parallel_for, task
    from pto_wsp.types import Dense

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    X, Y = Tensor(data=x), Tensor(data=np.zeros_like(x))
    w = parallel_for(Dense[2], lambda i: task("copy_row", [i], [X[i], Y[i]]))
    assert "copy_row[i](x = " in assert_roundtrip(w)
    for target in ("cpu_sim", "ref"):
        Y.data[:] = 0
        _run(w, target)
        np.testing.assert_array_equal(Y.data, x)


def test_select_of_a_dense_axis_is_an_error():
    from pto_wsp.primitives import parallel_for, select

    x, y, batch, routing, scale = _moe_pieces()
    with pytest.raises(ptowsp.CompileError) as info:
        parallel_for(batch, lambda b: select(batch, lambda e: None))
    (d,) = info.value.diagnostics
    assert d.span.file == HERE
    assert d.message == "`select` iterates a sparse axis at an outer index"
    assert d.help == "write `select(routing[b], lambda e: ...)` with `routing = Sparse(...)`"


# ---------------------------------------------------------------------------------------------
# Kernel spellings


def _ranked(x: np.ndarray, k: int) -> np.ndarray:
    """Each row's columns by value, largest first, NaN before everything, ties (and NaNs) in
    column order: wspc's `sort(x, descending = true)` (docs/language.md)."""
    out = []
    for row in x:
        cols = sorted(range(len(row)), key=lambda j: (not np.isnan(row[j]),
                                                     0.0 if np.isnan(row[j]) else -row[j], j))
        out.append(cols[:k])
    return np.array(out, dtype=np.int64)


def _run(w, target: str) -> None:
    p = w.compile(target=target)
    p.execute()
    p.synchronize()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tsort32_topk_matches_numpy_on_both_targets(seed):
    from pto_wsp import P
    from pto_wsp.builder import workload_decorator as workload
    from pto_wsp.types import Dense

    rng = np.random.default_rng(seed)
    s = rng.integers(-4, 5, size=(4, 1, 32)).astype(np.float32)  # many ties
    s[1, 0, 7] = np.nan
    s[2, 0, 3] = -np.inf
    ids = np.zeros((4, 1, 5), np.int32)
    pairs = np.zeros((4, 1, 64), np.float32)
    S, IDS, PAIRS = Tensor(data=s), Tensor(data=ids), Tensor(data=pairs)
    perm = rng.permutation(32).astype(np.uint32)  # the index each column carries
    PERM = Tensor(data=perm.reshape(1, 32).astype(np.int32))

    @kernel
    def top5(scores: In[Tile[1, 32, F32]], carried: In[Tile[1, 32, I32]],
             out_idx: Out[Tile[1, 5, I32]], out_pairs: Out[Tile[1, 64, F32]]):
        idx = pto.iota_u32(32)
        p = pto.tsort32(scores, idx)
        pto.store(out_idx, pto.extract_topk_indices(p, 5))
        pto.store(out_pairs, pto.tsort32(scores, pto.cast(carried, DType.U32)))

    rows = Dense[4]()

    @workload
    def w():
        for r in P(rows):
            top5[r](scores=S[r], carried=PERM, out_idx=IDS[r], out_pairs=PAIRS[r])

    order = _ranked(s[:, 0, :], 32)
    expect_pairs = np.empty((4, 64), np.float32)
    expect_pairs[:, 0::2] = np.take_along_axis(s[:, 0, :], order, axis=1)
    expect_pairs[:, 1::2] = perm[order].astype(np.float32)
    for target in ("cpu_sim", "ref"):
        ids[:] = -1
        pairs[:] = 0
        _run(w(), target)
        np.testing.assert_array_equal(ids[:, 0, :], order[:, :5])
        np.testing.assert_array_equal(pairs[:, 0, :], expect_pairs)
    text = assert_roundtrip(w())
    assert "let idx = cast(col_index(1, 32), u32)" in text
    assert "let t0, t1 = sort(scores, descending = true)" in text
    assert "let p = interleave(t0, cast(gather(idx, t1, axis = 1), f32))" in text
    assert "store(out_idx, cast(slice_odd(p)[:, 0:5], i32))" in text


def test_topk_sort_max_min_constant_match_numpy_on_both_targets():
    from pto_wsp import P
    from pto_wsp.builder import workload_decorator as workload
    from pto_wsp.types import Dense

    x = np.random.default_rng(7).standard_normal((2, 4, 8)).astype(np.float32)
    vals, ids, asc = (np.zeros((2, 4, 3), np.float32), np.zeros((2, 4, 3), np.int32),
                      np.zeros((2, 4, 8), np.int32))
    X, V, ID, ASC = (Tensor(data=a) for a in (x, vals, ids, asc))

    @kernel
    def k(x: In[Tile[4, 8, F32]], v: Out[Tile[4, 3, F32]], i: Out[Tile[4, 3, I32]],
          a: Out[Tile[4, 8, I32]]):
        best, cols = pto.topk(x, 3)
        _, up = pto.sort(x)
        pto.store(v, pto.min(pto.max(best, pto.constant(-0.5, DType.F32)), 0.5))
        pto.store(i, cols)
        pto.store(a, up)

    two = Dense[2]()

    @workload
    def w():
        for b in P(two):
            k[b](x=X[b], v=V[b], i=ID[b], a=ASC[b])

    order = np.argsort(-x, axis=-1, kind="stable")[..., :3]
    for target in ("cpu_sim", "ref"):
        vals[:] = ids[:] = asc[:] = 0
        _run(w(), target)
        np.testing.assert_array_equal(ids, order)
        np.testing.assert_array_equal(vals, np.clip(np.take_along_axis(x, order, -1), -0.5, 0.5))
        np.testing.assert_array_equal(asc, np.argsort(x, axis=-1, kind="stable"))
    text = assert_roundtrip(w())
    assert "let best, cols = topk(x, 3)" in text and "let _, up = sort(x)" in text
    assert "store(v, min(max(best, constant(-0.5, f32)), 0.5))" in text


_PX = np.random.default_rng(19).uniform(0.5, 2.0, (4, 8)).astype(np.float32)
_PROTOTYPE_PTO = {  # the prototype's `_TileLanguage` methods, as its kernels call them
    "tanh": (lambda a: pto.tanh(a), np.tanh(_PX)),
    "sigmoid": (lambda a: pto.sigmoid(a), 1 / (1 + np.exp(-_PX))),
    "silu": (lambda a: pto.silu(a), _PX / (1 + np.exp(-_PX))),
    "sin": (lambda a: pto.sin(a), np.sin(_PX)),
    "cos": (lambda a: pto.cos(a), np.cos(_PX)),
    "colmax": (lambda a: pto.broadcast(pto.colmax(a), (4, 8)), _PX.max(0, keepdims=True) + 0 * _PX),
    "colsum": (lambda a: pto.broadcast(pto.colsum(a), (4, 8)), _PX.sum(0, keepdims=True) + 0 * _PX),
    "rowmul": (lambda a: pto.rowmul(a, pto.rowmax(a)), _PX * _PX.max(1, keepdims=True)),
    "rowadd": (lambda a: pto.rowadd(a, pto.rowsum(a)), _PX + _PX.sum(1, keepdims=True)),
    "colmul": (lambda a: pto.colmul(a, pto.colmax(a)), _PX * _PX.max(0, keepdims=True)),
    "coladd": (lambda a: pto.coladd(a, pto.colsum(a)), _PX + _PX.sum(0, keepdims=True)),
    "alloc": (lambda a: pto.add(a, pto.alloc((4, 8), DType.F32)), _PX),
    "load offset": (lambda a: pto.load(a, offset=(0, 0), mask=None), _PX),
    "constant f32": (lambda a: pto.mul(a, pto.constant(2.5)), 2.5 * _PX),
    "abs neg": (lambda a: pto.abs(pto.neg(a)), _PX),
    "interleave": (lambda a: pto.interleave(pto.slice_even(a), pto.slice_odd(a)), _PX),
}


@pytest.mark.parametrize("op", sorted(_PROTOTYPE_PTO))
def test_the_prototypes_tile_language_matches_numpy(op):
    """Each `pto.NAME` of the prototype's tile language with its signature (`constant`'s f32
    default, `load` / `store` with `offset=(0, 0)`, `mask=None`), on both targets."""
    from pto_wsp import workload

    fn, want = _PROTOTYPE_PTO[op]

    @kernel(name="proto_" + op.replace(" ", "_"))
    def k(a: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
        pto.store(y, fn(a), offset=(0, 0), mask=None)

    X, Y = Tensor(data=_PX), Tensor(data=np.zeros_like(_PX))

    @workload
    def w():
        k(a=X, y=Y)

    for target in ("cpu_sim", "ref"):
        Y.data[:] = 0
        _run(w(), target)
        np.testing.assert_allclose(Y.data, want, rtol=2e-5, atol=1e-6, err_msg=target)


def test_a_load_or_store_of_part_of_a_tile_is_an_error():
    from pto_wsp import workload

    X, Y = Tensor(data=_PX), Tensor(data=np.zeros_like(_PX))

    def using(load):
        @kernel(name="part")
        def k(a: In[Tile[4, 8, F32]], y: Out[Tile[4, 8, F32]]):
            pto.store(y, load(a))

        @workload
        def w():
            k(a=X, y=Y)

        return w

    for load in (lambda a: pto.load(a, offset=(1, 0)), lambda a: pto.load(a, mask=a)):
        with pytest.raises(ptowsp.KernelError) as info:
            using(load)()
        (d,) = info.value.diagnostics
        assert d.span.file == HERE
        assert d.message.startswith("`pto.load` of a parameter takes its whole tile: `offset` "
                                    "(0, 0) and no `mask`, not `")


def test_kernel_spelling_errors():
    @kernel
    def zero(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 8, F32]]):
        pto.store(y, x + pto.cast(pto.iota_u32(0), F32))

    with pytest.raises(ptowsp.KernelError) as info:
        zero.trace()
    (d,) = info.value.diagnostics
    assert d.span.file == HERE
    assert d.message == "`pto.iota_u32` takes a positive Python integer as `cols`, not 0"
    assert d.help == "the extent is part of the tile's shape, known when the kernel is traced"

    @kernel
    def too_many(x: In[Tile[1, 8, F32]], y: Out[Tile[1, 9, I32]]):
        pto.store(y, pto.extract_topk_indices(pto.tsort32(x, pto.iota_u32(8)), 9))

    with pytest.raises(ptowsp.CompileError) as info:
        too_many.trace()  # the slice past the pairs: the checker's own error, at this line
    assert all(d.span.file == HERE for d in info.value.diagnostics)

    for helper, args in [("iota_u32", (4,)), ("tsort32", (1, 2)), ("extract_topk_indices", (1, 2))]:
        with pytest.raises(ptowsp.CompileError) as info:
            getattr(pto, helper)(*args)
        (d,) = info.value.diagnostics
        assert d.message == f"`pto.{helper}` only works inside a `@kernel` body"
        assert d.span.file == HERE


# ---------------------------------------------------------------------------------------------
# The prototype-style examples


def _rerun(g: dict, outputs: list) -> None:
    """Run the example's workload again on ref, its outputs cleared first."""
    for name in outputs:
        g[name][...] = 0
    _run(g["program"].workload, "ref")


def test_example_topk_indexer_on_both_targets():
    g = runpy.run_path(str(EXAMPLES / "proto_topk_indexer.py"))
    for _ in ("cpu_sim", "ref"):
        np.testing.assert_array_equal(g["out_idx_np"], g["reference"]())
        assert g["program"].stats.task_count == g["BATCH"] * g["TILES"]
        _rerun(g, ["out_idx_np"])
    text = assert_roundtrip(g["program"].workload)
    assert re.search(r"let pairs = interleave\(t\d, cast\(gather\(idx, t\d, axis = 1\), f32\)\)",
                     text), text


def test_example_isa_topk_on_both_targets():
    g = runpy.run_path(str(EXAMPLES / "proto_isa_topk.py"))
    for _ in ("cpu_sim", "ref"):
        np.testing.assert_array_equal(g["out_idx_np"], g["reference"]())
        assert g["program"].stats.task_count == 2 * g["BATCH"] * g["TILES"]
        _rerun(g, ["out_idx_np", "scaled_np"])
    text = assert_roundtrip(g["program"].workload)
    assert "store(out_tile, maximum(mul(scores_tile, temperature), floor_tile))" in text, text


def test_example_isa_cycles_adds_exactly_its_counts_and_the_cost_function_s():
    g = runpy.run_path(str(EXAMPLES / "proto_isa_cycles.py"))
    assert g["own_ok"] and g["costed_ok"]
    own, costed = g["modelled"](g["own"]), g["modelled"](g["program"])
    assert own == [own[0] + 100 * r for r in range(g["ROWS"])]
    assert costed == [(200 if r < 4 else 1000) + 100 * r for r in range(g["ROWS"])]
    text = assert_roundtrip(g["program"].workload)
    assert "add_cycles(extra)" in text and "trace = cycles(" in text, text


def test_every_prototype_style_example_is_tested_here():
    texts = [Path(HERE).read_text(), (Path(HERE).parent / "test_proto_examples.py").read_text()]
    tested = {n + ".py" for t in texts for n in re.findall(r'"(proto_\w+?)(?:\.py)?"', t)}
    assert tested == {p.name for p in EXAMPLES.glob("proto_*.py")}


def test_example_moe_select_on_both_targets():
    g = runpy.run_path(str(EXAMPLES / "proto_moe_select.py"))
    for _ in ("cpu_sim", "ref"):
        ref = g["reference"]()
        np.testing.assert_array_equal(g["top_ids_np"], ref["top_ids"])
        np.testing.assert_allclose(g["gates_np"], ref["gates"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(g["out_np"], ref["out"], rtol=1e-5, atol=1e-5)
        _rerun(g, ["top_ids_np", "gates_np", "out_np"])
    text = assert_roundtrip(g["program"].workload)
    assert "for e in P.sel(routing[b]) {" in text and "let best, experts = topk(" in text
