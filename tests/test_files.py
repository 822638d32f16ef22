"""ptowsp/files.py on its own: destinations checked before a run, outputs staged and renamed
together (put back when a rename fails part way), files created as `open` creates them, and
array files read as untrusted data (docs/running.md, "Input files" and "Output files")."""

from __future__ import annotations

import os
import stat
import struct

import numpy as np
import pytest

from ptowsp import files
from ptowsp.files import FileError, Staged, check_destination, read_npy, read_npz

GiB = 2**30


def _npy(header: str, data: bytes = b"") -> bytes:
    body = (header + " " * (63 - (10 + len(header)) % 64) + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body + data


# ---- destinations ----------------------------------------------------------------------------

def test_destinations_that_can_be_written(tmp_path):
    (tmp_path / "old.npy").write_bytes(b"x")
    assert check_destination(tmp_path / "old.npy") == tmp_path / "old.npy"
    assert check_destination(tmp_path / "new.npy") == tmp_path / "new.npy"
    (tmp_path / "link.npy").symlink_to(tmp_path / "target.npy")
    assert check_destination(tmp_path / "link.npy") == tmp_path / "target.npy"
    assert check_destination(tmp_path / "dir", directory=True) == tmp_path / "dir"
    assert check_destination(tmp_path / "no" / "such" / "x") == tmp_path / "no" / "such" / "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.npy", "old.npy"]  # no probe left


@pytest.mark.parametrize("make, words", [
    (lambda d: (d / "x").mkdir() or d / "x", "is a directory"),
    (lambda d: (d / "f").write_text("f") and d / "f" / "x", "is not a directory"),
    (lambda d: _fifo(d / "p"), "is a FIFO, not a regular file"),
    (lambda d: "/proc/x.npy", "cannot create a file in /proc"),
    (lambda d: "", "an empty file name"),
])
def test_destinations_that_cannot_be_written(tmp_path, make, words):
    with pytest.raises(FileError) as info:
        check_destination(make(tmp_path))
    assert words in info.value.message
    assert not [p for p in tmp_path.rglob(".*")], "the probe file is left"


def _fifo(path):
    os.mkfifo(path)
    return path


def test_a_file_is_no_directory_destination(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(FileError, match="is a file, not a directory"):
        check_destination(tmp_path / "f", directory=True)


# ---- staged writes ---------------------------------------------------------------------------

def test_staged_files_appear_together_with_the_umask_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        (tmp_path / "b").write_bytes(b"old b")
        (tmp_path / "b").chmod(0o604)
        with Staged() as st:
            st.add(tmp_path / "a", lambda fh: fh.write(b"new a"))
            st.add(tmp_path / "b", lambda fh: fh.write(b"new b"))
            assert not (tmp_path / "a").exists() and (tmp_path / "b").read_bytes() == b"old b"
            st.commit()
    finally:
        os.umask(old)
    assert (tmp_path / "a").read_bytes() == b"new a" and (tmp_path / "b").read_bytes() == b"new b"
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o640  # 0666 less the umask
    assert stat.S_IMODE((tmp_path / "b").stat().st_mode) == 0o604  # a replaced file keeps its
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_a_failed_write_leaves_nothing(tmp_path):
    (tmp_path / "b").write_bytes(b"old b")

    def full(fh):
        fh.write(b"partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(FileError, match="No space left on device") as info:
        with Staged() as st:
            st.add(tmp_path / "a", lambda fh: fh.write(b"new a"))
            st.add(tmp_path / "b", full, "--output B=b")
            st.commit()
    assert info.value.where == "--output B=b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b"]
    assert (tmp_path / "b").read_bytes() == b"old b"


def test_a_failed_rename_puts_back_what_was_renamed(tmp_path, monkeypatch):
    (tmp_path / "a").write_bytes(b"old a")
    real_replace = os.replace

    def replace(src, dst):
        if str(dst).endswith("/c"):
            raise OSError(16, "Device or resource busy")
        return real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", replace)
    with pytest.raises(FileError, match="busy"):
        with Staged() as st:
            for name in "abc":
                st.add(tmp_path / name, lambda fh, name=name: fh.write(f"new {name}".encode()))
            st.commit()
    assert (tmp_path / "a").read_bytes() == b"old a"  # put back
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]  # b (new) removed, no temporaries


def test_an_interrupt_while_staging_leaves_nothing(tmp_path):
    def interrupted(fh):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        with Staged() as st:
            st.add(tmp_path / "a", lambda fh: fh.write(b"a"))
            st.add(tmp_path / "b", interrupted)
    assert not list(tmp_path.iterdir())


def test_write_atomic_follows_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        files.write_atomic(tmp_path / "sub" / "f.txt", "text")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "sub" / "f.txt").stat().st_mode) == 0o644


# ---- array files -----------------------------------------------------------------------------

# ---- replacing directories --------------------------------------------------------------------

def _tree(d):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def test_replace_dir_replaces_only_its_own_trees(tmp_path):
    ours = lambda names: "MARK" in names  # noqa: E731
    fill = lambda t: (t / "MARK").write_text("new")  # noqa: E731
    (tmp_path / "empty").mkdir()
    assert files.replace_dir(tmp_path / "empty", fill, ours) == tmp_path / "empty"
    assert files.replace_dir(tmp_path / "empty", fill, ours) == tmp_path / "empty"  # its own
    assert (tmp_path / "empty" / "MARK").read_text() == "new"
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "main.c").write_text("keep")
    (tmp_path / "file").write_text("keep")
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    before = _tree(tmp_path)
    for name in ("user", "file", "link"):
        with pytest.raises(FileError, match="not a wspc artifact directory: not replacing it"):
            files.replace_dir(tmp_path / name, fill, ours)
    assert _tree(tmp_path) == before


def test_replace_dir_sweeps_what_a_killed_writer_left(tmp_path):
    """A `kill -9` between mkdtemp and the rename leaves `.NAME-XXXXXXXX` (and, while swapping,
    `.NAME-old-XXXXXXXX`) beside NAME: the next replace of NAME removes those an hour old, and
    nothing else (a fresh one may be a live writer's; other names are the user's)."""
    old = tmp_path / ".art-k9x2_abc"
    older = tmp_path / ".art-old-0a1b2c3d"
    fresh = tmp_path / ".art-live1234"
    for d in (old, older, fresh):
        (d / "tree").mkdir(parents=True)
    (tmp_path / ".art-notes").mkdir()  # not mkdtemp's name
    (tmp_path / ".other-abcdefgh").mkdir()  # beside another destination
    for d in (old, older, tmp_path / ".art-notes", tmp_path / ".other-abcdefgh"):
        os.utime(d, (1e9, 1e9))
    files.replace_dir(tmp_path / "art", lambda t: (t / "x").write_text(""), lambda n: True)
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == [".art-live1234", ".art-notes", ".other-abcdefgh", "art"]


def test_read_npy_reads_what_numpy_writes(tmp_path):
    for a in (np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros((0, 5), np.int8),
              np.array(3.5), np.asfortranarray(np.arange(6.0).reshape(2, 3)),
              np.arange(4, dtype=">i4"), np.array([True, False])):
        np.save(tmp_path / "a.npy", a)
        got = read_npy(tmp_path / "a.npy", GiB)
        np.testing.assert_array_equal(got, a)
        assert got.dtype.isnative and got.dtype == a.dtype.newbyteorder("=")


@pytest.mark.parametrize("data, words", [
    (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }"), "negative"),
    (_npy(f"{{'descr': 'V0', 'fortran_order': False, 'shape': ({2**62}, {2**62}), }}"),
     "allocated"),
    (_npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 5000 + ")" * 5000 + ", }"),
     "bad .npy header"),
    (_npy("{'descr': '<f4', 'shape': (2,), }"), "bad .npy header"),
    (_npy("{'descr': 'O', 'fortran_order': False, 'shape': (2,), }"), "Python objects"),
    (_npy("{'descr': [('a', 'O')], 'fortran_order': False, 'shape': (2,), }"), "Python objects"),
    (b"\x93NUMPY", "truncated"),
    (b"\x93NUMPY\x01\x00\xff", "truncated"),
])
def test_read_npy_refuses_hostile_headers(tmp_path, data, words):
    (tmp_path / "h.npy").write_bytes(data)
    with pytest.raises(FileError) as info:
        read_npy(tmp_path / "h.npy", GiB)
    assert words in info.value.message


def test_read_npy_keeps_to_the_budget(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros(1024, np.float32))
    assert read_npy(tmp_path / "a.npy", 4096).nbytes == 4096
    with pytest.raises(FileError, match="more than --max-memory 1K allows"):
        read_npy(tmp_path / "a.npy", 4095, "--max-memory 1K")


def test_read_npz_keeps_to_the_budget_in_all(tmp_path):
    np.savez(tmp_path / "a.npz", A=np.zeros(256, np.float32), B=np.zeros(256, np.float32))
    assert set(read_npz(tmp_path / "a.npz", 2048)) == {"A", "B"}
    with pytest.raises(FileError, match="member `B.npy` holds"):
        read_npz(tmp_path / "a.npz", 2047)


def test_read_npz_refuses_a_name_twice(tmp_path):
    import warnings
    import zipfile

    buf = tmp_path / "x.npy"
    np.save(buf, np.zeros(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name
        with zipfile.ZipFile(tmp_path / "d.npz", "w") as z:
            z.write(buf, "A.npy")
            z.write(buf, "A.npy")
    with pytest.raises(FileError, match="twice"):
        read_npz(tmp_path / "d.npz", GiB)


def test_a_destination_that_became_a_directory_meanwhile(tmp_path):
    (tmp_path / "a").write_bytes(b"old a")
    with pytest.raises(FileError, match="is a directory"):
        with Staged() as st:
            st.add(tmp_path / "a", lambda fh: fh.write(b"new a"))
            st.add(tmp_path / "b", lambda fh: fh.write(b"new b"))
            (tmp_path / "b").mkdir()
            st.commit()
    assert (tmp_path / "a").read_bytes() == b"old a"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]


def test_directories_made_for_a_failed_group_are_removed(tmp_path):
    def full(fh):
        raise OSError(28, "No space left on device")

    with pytest.raises(FileError):
        with Staged() as st:
            st.add(tmp_path / "a" / "b" / "x", lambda fh: fh.write(b"x"))
            st.add(tmp_path / "a" / "c" / "y", full)
            st.commit()
    assert not list(tmp_path.iterdir())
    with Staged() as st:
        st.add(tmp_path / "a" / "b" / "x", lambda fh: fh.write(b"x"))
        st.commit()
    assert (tmp_path / "a" / "b" / "x").read_bytes() == b"x"


def test_sizes_past_a_float_are_shown_by_magnitude():
    from ptowsp.limits import size_text

    assert size_text(3 << 20) == "3.0 MiB" and size_text(512) == "512 bytes"
    assert size_text(2**20003) == "about 2^20003 bytes"  # a float cannot hold it
