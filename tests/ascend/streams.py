"""Task streams of one schedule, enumerated twice: by cpu_sim's enumerator (the C that
backends/cpu emits, run against the recording runtime of cpu_stub.c: the oracle) and by the
ascend_npu AICPU expander (aicpu/expand.aicpu from an emitted tree, compiled with the host C++
compiler behind shim/aicpu_api.h, fed the plan words of the tree's include/wsp_plan_data.h).

`Harness` compiles the expander once per test session and the cpu enumerator once per module;
`Harness.streams(...)` runs both on the same symbols and tensor contents and returns them in
one comparable form (task statements named by their call and position, errors by their check
and values), plus the order-scope events and waves needed to check the device's order.
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ptowsp import sym
from ptowsp.backends.ascend.abi import scalar_word
from ptowsp.backends.ascend.plan import Plan, dispatchers, parse_c_array
from ptowsp.backends.cpu.emit import emit_enumerators
from ptowsp.backends.cpu.enumerate import entry_symbol
from ptowsp.backends.cpu.kernels import kernel_symbol
from ptowsp.dtypes import TABLE, numpy_dtype
from ptowsp.ir import nodes as N

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RUNTIME_C = ROOT / "runtime_c"
CC = os.environ.get("CC", "cc")
CXX = os.environ.get("CXX", "c++")


def run_compiler(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stderr[-4000:]}")


@dataclass
class Stream:
    """One enumeration: task lines (comparable), the end, and what the wave checks need."""

    tasks: list[str]
    end: tuple
    flushes: list[int]  # the number of tasks before each segment boundary
    waves: list[tuple[int, int]] = field(default_factory=list)  # (wave, core) per task
    paths: list[tuple] = field(default_factory=list)  # order-scope path per task (oracle)


def tensor_shapes(m: N.Module, syms: dict[str, int]) -> list[tuple[int, ...]]:
    return [tuple(sym.evaluate(d, syms) for d in t.dims) for t in m.tensors]


def write_data(path: Path, m: N.Module, syms: dict[str, int], arrays: dict) -> None:
    """The drivers' input (harness_io.h): symbols, every tensor's bytes, kernel tile counts."""
    syms = {**{s.name: s.default for s in m.syms if s.default is not None}, **syms}
    words = [len(m.syms)] + [syms[s.name] for s in m.syms] + [len(m.tensors)]
    blob = bytearray(np.asarray(words, "<i8").tobytes())
    for t, shape in zip(m.tensors, tensor_shapes(m, syms)):
        a = arrays.get(t.name)
        if a is None:
            a = np.zeros(shape, numpy_dtype(t.dtype))
        a = np.ascontiguousarray(a, dtype=numpy_dtype(t.dtype))
        assert a.shape == shape, (t.name, a.shape, shape)
        raw = a.tobytes()
        blob += np.asarray([len(raw)], "<i8").tobytes() + raw + b"\0" * (-len(raw) % 8)
    tiles = [sum(1 for p in k.params if p.kind == "tile") for k in m.kernels]
    blob += np.asarray([len(tiles)] + tiles, "<i8").tobytes()
    path.write_bytes(bytes(blob))


class Harness:
    """Builds and runs both enumerators in `workdir`."""

    def __init__(self, workdir: Path, tree: dict[str, str]):
        self.dir = workdir
        self.driver = self._build_driver(tree)
        self.stub_obj = self._build_stub()
        self.cpu_bins: dict[str, tuple[Path, object]] = {}

    def _build_driver(self, tree: dict[str, str]) -> Path:
        src = self.dir / "tree"
        for name in ("include/wsp_plan.h", "include/wsp_expand.h", "aicpu/expand.aicpu"):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_text(tree[name])
        out = self.dir / "expand_driver"
        run_compiler([CXX, "-x", "c++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror",
                      f"-I{HERE / 'shim'}", f"-I{src / 'include'}", f"-I{src / 'aicpu'}",
                      f"-I{HERE}", str(HERE / "expand_driver.cpp"), "-o", str(out)])
        return out

    def _build_stub(self) -> Path:
        obj = self.dir / "cpu_stub.o"
        run_compiler([CC, "-std=c11", "-O0", "-c", f"-I{RUNTIME_C}", f"-I{HERE}",
                      str(HERE / "cpu_stub.c"), "-o", str(obj)])
        return obj

    def cpu_binary(self, m: N.Module):
        """cpu_sim's enumerators of every schedule of `m`, linked with the stub runtime."""
        decls = "\n".join(f"int {kernel_symbol(k)}(const wsp_tile *tiles, const wsp_scalar *scalars);"
                          for k in m.kernels)
        enums = emit_enumerators(m, decls)
        key = hashlib.sha256(enums.source.encode()).hexdigest()[:16]
        if key not in self.cpu_bins:
            d = self.dir / f"cpu_{key}"
            d.mkdir(exist_ok=True)
            (d / "enumerate.c").write_text(enums.source)
            glue = ['#include "wsp_runtime.h"']
            glue += [f"int {kernel_symbol(k)}(const wsp_tile *t, const wsp_scalar *s) "
                     "{ (void)t; (void)s; return 0; }" for k in m.kernels]
            glue += [f"int {entry_symbol(s)}(wsp_runtime *, const int64_t *, void *const *, int64_t *);"
                     for s in m.schedules]
            glue.append("typedef int (*entry_fn)(wsp_runtime *, const int64_t *, void *const *, int64_t *);")
            glue.append("entry_fn wsp_test_entries[] = {"
                        + ", ".join(entry_symbol(s) for s in m.schedules) + "};")
            (d / "glue.c").write_text("\n".join(glue) + "\n")
            exe = d / "enumerate"
            run_compiler([CC, "-std=c11", "-O0", "-w", f"-I{RUNTIME_C}", str(d / "enumerate.c"),
                          str(d / "glue.c"), str(self.stub_obj), "-lm", "-o", str(exe)])
            self.cpu_bins[key] = (exe, enums)
        return self.cpu_bins[key]

    # -- runs
    def streams(self, m: N.Module, schedule: str, plan: Plan, plan_header: str,
                syms: dict[str, int], arrays: dict, capacity: int = 64,
                blocks: int = 3) -> tuple[Stream, Stream]:
        """(cpu_sim's stream, the expander's stream) of `schedule` on the same data."""
        tag = f"{m.name}_{schedule}_{capacity}"
        data = self.dir / f"{tag}.data"
        write_data(data, m, syms, arrays)
        s = m.schedule(schedule)
        effective = min(capacity, s.window) if s.window else capacity
        exe, enums = self.cpu_binary(m)
        nd = dispatchers(s) if "dispatch" in s.given else 0
        ns = int(s.streams) if "streams" in s.given else 0
        index = [x.name for x in m.schedules].index(schedule)
        env = dict(os.environ, WSP_INFO_BASE=str(len(enums.info.get(schedule, []))))
        cpu_out = self._run([str(exe), str(data), str(index), str(nd), str(ns), str(effective)],
                            env)
        words = parse_c_array(plan_header)
        assert words == plan.words
        pfile = self.dir / f"{tag}.plan"
        pfile.write_bytes(np.asarray(words, "<i8").tobytes())
        npu_out = self._run([str(self.driver), str(pfile), str(data), str(capacity),
                             str(blocks)], None)
        return (self._cpu_stream(cpu_out, enums, m, schedule),
                self._npu_stream(npu_out, plan, m))

    @staticmethod
    def _run(cmd: list[str], env) -> list[str]:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, f"{cmd[0]} failed ({done.returncode}): {done.stderr[-2000:]}"
        return done.stdout.splitlines()

    # -- normal forms
    @staticmethod
    def _task_line(line: str, tasks: list[N.Task]) -> str:
        stmt = int(re.search(r"stmt=(\d+)", line).group(1))
        t = tasks[stmt]
        return re.sub(r"stmt=\d+", f"call={t.text}@{t.span.line}:{t.span.col}", line)

    def _cpu_stream(self, lines: list[str], enums, m: N.Module, schedule: str) -> Stream:
        tasks, flushes, paths = [], [], []
        scopes = _Scopes()
        end: tuple = ("missing",)
        deadlock_words: list[int] = []
        for line in lines:
            if line.startswith("#"):
                scopes.event(line[1:].split())
            elif line.startswith("task "):
                tasks.append(self._task_line(_aicore_scalars(line, m), enums.tasks))
                paths.append(scopes.path())
            elif line == "flush":
                flushes.append(len(tasks))
            elif line.startswith("deadlock"):
                deadlock_words = [int(x) for x in line.split()[1:]]
            elif line.startswith("end "):
                end = self._cpu_end(line, enums, m, deadlock_words)
        if end[0] == "deadlock" and deadlock_words:
            end = self._cpu_deadlock(enums, deadlock_words)
        return Stream(tasks, end, flushes, paths=paths)

    @staticmethod
    def _cpu_end(line: str, enums, m: N.Module, words) -> tuple:
        if line == "end ok":
            return ("ok",)
        _, _, code, message = line.split(" ", 3)
        if message == "CSP DEADLOCK":
            return ("deadlock",)
        if message.startswith("CSP OPEN"):
            pid, other, ch = (int(x) for x in message.split()[2:5])
            sp, so = enums.pipes[pid][0], enums.pipes[other][0]
            return ("reopen", (sp.line, sp.col), (so.line, so.col), m.channels[ch].name)
        mm = re.fullmatch(r"VIEW (\d+) (.*)\|(-?\d+)\|(-?\d+)", message)
        if mm:
            chk = enums.checks[int(mm.group(1))]
            return ("check", chk.message, (chk.span.line, chk.span.col), mm.group(2),
                    int(mm.group(3)), int(mm.group(4)))
        return ("error", code, message)

    @staticmethod
    def _cpu_deadlock(enums, words: list[int]) -> tuple:
        blocked = []
        while words:
            site, replica, k, free, nv = words[:5]
            words = words[5 + nv:]
            kind, span, ch = enums.sites[site][:3]
            blocked.append((kind, (span.line, span.col), ch, replica, k, free))
        return ("deadlock", tuple(blocked))

    def _npu_stream(self, lines: list[str], plan: Plan, m: N.Module) -> Stream:
        tasks, flushes, waves = [], [], []
        end: tuple = ("missing",)
        for line in lines:
            if line.startswith("task "):
                body, _, extra = line.partition(" | ")
                tasks.append(self._task_line(body, plan.tasks))
                w = dict(kv.split("=") for kv in extra.split())
                waves.append((int(w["wave"]), int(w["core"])))
            elif line == "flush":
                flushes.append(len(tasks))
            elif line.startswith("end "):
                end = self._npu_end(line, plan, m)
        return Stream(tasks, end, flushes, waves=waves)

    @staticmethod
    def _npu_end(line: str, plan: Plan, m: N.Module) -> tuple:
        if line == "end ok":
            return ("ok",)
        parts = line.split()
        if parts[1] != "error":
            return ("error", line)
        kind, ident, a, b = (int(x) for x in parts[2:6])
        rest = [int(x) for x in parts[6:]]
        if kind == 1:  # WSP_ERR_CHECK
            info = plan.checks[ident]
            coords = ", ".join(f"{v.split(chr(39))[0]}={x}" for v, x in zip(info.scope, rest))
            chk = info.check
            return ("check", chk.message, (chk.span.line, chk.span.col), coords, a, b)
        if kind == 2:  # WSP_ERR_DEADLOCK
            blocked = []
            for i in range(0, len(rest), 4):
                site, replica, k, free = rest[i:i + 4]
                s = plan.sites[site]
                blocked.append((s.kind, (s.span.line, s.span.col), s.channel, replica, k, free))
            return ("deadlock", tuple(blocked))
        if kind == 3:  # WSP_ERR_REOPEN
            sp, so = plan.pipes[ident].span, plan.pipes[a].span
            return ("reopen", (sp.line, sp.col), (so.line, so.col), m.channels[b].name)
        return ("error", kind, ident, a, b)


class _Scopes:
    """The order scopes cpu_sim's enumerator opens (`#push` ... lines of cpu_stub.c), per order
    context: a task's path is ((level, step), ...) of every level it is inside, borrowed
    levels of a forked context included (they are the parent's very levels)."""

    def __init__(self):
        self.steps: dict[int, int] = {}
        self.stacks: dict[int, list[int]] = {0: []}
        self.current = 0
        self.levels = 0

    def event(self, words: list[str]) -> None:
        what = words[0]
        stack = self.stacks[self.current]
        if what == "push":
            self.levels += 1
            self.steps[self.levels] = 0
            stack.append(self.levels)
        elif what == "next":
            self.steps[stack[-1]] += 1
        elif what == "pop":
            stack.pop()
        elif what == "fork":
            self.stacks[int(words[1])] = list(stack)
        elif what == "switch":
            self.current = int(words[1])
        elif what == "end":
            self.stacks.pop(int(words[1]), None)
            self.current = 0

    def path(self) -> tuple:
        return tuple((lv, self.steps[lv]) for lv in self.stacks[self.current])


def _aicore_scalars(line: str, m: N.Module) -> str:
    """cpu_sim's task line with each float scalar as the AICore's word (the f32 bits of the
    value rounded to its parameter's dtype: abi.scalar_word) instead of cpu_sim's double."""
    k = m.kernels[int(re.search(r" kernel=(\d+)", line).group(1))]
    dtypes = [p.dtype for p in k.params if p.kind == "scalar"]
    head, _, words = line.rpartition(" scal=")
    if not words:
        return line
    out = []
    for dt, w in zip(dtypes, words.split(",")):
        v = int(w)
        if TABLE[dt].kind == "float":
            v = scalar_word(dt, struct.unpack("<d", struct.pack("<q", v))[0])
        out.append(str(v))
    return f"{head} scal={','.join(out)}"


def boxes(task_line: str) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """(tensor, mode, [(lo, hi) per dimension]) of every access box of a task line."""
    acc = re.search(r" acc=(\S*)", task_line).group(1)
    out = []
    for tensor, mode, dims in re.findall(r"\[(\d+):(\d+):([^\]]*)\]", acc):
        rng = [tuple(int(v) for v in re.fullmatch(r"(-?\d+)-(-?\d+)", d).groups())
               for d in dims.split(",") if d]
        out.append((int(tensor), int(mode), rng))
    return out


def must_precede(a: str, b: str, path_a: tuple, path_b: tuple) -> bool:
    """Whether task a (enumerated first) must finish before task b starts: an inferred data
    dependency (overlapping boxes of one tensor, one of them written) or an order scope both
    are in, b in a later step."""
    steps_a = dict(path_a)
    if any(lv in steps_a and steps_a[lv] < step for lv, step in path_b):
        return True
    for ta, ma, ra in boxes(a):
        for tb, mb, rb in boxes(b):
            if ta == tb and (ma | mb) & 2 and all(x0 < y1 and y0 < x1 for (x0, x1), (y0, y1)
                                                  in zip(ra, rb)):
                return True
    return False


def stream_of(task_line: str) -> int:
    return int(re.search(r" stream=(-?\d+)", task_line).group(1))


def segments(n: int, flushes: list[int]) -> list[range]:
    cuts = [0] + flushes + [n]
    return [range(cuts[i], cuts[i + 1]) for i in range(len(cuts) - 1)]

