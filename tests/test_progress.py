"""Progress on long work (docs/tools.md, "Progress"): on a terminal `wspc compile` and `wspc run`
say what they are doing on one line of stderr, rewritten with `\\r` and cleared at the end;
nothing when stderr is not a terminal, nor with `--quiet`. The terminal is a pseudo-terminal
(`pty.openpty()`) and `WSPC_PROGRESS_AFTER=0` shows every step at once, so no test waits
half a second or reads a clock."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from ptowsp import progress

from .guard import Pending

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.cc

MODULE = """sym N = 64
input X: f32[N, 16]
output Y: f32[N, 16]
kernel twice(x: In[Tile[1, 16, f32]], y: Out[Tile[1, 16, f32]]) { store(y, x + x) }
workload w() { for i in P(N) { twice[i](x = X[i], y = Y[i]) } }
schedule main = w().dispatch(round_robin(2))
"""


@pytest.fixture
def module(tmp_path, wspc_cache):
    f = tmp_path / "progress_demo.wsp"
    # a module name no other test has (it is in the C): a module the cache has not built, so
    # `compile` compiles C
    name = "progress_" + "".join(c if c.isalnum() else "_" for c in tmp_path.name)
    f.write_text(f"module {name}\n" + MODULE)
    return f


def wspc(*args, terminal: bool, after: str = "0"):
    """(exit status, stdout, stderr) of `wspc ARGS` with stderr on a pseudo-terminal (or a
    pipe when not `terminal`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_PROGRESS_AFTER": after}
    cmd = [sys.executable, "-m", "ptowsp", *map(str, args)]
    if not terminal:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        return r.returncode, r.stdout, r.stderr
    master, slave = pty.openpty()

    def body():
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=slave, env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        out = proc.stdout.read()
        proc.wait()
        os.close(master)
        return proc.returncode, out.decode(), b"".join(chunks).decode()

    return Pending(body).result()


def test_compile_and_run_say_what_they_do_on_a_terminal(module, tmp_path):
    rc, out, err = wspc("compile", module, "-o", tmp_path / "art", terminal=True)
    assert rc == 0, err
    assert "\rwspc: compiling the module's C" in err
    assert err.endswith("\r\x1b[K")  # the line cleared at the end
    rc, out, err = wspc("run", module, "--random-inputs", "0", terminal=True)
    assert rc == 0, err
    assert "\rwspc: running: " in err and "enumerated tasks done" in err
    assert err.endswith("\r\x1b[K")


def test_tune_counts_its_candidates(module):
    rc, out, err = wspc("tune", module, "--budget", "2", terminal=True)
    assert rc == 0, err
    assert "\rwspc: tuning: " in err and "candidates simulated of 2" in err
    assert "best: " in out and err.endswith("\r\x1b[K")


def test_nothing_when_not_on_a_terminal_or_quiet(module):
    rc, out, err = wspc("run", module, "--random-inputs", "0", terminal=False)
    assert rc == 0 and err == ""
    rc, out, err = wspc("run", module, "--random-inputs", "0", "--quiet", terminal=True)
    assert rc == 0 and "wspc:" not in err and "\r" not in err


def test_a_short_step_shows_nothing():
    # the default threshold: a step shorter than it never writes (the phase ends first)
    class Stream:
        text = ""

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    stream = Stream()
    progress.enable(stream)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("WSPC_PROGRESS_AFTER", "3600")
            with progress.phase("waiting"):
                pass
            assert stream.text == ""
            mp.setenv("WSPC_PROGRESS_AFTER", "0")
            with progress.phase("outer"), progress.phase("inner", lambda: "3 of 4"):
                pass
            assert "\rwspc: outer (" in stream.text and "\rwspc: inner: 3 of 4 (" in stream.text
            assert stream.text.endswith("\r\x1b[K")
    finally:
        progress.enable(None)
