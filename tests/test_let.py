"""`let` in workloads (language.md section 6, "Names: `let`") lowers exactly as the expression
written in place: each program here comes twice, with `let`s and with every name replaced by
its expression, and the two give the same IR (spans and message texts aside: they name the
source as written), byte-identical C for cpu_sim and Ascend C, and the same outputs on cpu_sim
and ref, which match an independent NumPy formula. A view named by a `let` keeps its run-time
checks, reported at the `let` with the task's coordinates.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp import driver
from ptowsp.diagnostics import WspError
from ptowsp.ir.printer import print_module

pytestmark = pytest.mark.usefixtures("wspc_cache")

ROOT = Path(__file__).resolve().parents[1]
HSET = settings(max_examples=6, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])

HEAD = """\
sym B
const RT = 16
input  X: f32[B, 64, 32]
input  L: i32[B]
output Y: f32[B, 64, 32]
kernel scale(x: In[Tile[16, 32, f32]], y: Out[Tile[16, 32, f32]], s: Scalar[f32],
             n: Scalar[i32]) {
    store(y, where(row_index(16, 32) < n, x * s, 0.0))
}
kernel copyr(x: In[Tile[R, 32, f32]], y: Out[Tile[R, 32, f32]], R: Constexpr[i32]) {
    store(y, x)
}
"""

# Views, task coordinates, a float scalar, an element read, and a `when` whose `and` reads
# elements on its right (lowered as nested `When`s, through the `let` as in place).
WHEN_LET = HEAD + """\
workload w() {
    for b in P(B) {
        let n = L[b]
        let s = 0.5 * 4
        for t in P(4) {
            let r0 = t * RT
            let x = X[b, r0 : r0 + RT, :]
            let y = Y[b, r0 : r0 + RT, :]
            let next = b + 1 < B and L[b + 1] > r0
            when n > r0 and next {
                scale[b, t](x = x, y = y, s = s, n = n - r0)
            } otherwise {
                scale[b, t](x = x, y = y, s = 1.0, n = 0)
            }
        }
    }
}
schedule main = w()
"""
WHEN_IN_PLACE = HEAD + """\
workload w() {
    for b in P(B) {
        for t in P(4) {
            when L[b] > t * RT and (b + 1 < B and L[b + 1] > t * RT) {
                scale[b, t](x = X[b, t * RT : t * RT + RT, :], y = Y[b, t * RT : t * RT + RT, :],
                            s = 0.5 * 4, n = L[b] - t * RT)
            } otherwise {
                scale[b, t](x = X[b, t * RT : t * RT + RT, :], y = Y[b, t * RT : t * RT + RT, :],
                            s = 1.0, n = 0)
            }
        }
    }
}
schedule main = w()
"""

# A loop extent read through a `let`, a slot number, a Constexpr argument, a `let` of a `let`.
LOOP_LET = HEAD + """\
workload w() {
    for b in P(B) {
        let m = ceildiv(L[b], RT)
        let k = 2
        slot_set(k, m)
        for t in P(m) {
            let r0 = t * RT
            let rows = RT
            let x = X[b, r0 : r0 + rows, :]
            let x2 = x
            copyr[b, t](x = x2, y = Y[b, r0 : r0 + rows, :], R = rows)
        }
    }
}
schedule main = w()
"""
LOOP_IN_PLACE = HEAD + """\
workload w() {
    for b in P(B) {
        slot_set(2, ceildiv(L[b], RT))
        for t in P(ceildiv(L[b], RT)) {
            copyr[b, t](x = X[b, t * RT : t * RT + RT, :], y = Y[b, t * RT : t * RT + RT, :], R = RT)
        }
    }
}
schedule main = w()
"""


def worker_pool_with_lets() -> str:
    """examples/worker_pool.wsp with `let`s in a process and a consume body (CSP), and the
    replica count named by a `let`."""
    text = (ROOT / "examples" / "worker_pool.wsp").read_text()
    for old, new in [
        ("    pipe {\n", "    let nw = 4\n    pipe {\n"),
        ("process workers * 4", "process workers * nw"),
        ("                send(queue, fetch[i](src = X[i], dst = queue))",
         "                let src = X[i]\n"
         "                send(queue, fetch[i](src = src, dst = queue))"),
        ("            consume(queue) as t {\n",
         "            consume(queue) as t {\n                let row = t.index\n"
         "                let p = Probs[row]\n"),
        ("p = Probs[t.index], owner = Owner[t.index]", "p = p, owner = Owner[row]"),
    ]:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


PAIRS = {
    "when": (WHEN_LET, WHEN_IN_PLACE),
    "loop": (LOOP_LET, LOOP_IN_PLACE),
    "csp": (worker_pool_with_lets(), (ROOT / "examples" / "worker_pool.wsp").read_text()),
}


def ir_text(text: str, level: int) -> str:
    """The IR of `text` at -O`level`, without what names the source as written (module name,
    the `# message @line:col` of checks and reads)."""
    m, _ = driver.optimize(driver.lower(driver.check_text(text, "t.wsp")), level)
    lines = print_module(m).splitlines()[1:]
    return "\n".join(re.sub(r"\s+#.*$", "", line) for line in lines)


def emitted(text: str, target: str) -> dict:
    t = driver.target(target)
    m, _ = driver.optimize(driver.lower(driver.check_text(text, "t.wsp")))
    name = driver.choose_schedule(m, None)
    files = driver.emit(t, m, name, {}).files
    # The Ascend project carries a copy of the source (wsp/), the places of run-time checks,
    # CSP sites and tasks (`"t.wsp:12:5"`, `(12:5)` in comments) and the checks' messages
    # (`{"t.wsp:12:5", "slice end ...", ...` and ` *   0: slice end ... (12:5)`): the only
    # text naming the source as written.
    # cpu_sim's C names none of it.
    def anonymous(v: str) -> str:
        v = re.sub(r'\{"t\.wsp:\d+:\d+", "(?:[^"\\]|\\.)*"', '{"t.wsp", ""', v)
        v = re.sub(r"\(\d+:\d+\)", "(l:c)", re.sub(r'"t\.wsp:\d+:\d+"', '"t.wsp"', v))
        return re.sub(r"(?m)^( \*\s+\d+: ).*(\(l:c\))$", r"\1\2", v)  # a check's comment

    if target == "cpu_sim":
        return files
    return {k: anonymous(v) for k, v in files.items() if not k.startswith("wsp/")}


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("level", [0, 2])
def test_let_lowers_to_the_ir_of_the_expression_in_place(name, level):
    with_let, in_place = PAIRS[name]
    assert "let " in with_let.split("workload", 1)[1]
    assert ir_text(with_let, level) == ir_text(in_place, level)


@pytest.mark.parametrize("name", sorted(PAIRS))
@pytest.mark.parametrize("target", ["cpu_sim", "ascend_npu"])
def test_let_emits_byte_identical_code(name, target):
    with_let, in_place = PAIRS[name]
    a, b = emitted(with_let, target), emitted(in_place, target)
    assert a.keys() == b.keys() and a, target
    for path in a:
        assert a[path] == b[path], path


def when_numpy(x, lens):
    """WHEN_*: rows r < lens[b] of block t scaled by 2 where lens[b] and lens[b + 1] both
    reach past the block's first row r0 = 16 t; every other row 0."""
    x = np.asarray(x, np.float64)
    y = np.zeros_like(x)
    nb = len(lens)
    for b in range(nb):
        for t in range(4):
            r0 = 16 * t
            if lens[b] > r0 and b + 1 < nb and lens[b + 1] > r0:
                rows = range(r0, min(r0 + 16, int(lens[b])))
                y[b, rows] = 2 * x[b, rows]
    return y


def loop_numpy(x, lens):
    """LOOP_*: the first ceil(lens[b] / 16) blocks of 16 rows copied, the rest 0."""
    y = np.zeros_like(np.asarray(x, np.float64))
    for b, n in enumerate(lens):
        r = -(-int(n) // 16) * 16
        y[b, :r] = x[b, :r]
    return y


_COMPILED: dict = {}


def compiled(text: str, target: str):
    key = (text, target)
    if key not in _COMPILED:
        _COMPILED[key] = ptowsp.parse(text, "t.wsp").compile(target)
    return _COMPILED[key]


@pytest.mark.cc
@HSET
@given(lens=st.lists(st.integers(0, 64), min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_let_programs_run_as_numpy_says(lens, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((len(lens), 64, 32), dtype=np.float32)
    inputs = dict(X=x, L=np.asarray(lens, np.int32))
    for texts, formula in ((PAIRS["when"], when_numpy), (PAIRS["loop"], loop_numpy)):
        want = formula(x, lens)
        for text in texts:
            for target in ("cpu_sim", "ref"):
                out = compiled(text, target).run(**inputs)["Y"]
                # x * 2, x and 0 are exact in f32
                np.testing.assert_array_equal(out, want.astype(np.float32))


def test_a_let_view_is_checked_at_run_time_at_the_let():
    text = HEAD + """\
workload w() {
    for b in P(B) {
        let r0 = L[b]
        let x = X[b, r0 : r0 + RT, :]
        scale[b](x = x, y = Y[b, 0:16, :], s = 1.0, n = 16)
    }
}
schedule main = w()
"""
    x = np.zeros((2, 64, 32), np.float32)
    for target in ("cpu_sim", "ref"):
        with pytest.raises(WspError) as info:
            compiled(text, target).run(X=x, L=np.asarray([0, 50], np.int32))
        (d,) = info.value.diagnostics
        assert (d.span.line, d.span.col) == (text.splitlines().index(
            "        let x = X[b, r0 : r0 + RT, :]") + 1, 13)
        assert d.message.startswith("slice end `r0 + RT` in `x = X[b, r0 : r0 + RT, :]` must "
                                    "be at most 64, found 66 (task `scale[b]` at b=1)")


def test_attention_examples_with_lets_emit_the_c_of_the_views_in_place():
    """examples/attention_tiered.wsp names its views with `let`; written out in place (as it
    was before), the program is the same."""
    text = (ROOT / "examples" / "attention_tiered.wsp").read_text()
    assert "let q = Q[b, h, qi * BLK : qi1, :]" in text
    in_place = expand_lets(text)
    assert "let " not in in_place.split("workload", 1)[1]
    assert emitted(text, "cpu_sim") == emitted(in_place, "cpu_sim")


def expand_lets(text: str) -> str:
    """`text` with each workload `let NAME = EXPR` line removed and NAME replaced by `(EXPR)` in
    the lines after it (enough for the example: one-line lets, no shadowing; a view's name as a
    whole argument `p = NAME` is replaced without parentheses)."""
    head, body = text.split("\nworkload", 1)
    out: list[str] = []
    lets: list[tuple[str, str]] = []
    for line in body.splitlines():
        m = re.match(r"\s*let (\w+) = (.*)$", line)
        if m:
            lets.append((m.group(1), m.group(2)))
            continue
        for name, expr in reversed(lets):
            line = re.sub(rf"= {name}\b(?=[,)])", f"= {expr}", line)
            line = re.sub(rf"(?<![\w.]){name}\b(?!\s*=[^=])", f"({expr})", line)
        out.append(line)
    return head + "\nworkload" + "\n".join(out) + "\n"
