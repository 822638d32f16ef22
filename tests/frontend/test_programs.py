"""Every valid program (the spec's examples, tests/programs, examples/) checks, through the
library and through the `wspc check` command."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from ptowsp.cli import main
from ptowsp.frontend.checker import check_file

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "tests" / "programs").glob("*.wsp")) + sorted((ROOT / "examples").glob("*.wsp"))
PROGRAMS = [p for p in PROGRAMS if not p.name.startswith("errors_")]


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_valid_program_checks(path: Path):
    env = check_file(str(path))
    assert env.workloads or env.kernels or env.consts


def test_wspc_check_accepts_all_programs():
    result = CliRunner().invoke(main, ["check", *map(str, PROGRAMS)])
    assert result.exit_code == 0, result.output
    assert result.output.count(": ok: ") == len(PROGRAMS)
