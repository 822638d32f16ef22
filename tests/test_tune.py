"""`wspc tune` and `ptowsp.tune` (docs/tools.md, "wspc tune"): the given schedule is candidate 0
so the winner is never worse; the same budget gives the same answer; `--apply` adds the winner
to the file (every other byte kept) as a schedule that checks and whose modelled cycles are
what tune printed; a candidate that does not check is skipped; bad options, files and names
are diagnostics (exit 1, no traceback, the file untouched)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ptowsp
from ptowsp.tuning import Candidate, search

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "examples" / "softmax.wsp"
VARLEN = ROOT / "examples" / "attention_varlen.wsp"

pytestmark = pytest.mark.cc


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "wspc-cache"  # conftest's: the runtime built once


@pytest.fixture(autouse=True)
def _cache_dir(cache, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(cache))


def wspc(*args, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "ptowsp", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env=env)


def test_the_search_tries_the_given_point_first_and_stays_in_budget():
    calls = []

    def evaluate(points):
        calls.append(list(points))
        return [sum(p) if p != (1, 1, 1) else None for p in points]

    small = search([2, 2], evaluate, budget=10)
    assert [p for p, _ in small] == [(0, 0), (0, 1), (1, 0), (1, 1)]  # all, in order
    big = search([3, 3, 3], evaluate, budget=7, seed=1)
    assert big[0] == ((0, 0, 0), 0) and len(big) == 7
    assert len({p for p, _ in big}) == 7  # no point twice
    assert search([3, 3, 3], evaluate, budget=7, seed=1) == big  # seeded: the same points


def test_the_winner_is_never_worse_and_the_same_budget_gives_the_same_answer():
    m = ptowsp.load(str(SOFTMAX))
    first = ptowsp.tune(m, budget=10, bindings={"R": 256})
    assert first.given.chain == ".dispatch(round_robin(2))"
    assert first.candidates[0] is first.given and len(first.candidates) == 10
    assert first.best.cycles <= first.given.cycles
    again = ptowsp.tune(m, budget=10, bindings={"R": 256})
    assert again.candidates == first.candidates and again.best == first.best
    assert first.deterministic and first.schedule_text("s").startswith("schedule s = rows()")
    with pytest.raises(ValueError, match="budget must be a positive number of candidates"):
        ptowsp.tune(m, budget=0)
    with pytest.raises(ValueError, match="seconds must be a positive number"):
        ptowsp.tune(m, seconds=-1)
    with pytest.raises(ValueError, match="in candidates or in seconds, not both"):
        ptowsp.tune(m, budget=3, seconds=1)


def test_a_candidate_that_does_not_check_is_skipped_and_data_comes_random():
    # the ragged attention: a `.reorder` of its P.seq loop does not check, and `seq_lens`,
    # whose elements decide the task space, is filled with random data
    r = ptowsp.tune(ptowsp.load(str(VARLEN)), budget=12,
                    bindings={"B": 2, "H": 2, "S": 64})
    assert r.random_inputs == ("seq_lens",)
    failed = [c for c in r.candidates if c.cycles is None]
    assert failed and all(c.error for c in failed)
    assert any("P.seq" in c.error or "read at run time" in c.error for c in failed)
    assert r.best.cycles <= r.given.cycles


def test_apply_writes_a_schedule_that_checks_with_the_printed_cycles(tmp_path, cache):
    f = tmp_path / "softmax.wsp"
    original = SOFTMAX.read_bytes()
    f.write_bytes(original)
    r = wspc("tune", f, "--budget", "6", "--bind", "R=256", "--apply", "--name", "fast",
             cache=cache)
    assert r.returncode == 0, r.stderr
    best = int(re.search(r"^best: (\d+) cycles", r.stdout, re.M).group(1))
    given = int(re.search(r"^given +(\d+) ", r.stdout, re.M).group(1))
    assert best <= given and "schedule tuned = rows()" in r.stdout
    assert f"wrote schedule `fast` into {f}" in r.stdout
    text = f.read_bytes()
    assert text.startswith(original)  # inserted, nothing reprinted
    assert b"schedule fast = rows()" in text[len(original):]
    assert wspc("check", f, cache=cache).returncode == 0
    prog = ptowsp.load(str(f)).compile(schedule="fast")
    assert prog.simulate(bind={"R": 256}).total_cycles == best
    # a second --apply under the same name is refused, and the file is left as it is
    again = wspc("tune", f, "--budget", "2", "--bind", "R=256", "--apply", "--name", "fast",
                 cache=cache)
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert ("already has a schedule named `fast`, and --apply would add a schedule `fast`"
            in again.stderr)
    assert f.read_bytes() == text


def test_a_time_budget_says_it_is_not_deterministic(cache):
    # the first candidate is always tried, however short the time
    r = wspc("tune", SOFTMAX, "--seconds", "0.001", "--bind", "R=64", cache=cache)
    assert r.returncode == 0, r.stderr
    assert "a time budget, so another run may try more or fewer and answer differently" in r.stdout
    assert "schedule tuned = rows()" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["--budget", "0"],
     "--budget 0: error: the budget must be at least 1 candidate (the given schedule)"),
    (["--seconds", "0"], "--seconds 0: error: the time budget must be a positive number of seconds"),
    (["--budget", "3", "--seconds", "2"], "error: give --budget or --seconds, not both"),
    (["--schedule", "nope"], "error: module `softmax` has no schedule `nope`"),
    (["--bind", "Q=3"], "error: `Q` is not a sym of module `softmax`"),
])
def test_bad_options_are_diagnostics(args, message, cache):
    r = wspc("tune", SOFTMAX, *args, cache=cache)
    assert r.returncode == 1 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_bad_files_are_diagnostics(tmp_path, cache):
    missing = wspc("tune", tmp_path / "missing.wsp", cache=cache)
    assert missing.returncode == 1 and "missing.wsp: error: cannot read file" in missing.stderr
    none = tmp_path / "none.wsp"
    none.write_text("module none\nsym N = 4\ninput X: f32[N, 16]\n")
    r = wspc("tune", none, "--apply", cache=cache)
    assert r.returncode == 1 and "module `none` has nothing to run" in r.stderr
    assert none.read_text() == "module none\nsym N = 4\ninput X: f32[N, 16]\n"
    bad = tmp_path / "bad.wsp"
    bad.write_text("module bad\nschedule main = nothing()\n")
    r = wspc("tune", bad, cache=cache)
    assert r.returncode == 1 and "bad.wsp:2:" in r.stderr and "Traceback" not in r.stderr


def test_a_candidate_prints_as_a_declaration():
    c = Candidate(".dispatch(affinity(b, n = 4)).streams(2).task_graph(window = 64, mode = stall)",
                  10)
    assert c.schedule_text("t", "w()") == ("schedule t = w()\n    .dispatch(affinity(b, n = 4))"
                                           "\n    .streams(2)\n    .task_graph(window = 64, "
                                           "mode = stall)")


# A block size the search may change: RB sizes only the tiles and the task count (more rows a
# task, fewer tasks to dispatch); C also sizes the tensors, so it is never changed.
BLOCKS = """\
// rows of X, RB rows a task
module blocks

sym R = 1024
const RB = 8    // rows a task: a tile size
const C = 64    // columns: sizes the tensors

input X: f32[R, C]
output Y: f32[R, C]

kernel rows_of(x: In[Tile[RB, C, f32]], y: Out[Tile[RB, C, f32]]) {
    store(y, OP)
}

workload rows() {
    for t in P(ceildiv(R, RB)) {
        rows_of[t](x = X[t * RB : min(t * RB + RB, R), :], y = Y[t * RB : min(t * RB + RB, R), :])
    }
}

schedule main = rows().dispatch(round_robin(4))
"""


def test_a_block_size_is_searched_and_apply_rewrites_only_its_number(tmp_path, cache):
    f = tmp_path / "blocks.wsp"
    original = BLOCKS.replace("OP", "softmax(x)")
    f.write_text(original)
    r = wspc("tune", f, "--budget", "24", "--apply", cache=cache)
    assert r.returncode == 0, r.stderr
    assert "tile size `RB` (file: 8) searched: 8, 16, 32" in r.stdout
    assert "tile size `C` not searched: no other value keeps the meaning (sizes tensor `X`)" \
        in r.stdout
    best = int(re.search(r"^best: (\d+) cycles", r.stdout, re.M).group(1))
    given = int(re.search(r"^given +(\d+) ", r.stdout, re.M).group(1))
    assert best < given
    changed = re.search(r"^const RB = (\d+)  // was 8$", r.stdout, re.M)
    assert changed and int(changed.group(1)) > 8
    text = f.read_text()
    # the number only: the comment, the spacing and every other line as they were
    assert text.startswith(original.replace("const RB = 8    //", f"const RB = {changed.group(1)}"
                                                                  "    //"))
    assert "const C = 64    // columns" in text and "schedule tuned = rows()" in text
    prog = ptowsp.load(str(f)).compile(schedule="tuned")
    assert prog.simulate().total_cycles == best
    # the same budget: the same candidates, const choices included
    m = ptowsp.parse(original)
    first = ptowsp.tune(m, budget=24)
    assert first.candidates == ptowsp.tune(m, budget=24).candidates
    assert first.best.cycles == best and first.consts == {"RB": int(changed.group(1))}
    assert [c.name for c in first.tile_consts] == ["RB"] and "C" in first.meaning_consts
    # without tile sizes, as before: no const changed in any candidate
    plain = ptowsp.tune(m, budget=6, tile_sizes=False)
    assert not any(c.consts for c in plain.candidates) and not plain.tile_consts
    g = tmp_path / "plain.wsp"
    g.write_text(original)
    r = wspc("tune", g, "--budget", "3", "--no-tile-sizes", "--apply", cache=cache)
    assert r.returncode == 0 and "tile size" not in r.stdout and "const RB" not in r.stdout
    assert g.read_text().startswith(original)


def test_a_block_size_that_changes_the_outputs_is_never_chosen():
    # each row scaled by the rows of its tile: a bigger block gives other numbers, same shapes
    r = ptowsp.tune(ptowsp.parse(BLOCKS.replace("OP", "x * valid_rows(x)")), budget=24)
    tried = [c for c in r.candidates if c.consts]
    assert tried and all(c.cycles is None and "changes output `Y`" in c.error for c in tried)
    assert r.consts == {} and r.meaning_rejected


def test_tile_consts_are_those_of_tile_types_and_constexpr_arguments():
    from ptowsp.tile_sizes import sites

    m = ptowsp.parse(BLOCKS.replace("OP", "x").replace("const C = 64    // columns: sizes the "
                                                       "tensors", "const C = 64\nconst W = 4\n"
                                                       "const U = 2")
                     .replace("y: Out[Tile[RB, C, f32]])", "y: Out[Tile[RB, C, f32]], "
                              "n: Constexpr[i32])")
                     .replace("Y[t * RB : min(t * RB + RB, R), :])",
                              "Y[t * RB : min(t * RB + RB, R), :], n = W)"))
    # RB and C size tiles, W is passed to a Constexpr, U reaches no kernel
    found = sites(m.env.files, m.env.files[0].path)
    assert [(c.name, c.value, c.argument) for c in found] == [("RB", 8, False), ("C", 64, False),
                                                              ("W", 4, False)]
    # a literal passed to a `Constexpr` parameter: one tile size a call, after the consts
    lit = ptowsp.parse(LITERAL)
    assert [(c.name, c.value, c.kernel, c.param) for c in sites(lit.env.files, "<string>")] == [
        ("C", 64, "", ""),
        *((f"rows_of RB ({_at(LITERAL, needle, nth)})", value, "rows_of", "RB")
          for needle, nth, value in (("RB = 32", 0, 32), ("RB = 16", 0, 16), ("RB = 16", 1, 16)))]


# Literal `Constexpr` arguments: each call's literal is a tile size of its own. The first call's
# 8-row views provably fit a tile of 8 or 16 rows; the second's `Z[0:N, :]` fits a tile of 8 only
# when N <= 8, which only a run would tell; the third's 16 rows never fit one of 8.
LITERAL = """\
// rows of X in tasks of 8 rows; Z's first rows in one task (N: how many, bound at run time)
// and its first 16 in another; each task a tile of RB rows, passed as a literal
module lit

sym R = 256
sym N = 8
const C = 64

input X: f32[R, C]
input Z: f32[64, C]
output Y: f32[R, C]
output W: f32[64, C]
output V: f32[16, C]

kernel rows_of(x: In[Tile[RB, C, f32]], y: Out[Tile[RB, C, f32]], RB: Constexpr[i32]) {
    store(y, softmax(x))  // a row's softmax: the same for any RB
}

workload rows() {
    for t in P(ceildiv(R, 8)) {
        rows_of[t](x = X[t * 8 : min(t * 8 + 8, R), :], y = Y[t * 8 : min(t * 8 + 8, R), :],
                   RB = 32)
    }
    rows_of(x = Z[0:N, :], y = W[0:N, :], RB = 16)
    rows_of(x = Z[0:16, :], y = V, RB = 16)
}

schedule main = rows().dispatch(round_robin(4))
"""


def _at(text: str, needle: str, nth: int = 0) -> str:
    """`LINE:COL` of the number at the end of the `nth` occurrence of `needle` in `text`."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(needle, start + 1)
    number = start + len(needle) - len(needle.split()[-1])
    line = text.count("\n", 0, number) + 1
    return f"{line}:{number - (text.rfind(chr(10), 0, number) + 1) + 1}"


def _softmax(a):
    import numpy as np

    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_a_literal_constexpr_argument_is_searched_and_apply_writes_it_where_it_is(tmp_path, cache):
    import numpy as np

    from ptowsp.driver import format_text

    f = tmp_path / "lit.wsp"
    f.write_text(LITERAL)
    assert wspc("fmt", "--check", f, cache=cache).returncode == 0
    r = wspc("tune", f, "--budget", "32", "--apply", cache=cache)
    assert r.returncode == 0, r.stderr
    first, second, third = (f"rows_of RB ({_at(LITERAL, 'RB = 32')})",
                            f"rows_of RB ({_at(LITERAL, 'RB = 16')})",
                            f"rows_of RB ({_at(LITERAL, 'RB = 16', 1)})")
    # the file's value first, then the powers of two from 8 to 4x it that fit the call's views
    assert f"tile size `{first}` (file: 32) searched: 32, 8, 16, 64, 128\n" in r.stdout
    assert (f"tile size `{second}` (file: 16) searched: 16, 32, 64 (not 8: the call's views "
            "would fit it only at run time)") in r.stdout
    assert (f"tile size `{third}` (file: 16) searched: 16, 32, 64 (not 8: `x = Z[0:16, :]` is "
            "a [16, 64] view but `x` takes Tile[8, 64, f32])") in r.stdout
    best = int(re.search(r"^best: (\d+) cycles", r.stdout, re.M).group(1))
    given = int(re.search(r"^given +(\d+) ", r.stdout, re.M).group(1))
    assert best < given  # fewer padded rows a task
    changed = re.search(rf"^rows_of\[\.\.\.\]\(\.\.\., RB = (\d+)\)  // was 32, at {re.escape(str(f))}"
                        rf":{_at(LITERAL, 'RB = 32')}$", r.stdout, re.M)
    assert changed and int(changed.group(1)) in (8, 16), r.stdout
    value = int(changed.group(1))
    # the number at its own place; the file passed `wspc fmt --check`, so it is laid out again
    # (the shorter call now fits one line) and still passes; the comments stay
    text = f.read_text()
    assert text.startswith(format_text(LITERAL.replace("RB = 32", f"RB = {value}")))
    assert "RB = 16)\n    rows_of(x = Z[0:16, :], y = V, RB = 16)" in text
    assert f"// with {first} = {value} (was 32)\nschedule tuned = rows()" in text
    assert wspc("fmt", "--check", f, cache=cache).returncode == 0
    tuned = ptowsp.load(str(f))
    assert tuned.compile(schedule="tuned").simulate().total_cycles == best
    # what the file computes, before and after: each row's softmax (W's rows past N untouched)
    rng = np.random.default_rng(1)
    x, z = rng.standard_normal((256, 64), np.float32), rng.standard_normal((64, 64), np.float32)
    for prog in (ptowsp.parse(LITERAL).compile(target="ref"),
                 tuned.compile(target="ref", schedule="tuned")):
        out = prog.run(X=x, Z=z)
        np.testing.assert_allclose(out["Y"], _softmax(x), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(out["W"][:8], _softmax(z[:8]), rtol=1e-5, atol=1e-7)
        assert not out["W"][8:].any()
        np.testing.assert_allclose(out["V"], _softmax(z[:16]), rtol=1e-5, atol=1e-7)
    # the same budget from Python: the same search, so the same winner
    again = ptowsp.tune(ptowsp.parse(LITERAL), budget=32)
    assert again.consts == {first: value} and again.best.cycles == best
    assert [c.name for c in again.tile_consts] == [first, second, third]


LIB = """\
// the kernel of blocks.wsp and its block size
module blocks_lib

const RB = 8  // rows a task: a tile size
const C = 64  // columns: sizes the tensors

kernel rows_of(x: In[Tile[RB, C, f32]], y: Out[Tile[RB, C, f32]]) {
    store(y, softmax(x))
}
"""

IMPORTER = """\
// rows of X, RB rows a task (RB and the kernel: blocks_lib.wsp)
module blocks
import "blocks_lib.wsp"

sym R = 1024

input X: f32[R, C]
output Y: f32[R, C]

workload rows() {
    for t in P(ceildiv(R, RB)) {
        rows_of[t](x = X[t * RB : min(t * RB + RB, R), :], y = Y[t * RB : min(t * RB + RB, R), :])
    }
}

schedule main = rows().dispatch(round_robin(4))
"""


def test_a_const_of_an_imported_file_is_searched_and_apply_writes_it_there(tmp_path, cache):
    import numpy as np

    from ptowsp.driver import format_text

    lib, main = tmp_path / "blocks_lib.wsp", tmp_path / "blocks.wsp"
    lib.write_text(LIB)
    main.write_text(IMPORTER)
    assert wspc("fmt", "--check", lib, main, cache=cache).returncode == 0
    r = wspc("tune", main, "--budget", "24", "--apply", cache=cache)
    assert r.returncode == 0, r.stderr
    shown = str(lib.resolve())  # an imported file is named as diagnostics name it
    assert f"tile size `RB` ({shown}: 8) searched: 8, 16, 32\n" in r.stdout
    assert "tile size `C` not searched: no other value keeps the meaning (sizes tensor `X`)" \
        in r.stdout
    best = int(re.search(r"^best: (\d+) cycles", r.stdout, re.M).group(1))
    given = int(re.search(r"^given +(\d+) ", r.stdout, re.M).group(1))
    assert best < given  # fewer, bigger tasks
    changed = re.search(rf"^const RB = (\d+)  // was 8, in {re.escape(shown)}:4$", r.stdout, re.M)
    assert changed and int(changed.group(1)) > 8, r.stdout
    value = int(changed.group(1))
    assert (f"wrote `RB = {value}` into {shown} (imported by {main}: every module importing it "
            "gets the value)\n") in r.stdout
    assert f"wrote schedule `tuned` into {main}" in r.stdout
    # the const written in the file that declares it, its comment aligned again as `wspc fmt`
    # lays it out; the main file gets the schedule only
    assert lib.read_text() == format_text(LIB.replace("const RB = 8", f"const RB = {value}"))
    assert "const C = 64" in lib.read_text() and "// rows a task: a tile size" in lib.read_text()
    text = main.read_text()
    assert text.startswith(IMPORTER)
    assert f"// with RB = {value} (was 8, in {shown})\nschedule tuned = rows()" in text
    assert wspc("fmt", "--check", lib, main, cache=cache).returncode == 0
    tuned = ptowsp.load(str(main))
    assert tuned.compile(schedule="tuned").simulate().total_cycles == best
    x = np.random.default_rng(2).standard_normal((1024, 64), np.float32)
    out = tuned.compile(target="ref", schedule="tuned").run(X=x)
    np.testing.assert_allclose(out["Y"], _softmax(x), rtol=1e-5, atol=1e-7)
    # the same budget from Python, on the files as they were: the same winner
    (tmp_path / "before").mkdir()
    for f, t in ((lib, LIB), (main, IMPORTER)):
        (tmp_path / "before" / f.name).write_text(t)
    again = ptowsp.tune(ptowsp.load(str(tmp_path / "before" / main.name)), budget=24)
    assert again.consts == {"RB": value} and again.best.cycles == best
    assert [c.file for c in again.tile_consts] == [str((tmp_path / "before" / lib.name).resolve())]
