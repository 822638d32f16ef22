"""The multi-device examples (docs/distributed.md, "Examples"): examples/tp_mlp.wsp,
tp_attention.wsp, sp_rmsnorm.wsp, ep_moe.wsp, mesh_decoder_layer.wsp and tp_csp_ffn.wsp (a CSP
pipeline), each run on meshes of
1, 2 and 4 devices on cpu_sim and ref, against the SINGLE-DEVICE formula of the layer written
here in float64 NumPy (not from wspc): whatever the mesh, the program computes the same
function of the same global arrays. Sizes are hand-picked edges (partial tiles, one token) and
hypothesis draws (sizes, mesh, data).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import ptowsp

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

pytestmark = pytest.mark.cc

TOL = dict(rtol=2e-5, atol=2e-5)  # float32 against float64 through a few matrix products
TARGETS = ("cpu_sim", "ref")
DEVICES = (1, 2, 4)


# ---- the layers in float64 NumPy, on one device ----

def silu(x):
    return x / (1.0 + np.exp(-x))


def rmsnorm(x, w, eps=1e-5):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def causal_attention(q, k, v, scale):
    """softmax(q k^T * scale, keys after the query masked) v, one head."""
    s = q @ k.T * scale
    s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def heads_attention(q, k, v, heads, scale):
    hd = q.shape[1] // heads
    return np.concatenate([causal_attention(q[:, h * hd:(h + 1) * hd], k[:, h * hd:(h + 1) * hd],
                                            v[:, h * hd:(h + 1) * hd], scale)
                           for h in range(heads)], axis=1)


def rotate(x, c, s):
    """The rotary embedding, rotate_half layout, per head of c.shape[1] columns."""
    hd = c.shape[1]
    out = np.empty_like(x)
    for h in range(x.shape[1] // hd):
        xh = x[:, h * hd:(h + 1) * hd]
        out[:, h * hd:(h + 1) * hd] = xh * c + np.concatenate([-xh[:, hd // 2:], xh[:, :hd // 2]],
                                                              axis=1) * s
    return out


def f64(a):
    return {n: np.asarray(v, np.float64) for n, v in a.items() if v.dtype == np.float32}


def tp_mlp(a):
    x = f64(a)
    return {"Y": (silu(x["X"] @ x["W1"]) * (x["X"] @ x["W3"])) @ x["W2"]}


def tp_attention(a):
    x = f64(a)
    o = heads_attention(x["X"] @ x["Wq"], x["X"] @ x["Wk"], x["X"] @ x["Wv"], 4, 32 ** -0.5)
    return {"Y": o @ x["Wo"]}


def sp_rmsnorm(a):
    x = f64(a)
    x1 = x["X"] + x["A"] @ x["Wo"]
    return {"X1": x1, "Y": rmsnorm(x1, x["w"])}


def ep_moe(a, k=2):
    x = f64(a)
    logits = x["X"] @ x["Wg"]
    experts = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(logits, experts, axis=1)
    gate = np.exp(top - top.max(axis=1, keepdims=True))
    gate /= gate.sum(axis=1, keepdims=True)
    y = np.zeros_like(x["X"])
    for t in range(len(y)):
        for j, e in enumerate(experts[t]):
            xt = x["X"][t]
            y[t] += gate[t, j] * ((silu(xt @ x["W1"][e]) * (xt @ x["W3"][e])) @ x["W2"][e])
    return {"Y": y, "Experts": experts.astype(np.int32), "Gate": gate}


def mesh_decoder_layer(a):
    x = f64(a)
    h = rmsnorm(x["X"], x["w_attn"])
    q = rotate(h @ x["Wq"], x["Cos"], x["Sin"])
    k = rotate(h @ x["Wk"], x["Cos"], x["Sin"])
    x1 = x["X"] + heads_attention(q, k, h @ x["Wv"], 4, 0.125) @ x["Wo"]
    h2 = rmsnorm(x1, x["w_ffn"])
    return {"Y": x1 + (silu(h2 @ x["Wg"]) * (h2 @ x["Wu"])) @ x["Wd"]}


def tp_csp_ffn(a):
    x = f64(a)
    h = rmsnorm(x["X"], x["w"])
    return {"Y": x["X"] + (silu(h @ x["W1"]) * (h @ x["W3"])) @ x["W2"]}


# ---- inputs ----

def weights(rng, *shape):
    """Weights scaled by their fan-in, as a trained layer's are: activations stay near 1."""
    return (rng.standard_normal(shape) / np.sqrt(shape[-2])).astype(np.float32)


def acts(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def rope_tables(s, hd, theta=10000.0):
    inv = theta ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(s)[:, None] * inv[None, :]
    ang = np.concatenate([ang, ang], axis=1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def inputs(name, n, seed):
    """The arrays of example `name` for `n` tokens, from `seed`."""
    rng = np.random.default_rng(seed)
    if name == "tp_mlp":
        return {"X": acts(rng, n, 128), "W1": weights(rng, 128, 512),
                "W3": weights(rng, 128, 512), "W2": weights(rng, 512, 128)}
    if name == "tp_csp_ffn":
        return {"X": acts(rng, n, 128), "w": (1 + 0.1 * rng.standard_normal((1, 128))).astype(np.float32),
                "W1": weights(rng, 128, 512), "W3": weights(rng, 128, 512),
                "W2": weights(rng, 512, 128)}
    if name == "tp_attention":
        return {"X": acts(rng, n, 128), **{w: weights(rng, 128, 128) for w in ("Wq", "Wk", "Wv", "Wo")}}
    if name == "sp_rmsnorm":
        return {"A": acts(rng, n, 256), "Wo": weights(rng, 256, 128), "X": acts(rng, n, 128),
                "w": (1 + 0.1 * rng.standard_normal((1, 128))).astype(np.float32)}
    if name == "ep_moe":
        return {"X": acts(rng, n, 64), "Wg": weights(rng, 64, 8), "W1": weights(rng, 8, 64, 128),
                "W3": weights(rng, 8, 64, 128), "W2": weights(rng, 8, 128, 64)}
    assert name == "mesh_decoder_layer"
    cos, sin = rope_tables(n, 64)
    return {"X": acts(rng, n, 256), "Cos": cos, "Sin": sin,
            "w_attn": (1 + 0.1 * rng.standard_normal((1, 256))).astype(np.float32),
            "w_ffn": (1 + 0.1 * rng.standard_normal((1, 256))).astype(np.float32),
            **{w: weights(rng, 256, 256) for w in ("Wq", "Wk", "Wv", "Wo")},
            "Wg": weights(rng, 256, 512), "Wu": weights(rng, 256, 512), "Wd": weights(rng, 512, 256)}


# example: (its mesh axis, the sym of its token count, the formula)
EXAMPLE = {
    "tp_mlp": ("tp", "T", tp_mlp),
    "tp_attention": ("tp", "S", tp_attention),
    "sp_rmsnorm": ("tp", "T", sp_rmsnorm),
    "ep_moe": ("ep", "T", ep_moe),
    "mesh_decoder_layer": ("tp", "S", mesh_decoder_layer),
    "tp_csp_ffn": ("tp", "T", tp_csp_ffn),
}


def token_counts(name, devices):
    """The multiple of which the token count of `name` on `devices` devices must be: sp_rmsnorm
    and ep_moe split the tokens over the mesh (in even shards); the others split weights only."""
    return devices if name in ("sp_rmsnorm", "ep_moe") else 1


_PROGRAMS: dict = {}


def program(name, target, devices):
    """Example `name` compiled for `target` on a mesh of `devices` devices (memoised: a mesh
    size is compile-time)."""
    key = (name, target, devices)
    if key not in _PROGRAMS:
        axis = EXAMPLE[name][0]
        module = ptowsp.load(str(EXAMPLES / f"{name}.wsp"))
        _PROGRAMS[key] = module.compile(target=target, mesh={axis: devices})
    return _PROGRAMS[key]


def clear_routing(a, k=2):
    """ep_moe's top-k choice does not hinge on a float32 rounding: the k-th logit of every token
    is clear of its neighbours by more than float32's error on the product."""
    logits = np.sort(a["X"].astype(np.float64) @ a["Wg"].astype(np.float64), axis=1)[:, ::-1]
    return bool(np.min(logits[:, :k] - logits[:, 1:k + 1]) > 1e-4)


@pytest.fixture(scope="module", autouse=True)
def _cache(wspc_cache):
    yield
    _PROGRAMS.clear()


def check(name, devices, n, seed=0, targets=TARGETS):
    axis, tokens, formula = EXAMPLE[name]
    a = inputs(name, n, seed)
    want = formula(a)
    for target in targets:
        out = program(name, target, devices).run(bind={tokens: n}, workers=2, check_replicas=True,
                                                 **a)
        for out_name, value in want.items():
            what = f"{out_name} of {name} on {target}, {axis} = {devices}, {tokens} = {n}"
            if value.dtype.kind == "i":
                np.testing.assert_array_equal(out[out_name], value, err_msg=what)
            else:
                np.testing.assert_allclose(out[out_name], value, **TOL, err_msg=what)


@pytest.mark.parametrize("devices", DEVICES)
@pytest.mark.parametrize("name, n", [
    ("tp_mlp", 37),                 # a partial last tile
    ("tp_mlp", 1),
    ("tp_attention", 45),           # a partial query tile and key block
    ("tp_attention", 1),
    ("sp_rmsnorm", 92),             # 46 or 23 rows a device: each shard's last tile partial
    ("ep_moe", 60),                 # 30 or 15 tokens a device: each shard's last chunk partial
    ("mesh_decoder_layer", 70),     # two key blocks, the second partial; a partial query tile
    ("tp_csp_ffn", 37),             # a partial last item of the channel
    ("tp_csp_ffn", 1),
])
def test_the_example_matches_one_device_numpy(name, n, devices):
    assert name != "ep_moe" or clear_routing(inputs(name, n, 0))
    check(name, devices, n)


@pytest.mark.parametrize("name, n", [("sp_rmsnorm", 37), ("ep_moe", 29)])
def test_on_one_device_any_token_count_runs(name, n):
    check(name, 1, n)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_sizes_meshes_and_data_match_numpy(data):
    name = data.draw(st.sampled_from(sorted(EXAMPLE)))
    devices = data.draw(st.sampled_from(DEVICES))
    n = token_counts(name, devices) * data.draw(st.integers(1, 80 // token_counts(name, devices)))
    seed = data.draw(st.integers(0, 2**16))
    assume(name != "ep_moe" or clear_routing(inputs(name, n, seed)))
    check(name, devices, n, seed, targets=(data.draw(st.sampled_from(TARGETS)),))


def test_a_token_count_the_mesh_does_not_divide_is_an_error_not_a_wrong_answer():
    with pytest.raises(ptowsp.WspError) as info:
        program("sp_rmsnorm", "ref", 2).run(bind={"T": 41}, **inputs("sp_rmsnorm", 41, 0))
    assert "`X` shards its `T` rows over tp = 2: `T` must be a multiple of 2 (with T = 41)" \
        in str(info.value)


def test_more_devices_than_heads_is_refused_at_the_sharded_tensor():
    with pytest.raises(ptowsp.WspError) as info:
        program("tp_attention", "ref", 8)
    assert "`M` shards its 4 entries along dimension 0 over tp = 8: 4 is not a multiple of 8" \
        in str(info.value)
