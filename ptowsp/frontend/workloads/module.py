"""Check workload bodies and schedules (language.md sections 5 to 8): the module-wide driver.

`check_workloads(env, diags)` checks the length expressions of ragged axes, every workload body
once (a `Body` each; a workload inlined by another is checked when first inlined, and its
`Summary` reused after), every schedule, then the CSP rules that look across workloads
(csp_roots.py). The package's `__init__` says which part checks what.

Every user error becomes a diagnostic; nothing here raises for one. What this leaves alone:
kernel bodies (`kernels/`), declarations (`checker.py`), and anything about run-time
values beyond what symbolic bounds can decide.

Where language.md is silent the choice is written next to the code as `# decision: ...`.
"""

from __future__ import annotations

from typing import Optional

from ... import sym
from ...diagnostics import Diagnostics
from .. import ast as A
from ..env import ModuleEnv
from .body import Body
from .csp_roots import check_csp_structure, check_pairing
from .scope import LoopVar, Scope
from .state import Summary


def check_workloads(env: ModuleEnv, diags: Diagnostics,
                    proofs: Optional[dict[tuple, Optional[bool]]] = None) -> None:
    """Check every workload body and every schedule of the module. `proofs`: the answers of
    earlier checks to keep using (`BodyState.decide`: each is keyed by everything it depends
    on, so an editor checking one module after each edit asks each question once)."""
    _ModuleCheck(env, diags, proofs).run()


class _ModuleCheck:
    """The check of one module's workloads and schedules (a `ModuleState` for its bodies)."""

    def __init__(self, env: ModuleEnv, diags: Diagnostics,
                 proofs: Optional[dict[tuple, Optional[bool]]] = None):
        self.env = env
        self.diags = diags
        self.summaries: dict[str, Summary] = {}
        self.in_progress: list[str] = []
        self.proofs = proofs if proofs is not None else {}  # see `BodyState.decide`

    def run(self) -> None:
        self._ragged_lengths()
        for name in self.env.workloads:
            self.summary(name)
        for sd in self.env.schedules.values():
            Body(self, None).schedule(sd)
        check_pairing(self)
        check_csp_structure(self)

    def summary(self, name: str) -> Optional[Summary]:
        """Check a workload body once; None while it is being checked (an inline cycle)."""
        if name in self.summaries:
            return self.summaries[name]
        if name in self.in_progress:
            return None
        self.in_progress.append(name)
        try:
            s = Body(self, self.env.workloads[name]).run()
        finally:
            self.in_progress.pop()
        self.summaries[name] = s
        return s

    def closure(self, name: str) -> list[Summary]:
        """The summaries of a workload and of everything it inlines, each once."""
        out: list[Summary] = []
        seen: set[str] = set()
        stack = [name]
        while stack:
            n = stack.pop()
            if n in seen or n not in self.summaries:
                continue
            seen.add(n)
            s = self.summaries[n]
            out.append(s)
            stack.extend(reversed(s.inlines))
        return out

    def _ragged_lengths(self) -> None:
        """`Ragged(outer, expr of _)`: the length expression is a scalar expression of `_`."""
        for name, info in self.env.axes.items():
            if info.kind != "ragged" or info.lengths_expr is None:
                continue
            if self.env.names.get(name) is not info.decl:
                continue
            if not isinstance(info.decl.axis, A.RaggedAxis):
                continue  # an alias: checked at the original
            body = Body(self, None)
            scope = Scope()
            outer = self.env.axes.get(info.outer or "")
            var = sym.var("_")
            body.bind_range("_", outer.extent if outer is not None else None)
            scope.names["_"] = LoopVar(
                "_", var, "outer_index", ("axis", body.canon(info.outer or ""))
            )
            body.int_expr(info.lengths_expr, scope, "a ragged length")
