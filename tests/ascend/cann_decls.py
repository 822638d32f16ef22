"""The function, method and enum declarations of C++ headers, as data: enough to check the
project's stand-ins for Ascend C (tests/ascend/ascendc_cpu/kernel_operator.h, the dispatcher's
shim) against CANN's real headers, declaration by declaration (test_real_headers.py).

Not a C++ parser: a scanner of scopes (namespaces, classes, enums, bodies skipped) that reads
every declaration of a function at namespace or class scope (both branches of every `#if`, so a
name may have more declarations than one configuration has) as

    Decl(namespace, class, name, template parameters, parameter types, defaults)

with the parameter types normalised for what a call can tell apart: no names, no `const` or
`&`, no CANN qualifiers (`__aicore__`, `__gm__`, `__ubuf__`, `__inout_pipe__(S)` and its
`__in_pipe__` / `__out_pipe__` kin), template parameters by position (`$0`, `$1`), `PrimT<T>`
as `T` (the same type for a plain T). Two declarations with the same normalised form accept
the same calls.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "decltype", "static_assert",
             "alignas", "alignof", "defined", "catch", "throw", "new", "delete", "typeid",
             "noexcept", "__attribute__", "operator"}
_DROP = {"const", "volatile", "&", "&&", "__gm__", "__ubuf__", "__aicore__", "inline",
         "struct", "class", "typename", "static", "constexpr", "__inline__", "__cbuf__",
         "__ca__", "__cb__", "__cc__", "__fbuf__", "__ssbuf__", "restrict", "__restrict__"}
_TOKEN = re.compile(r"[A-Za-z_]\w*|::|\.\.\.|&&|\[\]|[<>,*&()\[\]=]|-?\d[\w.']*|\S")


@dataclass(frozen=True)
class Decl:
    ns: tuple[str, ...]  # the namespaces around it, outermost first
    cls: Optional[str]  # the class it is a member of
    name: str
    tparams: tuple[str, ...]  # per template parameter: `typename` or its type; `=` if defaulted
    params: tuple[str, ...]  # normalised parameter types
    defaults: int  # trailing parameters with a default value
    text: str  # the declaration as written (one line), for messages

    def signature(self) -> tuple:
        return (self.tparams, self.params, self.defaults)

    def accepts(self, nargs: int) -> bool:
        return len(self.params) - self.defaults <= nargs <= len(self.params)


# the architecture the declarations are read for: dav-2201 (Atlas A2 / 910B), the tree's default
NPU_ARCH = 2201


def _condition(expr: str) -> Optional[bool]:
    """An `#if` condition over __NPU_ARCH__ alone, evaluated for NPU_ARCH; None for any other."""
    e = re.sub(r"defined\s*\(?\s*__NPU_ARCH__\s*\)?", "1", expr)
    e = e.replace("__NPU_ARCH__", str(NPU_ARCH))
    if re.search(r"[A-Za-z_]", e.replace("&&", "").replace("||", "")):
        return None
    e = e.replace("&&", " and ").replace("||", " or ")
    e = re.sub(r"!(?!=)", " not ", e)
    try:
        return bool(eval(e, {"__builtins__": {}}))  # digits, comparisons and logic only
    except Exception:
        return None


def _preprocess(text: str) -> str:
    """The lines of the branches for NPU_ARCH where an `#if` depends on __NPU_ARCH__ alone;
    both branches of any other `#if` (a declaration may then be read twice)."""
    out, stack = [], []  # stack: per #if, (kept now, some branch taken) or None if unknown
    for line in text.split("\n"):
        m = re.match(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)", line)
        if m:
            kind, rest = m.groups()
            if kind in ("if", "ifdef", "ifndef"):
                v = _condition(rest) if kind == "if" else None
                stack.append(None if v is None else (v, v))
            elif kind == "elif" and stack and stack[-1] is not None:
                v = _condition(rest)
                stack[-1] = None if v is None else (v and not stack[-1][1], v or stack[-1][1])
            elif kind == "else" and stack and stack[-1] is not None:
                stack[-1] = (not stack[-1][1], True)
            elif kind == "endif" and stack:
                stack.pop()
            out.append("")
            continue
        out.append(line if all(s is None or s[0] for s in stack) else "")
    return "\n".join(out)


def _strip(text: str) -> str:
    """Comments, preprocessor lines (with their continuations) and attributes removed."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"\\\n", " ", text)
    text = _preprocess(text)
    text = re.sub(r"(?m)^\s*#[^\n]*", " ", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"\[\[.*?\]\]", " ", text)
    text = re.sub(r"__(?:inout|in|out)_pipe__\s*\(\s*\w*\s*\)", " ", text)
    text = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", text)
    # CANN's annotation macros (`__ASC_USE_RESERVED_UBUF__(3510, "...")`) before a declaration
    text = re.sub(r"\b__[A-Z][A-Z0-9_]*__\s*\((?:[^()]|\([^()]*\))*\)", " ", text)
    return text


def _split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at the `sep` outside any (), <> or [] pair."""
    out, depth, cur = [], 0, []
    for tok in _TOKEN.findall(text):
        if tok in "(<[":
            depth += 1
        elif tok in ")>]":
            depth -= 1
        if tok == sep and depth == 0:
            out.append(" ".join(cur))
            cur = []
        else:
            cur.append(tok)
    if cur:
        out.append(" ".join(cur))
    return out


def _balanced(text: str, start: int, open_: str, close: str) -> int:
    """The index just past the `close` matching the `open_` at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


def _tparams(text: str) -> tuple[list[str], list[str]]:
    """Template parameters as (normalised kinds, names)."""
    kinds, names = [], []
    for p in _split_top(text):
        toks = p.split()
        if not toks:
            continue
        default = "=" in toks
        if default:
            toks = toks[:toks.index("=")]
        name = toks[-1] if len(toks) > 1 and re.fullmatch(r"[A-Za-z_]\w*", toks[-1]) else ""
        kind_toks = toks[:-1] if name else toks
        kind = "typename" if kind_toks[0] in ("typename", "class") else " ".join(
            t for t in kind_toks if t not in _DROP)
        if "..." in kind_toks:
            kind += "..."
        kinds.append(kind + ("=" if default else ""))
        names.append(name)
    return kinds, names


def _param(text: str, tnames: list[str], cnames=()) -> tuple[str, bool]:
    """One parameter as (normalised type, has a default)."""
    toks = text.split()
    default = False
    depth = 0
    for i, t in enumerate(toks):
        if t in "(<[":
            depth += 1
        elif t in ")>]":
            depth -= 1
        elif t == "=" and depth == 0:
            toks, default = toks[:i], True
            break
    arr = toks and toks[-1] == "[]"
    if arr:
        toks = toks[:-1]
    kept = [t for t in toks if t not in _DROP]
    # the parameter's name: a last identifier after a type (not a type's own last part)
    if len(kept) >= 2 and re.fullmatch(r"[A-Za-z_]\w*", kept[-1]) and kept[-2] not in ("::", "<", ","):
        kept = kept[:-1]
    kept = [t for t in kept if t not in ("AscendC", "::")] if "AscendC" in kept else kept
    out = " ".join(f"${tnames.index(t)}" if t in tnames and t else
                   f"%{list(cnames).index(t)}" if t in cnames and t else t for t in kept)
    out = re.sub(r"PrimT < (\S+) >", r"\1", out)
    out = re.sub(r"\bPrimType\b", "%0", out)  # the tensor classes' PrimT<T>
    return out.replace(" ", "") + ("[]" if arr else ""), default


def _function(stmt: str, ns: tuple, cls: Optional[str], cnames=()) -> Optional[Decl]:
    """A function declaration `stmt` (its head), or None. `cnames`: the template parameters
    of the class it is a member of (`%0`, `%1` in the parameter types)."""
    stmt = stmt.strip()
    tkinds: list[str] = []
    tnames: list[str] = []
    while stmt.startswith("template"):
        lt = stmt.index("<")
        end = _balanced(stmt, lt, "<", ">")
        k, n = _tparams(stmt[lt + 1:end - 1])
        tkinds, tnames = tkinds + k, tnames + n
        stmt = stmt[end:].strip()
    if "(" not in stmt:
        return None
    m = re.search(r"(operator\s*(?:\(\)|[^\s(]+)|~?[A-Za-z_]\w*)\s*(<[^()]*>)?\s*\(", stmt)
    if not m or m.group(1) in _KEYWORDS:
        return None
    before = stmt[:m.start()]
    if "=" in before or "(" in before or "return" in before.split():
        return None
    if m.group(2):  # an explicit specialisation: `f<float>(...)`
        return None
    open_ = m.end() - 1
    close = _balanced(stmt, open_, "(", ")")
    params = [p for p in _split_top(stmt[open_ + 1:close - 1]) if p.strip() and p.strip() != "void"]
    norm = [_param(p, tnames, cnames) for p in params]
    defaults = 0
    for _, d in reversed(norm):
        if not d:
            break
        defaults += 1
    name = re.sub(r"\s+", "", m.group(1))
    return Decl(ns, cls, name, tuple(tkinds), tuple(t for t, _ in norm), defaults,
                " ".join(stmt[:close].split()))


@dataclass
class Index:
    """Every function and method declaration, enum and class of some headers."""

    decls: list[Decl]
    enums: dict[tuple, set[str]]  # (namespace..., enum name) -> member names
    classes: set[tuple]  # (namespace..., class name)
    types: set[tuple]  # (namespace..., name) of a `using` or `typedef` at namespace scope

    def merge(self, other: "Index") -> None:
        self.decls += other.decls
        self.enums.update(other.enums)
        self.classes |= other.classes
        self.types |= other.types

    def names(self, ns=("AscendC",)) -> set[str]:
        """Every name declared in namespace `ns`: functions, classes, enums, types."""
        ns = tuple(ns)
        out = {d.name for d in self.decls if d.ns == ns and d.cls is None}
        for group in (self.classes, self.types, set(self.enums)):
            out |= {k[-1] for k in group if k[:-1] == ns}
        return out

    def functions(self, name: str, ns=("AscendC",), cls: Optional[str] = None) -> list[Decl]:
        return [d for d in self.decls if d.name == name and d.ns == tuple(ns) and d.cls == cls]


def scan_files(paths) -> Index:
    """`scan` of each file, merged (a file's unbalanced `#if` branches stay in that file)."""
    index = Index([], {}, set(), set())
    for p in paths:
        index.merge(scan(p.read_text(errors="replace")))
    return index


def scan(text: str) -> Index:
    """The declarations of `text` (one header or many, concatenated)."""
    text = _strip(text)
    decls: list[Decl] = []
    enums: dict[tuple, set[str]] = {}
    classes: set[tuple] = set()
    types: set[tuple] = set()
    scopes: list[tuple[str, str]] = []  # (kind, name): ns, class, enum
    cnames: list[tuple] = []  # per class scope open: its template parameters' names
    buf: list[str] = []
    i = 0

    def ns_now() -> tuple:
        parts = [p for k, n in scopes if k == "ns" for p in n.split("::") if p]
        # both branches of an `#if` that opens a namespace are read: one namespace, not two
        return tuple(p for j, p in enumerate(parts) if j == 0 or parts[j - 1] != p)

    def cls_now() -> Optional[str]:
        return scopes[-1][1] if scopes and scopes[-1][0] == "class" else None

    def cnames_now() -> tuple:
        return cnames[-1] if scopes and scopes[-1][0] == "class" else ()

    def statement(s: str) -> None:
        s = re.sub(r"\b(public|private|protected)\s*:", " ", s)
        mt = re.search(r"\busing\s+([A-Za-z_]\w*)\s*=|\btypedef\b.*?([A-Za-z_]\w*)\s*$", s, re.S)
        if mt and not cls_now():
            types.add(ns_now() + (mt.group(1) or mt.group(2),))
            return
        s = re.sub(r"^\s*(friend|extern\s+\"\")\s+", " ", s)
        if scopes and scopes[-1][0] == "enum":
            return
        d = _function(s, ns_now(), cls_now(), cnames_now())
        if d is not None:
            decls.append(d)

    while i < len(text):
        c = text[i]
        if c == "{":
            head = "".join(buf).strip()
            buf = []
            head_clean = re.sub(r"\b(public|private|protected)\s*:", " ", head).strip()
            mns = re.fullmatch(r"(?:inline\s+)?namespace\s*([\w:]*)", head_clean)
            rest, tn = head_clean, []
            while rest.startswith("template") and "<" in rest:
                end = _balanced(rest, rest.index("<"), "<", ">")
                tn = _tparams(rest[rest.index("<") + 1:end - 1])[1]
                rest = rest[end:].strip()
            mcls = re.match(r"(?:typedef\s+)?(class|struct|union)\s+(?:alignas\s*\([^)]*\)\s*)?"
                            r"([A-Za-z_]\w*)\s*(?:final\s*)?(?::(?!:)|$)", rest)
            menum = re.search(r"\benum\s+(?:class\s+|struct\s+)?([A-Za-z_]\w*)?[^(]*$", head_clean)
            if mns:
                scopes.append(("ns", mns.group(1) or ""))
                i += 1
                continue
            if head_clean.startswith('extern ""'):
                scopes.append(("ns", ""))
                i += 1
                continue
            if menum:
                end = _balanced(text, i, "{", "}")
                members = {re.split(r"[\s=]", m.strip())[0] for m in text[i + 1:end - 1].split(",")
                           if m.strip()}
                enums[ns_now() + ((menum.group(1) or ""),)] = members
                i = end
                continue
            if mcls:
                classes.add(ns_now() + (mcls.group(2),))
                scopes.append(("class", mcls.group(2)))
                cnames.append(tuple(tn))
                i += 1
                continue
            statement(head)  # a function body, or an initialiser
            i = _balanced(text, i, "{", "}")
            continue
        if c == "}":
            if buf and "".join(buf).strip():
                statement("".join(buf))
            buf = []
            if scopes:
                if scopes.pop()[0] == "class":
                    cnames.pop()
            i += 1
            continue
        if c == ";":
            statement("".join(buf))
            buf = []
            i += 1
            continue
        buf.append(c)
        i += 1
    return Index(decls, enums, classes, types)
