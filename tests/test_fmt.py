"""`wspc fmt` and `ptowsp.format_source` (docs/tools.md, "wspc fmt"): the canonical layout,
comments kept, idempotent, the same IR, and the command's `--check`, `--diff`, directories,
standard input and errors.

The layout is a function of the tokens, the comments and where the user left blank lines: the
hypothesis tests below rebuild every example and test program from its tokens with random
spacing and indentation and expect the file back exactly, then add comments, line breaks and
blank lines and expect a text that formats to itself and lowers to the same IR.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import ptowsp
from ptowsp import driver
from ptowsp.cli import main
from ptowsp.diagnostics import WspError
from ptowsp.frontend.parser import _parser
from ptowsp.ir.printer import print_module

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = sorted(glob.glob(str(ROOT / "examples" / "*.wsp")) + glob.glob(str(ROOT / "tests" / "programs" / "*.wsp")))
TEXTS = {Path(p).relative_to(ROOT).as_posix(): Path(p).read_text() for p in PROGRAMS}
# errors_demo.wsp parses but does not check: its meaning is compared as the AST outline
fmt = ptowsp.format_source


def wspc(*args: str, cwd: Path = ROOT, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ptowsp", *args], capture_output=True, text=True,
                          cwd=cwd, input=stdin, env={**os.environ, "PYTHONPATH": str(ROOT)})


def meaning(text: str, name: str) -> str:
    """The IR of `text` without source positions (the AST outline when it does not check)."""
    try:
        ir = print_module(driver.lower(driver.check_text(text, str(ROOT / name))))
    except WspError:
        from ptowsp.frontend.parser import parse
        from ptowsp.frontend.printer import dump

        return dump(parse(text, name))
    return re.sub(r"@\d+:\d+", "@", ir)


MEANING = {name: meaning(text, name) for name, text in TEXTS.items()}


# ---- every program is formatted, and the suite keeps it so -----------------------------------


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_example_and_test_program_is_formatted(name):
    assert fmt(TEXTS[name], name) == TEXTS[name], f"run `wspc fmt {name}`"


def test_the_command_agrees_that_the_examples_are_formatted():
    r = wspc("fmt", "--check", "examples", "tests/programs")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


# ---- perturbations ---------------------------------------------------------------------------


def pieces(text: str) -> list[list[str]]:
    """The text as lines of tokens and comments (a `\"\"\"` body is one piece, the rest of
    its last line joins the line it starts on); blank lines are empty lists."""
    lexer = _parser().lexer
    lines: list[list[str]] = [[]]
    pos = 0
    while pos < len(text):
        m = lexer.master.match(text, pos)
        value, kind = m.group(), m.lastgroup
        if kind == "NL":
            lines.append([])
        elif kind != "WS" or value.startswith(("//", "/*")):
            lines[-1].append(value.rstrip() if kind == "WS" else value)
        pos = m.end()
    return lines


@st.composite
def respaced(draw, text: str) -> str:
    """`text` with random indentation, spaces between tokens and trailing blanks, and each
    blank line repeated: what the canonical layout does not depend on."""
    out = []
    for line in pieces(text):
        if not line:
            out.extend([""] * draw(st.integers(1, 3)))
            continue
        indent = " " * draw(st.integers(0, 9)) + "\t" * draw(st.integers(0, 1))
        gaps = [" " * draw(st.integers(1, 3)) for _ in line]
        out.append(indent + "".join(p + g for p, g in zip(line, gaps)).rstrip() + " " * draw(st.integers(0, 2)))
    return "\n".join(out)


@st.composite
def perturbed(draw, text: str) -> tuple[str, list[str]]:
    """`text` respaced, with comments added (at line ends and on lines of their own), some
    lines broken after a comma inside brackets, and blank lines anywhere between lines."""
    added: list[str] = []
    out = []
    for n, line in enumerate(pieces(text)):
        if draw(st.integers(0, 9)) == 0:
            out.append("")
        if line and draw(st.integers(0, 7)) == 0:
            added.append(f"// own {n}")
            out.append(" " * draw(st.integers(0, 8)) + added[-1])
        words, depth = [], 0
        for p in line:
            words.append(p)
            depth += p in ("(", "[") and 1 or p in (")", "]") and -1 or 0
            if p == "," and depth > 0 and draw(st.integers(0, 5)) == 0:
                words.append("\n")
        joined = " ".join(words).replace(" \n ", "\n")
        if line and not line[-1].startswith("//") and not line[-1].endswith('"""') \
                and draw(st.integers(0, 5)) == 0:
            added.append(f"// end {n}")
            joined += "  " + added[-1]
        out.append(joined)
    return "\n".join(out), added


SOME = settings(max_examples=40)


@SOME
@given(st.sampled_from(sorted(TEXTS)).flatmap(lambda name: st.tuples(st.just(name), respaced(TEXTS[name]))))
def test_spacing_and_indentation_do_not_change_the_layout(case):
    name, text = case
    assert fmt(text, name) == TEXTS[name]


@SOME
@given(st.sampled_from(sorted(TEXTS)).flatmap(lambda name: st.tuples(st.just(name), perturbed(TEXTS[name]))))
def test_formatting_is_idempotent_keeps_comments_and_the_meaning(case):
    name, (text, added) = case
    once = fmt(text, name)
    assert fmt(once, name) == once
    for comment in added:
        assert comment in once
    assert meaning(once, name) == MEANING[name]


# ---- the layout ------------------------------------------------------------------------------

KERNEL = "kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) {\n    store(y, x)\n}\n"


def test_comments_at_the_top_between_declarations_inside_blocks_and_at_line_ends_survive():
    text = """// the file's header

//   second paragraph, indented as written
module   m
sym B   // batch
   // before the input
input X : f32[B, 16, 128]
output Y: f32[B, 16, 128]
kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) {   // the kernel
  // first statement
  let t = x*2   /* doubled */


  store(y, t)
  // last, before the brace
}   // after the brace
axis batch = DenseDyn(B)
workload w() {
for b in P(batch) {
k[b](x = X[b], y = Y[b])
}
}
schedule main = w()   // the default
  .dispatch(round_robin(2))   // two
// the end
"""
    assert fmt(text) == """// the file's header

//   second paragraph, indented as written
module m
sym B  // batch
// before the input
input X: f32[B, 16, 128]
output Y: f32[B, 16, 128]

kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) {  // the kernel
    // first statement
    let t = x * 2  /* doubled */

    store(y, t)
    // last, before the brace
}  // after the brace

axis batch = DenseDyn(B)

workload w() {
    for b in P(batch) {
        k[b](x = X[b], y = Y[b])
    }
}

schedule main = w()            // the default
    .dispatch(round_robin(2))  // two
// the end
"""


def test_a_comment_inside_a_reprinted_statement_moves_before_it():
    text = "kernel k(x: In[Tile[16, 128, f32]],  // the input\n         y: Out[Tile[16, 128, f32]]) {\n    store(y, x)\n}\n"
    assert fmt(text) == "// the input\n" + KERNEL


def test_long_calls_and_signatures_wrap_filled_and_lined_up_after_the_paren():
    params = ", ".join(f"a{i}: In[Tile[16, 128, f32]]" for i in range(5))
    text = f"kernel long_name({params}, y: Out[Tile[16, 128, f32]]) {{\n    store(y, a0)\n}}\n"
    out = fmt(text)
    assert out.splitlines()[:3] == [
        "kernel long_name(a0: In[Tile[16, 128, f32]], a1: In[Tile[16, 128, f32]], a2: In[Tile[16, 128, f32]],",
        "                 a3: In[Tile[16, 128, f32]], a4: In[Tile[16, 128, f32]],",
        "                 y: Out[Tile[16, 128, f32]]) {",
    ]
    assert all(len(line) <= 100 for line in out.splitlines())


def test_trailing_comments_of_adjacent_lines_line_up():
    out = fmt("const A = 1 // one\nconst LONGER = 22 // two\n\nconst C = 3    // alone\n")
    assert out == "const A = 1        // one\nconst LONGER = 22  // two\n\nconst C = 3  // alone\n"


def test_extern_bodies_are_kept_verbatim():
    body = '\n  int  x = 1 ;   // not ours\n\n    /* nor this */ y[0]=x;\n'
    text = f'kernel k(y: Out[Tile[1, 1, i32]])   extern c """{body}"""   extern cpp """{body}"""\n'
    out = fmt(text)
    assert out == f'kernel k(y: Out[Tile[1, 1, i32]]) extern c """{body}"""\nextern cpp """{body}"""\n'
    assert fmt(out) == out


def test_literals_keep_their_spelling_and_spellings_become_the_keywords():
    text = ("const A = 0x10\nconst B = 1_000\nconst C = -0x2\n"
            "kernel k(x: In[Tile[16, 16, f32]], y: Out[Tile[16, 16, f32]]) {\n    store(y, x * 1e-6)\n}\n"
            "workload w() {\n    for i in P(A) {\n        P.when(i < 2) {\n            k[i](x = X[i], y = Y[i])\n"
            "        }\n        P.otherwise {\n            k[i](x = X[i], y = Y[i])\n        }\n    }\n}\n")
    out = fmt(text)
    assert "const A = 0x10\nconst B = 1_000\nconst C = -0x2\n" in out and "x * 1e-6" in out
    assert "        when i < 2 {\n" in out and "        } otherwise {\n" in out


def test_an_empty_file_and_a_file_of_comments():
    assert fmt("") == "" and fmt("\n\n") == ""
    assert fmt("\n// only a comment\n\n\n/* and\n   another */\n") == "// only a comment\n\n/* and\n   another */\n"


def test_a_file_that_does_not_parse_is_the_parser_error():
    with pytest.raises(WspError) as info:
        fmt("kernel k( {\n", "bad.wsp")
    assert str(info.value.diagnostics[0].span) == "bad.wsp:1:11"
    assert info.value.diagnostics[0].message == "expected `)` or a name, found `{`"


# ---- the command -----------------------------------------------------------------------------

UGLY = "module m\nconst  A=1\n"
NICE = "module m\nconst A = 1\n"


def test_check_names_the_unformatted_files_and_writes_nothing(tmp_path):
    (tmp_path / "a.wsp").write_text(UGLY)
    (tmp_path / "b.wsp").write_text(NICE)
    r = wspc("fmt", "--check", "a.wsp", "b.wsp", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (1, "a.wsp\n", "")
    assert (tmp_path / "a.wsp").read_text() == UGLY
    r = wspc("fmt", "--check", "b.wsp", cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "")


def test_diff_prints_a_unified_diff_and_writes_nothing(tmp_path):
    (tmp_path / "a.wsp").write_text(UGLY)
    r = wspc("fmt", "--diff", "a.wsp", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "--- a.wsp\n+++ a.wsp (formatted)\n@@ -1,2 +1,2 @@\n module m\n-const  A=1\n+const A = 1\n"
    assert (tmp_path / "a.wsp").read_text() == UGLY
    r = wspc("fmt", "--diff", "--check", "a.wsp", cwd=tmp_path)
    assert r.returncode == 1 and r.stdout.endswith("a.wsp\n")


def test_files_are_rewritten_in_place_and_only_those_that_change(tmp_path):
    (tmp_path / "a.wsp").write_text(UGLY)
    (tmp_path / "b.wsp").write_text(NICE)
    inode = (tmp_path / "b.wsp").stat().st_ino
    r = wspc("fmt", "a.wsp", "b.wsp", cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    assert (tmp_path / "a.wsp").read_text() == NICE
    assert (tmp_path / "b.wsp").stat().st_ino == inode, "a formatted file is not rewritten"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.wsp", "b.wsp"]


def test_a_directory_formats_every_wsp_file_below_it(tmp_path):
    for rel in ("a.wsp", "sub/b.wsp", "sub/deeper/c.wsp", ".hidden/d.wsp", "notes.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(UGLY)
    r = wspc("fmt", "--check", ".", cwd=tmp_path)
    assert r.returncode == 1
    assert r.stdout.splitlines() == ["./a.wsp", "./sub/b.wsp", "./sub/deeper/c.wsp"]
    assert wspc("fmt", ".", cwd=tmp_path).returncode == 0
    assert (tmp_path / "sub/deeper/c.wsp").read_text() == NICE
    assert (tmp_path / ".hidden/d.wsp").read_text() == UGLY
    assert (tmp_path / "notes.txt").read_text() == UGLY
    (tmp_path / "empty").mkdir()
    r = wspc("fmt", "empty", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == "empty: error: no `.wsp` file below this directory\n"


def test_standard_input_goes_to_standard_output():
    r = wspc("fmt", "-", stdin=UGLY)
    assert (r.returncode, r.stdout, r.stderr) == (0, NICE, "")
    r = wspc("fmt", "--check", "-", stdin=UGLY)
    assert (r.returncode, r.stdout) == (1, "<stdin>\n")
    r = wspc("fmt", "-", stdin="const A = \n")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("<stdin>:1:10: error: expected an expression, found end of file")


def test_a_file_that_does_not_parse_is_reported_and_left_as_it_is(tmp_path):
    (tmp_path / "bad.wsp").write_text("kernel k( {\n")
    (tmp_path / "a.wsp").write_text(UGLY)
    r = wspc("fmt", "bad.wsp", "a.wsp", cwd=tmp_path)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr == ("bad.wsp:1:11: error: expected `)` or a name, found `{`\n"
                        "   1 | kernel k( {\n     |           ^\n")
    assert (tmp_path / "bad.wsp").read_text() == "kernel k( {\n"
    assert (tmp_path / "a.wsp").read_text() == NICE, "the other files are formatted"
    r = wspc("fmt", "missing.wsp", "notes.txt", cwd=tmp_path)
    assert r.returncode == 1
    assert "missing.wsp: error: cannot read file: no such file" in r.stderr
    assert "notes.txt: error: cannot read file: not a `.wsp` file" in r.stderr


def test_standard_input_that_is_not_utf8(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ptowsp", "fmt", "-"], input=b"const A = \xff\n",
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 1 and r.stderr.decode() == "<stdin>: error: not UTF-8 text\nhelp: save the file as UTF-8\n"


def test_a_file_that_cannot_be_written_is_an_error_and_stays_as_it_was(tmp_path, monkeypatch):
    import ptowsp.frontend.formatting

    def refuse(path, data):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(ptowsp.frontend.formatting, "write_atomic", refuse)
    path = tmp_path / "a.wsp"
    path.write_text(UGLY)
    r = CliRunner().invoke(main, ["fmt", str(path)])
    assert r.exit_code == 1
    assert f"{path}: error: cannot write the file: permission denied" in r.output
    assert path.read_text() == UGLY


def test_to_wsp_prints_formatted_text():
    # the embedding prints through the same printer: its text is already in the layout
    import numpy as np

    from pto_wsp import (
        DenseDyn,
        DispatchPolicy,
        DType,
        In,
        Out,
        P,
        Tensor,
        Tile,
        kernel,
        pto,
        workload,
    )

    x = np.zeros((3, 16, 128), np.float32)
    X, Y = Tensor(data=x, dtype=DType.F32), Tensor(data=np.zeros_like(x), dtype=DType.F32)

    @kernel
    def double(x: In[Tile[16, 128, DType.F32]], y: Out[Tile[16, 128, DType.F32]]):
        pto.store(y, pto.mul(x, 2.0))

    @workload
    def main_work():
        for b in P(DenseDyn(3)):
            double[b](x=X[b], y=Y[b])

    text = ptowsp.to_wsp(main_work().dispatch(DispatchPolicy.round_robin(4)))
    assert "schedule main = main_work()\n    .dispatch(round_robin(4))\n" in text
    assert fmt(text) == text


def test_standard_input_over_the_size_limit():
    from ptowsp.limits import MAX_SOURCE_BYTES

    r = subprocess.run([sys.executable, "-m", "ptowsp", "fmt", "-"], input=b"\n" * (MAX_SOURCE_BYTES + 1),
                       capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert (r.returncode, r.stdout) == (1, b"")
    assert r.stderr.decode() == "<stdin>: error: larger than 16 MiB, the limit for a source file\n"


def test_comments_between_the_branches_of_a_when_stay_in_the_branch_before():
    text = ("workload w() {\n    for i in P(4) {\n        when i < 2 {\n            k[i](x = X[i])\n"
            "        }  // first\n        // between\n        else when i < 3 { k[i](x = X[i]) } /* second */\n"
            "        otherwise {\n        }\n    }\n}\n")
    out = fmt(text)
    assert out == ("workload w() {\n    for i in P(4) {\n        when i < 2 {\n            k[i](x = X[i])\n"
                   "            // first\n            // between\n        } else when i < 3 {  /* second */\n"
                   "            k[i](x = X[i])\n        } otherwise {\n        }\n    }\n}\n")
    assert fmt(out) == out


def test_crlf_line_ends_become_lf_and_a_long_chain_of_operators_stays_one_line():
    assert fmt("module m\r\nconst A = 1  // c\r\n\r\n\r\nconst B = 2\r\n") == "module m\nconst A = 1  // c\n\nconst B = 2\n"
    chain = "const A = " + " + ".join(["max(1, 2)"] * 500) + "\n"
    assert fmt(chain) == chain  # breaking at one call's comma would not make it readable
