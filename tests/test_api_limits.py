"""The limits of a run through the Python API (`Program.run`): sizes that do not fit in memory,
syms past int64 and worker counts out of range are errors before anything is allocated or
started, as on the command line (docs/running.md, "Limits")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp import WspError
from ptowsp.limits import MAX_WORKERS, memory_limit, parse_size, size_text

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "examples" / "softmax.wsp"  # sym R = 4096; X, Y: f32[R, 128]


@pytest.fixture(scope="module")
def prog():
    return ptowsp.load(SOFTMAX).compile(target="ref")


def test_a_size_past_the_machine_is_an_error_at_the_sym(prog):
    with pytest.raises(WspError) as info:
        prog.run(bind={"R": 2**31}, random_inputs=1)
    text = info.value.render()
    assert "softmax.wsp:4:5: error: the tensors need 2048.0 GiB of memory with R = 2147483648" in text
    assert "`X` 1024.0 GiB, `Y` 1024.0 GiB" in text and "machine's memory" in text


def test_max_memory_in_bytes_or_as_a_size(prog):
    for limit in (3 * 2**20, "3M", "3MiB"):
        with pytest.raises(WspError, match="more than max_memory"):
            prog.run(random_inputs=1, max_memory=limit)  # R = 4096: 4 MiB
    out = prog.run(bind={"R": 16}, random_inputs=1, max_memory="1M")
    assert out["Y"].shape == (16, 128)


def test_an_inout_counts_twice():
    src = ("module m\nsym N\ninout A: f32[N, 16]\n"
           "kernel k(a: InOut[Tile[1, 16, f32]]) { store(a, a + 1.0) }\n"
           "workload w() { for i in P(N) { k[i](a = A[i : i + 1, :]) } }\nschedule main = w()\n")
    prog = ptowsp.parse(src, "m.wsp").compile(target="ref")
    a = np.zeros((16, 16), np.float32)  # 1 KiB: the caller's and the run's copy are 2 KiB
    assert prog.run(A=a, max_memory=2048)["A"][0, 0] == 1.0
    with pytest.raises(WspError, match="the tensors need 2.0 KiB"):
        prog.run(A=a, max_memory=2047)


def test_a_sym_past_int64(prog):
    with pytest.raises(WspError) as info:
        prog.run(bind={"R": 10**30}, random_inputs=1)
    assert "softmax.wsp:4:5: error: sym `R` is bound to 1000000000000000000000000000000, " \
           "more than a sym can be (2^63 - 1" in info.value.render()


@pytest.mark.parametrize("workers", [0, -1, MAX_WORKERS + 1, 2**31, 1.5, "4", True])
def test_workers_out_of_range(prog, workers):
    with pytest.raises(ValueError, match=f"workers must be a whole number from 1 to {MAX_WORKERS}"):
        prog.run(bind={"R": 16}, random_inputs=1, workers=workers)


def test_workers_in_range(prog):
    assert prog.run(bind={"R": 16}, random_inputs=1, workers=np.int64(MAX_WORKERS))["Y"].shape \
        == (16, 128)


@pytest.mark.parametrize("bad", ["8X", "", "-1G", "0", "1e9", "٣G", "G", "8192P"])
def test_bad_sizes(bad):
    with pytest.raises(ValueError):
        parse_size(bad)
    with pytest.raises(ValueError):
        memory_limit(bad)


def test_sizes():
    assert parse_size("8G") == 8 * 2**30 and parse_size("512m") == 512 * 2**20
    assert parse_size("1.5GiB") == 3 * 2**29 and parse_size("4096") == 4096
    assert parse_size("2KB") == 2048 and parse_size("1T") == 2**40
    assert size_text(2**40) == "1024.0 GiB" and size_text(3 * 2**20) == "3.0 MiB"
    assert size_text(100) == "100 bytes"
    assert parse_size("8191.99P") < 2**63
    for bad in (0, 2**63, -5, 1.5, True):
        with pytest.raises(ValueError):
            memory_limit(bad)


def test_the_machine_limit_is_at_most_physical_memory():
    import os

    limit = memory_limit()
    assert 0 < limit.bytes <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert not limit.option


@pytest.mark.cc
def test_simulate_checks_the_arrays_it_makes_when_kernels_run(wspc_cache):
    # moe's routing is computed in the run: simulating it runs the kernels on real arrays
    prog = ptowsp.load(ROOT / "examples" / "moe.wsp").compile(target="cpu_sim")
    with pytest.raises(WspError) as info:
        prog.simulate(bind={"T": 16}, max_memory="1K")
    text = info.value.render()
    assert "moe.wsp:32:1: error: the tensors need 786.2 KiB of memory" in text
    assert "note:" not in text  # the blamed tensor's size is its own: no sym to point at
    assert prog.simulate(bind={"T": 16}).total_cycles > 0


@pytest.mark.cc
def test_simulate_without_kernels_needs_no_memory_for_its_sizes(wspc_cache):
    src = ("module m\nsym N\ninput X: f32[N, 16]\noutput Y: f32[N, 16]\n"
           "kernel k(x: In[Tile[1, 16, f32]], y: Out[Tile[1, 16, f32]]) { store(y, x) }\n"
           "workload w() { for i in P(N) { k[i](x = X[i : i + 1, :], y = Y[i : i + 1, :]) } }\n"
           "schedule main = w()\n")
    prog = ptowsp.parse(src, "m.wsp").compile(target="cpu_sim")
    # the tensors would need 122.1 MiB; the cycle model's records of the tasks, 61.0 MiB
    assert prog.simulate(bind={"N": 10**6}, max_memory="100M").task_count == 10**6
    # ... which do count (docs/running.md, "Memory")
    with pytest.raises(WspError, match="need 4.0 KiB for the cycle model's records"):
        prog.simulate(bind={"N": 64}, max_memory="1K")


SHIFT = ("module shift\nsym N = 4, S = 0\ninput X: f32[N, 16]\noutput Y: f32[N, 16]\n"
         "kernel k(x: In[Tile[1, 16, f32]], y: Out[Tile[1, 16, f32]]) { store(y, x) }\n"
         "workload w() { for i in P(N) { k[i](x = X[i + S : i + S + 1, :], y = Y[i : i + 1, :]) } }\n"
         "workload sq() { for i in P(N * N) { k[i](x = X[0 : 1, :], y = Y[0 : 1, :]) } }\n"
         "schedule main = w()\nschedule square = sq()\n")


@pytest.mark.parametrize("target", ["ref", pytest.param("cpu_sim", marks=pytest.mark.cc)])
def test_view_arithmetic_past_int64_is_an_error_at_the_sym(target, wspc_cache):
    prog = ptowsp.parse(SHIFT, "shift.wsp").compile(target=target)
    with pytest.raises(WspError) as info:
        prog.run(bind={"S": 2**63 - 1}, random_inputs=1)
    text = info.value.render()
    assert "shift.wsp:2:12: error: with N = 4, S = 9223372036854775807, `S + i` may reach " \
           "9223372036854775810, past the runtime's int64 arithmetic (2^63 - 1)" in text
    assert "shift.wsp:6:37: note: computed here" in text  # at the view (its argument)
    # one below: the view check reports the real value, not a wrapped one
    with pytest.raises(WspError, match="found 92233720368547758[0-9]+ and 4"):
        prog.run(bind={"S": 2**63 - 8}, random_inputs=1)


def test_a_loop_extent_past_int64_and_only_the_schedule_that_runs():
    m = ptowsp.parse(SHIFT, "shift.wsp")
    with pytest.raises(WspError, match=r"with N = 4294967296, `N \* N` may reach 18446744073709551616"):
        m.compile(target="ref", schedule="square").run(bind={"N": 2**32}, max_memory="1T",
                                                       random_inputs=1)
    # main has no N * N: its own sizes are the limit (here: the memory)
    with pytest.raises(WspError, match="the tensors need"):
        m.compile(target="ref", schedule="main").run(bind={"N": 2**32}, random_inputs=1)


def test_memory_taken_by_others_during_the_run_is_an_error_not_a_crash(monkeypatch):
    # the sizes fit the limit, but the allocation fails (other processes took the memory)
    program = ptowsp.load(SOFTMAX).compile(target="ref")

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(program._backend, "run", no_memory)
    with pytest.raises(WspError) as info:
        program.run(bind={"R": 16}, random_inputs=1)
    assert "the run ran out of memory (its tensors fit in" in info.value.render()


def test_constants_past_python_printable_integers_are_shown_by_magnitude():
    """A hostile file can fold constants of thousands of digits (`128 * 128 * ...`), which
    Python refuses to print (past 4,300 digits): messages show them as `about 2^k` (before:
    exit 70, found by `make fuzz`)."""
    from ptowsp.limits import int_text

    assert int_text(-(2**40)) == "-1099511627776" and int_text(7**1000).startswith("about 2^")
    big = " * ".join(["128"] * 2100)  # 2^14700: 4,426 digits
    with pytest.raises(WspError) as info:
        ptowsp.parse(f"sym N\noutput Y: f32[N, 0 - {big}]\n", "t.wsp").compile(target="ref")
    assert "tensor dimension is negative (-about 2^14700)" in info.value.render()
    chain = " * ".join(["M"] * 200)  # with M = 2^40: 2^8000 (an expression holds 256 factors)
    text = ("sym N, M\ninput X: f32[N, 16]\noutput Y: f32[N, 16]\n"
            "kernel k(x: In[Tile[1, 16, f32]], y: Out[Tile[1, 16, f32]]) { store(y, x) }\n"
            f"workload w() {{ for i in P(N) {{ k[i](x = X[{chain} + i], y = Y[i]) }} }}\n")
    with pytest.raises(WspError) as info:
        ptowsp.parse(text, "t.wsp").compile(target="ref").run(bind={"N": 2, "M": 2**40},
                                                                random_inputs=1)
    assert "may reach about 2^" in info.value.render()


def test_a_sym_default_past_printable_integers_is_shown_by_magnitude():
    big = " * ".join(["256"] * 1000)  # 2^8000 (found by `make fuzz`: exit 70 before)
    text = (f"sym N = {big}\ninput X: f32[N, 16]\noutput Y: f32[N, 16]\n"
            "kernel k(x: In[Tile[1, 16, f32]], y: Out[Tile[1, 16, f32]]) { store(y, x) }\n"
            "workload w() { for i in P(N) { k[i](x = X[i], y = Y[i]) } }\n")
    with pytest.raises(WspError) as info:
        ptowsp.parse(text, "t.wsp").compile(target="ref")
    assert "sym `N` defaults to about 2^8000, more than a sym can be" in info.value.render()


def test_a_program_remembers_only_the_sizes_whose_checks_passed(prog):
    """Program.run keeps the sym values whose checks passed (they decide those checks alone):
    the same sizes again skip them, but a limit, a size or a check that fails is still an
    error after any number of good runs."""
    x = np.ones((16, 128), np.float32)
    for _ in range(2):
        assert prog.run(X=x, max_memory="1M")["Y"].shape == (16, 128)
    with pytest.raises(WspError, match="the tensors need 16.0 KiB"):
        prog.run(X=x, max_memory=8192)  # the same sizes under another limit
    with pytest.raises(WspError, match="more than max_memory"):
        prog.run(random_inputs=1, max_memory="1M")  # R = 4096 from its default: 4 MiB
    with pytest.raises(WspError, match="has dtype float64"):
        prog.run(X=np.ones((16, 128)))  # remembered sizes, an array of the wrong dtype
    assert prog.run(X=x, max_memory="1M")["Y"].shape == (16, 128)


def test_a_cpu_sim_program_remembers_sizes_without_hiding_a_failed_check():
    src = ("module m\nsym N\nsym D = 4\ninput A: f32[N, 16]\noutput B: f32[N / D, 16]\n"
           "kernel k(a: In[Tile[1, 16, f32]], b: Out[Tile[1, 16, f32]]) { store(b, a + 1.0) }\n"
           "workload w() { for i in P(N / D) { k[i](a = A[i * D : i * D + 1, :], "
           "b = B[i : i + 1, :]) } }\nschedule main = w()\n")
    prog = ptowsp.parse(src, "m.wsp").compile(target="cpu_sim")
    a = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    for _ in range(2):
        np.testing.assert_array_equal(prog.run(A=a)["B"], a[::4] + 1)
    with pytest.raises(WspError, match="m.wsp:5:19: division by zero in `N / D`"):
        prog.run(A=a, bind={"D": 0})  # a divisor of zero: checked, not remembered
    np.testing.assert_array_equal(prog.run(A=a, bind={"D": 2})["B"], a[::2] + 1)
