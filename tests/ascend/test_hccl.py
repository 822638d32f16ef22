"""The Ascend tree of a mesh, run end to end on the host with a stand-in HCCL
(stub_hccl/hccl/hccl.h: ranks as processes meeting through files, every misuse an error).

The modules here are what the device lowering makes of a mesh program (docs/distributed.md,
"How it is built (plan)"; the contract of `ir/nodes.py`): every tensor has the device
dimension first, every task a `Task.device`, and each collective is tile tasks (one per
device and tile of the destination) whose kernel has a `Kernel.comm` and reads the group's
source tiles in rank order. They are written here as plain single-device programs in that
form, then given their mesh, devices and `Comm`s with `dataclasses.replace`, so that the same
program is also ref's (which runs it as one device: the oracle) and an independent NumPy
formula of the collective checks both.

Each tree runs as the launch script runs it (scripts/run_ranks.sh, one process per rank),
compiled as test_end_to_end compiles trees (host + expander + the tree's dispatcher and
AICore kernels against the stand-in ACL and ascendc_cpu), with the stand-in HCCL added.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp import sym
from ptowsp.ir import nodes as N
from ptowsp.ir.visit import map_lists
from tests.mesh_programs import doc_tp_mlp

from .hostrun import build_host
from .streams import CXX, HERE, run_compiler

pytestmark = [pytest.mark.cc]

STUB_HCCL = HERE / "stub_hccl"


# ---- modules in the device lowering's form ---------------------------------------------------

def _with_devices(stmts, device_of):
    """`stmts` with each task's `device` set by `device_of(task)`."""
    out = []
    for st in stmts:
        if isinstance(st, N.Task):
            out.append(dataclasses.replace(st, device=device_of(st)))
        else:
            out.append(map_lists(st, lambda body: _with_devices(body, device_of)))
    return tuple(out)


def mesh_module(tmp: Path, source: str, axes: dict, comms: dict):
    """(the plain module's IR, the mesh module's IR): `source` parsed; the mesh `axes` (in
    `Module.devices`, as `ir/devices.py` leaves them); each
    task's device its first coordinate; the kernels named in `comms` given their `Comm`."""
    path = tmp / "prog.wsp"
    path.write_text(source)
    ir = ptowsp.load(str(path)).ir
    devices = N.Devices(tuple(axes.items()), ())
    kernels = tuple(dataclasses.replace(k, comm=comms[k.source]) if k.source in comms else k
                    for k in ir.kernels)
    schedules = tuple(dataclasses.replace(s, body=_with_devices(s.body, lambda t: t.coords[0]))
                      for s in ir.schedules)
    return ir, dataclasses.replace(ir, devices=devices, kernels=kernels, schedules=schedules)


def comm(kind, over, group, op=None):
    return N.Comm(kind, over, group, sym.const(0), op)


def program(p: int, collective: str, src: str, dst: str, tiles: str, kernel: str, shape: tuple):
    """A three-step program on `p` devices: A = 2 X on each device, the collective's tile tasks
    from A into B, Y = B + 1 on each device. `shape`: X's local shape (A's), `src`/`dst` A's and
    B's local shapes as WSP text, `tiles`: the loop of the collective's tasks."""
    r, c = shape
    return f"""
module mesh_{collective}
input   X: f32[{p}, {r}, {c}]
scratch A: f32[{p}, {src}]
scratch B: f32[{p}, {dst}]
output  Y: f32[{p}, {dst}]

kernel pre(x: In[Tile[{r}, {c}, f32]], a: Out[Tile[{r}, {c}, f32]]) {{
    store(a, x * 2.0)
}}
{kernel}
axis devs = Dense[{p}]
workload w() {{
    for d in P(devs) {{
        pre[d](x = X[d], a = A[d])
    }}
{tiles}
    for d in P(devs) {{
        post[d](b = B[d], y = Y[d])
    }}
}}

schedule main = w()
"""


def post_kernel(rows, cols):
    return f"""
kernel post(b: In[Tile[{rows}, {cols}, f32]], y: Out[Tile[{rows}, {cols}, f32]]) {{
    store(y, b + 1.0)
}}
"""


def reduce_kernel(p, rows, cols):
    params = ", ".join(f"s{q}: In[Tile[{rows}, {cols}, f32]]" for q in range(p))
    total = " + ".join(f"s{q}" for q in range(p))
    return f"""
kernel red({params}, o: Out[Tile[{rows}, {cols}, f32]]) {{
    store(o, {total})
}}
"""


def copy_kernel(rows, cols):
    return f"""
kernel cp(s: In[Tile[{rows}, {cols}, f32]], o: Out[Tile[{rows}, {cols}, f32]]) {{
    store(o, s)
}}
"""


R, C = 8, 16   # the local shape of X and A


def allreduce_case(p):
    """B[d] = sum over q of A[q], in row blocks of 2 (several tile tasks per device: one call)."""
    srcs = ", ".join(f"s{q} = A[{q}, t*2 : t*2 + 2, :]" for q in range(p))
    tiles = f"""    for d, t in P(devs, {R // 2}) {{
        red[d, t]({srcs}, o = B[d, t*2 : t*2 + 2, :])
    }}"""
    src = program(p, "allreduce", f"{R}, {C}", f"{R}, {C}", tiles,
                  reduce_kernel(p, 2, C) + post_kernel(R, C), (R, C))

    def expect(a):
        return np.stack([a.sum(axis=0)] * p)
    return src, {"red": comm("allreduce", "tp", p, "sum")}, expect


def allgather_case(p, dim):
    """A sharded along local dimension `dim` (X's shape is the shard), B = every shard."""
    if dim == 0:
        tiles = f"""    for d, q in P(devs, devs) {{
        cp[d, q](s = A[q], o = B[d, q*{R} : q*{R} + {R}, :])
    }}"""
        dst = (R * p, C)
    else:
        tiles = f"""    for d, q in P(devs, devs) {{
        cp[d, q](s = A[q], o = B[d, :, q*{C} : q*{C} + {C}])
    }}"""
        dst = (R, C * p)
    src = program(p, "allgather", f"{R}, {C}", f"{dst[0]}, {dst[1]}", tiles,
                  copy_kernel(R, C) + post_kernel(*dst), (R, C))

    def expect(a):
        return np.stack([np.concatenate(list(a), axis=dim)] * p)
    return src, {"cp": comm("allgather", "tp", p)}, expect


def reduce_scatter_case(p, dim):
    """B[d] = block d (along `dim`) of the sum of the A[q]."""
    if dim == 0:
        n = R // p
        srcs = ", ".join(f"s{q} = A[{q}, d*{n} : d*{n} + {n}, :]" for q in range(p))
        dst = (n, C)
    else:
        n = C // p
        srcs = ", ".join(f"s{q} = A[{q}, :, d*{n} : d*{n} + {n}]" for q in range(p))
        dst = (R, n)
    tiles = f"""    for d in P(devs) {{
        red[d]({srcs}, o = B[d])
    }}"""
    src = program(p, "reduce_scatter", f"{R}, {C}", f"{dst[0]}, {dst[1]}", tiles,
                  reduce_kernel(p, *dst) + post_kernel(*dst), (R, C))

    def expect(a):
        return np.stack(np.split(a.sum(axis=0), p, axis=dim))
    return src, {"red": comm("reduce_scatter", "tp", p, "sum")}, expect


def all_to_all_case(p):
    """A sharded along rows (local [R, C]), B along columns (local [R p, C / p]):
    B[d, q*R + i, j] = A[q, i, d*C/p + j]."""
    n = C // p
    tiles = f"""    for d, q in P(devs, devs) {{
        cp[d, q](s = A[q, :, d*{n} : d*{n} + {n}], o = B[d, q*{R} : q*{R} + {R}, :])
    }}"""
    src = program(p, "all_to_all", f"{R}, {C}", f"{R * p}, {n}", tiles,
                  copy_kernel(R, n) + post_kernel(R * p, n), (R, C))

    def expect(a):
        return np.stack([np.concatenate([a[q][:, d * n:(d + 1) * n] for q in range(p)], axis=0)
                         for d in range(p)])
    return src, {"cp": comm("all_to_all", "tp", p)}, expect


# ---- building and running -------------------------------------------------------------------

def build_mesh(tmp: Path, mesh_ir):
    """The tree of `mesh_ir` and its host binary, with the stand-in HCCL."""
    return build_host(tmp, mesh_ir, None, includes=[STUB_HCCL])


def run_ranks(tree: Path, exe: Path, data: Path, *args, env=None, timeout=120):
    """scripts/run_ranks.sh of the tree, on `exe`; the stand-in HCCL's files under data."""
    hccl = data / "hccl"
    hccl.mkdir(parents=True, exist_ok=True)
    full = dict(os.environ, WSP_MAIN=str(exe), TMPDIR=str(data), WSP_STUB_HCCL_DIR=str(hccl),
                WSP_STUB_HCCL_TIMEOUT="20", WSP_RENDEZVOUS_TIMEOUT="20", **(env or {}))
    return subprocess.run(["bash", str(tree / "scripts/run_ranks.sh"), "-d", str(data), *args],
                          capture_output=True, text=True, env=full, timeout=timeout)


def merged(tree: Path, data: Path, name: str):
    done = subprocess.run([sys.executable, str(tree / "scripts/merge_ranks.py"), "-d", str(data)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return np.load(data / "output" / f"{name}.npy")


def run_case(tmp: Path, source: str, axes: dict, comms: dict, inputs: dict):
    """Build, run every rank, merge: (the ref outputs, the tree's outputs, run_ranks' output)."""
    plain, mesh_ir = mesh_module(tmp, source, axes, comms)
    ref = ptowsp.parse(source).compile("ref").run(**inputs)
    tree, exe = build_mesh(tmp, mesh_ir)
    data = tmp / "data"
    (data / "input").mkdir(parents=True)
    (data / "output").mkdir()
    for name, a in inputs.items():
        np.save(data / "input" / f"{name}.npy", a)
    done = run_ranks(tree, exe, data)
    assert done.returncode == 0, done.stdout + done.stderr
    got = {name: merged(tree, data, name) for name in ref}
    return ref, got, done.stdout


CASES = {
    "allreduce": allreduce_case,
    "allgather-0": lambda p: allgather_case(p, 0),
    "allgather-1": lambda p: allgather_case(p, 1),
    "reduce_scatter-0": lambda p: reduce_scatter_case(p, 0),
    "reduce_scatter-1": lambda p: reduce_scatter_case(p, 1),
    "all_to_all": all_to_all_case,
}


@pytest.mark.parametrize("p", [2, 4])
@pytest.mark.parametrize("case", sorted(CASES))
def test_collective_on_ranks(tmp_path, case, p):
    source, comms, expect = CASES[case](p)
    x = np.random.default_rng(7).standard_normal((p, R, C)).astype(np.float32)
    ref, got, out = run_case(tmp_path, source, {"tp": p}, comms, {"X": x})
    want = expect(2.0 * x) + 1.0  # the program: A = 2 X, the collective, Y = B + 1
    np.testing.assert_allclose(ref["Y"], want, rtol=1e-6, atol=1e-6)  # the oracle itself
    np.testing.assert_allclose(got["Y"], ref["Y"], rtol=1e-6, atol=1e-6)
    # one HCCL call per collective on each rank, whatever its tile tasks
    for r in range(p):
        assert re.search(rf"rank {r}: wsp: .*rank {r} of {p}: .* 1 collectives", out), out


def test_two_axes_groups(tmp_path):
    """mesh dp = 2, tp = 2: an allreduce over tp runs in the groups {0, 1} and {2, 3} (one
    communicator per group), then an allgather over dp in {0, 2} and {1, 3}."""
    src = f"""
module mesh_2d
input   X: f32[4, {R}, {C}]
scratch A: f32[4, {R}, {C}]
scratch B: f32[4, {R}, {C}]
scratch G: f32[4, {2 * R}, {C}]
output  Y: f32[4, {2 * R}, {C}]
{reduce_kernel(2, R, C)}{copy_kernel(R, C)}{post_kernel(2 * R, C)}
kernel pre(x: In[Tile[{R}, {C}, f32]], a: Out[Tile[{R}, {C}, f32]]) {{
    store(a, x * 2.0)
}}
axis devs = Dense[4]
workload w() {{
    for d in P(devs) {{
        pre[d](x = X[d], a = A[d])
    }}
    for d in P(devs) {{                              // the group along tp: d / 2 * 2 + 0, 1
        red[d](s0 = A[d / 2 * 2], s1 = A[d / 2 * 2 + 1], o = B[d])
    }}
    for d, q in P(devs, 2) {{                        // the group along dp: d % 2 + 0, 2
        cp[d, q](s = B[d % 2 + q * 2], o = G[d, q*{R} : q*{R} + {R}, :])
    }}
    for d in P(devs) {{
        post[d](b = G[d], y = Y[d])
    }}
}}

schedule main = w()
"""
    comms = {"red": comm("allreduce", "tp", 2, "sum"), "cp": comm("allgather", "dp", 2)}
    x = np.random.default_rng(3).standard_normal((4, R, C)).astype(np.float32)
    ref, got, out = run_case(tmp_path, src, {"dp": 2, "tp": 2}, comms, {"X": x})
    a = 2.0 * x
    b = np.stack([a[d // 2 * 2] + a[d // 2 * 2 + 1] for d in range(4)])
    want = np.stack([np.concatenate([b[d % 2], b[d % 2 + 2]]) for d in range(4)]) + 1.0
    np.testing.assert_allclose(ref["Y"], want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got["Y"], ref["Y"], rtol=1e-6, atol=1e-6)
    assert out.count(" 2 collectives") == 4, out


def tp_mlp(p: int) -> str:
    """docs/distributed.md's tensor-parallel MLP as the device lowering lays it out on tp = p:
    W1 split by columns, W2 by rows, each device's addend of Zp, then the allreduce."""
    t, d, f, tb, fb = 8, 16, 32, 4, 4
    fl = f // p
    srcs = ", ".join(f"s{q} = Zp[{q}, r*{tb} : r*{tb} + {tb}, :]" for q in range(p))
    return f"""
module tp_mlp
input   X:  f32[{p}, {t}, {d}]
input   W1: f32[{p}, {d}, {fl}]
input   W2: f32[{p}, {fl}, {d}]
scratch H:  f32[{p}, {t}, {fl}]
scratch Zp: f32[{p}, {t}, {d}]
output  Y:  f32[{p}, {t}, {d}]

kernel up(x: In[Tile[{tb}, {d}, f32]], w: In[Tile[{d}, {fb}, f32]], h: Out[Tile[{tb}, {fb}, f32]]) {{
    store(h, matmul(x, w))
}}
kernel down(h: In[Tile[{tb}, {fb}, f32]], w: In[Tile[{fb}, {d}, f32]], acc: InOut[Tile[{tb}, {d}, f32]]) {{
    store(acc, acc + matmul(h, w))
}}
{reduce_kernel(p, tb, d)}
axis devs = Dense[{p}]
workload mlp() {{
    for dv, r, c in P(devs, {t // tb}, {fl // fb}) {{
        up[dv, r, c](x = X[dv, r*{tb} : r*{tb} + {tb}, :], w = W1[dv, :, c*{fb} : c*{fb} + {fb}],
                     h = H[dv, r*{tb} : r*{tb} + {tb}, c*{fb} : c*{fb} + {fb}])
    }}
    for dv, r in P(devs, {t // tb}) {{
        for c in P.seq({fl // fb}) {{
            down[dv, r, c](h = H[dv, r*{tb} : r*{tb} + {tb}, c*{fb} : c*{fb} + {fb}],
                           w = W2[dv, c*{fb} : c*{fb} + {fb}, :], acc = Zp[dv, r*{tb} : r*{tb} + {tb}, :])
        }}
    }}
    for dv, r in P(devs, {t // tb}) {{
        red[dv, r]({srcs}, o = Y[dv, r*{tb} : r*{tb} + {tb}, :])
    }}
}}

schedule main = mlp()
"""


@pytest.mark.parametrize("p", [2, 4])
def test_tensor_parallel_mlp(tmp_path, p):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w1 = rng.standard_normal((16, 32)).astype(np.float32) / 4
    w2 = rng.standard_normal((32, 16)).astype(np.float32) / 4
    inputs = {"X": np.stack([x] * p), "W1": np.stack(np.split(w1, p, axis=1)),
              "W2": np.stack(np.split(w2, p, axis=0))}
    ref, got, out = run_case(tmp_path, tp_mlp(p), {"tp": p},
                             {"red": comm("allreduce", "tp", p, "sum")}, inputs)
    want = np.stack([x.astype(np.float64) @ w1 @ w2] * p)
    np.testing.assert_allclose(ref["Y"], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got["Y"], ref["Y"], rtol=1e-5, atol=1e-5)
    assert out.count(" 1 collectives") == p, out


def _built(tmp_path, p=2):
    source, comms, _ = allreduce_case(p)
    _, mesh_ir = mesh_module(tmp_path, source, {"tp": p}, comms)
    tree, exe = build_mesh(tmp_path, mesh_ir)
    data = tmp_path / "data"
    (data / "input").mkdir(parents=True)
    (data / "output").mkdir()
    np.save(data / "input" / "X.npy", np.ones((p, R, C), np.float32))
    return tree, exe, data


def test_failures_name_the_rank_and_the_collective(tmp_path):
    tree, exe, data = _built(tmp_path)
    # an HCCL call that fails: exit 3, the call, the collective's task and the rank named
    done = run_ranks(tree, exe, data, env={"WSP_ACL_FAIL": "HcclAllReduce"})
    assert done.returncode == 3, done.stdout + done.stderr
    assert re.search(r"rank \d: wsp: rank \d: HcclAllReduce for `red\[d, t\]` \(prog.wsp:\d+:\d+\) "
                     r"failed with HCCL error 4", done.stdout), done.stdout
    # started without the launch script, or with another mesh size: a usage error
    env = dict(os.environ)
    for k in ("RANK_ID", "RANK_SIZE", "WSP_RENDEZVOUS"):
        env.pop(k, None)
    alone = subprocess.run([str(exe), "-d", str(data)], capture_output=True, text=True, env=env,
                           timeout=60)
    assert alone.returncode == 2
    assert "this program runs on a mesh of 2 devices, one process each: start it with " \
           "scripts/run_ranks.sh" in alone.stderr
    env.update(RANK_ID="0", RANK_SIZE="4", WSP_RENDEZVOUS=str(data))
    wrong = subprocess.run([str(exe), "-d", str(data)], capture_output=True, text=True, env=env,
                           timeout=60)
    assert wrong.returncode == 2 and "RANK_SIZE is 4, but the mesh has 2 devices" in wrong.stderr
    env.update(RANK_ID="2", RANK_SIZE="2")
    wrong = subprocess.run([str(exe), "-d", str(data)], capture_output=True, text=True, env=env,
                           timeout=60)
    assert wrong.returncode == 2 and "RANK_ID 2 is not a device of the mesh" in wrong.stderr


def test_every_call_checked_and_released(tmp_path):
    """Each rank: the communicator made from the root info, one call, destroyed before the
    device is reset; every HCCL call in main.asc and wsp_mesh.h has its result checked."""
    tree, exe, data = _built(tmp_path)
    log = data / "acl.log"
    done = run_ranks(tree, exe, data, env={"WSP_ACL_LOG": str(log)})
    assert done.returncode == 0, done.stdout
    calls = log.read_text().split()
    assert calls.count("HcclGetRootInfo") == 1          # the group's first rank
    assert calls.count("HcclCommInitRootInfo") == 2
    assert calls.count("HcclAllReduce") == 2            # one per rank for 4 tile tasks each
    assert calls.count("HcclCommDestroy") == 2
    # the ranks append to one log: each destroy comes before a device reset
    assert calls.index("HcclCommDestroy") < calls.index("aclrtResetDevice")
    text = (tree / "host/main.asc").read_text() + (tree / "host/wsp_mesh.h").read_text()
    for call in re.findall(r"\b(Hccl[A-Z]\w+)\(", text):
        if call in ("HcclResult", "HcclComm"):
            continue
        for m in re.finditer(rf"\b{call}\(", text):
            line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.start())]
            assert re.search(r"(HcclResult e = |e = |!= HCCL_SUCCESS|\(e = )", line), line


# ---- the stand-in itself: misuse is an error, never a silent answer --------------------------

DRIVER = HERE / "hccl_driver.cpp"


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    exe = tmp_path_factory.mktemp("hccl") / "hccl_driver"
    run_compiler([CXX, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror",
                  f"-I{HERE / 'stub_acl'}", f"-I{STUB_HCCL}", str(DRIVER), "-o", str(exe)])
    return exe


def drive(exe, tmp: Path, scenario: str, n: int = 2, streams: str = "sync"):
    """Run `scenario` of hccl_driver.cpp on n ranks at once: [(status, stdout + stderr)];
    `streams`: the stub ACL's stream order ($WSP_STUB_STREAMS)."""
    base = dict(os.environ, WSP_STUB_HCCL_DIR=str(tmp), WSP_STUB_HCCL_TIMEOUT="3",
                WSP_STUB_STREAMS=streams)
    root = tmp / "root.bin"
    procs = [subprocess.Popen([str(exe), scenario, str(r), str(n), str(root)], env=base,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(n)]
    return [(p.wait(timeout=60), p.stdout.read()) for p in procs]


@pytest.mark.parametrize("n", [2, 4])
def test_stand_in_semantics(driver, tmp_path, n):
    """Each call's documented result (hccl_driver.cpp prints them; NumPy here)."""
    res = drive(driver, tmp_path, "semantics", n)
    x = [np.arange(8, dtype=np.float32) * (r + 1) + r for r in range(n)]
    for r, (status, out) in enumerate(res):
        assert status == 0, out
        got = {k: np.array(v.split(), np.float32) for k, v in re.findall(r"(\w+): ([-\d. ]+)\n", out)}
        np.testing.assert_array_equal(got["allreduce"], sum(x))
        np.testing.assert_array_equal(got["max"], np.maximum.reduce(x))
        np.testing.assert_array_equal(got["allgather"], np.concatenate(x))
        np.testing.assert_array_equal(got["reduce_scatter"], np.split(sum(x), n)[r])
        np.testing.assert_array_equal(got["alltoall"],
                                      np.concatenate([np.split(x[q], n)[r] for q in range(n)]))


def test_stand_in_runs_a_call_with_its_stream(driver, tmp_path):
    """In the default model a call only queues its exchange: the result appears when the
    stream runs (aclrtSynchronizeStream), and a disagreement is the stream's error."""
    res = drive(driver, tmp_path, "stream", 2, streams="late")
    x = [np.arange(8, dtype=np.float32) * (r + 1) + r for r in range(2)]
    for status, out in res:
        assert status == 0, out
        got = {k: np.array(v.split(), np.float32) for k, v in re.findall(r"(\w+): ([-\d. ]+)\n", out)}
        np.testing.assert_array_equal(got["queued"], -np.ones(8, np.float32))
        np.testing.assert_array_equal(got["allreduce"], sum(x))
    (tmp_path / "late").mkdir()
    res = drive(driver, tmp_path / "late", "count_late", 2, streams="late")
    outs = "".join(o for _, o in res)
    assert "called HcclAllReduce(count 8, FP32, op 0), rank 1 HcclAllReduce(count 4" in outs, outs
    assert "aclrtSynchronizeStream -> 507901" in outs and res[0][0] == 1, outs


@pytest.mark.parametrize("scenario, status, message", [
    ("uninitialised", 1, "HcclAllReduce on a communicator that is not initialised"),
    ("count", 1, "called HcclAllReduce(count 8, FP32, op 0), rank 1 HcclAllReduce(count 4, FP32"),
    ("dtype", 1, "HcclAllGather(count 8, FP32, op -1), rank 1 HcclAllGather(count 8, INT32"),
    ("before_device", 15, "HcclCommInitRootInfo before aclrtSetDevice"),
    ("other_stream", 15, "the stream belongs to device 7, the communicator to device 0"),
    ("destroy_twice", 1, "HcclCommDestroy on a communicator that is not initialised"),
    ("reset_live", 0, "aclrtResetDevice(0) with 1 communicator(s) not destroyed"),
    ("absent", 9, "HcclAllReduce #1: not every rank of the communicator arrived"),
])
def test_stand_in_refuses_misuse(driver, tmp_path, scenario, status, message):
    res = drive(driver, tmp_path, scenario)
    outs = "".join(o for _, o in res)
    assert message in outs, outs
    assert res[0][0] == status, outs


# ---- programs lowered by wspc itself (ir/devices.py), global arrays in and out --------------

TP_MLP = doc_tp_mlp(32, 64, 8, 8)


def run_lowered(tmp: Path, source: str, mesh: dict, inputs: dict, bind: dict):
    """`source` compiled by wspc for ascend_npu on `mesh` (the driver's device lowering and
    optimiser), run on its ranks with the global `inputs` scattered by layout
    (ir/device_arrays.py) and the outputs gathered (the tree's merge_ranks.py): (the tree's
    outputs, ref's, stdout)."""
    from ptowsp.ir.device_arrays import scatter

    path = tmp / "prog.wsp"
    path.write_text(source)
    module = ptowsp.load(str(path))
    project = module.compile(target="ascend_npu", mesh=mesh)
    ref = module.compile("ref", mesh=mesh).run(bind=bind, **inputs)
    lowered = _lowered_ir(module, mesh)
    tree, exe = build_mesh(tmp, lowered)
    assert (tree / "host/main.asc").read_text() == project.files["host/main.asc"]
    data = tmp / "data"
    (data / "input").mkdir(parents=True)
    (data / "output").mkdir()
    for name, a in inputs.items():
        np.save(data / "input" / f"{name}.npy", scatter(lowered.devices, name, a))
    done = run_ranks(tree, exe, data, *(f"{k}={v}" for k, v in bind.items()))
    assert done.returncode == 0, done.stdout + done.stderr
    got = {name: merged(tree, data, name) for name in ref}  # gathered by merge_ranks.py
    return got, ref, done.stdout


def _lowered_ir(module, mesh):
    """The IR the ascend_npu target gets from the driver for `mesh` (lowered, optimised)."""
    from ptowsp import driver

    return driver.optimize(module.ir, mesh=mesh)[0]


def test_docs_tensor_parallel_mlp(tmp_path):
    """docs/distributed.md's MLP on tp = 4, lowered by wspc: equal to ref and to NumPy."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((24, 32)).astype(np.float32)  # T = 24: the allreduce tile partial
    w1 = (rng.standard_normal((32, 64)) / 6).astype(np.float32)
    w2 = (rng.standard_normal((64, 32)) / 6).astype(np.float32)
    got, ref, out = run_lowered(tmp_path, TP_MLP, {"tp": 4}, {"X": x, "W1": w1, "W2": w2},
                                {"T": 24})
    want = x.astype(np.float64) @ w1 @ w2
    np.testing.assert_allclose(ref["Y"], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got["Y"], ref["Y"], rtol=1e-5, atol=1e-5)
    assert out.count(" 1 collectives") == 4, out


def collectives(dp: int, tp: int, r: int = 4, c: int = 8) -> str:
    """Every collective over tp (both dimensions where it matters, sum and max, a replicated
    source, a relayout that is an allreduce), and an allgather over dp when dp > 1."""
    lines = ["module coll", f"mesh dp = {dp}, tp = {tp}",
             f"input   P:  f32[{tp * r}, {c}] @ [S(tp), R]",
             f"output  G:  f32[{tp * r}, {c}]",
             f"input   Pc: f32[{r}, {tp * c}] @ [R, S(tp)]",
             f"output  Gc: f32[{r}, {tp * c}]",
             f"input   A:  f32[{tp * r}, {tp * c}] @ [S(tp), R]",
             f"output  B:  f32[{tp * r}, {tp * c}] @ [R, S(tp)]",
             f"scratch Z:  f32[{r}, {c}] @ [R, R] partial(tp)",
             f"output  Y:  f32[{r}, {c}]",
             f"output  Ym: f32[{r}, {c}]",
             f"output  S0: f32[{r}, {c}] @ [S(tp), R]",
             f"output  S1: f32[{r}, {c}] @ [R, S(tp)]",
             f"input   Q:  f32[{r}, {c}]",
             f"output  V:  f32[{r}, {c}]",
             f"output  L:  f32[{r}, {c}]",
             f"kernel fill(x: In[Tile[{r}, {c}, f32]], z: Out[Tile[{r}, {c}, f32]]) {{ store(z, x) }}"]
    body = [f"    for i in P(Dense[{tp}]) {{ fill[i](x = P[i*{r} : i*{r} + {r}, :], z = Z[:, :]) }}",
            "    allgather(P, into = G, over = tp)",
            "    allgather(Pc, into = Gc, over = tp)",
            "    all_to_all(A, into = B, over = tp)",
            "    allreduce(Z, into = Y, over = tp)",
            "    allreduce(Z, into = Ym, over = tp, op = max)",
            "    reduce_scatter(Z, into = S0, over = tp, dim = 0)",
            "    reduce_scatter(Z, into = S1, over = tp, dim = 1)",
            "    allreduce(Q, into = V, over = tp)",
            "    relayout(Z, into = L)"]
    if dp > 1:
        lines += [f"input   M:  f32[{dp * r}, {c}] @ [S(dp), R]", f"output  M1: f32[{dp * r}, {c}]"]
        body += ["    allgather(M, into = M1, over = dp)"]
    return "\n".join(lines + ["workload w() {"] + body + ["}", "schedule main = w()", ""])


@pytest.mark.parametrize("dp, tp", [(1, 2), (1, 4), (2, 2)])
def test_every_collective_lowered_by_wspc(tmp_path, dp, tp):
    r, c = 4, 8
    rng = np.random.default_rng(dp * 10 + tp)
    inputs = {"P": rng.standard_normal((tp * r, c)), "Pc": rng.standard_normal((r, tp * c)),
              "A": rng.standard_normal((tp * r, tp * c)), "Q": rng.standard_normal((r, c))}
    if dp > 1:
        inputs["M"] = rng.standard_normal((dp * r, c))
    inputs = {k: v.astype(np.float32) for k, v in inputs.items()}
    mesh = {"dp": dp, "tp": tp}
    got, ref, out = run_lowered(tmp_path, collectives(dp, tp, r, c), mesh, inputs, {})
    addends = np.split(inputs["P"], tp)  # fill: the addends of Z are P's shards
    total = np.sum(addends, axis=0, dtype=np.float32)
    want = {"G": inputs["P"], "Gc": inputs["Pc"], "B": inputs["A"], "Y": total,
            "Ym": np.maximum.reduce(addends), "S0": total, "S1": total, "V": inputs["Q"] * tp,
            "L": total}
    if dp > 1:
        want["M1"] = inputs["M"]
    assert set(ref) == set(want)
    for name, w in want.items():
        np.testing.assert_allclose(ref[name], w, rtol=1e-5, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-6, atol=1e-6, err_msg=name)
    calls = 10 if dp > 1 else 9
    assert out.count(f" {calls} collectives") == dp * tp, out


def test_tree_scripts_scatter_run_gather_verify(tmp_path):
    """The tree's own scripts around the ranks: gen_data.py (global inputs scattered by
    wsp_layout.py, ref's global outputs expected), run_ranks.sh, merge_ranks.py (rows joined
    and gathered), verify_result.py."""
    path = tmp_path / "prog.wsp"
    path.write_text(TP_MLP)
    module = ptowsp.load(str(path))
    tree, exe = build_mesh(tmp_path, _lowered_ir(module, {"tp": 4}))
    data = tmp_path / "data"
    done = subprocess.run([sys.executable, str(tree / "scripts/gen_data.py"), "--data", str(data),
                           "--target", "ref", "T=16"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert np.load(data / "input" / "W1.npy").shape == (4, 32, 16)   # [devices, D, F / 4]
    assert np.load(data / "global" / "W1.npy").shape == (32, 64)
    done = run_ranks(tree, exe, data, "T=16")
    assert done.returncode == 0, done.stdout + done.stderr
    merged(tree, data, "Y")
    assert np.load(data / "output" / "Y.npy").shape == (16, 32)
    done = subprocess.run([sys.executable, str(tree / "scripts/verify_result.py"), "--data",
                           str(data)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
