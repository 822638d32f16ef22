"""Every file in tests/errors/ states its own expected diagnostics; this runner checks them all.

A line `// error: LINE:COL text` (anywhere in the file) expects a diagnostic at LINE:COL whose
message contains `text`; `// help: text` right after it also expects that help text. The
diagnostics reported must be exactly the expected ones: none missing, none extra. Files under
tests/errors/lib/ are imported by the others and are not run on their own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ptowsp.diagnostics import WspError
from ptowsp.frontend.checker import check_file

ERRORS = Path(__file__).resolve().parents[1] / "errors"
CASES = sorted(ERRORS.glob("*.wsp"))
EXPECT = re.compile(r"//\s*error:\s*(\d+):(\d+)\s+(.*?)\s*$")
HELP = re.compile(r"//\s*help:\s*(.*?)\s*$")


def expectations(path: Path) -> list[tuple[int, int, str, str | None]]:
    out: list[list] = []
    for line in path.read_text().splitlines():
        m = EXPECT.search(line)
        if m:
            out.append([int(m.group(1)), int(m.group(2)), m.group(3), None])
            continue
        h = HELP.search(line)
        if h and out:
            out[-1][3] = h.group(1)
    return [tuple(x) for x in out]


def test_enough_error_situations():
    assert len(CASES) >= 40, f"only {len(CASES)} error files"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_error_file(path: Path):
    expected = expectations(path)
    assert expected, f"{path.name} states no `// error: LINE:COL text` expectation"
    with pytest.raises(WspError) as info:
        check_file(str(path))
    got = [(d.span.line, d.span.col, d.message, d.help) for d in info.value.diagnostics]
    unmatched = list(got)
    missing = []
    for line, col, text, help_text in expected:
        for g in unmatched:
            if g[0] == line and g[1] == col and text in g[2] and (help_text is None or (g[3] and help_text in g[3])):
                unmatched.remove(g)
                break
        else:
            missing.append((line, col, text, help_text))
    assert not missing and not unmatched, (
        f"{path.name}:\n  expected but not reported: {missing}\n  reported but not expected: {unmatched}"
    )
