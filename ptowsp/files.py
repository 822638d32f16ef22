"""Files wspc writes: the cache's place, and writes that no reader ever sees half done.

Every file and directory wspc produces (outputs, traces, depfiles, artifact directories, CANN
trees, cache entries) is written under a temporary name in the same directory and renamed into
place, so a reader (a parallel `make -j`, a user's script) sees the old content or the new one,
and a failure or a kill leaves the old content (or nothing) behind.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Callable, Union


def cache_dir() -> Path:
    """The build cache: `$WSPC_CACHE_DIR`, or `~/.cache/wspc`."""
    return Path(os.environ.get("WSPC_CACHE_DIR") or Path.home() / ".cache" / "wspc")


def write_with(path: Union[str, Path], write: Callable[[IO[bytes]], None]) -> Path:
    """Create or replace `path` with what `write(binary_file)` writes, atomically. The
    parent directories are made as needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_atomic(path: Union[str, Path], data: Union[str, bytes]) -> Path:
    """Create or replace `path` with `data` (text is written as UTF-8), atomically."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return write_with(path, lambda fh: fh.write(raw))


def replace_dir(path: Union[str, Path], fill: Callable[[Path], None]) -> Path:
    """Create or replace the directory `path` with what `fill(tmp)` puts into an empty
    directory `tmp` beside it, atomically: if `fill` fails, `path` is left as it was (absent,
    or its previous content)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-"))
    old = None
    try:
        tmp.chmod(0o755)  # mkdtemp's 0700 is for the temporary name only
        fill(tmp)
        if out.exists():
            old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-old-"))
            os.rename(out, old / "tree")
        os.rename(tmp, out)
    except BaseException:
        if old is not None and not out.exists():
            os.rename(old / "tree", out)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return out
