"""`make fuzz`: mutate every example and test program, and look for what users must never see.

    python -m fuzz --count 10000            # or --minutes 30; --seed S; --out build/fuzz
    python -m fuzz --count 40 --seed 1      # the fixed slice `make test` runs

For each input: pick a seed program (every `.wsp` under examples/ and tests/), mutate it
(`mutate.py`), write it under a (sometimes odd) file name beside copies of the files it may
import, and run `wspc check` on it. When it checks clean and its seed has known-good binds,
run it with random inputs on `ref` and on `cpu_sim` and compare the outputs. Counted:

- exit 70 (an internal error), an exception that escaped the command, a signal (the worker
  died), a timeout (check: 20 s; a run: 120 s on cpu_sim after ref finished), a mismatch between
  ref and cpu_sim (different outputs, or one succeeds where the other reports an error);
- and, as context, inputs, exits 0 / 1 / 2, runs compared.

Every finding is saved as a reproducer under OUT/findings/<kind>/<n>/ (the input file, the
files beside it, the command and what it printed). Exit status: 0 when nothing was found, 1
otherwise. Commands run in a `worker.py` process, restarted after a hang or a crash, with a
private build cache under OUT.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .mutate import mutate, odd_file_name

ROOT = Path(__file__).resolve().parent.parent
CHECK_TIMEOUT = 20.0
RUN_TIMEOUT = 120.0
BIND_CANDIDATES = (2, 16, 64, 256)
FINDINGS = ("exit70", "escaped", "signal", "timeout", "mismatch")


def seeds() -> list[Path]:
    return sorted(ROOT.glob("examples/*.wsp")) + sorted(ROOT.glob("tests/programs/*.wsp")) + \
        sorted(ROOT.glob("tests/errors/*.wsp"))


def example_binds() -> dict[str, list[str]]:
    """`BIND_<example>` of examples/Makefile: the sizes the examples are run with."""
    out = {}
    text = (ROOT / "examples" / "Makefile").read_text()
    for m in re.finditer(r"^BIND_(\w+)\s*:=\s*(.*)$", text, re.M):
        out[m.group(1)] = m.group(2).split()
    return out


def syms_without_default(text: str) -> list[str]:
    names = []
    for m in re.finditer(r"^\s*sym\s+([^\n/]*)", text, re.M):
        for item in m.group(1).split(","):
            item = item.strip()
            if item and "=" not in item and re.fullmatch(r"[A-Za-z_]\w*", item):
                names.append(item)
    return names


@dataclass
class Reply:
    exit: Optional[int]  # None: no exit status (timeout or signal)
    stdout: str = ""
    stderr: str = ""
    escaped: Optional[str] = None
    kind: str = "exit"  # exit | timeout | signal


class Worker:
    """One `worker.py` process; `run(argv, cwd, timeout)` restarts it after a hang or a crash."""

    def __init__(self, env: dict):
        self.env = env
        self.proc: Optional[subprocess.Popen] = None

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "fuzz.worker"], cwd=ROOT, env=self.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True,
                                     start_new_session=True)

    def stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.proc = None

    def run(self, argv: list[str], cwd: Path, timeout: float) -> Reply:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        try:
            self.proc.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd)}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self._died()
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        ready = sel.select(timeout)
        sel.close()
        if not ready:
            self.stop()
            return Reply(None, kind="timeout")
        line = self.proc.stdout.readline()
        if not line:
            return self._died()
        r = json.loads(line)
        return Reply(r["exit"], r["stdout"], r["stderr"], r["escaped"])

    def _died(self) -> Reply:
        assert self.proc is not None
        code = self.proc.wait()
        self.proc = None
        return Reply(None, stderr=f"worker ended with status {code}", kind="signal")


@dataclass
class Stats:
    inputs: int = 0
    exits: dict = field(default_factory=dict)
    runs_compared: int = 0
    findings: dict = field(default_factory=lambda: {k: 0 for k in FINDINGS})

    def line(self) -> str:
        ex = ", ".join(f"exit {k}: {v}" for k, v in sorted(self.exits.items(), key=str))
        found = ", ".join(f"{k}: {v}" for k, v in self.findings.items())
        return f"inputs: {self.inputs} ({ex}); runs compared: {self.runs_compared}; {found}"


class Fuzzer:
    def __init__(self, out: Path, seed: int, runs: bool):
        self.out = out
        self.rng = random.Random(seed)
        self.runs = runs
        self.stats = Stats()
        env = dict(os.environ, WSPC_CACHE_DIR=str(out / "cache"), PYTHONPATH=str(ROOT))
        self.worker = Worker(env)
        self.seeds = seeds()
        self.binds: dict[Path, Optional[list[str]]] = {}
        self.work = out / "work"
        self.signatures: dict[tuple[str, str], int] = {}
        self._serial = 0

    # -- the pieces of one input ------------------------------------------------------------

    def _workdir(self, seed: Path) -> Path:
        """A fresh directory holding the seed's siblings (what `import` may name) and the
        special files the hostile imports point at."""
        d = self.work / f"w{self._serial}"
        self._serial += 1
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        for sib in seed.parent.glob("*.wsp"):
            shutil.copy(sib, d / sib.name)
        os.mkfifo(d / "fifo.wsp")
        (d / "lib.txt").write_text("not a program\n")
        with open(d / "big.wsp", "wb") as fh:  # sparse: costs no disk
            fh.truncate(3 * 2**30)
        return d

    def _bind_args(self, seed: Path) -> Optional[list[str]]:
        """Binds that run the unmutated seed on ref (found once per seed), or None."""
        if seed in self.binds:
            return self.binds[seed]
        text = seed.read_text()
        names = syms_without_default(text)
        known = example_binds().get(seed.stem) if seed.parent.name == "examples" else None
        candidates = [known] if known is not None else \
            [[a for n in names for a in ("--bind", f"{n}={v}")] for v in BIND_CANDIDATES]
        found = None
        if "tests/errors" not in str(seed):
            d = self._workdir(seed)
            for binds in candidates:
                r = self.worker.run(["run", "--target", "ref", "--random-inputs", "0", *binds,
                                     "--", seed.name], d, RUN_TIMEOUT)
                if r.exit == 0:
                    found = binds
                    break
        self.binds[seed] = found
        return found

    def _record(self, kind: str, d: Path, argv: list[str], reply: Reply, note: str = "") -> None:
        """Count a finding; keep a reproducer for the first three of each kind of message."""
        self.stats.findings[kind] += 1
        first = (reply.escaped or reply.stderr or note).strip().split("\n")[-1 if reply.escaped else 0]
        signature = (kind, re.sub(r"\d+", "N", first)[:120])
        self.signatures[signature] = self.signatures.get(signature, 0) + 1
        if self.signatures[signature] > 3:
            return
        dest = self.out / "findings" / kind / f"{self.stats.findings[kind]:04d}"
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(d, dest, ignore=shutil.ignore_patterns("fifo.wsp", "big.wsp", "*.npz"),
                        symlinks=True)
        (dest / "repro.txt").write_text(
            f"$ cd {d.name} && wspc {' '.join(map(repr, argv))}\n{note}\n"
            f"exit: {reply.exit} ({reply.kind})\n-- stdout\n{reply.stdout}\n-- stderr\n"
            f"{reply.stderr}\n-- escaped\n{reply.escaped or ''}\n", errors="replace")

    def _judge(self, d: Path, argv: list[str], r: Reply) -> bool:
        """Count a reply; True when it is a finding."""
        if r.kind != "exit":
            self._record(r.kind, d, argv, r)
            return True
        self.stats.exits[r.exit] = self.stats.exits.get(r.exit, 0) + 1
        if r.escaped:
            self._record("escaped", d, argv, r)
            return True
        if r.exit == 70 or r.exit not in (0, 1, 2):
            self._record("exit70", d, argv, r)
            return True
        return False

    def one(self) -> None:
        # wrong programs (tests/errors) are a third of the seeds but a fifth of the picks:
        # mutating a valid program reaches more of the compiler
        valid = [s for s in self.seeds if s.parent.name != "errors"]
        seed = self.rng.choice(valid if self.rng.random() < 0.8 else self.seeds)
        binds = self._bind_args(seed) if self.runs else None
        text, how = mutate(seed.read_text(), self.rng)
        d = self._workdir(seed)
        name = odd_file_name(seed.stem, self.rng) if self.rng.random() < 0.1 else \
            seed.name.encode()
        path = os.path.join(os.fsencode(d), name)
        with open(path, "wb") as fh:
            fh.write(text.encode("utf-8", "surrogateescape"))
        fname = os.fsdecode(name)
        self.stats.inputs += 1
        argv = ["check", "--", fname]
        r = self.worker.run(argv, d, CHECK_TIMEOUT)
        if self._judge(d, argv, r) or r.exit != 0 or binds is None:
            return
        self._compare(d, fname, binds, how)

    def _compare(self, d: Path, fname: str, binds: list[str], how: str) -> None:
        outs = {}
        for target, timeout in (("ref", RUN_TIMEOUT), ("cpu_sim", RUN_TIMEOUT)):
            argv = ["run", "--target", target, "--random-inputs", "0", *binds,
                    "--outputs", f"{target}.npz"]
            if target == "cpu_sim":
                argv += ["--workers", "2"]
            argv += ["--", fname]
            r = self.worker.run(argv, d, timeout)
            if target == "ref" and r.kind == "timeout":
                self.worker.stop()
                return  # a mutated size made the oracle slow: nothing to compare
            if self._judge(d, argv, r):
                return
            outs[target] = (r, argv)
        (rr, _), (cr, cargv) = outs["ref"], outs["cpu_sim"]
        self.stats.runs_compared += 1
        if rr.exit != cr.exit:
            self._record("mismatch", d, cargv, cr, f"ref exited {rr.exit}:\n{rr.stderr}")
            return
        if rr.exit == 0:
            why = _differ(d / "ref.npz", d / "cpu_sim.npz")
            if why:
                self._record("mismatch", d, cargv, cr, f"mutation: {how}\n{why}")

    def run(self, count: Optional[int], seconds: Optional[float]) -> Stats:
        start = time.monotonic()
        try:
            while (count is None or self.stats.inputs < count) and \
                    (seconds is None or time.monotonic() - start < seconds):
                self.one()
                if self.stats.inputs % 200 == 0:
                    print(self.stats.line(), flush=True)
                    shutil.rmtree(self.work, ignore_errors=True)
        finally:
            self.worker.stop()
            shutil.rmtree(self.work, ignore_errors=True)
        return self.stats


def _differ(a: Path, b: Path) -> Optional[str]:
    """Why two .npz files of outputs differ beyond float rounding (None: they agree)."""
    import numpy as np

    with np.load(a) as za, np.load(b) as zb:
        if sorted(za.files) != sorted(zb.files):
            return f"arrays {sorted(za.files)} vs {sorted(zb.files)}"
        for k in za.files:
            x, y = za[k], zb[k]
            if x.shape != y.shape or x.dtype != y.dtype:
                return f"{k}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}"
            if x.dtype.kind == "f":
                same_nan = np.array_equal(np.isnan(x), np.isnan(y))
                fx, fy = np.nan_to_num(x.astype(np.float64)), np.nan_to_num(y.astype(np.float64))
                # a mutated program may sum terms of 1e7 to a result of 100 (a long `+`/`-`
                # chain): f32 rounding then differs by the order of accumulation, so each
                # element's tolerance grows with the array's largest value
                finite = np.abs(fy[np.isfinite(fy)])
                scale = float(finite.max()) if finite.size else 0.0
                if not same_nan or not np.allclose(fx, fy, rtol=1e-3, atol=1e-4 + 1e-5 * scale):
                    return f"{k}: max difference {np.max(np.abs(fx - fy))}"
            elif not np.array_equal(x, y):
                return f"{k}: {int(np.sum(x != y))} elements differ"
    return None


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=None, help="inputs to try")
    ap.add_argument("--minutes", type=float, default=None, help="time to spend")
    ap.add_argument("--seed", type=int, default=0, help="random seed (reproducible runs)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "fuzz", help="findings and cache")
    ap.add_argument("--no-runs", action="store_true", help="check only; never run programs")
    args = ap.parse_args(argv)
    if args.count is None and args.minutes is None:
        args.count = 1000
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.out / "findings", ignore_errors=True)
    fz = Fuzzer(args.out.resolve(), args.seed, runs=not args.no_runs)
    t0 = time.monotonic()
    stats = fz.run(args.count, args.minutes * 60 if args.minutes else None)
    print(stats.line())
    for (kind, first), n in sorted(fz.signatures.items(), key=lambda kv: -kv[1]):
        print(f"  {n:5d} x {kind}: {first}")
    print(f"{time.monotonic() - t0:.0f} s; findings under {args.out / 'findings'}"
          if any(stats.findings.values()) else f"{time.monotonic() - t0:.0f} s; no findings")
    return 1 if any(stats.findings.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
