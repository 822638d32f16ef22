"""A module built for cpu_sim, and what keeps it between processes.

`build_module` compiles the emitted C through the cache (`build.py`; a C compiler error located
in an `extern c` body is the user's: a diagnostic there) into a `Built`: the IR, the
enumerators' tables and the directory holding `module.so`. A cached library is loaded before it
is used, and one that does not load is rebuilt once.

The cache's module directories are shared by every source that generates the same C, so they
hold no IR: the IR (with the spans run-time diagnostics point at) belongs to the source it came
from. It is kept in two places, each sealed (a checksum, and wspc's version) and checked before
it is unpickled:
- the index of compiled sources (`cached_build`, `record_build`) maps a main `.wsp` file (its
  path as given and resolved, its text, the `-O` level and wspc's own files) to the module it
  built, with a hash of every source file it read and that source's IR and enumerator tables,
  so a warm `wspc run FILE` skips checking, lowering and code generation and still reports
  that file's lines. A damaged entry is a miss (noted, then rewritten).
- an artifact directory (`wspc compile -o DIR`, `Built.write`) holds the library, its C,
  manifest.json, checksums.json and `run.pickle`, the IR of the file compiled;
  `load_directory` verifies the library and the run information before loading, and anything
  wrong is "not a wspc artifact directory" (it cannot be rebuilt without its source).
"""

from __future__ import annotations

import errno
import hashlib
import json
import pickle
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ...diagnostics import Diagnostic, InternalError, WspError, file_error, printable
from ...files import FileError, cache_dir, read_bounded, replace_dir, write_atomic
from ...ir import nodes as N
from ...limits import MAX_SOURCE_BYTES
from ...spans import Span
from ...version import __version__
from . import build
from .emit import ModuleC
from .enumerate import Enumerators
from .program import load

RUN_INFO = "run.pickle"


@dataclass(frozen=True)
class Built:
    """A module built for cpu_sim, ready to load: its IR, what its enumerators report, and the
    directory of its library. `workers` is the runs' default (None: the host's cores)."""

    module: N.Module
    enumerators: Enumerators
    directory: Path
    cached: bool  # the build cache had it already
    workers: Optional[int] = None

    @property
    def library(self) -> Path:
        return self.directory / build.LIBRARY

    def write(self, directory) -> Path:
        """A self-contained artifact directory (`wspc compile -o DIR`): the library, its C,
        manifest.json, checksums.json and the run information of this module, replacing
        `directory` atomically. Every file is new (not the cache's modification times), so a
        Makefile rule making DIR/module.so is satisfied whether or not the cache had it. Only an
        artifact directory (or an empty one) is replaced: `-o src` must not delete a folder."""
        def fill(tmp: Path) -> None:
            for f in self.directory.iterdir():
                if f.is_file() and not f.name.startswith("."):
                    shutil.copyfile(f, tmp / f.name)
            write_atomic(tmp / RUN_INFO, seal((self.module, self.enumerators)))

        try:
            return replace_dir(directory, fill, ours=_artifact_names)
        except FileError as err:
            raise file_error(err) from None


def _artifact_names(names: set) -> bool:
    """Whether a directory holding `names` is an artifact directory `Built.write` may replace."""
    return build.LIBRARY in names and bool(names & {RUN_INFO, build.RECORD})


def build_module(m: N.Module, code: ModuleC, workers: Optional[int] = None,
                 include_dirs: Sequence[str] = ()) -> Built:
    """Build `code` (the C of `m`; `include_dirs` for its C++ bodies) through the cache. A cached
    library that verifies but does not load is discarded and rebuilt, once."""
    for attempt in range(2):
        try:
            artifact = build.build(code.files, include_dirs=include_dirs)
        except build.BuildError as err:
            raise extern_diagnostics(m, err) or build.internal_build_error(err) from None
        if not artifact.cached:
            break
        try:
            load(artifact.library, code.enumerators.entries)
            break
        except OSError as err:
            if attempt:
                raise InternalError("cpu build", f"{artifact.library} does not load even after "
                                                 f"a rebuild: {err}") from None
            build.discard(artifact.directory, f"{build.LIBRARY} does not load: {err}")
    return Built(m, code.enumerators, artifact.directory, artifact.cached, workers)


def load_directory(directory, workers: Optional[int] = None) -> Built:
    """The artifact in `directory` (nothing is generated or rebuilt); anything missing, damaged
    or unreadable, the library included, is a user error: "not a wspc artifact directory"."""
    d = Path(directory)
    try:
        built = _load(d, workers)
    except _Unusable as err:
        reason = str(err)
    except Exception as err:  # noqa: BLE001 - anything unreadable is "not an artifact"
        reason = f"{type(err).__name__}: {err}"
    else:
        return built
    raise WspError([Diagnostic(Span(str(d), 0, 0, 0, 0), "io",
                               f"not a wspc artifact directory ({reason})",
                               "make it again with `wspc compile FILE.wsp -o DIR`")])


class _Unusable(Exception):
    """Why an artifact directory cannot be run, in words for its diagnostic."""


def _load(d: Path, workers: Optional[int]) -> Built:
    problem = build.damage(d, build.LIBRARY)  # before anything maps it
    if problem is not None:
        raise _Unusable(problem)
    try:
        raw = build.read_regular(d / RUN_INFO)
    except OSError as err:
        raise _Unusable(f"{RUN_INFO}: {err.strerror or err}") from None
    try:
        m, enumerators = unseal(raw)
    except Damaged as err:
        raise _Unusable(f"{RUN_INFO} {err}") from None
    try:
        load(d / build.LIBRARY, enumerators.entries)
    except OSError as err:
        raise _Unusable(f"{build.LIBRARY} does not load: {err}") from None
    return Built(m, enumerators, d, True, workers)


_GCC_LOCATION = re.compile(r"^(?P<file>[^\n]+?):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: "
                           r"(?P<msg>.*)$", re.M)


def extern_diagnostics(m: N.Module, err: build.BuildError) -> Optional[WspError]:
    """Compiler errors located in a `.wsp` file (through `#line` in extern bodies) are the
    user's: report them as diagnostics there (`extern cpp` when the C++ compiler said it).
    Only the module's own source files count (a `.wsp` file, or the `.py` file of an embedded
    kernel): an error in a generated file or a header is not located in the user's text."""
    users = {printable(f) for f, _ in m.sources}
    diags = []
    for g in (mm.groupdict() for mm in _GCC_LOCATION.finditer(err.output)):
        if g["file"] not in users:
            continue
        line, col = int(g["line"]), int(g["col"])
        lang = "cpp" if err.cxx else "c"
        diags.append(Diagnostic(Span(g["file"], line, col, line, col + 1), f"extern-{lang}",
                                f"in `extern {lang}` body: {g['msg']}"))
    return WspError(diags, dict(m.sources)) if diags else None


# ---------------------------------------------------------------------------------------------
# Sealed pickles: what wspc unpickles is checked first


_SEAL = b"wspc sealed pickle\n"


class Damaged(Exception):
    """A sealed pickle that is damaged or was written by another wspc; the message says which."""


def seal(value: Any) -> bytes:
    """`value` pickled, after a header line with wspc's version and the pickle's size and
    SHA-256."""
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    head = {"version": __version__, "size": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest()}
    return _SEAL + json.dumps(head, sort_keys=True).encode() + b"\n" + payload


def unseal(raw: bytes) -> Any:
    """The value `seal` wrote into `raw`; `Damaged` if the bytes are not what it wrote, or an
    other wspc version wrote them (its IR classes may differ)."""
    if not raw.startswith(_SEAL):
        raise Damaged("has no wspc header")
    head, _, payload = raw[len(_SEAL):].partition(b"\n")
    try:
        meta = json.loads(head)
        version, size, sha = str(meta["version"]), int(meta["size"]), str(meta["sha256"])
    except (ValueError, LookupError, TypeError):
        raise Damaged("has an unreadable header") from None
    if version != __version__:
        raise Damaged(f"was written by wspc {version}, this is wspc {__version__}")
    if len(payload) != size or hashlib.sha256(payload).hexdigest() != sha:
        raise Damaged("differs from what was written (its checksum)")
    try:
        return pickle.loads(payload)
    except Exception as err:  # noqa: BLE001 - classes changed under one version number
        raise Damaged(f"cannot be read by this wspc ({type(err).__name__}: {err})") from None


# ---------------------------------------------------------------------------------------------
# The index of compiled sources


def _index_path(main: Path, text: str, opt_level: int, variant: str = "") -> Path:
    # the path as given too: the IR's spans (and so every diagnostic) spell it that way; the
    # CPU of native code: another machine sharing the cache must not load this one's library;
    # the variant: what else decided the build (a mesh's sizes: driver.compile_file)
    key = build.digest(build.wspc_identity(), str(main.resolve()), str(main), text, f"-O{opt_level}",
                       build.target_identity(build.cflags()), *((variant,) if variant else ()))
    return cache_dir() / "index" / f"{key}.pickle"


def _file_hash(path) -> Optional[str]:
    """The SHA-256 of a source file, or None if it is no longer a regular file (a FIFO now:
    reading it would block; the checker, reading the sources, reports it)."""
    try:
        return hashlib.sha256(read_bounded(path, MAX_SOURCE_BYTES)).hexdigest()
    except FileError:
        return None


def cached_build(main: Path, opt_level: int, workers: Optional[int] = None,
                 variant: str = "") -> Optional[Built]:
    """The artifact of a .wsp file compiled before and unchanged since (with its imports),
    with that file's own IR, without checking, lowering or generating anything; None when there
    is no such build. A damaged index entry is discarded (with a note) and is a miss; a damaged
    or unloadable library is a miss that the cold build then rebuilds."""
    try:
        path = _index_path(main, main.read_text(encoding="utf-8"), opt_level, variant)
        try:
            raw = build.read_regular(path)
        except FileNotFoundError:
            return None
        except OSError as err:
            if err.errno == errno.EINVAL or path.is_dir():  # never rewritten if left in place
                build.discard(path, "not a file")
            return None
        try:
            entry = unseal(raw)
            # the module by its key, in this cache: a copied or moved cache still works
            files, directory = entry["files"], path.parent.parent / "modules" / entry["key"]
            module, enumerators = entry["module"], entry["enumerators"]
        except (Damaged, LookupError, TypeError) as err:
            build.discard(path, f"the entry {err}" if isinstance(err, Damaged) else "an unreadable entry")
            return None
        if any(_file_hash(file) != sha for file, sha in files):
            return None
        if build.damage(directory, build.LIBRARY) is not None:
            return None
        load(directory / build.LIBRARY, enumerators.entries)
        return Built(module, enumerators, directory, True, workers)
    except Exception:  # noqa: BLE001 - any other trouble with the index means: build the normal way
        return None


def record_build(main: Path, files: Sequence[str], built: Built, opt_level: int,
                 variant: str = "") -> None:
    """Remember that `main` (with `files`, its imports included) builds to `built`, with its IR
    (under `variant` too: `cached_build` finds it only with the same one)."""
    try:
        text = main.read_text(encoding="utf-8")
        path = _index_path(main, text, opt_level, variant)
        if built.directory.parent != path.parent.parent / "modules":
            return  # built in a private temporary cache: nothing to remember
        entry = {"files": [(str(Path(f).resolve()), _file_hash(f)) for f in files],
                 "key": built.directory.name, "module": built.module,
                 "enumerators": built.enumerators}
        write_atomic(path, seal(entry))
    except (OSError, FileError):
        pass  # the index only saves time
