"""Drive examples/llama_layer.wsp from Python: build a batch that mixes prefill and decode over
a ragged KV cache, run the layer, and check it against the same layer written in NumPy.

    python examples/llama_layer.py                 # a mixed batch on cpu_sim, with the check
    python examples/llama_layer.py --kind decode   # 64 decode sequences

`batch()` and `numpy_layer()` are what the tests (tests/test_llama_layer.py) and the benchmark
(benchmarks/layer.py) use: one definition of the layer outside wspc.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "llama_layer.wsp"
D, H, HD, F = 256, 4, 64, 512
EPS = 1e-5
ROPE_BASE = 10000.0


def rope_tables(maxpos: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of each position, in the rotate_half layout (the two halves repeat)."""
    inv = ROPE_BASE ** (-np.arange(0, HD, 2, dtype=np.float64) / HD)
    ang = np.arange(maxpos, dtype=np.float64)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def batch(new: list[int], ctx: list[int], maxctx: int | None = None, seed: int = 0) -> dict:
    """The arrays of a batch where sequence b brings new[b] tokens onto ctx[b] cached ones (the
    cache rows past ctx[b] hold garbage, which the layer must neither read nor keep)."""
    rng = np.random.default_rng(seed)
    b = len(new)
    maxctx = maxctx or max(c + n for c, n in zip(ctx, new))
    t = int(sum(new))
    starts = np.concatenate([[0], np.cumsum(new)]).astype(np.int32)
    pos = np.concatenate([np.arange(c, c + n) for c, n in zip(ctx, new)]).astype(np.int32)
    cos, sin = rope_tables(max([maxctx] + [c + n for c, n in zip(ctx, new)]))

    def w(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale / np.sqrt(shape[0])).astype(np.float32)

    kc = rng.standard_normal((b, H, maxctx, HD)).astype(np.float32)
    vc = rng.standard_normal((b, H, maxctx, HD)).astype(np.float32)
    return {
        "X": rng.standard_normal((t, D)).astype(np.float32),
        "starts": starts, "ctx": np.asarray(ctx, np.int32), "pos": pos, "Cos": cos, "Sin": sin,
        "w_attn": (1.0 + 0.1 * rng.standard_normal((1, D))).astype(np.float32),
        "Wq": w(D, D), "Wk": w(D, D), "Wv": w(D, D), "Wo": w(D, D),
        "w_ffn": (1.0 + 0.1 * rng.standard_normal((1, D))).astype(np.float32),
        "Wg": w(D, F), "Wu": w(D, F), "Wd": w(F, D),
        "Kc": kc, "Vc": vc,
    }


def binds(arrays: dict) -> dict:
    return {"B": len(arrays["ctx"]), "T": len(arrays["X"]), "MAXCTX": arrays["Kc"].shape[2],
            "MAXPOS": len(arrays["Cos"])}


def _rmsnorm(x, w):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def _rope(x, cos, sin):  # x [n, H, HD], cos/sin [n, HD]
    half = HD // 2
    rot = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def numpy_layer(a: dict, dtype=np.float64, inplace: bool = False) -> dict:
    """The layer in NumPy: Y, and the caches with the new rows appended. float64 for the check
    (the caches copied); float32 with `inplace` for the benchmark (one BLAS call per matrix
    product, a loop over sequences for attention, the caches updated where they are: as a
    NumPy user writes it)."""
    f = {k: (v.astype(dtype, copy=False) if v.dtype.kind == "f" else v) for k, v in a.items()}
    x, starts, ctx, pos = f["X"], f["starts"], f["ctx"], f["pos"]
    kc, vc = (f["Kc"], f["Vc"]) if inplace else (f["Kc"].copy(), f["Vc"].copy())
    h = _rmsnorm(x, f["w_attn"])
    q = _rope((h @ f["Wq"]).reshape(-1, H, HD), f["Cos"][pos], f["Sin"][pos])
    k = _rope((h @ f["Wk"]).reshape(-1, H, HD), f["Cos"][pos], f["Sin"][pos])
    v = (h @ f["Wv"]).reshape(-1, H, HD)
    o = np.empty_like(q)
    scale = dtype(1.0 / np.sqrt(HD))
    for b in range(len(ctx)):
        s0, s1, c = int(starts[b]), int(starts[b + 1]), int(ctx[b])
        n = s1 - s0
        if n == 0:
            continue
        kc[b, :, c:c + n] = k[s0:s1].transpose(1, 0, 2)
        vc[b, :, c:c + n] = v[s0:s1].transpose(1, 0, 2)
        keys, vals = kc[b, :, :c + n], vc[b, :, :c + n]           # [H, c + n, HD]
        sc = q[s0:s1].transpose(1, 0, 2) @ keys.transpose(0, 2, 1) * scale  # [H, n, c + n]
        visible = np.arange(c + n)[None, :] <= (c + np.arange(n))[:, None]
        sc = np.where(visible[None], sc, -np.inf)
        p = np.exp(sc - sc.max(axis=-1, keepdims=True))
        o[s0:s1] = ((p @ vals) / p.sum(axis=-1, keepdims=True)).transpose(1, 0, 2)
    x1 = x + o.reshape(-1, D) @ f["Wo"]
    h2 = _rmsnorm(x1, f["w_ffn"])
    g = h2 @ f["Wg"]
    y = x1 + (g / (1.0 + np.exp(-g)) * (h2 @ f["Wu"])) @ f["Wd"]
    return {"Y": y, "Kc": kc, "Vc": vc}


def kinds(seed: int = 0) -> dict:
    """The benchmark's batches: prefill (8 sequences of 64-256 new tokens onto contexts of up to
    512) and decode (64 sequences of one new token onto contexts of up to 1,000)."""
    rng = np.random.default_rng(seed)
    return {
        "prefill": dict(new=[int(n) for n in rng.integers(64, 257, 8)],
                        ctx=[int(c) for c in rng.integers(0, 513, 8)]),
        "decode": dict(new=[1] * 64, ctx=[int(c) for c in rng.integers(1, 1001, 64)]),
        "mixed": dict(new=[37, 1, 1, 120, 1, 16], ctx=[0, 300, 5, 64, 999, 17]),
    }


def main() -> None:
    import ptowsp

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=sorted(kinds()), default="mixed")
    ap.add_argument("--target", default="cpu_sim")
    args = ap.parse_args()
    a = batch(**kinds()[args.kind])
    program = ptowsp.load(str(SOURCE)).compile(target=args.target)
    out = program.run(bind=binds(a), **a)
    want = numpy_layer(a)
    for name in ("Y", "Kc", "Vc"):
        err = np.abs(out[name] - want[name]).max()
        print(f"{name}: max |wspc - numpy float64| = {err:.2e}")


if __name__ == "__main__":
    main()
