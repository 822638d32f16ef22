"""The CSP examples (examples/megakernel.wsp, examples/worker_pool.wsp) on ref and cpu_sim,
against independent float64 NumPy formulas written here, and cpu_sim against ref.

Channel depths and replica counts are properties of the source (`channel c: ..., depth = D`,
`process workers * R`), not of a schedule, so the tests compile textual variants of the
examples: `depth = 2` -> `depth = D` (megakernel: D = 0..4, 0 being a rendezvous) and
`workers * 4` -> `workers * R` (worker pool: R = 1..4). Each run's information must report,
per channel, `items` = the number of items sent and `max_in_flight` <= max(D, 1) (`channels`
in `Program.stats.extra`, docs/csp.md "Run information"). Outputs are bit-identical across
schedules, worker threads (1 and 2), replica counts and repeated runs (language.md section 9).

cpu_sim gets the same assertions as ref: until its enumerator runs CSP, compiling a CSP
schedule for it is an `unsupported` diagnostic and its cases fail; they are written to pass
unchanged once it reports the same run information as ref.

Error measure: every element within its own bound (tests/accuracy.py), |out - expected| <=
rtol |expected| + atol: rtol a few f32 roundings (softmax: the rounding of each score's distance
to its row's maximum, which exp turns into a relative error), atol only where a sum cancels
(the megakernel's x + silu(h)), sized from its terms. cpu_sim against ref: twice the bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from tests.accuracy import UNIT, assert_close

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("wspc_cache")]

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TARGETS = ["ref", "cpu_sim"]
U = UNIT["f32"]
# an f32 result's own bound against float64, in units of U (measured errors are at most about
# a third of it); cpu_sim and ref agree to rounding only (the C kernels sum rows in another
# order, their exp / rsqrt may differ from NumPy's by an ulp): twice the bound between them
ROUNDINGS = 16
EPS = 1e-6          # compute_tile's default `eps`
SCALE = 0.125       # work's default `scale`
HSET = settings(max_examples=6, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def substitute(text: str, old: str, new: str, count: int) -> str:
    assert text.count(old) == count, f"the example no longer contains {count} x {old!r}"
    return text.replace(old, new)


def source(name: str, depth: int = 2, replicas: int = 4) -> str:
    """The text of examples/NAME.wsp with its channel depths (all 2 in the file) set to `depth`,
    and the worker pool's replica count (4 in the file) set to `replicas`."""
    text = (EXAMPLES / f"{name}.wsp").read_text()
    text = substitute(text, "depth = 2", f"depth = {depth}", 2)
    if name == "worker_pool":
        text = substitute(text, "process workers * 4", f"process workers * {replicas}", 1)
    return text


_MODULES: dict = {}
_PROGRAMS: dict = {}


def program(name: str, target: str, schedule=None, depth: int = 2, replicas: int = 4):
    """examples/NAME.wsp (a variant, see `source`) compiled for `target`, once per session."""
    key = (name, depth, replicas)
    if key not in _MODULES:
        # named beside the original, so diagnostics point at the example
        _MODULES[key] = ptowsp.parse(source(name, depth, replicas), str(EXAMPLES / f"{name}.wsp"))
    pkey = (key, target, schedule)
    if pkey not in _PROGRAMS:
        _PROGRAMS[pkey] = _MODULES[key].compile(target=target, schedule=schedule)
    return _PROGRAMS[pkey]


def check_channels(prog, expected: dict) -> None:
    """Run information of the last run: per channel, `items` sent and at most max(D, 1) items
    in flight (at least one when any item was sent)."""
    channels = prog.stats.extra["channels"]
    assert set(channels) == set(expected), channels
    for name, (items, depth) in expected.items():
        c = channels[name]
        assert c["items"] == items, (name, c)
        assert c["depth"] == depth, (name, c)
        assert c["max_in_flight"] <= max(depth, 1), (name, c)
        assert (c["max_in_flight"] >= 1) == (items > 0), (name, c)


# --------------------------------------------------------------------------------------------
# The megakernel: Y = X + silu(rmsnorm(X) * W), loader -> computer -> storer


MEGAKERNEL_SCHEDULES = ["main", "spread", "per_tile"]


def megakernel_numpy(x, w, eps=EPS):
    x = np.asarray(x, np.float64)
    h = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * np.asarray(w, np.float64)
    return x + h / (1 + np.exp(-h))


def check_megakernel_values(y, inputs, what: str, times: float = 1) -> None:
    """y against the float64 formula, element by element: h = rmsnorm(x) * w carries a few
    roundings relative to itself, silu passes them on (slope <= 1.1), and x + silu(h) may
    cancel: atol is that error of the terms, rtol the final rounding."""
    want = megakernel_numpy(inputs["X"], inputs["W"])
    x = np.asarray(inputs["X"], np.float64)
    h = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS) * np.asarray(inputs["W"], np.float64)
    atol = times * ROUNDINGS * U * 1.1 * np.abs(h)
    assert_close(y, want, rtol=times * 4 * U, atol=atol, what=what)


def softmax_rtol(x, scale=SCALE):
    """The relative error of an f32 softmax of x * scale, per element: a few roundings, and
    the rounding of s - max(s) (up to U |s - max|), which exp makes relative."""
    s = np.asarray(x, np.float64) * scale
    return ROUNDINGS * U * (1 + (s.max(axis=-1, keepdims=True) - s))


def megakernel_inputs(n: int, seed: int = 0, scale: float = 1.0):
    rng = np.random.default_rng(seed)
    return dict(X=(rng.standard_normal((n, 16, 128)) * scale).astype(np.float32),
                W=(1 + 0.5 * rng.standard_normal((1, 128))).astype(np.float32))


def check_megakernel(target: str, depth: int, inputs: dict, schedule=None, workers=None):
    prog = program("megakernel", target, schedule, depth=depth)
    y = prog.run(workers=workers, **inputs)["Y"]
    n = len(inputs["X"])
    assert y.shape == (n, 16, 128) and y.dtype == np.float32
    check_megakernel_values(y, inputs, f"megakernel on {target}, depth {depth}")
    assert prog.stats.task_count == 3 * n  # a load, a compute and a store per tile
    check_channels(prog, {"l2c": (n, depth), "c2s": (n, depth)})
    return y


@pytest.mark.parametrize("depth", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("target", TARGETS)
def test_megakernel_depths(target, depth):
    check_megakernel(target, depth, megakernel_inputs(5, seed=depth))


@pytest.mark.parametrize("target", TARGETS)
def test_megakernel_tile_counts_at_the_edges(target):
    # no tile at all (every channel closes empty), one tile, and fewer tiles than slots
    for n in (0, 1, 3):
        check_megakernel(target, 4, megakernel_inputs(n, seed=n))


@pytest.mark.parametrize("target", TARGETS)
@HSET
@given(n=st.integers(0, 9), depth=st.integers(0, 4), seed=st.integers(0, 2**16),
       scale=st.sampled_from([1e-3, 1.0, 40.0]))
def test_megakernel_random(target, n, depth, seed, scale):
    check_megakernel(target, depth, megakernel_inputs(n, seed=seed, scale=scale))


@pytest.mark.parametrize("target", TARGETS)
def test_megakernel_bit_identical_across_schedules_depths_and_runs(target):
    inputs = megakernel_inputs(7, seed=11)
    first = check_megakernel(target, 2, inputs)
    for schedule in MEGAKERNEL_SCHEDULES:
        for workers in (1, 2):
            for _ in range(2):  # a repeated run of the same program
                y = check_megakernel(target, 2, inputs, schedule=schedule, workers=workers)
                np.testing.assert_array_equal(y, first, err_msg=f"{schedule}, {workers} workers")
    for depth in (0, 1, 4):
        np.testing.assert_array_equal(check_megakernel(target, depth, inputs, workers=2), first)


def test_megakernel_cpu_sim_vs_ref():
    inputs = megakernel_inputs(6, seed=3, scale=3.0)
    y_ref = check_megakernel("ref", 2, inputs)
    y_cpu = check_megakernel("cpu_sim", 2, inputs, workers=2)
    x = np.asarray(inputs["X"], np.float64)
    h = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + EPS) * np.asarray(inputs["W"], np.float64)
    assert_close(y_cpu, y_ref, rtol=8 * U, atol=2 * ROUNDINGS * U * 1.1 * np.abs(h),
                 what="megakernel: cpu_sim vs ref")


def wspc(*args, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "ptowsp", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env)


@pytest.mark.parametrize("schedule", [None, "per_tile"])
@pytest.mark.parametrize("target", TARGETS)
def test_megakernel_wspc_run(tmp_path, target, schedule):
    """`wspc run` end to end: N inferred from x.npy, Y written, the run information printed."""
    inputs = megakernel_inputs(4, seed=5)
    np.save(tmp_path / "x.npy", inputs["X"])
    np.save(tmp_path / "w.npy", inputs["W"])
    extra = ["--schedule", schedule] if schedule else []
    r = wspc("run", EXAMPLES / "megakernel.wsp", "--target", target, *extra,
             "--input", f"X={tmp_path / 'x.npy'}", "--input", f"W={tmp_path / 'w.npy'}",
             "--output", f"Y={tmp_path / 'y.npy'}", "--json")
    assert r.returncode == 0, r.stderr
    y = np.load(tmp_path / "y.npy")
    check_megakernel_values(y, inputs, f"wspc run megakernel on {target}")
    stats = json.loads(r.stdout)
    assert stats["task_count"] == 3 * 4
    assert stats["schedule"] == (schedule or "main") and stats["target"] == target
    for ch in ("l2c", "c2s"):
        assert stats["channels"][ch]["items"] == 4
        assert stats["channels"][ch]["depth"] == 2
        assert 1 <= stats["channels"][ch]["max_in_flight"] <= 2
    # the same through the API
    np.testing.assert_array_equal(
        y, program("megakernel", target, schedule).run(**inputs)["Y"])


@pytest.mark.parametrize("target", TARGETS)
def test_megakernel_wspc_run_random_inputs_default_size(tmp_path, target):
    # `sym N = 8`: the example runs with no binding at all
    r = wspc("run", EXAMPLES / "megakernel.wsp", "--target", target, "--random-inputs", "0",
             "--outputs", tmp_path / "out.npz", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["task_count"] == 3 * 8
    assert np.load(tmp_path / "out.npz")["Y"].shape == (8, 16, 128)


# --------------------------------------------------------------------------------------------
# The worker pool: producer -> workers * R -> (token channel) -> collector


POOL_SCHEDULES = ["main", "spread", "steal"]


def pool_numpy(x, scale=SCALE):
    """(Probs, ColSum) in float64."""
    s = np.asarray(x, np.float64) * scale
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return p, p.sum(axis=(0, 1))[None, :]


# exp of a score far below its row's maximum underflows: f32 keeps it to the subnormal spacing
TINY = 2.0**-126


def check_pool_values(out, inputs, what: str, times: float = 1) -> None:
    """Probs element by element (softmax_rtol); ColSum, a sum of positive Probs, within the
    largest relative error of its terms plus its own roundings."""
    probs, colsum = pool_numpy(inputs["X"])
    rtol = times * softmax_rtol(inputs["X"])
    assert_close(out["Probs"], probs, rtol=rtol, atol=times * TINY, what=what + ": Probs")
    col_rtol = float(rtol.max(initial=0.0)) + times * ROUNDINGS * U
    assert_close(out["ColSum"], colsum, rtol=col_rtol, atol=times * TINY, what=what + ": ColSum")


def pool_inputs(n: int, seed: int = 0, scale: float = 4.0):
    rng = np.random.default_rng(seed)
    return dict(X=(rng.standard_normal((n, 16, 128)) * scale).astype(np.float32))


def check_pool(target: str, replicas: int, inputs: dict, depth: int = 2, schedule=None,
               workers=None):
    prog = program("worker_pool", target, schedule, depth=depth, replicas=replicas)
    out = prog.run(workers=workers, **inputs)
    n = len(inputs["X"])
    probs, colsum = pool_numpy(inputs["X"])
    check_pool_values(out, inputs, f"worker pool on {target}, {replicas} replicas")
    # item k went to replica k % R, which stored its `workers.id`
    np.testing.assert_array_equal(out["Owner"], (np.arange(n) % replicas)[:, None])
    assert prog.stats.task_count == 3 * n  # a fetch, a work and a tally per item
    check_channels(prog, {"queue": (n, depth), "done": (n, depth)})
    return out


@pytest.mark.parametrize("replicas", [1, 2, 3, 4])
@pytest.mark.parametrize("target", TARGETS)
def test_worker_pool_replicas(target, replicas):
    check_pool(target, replicas, pool_inputs(9, seed=replicas))


# a rendezvous queue, a queue deeper than the pool (tokens then arrive out of item order), and
# more replicas than items in flight
@pytest.mark.parametrize("replicas,depth", [(2, 0), (2, 4), (3, 1)])
@pytest.mark.parametrize("target", TARGETS)
def test_worker_pool_depths(target, replicas, depth):
    check_pool(target, replicas, pool_inputs(7, seed=depth), depth=depth)


@pytest.mark.parametrize("target", TARGETS)
@HSET
@given(replicas=st.integers(1, 4), n=st.integers(0, 9), seed=st.integers(0, 2**16),
       scale=st.sampled_from([0.01, 4.0, 60.0]))
def test_worker_pool_random(target, replicas, n, seed, scale):
    check_pool(target, replicas, pool_inputs(n, seed=seed, scale=scale))


@pytest.mark.parametrize("target", TARGETS)
def test_worker_pool_bit_identical_across_schedules_replicas_and_runs(target):
    inputs = pool_inputs(10, seed=21)
    first = check_pool(target, 4, inputs)
    for schedule in POOL_SCHEDULES:
        for workers in (1, 2):
            for _ in range(2):
                out = check_pool(target, 4, inputs, schedule=schedule, workers=workers)
                for name in ("Probs", "ColSum", "Owner"):
                    np.testing.assert_array_equal(out[name], first[name],
                                                  err_msg=f"{name}, {schedule}, {workers} workers")
    # the replica count and the depths decide only who runs what (Owner), never the results
    for replicas, depth in ((1, 2), (3, 2), (2, 0), (2, 4)):
        out = check_pool(target, replicas, inputs, depth=depth, workers=2)
        for name in ("Probs", "ColSum"):
            np.testing.assert_array_equal(out[name], first[name],
                                          err_msg=f"{name}, {replicas} replicas, depth {depth}")


def test_worker_pool_cpu_sim_vs_ref():
    inputs = pool_inputs(8, seed=4, scale=10.0)
    ref = check_pool("ref", 3, inputs)
    cpu = check_pool("cpu_sim", 3, inputs, workers=2)
    rtol = 2 * softmax_rtol(inputs["X"])
    assert_close(cpu["Probs"], ref["Probs"], rtol=rtol, atol=2 * TINY, what="Probs: cpu vs ref")
    assert_close(cpu["ColSum"], ref["ColSum"], rtol=float(rtol.max()) + 2 * ROUNDINGS * U,
                 atol=2 * TINY, what="ColSum: cpu vs ref")
    np.testing.assert_array_equal(cpu["Owner"], ref["Owner"])


def test_worker_pool_stats_name_the_channels(tmp_path):
    # `--stats` (text) shows what `--json` holds under "channels"
    r = wspc("run", EXAMPLES / "worker_pool.wsp", "--random-inputs", "0", "--stats")
    assert r.returncode == 0, r.stderr
    lines = [ln.strip() for ln in r.stdout.splitlines()]
    assert "channel queue: 16 items, at most 2 in flight (depth 2)" in lines
    assert any(ln.startswith("channel done: 16 items") for ln in lines)
