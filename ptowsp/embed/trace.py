"""The trace a workload is recorded into: its open blocks, and the objects behind placeholders.

Module-level objects (tensors, axes, kernels, channels, events, symbols) appear in the AST as
placeholder names (`@<id>`, `key_of`); a `Trace` (and every `Fragment` of statements it
produces) keeps the objects behind its placeholders, and module assembly (`assemble.py`) names
them for real. Statements go into the innermost open block; `tracing()` gives the trace active
now (a `@workload` being called), or a fresh one for builder-style calls made outside any.
"""

from __future__ import annotations

from typing import Any, Optional

from ..diagnostics import InternalError
from ..frontend import ast as A


def key_of(obj: Any) -> str:
    """The placeholder name of a module-level object (unique while the object lives)."""
    return f"@{id(obj):x}"


class Fragment:
    """Statements one construct produced, still standing in the block they were emitted into
    (so `send(ch, k[i](...))` or `sequential(a, b)` can take them back out). `refs` are the
    objects behind the placeholder names in them.

    The fragment of one kernel call is also its task handle, which `after=` names (`t` or
    `t[i - 1]`: `__getitem__`): `hint` is the variable it was stored to, `handle` the
    `TaskHandle` made the first time an `after=` names it."""

    __slots__ = ("stmts", "block", "refs", "span", "hint", "handle")

    def __init__(self, stmts: list, block: Optional[list], refs: dict, span: A.Span):
        self.stmts, self.block, self.refs, self.span = list(stmts), block, refs, span
        self.hint: Optional[str] = None
        self.handle: Optional["TaskHandle"] = None

    def __getitem__(self, coords: Any) -> "HandleAt":
        return HandleAt(self, coords if isinstance(coords, tuple) else (coords,))


class TaskHandle:
    """A kernel call an `after=` names: its placeholder (`key_of`) is the `.wsp` handle's name,
    given by module assembly as other objects' names are (`_wsp_name`: the variable the call
    was stored to), which also binds it on the call (`let t = k[i](...)`, assemble.py)."""

    __slots__ = ("stmt", "_wsp_name", "_default_name")

    def __init__(self, stmt: A.CallStmt, hint: Optional[str]):
        self.stmt, self._wsp_name, self._default_name = stmt, hint, "task"


class HandleAt:
    """`t[i - 1]`: a task handle at coordinates (of the loops around its call)."""

    __slots__ = ("frag", "coords")

    def __init__(self, frag: Fragment, coords: tuple):
        self.frag, self.coords = frag, coords


class Trace:
    """A workload (or a builder-style fragment) being recorded."""

    def __init__(self) -> None:
        self.blocks: list[list] = [[]]
        self.refs: dict[str, Any] = {}

    # -- objects
    def ref(self, obj: Any, span: A.Span = A.NO_SPAN) -> A.Name:
        key = key_of(obj)
        self.refs[key] = obj
        return A.Name(key, span=span)

    def adopt(self, refs: dict) -> None:
        if refs is not self.refs:
            self.refs.update(refs)

    # -- blocks
    def open(self) -> None:
        self.blocks.append([])

    def close(self) -> list:
        if len(self.blocks) < 2:  # pragma: no cover - constructs always pair them
            raise InternalError("embed", "a block was closed that was never opened")
        return self.blocks.pop()

    def emit(self, stmt: A.Node) -> Fragment:
        block = self.blocks[-1]
        block.append(stmt)
        return Fragment([stmt], block, self.refs, stmt.span)

    def emit_all(self, stmts: list, span: A.Span) -> Fragment:
        block = self.blocks[-1]
        block.extend(stmts)
        return Fragment(stmts, block, self.refs, span)

    def insert_after(self, frag: Fragment, stmt: A.Node) -> Optional[Fragment]:
        """`stmt` placed right after the last statement of `frag`, in the block it stands in
        (statements emitted since stay after it); None when `frag` no longer stands there."""
        self.adopt(frag.refs)
        block = frag.block
        if block is None or not frag.stmts:
            return None
        last = frag.stmts[-1]
        for i, x in enumerate(block):
            if x is last:
                block.insert(i + 1, stmt)
                return Fragment([stmt], block, self.refs, stmt.span)
        return None

    def take(self, frag: Fragment) -> list:
        """The statements of `frag`, removed from the block they stand in."""
        self.adopt(frag.refs)
        if frag.block is not None:
            for s in frag.stmts:
                for i, x in enumerate(frag.block):
                    if x is s:
                        del frag.block[i]
                        break
        return list(frag.stmts)


_STACK: list[Trace] = []


def current() -> Optional[Trace]:
    """The trace being recorded now (the innermost), or None outside any."""
    return _STACK[-1] if _STACK else None


class tracing:
    """`with tracing() as t:` the active trace, or a new one active for the block (builder
    calls made outside any `@workload`)."""

    def __init__(self) -> None:
        self.trace = current()
        self.pushed = False

    def __enter__(self) -> Trace:
        if self.trace is None:
            self.trace = Trace()
            _STACK.append(self.trace)
            self.pushed = True
        return self.trace

    def __exit__(self, *exc) -> None:
        if self.pushed:
            _STACK.remove(self.trace)


def push(t: Trace) -> None:
    _STACK.append(t)


def pop(t: Trace) -> None:
    if t in _STACK:
        _STACK.remove(t)


__all__ = ["key_of", "Fragment", "TaskHandle", "HandleAt", "Trace", "current", "tracing", "push", "pop"]
