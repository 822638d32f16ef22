"""A module built for cpu_sim, and what keeps it between processes.

`build_module` compiles the emitted C through the cache (`build.py`; a C compiler error located
in an `extern c` body is the user's: a diagnostic there) into a `Built`: the IR, the
enumerators' tables and the directory holding `module.so`, its C, `manifest.json` and the run
information (`run.pickle`: the IR and the tables, what `wspc run DIR` needs besides the
library). `load_directory` reopens such a directory.

The index of compiled sources maps a main `.wsp` file (its text, its path, the `-O` level and
wspc's own files) to the artifact it built, with a hash of every source file it read, so a
warm `wspc run FILE` skips checking, lowering and code generation (`cached_build`,
`record_build`).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from ...diagnostics import Diagnostic, WspError
from ...files import cache_dir, replace_dir, write_atomic
from ...ir import nodes as N
from ...spans import Span
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
        return self.directory / "module.so"

    def write(self, directory) -> Path:
        """A self-contained artifact directory (`wspc compile -o DIR`): the library, its C,
        manifest.json and the run information, replacing `directory` atomically."""

        def fill(tmp: Path) -> None:
            for f in self.directory.iterdir():
                shutil.copy2(f, tmp / f.name)

        return replace_dir(directory, fill)


def build_module(m: N.Module, code: ModuleC, workers: Optional[int] = None) -> Built:
    """Build `code` (the C of `m`) through the cache, with the run information beside it."""
    try:
        artifact = build.build(code.files)
    except build.BuildError as err:
        raise extern_diagnostics(m, err) or build.internal_build_error(err) from None
    save_run_info(artifact.directory, m, code.enumerators)
    return Built(m, code.enumerators, artifact.directory, artifact.cached, workers)


def load_directory(directory, workers: Optional[int] = None) -> Built:
    """The artifact in `directory` (nothing is generated or rebuilt); anything unreadable,
    the library included, is a user error: "not a wspc artifact directory"."""
    d = Path(directory)
    try:
        built = _load(d, workers)
    except Exception as err:  # noqa: BLE001 - anything unreadable is "not an artifact"
        raise WspError([Diagnostic(Span(str(d), 0, 0, 0, 0), "io",
                                   f"not a wspc artifact directory ({type(err).__name__}: {err})",
                                   "make one with `wspc compile FILE.wsp -o DIR`")]) from None
    return built


def _load(d: Path, workers: Optional[int]) -> Built:
    m, enumerators = load_run_info(d)
    built = Built(m, enumerators, d, True, workers)
    load(built.library, enumerators.entries)  # a library that does not load is no artifact
    return built


_GCC_LOCATION = re.compile(r"^(?P<file>[^\n]+?\.wsp):(?P<line>\d+):(?P<col>\d+): error: (?P<msg>.*)$", re.M)


def extern_diagnostics(m: N.Module, err: build.BuildError) -> Optional[WspError]:
    """Compiler errors located in a `.wsp` file (through `#line` in extern bodies) are the
    user's: report them as diagnostics there."""
    diags = [Diagnostic(Span(g["file"], int(g["line"]), int(g["col"]), int(g["line"]), int(g["col"]) + 1),
                        "extern-c", f"in `extern c` body: {g['msg']}")
             for g in (mm.groupdict() for mm in _GCC_LOCATION.finditer(err.output))]
    return WspError(diags, dict(m.sources)) if diags else None


# ---------------------------------------------------------------------------------------------
# What a run needs besides the library, kept beside it


def save_run_info(directory: Path, m: N.Module, enumerators: Enumerators) -> None:
    """Keep the IR and the enumerators' tables beside the library (once: the directory is
    content-addressed, so what is there is the same)."""
    path = directory / RUN_INFO
    if path.exists():
        return
    write_atomic(path, pickle.dumps((m, enumerators), protocol=pickle.HIGHEST_PROTOCOL))


def load_run_info(directory: Path) -> tuple[N.Module, Enumerators]:
    return pickle.loads((directory / RUN_INFO).read_bytes())


# ---------------------------------------------------------------------------------------------
# The index of compiled sources


def _index_path(main: Path, text: str, opt_level: int) -> Path:
    key = build.digest(build.wspc_identity(), str(main.resolve()), text, f"-O{opt_level}")
    return cache_dir() / "index" / f"{key}.pickle"


def cached_build(main: Path, opt_level: int, workers: Optional[int] = None) -> Optional[Built]:
    """The artifact of a .wsp file compiled before and unchanged since (with its imports),
    without checking, lowering or generating anything; None when there is no such build."""
    try:
        text = main.read_text(encoding="utf-8")
        entry = pickle.loads(_index_path(main, text, opt_level).read_bytes())
        for file, digest in entry["files"]:
            if not stat.S_ISREG(os.stat(file).st_mode):  # a FIFO now: reading it would block
                return None  # (the checker, reading the sources, reports it)
            if hashlib.sha256(Path(file).read_bytes()).hexdigest() != digest:
                return None
        return _load(Path(entry["directory"]), workers)
    except Exception:  # noqa: BLE001 - any trouble with the index means: build the normal way
        return None


def record_build(main: Path, files: Sequence[str], built: Built, opt_level: int) -> None:
    """Remember that `main` (with `files`, its imports included) builds to `built`."""
    try:
        text = main.read_text(encoding="utf-8")
        entry = {"files": [(str(Path(f).resolve()), hashlib.sha256(Path(f).read_bytes()).hexdigest())
                           for f in files],
                 "directory": str(built.directory)}
        write_atomic(_index_path(main, text, opt_level), pickle.dumps(entry))
    except OSError:
        pass  # the index only saves time
