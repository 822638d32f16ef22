"""The whole optimiser pipeline (docs/optimizer.md, ptowsp/ir/passes): semantic preservation
and the pass manager's user interface.

- Every example (but errors_demo), every schedule, small bindings: -O0, -O1, -O2 and -O3 give
  bit-identical results on ref; -O0 and -O3 give bit-identical results on cpu_sim (`cc`).
  On cpu_sim the only pass that changes arithmetic is `fuse-tasks` -> `plan-kernels`, and both
  keep each value's op order: a fused kernel computes the producer's tile exactly as the
  producer did (then rounds it as its store would), `plan-kernels` evaluates every op per
  element in the trivial plan's order and accumulates reductions and matmuls in the same order
  (tests/ir/test_pass_plan_kernels.py). So every example is compared bit for bit, and so is
  every generated program below (chains with row / column reductions, softmax, matmuls fused
  into their consumers) -- measured: no program of the corpus differs in one bit.
- A hypothesis corpus of generated programs (chains of elementwise, reduction, softmax and
  matmul tile kernels over random loop structures: P loops, P.seq, one-trip nests, empty loops,
  sequential and combine blocks, unrolled calls; scratch tensors some dead, some live, outputs
  read again), -O0 against -O3 on ref (and -O1), a few on cpu_sim.
- The CLI: `--print-after`, `--time-passes`, `--verify-each`, unknown pass names (exit 2),
  `wspc run -O0` and `-O3`; a failing pass (PassError, exit 70); a user pass through
  `ptowsp.passes` as docs/optimizer.md shows.
"""

from __future__ import annotations

import io
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp.cli import main
from ptowsp.ir import nodes as N
from ptowsp.ir import visit as V
from ptowsp.ir.passes import LEVELS, optimize, pass_names, pipeline
from ptowsp.ir.passes.manager import PassError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.wsp") if p.stem != "errors_demo")

# small bindings (syms without a default need one), most not multiples of the examples' tiles
# (partial tiles at the edges); attention's seq_lens are drawn in [0, S]
BIND = {"attention_tiered": {"B": 3, "H": 2, "S": 210},
        "attention_varlen": {"B": 3, "H": 2, "S": 130},
        "moe": {"T": 30}, "moe_extern": {"T": 30}, "rmsnorm": {"B": 2, "T": 3}, "softmax": {"R": 50},
        "gemm": {"M": 70, "N": 64, "K": 100}, "swiglu_ffn": {"T": 64}, "megakernel": {"N": 4},
        "worker_pool": {"N": 8}}
# the multi-device examples on a mesh of 2 devices (their meshes are sized by a sym; token
# counts the mesh divides, each device's last tile partial)
MESH = {"tp_mlp": {"tp": 2}, "tp_attention": {"tp": 2}, "sp_rmsnorm": {"tp": 2},
        "ep_moe": {"ep": 2}, "mesh_decoder_layer": {"tp": 2}, "tp_csp_ffn": {"tp": 2}}
BIND.update({"tp_mlp": {"T": 37}, "tp_attention": {"S": 45}, "sp_rmsnorm": {"T": 46},
             "ep_moe": {"T": 30}, "mesh_decoder_layer": {"S": 40}, "tp_csp_ffn": {"T": 37}})
# the Llama layer needs a consistent batch (positions, sequence starts): examples/llama_layer.py's
sys.path.insert(0, str(EXAMPLES))
import llama_layer as LLAMA_LAYER  # noqa: E402

LLAMA = LLAMA_LAYER.batch([20, 1, 0, 3], [0, 40, 5, 60], 64, seed=5)
BIND["llama_layer"] = LLAMA_LAYER.binds(LLAMA)


def test_bindings_cover_every_example():
    assert sorted(BIND) == NAMES


@pytest.fixture(scope="module")
def route_extern():
    """moe_extern's `route` kernel is `extern c`: ref runs a Python version of it."""
    from ptowsp.backends.ref import register_extern, unregister_extern
    from tests.test_examples_dynamic import route_python

    register_extern("route", route_python)
    yield
    unregister_extern("route")


def example_inputs(m: N.Module, bind: dict, seed: int) -> dict:
    from ptowsp import sym as S

    if m.name == "llama_layer":
        return {k: v.copy() for k, v in LLAMA.items()}
    rng = np.random.default_rng(seed)
    syms = {s.name: s.default for s in m.syms if s.default is not None}
    syms.update(bind)
    out = {}
    for t in m.tensors:
        if t.kind not in ("input", "inout"):
            continue
        shape = tuple(S.evaluate(d, syms) for d in t.dims)
        if t.name == "seq_lens":  # ragged lengths: zeros, partial blocks, full
            out[t.name] = rng.integers(0, syms["S"] + 1, shape).astype(np.int32)
        elif t.dtype == "f32":
            out[t.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            out[t.name] = np.zeros(shape, {"i32": np.int32}.get(t.dtype, np.float32))
    return out


def bits_equal(a: dict, b: dict, what: str = "") -> None:
    """The same outputs, bit for bit (-0.0 is not 0.0; NaNs compare by their bits)."""
    assert a.keys() == b.keys(), what
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=f"{what} {k}")
        assert a[k].dtype == b[k].dtype and a[k].tobytes() == b[k].tobytes(), f"{what} {k}"


_MODULES: dict = {}


def module(name: str):
    if name not in _MODULES:
        _MODULES[name] = ptowsp.load(str(EXAMPLES / f"{name}.wsp"))
    return _MODULES[name]


# --------------------------------------------------------------------------------------------
# Every example, every schedule


@pytest.mark.parametrize("name", NAMES)
def test_examples_same_bits_at_every_level_on_ref(name, route_extern):
    mod = module(name)
    bind = BIND[name]
    for s in mod.ir.schedules:
        arrays = example_inputs(mod.ir, bind, 1)
        base = None
        for level in LEVELS:
            prog = mod.compile("ref", s.name, opt_level=level, verify_each=True,
                               mesh=MESH.get(name))
            out = prog.run(bind, **{k: v.copy() for k, v in arrays.items()})
            if base is None:
                base, tasks0 = out, prog.stats.task_count
                assert any(np.any(v) for v in out.values()), f"{name}: all outputs zero"
            else:
                bits_equal(base, out, f"{name}/{s.name} -O{level}:")
                # passes only remove or merge tasks
                assert prog.stats.task_count <= tasks0


@pytest.mark.cc
@pytest.mark.parametrize("name", NAMES)
def test_examples_same_bits_at_O0_and_O3_on_cpu_sim(name, wspc_cache):
    mod = module(name)
    bind = BIND[name]
    arrays = example_inputs(mod.ir, bind, 2)
    o0 = mod.compile("cpu_sim", opt_level=0, mesh=MESH.get(name)).run(bind, **arrays)
    o3 = mod.compile("cpu_sim", opt_level=3, mesh=MESH.get(name)).run(bind, **arrays)
    bits_equal(o0, o3, f"{name}:")


# --------------------------------------------------------------------------------------------
# Generated programs

KINDS = {  # a kernel body over `x` (and `w`: a [16, 16] weight, `z`: a second tile)
    "ew": "x * 1.5 - 0.25",
    "silu": "silu(x) + x",
    "cse": "exp(x * 0.5) * exp(x * 0.5) + tanh(x)",
    "norm": "x * rsqrt(rowmean(x * x) + 0.5)",
    "rowmax": "x - rowmax(x)",
    "colsum": "x + colsum(x) * 0.125",
    "softmax": "softmax(x)",
    "mm": "matmul(x, w)",
    "add2": "x * 0.75 + z",
}
FORMS = ("P", "seq", "nest1", "sequential", "combine", "unrolled")


@st.composite
def program(draw) -> str:
    n = draw(st.integers(2, 5))
    tensors = ["input X: f32[32, 16]", "input W: f32[16, 16]"]
    dtypes = {"X": "f32"}
    kernels, stages = [], []
    for i in range(n):
        kind = draw(st.sampled_from(sorted(KINDS)))
        src = draw(st.sampled_from(sorted(dtypes)))
        dt = draw(st.sampled_from(["f32", "f32", "f32", "f16", "bf16"]))
        last = i == n - 1
        out = "output" if last or draw(st.integers(0, 3)) == 0 else "scratch"
        dst = f"{'O' if out == 'output' else 'S'}{i}"
        tensors.append(f"{out} {dst}: {dt}[32, 16]")
        params = [f"x: In[Tile[8, 16, {dtypes[src]}]]"]
        args = [("x", src)]
        if kind == "mm":
            params.append("w: In[Tile[16, 16, f32]]")
        if kind == "add2":
            other = draw(st.sampled_from(sorted(dtypes)))
            params.append(f"z: In[Tile[8, 16, {dtypes[other]}]]")
            args.append(("z", other))
        params.append(f"y: Out[Tile[8, 16, {dt}]]")
        kernels.append(f"kernel k{i}({', '.join(params)}) {{ store(y, {KINDS[kind]}) }}")
        stages.append((i, args, kind == "mm", dst))
        dtypes[dst] = dt

    def call(stage, t: str) -> str:
        i, args, mm, dst = stage
        if t.isdigit():
            box = f"[{int(t) * 8} : {int(t) * 8 + 8}, :]"
        else:
            box = f"[{t}*8 : {t}*8 + 8, :]"
        a = [f"{p} = {src}{box}" for p, src in args] + (["w = W"] if mm else [])
        return f"k{i}[{t}]({', '.join(a + [f'y = {dst}{box}'])})"

    # consecutive stages share a loop structure (fusion needs producer and consumer together)
    groups, cur = [], []
    for s in stages:
        if cur and draw(st.booleans()):
            groups.append(cur)
            cur = []
        cur.append(s)
    groups.append(cur)
    body = []
    for g in groups:
        form = draw(st.sampled_from(FORMS))
        calls = "\n".join(call(s, "t") for s in g)
        if draw(st.integers(0, 3)) == 0:  # an empty loop around one of the group's calls
            body.append(f"for e in P(0) {{ {call(g[0], 'e')} }}")
        if form == "P":
            body.append(f"for t in P(4) {{\n{calls}\n}}")
        elif form == "seq":
            body.append(f"for t in P.seq(4) {{\n{calls}\n}}")
        elif form == "nest1":
            body.append(f"for o in P(1) {{\nfor t in P(4) {{\n{calls}\n}}\n}}")
        elif form == "sequential":  # each stage a step; the last two maybe in a nested one
            steps = [f"for t in P(4) {{ {call(s, 't')} }}" for s in g]
            if len(steps) > 2 and draw(st.booleans()):
                steps[-2:] = ["sequential {\n" + "\n".join(steps[-2:]) + "\n}"]
            body.append("sequential {\n" + "\n".join(steps) + "\n}")
        elif form == "combine":
            body.append(f"combine {{\ncombine {{\nfor t in P(4) {{\n{calls}\n}}\n}}\n}}")
        else:  # unrolled, in a sequential or a combine block
            kw = draw(st.sampled_from(["sequential", "combine"]))
            body.append(f"{kw} {{\n" + "\n".join(call(s, str(t)) for t in range(4) for s in g)
                        + "\n}")
    return ("module gen\n" + "\n".join(tensors) + "\n" + "\n".join(kernels)
            + "\nworkload w() {\n" + "\n".join(body) + "\n}\nschedule main = w()\n")


def gen_inputs(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {"X": rng.standard_normal((32, 16)).astype(np.float32),
            "W": (rng.standard_normal((16, 16)) * 0.25).astype(np.float32)}


CORPUS = settings(max_examples=25, deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@CORPUS
@given(program(), st.integers(0, 3))
def test_generated_programs_same_bits_at_O0_and_O3_on_ref(text, seed):
    mod = ptowsp.parse(text, "gen.wsp")
    arrays = gen_inputs(seed)
    r0 = mod.compile("ref", opt_level=0).run(**arrays)
    for level in (1, 3):
        prog = mod.compile("ref", opt_level=level, verify_each=True)
        bits_equal(r0, prog.run(**arrays), f"-O{level}:\n{text}")


@pytest.mark.cc
@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=program())
def test_generated_programs_same_bits_at_O0_and_O3_on_cpu_sim(wspc_cache, text):
    # (30 drawn programs measured this way: none differs in one bit)
    mod = ptowsp.parse(text, "gen.wsp")
    arrays = gen_inputs(1)
    bits_equal(mod.compile("cpu_sim", opt_level=0).run(**arrays),
               mod.compile("cpu_sim", opt_level=3).run(**arrays), text)


def test_generator_makes_what_it_says():
    """The corpus exercises every pass: over a few drawn programs, each pass changes some."""
    from hypothesis import find

    changed = set()

    def interesting(text):
        _, pm = optimize(ptowsp.parse(text, "gen.wsp").ir, 3)
        changed.update(t.name for t in pm.timings if t.changed)
        return changed >= set(pass_names())

    find(program(), interesting, settings=settings(max_examples=200, derandomize=True,
                                                   database=None))


# --------------------------------------------------------------------------------------------
# The command line


def wspc(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


SWIGLU = EXAMPLES / "swiglu_ffn.wsp"


def test_print_after_all_names_each_pass():
    r = wspc("compile", SWIGLU, "--print-after", "all", "-O3", "--emit", "ir")
    assert r.exit_code == 0, r.output
    heads = [line for line in r.stderr.splitlines() if line.startswith("; ---- IR after ")]
    assert heads == [f"; ---- IR after {p}" for p in pass_names()]
    assert "module swiglu_ffn" in r.stdout and "; ---- IR" not in r.stdout
    # -O1 runs the level-1 passes only
    r = wspc("compile", SWIGLU, "--print-after", "all", "-O1", "--emit", "ir")
    assert [line[16:] for line in r.stderr.splitlines() if line.startswith("; ---- IR after ")] \
        == [p.name for p in pipeline(1)]


def test_print_after_one_pass_and_verify_each():
    r = wspc("compile", SWIGLU, "--print-after", "fuse-tasks", "--print-after", "flatten",
             "--verify-each", "-O2", "--emit", "ir")
    assert r.exit_code == 0, r.output
    heads = [line for line in r.stderr.splitlines() if line.startswith("; ---- IR after ")]
    assert heads == ["; ---- IR after flatten", "; ---- IR after fuse-tasks"]


def test_time_passes_table():
    r = wspc("compile", SWIGLU, "--time-passes", "-O3", "--emit", "ir")
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    assert lines[0].split() == ["pass", "time", "(ms)", "changed"]
    rows = [line.split() for line in lines[1:]]
    assert [row[0] for row in rows] == pass_names() + ["total"]
    assert all(float(row[1]) >= 0 for row in rows)
    assert dict((row[0], row[2]) for row in rows[:-1])["fuse-tasks"] == "yes"
    # -O0: no pass, the table has only its total
    r = wspc("compile", SWIGLU, "--time-passes", "-O0", "--emit", "ir")
    assert [line.split()[0] for line in r.stderr.splitlines()] == ["pass", "total"]


def test_unknown_pass_is_a_usage_error():
    for cmd in ("compile", "run"):
        r = wspc(cmd, SWIGLU, "--print-after", "nosuch", *(["--emit", "ir"] if cmd == "compile"
                                                           else ["--target", "ref"]))
        assert r.exit_code == 2, r.output
        assert "no pass `nosuch`" in r.stderr
        for p in pass_names() + ["all"]:
            assert p in r.stderr


def test_run_at_O0_and_O3_gives_the_same_outputs(tmp_path, route_extern):
    outs = {}
    for level in (0, 3):
        out = tmp_path / f"o{level}.npz"
        r = wspc("run", SWIGLU, "--target", "ref", f"-O{level}", "--random-inputs", "4",
                 "--outputs", out, "--json", "--verify-each")
        assert r.exit_code == 0, r.output
        with np.load(out) as z:
            outs[level] = {k: z[k] for k in z.files}
    bits_equal(outs[0], outs[3])
    assert np.any(outs[0]["Y"])


def test_a_failing_pass_is_an_internal_error_naming_it(monkeypatch):
    import ptowsp.ir.passes as P

    def boom(m):
        raise ValueError("the pass broke")

    monkeypatch.setattr(P, "PASSES", P.PASSES[:1] + (P.PassEntry(boom, 1, "a test's"),)
                        + P.PASSES[1:])
    r = wspc("compile", SWIGLU, "-O1", "--emit", "ir")
    assert r.exit_code == 70, r.output
    assert "internal error" in r.stderr and "pass `boom`" in r.stderr
    assert "the pass broke" in r.stderr and "Traceback" not in r.stderr
    # --print-after accepts the pipeline's names, whatever they are
    r = wspc("compile", SWIGLU, "-O1", "--emit", "ir", "--print-after", "boom")
    assert r.exit_code == 70


# --------------------------------------------------------------------------------------------
# The pass manager from Python (docs/optimizer.md)


def test_user_pipeline_as_the_tutorial_shows():
    from ptowsp.passes import FlattenCombinePass, Pass, PassManager, PrintPass

    class CountTasks(Pass):
        name = "count-tasks"

        def __init__(self):
            self.seen = []

        def run(self, m):
            self.seen.append(sum(len(V.tasks(s.body)) for s in m.schedules))
            return m

    mod = ptowsp.parse(textwrap.dedent("""
        module t
        input X: f32[16, 16]
        output Y: f32[16, 16]
        kernel k(x: In[Tile[8, 16, f32]], y: Out[Tile[8, 16, f32]]) { store(y, x * 2.0) }
        workload w() {
            combine { combine { k[0](x = X[0:8, :], y = Y[0:8, :]) } k[1](x = X[8:16, :], y = Y[8:16, :]) }
        }
        schedule main = w()
    """), "t.wsp")
    out = io.StringIO()
    count = CountTasks()
    pm = PassManager()
    pm.add(PrintPass("before", out)).add(FlattenCombinePass()).add(count)
    pm.add(PrintPass("after", out))
    m = pm.run(mod)  # a checked module: its IR is used
    assert isinstance(m, N.Module) and count.seen == [2]
    text = out.getvalue()
    assert text.startswith("; ---- IR before\nmodule t")
    before, after = text.split("; ---- IR after\n")
    assert "combine:" in before and "combine:" not in after
    assert [t.name for t in pm.timings] == ["print", "flatten", "count-tasks", "print"]
    assert [t.changed for t in pm.timings] == [False, True, False, False]
    assert "flatten" in pm.report() and "total" in pm.report()
    with pytest.raises(TypeError):
        pm.add(lambda m: m)


def test_a_failing_pass_names_itself():
    from ptowsp.diagnostics import InternalError
    from ptowsp.passes import FunctionPass, Pass, PassManager

    class Broken(Pass):
        name = "broken"

        def run(self, m):
            return m.kernels[7]

    m = module("rmsnorm").ir
    with pytest.raises(PassError, match=r"pass `broken`: IndexError") as err:
        PassManager([Broken()]).run(m)
    assert err.value.pass_name == "broken" and isinstance(err.value.cause, IndexError)
    assert isinstance(err.value, InternalError) and err.value.stage == "pass `broken`"
    # a pass returning something else than a Module
    with pytest.raises(PassError, match=r"pass `none`: TypeError: returned NoneType"):
        PassManager([FunctionPass("none", lambda m: None)]).run(m)
    # a pass leaving IR the verifier rejects: named under verify_each only
    from dataclasses import replace

    bad = FunctionPass("drop-kernels", lambda m: replace(m, kernels=()))
    PassManager([bad]).run(m)
    with pytest.raises(PassError, match=r"pass `drop-kernels`: InternalError") as err:
        PassManager([bad], verify_each=True).run(m)
    assert isinstance(err.value.cause, InternalError)


def test_every_pass_is_one_word_with_a_public_class():
    import ptowsp.passes
    from ptowsp.ir.passes import PASSES

    classes = {c().name: c for c in ptowsp.passes.PASS_CLASSES}
    for p in PASSES:
        module = p.function.__module__.rsplit(".", 1)[1]
        assert p.name == module.replace("_", "-") == p.function.__name__.replace("_", "-")
        assert classes[p.name].__name__ in ptowsp.passes.__all__
        assert getattr(ptowsp.passes, classes[p.name].__name__) is classes[p.name]
    assert sorted(classes) == sorted(pass_names())
    # the seed documents' names
    assert ptowsp.passes.FlattenCombinePass().name == "flatten"
    assert ptowsp.passes.DeadTaskPass().name == "dead-tasks"
    from ptowsp.ir.passes.fuse_tasks import FusionConfig

    cfg = FusionConfig(whole_tiles=False)
    assert ptowsp.passes.FuseTasksPass(cfg).config is cfg


def test_levels():
    assert [p.name for p in pipeline(0)] == []
    assert [p.name for p in pipeline(1)] == ["simplify", "flatten", "dead-tasks"]
    assert [p.name for p in pipeline(3)] == pass_names()
    m = module("rmsnorm").ir
    assert optimize(m, 0)[0] is m
    with pytest.raises(ValueError):
        optimize(m, 4)
