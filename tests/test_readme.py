"""The README's example program is a valid program, and its sample diagnostic is real."""

from __future__ import annotations

import re
from pathlib import Path

from ptowsp.frontend.checker import check_source

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_example_checks():
    (program,) = re.findall(r"```wsp\n(.*?)```", README, re.S)
    env = check_source(program, "scale.wsp")
    assert set(env.kernels) == {"double"} and set(env.schedules) == {"main"}


def test_readme_sample_diagnostic_is_what_wspc_prints():
    (sample,) = re.findall(r"```text\n(.*?)```", README, re.S)
    golden = (ROOT / "tests" / "golden" / "errors_demo.txt").read_text()
    assert sample.strip() in golden


def test_readme_python_example_runs():
    (snippet,) = re.findall(r"```python\n(.*?)```", README, re.S)
    import numpy as np

    x = np.random.default_rng(0).standard_normal((3, 16, 128)).astype(np.float32)
    y = np.zeros_like(x)
    exec(compile(snippet, "README.md", "exec"), {"x": x, "y": y})
    np.testing.assert_array_equal(y, 2 * x)  # written back into the caller's array


def test_readme_and_docs_link_only_inside_the_repository():
    """Users get the repository alone: every markdown link of README.md and docs/ names a file
    of the repository that exists (or an anchor), never a URL or a path outside it."""
    import re

    root = Path(__file__).resolve().parent.parent
    link = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
    bad = []
    for md in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", md.read_text(), flags=re.S)  # code, not links
        text = re.sub(r"`[^`\n]*`", "", text)
        for target in link.findall(text):
            if target.startswith("#"):
                continue
            path = (md.parent / target.split("#")[0]).resolve()
            if "://" in target or root not in path.parents or not path.exists():
                bad.append(f"{md.relative_to(root)}: {target}")
        if "../shared" in text:
            bad.append(f"{md.relative_to(root)}: mentions ../shared")
    assert not bad, "links that leave the repository:\n" + "\n".join(bad)
