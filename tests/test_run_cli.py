"""`wspc run` and `wspc compile -o` through a real subprocess: results against NumPy, every bad
input of language.md section 9, atomic outputs, artifact directories, depfiles, the cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
RMSNORM = ROOT / "examples" / "rmsnorm.wsp"

pytestmark = pytest.mark.cc


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("wspc-cache")


def wspc(*args, cache: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "ptowsp", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env)


def rmsnorm_numpy(x, w, eps=1e-6):
    x64 = x.astype(np.float64)
    ms = (x64 * x64).mean(axis=-1, keepdims=True)
    return (x64 / np.sqrt(ms + eps) * w.astype(np.float64)).astype(np.float32)


@pytest.fixture
def rms_inputs(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 16, 128)).astype(np.float32)
    w = rng.standard_normal((1, 128)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    return x, w


@pytest.mark.parametrize("target", ["cpu_sim", "ref"])
def test_run_matches_numpy_and_infers_syms(tmp_path, rms_inputs, cache, target):
    x, w = rms_inputs
    r = wspc("run", RMSNORM, "--target", target, "--input", f"X={tmp_path / 'x.npy'}",
             "--input", f"W={tmp_path / 'w.npy'}", "--output", f"Y={tmp_path / 'y.npy'}", "--json",
             cache=cache)
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y.npy")
    np.testing.assert_allclose(y, rmsnorm_numpy(x, w), rtol=2e-6, atol=1e-6)
    stats = json.loads(r.stdout)
    assert stats["task_count"] == 2 * 3  # B * T tasks, B and T inferred from x.npy


def _bad_run(tmp_path, cache, *extra):
    out = tmp_path / "y.npy"
    r = wspc("run", RMSNORM, *extra, "--output", f"Y={out}", cache=cache)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists(), "no output may be written after an error"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".y.npy")], "no temporary left"
    return r.stderr


def test_wrong_dtype_is_reported_at_the_declaration(tmp_path, rms_inputs, cache):
    np.save(tmp_path / "x64.npy", rms_inputs[0].astype(np.float64))
    err = _bad_run(tmp_path, cache, "--input", f"X={tmp_path / 'x64.npy'}", "--input", f"W={tmp_path / 'w.npy'}")
    assert "rmsnorm.wsp:6:1: error: `X` is declared f32, but its array" in err
    assert "float64" in err and "^" in err


def test_wrong_shape_is_reported_at_the_declaration(tmp_path, rms_inputs, cache):
    np.save(tmp_path / "w3.npy", np.zeros((1, 127), np.float32))
    err = _bad_run(tmp_path, cache, "--input", f"X={tmp_path / 'x.npy'}", "--input", f"W={tmp_path / 'w3.npy'}")
    assert "rmsnorm.wsp:7:1: error: `W` is declared f32[1, 128] = [1, 128], but its array" in err
    assert "[1, 127]" in err


def test_missing_array_is_reported_at_the_declaration(tmp_path, rms_inputs, cache):
    err = _bad_run(tmp_path, cache, "--input", f"X={tmp_path / 'x.npy'}")
    assert "rmsnorm.wsp:7:1: error: input `W` has no array" in err


def test_missing_binding_names_the_sym(tmp_path, cache):
    err = _bad_run(tmp_path, cache, "--random-inputs", "1")
    assert "rmsnorm.wsp:4:5: error: sym `B` is not bound" in err
    assert "rmsnorm.wsp:4:8: error: sym `T` is not bound" in err


def test_contradicting_binding_names_both_sources(tmp_path, rms_inputs, cache):
    err = _bad_run(tmp_path, cache, "--bind", "B=5", "--input", f"X={tmp_path / 'x.npy'}",
                   "--input", f"W={tmp_path / 'w.npy'}")
    assert "`B` is 5 from --bind B=5, but the shape [2, 3, 16, 128] of `X`" in err


def test_unreadable_input_file(tmp_path, cache):
    err = _bad_run(tmp_path, cache, "--input", f"X={tmp_path / 'nope.npy'}")
    assert "rmsnorm.wsp:6:1: error: cannot read" in err and "no such file" in err


def test_random_inputs_are_reproducible(tmp_path, cache):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    for out in (a, b):
        r = wspc("run", RMSNORM, "--bind", "B=2", "--bind", "T=2", "--random-inputs", "7", "--outputs", out,
                 cache=cache)
        assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(a)["Y"], np.load(b)["Y"])


def test_artifact_directory_and_depfile(tmp_path, rms_inputs, cache):
    art, dep = tmp_path / "art", tmp_path / "rms.d"
    r = wspc("compile", RMSNORM, "-o", art, "--depfile", dep, cache=cache)
    assert r.returncode == 0, r.stderr
    assert {"module.so", "kernels.c", "enumerate.c", "manifest.json"} <= {p.name for p in art.iterdir()}
    manifest = json.loads((art / "manifest.json").read_text())
    assert [t["name"] for t in manifest["tensors"]] == ["X", "W", "Y"]
    assert dep.read_text().split(":")[0] == f"{art}/module.so"
    assert str(RMSNORM) in dep.read_text() or "examples/rmsnorm.wsp" in dep.read_text()
    x, w = rms_inputs
    r = wspc("run", art, "--input", f"X={tmp_path / 'x.npy'}", "--input", f"W={tmp_path / 'w.npy'}",
             "--output", f"Y={tmp_path / 'y.npy'}", cache=cache)
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), rmsnorm_numpy(x, w), rtol=2e-6, atol=1e-6)


def test_eight_concurrent_compiles_of_one_module(tmp_path):
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: wspc("compile", RMSNORM, "-o", tmp_path / f"out{i}", cache=cache),
                                range(8)))
    for r in results:
        assert r.returncode == 0, r.stderr
    libs = {(tmp_path / f"out{i}" / "module.so").read_bytes() for i in range(8)}
    assert len(libs) == 1  # every process ended with the same, complete artifact
    modules = [p for p in (cache / "modules").iterdir()]
    assert len(modules) == 1 and not modules[0].name.startswith(".")
    leftovers = [p for p in cache.rglob(".*")]
    assert not leftovers, f"temporary files left in the cache: {leftovers}"


def test_cache_info_and_clear(tmp_path):
    cache = tmp_path / "c"
    assert wspc("compile", RMSNORM, cache=cache).returncode == 0
    info = wspc("cache", "info", cache=cache)
    assert info.returncode == 0 and "modules:   1" in info.stdout
    cleared = wspc("cache", "clear", cache=cache)
    assert cleared.returncode == 0
    assert "modules:   0" in wspc("cache", "info", cache=cache).stdout


def test_examples_makefile_builds_runs_and_rebuilds_only_what_changed(tmp_path):
    import shutil

    work = tmp_path / "examples"
    shutil.copytree(ROOT / "examples", work, ignore=shutil.ignore_patterns("build"))
    wspc_cmd = f"{sys.executable} -m ptowsp"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(tmp_path / "cache"),
           "WSPC": wspc_cmd}

    def make():
        r = subprocess.run(["make", "-C", str(work), f"WSPC={wspc_cmd}"], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout

    first = make()
    names = ("rmsnorm", "softmax", "gemm", "swiglu_ffn", "attention_varlen", "attention_tiered",
             "moe", "moe_extern", "megakernel", "worker_pool", "tp_mlp", "tp_attention",
             "sp_rmsnorm", "ep_moe", "mesh_decoder_layer", "tp_csp_ffn")
    assert first.count(" compile ") == len(names) and first.count(" run ") == len(names)
    for name in names:
        assert (work / "build" / f"{name}.npz").exists()
    assert " compile " not in make()  # nothing changed: nothing to do
    os.utime(work / "gemm.wsp")
    again = make()
    assert again.count(" compile ") == 1 and "gemm.wsp" in again


# ---- outputs are all or nothing (docs/running.md, "Output files") --------------------------

SOFTMAX = ROOT / "examples" / "softmax.wsp"


def _no_traceback(r, status=1) -> str:
    assert r.returncode == status, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    return r.stderr


def _nothing_written(directory: Path, *names: str) -> None:
    left = [p.name for p in directory.iterdir() if p.name.startswith(".") or p.name in names]
    assert not left, f"left behind: {left}"


def _softmax_run(cache, *args):
    return wspc("run", SOFTMAX, "--bind", "R=16", "--random-inputs", "1", *args, cache=cache)


@pytest.mark.parametrize("option", ["--trace", "--outputs"])
def test_a_bad_destination_stops_the_run_before_any_output(tmp_path, cache, option):
    ok = tmp_path / "ok.npy"
    (tmp_path / "dir.json").mkdir()
    bad = tmp_path / "dir.json"
    err = _no_traceback(_softmax_run(cache, "--output", f"Y={ok}", option, bad))
    assert f"{option} {bad}: error: " in err and "is a directory" in err
    _nothing_written(tmp_path, "ok.npy")


def _device(tmp_path: Path, name: str, minor: int) -> Path:
    """A character device to write to: a private copy of /dev/null (minor 3) or /dev/full
    (minor 7) when root (a wspc that renamed over it then breaks nothing else), else the
    real one (the user cannot replace it anyway)."""
    if os.geteuid() != 0:
        return Path("/dev") / name
    import stat

    dev = tmp_path / "dev" / name
    dev.parent.mkdir()
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    return dev


@pytest.mark.parametrize("where, words", [
    ("dir", "is a directory"),
    ("file/y.npy", "is not a directory"),
    ("/proc/y.npy", "cannot create a file in /proc"),
    ("full", "is a character device, not a regular file"),
    ("null", "is a character device, not a regular file"),
])
def test_an_output_that_cannot_be_written(tmp_path, cache, where, words):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("a regular file")
    if where in ("full", "null"):
        dest = _device(tmp_path, where, 7 if where == "full" else 3)
    else:
        dest = where if where.startswith("/") else tmp_path / where
    ok = tmp_path / "ok.npz"
    err = _no_traceback(_softmax_run(cache, "--outputs", ok, "--output", f"Y={dest}"))
    assert f"--output Y={dest}: error: " in err and words in err, err
    _nothing_written(tmp_path, "ok.npz")
    if where in ("full", "null"):
        assert Path(dest).is_char_device()
        _nothing_written(Path(dest).parent, "")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes read-only files and directories")
def test_read_only_destinations(tmp_path, cache):
    ro_file = tmp_path / "ro.npy"
    ro_file.write_bytes(b"old")
    ro_file.chmod(0o444)
    err = _no_traceback(_softmax_run(cache, "--output", f"Y={ro_file}"))
    assert "is read-only" in err and ro_file.read_bytes() == b"old"
    ro_dir = tmp_path / "ro"
    ro_dir.mkdir()
    ro_dir.chmod(0o555)
    err = _no_traceback(_softmax_run(cache, "--output", f"Y={ro_dir / 'y.npy'}"))
    assert f"cannot create a file in {ro_dir}" in err
    assert not list(ro_dir.iterdir())


def test_the_same_destination_twice(tmp_path, cache):
    same = tmp_path / "same.npz"
    err = _no_traceback(_softmax_run(cache, "--outputs", same, "--trace", same), 2)
    assert "--trace" in err and "--outputs" in err
    assert "the same destination twice (one would overwrite the other)" in err


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_follow_the_umask(tmp_path, cache, umask, mode):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(cache)}
    outs = [tmp_path / "y.npy", tmp_path / "all.npz", tmp_path / "t.json"]
    r = subprocess.run([sys.executable, "-m", "ptowsp", "run", str(SOFTMAX), "--bind", "R=16",
                        "--random-inputs", "1", "--output", f"Y={outs[0]}", "--outputs",
                        str(outs[1]), "--trace", str(outs[2])], capture_output=True, text=True,
                       cwd=ROOT, env=env, preexec_fn=lambda: os.umask(umask))
    assert r.returncode == 0, r.stderr
    for out in outs:
        assert out.stat().st_mode & 0o777 == mode, out


def test_a_replaced_output_keeps_its_permissions_and_a_symlink_is_followed(tmp_path, cache):
    old = tmp_path / "y.npy"
    old.write_bytes(b"old")
    old.chmod(0o640)
    real = tmp_path / "real.npz"
    link = tmp_path / "link.npz"
    link.symlink_to(real)
    r = _softmax_run(cache, "--output", f"Y={old}", "--outputs", link)
    assert r.returncode == 0, r.stderr
    assert old.stat().st_mode & 0o777 == 0o640 and np.load(old).shape == (16, 128)
    assert link.is_symlink() and np.load(real)["Y"].shape == (16, 128)


def test_outputs_is_an_npz_whatever_its_name(tmp_path, cache):
    out = tmp_path / "all.bin"
    r = _softmax_run(cache, "--outputs", out)
    assert r.returncode == 0, r.stderr
    with np.load(out) as z:
        assert list(z.files) == ["Y"]


def test_missing_directories_are_made_only_for_a_successful_run(tmp_path, cache):
    out = tmp_path / "new" / "dir" / "y.npy"
    err = _no_traceback(_softmax_run(cache, "--input", f"X={tmp_path / 'nope.npy'}",
                                     "--output", f"Y={out}"))
    assert "no such file" in err
    assert not (tmp_path / "new").exists()  # the run failed: nothing made
    r = _softmax_run(cache, "--output", f"Y={out}")
    assert r.returncode == 0, r.stderr
    assert np.load(out).shape == (16, 128)


# ---------------------------------------------------------------------------------------------
# Run-time diagnostics name the file that ran, warm or cold (the cache's library is shared by
# every source generating the same C; the IR with its spans is each source's own)

SHIFT = """module shift
sym N, S
input  X: f32[N, 8]
output Y: f32[N, 8]
kernel cp(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x) }
workload w() { for i in P(N) { cp[i](x = X[i + S], y = Y[i]) } }
"""
BAD_VIEW = "error: index `i + S` in `x = X[i + S]` must be less than N"


def test_each_copy_of_a_module_reports_its_own_file_and_lines_warm_and_cold(tmp_path):
    cache = tmp_path / "cache"
    a, b = tmp_path / "a" / "shift.wsp", tmp_path / "b" / "shift.wsp"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_text(SHIFT)
    b.write_text("// the same module\n// with three comment lines\n// on top\n" + SHIFT)
    expected = {a: f"{a}:6:38: {BAD_VIEW}", b: f"{b}:9:38: {BAD_VIEW}"}

    def first_error(path) -> str:
        r = wspc("run", path, "--random-inputs", "0", "--bind", "N=4", "--bind", "S=2",
                 "--output", f"Y={tmp_path / 'y.npy'}", cache=cache)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert not (tmp_path / "y.npy").exists()
        return r.stderr.splitlines()[0]

    # cold, cold (the cache has the library a built), then warm, warm
    for src in (a, b, a, b):
        assert first_error(src).startswith(expected[src])
    # artifact directories carry the IR of the file compiled, even from the cache
    for src in (b, a):
        out = tmp_path / f"out-{src.parent.name}"
        r = wspc("compile", src, "-o", out, cache=cache)
        assert r.returncode == 0 and "(cached)" in r.stdout, r.stderr
        assert first_error(out).startswith(expected[src])
    a.unlink()  # the file that built the library first is gone: b still reports b
    assert first_error(b).startswith(expected[b])


def test_a_relative_path_is_reported_as_the_user_spelled_it(tmp_path):
    cache = tmp_path / "cache"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "shift.wsp").write_text(SHIFT)
    for cwd, spelled in ((tmp_path, "d/shift.wsp"), (tmp_path / "d", "shift.wsp"),
                         (tmp_path, "d/shift.wsp"), (tmp_path / "d", "shift.wsp")):
        r = wspc("run", spelled, "--random-inputs", "0", "--bind", "N=4", "--bind", "S=2",
                 cache=cache, cwd=cwd)
        assert r.returncode == 1 and r.stderr.startswith(f"{spelled}:6:38: {BAD_VIEW}"), r.stderr


# ---------------------------------------------------------------------------------------------
# make converges: `wspc compile -o DIR` leaves DIR newer than its inputs, cache hit or not


def test_make_converges_and_reruns_exactly_what_an_edit_touches(tmp_path):
    work = tmp_path / "ex"
    work.mkdir()
    for name in ("Makefile", "rmsnorm.wsp", "softmax.wsp"):
        shutil.copyfile(ROOT / "examples" / name, work / name)  # new files: new times
    # a module with an import, so the depfile lists more than the main file
    (work / "lib.wsp").write_text(
        "kernel cp(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) { store(y, x) }\n")
    (work / "imp.wsp").write_text(
        'import "lib.wsp"\nsym N\ninput X: f32[N, 8]\noutput Y: f32[N, 8]\n'
        "workload w() { for i in P(N) { cp[i](x = X[i], y = Y[i]) } }\n"
        "schedule main = w()\n")
    wspc_cmd = f"{sys.executable} -m ptowsp"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(tmp_path / "cache")}
    names = ("rmsnorm", "softmax", "imp")

    def make(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "-C", str(work), f"WSPC={wspc_cmd}",
                               f"EXAMPLES={' '.join(names)}", "BIND_imp=--bind N=4", *extra],
                              capture_output=True, text=True, env=env)

    def did(*expected: str) -> str:
        """make does exactly `expected` ("compile NAME" / "run NAME"), then has nothing to do."""
        r = make()
        assert r.returncode == 0, r.stdout + r.stderr
        done = sorted(f"{verb} {n}" for line in r.stdout.splitlines()
                      for verb in ("compile", "run") if f" -m ptowsp {verb} " in line
                      for n in names if f"{n}.wsp" in line or f"build/{n} " in line)
        assert done == sorted(expected), r.stdout
        assert make("-q").returncode == 0, "make is not done after one run"
        assert "Nothing to be done" in make().stdout
        return r.stdout

    everything = [f"{verb} {n}" for verb in ("compile", "run") for n in names]
    did(*everything)
    assert (work / "build" / "imp.d").read_text().startswith("build/imp/module.so: imp.wsp lib.wsp\n")

    def edit(name: str, text: str = "") -> None:
        path = work / name
        path.write_text(text + path.read_text())
        os.utime(path)  # now: newer than everything the last make wrote

    edit("rmsnorm.wsp")  # touched: its compile (the cache has it) and its run, nothing else
    assert "(cached)" in did("compile rmsnorm", "run rmsnorm")
    edit("softmax.wsp", "// three comment lines\n// that change\n// no C at all\n")
    assert "(cached)" in did("compile softmax", "run softmax")
    edit("lib.wsp")  # an import: the module that imports it
    did("compile imp", "run imp")
    shutil.rmtree(work / "build")  # the build folder gone, the cache kept: all from the cache
    assert did(*everything).count("(cached)") == len(names)
    # the import removed from disk and from the module: the old depfile must not stop make
    (work / "imp.wsp").write_text((work / "imp.wsp").read_text().replace(
        'import "lib.wsp"\n', (work / "lib.wsp").read_text()))
    (work / "lib.wsp").unlink()
    did("compile imp", "run imp")


def test_depfile_needs_an_output(tmp_path):
    r = wspc("compile", RMSNORM, "--depfile", tmp_path / "x.d", cache=tmp_path / "cache")
    assert r.returncode == 2 and "--depfile needs -o" in r.stderr
    assert not (tmp_path / "x.d").exists()
