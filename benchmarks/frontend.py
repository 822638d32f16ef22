"""Front-end speed: wall time of `wspc check` on a generated 2,000-line module, interpreter
start included (the target is at most 0.5 s), against `python -c pass` and `import lark` measured
in the same run.

    python benchmarks/frontend.py [--lines 2000] [--runs 11]
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

UNIT = """\
// unit {i}
input  X{i}: f32[B, T, 16, 128]
output Y{i}: f32[B, T, 16, 128]
scratch H{i}: f32[B, T, 16, 1]

kernel norm{i}(x: In[Tile[16, 128, f32]], w: In[Tile[1, 128, f32]],
               y: Out[Tile[16, 128, f32]], eps: Scalar[f32] = 1e-6) {{
    let ms = rowmean(x * x)
    let inv = rsqrt(ms + eps)
    let scaled = x * inv * w
    store(y, where(scaled > 0.0, scaled, scaled * 0.5))
}}

kernel stat{i}(x: In[Tile[16, 128, f32]], h: Out[Tile[16, 1, f32]]) {{
    store(h, rowmax(exp(x - rowmax(x))))
}}

workload work{i}(batch: DenseDyn, tiles: DenseDyn) {{
    for b, t in P(batch, tiles) {{
        norm{i}[b, t](x = X{i}[b, t], w = W, y = Y{i}[b, t])
        stat{i}[b, t](x = X{i}[b, t], h = H{i}[b, t])
    }}
    for b in P.seq(batch) {{
        when b % 2 == 0 {{
            stat{i}[b](x = X{i}[b, 0], h = H{i}[b, 0])
        }} otherwise {{
            norm{i}[b](x = X{i}[b, 0], w = W, y = Y{i}[b, 0], eps = 1e-5)
        }}
    }}
}}

schedule s{i} = work{i}(batch, tiles)
    .dispatch(affinity(b, n = 4))
    .task_graph(window = 4096, mode = stall)

"""

HEADER = """\
module generated
sym B, T
input W: f32[1, 128]
axis batch = DenseDyn(B)
axis tiles = DenseDyn(T)

"""


def generate(lines: int) -> str:
    parts, i = [HEADER], 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(UNIT.format(i=i))
        i += 1
    return "".join(parts)


def median_time(cmd: list[str], runs: int, env: dict) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            sys.exit(f"command failed: {' '.join(cmd)}\n{(r.stdout + r.stderr)[:2000]}")
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=11)
    args = ap.parse_args()
    # Installed packages run from cached bytecode (pip compiles it at install time); a shell that
    # sets PYTHONDONTWRITEBYTECODE would make every run recompile wspc's sources instead.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "generated.wsp"
        text = generate(args.lines)
        path.write_text(text)
        n = text.count("\n")
        wspc = [sys.executable, "-m", "ptowsp", "check", "-q", str(path)]
        subprocess.run(wspc, capture_output=True, env=env, cwd=ROOT)  # warm the grammar cache
        t_pass = median_time([sys.executable, "-c", "pass"], args.runs, env)
        t_lark = median_time([sys.executable, "-c", "import lark"], args.runs, env)
        t_check = median_time(wspc, args.runs, env)
    print(f"wspc check on a generated {n}-line module ({args.runs} runs, medians, interpreter start included)")
    print(f"  python -c pass          {t_pass * 1000:8.1f} ms")
    print(f"  python -c 'import lark' {t_lark * 1000:8.1f} ms")
    print(f"  wspc check              {t_check * 1000:8.1f} ms   target <= 500 ms: "
          f"{'met' if t_check <= 0.5 else 'NOT met'}")
    print(f"  per 1000 lines, beyond interpreter start: {(t_check - t_pass) / n * 1e6:8.1f} ms")


if __name__ == "__main__":
    main()
