"""User errors no other test triggered (tests/test_diagnostics_covered.py lists them in
ELSEWHERE): bindings through the API, the command line, compiling for a target, run-time checks
of views, indices and dimensions, machine files, and the `ref` back end's own entry point.

Each test makes the mistake a user can make and asserts the diagnostic's words (and, where it
has one, its place); the command line is driven in-process through click's runner, whose exit
status is the one `wspc` returns (1 for a user error, 2 for a bad command line)."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

import ptowsp
from ptowsp.backends.machine import load_machine
from ptowsp.backends.ref import RunError, execute
from ptowsp.cli import main
from ptowsp.diagnostics import WspError

pytestmark = pytest.mark.usefixtures("wspc_cache")

COPY = """\
sym N
input  X: f32[N, 4, 8]
output Y: f32[N, 4, 8]
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
workload w() { for i in P(N) { copy[i](x = X[i], y = Y[i]) } }
"""


def module(text: str = COPY, name: str = "t.wsp") -> ptowsp.Module:
    return ptowsp.parse(textwrap.dedent(text), name)


def one(err: WspError):
    (d,) = err.diagnostics
    return d


def user_error(fn) -> "ptowsp.diagnostics.Diagnostic":
    with pytest.raises(WspError) as info:
        fn()
    return one(info.value)


def wspc(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def copy_file(tmp_path):
    path = tmp_path / "copy.wsp"
    path.write_text(COPY)
    return path


# ---- bindings (api.py) ----------------------------------------------------------------------


def test_a_sym_given_two_values():
    text = COPY.replace("input  X: f32[N, 4, 8]", "input  X: f32[N, 4, 8]\ninput  Z: f32[N, 8]")
    p = module(text).compile("ref")
    d = user_error(lambda: p.run(X=np.zeros((2, 4, 8), np.float32),
                                 Z=np.zeros((3, 8), np.float32)))
    assert "`N` is 2 from the shape [2, 4, 8] of `X`" in d.message
    assert "but the shape [3, 8] of `Z` (the array) makes it 3" in d.message
    assert d.span.line == 3


def test_binding_an_unknown_sym():
    p = module().compile("ref")
    d = user_error(lambda: p.run(bind={"M": 1}, X=np.zeros((1, 4, 8), np.float32)))
    assert d.message == "`M` is not a sym of module `t`"


def test_binding_a_negative_sym():
    p = module().compile("ref")
    d = user_error(lambda: p.run(bind={"N": -1}))
    assert d.message == "sym `N` is bound to -1, but syms are non-negative integers"
    assert d.span.line == 1


def test_an_array_for_an_unknown_tensor():
    p = module().compile("ref")
    d = user_error(lambda: p.run(X=np.zeros((1, 4, 8), np.float32), Q=np.zeros(3)))
    assert d.message == "`Q` is not a tensor of module `t`"


def test_an_array_for_an_output():
    p = module().compile("ref")
    d = user_error(lambda: p.run(X=np.zeros((1, 4, 8), np.float32),
                                 Y=np.zeros((1, 4, 8), np.float32)))
    assert d.message == "`Y` is an output; it takes no input array"
    assert d.span.line == 3


def test_a_dimension_negative_for_the_bound_syms():
    text = COPY.replace("output Y: f32[N, 4, 8]", "output Y: f32[N, 4, 8]\noutput Z: f32[N - 3, 8]")
    p = module(text).compile("ref")
    d = user_error(lambda: p.run(X=np.zeros((2, 4, 8), np.float32)))
    assert d.message == "dimension `N - 3` of `Z` is -1 (with N = 2)"


@pytest.mark.cc
def test_simulating_with_a_dimension_negative_for_the_bound_syms():
    """`simulate` allocates no tensor (no binding of arrays), so the module's own run-time check
    of the dimension reports it, at the dimension."""
    text = COPY.replace("output Y: f32[N, 4, 8]", "output Y: f32[N, 4, 8]\noutput Z: f32[N - 3, 8]")
    p = module(text).compile("cpu_sim")
    with pytest.raises(WspError) as info:
        p.simulate(bind={"N": 2})
    (d,) = info.value.diagnostics
    assert (d.span.line, d.span.col) == (4, 15)
    assert d.message == "dimension of `Z` must not be negative (with N = 2)"


def test_random_inputs_for_a_dimension_negative_for_the_bound_syms(tmp_path):
    path = tmp_path / "z.wsp"
    path.write_text(COPY.replace("input  X: f32[N, 4, 8]",
                                 "input  X: f32[N, 4, 8]\ninput  Z: f32[N - 3, 8]"))
    r = wspc("run", path, "--target", "ref", "--bind", "N=2", "--random-inputs", "0")
    assert r.exit_code == 1
    assert "z.wsp:3:1: error: dimension `N - 3` of `Z` is -1 (with N = 2)" in r.output


# a dimension dividing by a sym bound to 0: the zero-divisor error at the divisor, not a
# dimension "negative" or "has no array" (its shape cannot be computed)
DIVIDED = COPY.replace("output Y: f32[N, 4, 8]",
                       "output Y: f32[N, 4, 8]\nsym M, K\ninput  Z: f32[ceildiv(N, M % (K + 1)), 8]")


@pytest.mark.parametrize("how", ["arrays", "random", pytest.param("simulate", marks=pytest.mark.cc)])
@pytest.mark.parametrize("bind, divisor, whole, shown", [
    ({"M": 0, "K": 0}, "M % (K + 1)", "ceildiv(N, M % (K + 1))", "K = 0, M = 0"),
    ({"M": 2, "K": 1}, "M % (K + 1)", "ceildiv(N, M % (K + 1))", "K = 1, M = 2")])
def test_a_dimension_dividing_by_zero(tmp_path, how, bind, divisor, whole, shown):
    x = np.zeros((2, 4, 8), np.float32)
    line, col = 5, DIVIDED.splitlines()[4].index(divisor) + 1
    want = f"division by zero in `{whole}`: `{divisor}` must not be zero (with {shown})"
    if how == "random":
        path = tmp_path / "d.wsp"
        path.write_text(DIVIDED)
        binds = [w for k, v in bind.items() for w in ("--bind", f"{k}={v}")]
        r = wspc("run", path, "--target", "ref", "--bind", "N=2", *binds, "--random-inputs", "0")
        assert r.exit_code == 1, r.output
        assert f"d.wsp:{line}:{col}: error: {want}" in r.output
        return
    if how == "simulate":
        p = module(DIVIDED).compile("cpu_sim")
        d = user_error(lambda: p.simulate(bind={"N": 2, **bind}))
    else:
        p = module(DIVIDED).compile("ref")
        d = user_error(lambda: p.run(bind=bind, X=x, Z=np.zeros((0, 8), np.float32)))
    assert (d.span.line, d.span.col, d.message) == (line, col, want)


@pytest.mark.cc
def test_simulating_a_data_dependent_task_space_without_its_data():
    text = """\
    sym B, S
    input  lens: i32[B]
    input  X: f32[B, S, 4]
    output Y: f32[B, S, 4]
    kernel copy(x: In[Tile[1, 4, f32]], y: Out[Tile[1, 4, f32]]) { store(y, x) }
    axis batch = DenseDyn(B)
    axis toks = Ragged(batch, lens)
    workload w() { for b in P(batch) { for t in P(toks[b]) { copy[b, t](x = X[b, t], y = Y[b, t]) } } }
    """
    p = module(text).compile("cpu_sim")
    with pytest.raises(WspError) as info:
        p.simulate(bind={"B": 2, "S": 4})
    d = one(info.value)
    assert d.message == ("simulating this schedule needs the data of `lens`: its elements decide "
                         "which tasks exist")


# ---- the command line (cli.py) --------------------------------------------------------------


def test_bind_without_a_value(copy_file):
    r = wspc("run", copy_file, "--target", "ref", "--bind", "N")
    assert r.exit_code == 2
    assert "expected NAME=VALUE, got 'N'" in r.output


def test_bind_to_a_word(copy_file):
    r = wspc("run", copy_file, "--target", "ref", "--bind", "N=two")
    assert r.exit_code == 2
    assert "N=two: not an integer" in r.output


def test_trace_on_a_target_without_a_cycle_model(copy_file, tmp_path):
    r = wspc("run", copy_file, "--target", "ref", "--bind", "N=1", "--random-inputs", "0",
             "--trace", tmp_path / "t.json")
    assert r.exit_code == 2
    assert "--trace and --machine need --target cpu_sim (ref has no cycle model)" in r.output


@pytest.mark.cc
def test_a_trace_file_that_cannot_be_written(copy_file, tmp_path):
    (tmp_path / "file").write_text("")
    where = tmp_path / "file" / "t.json"  # a directory that is a file
    r = wspc("run", copy_file, "--bind", "N=1", "--random-inputs", "0", "--trace", where)
    assert r.exit_code == 1
    # checked before the run starts (nothing is computed for an output that cannot be written)
    assert f"--trace {where}: error: {tmp_path / 'file'} is not a directory" in r.output


def test_an_input_file_that_is_not_an_array(copy_file, tmp_path):
    bad = tmp_path / "x.npy"
    bad.write_text("not numpy")
    r = wspc("run", copy_file, "--target", "ref", "--input", f"X={bad}")
    assert r.exit_code == 1
    assert f"cannot read {bad} for `X`: " in r.output


def test_an_output_file_for_an_input_or_an_unknown_tensor(copy_file, tmp_path):
    r = wspc("run", copy_file, "--target", "ref", "--bind", "N=1", "--random-inputs", "0",
             "--output", f"X={tmp_path / 'x.npy'}", "--output", f"Q={tmp_path / 'q.npy'}")
    assert r.exit_code == 1
    assert "`X` is an input, not an output" in r.output
    assert f"--output Q={tmp_path / 'q.npy'}: error: `Q` is not a tensor of module `copy`" in r.output
    assert not (tmp_path / "x.npy").exists() and not (tmp_path / "q.npy").exists()


def test_emit_for_a_target_that_writes_a_project(copy_file, tmp_path):
    r = wspc("compile", copy_file, "--target", "ascend_npu", "--emit", "c", "-o", tmp_path / "p")
    assert r.exit_code == 2
    assert ("--emit does not apply to --target ascend_npu: it writes a project directory "
            "(use --target cpu_sim --emit ...)") in r.output


def test_a_project_needs_its_directory(copy_file):
    r = wspc("compile", copy_file, "--target", "ascend_npu")
    assert r.exit_code == 2
    assert "--target ascend_npu writes" in r.output and "give its directory with -o DIR" in r.output


def test_an_unknown_pass_to_print_after(copy_file):
    r = wspc("compile", copy_file, "--emit", "ir", "--print-after", "nosuch")
    assert r.exit_code == 2
    assert "no pass `nosuch`; the passes: " in r.output


# ---- choosing the schedule to run (driver.py) -------------------------------------------------


def test_a_module_with_nothing_to_run():
    m = module("sym N\ninput X: f32[N, 8]\n")
    d = user_error(lambda: m.compile("ref"))
    assert d.message == "module `t` has nothing to run"


def test_several_schedules_and_none_is_main():
    m = module(COPY + "schedule a = w()\nschedule b = w()\n")
    d = user_error(lambda: m.compile("ref"))
    assert d.message == "module `t` has several schedules and none is `main`"


# ---- compiling for a target -----------------------------------------------------------------

ROWS = """\
sym N
input  X: f32[N, 4, 8]
input  L: i32[N]
output Y: f32[N, 4, 8]
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }
axis rows = DenseDyn(N)
"""


def test_float_arithmetic_on_run_time_values():
    text = ROWS + """\
    kernel scaled(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]], s: Scalar[f32]) { store(y, x * s) }
    workload w() { for i in P(rows) { scaled[i](x = X[i], y = Y[i], s = L[i] * 0.5) } }
    """
    d = user_error(lambda: module(text).compile("ref"))
    assert d.message.startswith("float arithmetic on run-time values (`L[i]`) is not supported")


@pytest.mark.cc
def test_a_kernel_without_a_c_body_on_cpu_sim():
    text = COPY.replace("kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }",
                        'kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) extern ascend """ """')
    d = user_error(lambda: module(text).compile("cpu_sim"))
    assert d.message == ("kernel `copy` has no `extern c` body; the cpu_sim target runs extern "
                         "kernels as C")
    assert (d.span.line, d.span.col) == (4, 8)


@pytest.mark.cc
def test_a_c_error_in_an_extern_c_body():
    text = COPY.replace("kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }",
                        'kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) extern c """\n'
                        '    y.data[0] = undeclared_name;\n"""')
    d = user_error(lambda: module(text).compile("cpu_sim"))
    assert d.message.startswith("in `extern c` body: ") and "undeclared_name" in d.message
    assert d.span.line == 5  # the body's own line in the .wsp file


def test_policies_the_npu_does_not_honour_are_warnings():
    text = COPY + "schedule main = w().timing(batched(4)).task_graph(window = 8, mode = abort)\n"
    p = module(text).compile("ascend_npu")
    words = sorted(w.message for w in p.warnings)
    assert words[0].startswith("`.task_graph(mode = abort)` never aborts on ascend_npu: the "
                               "expander hands the window's 8 tasks to the AICore")
    assert words[1].startswith("`.timing(batched(4))` is not honoured on ascend_npu: the "
                               "dispatcher issues every task of a wave as soon as the wave starts")
    assert all(w.severity == "warning" for w in p.warnings)


# ---- run-time checks: views, indices, dimensions ----------------------------------------------


def run_error(text: str, target: str = "ref", **kw) -> str:
    p = module(text).compile(target)
    with pytest.raises(WspError) as info:
        p.run(**kw)
    return one(info.value).message


def test_a_negative_index_read_at_run_time():
    text = ROWS + """\
    kernel scaled(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]], s: Scalar[i32]) { store(y, x) }
    workload w() { for i in P(rows) { scaled[i](x = X[i], y = Y[i], s = L[i - 1]) } }
    """
    msg = run_error(text, X=np.zeros((2, 4, 8), np.float32), L=np.zeros(2, np.int32))
    assert msg.startswith("index `i - 1` of `L[i - 1]` must not be negative")


def test_a_view_index_negative_at_run_time():
    text = ROWS + "workload w() { for i in P(rows) { copy[i](x = X[i - L[0]], y = Y[i]) } }\n"
    msg = run_error(text, X=np.zeros((2, 4, 8), np.float32), L=np.ones(2, np.int32))
    assert msg.startswith("index `i - L[0]` in `x = X[i - L[0]]` must not be negative, found -1")


def test_a_view_slice_with_a_negative_length_at_run_time():
    text = """\
    sym N
    input  X: f32[N, 8]
    input  L: i32[2]
    output Y: f32[N, 8]
    kernel copy(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x) }
    workload w() { copy(x = X[L[0] : L[1]], y = Y[0 : 1]) }
    """
    msg = run_error(text, X=np.zeros((4, 8), np.float32), L=np.array([2, 1], np.int32))
    assert msg.startswith("slice `L[0] : L[1]` in `x = X[L[0] : L[1]]` must not have a negative length")
    assert "found 2 and 1" in msg


def test_a_view_slice_start_negative_at_run_time():
    text = """\
    sym N
    input  X: f32[N, 8]
    input  L: i32[2]
    output Y: f32[N, 8]
    kernel copy(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x) }
    workload w() { copy(x = X[L[0] : L[0] + 1], y = Y[0 : 1]) }
    """
    msg = run_error(text, X=np.zeros((4, 8), np.float32), L=np.array([-1, 0], np.int32))
    assert msg.startswith("slice start `L[0]` in `x = X[L[0] : L[0] + 1]` must not be negative, "
                          "found -1")


def test_a_view_whose_extent_is_only_known_at_run_time():
    text = """\
    sym N
    input  X: f32[N, 8]
    input  L: i32[2]
    output Y: f32[N, 8]
    kernel copy(x: In[Tile[2, 8, f32]], y: Out[Tile[2, 8, f32]]) { store(y, x) }
    workload w() { copy(x = X[0 : L[0]], y = Y[0 : 2]) }
    """
    msg = run_error(text, X=np.zeros((4, 8), np.float32), L=np.array([3, 0], np.int32))
    assert msg.startswith("`x = X[0 : L[0]]` must have at most 2 rows to fit Tile[2, 8, f32], "
                          "found 3")


# ---- the ref back end (ptowsp.backends.ref) ---------------------------------------------------


def test_an_extern_kernel_without_a_python_twin_on_ref():
    text = COPY.replace("kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) { store(y, x) }",
                        'kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) extern c """ """')
    p = module(text).compile("ref")
    d = user_error(lambda: p.run(X=np.zeros((1, 4, 8), np.float32)))
    assert d.message.startswith("kernel `copy` is an extern kernel, which the ref back end "
                                "cannot run; register a Python implementation with "
                                "`ptowsp.backends.ref.register_extern('copy', fn)`")


def test_execute_checks_its_own_arguments():
    """`backends.ref.execute` (the interpreter the API and `wspc run --target ref` call after
    binding) checks what it is given as well."""
    m = module().ir
    x = np.zeros((1, 4, 8), np.float32)
    cases = [
        (dict(syms={"N": 1, "Q": 2}, arrays={"X": x}), "unknown symbol `Q`"),
        (dict(syms={}, arrays={"X": x}), "symbol `N` is not bound"),
        (dict(syms={"N": -1}, arrays={"X": x}), "symbol `N` is bound to -1, but symbols are non-negative"),
        (dict(syms={"N": 1}, arrays={"X": x, "Q": x}), "the module has no tensor `Q`"),
        (dict(syms={"N": 1}, arrays={"X": x, "Y": x}), "`Y` is output tensor; only inputs and inouts take arrays"),
        (dict(syms={"N": 1}, arrays={}), "no array is bound to input `X`"),
        (dict(syms={"N": 1}, arrays={"X": x[:, :2]}), "`X` must be a float32 array of shape (1, 4, 8), found float32 (1, 2, 8)"),
    ]
    for kw, words in cases:
        with pytest.raises(RunError) as info:
            execute(m, None, kw["syms"], kw["arrays"])
        assert info.value.message.startswith(words), (words, info.value.message)
    with pytest.raises(RunError) as info:
        execute(m, "nosuch", {"N": 1}, {"X": x})
    assert info.value.message == "module `t` has no schedule `nosuch`"
    two = module(COPY + "schedule a = w()\nschedule b = w()\n").ir
    with pytest.raises(RunError) as info:
        execute(two, None, {"N": 1}, {"X": x})
    assert info.value.message == "choose a schedule to run: `a`, `b`"
    none = module("sym N\ninput X: f32[N, 8]\n").ir
    with pytest.raises(RunError) as info:
        execute(none, None, {"N": 1}, {"X": np.zeros((1, 8), np.float32)})
    assert info.value.message == "module `t` has no schedule to run"


# ---- machine files ---------------------------------------------------------------------------


def test_a_machine_count_too_large(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text("cube_cores = 3000000000\n")
    d = user_error(lambda: load_machine(str(path)))
    assert d.message == "`cube_cores` is too large: 3000000000 (at most 2147483647)"


DIVIDE = """\
sym N
input  X: f32[N, 4, 8]
input  L: i32[2]
output Y: f32[N, 4, 8]
kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]], s: Scalar[i32]) { store(y, x) }
workload w() { copy(x = X[0], y = Y[0], s = N / L[0]) }
"""


@pytest.mark.parametrize("target", ["ref", pytest.param("cpu_sim", marks=pytest.mark.cc)])
def test_a_scalar_argument_divided_by_zero_at_run_time(target):
    """Both targets report it, naming the expression as written (not lowering's `L@1`);
    every form of division: tests/backends/test_scalar_division.py."""
    msg = run_error(DIVIDE, target, X=np.zeros((2, 4, 8), np.float32),
                    L=np.array([0, 1], np.int32))
    assert msg == "division by zero in `N / L[0]`: `L[0]` must not be zero, found 0"


def test_an_integer_literal_past_every_float_is_infinite_in_a_float_kernel(tmp_path):
    """`x * C` with C = 256^2000 in an f32 kernel: the literal is infinite, as `1e400` is (it was
    exit 70: Python's OverflowError), and a float Scalar's default likewise; ref == cpu_sim."""
    big = " * ".join(["256"] * 2000)
    src = tmp_path / "big.wsp"
    src.write_text(f"""sym N
const C = {big}
input  X: f32[N, 16, 128]
output Y: f32[N, 16, 128]
output Z: f32[N, 16, 128]
kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]], z: Out[Tile[16, 128, f32]],
         eps: Scalar[f32] = C) {{
    store(y, x * C)
    store(z, x / (x * 0.0 + eps) - C)
}}
axis tiles = DenseDyn(N)
workload w() {{
    for i in P(tiles) {{ k[i](x = X[i], y = Y[i], z = Z[i]) }}
}}
""")
    x = np.linspace(0.5, 2.0, 2 * 16 * 128, dtype=np.float32).reshape(2, 16, 128)
    x[0, 0, 0] = -1.0
    for target in ("ref", "cpu_sim"):
        out = ptowsp.load(str(src)).compile(target=target).run_arrays({"X": x})
        assert np.array_equal(out["Y"], x * np.float32(np.inf))
        assert np.array_equal(out["Z"], np.full_like(x, -np.inf))


def test_past_a_hundred_diagnostics_the_rest_are_counted_not_shown(tmp_path):
    """A fuzzed chain of 20,000 misused axes (`P.seq(chunks + chunks + ...)`) printed 20,000
    excerpts of its 200,000-column line: minutes. The first 100 are shown, then the count."""
    src = tmp_path / "many.wsp"
    src.write_text("sym N\n" + "".join(f"const C{i} = N\n" for i in range(300)))
    result = CliRunner().invoke(main, ["check", str(src)])
    assert result.exit_code == 1
    out = result.output
    assert out.count(": error: ") == 100
    assert out.rstrip().endswith("... 200 more diagnostics not shown\n300 errors")
    assert f"{src}:2:" in out and f"{src}:102:" not in out  # the first ones, by position
