"""Test harness for AICore kernels on the host: emitted headers + this directory's Ascend C CPU
implementation + a generated driver, compiled by g++ into one shared library per batch and
called through ctypes with `WspTile`s that point at NumPy buffers (addr = the host address).

`build(units, workdir)` compiles; `Lib.run(unit, kernel, tiles, scalars)` runs one task and
raises `KernelFailed` with the shim's message when the kernel breaks an API rule.
`random_task(kernel, rng)` makes inputs, `ref_outputs(kernel, inputs)` evaluates the same kernel
with the `ref` back end, `compare(...)` checks one against the other to dtype tolerance.
"""

from __future__ import annotations

import ctypes
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ptowsp.backends.ascend import aicore
from ptowsp.backends.ascend.abi import scalar_word
from ptowsp.backends.ref import values as R
from ptowsp.backends.ref.kernels import eval_kernel
from ptowsp.ir import nodes as N
from tests.kernel_builder import KB  # noqa: F401 (tests import it from here)

HERE = Path(__file__).resolve().parent
# -ffp-contract=off: the device rounds every vector instruction; a fused multiply-add made up
# by the host compiler would not be the API's arithmetic
CXXFLAGS = ["-std=c++17", "-O1", "-fPIC", "-shared", "-ffp-contract=off", "-w",
            f"-DWSP_UB_BYTES={aicore.UB_BYTES}"]
NP = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32, "f64": np.float64,
      "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
      "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.uint8}


class WspTile(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_uint64), ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
                ("stride", ctypes.c_int64), ("index", ctypes.c_uint64),
                ("index_stride", ctypes.c_int64), ("index_kind", ctypes.c_int64),
                ("col_stride", ctypes.c_int64)]


class WspScalar(ctypes.Structure):
    _fields_ = [("i", ctypes.c_int64)]


class KernelFailed(Exception):
    """The kernel broke a rule of the Ascend C API (the shim's message)."""


@dataclass
class Unit:
    """The kernels of one module, emitted together (their own C++ namespace in the driver)."""

    name: str
    files: dict  # relative path -> text (emit_aicore's result)
    kernels: list  # N.Kernel


def misuse_program(tmp: Path, source: str):
    """`source` (a C++ program over this stand-in, one misuse per command-line case) compiled in
    `tmp`: a function running it on one case, returning the completed process."""
    src, exe = tmp / "misuse.cpp", tmp / "misuse"
    src.write_text(source)
    subprocess.run(["g++", "-std=c++17", "-w", "-I", str(HERE), "-o", str(exe), str(src)],
                   check=True)
    return lambda case: subprocess.run([str(exe), case], capture_output=True, text=True)


def _sym(unit: str, k: N.Kernel) -> str:
    return f"run_{unit}_{aicore.kernel_entry(k)}"


def build_levels(text: str, name: str, tmp: Path, levels=(0, 2)):
    """The AICore kernels of the module `text` at each optimisation level, built into one
    library (units `NAME_O0`, `NAME_O2`, ...): (library, units)."""
    import dataclasses

    import ptowsp
    from ptowsp.ir.passes import optimize

    m0 = ptowsp.parse(text, f"{name}.wsp").ir
    units = []
    for level in levels:
        m, _ = optimize(m0, level)
        m = dataclasses.replace(m, name=f"{name}_O{level}")
        units.append(Unit(m.name, aicore.emit_aicore(m), list(m.kernels)))
    return build(units, tmp), units


def build(units: list[Unit], workdir: Path) -> "Lib":
    """Write every unit's headers and one driver, compile them into a shared library."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    lines = ["#include <cstdio>", "#include <exception>", '#include "mix_launch.h"']
    for u in units:
        for rel, text in u.files.items():
            path = workdir / u.name / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if units:
        lines.append(f'#include "{units[0].name}/aicore/wsp_aicore.h"')
    cube = next((u for u in units if "aicore/wsp_cube.h" in u.files), None)
    if cube:  # the cube kernels' shared header, outside the units' namespaces as wsp_aicore.h
        lines.append(f'#include "{cube.name}/aicore/wsp_cube.h"')
    for u in units:
        lines.append(f"namespace {u.name} {{")
        for k in u.kernels:
            lines.append(f'#include "{u.name}/{aicore.header_path(k)}"')
        lines.append("}")
        for k in u.kernels:
            lines += [
                f'extern "C" int {_sym(u.name, k)}(const WspTile *t, const WspScalar *s, char *err, int n)',
                "{",
                f"    try {{ {_call(u.name, k, u.files)} return 0; }}",
                '    catch (const std::exception &e) { std::snprintf(err, n, "%s", e.what()); return 1; }',
                "}",
            ]
    (workdir / "driver.cpp").write_text("\n".join(lines) + "\n")
    lib = workdir / "kernels.so"
    cmd = ["g++", *CXXFLAGS, "-I", str(HERE), "-I", str(workdir), "-o", str(lib),
           str(workdir / "driver.cpp")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError("g++ failed:\n" + proc.stderr[-8000:])
    return Lib(ctypes.CDLL(str(lib)), units)


def _call(unit: str, k: N.Kernel, files: dict) -> str:
    """The C++ that runs one task of k: its entry, or for a kernel split over the cube and
    the vector cores (aicore/mixed.py) a MIX launch of one block (the AIC and two AIVs as
    threads, mix_launch.h) over a workspace of its own: its task functions (the stages and
    their flags) and the MIX dispatcher's wait after a run."""
    from ptowsp.backends.ascend.aicore.mixed import workspace_offsets

    entry = f"{unit}::{aicore.kernel_entry(k)}"
    # split when its header has the task functions (a unit emitted with the kernel in
    # `vector_only` has the vector path's header)
    split = f"{aicore.kernel_entry(k)}_aic(" in files[aicore.header_path(k)]
    sp = aicore.mixed_split(k) if split else None
    if sp is None:
        return f"{entry}(t, s);"
    size = workspace_offsets(sp)[1]
    kind = "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);"
    return (f"alignas(512) static uint8_t ws[{size}]; AscendC::wsp_cpu_untrack_gm(); "
            f"AscendC::wsp_cpu_track_gm(ws, {size}); "
            f"AscendC::wsp_cpu_mix_launch(0, 2, [&] {{ {kind} {entry}_aic(t, s, ws, false); "
            "AscendC::CrossCoreWaitFlag<2, PIPE_FIX>(1); }, "
            f"[&] {{ {kind} {entry}_aiv(t, s, ws, false); }}); AscendC::wsp_cpu_untrack_gm();")


class Lib:
    def __init__(self, dll, units):
        self.dll = dll
        self.units = {u.name: u for u in units}

    def run(self, unit: str, k: N.Kernel, tiles: list[np.ndarray], scalars: list[WspScalar],
            views: list) -> None:
        """Run kernel k once: `tiles[t]` is the GM buffer of tile parameter t and `views[t]`
        its (offset in elements, stride in elements[, column stride in elements: a strided
        view's, 1 when left out])."""
        fn = getattr(self.dll, _sym(unit, k))
        fn.restype = ctypes.c_int
        arr = (WspTile * max(len(tiles), 1))()
        params = [p for p in k.params if p.kind == "tile"]
        for t, (buf, p, view) in enumerate(zip(tiles, params, views)):
            off, stride, cs = (*view, 1) if len(view) == 2 else view
            arr[t] = WspTile(buf.ctypes.data + off * buf.itemsize, p.rows, p.cols, stride,
                             col_stride=cs)
        sc = (WspScalar * max(len(scalars), 1))(*scalars)
        err = ctypes.create_string_buffer(4096)
        if fn(arr, sc, err, 4096) != 0:
            raise KernelFailed(err.value.decode())


# ---------------------------------------------------------------------------------------------
# inputs, ref, comparison


def random_values(dtype: str, shape, rng, lo=-4.0, hi=4.0) -> np.ndarray:
    """Storage-dtype values (f16 as float16, bf16 as raw uint16 bits, bool as 0/1 bytes)."""
    if dtype in ("f16", "f32", "f64"):
        return (rng.standard_normal(shape) * 1.5).astype(NP[dtype])
    if dtype == "bf16":
        return R.bf16_bits(rng.standard_normal(shape).astype(np.float32))
    if dtype == "bool":
        return (rng.random(shape) < 0.5).astype(np.uint8)
    info = np.iinfo(NP[dtype])
    return rng.integers(max(info.min, -50), min(info.max, 50) + 1, size=shape).astype(NP[dtype])


def scalar_arg(dtype: str, value) -> WspScalar:
    """The scalar as the expander passes it (abi.scalar_word: a float as the f32 bits of its
    value rounded to `dtype`)."""
    s = WspScalar()
    s.i = scalar_word(dtype, value)
    return s


@dataclass
class Task:
    tiles: list  # GM buffers (flat NumPy arrays), one per tile parameter
    views: list  # (offset, stride) per tile parameter
    scalars: dict  # name -> Python value
    inputs: dict  # name -> storage array [rows, cols] of In/InOut tiles


def random_task(k: N.Kernel, rng, strided: bool = False, scalar_values=None) -> Task:
    """Random In/InOut tiles (Out tiles filled with garbage) and scalars. With `strided`, each
    tile sits inside a wider buffer (a row stride above its columns, an odd offset)."""
    tiles, views, inputs, scalars = [], [], {}, {}
    for p in k.params:
        if p.kind == "scalar":
            if scalar_values and p.name in scalar_values:
                scalars[p.name] = scalar_values[p.name]
            elif p.dtype in ("f16", "bf16", "f32", "f64"):
                scalars[p.name] = float(rng.standard_normal())
            elif p.dtype == "bool":
                scalars[p.name] = bool(rng.random() < 0.5)
            else:
                scalars[p.name] = int(rng.integers(0, 40))
            continue
        stride = p.cols + (int(rng.integers(1, 5)) if strided else 0)
        off = int(rng.integers(0, 3)) if strided else 0
        buf = _aligned(off + stride * p.rows + 8, NP[p.dtype])
        buf[:] = random_values(p.dtype, buf.shape, rng)  # garbage around and in Out tiles
        view = buf[off:off + stride * p.rows].reshape(p.rows, stride)[:, :p.cols]
        if p.mode != "Out":
            inputs[p.name] = np.array(view)
        tiles.append(buf)
        views.append((off, stride))
    return Task(tiles, views, scalars, inputs)


def _aligned(n: int, dtype) -> np.ndarray:
    """A zeroed array whose data starts 64-byte aligned (GM allocations are), so contiguous
    tiles with whole 32-byte rows take DataCopy and the others DataCopyPad."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.zeros(n * itemsize + 64, dtype=np.uint8)
    skip = (-raw.ctypes.data) % 64
    return raw[skip:skip + n * itemsize].view(dtype)


def tile_view(task: Task, k: N.Kernel, name: str) -> np.ndarray:
    params = [p for p in k.params if p.kind == "tile"]
    t = next(i for i, p in enumerate(params) if p.name == name)
    p = params[t]
    off, stride = task.views[t]
    return task.tiles[t][off:off + stride * p.rows].reshape(p.rows, stride)[:, :p.cols]


def run_task(lib: Lib, unit: str, k: N.Kernel, task: Task) -> dict:
    """Run on the shim; the stored tiles (storage dtype) by name."""
    sc = [scalar_arg(p.dtype, task.scalars[p.name]) for p in k.params if p.kind == "scalar"]
    lib.run(unit, k, task.tiles, sc, task.views)
    return {name: np.array(tile_view(task, k, name)) for name, _ in k.stores}


def ref_outputs(k: N.Kernel, task: Task) -> dict:
    """The ref back end's stores (storage dtype) for the same inputs."""
    params = {p.name: p for p in k.params}
    inputs = {}
    for name, arr in task.inputs.items():
        p = params[name]
        stored = arr.astype(np.bool_) if p.dtype == "bool" else arr
        inputs[name] = R.to_compute(stored, p.dtype)
    for name, v in task.scalars.items():
        with np.errstate(all="ignore"):
            inputs[name] = R.scalar_value(v, params[name].dtype)
    for p in k.params:
        if p.kind == "tile":  # whole tiles: valid_rows / valid_cols are the tile's extents
            inputs[f"valid_rows:{p.name}"] = np.int32(p.rows)
            inputs[f"valid_cols:{p.name}"] = np.int32(p.cols)
    outs = eval_kernel(k, inputs)
    res = {}
    for name, v in outs.items():
        st = R.to_storage(v, params[name].dtype)
        res[name] = st.astype(np.uint8) if params[name].dtype == "bool" else st
    return res


EXACT_OPS = frozenset(("param", "scalar_param", "literal", "iota_row", "iota_col", "add", "sub",
                       "mul", "div", "maximum", "minimum", "neg", "abs", "sqrt", "rsqrt", "relu",
                       "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "not", "where", "convert",
                       "cast", "broadcast", "transpose", "slice_even", "slice_odd", "interleave",
                       "slice_rows", "slice_cols", "concat_rows", "concat_cols", "gather_rows", "gather_cols",
                       "colsum", "colmean", "colmax", "colmin", "rowmax", "rowmin",
                       "sort_values", "sort_indices", "argmax", "argmin"))


def exact(k: N.Kernel) -> bool:
    """Whether every op of k is exactly specified (IEEE arithmetic, conversions, selects), so
    the shim must match ref bit for bit (NaN payloads aside). Transcendental functions, row sums
    (ReduceSum's tree order vs NumPy's pairwise sums) and matmul (k-order f32 sums vs BLAS)
    are compared to a tolerance."""
    return all(op.op in EXACT_OPS for op in k.ops)


TOL = {"f32": (2e-5, 2e-6), "f64": (1e-12, 1e-13), "f16": (2e-3, 1e-3), "bf16": (1.6e-2, 1e-2)}
# matmul sums in k order (the vector fallback) where NumPy's BLAS blocks the sum, and exp of
# the product magnifies the difference: attention-like kernels agree to ~1e-4
TOL_MATMUL = {"f32": (5e-4, 5e-5), "f16": (4e-3, 2e-3), "bf16": (2e-2, 1e-2), "f64": (1e-9, 1e-10)}


def compare(k: N.Kernel, got: dict, want: dict, what: str = "", rtol=None) -> None:
    """Bit for bit when every op of k is exactly specified (`exact`), else to a tolerance
    relative to the largest finite value of the tile (`rtol` overrides the dtype's)."""
    params = {p.name: p for p in k.params}
    ex = exact(k)
    table = TOL_MATMUL if any(op.op == "matmul" for op in k.ops) else TOL
    for name, w in want.items():
        g = got[name]
        p = params[name]
        msg = f"{what} kernel {k.name}, tile {name} ({p.dtype})"
        if p.dtype == "bf16":
            g, w = R.bf16_from_bits(g), R.bf16_from_bits(w)
        if ex or p.dtype not in table:
            np.testing.assert_array_equal(g, w, err_msg=msg + " (exact)")
        else:
            rt, at = table[p.dtype]
            if rtol is not None:
                rt, at = max(rt, rtol), max(at, rtol / 10)
            wf = w.astype(np.float64)
            scale = float(np.max(np.abs(wf[np.isfinite(wf)]), initial=1.0))
            np.testing.assert_allclose(g.astype(np.float64), wf, rtol=rt, atol=at * scale,
                                       equal_nan=True, err_msg=msg)


def unit_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)
