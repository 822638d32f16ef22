"""`wspc lsp`'s diagnostics latency after an edit (docs/tools.md, "wspc lsp"): the time from
sending a `didChange` of one character to receiving the `publishDiagnostics` it causes, on the
2,000-line module of benchmarks/tools.py, median of many edits, and the server's CPU time per
edit. The edits alternate between breaking a name (one diagnostic) and restoring it (none), so
every one is a full check.

    python benchmarks/lsp.py [--lines 2000] [--edits 41] [--file MODULE.wsp]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class Server:
    """`python -m ptowsp lsp` and the JSON-RPC framing of its pipes."""

    def __init__(self, cwd: str):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-m", "ptowsp", "lsp"], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.ids = 0

    def send(self, method: str, params, request: bool = False) -> None:
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.ids += 1
            message["id"] = self.ids
        body = json.dumps(message).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def receive(self) -> dict:
        length = 0
        while True:
            line = self.proc.stdout.readline().strip()
            if not line:
                break
            key, value = line.decode().split(":", 1)
            if key.lower() == "content-length":
                length = int(value)
        return json.loads(self.proc.stdout.read(length))

    def until(self, method: str) -> dict:
        while True:
            m = self.receive()
            if m.get("method") == method or ("id" in m and method == "response"):
                return m


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) a process has used so far (Linux's /proc; 0 elsewhere):
    the server's work per edit, which other processes' load does not stretch as it does the
    wall time."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--edits", type=int, default=41)
    ap.add_argument("--file", help="measure on this module instead of benchmarks/tools.py's")
    args = ap.parse_args()
    if args.file:
        text = Path(args.file).read_text()
    else:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from tools import module_text

        text = module_text(args.lines)
    # the edit: the first `store(` of the module becomes `stor(` and back
    at = text.index("store(")
    line = text.count("\n", 0, at)
    col = at - (text.rfind("\n", 0, at) + 1)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "generated.wsp"
        path.write_text(text)
        uri = path.as_uri()
        s = Server(d)
        s.send("initialize", {"processId": None, "capabilities": {}}, request=True)
        s.until("response")
        s.send("initialized", {})
        t0 = time.perf_counter()
        s.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "wsp",
                                                         "version": 1, "text": text}})
        first = s.until("textDocument/publishDiagnostics")
        t_open = time.perf_counter() - t0
        assert first["params"]["diagnostics"] == [], first
        times, cpu, counts = [], [], set()
        for k in range(args.edits):
            broken = k % 2 == 0
            change = {"range": {"start": {"line": line, "character": col + 4},
                                "end": {"line": line, "character": col + (5 if broken else 4)}},
                      "text": "" if broken else "e"}
            c0 = cpu_seconds(s.proc.pid)
            t0 = time.perf_counter()
            s.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": k + 2},
                                              "contentChanges": [change]})
            m = s.until("textDocument/publishDiagnostics")
            times.append(time.perf_counter() - t0)
            cpu.append(cpu_seconds(s.proc.pid) - c0)
            counts.add((broken, len(m["params"]["diagnostics"])))
        s.send("shutdown", None, request=True)
        s.until("response")
        s.send("exit", None)
        s.proc.wait()
    assert counts == {(True, 1), (False, 0)}, counts
    print(f"a {text.count(chr(10))}-line module: didOpen to diagnostics {t_open * 1000:.0f} ms; "
          f"an edit to its diagnostics, median of {args.edits}: "
          f"{statistics.median(times) * 1000:.0f} ms (min {min(times) * 1000:.0f}, "
          f"max {max(times) * 1000:.0f}); the server's CPU time per edit, median "
          f"{statistics.median(cpu) * 1000:.0f} ms; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
