"""The README's example program is a valid program, and its sample diagnostic is real."""

from __future__ import annotations

import re
from pathlib import Path

from ptowsp.frontend.checker import check_source

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_example_checks():
    (program,) = re.findall(r"```wsp\n(.*?)```", README, re.S)
    env = check_source(program, "scale.wsp")
    assert set(env.kernels) == {"double"} and set(env.schedules) == {"main"}


def test_readme_sample_diagnostic_is_what_wspc_prints():
    (sample,) = re.findall(r"```text\n(.*?)```", README, re.S)
    golden = (ROOT / "tests" / "golden" / "errors_demo.txt").read_text()
    assert sample.strip() in golden
