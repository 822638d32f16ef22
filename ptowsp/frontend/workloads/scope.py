"""What a name means inside a workload body: the bindings of a lexical scope.

A workload body binds names to axes (its parameters, inline axes), loop variables, consumed
items, enclosing processes and `let`s; `Scope` chains them lexically and falls through to the module's
declarations (looked up by the checks themselves in `ModuleEnv`). `SVal` is what a scalar
expression evaluates to for the checker: its type and, for integers, its symbolic value.
"""

from __future__ import annotations

from typing import Optional, Union

from ... import sym
from ...records import record
from .. import ast as A
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


class LetVal:
    """A `let` name (language.md section 6, "Names: `let`"): its definition and what it names.

    `value` is a scalar's `SVal` (an element read `T[i, j]` of an integer tensor included);
    `view` the extents of a tensor view after selection, `tensor` its tensor. `origin` is the
    `let` that wrote the expression (itself, or the first of a chain `let q2 = q`): a view's
    messages name it, and its `scope` is where the expression's names are looked up.
    `poisoned`: the `let` had an error, already reported, and every use of the name is silent.
    `transposed`: this name's view is the origin's transposed (`let kt = K[b, :, :].T`, or
    `let q2 = q.T`); `view` stays the untransposed extents.
    """

    __slots__ = ("name", "stmt", "scope", "value", "tensor", "view", "poisoned", "origin",
                 "transposed", "box")

    def __init__(self, stmt: A.Let, scope: "Scope", value: Optional[SVal] = None,
                 tensor: Optional[str] = None, view: Optional[list] = None,
                 poisoned: bool = False, origin: Optional["LetVal"] = None,
                 transposed: bool = False):
        self.name = stmt.name.id
        self.stmt = stmt
        self.scope = scope
        self.value = value
        self.tensor = tensor
        self.view = view
        self.poisoned = poisoned
        self.origin = origin if origin is not None else self
        self.transposed = transposed
        self.box: Optional[list] = None  # the view's box (ViewChecks.view), for mesh placement

    def keyword(self) -> A.Keyword:
        """`name = value` of the defining `let`, spanning both: how a view's messages name it
        (as they name a keyword argument `q = Q[b, :]`)."""
        s = self.origin.stmt
        return A.Keyword(s.name.id, s.value, span=s.name.span.merge(s.value.span))


Binding = Union[AxisVal, LoopVar, Item, ProcessName, Pending, LetVal]


class Scope:
    """A lexical scope; lookups fall through to the parent, then (elsewhere) to the module.
    `later` holds the `let`s of the block not reached yet, for "used before its `let`"."""

    __slots__ = ("names", "parent", "later")

    def __init__(self, parent: Optional["Scope"] = None):
        self.names: dict[str, Binding] = {}
        self.parent = parent
        self.later: dict[str, A.Let] = {}

    def later_let(self, name: str) -> Optional[A.Let]:
        """The `let` of `name` in this block or an enclosing one that comes after this point."""
        s: Optional[Scope] = self
        while s is not None:
            if name in s.later:
                return s.later[name]
            s = s.parent
        return None

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
    if isinstance(b, LetVal):
        return "a `let` of a view" if b.tensor is not None and b.value is None else "a `let`"
    return "a variable of this same loop"
