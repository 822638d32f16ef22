"""Dynamic workloads on cpu_sim, in one run on one machine: medians of interleaved repetitions.

(a) MoE with Zipf-skewed routing (examples/moe_extern.wsp): the router's selection bias gives expert
    e a popularity ~ 1 / (e + 1)^s, so a few experts get most tokens. Prints the per-expert
    load, the task count, and the cycle model's `total_cycles` (with the real run time) under
    three dispatch policies over 4 dispatchers: round_robin(4), affinity(e, n = 4) and
    work_steal(4). `affinity(e)` needs every call of the workload to bind `e`, so the
    benchmark compiles a copy of the workload whose chunk loops (gate, route, mix) name their
    variable `e` as well: those tasks are spread by chunk number, expert tasks go by expert.
(b) Variable-length attention with long-tail lengths (examples/attention_varlen.wsp): real time
    of cpu_sim against NumPy on the same masked attention, written two ways: padded (the
    inputs' [S, S] score matrix per (b, h), keys >= len masked, as a framework without ragged
    support computes it) and per sequence (exact lengths, a Python loop over the batch: the
    best NumPy can do). Prints medians and ratios (target: cpu_sim >= 2x NumPy), and
    `total_cycles` under round_robin(4), affinity(b, n = 4) and work_steal(4).
(c) MoE with top-k routing (examples/moe.wsp, `topk` in the route kernel): real time of cpu_sim
    against a NumPy MoE layer (gate matmul, argsort top-k, softmax over the k, then per expert
    its tokens gathered, the SwiGLU FFN batched over them, and a weighted scatter-add: the way
    a NumPy or PyTorch reference loops over experts).

    python benchmarks/dynamic.py [--tokens 4096] [--zipf 1.2] [--batch 16] [--seq 1024]
                                 [--runs 7] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kernels as kernel_bench  # noqa: E402  (benchmarks/kernels.py: the shared timing loop)

import ptowsp

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
E, K, DM, F = 8, 2, 64, 128


def medians_ms(fns, runs: int, pause: float = 0.2) -> list[float]:
    """benchmarks/kernels.py's interleaved medians, pausing between calls by default so the
    OpenBLAS threads of the NumPy baselines go to sleep before the next contender runs."""
    return kernel_bench.medians_ms(fns, runs, pause)


def dispatcher_loads(stats) -> str:
    ds = stats.extra.get("dispatchers", [])
    return " ".join(f"{d['tasks']:5d}" for d in ds)


# ---------------------------------------------------------------------------------------------
# (a) MoE


def moe_program_text() -> str:
    """moe_extern.wsp plus a copy of its workload for `affinity(e)` and the three schedules."""
    text = (EXAMPLES / "moe_extern.wsp").read_text()
    m = re.search(r"workload moe_layer\(\) \{.*?\n\}\n", text, re.S)
    body = m.group(0).replace("workload moe_layer()", "workload moe_layer_e()")
    body = re.sub(r"\bc\b", "e", body)  # chunk loops: `for e in P(chunks)`, `gate[e]`, ...
    return (text + "\n" + body +
            "schedule bench_rr = moe_layer().dispatch(round_robin(4))\n"
            "schedule bench_affinity = moe_layer_e().dispatch(affinity(e, n = 4))\n"
            "schedule bench_steal = moe_layer().dispatch(work_steal(4))\n")


def moe_inputs(tokens: int, zipf: float, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return dict(
        X=rng.standard_normal((tokens, DM), dtype=np.float32),
        Wg=(rng.standard_normal((DM, E)) * 0.1).astype(np.float32),
        Bias=(-zipf * np.log(np.arange(1, E + 1)) * 2)[None].astype(np.float32),
        W1=(rng.standard_normal((E, DM, F)) / 8).astype(np.float32),
        W3=(rng.standard_normal((E, DM, F)) / 8).astype(np.float32),
        W2=(rng.standard_normal((E, F, DM)) / 11).astype(np.float32))


def bench_moe(args) -> None:
    module = ptowsp.parse(moe_program_text(), str(EXAMPLES / "moe_bench.wsp"))
    inputs = moe_inputs(args.tokens, args.zipf)
    policies = [("round_robin(4)", "bench_rr"), ("affinity(e, n=4)", "bench_affinity"),
                ("work_steal(4)", "bench_steal")]
    progs = [module.compile(target="cpu_sim", schedule=s) for _, s in policies]
    out = progs[0].run(workers=args.workers, **inputs)
    indptr, indices = out["Indptr"], out["Indices"]
    load = np.bincount(indices[: indptr[-1]], minlength=E)
    print(f"(a) MoE, {args.tokens} tokens, top-{K} of {E} experts, Zipf bias s = {args.zipf}, "
          f"{args.workers} workers")
    print("    expert  " + " ".join(f"{e:6d}" for e in range(E)))
    print("    tokens  " + " ".join(f"{n:6d}" for n in load))
    print("    share   " + " ".join(f"{n / load.sum() * 100:5.1f}%" for n in load))
    results = []
    for prog in progs:
        y = prog.run(workers=args.workers, **inputs)["Y"]
        assert np.array_equal(y, out["Y"]), "schedules must not change results"
        results.append((prog.stats.task_count, prog.stats.total_cycles,
                        prog.stats.extra.get("critical_path_cycles", 0),
                        prog.stats.extra.get("stolen", 0), dispatcher_loads(prog.stats)))
    times = medians_ms([lambda p=p: p.run(workers=args.workers, **inputs) for p in progs],
                       args.runs)
    print(f"    {'policy':<18} {'tasks':>6} {'total_cycles':>13} {'critical':>9} {'stolen':>7}"
          f"   tasks per dispatcher      real ms")
    for (name, _), (tasks, cycles, crit, stolen, loads), ms in zip(policies, results, times):
        print(f"    {name:<18} {tasks:6d} {cycles:13,d} {crit:9,d} {stolen:7d}   {loads}"
              f"   {ms:8.2f}")


# ---------------------------------------------------------------------------------------------
# (b) variable-length attention


def long_tail_lengths(batch: int, seq: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.minimum(seq, (rng.pareto(1.2, batch) * 64 + 16).astype(np.int64)).astype(np.int32)


def numpy_padded(q, k, v, lens):
    """Padded masked attention: the full [S, S] scores per (b, h), keys >= len masked."""
    s_len = q.shape[2]
    out = np.empty_like(q)
    cols = np.arange(s_len)
    for b, n in enumerate(lens):
        s = q[b] @ k[b].transpose(0, 2, 1)
        s *= np.float32(0.125)
        s[:, :, cols >= n] = -np.inf if n > 0 else 0.0
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        o = s @ v[b]
        o[:, n:] = 0
        out[b] = o
    return out


def numpy_per_sequence(q, k, v, lens):
    """The same result computed on exact lengths, sequence by sequence."""
    out = np.zeros_like(q)
    for b, n in enumerate(lens):
        if n == 0:
            continue
        s = q[b, :, :n] @ k[b, :, :n].transpose(0, 2, 1)
        s *= np.float32(0.125)
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        out[b, :, :n] = s @ v[b, :, :n]
    return out


def bench_attention(args) -> None:
    b, h, s = args.batch, 8, args.seq
    lens = long_tail_lengths(b, s)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((b, h, s, 64), dtype=np.float32) for _ in range(3))
    module = ptowsp.load(str(EXAMPLES / "attention_varlen.wsp"))
    policies = [("round_robin(4)", "main"), ("affinity(b, n=4)", "by_batch"),
                ("work_steal(4)", "steal")]
    progs = [module.compile(target="cpu_sim", schedule=sch) for _, sch in policies]
    inputs = dict(Q=q, K=k, V=v, seq_lens=lens)
    o = progs[0].run(workers=args.workers, **inputs)["O"]
    err = max(float(np.abs(o - numpy_padded(q, k, v, lens)).max()),
              float(np.abs(o - numpy_per_sequence(q, k, v, lens)).max()))
    print(f"\n(b) variable-length attention, batch {b} x heads {h}, padded to {s}, head dim 64, "
          f"{args.workers} workers")
    print(f"    lengths {lens.tolist()} (sum {int(lens.sum())}, {lens.sum() / (b * s) * 100:.0f}% "
          f"of the padded size); max |cpu_sim - numpy| {err:.1e}")
    t_pad, t_seq, t_wsp = medians_ms([lambda: numpy_padded(q, k, v, lens),
                                      lambda: numpy_per_sequence(q, k, v, lens),
                                      lambda: progs[0].run(workers=args.workers, **inputs)],
                                     args.runs)
    print(f"    numpy padded+masked {t_pad:8.1f} ms   numpy per sequence {t_seq:8.1f} ms   "
          f"cpu_sim {t_wsp:8.1f} ms ({progs[0].stats.task_count} tasks)")
    print(f"    cpu_sim is {t_pad / t_wsp:.2f}x numpy padded+masked, {t_seq / t_wsp:.2f}x numpy "
          "per sequence (target >= 2x)")
    print(f"    {'policy':<18} {'tasks':>6} {'total_cycles':>13} {'critical':>9} {'stolen':>7}"
          "   tasks per dispatcher")
    for (name, _), prog in zip(policies, progs):
        prog.run(workers=args.workers, **inputs)
        st = prog.stats
        print(f"    {name:<18} {st.task_count:6d} {st.total_cycles:13,d} "
              f"{st.extra.get('critical_path_cycles', 0):9,d} {st.extra.get('stolen', 0):7d}   "
              f"{dispatcher_loads(st)}")


# ---------------------------------------------------------------------------------------------
# (c) MoE with top-k routing against NumPy


def numpy_topk_moe(x, wg, w1, w3, w2, k=K):
    """The top-k MoE layer in NumPy (f32): the route, then expert by expert over its tokens."""
    logits = x @ wg
    experts = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(logits, experts, axis=1)
    g = np.exp(top - top[:, :1])
    g /= g.sum(axis=1, keepdims=True)
    y = np.zeros_like(x)
    for e in range(wg.shape[1]):
        tok, slot = np.nonzero(experts == e)
        if len(tok) == 0:
            continue
        xe = x[tok]
        a = xe @ w1[e]
        h = (a / (1 + np.exp(-a))) * (xe @ w3[e])
        y[tok] += (h @ w2[e]) * g[tok, slot][:, None]  # a token meets an expert at most once
    return y


def bench_moe_topk(args) -> None:
    prog = ptowsp.load(str(EXAMPLES / "moe.wsp")).compile(target="cpu_sim")
    inputs = moe_inputs(args.tokens, 0.0)
    del inputs["Bias"]
    y = prog.run(workers=args.workers, **inputs)["Y"]
    want = numpy_topk_moe(**{n.lower(): a for n, a in inputs.items()})
    err = float(np.abs(y - want).max())
    t_np, t_wsp = medians_ms([lambda: numpy_topk_moe(**{n.lower(): a for n, a in inputs.items()}),
                              lambda: prog.run(workers=args.workers, **inputs)], args.runs)
    print(f"\n(c) MoE with topk routing (moe.wsp), {args.tokens} tokens, top-{K} of {E} experts, "
          f"{args.workers} workers; max |cpu_sim - numpy| {err:.1e}")
    print(f"    numpy {t_np:8.1f} ms   cpu_sim {t_wsp:8.1f} ms ({prog.stats.task_count} tasks): "
          f"cpu_sim is {t_np / t_wsp:.2f}x numpy")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--zipf", type=float, default=1.2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("WSPC_CACHE_DIR", str(Path(d) / "cache"))
        bench_moe(args)
        bench_attention(args)
        bench_moe_topk(args)


if __name__ == "__main__":
    sys.exit(main())
