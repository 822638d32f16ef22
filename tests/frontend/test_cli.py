"""The `wspc` command: exit statuses, rendered diagnostics, no tracebacks, no partial output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from ptowsp.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "errors_demo.wsp"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptowsp", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_rendered_multi_error_output_snapshot(golden):
    result = run("check", "examples/errors_demo.wsp")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    golden("errors_demo.txt", result.stderr)


def test_check_ok_prints_a_summary_and_exits_0():
    result = run("check", "examples/rmsnorm.wsp")
    assert result.returncode == 0, result.stderr
    assert "examples/rmsnorm.wsp: ok: module `rmsnorm`" in result.stdout


def test_check_reports_every_file_then_exits_1(tmp_path):
    bad = tmp_path / "bad.wsp"
    bad.write_text("const A = \n")
    result = CliRunner().invoke(main, ["check", str(bad), str(ROOT / "examples/rmsnorm.wsp")])
    assert result.exit_code == 1
    assert f"{bad}:1:10: error: expected an expression, found end of file" in result.output
    assert "rmsnorm.wsp: ok" in result.output


def test_missing_file_is_a_user_error():
    result = CliRunner().invoke(main, ["check", "no/such/file.wsp"])
    assert result.exit_code == 1
    assert "no/such/file.wsp: error: cannot read file: no such file" in result.output


def test_emit_ast_is_stable_and_written_atomically(tmp_path, golden):
    out = tmp_path / "ast.txt"
    result = CliRunner().invoke(main, ["compile", "examples/rmsnorm.wsp", "--emit", "ast", "-o", str(out)])
    assert result.exit_code == 0, result.output
    golden("rmsnorm.ast", out.read_text())
    assert [p.name for p in tmp_path.iterdir()] == ["ast.txt"]  # no temporary left behind


def test_compile_error_writes_no_output(tmp_path):
    out = tmp_path / "ast.txt"
    result = CliRunner().invoke(main, ["compile", str(DEMO), "--emit", "ast", "-o", str(out)])
    assert result.exit_code == 1
    assert not out.exists() and not list(tmp_path.iterdir())


def test_usage_errors_exit_2():
    assert CliRunner().invoke(main, ["check"]).exit_code == 2
    assert CliRunner().invoke(main, ["frobnicate"]).exit_code == 2


def test_internal_errors_exit_70_and_hide_the_traceback(monkeypatch):
    import ptowsp.frontend.checker as checker

    def boom(path):
        raise ValueError("synthetic bug")

    monkeypatch.setattr(checker, "check_file", boom)
    result = CliRunner().invoke(main, ["check", "examples/rmsnorm.wsp"])
    assert result.exit_code == 70
    assert "internal error in check: ValueError: synthetic bug" in result.output
    assert "Traceback" not in result.output
    result = CliRunner().invoke(main, ["--debug", "check", "examples/rmsnorm.wsp"])
    assert result.exit_code == 70 and "Traceback" in result.output


def test_an_internal_error_names_its_stage_once(monkeypatch):
    import ptowsp.frontend.checker as checker
    from ptowsp.diagnostics import InternalError

    def boom(path):
        raise InternalError("verify", "a loop variable is bound twice")

    monkeypatch.setattr(checker, "check_file", boom)
    result = CliRunner().invoke(main, ["check", "examples/rmsnorm.wsp"])
    assert result.exit_code == 70
    assert "wspc: internal error in verify: a loop variable is bound twice\n" in result.output
    assert result.output.count("internal error") == 1


def test_python_dash_m_and_no_numpy_import():
    code = ("import sys, runpy; sys.argv = ['wspc', 'check', '-q', 'examples/rmsnorm.wsp']\n"
            "try:\n    runpy.run_module('ptowsp', run_name='__main__')\nexcept SystemExit as e:\n"
            "    assert e.code in (0, None), e.code\n"
            "assert 'numpy' not in sys.modules and 'cffi' not in sys.modules, 'heavy import'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr


def test_grammar_tables_are_cached_and_lark_is_not_imported_on_a_warm_run(tmp_path):
    code = ("import sys\nfrom ptowsp.frontend.checker import check_file\n"
            "check_file('examples/rmsnorm.wsp')\nprint('lark' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(tmp_path)}
    cold = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert cold.returncode == 0, cold.stderr
    assert cold.stdout.strip() == "True"  # the first run builds the tables with Lark
    assert len(list(tmp_path.glob("grammar-*.marshal"))) == 1
    warm = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert warm.returncode == 0, warm.stderr
    assert warm.stdout.strip() == "False"  # later runs load them: no Lark, no rebuild


def test_unwritable_cache_still_checks(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(blocker / "cache")}
    result = subprocess.run([sys.executable, "-m", "ptowsp", "check", "examples/rmsnorm.wsp"],
                            capture_output=True, text=True, cwd=ROOT, env=env)
    assert result.returncode == 0, result.stderr


def test_caret_follows_tabs(tmp_path):
    src = tmp_path / "tab.wsp"
    src.write_text("kernel k(x: In[Tile[4, 4, f32]], y: Out[Tile[4, 4, f32]]) {\n\tstore(y, x + nope)\n}\n")
    result = CliRunner().invoke(main, ["check", str(src)])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == f"{src}:2:15: error: unknown name `nope`"
    source_line, caret_line = lines[1], lines[2]
    assert source_line.endswith("|     store(y, x + nope)")
    assert caret_line.index("^") == source_line.index("nope") and caret_line.count("^") == 4
