"""The seed documents' own Python programs: the prototype README's quick start and the
tutorial's hello world verbatim, and the API specification's three complete examples in
runnable form (examples/python/), each checked against NumPy and through `to_wsp`.

The seed code the examples must hold verbatim, and the documents' import statements, are
shipped as test data in seed_code/ (its README says where each piece comes from), so these
tests run on any clone."""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pytest

from .helpers import assert_roundtrip

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "python"
SEED_CODE = Path(__file__).resolve().parent / "seed_code"


def _run(name: str) -> dict:
    return runpy.run_path(str(EXAMPLES / name))


@pytest.mark.parametrize("example, seed_code", [
    ("seed_quickstart.py", "readme_quickstart.txt"),
    ("seed_hello_world.py", "tutorial_hello_world.txt"),
])
def test_examples_hold_the_seed_code_verbatim(example, seed_code):
    block = (SEED_CODE / seed_code).read_text()
    assert block.count("\n") > 10  # the whole block, not an empty file
    assert block in (EXAMPLES / example).read_text()


def test_readme_quick_start(capsys):
    g = _run("seed_quickstart.py")
    x, y = g["X_np"], g["Y_np"]
    ref = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=-1, keepdims=True))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    out = capsys.readouterr().out
    cycles = int(out.split("total_cycles =")[1])
    assert cycles > 0 and cycles == g["program"].stats.total_cycles
    assert g["program"].stats.task_count == 2
    text = assert_roundtrip(g["program"].workload)
    assert ".dispatch(round_robin(4))" in text
    assert ".task_graph(window = 8192, unit = tasks, mode = stall)" in text


def test_tutorial_hello_world(capsys):
    g = _run("seed_hello_world.py")
    np.testing.assert_array_equal(g["C_np"], g["A_np"] + g["B_np"])
    assert "Executed 4 tasks" in capsys.readouterr().out
    assert_roundtrip(g["program"].workload)


def test_spec_attention_with_variable_lengths():
    g = _run("spec_attention_varlen.py")
    np.testing.assert_allclose(g["O_np"], g["reference"](), rtol=1e-5, atol=1e-5)
    assert g["program"].stats.task_count == 4 * 8
    text = assert_roundtrip(g["program"].workload)
    assert ".dispatch(affinity(b))" in text and ".stream_by(h % 2)" in text


def test_spec_moe_sparse_routing():
    g = _run("spec_moe_routing.py")
    np.testing.assert_allclose(g["out_np"], g["reference"](), rtol=1e-5, atol=1e-5)
    assert g["program"].stats.task_count == len(g["indices"])
    text = assert_roundtrip(g["program"].workload)
    assert "axis routing = Sparse(batch, routing_indptr, routing_indices)" in text
    assert "for e in P.sel(routing[b]) {" in text


def test_spec_megakernel_pipeline():
    g = _run("spec_megakernel.py")
    np.testing.assert_allclose(g["output_np"], g["reference"](), rtol=1e-5, atol=1e-5)
    assert g["program"].stats.task_count == 3 * g["num_tiles"]
    text = assert_roundtrip(g["program"].workload)
    assert "channel load_to_compute: Tile[16, 64, f32], depth = 2" in text
    assert "input input_: f32[6, 16, 64]" in text  # a `.wsp` keyword gets a suffix


def test_every_import_line_of_the_seed_documents_works():
    """Each `from pto_wsp import ...` statement in the API specification, the README and the
    tutorial imports (names wspc does not support import too, and fail only when used)."""
    import ast

    text = (SEED_CODE / "imports.txt").read_text()
    statements = ast.parse(text).body
    assert len(statements) == 37  # every one the documents hold (seed_code/README.md)
    for node in statements:
        assert isinstance(node, ast.ImportFrom) and node.module == "pto_wsp"
        exec(compile(ast.Module([node], []), "seed_code/imports.txt", "exec"), {})
