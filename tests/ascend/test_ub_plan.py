"""The UB plan (`backends/ub_plan.py`) is what the Ascend emitter does: for every vector kernel
of every example and test program, at every chunk of rows the emitter's search tries, the
buffers the emitter requests while writing the kernel (key, size, lifetime, offset) are the
plan's, so its footprint is; and the chunking the cycle model costs (`cost.vector_fit`) is the
one the emitted header says it runs."""

from __future__ import annotations

import re
from pathlib import Path

from ptowsp.backends import ub_plan
from ptowsp.backends.cpu import cost
from ptowsp.backends.sort_plan import Sorts
from tests.emitted_programs import emitted_programs, program_paths

from .ub_plan_check import CHECKED

ROOT = Path(__file__).resolve().parents[2]


def _summary(text: str):
    """(footprint, M, chunks, R, (N, C) or None, passes) from an emitted header's summary."""
    m = re.search(r"UB: (\d+) of \d+ bytes .*?; rows (\d+) (?:in (\d+) chunks? of (\d+)|resident)"
                  r"(?:; columns (\d+) in blocks of (\d+)(?:, (\d+) passes)?)?", text)
    assert m, text[:2000]
    fp, rows, n, r, cn, cc, passes = m.groups()
    return (int(fp), int(rows), int(n or 1), int(r or rows),
            (int(cn), int(cc)) if cn else None, int(passes or 1))


def test_the_plan_is_the_emitters_for_every_kernel_of_every_program():
    """(conftest.py checks each measure the emitter's search makes against the plan.)"""
    from ptowsp.backends.ascend import cube_views
    from ptowsp.backends.ascend.aicore import header_path

    del CHECKED[:]
    checked, kernels, shapes, splits = [], 0, set(), 0
    for path, _ir, runs, files in emitted_programs():
        checked.append(path.name)
        vector_only = cube_views(runs)
        for k in runs.kernels:
            if k.comm is not None or k.is_extern:
                continue
            sp = cost._split(k, vector_only)
            if sp is not None:  # its vector stages, each emitted as a vector kernel of its own
                vectors = [s.kernel for s in sp.stages if s.kind == "vector"]
            elif cost.kernel_unit(k, vector_only) != 0:
                continue
            else:
                vectors = [k]
            for v in vectors:
                fp, m, n, r, cols, passes = _summary(files[header_path(v)])
                fit = cost.vector_fit(v)
                assert fit is not None, (path.name, v.name)
                assert (fit.footprint, fit.m, fit.nchunks, fit.rows, fit.colblock,
                        fit.passes) == (fp, m, n, r, cols, passes), (path.name, v.name)
                kernels += 1
                shapes.add((n > 1, cols is not None, passes > 1))
                splits += sp is not None
    assert len(checked) >= len(program_paths()) - 4, checked
    assert kernels >= 50 and splits > 0 and len(CHECKED) > kernels
    # chunked and resident kernels both occur among the programs
    assert (True, False, False) in shapes and (False, False, False) in shapes, shapes


def test_a_row_wider_than_the_ub_costs_its_passes():
    """A softmax over rows wider than the UB runs in blocks of columns, in three passes (the
    max, the sum of exp(x - max), the output), each loading x again: the model costs the
    emitter's passes and blocks (`vector_fit`, what the header says), so x crosses HBM three
    times and y once, and nothing in one pass waits for a later one."""
    from ptowsp.backends import pipes as P
    from ptowsp.backends.ascend.aicore import emit_aicore, header_path
    from ptowsp.backends.machine import load_machine
    from ptowsp.ir import nodes as N
    from tests.kernel_builder import KB

    rows, cols = 4, 65536  # 256 KiB a row of f32
    b = KB("wide_softmax")
    x = b.tile("x", rows, cols, "f32")
    e = b.op("exp", b.op("sub", x, b.op("rowmax", x)))
    b.out("y", b.op("div", e, b.op("rowsum", e)))
    k = b.kernel()
    files = emit_aicore(N.Module("wide", (), (), (k,), (), None))
    fp, m, n, r, colblock, passes = _summary(files[header_path(k)])
    fit = cost.vector_fit(k)
    assert passes == fit.passes == 3 and colblock == fit.colblock and colblock[1] < cols
    assert (fp, m, n, r) == (fit.footprint, fit.m, fit.nchunks, fit.rows)

    machine = load_machine(None)
    rates = P.Rates.of(machine, machine.cores(cost.UNIT_VECTOR))
    steps = -(-cols // colblock[1]) * n  # blocks x chunks, in each pass
    pipe = cost.kernel_pipeline(k, machine)
    assert [s.pipe for s in pipe.stages] == ["MTE2", "V", "MTE3"] * (3 * steps)
    one = P.transfer(rows * cols * 4 / steps, rates.hbm)  # a step's share of x (or of y)
    busy = pipe.busy()
    assert busy["MTE2"] == 3 * steps * one and busy["MTE3"] == steps * one
    # at least its three reads of x and its write of y, one after the other on the core's
    # share of HBM, which the steady state of one read and one write never saw
    assert pipe.cycles >= 4 * steps * one
    assert cost.kernel_cost(k, machine) == (cost.UNIT_VECTOR, pipe.cycles)


def test_the_model_does_not_need_the_ascend_back_end():
    """cpu_sim's figures for a vector kernel are the emitter's chunks whether or not the Ascend
    back end was imported: a fresh interpreter that never imports it costs swiglu_ffn's and
    llama_layer's kernels as this one (which has) does."""
    import json
    import subprocess
    import sys

    from ptowsp import driver
    from ptowsp.backends.machine import load_machine

    programs = [ROOT / "examples" / "swiglu_ffn.wsp", ROOT / "examples" / "llama_layer.wsp"]
    script = (
        "import json, sys\n"
        "from ptowsp import driver\n"
        "from ptowsp.backends.cpu import cost\n"
        "from ptowsp.backends.machine import load_machine\n"
        "out = []\n"
        "for p in sys.argv[1:]:\n"
        "    ir, _ = driver.optimize(driver.lower(driver.check_file(p)))\n"
        "    out.append(cost.kernel_costs(ir, load_machine(None)))\n"
        "print(json.dumps([out, any(m.startswith('ptowsp.backends.ascend') for m in sys.modules)]))\n")
    run = subprocess.run([sys.executable, "-c", script, *map(str, programs)], capture_output=True,
                         text=True, check=True, cwd=ROOT)
    theirs, imported = json.loads(run.stdout)
    assert not imported
    import ptowsp.backends.ascend  # noqa: F401 (here it is)

    ours = [[list(c) for c in cost.kernel_costs(driver.optimize(driver.lower(
        driver.check_file(p)))[0], load_machine(None))] for p in programs]
    assert theirs == ours
    # and those figures are the emitter's chunks: llama_layer's out_ffn is split into stages
    # (cube, vector, ...), and one of its vector stages (the FFN's activation, its rows too
    # many for the UB at once) runs in several chunks, and costs them, shared by the AIVs
    ir, _ = driver.optimize(driver.lower(driver.check_file(programs[1])))
    (k,) = [k for k in ir.kernels if k.name == "out_ffn"]
    sp = cost._split(k, frozenset())
    machine = load_machine(None)
    chunked = [s.kernel for s in sp.stages if s.kind == "vector"
               and cost.vector_fit(s.kernel).nchunks > 1]
    assert chunked and sp.rows_split
    for v in chunked:
        n = cost.vector_fit(v).nchunks
        assert (cost.kernel_cost(v, machine)[1] == cost.kernel_cost(v, machine, chunks=n)[1]
                != cost.kernel_cost(v, machine, chunks=1)[1])
    stages = sum(cost.cube_pipeline(s.kernel, machine, {}, {}).cycles if s.kind == "cube"
                 else -(-cost.kernel_cost(s.kernel, machine)[1] // 2) for s in sp.stages)
    assert cost.kernel_cost(k, machine) == (cost.UNIT_CUBE, stages)


def _zoo():
    """Kernels over every temporary-requesting path of the vector writers (vector.py,
    reductions.py, matmul.py): operands filled or broadcast, conversions, compares and selects,
    the transcendentals, row and column reductions, the matmul forms, stores that convert."""
    from tests.kernel_builder import KB

    ks = []

    def kernel(name, body, rows=16, cols=80):
        b = KB(name)
        x = b.tile("x", rows, cols)
        body(b, x)
        ks.append(b.kernel())

    def scalars(b, x):
        s = b.scalar("s")
        b.out("y", b.op("add", b.op("mul", x, s), b.op("sub", s, x)))
        b.out("z", b.op("sub", b.op("add", s, x), s))
        b.out("q", b.op("div", s, x))  # a scalar operand filled into a tile
        c = b.tile("c", 16, 1)  # tile operands broadcast inside the op
        b.out("u", b.op("sub", s, c, shape=(16, 80)))
        b.out("v", b.op("mul", c, s, shape=(16, 80)))
        b.out("t", b.op("sub", c, s, shape=(16, 80)))

    kernel("scalars", scalars)
    for name in ("maximum", "minimum", "lt", "le", "gt", "ge", "eq", "ne"):
        def cmp(b, x, name=name):
            w = b.tile("w", 1, 80)  # a row broadcast down the rows
            c = b.tile("c", 16, 1)  # a loaded column broadcast along them
            v = b.op(name, b.op("broadcast", w, shape=(16, 80)), b.op("broadcast", c, shape=(16, 80)))
            b.out("y", v if name in ("maximum", "minimum") else
                  b.op("where", v, x, b.op("neg", x)))
        kernel(f"cmp_{name}", cmp)

    def selects(b, x):
        flag = b.scalar("f", "bool")
        m = b.tile("m", 16, 80, "bool")
        b.out("y", b.op("where", flag, x, b.lit(0.0)))
        b.out("z", b.op("where", m, b.lit(1.0), x))

    kernel("selects", selects)
    for src, dst in (("bool", "f32"), ("i32", "f32"), ("i32", "f16"), ("f32", "f16"),
                     ("f32", "bf16"), ("f16", "f32"), ("bf16", "f16"), ("f32", "i32")):
        def conv(b, x, src=src, dst=dst):
            t = b.tile("t", 16, 80, src)
            b.out("y", b.op("convert", t, dtype=dst))
            b.out("z", b.op("add", x, b.lit(1.0)), dtype=dst)  # converted by the store
        kernel(f"conv_{src}_{dst}", conv)
    for n, e in enumerate((2.0, 1.0, 0.0, -1.0, 3.0)):  # the special cases, and Power
        kernel(f"pow_{n}", lambda b, x, e=e: b.out("y", b.op("pow", x, b.lit(e))))
    for name in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "relu", "tanh", "sin", "cos",
                 "sigmoid", "silu", "gelu"):
        kernel(f"un_{name}", lambda b, x, name=name: b.out("y", b.op(name, x)))
    for what in ("sum", "mean", "max", "min"):
        for cols in (40, 80):
            def red(b, x, what=what):
                r = b.op("row" + what, x)
                b.out("y", b.op("sub", x, b.op("broadcast", r, shape=b.ops[x].shape)))
                b.out("r", b.op("exp", r))  # [rows, 1] elementwise in a reduction: replicated
                c = b.op("col" + what, x)
                b.out("c", c)  # only stored: accumulated across the chunks
                b.out("d", b.op("mul", x, b.op("broadcast", b.op("col" + what, b.op("abs", x)),
                                                  shape=b.ops[x].shape)))  # read: resident
            kernel(f"red_{what}_{cols}", red, cols=cols)

    def stores(b, x):
        b.out("y", b.op("rowmax", x), shape=(16, 80))  # a [rows, 1] stored into [rows, 80]
        b.out("s", b.op("mul", b.scalar("s"), b.lit(2.0)), shape=(16, 80))  # a scalar, filled
        b.out("h", x, dtype="f16")

    kernel("stores", stores)

    def matmuls(b, x):
        w = b.tile("w", 80, 48)  # streamed, f32
        h = b.tile("h", 80, 48, "f16")  # streamed, f16 widened
        g = b.tile("g", 80, 48, "f16")  # streamed, f16 converted to bf16
        a = b.tile("a", 16, 48, "i32")  # an integer accumulator
        t = b.tile("t", 48, 80)  # b = transpose(t): dot products
        ci = b.tile("ci", 16, 80, "i32")  # an integer left operand
        mm = (16, 48)
        y = b.op("matmul", x, w, shape=mm)
        y = b.op("add", y, b.op("matmul", x, b.op("convert", h, dtype="f32"), shape=mm))
        y = b.op("add", y, b.op("matmul", b.op("convert", ci, dtype="f32"),
                                b.op("convert", g, dtype="bf16"), shape=mm, dtype="f32"))
        b.out("y", b.op("matmul", x, b.op("mul", w, b.lit(2.0)), a, shape=mm, dtype="f32"))
        b.out("z", b.op("add", y, b.op("matmul", x, b.op("transpose", t, shape=(80, 48)),
                                       shape=mm)))

    kernel("matmuls", matmuls)

    def tt(b, x):
        s = b.tile("s", 80, 16)
        t = b.tile("t", 24, 80)
        b.out("y", b.op("matmul", b.op("transpose", s, shape=(16, 80)),
                        b.op("transpose", t, shape=(80, 24)), shape=(16, 24)))
        b.out("z", b.op("matmul", x, b.op("transpose", t, shape=(80, 24)), shape=(16, 24)))

    kernel("matmul_tt", tt)
    return ks


def test_the_plan_follows_every_writer_at_every_chunk():
    """Each zoo kernel measured by the emitter at every chunk of rows dividing its 16 (so each
    op both resident and chunked, with the slack of resident values read a chunk at a time):
    conftest.py's check holds at each, and the zoo reaches every writer's temporaries (each
    temporary-requesting path of vector.py, reductions.py and matmul.py is among the buffers
    the plan declares)."""
    from ptowsp.backends.ascend.aicore import kernel as K
    from ptowsp.diagnostics import WspError
    from ptowsp.ir.passes import plan_kernels as PK

    del CHECKED[:]
    emitted = refused = 0
    temps = 0
    for k in _zoo():
        k = PK.plan_kernel(k, fuse=False)
        try:
            for r in (16, 8, 4, 2, 1):
                _, fp = K.KernelEmitter.measure(k, r, False, None, (), Sorts())
                assert fp == ub_plan.footprint(k, r)
        except WspError:
            refused += 1  # an op the AICore does not run (the message is another test's)
            continue
        emitted += 1
        temps += sum(key[0] == "t" for key in ub_plan.UbPlan(k, 4).reqs)
    assert refused == 0 and emitted == len(_zoo()) and len(CHECKED) == 5 * emitted
    assert temps > 200


def _sort_zoo():
    """Kernels over the sort paths of scalar_ops.py / sorting.py: a topk's two results (one
    sort, its indices shared through a buffer), values only, indices only, sorted keys computed
    in the kernel, integer keys, a row of one run and rows of many."""
    from tests.kernel_builder import KB

    ks = []
    for name, dt, cols, k, what in (("topk", "f32", 80, 5, "both"), ("values", "f16", 200, 200, "v"),
                                    ("indices", "i32", 40, 40, "i"), ("one_run", "f32", 20, 3, "both"),
                                    ("computed", "f32", 130, 7, "exp")):
        b = KB(f"sort_{name}")
        x = b.tile("x", 8, cols, dt)
        if what == "exp":
            x = b.op("exp", x)
        if what in ("both", "v", "exp"):
            b.out("v", b.op("sort_values", x, shape=(8, k), attr="desc"))
        if what in ("both", "i", "exp"):
            b.out("i", b.op("sort_indices", x, shape=(8, k), dtype="i32", attr="asc"
                            if what == "i" else "desc"))
        ks.append(b.kernel())
    return ks


def test_the_plan_follows_every_sort_path():
    """Each sort kernel measured by the emitter at every chunk of its 8 rows, its sorts as whole
    rows, by blocks of 64 columns (the blocked path's winners), and on the scalar unit:
    conftest.py's check holds at each (the buffers A and B, the winners, the shared indices),
    and the paths differ as sorting.py says: A and B are 2 floats a column of a row (of a
    block), the winners 2 floats a kept pair, the scalar path no scratch."""
    from ptowsp.backends.ascend.aicore import kernel as K
    from ptowsp.ir.passes import plan_kernels as PK

    del CHECKED[:]
    modes = (Sorts(), Sorts(True, 64), Sorts(False))
    zoo = _sort_zoo()
    for k in zoo:
        k = PK.plan_kernel(k, fuse=False)
        for sorts in modes:
            for r in (8, 4, 2, 1):
                _, fp = K.KernelEmitter.measure(k, r, False, None, (), sorts)
                assert fp == ub_plan.footprint(k, r, sorts=sorts)
    assert len(CHECKED) == len(zoo) * len(modes) * 4
    # topk's [8, 80] f32 in chunks of 2 rows: by hand, not from the plan's code
    k = PK.plan_kernel(zoo[0], fuse=False)
    sizes = {m: sorted(q.size for key, q in ub_plan.UbPlan(k, 2, sorts=m).reqs.items()
                       if key[0] == "t") for m in modes}
    a_b = 2 * 96 * 2 * 4  # 2 rows, 2 floats a column, the row's 80 at a pitch of 96
    assert sizes[Sorts()] == [a_b, a_b]
    # by blocks of 64: A and B of a block (2 rows x 2 x 64 floats), and the winners: 2 blocks
    # of min(5, 64) pairs a row, 2 floats a pair (rounded up to a 256-byte repeat)
    assert sizes[Sorts(True, 64)] == [256, 2 * 64 * 2 * 4, 2 * 64 * 2 * 4]
    assert sizes[Sorts(False)] == []
    shared = [q for key, q in ub_plan.UbPlan(k, 2).reqs.items() if key[0] == "sorted"]
    assert len(shared) == 1 and shared[0].size == 256  # 2 rows of 5 i32 at a pitch of 32


def test_a_sort_whose_scratch_overflows_falls_back_as_the_emitter_does():
    """A sort of 8000 f32 a row needs 16 bytes a column of scratch and does not fit the UB as
    a whole row: the plan's search (the cycle model's) then sorts by blocks of 512, as the
    emitted header does (16 blocks); at 12000 a row not even the blocks' winners fit, and both
    sort on the scalar unit. The model's chunking and footprint are the header's."""
    from ptowsp.backends.ascend.aicore import emit_aicore, header_path
    from ptowsp.ir import nodes as N
    from tests.kernel_builder import KB

    for cols, want in ((8000, Sorts(True, 512)), (12000, Sorts(False))):
        b = KB("wide_sort")
        x = b.tile("x", 1, cols)
        b.out("i", b.op("sort_indices", x, shape=(1, cols), dtype="i32", attr="desc"))
        k = b.kernel()
        text = emit_aicore(N.Module("wide", (), (), (k,), (), None))[header_path(k)]
        fit = cost.vector_fit(k)
        assert fit.sorts == want
        assert (fit.footprint, fit.m, fit.nchunks, fit.rows) == _summary(text)[:4]
        assert ("AscendC::Sort32(" in text) == want.vector
        assert ("int32_t h[16]" in text) == (cols == 8000)


def test_the_models_sort_runs_are_the_emitted_ones():
    """The Sort32 repeats the cycle model bills (`sort_plan.sort_work`) are those the emitted
    kernels run: each zoo kernel whole (it fits in one chunk), the repeat counts of its
    `AscendC::Sort32(...)` calls added up; a topk's second op sorts nothing."""
    from ptowsp.backends.ascend.aicore import emit_aicore, header_path
    from ptowsp.backends.sort_plan import sort_pairs, sort_work
    from ptowsp.ir import nodes as N

    for k in _sort_zoo():
        text = emit_aicore(N.Module("z", (), (), (k,), (), None))[header_path(k)]
        fit = cost.vector_fit(k)
        assert fit.nchunks == 1 and fit.sorts == Sorts()
        emitted = sum(int(n) for n in re.findall(r"AscendC::Sort32\([^;]*, (\d+)\);", text))
        pairs = sort_pairs(k.ops)
        modelled = 0
        for i, op in enumerate(k.ops):
            if op.op in ("sort_values", "sort_indices"):
                src = k.ops[op.args[0]]
                role = None if i not in pairs else "first" if pairs[i][0] == i else "second"
                modelled += sort_work(fit.sorts, src.dtype, *src.shape, op.shape[1],
                                      op.op == "sort_values", role).sort32
        assert emitted == modelled > 0, k.name
