"""Tests for ptowsp.sym: canonical forms, exact semantics, sound proofs."""

import random
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ptowsp import sym
from ptowsp.sym import (
    Check,
    Interval,
    SymError,
    UnboundSymbol,
    abs_,
    bounds,
    ceildiv,
    const,
    const_value,
    evaluate,
    floordiv,
    free_vars,
    is_const,
    max_,
    min_,
    mod,
    prove_eq,
    prove_ge,
    prove_gt,
    prove_le,
    prove_lt,
    prove_ne,
    require,
    simplify,
    substitute,
    to_c,
    to_str,
    var,
)

t, S, B, T, x, y, a, b, c, n = map(var, "t S B T x y a b c n".split())


def parse(text):
    """Read surface text back with Python's grammar (same precedences)."""
    env = {"ceildiv": ceildiv, "min": min_, "max": max_, "abs": abs_}
    for name in free_names(text):
        env[name] = var(name)
    return sym.as_expr(eval(text.replace("/", "//"), env))


def free_names(text):
    return set(re.findall(r"[A-Za-z_]\w*", text)) - {"ceildiv", "min", "max", "abs"}


# ------------------------------------------------------------ unit tests

def test_like_terms_cancel():
    assert (t * 16 + 16) - (t * 16) == const(16)
    assert prove_eq((t * 16 + 16) - t * 16, 16) is True
    assert 2 * x + 3 * x == 5 * x
    assert (x + y) * 3 - 3 * y == x * 3
    assert (x + 1) * (x - 1) == x * x - 1


def test_division_rules():
    assert x // 1 == x and x % 1 == const(0)
    assert (16 * t + 8) // 16 == t
    assert (16 * t) % 16 == const(0)
    assert (16 * t + 20) % 16 == const(4)
    # constants are reduced into [0, divisor) inside the atom
    assert (x + 17) // 16 == (x + 1) // 16 + 1
    assert (x - 1) % 16 == (x + 15) % 16
    assert (6 * t + 3) % 12 == (t % 2) * 6 + 3
    assert ceildiv(64 * n, 64) == n
    assert ceildiv(S, 64) * 64 - ceildiv(S, 64) * 64 == const(0)
    assert (x // 3) // 4 == x // 12
    assert (4 * t + 2) // 8 == t // 2
    assert (x % 32) % 8 == x % 8
    assert (x * S) // S == x and (x * S) % S == const(0)
    assert (2 * S + 2) // (S + 1) == const(2)
    assert (4 * x * S) // (2 * S) == x * 2
    assert evaluate((3 * a + b) // (2 * a), {"a": 1, "b": 1}) == 2
    assert floordiv(7, -2) == const(-4) and mod(7, -2) == const(-1)
    assert ceildiv(7, 2) == const(4) and ceildiv(-7, 2) == const(-3)
    assert floordiv(x, -4) == floordiv(-x, 4)
    # the ceildiv spelling and the floor spelling share one canonical atom
    assert ceildiv(S, 64) == (S + 63) // 64


def test_min_max_abs():
    assert min_(x, x) == x
    assert max_(x, x + 1) == x + 1
    assert min_(x, x + 1) == x
    assert min_(3, 5) == const(3) and max_(-3, 5) == const(5)
    assert min_(a, b) == min_(b, a)
    assert min_(min_(a, b), c) == min_(a, min_(b, c))
    assert min_(a + 3, b + 5) - 3 == min_(a, b + 2)
    assert abs_(-x) == abs_(x) and abs_(abs_(x)) == abs_(x)
    assert abs_(-7) == const(7)


def test_printing_surface():
    assert to_str(t * 16 + 16) == "t * 16 + 16"
    assert to_str(ceildiv(S, 64) * 64) == "ceildiv(S, 64) * 64"
    assert to_str(B - 1) == "B - 1"
    assert to_str(1 - B) == "1 - B"
    assert to_str(-B - 1) == "-B - 1"
    assert to_str((a + b) // c) == "(a + b) / c"
    assert to_str(a // (b * c)) == "a / (b * c)"
    assert to_str(a * b // c) == "a * b / c"
    assert to_str(a - b * 2) == "a - b * 2"
    assert to_str(-(a // b)) == "-(a / b)"
    assert to_str(x % 16) == "x % 16"
    assert to_str(x // 16 * 4) == "x / 16 * 4"
    assert to_str(min_(a, b)) == "min(a, b)"
    assert to_str(max_(a, b, c)) == "max(max(a, b), c)"
    assert to_str(x * x * y + x + 3) == "x * x * y + x + 3"
    assert to_str(abs_(a - b)) == "abs(a - b)"
    assert str(const(-5)) == "-5"


def test_printing_c():
    assert to_c((a + b) // c) == "wsp_floordiv(a + b, c)"
    assert to_c(x % 16 + ceildiv(S, T)) == "wsp_mod(x, 16) + wsp_ceildiv(S, T)"
    assert to_c(ceildiv(S, 64) * 64) == "wsp_ceildiv(S, 64) * 64"
    assert to_c(min_(a, b) - abs_(c)) == "wsp_min(a, b) - wsp_abs(c)"
    assert to_c(x * 2**40 + 2**31 - 1) == "x * 1099511627776LL + 2147483647"
    assert to_c(const(-2**31)) == "-2147483648LL"
    assert to_c(S - 1, name_of=lambda v: f"sym_{v}") == "sym_S - 1"


def test_evaluate_and_errors():
    assert evaluate(ceildiv(S, 64) * 64, {"S": 65}) == 128
    assert evaluate(x // 4 + x % 4, {"x": -7}) == -2 + 1
    with pytest.raises(UnboundSymbol) as ei:
        evaluate(x + y, {"x": 1})
    assert ei.value.name == "y" and isinstance(ei.value, SymError)
    with pytest.raises(SymError):
        evaluate(x // y, {"x": 1, "y": 0})
    with pytest.raises(SymError):
        evaluate(mod(x, y), {"x": 1, "y": 0})
    with pytest.raises(SymError):
        floordiv(x, 0)
    with pytest.raises(SymError):
        substitute(ceildiv(x, y), {"y": 0})
    with pytest.raises(TypeError):
        x + True


def test_misc_api():
    assert free_vars(min_(a, b // c) + 1) == frozenset("abc")
    assert is_const(x - x) and const_value(x - x + 3) == 3
    assert const_value(x) is None
    assert substitute(x * y + 1, {"x": 2, "y": t}) == t * 2 + 1
    assert simplify(t * 16 + 16) == t * 16 + 16
    assert hash(t * 16 + 16) == hash(16 + 16 * t)


def test_bounds_and_proofs():
    assert bounds(x) == Interval(0, None)
    assert bounds(x, default=Interval(None, None)) == Interval(None, None)
    assert bounds(x % 16) == Interval(0, 15)
    assert bounds(x % 16, {"x": Interval(32, 40)}) == Interval(0, 8)
    assert bounds(t * 16 + 15, {"t": Interval(0, 3)}) == Interval(15, 63)
    assert bounds(x * x - 1, {"x": Interval(-2, 3)}) == Interval(-1, 8)
    neg_by_big = {"a": Interval(-5, -1), "b": Interval(1, None)}
    assert bounds(a // b, neg_by_big) == Interval(-5, -1)
    assert bounds(ceildiv(a, b), neg_by_big) == Interval(-5, 0)
    assert bounds(a % b, neg_by_big) == Interval(0, None)
    assert bounds(a % b, {"b": Interval(-8, -3)}) == Interval(-7, 0)
    assert bounds(a % b, {"a": Interval(5, 9), "b": Interval(4, 6)}) == Interval(0, 5)
    assert bounds(a % b, {"b": Interval(0, 0)}) == Interval(0, 0)  # never defined
    assert bounds(a % b, {"b": Interval(None, -3)}) == Interval(None, 0)
    assert prove_le(t * 16 + 16, 64, {"t": Interval(0, 3)}) is True
    assert prove_lt(x % 16, 16) is True and prove_ge(x % 16, 0) is True
    assert prove_lt(x, 0) is False          # symbols default to >= 0
    assert prove_lt(x, 0, default=Interval(None, None)) is None
    assert prove_gt(S + 1, S) is True and prove_ne(S + 1, S) is True
    assert prove_eq(S, T) is None and prove_ne(S, T) is None
    assert prove_le(min_(S, 64), 64) is True
    assert prove_eq(x, -1) is False


def test_require_and_check():
    ranges = {"t": Interval(0, 3)}
    assert require(t * 16 + 16, "<=", 64, "view in bounds", ranges) is True
    assert require(t * 16, "<", 0, "never", ranges) is False
    chk = require(t * 16 + 16, "<=", S, "view fits in X", ranges)
    assert isinstance(chk, Check)
    assert chk.reason == "view fits in X" and str(chk) == "t * 16 + 16 <= S"
    assert chk.to_c(lambda v: "s_" + v) == "s_t * 16 + 16 <= s_S"
    assert chk.evaluate({"t": 1, "S": 32}) is True
    assert chk.evaluate({"t": 2, "S": 32}) is False
    with pytest.raises(ValueError):
        require(x, "=<", y, "bad op")


# ------------------------------------------------------ property tests

VARS = ("a", "b", "c")
_BIN = ("+", "-", "*", "//", "%", "cd", "min", "max")

# Coefficients sharing factors with the divisors reach the gcd and
# whole-multiple rewrites that plain random trees rarely hit.
COEFS = (-16, -6, -4, -3, -2, -1, 1, 2, 3, 4, 6, 8, 12, 16)
lins = st.tuples(st.just("lin"),
                 st.lists(st.tuples(st.sampled_from(VARS), st.sampled_from(COEFS)),
                          min_size=1, max_size=2).map(tuple),
                 st.integers(-20, 20))
leaves = st.one_of(st.sampled_from(VARS).map(lambda v: ("v", v)),
                   st.integers(-12, 12).map(lambda k: ("c", k)), lins)


def _extend(children):
    return st.one_of(
        st.tuples(st.sampled_from(_BIN), children, children),
        # positive constant divisors keep most trees defined
        st.tuples(st.sampled_from(("//", "%", "cd")), children,
                  st.sampled_from((1, 2, 3, 4, 6, 8, 12, 16, -4)).map(lambda k: ("c", k))),
        st.tuples(st.sampled_from(("neg", "abs")), children),
    )


trees = st.recursive(leaves, _extend, max_leaves=10)


def ref(tree, env):
    """Plain-Python meaning; ZeroDivisionError where undefined."""
    tag = tree[0]
    if tag == "v":
        return env[tree[1]]
    if tag == "c":
        return tree[1]
    if tag == "lin":
        return sum(k * env[v] for v, k in tree[1]) + tree[2]
    if tag == "neg":
        return -ref(tree[1], env)
    if tag == "abs":
        return abs(ref(tree[1], env))
    p, q = ref(tree[1], env), ref(tree[2], env)
    return {"+": lambda: p + q, "-": lambda: p - q, "*": lambda: p * q,
            "//": lambda: p // q, "%": lambda: p % q, "cd": lambda: -(-p // q),
            "min": lambda: min(p, q), "max": lambda: max(p, q)}[tag]()


def build(tree):
    tag = tree[0]
    if tag == "v":
        return var(tree[1])
    if tag == "c":
        return const(tree[1])
    if tag == "lin":
        return sum((k * var(v) for v, k in tree[1]), const(tree[2]))
    if tag == "neg":
        return -build(tree[1])
    if tag == "abs":
        return abs_(build(tree[1]))
    p, q = build(tree[1]), build(tree[2])
    return {"+": lambda: p + q, "-": lambda: p - q, "*": lambda: p * q,
            "//": lambda: p // q, "%": lambda: p % q, "cd": lambda: ceildiv(p, q),
            "min": lambda: min_(p, q), "max": lambda: max_(p, q)}[tag]()


def try_build(tree):
    try:
        return build(tree)
    except SymError:
        return None  # a divisor simplified to literal 0


def try_ref(tree, env):
    try:
        return ref(tree, env)
    except ZeroDivisionError:
        return None


# A plain Random per example: hypothesis' own randoms() is far slower here.
seeds = st.integers(0, 2**32).map(random.Random)
envs = st.fixed_dictionaries({v: st.integers(-40, 40) for v in VARS})
FAST = settings(max_examples=100, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(trees, st.lists(envs, min_size=1, max_size=4))
def test_build_is_exact(tree, env_list):
    e = try_build(tree)
    for env in env_list:
        want = try_ref(tree, env)
        if want is None:
            continue  # simplification may only drop a division by zero
        assert e is not None
        assert evaluate(e, env) == want


@FAST
@given(trees)
def test_canonical_is_fixed_point_and_prints_back(tree):
    e = try_build(tree)
    assume(e is not None)
    assert simplify(e) == e
    assert parse(to_str(e)) == e
    assert free_vars(e) <= set(VARS)


@FAST
@given(trees, trees, envs)
def test_substitute_then_evaluate(tree, sub_tree, env):
    e, s = try_build(tree), try_build(sub_tree)
    assume(e is not None and s is not None)
    sv = try_ref(sub_tree, env)
    assume(sv is not None)
    try:
        got = substitute(e, {"a": s, "c": 3})
    except SymError:
        return  # the substitution made some divisor a literal 0
    want = try_ref(tree, {**env, "a": sv, "c": 3})
    if want is not None:
        assert evaluate(got, env) == want


@st.composite
def ranges_st(draw):
    out = {}
    for v in VARS:
        lo = draw(st.one_of(st.none(), st.integers(-10, 10)))
        width = draw(st.one_of(st.none(), st.integers(0, 12)))
        hi = None if width is None else (lo if lo is not None else 0) + width
        out[v] = Interval(lo, hi)
    return out


def sample_env(rng, ranges):
    env = {}
    for v, iv in ranges.items():
        # stand-ins for an unbounded end reach far, to probe the limit cases
        lo = iv.lo if iv.lo is not None else (iv.hi if iv.hi is not None else 0) - 1000
        hi = iv.hi if iv.hi is not None else lo + 1000
        env[v] = rng.choice([lo, hi, rng.randint(lo, hi), rng.randint(lo, min(hi, lo + 20))])
    return env


PROVERS = {"==": prove_eq, "!=": prove_ne, "<": prove_lt, "<=": prove_le,
           ">": prove_gt, ">=": prove_ge}
OPS = {"==": lambda p, q: p == q, "!=": lambda p, q: p != q,
       "<": lambda p, q: p < q, "<=": lambda p, q: p <= q,
       ">": lambda p, q: p > q, ">=": lambda p, q: p >= q}


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(trees, trees, ranges_st(), seeds)
def test_proofs_and_bounds_are_sound(lt, rt, ranges, rng):
    lhs, rhs = try_build(lt), try_build(rt)
    assume(lhs is not None and rhs is not None)
    verdicts = {op: p(lhs, rhs, ranges) for op, p in PROVERS.items()}
    iv = bounds(lhs, ranges)
    chk = require(lhs, "<=", rhs, "prop", ranges)
    for _ in range(12):
        env = sample_env(rng, ranges)
        lv, rv = try_ref(lt, env), try_ref(rt, env)
        if lv is None or rv is None:
            continue
        assert lv in iv, (to_str(lhs), iv, env)
        for op, verdict in verdicts.items():
            if verdict is not None:
                assert OPS[op](lv, rv) == verdict, (to_str(lhs), op, to_str(rhs), env)
        if isinstance(chk, Check):
            assert chk.evaluate(env) == (lv <= rv)


operands = st.one_of(lins, st.sampled_from(VARS).map(lambda v: ("v", v)))
divisors = st.one_of(operands, st.sampled_from((2, 3, 4, 6, 8, 16, -4)).map(lambda k: ("c", k)))


@settings(max_examples=120, deadline=None)
@given(st.sampled_from(_BIN + ("abs",)), operands, divisors, ranges_st(), seeds)
def test_one_operation_exact_and_bounded(op, lt, rt, ranges, rng):
    """Shallow trees hit every rewrite and interval rule far more often."""
    tree = ("abs", lt) if op == "abs" else (op, lt, rt)
    e = try_build(tree)
    assume(e is not None)
    iv = bounds(e, ranges)
    for _ in range(20):
        env = sample_env(rng, ranges)
        v = try_ref(tree, env)
        if v is not None:
            assert evaluate(e, env) == v, (to_str(e), env)
            assert v in iv, (to_str(e), iv, env)


@FAST
@given(trees, st.lists(envs, min_size=1, max_size=3))
def test_c_text_mentions_helpers_only_for_nonlinear_ops(tree, env_list):
    e = try_build(tree)
    assume(e is not None)
    text = to_c(e)
    assert "/" not in text and "%" not in text
    # the C text, read with Python semantics for the helpers, means the same
    helpers = {"wsp_floordiv": lambda p, q: p // q, "wsp_mod": lambda p, q: p % q,
               "wsp_ceildiv": lambda p, q: -(-p // q), "wsp_min": min,
               "wsp_max": max, "wsp_abs": abs}
    for env in env_list:
        try:
            want = evaluate(e, env)
        except SymError:
            continue
        assert eval(text.replace("LL", ""), {**helpers, **env}) == want
