"""Files wspc writes and the array files it reads: the cache's place, destinations checked
before any work, writes that no reader ever sees half done, and `.npy`/`.npz` files read as
untrusted data.

Every file and directory wspc produces (outputs, traces, depfiles, artifact directories, CANN
trees, cache entries) is written under a temporary name in the same directory and renamed into
place, so a reader (a parallel `make -j`, a user's script) sees the old content or the new one,
and a failure or a kill leaves the old content (or nothing) behind. Files are created as `open`
creates them: a new file gets `0666` less the umask, a replaced one keeps its permissions.

The outputs of one run are one `Staged` group: each is checked (`check_destination`) before the
run starts, written beside its destination after it (missing directories are made then), and
all are renamed into place only once every one is complete; a failure removes them all, and
the directories made for them, and puts back what an earlier rename replaced.

`read_npy` and `read_npz` read arrays from files a user or an attacker wrote: only regular
files (never a FIFO, a device or a directory, so nothing blocks), plain arrays only (never a
pickle), and never more than the file says it holds: the header's shape times the item size
must be exactly the data the file has, and at most the bytes the caller allows, before anything
is allocated. Every problem is a `FileError` naming the file.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import struct
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Callable, Optional, Union

from .limits import size_text

if TYPE_CHECKING:  # numpy is imported only when an array is read
    import numpy as np


class FileError(Exception):
    """A file wspc cannot read or write, for a reason the user can fix: `where` is the file
    (or the command-line option naming it), `message` says why, `help` how to fix it."""

    def __init__(self, where: str, message: str, help: Optional[str] = None):
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message
        self.help = help


def cache_dir() -> Path:
    """The build cache: `$WSPC_CACHE_DIR`, or `~/.cache/wspc`. Without either (HOME unset, and
    an account with no home directory: a bare container's user) it has no place: a
    `FileError`, which a build answers with a private temporary cache (docs/running.md)."""
    if os.environ.get("WSPC_CACHE_DIR"):
        return Path(os.environ["WSPC_CACHE_DIR"])
    try:
        return Path.home() / ".cache" / "wspc"
    except (RuntimeError, KeyError):
        raise FileError("~/.cache/wspc", "no home directory: HOME is not set and the account "
                        "has none", "set WSPC_CACHE_DIR to a writable directory") from None


# ---- destinations ----------------------------------------------------------------------------

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    """What a file that is neither a regular file nor a directory is."""
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def check_destination(path: Union[str, Path], directory: bool = False) -> Path:
    """The path to write `path` at (a symbolic link is followed, as `open` follows it), after
    checking that it can be created or replaced: an existing regular file (or, with
    `directory`, an existing directory) that is writable, or a new name in a directory wspc
    can create files in (directories missing on the way are created when it is written: the
    nearest existing one must take them). Never a device, a FIFO, a socket, a mount point, or
    a directory (a file) or a file (a directory). Raises `FileError(path, why)`."""
    where = str(path)
    if not where:
        raise FileError(where, "an empty file name")
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise FileError(where, f"{_first_file(real.parent)} is not a directory") from None
    except OSError as err:
        raise FileError(where, f"cannot write it: {err.strerror}") from None
    want = "a directory" if directory else "a regular file"
    if st is not None:
        if stat.S_ISDIR(st.st_mode) and not directory:
            raise FileError(where, "is a directory")
        if stat.S_ISREG(st.st_mode) and directory:
            raise FileError(where, "is a file, not a directory")
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise FileError(where, f"is {_kind(st.st_mode)}, not {want}")
        if stat.S_ISREG(st.st_mode) and not os.access(real, os.W_OK):
            raise FileError(where, "is read-only")
    parent = real.parent
    while not parent.exists() and parent != parent.parent:  # to be created: its nearest ancestor
        parent = parent.parent
    try:
        pst = os.stat(parent)
    except OSError as err:
        raise FileError(where, f"cannot use its directory {parent}: {err.strerror}") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise FileError(where, f"{parent} is not a directory")
    if st is not None and st.st_dev != pst.st_dev:
        raise FileError(where, "is a mount point: wspc replaces a file by renaming a new one "
                               "over it, which a mount point does not allow")
    try:  # the one proof that works for root, read-only file systems and /proc alike
        fd, probe = _create_beside(parent / real.name)
    except OSError as err:
        raise FileError(where, f"cannot create a file in {parent}: {err.strerror}") from None
    os.close(fd)
    os.unlink(probe)
    return real


def _first_file(path: Path) -> Path:
    """The first component of `path` that is not a directory."""
    for p in reversed((path, *path.parents)):
        if p.exists() and not p.is_dir():
            return p
    return path


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new file (fd, name) in `path`'s directory, hidden and unique, with the permissions
    `open` would give `path`: 0666 less the umask, or those of the file it will replace."""
    try:
        keep: Optional[int] = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        keep = None
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        if keep is not None:
            try:
                os.fchmod(fd, keep)
            except OSError:  # the kernel's 0666 & ~umask stands
                pass
        return fd, tmp
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {path}")


class Staged:
    """Files written together or not at all: `add` writes each under a temporary name beside
    its destination, `commit` renames them all into place; leaving the `with` block without a
    commit (an error, an interrupt) removes every staged file. If a rename fails part way,
    the files already renamed are put back as they were (when the file system can hard-link
    their old content aside) before the error is raised."""

    def __init__(self) -> None:
        self._items: list[tuple[Path, Path, str]] = []  # (destination, staged, where)
        self._made: list[Path] = []  # directories created for them, outermost first
        self._done = False

    def __enter__(self) -> "Staged":
        return self

    def __exit__(self, *exc) -> None:
        if not self._done:
            self.discard()

    def add(self, destination: Union[str, Path], write: Callable[[IO[bytes]], None],
            where: Optional[str] = None) -> None:
        """Stage `destination` with what `write(binary_file)` writes. An `OSError` (a full
        disk, a directory that went away) is a `FileError` at `where` (default: the path)."""
        dest = Path(os.path.realpath(destination))
        where = where or str(destination)
        try:
            missing = [d for d in (dest.parent, *dest.parent.parents) if not d.exists()]
            for d in reversed(missing):  # as `mkdir -p`, but each one remembered
                os.mkdir(d, 0o777)
                self._made.append(d)
            fd, tmp = _create_beside(dest)
        except OSError as err:
            raise FileError(where, f"cannot create a file in {dest.parent}: {err.strerror}") from None
        self._items.append((dest, tmp, where))
        try:
            with os.fdopen(fd, "wb") as fh:
                write(fh)
        except OSError as err:
            raise FileError(where, f"cannot write it: {err.strerror or err}") from None

    def commit(self) -> None:
        """Rename every staged file over its destination."""
        done: list[tuple[Path, Optional[Path]]] = []  # (destination, its old content aside)
        try:
            for dest, tmp, where in self._items:
                try:  # checked before the run, but it may have changed since
                    _refuse_special(where, os.stat(dest).st_mode)
                except FileNotFoundError:
                    pass
                old = _aside(dest)
                try:
                    os.replace(tmp, dest)
                except OSError as err:
                    if old is not None:
                        os.unlink(old)
                    raise FileError(where, f"cannot replace it: {err.strerror}") from None
                done.append((dest, old))
        except BaseException:
            for dest, old in reversed(done):
                try:
                    if old is not None:
                        os.replace(old, dest)
                        old = None
                    elif dest.exists():
                        os.unlink(dest)  # it did not exist before this run
                except OSError:
                    pass
                finally:
                    if old is not None:
                        Path(old).unlink(missing_ok=True)
            self.discard()
            raise
        for _, old in done:
            if old is not None:
                old.unlink(missing_ok=True)
        self._done = True

    def discard(self) -> None:
        """Remove every staged file and every directory made for them (the destinations are
        untouched)."""
        for _, tmp, _ in self._items:
            tmp.unlink(missing_ok=True)
        for d in reversed(self._made):
            try:
                d.rmdir()
            except OSError:  # not empty: something else was put there meanwhile
                pass
        self._items, self._made = [], []
        self._done = True


def _aside(dest: Path) -> Optional[Path]:
    """A hard link to `dest`'s current content under a temporary name (None when there is no
    such file, or the file system cannot link: then a failed commit cannot restore it)."""
    if not dest.is_file():
        return None
    for _ in range(100):
        old = dest.parent / f".{dest.name}.{secrets.token_hex(4)}.old"
        try:
            os.link(dest, old)
            return old
        except FileExistsError:
            continue
        except OSError:
            return None
    return None


def write_with(path: Union[str, Path], write: Callable[[IO[bytes]], None]) -> Path:
    """Create or replace `path` with what `write(binary_file)` writes, atomically. The
    parent directories are made as needed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
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


def replace_dir(path: Union[str, Path], fill: Callable[[Path], None],
                ours: Callable[[set], bool]) -> Path:
    """Create or replace the directory `path` with what `fill(tmp)` puts into an empty
    directory `tmp` beside it, atomically: if `fill` fails, `path` is left as it was (absent,
    or its previous content).

    Only an empty directory, or one whose file names `ours(names)` recognises as a tree this
    writer made, is replaced: `-o src` must never delete a user's folder. Anything else at
    `path` (a file, a link, another folder) is a `FileError`, and `path` is left alone."""
    out = Path(path)
    if os.path.lexists(out):
        names = {p.name for p in out.iterdir()} if out.is_dir() and not out.is_symlink() else None
        if names is None or (names and not ours(names)):
            raise FileError(str(out), "exists and is not a wspc artifact directory: not replacing it",
                            "remove it, or choose another output directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    _sweep_beside(out)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-"))
    old = None
    try:
        tmp.chmod(0o777 & ~_umask())  # mkdtemp's 0700 is for the temporary name only
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


# a writer killed with `kill -9` leaves its temporary trees (`.NAME-XXXXXXXX`, `.NAME-old-XXXXXXXX`,
# mkdtemp's names) beside the destination; one untouched for an hour belongs to no live writer
_STALE_SECONDS = 3600


def _sweep_beside(out: Path) -> None:
    """Remove the temporary trees a killed `replace_dir` of `out` left, once they are stale.
    Only mkdtemp's names for `out` are touched, never another file of the folder."""
    import re
    import time

    left = re.compile(rf"\.{re.escape(out.name)}-(?:old-)?[a-z0-9_]{{8}}")
    try:
        entries = list(os.scandir(out.parent))
    except OSError:
        return
    for entry in entries:
        try:
            if (left.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)
                    and time.time() - entry.stat(follow_symlinks=False).st_mtime > _STALE_SECONDS):
                shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            pass


def _umask() -> int:
    """The process's umask, read without changing it (Linux), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# ---- array files ----------------------------------------------------------------------------

NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK"
_MAX_HEADER = 1 << 16  # numpy writes headers of a few hundred bytes; it reads at most 10000


def check_regular(path: Union[str, Path]) -> os.stat_result:
    """`path`'s status, if it is a regular file (a file read whole must be one: a FIFO
    blocks, a device may never end); else a `FileError`. Special files are refused without
    being opened (opening some has effects: a tape rewinds)."""
    try:
        st = os.stat(path)  # follows links: what counts is the file they lead to
    except OSError as err:
        raise FileError(str(path), os_reason(err)) from None
    _refuse_special(str(path), st.st_mode)
    return st


def os_reason(err: OSError) -> str:
    """Why an operating-system call on a file failed, in the words of wspc's other reasons."""
    if isinstance(err, FileNotFoundError):
        return "no such file"
    if isinstance(err, IsADirectoryError):
        return "is a directory"
    if isinstance(err, PermissionError):
        return "permission denied"
    if err.errno == errno.ELOOP:
        return "a loop of symbolic links"
    reason = err.strerror or type(err).__name__
    return reason[:1].lower() + reason[1:]  # "file name too long", as the other reasons read


def read_bounded(path: Union[str, Path], max_bytes: int) -> bytes:
    """The bytes of the regular file `path` (`check_regular`), read in one bounded read: at
    most `max_bytes + 1`, so a caller sees that a file (even one that grows while it is
    read) passed its limit without reading all of it. Never blocks on a FIFO swapped in."""
    fh, _ = _open_regular(path)
    with fh:
        parts, got = [], 0
        while got <= max_bytes:
            chunk = fh.read(min(max_bytes + 1 - got, 1 << 20))
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
    return b"".join(parts)


def _refuse_special(where: str, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise FileError(where, "is a directory")
    if not stat.S_ISREG(mode):
        raise FileError(where, f"is {_kind(mode)}, not a regular file")


def _open_regular(path: Union[str, Path]) -> tuple[IO[bytes], int]:
    """(binary file, size) of a regular file (`check_regular`); a FIFO that takes the file's
    place meanwhile is opened without waiting for a writer, then refused."""
    check_regular(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as err:
        raise FileError(str(path), os_reason(err)) from None
    st = os.fstat(fd)
    try:
        _refuse_special(str(path), st.st_mode)
    except FileError:
        os.close(fd)
        raise
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb"), st.st_size


def read_npy(path: Union[str, Path], max_bytes: int, limit: str = "the machine's memory"
             ) -> "np.ndarray":
    """The array in the `.npy` file `path`, holding at most `max_bytes` (`limit` names that
    bound in messages)."""
    fh, size = _open_regular(path)
    with fh:
        head = fh.read(len(NPY_MAGIC))
        if not head:
            raise FileError(str(path), "is empty, not a .npy file")
        if head.startswith(ZIP_MAGIC):
            raise FileError(str(path), "is a .npz archive (a zip file), not a .npy file: pass "
                                       "it with --inputs FILE.npz")
        if head != NPY_MAGIC:
            raise FileError(str(path), "is not a .npy file (it does not start with \\x93NUMPY)")
        return _read_array(fh, size - len(head), str(path), max_bytes, limit)


def read_npz(path: Union[str, Path], max_bytes: int, limit: str = "the machine's memory"
             ) -> dict[str, "np.ndarray"]:
    """The arrays of the `.npz` file `path` by name (a member `X.npy` is `X`), holding at
    most `max_bytes` in all. Every member's CRC is checked."""
    import zipfile

    fh, size = _open_regular(path)
    where = str(path)
    with fh:
        head = fh.read(len(NPY_MAGIC))
        if head == NPY_MAGIC:
            raise FileError(where, "is a .npy file, not a .npz archive: pass it with "
                                   "--input NAME=FILE.npy")
        fh.seek(0)
        out: dict[str, "np.ndarray"] = {}
        left = max_bytes
        try:
            with zipfile.ZipFile(fh) as z:
                for info in z.infolist():
                    member = f"{where}[{info.filename}]"
                    name = info.filename[:-4] if info.filename.endswith(".npy") else None
                    if name is None or info.is_dir():
                        raise FileError(where, f"`{info.filename}` is not a .npy array")
                    if name in out:
                        raise FileError(where, f"holds `{info.filename}` twice")
                    with z.open(info) as m:
                        if m.read(len(NPY_MAGIC)) != NPY_MAGIC:
                            raise FileError(where, f"`{info.filename}` is not a .npy array")
                        try:
                            a = _read_array(m, info.file_size - len(NPY_MAGIC), member, left,
                                            limit)
                        except FileError as err:
                            raise FileError(where, f"its member `{info.filename}` "
                                                   f"{err.message}") from None
                        if m.read(1):  # reading to the end checks the CRC
                            raise FileError(member, "holds more than its size says")
                    out[name] = a
                    left -= a.nbytes
        except FileError:
            raise
        except zipfile.BadZipFile as err:
            raise FileError(where, f"is not a readable .npz archive: {err}") from None
        except (zipfile.LargeZipFile, NotImplementedError, RuntimeError, ValueError,
                EOFError) as err:
            raise FileError(where, f"cannot be read: {err}") from None
        except OSError as err:
            raise FileError(where, err.strerror or str(err)) from None
    return out


def _read_array(fh: IO[bytes], left: int, where: str, max_bytes: int, limit: str) -> "np.ndarray":
    """The rest of a `.npy` stream after its magic; `left` bytes remain in it."""
    import numpy as np
    from numpy.lib import format as npformat

    version = fh.read(2)
    if len(version) < 2:
        raise FileError(where, "is truncated: it ends inside its .npy header")
    major, minor = version
    if (major, minor) not in ((1, 0), (2, 0)):
        raise FileError(where, f"has .npy format version {major}.{minor}; wspc reads versions "
                               "1.0 and 2.0 (what numpy.save writes)")
    width = 2 if major == 1 else 4
    raw = fh.read(width)
    if len(raw) < width:
        raise FileError(where, "is truncated: it ends inside its .npy header")
    hlen = struct.unpack("<H" if width == 2 else "<I", raw)[0]
    left -= 2 + width
    if hlen > left:
        raise FileError(where, f"is truncated: its .npy header is {hlen} bytes long, but only "
                               f"{max(left, 0)} bytes follow")
    if hlen > _MAX_HEADER:
        raise FileError(where, f"has a .npy header of {hlen} bytes (at most {_MAX_HEADER})")
    header = fh.read(hlen)
    if len(header) < hlen:
        raise FileError(where, "is truncated: it ends inside its .npy header")
    left -= hlen
    import io
    from tokenize import TokenError

    parse = npformat.read_array_header_1_0 if major == 1 else npformat.read_array_header_2_0
    try:
        shape, fortran, dtype = parse(io.BytesIO(raw + header), max_header_size=_MAX_HEADER)
    except (ValueError, TypeError, SyntaxError, TokenError, RecursionError, MemoryError) as err:
        # numpy parses the header with tokenize and ast.literal_eval: each has its errors
        raise FileError(where, f"has a bad .npy header: {err or type(err).__name__}") from None
    if any(n < 0 for n in shape):
        raise FileError(where, f"has a bad .npy header: the shape {list(shape)} is negative")
    if dtype.hasobject:
        raise FileError(where, "holds Python objects (a pickle), which wspc never loads: "
                               "save a plain array (numpy.save with a numeric dtype)")
    count = 1
    for n in shape:
        count *= n
    nbytes = count * dtype.itemsize
    if nbytes > left:
        raise FileError(where, f"is truncated: its header declares {dtype}{list(shape)}, "
                               f"{nbytes} bytes of data, but it has {left}")
    if nbytes < left:
        raise FileError(where, f"has {left - nbytes} bytes after its data ({dtype}"
                               f"{list(shape)}, {nbytes} bytes): it is not one .npy array")
    if nbytes > max_bytes:
        raise FileError(where, f"holds {dtype}{list(shape)}: {size_text(nbytes)}, more than "
                               f"{limit} allows ({size_text(max(max_bytes, 0))} left)")
    try:
        flat = np.empty(count, dtype)
    except (MemoryError, ValueError):
        raise FileError(where, f"holds {dtype}{list(shape)}: more than can be allocated") from None
    view = memoryview(flat.view(np.uint8) if dtype.itemsize else b"").cast("B")
    got = 0
    while got < nbytes:
        n = fh.readinto(view[got:])
        if not n:
            raise FileError(where, f"is truncated: it ended after {got} of {nbytes} bytes")
        got += n
    a = flat.reshape(shape, order="F" if fortran else "C")
    if not dtype.isnative:  # a byte order of another machine: the same values, native
        a = a.byteswap(inplace=True).view(dtype.newbyteorder("="))
    return a
