"""The host program of an ascend_npu tree (host/main.asc), compiled with the host C++ compiler
against a functional stand-in for acl/acl.h (stub_acl/: "device" memory is host memory) and
run end to end: the expander built for the host (the tree's CANN 8 route, WSP_HOST_EXPANDER),
and a stand-in dispatcher (stub_dispatch.cpp) that runs each wave's task records with
cpu_sim's C kernels. So the .npy reading and writing, symbol binding, device set-up, the
segment loop (flushes, waves, the host copies of data the expander reads), error reports and
teardown are exercised for real; only ACL and the AICore are not.

Outputs are compared with the ref back end's run of the same program and inputs (moe_extern's
router through its Python twin, tests/test_examples_dynamic.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.backends.cpu.kernels import emit_kernels, kernel_symbol
from ptowsp.backends.ref import register_extern, unregister_extern
from ptowsp.ir.passes import optimize

from .hostrun import compile_host, rel_err, run, write_inputs, write_tree
from .streams import CC, HERE, ROOT, RUNTIME_C, run_compiler

pytestmark = pytest.mark.cc

CPU_DIR = ROOT / "ptowsp" / "backends" / "cpu"
REQUIRED_ACL = ("aclInit", "aclrtSetDevice", "aclrtCreateStream", "aclrtCreateEventWithFlag",
                "aclrtMalloc", "aclrtMemcpy", "aclrtMemset", "aclrtRecordEvent",
                "aclrtStreamWaitEvent", "aclrtResetEvent", "aclrtSynchronizeStream", "aclrtFree",
                "aclrtDestroyEvent", "aclrtDestroyStream", "aclrtResetDevice", "aclFinalize")

MOE_ASCEND = '''""" /* the router on the AICore: not needed by these tests */ """'''


@pytest.fixture(scope="module", autouse=True)
def _router():
    """The ref back end (the oracle here) runs moe_extern's router through its Python twin."""
    from tests.test_examples_dynamic import route_python

    register_extern("route", route_python)
    yield
    unregister_extern("route")


def load(path: Path, text: str = None):
    if text is None:
        return ptowsp.load(str(path))
    return ptowsp.parse(text, str(path))


def moe_source() -> str:
    """examples/moe_extern.wsp with an `extern ascend` body for its router."""
    text = (ROOT / "examples/moe_extern.wsp").read_text()
    end = text.index('"""', text.index('extern c """') + len('extern c """')) + 3
    return text[:end] + " extern ascend " + MOE_ASCEND + text[end:]


def build(tmp: Path, module, schedule=None) -> tuple[Path, object]:
    """The tree of `module` and its host program, linked with cpu_sim's kernels."""
    ir, _ = optimize(module.ir, 2)
    tree = tmp / "tree"
    write_tree(tree, ir, schedule)
    (tmp / "kernels.c").write_text(emit_kernels(ir.kernels))
    (tmp / "table.c").write_text(
        '#include "wsp_runtime.h"\n'
        + "".join(f"int {kernel_symbol(k)}(const wsp_tile *, const wsp_scalar *);\n" for k in ir.kernels)
        + "wsp_kernel_fn wsp_test_kernels[] = {" + ", ".join(kernel_symbol(k) for k in ir.kernels)
        + "};\n"
        # per kernel, which scalars are floats: cpu_sim's kernels read a double where the task
        # record holds the AICore's f32 bits
        + "unsigned long long wsp_test_float_scalars[] = {"
        + ", ".join(str(sum(1 << i for i, p in enumerate(q for q in k.params if q.kind == "scalar")
                            if p.dtype in ("f16", "bf16", "f32"))) + "ull" for k in ir.kernels)
        + "};\n")
    objs = []
    for c in ("kernels.c", "table.c"):
        objs.append(str(tmp / (c + ".o")))
        run_compiler([CC, "-std=c11", "-O1", "-c", f"-I{RUNTIME_C}", f"-I{CPU_DIR}",
                      str(tmp / c), "-o", objs[-1]])
    exe = tmp / "wsp_main"
    compile_host(exe, tree, [HERE / "stub_dispatch.cpp", *objs], includes=[RUNTIME_C])
    return exe, ir


@pytest.fixture(scope="module")
def rmsnorm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("host_rmsnorm")
    module = load(ROOT / "examples/rmsnorm.wsp")
    exe, ir = build(tmp, module)
    return tmp, exe, module


def test_rmsnorm_runs_end_to_end(rmsnorm):
    tmp, exe, module = rmsnorm
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 16, 128), dtype=np.float32)
    w = rng.standard_normal((1, 128), dtype=np.float32)
    data = tmp / "data"
    write_inputs(data, {"X": x, "W": w})
    done = run(exe, data, "B=2", "-c", "4", "-b", "3")  # T from the shape of X
    assert done.returncode == 0, done.stderr
    assert "6 tasks in 2 segments" in done.stdout
    want = module.compile("ref").run(X=x, W=w)["Y"]
    got = np.load(data / "output" / "Y.npy")
    assert got.shape == want.shape and got.dtype == want.dtype
    assert rel_err(got, want) <= 1e-6
    calls = (data / "acl.log").read_text().split()
    for name in REQUIRED_ACL:
        assert name in calls, f"{name} was not called"
    assert calls[0] == "aclInit" and calls[-1] == "aclFinalize"
    assert calls.count("aclrtMalloc") == calls.count("aclrtFree")
    # each segment: the expander, then the event, then the dispatcher's waves and a sync
    assert (data / "dispatch.log").read_text().split("\n")[:2] == ["wave 0: 4 tasks", "wave 0: 2 tasks"]


def test_moe_reads_what_its_tasks_wrote(tmp_path):
    """moe_extern: the expander stops before reading the routing the route tasks write; on the host
    route it reads copies made after those tasks ran, so the experts follow the real routing.
    32 tokens are two whole chunks of 16, 30 end in a partial one."""
    module = load(ROOT / "examples/moe_npu.wsp", moe_source())
    exe, _ = build(tmp_path, module)
    for tokens in (32, 30):
        rng = np.random.default_rng(3)
        inputs = dict(X=rng.standard_normal((tokens, 64), dtype=np.float32),
                      Wg=(rng.standard_normal((64, 8)) * 0.3).astype(np.float32),
                      Bias=np.zeros((1, 8), np.float32),
                      W1=(rng.standard_normal((8, 64, 128)) / 8).astype(np.float32),
                      W3=(rng.standard_normal((8, 64, 128)) / 8).astype(np.float32),
                      W2=(rng.standard_normal((8, 128, 64)) / 11).astype(np.float32))
        data = tmp_path / f"data{tokens}"
        write_inputs(data, inputs)
        done = run(exe, data, "-c", "16")
        assert done.returncode == 0, done.stderr
        want = module.compile("ref").run(**inputs)
        for name in ("Indptr", "Indices"):
            assert np.array_equal(np.load(data / "output" / f"{name}.npy"), want[name]), name
        for name in ("Y", "Gate"):
            assert rel_err(np.load(data / "output" / f"{name}.npy"), want[name]) <= 1e-5, name
        segments = int(re.search(r"in (\d+) segments", done.stdout).group(1))
        assert segments >= 4  # gate | route 0 | route 1 + experts of tokens < 16 | ...


def test_topk_moe_reads_what_its_tasks_wrote(tmp_path):
    """moe (topk routing, no extern kernel): the expert tasks read the experts the route tasks
    chose, on the host route too; the routing and the layer are ref's. 32 tokens are two whole
    chunks of 16, 30 end in a partial one."""
    module = load(ROOT / "examples/moe.wsp")
    exe, _ = build(tmp_path, module)
    for tokens in (32, 30):
        rng = np.random.default_rng(4)
        inputs = dict(X=rng.standard_normal((tokens, 64), dtype=np.float32),
                      Wg=(rng.standard_normal((64, 8)) * 0.3).astype(np.float32),
                      W1=(rng.standard_normal((8, 64, 128)) / 8).astype(np.float32),
                      W3=(rng.standard_normal((8, 64, 128)) / 8).astype(np.float32),
                      W2=(rng.standard_normal((8, 128, 64)) / 11).astype(np.float32))
        data = tmp_path / f"data{tokens}"
        write_inputs(data, inputs)
        done = run(exe, data)
        assert done.returncode == 0, done.stderr
        want = module.compile("ref").run(**inputs)
        assert np.array_equal(np.load(data / "output" / "Experts.npy"), want["Experts"])
        for name in ("Y", "Gate"):
            assert rel_err(np.load(data / "output" / f"{name}.npy"), want[name]) <= 1e-5, name
        assert "in 2 segments" in done.stdout  # the routes | the experts and the mix


def test_an_acl_failure_is_reported_and_resources_released(rmsnorm):
    tmp, exe, _ = rmsnorm
    data = tmp / "data"
    done = run(exe, data, "B=2", fail="aclrtCreateEventWithFlag")
    assert done.returncode == 3
    assert ("aclrtCreateEventWithFlag(&r.expanded, ACL_EVENT_SYNC) failed with ACL error 507899"
            in done.stderr)
    calls = (data / "acl.log").read_text().split()
    assert calls[-3:] == ["aclrtDestroyStream", "aclrtResetDevice", "aclFinalize"]
    assert not (data / "dispatch.log").exists()


def test_the_event_is_a_sync_event(rmsnorm, tmp_path):
    """The expander's event is reset every segment, which ACL allows only for an event made by
    aclrtCreateEventWithFlag(..., ACL_EVENT_SYNC): the stand-in ACL refuses a reset of any
    other, so the tree made with aclrtCreateEvent fails where it would have been undefined."""
    tmp, exe, _ = rmsnorm
    text = (tmp / "tree/host/main.asc").read_text()
    assert "aclrtCreateEventWithFlag(&r.expanded, ACL_EVENT_SYNC)" in text
    assert "aclrtCreateEvent(" not in text
    old = tmp_path / "tree"
    shutil.copytree(tmp / "tree", old)
    main = old / "host/main.asc"
    main.write_text(text.replace("aclrtCreateEventWithFlag(&r.expanded, ACL_EVENT_SYNC)",
                                 "aclrtCreateEvent(&r.expanded)"))
    exe_old = tmp_path / "wsp_main"
    compile_host(exe_old, old, [HERE / "stub_dispatch.cpp", *sorted(map(str, tmp.glob("*.c.o")))],
                 includes=[RUNTIME_C])
    data = tmp_path / "data"
    write_inputs(data, {"X": np.zeros((2, 3, 16, 128), np.float32),
                        "W": np.zeros((1, 128), np.float32)})
    done = run(exe_old, data, "B=2")
    assert done.returncode == 3
    assert "aclrtResetEvent on an event not created with ACL_EVENT_SYNC" in done.stderr
    assert "aclrtResetEvent(r.expanded, r.compute_stream) failed with ACL error 107000" in done.stderr


def test_bad_inputs_are_user_errors(rmsnorm):
    tmp, exe, _ = rmsnorm
    data = tmp / "bad"
    write_inputs(data, {"X": np.zeros((2, 3, 16, 128), np.float64), "W": np.zeros((1, 128), np.float32)})
    done = run(exe, data)
    assert done.returncode == 1
    assert re.match(r"rmsnorm\.wsp:\d+:\d+: error: `X` is declared f32, but its array has dtype <f8",
                    done.stderr), done.stderr
    write_inputs(data, {"X": np.zeros((2, 3, 16, 128), np.float32), "W": np.zeros((1, 64), np.float32)})
    done = run(exe, data)
    assert done.returncode == 1 and "`W` is [1, 128], but its array has shape [1, 64]" in done.stderr
    done = run(exe, data, "--bogus")
    assert done.returncode == 2 and "usage:" in done.stderr
    # the index of runs has capacity x blocks words; a launch takes at most 65535 blocks
    done = run(exe, data, "-b", "65536")
    assert done.returncode == 2 and "-b takes at most 65535 blocks" in done.stderr
    done = run(exe, data, "-c", str(2**24 + 1))
    assert done.returncode == 2 and "-c takes at most 16777216 tasks" in done.stderr


def test_a_failed_view_check_is_reported_like_cpu_sim(tmp_path):
    """ragged_attention with a sequence longer than S: the check's message, values and
    coordinates, worded as cpu_sim and ref word them; no output is written."""
    module = load(ROOT / "tests/programs/ragged_attention.wsp")
    exe, _ = build(tmp_path, module)
    data = tmp_path / "data"
    write_inputs(data, dict(seq_lens=np.asarray([64, 2000], np.int32),
                            Q=np.zeros((2, 16, 64), np.float32),
                            KV=np.zeros((2, 128, 64), np.float32),
                            Acc=np.zeros((2, 16, 64), np.float32)))
    done = run(exe, data)
    assert done.returncode == 1
    arrays = {n: np.load(data / "input" / f"{n}.npy") for n in ("seq_lens", "Q", "KV", "Acc")}
    with pytest.raises(ptowsp.WspError) as cpu:
        module.compile("ref").run(**arrays)
    (d,) = cpu.value.diagnostics
    # cpu_sim adds why no output exists to ref's wording
    assert done.stderr.strip() == (f"ragged_attention.wsp:{d.span.line}:{d.span.col}: error: "
                                   f"{d.message}; the task was not launched")
    assert not (data / "output" / "Acc.npy").exists()


def test_every_acl_call_is_checked(rmsnorm):
    tmp, _, _ = rmsnorm
    text = (tmp / "tree/host/main.asc").read_text()
    calls = 0
    for line in text.splitlines():
        code = line.split("//")[0]
        for _ in re.finditer(r"\b(acl[A-Za-z]+)\(", code):
            if code.strip().startswith(("/*", "*")):
                continue
            calls += 1
            assert "WSP_ACL(" in code or "check(" in code, f"unchecked: {line.strip()}"
    assert calls >= len(REQUIRED_ACL)
    for name in REQUIRED_ACL:
        assert re.search(rf"\b{name}\(", text), name
    assert "wsp_expand<<<1, nullptr, r.expand_stream>>>(&args, sizeof args);" in text
