"""User names and file names in generated C and C++ (language.md sections 1 and 4): either the
program compiles (with a real C compiler, and the CANN tree with g++) or the user gets a
diagnostic at the name. Kernel, tensor, sym, axis and loop-variable names that are C keywords or
macros are mangled; the parameters of a kernel with a foreign body keep their names (the body
uses them), so the checker refuses the names the body's language takes (ptowsp/cnames.py, whose
list of macros is checked here against what the compiler really defines); file names reach C
only escaped (`#line`, messages), whatever bytes they hold."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.cpu import build
from ptowsp.backends.cpu.kernels import emit_kernels
from ptowsp.cnames import reserved_reason
from ptowsp.diagnostics import WspError

pytestmark = pytest.mark.cc

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))


def defined_macros(flags: list[str]) -> set[str]:
    """The macros defined where an `extern c` body stands: the kernels' translation unit up to
    its first kernel, compiled with `flags`."""
    unit = emit_kernels([])
    r = subprocess.run([*build.compiler(), *flags, "-I", str(build.RUNTIME_DIR), "-dM", "-E",
                        "-x", "c", "-"], input=unit, capture_output=True, text=True, check=True)
    return {line.split()[1].split("(")[0] for line in r.stdout.splitlines()
            if line.startswith("#define ")}


@pytest.mark.parametrize("flags", [build.DEFAULT_CFLAGS, ("-std=gnu11", "-D_GNU_SOURCE", "-O2")],
                         ids=["default", "gnu"])
def test_every_macro_the_body_sees_is_a_name_it_cannot_take(flags):
    macros = defined_macros(list(flags))
    assert {"NULL", "INFINITY", "NAN", "WSP_LANE_LOOP"} <= macros  # the headers are there
    free = sorted(m for m in macros if reserved_reason(m, "c") is None)
    assert not free, f"macros a parameter could be named after: {free}"


# ---------------------------------------------------------------------------------------------
# Names that are C words elsewhere in the program are mangled

C_WORDS = """\
module int
sym NULL, errno
input stdin: f32[NULL, 16, 128]
input INFINITY: f32[1, 128]
output NAN: f32[NULL, 16, 128]
scratch unix: f32[NULL, 16, 128]
kernel int(x: In[Tile[16, 128, f32]], w: In[Tile[1, 128, f32]], y: Out[Tile[16, 128, f32]],
           NULL: Scalar[f32] = 1e-6) {
    let errno = rowmean(x * x)
    let INFINITY = x * rsqrt(errno + NULL) * w
    store(y, INFINITY)
}
axis linux = DenseDyn(NULL)
workload main() {
    for EXIT_SUCCESS, k in P(linux, Dense[1]) {
        int[EXIT_SUCCESS](x = stdin[EXIT_SUCCESS], w = INFINITY, y = unix[EXIT_SUCCESS])
        int[EXIT_SUCCESS](x = unix[EXIT_SUCCESS], w = INFINITY, y = NAN[EXIT_SUCCESS])
    }
}
schedule double = main()
"""


def test_c_words_as_names_compile_and_run():
    m = ptowsp.parse(C_WORDS, "words.wsp")
    rng = np.random.default_rng(1)
    arrays = {"stdin": rng.standard_normal((3, 16, 128), dtype=np.float32),
              "INFINITY": rng.standard_normal((1, 128), dtype=np.float32)}
    bind = {"NULL": 3, "errno": 1}
    got = m.compile("cpu_sim").run(bind=bind, **arrays)["NAN"]
    want = m.compile("ref").run(bind=bind, **arrays)["NAN"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


EXTERN = """\
input X: f32[4, 8]
output Y: f32[4, 8]
axis rows = Dense[4]
kernel twice({a}: In[Tile[1, 8, f32]], {b}: Out[Tile[1, 8, f32]], {s}: Scalar[f32] = 2.0) extern c \"\"\"
    for (int j = 0; j < 8; j++) {b}.data[j] = {a}.data[j] * {s}{error};
\"\"\"
workload w() {{
    for r in P(rows) {{ twice[r]({a} = X[r], {b} = Y[r]) }}
}}
schedule main = w()
"""


def test_extern_parameters_named_like_library_functions_and_types_run():
    # not macros: a parameter may hide a function or a type of the headers
    for a, b, s in (("exp", "sqrt", "memcpy"), ("size_t", "int32_t", "float_t"),
                    ("data", "rows", "abs")):
        m = ptowsp.parse(EXTERN.format(a=a, b=b, s=s, error=""), "ext.wsp")
        x = np.arange(32, dtype=np.float32).reshape(4, 8)
        y = m.compile("cpu_sim").run(**{"X": x})["Y"]
        np.testing.assert_array_equal(y, 2 * x)


def test_a_reserved_parameter_name_is_a_diagnostic_not_a_compiler_failure():
    text = EXTERN.format(a="NULL", b="INFINITY", s="NAN", error="")
    with pytest.raises(WspError) as info:
        ptowsp.parse(text, "ext.wsp")
    line = text.splitlines()[3]
    assert [(d.span.line, d.span.col) for d in info.value.diagnostics] == [
        (4, line.index(f"{name}:") + 1) for name in ("NULL", "INFINITY", "NAN")]
    assert all("it is a macro of the standard headers the body sees" in d.message
               for d in info.value.diagnostics)


# ---------------------------------------------------------------------------------------------
# File names

# a carriage return, a byte that is not UTF-8, a colon, a space, a quote and a backslash
ODD = os.fsdecode(b'odd\r\xff: "q\\.wsp')


def wspc(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptowsp", *args], capture_output=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)


def test_an_odd_file_name_builds_and_runs(tmp_path):
    (tmp_path / ODD).write_text(EXTERN.format(a="a", b="b", s="s", error=""))
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.save(tmp_path / "x.npy", x)
    r = wspc("run", ODD, "--input", "X=x.npy", "--output", "Y=y.npy", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), 2 * x)


def test_an_error_in_an_extern_body_of_an_odd_file_is_shown_at_its_line(tmp_path):
    (tmp_path / ODD).write_text(EXTERN.format(a="a", b="b", s="s", error=" BAD"))
    r = wspc("run", ODD, "--random-inputs", "1", cwd=tmp_path)
    err = r.stderr.decode("utf-8")  # all of it is text: the name's bytes are escaped
    assert r.returncode == 1, err
    shown = 'odd\\r\\xff: "q\\.wsp'
    assert err.startswith(f"{shown}:5:") and "in `extern c` body:" in err, err
    assert "   5 |     for (int j = 0; j < 8; j++) b.data[j] = a.data[j] * s BAD;" in err
    assert "internal error" not in err


BOTH_BODIES = """\
input X: f32[4, 8]
output Y: f32[4, 8]
axis rows = Dense[4]
kernel cp(a: In[Tile[1, 8, f32]], b: Out[Tile[1, 8, f32]]) extern c \"\"\"
    for (int j = 0; j < 8; j++) b.data[j] = a.data[j] BAD;
\"\"\" extern ascend \"\"\"
    (void)a;
    (void)b;
\"\"\"
kernel cq(a: In[Tile[1, 8, f32]], b: Out[Tile[1, 8, f32]]) extern c "int j = 0;\\n b.data[j] = BAD2;"
workload w() {
    for r in P(rows) { cp[r](a = X[r], b = Y[r]) }
    for r in P(rows) { cq[r](a = X[r], b = Y[r]) }
}
schedule main = w()
"""


def test_errors_in_extern_bodies_are_reported_at_their_lines():
    # the `extern c` body before an `extern ascend` one, and a one-line string whose `\n`
    # escapes are not lines of the file (its errors are at the string's line)
    with pytest.raises(WspError) as info:
        ptowsp.parse(BOTH_BODIES, "both.wsp").compile("cpu_sim")
    got = [(d.span.line, d.message.split(": ", 1)[0]) for d in info.value.diagnostics]
    assert got == [(5, "in `extern c` body"), (10, "in `extern c` body")]
    assert "BAD2" in info.value.diagnostics[1].message


def test_line_directives_name_the_file_exactly():
    from ptowsp.backends.cexpr import line_file_lit, string_lit

    assert line_file_lit(ODD) == '"odd\\015\\377: \\"q\\\\.wsp"'
    assert string_lit(ODD) == '"odd\\x0d""\\xff"": \\"q\\\\.wsp"'
    # the compiler reads the name back byte for byte
    src = f"#line 7 {line_file_lit(ODD)}\nint x = ;\n"
    r = subprocess.run([*build.compiler(), "-x", "c", "-c", "-", "-o", os.devnull], input=src.encode(),
                       capture_output=True)
    assert os.fsencode(ODD) + b":7:" in r.stderr


# ---------------------------------------------------------------------------------------------
# The CANN tree (g++ against the CPU Ascend C and the stand-in ACL of tests/ascend)

ASCEND_EXTERN = """\
input X: f32[4, 8]
output Y: f32[4, 8]
axis rows = Dense[4]
kernel cp(exp: In[Tile[1, 8, f32]], size_t: Out[Tile[1, 8, f32]], abs: Scalar[f32] = 1.0) extern ascend \"\"\"
    (void)exp; (void)size_t; (void)abs;
\"\"\"
workload w() {
    for r in P(rows) { cp[r](exp = X[r], size_t = Y[r]) }
}
schedule main = w()
"""


@pytest.mark.parametrize("program, schedule", [(C_WORDS, "double"), (ASCEND_EXTERN, "main")],
                         ids=["c-words", "extern-ascend"])
def test_the_cann_tree_compiles_with_c_words_and_an_odd_file_name(tmp_path, program, schedule):
    from ptowsp.ir.passes import optimize

    from ..ascend.ascendc_cpu import harness as H
    from ..ascend.hostrun import compile_host, host_launcher, split_dispatch, write_tree
    from ..ascend.streams import CXX, HERE, run_compiler

    src = tmp_path / ODD
    src.write_text(program)
    ir, _ = optimize(ptowsp.load(str(src)).ir, 2)
    tree = tmp_path / "tree"
    files = write_tree(tree, ir, schedule)
    kernel, launcher = split_dispatch(files["aicore/dispatch.asc"])
    dispatch = tmp_path / "dispatch_host.cpp"
    dispatch.write_text(kernel + host_launcher(launcher))
    run_compiler([CXX, *(f for f in H.CXXFLAGS if f not in ("-shared", "-fPIC")), "-c",
                  f"-I{H.HERE}", f"-I{HERE / 'stub_acl'}", f"-I{tree / 'include'}",
                  f"-I{tree / 'aicore'}", str(dispatch), "-o", str(tmp_path / "d.o")])
    compile_host(tmp_path / "wsp_main", tree, [tmp_path / "d.o"])
    assert (tmp_path / "wsp_main").exists()
