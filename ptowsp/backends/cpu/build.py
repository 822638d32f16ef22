"""Build generated C into a loadable artifact, through a content-addressed cache that heals.

The cache (`cache_root()`: `$WSPC_CACHE_DIR`, or `~/.cache/wspc`) holds
    modules/<key>/   module.so, the C it was built from, manifest.json, checksums.json
    runtime/<key>/   runtime.o (the C runtime, compiled once per compiler and flags), checksums.json
    index/           which source built which module (artifact.py)
    grammar-*.marshal  the parser's tables (frontend/parser.py)
A module's `key` hashes everything that affects its bytes (the generated sources, the runtime's
key, the compiler and its flags, wspc's version, the layout's `FORMAT`); a cold module build
compiles only the generated code and links the cached runtime.

Integrity: an entry records the size and SHA-256 of its binary (`checksums.json`) before it is
published, and `damage` checks them before a library is loaded or the runtime is linked, so a
truncated, zeroed or replaced file is never mapped (a truncated mapping is a SIGBUS). An entry
that fails is discarded and rebuilt once, with a one-line note on stderr.

Concurrency: every entry is built in a temporary directory beside it and renamed into place; a
rename is atomic, so readers see a complete entry or none. When eight `wspc compile` of one
module race (`make -j8`), each builds, one rename wins, and the others throw their copy away
and use the winner's. (An entry is published only if absent, not replaced as
`files.replace_dir` would: another process may be loading the winner's library, and a replace
leaves a moment with no directory at all.) A builder holds an advisory lock (`flock`) on its
temporary directory; the lock dies with the process, so `sweep` removes what a killed build
left (older than `SWEEP_AGE` and unlocked) and never what a live build is filling.

An unusable cache (a file or /dev/null where the directory should be, no permission, a
read-only file system) is not an error: the process builds in a private temporary cache,
removed when it exits, after one warning. A cache that runs out of room while building is a
`WspError` naming the cache and `WSPC_CACHE_DIR`.
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence

from ...diagnostics import Diagnostic, InternalError, WspError, file_error
from ...files import FileError, cache_dir, write_atomic
from ...progress import phase
from ...spans import Span
from ...version import __version__

RUNTIME_DIR = Path(__file__).resolve().parents[2] / "runtime_c"  # a link to the repository's runtime_c/
DEFAULT_CFLAGS = ("-std=c11", "-O3", "-march=native", "-fPIC", "-pthread",
                  "-fno-math-errno", "-Wall", "-Wno-unused-function", "-Wno-unused-variable",
                  "-Wno-unused-but-set-variable")


FORMAT = "2"  # the cache's layout, part of every key: an older layout is never read
RECORD = "checksums.json"  # in an entry: {file: {"size": bytes, "sha256": hex}}
LIBRARY = "module.so"
RUNTIME = "runtime.o"
SWEEP_AGE = 3600.0  # seconds: a temporary entry no live build holds is removed after this


def _words(variable: str, default: str) -> list[str]:
    """The command words in the environment variable `variable` (shell quoting), or `default`'s."""
    text = os.environ.get(variable)
    try:
        words = shlex.split(text) if text is not None else shlex.split(default)
    except ValueError as err:
        raise WspError([Diagnostic(Span(f"${variable}", 0, 0, 0, 0), "cc",
                                   f"cannot split {variable}={text!r} into words: {err}",
                                   "quote it as a shell would")]) from None
    return words


def compiler() -> list[str]:
    """The C compiler's command: `$CC` (default `cc`)."""
    return _words("CC", "cc") or ["cc"]


def cxx_compiler() -> list[str]:
    """The C++ compiler's command (for `extern cpp` bodies): `$CXX` (default `c++`)."""
    return _words("CXX", "c++") or ["c++"]


# decision: C++ bodies compile as C++17 with the C flags' optimisation and code model (no
# -ffast-math either); `$WSPC_CXXFLAGS` replaces these as `$WSPC_CFLAGS` does the C ones
DEFAULT_CXXFLAGS = ("-std=c++17", "-O3", "-march=native", "-fPIC", "-pthread", "-fno-math-errno",
                    "-Wall", "-Wno-unused-function", "-Wno-unused-variable",
                    "-Wno-unused-but-set-variable")


def cxxflags() -> list[str]:
    """The C++ compiler's flags: `$WSPC_CXXFLAGS` (it replaces the defaults), or `DEFAULT_CXXFLAGS`."""
    if os.environ.get("WSPC_CXXFLAGS") is None:
        return list(DEFAULT_CXXFLAGS)
    return _words("WSPC_CXXFLAGS", "")


def cflags() -> list[str]:
    """The C compiler's flags: `$WSPC_CFLAGS` (it replaces the defaults), or `DEFAULT_CFLAGS`."""
    if os.environ.get("WSPC_CFLAGS") is None:
        return list(DEFAULT_CFLAGS)
    return _words("WSPC_CFLAGS", "")


@dataclass(frozen=True)
class Artifact:
    """A built module: where its shared object and sources are, and its cache key."""

    key: str
    directory: Path
    cached: bool  # True when it was already in the cache

    @property
    def library(self) -> Path:
        return self.directory / LIBRARY


class BuildError(Exception):
    """The C (or C++) compiler rejected the code; `output` is what it said, `cxx` whether it
    was the C++ compiler (on `extern cpp` bodies)."""

    def __init__(self, message: str, output: str, cxx: bool = False):
        super().__init__(message)
        self.output = output
        self.cxx = cxx


CXX_UNITS = "the C++ kernel bodies"  # what `_run_all` says of a C++ unit


def _compiler_identity(cmd: Optional[list[str]] = None) -> str:
    try:
        out = subprocess.run((cmd or compiler()) + ["--version"], capture_output=True, text=True,
                             timeout=30)
        return out.stdout.splitlines()[0] if out.stdout else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8", "surrogateescape"))  # a path may hold bytes that were not UTF-8
        h.update(b"\0")
    return h.hexdigest()[:24]


_IDENTITY: Optional[str] = None


def wspc_identity() -> str:
    """Which wspc this is, down to its files: their paths, sizes and modification times.

    Used where a cache entry skips wspc's own work (the source index), so that an edited or
    upgraded wspc never reuses what an older one decided. Only `stat`s: well under a millisecond."""
    global _IDENTITY
    if _IDENTITY is None:
        package = Path(__file__).resolve().parents[2]
        parts = [__version__]
        for pattern in ("**/*.py", "grammar/*.lark", "runtime_c/*.[ch]", "backends/cpu/**/*.[hj]*"):
            for f in sorted(package.glob(pattern)):
                st = f.stat()
                parts.append(f"{f.relative_to(package)}:{st.st_size}:{st.st_mtime_ns}")
        _IDENTITY = digest(*parts)
    return _IDENTITY


_CPU: Optional[str] = None
_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "flags",  # x86
               "Features", "CPU implementer", "CPU architecture", "CPU variant", "CPU part")  # Arm


def _cpu_identity() -> str:
    """This machine's CPU as `-march=native` sees it: the architecture and, on Linux, the first
    CPU's model and feature flags (one read of /proc/cpuinfo: a fraction of a millisecond)."""
    global _CPU
    if _CPU is None:
        parts = [os.uname().machine]
        try:
            with open("/proc/cpuinfo", "rb") as fh:
                first = fh.read(1 << 16).split(b"\n\n", 1)[0].decode("utf-8", "replace")
            parts += [line for line in first.splitlines()
                      if line.split(":", 1)[0].strip() in _CPU_FIELDS]
        except OSError:
            pass
        _CPU = digest(*parts)
    return _CPU


def target_identity(flags: list[str]) -> str:
    """The CPU code built with `flags` is for: this machine's when a flag says `native` (a
    library built for a newer CPU dies of SIGILL on an older one sharing the cache, e.g. over
    an NFS home), else none (portable code is shared)."""
    return _cpu_identity() if any("native" in f for f in flags) else ""


def _runtime_text() -> str:
    files = sorted(RUNTIME_DIR.glob("*.[ch]"))
    return "".join(f"// {f.name}\n{f.read_text()}" for f in files)


# ---------------------------------------------------------------------------------------------
# Messages and errors about the cache


def note(message: str) -> None:
    """One line on stderr about something the cache did that nobody asked for."""
    print(f"wspc: note: {message}", file=sys.stderr, flush=True)


def _reason(err: OSError) -> str:
    if err.errno == errno.EEXIST:
        return f"{err.filename} is not a directory"
    if err.errno == errno.ENOTDIR:
        return f"a part of {err.filename} is not a directory"
    return f"{err.strerror or err}" + (f": {err.filename}" if err.filename else "")


def _cache_error(root: Path, reason: str) -> WspError:
    return WspError([Diagnostic(Span(str(root), 0, 0, 0, 0), "cache",
                                f"cannot write the build cache: {reason}",
                                "make room there, or set WSPC_CACHE_DIR to another directory")])


_OUT_OF_ROOM = ("No space left on device", "Disk quota exceeded")
# what gcc and clang say when a tool of theirs is missing: the toolchain, not the C, is at fault
_TOOLCHAIN = re.compile(r"^.*(cannot execute|unable to execute|error trying to exec|cannot find -l"
                        r"|cannot find '?ld'?\b).*$", re.M)


@contextmanager
def _environment_errors(root: Path) -> Iterator[None]:
    """Turn what the machine refuses while building into the user's error: the file system (no
    room, no permission, a folder that vanished: naming the cache), or a C toolchain missing a
    part. None of it is a bug of wspc (exit 70 is kept for a compiler rejecting our C)."""
    try:
        yield
    except OSError as err:
        raise _cache_error(root, _reason(err)) from None
    except BuildError as err:
        room = next((words for words in _OUT_OF_ROOM if words in err.output), None)
        if room is not None:
            raise _cache_error(root, room) from None
        broken = _TOOLCHAIN.search(err.output)
        if broken is None:
            raise
        raise WspError([Diagnostic(Span(compiler()[0], 0, 0, 0, 0), "cc",
                                   f"the C compiler cannot build anything: {broken.group(0).strip()}",
                                   "repair the C toolchain, or name another compiler with CC=...")]) from None


def _no_compiler(cmd: list[str], err: OSError) -> WspError:
    if cmd[0] == "ld":
        return WspError([Diagnostic(Span("ld", 0, 0, 0, 0), "cc",
                                    f"cannot run the linker: {err.strerror or err}",
                                    "install binutils (wspc joins the runtime's objects with ld)")])
    if cmd[0] == cxx_compiler()[0] and cmd[0] != compiler()[0]:
        return WspError([Diagnostic(Span(cmd[0], 0, 0, 0, 0), "cc",
                                    f"cannot run the C++ compiler for `extern cpp` bodies: "
                                    f"{err.strerror or err}",
                                    "install a C++ compiler (g++ or clang++), or name one with "
                                    "CXX=...")])
    return WspError([Diagnostic(Span(cmd[0], 0, 0, 0, 0), "cc",
                                f"cannot run the C compiler: {err.strerror or err}",
                                "install a C compiler, or name one with CC=...")])


# ---------------------------------------------------------------------------------------------
# Where the cache is


_PRIVATE: dict[str, Path] = {}  # an unusable cache -> the temporary one this process uses instead


def cache_root() -> Path:
    """Where builds go: `files.cache_dir()` with its folders made, or, when it cannot be written
    (read-only, not a directory, /dev/null), a private temporary cache for this process, after
    one warning on stderr. (Reading the cache needs none of this: `cache_dir()`.)"""
    try:
        wanted = cache_dir()
    except FileError as err:
        wanted, why = err.where, err.message
    else:
        if str(wanted) in _PRIVATE:
            return _PRIVATE[str(wanted)]
        try:
            _prepare(wanted)
            return wanted
        except OSError as err:
            why = _reason(err)
    if str(wanted) in _PRIVATE:
        return _PRIVATE[str(wanted)]
    try:
        private = Path(tempfile.mkdtemp(prefix="wspc-cache-"))
        _prepare(private)
    except OSError as err:
        raise _cache_error(wanted, f"{why}; nor can a temporary one be made ({_reason(err)})") from None
    atexit.register(shutil.rmtree, private, True)
    print(f"wspc: warning: cannot use the build cache {wanted} ({why}); building in a temporary "
          "cache, removed at exit (set WSPC_CACHE_DIR to a writable directory to keep builds)",
          file=sys.stderr, flush=True)
    _PRIVATE[str(wanted)] = private
    return private


_FOLDERS = ("modules", "runtime", "index")
_KEY = re.compile(r"[0-9a-f]{24}")


def _wspc_made(folder: str, name: str) -> bool:
    """Whether `name`, in the cache's folder `folder` ("" for the cache itself), is a name wspc
    gives: a key (`index`: KEY.pickle; `runtime`: KEY.o too, the layout before FORMAT 2, an
    unusable entry now), a temporary (`.KEY-…`, `.KEY.pickle.….tmp`, `.trash-…`, `.probe-…`) or
    the parser's tables. Repairing, sweeping and clearing touch nothing else, so a
    WSPC_CACHE_DIR set by mistake to someone's folder loses nothing of theirs."""
    if not folder:
        return name in _FOLDERS or name.startswith(("grammar-", ".grammar-", ".trash-"))
    if name.startswith("."):
        return name.startswith((".trash-", ".probe-")) or _KEY.match(name[1:]) is not None
    suffix = {"index": ".pickle", "runtime": ".o"}.get(folder, "")  # runtime/KEY.o: the old layout
    return _KEY.fullmatch(name.removesuffix(suffix)) is not None


def _prepare(root: Path) -> None:
    """Make the cache's folders and prove each writable. A file where a folder should be is
    replaced if the cache holds only what wspc makes; else the cache is not usable."""
    root.mkdir(parents=True, exist_ok=True)
    for name in _FOLDERS:
        folder = root / name
        if os.path.lexists(folder) and not folder.is_dir():
            if not all(_wspc_made("", p.name) for p in root.iterdir()):
                raise OSError(errno.EEXIST, "not a directory", str(folder))
            discard(folder, "not a directory")
        folder.mkdir(exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)


# ---------------------------------------------------------------------------------------------
# Entries: sealed, verified, discarded, published


def _open_regular(path: Path):
    """`path` opened for reading if it is a regular file; else an OSError (`O_NONBLOCK`: a FIFO
    put in a cache entry's place must not hang a run)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return os.fdopen(fd, "rb")


def read_regular(path: Path) -> bytes:
    """The bytes of the regular file `path` (anything else is an OSError)."""
    with _open_regular(path) as fh:
        return fh.read()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with _open_regular(path) as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def seal(directory: Path, names) -> None:
    """Record the size and SHA-256 of the files `names` of `directory` in its checksums.json."""
    record = {n: {"size": (directory / n).stat().st_size, "sha256": _sha256(directory / n)}
              for n in names}
    write_atomic(directory / RECORD, json.dumps(record, indent=1, sort_keys=True) + "\n")


def damage(directory: Path, name: str) -> Optional[str]:
    """Why the file `name` of `directory` is not the one its checksums.json records (None: it
    is). Checked before the file is mapped or linked: a truncated library is a SIGBUS."""
    if not directory.is_dir():
        return "not a directory" if os.path.lexists(directory) else "missing"
    try:
        want = json.loads(read_regular(directory / RECORD))[name]
        size, sha = int(want["size"]), str(want["sha256"])
    except FileNotFoundError:
        return f"no {RECORD}"
    except (OSError, ValueError, LookupError, TypeError):
        return f"{RECORD} is unreadable"
    path = directory / name
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            return f"{name} is not a file"
        if st.st_size != size:
            return f"{name} has {st.st_size} bytes, not the {size} built"
        if _sha256(path) != sha:
            return f"{name} differs from the file built (its checksum)"
    except OSError as err:
        return f"{name}: {err.strerror or err}"
    return None


def _ready(entry: Path, name: str) -> bool:
    """Whether the cache entry `entry` holds a good `name`; a damaged entry is discarded."""
    if not os.path.lexists(entry):
        return False
    problem = damage(entry, name)
    if problem is None:
        return True
    discard(entry, problem)
    return False


def discard(path: Path, reason: str) -> None:
    """Remove the damaged cache entry `path` (the caller rebuilds it), with a note on stderr."""
    note(f"rebuilt a damaged cache entry {path} ({reason})")
    _remove(path)


def _remove(path: Path) -> None:
    """Rename `path` out of the way (readers see it whole or not at all), then delete it."""
    trash = path.with_name(f".trash-{path.name}-{os.getpid()}-{threading.get_ident()}")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return  # another process removed it first
    _delete(trash)


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _publish(tmp: Path, final: Path, name: str) -> None:
    """Rename `tmp` to `final`, unless another process published a good one first (then ours is
    dropped with its workspace); a damaged `final` in the way is discarded."""
    for _ in range(3):
        try:
            os.rename(tmp, final)
            return
        except OSError:
            if not os.path.lexists(final):
                raise
            if _ready(final, name):
                return


@contextmanager
def _workspace(parent: Path, name: str) -> Iterator[Path]:
    """A new temporary directory in `parent`, locked (`flock`) while the build uses it, and
    removed after unless it was published. The lock dies with the process: `sweep` tells a
    killed build's workspace from a live one by it."""
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".{name}-"))
    fd = os.open(tmp, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a new directory: no one else holds it
        tmp.chmod(0o755)  # mkdtemp's 0700 is for the temporary name only
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already if published
        os.close(fd)


def _in_use(path: Path) -> bool:
    """Whether a live build holds the lock of the temporary entry `path`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: a FIFO must not hang us
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _entries(root: Path) -> tuple[list[Path], int]:
    """What wspc made in the cache `root` (its folders' entries, the parser's tables, and a
    folder that is not one when the cache holds only wspc's), and how many entries it did not."""
    try:
        top = list(root.iterdir())
    except OSError:
        return [], 0
    own = [p for p in top if p.name not in _FOLDERS and _wspc_made("", p.name)]
    other = sum(not _wspc_made("", p.name) for p in top)
    for name in _FOLDERS:
        folder = root / name
        if os.path.lexists(folder) and not folder.is_dir():
            if not other:
                own.append(folder)
            continue
        try:
            inside = list(folder.iterdir())
        except OSError:
            continue
        own += [p for p in inside if _wspc_made(name, p.name)]
        other += sum(not _wspc_made(name, p.name) for p in inside)
    return own, other


def temporaries(root: Path) -> list[Path]:
    """The cache's temporary entries: workspaces, files being written, damaged entries being
    deleted, the parser's tables being written."""
    return [p for p in _entries(root)[0] if p.name.startswith(".")]


def sweep(root: Path, age: float = SWEEP_AGE) -> int:
    """Remove what killed builds left in the cache: temporary entries last changed more than
    `age` seconds ago that no live build holds. Returns how many were removed."""
    removed, now = 0, time.time()
    for path in temporaries(root):
        try:
            if now - path.lstat().st_mtime < age or _in_use(path):
                continue
        except OSError:
            continue
        _delete(path)
        removed += 1
    return removed


# ---------------------------------------------------------------------------------------------
# Running the compiler


# decision: the compiler runs with as much stack as the system allows (up to 4 GiB). gcc
# recurses along a chain of dependent values, and at its default 8 MiB (64 MiB once it raises
# its own) a 100,000-level expression (the front end's limit, language.md "Nesting") crashed
# cc1; with the stack it compiles (measured: 13 s, 0.9 GB). The limit is set in this process
# around the spawn, so children inherit it, and put back after: no `preexec_fn` in a process
# with threads.
_STACK_WANTED = 4 << 30
_stack_lock = threading.Lock()


@contextmanager
def _compiler_stack() -> Iterator[None]:
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_STACK)
    except (ImportError, OSError, ValueError):  # no rlimits here: the compiler's own stack
        yield
        return
    want = _STACK_WANTED if hard == resource.RLIM_INFINITY else min(hard, _STACK_WANTED)
    if soft == resource.RLIM_INFINITY or soft >= want:
        yield
        return
    with _stack_lock:
        try:
            resource.setrlimit(resource.RLIMIT_STACK, (want, hard))
        except (OSError, ValueError):
            pass
        try:
            yield
        finally:
            try:
                resource.setrlimit(resource.RLIMIT_STACK, (soft, hard))
            except (OSError, ValueError):
                pass


def _run(cmd: list[str], what: str) -> None:
    try:
        with _compiler_stack():
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except OSError as err:
        raise _no_compiler(cmd, err) from None
    try:
        stdout, stderr = proc.communicate()
    except BaseException:  # Ctrl-C: the compiler goes too (as `subprocess.run` does)
        proc.kill()
        proc.wait()
        raise
    if proc.returncode != 0:
        raise BuildError(f"the C compiler failed on {what}", stdout + stderr)


def _run_all(jobs: list[tuple[list[str], str]]) -> None:
    """Runs the commands at once (the runtime's files compile in parallel) and waits for all."""
    procs = []
    try:
        for cmd, what in jobs:
            try:
                with _compiler_stack():
                    procs.append((subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT, text=True), what))
            except OSError as err:
                raise _no_compiler(cmd, err) from None
        failed = None
        for proc, what in procs:
            out, _ = proc.communicate()
            if proc.returncode != 0 and failed is None:
                cxx = what == CXX_UNITS
                failed = BuildError(f"the {'C++' if cxx else 'C'} compiler failed on {what}", out,
                                    cxx)
        if failed:
            raise failed
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


# ---------------------------------------------------------------------------------------------
# The runtime and the modules


def _runtime_key() -> str:
    flags = cflags()
    return digest(FORMAT, _runtime_text(), " ".join(compiler() + flags), _compiler_identity(),
                  target_identity(flags))  # a module's key includes this key, so its CPU too


def _compile_runtime(tmp: Path) -> None:
    """runtime.o in `tmp`: the runtime's files compiled in parallel, then joined by `ld -r`."""
    flags, objs, jobs = cflags(), [], []
    for src in sorted(RUNTIME_DIR.glob("*.c")):
        obj = tmp / (src.name + ".o")
        jobs.append((compiler() + flags + ["-I", str(RUNTIME_DIR), "-c", str(src), "-o", str(obj)],
                     f"runtime_c/{src.name}"))
        objs.append(obj)
    _run_all(jobs)
    _run(["ld", "-r", "-o", str(tmp / RUNTIME)] + [str(o) for o in objs], "linking the runtime objects")
    for o in objs:
        o.unlink()


def _build_entry(entry: Path, name: str, fill) -> None:
    """Build the entry `entry` (whose main file is `name`) with `fill(workspace)`, seal it and
    publish it."""
    with _workspace(entry.parent, entry.name) as tmp:
        fill(tmp)
        seal(tmp, [name])
        _publish(tmp, entry, name)


_BUILDING_RUNTIME = "building the runtime (once per compiler and flags; then cached)"


def runtime_object(root: Optional[Path] = None) -> Path:
    """The runtime compiled with the current compiler and flags (built once, then cached)."""
    root = root or cache_root()
    entry = root / "runtime" / _runtime_key()
    with _environment_errors(root):
        if not _ready(entry, RUNTIME):
            with phase(_BUILDING_RUNTIME):
                _build_entry(entry, RUNTIME, _compile_runtime)
    return entry / RUNTIME


def build(sources: Mapping[str, str], root: Optional[Path] = None,
          include_dirs: Sequence[str] = ()) -> Artifact:
    """Compile `sources` ({file name: text}; `.c` files as C, `.cpp` files as C++ with
    `include_dirs` on their include path) with the runtime."""
    root = root or cache_root()
    with _environment_errors(root):
        return _build(sources, root, tuple(include_dirs))


def _cxx_key(sources: Mapping[str, str], include_dirs: tuple[str, ...]) -> str:
    """What C++ units add to a module's key: the C++ compiler, its flags, and every file under
    the include directories (their text: a header edited is a new module)."""
    if not any(n.endswith(".cpp") for n in sources):
        return ""
    parts = [" ".join(cxx_compiler() + cxxflags()), _compiler_identity(cxx_compiler())]
    for d in include_dirs:
        parts.append(f"-I{os.path.abspath(d)}")
        for folder, dirs, files in os.walk(d):
            dirs.sort()
            for f in sorted(files):
                path = os.path.join(folder, f)
                try:
                    parts.append(f"{path}\n" + hashlib.sha256(Path(path).read_bytes()).hexdigest())
                except OSError:
                    parts.append(f"{path}\n-")  # unreadable: the compiler says so if it is used
    return digest(*parts)


def _build(sources: Mapping[str, str], root: Path, include_dirs: tuple[str, ...] = ()) -> Artifact:
    flags = cflags()
    runtime_key = _runtime_key()
    key = digest(FORMAT, __version__, " ".join(compiler() + flags), _compiler_identity(),
                 runtime_key, _cxx_key(sources, include_dirs),
                 *(f"{name}\n{text}" for name, text in sorted(sources.items())))
    final = root / "modules" / key
    if _ready(final, LIBRARY):
        return Artifact(key, final, cached=True)
    sweep(root)
    runtime = root / "runtime" / runtime_key
    # decision: the module's files compile in parallel with each other and, the first time,
    # with the runtime's (first compile ever 2.3 -> ~1.4 s on 2 cores); then one link
    runtime_error: list[BaseException] = []
    builder = None
    if not _ready(runtime, RUNTIME):
        def build_runtime() -> None:
            try:
                _build_entry(runtime, RUNTIME, _compile_runtime)
            except BaseException as err:  # re-raised in the calling thread below
                runtime_error.append(err)

        builder = threading.Thread(target=build_runtime)
        builder.start()
    what = "compiling the module's C" + (f", {_BUILDING_RUNTIME}" if builder else "")
    try:
        with phase(what), _workspace(final.parent, key) as tmp:
            for name, text in sources.items():
                (tmp / name).write_text(text)
            c_files = [tmp / n for n in sorted(sources) if n.endswith(".c")]
            cpp_files = [tmp / n for n in sorted(sources) if n.endswith(".cpp")]
            objs = [c.with_suffix(".o") for c in c_files]
            jobs = [(compiler() + flags + ["-I", str(RUNTIME_DIR), "-I", str(tmp), "-c", str(c),
                                           "-o", str(o)], "the generated module")
                    for c, o in zip(c_files, objs)]
            incs = [w for d in include_dirs for w in ("-I", os.path.abspath(d))]
            for c in cpp_files:  # `extern cpp` bodies (cpp_kernels.py)
                objs.append(c.with_name(c.stem + "_cpp.o"))
                jobs.append((cxx_compiler() + cxxflags() + incs + ["-c", str(c), "-o", str(objs[-1])],
                             CXX_UNITS))
            _run_all(jobs)
            if builder is not None:
                builder.join()
                if runtime_error:
                    raise runtime_error[0]
            _run(compiler() + flags + ["-shared"] + [str(o) for o in objs]
                 + [str(runtime / RUNTIME), "-o", str(tmp / LIBRARY), "-lm"]
                 + (["-lstdc++"] if cpp_files else []), "linking the module")
            for o in objs:
                o.unlink()
            seal(tmp, [LIBRARY])
            _publish(tmp, final, LIBRARY)
    finally:
        if builder is not None:
            builder.join()  # an error above: the runtime's build ends before we report it
    return Artifact(key, final, cached=False)


# ---------------------------------------------------------------------------------------------
# `wspc cache info` and `wspc cache clear`


def _size(path: Path) -> int:
    """Bytes under `path` (a file or a folder; links not followed, unreadable parts skipped)."""
    try:
        if not path.is_dir() or path.is_symlink():
            return path.lstat().st_size
    except OSError:
        return 0
    total = 0
    for folder, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(folder, f)).st_size
            except OSError:
                pass
    return total


def _named_cache() -> Path:
    """The cache `wspc cache info|clear` is about; no place for one is the user's error."""
    try:
        return cache_dir()
    except FileError as err:
        raise file_error(err) from None


def cache_info(root: Optional[Path] = None) -> dict:
    """What the cache holds: its directory, good and damaged modules and runtimes, index
    entries, temporary entries, other files (not wspc's), and its size in bytes. `problem`
    says why wspc cannot use it (None when it can)."""
    root = root or _named_cache()
    info = {"directory": str(root), "problem": None, "modules": 0, "runtimes": 0, "damaged": 0,
            "index": 0, "temporary": 0, "other": 0, "bytes": 0}
    if not root.is_dir():
        info["problem"] = "not a directory" if os.path.lexists(root) else None
        return info
    own, info["other"] = _entries(root)
    for path in own:
        info["bytes"] += _size(path)
        kind = path.parent.name if path.parent != root else "grammar"
        if path.name.startswith("."):
            info["temporary"] += 1
        elif kind in ("modules", "runtime"):
            good = damage(path, LIBRARY if kind == "modules" else RUNTIME) is None
            info["modules" if kind == "modules" else "runtimes"] += good
            info["damaged"] += not good
        elif kind == "index":
            info["index"] += 1
        elif path.parent == root and path.name in _FOLDERS:
            info["damaged"] += 1  # a file where a folder should be
    return info


def cache_clear(root: Optional[Path] = None) -> dict:
    """Remove everything wspc made in the cache (good, damaged and temporary entries; not a
    temporary entry a live build holds, nor files wspc did not make). Returns the bytes freed,
    the entries kept for live builds, and those that could not be removed (path, reason)."""
    root = root or _named_cache()
    result = {"bytes": 0, "in_use": 0, "failed": []}
    if not root.is_dir():
        return result
    for path in _entries(root)[0]:
        if path.name.startswith(".") and _in_use(path):
            result["in_use"] += 1
            continue
        size = _size(path)
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            result["bytes"] += size
        except FileNotFoundError:
            pass
        except OSError as err:
            result["failed"].append((str(path), err.strerror or str(err)))
    return result


def internal_build_error(err: BuildError) -> InternalError:
    return InternalError("cpu build", f"{err}\n{err.output.strip()}")


if __name__ == "__main__":  # `python -m ptowsp.backends.cpu.build`: the runtime built now (make)
    import time as _time

    _t0 = _time.perf_counter()
    _was = _ready(cache_root() / "runtime" / _runtime_key(), RUNTIME)
    _obj = runtime_object()
    print(f"wspc runtime: {_obj} " + ("(already built)" if _was else
                                     f"(built in {_time.perf_counter() - _t0:.1f} s)"))
