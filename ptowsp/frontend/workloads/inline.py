"""Workload calls inside a workload body: inlining, and binding a workload's axis parameters.

A workload call expands the callee's body in place, so it is checked once (its `Summary` is
reused) and an inline cycle is an error. Its arguments are axes that must fit the parameters'
kinds; the same binding serves a schedule's workload call (schedules.py). The callee's
`ragged[i]` uses that involve its parameters are decided here with the caller's axes.
"""

from __future__ import annotations

from typing import Optional

from ... import sym
from ...diagnostics import InternalError, Note, did_you_mean
from .. import ast as A
from .scope import AxisVal, Ref, Scope
from .state import Need
from .wording import show


class InlineChecks:
    """Part of `Body`: inlined workload calls and axis arguments."""

    def inline_call(self, s: A.CallStmt, scope: Scope) -> None:
        name = s.callee.id
        if s.coords is not None:
            self.error(
                s.callee.span,
                "workload-coords",
                f"`{name}` is a workload; workload calls have no coordinates",
                f"write `{name}(...)`",
            )
        decl = self.env.workloads[name]
        if name in self.mod.in_progress:
            i = self.mod.in_progress.index(name)
            chain = " -> ".join(f"`{n}`" for n in self.mod.in_progress[i:] + [name])
            self.error(
                s.span,
                "inline-cycle",
                f"workload `{name}` inlines itself ({chain})",
                "a workload cannot expand into itself; use a loop instead",
            )
            self.summary.inlines.append(name)
            return
        callee = self.mod.summary(name)
        mapping = self.bind_workload(decl, s.args, s.kwargs, s.span, scope)
        self.summary.inlines.append(name)
        if callee is None:
            return
        for part in self.mod.closure(name):
            self.recorded |= part.records
        if mapping is not None:
            self.apply_needs(name, callee.needs, mapping)

    def bind_workload(
        self,
        decl: A.WorkloadDecl,
        args: tuple[A.Expr, ...],
        kwargs: tuple[A.Keyword, ...],
        span: A.Span,
        scope: Scope,
    ) -> Optional[dict[str, tuple[Ref, A.Span]]]:
        """Bind a workload's axis parameters (positional or by name). Returns param -> (ref, span)."""
        params = decl.params
        wname = decl.name.id
        bound: dict[str, tuple[A.Expr, A.Span]] = {}
        ok = True
        for i, a in enumerate(args):
            if i >= len(params):
                self.error(
                    a.span,
                    "too-many-args",
                    f"`{wname}` takes {len(params)} "
                    f"ax{'is' if len(params) == 1 else 'es'}, but {len(args)} are given",
                )
                ok = False
                continue
            bound[params[i].name.id] = (a, a.span)
        names = [p.name.id for p in params]
        for kw in kwargs:
            if kw.name not in names:
                self.error(
                    kw.span,
                    "unknown-param",
                    f"`{wname}` has no parameter `{kw.name}`",
                    did_you_mean(kw.name, names),
                )
                ok = False
            elif kw.name in bound:
                self.error(kw.span, "duplicate-arg", f"parameter `{kw.name}` is bound twice")
                ok = False
            else:
                bound[kw.name] = (kw.value, kw.span)
        missing = [n for n in names if n not in bound]
        if missing and ok:  # after a misspelt keyword, the missing parameter is the same mistake
            listed = ", ".join(f"`{m}`" for m in missing)
            self.error(
                span,
                "missing-args",
                f"`{wname}` needs an axis for {listed}",
                f"pass one axis per parameter: `{wname}({', '.join(names)})`",
            )
            ok = False
        out: dict[str, tuple[Ref, A.Span]] = {}
        for p in params:
            if p.name.id not in bound:
                continue
            e, espan = bound[p.name.id]
            v = self.axis(e, scope)
            if v is None:
                ok = False
                continue
            if not self.axis_fits(v, p, espan, e):
                ok = False
                continue
            out[p.name.id] = (v.ref, espan)
        return out if ok else None

    def axis_fits(self, v: AxisVal, p: A.WorkloadParam, span: A.Span, e: A.Expr) -> bool:
        want = p.kind
        shown = {
            "Dense": "Dense" + (f"[{self.text(p.extent)}]" if p.extent is not None else ""),
            "any": "an axis",
        }.get(want, want)
        have = {
            "dense": "a Dense",
            "densedyn": "a DenseDyn",
            "ragged": "a Ragged",
            "sparse": "a Sparse",
            "inner": "a ragged inner",
            "selinner": "a sparse inner",
        }[v.kind]
        text = self.text(e)
        if v.kind == "selinner":
            self.error(
                span,
                "bad-axis-arg",
                f"`{text}` (the selection of a sparse axis) can only be iterated with `P.sel`",
                "pass the sparse axis itself to a `Sparse` parameter",
            )
            return False
        if want in ("Ragged", "Sparse"):
            if v.kind != want.lower():
                self.error(
                    span, "bad-axis-arg", f"`{text}` is {have} axis, but `{p.name.id}` is {shown}"
                )
                return False
            return True
        if v.kind in ("ragged", "sparse"):
            self.error(
                span,
                "bad-axis-arg",
                f"`{text}` is {have} axis, but `{p.name.id}` is {shown}",
                "declare the parameter as `Ragged`"
                if v.kind == "ragged"
                else "declare the parameter as `Sparse`",
            )
            return False
        if want == "Dense":
            if p.extent is None:
                if v.extent is None or sym.const_value(v.extent) is None:
                    self.error(
                        span,
                        "bad-axis-arg",
                        f"`{p.name.id}` is `Dense` and needs a compile-time extent, "
                        f"but `{text}` has extent {show(v.extent)}",
                    )
                    return False
                return True
            n = self.compile_int(p.extent, Scope(), "a `Dense` extent", report=False)
            if n is None or v.extent is None:
                return True
            r = self.decide(v.extent, "==", sym.const(n))
            if r is not True:
                # decision: a `Dense[N]` parameter needs an argument whose extent is provably N
                self.error(
                    span,
                    "bad-axis-arg",
                    f"`{p.name.id}` is {shown}, but `{text}` has extent {show(v.extent)}",
                )
                return False
        return True

    def apply_needs(
        self, wname: str, needs: list[Need], mapping: dict[str, tuple[Ref, A.Span]]
    ) -> None:
        """Check the callee's `ragged[i]` uses with the caller's axes."""
        for need in needs:

            def sub(ref: Ref) -> tuple[bool, Ref, Optional[A.Span]]:
                if ref is not None and ref[0] == "param":
                    if ref[1] not in mapping:
                        return False, None, None
                    r, sp = mapping[ref[1]]
                    return True, r, sp
                return True, ref, None

            ok1, ragged, rspan = sub(need.ragged)
            ok2, index, ispan = sub(need.index)
            if not (ok1 and ok2) or ragged is None:
                continue
            blame = ispan or rspan
            if blame is None:  # needs are only kept when a parameter is involved
                raise InternalError("check", f"`{need.text}` in `{wname}` names no parameter")
            rname = ragged[1]
            if ragged[0] == "axis":
                info = self.env.axes.get(rname)
                outer = self.canon(info.outer) if info is not None and info.outer else None
                kind = info.kind if info is not None else "ragged"
                if index is None:
                    self.error(
                        blame,
                        "bad-outer-index",
                        f"`{wname}` indexes {kind} axis `{rname}` with a loop over this axis, but `{rname}` "
                        f"is only defined at an index of its outer axis `{outer}`",
                        notes=[Note(need.span, "indexed here")],
                    )
                    continue
                if index[0] == "axis":
                    if outer is not None and index[1] != outer:
                        self.error(
                            blame,
                            "bad-outer-index",
                            f"`{wname}` indexes {kind} axis `{rname}` with a loop over `{index[1]}`, but "
                            f"`{rname}` is only defined at an index of its outer axis `{outer}`",
                            notes=[Note(need.span, "indexed here")],
                        )
                    continue
            elif index is None:
                self.error(
                    blame,
                    "bad-outer-index",
                    f"`{wname}` indexes a ragged axis with a loop over this axis, which is not its outer axis",
                    notes=[Note(need.span, "indexed here")],
                )
                continue
            # a parameter of the caller is still involved: the caller's call sites decide
            self.summary.needs.append(Need(ragged, index, need.span, need.text))
