"""`Program.simulate` needs only what the simulation needs (docs/running.md, "Simulating"): a
sym comes from `bind`, the shape of an array given or its default, exactly as in `run`; a
tensor whose data no enumeration reads stands in as zeros, so an inout KV cache or a weight is
never required; what is missing is named, each sym with the arrays whose shape would give it,
each tensor whose elements decide the task space with the place that reads them. Each case
(dense, ragged with its lengths given and without, CSP, a routing computed in the run) also
checks the simulation enumerates the tasks the real run does."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

import ptowsp
from ptowsp.diagnostics import WspError

pytestmark = [pytest.mark.cc, pytest.mark.usefixtures("wspc_cache")]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# a decode step: the KV cache `Kc` is an inout, `B` follows from the shape of `X`
DENSE = """\
sym B
input  X: f32[B, 4, 8]
inout  Kc: f32[B, 4, 8]
output Y: f32[B, 4, 8]
kernel step(x: In[Tile[4, 8, f32]], k: InOut[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) {
    store(k, k + x)
    store(y, k * x)
}
workload w() { for b in P(B) { step[b](x = X[b], k = Kc[b], y = Y[b]) } }
"""

# ragged tokens: `B` follows from the shape of the index array `lens`, `S` does not
RAGGED = """\
sym B, S
input  lens: i32[B]
input  X: f32[B, S, 8]
inout  Kc: f32[B, S, 8]
output Y: f32[B, S, 8]
kernel step(x: In[Tile[1, 8, f32]], k: InOut[Tile[1, 8, f32]], y: Out[Tile[1, 8, f32]]) {
    store(k, k + x)
    store(y, k * x)
}
axis batch = DenseDyn(B)
axis toks = Ragged(batch, lens)
workload w() {
    for b in P(batch) { for t in P(toks[b]) { step[b, t](x = X[b, t], k = Kc[b, t], y = Y[b, t]) } }
}
"""


def compiled(text: str) -> ptowsp.Program:
    return ptowsp.parse(textwrap.dedent(text), "t.wsp").compile("cpu_sim")


def errors(call) -> list:
    with pytest.raises(WspError) as info:
        call()
    return info.value.diagnostics


def test_dense_syms_from_a_shape_and_no_inout_needed():
    prog = compiled(DENSE)
    x = np.ones((3, 4, 8), np.float32)
    assert prog.simulate(X=x).task_count == 3  # no bind, no `Kc`
    assert prog.simulate(bind={"B": 5}).task_count == 5  # no array at all
    prog.run(X=x, Kc=np.zeros_like(x))
    assert prog.stats.task_count == 3


def test_dense_without_syms_names_the_sym_and_every_array_that_gives_it():
    (d,) = errors(lambda: compiled(DENSE).simulate())
    assert d.message == ("sym `B` is not bound, and simulating needs its value (it sizes the "
                         "tensors and the task space)")
    assert (d.span.line, d.span.col) == (1, 5)
    assert d.help == ('bind it: simulate(bind={"B": N}), or pass an array for `X` or `Kc` '
                      "(its shape gives it)")


def test_ragged_with_its_lengths_given():
    prog = compiled(RAGGED)
    lens = np.array([3, 0, 2], np.int32)
    # `B` from the shape of `lens`; `X` and `Kc` are not needed
    assert prog.simulate(bind={"S": 4}, lens=lens).task_count == 5
    x = np.ones((3, 4, 8), np.float32)
    prog.run(lens=lens, X=x, Kc=np.zeros_like(x))
    assert prog.stats.task_count == 5
    # `S` from the shape of `X` instead of `bind`
    assert prog.simulate(lens=lens, X=x).task_count == 5


def test_ragged_without_its_lengths_names_them_and_where_they_are_read():
    prog = compiled(RAGGED)
    (d,) = errors(lambda: prog.simulate(bind={"B": 3, "S": 4}))
    assert d.message == ("simulating this schedule needs the data of `lens`: its elements "
                         "decide which tasks exist")
    assert d.help == "pass it: simulate(lens=...)"
    (note,) = d.notes
    assert note.message == "read here to enumerate the tasks"
    assert (note.span.line, note.span.col) == (13, 36)  # `toks[b]` in `for t in P(toks[b])`
    # with nothing given, every missing sym and the lengths, in one error
    ds = errors(lambda: prog.simulate())
    assert [d.message.split(":")[0] for d in ds] == [
        "sym `B` is not bound, and simulating needs its value (it sizes the tensors and the task space)",
        "sym `S` is not bound, and simulating needs its value (it sizes the tensors and the task space)",
        "simulating this schedule needs the data of `lens`"]
    assert ds[0].help.endswith("or pass an array for `lens` or `X` or `Kc` (its shape gives it)")


def test_csp_syms_from_a_shape():
    text = (EXAMPLES / "worker_pool.wsp").read_text().replace("sym N = 16", "sym N")
    prog = ptowsp.parse(text, "worker_pool.wsp").compile("cpu_sim")
    x = np.zeros((6, 16, 128), np.float32)
    simulated = prog.simulate(X=x).task_count
    prog.run(X=x)
    assert simulated == prog.stats.task_count > 6
    (d,) = errors(lambda: prog.simulate())
    assert d.message.startswith("sym `N` is not bound") and "`X` (its shape gives it)" in d.help


def test_a_routing_computed_in_the_run_needs_only_the_shapes():
    # moe's routing is written by its own router task: the kernels run, on zeros for the
    # tensors not given; `T` comes from the tokens' shape
    prog = ptowsp.load(EXAMPLES / "moe.wsp").compile("cpu_sim")
    x = np.zeros((16, 64), np.float32)
    assert prog.simulate(X=x).task_count == prog.simulate(bind={"T": 16}).task_count > 0
