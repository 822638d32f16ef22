"""The VS Code grammar (editors/vscode/syntaxes/wsp.tmLanguage.json), tested without Node: a
small TextMate tokenizer below runs it over every example, every test program and
tests/editor/highlight.wsp (the constructs the examples do not show).

- every pattern compiles with Python's `re` (the grammar keeps to what `re` and Oniguruma read
  alike);
- every scope the grammar names is reached somewhere, and no non-blank text is left without a
  scope (text inside the embedded C/C++ of an extern body is VS Code's C/C++ grammar's);
- each token the project's lexer sees is given its class: keywords, primitives (when called),
  dtypes, numbers, strings, comments;
- the grammar's keyword, primitive, dtype and combinator lists are exactly those of the parser's
  grammar, the primitive table, the dtype table and the schedule checker, so it cannot drift.
"""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path

import pytest

from ptowsp.dtypes import DTYPES
from ptowsp.frontend.parser import _parser
from ptowsp.frontend.workloads.schedules import COMBINATORS
from ptowsp.primitives.table import PRIMITIVES

ROOT = Path(__file__).resolve().parents[1]
VSCODE = ROOT / "editors" / "vscode"
GRAMMAR = json.loads((VSCODE / "syntaxes" / "wsp.tmLanguage.json").read_text())
FILES = sorted(glob.glob(str(ROOT / "examples" / "*.wsp")) + glob.glob(str(ROOT / "tests" / "programs" / "*.wsp"))
               + [str(ROOT / "tests" / "editor" / "highlight.wsp")])
EMBEDDED = "<embedded>"  # a character of an extern body: VS Code's C/C++ grammar's text


# ---- a TextMate tokenizer (the subset the grammar uses) ---------------------------------------


class Rule:
    def __init__(self, raw: dict):
        self.name = raw.get("name")
        self.content = raw.get("contentName")
        self.captures = raw.get("captures", {})
        self.begin_captures = raw.get("beginCaptures", {})
        self.end_captures = raw.get("endCaptures", {})
        self.match = re.compile(raw["match"]) if "match" in raw else None
        self.begin = re.compile(raw["begin"]) if "begin" in raw else None
        self.end = re.compile(raw["end"]) if "end" in raw else None
        self.raw_patterns = raw.get("patterns", [])
        self.patterns: list = []
        self.external = False


def _resolve(raws: list, repo: dict, cache: dict) -> list:
    out = []
    for raw in raws:
        inc = raw.get("include")
        if inc is None:
            key = id(raw)
            if key not in cache:
                rule = cache[key] = Rule(raw)
                rule.patterns = _resolve(rule.raw_patterns, repo, cache)
                rule.external = any(p.get("include", "").startswith("source.") for p in rule.raw_patterns)
            out.append(cache[key])
        elif inc.startswith("#"):
            target = repo[inc[1:]]
            out += _resolve(target["patterns"], repo, cache) if "patterns" in target and not (
                "begin" in target or "match" in target) else _resolve([target], repo, cache)
        elif inc.startswith("source."):
            pass  # another language's grammar: the rule that includes it is `external`
        else:
            raise AssertionError(f"unknown include {inc}")
    return out


TOP = _resolve(GRAMMAR["patterns"], GRAMMAR["repository"], {})


def tokenize(text: str) -> list[list[list[str]]]:
    """The scopes of each character of each line (innermost last; [] for none)."""
    stack: list[tuple[Rule, list[str]]] = []  # open begin/end rules and their scopes
    out = []
    for line in text.split("\n"):
        scopes: list[list[str]] = [[] for _ in line]
        pos = 0

        def paint(a: int, b: int, names: list[str], scopes=scopes) -> None:
            for i in range(a, b):
                scopes[i] = list(names)

        def paint_captures(m: re.Match, caps: dict, base: list[str], paint=paint) -> None:
            for group, cap in caps.items():
                if m.group(int(group)) is not None and "name" in cap:
                    paint(m.start(int(group)), m.end(int(group)), base + [cap["name"]])

        while True:
            rule, base = stack[-1] if stack else (None, [])
            inner = base + ([rule.content] if rule is not None and rule.content else [])
            candidates = []
            if rule is not None:
                m = rule.end.search(line, pos)
                if m:
                    candidates.append((m.start(), 0, "end", rule, m))
            if rule is None or not rule.external:
                for k, r in enumerate(rule.patterns if rule is not None else TOP):
                    m = (r.match or r.begin).search(line, pos)
                    if m:
                        candidates.append((m.start(), k + 1, "match" if r.match else "begin", r, m))
            if not candidates:
                paint(pos, len(line), inner + [EMBEDDED] if rule is not None and rule.external else inner)
                break
            start, _, kind, r, m = min(candidates, key=lambda c: (c[0], c[1]))
            paint(pos, start, inner + [EMBEDDED] if rule is not None and rule.external else inner)
            if kind == "end":
                paint(m.start(), m.end(), base)
                paint_captures(m, rule.end_captures, base)
                stack.pop()
            elif kind == "match":
                names = inner + ([r.name] if r.name else [])
                paint(m.start(), m.end(), names)
                paint_captures(m, r.captures, names)
            else:
                names = inner + ([r.name] if r.name else [])
                paint(m.start(), m.end(), names)
                paint_captures(m, r.begin_captures, names)
                stack.append((r, names))
            if m.end() == pos and kind == "match":
                pos += 1  # an empty match moves on
            pos = max(pos, m.end())
            if pos > len(line):
                break
        out.append(scopes)
    return out


SCOPES = {f: tokenize(Path(f).read_text()) for f in FILES}


def all_names(node) -> set[str]:
    found = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("name", "contentName") and isinstance(value, str):
                found.add(value)
            else:
                found |= all_names(value)
    elif isinstance(node, list):
        for item in node:
            found |= all_names(item)
    return found


# ---- the tests -------------------------------------------------------------------------------


def test_every_pattern_compiles_with_python_re():
    def regexes(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("match", "begin", "end"):
                    yield value
                else:
                    yield from regexes(value)
        elif isinstance(node, list):
            for item in node:
                yield from regexes(item)

    found = list(regexes(GRAMMAR))
    assert len(found) > 20
    for rx in found:
        re.compile(rx)


def test_every_scope_is_reached_and_no_text_is_left_without_one():
    reached = set()
    unmatched = []
    for f, lines in SCOPES.items():
        text = Path(f).read_text().split("\n")
        for n, (line, scopes) in enumerate(zip(text, lines), 1):
            for col, (ch, names) in enumerate(zip(line, scopes), 1):
                reached.update(names)
                if not ch.isspace() and not names:
                    unmatched.append(f"{Path(f).relative_to(ROOT)}:{n}:{col}: {line.strip()}")
    assert not unmatched, "text without a scope:\n" + "\n".join(unmatched[:20])
    missing = all_names(GRAMMAR["repository"]) - reached
    assert not missing, f"scopes no example reaches: {sorted(missing)}"


def _tokens(text: str):
    """(kind, value, line, col) of each token and comment as the project's lexer sees them."""
    lexer = _parser().lexer
    pos, line, start = 0, 1, 0
    while pos < len(text):
        m = lexer.master.match(text, pos)
        kind, value = m.lastgroup, m.group()
        if kind == "NAME" and value in lexer.keywords:
            kind = "KEYWORD"
        if kind != "WS" or value.startswith(("//", "/*")):
            yield ("COMMENT" if kind == "WS" else kind), value, line, pos - start, m.end()
        if "\n" in value:
            line += value.count("\n")
            start = pos + value.rfind("\n") + 1
        pos = m.end()


@pytest.mark.parametrize("path", FILES, ids=lambda p: Path(p).name)
def test_keywords_primitives_types_numbers_strings_and_comments_get_their_class(path):
    text = Path(path).read_text()
    scopes = SCOPES[path]
    wrong = []
    prev = None
    for kind, value, line, col, end in _tokens(text):
        names = scopes[line - 1][col] if col < len(scopes[line - 1]) else []
        declared, prev = prev in ("kernel", "workload", "schedule"), value
        if EMBEDDED in names or kind == "RAW_STRING" or declared:  # a declared name is its own
            continue
        innermost = names[-1] if names else ""
        if kind == "KEYWORD":
            want = {"true": "constant.language.boolean.wsp", "false": "constant.language.boolean.wsp",
                    "and": "keyword.operator.word.wsp", "or": "keyword.operator.word.wsp",
                    "not": "keyword.operator.word.wsp"}.get(value, "keyword.")
        elif kind == "NAME" and value in PRIMITIVES and re.match(r"\s*\(", text[end:]):
            want = "support.function.primitive.wsp"
        elif kind == "NAME" and value in DTYPES:
            want = "storage.type.dtype.wsp"
        elif kind in ("INT", "FLOAT"):
            want = f"constant.numeric.{'integer' if kind == 'INT' else 'float'}.wsp"
        elif kind == "STRING":
            want = "string.quoted.double.wsp"
        elif kind == "COMMENT":
            want = "comment."
        else:
            continue
        if not innermost.startswith(want):
            wrong.append(f"{line}:{col + 1}: `{value}` is {innermost or 'unscoped'}, not {want}")
    assert not wrong, "\n".join(wrong[:20])


def _words(pattern_name: str, repo_key: str) -> set[str]:
    def find(node):
        if isinstance(node, dict):
            if node.get("name") == pattern_name and "match" in node:
                return node["match"]
            for value in node.values():
                found = find(value)
                if found:
                    return found
        elif isinstance(node, list):
            for item in node:
                found = find(item)
                if found:
                    return found
        return None

    rx = find(GRAMMAR["repository"][repo_key])
    assert rx, f"no `{pattern_name}` pattern in #{repo_key}"
    inner = re.search(r"\(\?:([^()]*)\)", rx).group(1)
    return set(inner.split("|"))


def test_the_grammar_lists_exactly_the_languages_keywords_primitives_dtypes_and_combinators():
    keywords = set()
    for name in ("keyword.declaration.wsp", "keyword.control.wsp", "keyword.operator.word.wsp",
                 "constant.language.boolean.wsp"):
        keywords |= _words(name, "keywords")
    lexer_keywords = set(_parser().lexer.keywords)  # the words of grammar/wsp.lark
    assert keywords == lexer_keywords, (
        f"add {sorted(lexer_keywords - keywords)}, remove {sorted(keywords - lexer_keywords)}")
    assert _words("support.function.primitive.wsp", "primitives") == set(PRIMITIVES)
    assert _words("storage.type.dtype.wsp", "types") == set(DTYPES)
    assert _words("support.function.schedule.wsp", "combinators") == set(COMBINATORS)


def test_the_extension_declares_the_language_the_grammar_and_the_server():
    pkg = json.loads((VSCODE / "package.json").read_text())
    (lang,) = pkg["contributes"]["languages"]
    assert lang["id"] == "wsp" and lang["extensions"] == [".wsp"]
    (grammar,) = pkg["contributes"]["grammars"]
    assert grammar["scopeName"] == GRAMMAR["scopeName"] == "source.wsp"
    assert (VSCODE / grammar["path"]).resolve() == (VSCODE / "syntaxes" / "wsp.tmLanguage.json").resolve()
    assert set(grammar["embeddedLanguages"]) <= all_names(GRAMMAR)
    props = pkg["contributes"]["configuration"]["properties"]
    assert props["wsp.server.command"]["default"] == "wspc" and props["wsp.server.args"]["default"] == ["lsp"]
    assert "vscode-languageclient" in pkg["dependencies"]
    client = (VSCODE / pkg["main"]).read_text()
    assert "TransportKind.stdio" in client and 'config.get("server.args"' in client
    config = json.loads((VSCODE / lang["configuration"].lstrip("./")).read_text())
    assert config["comments"] == {"lineComment": "//", "blockComment": ["/*", "*/"]}
    assert {"open": '"""', "close": '"""'} in config["autoClosingPairs"]
