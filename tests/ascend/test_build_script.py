"""scripts/build_and_run.sh of an ascend_npu tree (docs/ascend.md, "Building and running"): what
can be tested without CANN. It refuses clearly without a toolkit (before touching anything),
checks its arguments, passes each run mode (npu, CANN's simulator, CANN's CPU debug mode) and
the CANN 8 route to CMake as CANN's sample scripts do (checked in its dry run), stops at the
first failing step, and is clean for `bash -n` and, where installed, shellcheck."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import ptowsp
from ptowsp.backends.ascend import emit_project
from ptowsp.driver import choose_schedule
from ptowsp.ir.passes import optimize

from .streams import ROOT


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    mod, _ = optimize(ptowsp.load(str(ROOT / "examples/rmsnorm.wsp")).ir, 2)
    out = tmp_path_factory.mktemp("build_script") / "tree"
    emit_project(mod, choose_schedule(mod, None)).write(out)
    return out


def run(tree: Path, *args: str, cann=None, path=None, extra=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ASCEND_HOME_PATH"}
    env.update(extra or {})
    if cann is not None:
        env["ASCEND_HOME_PATH"] = str(cann)
    if path is not None:
        env["PATH"] = f"{path}:{env['PATH']}"
    return subprocess.run([str(tree / "scripts/build_and_run.sh"), *args], capture_output=True,
                          text=True, env=env, cwd=tree, timeout=60)


def test_script_is_executable_and_parses(tree):
    script = tree / "scripts/build_and_run.sh"
    assert os.access(script, os.X_OK)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    if shutil.which("shellcheck"):
        done = subprocess.run(["shellcheck", str(script)], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout


def test_help_and_bad_arguments(tree, tmp_path):
    done = run(tree, "-h")
    assert done.returncode == 0 and "-r, --run-mode" in done.stdout and "B=... T=..." in done.stdout
    for args, why in ((("-r", "gpu"), "run mode 'gpu' is not npu, sim or cpu"),
                      (("--bogus",), "unknown argument '--bogus'"),
                      (("-r",), "-r needs a value"),
                      (("-r", "cpu", "--cann8"), "the cpu run mode needs the CANN 9 route")):
        done = run(tree, *args, cann=tmp_path)
        assert done.returncode == 2 and why in done.stderr, (args, done.stderr)


def test_refuses_without_cann(tree, tmp_path):
    done = run(tree, "B=2", "T=4")
    assert done.returncode == 3
    assert "no CANN toolkit: ASCEND_HOME_PATH is not set" in done.stderr
    done = run(tree, cann=tmp_path / "missing")
    assert done.returncode == 3 and "no CANN toolkit" in done.stderr
    done = run(tree, "-r", "sim", cann=tmp_path)  # a CANN without the simulator for the SoC
    assert done.returncode == 3 and "no simulator for Ascend910B1" in done.stderr
    assert not (tree / "build").exists() and not (tree / "data").exists()


def test_dry_runs_name_each_step(tree, tmp_path):
    cann = str(tmp_path)
    plan = {
        (): [f"-DASCEND_CANN_PACKAGE_PATH={cann}", "-DWSP_RUN_MODE=npu",
             "-DCMAKE_ASC_RUN_MODE=npu"],
        ("-r", "sim"): ["-DWSP_RUN_MODE=sim", "-DCMAKE_ASC_RUN_MODE=sim"],
        ("-r", "cpu"): ["-DWSP_RUN_MODE=cpu", "-DCMAKE_ASC_RUN_MODE=cpu"],
        ("--cann8", "-v", "Ascend910B3"): ["-DWSP_CANN8=ON", "-DSOC_VERSION=Ascend910B3",
                                           "-DWSP_RUN_MODE=npu"],
    }
    for args, flags in plan.items():
        done = run(tree, "-n", *args, "B=2", "T=4", cann=tmp_path)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith("cmake -S . -B build ") and all(f in lines[0] for f in flags)
        assert lines[1:] == ["cmake --build build -j ", "python3 scripts/gen_data.py B=2 T=4 ",
                             "./build/wsp_main B=2 T=4 ", "python3 scripts/verify_result.py "]
        if "--cann8" in args:
            assert "CMAKE_ASC_RUN_MODE" not in lines[0]


def test_a_failing_step_stops_the_script(tree, tmp_path):
    """A configure that fails (a stand-in cmake exiting 7) ends the script with its status."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cmake").write_text('#!/bin/sh\necho "cmake $*" >> "$CMAKE_LOG"\nexit 7\n')
    (bin_dir / "cmake").chmod(0o755)
    done = run(tree, "B=2", "T=4", cann=tmp_path, path=bin_dir,
               extra={"CMAKE_LOG": str(tmp_path / "cmake.log")})
    assert done.returncode == 7
    calls = (tmp_path / "cmake.log").read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith("cmake -S . -B build")
    assert not (tree / "data").exists()
