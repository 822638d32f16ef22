"""The independence proof of parallel nests (ptowsp/ir/independence.py): what it proves must
hold when every task's box is computed by brute force, and the cases it must not prove."""

from __future__ import annotations

import itertools
import textwrap

import pytest

from ptowsp import sym
from ptowsp.frontend.checker import check_source
from ptowsp.ir import nodes as N
from ptowsp.ir.independence import independent_nest
from ptowsp.lower import lower

PROGRAM = """
module m
input X: f32[64, 64]
inout Y: f32[64, 64]
output Z: f32[64, 64]
kernel copy(x: In[Tile[{rows}, 4, f32]], y: {ymode}[Tile[{rows}, 4, f32]]) {{ store(y, x) }}
kernel acc(y: InOut[Tile[{rows}, 4, f32]], z: In[Tile[{rows}, 4, f32]]) {{ store(y, y + z) }}
workload w() {{
    {body}
}}
schedule main = w()
"""


def nest(body: str, rows: int = 1, ymode: str = "Out") -> N.Loop:
    text = textwrap.dedent(PROGRAM).format(body=body, rows=rows, ymode=ymode)
    (loop,) = lower(check_source(text, "t.wsp")).schedule("main").body
    return loop


def boxes(loop: N.Loop):
    """(iteration, tensor, mode, box) of every access of every task, by brute force."""
    out = []

    def walk(stmts, env):
        for st in stmts:
            if isinstance(st, N.Loop):
                for i in range(sym.evaluate(st.extent, env)):
                    walk(st.body, {**env, st.var: i})
            elif isinstance(st, N.Task):
                key = tuple(sorted(env.items()))
                for a in st.args:
                    if isinstance(a, N.TileArg):
                        box = tuple((sym.evaluate(o, env), sym.evaluate(o, env) + sym.evaluate(e, env))
                                    for o, e in zip(a.offsets, a.extents))
                        out.append((key, a.tensor, a.mode, box))
            else:
                walk(st.body, env)

    walk((loop,), {})
    return out


def conflict_free(loop: N.Loop) -> bool:
    acc = boxes(loop)
    for (i1, t1, m1, b1), (i2, t2, m2, b2) in itertools.combinations(acc, 2):
        if i1 == i2 or t1 != t2 or (m1 == "r" and m2 == "r"):
            continue
        if all(lo1 < hi2 and lo2 < hi1 for (lo1, hi1), (lo2, hi2) in zip(b1, b2)):
            return False
    return True


PROVEN = [
    ("for i, j in P(4, 8) { copy[i, j](x = X[i, j*4 : j*4 + 4], y = Y[i, j*4 : j*4 + 4]) }", 1),
    ("for j in P(8) { copy[j](x = X[0:4, 0:4], y = Y[j*4 + 4 : j*4 + 8, 0:4]) }", 4),
    ("for i in P(4) { for j in P(2) { acc[i, j](y = Y[i, j*4 : j*4 + 4], z = X[0, 0:4]) } }", 1),
    ("for i in P(8) { acc[i](y = Y[i*2, 0:4], z = X[i, 0:4]) }", 1),  # gaps between boxes
    ("for i in P(8) { copy[i](x = Y[63 - i, 0:4], y = Z[7 - i, 0:4]) }", 1),  # Y only read
]
NOT_PROVEN = [
    "for i, j in P(4, 8) { copy[i, j](x = X[i, 0:4], y = Y[i, 0:4]) }",  # j tracked by nothing
    "for i in P(8) { copy[i](x = X[i, 0:4], y = Y[0, 0:4]) }",  # every task writes one box
    "for i in P(8) { copy[i](x = X[i, 0:4], y = Y[i / 2, 0:4]) }",  # two tasks per box
    "for i in P(8) { acc[i](y = Y[i, 0:4], z = Y[i + 1, 0:4]) }",  # reads the next one's box
    "for i in P(4) { for k in P.seq(2) { copy[i, k](x = X[i, 0:4], y = Y[i, 0:4]) } }",
    "for i, j in P(4, 4) { copy[i, j](x = X[i, 0:4], y = Y[i + j, 0:4]) }",  # a diagonal
    # conflict-free, but one dimension tracks two variables: conservatively not proven
    "for i in P(4) { for j in P(2) { acc[i, j](y = Y[i*8 + j, 4:8], z = X[0, 0:4]) } }",
]


@pytest.mark.parametrize("body,rows", PROVEN)
def test_proven_nests_are_conflict_free(body, rows):
    loop = nest(body, rows)
    assert independent_nest(loop)
    assert conflict_free(loop)


@pytest.mark.parametrize("body", NOT_PROVEN)
def test_conflicting_or_unclear_nests_are_not_proven(body):
    loop = nest(body)
    assert not independent_nest(loop)


def test_overlapping_slices_are_not_proven():
    """Tiles of 8 rows every 4 rows overlap: the step must be at least the extent."""
    loop = nest("for i in P(8) { copy[i](x = X[0:8, 0:4], y = Y[i*4 : i*4 + 8, 0:4]) }", 8)
    assert not conflict_free(loop)
    assert not independent_nest(loop)
