"""Meshes of several devices run in one process (docs/distributed.md, "How it is built"): every
collective, for every op and dtype, on meshes 1x1, 2, 4 and 2x2 (dp x tp), with ref == cpu_sim ==
an independent NumPy formula written here; the tensor-parallel MLP of the page on tp = 1, 2, 4
against single-device NumPy; tasks on the right device (the cpu_sim trace); the diagnostics of
sizing a mesh, of uneven shards, of views crossing a shard at run time, and of replicas that
disagree.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptowsp
from ptowsp.diagnostics import WspError
from ptowsp.dtypes import DTYPES, FLOAT_DTYPES, numpy_dtype
from tests.mesh_programs import doc_tp_mlp

MESHES = [(1, 1), (1, 2), (1, 4), (2, 2)]
OPS = ("sum", "max", "min")


def _collectives(dtypes, dp: int, tp: int, r: int, c: int) -> str:
    """A module with every collective of every op on each dtype of `dtypes`: tp addends of
    `P` (its tp shards of r rows) made partial, reduced, scattered; `P` gathered; `A` moved
    from rows to columns; a replicated `Q` reduced; and, on f32, collectives over dp."""
    lines = ["module coll", f"mesh dp = {dp}, tp = {tp}"]
    body = []
    for d in dtypes:
        lines += [f"input   P_{d}: {d}[{tp * r}, {c}] @ [S(tp), R]",
                  f"input   A_{d}: {d}[{tp * r}, {tp * c}] @ [S(tp), R]",
                  f"output  B_{d}: {d}[{tp * r}, {tp * c}] @ [R, S(tp)]",
                  f"output  G_{d}: {d}[{tp * r}, {c}]",
                  f"input   Q_{d}: {d}[{r}, {c}]",
                  f"kernel fill_{d}(x: In[Tile[{r}, {c}, {d}]], z: Out[Tile[{r}, {c}, {d}]]) "
                  "{ store(z, x) }"]
        body += [f"    allgather(P_{d}, into = G_{d}, over = tp)",
                 f"    all_to_all(A_{d}, into = B_{d}, over = tp)"]
        for op in OPS:
            lines += [f"scratch Z{op}_{d}: {d}[{r}, {c}] @ [R, R] partial(tp)",
                      f"output  Y{op}_{d}: {d}[{r}, {c}]",
                      f"output  S{op}_{d}: {d}[{r}, {c}] @ [S(tp), R]",
                      f"output  V{op}_{d}: {d}[{r}, {c}]"]
            body += [f"    for i in P(Dense[{tp}]) {{ fill_{d}[i](x = P_{d}[i*{r} : i*{r} + {r}, :], "
                     f"z = Z{op}_{d}[:, :]) }}",
                     f"    allreduce(Z{op}_{d}, into = Y{op}_{d}, over = tp, op = {op})",
                     f"    reduce_scatter(Z{op}_{d}, into = S{op}_{d}, over = tp, dim = 0, op = {op})",
                     f"    allreduce(Q_{d}, into = V{op}_{d}, over = tp, op = {op})"]
        lines += [f"output  L_{d}: {d}[{r}, {c}]"]
        body += [f"    relayout(Zsum_{d}, into = L_{d})"]
    if "f32" in dtypes:
        lines += [f"input   M: f32[{dp * r}, {tp * c}] @ [S(dp), S(tp)]",
                  f"output  M1: f32[{dp * r}, {tp * c}] @ [S(dp), R]",
                  f"output  M2: f32[{dp * r}, {tp * c}]",
                  f"output  M3: f32[{dp * r}, {tp * c}] @ [R, S(dp)]",
                  f"scratch Zd: f32[{r}, {c}] @ [R, R] partial(dp)",
                  f"output  Yd: f32[{r}, {c}] @ [R, R]",
                  f"input   Pd: f32[{dp * r}, {c}] @ [S(dp), R]",
                  f"scratch Zc: f32[{r}, {tp * c}] @ [R, R] partial(tp)",
                  f"output  Sc: f32[{r}, {tp * c}] @ [R, S(tp)]",
                  f"kernel fillw(x: In[Tile[{r}, {tp * c}, f32]], z: Out[Tile[{r}, {tp * c}, f32]]) "
                  "{ store(z, x) }"]
        body += ["    allgather(M, into = M1, over = tp)",
                 "    relayout(M, into = M2)",
                 f"    for j in P(Dense[{dp}]) {{ fill_f32[j](x = Pd[j*{r} : j*{r} + {r}, :], "
                 "z = Zd[:, :]) }",
                 "    allreduce(Zd, into = Yd, over = dp)"]
        # all_to_all over dp needs M's dp shards on another dimension: relayout does it
        body += ["    relayout(M, into = M3)",
                 f"    for i in P(Dense[{tp}]) {{ fillw[i](x = A_f32[i*{r} : i*{r} + {r}, :], "
                 "z = Zc[:, :]) }",
                 "    reduce_scatter(Zc, into = Sc, over = tp, dim = 1)"]
    return "\n".join(lines + ["workload w() {"] + body + ["}", "schedule main = w()", ""])


def _bf16_round(x32: np.ndarray) -> np.ndarray:
    """f32 values rounded to nearest even bf16, as raw bits (uint16)."""
    bits = x32.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16_value(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def _random(rng, dtype: str, shape) -> np.ndarray:
    if dtype == "bf16":
        return _bf16_round(rng.standard_normal(shape).astype(np.float32))
    if dtype in FLOAT_DTYPES:
        return rng.standard_normal(shape).astype(numpy_dtype(dtype))
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    info = np.iinfo(numpy_dtype(dtype))
    return rng.integers(info.min, info.max, shape, dtype=numpy_dtype(dtype), endpoint=True)


def _reduce(dtype: str, op: str, parts: list[np.ndarray]) -> np.ndarray:
    """The fixed-order reduction of `parts` (device 0, 1, ...): f16 and bf16 in f32 rounded
    once, integers wrapping in their type, booleans as `or` (sum, max) and `and` (min)."""
    if dtype == "bool":
        f = np.logical_and if op == "min" else np.logical_or
    else:
        f = {"sum": np.add, "max": np.maximum, "min": np.minimum}[op]
    if dtype == "bf16":
        acc = _bf16_value(parts[0])
        for p in parts[1:]:
            acc = f(acc, _bf16_value(p))
        return _bf16_round(acc)
    if dtype == "f16":
        acc = parts[0].astype(np.float32)
        for p in parts[1:]:
            acc = f(acc, p.astype(np.float32))
        return acc.astype(np.float16)
    acc = parts[0].copy()
    with np.errstate(over="ignore"):
        for p in parts[1:]:
            acc = f(acc, p).astype(acc.dtype)
    return acc


def _check_collectives(dtypes, dp, tp, r, c, targets=("ref", "cpu_sim"), seed=0):
    m = ptowsp.parse(_collectives(dtypes, dp, tp, r, c), "coll.wsp")
    rng = np.random.default_rng(seed)
    arrays = {}
    for d in dtypes:
        arrays[f"P_{d}"] = _random(rng, d, (tp * r, c))
        arrays[f"A_{d}"] = _random(rng, d, (tp * r, tp * c))
        arrays[f"Q_{d}"] = _random(rng, d, (r, c))
    if "f32" in dtypes:
        arrays["M"] = _random(rng, "f32", (dp * r, tp * c))
        arrays["Pd"] = _random(rng, "f32", (dp * r, c))
    want = {}
    for d in dtypes:
        parts = [arrays[f"P_{d}"][i * r:(i + 1) * r] for i in range(tp)]
        want[f"G_{d}"] = arrays[f"P_{d}"]
        want[f"B_{d}"] = arrays[f"A_{d}"]
        for op in OPS:
            want[f"Y{op}_{d}"] = _reduce(d, op, parts)
            want[f"S{op}_{d}"] = want[f"Y{op}_{d}"]
            want[f"V{op}_{d}"] = _reduce(d, op, [arrays[f"Q_{d}"]] * tp)
        want[f"L_{d}"] = want[f"Ysum_{d}"]
    if "f32" in dtypes:
        want["M1"] = want["M2"] = want["M3"] = arrays["M"]
        want["Yd"] = _reduce("f32", "sum", [arrays["Pd"][j * r:(j + 1) * r] for j in range(dp)])
        want["Sc"] = _reduce("f32", "sum", [arrays["A_f32"][i * r:(i + 1) * r] for i in range(tp)])
    for target in targets:
        out = m.compile(target=target).run(check_replicas=True, **arrays)
        for name, w in want.items():
            got = out[name]
            assert got.dtype == w.dtype and got.shape == w.shape, (target, name)
            assert np.array_equal(got.view(np.uint8), w.view(np.uint8)), (target, name, got, w)


@pytest.mark.parametrize("dp,tp", MESHES)
def test_every_collective_every_op_every_dtype(dp, tp):
    _check_collectives(DTYPES, dp, tp, 8, 8 if tp < 4 else 5)


@given(r=st.integers(1, 6), c=st.integers(1, 80), mesh=st.sampled_from(MESHES))
def test_collectives_over_tile_shapes(r, c, mesh):
    # rows of every shard from 1 up, columns past a copy tile (64: partial tiles)
    dp, tp = mesh
    _check_collectives(("f32", "i8"), dp, tp, r * tp, c, targets=("ref",))


def test_collectives_over_a_long_dimension_on_cpu_sim():
    _check_collectives(("f32", "bf16"), 2, 2, 70, 130, targets=("ref", "cpu_sim"), seed=3)


# a shard of 100 rows of 1024 columns: a collective tile is whole rows up to 256 KiB
# (ir/collective_tiles.tile_shape), so 64 rows of f32 (two tiles, the second partial) and 128 of
# f16 or bf16 (one partial tile)
BIG_TILES = (("f32", "f16", "bf16"), 100, 1024)


def test_tiles_of_whole_rows_are_the_fixed_order_reduction():
    from ptowsp.ir.collective_tiles import tile_shape

    dtypes, r, c = BIG_TILES
    assert tile_shape(r, c, 4) == (64, 1024) and tile_shape(r, c, 2) == (100, 1024)
    assert tile_shape(None, c, 4) == (64, 1024) and tile_shape(None, 8192, 4) == (8, 8192)
    assert tile_shape(None, None, 4) == (64, 64) and tile_shape(3, 100_000, 4) == (1, 65536)
    _check_collectives(dtypes, 1, 2, r, c, targets=("cpu_sim",), seed=4)


# ---- the tensor-parallel MLP of docs/distributed.md ------------------------------------------

MLP = doc_tp_mlp(64, 256, 16, 32)


def _mlp_inputs(t: int = 32):
    rng = np.random.default_rng(5)
    return {"X": rng.standard_normal((t, 64)).astype(np.float32),
            "W1": (rng.standard_normal((64, 256)) / 8).astype(np.float32),
            "W2": (rng.standard_normal((256, 64)) / 16).astype(np.float32)}


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_the_tensor_parallel_mlp_equals_single_device_numpy(tp):
    a = _mlp_inputs()
    want = (a["X"].astype(np.float64) @ a["W1"] @ a["W2"])
    m = ptowsp.parse(MLP, "tp_mlp.wsp")
    outs = {}
    for target in ("ref", "cpu_sim"):
        outs[target] = m.compile(target, mesh={"tp": tp}).run(check_replicas=True, **a)["Y"]
        assert outs[target].shape == (32, 64)
        np.testing.assert_allclose(outs[target], want, rtol=1e-4, atol=1e-4)
    # the same fixed order of the same f32 operations: ref and cpu_sim agree bit for bit
    np.testing.assert_allclose(outs["ref"], outs["cpu_sim"], rtol=1e-6, atol=1e-6)


def test_tasks_run_on_their_devices_workers():
    # 4 devices, 8 workers: device d's pool is served by workers w with w % 4 == d
    m = ptowsp.parse(MLP, "tp_mlp.wsp")
    p = m.compile("cpu_sim")
    p.run(workers=8, trace=True, **_mlp_inputs(64))
    ev = p.trace.events
    names = p.trace.kernel_names
    seen = set()
    for e in ev[ev["worker"] >= 0]:
        kernel = names[e["kernel"]]
        coords = e["coords"][:e["ncoords"]]
        if kernel in ("up", "down"):
            device = coords[1] * 32 // 64  # f*FB // (F / tp): the shard of W1's columns
        else:  # a collective's tile task: the device's tp coordinate first
            assert kernel.startswith("mesh_allreduce"), kernel
            device = coords[0]
        assert e["worker"] % 4 == device, (kernel, coords.tolist(), e["worker"])
        seen.add((kernel, int(device)))
    assert {d for _, d in seen} == {0, 1, 2, 3}


# ---- sizing a mesh: --mesh, mesh=, --bind -----------------------------------------------------

COPY = """\
{decl}
input X: f32[8, 8] @ [S(tp), R]
output Y: f32[8, 8]
kernel cp(x: In[Tile[8, 8, f32]], y: Out[Tile[8, 8, f32]]) {{ store(y, x) }}
workload w() {{
    allgather(X, into = Y, over = tp)
}}
schedule main = w()
"""


def _messages(fn) -> list:
    with pytest.raises(WspError) as info:
        fn()
    return info.value.diagnostics


@pytest.mark.parametrize("decl,mesh,devices", [
    ("mesh tp = 4", None, 4),            # the literal
    ("mesh tp = 4", {"tp": 2}, 2),       # overridden
    ("mesh tp = 1", {"tp": 8}, 8),
    ("sym TP = 2\nmesh tp = TP", None, 2),  # the sym's default
    ("sym TP\nmesh tp = TP", {"tp": 4}, 4),
])
def test_a_mesh_is_sized_by_its_literal_mesh_or_its_sym(decl, mesh, devices):
    m = ptowsp.parse(COPY.format(decl=decl), "copy.wsp")
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    for target in ("ref", "cpu_sim"):
        p = m.compile(target, mesh=mesh)
        assert p._lowered.devices.count == devices
        assert np.array_equal(p.run(X=x)["Y"], x)


def test_mesh_sizing_errors():
    m = ptowsp.parse(COPY.format(decl="sym TP\nmesh tp = TP"), "copy.wsp")
    (d,) = _messages(lambda: m.compile("ref", mesh={"tq": 2}))
    assert d.message == "the mesh of `copy` has no axis `tq`" and str(d.span) == "--mesh tq=2:0:0"
    (d,) = _messages(lambda: m.compile("ref", mesh={"tp": 0}))
    assert d.message == "mesh axis `tp` needs at least 1 device, not 0"
    plain = ptowsp.parse("input X: f32[8]\noutput Y: f32[8]\n"
                         "kernel cp(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) "
                         "{ store(y, x) }\nworkload w() {\n    cp(x = X, y = Y)\n}\n"
                         "schedule main = w()\n", "plain.wsp")
    (d,) = _messages(lambda: plain.compile("ref", mesh={"tp": 2}))
    assert d.message == "module `plain` has no mesh, so there are no axes to size"
    from ptowsp import driver

    ir = m.ir
    (d,) = _messages(lambda: driver.optimize(ir, 0, mesh={"tp": 4}, bind={"TP": 2}))
    assert d.message == "--mesh tp=4 and --bind TP=2 disagree: axis `tp` is sized by `TP`"
    (d,) = _messages(lambda: driver.optimize(ir, 0, bind={"TP": 0}))
    assert d.message == "mesh axis `tp` needs at least 1 device, but --bind TP=0 makes it 0"
    two = ptowsp.parse("sym N\nmesh dp = N, tp = N\ninput X: f32[8]\noutput Y: f32[8]\n"
                       "kernel cp(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) "
                       "{ store(y, x) }\nworkload w() {\n    cp(x = X, y = Y)\n}\n"
                       "schedule main = w()\n", "two.wsp")
    (d,) = _messages(lambda: two.compile("ref", mesh={"dp": 2, "tp": 4}))
    assert d.message == "--mesh tp=4 and --mesh dp=2 disagree: both axes are sized by `N`"
    # bound once at compile time, the sym cannot change at run time
    p = m.compile("ref", mesh={"tp": 2})
    (d,) = _messages(lambda: p.run(bind={"TP": 4}, X=np.zeros((8, 8), np.float32)))
    assert d.message.startswith("the mesh was compiled with `TP` = 2")


def test_mesh_on_the_command_line(tmp_path):
    import subprocess
    import sys

    f = tmp_path / "copy.wsp"
    f.write_text(COPY.format(decl="sym TP\nmesh tp = TP"))
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    np.save(tmp_path / "x.npy", x)

    def wspc(*args):
        return subprocess.run([sys.executable, "-m", "ptowsp", *args], capture_output=True,
                              text=True, cwd=tmp_path, timeout=600)

    for sizing in (["--mesh", "tp=4"], ["--bind", "TP=2"]):
        r = wspc("run", "copy.wsp", "--input", "X=x.npy", "--output", "Y=y.npy",
                 "--check-replicas", *sizing)
        assert r.returncode == 0, r.stderr
        assert np.array_equal(np.load(tmp_path / "y.npy"), x)
    r = wspc("run", "copy.wsp", "--input", "X=x.npy", "--mesh", "tp=two")
    assert r.returncode == 2 and "tp=two: not an integer" in r.stderr
    r = wspc("run", "copy.wsp", "--input", "X=x.npy", "--mesh", "tp=3")
    assert r.returncode == 1
    assert "copy.wsp:3:1: error: `X` shards its 8 rows over tp = 3: 8 is not a multiple of 3" in r.stderr
    r = wspc("compile", "copy.wsp", "--mesh", "tp=2", "--emit", "ir")
    assert r.returncode == 0 and "input X: f32[2, 4, 8]" in r.stdout
    r = wspc("compile", "copy.wsp", "--mesh", "tp=2", "-o", "art")
    assert r.returncode == 0, r.stderr
    r = wspc("run", "art", "--input", "X=x.npy", "--mesh", "tp=2")
    assert r.returncode == 2
    assert "--mesh sizes a mesh when a module is compiled; an artifact directory keeps" in r.stderr
    r = wspc("run", "art", "--input", "X=x.npy", "--output", "Y=y2.npy")
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "y2.npy"), x)


def test_a_mesh_module_is_kept_in_the_index_of_compiled_sources_by_its_sizes(tmp_path,
                                                                             monkeypatch):
    from ptowsp import api, driver

    monkeypatch.setenv("WSPC_CACHE_DIR", str(tmp_path / "cache"))  # an empty index
    f = tmp_path / "copy.wsp"
    f.write_text(COPY.format(decl="sym TP\nmesh tp = TP"))
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    cpu = driver.target("cpu_sim")

    def compiled(devices, **sizing):
        c = driver.compile_file(f, cpu, **sizing)
        assert c.module.devices.count == devices
        p = api.program(c)
        assert np.array_equal(p.run(X=x)["Y"], x)
        return c.opt_level is None  # reopened from the index: nothing checked or lowered

    assert not compiled(4, mesh={"tp": 4})
    assert compiled(4, mesh={"tp": 4})
    assert not compiled(2, mesh={"tp": 2})  # other sizes: another entry
    assert compiled(2, mesh={"tp": 2}) and compiled(4, mesh={"tp": 4})
    assert not compiled(2, bind={"TP": 2})  # sized by --bind: the bindings are in the key
    assert compiled(2, bind={"TP": 2})
    assert not compiled(4, bind={"TP": 4})
    (d,) = _messages(lambda: driver.compile_file(f, cpu, mesh={"tp": 4}, bind={"TP": 2}))
    assert "disagree" in d.message  # never a hit that would hide the error
    f.write_text(COPY.format(decl="sym TP = 2\nmesh tp = TP"))  # the sources are the key
    assert not compiled(2) and compiled(2)


# ---- placement and layout diagnostics ---------------------------------------------------------

SHARDS = """\
mesh tp = 1
sym K
sym T
input W: f32[16, 256] @ [R, S(tp)]
input V: f32[16, T] @ [R, S(tp)]
scratch Z: f32[16, 32] @ [R, R] partial(tp)
output Y: f32[16, 32]
kernel cp(x: In[Tile[16, 32, f32]], y: Out[Tile[16, 32, f32]]) {{ store(y, x) }}
kernel cp2(x: In[Tile[16, 32, f32]], v: In[Tile[16, 32, f32]], y: Out[Tile[16, 32, f32]]) {{ store(y, x + v) }}
workload w() {{
    {call}
    allreduce(Z, into = Y, over = tp)
}}
schedule main = w()
"""


def _shards(call: str):
    return ptowsp.parse(SHARDS.format(call=call), "shards.wsp")


def test_a_view_crossing_a_shard_at_run_time_is_reported_at_the_view():
    m = _shards("cp(x = W[:, K : K + 32], y = Z[:, :])")
    w = np.arange(16 * 256, dtype=np.float32).reshape(16, 256)
    v = np.zeros((16, 64), np.float32)
    for target in ("ref", "cpu_sim"):
        p = m.compile(target, mesh={"tp": 4})  # shards of 64 columns
        out = p.run(bind={"K": 96}, W=w, V=v)
        assert np.array_equal(out["Y"], w[:, 96:128])
        (d,) = _messages(lambda p=p: p.run(bind={"K": 48}, W=w, V=v))
        # the failure says which columns it found and the devices holding the two ends
        assert d.message.startswith("`x = W[:, K : K + 32]` spans more than one shard of tp "
                                    "(64 columns each): a task reads one device's data; split "
                                    "the view at shard boundaries, or `allgather` `W`, found "
                                    "columns 48 .. 79: column 48 is on tp = 0 and column 79 on "
                                    "tp = 1 (task `cp`)"), d.message
        assert (d.span.line, d.span.col) == (11, 8)


def test_placement_errors_the_mesh_size_decides_at_compile_time():
    # one device: nothing crosses; four: `W[:, 48 : 80]` spans columns 48..79 of shards of 64
    m = _shards("cp(x = W[:, 48 : 80], y = Z[:, :])")
    assert m.compile("ref", mesh={"tp": 2}) is not None
    (d,) = _messages(lambda: m.compile("ref", mesh={"tp": 4}))
    assert d.message.startswith("`x = W[:, 48 : 80]` spans more than one shard of tp")
    assert (d.span.line, d.span.col) == (11, 8)
    m = _shards("cp2(x = W[:, 64 : 96], v = W[:, 0 : 32], y = Z[:, :])")
    (d,) = _messages(lambda: m.compile("ref", mesh={"tp": 4}))
    assert d.message.startswith("`cp2` has no device to run on: `x = W[:, 64 : 96]` and "
                                "`v = W[:, 0 : 32]` are on different coordinates of tp")
    w = np.arange(16 * 256, dtype=np.float32).reshape(16, 256)
    v = np.zeros((16, 64), np.float32)
    p = _shards("cp2(x = W[:, K : K + 32], v = W[:, 0 : 32], y = Z[:, :])").compile(
        "ref", mesh={"tp": 4})
    out = p.run(bind={"K": 32}, W=w, V=v)
    assert np.array_equal(out["Y"], w[:, 32:64] + w[:, 0:32])
    (d,) = _messages(lambda: p.run(bind={"K": 64}, W=w, V=v))
    assert "are on different coordinates of tp" in d.message


def test_uneven_shards_are_refused():
    m = _shards("cp(x = V[:, 0 : 32], y = Z[:, :])")
    (d,) = _messages(lambda: m.compile("ref", mesh={"tp": 3}))
    assert d.message == "`W` shards its 256 columns over tp = 3: 256 is not a multiple of 3"
    p = m.compile("ref", mesh={"tp": 4})
    w = np.zeros((16, 256), np.float32)
    v = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    assert np.array_equal(p.run(bind={"K": 0}, W=w, V=v)["Y"], v[:, :32])
    (d,) = _messages(lambda: p.run(bind={"K": 0}, W=w, V=np.zeros((16, 66), np.float32)))
    assert d.message.startswith("`V` shards its `T` columns over tp = 4: "
                                "`T` must be a multiple of 4")
    assert d.span.line == 5


SHARD_GATHER = """\
mesh tp = 2
input I: i32[8]
input W: f32[16, 8] @ [S(tp), R]
scratch Z: f32[4, 8] @ [R, R] partial(tp)
output Y: f32[4, 8]
kernel acc(x: In[Tile[4, 8, f32]], z: InOut[Tile[4, 8, f32]]) { store(z, z + x) }
workload w() {
    for g in P(Dense[2]) { acc[g](x = W[I[g*4 : g*4 + 4], :], z = Z[:, :]) }
    allreduce(Z, into = Y, over = tp)
}
schedule main = w()
"""


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_a_gather_view_of_a_sharded_dimension_runs_on_the_device_holding_its_rows(tp):
    m = ptowsp.parse(SHARD_GATHER, "g.wsp")  # the checker leaves gather views to the lowering
    w = np.random.default_rng(tp).standard_normal((16, 8)).astype(np.float32)
    i = np.array([2, 0, 3, 1, 12, 15, 13, 13], np.int32)  # each group in one shard of 4 rows
    for target in ("ref", "cpu_sim"):
        p = m.compile(target, mesh={"tp": tp})
        # the task of group g runs on the device holding its rows, adding them to its addend
        assert np.array_equal(p.run(I=i, W=w)["Y"], w[i[:4]] + w[i[4:]]), target


def test_a_gather_view_across_shards_is_an_error_naming_the_row_and_its_device():
    m = ptowsp.parse(SHARD_GATHER, "g.wsp")
    w = np.zeros((16, 8), np.float32)
    for target in ("ref", "cpu_sim"):
        p = m.compile(target, mesh={"tp": 2})  # shards of 8 rows
        (d,) = _messages(lambda p=p: p.run(I=np.array([0, 1, 9, 3, 8, 8, 8, 8], np.int32), W=w))
        assert d.message.startswith(
            "`x = W[I[g*4 : g*4 + 4], :]` gathers rows of `W` from more than one shard of tp "
            "(8 rows each): a task reads one device's data; `allgather` `W` over tp into a "
            "tensor replicated over it and gather from that, found row 9 on tp = 1 and row 0 "
            "on tp = 0 (the task's) (task `acc[g]` at g=0)"), (target, d.message)
        assert (d.span.line, d.span.col) == (8, 35)
    (d,) = _messages(lambda: m.compile("ascend_npu", mesh={"tp": 2}))
    assert d.message == ("in `acc[g]`, `x` gathers rows of `W`, whose rows are sharded over the "
                         "mesh, which the ascend_npu target does not run yet")
    assert m.compile("ascend_npu", mesh={"tp": 1}) is not None  # one device: W is whole


def test_replicas_that_disagree_are_reported():
    from ptowsp.api import Program

    m = ptowsp.parse(COPY.format(decl="mesh tp = 2"), "copy.wsp")
    good = m.compile("ref")

    class Bad:
        cycle_model = False

        def run(self, module, schedule, syms, inputs, workers=None):
            y = np.zeros((2, 8, 8), np.float32)
            y[1, 3, 5] = 2.5
            return {"Y": y}, {"task_count": 0}

    p = Program(good._lowered, good.schedule, "ref", Bad(), 0.0)
    x = np.zeros((8, 8), np.float32)
    assert p.run(X=x)["Y"][3, 5] == 0.0  # device 0's replica, unchecked
    (d,) = _messages(lambda: p.run(X=x, check_replicas=True))
    assert d.message == ("the replicas of `Y` disagree: at [3, 5], device 1 (tp = 1) has 2.5 "
                         "and device 0 (tp = 0) has 0.0")
    assert d.span.line == 3


PARTIAL_INOUT = """\
mesh tp = TP
sym TP
input A: {dt}[4, 8 * TP] @ [R, S(tp)]
inout Z: {dt}[4, 8] @ [R, R] partial(tp)
kernel acc(x: In[Tile[4, 8, {dt}]], z: InOut[Tile[4, 8, {dt}]]) {{ store(z, z + x) }}
workload w() {{
    for c in P.seq(DenseDyn(TP)) {{ acc[c](x = A[:, c*8 : c*8 + 8], z = Z[:, :]) }}
}}
schedule main = w()
"""


@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16", "i32"])
def test_a_partial_inout_is_the_callers_value_in_and_the_sum_of_its_addends_out(dtype, tp):
    # in: device 0's addend is the caller's array, the others zeros; out: the addends summed
    # in device order as an allreduce sums them (f16, bf16 in f32 rounded once)
    m = ptowsp.parse(PARTIAL_INOUT.format(dt=dtype), "pinout.wsp")
    rng = np.random.default_rng(tp)
    a = _random(rng, dtype, (4, 8 * tp))
    z = _random(rng, dtype, (4, 8))
    blocks = [a[:, 8 * c: 8 * c + 8] for c in range(tp)]
    want = _reduce(dtype, "sum", [_reduce(dtype, "sum", [z, blocks[0]])] + blocks[1:])
    for target in ("ref", "cpu_sim"):
        p = m.compile(target, mesh={"tp": tp})
        out = p.run(A=a, Z=z)["Z"]
        assert out.dtype == want.dtype and np.array_equal(out, want), (target, out, want)
        mine = z.copy()
        assert p.run(A=a, Z=mine, inplace=True)["Z"] is mine
        assert np.array_equal(mine, want)


def test_a_partial_inout_is_refused_for_ascend_npu():
    m = ptowsp.parse(PARTIAL_INOUT.format(dt="f32"), "pinout.wsp")
    (d,) = _messages(lambda: m.compile("ascend_npu", mesh={"tp": 2}))
    assert d.message == ("inout `Z` is partial over tp: the ascend_npu target does not sum its "
                         "addends for the caller yet")
    assert d.span.line == 4
    assert m.compile("ascend_npu", mesh={"tp": 1}) is not None  # one device: its one addend


TILE_FLOWS = ("mesh tp = 2\ninput A: f32[64, 64] @ [R, S(tp)]\n"
              "scratch Z: f32[64, 64] @ [R, R] partial(tp)\noutput Y: f32[64, 64]\n"
              "kernel cp(x: In[Tile[64, 32, f32]], z: InOut[Tile[64, 32, f32]]) "
              "{ store(z, z + x) }\nworkload w() {\n"
              "    for c in P(Dense[2]) { cp[c](x = A[:, c*32 : c*32 + 32], z = Z[:, 0 : 32]) }\n"
              "    allreduce(Z, into = Y, over = tp)\n}\nschedule main = w()\n")


def tile_flows(trace: dict) -> set:
    """(name, the slice of its "s", its process, the slice of its "f", its process) of every
    tile flow of a Chrome trace, each end found as the task slice whose middle it is at."""
    slices = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":
            slices[(e["pid"], e["tid"], round(e["ts"] + e["dur"] / 2, 3))] = e["name"]
    ends: dict = {}
    for e in trace["traceEvents"]:
        if e.get("ph") in ("s", "f") and e["cat"] == "tile":
            at = slices[(e["pid"], e["tid"], round(e["ts"], 3))]
            ends.setdefault(e["id"], {})[e["ph"]] = (e["name"], at, e["pid"])
    return {(v["s"][0], v["s"][1], v["s"][2], v["f"][1], v["f"][2]) for v in ends.values()}


def test_a_trace_draws_a_tile_flow_from_its_producer_to_the_collective_task_reading_it():
    import json

    p = ptowsp.parse(TILE_FLOWS, "flows.wsp").compile("cpu_sim")
    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    out = p.run(A=a, trace=True, workers=2)
    assert np.array_equal(out["Y"][:, :32], a[:, :32] + a[:, 32:]) and not out["Y"][:, 32:].any()
    trace = json.loads(p.trace.to_json())
    ar = p.trace.kernel_names[-1]  # the allreduce's tile kernel
    assert ar.startswith("mesh_allreduce")
    # device d's tile task reads its own addend (a dependency) and the other device's (a tile)
    assert tile_flows(trace) == {("tile from device 1", "cp[1]", 1, f"{ar}[0]", 1),
                                 ("tile from device 0", "cp[0]", 1, f"{ar}[1]", 1)}
    deps = [e for e in trace["traceEvents"] if e.get("cat") == "dependency" and e["pid"] == 1]
    assert len(deps) == 2 * 2  # the two same-device edges, drawn once each


def test_a_devices_collectives_run_in_program_order():
    # two collectives with no data between them: on each device every tile of the second
    # starts after every tile of the first has finished (the design's program order)
    text = ("mesh tp = 2\ninput A: f32[128, 128] @ [S(tp), R]\ninput B: f32[128, 128] @ [S(tp), R]\n"
            "output GA: f32[128, 128]\noutput GB: f32[128, 128]\n"
            "workload w() {\n    allgather(A, into = GA, over = tp)\n"
            "    allgather(B, into = GB, over = tp)\n}\nschedule main = w()\n")
    m = ptowsp.parse(text, "order.wsp")
    p = m.compile("cpu_sim")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 128, 128)).astype(np.float32)
    out = p.run(A=a, B=b, trace=True, workers=4)
    assert np.array_equal(out["GA"], a) and np.array_equal(out["GB"], b)
    ev = p.trace.events
    names = p.trace.kernel_names
    kernels = sorted({names[k] for k in ev["kernel"]})
    assert len(kernels) == 2  # one kernel per collective (its comm record)
    first = kernels[0]  # the second collective's kernel is named apart: `..._1`
    assert kernels[1] == first + "_1"
    for device in (0, 1):
        mine = ev[ev["coords"][:, 0] == device]
        ka = np.array([names[k] == first for k in mine["kernel"]])
        assert ka.any() and (~ka).any()
        assert mine["end_ns"][ka].max() <= mine["start_ns"][~ka].min()
    lowered = p._lowered
    reads = [x for st in lowered.schedule("main").body for x in _tasks(st)[0].extra]
    assert [x.mode for x in reads] == ["w", "w", "r"]  # the second reads the first's elements


def _tasks(st):
    from ptowsp.ir import visit

    return visit.tasks((st,))


def test_simulating_a_mesh_program():
    p = ptowsp.parse(MLP, "tp_mlp.wsp").compile("cpu_sim", mesh={"tp": 2})
    stats = p.simulate(bind={"T": 64})
    assert stats.total_cycles > 0 and stats.task_count == 4 * 8 * 2 + 2 * 1 * 1


def test_collective_tasks_run_on_their_devices_workers_on_a_2x2_mesh():
    # devices are numbered row-major (dp, tp): a tile task's first coordinates are its
    # device's (dp, tp), and it runs on a worker w with w % 4 == 2 * dp + tp
    m = ptowsp.parse(_collectives(("f32",), 2, 2, 8, 8), "coll.wsp")
    p = m.compile("cpu_sim")
    rng = np.random.default_rng(2)
    arrays = {"P_f32": rng.standard_normal((16, 8)).astype(np.float32),
              "A_f32": rng.standard_normal((16, 16)).astype(np.float32),
              "Q_f32": rng.standard_normal((8, 8)).astype(np.float32),
              "M": rng.standard_normal((16, 16)).astype(np.float32),
              "Pd": rng.standard_normal((16, 8)).astype(np.float32)}
    p.run(workers=8, trace=True, **arrays)
    ev = p.trace.events
    names = p.trace.kernel_names
    devices = set()
    for e in ev[ev["worker"] >= 0]:
        if names[e["kernel"]].startswith("mesh_"):
            dp, tp = e["coords"][0], e["coords"][1]
            assert e["worker"] % 4 == 2 * dp + tp, (names[e["kernel"]], e["coords"].tolist())
            devices.add(2 * dp + tp)
    assert devices == {0, 1, 2, 3}


@pytest.mark.parametrize("target", ["ref", "cpu_sim"])
def test_a_sharded_inout_is_scattered_and_gathered_in_place_too(target):
    text = ("mesh tp = 2\ninout Z: f32[4, 8] @ [R, S(tp)]\n"
            "kernel inc(z: InOut[Tile[4, 4, f32]]) { store(z, z + 1.0) }\n"
            "workload w() {\n    for j in P(Dense[2]) { inc[j](z = Z[:, j*4 : j*4 + 4]) }\n}\n"
            "schedule main = w()\n")
    p = ptowsp.parse(text, "io.wsp").compile(target)
    z = np.arange(32, dtype=np.float32).reshape(4, 8)
    assert np.array_equal(p.run(Z=z)["Z"], z + 1)
    assert np.array_equal(z, np.arange(32, dtype=np.float32).reshape(4, 8))  # not modified
    mine = z.copy()
    out = p.run(Z=mine, inplace=True)
    assert out["Z"] is mine and np.array_equal(mine, z + 1)


def test_a_seq_loop_orders_each_devices_steps_not_the_devices_between_them():
    """The MLP's `for f in P.seq(cols)` accumulates each device's blocks into its own addend:
    device 1's first block does not wait for device 0's last (docs/distributed.md, "Where a
    task runs"), so in the cycle model the critical path shrinks as devices are added (one
    order across devices made it grow: each device's chain waited for the one before it)."""
    m = ptowsp.parse(MLP, "tp_mlp.wsp")
    path = {}
    for tp in (1, 2, 4):
        stats = m.compile("cpu_sim", mesh={"tp": tp}).simulate(bind={"T": 256})
        path[tp] = stats.extra["critical_path_cycles"]
    assert path[4] < path[2] < path[1]
    p = m.compile("cpu_sim", mesh={"tp": 2})
    out = p.run(check_replicas=True, **_mlp_inputs())
    x, w1, w2 = (_mlp_inputs()[k].astype(np.float64) for k in ("X", "W1", "W2"))
    np.testing.assert_allclose(out["Y"], (x @ w1) @ w2, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tp", [1, 2])
def test_a_key_over_a_loop_variable_gives_a_collectives_tiles_coordinate_0(tp):
    # `.stream_by(t % 2)` names the user's `t`, which the allreduce's tile tasks are under no
    # loop of: they take the key at t = 0 (stream 0), the user's tasks their own (it was an
    # internal error, exit 70, in verify)
    text = MLP + "schedule keyed = mlp().streams(2).stream_by(t % 2).dispatch(hash(t, n = 2))\n"
    a = _mlp_inputs()
    want = a["X"].astype(np.float64) @ a["W1"] @ a["W2"]
    m = ptowsp.parse(text, "tp_mlp.wsp")
    for target in ("ref", "cpu_sim"):
        p = m.compile(target, schedule="keyed", mesh={"tp": tp})
        y = p.run(trace=target == "cpu_sim", **a)["Y"]
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    ev = p.trace.events
    names = p.trace.kernel_names
    streams: dict[str, set] = {}
    for e in ev[ev["worker"] >= 0]:
        kernel = names[e["kernel"]]
        coords = e["coords"]
        if kernel == "down":  # down[t, f] on the device holding W2's rows f*FB..: stream t % 2
            key, device, s = "down", coords[1] * 32 // (256 // tp), coords[0] % 2
        elif kernel.startswith("mesh_"):  # a tile of the allreduce, its device first
            key, device, s = "comm", coords[0] if tp > 1 else 0, 0
        else:
            continue
        # each device has its own streams (docs/running.md, "Meshes"): device d's s is d*2 + s
        assert e["stream"] == device * 2 + s, (kernel, coords.tolist(), e["stream"])
        streams.setdefault(key, set()).add(int(e["stream"]) % 2)
    assert streams["comm"] == {0} and streams["down"] == {0, 1}
