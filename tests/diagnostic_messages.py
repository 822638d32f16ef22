"""Every diagnostic message wspc can emit, read from its source (for tests/test_diagnostics_covered.py).

A message is the text argument of a call that makes a user error or a warning (`diags.error(span,
code, MESSAGE, ...)`, `Diagnostic(span, code, MESSAGE, ...)`, `RunError(MESSAGE, ...)`, click's
`UsageError(MESSAGE)`, a parse issue, an unsupported construct, a run-time check's reason...).
The text becomes a pattern: literal parts kept, each f-string hole (and anything computed) a
wildcard `{*}`. A message held in a variable is followed to the strings assigned to it, a
function parameter to the arguments of the function's calls, a tuple returned by a function to
its `return` statements, so a rule whose text is built one step away is still found.

Patterns are compared with the messages tests produce by `Pattern.matches` (the whole message,
each wildcard any text).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ptowsp"

# Where user errors are made (the checkers, lowering, the API, the command line, the back ends,
# the driver's choice of a schedule, the primitive table's typing rules). ptowsp/embed has its
# own error tests (tests/embed/test_errors.py) and is not scanned.
SCANNED = ("frontend", "lower", "backends", "api.py", "cli.py", "driver.py", "primitives",
           "launch.py", "ir/devices.py", "report", "tuning.py", "run_io.py")

WILD = "{*}"

# The calls that take a message, and the position of the message among their arguments (the
# keyword `message`, `reason` or `msg` also counts). `error` is the collectors' method
# (`Diagnostics.error(span, code, message, ...)` and the checkers' wrappers of it) except in the
# files named in ERROR_POSITION, whose `error` methods take the message earlier.
SINKS = {
    "error": 2,
    "Diagnostic": 2,
    "RunError": 0,
    "UsageError": 0,
    "BadParameter": 0,
    "ParseIssue": 1,  # frontend/builder.py: a syntax error found while building the AST
    "Unsupported": 1,  # lower/unsupported.py: a construct a back end cannot run
    "Check": 3,  # sym.Check(lhs, op, rhs, reason): a failed run-time check's text, then values
    "_warning": 2,  # backends/ascend/policies.py: a schedule the CANN tree cannot honour
}
ERROR_POSITION = {"api.py": 1, "runner.py": 0}
MESSAGE_KEYWORDS = ("message", "reason", "msg")

# Functions that only forward a message they are given: their callers are collected instead.
FORWARDERS = {"error", "_report", "_warning", "__init__", "unknown"}


@dataclass(frozen=True)
class Pattern:
    """One message as the source spells it: literal text with `{*}` wildcards."""

    text: str
    where: str = field(compare=False, default="")  # file:line of the call that emits it

    @property
    def regex(self) -> re.Pattern:
        parts = self.text.split(WILD)
        return re.compile(".*?".join(re.escape(p) for p in parts), re.S)

    def matches(self, message: str) -> bool:
        return self.regex.fullmatch(message) is not None

    def clauses(self) -> list[str]:
        """The message's literal text in clauses (split at wildcards and at , ; : ), without
        quotes: a test that triggers the message quotes one of the distinctive ones."""
        out = []
        for piece in self.text.split(WILD):
            for c in re.split(r"[,;:]", piece):
                c = c.strip(" `'\"()[]=.")
                if c:
                    out.append(c)
        return out

    def quoted_in(self, text: str) -> bool:
        """Whether `text` (a test's source) quotes the message: one of its clauses of 12
        characters or more; failing those, one of 6 or more; failing those, its longest."""
        clauses = self.clauses()
        long = ([c for c in clauses if len(c) >= 12] or [c for c in clauses if len(c) >= 6]
                or [max(clauses, key=len)])
        return any(c in text or c.replace('"', '\\"') in text for c in long)

    def literal(self) -> str:
        """The longest literal piece, without the quotes and punctuation around it: what a
        test that triggers the message must mention."""
        return max((p.strip(" `'\"()[]:;,.=") for p in self.text.split(WILD)), key=len)


@dataclass
class _File:
    path: Path
    tree: ast.Module
    parents: dict


def _files() -> list[_File]:
    out = []
    for p in sorted(PACKAGE.rglob("*.py")):
        rel = p.relative_to(PACKAGE).as_posix()
        if not any(rel == s or rel.startswith(s + "/") for s in SCANNED):
            continue
        tree = ast.parse(p.read_text(), str(p))
        parents = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node
        out.append(_File(p, tree, parents))
    return out


def _callee(call: ast.Call) -> str | None:
    f = call.func
    if isinstance(f, ast.Attribute):
        return f.attr
    if isinstance(f, ast.Name):
        return f.id
    return None


def _enclosing_function(f: _File, node: ast.AST):
    while node in f.parents:
        node = f.parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


class _Collector:
    def __init__(self) -> None:
        self.files = _files()
        self.functions: dict[str, list[tuple[_File, ast.FunctionDef]]] = {}
        self.calls: dict[str, list[tuple[_File, ast.Call]]] = {}
        self.module_values: dict[tuple[Path, str], ast.AST] = {}
        for f in self.files:
            for node in ast.walk(f.tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.functions.setdefault(node.name, []).append((f, node))
                elif isinstance(node, ast.Call) and _callee(node):
                    self.calls.setdefault(_callee(node), []).append((f, node))
            for node in f.tree.body:
                if isinstance(node, ast.Assign):
                    for t in node.targets:
                        if isinstance(t, ast.Name):
                            self.module_values[(f.path, t.id)] = node.value
        self.unresolved: list[str] = []

    # -- the message argument of a sink or of a forwarding function's call ----------------------
    def argument(self, call: ast.Call, position: int, names: tuple[str, ...]):
        for k in call.keywords:
            if k.arg in names:
                return k.value
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Starred):
                return ("starred", a.value, position - i)
            if i == position:
                return a
        return None

    # -- an expression as patterns --------------------------------------------------------------
    def patterns(self, f: _File, node, depth: int = 0) -> list[str]:
        if depth > 6:
            return [WILD]
        if isinstance(node, tuple):  # ("starred", value, index): *CONST in the call
            _, value, index = node
            tup = self.constant(f, value)
            if isinstance(tup, ast.Tuple) and index < len(tup.elts):
                return self.patterns(f, tup.elts[index], depth + 1)
            self.unresolved.append(f"{f.path}:{value.lineno}: *{ast.unparse(value)}")
            return []
        if isinstance(node, ast.Constant):
            return [node.value] if isinstance(node.value, str) else [WILD]
        if isinstance(node, ast.JoinedStr):
            out = [""]
            for v in node.values:
                if isinstance(v, ast.Constant):
                    out = [o + v.value for o in out]
                else:
                    out = [o + WILD for o in out]
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.patterns(f, node.left, depth + 1) or [WILD]
            right = self.patterns(f, node.right, depth + 1) or [WILD]
            return [a + b for a in left for b in right][:64]
        if isinstance(node, ast.IfExp):
            return self.patterns(f, node.body, depth + 1) + self.patterns(f, node.orelse, depth + 1)
        if isinstance(node, ast.Name):
            return self.name(f, node, depth)
        # a call, an attribute, a subscript...: computed text
        return [WILD]

    def name(self, f: _File, node: ast.Name, depth: int) -> list[str]:
        fn = _enclosing_function(f, node)
        if fn is not None:
            assigned = self.assigned(f, fn, node.id, depth)
            if assigned is not None:
                return assigned
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
            kwonly = [a.arg for a in fn.args.kwonlyargs]
            if node.id in params or node.id in kwonly:
                if fn.name in FORWARDERS:
                    return []  # its callers are sinks themselves
                return self.from_callers(f, fn, node.id, depth)
        value = self.constant(f, node)
        if value is not None:
            return self.patterns(f, value, depth + 1)
        self.unresolved.append(f"{f.path}:{node.lineno}: {node.id}")
        return []

    def constant(self, f: _File, node):
        """The value of a module-level name: its own module's, or the one it was imported from."""
        if not isinstance(node, ast.Name):
            return None
        if (f.path, node.id) in self.module_values:
            return self.module_values[(f.path, node.id)]
        for (_, name), value in self.module_values.items():
            if name == node.id:
                return value
        return None

    def assigned(self, f: _File, fn, name: str, depth: int) -> list[str] | None:
        """The strings assigned to local `name` in `fn` (None: never assigned there)."""
        found = None
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name) and t.id == name:
                        found = (found or []) + self.patterns(f, node.value, depth + 1)
                    elif isinstance(t, ast.Tuple):
                        for i, el in enumerate(t.elts):
                            if isinstance(el, ast.Name) and el.id == name:
                                found = (found or []) + self.returned(f, node.value, i, depth)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and node.target.id == name and node.value is not None:
                found = (found or []) + self.patterns(f, node.value, depth + 1)
        return found

    def returned(self, f: _File, value, index: int, depth: int) -> list[str]:
        """Element `index` of the tuples a called function returns (`a, b = fn(...)`)."""
        if not (isinstance(value, ast.Call) and _callee(value) in self.functions):
            return [WILD]
        out: list[str] = []
        for g, fn in self.functions[_callee(value)]:
            for node in ast.walk(fn):
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple) \
                        and index < len(node.value.elts):
                    el = node.value.elts[index]
                    if not (isinstance(el, ast.Constant) and el.value is None):
                        out += self.patterns(g, el, depth + 1)
        return out

    def from_callers(self, f: _File, fn, param: str, depth: int) -> list[str]:
        args = fn.args.posonlyargs + fn.args.args
        names = [a.arg for a in args]
        method = bool(names) and names[0] in ("self", "cls")
        out: list[str] = []
        for g, call in self.calls.get(fn.name, []):
            if param in names:
                pos = names.index(param) - (1 if method and isinstance(call.func, ast.Attribute) else 0)
            else:
                pos = 10_000
            arg = self.argument(call, pos, (param,))
            if arg is None:
                continue
            out += self.patterns(g, arg, depth + 1)
        return out

    # -- every sink -----------------------------------------------------------------------------
    def collect(self) -> list[Pattern]:
        out: dict[str, Pattern] = {}
        for f in self.files:
            for node in ast.walk(f.tree):
                if not isinstance(node, ast.Call):
                    continue
                name = _callee(node)
                if name not in SINKS:
                    continue
                pos = SINKS[name]
                if name == "error":
                    pos = ERROR_POSITION.get(f.path.name, pos)
                arg = self.argument(node, pos, MESSAGE_KEYWORDS)
                if arg is None:
                    continue
                where = f"{f.path.relative_to(ROOT).as_posix()}:{node.lineno}"
                texts = self.patterns(f, arg)
                if name == "Check":  # a failed check's reason, then what it found
                    texts = [t + WILD for t in texts]
                for text in texts:
                    if text.strip(WILD + " ") and text not in out:
                        out[text] = Pattern(text, where)
        return sorted(out.values(), key=lambda p: p.text)


def collect() -> tuple[list[Pattern], list[str]]:
    """(every message pattern, the message expressions that could not be followed)."""
    c = _Collector()
    pats = c.collect()
    return pats, sorted(set(c.unresolved))
