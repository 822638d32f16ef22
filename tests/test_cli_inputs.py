"""`wspc run` given hostile input files, command-line values and sizes, through a real
subprocess: every one is a diagnostic (`FILE: error: ...`, `--option VALUE: error: ...` or an
error at the tensor's or sym's declaration) with exit status 1, or a usage error naming the
option (exit 2); never a traceback, a hang, an allocation the machine cannot hold, or an output
file (docs/running.md, "Input files", "Command-line values", "Memory")."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOFTMAX = ROOT / "examples" / "softmax.wsp"  # sym R = 4096; input X: f32[R, 128]; output Y
RMSNORM = ROOT / "examples" / "rmsnorm.wsp"  # sym B, T; X: f32[B, T, 16, 128]
GEMM = ROOT / "examples" / "gemm.wsp"  # sym M, N, K = 256

pytestmark = pytest.mark.cc


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("wspc-cache")


def wspc(*args, cache: Path, timeout: float = 120, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "ptowsp", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=timeout)


def failed(r: subprocess.CompletedProcess, status: int = 1) -> str:
    """The stderr of a run that must have failed with `status`, cleanly."""
    assert r.returncode == status, r.stderr
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert not [line for line in r.stderr.splitlines() if line.startswith("error:")], r.stderr
    return r.stderr


def run_softmax(tmp_path: Path, cache: Path, *extra, status: int = 1) -> str:
    """A failing run of softmax.wsp that asks for an output: nothing may be written."""
    out = tmp_path / "y.npy"
    err = failed(wspc("run", SOFTMAX, *extra, "--output", f"Y={out}", cache=cache), status)
    assert not out.exists(), "no output may be written after an error"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".y.npy")], "a staged file is left"
    return err


def npy_header(shape, descr="<f4", fortran=False, version=1) -> bytes:
    """A .npy header as numpy writes it, for any claim about the data that follows."""
    text = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {tuple(shape)}, }}"
    width = 10 if version == 1 else 12
    pad = 64 - (width + len(text) + 1) % 64
    body = (text + " " * pad + "\n").encode("latin1")
    size = struct.pack("<H", len(body)) if version == 1 else struct.pack("<I", len(body))
    return b"\x93NUMPY" + bytes([version, 0]) + size + body


@pytest.fixture
def x16(tmp_path):
    """A good X for softmax with R = 16."""
    x = np.random.default_rng(0).standard_normal((16, 128)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return x


# ---- unreadable .npy files given with --input ----------------------------------------------

def _bad_input(tmp_path, cache, file, *more) -> str:
    err = run_softmax(tmp_path, cache, "--input", f"X={file}", *more)
    assert f"cannot read {file}" in err, err
    assert "softmax.wsp:6:1: error:" in err, "the error is at the tensor's declaration"
    return err


def test_empty_file(tmp_path, cache):
    (tmp_path / "e.npy").write_bytes(b"")
    assert "is empty" in _bad_input(tmp_path, cache, tmp_path / "e.npy")


def test_dev_null_is_not_a_regular_file(tmp_path, cache):
    assert "not a regular file" in _bad_input(tmp_path, cache, "/dev/null")


def test_fifo_is_refused_without_waiting_for_a_writer(tmp_path, cache):
    os.mkfifo(tmp_path / "f.npy")
    assert "a FIFO" in _bad_input(tmp_path, cache, tmp_path / "f.npy")


def test_directory_as_an_input(tmp_path, cache):
    (tmp_path / "d.npy").mkdir()
    assert "is a directory" in _bad_input(tmp_path, cache, tmp_path / "d.npy")


def test_not_a_npy_file(tmp_path, cache):
    (tmp_path / "t.npy").write_text("hello, this is text\n")
    assert "not a .npy file" in _bad_input(tmp_path, cache, tmp_path / "t.npy")


def test_zip_file_given_to_input(tmp_path, cache, x16):
    np.savez(tmp_path / "a.npz", X=x16)
    err = _bad_input(tmp_path, cache, tmp_path / "a.npz")
    assert "is a .npz archive" in err and "--inputs" in err


def test_file_starting_pk_that_is_no_zip(tmp_path, cache):
    (tmp_path / "pk.npy").write_bytes(b"PK\x03\x04 not really a zip")
    assert "is a .npz archive" in _bad_input(tmp_path, cache, tmp_path / "pk.npy")


def test_header_without_data(tmp_path, cache):
    (tmp_path / "h.npy").write_bytes(npy_header((16, 128)))
    err = _bad_input(tmp_path, cache, tmp_path / "h.npy")
    assert "truncated" in err and "8192 bytes" in err


def test_header_claiming_a_huge_shape_is_not_allocated(tmp_path, cache):
    (tmp_path / "huge.npy").write_bytes(npy_header((2**40, 2**20)) + b"\0" * 64)
    err = _bad_input(tmp_path, cache, tmp_path / "huge.npy")
    assert "truncated" in err and "MemoryError" not in err


def test_header_claiming_more_than_memory_on_a_sparse_file(tmp_path, cache):
    # the file is as long as its header says (sparse: no disk used), but holds 1 TiB
    path = tmp_path / "sparse.npy"
    header = npy_header((2**31, 128))
    with open(path, "wb") as fh:
        fh.write(header)
        fh.truncate(len(header) + 2**31 * 128 * 4)
    err = _bad_input(tmp_path, cache, path)
    assert "1024.0 GiB" in err and "memory" in err


def test_truncated_header(tmp_path, cache):
    (tmp_path / "th.npy").write_bytes(npy_header((16, 128))[:20])
    assert "truncated" in _bad_input(tmp_path, cache, tmp_path / "th.npy")


def test_header_length_past_the_file(tmp_path, cache):
    (tmp_path / "hl.npy").write_bytes(b"\x93NUMPY\x02\x00" + struct.pack("<I", 2**31) + b"{}")
    assert "truncated" in _bad_input(tmp_path, cache, tmp_path / "hl.npy")


def test_garbled_header(tmp_path, cache):
    body = b"{'descr': '<f4', 'fortran_order': False, 'shape': (16, 128)" + b" " * 53 + b"\n"
    (tmp_path / "g.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(body)) + body)
    assert "bad .npy header" in _bad_input(tmp_path, cache, tmp_path / "g.npy")


def test_data_after_the_array(tmp_path, cache, x16):
    (tmp_path / "long.npy").write_bytes((tmp_path / "x.npy").read_bytes() + b"extra")
    assert "5 bytes after" in _bad_input(tmp_path, cache, tmp_path / "long.npy")


def test_object_array_is_never_unpickled(tmp_path, cache):
    marker = tmp_path / "unpickled"
    np.save(tmp_path / "o.npy", np.array([_Boom(str(marker)), 1], dtype=object), allow_pickle=True)
    err = _bad_input(tmp_path, cache, tmp_path / "o.npy")
    assert "Python objects" in err
    assert not marker.exists()


class _Boom:
    """Unpickling it creates a file: proof that a pickle ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_unsupported_npy_version(tmp_path, cache):
    data = bytearray(npy_header((16, 128)) + b"\0" * 8192)
    data[6] = 9
    (tmp_path / "v.npy").write_bytes(bytes(data))
    assert "version 9.0" in _bad_input(tmp_path, cache, tmp_path / "v.npy")


def test_missing_file_is_reported_at_the_tensor(tmp_path, cache):
    assert "no such file" in _bad_input(tmp_path, cache, tmp_path / "nope.npy")


def test_big_endian_and_fortran_order_arrays_are_read_exactly(tmp_path, cache, x16):
    np.save(tmp_path / "be.npy", x16.astype(">f4"))
    np.save(tmp_path / "f.npy", np.asfortranarray(x16))
    outs = []
    for name in ("x.npy", "be.npy", "f.npy"):
        out = tmp_path / f"y-{name}"
        r = wspc("run", SOFTMAX, "--input", f"X={tmp_path / name}", "--output", f"Y={out}",
                 cache=cache)
        assert r.returncode == 0, r.stderr
        outs.append(np.load(out))
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


def test_an_input_is_read_only_when_its_name_is_right(tmp_path, cache):
    # the unknown name is the error, not the missing file
    err = run_softmax(tmp_path, cache, "--input", f"Q={tmp_path / 'nope.npy'}")
    assert f"--input Q={tmp_path / 'nope.npy'}: error: `Q` is not a tensor of module `softmax`" in err
    assert "no such file" not in err


def test_an_input_for_an_output_is_refused(tmp_path, cache, x16):
    err = run_softmax(tmp_path, cache, "--input", f"Y={tmp_path / 'x.npy'}", "--bind", "R=16")
    assert "softmax.wsp:7:1: error: `Y` is an output; it takes no input array" in err


# ---- unreadable .npz files given with --inputs ---------------------------------------------

def _bad_npz(tmp_path, cache, file) -> str:
    err = run_softmax(tmp_path, cache, "--inputs", file)
    assert f"{file}: error: " in err, err
    return err


def test_truncated_npz(tmp_path, cache, x16):
    np.savez(tmp_path / "a.npz", X=x16)
    data = (tmp_path / "a.npz").read_bytes()
    (tmp_path / "t.npz").write_bytes(data[: len(data) // 2])
    assert "not a zip file" in _bad_npz(tmp_path, cache, tmp_path / "t.npz")


def test_npz_with_a_bad_crc(tmp_path, cache, x16):
    np.savez(tmp_path / "a.npz", X=x16)  # stored, not compressed: the data is in the file as is
    data = bytearray((tmp_path / "a.npz").read_bytes())
    at = data.index(x16.tobytes()[:64]) + 1000
    data[at] ^= 0xFF
    (tmp_path / "crc.npz").write_bytes(bytes(data))
    assert "CRC" in _bad_npz(tmp_path, cache, tmp_path / "crc.npz")


def test_npy_given_to_inputs(tmp_path, cache, x16):
    err = _bad_npz(tmp_path, cache, tmp_path / "x.npy")
    assert "is a .npy file" in err and "--input NAME=" in err


def test_npz_member_that_is_no_array(tmp_path, cache):
    with zipfile.ZipFile(tmp_path / "m.npz", "w") as z:
        z.writestr("notes.txt", "hello")
    assert "`notes.txt` is not a .npy array" in _bad_npz(tmp_path, cache, tmp_path / "m.npz")


def test_npz_member_claiming_a_huge_shape(tmp_path, cache):
    with zipfile.ZipFile(tmp_path / "h.npz", "w") as z:
        z.writestr("X.npy", npy_header((2**40, 2**20)) + b"\0" * 64)
    err = _bad_npz(tmp_path, cache, tmp_path / "h.npz")
    assert "X.npy" in err and "truncated" in err


def test_npz_with_an_object_array(tmp_path, cache):
    np.savez(tmp_path / "o.npz", X=np.array([1, "a"], dtype=object))
    assert "Python objects" in _bad_npz(tmp_path, cache, tmp_path / "o.npz")


def test_npz_directory_and_fifo(tmp_path, cache):
    (tmp_path / "d.npz").mkdir()
    assert "is a directory" in _bad_npz(tmp_path, cache, tmp_path / "d.npz")
    os.mkfifo(tmp_path / "f.npz")
    assert "a FIFO" in _bad_npz(tmp_path, cache, tmp_path / "f.npz")


def test_npz_naming_an_unknown_tensor(tmp_path, cache, x16):
    np.savez(tmp_path / "q.npz", Q=x16)
    err = _bad_npz(tmp_path, cache, tmp_path / "q.npz")
    assert "`Q` (in" in err and "is not a tensor of module `softmax`" in err


def test_a_tensor_given_twice_by_inputs_and_input(tmp_path, cache, x16):
    np.savez(tmp_path / "a.npz", X=x16)
    err = run_softmax(tmp_path, cache, "--inputs", tmp_path / "a.npz", "--input",
                      f"X={tmp_path / 'x.npy'}")
    assert f"--input X={tmp_path / 'x.npy'}: error: `X` is also in {tmp_path / 'a.npz'}" in err


def test_npz_inputs_run(tmp_path, cache, x16):
    np.savez_compressed(tmp_path / "a.npz", X=x16)
    r = wspc("run", SOFTMAX, "--inputs", tmp_path / "a.npz", "--outputs", tmp_path / "o.npz",
             cache=cache)
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "o.npz")["Y"].shape == (16, 128)


# ---- command-line values -------------------------------------------------------------------

@pytest.mark.parametrize("args, option, words", [
    (["--random-inputs", "-1"], "--random-inputs", "-1"),
    (["--workers", "2147483648"], "--workers", "256"),
    (["--workers", "100000"], "--workers", "256"),
    (["--workers", "0"], "--workers", "0"),
    (["--bind", "R=٣٢"], "--bind", "not an integer (ASCII digits"),
    (["--bind", "R=1e3"], "--bind", "not an integer"),
    (["--bind", "R=-16"], "--bind", "a sym is a non-negative integer"),
    (["--bind", "R=9223372036854775808"], "--bind", "more than a sym can be (2^63 - 1"),
    (["--bind", "R=" + "1" + "0" * 30], "--bind", "2^63"),
    (["--bind", "R"], "--bind", "NAME=VALUE"),
    (["--bind", "R=32", "--bind", "R=16"], "--bind", "is given twice"),
    (["--input", "X=a.npy", "--input", "X=b.npy"], "--input", "given twice"),
    (["--output", "Y=a.npy", "--output", "Y=b.npy"], "--output", "given twice"),
    (["--max-memory", "8X"], "--max-memory", "8X"),
    (["--max-memory", "0"], "--max-memory", "0"),
    (["--max-memory", "9000P"], "--max-memory", "2^63 - 1 bytes"),
    (["--outputs", ""], "--outputs", "an empty file name"),
    (["--trace", " "], "--trace", "an empty file name"),
    (["--inputs", ""], "--inputs", "an empty file name"),
])
def test_bad_command_line_values_are_usage_errors(tmp_path, cache, args, option, words):
    r = wspc("run", SOFTMAX, "--random-inputs", "1", *args, cache=cache, cwd=tmp_path)
    err = failed(r, 2)
    assert not list(tmp_path.iterdir()), "a usage error writes nothing"
    assert option in err and words in err, err


def test_ascii_prefixed_and_underscored_ints_bind(tmp_path, cache):
    for value in ("0x20", "0b100000", "0o40", "3_2"):
        out = tmp_path / f"{value}.npy"
        r = wspc("run", SOFTMAX, "--bind", f"R={value}", "--random-inputs", "1", "--output",
                 f"Y={out}", cache=cache)
        assert r.returncode == 0, r.stderr
        assert np.load(out).shape == (32, 128)


def test_unknown_sym_names_the_option(tmp_path, cache):
    err = run_softmax(tmp_path, cache, "--bind", "Q=3", "--random-inputs", "1")
    assert "--bind Q=3: error: `Q` is not a sym of module `softmax`" in err


def test_unknown_schedule_names_the_option(tmp_path, cache):
    err = run_softmax(tmp_path, cache, "--schedule", "mian", "--random-inputs", "1")
    assert err.splitlines()[:2] == ["--schedule mian: error: module `softmax` has no schedule `mian`",
                                    "help: did you mean `main`?"]
    r = wspc("compile", SOFTMAX, "--schedule", "mian", "-o", tmp_path / "out", cache=cache)
    assert "--schedule mian: error: module `softmax` has no schedule `mian`" in failed(r)
    assert not (tmp_path / "out").exists()


def test_unknown_output_names_the_option(tmp_path, cache):
    r = wspc("run", SOFTMAX, "--bind", "R=16", "--random-inputs", "1", "--output",
             f"Q={tmp_path / 'q.npy'}", cache=cache)
    err = failed(r)
    assert f"--output Q={tmp_path / 'q.npy'}: error: `Q` is not a tensor of module `softmax`" in err


# ---- sizes that do not fit -----------------------------------------------------------------

def test_softmax_with_two_billion_rows(tmp_path, cache):
    err = run_softmax(tmp_path, cache, "--bind", "R=2147483648", "--random-inputs", "1")
    assert "softmax.wsp:4:5: error:" in err and "2147483648" in err
    assert "`X` 1024.0 GiB" in err and "`Y` 1024.0 GiB" in err and "GiB of memory" in err


def test_rmsnorm_needing_256_gib(tmp_path, cache):
    out = tmp_path / "y.npy"
    r = wspc("run", RMSNORM, "--bind", "B=4096", "--bind", "T=4096", "--random-inputs", "1",
             "--output", f"Y={out}", cache=cache)
    err = failed(r)
    assert "rmsnorm.wsp:4:" in err and "`X` 128.0 GiB" in err and not out.exists()


def test_gemm_with_k_two_to_the_forty(tmp_path, cache):
    err = failed(wspc("run", GEMM, "--bind", f"K={2**40}", "--random-inputs", "1", cache=cache))
    assert "gemm.wsp:4:" in err and "GiB" in err


def test_largest_int64_bind_is_a_memory_error_not_a_crash(tmp_path, cache):
    err = run_softmax(tmp_path, cache, "--bind", f"R={2**63 - 1}", "--random-inputs", "1")
    assert "softmax.wsp:4:5: error:" in err and "GiB" in err


def test_max_memory_limits_a_run_and_allows_it(tmp_path, cache):
    # R = 4096: X and Y are 2 MiB each
    err = run_softmax(tmp_path, cache, "--random-inputs", "1", "--max-memory", "3M")
    assert "softmax.wsp:4:5: error:" in err and "--max-memory 3M" in err
    r = wspc("run", SOFTMAX, "--random-inputs", "1", "--max-memory", "8G", cache=cache)
    assert r.returncode == 0, r.stderr


def test_max_memory_limits_the_input_files_read(tmp_path, cache):
    x = np.zeros((4096, 128), np.float32)  # 2 MiB
    np.save(tmp_path / "big.npy", x)
    err = run_softmax(tmp_path, cache, "--input", f"X={tmp_path / 'big.npy'}", "--max-memory",
                      "1M")
    assert f"cannot read {tmp_path / 'big.npy'}" in err and "--max-memory 1M" in err


# ---- files read whole: the module and the machine ------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_module_and_machine_files_that_never_end(tmp_path, cache, kind):
    if kind == "fifo":
        special = tmp_path / "p.toml"
        os.mkfifo(special)
        words = "is a FIFO, not a regular file"
    else:
        special, words = Path("/dev/zero"), "is a character device, not a regular file"
    err = failed(wspc("run", special, cache=cache, timeout=60))
    assert f"{special}: error: cannot read file: {words}" in err
    err = failed(wspc("run", SOFTMAX, "--machine", special, "--bind", "R=16", "--random-inputs",
                      "1", cache=cache, timeout=60))
    assert f"{special}: error: cannot read machine file: {words}" in err


def test_a_file_name_that_is_not_utf8_is_printed_as_its_bytes(tmp_path):
    """POSIX file names are bytes: `r\\xff.wsp` reaches Python as surrogates, and wspc writes it
    back as the same bytes (before: a UnicodeEncodeError traceback, found by `make fuzz`)."""
    name = b"r\xff\xfe.wsp"
    good, bad = tmp_path / os.fsdecode(name), tmp_path / os.fsdecode(b"bad\xff.wsp")
    good.write_bytes(SOFTMAX.read_bytes())
    bad.write_bytes(b"sym N\nkernel k() { store(y, 1) }\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LC_ALL": "C.UTF-8"}
    ok = subprocess.run([sys.executable, "-m", "ptowsp", "check", os.fsencode(good.name)],
                        cwd=tmp_path, env=env, capture_output=True)
    assert ok.returncode == 0 and ok.stdout.startswith(name + b": ok: module `softmax`"), ok.stderr
    err = subprocess.run([sys.executable, "-m", "ptowsp", "check", os.fsencode(bad.name)],
                         cwd=tmp_path, env=env, capture_output=True)
    # a diagnostic shows a name's bytes that are not text escaped (as every diagnostic does)
    assert err.returncode == 1 and err.stderr.startswith(b"bad\\xff.wsp:2:"), err.stderr
    assert b"Traceback" not in err.stderr
