"""The state one kernel's check shares, and what the check leaves for lowering.

`KernelState` is the base of `KernelChecker` (check.py): the kernel's declaration and
signature, the module's consts, the lets and stores seen so far, the types inferred for every
expression, and the reporting helpers that make one mistake give one diagnostic.
`KernelTypes` is the result lowering reads (`ModuleEnv.kernel_types`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from ... import sym
from ...diagnostics import Diagnostics, Note
from ...primitives import ERROR, Arg, Type, Typing
from .. import ast as A
from ..signatures import KernelSig, NotSymbolic, ParamSig, const_resolver, to_sym


@dataclass(frozen=True)
class KernelTypes:
    """What the checker inferred for one kernel body, for lowering.

    `lets`: each `let` in source order with its type (a `let` keeps one type; rebindings convert
    to it). `stores`: each `store` as (parameter, type of the value). `exprs`: the type of every
    expression checked, keyed by the node's `id` (hashing a node hashes its whole subtree, which
    made checking an n-operator chain cost n^2): the temporaries.
    """

    name: str
    lets: tuple[tuple[str, Type], ...]
    stores: tuple[tuple[str, Type], ...]
    exprs: Mapping[int, Type] = field(default_factory=dict)


class KernelState:
    """The state of checking one kernel."""

    def __init__(
        self, k: A.KernelDecl, sig: KernelSig, consts: Mapping[str, int], diags: Diagnostics
    ):
        self.k, self.sig, self.consts, self.diags = k, sig, consts, diags
        # the first parameter of each name (a duplicate is reported by the driver)
        self.params: dict[str, tuple[ParamSig, A.KernelParam]] = {}
        for ps, p in zip(sig.params, k.params):
            self.params.setdefault(ps.name, (ps, p))
        self.constexprs = {n for n, (ps, _) in self.params.items() if ps.kind == "constexpr"}
        # decision: Constexpr parameters are assumed >= 1 in shape proofs (they size tiles)
        self.ranges = {n: sym.Interval(1, None) for n in self.constexprs}
        self.lets: dict[str, tuple[Type, A.Let]] = {}
        self.all_lets: dict[str, A.Let] = {}
        self.current_let: Optional[A.Let] = None
        self.current_many: tuple[A.Let, ...] = ()  # the names of the `let a, b = ...` checked
        self.pair_call: Optional[A.Call] = None  # the call whose two results it binds
        self.stores: dict[str, A.Store] = {}
        self.store_list: list[tuple[str, Type]] = []
        self.let_list: list[tuple[str, Type]] = []
        self.exprs: dict[int, Type] = {}  # by id(node)
        # outputs a broken statement may have meant to store: not reported as never stored
        self.maybe_stored: set[str] = set()
        self.cycles_stmt: Optional[A.CallStmt] = None  # the kernel's `add_cycles(n)`
        self.unknown_reported: set[str] = set()  # each unknown name is reported once per kernel
        self.read_out_reported: set[str] = set()
        # tile parameters whose dims were wrong (reported by `kernel_signature`): their shape is
        # unknown, so nothing is checked against it
        self.bad_shape = {
            n for n, (ps, p) in self.params.items() if ps.kind == "tile" and not self._dims_ok(p)
        }
        # a name declared twice (reported by the driver) means nothing reliable: uses stay quiet
        names = [p.name.id for p in k.params]
        self.duplicated = {n for n in names if names.count(n) > 1}

    def error(
        self,
        span: A.Span,
        code: str,
        message: str,
        help: Optional[str] = None,
        notes: tuple[Note, ...] = (),
    ) -> Type:
        self.diags.error(span, code, message, help, notes)
        return ERROR

    def _report(self, span: A.Span, code: str, message: str, help: Optional[str]) -> None:
        self.diags.error(span, code, message, help)

    def _typing(self, name: str, span: A.Span, args: Optional[dict[str, Arg]] = None) -> Typing:
        return Typing(name, span, args or {}, self.ranges, self._report)

    def _dims_ok(self, p: A.KernelParam) -> bool:
        quiet = Diagnostics()
        resolve = const_resolver(self.consts, quiet, {n: sym.var(n) for n in self.constexprs})
        try:
            for d in (p.type.tile.rows, p.type.tile.cols):
                v = sym.const_value(to_sym(d, resolve, quiet))
                if v is not None and v <= 0:
                    return False
        except NotSymbolic:
            return False
        return True

    def unknown(self, n: A.Name, message: str, help: Optional[str]) -> Type:
        """Report an unknown name at its first use only (one mistake, one diagnostic)."""
        if n.id not in self.unknown_reported:
            self.unknown_reported.add(n.id)
            self.error(n.span, "unknown-name", message, help)
        return ERROR

    def visible(self) -> list[str]:
        return list(self.lets) + list(self.params) + list(self.consts)
