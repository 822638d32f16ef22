"""What a name means inside a workload body: the bindings of a lexical scope.

A workload body binds names to axes (its parameters, inline axes), loop variables, consumed
items and enclosing processes; `Scope` chains them lexically and falls through to the module's
declarations (looked up by the checks themselves in `ModuleEnv`). `SVal` is what a scalar
expression evaluates to for the checker: its type and, for integers, its symbolic value.
"""

from __future__ import annotations

from typing import Optional, Union

from ... import sym
from ...records import record
from ..env import AxisInfo, ChannelInfo

UNKNOWN = sym.Interval(None, None)

# ("axis", canonical module axis) | ("param", workload parameter) | None (an inline axis)
Ref = Optional[tuple[str, str]]


@record
class SVal:
    """The type of a scalar expression (`int`, `float`, `bool` or `error`) and, for integers,
    its symbolic value; `value` holds a compile-time float."""

    type: str
    expr: Optional[sym.Expr] = None
    value: Optional[float] = None


ERR = SVal("error")


@record
class AxisVal:
    """An axis as the body sees it.

    kind: `dense`, `densedyn`, `ragged`, `sparse`, `inner` (`ragged[b]`) or `selinner`
    (`sparse[b]`). `ref` names a module axis or a workload parameter (None for inline axes);
    `outer` is the outer axis of a module ragged/sparse axis.
    """

    kind: str
    name: str
    extent: Optional[sym.Expr] = None
    ref: Ref = None
    outer: Ref = None
    info: Optional[AxisInfo] = None
    static: bool = False  # a `Dense` parameter or axis: the extent is a compile-time integer


@record
class LoopVar:
    """A loop variable (or the `_` of a ragged length): an integer with a known range."""

    name: str
    var: sym.Expr
    kind: str  # grid, seq, sel, key, outer_index
    axis_ref: Ref = None
    pos: Optional[sym.Expr] = None  # `e.pos` of a `P.sel` variable


@record
class Item:
    """The variable of `consume(ch) as t`: an item of `channel` (None if the channel is bad)."""

    name: str
    channel: Optional[ChannelInfo]
    var: sym.Expr  # t.index


@record
class ProcessName:
    """An enclosing `process NAME [* N]`: `NAME.id` is its replica number."""

    name: str
    replicas: Optional[int]
    var: Optional[sym.Expr]


@record
class Pending:
    """A variable of the loop whose axes are being read (not yet bound)."""

    name: str


Binding = Union[AxisVal, LoopVar, Item, ProcessName, Pending]


class Scope:
    """A lexical scope; lookups fall through to the parent, then (elsewhere) to the module."""

    __slots__ = ("names", "parent")

    def __init__(self, parent: Optional["Scope"] = None):
        self.names: dict[str, Binding] = {}
        self.parent = parent

    def lookup(self, name: str) -> Optional[Binding]:
        s: Optional[Scope] = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None

    def visible(self) -> list[str]:
        out: list[str] = []
        s: Optional[Scope] = self
        while s is not None:
            out.extend(s.names)
            s = s.parent
        return out


def describe(b: Binding) -> str:
    """What a bound name is, with an article, for messages."""
    if isinstance(b, AxisVal):
        return "an axis"
    if isinstance(b, LoopVar):
        return "a loop variable"
    if isinstance(b, Item):
        return "a consumed item"
    if isinstance(b, ProcessName):
        return "a process"
    return "a variable of this same loop"
