"""A kernel call in a workload's trace (`k[i](...)`, the prototype's `task(...)`): its
`CallStmt`, arguments bound by position or name, and its task handles: `after=` as the call's
`after` clause (docs/python.md, "Named edges"). The handle itself is the call's `Fragment`
(trace.py), named and bound on its call by module assembly.
"""

from __future__ import annotations

from typing import Any, Optional

from ..frontend import ast as A
from .errors import KernelError, user_error
from .names import wsp_ident
from .trace import Fragment, HandleAt, TaskHandle, Trace
from .values import value_node


def take_after(params: list, kwargs: dict) -> Any:
    """The `after=` of a kernel call (taken out of `kwargs`), unless the kernel has a parameter
    named `after` (`params`: its Python names), which the keyword then binds."""
    if "after" not in kwargs or "after" in params:
        return None
    return kwargs.pop("after")


def after_nodes(t: Trace, after: Any, span: A.Span) -> tuple:
    """`after=` as the call's `after` clause: a task handle (what a kernel call returns), a
    handle at coordinates (`t[i - 1]`), or a list or tuple of them."""
    if after is None:
        return ()
    items = after if isinstance(after, (list, tuple)) else [after]
    out = []
    for item in items:
        frag, coords = (item.frag, item.coords) if isinstance(item, HandleAt) else (item, None)
        if not (isinstance(frag, Fragment) and len(frag.stmts) == 1
                and isinstance(frag.stmts[0], A.CallStmt)):
            raise user_error(span, f"`after=` takes task handles, not {_shown(item)}",
                             "pass what a kernel call returns: `t = k[i](...)`, then "
                             "`after=[t]` or `after=[t[i - 1]]`")
        if frag.handle is None:
            frag.handle = TaskHandle(frag.stmts[0], frag.hint)
        t.adopt(frag.refs)
        index = None if coords is None else tuple(value_node(c, t, span) for c in coords)
        out.append(A.After(t.ref(frag.handle, span), index, span=span))
    return tuple(out)


def _shown(x: Any) -> str:
    if isinstance(x, Fragment):
        return "a loop or a block (it makes no single task call)"
    return f"`{x!r}`"


def make_call(t: Trace, k: Any, coords: Optional[tuple], args: tuple, kwargs: dict,
              span: A.Span, kwspans: dict, after: Any = None) -> A.CallStmt:
    """The CallStmt of `k[coords](*args, **kwargs)` (`k` a `KernelRef`): positional arguments
    bind the parameters in order (the seeds allow it; `.wsp` binds by name), keywords by name."""
    k.decl()  # the body is traced at its first use, so its errors are raised here
    triples = k.params()
    py_to_wsp = {p: w for p, w, _ in triples}
    kws: list = []
    pos_spans = kwspans.get("*", [])
    if len(args) > len(triples):
        raise user_error(span, f"kernel `{k.name}` takes {len(triples)} arguments, "
                         f"{len(args)} given positionally", cls=KernelError)
    seen = set()
    for i, a in enumerate(args):
        pname, wname, _ = triples[i]
        sp = pos_spans[i] if i < len(pos_spans) else span
        kws.append(A.Keyword(wname, value_node(a, t, sp), span=sp))
        seen.add(pname)
    for pname, a in kwargs.items():
        sp = kwspans.get(pname, span)
        if pname in seen:
            raise user_error(sp, f"argument `{pname}` is given twice", cls=KernelError)
        wname = py_to_wsp.get(pname, wsp_ident(pname))
        vsp = sp
        kws.append(A.Keyword(wname, value_node(a, t, vsp), span=sp))
    cnodes = None
    if coords is not None:
        cnodes = tuple(value_node(c, t, span) for c in coords)
    return A.CallStmt(t.ref(k, span), cnodes, (), tuple(kws), after=after_nodes(t, after, span),
                      span=span)
