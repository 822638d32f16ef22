"""Mutations of `.wsp` programs: what a careless or hostile hand does to a file.

Each mutator takes the program text and a `random.Random` and returns new text (or None when it
does not apply). They work on a plain token split of the text (words, numbers, strings,
punctuation), not on wspc's lexer, so they can produce anything a user could type, and a
mutator never needs wspc to agree with it. The kinds, each picked with equal chance:

- token edits: delete, duplicate, swap two tokens, replace a token by another of the file;
- number extremes: 0, -1, 2^31, 2^63, 10^30, a huge float, nan, inf, an odd tile size;
- identifier swaps: a name replaced by another name of the file, a C keyword or standard macro
  (`NULL`, `INFINITY`, `int`, `main`), a wspc keyword, or a name with non-ASCII letters;
- truncation at a random point;
- long flat expressions (`x - x - ... - x`, thousands of terms) and deeply nested parentheses
  inserted where an expression stands;
- hostile imports (`/dev/zero`, a FIFO, `/proc/self/environ`, `../../etc/passwd`, a NUL byte);
- gentle edits that keep a program valid (comments, blank lines, CRLF, a name renamed
  everywhere): a third of the inputs get only these, so many inputs still run and are compared.

File names are mutated by `odd_file_name`: spaces, quotes, a carriage return, non-UTF-8 bytes.
"""

from __future__ import annotations

import random
import re
from typing import Callable, Optional

TOKEN = re.compile(r'"""[\s\S]*?"""|"(?:[^"\\\n]|\\.)*"|//[^\n]*|\d+\.\d*(?:[eE][-+]?\d+)?|'
                   r'\d+|[A-Za-z_]\w*|\s+|.', re.S)
C_NAMES = ("NULL", "INFINITY", "NAN", "int", "float", "double", "main", "errno", "EOF", "stdin",
           "restrict", "static", "wsp_runtime", "wsp_task", "_Bool", "signed", "auto", "asm")
WSP_NAMES = ("module", "kernel", "workload", "schedule", "for", "in", "P", "let", "store", "sym",
             "input", "output", "when", "otherwise", "send", "consume", "channel", "pipe")
NUMBERS = ("0", "-1", "1", "3", "7", "2147483648", "9223372036854775808", "1" + "0" * 30,
           "1e308", "1e-320", "nan", "inf", "65536", "17", "4097")
IMPORTS = ("/dev/zero", "/dev/null", "/proc/self/environ", "../../../../etc/passwd", "\\x00",
           "fifo.wsp", "missing.wsp", ".", "/", "lib.txt", "big.wsp")


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


def _words(toks: list[str]) -> list[int]:
    return [i for i, t in enumerate(toks) if t.strip() and not t.startswith(("//", '"'))]


def delete_token(text: str, rng: random.Random) -> Optional[str]:
    toks = tokens(text)
    idx = _words(toks)
    if not idx:
        return None
    del toks[rng.choice(idx)]
    return "".join(toks)


def duplicate_token(text: str, rng: random.Random) -> Optional[str]:
    toks = tokens(text)
    idx = _words(toks)
    if not idx:
        return None
    i = rng.choice(idx)
    toks.insert(i, toks[i] + " ")
    return "".join(toks)


def swap_tokens(text: str, rng: random.Random) -> Optional[str]:
    toks = tokens(text)
    idx = _words(toks)
    if len(idx) < 2:
        return None
    i, j = rng.sample(idx, 2)
    toks[i], toks[j] = toks[j], toks[i]
    return "".join(toks)


def replace_token(text: str, rng: random.Random) -> Optional[str]:
    toks = tokens(text)
    idx = _words(toks)
    if len(idx) < 2:
        return None
    toks[rng.choice(idx)] = toks[rng.choice(idx)]
    return "".join(toks)


def number_extreme(text: str, rng: random.Random) -> Optional[str]:
    toks = tokens(text)
    idx = [i for i, t in enumerate(toks) if t[:1].isdigit()]
    if not idx:
        return None
    toks[rng.choice(idx)] = rng.choice(NUMBERS)
    return "".join(toks)


def identifier_swap(text: str, rng: random.Random) -> Optional[str]:
    toks = tokens(text)
    idx = [i for i, t in enumerate(toks) if re.fullmatch(r"[A-Za-z_]\w*", t)]
    if not idx:
        return None
    i = rng.choice(idx)
    pool = [toks[j] for j in idx]
    choice = rng.random()
    if choice < 0.4:
        new = rng.choice(pool)
    elif choice < 0.7:
        new = rng.choice(C_NAMES)
    elif choice < 0.9:
        new = rng.choice(WSP_NAMES)
    else:
        new = toks[i] + rng.choice(("é", "λ", "ℕ", "٣", "_"))
    old = toks[i]
    if rng.random() < 0.5:  # rename every use, so the program may stay valid
        toks = [new if t == old else t for t in toks]
    else:
        toks[i] = new
    return "".join(toks)


def truncate(text: str, rng: random.Random) -> Optional[str]:
    if len(text) < 2:
        return None
    return text[: rng.randrange(1, len(text))]


def _expression_sites(toks: list[str]) -> list[int]:
    """Token positions just after `=`, `(` or `,`: where an expression starts."""
    out = []
    prev = ""
    for i, t in enumerate(toks):
        if not t.strip():
            continue
        if prev in ("=", "(", ",") and re.fullmatch(r"[A-Za-z_]\w*|\d+", t):
            out.append(i)
        prev = t
    return out


def long_flat(text: str, rng: random.Random) -> Optional[str]:
    toks = tokens(text)
    sites = _expression_sites(toks)
    if not sites:
        return None
    i = rng.choice(sites)
    n = rng.choice((100, 1000, 5000, 20000))
    op = rng.choice((" - ", " + ", " * ", " and "))
    toks[i] = op.join([toks[i]] * n)
    return "".join(toks)


def deep_nest(text: str, rng: random.Random) -> Optional[str]:
    toks = tokens(text)
    sites = _expression_sites(toks)
    if not sites:
        return None
    i = rng.choice(sites)
    n = rng.choice((50, 500, 5000, 50000))
    toks[i] = "(" * n + toks[i] + ")" * n
    return "".join(toks)


def hostile_import(text: str, rng: random.Random) -> Optional[str]:
    lines = text.split("\n")
    at = next((k + 1 for k, line in enumerate(lines) if line.startswith("module ")), 0)
    lines.insert(at, f'import "{rng.choice(IMPORTS)}"')
    return "\n".join(lines)


def whitespace(text: str, rng: random.Random) -> Optional[str]:
    """Blank lines, comments, tabs and CRLF line ends: a valid program stays valid."""
    lines = text.split("\n")
    at = rng.randrange(len(lines) + 1)
    extra = rng.choice(("", "// a comment: ~!@#$%^&*()", "/* a block\n comment */", "\t",
                        "   // é λ ℕ"))
    lines.insert(at, extra)
    out = "\n".join(lines)
    return out.replace("\n", "\r\n") if rng.random() < 0.2 else out


def rename_all(text: str, rng: random.Random) -> Optional[str]:
    """A name renamed everywhere, to another legal name: a valid program stays valid unless the
    new name clashes (which must then be a clear error)."""
    toks = tokens(text)
    names = sorted({t for t in toks if re.fullmatch(r"[a-z_]\w*", t) and t not in WSP_NAMES})
    if not names:
        return None
    old = rng.choice(names)
    new = rng.choice((old + "_2", "x" + old, rng.choice(C_NAMES), old.upper(), "wsp_" + old))
    return "".join(new if t == old else t for t in toks)


GENTLE = (whitespace, rename_all)
MUTATORS: tuple[Callable[[str, random.Random], Optional[str]], ...] = (
    delete_token, duplicate_token, swap_tokens, replace_token, number_extreme, identifier_swap,
    truncate, long_flat, deep_nest, hostile_import,
)


def mutate(text: str, rng: random.Random) -> tuple[str, str]:
    """One to three mutations of `text`: (new text, the mutators' names). A third of the
    inputs get only gentle ones, so that many still check and run (and are compared)."""
    names = []
    pool = GENTLE if rng.random() < 0.33 else MUTATORS + GENTLE
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        for _attempt in range(5):
            m = rng.choice(pool)
            new = m(text, rng)
            if new is not None and new != text:
                text = new
                names.append(m.__name__)
                break
    return text, "+".join(names) or "none"


def odd_file_name(stem: str, rng: random.Random) -> bytes:
    """A file name (bytes, for os.open) that a careless user or a script could make."""
    return rng.choice((
        f"{stem}.wsp".encode(), f"{stem} copy.wsp".encode(), f"{stem}'\".wsp".encode(),
        f"{stem}\r.wsp".encode(), f"{stem}\\n.wsp".encode(), f"{stem}é.wsp".encode(),
        stem.encode() + b"\xff\xfe.wsp", f"-{stem}.wsp".encode(), f"{stem}.WSP".encode(),
    ))
