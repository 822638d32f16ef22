"""`extern cpp` kernels (language.md section 4): C++17 bodies with the `extern c` parameter
view, compiled by the C++ compiler into the module's library. Each program runs on cpu_sim
and is checked against a NumPy formula (and, on ref, through a registered Python twin);
compiler errors land on the body's line, headers come from include directories."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.cpu.cpp_kernels import emit_cpp_kernels
from ptowsp.diagnostics import WspError

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("wspc_cache")]

HEADERS = Path(__file__).resolve().parent / "cpp_headers"

BLEND = '''\
sym N
input  X: f32[N, 4, 8]
output Y: f32[N, 4, 8]
kernel blend(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]], w: Scalar[f32]) extern cpp include "mathx/blend.hpp" """
    // C++ only: a template from a namespace, std::array, a lambda
    auto at = [&](int64_t r, int64_t c) { return x.data[r * x.stride + c]; };
    for (int64_t r = 0; r < x.rows; r++) {
        std::array<float, 8> row{};
        for (int64_t c = 0; c < x.cols; c++) row[c] = at(r, c);
        float total = mathx::sum(row);
        for (int64_t c = 0; c < x.cols; c++)
            y.data[r * y.stride + c] = mathx::blend(row[c], total, w);
    }
"""
workload wl() { for i in P(N) { blend[i](x = X[i], y = Y[i], w = 0.25) } }
schedule main = wl()
'''


def module(text: str, name: str = "t.wsp") -> ptowsp.Module:
    return ptowsp.parse(textwrap.dedent(text), name)


def blend_numpy(x: np.ndarray, w: float) -> np.ndarray:
    total = x.sum(axis=-1, keepdims=True, dtype=np.float32)
    return (x * np.float32(w) + total * np.float32(1 - w)).astype(np.float32)


def test_extern_cpp_runs_on_cpu_sim_against_numpy():
    x = np.random.default_rng(19).standard_normal((3, 4, 8)).astype(np.float32)
    p = module(BLEND).compile("cpu_sim", include_dirs=[str(HEADERS)])
    y = p.run(X=x)["Y"]
    np.testing.assert_allclose(y, blend_numpy(x, 0.25), rtol=1e-5, atol=1e-5)


def test_extern_cpp_runs_on_ref_through_its_python_twin(ref_extern):
    x = np.random.default_rng(20).standard_normal((2, 4, 8)).astype(np.float32)

    def twin(x, y, w):
        y[...] = blend_numpy(x, w)

    ref_extern("blend", twin)
    y = module(BLEND).compile("ref").run(X=x)["Y"]
    np.testing.assert_allclose(y, blend_numpy(x, 0.25), rtol=1e-5, atol=1e-5)


def test_cpp_unit_declares_the_entry_extern_c():
    ir = module(BLEND).ir
    text = emit_cpp_kernels(ir.kernels, dict(ir.sources))
    assert 'extern "C" void wsp_ku_blend(wsp_in_f32 x, wsp_out_f32 y, float w)' in text
    assert '#line 4 "t.wsp"\n#include "mathx/blend.hpp"' in text
    assert '#line 4 "t.wsp"\n\n    // C++ only' in text  # the body starts after its quotes


def test_a_cpp_error_is_reported_at_the_body_line():
    text = BLEND.replace("float total = mathx::sum(row);", "float total = mathx::no_such(row);")
    with pytest.raises(WspError) as info:
        module(text).compile("cpu_sim", include_dirs=[str(HEADERS)])
    d = info.value.diagnostics[0]
    assert d.message.startswith("in `extern cpp` body: ") and "no_such" in d.message
    assert (d.span.file, d.span.line) == ("t.wsp", 10)


def test_a_missing_header_is_reported_at_the_kernel():
    with pytest.raises(WspError) as info:
        module(BLEND).compile("cpu_sim")  # no include directory: mathx/blend.hpp is not found
    d = info.value.diagnostics[0]
    assert d.message.startswith("in `extern cpp` body: mathx/blend.hpp")
    assert d.span.line == 4


def test_a_missing_include_directory_is_named(tmp_path):
    gone = str(tmp_path / "no_such_dir")
    with pytest.raises(WspError) as info:
        module(BLEND).compile("cpu_sim", include_dirs=[gone])
    assert info.value.diagnostics[0].message == f"include directory `{gone}` does not exist"


def test_no_cpp_compiler_names_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-c++"))
    with pytest.raises(WspError) as info:
        module(BLEND).compile("cpu_sim", include_dirs=[str(HEADERS)])
    d = info.value.diagnostics[0]
    assert d.message.startswith("cannot run the C++ compiler for `extern cpp` bodies: ")
    assert "install a C++ compiler (g++ or clang++), or name one with CXX=..." == d.help


@pytest.mark.parametrize("decl, words", [
    ('extern cpp inclde "a.hpp" """ """',
     'expected `include "HEADER"` before the `extern cpp` body, found `inclde`'),
    ('extern c include "a.h" """ """', "`include` is for `extern cpp` bodies, not `extern c`"),
    ('extern cpp include "../a.hpp" """ """', "`../a.hpp` is not a header name wspc includes"),
])
def test_include_spellings_that_are_errors(decl, words):
    text = f"kernel k(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) {decl}\n"
    with pytest.raises(WspError) as info:
        module(text)
    assert info.value.diagnostics[0].message == words


# ---- the command line: --include-dir on wspc compile and wspc run ---------------------------


def test_wspc_run_with_include_dir(tmp_path):
    from click.testing import CliRunner

    from ptowsp.cli import main

    src, xin, yout = tmp_path / "blend.wsp", tmp_path / "x.npy", tmp_path / "y.npy"
    src.write_text(BLEND)
    x = np.random.default_rng(21).standard_normal((2, 4, 8)).astype(np.float32)
    np.save(xin, x)
    r = CliRunner().invoke(main, ["run", str(src), "--bind", "N=2", "--input", f"X={xin}",
                                  "--output", f"Y={yout}", "--include-dir", str(HEADERS)])
    assert r.exit_code == 0, r.output
    np.testing.assert_allclose(np.load(yout), blend_numpy(x, 0.25), rtol=1e-5, atol=1e-5)


def test_wspc_compile_names_a_missing_include_dir(tmp_path):
    from click.testing import CliRunner

    from ptowsp.cli import main

    src = tmp_path / "blend.wsp"
    src.write_text(BLEND)
    gone = tmp_path / "gone"
    r = CliRunner().invoke(main, ["compile", str(src), "--include-dir", str(gone)])
    assert r.exit_code == 1
    assert f"include directory `{gone}` does not exist" in r.output
    ok = CliRunner().invoke(main, ["compile", str(src), "--include-dir", str(HEADERS),
                                   "-o", str(tmp_path / "out")])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "out" / "kernels_cpp.cpp").is_file()


def test_an_include_directory_that_is_a_file(tmp_path):
    f = tmp_path / "a_file"
    f.write_text("")
    with pytest.raises(WspError) as info:
        module(BLEND).compile("cpu_sim", include_dirs=[str(f)])
    assert info.value.diagnostics[0].message == f"include directory `{f}` does not exist (it is a file)"


def test_ascend_npu_refuses_extern_cpp_as_extern_c():
    with pytest.raises(WspError) as info:
        module(BLEND).compile("ascend_npu")
    d = info.value.diagnostics[0]
    assert d.message == ("extern kernel `blend` has no `extern ascend` body, which the "
                         "ascend_npu target needs (its `extern cpp` body runs only on cpu_sim)")
    assert d.span.line == 4


def test_extern_c_and_cpp_bodies_together_run_the_cpp_one():
    both = BLEND.replace(') extern cpp include', ') extern c """ y.data[0] = 0; """ extern cpp include')
    ir = module(both).ir
    (k,) = ir.kernels
    assert k.extern_c is not None and k.extern_cpp is not None
    x = np.ones((1, 4, 8), np.float32)
    y = module(both).compile("cpu_sim", include_dirs=[str(HEADERS)]).run(X=x)["Y"]
    np.testing.assert_allclose(y, blend_numpy(x, 0.25), rtol=1e-6)
