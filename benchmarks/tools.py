"""The editor tools' speed on a 2,000-line module (docs/tools.md): wall time of `wspc fmt
--check` and `wspc check` (interpreter start included), and of `ptowsp.format_source` in
process, medians of several runs.

The module is the single-device examples concatenated, each copy's declared names renamed
(`rmsnorm_tile` -> `rmsnorm_tile_3`: the third copy), until it has 2,000 lines: real kernels, workloads,
schedules and comments, not one generated pattern. `module_text()` is for other benchmarks
(the language server's latency is measured on the same module).

    python benchmarks/tools.py [--lines 2000] [--runs 11] [--write FILE.wsp]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# single-device examples that check on their own (no imports, no mesh, no errors)
SOURCES = ("rmsnorm", "softmax", "gemm", "swiglu_ffn", "megakernel", "moe", "attention_varlen",
           "attention_tiered", "worker_pool", "llama_layer", "moe_extern")


def _renamed(text: str, names: set[str], suffix: str) -> str:
    """`text` with every NAME token in `names` renamed, and its `module` line dropped."""
    from ptowsp.frontend.parser import _parser

    lexer = _parser().lexer
    out, pos = [], 0
    while pos < len(text):
        m = lexer.master.match(text, pos)
        value = m.group()
        out.append(value + suffix if m.lastgroup == "NAME" and value in names else value)
        pos = m.end()
    return "".join(out)


def module_text(lines: int = 2000) -> str:
    """A module of at least `lines` lines made of renamed copies of the examples, formatted."""
    import ptowsp
    from ptowsp.frontend import ast as A
    from ptowsp.frontend.parser import parse

    parts = ["// the examples, renamed and concatenated (benchmarks/tools.py)\nmodule generated\n"]
    count, copy = 2, 0
    while count < lines:
        for stem in SOURCES:
            copy += 1
            text = (ROOT / "examples" / f"{stem}.wsp").read_text()
            f = parse(text, stem)
            names = set()
            for d in f.decls:
                if isinstance(d, A.MeshDecl) or isinstance(d, A.Import):
                    raise SystemExit(f"{stem}: not a single-device module on its own")
                if hasattr(d, "name") and not isinstance(d, A.ModuleDecl):
                    names.add(d.name.id)
            body = "\n".join(line for line in _renamed(text, names, f"_{copy}").split("\n")
                             if not line.startswith("module "))
            parts.append(body)
            count += body.count("\n")
            if count >= lines:
                break
    return ptowsp.format_source("\n".join(parts), "generated.wsp")


def median(cmd: list[str], runs: int, env: dict, ok=(0,)) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        times.append(time.perf_counter() - t0)
        if r.returncode not in ok:
            sys.exit(f"command failed: {' '.join(cmd)}\n{(r.stdout + r.stderr)[:2000]}")
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--write", help="also keep the module in this file")
    args = ap.parse_args()
    import ptowsp

    text = module_text(args.lines)
    if args.write:
        Path(args.write).write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "generated.wsp"
        path.write_text(text)
        n = text.count("\n")
        check = [sys.executable, "-m", "ptowsp", "check", "-q", str(path)]
        fmt = [sys.executable, "-m", "ptowsp", "fmt", "--check", str(path)]
        subprocess.run(check, capture_output=True, env=env, cwd=ROOT)  # warm the grammar cache
        t_pass = median([sys.executable, "-c", "pass"], args.runs, env)
        t_check = median(check, args.runs, env)
        t_fmt = median(fmt, args.runs, env)
    inproc = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        ptowsp.format_source(text, "generated.wsp")
        inproc.append(time.perf_counter() - t0)
    print(f"a {n}-line module of renamed examples ({args.runs} runs, medians)")
    print(f"  python -c pass                          {t_pass * 1000:8.1f} ms")
    print(f"  wspc check -q                           {t_check * 1000:8.1f} ms")
    print(f"  wspc fmt --check                        {t_fmt * 1000:8.1f} ms")
    print(f"  ptowsp.format_source (in process)       {statistics.median(inproc) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
