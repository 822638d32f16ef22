"""Mutated valid programs (tokens deleted, duplicated or swapped) never crash the front end:
the result is a checked module or diagnostics, never another exception."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptowsp.diagnostics import WspError
from ptowsp.frontend.checker import check_source

ROOT = Path(__file__).resolve().parents[2]
PATHS = sorted((ROOT / "tests" / "programs").glob("*.wsp")) + sorted((ROOT / "examples").glob("*.wsp"))
SOURCES = [p.read_text() for p in PATHS]
TOKEN = re.compile(r'"""[\s\S]*?"""|"(?:\\.|[^"\\\n])*"|//[^\n]*|\d[\d_.eE]*|\w+|\n|[<>=!]=|\S')


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def join(toks: list[str]) -> str:
    return " ".join(toks).replace(" \n ", "\n")


mutation = st.tuples(st.sampled_from(["delete", "duplicate", "swap", "replace"]),
                     st.floats(0, 1, exclude_max=True), st.floats(0, 1, exclude_max=True))
VOCAB = ["{", "}", "(", ")", "[", "]", ",", ":", "=", ".", ";", "\n", "*", "-", "for", "in", "when",
         "store", "P", "x", "0", "1.5", '"s"', "send", "consume", "as", "Tile", "f32", "i32", "_"]


@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, len(SOURCES) - 1), st.lists(mutation, min_size=1, max_size=3),
       st.sampled_from(VOCAB))
def test_mutated_programs_give_diagnostics_not_crashes(which, mutations, word):
    toks = tokens(SOURCES[which])
    for kind, a, b in mutations:
        i, j = int(a * len(toks)), int(b * len(toks))
        if kind == "delete":
            del toks[i]
        elif kind == "duplicate":
            toks.insert(i, toks[i])
        elif kind == "swap":
            toks[i], toks[j] = toks[j], toks[i]
        else:
            toks[i] = word
        if not toks:
            return
    text = join(toks)
    name = str(PATHS[which])  # beside the original, so that its imports resolve
    try:
        check_source(text, name)
    except WspError as err:
        assert err.diagnostics
        rendered = err.render()
        assert rendered.startswith(name) or rendered.startswith(str(PATHS[which].parent))
        assert "Traceback" not in rendered
