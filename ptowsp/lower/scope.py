"""What a source name means while a workload lowers: a `Scope` maps names to bindings (a loop
variable, a `P.sel` variable, a consumed item, a process, an axis parameter, the `_` of a
ragged length, a `let`) and falls back to its parent; a name bound nowhere is a module
declaration."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from .. import sym
from ..frontend import ast as A
from ..frontend.env import AxisInfo, ChannelInfo


@dataclass(frozen=True)
class LoopVar:
    """A loop variable in scope: its IR name."""

    name: str


@dataclass(frozen=True)
class SelVar:
    """A `P.sel` variable in scope: `name` is the Read variable holding the coordinate
    (`indices[k]`), `pos` the loop variable of its position (`e.pos`)."""

    name: str
    pos: str


@dataclass(frozen=True)
class Alias:
    """A name standing for an integer expression (the `_` of a ragged length)."""

    value: sym.Expr


@dataclass(frozen=True)
class ItemVar:
    """The variable of `consume(ch) as t` in scope: `name` is its IR variable (the item
    number; `t`, `t.index` and `t` as a coordinate all mean it)."""

    name: str
    channel: ChannelInfo


@dataclass(frozen=True)
class ProcVar:
    """An enclosing `process NAME [* N]`: `var` is the IR variable of `NAME.id` (None without
    replicas)."""

    var: Optional[str]


@dataclass(frozen=True)
class AxisParam:
    """An axis in scope (a workload parameter): a dense axis's extent in IR names, or the
    module-level ragged/sparse axis passed for it (`info`)."""

    extent: Optional[sym.Expr]
    info: Optional[AxisInfo] = None


@dataclass(frozen=True, eq=False)
class Let:
    """A `let` name: its expression, lowered in `scope` (the scope of the `let`) wherever the
    name is used, so a program lowers exactly as with the expression written there; `keyword`
    (`name = value`) names a view in the messages of its run-time checks."""

    expr: A.Expr
    scope: "Scope"
    keyword: A.Keyword


def unlet(e: A.Expr, scope: "Scope") -> tuple[A.Expr, "Scope"]:
    """The expression a `let` name stands for, with the scope to lower it in (through chains
    `let b = a`); any other expression as it is."""
    while isinstance(e, A.Name):
        b = scope.lookup(e.id)
        if not isinstance(b, Let):
            break
        e, scope = b.expr, b.scope
    return e, scope


Binding = Union[LoopVar, SelVar, Alias, AxisParam, ItemVar, ProcVar, Let]


class Scope:
    """The names bound by one block (a workload's parameters, a loop, a consume body ...)."""

    def __init__(self, parent: Optional[Scope] = None):
        self.names: dict[str, Binding] = {}
        self.parent = parent

    def lookup(self, name: str) -> Optional[Binding]:
        s: Optional[Scope] = self
        while s is not None:
            if name in s.names:
                return s.names[name]
            s = s.parent
        return None
