"""How large a symbolic expression is (`sym.Expr`): what the front end measures to keep every
integer expression a module computes short (limits.MAX_INT_EXPR terms and factors) and within
int64 (its largest written number), before it reaches a proof or the generated C."""

from __future__ import annotations

from .sym import Const, Expr, IntLike, Poly, _children, as_expr


def too_large(e: IntLike, most: int) -> bool:
    """Whether e, printed, has more than `most` terms, factors and atoms (a power counts as
    its factors, as it prints): a bound the front end keeps on every integer expression."""
    left = [most]

    def walk(x: Expr, times: int) -> bool:
        left[0] -= times
        if left[0] < 0:
            return True
        if isinstance(x, Poly):
            for m, _ in x.terms:
                left[0] -= times
                if any(walk(a, times * p) for a, p in m):
                    return True
            return left[0] < 0
        return any(walk(c, times) for c in _children(x))

    return walk(as_expr(e), 1)


def largest_const(e: IntLike) -> int:
    """The largest magnitude of a number written in e (a constant, a coefficient)."""
    e = as_expr(e)
    if isinstance(e, Const):
        return abs(e.value)
    own = max((abs(c) for _, c in e.terms), default=0) if isinstance(e, Poly) else 0
    if isinstance(e, Poly):
        own = max(own, abs(e.const))
    return max([own] + [largest_const(c) for c in _children(e)])
