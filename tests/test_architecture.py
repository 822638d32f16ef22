"""The structure of the code, as docs/architecture.md draws it, checked like behaviour.

- the layers and "no import cycle" (import-linter, contracts in pyproject.toml);
- ruff's lint (pyflakes, isort, bugbear) over the repository;
- one concept per file: nothing under ptowsp/ or runtime_c/ is over about 900 lines unless its
  top comment says why it must be one file (a line starting `Why one file:`);
- the pipeline is written once: only the driver lowers, optimises and picks a back end;
- no code outside ptowsp/backends/ compares target names.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ptowsp"
MAX_LINES = 900
TARGET_NAMES = ("cpu_sim", "ascend_npu", "ref")


def _sources(*patterns: str) -> list[Path]:
    found: list[Path] = []
    for pattern in patterns:
        found += [p for p in ROOT.glob(pattern) if "__pycache__" not in p.parts]
    return sorted(set(found))


def test_import_layers_and_no_cycles():
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    r = subprocess.run([sys.executable, "-c", code, "--no-cache"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_is_clean():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("path", _sources("ptowsp/**/*.py", "runtime_c/*.c", "runtime_c/*.h",
                                          "ptowsp/backends/**/*.j2", "ptowsp/backends/cpu/*.h"),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_a_file_holds_one_concept(path: Path):
    lines = path.read_text(encoding="utf-8").splitlines()
    if len(lines) <= MAX_LINES:
        return
    head = "\n".join(lines[:60])
    assert re.search(r"^\W*Why one file:", head, re.M), (
        f"{path.relative_to(ROOT)} has {len(lines)} lines: split it by concept, or say at its "
        "top (a line starting `Why one file:`) why it must stay one file")


def _code_lines(path: Path):
    """(line number, text) of a Python file, comments and docstrings left out."""
    import ast
    import io
    import tokenize

    text = path.read_text(encoding="utf-8")
    doc_lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            doc_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    comments = {tok.start[0]: tok.start[1] for tok in
                tokenize.generate_tokens(io.StringIO(text).readline) if tok.type == tokenize.COMMENT}
    for n, line in enumerate(text.splitlines(), 1):
        if n in doc_lines:
            continue
        yield n, line[:comments[n]] if n in comments else line


@pytest.mark.parametrize("call", ["lower(", "optimize(", "verify(", "choose_schedule("])
def test_only_the_driver_runs_the_pipeline(call: str):
    allowed = {PACKAGE / "driver.py"}
    defining = {"lower(": PACKAGE / "lower", "optimize(": PACKAGE / "ir" / "passes",
                "verify(": PACKAGE / "ir", "choose_schedule(": PACKAGE / "driver.py"}[call]
    offenders = []
    # a bare call or one through a module other than the driver (`passes.optimize(m)`), not
    # str.lower(); calling the driver's stage functions is what everyone else does
    pattern = re.compile(r"(?<![\w.])" + re.escape(call) + r"|(?<!\bdriver)\." + re.escape(call)
                         + r"(?!\))")
    for path in _sources("ptowsp/**/*.py"):
        if path in allowed or path == defining or defining in path.parents:
            continue
        for n, line in _code_lines(path):
            if pattern.search(line) and not re.match(r"\s*def ", line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, f"`{call}` called outside the driver:\n" + "\n".join(offenders)


def test_no_target_names_compared_outside_the_back_ends():
    names = "|".join(TARGET_NAMES)
    pattern = re.compile(rf"""(==|!=|\bin\b)\s*\(?\s*["']({names})["']|["']({names})["']\s*(==|!=)""")
    offenders = []
    for path in _sources("ptowsp/**/*.py"):
        if PACKAGE / "backends" in path.parents:
            continue
        for n, line in _code_lines(path):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "target names compared outside backends/:\n" + "\n".join(offenders)
