"""How a diagnostic is shown (language.md section 10): carets under a span on one line, a span
over several lines as its first line (`^~~~` to the end of the line) and its last line (`~~~`
up to the span's end), long lines as a window around the caret, and nothing that is not
printable (a file name's control characters, a source line's escape sequences) reaching the
terminal."""

from __future__ import annotations

import pytest

from ptowsp import driver
from ptowsp.diagnostics import Diagnostic, WspError, printable, render
from ptowsp.spans import Span

HEAD = """\
input X: f32[16, 128]
output Y: f32[16, 128]
kernel k(x: In[Tile[16, 128, f32]], y: Out[Tile[16, 128, f32]]) { store(y, x) }
"""


def rendered(body: str, name: str = "m.wsp") -> str:
    with pytest.raises(WspError) as info:
        driver.check_text(HEAD + body + "schedule main = w()\n", name)
    return info.value.render()


def test_a_span_on_one_line_has_a_caret_under_each_character():
    out = rendered("workload w() {\n    k(x = X, y = Y, z = X)\n}\n")
    assert out.splitlines() == [
        "m.wsp:5:21: error: kernel `k` has no parameter `z`",
        "   5 |     k(x = X, y = Y, z = X)",
        "     |                     ^^^^^",
    ]


def test_a_call_over_two_lines_is_marked_on_both():
    out = rendered("workload w() {\n    k(x = X,\n      x = X)\n}\n")
    assert out.splitlines()[:5] == [
        "m.wsp:5:5: error: call to `k` does not bind parameter `y`",
        "   5 |     k(x = X,",
        "     |     ^~~~~~~~",
        "   6 |       x = X)",
        "     |       ~~~~~~",
    ]


def test_a_span_over_many_lines_shows_its_ends():
    out = rendered("workload w() {\n    k(x = X,\n\n\n        x = X)\n}\n")
    assert out.splitlines()[:6] == [
        "m.wsp:5:5: error: call to `k` does not bind parameter `y`",
        "   5 |     k(x = X,",
        "     |     ^~~~~~~~",
        " ... |",
        "   8 |         x = X)",
        "     |         ~~~~~~",
    ]


def test_line_numbers_of_different_widths_share_one_gutter():
    span = Span("f.wsp", 99, 1, 100, 3)
    out = render(Diagnostic(span, "x", "boom"), {"f.wsp": "\n" * 98 + "abc\nxyz\n"})
    assert out.splitlines() == ["f.wsp:99:1: error: boom", "  99 | abc", "     | ^~~",
                                " 100 | xyz", "     | ~~"]


def test_a_long_line_is_shown_as_a_window_around_the_caret():
    line = "    store(y, " + " + ".join(["x"] * 400) + " + nope)"
    out = rendered(f"workload w() {{ k(x = X, y = Y) }}\nkernel q(x: In[Tile[16, 128, f32]], "
                   f"y: Out[Tile[16, 128, f32]]) {{\n{line}\n}}\n")
    lines = out.splitlines()
    assert lines[0].startswith("m.wsp:6:") and "unknown name `nope`" in lines[0]
    shown, carets = lines[1], lines[2]
    assert len(shown) < 200 and shown.startswith("   6 | ...") and "nope" in shown
    col = carets.index("^")
    assert shown[col:col + 4] == "nope" and carets.count("^") == 4


def test_control_characters_of_a_source_line_are_not_printed():
    out = rendered("workload w() { k(x = X, y = Y, z = X) } // \x1b[2J\x07 cleared\n")
    assert "\x1b" not in out and "\x07" not in out
    shown, carets = out.splitlines()[1:3]
    assert shown.endswith("// ?[2J? cleared")
    assert shown[carets.index("^"):].startswith("z = X")


@pytest.mark.parametrize("name, shown", [
    ("plain.wsp", "plain.wsp"),
    ("a\rb.wsp", "a\\rb.wsp"),
    ("esc\x1b[31m.wsp", "esc\\x1b[31m.wsp"),
    ("rtl\u202egpj.wsp", "rtl\\u202egpj.wsp"),
    ("latin\udce9.wsp", "latin\\xe9.wsp"),  # the byte 0xe9 of a name that was not UTF-8
    ("caf\u00e9.wsp", "caf\u00e9.wsp"),  # printable text stays as it is
])
def test_file_names_are_printed_escaped(name, shown):
    assert printable(name) == shown
    assert printable(printable(name)) == printable(name)
    out = rendered("workload w() { k(x = X, y = Y, z = X) }\n", name)
    assert out.startswith(f"{shown}:4:")
    assert all(c.isprintable() or c == "\n" for c in out)


def test_a_span_naming_a_file_by_its_printable_name_finds_its_lines():
    # a C compiler reports an `extern c` body at the file's printable name (see #line)
    span = Span(printable("a\rb.wsp"), 1, 1, 1, 4)
    out = render(Diagnostic(span, "x", "boom"), {"a\rb.wsp": "sym B\n"})
    assert out.splitlines() == ["a\\rb.wsp:1:1: error: boom", "   1 | sym B", "     | ^^^"]


def test_lines_are_counted_as_the_lexer_counts_them():
    # a form feed or U+2028 in a comment is not a line break; "\r\n" ends a line like "\n"
    text = "sym A // \x0c page\u2028 break\r\nconst C = nope\r\n"
    with pytest.raises(WspError) as info:
        driver.check_text(text, "crlf.wsp")
    assert info.value.render().splitlines() == [
        "crlf.wsp:2:11: error: unknown name `nope`", "   2 | const C = nope", "     |           ^^^^"]


def test_a_span_ending_where_a_line_starts_shows_only_the_lines_it_covers():
    out = render(Diagnostic(Span("f.wsp", 1, 5, 2, 1), "x", "boom"), {"f.wsp": "sym Abc\nsym D\n"})
    assert out.splitlines() == ["f.wsp:1:5: error: boom", "   1 | sym Abc", "     |     ^^^"]
