"""How much `wspc tune` improves the modelled time of each example over its hand-written
schedule: `ptowsp.tune` with the examples' run sizes (examples/Makefile's BIND_ and MESH_
lines), a budget of candidates (default 48, seed 0: deterministic), the tile sizes the winner
changes, the tile sizes searched (consts and literal `Constexpr` arguments, named as `wspc tune`
names them), and the real time the search took. Prints a Markdown table
(docs/tools.md, "wspc tune").

    python benchmarks/tune.py [--budget 48] [EXAMPLE ...]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import ptowsp  # noqa: E402


def makefile_sizes() -> tuple[list[str], dict, dict]:
    """The examples, their `--bind`s and their `--mesh`es, as examples/Makefile runs them."""
    text = (ROOT / "examples" / "Makefile").read_text()
    names = re.search(r"EXAMPLES := (.*?)\n\n", text, re.S).group(1).replace("\\\n", " ").split()
    binds: dict = {}
    meshes: dict = {}
    for kind, table in (("BIND", binds), ("MESH", meshes)):
        for name, opts in re.findall(rf"^{kind}_(\w+) := (.*)$", text, re.M):
            table[name] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", opts)}
    return names, binds, meshes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=48)
    ap.add_argument("examples", nargs="*")
    args = ap.parse_args()
    names, binds, meshes = makefile_sizes()
    print("| example | given schedule | cycles | tuned | tile sizes | cycles | speedup | "
          "sizes searched | search (s) |")
    print("|---|---|---:|---|---|---:|---:|---|---:|")
    for name in args.examples or names:
        m = ptowsp.load(str(ROOT / "examples" / f"{name}.wsp"))
        t0 = time.perf_counter()
        try:
            r = ptowsp.tune(m, budget=args.budget, bindings=binds.get(name, {}),
                            mesh=meshes.get(name))
        except ptowsp.WspError as err:
            print(f"| {name} | failed: {str(err).splitlines()[0]} | | | | | | | |")
            continue
        took = time.perf_counter() - t0
        given, best = r.given, r.best
        sizes = ", ".join(f"{n} {was} → {v}" for n, v, was in best.consts)
        searched = ", ".join(c.name for c in r.tile_consts) or "–"
        print(f"| {name} | `{given.chain or '(none)'}` | {given.cycles} | "
              f"`{best.chain or '(none)'}` | {sizes or '–'} | {best.cycles} | {r.speedup:.2f}x | "
              f"{searched} | {took:.0f} |", flush=True)


if __name__ == "__main__":
    main()
