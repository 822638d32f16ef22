"""Long and deep programs (language.md section 2, "Nesting"): a flat chain `x - x - ... - x` of
40,000 operands (a tree 40,000 levels deep, since operators group left to right) checks, lowers,
optimises and emits, in work proportional to its length; nesting past the documented limits is
a diagnostic at the construct, never a Python `RecursionError` ("nested too deeply" with no
place). Work is measured as Python function calls (a profiler hook), never as time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ptowsp import driver
from ptowsp.diagnostics import WspError
from ptowsp.frontend.nesting import MAX_BLOCKS, MAX_DEPTH

ROOT = Path(__file__).resolve().parents[2]

KERNEL = """\
input X: f32[16, 128]
output Y: f32[16, 128]
kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) {{
    store(y, {expr})
}}
workload w() {{ k(x = X, y = Y) }}
schedule main = w()
"""

WORKLOAD = """\
sym B = 4
input X: f32[B, 16, 128]
output Y: f32[B, 16, 128]
kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) {{ store(y, x) }}
workload w() {{ for b in P(B) {{ when {pred} {{ k[b](x = X[{index}], y = Y[b]) }} }} }}
schedule main = w()
"""


def shape(kind: str, n: int) -> str:
    """A program whose one expression has `n` operands (or levels) of the given shape."""
    if kind == "chain":  # left-deep: (((x - x) - x) - x)
        return KERNEL.format(expr=" - ".join(["x"] * n))
    if kind == "right":  # right-deep through parentheses: x - (x - (x - x))
        return KERNEL.format(expr="(x - " * (n - 1) + "x" + ")" * (n - 1))
    if kind == "calls":  # exp(exp(exp(x)))
        return KERNEL.format(expr="exp(" * (n - 1) + "x" + ")" * (n - 1))
    if kind == "lets":  # n statements, each one level
        body = "\n".join([f"    let v{i} = v{i - 1} - x" if i else "    let v0 = x" for i in range(n)])
        return KERNEL.replace("    store(y, {expr})", body + f"\n    store(y, v{n - 1})") \
                     .replace("{{", "{").replace("}}", "}")
    if kind == "workload":  # a long index expression and predicate in a workload
        return WORKLOAD.format(pred=" + ".join(["b"] * n) + " >= 0",
                               index=" + ".join(["b"] * n) + f" - {n - 1} * b")
    raise ValueError(kind)


def stages(text: str, name: str = "long.wsp") -> dict[str, int]:
    """Python calls made by each stage on `text`: check, lower, optimise (-O2), emit (cpu_sim)."""
    counts: dict[str, int] = {}

    def counted(stage: str, fn):
        n = 0

        def hook(frame, event, arg):
            nonlocal n
            if event == "call":
                n += 1

        def run():
            sys.setprofile(hook)
            try:
                return fn()
            finally:
                sys.setprofile(None)

        value = driver.deep(run)
        counts[stage] = n
        return value

    env = counted("check", lambda: driver.check_text(text, name))
    m = counted("lower", lambda: driver.lower(env))
    m, _ = counted("optimise", lambda: driver.optimize(m, 2))
    counted("emit", lambda: driver.emit(driver.target("cpu_sim"), m, "main", {}))
    return counts


@pytest.mark.parametrize("kind", ["chain", "right", "calls", "lets", "workload"])
def test_work_grows_linearly_with_length(kind):
    stages(shape(kind, 50))  # warm up: first-use costs (tables, record classes) out of the way
    small, large = stages(shape(kind, 5_000)), stages(shape(kind, 10_000))
    for stage in small:
        # twice the length, at most ~twice the calls (quadratic would be four times)
        assert large[stage] <= 2.3 * small[stage] + 2_000, (stage, small[stage], large[stage])


def test_forty_thousand_terms_go_through_every_stage():
    text = shape("chain", 40_000)
    env = driver.check_text(text, "long.wsp")
    m, _ = driver.optimize(driver.lower(env), 2)
    c = driver.emit(driver.target("cpu_sim"), m, "main", {}).files["kernels.c"]
    assert c.count(" - ") >= 39_999 - 3  # every subtraction is in the C (none folded away)


def test_the_cli_prints_a_forty_thousand_term_chain(tmp_path):
    src = tmp_path / "long.wsp"
    src.write_text(shape("chain", 40_000))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "WSPC_CACHE_DIR": str(tmp_path / "cache")}
    for args in (["check"], ["compile", "--emit", "ast"], ["compile", "--emit", "ir"]):
        r = subprocess.run([sys.executable, "-m", "ptowsp", *args, str(src)], capture_output=True,
                           text=True, env=env, timeout=600)
        assert r.returncode == 0, (args, r.stderr[-2000:])
    assert "x - x - x" in r.stdout or "sub" in r.stdout


# ---------------------------------------------------------------------------------------------
# The limits


def diagnostic(text: str):
    with pytest.raises(WspError) as info:
        driver.check_text(text, "deep.wsp")
    [d] = info.value.diagnostics
    return d


def test_an_expression_at_the_depth_limit_checks():
    driver.check_text(shape("calls", MAX_DEPTH - 1), "deep.wsp")  # the name `exp` is a level


def test_an_expression_past_the_depth_limit_is_reported_where_it_passes_it():
    d = diagnostic(shape("chain", MAX_DEPTH + 3))
    assert d.message == "expression nested more than 100,000 levels deep"
    # the root is the last `-` (level 1); the first `-` is level 100,002, its operands 100,003:
    # the construct at level 100,001, where the limit is passed, is the second `-`
    line = shape("chain", MAX_DEPTH + 3).splitlines()[3]
    assert (d.span.line, d.span.col) == (4, line.index("-", line.index("-") + 1) + 1)
    assert "split the expression" in d.help


def test_parentheses_nest_only_through_what_they_hold():
    # parentheses alone make no level: `((((x))))` is `x`
    driver.check_text(KERNEL.format(expr="(" * 200_000 + "x" + ")" * 200_000), "deep.wsp")
    d = diagnostic(shape("right", MAX_DEPTH + 1))
    assert d.message == "expression nested more than 100,000 levels deep"


def test_a_chain_of_prefix_operators_past_the_limit():
    for prefix in ("-", "- ", "not "):
        d = diagnostic(KERNEL.format(expr=prefix * (MAX_DEPTH + 1) + "x"))
        assert d.message == "expression nested more than 100,000 levels deep", prefix
        assert d.span.line == 4


def test_blocks_nest_at_most_max_blocks_deep():
    def nested(n: int) -> str:
        opens = "".join(f"for i{j} in P(a) {{ " for j in range(n))
        return ("input X: f32[16, 128]\noutput Y: f32[16, 128]\naxis a = Dense[1]\n"
                "kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }\n"
                f"workload w() {{ {opens} k(x = X, y = Y) {'} ' * n} }}\nschedule main = w()\n")

    driver.check_text(nested(MAX_BLOCKS), "deep.wsp")
    d = diagnostic(nested(MAX_BLOCKS + 1))
    assert d.message == "blocks nested more than 256 deep"
    text = nested(MAX_BLOCKS + 1).splitlines()[4]
    assert (d.span.line, d.span.col) == (5, text.index(f"for i{MAX_BLOCKS} ") + 1)


def test_a_tree_built_in_python_is_held_to_the_same_limit():
    # the Python embedding builds the AST itself (no text the parser could have checked)
    from dataclasses import replace

    from ptowsp.frontend import ast as A
    from ptowsp.frontend.parser import parse

    text = shape("chain", 2)
    sf = parse(text, "embed.py")
    kernel = next(d for d in sf.decls if isinstance(d, A.KernelDecl))
    store = kernel.body[0]
    deep = store.value.left
    for _ in range(MAX_DEPTH):
        deep = A.Binary("-", deep, store.value.right, store.value.op_span, span=store.value.span)
    kernel2 = replace(kernel, body=(replace(store, value=deep),))
    sf2 = replace(sf, decls=tuple(kernel2 if d is kernel else d for d in sf.decls))
    with pytest.raises(WspError) as info:
        driver.check_sources([sf2], {"embed.py": text})
    [d] = info.value.diagnostics
    assert d.message == "expression nested more than 100,000 levels deep"


def test_the_cli_reports_the_limit_not_a_recursion_error(tmp_path):
    src = tmp_path / "deep.wsp"
    src.write_text(shape("calls", MAX_DEPTH + 10))
    r = subprocess.run([sys.executable, "-m", "ptowsp", "check", str(src)], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert r.returncode == 1
    assert f"{src}:4:" in r.stderr and "expression nested more than 100,000 levels deep" in r.stderr
    assert "nested too deeply" not in r.stderr and "Traceback" not in r.stderr
    assert max(len(line) for line in r.stderr.splitlines()) < 400  # a window of the long line


# ---------------------------------------------------------------------------------------------
# driver.deep


def test_deep_runs_on_a_large_stack_and_restores_the_limit():
    before = sys.getrecursionlimit()

    def depth(n: int) -> int:
        return 0 if n == 0 else 1 + depth(n - 1)

    assert driver.deep(lambda: depth(200_000)) == 200_000
    assert sys.getrecursionlimit() == before
    assert driver.deep(lambda: driver.deep(lambda: 7)) == 7  # nested: runs in place


def test_deep_hands_back_the_exception():
    class Boom(Exception):
        pass

    def fail():
        raise Boom("inside")

    with pytest.raises(Boom, match="inside"):
        driver.deep(fail)
