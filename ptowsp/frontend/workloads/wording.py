"""Small phrases the workload checks build their messages from (articles, extents, tiles).

Every message of the workload checks is part of the compiler's output (tests/errors/ pins
them), so the phrasing helpers they share live once, here.
"""

from __future__ import annotations

import difflib
from typing import Optional

from ... import sym
from ...diagnostics import InternalError, did_you_mean
from ..env import ChannelInfo


def show(e: Optional[sym.Expr]) -> str:
    """A symbolic extent as text; `?` when it is unknown."""
    return "?" if e is None else sym.to_str(e)


def closest(name: str, candidates: list[str]) -> Optional[str]:
    """The candidate `did_you_mean` would suggest, or None."""
    pool = sorted(set(candidates))
    for c in difflib.get_close_matches(name, pool, n=max(len(pool), 1), cutoff=0.0):
        if did_you_mean(name, [c]) is not None:  # whatever cutoff `did_you_mean` uses
            return c
    return None


def article(kind: str) -> str:
    """`a tensor`, `an axis`: a declaration kind with its article."""
    return ("an " if kind[:1] in "aeiou" else "a ") + kind


def type_words(t: str) -> str:
    """A scalar type (`int`, `float`, `bool`) in words: `an integer`, `a float`, `a condition`."""
    return {"int": "an integer", "float": "a float", "bool": "a condition"}.get(t, t)


def elem_text(ch: ChannelInfo) -> str:
    """The element type of a data channel: `Tile[R, C, DT]`."""
    if ch.elem is None:
        raise InternalError("check", f"token channel `{ch.name}` has no element type")
    r, c, dt = ch.elem
    return f"Tile[{r}, {c}, {dt}]"
