"""Symbolic integer expressions for tensor dims, view bounds and loop indices.

Expressions range over named integer symbols (run-time ``sym``s, consts not
yet folded, loop variables) with ``+ - *``, floor division and modulo (Python
semantics; the surface language spells them ``/`` and ``%``), ``ceildiv``,
``min``, ``max`` and ``abs``.  Every builder returns a canonical form: a
polynomial with integer coefficients over *atoms* -- variables and opaque
non-linear nodes whose arguments are themselves canonical -- with terms in a
fixed order.  So ``a - b`` simplifies to ``0`` exactly when a and b agree as
polynomials in their atoms (taken as independent unknowns), and structural
``==`` decides that.  Division by a positive constant is normalised too:
whole multiples are peeled off (``(16*t + 8) / 16`` -> ``t``, which holds for
every integer t), common factors cancel, the constant is reduced into
``[0, c)``, and ``ceildiv(x, c)`` becomes ``(x + c - 1) / c`` (printed back
as ``ceildiv``).  On top of that the module offers substitution, exact
evaluation, interval bounds, three-valued proofs, run-time ``Check``s and
printers for the surface language and for C.

Simplification preserves the value wherever the input is defined.  A division
whose divisor could be zero may disappear (``0 * (x / y)`` -> ``0``,
``x * y / y`` -> ``x``), so callers that care must ``require(d, '!=', 0)``
themselves.  Builders raise ``SymError`` only for a literal zero divisor.

Left alone: types, integer widths and overflow (all arithmetic is exact);
completeness for the non-linear atoms (``min(a, b) + max(a, b)`` is not
rewritten to ``a + b``); and any use of ranges while simplifying -- builders
are range-free, ranges only enter through ``bounds`` and the ``prove_*``
family.  ``==`` on nodes is structural; use ``prove_eq`` for semantics.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Union

from .limits import INT64_MAX, int_text

__all__ = [
    "SymError", "UnboundSymbol", "Expr", "Const", "Var", "FloorDiv", "Mod",
    "CeilDiv", "Min", "Max", "Abs", "Poly", "IntLike", "as_expr", "const",
    "var", "add", "sub", "mul", "neg", "floordiv", "mod", "ceildiv", "min_",
    "max_", "abs_", "simplify", "substitute", "evaluate", "free_vars",
    "is_const", "const_value", "Interval", "NONNEG", "bounds", "prove_eq",
    "prove_ne", "prove_lt", "prove_le", "prove_gt", "prove_ge", "Check",
    "require", "to_str", "to_c", "INT64",
]


class SymError(Exception):
    """Error in building or evaluating a symbolic expression."""


class UnboundSymbol(SymError):
    """Evaluation met a symbol the environment does not bind."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unbound symbol {name!r}")
        self.name = name


class Expr:
    """Base of all canonical integer expressions; build them with the builders."""

    __slots__ = ()

    def __add__(self, o): return add(self, o)
    def __radd__(self, o): return add(o, self)
    def __sub__(self, o): return sub(self, o)
    def __rsub__(self, o): return sub(o, self)
    def __mul__(self, o): return mul(self, o)
    def __rmul__(self, o): return mul(o, self)
    def __floordiv__(self, o): return floordiv(self, o)
    def __rfloordiv__(self, o): return floordiv(o, self)
    def __mod__(self, o): return mod(self, o)
    def __rmod__(self, o): return mod(o, self)
    def __neg__(self): return neg(self)
    def __pos__(self): return self
    def __abs__(self): return abs_(self)
    def __str__(self) -> str: return to_str(self)
    def __repr__(self) -> str: return f"{type(self).__name__}<{to_str(self)}>"


_node = dataclass(frozen=True, slots=True, repr=False)


@_node
class Const(Expr):
    """An integer literal."""
    value: int


@_node
class Var(Expr):
    """A named integer symbol."""
    name: str


@_node
class FloorDiv(Expr):
    """Floor division atom; a constant divisor is always >= 2."""
    num: Expr
    den: Expr


@_node
class Mod(Expr):
    """Floor modulo atom (result has the sign of the divisor)."""
    num: Expr
    den: Expr


@_node
class CeilDiv(Expr):
    """Ceiling division atom; only for non-constant divisors (else FloorDiv)."""
    num: Expr
    den: Expr


@_node
class Min(Expr):
    """Minimum of two or more sorted arguments, no two differing by a constant."""
    args: tuple


@_node
class Max(Expr):
    """Maximum of two or more sorted arguments, no two differing by a constant."""
    args: tuple


@_node
class Abs(Expr):
    """Absolute value; the argument's leading coefficient is positive."""
    arg: Expr


@_node
class Poly(Expr):
    """Sum of coefficient * monomial terms plus a constant (not a bare atom)."""
    terms: tuple  # ((monomial, coef), ...); monomial = ((atom, power), ...)
    const: int


IntLike = Union[Expr, int]
_Mono = tuple


def as_expr(x: IntLike) -> Expr:
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):  # almost always a bug in the caller
        raise TypeError("bool is not a symbolic integer")
    try:
        return Const(operator.index(x))
    except TypeError:
        raise TypeError(f"not an integer expression: {x!r}") from None


def const(n: int) -> Expr:
    return as_expr(n)


def var(name: str) -> Expr:
    if not isinstance(name, str) or not name:
        raise TypeError(f"symbol name must be a non-empty str: {name!r}")
    return Var(name)


# ---------------------------------------------------------------- ordering

_KIND = {FloorDiv: 2, Mod: 3, CeilDiv: 4, Min: 5, Max: 6, Abs: 7}


def _key(e: Expr) -> tuple:
    # Each kind has its own payload shape, so tuples never compare across types.
    if isinstance(e, Const):
        return (0, e.value)
    if isinstance(e, Var):
        return (1, e.name)
    if isinstance(e, Poly):
        return (9, tuple((_mono_key(m), c) for m, c in e.terms), e.const)
    if isinstance(e, (Min, Max)):
        return (_KIND[type(e)], tuple(_key(a) for a in e.args))
    if isinstance(e, Abs):
        return (7, _key(e.arg))
    return (_KIND[type(e)], _key(e.num), _key(e.den))


def _mono_key(m: _Mono) -> tuple:
    return tuple((_key(a), p) for a, p in m)


def _term_key(t: tuple) -> tuple:
    m = t[0]
    return (-sum(p for _, p in m), _mono_key(m))


# ------------------------------------------------------ polynomial algebra

def _terms(e: Expr) -> dict:
    """Fresh {monomial: coef} map of e; the constant sits under ()."""
    if isinstance(e, Const):
        return {(): e.value} if e.value else {}
    if isinstance(e, Poly):
        d = dict(e.terms)
        if e.const:
            d[()] = e.const
        return d
    return {((e, 1),): 1}


def _make(d: dict) -> Expr:
    k = d.get((), 0)
    items = [(m, c) for m, c in d.items() if m and c]
    if not items:
        return Const(k)
    if k == 0 and len(items) == 1:
        m, c = items[0]
        if c == 1 and len(m) == 1 and m[0][1] == 1:
            return m[0][0]
    items.sort(key=_term_key)
    return Poly(tuple(items), k)


def _mono_mul(m1: _Mono, m2: _Mono) -> _Mono:
    if not m1 or not m2:
        return m1 or m2
    p = dict(m1)
    for a, k in m2:
        p[a] = p.get(a, 0) + k
    return tuple(sorted(p.items(), key=lambda ak: _key(ak[0])))


def add(a: IntLike, b: IntLike) -> Expr:
    d = _terms(as_expr(a))
    for m, c in _terms(as_expr(b)).items():
        d[m] = d.get(m, 0) + c
    return _make(d)


def mul(a: IntLike, b: IntLike) -> Expr:
    out: dict = {}
    db = _terms(as_expr(b))
    for m1, c1 in _terms(as_expr(a)).items():
        for m2, c2 in db.items():
            m = _mono_mul(m1, m2)
            out[m] = out.get(m, 0) + c1 * c2
    return _make(out)


def neg(a: IntLike) -> Expr:
    return mul(a, -1)


def sub(a: IntLike, b: IntLike) -> Expr:
    return add(a, neg(b))


def _tdiv(x: int, c: int) -> int:
    """Division truncating toward zero (c > 0): keeps coefficient signs readable."""
    return x // c if x >= 0 else -(-x // c)


def _lone_atom(d: dict, cls: type):
    """The atom if d is exactly 1 * atom (+ const) with atom of type cls."""
    ms = [m for m in d if m]
    if len(ms) == 1 and d[ms[0]] == 1 and len(ms[0]) == 1 and ms[0][0][1] == 1 \
            and isinstance(ms[0][0][0], cls):
        return ms[0][0][0]
    return None


# ------------------------------------------------------------- division

def _const_den(b: Expr, a: Expr):
    """Normalise a constant divisor to positive; returns (num, c, sign) or None."""
    if not isinstance(b, Const):
        return None
    if b.value == 0:
        raise SymError(f"division by zero: ({a}) / 0")
    return (a, b.value, 1) if b.value > 0 else (neg(a), -b.value, -1)


def floordiv(a: IntLike, b: IntLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    cd = _const_den(b, a)
    if cd is None:
        return _div_sym(FloorDiv, a, b)
    a, c, _ = cd  # floor(a / -c) == floor(-a / c)
    d = _terms(a)
    k = d.pop((), 0)
    # (q*c + r) / c == q + r / c for any integer q, so peel whole multiples.
    quot, rest = {}, {}
    for m, coef in d.items():
        q = _tdiv(coef, c)
        if q:
            quot[m] = q
        if coef - q * c:
            rest[m] = coef - q * c
    if not rest:
        quot[()] = k // c
        return _make(quot)
    # floor((g*x + k) / (g*c')) == floor((x + floor(k/g)) / c')
    g = math.gcd(c, *rest.values())
    if g > 1:
        rest = {m: r // g for m, r in rest.items()}
        k, c = k // g, c // g
    quot[()], k = divmod(k, c)
    inner = _lone_atom(rest, FloorDiv)
    if inner is not None and isinstance(inner.den, Const):
        # floor((floor(n/a) + k) / c) == floor((n + k*a) / (a*c)) for a, c > 0
        a2 = inner.den.value
        return add(_make(quot), floordiv(add(inner.num, k * a2), a2 * c))
    rest[()] = k
    return add(_make(quot), FloorDiv(_make(rest), Const(c)))


def mod(a: IntLike, b: IntLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    cd = _const_den(b, a)
    if cd is None:
        return _div_sym(Mod, a, b)
    a, c, sign = cd
    if sign < 0:  # a % -c == -((-a) % c)
        return neg(mod(a, c))
    d = _terms(a)
    # Mod(n, c*j) is congruent to n modulo c, so the inner Mod is redundant.
    for m in d:
        if len(m) == 1 and m[0][1] == 1 and isinstance(m[0][0], Mod) \
                and isinstance(m[0][0].den, Const) and m[0][0].den.value % c == 0:
            return mod(add(sub(a, _make({m: d[m]})), mul(m[0][0].num, d[m])), c)
    k = d.pop((), 0)
    rest = {}
    for m, coef in d.items():
        r = coef - _tdiv(coef, c) * c
        if r:
            rest[m] = r
    if not rest:
        return Const(k % c)
    # (g*x + k) % (g*c') == g * ((x + k//g) % c') + k % g
    g = math.gcd(c, *rest.values())
    if g > 1:
        rest = {m: r // g for m, r in rest.items()}
        rest[()] = k // g
        return add(mul(mod(_make(rest), c // g), g), k % g)
    rest[()] = k % c
    return Mod(_make(rest), Const(c))


def ceildiv(a: IntLike, b: IntLike) -> Expr:
    a, b = as_expr(a), as_expr(b)
    cd = _const_den(b, a)
    if cd is None:
        return _div_sym(CeilDiv, a, b)
    a, c, _ = cd  # ceil(a / -c) == ceil(-a / c)
    # One canonical atom for both spellings; the printer shows it as ceildiv.
    return floordiv(add(a, c - 1), c)


def _div_sym(cls: type, a: Expr, b: Expr) -> Expr:
    # For any non-zero d: (q*d + r) / d == q + r / d, (q*d + r) % d == r % d,
    # ceildiv(q*d + r, d) == q + ceildiv(r, d).
    da, db = _terms(a), _terms(b)
    quot: dict = {}
    rest = da
    if len(db) == 1 and () not in db:
        (mb, cb), = db.items()
        pb = dict(mb)
        rest = {}
        for m, c in da.items():
            pm = dict(m)
            if c % cb == 0 and all(pm.get(x, 0) >= p for x, p in pb.items()):
                q = {x: pm[x] - pb.get(x, 0) for x in pm}
                qm = tuple(sorted(((x, p) for x, p in q.items() if p),
                                  key=lambda ak: _key(ak[0])))
                quot[qm] = c // cb
            else:
                rest[m] = c
    else:
        m0, c0 = min(((m, c) for m, c in db.items() if m), key=_term_key)
        if da.get(m0, 0) % c0 == 0 and sub(a, mul(b, da.get(m0, 0) // c0)) == Const(0):
            quot, rest = {(): da.get(m0, 0) // c0}, {}
    r = _make(rest)
    if cls is Mod:
        return Const(0) if r == Const(0) else Mod(r, b)
    q = _make(quot)
    return q if r == Const(0) else add(q, cls(r, b))


# ------------------------------------------------------- min, max, abs

def _minmax(cls: type, args) -> Expr:
    flat = []
    for x in map(as_expr, args):
        d = _terms(x)
        inner = _lone_atom(d, cls)
        if inner is not None:  # min(min(p, q) + k, r) == min(p + k, q + k, r)
            flat.extend(add(y, d.get((), 0)) for y in inner.args)
        else:
            flat.append(x)
    keep: list = []
    for x in flat:
        for i, y in enumerate(keep):
            diff = sub(x, y)
            if isinstance(diff, Const):
                # Incomparable survivors mean x matches at most one of them.
                if (diff.value < 0) == (cls is Min) and diff.value:
                    keep[i] = x
                break
        else:
            keep.append(x)
    if len(keep) == 1:
        return keep[0]
    off = 0
    if not any(isinstance(x, Const) for x in keep):
        # Pull the common offset out: min(p + 3, q + 5) == min(p, q + 2) + 3.
        off = min(_terms(x).get((), 0) for x in keep)
        keep = [sub(x, off) for x in keep]
    return add(cls(tuple(sorted(keep, key=_key))), off)


def min_(a: IntLike, b: IntLike, *more: IntLike) -> Expr:
    return _minmax(Min, (a, b) + more)


def max_(a: IntLike, b: IntLike, *more: IntLike) -> Expr:
    return _minmax(Max, (a, b) + more)


def abs_(a: IntLike) -> Expr:
    a = as_expr(a)
    if isinstance(a, Const):
        return Const(abs(a.value))
    if isinstance(a, Abs):
        return a
    d = _terms(a)
    lead = a.terms[0][1] if isinstance(a, Poly) else 1
    g = math.gcd(*d.values()) * (1 if lead > 0 else -1)
    if g != 1:  # |g*x| == |g| * |x|, with x's leading coefficient positive
        return mul(abs_(_make({m: c // g for m, c in d.items()})), abs(g))
    return Abs(a)


# ------------------------------------------------ rebuild, evaluate, vars

def _rebuild(e: Expr, env: Mapping[str, Expr], memo: dict) -> Expr:
    if e in memo:
        return memo[e]
    if isinstance(e, Const):
        r = e
    elif isinstance(e, Var):
        r = env.get(e.name, e)
    elif isinstance(e, Poly):
        r = Const(e.const)
        for m, c in e.terms:
            t: Expr = Const(c)
            for atom, p in m:
                s = _rebuild(atom, env, memo)
                for _ in range(p):
                    t = mul(t, s)
            r = add(r, t)
    elif isinstance(e, (Min, Max)):
        r = _minmax(type(e), [_rebuild(x, env, memo) for x in e.args])
    elif isinstance(e, Abs):
        r = abs_(_rebuild(e.arg, env, memo))
    else:
        build = {FloorDiv: floordiv, Mod: mod, CeilDiv: ceildiv}[type(e)]
        r = build(_rebuild(e.num, env, memo), _rebuild(e.den, env, memo))
    memo[e] = r
    return r


def simplify(e: IntLike) -> Expr:
    """Canonical form of e (a no-op for anything made by the builders)."""
    return _rebuild(as_expr(e), {}, {})


def substitute(e: IntLike, mapping: Mapping[str, IntLike]) -> Expr:
    env = {k: simplify(v) for k, v in mapping.items()}
    return _rebuild(as_expr(e), env, {})


def evaluate(e: IntLike, env: Mapping[str, int]) -> int:
    e = as_expr(e)
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        if e.name not in env:
            raise UnboundSymbol(e.name)
        return operator.index(env[e.name])
    if isinstance(e, Poly):
        total = e.const
        for m, c in e.terms:
            for atom, p in m:
                c *= evaluate(atom, env) ** p
            total += c
        return total
    if isinstance(e, (Min, Max)):
        return (min if isinstance(e, Min) else max)(evaluate(x, env) for x in e.args)
    if isinstance(e, Abs):
        return abs(evaluate(e.arg, env))
    n, d = evaluate(e.num, env), evaluate(e.den, env)
    if d == 0:
        raise SymError(f"division by zero in {e}")
    if isinstance(e, FloorDiv):
        return n // d
    if isinstance(e, Mod):
        return n % d
    return -(-n // d)


def _children(e: Expr) -> tuple:
    if isinstance(e, Poly):
        return tuple(a for m, _ in e.terms for a, _ in m)
    if isinstance(e, (Min, Max)):
        return e.args
    if isinstance(e, Abs):
        return (e.arg,)
    if isinstance(e, (FloorDiv, Mod, CeilDiv)):
        return (e.num, e.den)
    return ()


def free_vars(e: IntLike) -> frozenset:
    e = as_expr(e)
    if isinstance(e, Var):
        return frozenset((e.name,))
    return frozenset().union(*(free_vars(c) for c in _children(e)))


def is_const(e: IntLike) -> bool:
    return isinstance(as_expr(e), Const)


def const_value(e: IntLike) -> int | None:
    e = as_expr(e)
    return e.value if isinstance(e, Const) else None


# ---------------------------------------------------------------- bounds

@dataclass(frozen=True)
class Interval:
    """Inclusive integer interval; None is an unbounded end."""
    lo: int | None
    hi: int | None

    def __post_init__(self) -> None:
        if self.lo is not None and self.hi is not None and self.lo > self.hi:
            raise ValueError(f"empty interval [{self.lo}, {self.hi}]")

    @staticmethod
    def exact(v: int) -> "Interval":
        return Interval(v, v)

    def __contains__(self, v: int) -> bool:
        return (self.lo is None or self.lo <= v) and (self.hi is None or v <= self.hi)


NONNEG = Interval(0, None)
_INF = math.inf
# Internally ends are ints or +-inf floats; ints never mix with floats in
# arithmetic (huge ints would overflow a float conversion).


def _xadd(x, y):
    return x if isinstance(x, float) else y if isinstance(y, float) else x + y


def _xmul(x, y):
    if x == 0 or y == 0:  # interval convention: 0 * inf == 0
        return 0
    if isinstance(x, float) or isinstance(y, float):
        return _INF if (x > 0) == (y > 0) else -_INF
    return x * y


def _xfdiv(x, y):
    if isinstance(y, float):  # limits at an infinite divisor end
        if isinstance(x, float):
            return _INF if (x > 0) == (y > 0) else -_INF
        return 0 if x == 0 or (x > 0) == (y > 0) else -1
    if isinstance(x, float):
        return x if y > 0 else -x
    return x // y


def _corners(f, a, b):
    c = [f(x, y) for x in a for y in b]
    return (min(c), max(c))


def _ipow(a, p):
    def pw(x):
        return x ** p if not isinstance(x, float) else (_INF if x > 0 or p % 2 == 0 else -_INF)

    lo, hi = a
    if p % 2 or lo >= 0:
        return (pw(lo), pw(hi))
    if hi <= 0:
        return (pw(hi), pw(lo))
    return (0, max(pw(lo), pw(hi)))


def _ifloordiv(n, d):
    if d[0] > 0 or d[1] < 0:
        # floor(n/d) is monotone in each argument on a sign-definite box.
        return _corners(_xfdiv, n, d)
    m = max(-n[0], n[1])  # |floor(n/d)| <= |n| whenever |d| >= 1
    return (-m, m)


def _imod(n, d):
    if d[0] > 0:
        if n[0] >= 0 and n[1] < d[0]:
            return n
        if d[0] == d[1] and not isinstance(n[0], float) and not isinstance(n[1], float) \
                and n[0] // d[0] == n[1] // d[0]:
            q = n[0] // d[0] * d[0]
            return (n[0] - q, n[1] - q)
        return (0, min(_xadd(d[1], -1), n[1]) if n[0] >= 0 else _xadd(d[1], -1))
    if d[1] < 0:
        return (max(_xadd(d[0], 1), n[0]) if n[1] <= 0 else _xadd(d[0], 1), 0)
    m = _xadd(max(-d[0], d[1], 1), -1)  # d == [0, 0] is never defined: any answer
    return (-m, m)


def _neg_iv(a):
    return (-a[1], -a[0])


def _ibounds(e: Expr, ranges: Mapping, default: Interval, memo: dict):
    if e in memo:
        return memo[e]
    if isinstance(e, Const):
        r = (e.value, e.value)
    elif isinstance(e, Var):
        iv = ranges.get(e.name, default)
        if not isinstance(iv, Interval):
            iv = Interval(*iv)
        r = (-_INF if iv.lo is None else iv.lo, _INF if iv.hi is None else iv.hi)
    elif isinstance(e, Poly):
        r = (e.const, e.const)
        for m, c in e.terms:
            t = (c, c)
            for atom, p in m:
                t = _corners(_xmul, t, _ipow(_ibounds(atom, ranges, default, memo), p))
            r = (_xadd(r[0], t[0]), _xadd(r[1], t[1]))
    elif isinstance(e, (Min, Max)):
        bs = [_ibounds(x, ranges, default, memo) for x in e.args]
        f = min if isinstance(e, Min) else max
        r = (f(b[0] for b in bs), f(b[1] for b in bs))
    elif isinstance(e, Abs):
        lo, hi = _ibounds(e.arg, ranges, default, memo)
        r = (lo, hi) if lo >= 0 else (-hi, -lo) if hi <= 0 else (0, max(-lo, hi))
    else:
        n = _ibounds(e.num, ranges, default, memo)
        d = _ibounds(e.den, ranges, default, memo)
        if isinstance(e, FloorDiv):
            r = _ifloordiv(n, d)
        elif isinstance(e, Mod):
            r = _imod(n, d)
        else:  # ceildiv(n, d) == -floor(-n / d)
            r = _neg_iv(_ifloordiv(_neg_iv(n), d))
    memo[e] = r
    return r


def bounds(e: IntLike, ranges: Mapping[str, Interval] | None = None,
           default: Interval = NONNEG) -> Interval:
    """Sound enclosure of e's values; unlisted symbols range over `default`."""
    lo, hi = _ibounds(as_expr(e), ranges or {}, default, {})
    return Interval(None if isinstance(lo, float) else lo,
                    None if isinstance(hi, float) else hi)


# ---------------------------------------------------------------- proofs

def _diff(a: IntLike, b: IntLike, ranges, default) -> Interval:
    d = sub(a, b)
    if isinstance(d, Const):
        return Interval(d.value, d.value)
    return bounds(d, ranges, default)


def prove_le(a: IntLike, b: IntLike, ranges=None, default: Interval = NONNEG) -> bool | None:
    """True if a <= b for every assignment in ranges, False if never, else None."""
    iv = _diff(b, a, ranges, default)
    if iv.lo is not None and iv.lo >= 0:
        return True
    if iv.hi is not None and iv.hi < 0:
        return False
    return None


def prove_lt(a: IntLike, b: IntLike, ranges=None, default: Interval = NONNEG) -> bool | None:
    return prove_le(add(a, 1), b, ranges, default)


def prove_ge(a: IntLike, b: IntLike, ranges=None, default: Interval = NONNEG) -> bool | None:
    return prove_le(b, a, ranges, default)


def prove_gt(a: IntLike, b: IntLike, ranges=None, default: Interval = NONNEG) -> bool | None:
    return prove_lt(b, a, ranges, default)


def prove_eq(a: IntLike, b: IntLike, ranges=None, default: Interval = NONNEG) -> bool | None:
    iv = _diff(a, b, ranges, default)
    if iv.lo == 0 and iv.hi == 0:
        return True
    if (iv.lo is not None and iv.lo > 0) or (iv.hi is not None and iv.hi < 0):
        return False
    return None


def prove_ne(a: IntLike, b: IntLike, ranges=None, default: Interval = NONNEG) -> bool | None:
    r = prove_eq(a, b, ranges, default)
    return None if r is None else not r


_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt,
        "<=": operator.le, ">": operator.gt, ">=": operator.ge}
INT64 = (-INT64_MAX - 1, INT64_MAX)  # `a *fits b` holds when a * b is within int64 (+, - too)
_FITS = {"+fits": operator.add, "-fits": operator.sub, "*fits": operator.mul}
_PROVERS = {"==": prove_eq, "!=": prove_ne, "<": prove_lt,
            "<=": prove_le, ">": prove_gt, ">=": prove_ge}


@dataclass(frozen=True)
class Check:
    """A relation the checker could not decide, left for run time."""
    lhs: Expr
    op: str
    rhs: Expr
    reason: str

    def __post_init__(self) -> None:
        if self.op not in _OPS and self.op not in _FITS:
            raise ValueError(f"unknown comparison {self.op!r}")

    def evaluate(self, env: Mapping[str, int]) -> bool:
        a, b = evaluate(self.lhs, env), evaluate(self.rhs, env)
        return INT64[0] <= _FITS[self.op](a, b) <= INT64[1] if self.op in _FITS else _OPS[self.op](a, b)

    def to_c(self, name_of: Callable[[str], str] = lambda v: v) -> str:
        lhs, rhs = to_c(self.lhs, name_of), to_c(self.rhs, name_of)  # *fits: the prelude's helpers
        return f"wsp_{_FITS[self.op].__name__}_fits({lhs}, {rhs})" if self.op in _FITS else f"{lhs} {self.op} {rhs}"

    def __str__(self) -> str:
        if self.op in _FITS:
            return f"fits_int64(({to_str(self.lhs)}) {self.op[0]} ({to_str(self.rhs)}))"
        return f"{to_str(self.lhs)} {self.op} {to_str(self.rhs)}"


def require(lhs: IntLike, op: str, rhs: IntLike, reason: str, ranges=None,
            default: Interval = NONNEG) -> bool | Check:
    """True if proved, False if disproved, else a Check to run at run time."""
    if op not in _PROVERS:
        raise ValueError(f"unknown comparison {op!r}")
    lhs, rhs = as_expr(lhs), as_expr(rhs)
    r = _PROVERS[op](lhs, rhs, ranges, default)
    return Check(lhs, op, rhs, reason) if r is None else r


# -------------------------------------------------------------- printing

_ADD, _MUL, _UNARY, _ATOM = 1, 2, 3, 4
_I32 = 2**31 - 1


class _Printer:
    def __init__(self, c: bool, name_of: Callable[[str], str]) -> None:
        self.c, self.name_of = c, name_of

    def lit(self, v: int) -> str:
        return f"{v}LL" if self.c and not -_I32 <= v <= _I32 else int_text(v)

    def wrap(self, e: Expr, need: int) -> str:
        t, p = self.expr(e)
        return f"({t})" if p < need else t

    def call(self, fn: str, args) -> tuple:
        name = "wsp_" + fn if self.c else fn
        return f"{name}({', '.join(self.expr(a)[0] for a in args)})", _ATOM

    def binop(self, e, op: str, fn: str) -> tuple:
        if self.c:
            return self.call(fn, (e.num, e.den))
        return f"{self.wrap(e.num, _MUL)} {op} {self.wrap(e.den, _MUL + 1)}", _MUL

    def expr(self, e: Expr) -> tuple:
        if isinstance(e, Const):
            return self.lit(e.value), _ATOM if e.value >= 0 else _UNARY
        if isinstance(e, Var):
            return self.name_of(e.name), _ATOM
        if isinstance(e, Poly):
            return self.poly(e)
        if isinstance(e, FloorDiv):
            c = e.den.value if isinstance(e.den, Const) else 0
            if c > 1 and _terms(e.num).get((), 0) == c - 1:
                return self.call("ceildiv", (sub(e.num, c - 1), e.den))
            return self.binop(e, "/", "floordiv")
        if isinstance(e, Mod):
            return self.binop(e, "%", "mod")
        if isinstance(e, CeilDiv):
            return self.call("ceildiv", (e.num, e.den))
        if isinstance(e, Abs):
            return self.call("abs", (e.arg,))
        fn = "min" if isinstance(e, Min) else "max"
        text = self.expr(e.args[0])[0]
        for x in e.args[1:]:  # the targets only have binary min/max
            text = f"{'wsp_' + fn if self.c else fn}({text}, {self.expr(x)[0]})"
        return text, _ATOM

    def mono(self, m: _Mono, mag: int, unary: bool) -> str:
        fs = [a for a, p in m for _ in range(p)]
        if not unary:  # a division-like factor needs no parentheses up front
            for i, f in enumerate(fs):
                if self.expr(f)[1] == _MUL:
                    fs.insert(0, fs.pop(i))
                    break
        out = [self.wrap(fs[0], _UNARY if unary else _MUL)]
        out += [self.wrap(f, _MUL + 1) for f in fs[1:]]
        if mag != 1:
            out.append(self.lit(mag))
        return " * ".join(out)

    def poly(self, e: Poly) -> tuple:
        pos = [(False, m, c) for m, c in e.terms if c > 0]
        parts = pos + [(True, m, -c) for m, c in e.terms if c < 0]
        if e.const:
            k = (e.const < 0, None, abs(e.const))
            if not pos and e.const > 0:  # `16 - t` reads better than `-t + 16`
                parts.insert(0, k)
            else:
                parts.append(k)
        out = []
        for i, (negative, m, mag) in enumerate(parts):
            t = self.lit(mag) if m is None else self.mono(m, mag, i == 0 and negative)
            out.append(("-" + t if negative else t) if i == 0
                       else (" - " if negative else " + ") + t)
        if len(parts) > 1:
            prec = _ADD
        elif parts[0][0] and parts[0][2] == 1 and sum(p for _, p in parts[0][1]) == 1:
            prec = _UNARY
        else:
            prec = _MUL
        return "".join(out), prec


def to_str(e: IntLike) -> str:
    """Surface-language text: `/` and `%` are floor division and modulo."""
    return _Printer(False, lambda v: v).expr(as_expr(e))[0]


def to_c(e: IntLike, name_of: Callable[[str], str] = lambda v: v) -> str:
    """C text using the wsp_* helpers for everything beyond + - *."""
    return _Printer(True, name_of).expr(as_expr(e))[0]


def prove_in_loops(lhs: IntLike, op: str, rhs: IntLike, ranges: Mapping[str, Interval],
                   extents: Mapping[str, Expr], cache: Optional[dict] = None) -> Optional[bool]:
    """`lhs op rhs` over loop variables: True, False or None (unknown).

    Intervals alone cannot see that `b < B` when `b` iterates `[0, B)`; so when they are
    undecided the proof is retried with every loop variable `v` over a symbolic extent
    (`extents[v]`) written as `E - 1 - u` with `u >= 0`: a superset of its range, so both a
    proof and a disproof hold for the real range. `cache` (a dict the caller keeps) answers
    each distinct question, with the facts it depends on, once.
    """
    lhs, rhs = as_expr(lhs), as_expr(rhs)
    free = free_vars(lhs) | free_vars(rhs)
    key = None
    if cache is not None:
        seen = set(free)
        for v in free:
            if v in extents:
                seen |= free_vars(extents[v])
        key = (lhs, op, rhs, tuple(sorted((v, ranges.get(v), extents.get(v)) for v in seen)))
        if key in cache:
            return cache[key]
    prover = _PROVERS[op]
    r = prover(lhs, rhs, ranges)
    if r is None:
        mapping: dict[str, Expr] = {}
        widened = dict(ranges)
        for v in free:
            if v in extents:
                u = f"{v}~"
                mapping[v] = sub(sub(extents[v], 1), var(u))
                widened[u] = NONNEG
        if mapping:
            r = prover(substitute(lhs, mapping), substitute(rhs, mapping), widened)
    if cache is not None:
        cache[key] = r
    return r
