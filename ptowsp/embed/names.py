"""Names in the traced AST: a Python identifier as a `.wsp` one, and substituting names.

Python names reach the `.wsp` text unchanged unless they cannot: a `.wsp` keyword gets a
trailing `_` (`input` -> `input_`), anything that is not an ASCII identifier has its other
characters replaced by `_`. Module assembly replaces the placeholder names of module-level
objects (`@<id>`) by their final names, and `kernel.trace()` a kernel's `Constexpr` parameters by
their values, both with `substitute`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from ..frontend import ast as A
from ..frontend.builder import KEYWORDS


def wsp_ident(name: str) -> str:
    """A Python identifier as a `.wsp` one: keywords get a trailing `_` (`input` -> `input_`)."""
    if not name.isidentifier() or not name.isascii():
        name = "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else "_" for c in name)
        if not name or name[0].isdigit():
            name = "_" + name
    return name + "_" if name in KEYWORDS else name


def python_ident(name: str) -> str:
    """The Python name of a `.wsp` parameter name `wsp_ident` made (`input_` -> `input`)."""
    return name[:-1] if name.endswith("_") and name[:-1] in KEYWORDS else name


def substitute(node: Any, mapping: dict) -> Any:
    """`node` with every `Name` whose id is a key of `mapping` replaced (keeping spans): by a
    `Name` when the value is a string, else by the value (an expression node)."""

    def fn(n):
        if isinstance(n, A.Name) and n.id in mapping:
            r = mapping[n.id]
            if isinstance(r, str):
                return A.Name(r, span=n.span)
            return dataclasses.replace(r, span=n.span) if r.span is A.NO_SPAN else r
        return None

    return rewrite(node, fn)


def rewrite(node: Any, fn: Callable[[A.Node], Optional[A.Node]]) -> Any:
    """`node` (a node, a tuple of them, or a leaf value) with each node for which `fn` returns
    a replacement replaced; unchanged parts are shared, not copied."""
    if isinstance(node, A.Node):
        r = fn(node)
        if r is not None:
            return r
        changes = {}
        for f in node._all_:
            if f == "span":
                continue
            v = getattr(node, f)
            nv = rewrite(v, fn)
            if nv is not v:
                changes[f] = nv
        return dataclasses.replace(node, **changes) if changes else node
    if isinstance(node, tuple):
        items = tuple(rewrite(x, fn) for x in node)
        return items if any(a is not b for a, b in zip(items, node)) else node
    return node


__all__ = ["wsp_ident", "substitute", "rewrite"]
