"""Reading `.wsp` source files, and only those (language.md section 1).

wspc runs in Makefiles and behind services, on paths it is given and on the paths those files
import, so reading a file must neither hang (a FIFO, a terminal), nor grow without bound
(`/dev/zero`), nor show a line of a file that is not wspc source in a diagnostic (`/etc/passwd`,
`/proc/self/environ`). A source file is read only when it is:

- named `*.wsp`, both as given and as the file it resolves to through symbolic links;
- a regular file (checked with `stat` before it is opened, and again on the open descriptor,
  which is opened non-blocking so that a file swapped for a FIFO in between cannot block);
- at most `MAX_SOURCE_BYTES` long (read in one bounded read: a file that grows while it is read
  is still cut off at the limit);
- UTF-8 text.

Anything else is a `SourceError` whose `reason` says which rule failed, in words that never
quote the file's contents; the caller reports it at the file (the command line's) or at the
`import` that named it.
"""

from __future__ import annotations

import os

from ..files import FileError, check_regular, read_bounded
from ..limits import MAX_SOURCE_BYTES

SUFFIX = ".wsp"
_NAMED = f"wspc reads WSP source files, named `*{SUFFIX}`"


class SourceError(Exception):
    """A file that is not read as wspc source; `reason` completes "cannot read FILE: ..."."""

    def __init__(self, reason: str, help: str | None = None):
        super().__init__(reason)
        self.reason, self.help = reason, help


def read_source(path: str | os.PathLike) -> str:
    """The text of the source file `path`, or a `SourceError` (see the module docstring)."""
    p = check_source_path(path)
    try:
        data = read_bounded(p, MAX_SOURCE_BYTES)  # the file opened is checked again
    except FileError as err:
        raise SourceError(err.message) from None
    if len(data) > MAX_SOURCE_BYTES:
        raise SourceError(_too_large())
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise SourceError("not UTF-8 text", "save the file as UTF-8") from None


def check_source_path(path: str | os.PathLike) -> str:
    """What `read_source` checks before it opens `path` (its name, its kind, its size), for a
    caller that reads the file some other way once this has said it may; `path` as a str."""
    p = os.fspath(path)
    if "\0" in p:
        raise SourceError("the file name contains a NUL character")
    if not p.endswith(SUFFIX):
        raise SourceError(f"not a `{SUFFIX}` file", _NAMED)
    try:
        st = check_regular(p)
    except FileError as err:
        raise SourceError(err.message) from None
    if st.st_size > MAX_SOURCE_BYTES:
        raise SourceError(_too_large())
    if not os.path.realpath(p).endswith(SUFFIX):
        raise SourceError(f"a symbolic link to a file not named `*{SUFFIX}`", _NAMED)
    return p


def _too_large() -> str:
    return f"larger than {MAX_SOURCE_BYTES >> 20} MiB, the limit for a source file"
