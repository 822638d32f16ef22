"""The AICore dispatcher of a tree (aicore/dispatch.asc) compiled on the host: its kernel
(the `<<<...>>>` launcher cut off) behind dispatch_shim/kernel_operator.h, with recording
stubs for the kernels, run on the segments the expander writes, every wave on every block.
Each task must run exactly once, in its wave, on its block, with its record's kernel, tiles
and scalars (dispatch_driver.cpp checks), and the dispatcher must drop stale cache lines before
reading records."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.ascend import aicore, emit_project
from ptowsp.backends.ascend.plan import parse_c_array
from ptowsp.ir.passes import optimize

from .hostrun import split_dispatch
from .streams import CXX, HERE, ROOT, run_compiler, write_data

pytestmark = pytest.mark.cc


@pytest.mark.parametrize("example, schedule, syms", [
    ("megakernel", "per_tile", {"N": 5}),   # CSP, affinity: tasks pinned to blocks
    # no .dispatch: each wave dealt over the blocks; tiles whose rows are K or N apart
    # (its kernel runs on the cube: the AIC dispatcher's launch runs its tasks)
    ("gemm", "main", {"M": 128, "N": 192, "K": 256}),
])
def test_dispatcher_runs_each_task_once_on_its_block(tmp_path, example, schedule, syms):
    m = ptowsp.load(str(ROOT / f"examples/{example}.wsp"))
    ir, _ = optimize(m.ir, 2)
    files = emit_project(ir, schedule).files
    src = tmp_path / "src"
    for rel in ("include/wsp_plan.h", "include/wsp_expand.h", "aicpu/expand.aicpu"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(files[rel])
    dispatch = files["aicore/dispatch.asc"]
    kernel, _ = split_dispatch(dispatch)
    (src / "dispatch_kernel.inc").write_text(kernel)
    stubs = []
    for i, k in enumerate(ir.kernels):
        header = aicore.header_path(k).split("/", 1)[1]
        assert f'#include "{header}"' in kernel
        (src / header).write_text("/* stub: kernels.inc defines the entry */\n")
        stubs.append(f"inline void {aicore.kernel_entry(k)}(const WspTile *t, const WspScalar *s) "
                     f"{{ wsp_test_called({i}, t, s); }}")
    (src / "kernels.inc").write_text("\n".join(stubs) + "\n")
    exe = tmp_path / "dispatch_driver"
    run_compiler([CXX, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror",
                  f"-I{HERE / 'shim'}", f"-I{HERE / 'dispatch_shim'}", f"-I{src}",
                  f"-I{src / 'include'}", f"-I{src / 'aicpu'}", f"-I{HERE}",
                  *(["-DWSP_CUBE_DISPATCH"] if "wsp_dispatch_cube(" in kernel else []),
                  *([] if "wsp_dispatch(" in kernel else ["-DWSP_NO_VECTOR_DISPATCH"]),
                  str(HERE / "dispatch_driver.cpp"), "-o", str(exe)])
    plan = tmp_path / "plan.bin"
    plan.write_bytes(np.asarray(parse_c_array(files["include/wsp_plan_data.h"]), "<i8").tobytes())
    data = tmp_path / "data.bin"
    write_data(data, ir, syms, {})
    blocks = 3
    done = subprocess.run([str(exe), str(plan), str(data), "4", str(blocks)],
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    tasks, calls, launches, drops = map(int, re.fullmatch(
        r"ok (\d+) tasks (\d+) calls (\d+) launches (\d+) cache-drops\n", done.stdout).groups())
    expected = {"megakernel": 3 * syms["N"], "gemm": 2 * 3 * 4}[example]
    assert tasks == calls == expected
    assert drops == launches > 0
