"""Build generated C into a loadable artifact, through a content-addressed cache.

An artifact is a directory `<cache>/modules/<key>/` holding `module.so` and the C it was built
from; `key` hashes everything that affects the bytes (the generated sources, the runtime's
sources, the compiler and its flags, wspc's version). The runtime itself is compiled once per
compiler and flags into `<cache>/runtime/<key>.o` and linked into every module, so a cold
module build compiles only the generated code.

Concurrency: every file and directory is built under a temporary name in the cache and renamed
into place; a rename is atomic, so readers see a complete artifact or none. When eight
`wspc compile` of one module race (`make -j8`), each builds, one rename wins, and the others
throw their copy away and use the winner's. (A module directory is published only if absent,
not replaced as `files.replace_dir` would: another process may be loading the winner's
library, and a replace leaves a moment with no directory at all.)
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from ...diagnostics import InternalError
from ...files import cache_dir, write_with
from ...version import __version__

RUNTIME_DIR = Path(__file__).resolve().parents[2] / "runtime_c"  # a link to the repository's runtime_c/
DEFAULT_CFLAGS = ("-std=c11", "-O3", "-march=native", "-fPIC", "-pthread",
                  "-fno-math-errno", "-Wall", "-Wno-unused-function", "-Wno-unused-variable",
                  "-Wno-unused-but-set-variable")


def compiler() -> list[str]:
    return shlex.split(os.environ.get("CC", "cc"))


def cflags() -> list[str]:
    extra = os.environ.get("WSPC_CFLAGS")
    return shlex.split(extra) if extra is not None else list(DEFAULT_CFLAGS)


@dataclass(frozen=True)
class Artifact:
    """A built module: where its shared object and sources are, and its cache key."""

    key: str
    directory: Path
    cached: bool  # True when it was already in the cache

    @property
    def library(self) -> Path:
        return self.directory / "module.so"


class BuildError(Exception):
    """The C compiler rejected the code; `output` is what it said."""

    def __init__(self, message: str, output: str):
        super().__init__(message)
        self.output = output


def _compiler_identity() -> str:
    try:
        out = subprocess.run(compiler() + ["--version"], capture_output=True, text=True, timeout=30)
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


def _runtime_text() -> str:
    files = sorted(RUNTIME_DIR.glob("*.[ch]"))
    return "".join(f"// {f.name}\n{f.read_text()}" for f in files)


def _run(cmd: list[str], what: str) -> None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as err:
        raise BuildError(f"cannot run the C compiler `{cmd[0]}`: {err.strerror}", "") from None
    if out.returncode != 0:
        raise BuildError(f"the C compiler failed on {what}", out.stdout + out.stderr)


def _run_all(jobs: list[tuple[list[str], str]]) -> None:
    """Runs the commands at once (the runtime's files compile in parallel) and waits for all."""
    procs = []
    try:
        for cmd, what in jobs:
            try:
                procs.append((subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                               text=True), what))
            except OSError as err:
                raise BuildError(f"cannot run the C compiler `{cmd[0]}`: {err.strerror}", "") from None
        failed = None
        for proc, what in procs:
            out, _ = proc.communicate()
            if proc.returncode != 0 and failed is None:
                failed = BuildError(f"the C compiler failed on {what}", out)
        if failed:
            raise failed
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _publish(tmp: Path, final: Path) -> None:
    """Rename `tmp` to `final` unless another process got there first (then drop ours)."""
    try:
        os.rename(tmp, final)
    except OSError:
        if final.exists():
            if tmp.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)
        else:
            raise


def _runtime_path(root: Path) -> Path:
    key = digest(_runtime_text(), " ".join(compiler() + cflags()), _compiler_identity())
    return root / "runtime" / f"{key}.o"


def runtime_object(root: Optional[Path] = None) -> Path:
    """The runtime compiled with the current compiler and flags (built once, then cached)."""
    root = root or cache_dir()
    flags = cflags()
    final = _runtime_path(root)
    if final.exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent, prefix=".build-") as tmp:
        objs, jobs = [], []
        for src in sorted(RUNTIME_DIR.glob("*.c")):
            obj = Path(tmp) / (src.name + ".o")
            jobs.append((compiler() + flags + ["-I", str(RUNTIME_DIR), "-c", str(src), "-o", str(obj)],
                         f"runtime_c/{src.name}"))
            objs.append(str(obj))
        _run_all(jobs)
        combined = Path(tmp) / "runtime.o"
        _run(["ld", "-r", "-o", str(combined)] + objs, "linking the runtime objects")
        # same inputs, same bytes: whichever racing build renames last, the object is whole
        write_with(final, lambda fh: fh.write(combined.read_bytes()))
    return final


def build(sources: Mapping[str, str], root: Optional[Path] = None) -> Artifact:
    """Compile `sources` ({file name: C text}; `.c` files are compiled) with the runtime."""
    root = root or cache_dir()
    flags = cflags()
    runtime_o = _runtime_path(root)
    key = digest(__version__, " ".join(compiler() + flags), _compiler_identity(), runtime_o.name,
                  *(f"{name}\n{text}" for name, text in sorted(sources.items())))
    final = root / "modules" / key
    if (final / "module.so").exists():
        return Artifact(key, final, cached=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{key}-"))
    # decision: the module's files compile in parallel with each other and, the first time,
    # with the runtime's (first compile ever 2.3 -> ~1.4 s on 2 cores); then one link
    runtime_error: list[BaseException] = []
    builder = None
    if not runtime_o.exists():
        def build_runtime() -> None:
            try:
                runtime_object(root)
            except BaseException as err:  # re-raised in the calling thread below
                runtime_error.append(err)

        builder = threading.Thread(target=build_runtime)
        builder.start()
    try:
        for name, text in sources.items():
            (tmp / name).write_text(text)
        c_files = [tmp / n for n in sorted(sources) if n.endswith(".c")]
        objs = [c.with_suffix(".o") for c in c_files]
        try:
            _run_all([(compiler() + flags + ["-I", str(RUNTIME_DIR), "-I", str(tmp), "-c", str(c),
                                             "-o", str(o)], "the generated module")
                      for c, o in zip(c_files, objs)])
        finally:
            if builder is not None:
                builder.join()
        if runtime_error:
            raise runtime_error[0]
        _run(compiler() + flags + ["-shared"] + [str(o) for o in objs]
             + [str(runtime_o), "-o", str(tmp / "module.so"), "-lm"], "linking the module")
        for o in objs:
            o.unlink()
        _publish(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Artifact(key, final, cached=False)


def cache_info(root: Optional[Path] = None) -> dict:
    """What the cache holds: its directory, artifact count and size in bytes."""
    root = root or cache_dir()
    modules = [p for p in (root / "modules").glob("*") if p.is_dir() and not p.name.startswith(".")]
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) if root.exists() else 0
    return {"directory": str(root), "modules": len(modules),
            "runtimes": len(list((root / "runtime").glob("*.o"))), "bytes": size}


def cache_clear(root: Optional[Path] = None) -> int:
    """Remove every artifact (and the grammar tables); returns the bytes freed."""
    root = root or cache_dir()
    freed = cache_info(root)["bytes"]
    if root.exists():
        for child in root.iterdir():
            if child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    return freed


def internal_build_error(err: BuildError) -> InternalError:
    return InternalError("cpu build", f"{err}\n{err.output.strip()}")
