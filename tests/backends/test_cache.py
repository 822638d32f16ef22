"""The build cache heals itself (docs/running.md, "The build cache"). A real cache in a temp dir
(`WSPC_CACHE_DIR`) is damaged in every way a hostile tester did, and the next `wspc` run (a
subprocess: a damaged library must never be mapped into the test's own process) either succeeds
with correct outputs and one note, then is healed, or fails with a clear error. Also: what a
killed compile leaves is swept, never what a live one uses; an unusable cache falls back to a
temporary one; a cache that runs out of room, or no C compiler, is the user's error; and
`wspc cache info` / `clear` keep working on a damaged cache."""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ptowsp.backends.cpu import build
from ptowsp.cli import main
from tests.guard import Pending

ROOT = Path(__file__).resolve().parents[2]
NOTE = "wspc: note: rebuilt a damaged cache entry"

pytestmark = pytest.mark.cc

# `f` is the kernel's value: each variant is a module of its own (its own C, its own library)
SHIFT = """module shift
sym N, S
input  X: f32[N, 8]
output Y: f32[N, 8]
kernel cp(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) {{ store(y, {f}) }}
workload w() {{ for i in P(N) {{ cp[i](x = X[i + S], y = Y[i]) }} }}
"""
FORMULAS = {"x": lambda x: x, "x + x": lambda x: x + x, "x * x": lambda x: x * x,
            "x - x": lambda x: x - x, "x * x + x": lambda x: x * x + x}
X = np.arange(32, dtype=np.float32).reshape(4, 8) - 7


def wspc(*args, cache, cwd: Path = ROOT, env=None, prefix=()) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(cache), **(env or {})}
    # the timeout turns a hang (a FIFO read) into a failure instead of a stuck suite
    return subprocess.run([*prefix, sys.executable, "-m", "ptowsp", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=full, timeout=900)


def source(folder: Path, f: str = "x") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "shift.wsp"
    path.write_text(SHIFT.format(f=f))
    return path


def run_ok(src: Path, cache, f: str = "x", **kw) -> str:
    """`wspc run src` succeeds with the right Y; returns its stderr."""
    work = Path(tempfile.mkdtemp(dir=src.parent))
    work.chmod(0o777)  # an unprivileged run writes here too
    np.save(work / "x.npy", X)
    r = wspc("run", src, "--input", f"X={work / 'x.npy'}", "--bind", "S=0",
             "--output", f"Y={work / 'y.npy'}", cache=cache, **kw)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.load(work / "y.npy"), FORMULAS[f](X))
    return r.stderr


def notes(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(NOTE)]


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache holding the runtime, the module of shift.wsp and its index entry."""
    base = tmp_path_factory.mktemp("warm")
    src = source(base / "src")
    assert not notes(run_ok(src, base / "cache"))
    return base


@pytest.fixture
def cache(warm, tmp_path) -> Path:
    """A copy of the warm cache for one test to damage (the index finds modules by key, so a
    copied cache works)."""
    return Path(shutil.copytree(warm / "cache", tmp_path / "cache"))


@pytest.fixture
def src(warm) -> Path:
    return warm / "src" / "shift.wsp"


def only(folder: Path, name: str) -> Path:
    (entry,) = [p for p in folder.iterdir() if not p.name.startswith(".")]
    return entry / name


# ---------------------------------------------------------------------------------------------
# Damaged entries are rebuilt once, with a note


def _truncate(p: Path):
    with open(p, "r+b") as fh:
        fh.truncate(4096)


def _zero(p: Path):
    p.write_bytes(bytes(p.stat().st_size))


def _random(p: Path):
    p.write_bytes(np.random.default_rng(0).bytes(p.stat().st_size))


def _empty(p: Path):
    p.write_bytes(b"")


def _folder(p: Path):
    p.unlink()
    p.mkdir()
    (p / "inside").write_text("x")


def _fifo(p: Path):
    p.unlink()
    os.mkfifo(p)


DAMAGE = {"truncated": _truncate, "zeroed": _zero, "random": _random, "empty": _empty,
          "folder": _folder, "fifo": _fifo, "missing": Path.unlink}


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_library_is_rebuilt_once_with_a_note(cache, src, how):
    DAMAGE[how](only(cache / "modules", "module.so"))
    (note,) = notes(run_ok(src, cache))  # before: SIGBUS (truncated) or exit 70
    assert str(cache / "modules") in note
    assert not notes(run_ok(src, cache))  # healed


@pytest.mark.parametrize("how", ["random", "empty", "missing"])
def test_damaged_checksum_record_is_rebuilt(cache, src, how):
    DAMAGE[how](only(cache / "modules", "checksums.json"))
    assert len(notes(run_ok(src, cache))) == 1
    assert not notes(run_ok(src, cache))


def test_module_entry_that_is_a_file_is_rebuilt(cache, src):
    entry = only(cache / "modules", "module.so").parent
    shutil.rmtree(entry)
    entry.write_text("not a folder")
    assert len(notes(run_ok(src, cache))) == 1
    assert (entry / "module.so").is_file()


def test_library_that_verifies_but_does_not_load_is_rebuilt(cache, src):
    lib = only(cache / "modules", "module.so")
    lib.write_bytes(b"\x7fELF not really")
    build.seal(lib.parent, ["module.so"])  # its checksums agree: only loading tells
    (note,) = notes(run_ok(src, cache))
    assert "does not load" in note
    assert not notes(run_ok(src, cache))


@pytest.mark.parametrize("how", ["truncated", "random", "empty", "folder", "missing"])
def test_damaged_runtime_object_is_rebuilt_for_the_next_new_module(cache, tmp_path, how):
    DAMAGE[how](only(cache / "runtime", "runtime.o"))
    new = source(tmp_path / "new", "x + x")  # a module never built: it links the runtime
    (note,) = notes(run_ok(new, cache, "x + x"))  # before: every new module failed to link
    assert str(cache / "runtime") in note
    assert not notes(run_ok(source(tmp_path / "newer", "x * x"), cache, "x * x"))


@pytest.mark.parametrize("how", ["truncated", "zeroed", "random", "empty", "folder", "fifo"])
def test_damaged_index_entry_is_a_miss_and_is_rewritten(cache, src, how):
    entry = only(cache / "index", "")  # index/<key>.pickle
    if how == "truncated":
        with open(entry, "r+b") as fh:
            fh.truncate(entry.stat().st_size // 2)
    else:
        DAMAGE[how](entry)
    (note,) = notes(run_ok(src, cache))
    assert str(cache / "index") in note
    assert entry.is_file() and not notes(run_ok(src, cache))


def test_index_entry_of_another_wspc_version_is_a_miss(cache, src):
    entry = only(cache / "index", "")
    raw = entry.read_bytes()
    entry.write_bytes(raw.replace(b'"version": "', b'"version": "0.0.0-', 1))
    (note,) = notes(run_ok(src, cache))
    assert "was written by wspc 0.0.0-" in note


@pytest.mark.parametrize("how", ["renamed_rule", "truncated", "random", "fifo", "folder"])
def test_damaged_grammar_tables_are_rebuilt(cache, how):
    (tables,) = cache.glob("grammar-*.marshal")
    if how == "renamed_rule":  # still unmarshals: tables naming a rule that does not exist
        raw = tables.read_bytes()
        assert b"workload_decl" in raw
        tables.write_bytes(raw.replace(b"workload_decl", b"wo2kload_decl"))
    else:
        DAMAGE[how](tables)
    for _ in range(2):
        r = wspc("check", ROOT / "examples" / "rmsnorm.wsp", cache=cache)
        assert r.returncode == 0 and "ok: module `rmsnorm`" in r.stdout, r.stderr  # was: exit 70
    assert tables.is_file() or how == "folder"  # rewritten (a folder cannot be replaced)


# ---------------------------------------------------------------------------------------------
# An artifact directory (`wspc compile -o DIR`) cannot be rebuilt: damage is a clear error


@pytest.mark.parametrize("name, how", [("module.so", "truncated"), ("module.so", "folder"),
                                       ("module.so", "fifo"), ("run.pickle", "random"),
                                       ("run.pickle", "truncated"), ("run.pickle", "missing"),
                                       ("checksums.json", "missing")])
def test_damaged_artifact_directory_is_a_clear_error(cache, src, tmp_path, name, how):
    out = tmp_path / "art"
    assert wspc("compile", src, "-o", out, cache=cache).returncode == 0
    DAMAGE[how](out / name)
    r = wspc("run", out, "--random-inputs", "0", "--bind", "N=4", "--bind", "S=0", cache=cache)
    assert r.returncode == 1, r.stderr  # before: SIGBUS, or exit 70
    assert r.stderr.startswith(f"{out}: error: not a wspc artifact directory (")
    assert name in r.stderr.splitlines()[0] and "Traceback" not in r.stderr
    assert "help: make it again with `wspc compile FILE.wsp -o DIR`" in r.stderr


@pytest.mark.parametrize("what", ["folder", "file"])
def test_compile_o_never_replaces_what_is_not_an_artifact(cache, src, tmp_path, what):
    out = tmp_path / "mine"
    if what == "folder":
        out.mkdir()
        (out / "notes.txt").write_text("keep me")
    else:
        out.write_text("keep me")
    r = wspc("compile", src, "-o", out, cache=cache)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"{out}: error: exists and is not a wspc artifact directory" in r.stderr
    assert (out / "notes.txt" if what == "folder" else out).read_text() == "keep me"
    again = tmp_path / "art"
    assert wspc("compile", src, "-o", again, cache=cache).returncode == 0
    assert wspc("compile", src, "-o", again, cache=cache).returncode == 0  # its own: replaced


# ---------------------------------------------------------------------------------------------
# Temporaries of killed builds are swept by age, never one a live build holds


def _age(path: Path) -> None:
    """Date `path` long ago (2001): older than any sweep's threshold, whatever the clock says."""
    os.utime(path, (1e9, 1e9), follow_symlinks=False)


def test_temporaries_of_a_killed_compile_are_swept_but_not_a_live_ones(cache, tmp_path):
    # a compiler that says when it runs (on a FIFO the test reads: no clock) and then never
    # ends: the build is killed while its workspace exists, as `kill -9` during a compile does
    fifo = tmp_path / "running"
    os.mkfifo(fifo)
    fake = tmp_path / "slowcc"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && {{ echo slow 1.0; exit 0; }}\n"
                    f"echo running > '{fifo}'\nexec sleep 100000\n")
    fake.chmod(0o755)
    modules = cache / "modules"
    folders = [modules, cache / "runtime"]
    before = {p for f in folders if f.is_dir() for p in f.iterdir()}
    proc = subprocess.Popen([sys.executable, "-m", "ptowsp", "compile",
                             source(tmp_path / "a", "x + x")],
                            env={**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(cache),
                                 "CC": str(fake)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    def first_line():
        with open(fifo) as fh:  # the module's and the runtime's compilers may both write
            return fh.readline()

    try:
        assert Pending(first_line).result() == "running\n"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # kill -9, the C compilers with it
        proc.wait()
    left = [p for f in folders for p in f.iterdir()
            if p not in before and not p.name.startswith(".probe-")]
    # the module's and the runtime's workspaces (they are compiled together)
    assert left and all(p.name.startswith(".") for p in left), left
    live = modules / ".0123456789abcdef01234567-live"  # what a running build holds: old, but locked
    live.mkdir()
    lock = os.open(live, os.O_RDONLY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    stale_file = cache / "index" / ".0123456789abcdef01234567.pickle.x1y2.tmp"  # a write killed half-way
    stale_file.write_bytes(b"half")
    try:
        for p in (*left, live, stale_file):
            _age(p)
        young = modules / ".76543210fedcba9876543210-young"
        young.mkdir()
        run_ok(source(tmp_path / "b", "x * x"), cache, "x * x")  # a cold build sweeps
        assert not any(p.exists() for p in left) and not stale_file.exists()
        assert live.exists() and young.exists()
        info = wspc("cache", "info", cache=cache)
        assert "temporary: 2 " in info.stdout
    finally:
        os.close(lock)


# ---------------------------------------------------------------------------------------------
# An unusable cache: a temporary one, with a warning


def _unprivileged() -> list[str]:
    """A prefix running a command as an unprivileged user (root ignores a read-only mode)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root, and no setpriv to drop privileges")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.parametrize("kind", ["devnull", "file", "under_a_file", "read_only"])
def test_unusable_cache_falls_back_to_a_temporary_one_with_a_warning(kind):
    base = Path(tempfile.mkdtemp())
    try:
        base.chmod(0o755)  # readable by the unprivileged user of `read_only`
        src = source(base / "src", "x - x")
        (base / "src").chmod(0o777)
        prefix = []
        if kind == "devnull":
            bad = Path("/dev/null")
        elif kind == "file":
            bad = base / "cachefile"
            bad.write_text("mine")
        elif kind == "under_a_file":
            (base / "cachefile").write_text("mine")
            bad = base / "cachefile" / "cache"
        else:
            bad = base / "ro"
            bad.mkdir()
            bad.chmod(0o555)
            prefix = _unprivileged()
        stderr = run_ok(src, bad, "x - x", prefix=prefix)  # before: exit 70
        (warning,) = [line for line in stderr.splitlines() if line.startswith("wspc: warning:")]
        assert f"cannot use the build cache {bad}" in warning and "WSPC_CACHE_DIR" in warning
        assert "Traceback" not in stderr
        if kind == "devnull":
            assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
        elif kind == "read_only":
            assert not list(bad.iterdir())
        else:
            assert (base / "cachefile").read_text() == "mine"
        info = wspc("cache", "info", cache=bad)
        assert info.returncode == 0, info.stderr
        cleared = wspc("cache", "clear", cache=bad)
        assert cleared.returncode == 0 and "removed 0.0 MB" in cleared.stdout
        if kind == "devnull":
            assert "unusable:  not a directory" in info.stdout
            assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_no_home_directory_is_a_temporary_cache_too():
    """HOME unset, for an account without a home (a bare container's user, uid 54321 here, in no
    passwd file): `~/.cache/wspc` has no place. A run builds in a temporary cache with the
    warning (before: exit 70), and `wspc cache info|clear` say what to set."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run as a user with no passwd entry")
    import pwd

    with pytest.raises(KeyError):
        pwd.getpwuid(54321)
    base = Path(tempfile.mkdtemp())
    try:
        base.chmod(0o755)
        src = source(base / "src", "x - x")
        env = {k: v for k, v in os.environ.items() if k not in ("HOME", "WSPC_CACHE_DIR")}
        env["PYTHONPATH"] = str(ROOT)
        nobody = ["setpriv", "--reuid=54321", "--regid=54321", "--clear-groups"]

        def run(*args):
            return subprocess.run([*nobody, sys.executable, "-m", "ptowsp", *map(str, args)],
                                  capture_output=True, text=True, cwd=base, env=env, timeout=900)

        r = run("run", src, "--bind", "N=8", "--bind", "S=0", "--random-inputs", "0")
        assert r.returncode == 0, r.stderr
        (warning,) = [line for line in r.stderr.splitlines() if line.startswith("wspc: warning:")]
        assert ("cannot use the build cache ~/.cache/wspc (no home directory: HOME is not set"
                in warning and "set WSPC_CACHE_DIR" in warning)
        for cmd in ("info", "clear"):
            r = run("cache", cmd)
            assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
            assert r.stderr.splitlines() == [
                "~/.cache/wspc: error: no home directory: HOME is not set and the account has none",
                "help: set WSPC_CACHE_DIR to a writable directory"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("where", ["our write", "the linker"])
def test_cache_out_of_room_is_a_clear_error(cache, tmp_path, monkeypatch, where):
    monkeypatch.setenv("WSPC_CACHE_DIR", str(cache))
    if where == "our write":
        def seal(directory, names):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(directory / names[0]))

        monkeypatch.setattr(build, "seal", seal)
    else:
        real = build._run

        def run(cmd, what):
            if what == "linking the module":
                raise build.BuildError("the C compiler failed on linking the module",
                                       "ld: final link failed: No space left on device\n")
            real(cmd, what)

        monkeypatch.setattr(build, "_run", run)
    result = CliRunner().invoke(main, ["compile", str(source(tmp_path / "a", "x * x + x"))])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(
        f"{cache}: error: cannot write the build cache: No space left on device")
    assert "WSPC_CACHE_DIR" in result.output and "internal error" not in result.output
    assert not [p for p in (cache / "modules").iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("env, words", [
    ({"CC": "/no/such/cc"}, "/no/such/cc: error: cannot run the C compiler"),
    ({"CC": "cc '-O2"}, "$CC: error: cannot split CC="),
    ({"WSPC_CFLAGS": "-O2 \"-g"}, "$WSPC_CFLAGS: error: cannot split WSPC_CFLAGS="),
])
def test_compiler_settings_that_cannot_work_are_clear_errors(cache, tmp_path, env, words):
    r = wspc("compile", source(tmp_path / "a", "x * x + x"), cache=cache, env=env)
    assert r.returncode == 1, r.stderr  # before: exit 70
    assert r.stderr.startswith(words) and "Traceback" not in r.stderr and "help: " in r.stderr


def test_no_linker_is_a_clear_error(cache, tmp_path):
    """A compiler and an assembler on PATH but no `ld` (wspc joins the runtime's objects with
    `ld -r`): the user's error naming the linker, not exit 70."""
    cc, assembler = shutil.which(os.environ.get("CC", "cc")), shutil.which("as")
    if cc is None or assembler is None:
        pytest.skip("needs cc and as on PATH")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "as").symlink_to(assembler)
    r = wspc("compile", source(tmp_path / "a", "x * x + x"), cache=cache,
             env={"CC": cc, "PATH": str(bin_)})
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines() == ["ld: error: cannot run the linker: No such file or directory",
                                     "help: install binutils (wspc joins the runtime's objects with ld)"]


@pytest.mark.parametrize("says", [
    "cc: fatal error: cannot execute 'as': execvp: No such file or directory",
    "/usr/bin/ld: cannot find -lm: No such file or directory",
    "clang: error: unable to execute command: Executable ld was not found",
])
def test_a_broken_toolchain_is_a_clear_error(cache, tmp_path, says):
    fake = tmp_path / "fakecc"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && {{ echo fake 1.0; exit 0; }}\n"
                    f"echo \"{says}\" >&2\nexit 1\n")
    fake.chmod(0o755)
    r = wspc("compile", source(tmp_path / "a", "x * x + x"), cache=cache, env={"CC": str(fake)})
    assert r.returncode == 1, r.stderr  # before: exit 70, "This is a bug in wspc"
    assert r.stderr.startswith(f"{fake}: error: the C compiler cannot build anything: {says}")
    assert "help: repair the C toolchain" in r.stderr and "bug" not in r.stderr


# ---------------------------------------------------------------------------------------------
# `wspc cache info` and `clear` on a damaged cache


def test_cache_info_counts_damage_and_clear_removes_all_of_wspcs(cache, src):
    _truncate(only(cache / "modules", "module.so"))
    (cache / "modules" / ".0123456789abcdef01234567-killed").mkdir()
    (cache / "runtime" / ".0123456789abcdef01234567-killed").mkdir()
    (cache / "index" / "0123456789abcdef01234567.pickle").write_bytes(b"garbage")
    (cache / "mine.txt").write_text("not wspc's")
    (cache / "runtime" / "notes.txt").write_text("not wspc's either")
    (cache / "runtime" / ".notes").write_text("nor this")
    (cache / "runtime" / "0123456789abcdef01234567.o").write_bytes(b"an older wspc's runtime")
    info = wspc("cache", "info", cache=cache)
    assert info.returncode == 0, info.stderr
    lines = info.stdout
    # damaged: the truncated library, and the older layout's runtime object
    assert "modules:   0" in lines and "runtimes:  1" in lines and "damaged:   2 " in lines
    assert "temporary: 2 " in lines and "index:     2" in lines and "other:     3 " in lines
    cleared = wspc("cache", "clear", cache=cache)
    assert cleared.returncode == 0, cleared.stderr
    assert not list((cache / "modules").iterdir()) and not list((cache / "index").iterdir())
    assert sorted(p.name for p in (cache / "runtime").iterdir()) == [".notes", "notes.txt"]
    assert not list(cache.glob("grammar-*")) and (cache / "mine.txt").read_text() == "not wspc's"
    after = wspc("cache", "info", cache=cache).stdout
    assert "modules:   0" in after and "damaged:   0 " in after and "temporary: 0 " in after
    assert not notes(run_ok(src, cache))  # and it builds again from nothing


def test_cache_clear_keeps_what_a_live_build_holds(cache):
    live = cache / "modules" / ".0123456789abcdef01234567-live"
    live.mkdir()
    lock = os.open(live, os.O_RDONLY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cleared = wspc("cache", "clear", cache=cache)
        assert cleared.returncode == 0 and "kept 1 temporary entries" in cleared.stdout
        assert live.exists() and not list((cache / "runtime").iterdir())
    finally:
        os.close(lock)


def test_cache_folders_that_are_files_are_replaced(cache, src):
    shutil.rmtree(cache / "index")
    (cache / "index").write_text("oops")
    assert len(notes(run_ok(src, cache))) == 1
    assert (cache / "index").is_dir()


def test_a_folder_that_is_not_a_cache_loses_nothing(cache, src):
    """WSPC_CACHE_DIR set by mistake to a folder of the user's: wspc's repairs, sweeps and
    `cache clear` touch only names wspc gives."""
    shutil.rmtree(cache / "index")
    (cache / "index").write_text("the user's file called index")
    (cache / "notes.txt").write_text("the user's")
    old = cache / "runtime" / ".the-users-dotfile"
    old.write_text("old")
    _age(old)
    stderr = run_ok(source(cache.parent / "new", "x * x"), cache, "x * x")
    assert "wspc: warning: cannot use the build cache" in stderr and "index is not a directory" in stderr
    assert (cache / "index").read_text() == "the user's file called index" and old.exists()
    assert wspc("cache", "clear", cache=cache).returncode == 0
    assert (cache / "index").read_text() == "the user's file called index"
    assert old.exists() and (cache / "notes.txt").exists()


# ---------------------------------------------------------------------------------------------
# A cache shared by several machines (an NFS home): `-march=native` code stays on its CPU


def test_native_code_is_never_reused_on_another_cpu(cache, src, monkeypatch):
    """With `-march=native` (the default), a library built on one CPU would die of SIGILL on an
    older one: the CPU is part of the runtime's and the modules' keys, and of the index's."""
    from ptowsp import driver

    monkeypatch.setenv("WSPC_CACHE_DIR", str(cache))
    cpu = driver.target("cpu_sim")
    built = {}
    for host in ("cpu A", "cpu B", "cpu A"):
        monkeypatch.setattr(build, "_CPU", host, raising=False)
        compiled = driver.compile_file(src, cpu)
        built.setdefault(host, compiled.artifact.directory)
        assert compiled.artifact.directory == built[host]
    assert built["cpu A"] != built["cpu B"]
    monkeypatch.setenv("WSPC_CFLAGS", "-std=c11 -O2 -fPIC -pthread")  # portable code: shared
    portable = set()
    for host in ("cpu A", "cpu B"):
        monkeypatch.setattr(build, "_CPU", host, raising=False)
        portable.add(driver.compile_file(src, cpu).artifact.directory)
    assert len(portable) == 1


def test_the_compiler_runs_with_a_large_stack(tmp_path):
    """gcc recurses along a chain of dependent values: at its own 64 MiB a kernel chain at the
    front end's nesting limit (100,000 levels) crashed cc1 (exit 70); the compiler now gets
    as much stack as the hard limit allows, up to 4 GiB, and this process keeps its own."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    want = build._STACK_WANTED if hard == resource.RLIM_INFINITY else min(hard, build._STACK_WANTED)
    out = tmp_path / "stack"
    for run in (lambda cmd: build._run(cmd, "a probe"), lambda cmd: build._run_all([(cmd, "a probe")])):
        run(["sh", "-c", f"ulimit -s > {out}"])
        expected = "unlimited" if soft == resource.RLIM_INFINITY else str(max(soft, want) // 1024)
        assert out.read_text().strip() == expected
        assert resource.getrlimit(resource.RLIMIT_STACK) == (soft, hard)
