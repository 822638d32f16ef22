"""The Ascend tree of a mesh: collectives on streams of their own, overlapping the computation
that does not need them, and `relayout` over two mesh axes as one-axis steps (docs/ascend.md,
"A mesh on Ascend").

Programs are compiled by wspc for ascend_npu (the driver's device lowering), built and run on
their ranks as test_hccl.py runs them, against the stand-in ACL whose streams are modelled
(stub_acl/acl/acl.h): `late` runs a stream only when something waits for it, so a segment
that reads a collective's result without waiting for it sees the old data; `early` runs the
other streams first, so a collective that does not wait for the segment making its source
reads the old source. Each run is checked against ref and an independent NumPy formula; the
tree with a wait removed is checked to go wrong, so the waits are what makes it right.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import ptowsp

from .hostrun import compile_host
from .test_hccl import STUB_HCCL, _lowered_ir, build_mesh, merged, run_ranks

pytestmark = [pytest.mark.cc]

R, C = 8, 16


def overlap_program(p: int) -> str:
    """Zp's addends (each device doubles its rows of X), their allreduce into Z, then Q from W
    on every device (needs neither Zp nor Z: it may run while the allreduce does), then
    Y = Z + Q."""
    return f"""module overlap
mesh tp = {p}
input   X:  f32[{p * R}, {C}] @ [S(tp), R]
input   W:  f32[{4 * R}, {C}]
scratch Zp: f32[{R}, {C}] @ [R, R] partial(tp)
scratch Z:  f32[{R}, {C}]
scratch Q:  f32[{R}, {C}]
output  Y:  f32[{R}, {C}]
kernel part(x: In[Tile[{R}, {C}, f32]], z: Out[Tile[{R}, {C}, f32]]) {{ store(z, x * 2.0) }}
kernel indep(w: In[Tile[{R}, {C}, f32]], q: InOut[Tile[{R}, {C}, f32]]) {{ store(q, q + exp(w)) }}
kernel comb(z: In[Tile[{R}, {C}, f32]], q: In[Tile[{R}, {C}, f32]], y: Out[Tile[{R}, {C}, f32]]) {{
    store(y, z + q)
}}
workload w() {{
    for i in P(Dense[{p}]) {{ part[i](x = X[i*{R} : i*{R} + {R}, :], z = Zp[:, :]) }}
    allreduce(Zp, into = Z, over = tp)
    for k in P.seq(Dense[4]) {{ indep[k](w = W[k*{R} : k*{R} + {R}, :], q = Q[:, :]) }}
    comb(z = Z[:, :], q = Q[:, :], y = Y[:, :])
}}
schedule main = w()
"""


def overlap_expected(x, w, p):
    z = sum(2.0 * x[i * R:(i + 1) * R].astype(np.float64) for i in range(p))
    q = sum(np.exp(w[k * R:(k + 1) * R].astype(np.float64)) for k in range(4))
    return z + q


def build(tmp: Path, source: str, mesh: dict, edit=None):
    """The tree of `source` on `mesh` and its host binary; `edit(main_asc_text)` changes the
    host program before it is compiled again (a wait taken out)."""
    path = tmp / "prog.wsp"
    path.write_text(source)
    module = ptowsp.load(str(path))
    lowered = _lowered_ir(module, mesh)
    tree, exe = build_mesh(tmp, lowered)
    if edit is not None:
        main = tree / "host/main.asc"
        text = main.read_text()
        changed = edit(text)
        assert changed != text
        main.write_text(changed)
        compile_host(exe, tree, [tmp / "dispatch_host.o"], [STUB_HCCL])
    return module, lowered, tree, exe


def run_tree(tmp: Path, built, inputs: dict, streams: str, name: str, bind=None):
    """Run the built tree on its ranks with the stand-in's stream order `streams`: (the
    tree's global outputs, run_ranks' result); each rank's ACL log in data/acl.<rank>.log."""
    from ptowsp.ir.device_arrays import scatter

    _, lowered, tree, exe = built
    data = tmp / name
    (data / "input").mkdir(parents=True)
    (data / "output").mkdir()
    for n, a in inputs.items():
        np.save(data / "input" / f"{n}.npy", scatter(lowered.devices, n, a))
    done = run_ranks(tree, exe, data, *(f"{k}={v}" for k, v in (bind or {}).items()),
                     env={"WSP_STUB_STREAMS": streams, "WSP_ACL_LOG": str(data / "acl.{rank}.log")})
    got = {}
    if done.returncode == 0:
        got = {n.stem: merged(tree, data, n.stem) for n in (data / "output" / "rank0").glob("*.npy")}
    return got, done, data


def inputs_of(p: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal((p * R, C)).astype(np.float32),
            "W": (rng.standard_normal((4 * R, C)) / 4).astype(np.float32)}


def overlapped_waves(log: list[str]) -> int:
    """Waves launched after a collective's call was issued that ran before the call did, in a
    rank's ACL log: the AICore stream runs its waves in launch order, so the n-th launch is the
    n-th wave run."""
    calls = [i for i, x in enumerate(log)
             if re.fullmatch(r"Hccl(AllReduce|AllGather|ReduceScatter|AlltoAll)", x)]
    ran = [i for i, x in enumerate(log) if re.fullmatch(r"@\d+:Hccl\w+", x)]
    waves = [i for i, x in enumerate(log) if x.endswith(":<<<wsp_dispatch>>>")]
    launches = [i for i, x in enumerate(log) if x == "<<<wsp_dispatch>>>"]
    return sum(1 for c, r in zip(calls, ran) for n, i in enumerate(launches)
               if i > c and waves[n] < r)


@pytest.mark.parametrize("p", [2, 4])
def test_collective_overlaps_independent_computation(tmp_path, p):
    """The allreduce runs on its own stream while the tasks that need neither its source nor
    its result run: in the stand-in's run order (late streams), a wave launched after the
    HCCL call was issued runs before the call does; the results equal ref's and NumPy's in
    both stream orders."""
    built = build(tmp_path, overlap_program(p), {"tp": p})
    inputs = inputs_of(p)
    ref = built[0].compile("ref", mesh={"tp": p}).run(**inputs)
    want = overlap_expected(inputs["X"], inputs["W"], p)
    np.testing.assert_allclose(ref["Y"], want, rtol=1e-5, atol=1e-5)
    for streams in ("late", "early"):
        got, done, data = run_tree(tmp_path, built, inputs, streams, streams)
        assert done.returncode == 0, done.stdout + done.stderr
        np.testing.assert_allclose(got["Y"], ref["Y"], rtol=1e-5, atol=1e-5, err_msg=streams)
        assert done.stdout.count(" 1 collectives") == p, done.stdout
        for r in range(p):
            log = (data / f"acl.{r}.log").read_text().split()
            ran = next(i for i, x in enumerate(log) if re.fullmatch(r"@\d+:HcclAllReduce", x))
            hccl_stream = log[ran].split(":")[0]
            waves = [i for i, x in enumerate(log) if x.endswith(":<<<wsp_dispatch>>>")]
            assert all(log[i].split(":")[0] != hccl_stream for i in waves)  # its own stream
            if streams == "late":
                # the 4 waves of `indep` were launched after the call was issued and ran
                # before it: nothing ordered them after the call
                assert overlapped_waves(log) == 4, log


def test_a_host_that_waits_at_once_shows_no_overlap(tmp_path):
    """The measure above has teeth: a host that synchronises each collective's stream as soon
    as it is issued (the tree before the streams) overlaps nothing."""
    p = 2
    built = build(tmp_path, overlap_program(p), {"tp": p}, lambda text: text.replace(
        "    r.done.push_back(done);\n",
        "    r.done.push_back(done);\n    WSP_ACL(aclrtSynchronizeStream(r.comm_streams[r.last_axis]));\n"))
    got, done, data = run_tree(tmp_path, built, inputs_of(p), "late", "late")
    assert done.returncode == 0, done.stdout + done.stderr
    assert overlapped_waves((data / "acl.0.log").read_text().split()) == 0


def _no_result_wait(text: str) -> str:
    """main.asc with the segments' wait for a collective's result taken out."""
    return text.replace("static int wait_collective(WspRun &r, int64_t j) {",
                        "static int wait_collective(WspRun &r, int64_t j) {\n    return 0;")


def _no_source_wait(text: str) -> str:
    """main.asc with the HCCL stream's wait for the segment that made the source taken out."""
    return text.replace("if (i == 0 && (rc = wsp_stream_after(stream, ready))) return rc;",
                        "(void)ready;")


@pytest.mark.parametrize("edit, streams", [(_no_result_wait, "late"), (_no_source_wait, "early")],
                         ids=["result", "source"])
def test_a_missing_wait_is_caught(tmp_path, edit, streams):
    """Without the wait the stand-in's stream model gives wrong data: the waits are needed."""
    p = 2
    inputs = inputs_of(p, 3)
    built = build(tmp_path, overlap_program(p), {"tp": p}, edit)
    want = overlap_expected(inputs["X"], inputs["W"], p)
    got, done, _ = run_tree(tmp_path, built, inputs, streams, "run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not np.allclose(got["Y"], want, rtol=1e-4, atol=1e-4)


# ---- relayout over two axes -------------------------------------------------------------

def relayout_program(n: int = 8) -> str:
    """Every kind of two-axis relayout on mesh dp = 2, tp = 2: gathers over both axes, a swap
    of the axes between the dimensions, a move to one axis, a reduction over both axes (to
    replicated and to sharded), and one that keeps one partial axis."""
    h = n // 2
    return f"""module two
mesh dp = 2, tp = 2
input   M:  f32[{n}, {n}] @ [S(dp), S(tp)]
output  N:  f32[{n}, {n}]
output  Sw: f32[{n}, {n}] @ [S(tp), S(dp)]
output  Mv: f32[{n}, {n}] @ [S(tp), R]
output  Tr: f32[{n}, {n}] @ [R, S(dp)]
scratch Z:  f32[{h}, {h}] @ [R, R] partial(dp, tp)
output  Y:  f32[{h}, {h}]
output  S:  f32[{h}, {h}] @ [S(dp), S(tp)]
scratch K:  f32[{h}, {h}] @ [R, R] partial(dp)
output  Yk: f32[{h}, {h}] @ [S(tp), R]
kernel fill(x: In[Tile[{h}, {h}, f32]], z: Out[Tile[{h}, {h}, f32]]) {{ store(z, x) }}
workload w() {{
    relayout(M, into = N)
    relayout(M, into = Sw)
    relayout(M, into = Mv)
    relayout(M, into = Tr)
    for i, j in P(Dense[2], Dense[2]) {{
        fill[i, j](x = M[i*{h} : i*{h} + {h}, j*{h} : j*{h} + {h}], z = Z[:, :])
    }}
    relayout(Z, into = Y)
    relayout(Z, into = S)
    relayout(Z, into = K)
    relayout(K, into = Yk)
}}
schedule main = w()
"""


def test_relayout_over_two_axes(tmp_path):
    """Each relayout made of one-axis steps (HCCL calls, copies, slices) on a 2 x 2 mesh: the
    tree's outputs equal ref's and NumPy's, in both stream orders."""
    n = 8
    built = build(tmp_path, relayout_program(n), {"dp": 2, "tp": 2})
    m = np.random.default_rng(4).standard_normal((n, n)).astype(np.float32)
    ref = built[0].compile("ref", mesh={"dp": 2, "tp": 2}).run(M=m)
    h = n // 2
    total = sum(m[i * h:(i + 1) * h, j * h:(j + 1) * h].astype(np.float64)
                for i in range(2) for j in range(2))
    want = {"N": m, "Sw": m, "Mv": m, "Tr": m, "Y": total, "S": total, "Yk": total}
    assert set(ref) == set(want)
    for name, w in want.items():
        np.testing.assert_allclose(ref[name], w, rtol=1e-5, atol=1e-5, err_msg=name)
    for streams in ("late", "early"):
        got, done, _ = run_tree(tmp_path, built, {"M": m}, streams, streams)
        assert done.returncode == 0, done.stdout + done.stderr
        for name in want:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-5,
                                       err_msg=f"{name} ({streams})")
        assert done.stdout.count(" 8 collectives") == 4, done.stdout
    text = (built[2] / "host/main.asc").read_text()
    steps = text[text.index("WSP_STEPS[] = {"):]
    steps = steps[:steps.index("};")]
    # N: two allgathers; Sw: allgather, all_to_all, slice; Y: two allreduces; S: two
    # reduce_scatters
    for kind in ("WSP_COLL_ALLGATHER", "WSP_COLL_ALL_TO_ALL", "WSP_COLL_SLICE",
                 "WSP_COLL_ALLREDUCE", "WSP_COLL_REDUCE_SCATTER"):
        assert kind in steps, kind


def moe_inputs(t=16, e=8, dm=64, f=128):
    rng = np.random.default_rng(8)
    inputs = {"X": rng.standard_normal((t, dm)), "Wg": rng.standard_normal((dm, e)),
              "W1": rng.standard_normal((e, dm, f)) / 8, "W3": rng.standard_normal((e, dm, f)) / 8,
              "W2": rng.standard_normal((e, f, dm)) / 8}
    return {k: v.astype(np.float32) for k, v in inputs.items()}


EP_MOE = Path(__file__).parents[2] / "examples/ep_moe.wsp"


def test_an_element_read_waits_for_the_collective(tmp_path):
    """examples/ep_moe.wsp on ep = 2: the routing table the expander reads (which decides the
    tasks) is an allgather's result, so the host waits for that call before expanding on
    (each rank reading its own copy of the table); the outputs equal ref's in every stream
    order."""
    mesh, t = {"ep": 2}, 16
    built = build(tmp_path, EP_MOE.read_text(), mesh)
    inputs = moe_inputs(t)
    ref = built[0].compile("ref", mesh=mesh).run(bind={"T": t}, **inputs)
    for streams in ("sync", "late", "early"):
        got, done, data = run_tree(tmp_path, built, inputs, streams, streams, {"T": t})
        assert done.returncode == 0, done.stdout + done.stderr
        for name in ref:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-4, atol=1e-4,
                                       err_msg=f"{name} ({streams})")
        log = (data / "acl.0.log").read_text().split()
        assert "aclrtSynchronizeEvent" in log  # the expander's wait for the routing table


def test_a_missing_wait_for_an_element_read_is_caught(tmp_path):
    mesh, t = {"ep": 2}, 16
    built = build(tmp_path, EP_MOE.read_text(), mesh,
                  lambda text: text.replace("static int expand_wait(WspRun &r, int64_t j) {",
                                            "static int expand_wait(WspRun &r, int64_t j) {\n"
                                            "    return 0;"))
    inputs = moe_inputs(t)
    ref = built[0].compile("ref", mesh=mesh).run(bind={"T": t}, **inputs)
    got, done, _ = run_tree(tmp_path, built, inputs, "late", "run", {"T": t})
    assert done.returncode == 0, done.stdout + done.stderr
    assert not np.allclose(got["Y"], ref["Y"], rtol=1e-4, atol=1e-4)


# the other multi-device examples (ep_moe above), each on tp = 2 with its token count: every
# input random (the global arrays, scattered by layout), the outputs equal ref's
EXAMPLE_TOKENS = {"tp_mlp": ("T", 12), "tp_attention": ("S", 12), "sp_rmsnorm": ("T", 16),
                  "mesh_decoder_layer": ("S", 12)}


@pytest.mark.parametrize("name", sorted(EXAMPLE_TOKENS))
def test_mesh_examples_on_the_tree(tmp_path, name):
    mesh = {"tp": 2}
    sym_name, n = EXAMPLE_TOKENS[name]
    built = build(tmp_path, (EP_MOE.parent / f"{name}.wsp").read_text(), mesh)
    module = built[0]
    sizes = {sym_name: n, "TP": 2}
    rng = np.random.default_rng(12)
    inputs = {}
    for t in module.ir.tensors:
        if t.kind in ("input", "inout"):
            shape = tuple(sizes.get(str(d), None) or int(str(d)) for d in t.dims)
            inputs[t.name] = (rng.standard_normal(shape) / 4).astype(np.float32)
    ref = module.compile("ref", mesh=mesh).run(bind={sym_name: n}, **inputs)
    for streams in ("late", "early"):
        got, done, _ = run_tree(tmp_path, built, inputs, streams, streams, {sym_name: n})
        assert done.returncode == 0, done.stdout + done.stderr
        for out in ref:
            np.testing.assert_allclose(got[out], ref[out], rtol=1e-4, atol=1e-4,
                                       err_msg=f"{out} ({streams})")


def test_many_collectives_under_way(tmp_path):
    """34 allreduces that nothing waits for until the end: more than the expander keeps under
    way (WSP_MAX_PENDING_COMMS, then it waits for the oldest) and more events than the host
    keeps (WSP_MAX_EVENTS, then every stream is drained and they are destroyed)."""
    n, r, c = 34, 4, 8
    lines = ["module many", "mesh tp = 2", f"input X: f32[{2 * r}, {c}] @ [S(tp), R]",
             f"scratch Z: f32[{r}, {c}] @ [R, R] partial(tp)",
             *(f"output Y{i}: f32[{r}, {c}]" for i in range(n)),
             f"kernel fill(x: In[Tile[{r}, {c}, f32]], z: Out[Tile[{r}, {c}, f32]]) {{ store(z, x) }}",
             "workload w() {",
             f"    for i in P(Dense[2]) {{ fill[i](x = X[i*{r} : i*{r} + {r}, :], z = Z[:, :]) }}",
             *(f"    allreduce(Z, into = Y{i}, over = tp)" for i in range(n)),
             "}", "schedule main = w()", ""]
    built = build(tmp_path, "\n".join(lines), {"tp": 2})
    x = np.random.default_rng(2).standard_normal((2 * r, c)).astype(np.float32)
    want = x[:r] + x[r:]
    for streams in ("late", "early"):
        got, done, data = run_tree(tmp_path, built, {"X": x}, streams, streams)
        assert done.returncode == 0, done.stdout + done.stderr
        for i in range(n):
            np.testing.assert_allclose(got[f"Y{i}"], want, rtol=1e-6, atol=1e-6)
        log = (data / "acl.0.log").read_text().split()
        assert log.count("HcclAllReduce") == n
        made = log.count("aclrtCreateEventWithFlag") + log.count("aclrtCreateEvent")
        assert log.count("aclrtDestroyEvent") == made
        last_call = len(log) - 1 - log[::-1].index("HcclAllReduce")
        assert "aclrtDestroyEvent" in log[:last_call]  # drained and destroyed during the run
