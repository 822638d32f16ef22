"""A fixed-seed slice of `make fuzz` (fuzz/harness.py): mutated programs through `wspc check`
and, where they check clean, through `run` on ref and cpu_sim. Nothing may end in exit 70, an
escaped exception, a signal, a hang or a ref / cpu_sim mismatch; a failure leaves the
reproducers under the test's temporary directory (printed below)."""

from __future__ import annotations

import pytest

from fuzz.harness import Fuzzer

pytestmark = pytest.mark.cc


def test_a_fixed_slice_of_the_fuzzer_finds_nothing(tmp_path):
    fz = Fuzzer(tmp_path, seed=20261126, runs=True)
    stats = fz.run(count=40, seconds=None)
    assert stats.inputs == 40
    assert not any(stats.findings.values()), f"{stats.line()}; reproducers in {tmp_path}/findings"
