"""The `Target` protocol (`ptowsp/backends/__init__.py`) and the pipeline (`ptowsp/driver.py`):
every target implements the protocol, names and options are checked with clear errors, the
CLI's `--target` choices are the targets, and the driver is the only place that lowers and
optimises."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp import driver
from ptowsp.backends import TARGETS
from ptowsp.backends.target import Target, TargetError
from ptowsp.diagnostics import WspError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ptowsp"
RMSNORM = ROOT / "examples" / "rmsnorm.wsp"

TWO = """\
sym N = 4
input  X: f32[N, 8]
output Y: f32[N, 8]
kernel neg(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, -x) }
workload w() { for i in P(N) { neg[i](x = X[i], y = Y[i]) } }
schedule a = w()
schedule b = w()
"""


# ---------------------------------------------------------------------------------------------
# The protocol


@pytest.mark.parametrize("name", list(TARGETS))
def test_every_target_implements_the_protocol(name):
    t = TARGETS[name]
    assert isinstance(t, Target)
    assert t.name == name and TARGETS[name] is t  # made once
    for flag in ("runs_here", "cycle_model", "one_schedule"):
        assert isinstance(getattr(t, flag), bool), flag
    assert t.product is None or isinstance(t.product, str)
    assert t.cycle_model <= t.runs_here  # a cycle model replays runs made here


def test_the_three_targets():
    assert list(TARGETS) == ["cpu_sim", "ref", "ascend_npu"]
    ref, cpu, npu = TARGETS["ref"], TARGETS["cpu_sim"], TARGETS["ascend_npu"]
    assert (ref.runs_here, ref.cycle_model, ref.product) == (True, False, None)
    assert (cpu.runs_here, cpu.cycle_model, cpu.one_schedule) == (True, True, False)
    assert (npu.runs_here, npu.one_schedule) == (False, True)


def test_looking_targets_up_imports_no_back_end():
    code = ("import sys\nfrom ptowsp.backends import TARGETS\nfrom ptowsp import cli, driver\n"
            "assert list(TARGETS) == ['cpu_sim', 'ref', 'ascend_npu']\n"
            "bad = [m for m in sys.modules if m.split('.')[:3] in (['ptowsp', 'backends', 'cpu'], "
            "['ptowsp', 'backends', 'ref'], ['ptowsp', 'backends', 'ascend']) or m in "
            "('numpy', 'cffi', 'lark', 'jinja2')]\nassert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr


def test_an_unknown_target_is_a_clear_error():
    with pytest.raises(TargetError, match=r"unknown target 'tpu': use 'cpu_sim', 'ref' or "
                                          r"'ascend_npu'"):
        driver.target("tpu")
    with pytest.raises(ValueError, match="unknown target 'tpu'"):  # TargetError is one
        ptowsp.parse(TWO, "two.wsp").compile(target="tpu")


@pytest.mark.parametrize("name, option", [("cpu_sim", "npu_arch"), ("ref", "npu_arch"),
                                          ("ascend_npu", "workers")])
def test_an_option_a_target_does_not_take_is_a_clear_error(name, option):
    with pytest.raises(TargetError, match=f"target {name} has no option `{option}`"):
        TARGETS[name].options({option: 1})
    with pytest.raises(TargetError, match=f"target {name} has no option `{option}`"):
        ptowsp.parse(TWO, "two.wsp").compile(target=name, schedule="a", **{option: 1})


def test_options_are_each_targets_own():
    assert TARGETS["cpu_sim"].options({"workers": 3}).workers == 3
    assert TARGETS["ascend_npu"].options({"npu_arch": "dav-3510"}).npu_arch == "dav-3510"
    assert TARGETS["ref"].options({}).workers is None


def test_the_cli_target_choices_are_the_targets():
    from ptowsp.cli import compile as compile_command
    from ptowsp.cli import run as run_command

    for command in (compile_command, run_command):
        (option,) = [p for p in command.params if p.opts == ["--target"]]
        assert list(option.type.choices) == list(TARGETS)


def test_targets_that_cannot_do_a_command_are_usage_errors(tmp_path):
    from click.testing import CliRunner

    from ptowsp.cli import main

    r = CliRunner().invoke(main, ["compile", str(RMSNORM), "--target", "ref"])
    assert r.exit_code == 2 and "--target ref has nothing to build" in r.output
    r = CliRunner().invoke(main, ["run", str(RMSNORM), "--target", "ascend_npu"])
    assert r.exit_code == 2 and "--target ascend_npu does not run here" in r.output
    r = CliRunner().invoke(main, ["compile", str(RMSNORM), "--npu-arch", "dav-3510"])
    assert r.exit_code == 2 and "target cpu_sim has no option `npu_arch`" in r.output
    r = CliRunner().invoke(main, ["run", str(tmp_path), "--target", "ref"])
    assert r.exit_code == 1 and "target ref does not run artifact directories" in r.output


# ---------------------------------------------------------------------------------------------
# The stages


def test_the_stages_one_by_one():
    env = driver.check_text(TWO, "two.wsp")
    ir = driver.lower(env)
    opt, pm = driver.optimize(ir, 0)
    assert opt is ir and pm.passes == []  # -O0 runs no pass
    opt, pm = driver.optimize(ir)  # -O2
    assert [t.name for t in pm.timings] and opt is not ir
    with pytest.raises(WspError, match="several schedules and none is `main`"):
        driver.choose_schedule(opt, None)
    assert driver.choose_schedule(opt, "b") == "b"
    with pytest.raises(WspError, match="no schedule `c`"):
        driver.choose_schedule(opt, "c")
    cpu = TARGETS["cpu_sim"]
    emitted = driver.emit(cpu, opt, None, {})  # every schedule: no choice needed
    assert sorted(emitted.files) == ["enumerate.c", "kernels.c", "manifest.json"]
    assert emitted.warnings == ()
    ref = TARGETS["ref"]
    interp = driver.open_artifact(ref, driver.build(ref, driver.emit(ref, opt, None, {})))
    out, info = interp.run(opt, "a", {"N": 4}, {"X": np.ones((4, 8), np.float32)})
    assert (out["Y"] == -1).all() and info["task_count"] == 4
    npu = TARGETS["ascend_npu"]
    project = driver.open_artifact(npu, driver.build(npu, driver.emit(npu, opt, "a", {})))
    assert "CMakeLists.txt" in project.files  # the product itself: it does not run here


def test_module_compile_returns_the_product_of_a_target_that_does_not_run_here():
    m = ptowsp.parse(TWO, "two.wsp")
    project = m.compile(target="ascend_npu", schedule="b")
    assert type(project).__name__ == "Project" and "CMakeLists.txt" in project.files
    prog = m.compile(target="ref", schedule="a")
    assert prog.target == "ref" and prog.opt_level == 2 and prog.passes is not None
    prog.run(X=np.ones((4, 8), np.float32), trace=True)
    assert prog.trace is None  # ref has no cycle model: no trace
    with pytest.raises(ValueError, match="cycle model"):
        prog.simulate()


@pytest.mark.cc
def test_compile_file_reuses_the_last_build_of_unchanged_sources(tmp_path, wspc_cache):
    src = tmp_path / "two.wsp"
    src.write_text(TWO)
    cpu = TARGETS["cpu_sim"]
    cold = driver.compile_file(src, cpu, "a", 1, {"workers": 2})
    assert cold.opt_level == 1 and cold.passes is not None and cold.runnable.workers == 2
    warm = driver.compile_file(src, cpu, "b", 1, {"workers": 1})
    assert warm.opt_level is None and warm.passes is None  # nothing checked, lowered or built
    assert warm.schedule == "b" and warm.runnable.workers == 1
    assert warm.artifact.directory == cold.artifact.directory
    assert driver.compile_file(src, cpu, "a", 1, print_after=["all"],
                               out=io.StringIO()).opt_level == 1  # compiled
    src.write_text(TWO.replace("-x", "x + x"))
    assert driver.compile_file(src, cpu, "a", 1).opt_level == 1  # changed: compiled again
    reopened = driver.load_artifact(cold.artifact.write(tmp_path / "art"), cpu, "a")
    assert reopened.module.name == cold.module.name and reopened.opt_level is None
    with pytest.raises(WspError, match="not a wspc artifact directory"):
        driver.load_artifact(tmp_path, cpu)


# ---------------------------------------------------------------------------------------------
# One pipeline


def _sources(skip=()):
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if not any(rel == s or rel.startswith(s + "/") for s in skip):
            yield rel, path.read_text()


# ---------------------------------------------------------------------------------------------
# One kernel's source (`kernel.compile` in the embedding)


def test_kernel_code_is_what_emit_writes_for_the_kernel():
    m = driver.lower(driver.check_text(TWO, "two.wsp"))
    cpu = driver.kernel_code(m, driver.target("cpu_sim"), "neg")
    emitted = driver.emit(TARGETS["cpu_sim"], driver.optimize(m)[0], None, {})
    assert cpu.entry == "wsp_k_neg" and cpu.code in emitted.files["kernels.c"]
    npu = driver.kernel_code(m, driver.target("ascend_npu"), "neg")
    tree = driver.emit(TARGETS["ascend_npu"], driver.optimize(m)[0], "a", {})
    assert npu.entry == "wsp_aicore_neg" and npu.code == tree.files["aicore/kernel_neg.h"]
    assert driver.kernel_code(m, driver.target("ref"), "neg") is None  # it interprets the IR
    with pytest.raises(TargetError, match="no option `blocks`"):
        driver.kernel_code(m, driver.target("cpu_sim"), "neg", options={"blocks": 2})


def test_a_module_of_kernels_alone_keeps_them_at_every_level():
    text = "kernel neg(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, -x) }\n"
    m = driver.lower(driver.check_text(text, "lib.wsp"))
    for level in (0, 1, 2, 3):
        assert [k.name for k in driver.optimize(m, level)[0].kernels] == ["neg"]
    assert "wsp_k_neg" in driver.kernel_code(m, driver.target("cpu_sim"), "neg").code
    assert ptowsp.parse(text, "lib.wsp").kernel_code("neg", "ascend_npu").entry == "wsp_aicore_neg"
