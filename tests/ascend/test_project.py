"""`wspc compile FILE --target ascend_npu -o DIR`: the tree, its determinism, its golden copies
(tests/golden/ascend/: the files every tree shares once in scaffold/, the others in <example>/;
`pytest --update-golden` rewrites both), the schedule
policies (carried into the plan, or a warning naming the combinator), kernels with only an
`extern ascend` body (fine here, an error on cpu_sim), `Module.compile(target="ascend_npu")`,
and the errors (an `extern` kernel without an `extern ascend` body, a checker error, bad
usage): exit statuses, diagnostics with carets, and no partial output."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import ptowsp
from ptowsp.backends.ascend import emit_project
from ptowsp.backends.ascend.plan import H, build_plan
from ptowsp.cli import main
from ptowsp.ir.passes import optimize

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "ascend"
GOLDEN_EXAMPLES = ("rmsnorm", "attention_varlen")
# the files whose bytes do not depend on the program: stored once, in GOLDEN / "scaffold"
SCAFFOLD = ("aicpu/expand.aicpu", "include/wsp_expand.h", "include/wsp_plan.h",
            "aicore/wsp_aicore.h", "host/host_expander/aicpu_api.h", "host/wsp_npy.h")
EXPECTED = {"CMakeLists.txt", "README.md", "aicore/dispatch.asc", "aicpu/expand.aicpu",
            "host/host_expander/aicpu_api.h", "host/main.asc", "host/wsp_npy.h",
            "include/wsp_expand.h", "include/wsp_plan.h", "include/wsp_plan_data.h",
            "scripts/gen_data.py", "scripts/verify_result.py"}


def compile_cli(*args):
    return CliRunner().invoke(main, ["compile", *map(str, args)])


def tree(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def project(path: Path, schedule=None, text=None):
    m = ptowsp.parse(text, str(path)) if text is not None else ptowsp.load(str(path))
    ir, _ = optimize(m.ir, 2)
    name = schedule or ir.default_schedule
    return ir, emit_project(ir, name)


# ---------------------------------------------------------------------------------------------
# the tree


def test_compile_writes_the_tree(tmp_path):
    out = tmp_path / "npu"
    r = compile_cli(ROOT / "examples/rmsnorm.wsp", "--target", "ascend_npu", "-o", out)
    assert r.exit_code == 0, r.output
    files = set(tree(out))
    assert EXPECTED <= files
    assert {"aicore/kernel_rmsnorm_tile.h", "aicore/wsp_aicore.h", "wsp/rmsnorm.wsp"} <= files
    main_asc = (out / "host/main.asc").read_text()
    assert '#include "kernel_rmsnorm_tile.h"' in (out / "aicore/dispatch.asc").read_text()
    assert "wsp_aicore_rmsnorm_tile(tiles, scalars)" in (out / "aicore/dispatch.asc").read_text()
    for name in ("X", "W"):  # inputs read, outputs written, as .npy
        assert f'"{name}", "input", "f32", "<f4"' in main_asc
    assert '"Y", "output", "f32", "<f4"' in main_asc
    assert "wsp_npy_read(" in main_asc and "wsp_npy_write(" in main_asc
    cmake = (out / "CMakeLists.txt").read_text()
    for needle in ("find_package(ASC REQUIRED)", "find_package(AICPU REQUIRED)",
                   "project(wsp_rmsnorm LANGUAGES ASC AICPU CXX)", "--npu-arch=${WSP_NPU_ARCH}",
                   "include(${ASCENDC_CMAKE_DIR}/ascendc.cmake)", "ascendc_library(wsp_kernels"):
        assert needle in cmake
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_two_compiles_give_the_same_bytes(tmp_path):
    for i in (1, 2):
        r = compile_cli(ROOT / "examples/megakernel.wsp", "--target", "ascend_npu", "-o",
                        tmp_path / f"t{i}", "--schedule", "per_tile")
        assert r.exit_code == 0, r.output
    a, b = tree(tmp_path / "t1"), tree(tmp_path / "t2")
    assert a == b
    # no absolute path and no date in the tree
    for name, data in a.items():
        text = data.decode()
        assert str(ROOT) not in text and str(tmp_path) not in text, name
        assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), name


def test_the_scaffold_is_the_same_for_every_program():
    """What test_expander.py compiles once (the expander) stands for every tree, and the golden
    trees may store the scaffold once."""
    texts = set()
    for path in ("examples/rmsnorm.wsp", "examples/worker_pool.wsp", "examples/attention_varlen.wsp",
                 "examples/megakernel.wsp", "tests/programs/moe_sparse.wsp"):
        _, p = project(ROOT / path)
        texts.add(tuple(p.files[f] for f in SCAFFOLD))
    assert len(texts) == 1


@pytest.mark.parametrize("example", GOLDEN_EXAMPLES)
def test_golden_tree(example, request):
    """The whole tree, every file's bytes: the scaffold from GOLDEN / "scaffold", the rest from
    GOLDEN / example."""
    _, p = project(ROOT / f"examples/{example}.wsp")
    parts = {GOLDEN / "scaffold": {rel: t for rel, t in p.files.items() if rel in SCAFFOLD},
             GOLDEN / example: {rel: t for rel, t in p.files.items() if rel not in SCAFFOLD}}
    if request.config.getoption("--update-golden"):
        for where, files in parts.items():
            shutil.rmtree(where, ignore_errors=True)
            for rel, text in files.items():
                (where / rel).parent.mkdir(parents=True, exist_ok=True)
                (where / rel).write_text(text)
        return
    want = {}
    for where in parts:
        if not where.exists():
            pytest.fail(f"golden tree {where} is missing; run `pytest --update-golden` to create it")
        stored = {rel: (where, v.decode()) for rel, v in tree(where).items()}
        assert not stored.keys() & want.keys(), f"{where} repeats the files of another part"
        want.update(stored)
    assert sorted(p.files) == sorted(want), "the tree's files differ (pytest --update-golden)"
    for rel, text in p.files.items():
        where, stored = want[rel]
        assert text == stored, f"{rel} differs from {where / rel} (pytest --update-golden)"


# ---------------------------------------------------------------------------------------------
# schedule policies

POLICY_HEAD = """\
sym N
input  X: f32[N, 4, 8]
output Y: f32[N, 4, 8]
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
workload w() { for i in P(N) { copy[i](x = X[i], y = Y[i]) } }
"""

# combinators -> (the combinator named in the warning, or None when carried)
POLICIES = {
    ".dispatch(round_robin(3))": None,
    ".dispatch(affinity(i, n = 2))": None,
    ".dispatch(hash(i * 3, n = 4))": None,
    ".dispatch(dispatch_by(i, n = 8))": None,
    ".dispatch(work_steal(n = 2))": "dispatch",
    ".streams(2)": None,
    ".streams(2).stream_by(i % 2)": None,
    ".timing(immediate)": None,
    ".timing(batched(4))": "timing",
    ".timing(interleaved(2))": "timing",
    ".timing(rate_limit(100))": "timing",
    ".task_graph(window = 16, mode = stall)": None,
    ".task_graph(window = 16, mode = abort)": "task_graph",
    ".task_graph(window = 16, ready = priority(i), pools = by_exec_unit)": "task_graph",
}


@pytest.mark.parametrize("combinators", sorted(POLICIES))
def test_each_policy_is_carried_or_warned(combinators):
    text = POLICY_HEAD + f"schedule main = w(){combinators}\n"
    ir, p = project(Path("p.wsp"), text=text)
    warned = POLICIES[combinators]
    if warned is None:
        assert p.warnings == []
    else:
        (w,) = p.warnings
        assert w.severity == "warning" and f"`.{warned}(" in w.message
        line = text.splitlines()[w.span.line - 1]
        assert line[w.span.col - 1:].startswith(warned)  # the caret names the combinator
    words = build_plan(ir, "main").words
    s = ir.schedule("main")
    if "dispatch" in s.given:
        assert words[H["DISPATCH"]] > 0 and words[H["NDISPATCHERS"]] > 0
        readme = p.files["README.md"]
        assert "`.dispatch(" in readme
    if "streams" in s.given:
        assert words[H["NSTREAMS"]] == 2
        assert (words[H["STREAM_KEY"]] >= 0) == ("stream_by" in combinators)
    if "task_graph" in s.given:
        assert words[H["WINDOW"]] == 16


def test_task_graph_knobs_are_named_in_one_warning():
    text = POLICY_HEAD + ("schedule main = w().task_graph(deps = infer_bytes_overlap, "
                          "start = after_orchestration, trace = cycles)\n")
    _, p = project(Path("p.wsp"), text=text)
    (w,) = p.warnings
    assert w.message == ("`.task_graph(deps = infer_bytes_overlap, start = after_orchestration(), "
                         "trace = cycles)` is not honoured on ascend_npu: the expander issues "
                         "each wave's tasks at once, waits on the exact dependencies and keeps "
                         "no trace")
    assert "`.task_graph(deps = infer_bytes_overlap, start = after_orchestration(), trace = " \
        "cycles)`: not honoured (warned)" in p.files["README.md"]


def test_policy_warnings_on_the_command_line(tmp_path):
    r = compile_cli(ROOT / "tests/programs/spec_schedules.wsp", "--target", "ascend_npu",
                    "-o", tmp_path / "t", "--schedule", "stealing")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    heads = [ln for ln in lines if ": warning: " in ln]
    assert len(heads) == 2
    assert re.match(r".*spec_schedules\.wsp:38:6: warning: `\.dispatch\(work_steal\(n = 2\)\)` "
                    r"is not honoured on ascend_npu", heads[0])
    assert "spec_schedules.wsp:39:6: warning: `.task_graph(mode = abort)`" in heads[1]
    caret = lines[lines.index(heads[0]) + 2]
    assert caret.endswith("|      ^^^^^^^^")  # under `dispatch`
    r = compile_cli(ROOT / "examples/rmsnorm.wsp", "--target", "ascend_npu", "-o", tmp_path / "q")
    assert r.exit_code == 0 and ": warning:" not in r.output


# ---------------------------------------------------------------------------------------------
# errors


def test_extern_without_an_ascend_body_is_an_error(tmp_path):
    out = tmp_path / "moe"
    r = compile_cli(ROOT / "examples/moe_extern.wsp", "--target", "ascend_npu", "-o", out)
    assert r.exit_code == 1
    lines = r.output.splitlines()
    assert lines[0].endswith("moe_extern.wsp:57:8: error: extern kernel `route` has no `extern ascend` "
                             "body, which the ascend_npu target needs (its `extern c` body runs "
                             "only on cpu_sim)")
    assert lines[2].endswith("|        ^^^^^")  # under `route`
    assert "Traceback" not in r.output
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_extern_with_an_ascend_body_compiles(tmp_path):
    text = (ROOT / "examples/moe_extern.wsp").read_text()
    end = text.index('"""', text.index('extern c """') + 12) + 3
    src = tmp_path / "moe_npu.wsp"
    src.write_text(text[:end] + ' extern ascend """ /* AICore router */ """' + text[end:])
    r = compile_cli(src, "--target", "ascend_npu", "-o", tmp_path / "t")
    assert r.exit_code == 0, r.output
    header = (tmp_path / "t/aicore/kernel_route.h").read_text()
    assert "/* AICore router */" in header and '#line 87 "../wsp/moe_npu.wsp"' in header
    assert (tmp_path / "t/wsp/moe_npu.wsp").exists()  # what `#line` names, from aicore/
    assert all(str(tmp_path) not in v.decode() for v in tree(tmp_path / "t").values())


ASCEND_ONLY = '''\
sym N
input  X: f32[N, 4, 8]
output Y: f32[N, 4, 8]
kernel twice(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]])
    extern ascend """ /* AICore twice */ """
workload w() { for i in P(N) { twice[i](x = X[i], y = Y[i]) } }
schedule main = w()
'''

NO_C_BODY = ("ascend_only.wsp:4:8: error: kernel `twice` has no `extern c` body; the cpu_sim "
             "target runs extern kernels as C")


@pytest.fixture
def ascend_only(tmp_path):
    src = tmp_path / "src" / "ascend_only.wsp"
    src.parent.mkdir()
    src.write_text(ASCEND_ONLY)
    return src


def test_extern_ascend_only_checks_and_compiles_for_the_npu(ascend_only, tmp_path):
    r = CliRunner().invoke(main, ["check", str(ascend_only)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "t"
    r = compile_cli(ascend_only, "--target", "ascend_npu", "-o", out)
    assert r.exit_code == 0, r.output
    header = (out / "aicore/kernel_twice.h").read_text()
    assert "/* AICore twice */" in header and '#line 5 "../wsp/ascend_only.wsp"' in header
    assert "wsp_aicore_twice(tiles, scalars)" in (out / "aicore/dispatch.asc").read_text()
    assert all(str(tmp_path) not in v.decode() for v in tree(out).values())
    # the IR carries the body (and prints it); the passes leave the kernel alone
    ir, _ = optimize(ptowsp.load(str(ascend_only)).ir, 2)
    (k,) = ir.kernels
    assert k.is_extern and k.extern_c is None and "AICore twice" in k.extern_ascend
    assert k.ops == () and k.plan is None


@pytest.mark.parametrize("command", [["compile", "--target", "cpu_sim", "-o", "OUT"],
                                     ["run", "--bind", "N=2", "--random-inputs", "1",
                                      "--outputs", "OUT.npz"]])
def test_extern_ascend_only_is_an_error_on_cpu_sim(ascend_only, tmp_path, command):
    out = tmp_path / "out"
    args = [command[0], str(ascend_only)] + [
        str(out) if a == "OUT" else str(tmp_path / a) if a.startswith("OUT") else a
        for a in command[1:]]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert lines[0].endswith(NO_C_BODY), r.output
    assert lines[2].endswith("|        ^^^^^")  # under `twice`
    assert "Traceback" not in r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # no output at all
    with pytest.raises(ptowsp.WspError) as err:  # the Python API says the same
        ptowsp.load(str(ascend_only)).compile(target="cpu_sim")
    (d,) = err.value.diagnostics
    assert d.message in NO_C_BODY and (d.span.line, d.span.col) == (4, 8)


def test_module_compile_for_the_npu(ascend_only, tmp_path):
    """`Module.compile(target="ascend_npu")`: the same tree as the CLI, and its warnings."""
    project = ptowsp.load(str(ascend_only)).compile(target="ascend_npu")
    assert project.warnings == []
    assert "aicore/kernel_twice.h" in project.files and EXPECTED <= set(project.files)
    r = compile_cli(ascend_only, "--target", "ascend_npu", "-o", tmp_path / "cli")
    assert r.exit_code == 0, r.output
    assert project.write(tmp_path / "api") == tmp_path / "api"
    assert tree(tmp_path / "api") == tree(tmp_path / "cli")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # atomic: no temporaries
    # options are the back end's settings; warnings come with the combinator's span
    text = POLICY_HEAD + "schedule main = w().timing(batched(4))\n"
    p = ptowsp.parse(text, "p.wsp").compile(target="ascend_npu", npu_arch="dav-3510")
    assert 'set(WSP_NPU_ARCH "dav-3510"' in p.files["CMakeLists.txt"]
    (w,) = p.warnings
    assert w.severity == "warning" and (w.span.line, w.span.col) == (6, 21)  # `timing`
    # an extern c only kernel is the ascend error here too
    with pytest.raises(ptowsp.WspError) as err:
        ptowsp.load(str(ROOT / "examples/moe_extern.wsp")).compile(target="ascend_npu")
    assert "has no `extern ascend` body" in err.value.diagnostics[0].message


def test_missing_output_directory_is_a_usage_error():
    r = compile_cli(ROOT / "examples/rmsnorm.wsp", "--target", "ascend_npu")
    assert r.exit_code == 2 and "-o DIR" in r.output
    r = compile_cli(ROOT / "examples/rmsnorm.wsp", "--target", "ascend_npu", "-o", "x", "--emit", "ir")
    assert r.exit_code == 2 and "--emit does not apply" in r.output


def test_a_checker_error_writes_nothing(tmp_path):
    out = tmp_path / "bad"
    r = compile_cli(ROOT / "examples/errors_demo.wsp", "--target", "ascend_npu", "-o", out)
    assert r.exit_code == 1 and "errors_demo.wsp:9:13: error: unknown function `rowmaen`" in r.output
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_a_failed_compile_leaves_the_previous_tree(tmp_path):
    out = tmp_path / "t"
    assert compile_cli(ROOT / "examples/rmsnorm.wsp", "--target", "ascend_npu", "-o", out).exit_code == 0
    before = tree(out)
    (out / "stale.txt").write_text("from an older compile")
    r = compile_cli(ROOT / "examples/moe_extern.wsp", "--target", "ascend_npu", "-o", out)
    assert r.exit_code == 1 and tree(out) == {**before, "stale.txt": b"from an older compile"}
    assert compile_cli(ROOT / "examples/rmsnorm.wsp", "--target", "ascend_npu", "-o", out).exit_code == 0
    assert tree(out) == before  # replaced as a whole: the stale file is gone


def test_unwritable_output_is_a_user_error(tmp_path):
    (tmp_path / "file").write_text("")
    r = compile_cli(ROOT / "examples/rmsnorm.wsp", "--target", "ascend_npu", "-o", tmp_path / "file/x")
    assert r.exit_code == 1 and "cannot write" in r.output and "Traceback" not in r.output


def test_command_line_through_a_real_process(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ptowsp", "compile", str(ROOT / "examples/moe_extern.wsp"),
                           "--target", "ascend_npu", "-o", str(tmp_path / "o")],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "error: extern kernel `route`" in done.stderr
    done = subprocess.run([sys.executable, "-m", "ptowsp", "compile", str(ROOT / "examples/gemm.wsp"),
                           "--target", "ascend_npu", "-o", str(tmp_path / "g"), "--npu-arch", "dav-3510"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert 'set(WSP_NPU_ARCH "dav-3510"' in (tmp_path / "g/CMakeLists.txt").read_text()


def test_provably_strided_columns_are_an_error():
    text = textwrap.dedent("""\
        sym N
        input  X: f32[N, 4, 8, 3]
        output Y: f32[N, 4, 8]
        kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
        workload w() { for i in P(N) { copy[i](x = X[i, :, :, 0], y = Y[i]) } }
        schedule main = w()
        """)
    with pytest.raises(ptowsp.WspError) as err:
        project(Path("s.wsp"), text=text)
    (d,) = err.value.diagnostics
    assert "the columns of `x` are 3 elements apart in `X`" in d.message and d.span.line == 5


def test_the_scripts_generate_and_verify_data(tmp_path):
    """gen_data.py writes inputs and (through ptowsp) expected outputs; verify_result.py
    accepts outputs equal to them and rejects others."""
    out = tmp_path / "t"
    assert compile_cli(ROOT / "examples/softmax.wsp", "--target", "ascend_npu", "-o", out).exit_code == 0
    data = tmp_path / "data"

    def script(name, *args):
        return subprocess.run([sys.executable, str(out / "scripts" / name), "--data", str(data),
                               *args], capture_output=True, text=True, check=False)

    done = script("gen_data.py", "--target", "ref", "R=32")
    assert done.returncode == 0, done.stderr
    x = np.load(data / "input/X.npy")
    assert x.shape == (32, 128) and x.dtype == np.float32
    expected = np.load(data / "expected/Y.npy")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    assert np.allclose(expected, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    shutil.copy(data / "expected/Y.npy", data / "output/Y.npy")
    done = script("verify_result.py")
    assert done.returncode == 0 and "Y: ok" in done.stdout
    np.save(data / "output/Y.npy", expected * 1.01)
    done = script("verify_result.py")
    assert done.returncode == 1 and "Y: MISMATCH" in done.stdout


@pytest.mark.parametrize("what", ["folder", "file", "link"])
def test_o_never_replaces_what_is_not_a_project(tmp_path, what):
    """`-o src` by mistake: a folder of the user's (or a file, or a link) is an error and is
    left as it was, from the CLI and from `Project.write`; a project tree is replaced."""
    out = tmp_path / "src"
    if what == "folder":
        out.mkdir()
        (out / "main.c").write_text("keep me")
    elif what == "file":
        out.write_text("keep me")
    else:
        (tmp_path / "elsewhere").mkdir()
        out.symlink_to(tmp_path / "elsewhere")
    before = tree(tmp_path)
    r = compile_cli(ROOT / "examples/rmsnorm.wsp", "--target", "ascend_npu", "-o", out)
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert f"{out}: error: exists and is not a wspc artifact directory: not replacing it" in r.output
    assert "help: remove it, or choose another output directory" in r.output
    project = ptowsp.load(str(ROOT / "examples/rmsnorm.wsp")).compile(target="ascend_npu")
    with pytest.raises(ptowsp.WspError, match="not replacing it"):
        project.write(out)
    assert tree(tmp_path) == before and out.is_symlink() == (what == "link")
    # an empty folder, and a tree it wrote itself, are replaced
    proj = tmp_path / "proj"
    proj.mkdir()
    assert project.write(proj) == proj and (proj / "CMakeLists.txt").is_file()
    assert compile_cli(ROOT / "examples/rmsnorm.wsp", "--target", "ascend_npu", "-o", proj).exit_code == 0
