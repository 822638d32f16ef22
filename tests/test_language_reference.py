"""docs/language.md is the complete reference, and everything that points into it points right.

- Every primitive of the table (`ptowsp.primitives.PRIMITIVES`) has a row in the reference's
  "Primitives" tables, every row names a primitive that exists, and every primitive is called in
  one of the example kernels there; those kernels check, and the type written after each `let`
  (`// [16, 1] f32`) is the type the checker gives it.
- Every citation `language.md section N` (also `sections N and M`, `sections N to M`) in the
  source, the tests, the docs and the README names a numbered section (`## N. Title`) of
  docs/language.md; where the citation records a title (`section 4, "Primitives"`,
  `section 6 ("Data dependencies")`), that title is the section's or one of its subsections'.
- The first program of the reference is examples/rmsnorm.wsp, verbatim.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from ptowsp.frontend.checker import check_source
from ptowsp.primitives import PRIMITIVES

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = ROOT / "docs" / "language.md"
TEXT = LANGUAGE.read_text()

# Where citations are looked for: text files of these folders, and these files.
CITING_DIRS = ("ptowsp", "runtime_c", "grammar", "tests", "docs", "examples", "benchmarks",
               "tools", "fuzz")
CITING_FILES = ("README.md", "Makefile", "pyproject.toml")
SUFFIXES = {".py", ".c", ".h", ".j2", ".md", ".wsp", ".lark", ".toml", ".txt", ".asc", ""}


def sections() -> dict[int, tuple[str, list[str]]]:
    """Numbered section -> (its title, the titles of its subsections)."""
    out: dict[int, tuple[str, list[str]]] = {}
    current = None
    for line in re.sub(r"```.*?```", "", TEXT, flags=re.S).splitlines():
        m = re.match(r"## (\d+)\. (.+)", line)
        if m:
            current = int(m.group(1))
            out[current] = (m.group(2).strip(), [])
        elif line.startswith("## "):
            current = None
        elif line.startswith("###") and current is not None:
            out[current][1].append(line.lstrip("#").strip())
    return out


SECTIONS = sections()


def primitives_part() -> str:
    """The text of section 4's "Primitives" subsection (up to the next `###` heading)."""
    m = re.search(r"^### Primitives\n(.*?)(?=^### |^## )", TEXT, re.S | re.M)
    assert m, 'docs/language.md has no "### Primitives" subsection'
    return m.group(1)


def test_sections_are_numbered_in_order():
    assert list(SECTIONS) == list(range(1, len(SECTIONS) + 1)), list(SECTIONS)
    assert "Primitives" in SECTIONS[4][1], "the primitive reference belongs to section 4, Kernels"


# ---------------------------------------------------------------------------------------------
# The primitive reference


def documented_primitives() -> set[str]:
    """The names in the first cell of each row of the Primitives tables."""
    names = set()
    for line in primitives_part().splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        names |= set(re.findall(r"`([a-z_]+)\(", first))
    return names


def test_every_primitive_has_a_row_in_the_reference():
    documented = documented_primitives()
    missing = sorted(set(PRIMITIVES) - documented)
    assert not missing, f"primitives without a row in docs/language.md, \"Primitives\": {missing}"


def test_every_row_of_the_reference_is_a_primitive():
    unknown = sorted(documented_primitives() - set(PRIMITIVES) - {"store"})
    assert not unknown, f"docs/language.md documents primitives that do not exist: {unknown}"


def test_rows_show_each_primitives_parameters():
    """`name(a, b)` in a row's first cell names the parameters in order, as keyword arguments
    spell them (`cast(x, dtype = f16)`); an optional one may be left out (`matmul(a, b)`)."""
    bad = []
    for line in primitives_part().splitlines():
        if not line.startswith("| `"):
            continue
        for name, args in re.findall(r"`([a-z_]+)\(([^)`]*)\)", line.split("|")[1]):
            if name not in PRIMITIVES:
                continue
            shown = [a.split("=")[0].strip() for a in args.split(",") if a.strip()]
            params = PRIMITIVES[name].params
            need = [p.name for p in params if not p.optional]
            if shown not in ([p.name for p in params], need):
                bad.append(f"`{name}({args})`: the parameters are {PRIMITIVES[name].signature}")
    assert not bad, "\n".join(bad)


def example_kernels() -> list[str]:
    return [b for b in re.findall(r"```wsp\n(.*?)```", primitives_part(), re.S)
            if b.lstrip().startswith("kernel")]


def test_every_primitive_is_called_in_an_example():
    called = set()
    for block in example_kernels():
        called |= set(re.findall(r"\b([a-z_]+)\(", block))
    missing = sorted(set(PRIMITIVES) - called)
    assert not missing, f"primitives no example kernel of the reference calls: {missing}"


def _shown(t) -> str:
    if t.is_tile:
        return f"{t.shape_str()} {t.dtype}"
    return f"{t.dtype} {'literal' if t.literal else 'scalar'}"


@pytest.mark.parametrize("block", example_kernels(),
                         ids=lambda b: re.match(r"\s*kernel (\w+)", b).group(1))
def test_example_kernels_check_and_have_the_types_their_comments_say(block):
    name = re.match(r"\s*kernel (\w+)", block).group(1)
    env = check_source(block, "language.md")  # raises WspError if the example is wrong
    types = dict(env.kernel_types[name].lets)
    said = re.findall(r"^\s*let (\w+) = .*?//\s*(.+?)\s*$", block, re.M)
    assert said, f"{name}: no `let` says its type"
    wrong = [(n, want, _shown(types[n])) for n, want in said if _shown(types[n]) != want]
    assert not wrong, f"{name}: (let, documented, checked): {wrong}"


def test_every_kernel_of_the_reference_checks():
    """The other kernels shown in the reference (section 4's opening, extern kernels) check too."""
    blocks = [b for b in re.findall(r"```wsp\n(.*?)```", TEXT, re.S)
              if b.lstrip().startswith("kernel") and b not in example_kernels()]
    assert len(blocks) >= 2
    for b in blocks:
        check_source(b, "language.md")


def test_the_first_program_is_examples_rmsnorm():
    first = re.search(r"## A first program\n\n```wsp\n(.*?)```", TEXT, re.S)
    assert first and first.group(1) == (ROOT / "examples" / "rmsnorm.wsp").read_text()


# ---------------------------------------------------------------------------------------------
# Citations of the reference

# `language.md section 4`, `language.md sections 5 to 8`, `language.md 3 and 7`, optionally
# followed by a recorded title: `, "Title"` or ` ("Title")`. Inside docs/language.md itself a
# bare `section N` cites it too.
NUMBERS = r"(?:sections?\s+)?(\d+)((?:\s*(?:,|and|to|–|-)\s*\d+)*)"
TITLE = r'(?:,?\s*\(?\s*"([^"\n]+)")?'
CITATION = re.compile(r"language\.md(?:\]\(language\.md\))?\s+\(?" + NUMBERS + TITLE)
LOCAL = re.compile(r"\bsections?\s+(\d+)((?:\s*(?:,|and|to|–)\s*\d+)*)" + TITLE)


def citing_files() -> list[Path]:
    files = [ROOT / f for f in CITING_FILES if (ROOT / f).exists()]
    for d in CITING_DIRS:
        for p in sorted((ROOT / d).rglob("*")):
            if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts:
                files.append(p)
    return files


def _numbers(first: str, rest: str) -> list[int]:
    nums = [int(first)] + [int(n) for n in re.findall(r"\d+", rest)]
    if re.search(r"\bto\b|–", rest) and len(nums) == 2:
        return list(range(nums[0], nums[1] + 1))
    return nums


def citations() -> list[tuple[str, list[int], str | None]]:
    """(where, section numbers, recorded title or None) for every citation."""
    out = []
    for path in citing_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        rel = path.relative_to(ROOT)
        for m in CITATION.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{rel}:{line}", _numbers(m.group(1), m.group(2) or ""), m.group(3)))
        if path == LANGUAGE:
            for m in LOCAL.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                out.append((f"{rel}:{line}", _numbers(m.group(1), m.group(2) or ""),
                            m.group(3)))
    return out


CITATIONS = citations()


def test_citations_are_found():
    # the scanner works: the help line of `%` and the primitive table cite section 4
    where = {w.split(":")[0] for w, _, _ in CITATIONS}
    assert "ptowsp/frontend/kernels/expressions.py" in where
    assert "ptowsp/primitives/table.py" in where
    assert len(CITATIONS) > 50


def test_every_cited_section_exists():
    bad = [f"{w}: section {n}" for w, ns, _ in CITATIONS for n in ns if n not in SECTIONS]
    assert not bad, "citations of docs/language.md sections that do not exist:\n" + "\n".join(bad)


def test_every_recorded_title_is_the_cited_sections():
    bad = []
    for where, ns, title in CITATIONS:
        if title is None:
            continue
        titles = [t for n in ns if n in SECTIONS for t in (SECTIONS[n][0], *SECTIONS[n][1])]
        if not any(t == title or t.startswith(title) for t in titles):
            bad.append(f'{where}: section(s) {ns} has no heading "{title}" (it has {titles})')
    assert not bad, "\n".join(bad)


def user_texts() -> list[tuple[str, str]]:
    """(where, text) of every string in ptowsp/ that is not a docstring: what users may see."""
    out = []
    for path in sorted((ROOT / "ptowsp").rglob("*.py")):
        tree = ast.parse(path.read_text())
        docs = set()
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docs:
                out.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.value))
    return out


def test_user_facing_citations_record_their_title():
    """A help line or message that sends the user to the reference names the part it means
    (`docs/language.md section 4, "Primitives"`), so the test above keeps it right when sections
    move or grow."""
    texts = [(w, s) for w, s in user_texts() if "language.md" in s]
    assert texts, "no message cites docs/language.md: the scan is broken"
    bad = []
    for where, s in texts:
        for m in CITATION.finditer(s):
            if m.group(3) is None:
                bad.append(f"{where}: {s!r}")
        if "docs/language.md" not in s:
            bad.append(f"{where}: say `docs/language.md`, the path users find it at: {s!r}")
    assert not bad, "\n".join(bad)
