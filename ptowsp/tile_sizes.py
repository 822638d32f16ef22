"""The tile sizes `wspc tune` searches (docs/tools.md, "wspc tune", "Tile sizes"): where they
are written, their variants of the module, whether a variant means the same, and the text
`--apply` writes.

A *tile size* is a positive integer literal of the module's text that sizes kernel tiles: the
value of a `const` (in the main file or an imported one) that a kernel names in its
parameters' types or that a call passes whole to a `Constexpr` parameter, or an integer
literal a call passes to a `Constexpr` parameter itself (`attn_tile[b, h](..., R = 128)`).
Each literal argument is a tile size of its own, even where several calls pass one to the same
parameter: their values may differ on purpose (attention_tiered's `R = 64` and `R = 128` tiers).
A variant of the module changes only those numbers, in a copy of their files' text
(`with_numbers`), so every other character, comment and imported file stays; `_Variants` checks
and lowers a variant, compares its tensors' shapes and its outputs on `ref` with the file's.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional, Sequence

from .diagnostics import WspError

MIN_TILE = 8  # the smallest tile size tried: a fractal row of the cube unit (docs/tools.md)
# a float output of a candidate with other tile sizes may differ from the file's by the rounding
# of sums taken in another order (and BLAS blocks a product by its shape), through a chain of
# matrix products and online softmaxes: the bound tests/test_mesh_examples.py holds the mesh
# examples' f32 outputs to (2e-5, "through a few matrix products"), in unit roundoffs of the
# output's dtype, of each element plus as much of the largest output for the elements near 0
# (where terms cancel). 32 units, the cpu_sim-vs-ref bound of one attention
# (tests/test_examples_dynamic.py), rejects tp_attention's other key blocks, 1e-5 apart.
REASSOCIATION_UNITS = 336


@dataclasses.dataclass(frozen=True)
class TileConst:
    """A tile size: `name` is how the output names it (the const's name, or `KERNEL PARAM
    (LINE:COL)` for a literal argument, with its file's path when not the main file's),
    `value` the file's, `options` the values tried (the file's first), `span` that of the
    number (what `--apply` rewrites; its `file` the file that holds it). `kernel` and `param`
    are the call's for a literal argument, empty for a const."""

    name: str
    value: int
    options: tuple
    span: Any
    kernel: str = ""
    param: str = ""
    note: str = ""  # the values left out, and why, when others are searched

    @property
    def file(self) -> str:
        return self.span.file

    @property
    def argument(self) -> bool:
        return bool(self.kernel)

    def line(self, value: int, main: str) -> str:
        """The source line `--apply` changes, as printed: `const RB = 32  // was 8`, with where
        it is when not a const of the main file."""
        where = f"{self.file}:{self.span.line}:{self.span.col}"
        if self.argument:
            return f"{self.kernel}[...](..., {self.param} = {value})  // was {self.value}, at {where}"
        text = f"const {self.name} = {value}  // was {self.value}"
        return text if self.file == main else f"{text}, in {self.file}:{self.span.line}"


def _offset(text: str, line: int, col: int) -> int:
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    return starts[line - 1] + col - 1


def with_numbers(text: str, changes: Sequence) -> str:
    """`text` with the number of each (TileConst, value) in `changes` replaced (all of them in
    this text): only those characters change (comments, spacing, everything else kept)."""
    edits = sorted(((_offset(text, c.span.line, c.span.col),
                     _offset(text, c.span.end_line, c.span.end_col), str(v)) for c, v in changes),
                   reverse=True)
    for start, end, number in edits:
        text = text[:start] + number + text[end:]
    return text


def by_file(changes: Sequence) -> dict:
    """The (TileConst, value) pairs of `changes` grouped by the file that holds the number."""
    out: dict = {}
    for c, v in changes:
        out.setdefault(c.file, []).append((c, v))
    return out


def sites(files: Sequence, main: str) -> list:
    """The tile sizes of the parsed files `files` (a module's, the main file `main` first) with
    the file's value only (`options` = (value,)): the consts, in file and declaration order,
    then the literal arguments, in file and source order."""
    from .frontend import ast as A

    decls = [d for f in files for d in f.decls]
    kernels = {d.name.id: d for d in decls if isinstance(d, A.KernelDecl)}
    used = {n.id for d in kernels.values() for p in d.params
            for n in p.walk() if isinstance(n, A.Name)}
    literals = []
    for call in (n for d in decls for n in d.walk() if isinstance(n, A.CallStmt)):
        kernel = kernels.get(call.callee.id)
        if kernel is None:
            continue
        params = {p.name.id: p for p in kernel.params}
        bound = [*zip((p.name.id for p in kernel.params), call.args),
                 *((k.name, k.value) for k in call.kwargs)]
        for name, value in bound:
            if name not in params or not isinstance(params[name].type, A.ConstexprParamType):
                continue
            if isinstance(value, A.Name):
                used.add(value.id)
            elif isinstance(value, A.IntLit) and value.value > 0:
                s = value.span
                where = f"{s.line}:{s.col}" if s.file == main else f"{s.file}:{s.line}:{s.col}"
                literals.append(TileConst(f"{kernel.name.id} {name} ({where})", value.value,
                                          (value.value,), s, kernel.name.id, name))
    consts = [TileConst(d.name.id, d.value.value, (d.value.value,), d.value.span) for d in decls
              if isinstance(d, A.ConstDecl) and d.name.id in used
              and isinstance(d.value, A.IntLit) and d.value.value > 0]
    return consts + literals


def _options(value: int) -> tuple:
    powers = [1 << k for k in range(3, 31) if MIN_TILE <= 1 << k <= 4 * value]
    return tuple(dict.fromkeys([value, *powers]))


def ir_defaults(ir) -> dict:
    return {s.name: s.default for s in ir.syms if s.default is not None}


class _Variants:
    """The module with other values of its tile sizes: each checked, lowered, its tensors'
    shapes compared with the file's and its outputs on `ref` with the file's (the same random
    inputs, seed 0); `meaning(values)` is None when the variant computes the same, else why
    not."""

    def __init__(self, module, schedule: str, bindings: Mapping[str, int], arrays: dict,
                 mesh: Optional[Mapping[str, int]]):
        self.env, self.schedule, self.bindings = module.env, schedule, dict(bindings)
        self.arrays, self.mesh = arrays, mesh
        self.main = self.env.files[0]
        # a file built in Python (`embed/`) has no text to rewrite: its sizes are not searched
        self.texts = {f.path: f.text or self.env.sources.get(f.path, "") for f in self.env.files}
        self.shapes = self._shapes(module.ir)
        self._outputs: Optional[dict] = None
        self.verdicts: dict = {}

    def _shapes(self, ir) -> dict:
        from . import sym

        values = dict(ir_defaults(ir))
        values.update(self.bindings)
        out = {}
        for t in ir.tensors:
            try:
                out[t.name] = (t.dtype, tuple(sym.evaluate(d, values) for d in t.dims))
            except (sym.SymError, KeyError):
                out[t.name] = (t.dtype, tuple(sym.to_str(d) for d in t.dims))
        return out

    def files(self, changes: Sequence) -> tuple[list, dict]:
        """The module's parsed files and their texts with `changes` ((TileConst, value) pairs):
        the files that hold a changed number parsed again from their changed text."""
        from .frontend.parser import parse

        files, sources = list(self.env.files), dict(self.env.sources)
        changed = by_file(changes)
        for i, f in enumerate(files):
            if f.path in changed:
                sources[f.path] = with_numbers(self.texts[f.path], changed[f.path])
                files[i] = parse(sources[f.path], f.path)
        return files, sources

    def module(self, changes: Sequence):
        from . import driver
        from .api import Module

        return Module(driver.check_sources(*self.files(changes)))

    def _run(self, module) -> dict:
        prog = module.compile(target="ref", schedule=self.schedule, mesh=self.mesh)
        return prog.run(bind=self.bindings, random_inputs=0, **self.arrays)

    def meaning(self, changes: tuple) -> Optional[str]:
        """None when the module with `changes` declares the same tensors and computes the same
        outputs as the file's; else the reason, naming the sizes."""
        from .dtypes import kind_of

        key = tuple((c.name, v) for c, v in changes)
        if key in self.verdicts:
            return self.verdicts[key]
        what = ", ".join(f"{c.name} = {v}" for c, v in changes)
        try:
            variant = self.module(changes)
            shapes = self._shapes(variant.ir)
            reason = next((f"{what} changes tensor `{n}` ({s[1]} for {self.shapes[n][1]})"
                           for n, s in shapes.items() if self.shapes.get(n) != s), None)
            if reason is None:
                if self._outputs is None:
                    from .api import Module

                    self._outputs = self._run(Module(self.env))
                got = self._run(variant)
                dtypes = {t.name: t.dtype for t in variant.ir.tensors}
                for name, want in self._outputs.items():
                    if not _same(got[name], want, dtypes[name], kind_of(dtypes[name])):
                        reason = f"{what} changes output `{name}`"
                        break
        except WspError as err:
            reason = f"{what}: {err.diagnostics[0].message}"
        self.verdicts[key] = reason
        return reason


def _same(got, want, dtype: str, kind: str) -> bool:
    """Integer and bool outputs equal; float ones within the reassociation bound."""
    import numpy as np

    from .dtypes import numpy_dtype, to_compute

    if kind != "float":
        return got.shape == want.shape and np.array_equal(got, want)
    a = np.asarray(to_compute(got, dtype), np.float64)
    e = np.asarray(to_compute(want, dtype), np.float64)
    if a.shape != e.shape:
        return False
    unit = 2.0 ** -8 if dtype == "bf16" else float(np.finfo(numpy_dtype(dtype)).eps) / 2
    finite = np.isfinite(e)
    scale = float(np.abs(e[finite]).max()) if finite.any() else 0.0
    bound = REASSOCIATION_UNITS * unit * (np.abs(e) + scale)
    with np.errstate(invalid="ignore"):
        ok = (a == e) | (np.isnan(a) & np.isnan(e)) | (np.abs(a - e) <= bound)
    return bool(ok.all())


RUN_TIME = "the call's views would fit it only at run time"


def _check_key(c) -> tuple:
    from . import sym

    return (c.span.file, c.span.line, c.check.op, sym.to_str(c.check.lhs))


def _holds(check) -> bool:
    """`lhs <= rhs` proven with a `min` of `lhs` (a term of positive coefficient) replaced by
    one of its arguments, an upper bound of it: the checker's intervals do not see that
    `min(R, t * 8 + 8) - t * 8 <= 8`, and `t * 8 + 8 - t * 8` is 8."""
    from . import sym

    lhs = check.lhs
    if check.op != "<=" or not isinstance(lhs, sym.Poly):
        return False
    for mono, coef in lhs.terms:
        if coef > 0 and len(mono) == 1 and mono[0][1] == 1 and isinstance(mono[0][0], sym.Min):
            rest = sym.sub(lhs, sym.mul(coef, mono[0][0]))
            if any(sym.prove_le(sym.add(rest, sym.mul(coef, a)), check.rhs)
                   for a in mono[0][0].args):
                return True
    return False


def _unproven(file_checks: Sequence, variant_checks: Sequence):
    """The first run-time check of a variant that the file's own checks do not imply (None if
    every one is): the same check, one of the same expression against a constant bound no
    tighter (`n <= 128` where the file checks `n <= 64`), or one `_holds` proves."""
    from . import sym

    have: dict = {}
    for c in file_checks:
        have.setdefault(_check_key(c), []).append(c.check.rhs)

    def implied(c) -> bool:
        new = sym.to_str(c.check.rhs)
        for rhs in have.get(_check_key(c), ()):
            if sym.to_str(rhs) == new:
                return True
            if not (sym.free_vars(rhs) or sym.free_vars(c.check.rhs)):
                old, bound = sym.evaluate(rhs, {}), sym.evaluate(c.check.rhs, {})
                if (c.check.op == "<=" and bound >= old) or (c.check.op == ">=" and bound <= old):
                    return True
        return False

    return next((c for c in variant_checks if not implied(c) and not _holds(c.check)), None)


def tile_consts(variants: _Variants) -> tuple[list, dict]:
    """The tile sizes searched (each with the values that check and keep every tensor's
    shape) and those with no other such value (name -> why: the tensor a value sizes, else the
    first value's error). The sizes of a file without text (built in Python) are not searched.

    A literal argument's value must also fit the call's views wherever the file's does: a
    variant with a run-time check the file's checks do not imply is dropped. Nothing ties the
    views to the literal (`attn_tile[b, h](q = Q[b, h, 0:n, :], ..., R = 64)`, n read at run
    time), so a smaller tile would be right for the data tried and wrong for another run's; a
    const is written into its views' bounds too (`X[t * RB : t * RB + RB]`), so its own checks
    change with it and are not compared."""
    searched, changing = [], {}
    files = [f for f in variants.env.files if variants.texts[f.path]]
    for site in sites(files, variants.main.path) if variants.texts[variants.main.path] else ():
        const = dataclasses.replace(site, options=_options(site.value))
        keep, left = [const.value], {}  # left: why -> the values left out for it
        for v in const.options[1:]:
            try:  # a value that does not check fails whatever the schedule: not tried
                variant = variants.module([(const, v)])
                shapes = variants._shapes(variant.ir)
            except WspError as err:
                left.setdefault(err.diagnostics[0].message, []).append(v)
                continue
            tensor = next((n for n, s in shapes.items() if variants.shapes.get(n) != s), None)
            unproven = (_unproven(variants.env.checks, variant.env.checks)
                        if const.argument and tensor is None else None)
            if tensor is not None:
                left.setdefault(f"sizes tensor `{tensor}`", []).append(v)
            elif unproven is not None:
                left.setdefault(RUN_TIME, []).append(v)
            else:
                keep.append(v)
        if len(keep) > 1:
            note = "; ".join(f"not {', '.join(map(str, vs))}: "
                             + (why.replace(" it ", " them ") if len(vs) > 1 else why)
                             for why, vs in left.items())
            searched.append(dataclasses.replace(const, options=tuple(keep), note=note))
        else:  # why not: a tensor it sizes, else the first value's reason
            sizes = next((why for why in left if why.startswith("sizes tensor")), None)
            first = next(((why, vs[0]) for why, vs in left.items()), None)
            changing[const.name] = (sizes or (f"{const.name} = {first[1]}: {first[0]}" if first
                                              else "no other value"))
    return searched, changing


# ---------------------------------------------------------------------------------------------
# --apply: the winner's numbers written into the files that hold them


def rewritten(main: str, changes: Sequence, appended: str = "") -> dict:
    """The new text of each file `--apply` writes (path -> (old, new)): the main file `main`
    with `appended` after its text (after a blank line), and every file holding a number of
    `changes` with those numbers replaced (read from disk, where the search read them). A file
    `wspc fmt --check` passed is laid out again by `wspc fmt` (a number of another width moves
    the comments aligned with it), so it still passes; another file keeps every other byte."""
    from . import driver

    changed = by_file(changes)
    out = {}
    for path in dict.fromkeys([*changed, main]):
        old = driver.read_source(path)
        new = with_numbers(old, changed.get(path, ()))
        if path == main and appended:
            head = new if not new or new.endswith("\n") else new + "\n"
            new = head + ("\n" if head else "") + appended
        try:
            if driver.format_text(old, path) == old:
                new = driver.format_text(new, path)
        except WspError:
            pass  # the file does not parse as it is: no layout to keep (the check says why)
        out[path] = (old, new)
    return out


def check_rewritten(main: str, texts: Mapping[str, str]) -> None:
    """Check the module of the file `main` with the files of `texts` (path -> new text) in
    place of those on disk (a `WspError` when it does not check)."""
    from . import driver
    from .frontend.parser import parse

    env = driver.check_file(main)
    files = [parse(texts[f.path], f.path) if f.path in texts else f for f in env.files]
    driver.check_sources(files, {**env.sources, **texts})
