"""Shared by the tests that compile parts of an emitted ascend_npu tree with the host C++
compiler and run them (test_host.py, test_dispatch.py, test_end_to_end.py): writing the tree,
cutting the `<<<...>>>` launcher off aicore/dispatch.asc or rewriting its launch into a call of
the stub ACL's `wsp_stub_launch` (stub_acl/acl/acl.h), compiling host/main.asc on the CANN 8
route (the expander compiled into the host), and running the host program on a data
directory."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np

from ptowsp.backends.ascend import emit_project, write_project

from .streams import CXX, HERE, run_compiler

STUB_ACL = HERE / "stub_acl"
LAUNCHER_MARK = "/* Called by host/main.asc"
# KERNEL<<<BLOCKS, L2CTRL, STREAM>>>(ARGS);
LAUNCH = re.compile(r"(\w+)<<<([^,]+), ([^,]+), ([^>]+)>>>\(([^;]*)\);")  # ARGS: lines


def write_tree(dest: Path, ir, schedule: str | None = None) -> dict[str, str]:
    """Emit the tree of `ir` (optimised) for `schedule` (default: the module's) into `dest`."""
    files = emit_project(ir, schedule or ir.default_schedule).files
    write_project(dest, files)
    return files


def split_dispatch(text: str) -> tuple[str, str]:
    """aicore/dispatch.asc as (the kernel, the launcher main.asc calls)."""
    kernel, launcher = text.split(LAUNCHER_MARK, 1)
    assert any(f"{k}<<<blocks, nullptr, stream>>>" in launcher
               for k in ("wsp_dispatch", "wsp_dispatch_cube", "wsp_dispatch_mix"))
    return kernel, LAUNCHER_MARK + launcher


def host_launcher(launcher: str) -> str:
    """The launcher with each `K<<<blocks, l2, stream>>>(args);` turned into a call of the stub
    ACL's wsp_stub_launch that runs K(args) on each block in turn when the stream runs it
    (the arguments captured by value: the launch returns first), AscendC::GetBlockIdx()
    reporting the block (the Ascend C CPU shim's `test_block`)."""
    def launch(m):
        if m[1] == "wsp_dispatch_mix":
            # a MIX launch: each block's AIC and two AIVs as threads, the launcher's workspace
            # tracked (a read or overwrite across cores without a flag between fails)
            return (f'wsp_stub_launch("{m[1]}", {m[2]}, {m[3]}, {m[4]}, [=](uint32_t wsp_block_) '
                    '{ AscendC::wsp_cpu_untrack_gm(); '
                    'AscendC::wsp_cpu_track_gm(wsp_ws, (size_t)blocks * WSP_MIX_WORKSPACE); '
                    f'AscendC::wsp_cpu_mix_launch(wsp_block_, 2, [&] {{ {m[1]}({m[5]}); }}, '
                    f'[&] {{ {m[1]}({m[5]}); }}); }});')
        return (f'wsp_stub_launch("{m[1]}", {m[2]}, {m[3]}, {m[4]}, [=](uint32_t wsp_block_) '
                f'{{ AscendC::test_block = wsp_block_; {m[1]}({m[5]}); }});')

    out, n = LAUNCH.subn(launch, launcher)
    # one launch per wave, or two or three when some kernels run on the cube
    # (wsp_dispatch_cube) or are split over both (wsp_dispatch_mix)
    assert n in (1, 2, 3) and "<<<" not in out, launcher
    return '#include "acl/acl.h"\n#include "mix_launch.h"\n' + out


def compile_host(exe: Path, tree: Path, sources=(), includes=(), flags=()) -> None:
    """host/main.asc and aicpu/expand.aicpu of `tree` (WSP_HOST_EXPANDER: the CANN 8 route)
    against the stub ACL, linked with `sources` (sources or objects), warnings as errors."""
    run_compiler([CXX, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-DWSP_HOST_EXPANDER=1",
                  f"-I{STUB_ACL}", f"-I{tree / 'include'}", f"-I{tree / 'host'}",
                  f"-I{tree / 'host/host_expander'}", *(f"-I{i}" for i in includes), *flags,
                  "-x", "c++", str(tree / "host/main.asc"), str(tree / "aicpu/expand.aicpu"),
                  "-x", "none", *map(str, sources), "-lm", "-o", str(exe)])


def build_host(tmp: Path, ir, schedule: str | None, includes=()):
    """The tree of `ir`'s `schedule` under tmp/tree and its host binary tmp/wsp_main (main.asc
    + expand.aicpu + dispatch.asc with the kernels compiled as test_aicore compiles them: the
    UB size, no contracted multiply-adds): (tree, exe). `includes`: more header folders for
    main.asc (the stand-in HCCL of a mesh)."""
    from .ascendc_cpu import harness as H

    tree = tmp / "tree"
    files = write_tree(tree, ir, schedule)
    kernel, launcher = split_dispatch(files["aicore/dispatch.asc"])
    dispatch = tmp / "dispatch_host.cpp"
    dispatch.write_text(kernel + host_launcher(launcher))
    obj = tmp / "dispatch_host.o"
    run_compiler([CXX, *(f for f in H.CXXFLAGS if f not in ("-shared", "-fPIC")), "-c",
                  f"-I{H.HERE}", f"-I{HERE / 'stub_acl'}", f"-I{tree / 'include'}",
                  f"-I{tree / 'aicore'}", str(dispatch), "-o", str(obj)])
    exe = tmp / "wsp_main"
    compile_host(exe, tree, [obj], includes)
    return tree, exe


def run(exe: Path, data: Path, *args, fail: str = None, timeout: float = 120):
    """Run the host program on DATA (-d), logging ACL calls to DATA/acl.log and stand-in
    dispatcher waves to DATA/dispatch.log; `fail` names an ACL call to make fail."""
    env = dict(os.environ, WSP_ACL_LOG=str(data / "acl.log"),
               WSP_DISPATCH_LOG=str(data / "dispatch.log"))
    if fail:
        env["WSP_ACL_FAIL"] = fail
    for f in ("acl.log", "dispatch.log"):
        (data / f).unlink(missing_ok=True)
    return subprocess.run([str(exe), "-d", str(data), *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


def write_inputs(data: Path, arrays: dict) -> None:
    for sub in ("input", "output"):
        (data / sub).mkdir(parents=True, exist_ok=True)
    for name, a in arrays.items():
        np.save(data / "input" / f"{name}.npy", a)


def rel_err(out, expected) -> float:
    e = np.asarray(expected, np.float64)
    return float(np.abs(np.asarray(out, np.float64) - e).max()) / max(float(np.abs(e).max()), 1e-30)
