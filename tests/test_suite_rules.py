"""The rules the test suite keeps so that it neither flakes nor misses (docs/architecture.md,
"Tests"), checked on the suite's own source:

- no test reads the clock: elapsed time is never what a test asserts (a loaded machine makes
  any bound flaky); waits are hang guards (tests/guard.py) and timing is in benchmarks/;
- no test depends on a path of one machine: what a test needs ships under tests/;
- hypothesis runs are reproducible: the `ci` profile (derandomized, with the reproduction blob
  printed, no deadline) is the default of every `settings(...)`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import settings

TESTS = Path(__file__).resolve().parent
CLOCK = {"time", "perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "sleep",
         "time_ns", "process_time"}
GUARD = TESTS / "guard.py"


def _sources():
    return [p for p in sorted(TESTS.rglob("*.py")) if p != Path(__file__).resolve()]


def test_no_test_reads_the_clock():
    found = []
    for path in _sources():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "time":
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}: from time import ...")
            elif isinstance(node, ast.Import) and any(a.name == "time" for a in node.names):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}: import time")
            elif (isinstance(node, ast.Attribute) and node.attr in CLOCK
                  and isinstance(node.value, ast.Name) and node.value.id == "time"):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}: time.{node.attr}")
    assert not found, ("tests assert behaviour, never elapsed time (hang guards: tests/guard.py; "
                       "timing: benchmarks/):\n" + "\n".join(found))


def test_the_hang_guard_waits_without_reading_the_clock():
    # tests/guard.py waits with Thread.join(timeout): the limit turns a hang into a failure
    text = GUARD.read_text()
    assert "join(seconds)" in text and "import time" not in text


def test_no_test_depends_on_a_path_of_one_machine():
    found = []
    for path in _sources():
        for k, line in enumerate(path.read_text().splitlines(), 1):
            for prefix in ('"/work/', "'/work/", '"/home/', "'/home/", '"/tmp/', "'/tmp/"):
                if prefix in line:
                    found.append(f"{path.relative_to(TESTS)}:{k}: {line.strip()}")
    assert not found, "ship what a test needs under tests/ instead:\n" + "\n".join(found)


def test_hypothesis_runs_are_reproducible():
    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.print_blob and ci.deadline is None
    if settings._current_profile != "ci":
        pytest.skip(f"run with the {settings._current_profile!r} profile, chosen explicitly")
    assert settings.default.derandomize and settings.default.print_blob
