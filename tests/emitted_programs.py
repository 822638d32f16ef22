"""Every example and test program as the ascend_npu target emits its AI Core kernels: the walk
that tests/backends/test_pipes.py and tests/ascend/test_ub_plan.py both hold the cycle model
to, so that they check the same programs the same way."""

from __future__ import annotations

import dataclasses
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def program_paths() -> list[Path]:
    """The examples' and the test programs' .wsp files, in a fixed order."""
    return sorted((ROOT / "examples").glob("*.wsp")) + sorted(
        (ROOT / "tests" / "programs").glob("*.wsp"))


def emitted_programs():
    """(path, ir, runs, files) for each program the target compiles: `ir` optimised (a mesh's
    axes at two devices each: the examples leave their sizes to the run), `runs` without the
    extern kernels that have only an `extern c` body (the target refuses those; the rest of the
    module is checked), `files` the emitted AI Core headers by path. A program that is an error
    on purpose, or not one for this target (an f64 kernel, a kernel too large), is skipped."""
    from ptowsp import driver
    from ptowsp.backends.ascend import cube_views
    from ptowsp.backends.ascend.aicore import emit_aicore
    from ptowsp.diagnostics import WspError

    for path in program_paths():
        try:
            ir = driver.lower(driver.check_file(path))
        except WspError:
            continue
        mesh = {a.name: 2 for a in ir.mesh.axes} if ir.mesh is not None else None
        ir, _ = driver.optimize(ir, mesh=mesh)
        runs = dataclasses.replace(ir, kernels=tuple(
            k for k in ir.kernels if not (k.is_extern and k.extern_ascend is None)))
        try:
            files = emit_aicore(runs, cube_views(runs))
        except WspError:
            continue
        yield path, ir, runs, files
