"""The AICore dispatcher of a tree (aicore/dispatch.asc) compiled on the host: its kernel
(the `<<<...>>>` launcher cut off) behind dispatch_shim/kernel_operator.h, with recording
stubs for the kernels, run on the segments the expander writes, every wave on every block.
Each task must run exactly once, in its wave, on its block, with its record's kernel, tiles
and scalars (dispatch_driver.cpp checks), a block must read (GetValue, counted per block by the
shim) two words of the index of runs and then only its own tasks' numbers and records, never
another block's (O(its tasks), not O(the wave)), and the dispatcher must drop stale cache lines
before reading records."""

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


def run_dispatcher(tmp_path, example, schedule, syms, edit=lambda kernel: kernel):
    """dispatch_driver on the example's segments (capacity 4, 3 blocks), the dispatcher's
    kernel text passed through `edit`: the completed process."""
    m = ptowsp.load(str(ROOT / f"examples/{example}.wsp"))
    ir, _ = optimize(m.ir, 2)
    files = emit_project(ir, schedule).files
    src = tmp_path / "src"
    for rel in ("include/wsp_plan.h", "include/wsp_expand.h", "aicpu/expand.aicpu"):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(files[rel])
    dispatch = files["aicore/dispatch.asc"]
    kernel, _ = split_dispatch(dispatch)
    (src / "dispatch_kernel.inc").write_text(edit(kernel))
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
                  str(HERE / "dispatch_driver.cpp"), "-o", str(exe)])
    plan = tmp_path / "plan.bin"
    plan.write_bytes(np.asarray(parse_c_array(files["include/wsp_plan_data.h"]), "<i8").tobytes())
    data = tmp_path / "data.bin"
    write_data(data, ir, syms, {})
    return subprocess.run([str(exe), str(plan), str(data), "4", "3"],
                          capture_output=True, text=True, check=False, timeout=60)


@pytest.mark.parametrize("example, schedule, syms", [
    ("megakernel", "per_tile", {"N": 5}),   # CSP, affinity: tasks pinned to blocks
    # no .dispatch: each wave dealt over the blocks; tiles whose rows are K or N apart
    ("gemm", "main", {"M": 128, "N": 192, "K": 256}),
])
def test_dispatcher_runs_each_task_once_on_its_block(tmp_path, example, schedule, syms):
    done = run_dispatcher(tmp_path, example, schedule, syms)
    assert done.returncode == 0, done.stdout + done.stderr
    tasks, calls, launches, drops, reads = map(int, re.fullmatch(
        r"ok (\d+) tasks (\d+) calls (\d+) launches (\d+) cache-drops (\d+) reads\n",
        done.stdout).groups())
    expected = {"megakernel": 3 * syms["N"], "gemm": 2 * 3 * 4}[example]
    assert tasks == calls == expected
    assert drops == launches > 0
    assert reads < launches * 2 + tasks * 100  # a bound; the driver checks each block exactly


def test_a_dispatcher_scanning_the_wave_is_caught(tmp_path):
    """The driver's read check has teeth: the dispatcher as it was before the index of runs
    (every block walks the whole wave and skips the records of other blocks) runs every task
    right, and is refused for reading other blocks' records."""
    def scan(kernel: str) -> str:
        old = ("    const int64_t first = cb.GetValue(run);\n"
               "    const int64_t last = cb.GetValue(run + 1);\n")
        assert old in kernel
        kernel = kernel.replace(old, "    const int64_t first = cb.GetValue(run - block);\n"
                                     "    const int64_t last = cb.GetValue(run - block + blocks);\n")
        at = "        const int64_t at = cb.GetValue(WSP_C_ORDER + j) * WSP_TASK_WORDS;\n"
        assert at in kernel
        return kernel.replace(at, at + "        if (rec.GetValue(at + WSP_T_CORE) != block) continue;\n")
    done = run_dispatcher(tmp_path, "gemm", "main", {"M": 128, "N": 192, "K": 256}, scan)
    assert done.returncode == 1
    assert re.match(r"block \d+ read a record of another run \(task \d+\)", done.stdout), done.stdout
