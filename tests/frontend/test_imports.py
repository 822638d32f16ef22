"""Which files wspc reads (language.md section 1): only regular `*.wsp` files of at most 16 MiB
of UTF-8, named by an import relative to the importing file. Special files (a FIFO, a device, a
3 GB sparse file, /proc) never hang the compiler or grow it, and a diagnostic never shows a line
of a file that is not wspc source. The same rules hold for the main file on the command line,
`ptowsp.load`, `ptowsp.parse`'s imports and `--depfile`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import ptowsp
from ptowsp.cli import main
from ptowsp.diagnostics import WspError
from ptowsp.frontend.checker import check_file, check_source
from ptowsp.frontend.sources import MAX_SOURCE_BYTES

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr3t_MARKER"  # written into files that must never be shown
LIB = "sym B = 4\n"
PROGRAM = """\
input X: f32[16, 128]
output Y: f32[16, 128]
kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
workload w() { k(x = X, y = Y) }
schedule main = w()
"""


def wspc(*args, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """The command in a subprocess; the timeout only turns a hang into a failure."""
    return subprocess.run([sys.executable, "-m", "ptowsp", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "WSPC_CACHE_DIR": str(cwd / ".cache")})


def importing(tmp_path: Path, path: str, name: str = "main.wsp") -> Path:
    main_file = tmp_path / name
    main_file.write_text(f'import "{path}"\n' + PROGRAM)
    return main_file


def import_error(main_file: Path) -> tuple[str, str]:
    """(message, rendered output) of the one diagnostic `main_file` gives, at its import."""
    with pytest.raises(WspError) as info:
        check_file(str(main_file))
    [d] = info.value.diagnostics
    assert (d.span.file, d.span.line, d.span.col) == (str(main_file), 1, 1)
    return d.message, info.value.render()


# ---------------------------------------------------------------------------------------------
# Special files behind an import


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.wsp")  # opening it for reading would block: nobody writes
    message, _ = import_error(importing(tmp_path, "pipe.wsp"))
    assert message == "cannot import `pipe.wsp`: is a FIFO, not a regular file"


def test_a_huge_sparse_file_is_refused_before_it_is_read(tmp_path):
    with open(tmp_path / "big.wsp", "wb") as f:
        f.truncate(3 << 30)  # 3 GB of holes: costs no disk, would cost 3 GB to read
    message, _ = import_error(importing(tmp_path, "big.wsp"))
    assert message == "cannot import `big.wsp`: larger than 16 MiB, the limit for a source file"


def test_a_file_just_at_the_limit_is_read(tmp_path):
    (tmp_path / "lib.wsp").write_text(LIB + " " * (MAX_SOURCE_BYTES - len(LIB)))
    assert "B" in check_file(str(importing(tmp_path, "lib.wsp"))).syms


def test_dev_zero_is_refused_by_path_and_by_link(tmp_path):
    message, _ = import_error(importing(tmp_path, "/dev/zero"))
    assert message == "cannot import `/dev/zero`: the path is absolute"
    (tmp_path / "zero.wsp").symlink_to("/dev/zero")
    message, _ = import_error(importing(tmp_path, "zero.wsp"))
    assert message == "cannot import `zero.wsp`: is a character device, not a regular file"


def test_proc_environ_is_never_shown(tmp_path, monkeypatch):
    monkeypatch.setenv("WSPC_TEST_SECRET", SECRET)
    message, text = import_error(importing(tmp_path, "/proc/self/environ"))
    assert message == "cannot import `/proc/self/environ`: the path is absolute"
    (tmp_path / "env.wsp").symlink_to("/proc/self/environ")
    message, text2 = import_error(importing(tmp_path, "env.wsp"))
    assert message == "cannot import `env.wsp`: a symbolic link to a file not named `*.wsp`"
    assert SECRET not in text + text2 and "PATH=" not in text + text2


def test_etc_passwd_is_never_shown(tmp_path):
    depth = len(tmp_path.parts)
    climb = "../" * depth + "etc/passwd"
    message, text = import_error(importing(tmp_path, climb))
    assert message == f"cannot import `{climb}`: only `.wsp` files can be imported"
    (tmp_path / "passwd.wsp").symlink_to("/etc/passwd")
    message, text2 = import_error(importing(tmp_path, "passwd.wsp"))
    assert message == "cannot import `passwd.wsp`: a symbolic link to a file not named `*.wsp`"
    assert "root:" not in text + text2


def test_a_file_that_is_not_utf8_is_reported_at_the_import_without_its_lines(tmp_path):
    (tmp_path / "latin1.wsp").write_bytes(f"sym B\n// {SECRET} \xe9t\xe9\n".encode("latin-1"))
    message, text = import_error(importing(tmp_path, "latin1.wsp"))
    assert message == "cannot import `latin1.wsp`: not UTF-8 text"
    assert SECRET not in text and "sym B" not in text


def test_a_loop_of_links_and_a_name_too_long(tmp_path):
    (tmp_path / "loop.wsp").symlink_to("loop.wsp")
    message, _ = import_error(importing(tmp_path, "loop.wsp"))
    assert message == "cannot import `loop.wsp`: a loop of symbolic links"
    long = "x" * 300 + ".wsp"
    message, _ = import_error(importing(tmp_path, long))
    assert message == f"cannot import `{long}`: file name too long"


def test_a_directory_is_refused(tmp_path):
    (tmp_path / "dir.wsp").mkdir()
    message, _ = import_error(importing(tmp_path, "dir.wsp"))
    assert message == "cannot import `dir.wsp`: is a directory"


@pytest.mark.parametrize("path, reason", [
    ("\\x00", "the path contains a control character"),
    ("lib\\x00.wsp", "the path contains a control character"),
    ("", "the path is empty"),
    ("lib.txt", "only `.wsp` files can be imported"),
])
def test_paths_no_file_has(tmp_path, path, reason):
    (tmp_path / "lib.wsp").write_text(LIB)
    shown = path.replace("\\x00", "\\x00")  # the message escapes the NUL it found
    message, _ = import_error(importing(tmp_path, path))
    assert message == f"cannot import `{shown}`: {reason}"


def test_an_absolute_path_is_refused_even_to_a_wsp_file(tmp_path):
    (tmp_path / "lib.wsp").write_text(LIB)
    message, _ = import_error(importing(tmp_path, str(tmp_path / "lib.wsp")))
    assert message.endswith(": the path is absolute")


# ---------------------------------------------------------------------------------------------
# What may be imported


def test_imports_are_relative_to_the_importing_file_and_may_climb(tmp_path, monkeypatch):
    (tmp_path / "common").mkdir()
    (tmp_path / "models").mkdir()
    (tmp_path / "common" / "sizes.wsp").write_text("sym B = 4\n")
    (tmp_path / "common" / "dims.wsp").write_text('import "sizes.wsp"\nconst N = 16\n')
    model = tmp_path / "models" / "m.wsp"
    model.write_text('import "../common/dims.wsp"\n' + PROGRAM)
    monkeypatch.chdir(tmp_path / "common")  # the current folder plays no part
    env = check_file(str(model))
    assert set(env.syms) == {"B"} and env.consts == {"N": 16}
    assert len(env.files) == 3


def test_a_link_to_a_wsp_file_is_followed(tmp_path):
    (tmp_path / "real.wsp").write_text(LIB)
    (tmp_path / "alias.wsp").symlink_to(tmp_path / "real.wsp")
    env = check_file(str(importing(tmp_path, "alias.wsp")))
    assert "B" in env.syms


def test_a_file_name_with_a_carriage_return(tmp_path):
    # an import path cannot hold a control character; a main file's name may, and is shown
    # escaped (no carriage return reaches the terminal)
    main_file = tmp_path / "a\rb.wsp"
    main_file.write_text("sym B\nconst C = nope\n")
    with pytest.raises(WspError) as info:
        check_file(str(main_file))
    [d] = info.value.diagnostics
    assert d.span.file == str(main_file) and d.message == "unknown name `nope`"
    text = info.value.render()
    assert "\r" not in text and "a\\rb.wsp:2:11: error: unknown name `nope`" in text
    assert "   2 | const C = nope" in text
    message, _ = import_error(importing(tmp_path, "a\\rb.wsp"))
    assert message == "cannot import `a\\rb.wsp`: the path contains a control character"


def test_parse_resolves_imports_relative_to_its_file_name(tmp_path):
    (tmp_path / "lib.wsp").write_text(LIB)
    m = ptowsp.parse('import "lib.wsp"\n' + PROGRAM, str(tmp_path / "virtual.wsp"))
    assert "B" in m.env.syms
    with pytest.raises(WspError, match="the path is absolute"):
        ptowsp.parse('import "/etc/passwd.wsp"\n', str(tmp_path / "virtual.wsp"))
    os.mkfifo(tmp_path / "p.wsp")
    with pytest.raises(WspError, match="a FIFO"):
        ptowsp.parse('import "p.wsp"\n', str(tmp_path / "virtual.wsp"))


def test_module_names_from_file_names_are_identifiers(tmp_path):
    for name, module in (("my-model.wsp", "my_model"), ("2d conv.wsp", "_2d_conv")):
        (tmp_path / name).write_text(PROGRAM)
        assert check_file(str(tmp_path / name)).name == module
    assert check_source(PROGRAM).name == "module"  # text with no file


# ---------------------------------------------------------------------------------------------
# The main file: the command line and ptowsp.load


@pytest.mark.parametrize("kind", ["fifo", "device", "passwd", "environ", "txt", "latin1", "sparse"])
def test_the_main_file_follows_the_same_rules(tmp_path, kind, monkeypatch):
    monkeypatch.setenv("WSPC_TEST_SECRET", SECRET)
    path = tmp_path / "m.wsp"
    reason = {"fifo": "is a FIFO, not a regular file", "device": "is a character device, not a regular file",
              "passwd": "a symbolic link to a file not named `*.wsp`",
              "environ": "a symbolic link to a file not named `*.wsp`",
              "txt": "not a `.wsp` file", "latin1": "not UTF-8 text",
              "sparse": "larger than 16 MiB, the limit for a source file"}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "passwd":
        path.symlink_to("/etc/passwd")
    elif kind == "environ":
        path.symlink_to("/proc/self/environ")
    elif kind == "txt":
        path = tmp_path / "m.txt"
        path.write_text(f"// {SECRET}\n")
    elif kind == "latin1":
        path.write_bytes(f"// {SECRET} \xe9\n".encode("latin-1"))
    else:
        with open(path, "wb") as f:
            f.truncate(3 << 30)
    with pytest.raises(WspError) as info:
        ptowsp.load(str(path))
    [d] = info.value.diagnostics
    assert d.message == f"cannot read file: {reason}" and d.span.line == 0
    for command in (["check"], ["compile", "--emit", "ast"], ["run"]):
        result = wspc(*command, path, cwd=tmp_path)
        assert result.returncode == 1, (command, result.stderr)
        assert result.stderr.startswith(f"{path}: error: cannot read file: {reason}\n"), result.stderr
        assert "Traceback" not in result.stderr
        assert SECRET not in result.stderr and "root:" not in result.stderr


def test_a_nul_in_the_main_file_name_is_a_user_error():
    with pytest.raises(WspError, match="the file name contains a NUL character"):
        check_file("bad\0name.wsp")


# ---------------------------------------------------------------------------------------------
# --depfile: exactly the files read


def test_depfile_lists_exactly_the_files_read(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a b.wsp").write_text('import "c$#.wsp"\nsym A = 1\n')
    (tmp_path / "lib" / "c$#.wsp").write_text("sym C = 1\n")
    (tmp_path / "lib" / "unused.wsp").write_text("sym U = 1\n")
    (tmp_path / "m.wsp").write_text('import "lib/a b.wsp"\nimport "lib/c$#.wsp"\n' + PROGRAM)
    r = wspc("compile", "m.wsp", "-o", "out", "--depfile", "m.d", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rule = (tmp_path / "m.d").read_text()
    # the rule, then an empty rule per import (as `cc -MP`), so deleting an import never stops make
    assert rule == ("out/module.so: m.wsp lib/a\\ b.wsp lib/c$$\\#.wsp\n"
                    "\nlib/a\\ b.wsp:\n\nlib/c$$\\#.wsp:\n")
    # make reads the names back: the rule is up to date, and out of date once an import changes
    (tmp_path / "Makefile").write_text("include m.d\nout/module.so:\n\ttouch $@\n")
    assert subprocess.run(["make", "-q", "out/module.so"], cwd=tmp_path).returncode == 0
    os.utime(tmp_path / "lib" / "c$#.wsp", (4e9, 4e9))
    assert subprocess.run(["make", "-q", "out/module.so"], cwd=tmp_path).returncode == 1


def test_a_depfile_cannot_name_a_file_with_a_line_break(tmp_path):
    (tmp_path / "a\nb.wsp").write_text(PROGRAM)  # a main file: imports cannot hold one
    r = wspc("compile", "a\nb.wsp", "--target", "ascend_npu", "-o", "out", "--depfile", "m.d",
             cwd=tmp_path)
    assert r.returncode == 1
    assert r.stderr.startswith("--depfile m.d: error: `a\\nb.wsp` cannot be named")
    assert "cannot be named in a Makefile rule (a line break in a file name)" in r.stderr
    assert not (tmp_path / "m.d").exists() and not (tmp_path / "out").exists()


def test_the_cli_check_of_a_fifo_does_not_hang(tmp_path):
    os.mkfifo(tmp_path / "p.wsp")
    result = CliRunner().invoke(main, ["check", str(tmp_path / "p.wsp")])
    assert result.exit_code == 1
    assert "cannot read file: is a FIFO, not a regular file" in result.output


def test_a_warm_run_does_not_read_an_import_that_became_a_fifo(tmp_path):
    (tmp_path / "lib.wsp").write_text(LIB)
    (tmp_path / "m.wsp").write_text('import "lib.wsp"\n' + PROGRAM)
    assert wspc("run", "m.wsp", "--random-inputs", "1", cwd=tmp_path).returncode == 0
    (tmp_path / "lib.wsp").unlink()
    os.mkfifo(tmp_path / "lib.wsp")  # the index of compiled sources still lists lib.wsp
    r = wspc("run", "m.wsp", "--random-inputs", "1", cwd=tmp_path)
    assert r.returncode == 1
    assert "cannot import `lib.wsp`: is a FIFO, not a regular file" in r.stderr
