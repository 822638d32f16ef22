"""`wspc tune` and `ptowsp.tune`: search a module's schedules on the cycle model
(docs/tools.md, "wspc tune").

A schedule is a point of a product of *dimensions* (the axis transforms, the dispatch policy and
count, streams and their key, timing, the task window), each a list of combinator texts whose
option 0 is what the given schedule says. `search` walks that product: every point in a fixed
order when the product fits the budget, else a greedy coordinate descent (each dimension in
turn, every option with the others held) seeded by `random.Random(seed)` for the order of the
dimensions after the first round and for the random points tried once the descent stops
improving. The given schedule is candidate 0, so the best is never worse than it.

A batch of candidates is evaluated at once: each candidate becomes a `schedule` declaration
parsed as a file of its own (`<tune candidate K>`) and added to the module, the module is checked,
lowered and built for cpu_sim once (cpu_sim emits every schedule), and each candidate's
schedule is replayed on the cycle model (`Program.simulate`). A candidate whose declaration
fails to check or lower (a key the policy refuses, a transform of a loop that cannot take it)
is skipped: its diagnostics name its file. `pto_wsp.auto_schedule` runs the same `search` over
its `SearchSpace`.

Tile sizes are more dimensions: a *tile const* of the main file (a `const` that sizes a kernel's
tiles or is passed to a `Constexpr`) takes other powers of two, in a copy of the file's text
with only that number changed. A value is kept only where the module means the same: every
tensor's shape unchanged (checked for each value before the search) and the outputs on `ref`
those of the file's sizes on the same random inputs (checked for each combination the search
reaches, `_Variants.meaning`); a combination that fails is a failed candidate. `--apply` writes
the winner's numbers into the const lines (docs/tools.md, "Tile sizes").
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from .diagnostics import InternalError, WspError
from .progress import phase

DEFAULT_BUDGET = 48  # candidates simulated when neither a budget nor seconds is given
BATCH = 16  # points evaluated together when the whole space is tried (one build each)
_TRANSFORMS = ("split", "tile", "reorder", "fuse_axes", "decompose")
_CANDIDATE = "<tune candidate {}>"


# ---------------------------------------------------------------------------------------------
# The search: a product of dimensions, a budget, a seed


def search(sizes: Sequence[int], evaluate: Callable[[list], list], budget: int, seed: int = 0,
           deadline: Optional[float] = None) -> list:
    """The points tried, in order, as (point, score) pairs; a point is a tuple of option
    indices (point 0 = all zeros, always tried first), a score a number (lower is better) or
    None (the point failed). `evaluate(points)` scores a batch. At most `budget` points are
    tried; none is started after `deadline` (a `time.monotonic()` value)."""
    total = 1
    for n in sizes:
        total *= n
    seen: dict[tuple, Any] = {}
    order: list = []

    def run(points: list) -> None:
        points = [p for p in dict.fromkeys(points) if p not in seen][:budget - len(order)]
        if not points or (deadline is not None and order and time.monotonic() > deadline):
            return
        for p, score in zip(points, evaluate(points)):
            seen[p] = score
            order.append((p, score))

    def left() -> bool:
        return len(order) < budget and (deadline is None or time.monotonic() <= deadline)

    origin = tuple(0 for _ in sizes)
    if total <= budget:  # small: all of it, in a fixed order, `BATCH` points at a time
        everything = list(itertools.product(*(range(n) for n in sizes)))
        for i in range(0, len(everything), BATCH):
            if not left():
                break
            run(everything[i:i + BATCH])
        return order
    rng = random.Random(seed)
    run([origin])

    def score(p) -> float:
        s = seen.get(p)
        return float("inf") if s is None else s

    current = origin
    dims = list(range(len(sizes)))
    first = True
    while left():
        improved = False
        for d in (dims if first else rng.sample(dims, len(dims))):
            if not left():
                break
            run([current[:d] + (o,) + current[d + 1:] for o in range(sizes[d])])
            best = min((current[:d] + (o,) + current[d + 1:] for o in range(sizes[d])), key=score)
            if score(best) < score(current):
                current, improved = best, True
        first = False
        if improved:
            continue
        # a local minimum: a few random points not tried yet; the best of them, if better,
        # starts the descent again
        fresh = []
        for _ in range(64):
            p = tuple(rng.randrange(n) for n in sizes)
            if p not in seen and p not in fresh:
                fresh.append(p)
            if len(fresh) == 4:
                break
        if not fresh:
            break
        run(fresh)
        best = min(fresh, key=score)
        if score(best) < score(current):
            current = best
    return order


# ---------------------------------------------------------------------------------------------
# The dimensions of a schedule


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One axis of the search: its name and its options, each a combinator chain's text
    (`.dispatch(work_steal(4))`, or "" for none); option 0 is the given schedule's."""

    name: str
    options: tuple


def _chain(combinators) -> str:
    from .frontend.printer import expr_str

    return "".join(f".{c.name.id}(" + ", ".join(
        [expr_str(a) for a in c.args] + [expr_str(k) for k in c.kwargs]) + ")"
        for c in combinators)


def _loops(workload) -> list:
    """The workload's loops, outermost first: (variables, has a loop nested in it)."""
    from .frontend import ast as A

    out = []
    for top in workload.body:
        for s in top.walk():
            if isinstance(s, A.ForLoop):
                nested = any(isinstance(x, A.ForLoop) for b in s.body for x in b.walk())
                out.append((tuple(v.id for v in s.vars), nested))
    return out


def dimensions(decl, workload, dispatchers: int) -> list:
    """The dimensions of the search around schedule `decl` of `workload`, for a machine of
    `dispatchers` dispatchers (no candidate asks for more)."""
    given: dict[str, list] = {"transforms": [], "dispatch": [], "streams": [], "timing": [],
                              "task_graph": [], "other": []}
    for c in decl.combinators:
        name = c.name.id
        slot = ("transforms" if name in _TRANSFORMS else "streams" if name == "stream_by"
                else name if name in given else "other")
        given[slot].append(c)
    loops = _loops(workload)
    variables = [v for vs, _ in loops for v in vs]
    outer = variables[0] if variables else None
    counts = sorted({n for n in (1, 2, 4, 8) if n <= dispatchers} | {dispatchers})

    transforms = ["", *(f".reorder({', '.join(reversed(vs))})" for vs, _ in loops if len(vs) > 1)]
    transforms += [f".tile({vs[0]}, {vs[1]}, 2, 2)" for vs, _ in loops if len(vs) > 1]
    for (outer_vs, nested), (inner_vs, _) in zip(loops, loops[1:]):
        if nested:  # the loop inside may be ragged: group the outer iterations by its length
            transforms += [f".reorder({inner_vs[0]}, {outer_vs[-1]})",
                           f".decompose({inner_vs[0]}, bucket(4))",
                           f".decompose({inner_vs[0]}, pow2_bucket)"]
    dispatch = [f".dispatch(round_robin({n}))" for n in counts]
    dispatch += [f".dispatch(work_steal({n}))" for n in counts if n > 1]
    if outer is not None:
        dispatch += [f".dispatch(affinity({outer}, n = {dispatchers}))",
                     f".dispatch(hash({outer}, n = {dispatchers}))"]
    streams = ["", ".streams(2)", ".streams(4)"]
    if variables:
        inner = variables[-1]
        streams += [f".streams(4).stream_by({inner} % 4)", f".streams(4).stream_by({outer} % 4)"]
    timing = ["", ".timing(batched(4))", ".timing(batched(16))", ".timing(interleaved(4))"]
    windows = ["", ".task_graph(window = 64, mode = stall)",
               ".task_graph(window = 1024, mode = stall)"]
    graph = given["task_graph"]
    knobs = any(k.name not in ("window", "unit", "mode") for c in graph for k in c.kwargs)

    def dim(name: str, options: list, keep: bool = False) -> Dimension:
        first = _chain(given[name])
        return Dimension(name, (first,) if keep else tuple(dict.fromkeys([first, *options])))

    return [dim("transforms", transforms), dim("dispatch", dispatch), dim("streams", streams),
            dim("timing", timing), dim("task_graph", windows, keep=knobs),
            dim("other", [], keep=True)]


# ---------------------------------------------------------------------------------------------
# Tile sizes: the module's consts that size kernel tiles, as more dimensions of the search

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
    """A module-level `const NAME = N` of the main file that reaches a kernel's tile or
    `Constexpr` parameter: `value` is the file's, `options` the values tried (the file's first),
    `span` that of the number (what `--apply` rewrites)."""

    name: str
    value: int
    options: tuple
    span: Any


def _offset(text: str, line: int, col: int) -> int:
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    return starts[line - 1] + col - 1


def with_consts(text: str, changes: Sequence) -> str:
    """`text` with the number of each (TileConst, value) in `changes` replaced: only those
    characters change (comments, spacing, everything else kept)."""
    edits = sorted(((_offset(text, c.span.line, c.span.col),
                     _offset(text, c.span.end_line, c.span.end_col), str(v)) for c, v in changes),
                   reverse=True)
    for start, end, number in edits:
        text = text[:start] + number + text[end:]
    return text


def _tile_const_names(main) -> list:
    """The int-literal consts of the file `main` named in a kernel's parameter types (its tile
    dimensions) or passed whole to a `Constexpr` parameter by a call."""
    from .frontend import ast as A

    kernels = {d.name.id: d for d in main.decls if isinstance(d, A.KernelDecl)}
    used = {n.id for d in kernels.values() for p in d.params
            for n in p.walk() if isinstance(n, A.Name)}
    for call in (n for d in main.decls for n in d.walk() if isinstance(n, A.CallStmt)):
        kernel = kernels.get(call.callee.id)
        if kernel is None:
            continue
        params = {p.name.id: p for p in kernel.params}
        bound = [*zip((p.name.id for p in kernel.params), call.args),
                 *((k.name, k.value) for k in call.kwargs)]
        used |= {value.id for name, value in bound if isinstance(value, A.Name)
                 and name in params and isinstance(params[name].type, A.ConstexprParamType)}
    return [d for d in main.decls if isinstance(d, A.ConstDecl) and d.name.id in used
            and isinstance(d.value, A.IntLit) and d.value.value > 0]


def _options(value: int) -> tuple:
    powers = [1 << k for k in range(3, 31) if MIN_TILE <= 1 << k <= 4 * value]
    return tuple(dict.fromkeys([value, *powers]))


class _Variants:
    """The module with other values of its tile consts: each checked, lowered, its tensors'
    shapes compared with the file's and its outputs on `ref` with the file's (the same random
    inputs, seed 0); `meaning(values)` is None when the variant computes the same, else why
    not."""

    def __init__(self, module, schedule: str, bindings: Mapping[str, int], arrays: dict,
                 mesh: Optional[Mapping[str, int]]):
        self.env, self.schedule, self.bindings = module.env, schedule, dict(bindings)
        self.arrays, self.mesh = arrays, mesh
        self.main = self.env.files[0]
        # a module built in Python (`embed/`) has no text to rewrite: its sizes are not searched
        self.text = self.main.text or self.env.sources.get(self.main.path, "")
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

    def file(self, changes: Sequence):
        """The main file's text and parse with `changes` ((TileConst, value) pairs)."""
        from .frontend.parser import parse

        text = with_consts(self.text, changes)
        return text, parse(text, self.main.path)

    def module(self, changes: Sequence):
        from . import driver
        from .api import Module

        text, main = self.file(changes)
        sources = {**self.env.sources, self.main.path: text}
        return Module(driver.check_sources([main, *self.env.files[1:]], sources))

    def _run(self, module) -> dict:
        prog = module.compile(target="ref", schedule=self.schedule, mesh=self.mesh)
        return prog.run(bind=self.bindings, random_inputs=0, **self.arrays)

    def meaning(self, changes: tuple) -> Optional[str]:
        """None when the module with `changes` declares the same tensors and computes the same
        outputs as the file's; else the reason, naming the consts."""
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


def tile_consts(variants: _Variants) -> tuple[list, dict]:
    """The tile consts searched (each with the values that check and keep every tensor's
    shape) and the consts with no other such value (name -> why: the tensor a value sizes,
    else the first value's error)."""
    searched, changing = [], {}
    for decl in (_tile_const_names(variants.main) if variants.text else ()):
        const = TileConst(decl.name.id, decl.value.value, _options(decl.value.value),
                          decl.value.span)
        keep, moved, failed = [const.value], None, None
        for v in const.options[1:]:
            try:  # a value that does not check fails whatever the schedule: not tried
                variant = variants.module([(const, v)])
                shapes = variants._shapes(variant.ir)
            except WspError as err:
                failed = failed or f"{const.name} = {v}: {err.diagnostics[0].message}"
                continue
            tensor = next((n for n, s in shapes.items() if variants.shapes.get(n) != s), None)
            if tensor is None:
                keep.append(v)
            else:
                moved = moved or f"sizes tensor `{tensor}`"
        if len(keep) > 1:
            searched.append(dataclasses.replace(const, options=tuple(keep)))
        else:
            changing[const.name] = moved or failed or "no other value"
    return searched, changing


# ---------------------------------------------------------------------------------------------
# Candidates and their results


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A schedule tried: its combinator chain, its modelled cycles (None when it failed), why
    it failed (the first diagnostic's message), and the tile consts it changes: (name, value,
    the file's value) triples, empty for the file's sizes."""

    chain: str
    cycles: Optional[int]
    error: Optional[str] = None
    consts: tuple = ()

    def const_lines(self) -> list:
        """`const BLK = 128  // was 64` for each const changed."""
        return [f"const {n} = {v}  // was {was}" for n, v, was in self.consts]

    def label(self) -> str:
        """The chain, and the consts changed (`[BLK = 128]`)."""
        text = self.chain or "(no combinators)"
        if self.consts:
            text += "  [" + ", ".join(f"{n} = {v}" for n, v, _ in self.consts) + "]"
        return text

    def schedule_text(self, name: str, call: str) -> str:
        """The `.wsp` declaration `schedule NAME = CALL` with this chain, one combinator a line."""
        lines = [f"schedule {name} = {call}"]
        lines += [f"    .{part}" for part in _split_chain(self.chain)]
        return "\n".join(lines)


def _split_chain(chain: str) -> list:
    """`.a(x).b(y)` as [`a(x)`, `b(y)`] (a `.` inside parentheses stays)."""
    parts, depth, cur = [], 0, ""
    for ch in chain:
        if ch == "." and depth == 0:
            if cur:
                parts.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    if cur:
        parts.append(cur)
    return parts


@dataclasses.dataclass
class TuneResult:
    """What `tune` found. `candidates` are in the order tried (the given schedule first);
    `best` the fewest cycles (the first of equals); `random_inputs` the tensors the model
    read filled with random data (seed 0) because none was given; `deterministic` is false
    when a time budget (`seconds`) cut the search."""

    module: str
    schedule: str
    call: str
    candidates: list
    budget: Optional[int]
    seconds: Optional[float]
    seed: int
    random_inputs: tuple = ()
    tile_consts: tuple = ()  # TileConsts searched (their `options`: the values tried)
    meaning_consts: Mapping = dataclasses.field(default_factory=dict)  # name -> why not searched
    meaning_rejected: tuple = ()  # why each combination of tile sizes tried was rejected

    @property
    def given(self) -> Candidate:
        return self.candidates[0]

    @property
    def best(self) -> Candidate:
        ok = [c for c in self.candidates if c.cycles is not None]
        return min(ok, key=lambda c: c.cycles)

    @property
    def deterministic(self) -> bool:
        return self.seconds is None

    @property
    def speedup(self) -> float:
        return self.given.cycles / self.best.cycles if self.best.cycles else 1.0

    def ranked(self, n: int = 5) -> list:
        """The `n` best candidates that simulated, fewest cycles first (ties: order tried)."""
        ok = [c for c in self.candidates if c.cycles is not None]
        return sorted(ok, key=lambda c: c.cycles)[:n]

    def schedule_text(self, name: str = "tuned") -> str:
        return self.best.schedule_text(name, self.call)

    @property
    def consts(self) -> dict:
        """The winner's tile consts that differ from the file's: name -> value."""
        return {n: v for n, v, _ in self.best.consts}


# ---------------------------------------------------------------------------------------------
# The evaluation of a batch


class _Evaluator:
    """Scores candidate chains: a batch is added to the module as schedule declarations,
    built once, and each is simulated."""

    def __init__(self, env, decl, dims: list, bindings: Mapping[str, int], arrays: dict,
                 opt_level: Optional[int], machine: Any, mesh: Optional[Mapping[str, int]],
                 consts: Sequence = (), variants: Optional[_Variants] = None):
        self.env, self.decl, self.dims = env, decl, dims
        self.consts, self.variants = list(consts), variants
        self.bindings, self.arrays, self.opt_level = dict(bindings), arrays, opt_level
        self.machine, self.mesh = machine, mesh
        taken = set(env.names)
        self.prefix = next(p for p in (f"tune_{i}_" for i in itertools.count())
                           if not any(n.startswith(p) for n in taken))
        from .frontend.printer import expr_str

        self.call = f"{decl.workload.id}(" + ", ".join(
            [expr_str(a) for a in decl.args] + [expr_str(k) for k in decl.kwargs]) + ")"
        self.tried: list = []  # Candidates in order
        self.batches = 0

    def chain(self, point: tuple) -> str:
        return "".join(d.options[i] for d, i in zip(self.dims, point))

    def changes(self, point: tuple) -> tuple:
        """The (TileConst, value) pairs of `point` that differ from the file's."""
        tail = point[len(self.dims):]
        return tuple((c, c.options[i]) for c, i in zip(self.consts, tail) if i)

    def __call__(self, points: list) -> list:
        """Each point's cycles (None: failed). Points with the same tile sizes are built
        together; sizes that change the module's meaning fail without a build."""
        groups: dict[tuple, list] = {}
        for k, p in enumerate(points):
            groups.setdefault(self.changes(p), []).append(k)
        results: dict[int, Candidate] = {}
        start = len(self.tried)
        for changes, ks in groups.items():
            triples = tuple((c.name, v, c.value) for c, v in changes)
            chains = {start + k: self.chain(points[k]) for k in ks}
            reason = self.variants.meaning(changes) if changes else None
            if reason is not None:
                results.update({n: Candidate(c, None, reason, triples)
                                for n, c in chains.items()})
                continue
            results.update(self._batch(chains, changes, triples))
        out = []
        for n in range(start, start + len(points)):
            self.tried.append(results[n])
            out.append(results[n].cycles)
        return out

    def _batch(self, chains: dict, changes: tuple, triples: tuple) -> dict:
        """Candidates numbered as in `chains` (number -> chain) with the tile sizes `changes`,
        built as one module and simulated one by one."""
        from . import driver
        from .api import Program
        from .frontend.parser import parse

        texts = {_CANDIDATE.format(n): f"schedule {self.prefix}{n} = {self.call}{c}\n"
                 for n, c in chains.items()}
        errors: dict[str, str] = {}
        files = list(self.env.files)
        sources = dict(self.env.sources)
        if changes:
            sources[files[0].path], files[0] = self.variants.file(changes)
        for file, text in texts.items():
            try:
                decls = parse(text, file).decls
            except WspError as err:
                errors[file] = err.diagnostics[0].message
                continue
            sources[file] = text
            files[0] = dataclasses.replace(files[0], decls=files[0].decls + tuple(decls))
        compiled = None
        for _ in range(len(texts) + 1):  # each failing round drops at least one candidate
            try:
                env = driver.check_sources(files, sources)
                ir = driver.lower(env)
                compiled = driver.compile_ir(ir, driver.target("cpu_sim"), self.decl.name.id,
                                             self.opt_level, {}, mesh=self.mesh,
                                             bind=self.bindings)
                break
            except WspError as err:
                bad = {d.span.file for d in err.diagnostics if d.span.file in texts}
                if not bad and changes:  # these tile sizes do not build: every candidate fails
                    errors.update({f: err.diagnostics[0].message for f in texts})
                    break
                if not bad:
                    raise  # the module itself: not a candidate's fault
                for d in err.diagnostics:
                    errors.setdefault(d.span.file, d.message)
                files[0] = dataclasses.replace(files[0], decls=tuple(
                    d for d in files[0].decls if d.span.file not in bad))
        self.batches += 1
        out = {}
        for file, (n, chain) in zip(texts, chains.items()):
            if file in errors or compiled is None:
                cand = Candidate(chain, None, errors.get(file, "did not build"), triples)
            else:
                prog = Program(compiled.module, f"{self.prefix}{n}", "cpu_sim",
                               compiled.runnable, compiled.compile_time_ms)
                prog.machine = self.machine
                try:
                    stats = prog.simulate(bind=self.bindings, **self.arrays)
                    cand = Candidate(chain, int(stats.total_cycles), None, triples)
                except WspError as err:
                    cand = Candidate(chain, None, err.diagnostics[0].message, triples)
            out[n] = cand
        return out


def _data_inputs(ir, schedule: str, arrays: Mapping[str, Any], bindings: Mapping[str, int],
                 seed: int = 0) -> tuple[dict, tuple]:
    """The arrays the model needs for `schedule`: those given, and random data (of each
    tensor's dtype and shape) for a tensor whose elements decide the task space (or, when the
    kernels must run to produce such data, every input) that was not given."""
    import numpy as np

    from . import sym
    from .api import _random_array
    from .ir import visit as V

    body = ir.schedule(schedule).body
    read, produced = V.read_tensors(body), V.written_tensors(body)
    given = {t.name for t in ir.tensors if t.kind in ("input", "inout")}  # others: no array
    needed = given if read & produced else (set(read) - set(produced)) & given
    rng = np.random.default_rng(seed)
    out, filled = dict(arrays), []
    values = dict(ir_defaults(ir))
    values.update(bindings)
    for t in ir.tensors:
        if t.name in needed and t.name not in out:
            try:
                shape = tuple(sym.evaluate(d, values) for d in t.dims)
            except (sym.SymError, KeyError):
                continue  # an unbound sym: simulate reports it
            out[t.name] = _random_array(rng, t.dtype, shape)
            filled.append(t.name)
    return out, tuple(filled)


def ir_defaults(ir) -> dict:
    return {s.name: s.default for s in ir.syms if s.default is not None}


def tune(module, schedule: Optional[str] = None, budget: Optional[int] = None,
         seconds: Optional[float] = None, bindings: Optional[Mapping[str, int]] = None,
         inputs: Optional[Mapping[str, Any]] = None, seed: int = 0,
         opt_level: Optional[int] = None, machine: Any = None,
         mesh: Optional[Mapping[str, int]] = None, tile_sizes: bool = True) -> TuneResult:
    """Search schedules of `module` (a `ptowsp.api.Module`) around `schedule` (default: main or
    the only one) on the cycle model: `budget` candidates (default 48), or as many as fit in
    `seconds` (then the answer depends on the machine's speed). `bindings` binds syms,
    `inputs` gives arrays for tensors whose data decide the task space (random data stands
    in for those not given). With `tile_sizes`, the main file's consts that size kernel tiles
    are searched too, each value kept only where the module computes the same (`TileConst`).
    The same arguments give the same `TuneResult`."""
    from . import driver

    env = module.env
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                               or budget < 1):
        raise ValueError(f"budget must be a positive number of candidates, not {budget!r}")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not seconds > 0):
        raise ValueError(f"seconds must be a positive number, not {seconds!r}")
    if budget is not None and seconds is not None:
        raise ValueError("give a budget in candidates or in seconds, not both")
    ir = module.ir
    name = driver.choose_schedule(ir, schedule)
    decl = env.schedules[name]
    from .backends.machine import load_machine

    dispatchers = (machine or load_machine()).dispatchers
    dims = dimensions(decl, env.workloads[decl.workload.id], dispatchers)
    arrays, filled = _data_inputs(ir, name, inputs or {}, bindings or {}, 0)
    variants, consts, changing = None, [], {}
    if tile_sizes:
        variants = _Variants(module, name, bindings or {}, arrays, mesh)
        consts, changing = tile_consts(variants)
    evaluate = _Evaluator(env, decl, dims, bindings or {}, arrays, opt_level, machine, mesh,
                          consts, variants)
    deadline = None if seconds is None else time.monotonic() + float(seconds)
    limit = budget if budget is not None else (10 ** 9 if seconds is not None else DEFAULT_BUDGET)
    count = f"of {limit}" if seconds is None else f"in about {seconds:g} s"
    with phase("tuning", lambda: f"{len(evaluate.tried)} candidates simulated {count}"):
        search([len(d.options) for d in dims] + [len(c.options) for c in consts], evaluate,
               limit, seed, deadline)
    given = evaluate.tried[0]
    if given.cycles is None:  # the given schedule itself failed: the model's own report
        prog = module.compile(schedule=name, opt_level=opt_level, mesh=mesh)
        prog.machine = machine
        prog.simulate(bind=bindings or {}, **arrays)  # raises the user's error
        raise InternalError("tune", f"schedule `{name}` simulates alone and not among the "
                            f"candidates: {given.error}")
    rejected = tuple(r for r in (variants.verdicts.values() if variants else ()) if r)
    return TuneResult(env.name, name, evaluate.call, evaluate.tried, budget if seconds is None
                      else None, seconds, seed, filled, tuple(consts), changing, rejected)


class Job:
    """`wspc tune`'s work on a file: the options checked (each error at the option naming it),
    the module checked, and, for `--apply`, the new name free; `module` is the lowered module
    (the command line's names are checked against it), `search` runs `tune`."""

    def __init__(self, file: str, budget: Optional[int], seconds: Optional[float],
                 new_name: Optional[str], machine_file: Optional[str]):
        from . import driver
        from .api import Module
        from .diagnostics import Diagnostic
        from .spans import Span

        def at(where: str) -> Span:
            return Span(where, 0, 0, 0, 0)

        if budget is not None and seconds is not None:
            raise WspError([Diagnostic(at(f"--budget {budget}"), "tune",
                                       "give --budget or --seconds, not both",
                                       "--budget N is deterministic; --seconds S depends on the "
                                       "host's speed")])
        if budget is not None and budget < 1:
            raise WspError([Diagnostic(at(f"--budget {budget}"), "tune",
                                       "the budget must be at least 1 candidate (the given "
                                       "schedule)")])
        if seconds is not None and not seconds > 0:
            raise WspError([Diagnostic(at(f"--seconds {seconds:g}"), "tune",
                                       "the time budget must be a positive number of seconds")])
        self.budget, self.seconds = budget, seconds
        self.machine = None
        if machine_file:
            from .backends.machine import load_machine

            self.machine = load_machine(machine_file)
        self.checked = Module(driver.check_file(file))
        env = self.checked.env
        if new_name is not None and new_name in env.names:
            kind = env.kind_of(new_name)
            article = "an" if kind[0] in "aeiou" else "a"
            raise WspError([Diagnostic(at(file), "tune", f"module `{env.name}` already has "
                                       f"{article} {kind} named `{new_name}`, and --apply would "
                                       f"add a schedule `{new_name}`",
                                       "choose another name with --name")])
        self.module = self.checked.ir

    def search(self, schedule: Optional[str], bindings: Mapping[str, int],
               arrays: Mapping[str, Any], seed: int, mesh: Optional[Mapping[str, int]],
               tile_sizes: bool = True):
        return tune(self.checked, schedule, self.budget, self.seconds, bindings, arrays, seed,
                    machine=self.machine, mesh=mesh or None, tile_sizes=tile_sizes)


def report(result: TuneResult, file: str, top: int = 5) -> str:
    """What `wspc tune` prints: the search, the best candidates against the given schedule,
    and the winner as a declaration to paste."""
    given, best = result.given, result.best
    tried = len(result.candidates)
    failed = sum(1 for c in result.candidates if c.cycles is None)
    how = (f"budget {result.budget}, seed {result.seed}" if result.deterministic else
           f"about {result.seconds:g} s, seed {result.seed}: a time budget, so another run "
           "may try more or fewer and answer differently")
    lines = [f"wspc tune: schedule `{result.schedule}` of {file}, on the cycle model",
             f"{tried} candidates ({how}): {tried - failed} simulated, {failed} skipped (they "
             "did not check or could not run)"]
    if result.random_inputs:
        names = ", ".join(f"`{n}`" for n in result.random_inputs)
        lines.append(f"inputs: {names} random (seed 0): their data decide the task space; "
                     "give --input NAME=F.npy to tune on your own")
    for c in result.tile_consts:
        lines.append(f"tile size `{c.name}` (file: {c.value}) searched: "
                     + ", ".join(map(str, c.options)))
    for name, why in result.meaning_consts.items():
        lines.append(f"tile size `{name}` not searched: no other value keeps the meaning ({why})")
    if result.meaning_rejected:
        lines.append(f"{len(result.meaning_rejected)} combinations of tile sizes skipped: they "
                     "change the meaning (" + "; ".join(result.meaning_rejected[:3])
                     + ("; ..." if len(result.meaning_rejected) > 3 else "") + ")")
    lines += ["", f"{'':>5}  {'cycles':>12}  {'vs ' + result.schedule:>10}  schedule"]

    def row(label: str, c: Candidate) -> str:
        ratio = given.cycles / c.cycles if c.cycles else 1.0
        mark = "  (the given schedule)" if c is given and label != "given" else ""
        return f"{label:>5}  {c.cycles:>12}  {ratio:>9.2f}x  {c.label()}{mark}"

    lines.append(row("given", given))
    lines += [row(str(i + 1), c) for i, c in enumerate(result.ranked(top))]
    lines += ["", f"best: {best.cycles} cycles, {result.speedup:.2f}x fewer than "
              f"`{result.schedule}` ({given.cycles})", "", result.schedule_text("tuned")]
    if best.consts:
        lines += ["", "with the tile sizes (--apply changes these lines):", *best.const_lines()]
    return "\n".join(lines)


def apply(result: TuneResult, path, name: str, binds: Sequence[str] = ()) -> str:
    """Add the winner to the file `path` as schedule `name`, after a comment saying where it
    came from, and write the winner's tile sizes into their const lines (the numbers only):
    every other byte of the file kept, the declaration appended, the file replaced atomically,
    in one write (`files.write_atomic`). Returns the new text."""
    from . import driver
    from .files import write_atomic

    with open(path, "rb") as fh:
        old = fh.read()
    if result.best.consts:  # the numbers of the const lines, at their spans in the file
        spans = {c.name: c for c in result.tile_consts}
        old = with_consts(old.decode("utf-8"), [(spans[n], v) for n, v, _ in
                                                result.best.consts]).encode("utf-8")
    how = f"budget {result.budget}" if result.deterministic else f"{result.seconds:g} s"
    given = " ".join(["wspc tune", *binds]) + f" ({how}, seed {result.seed})"
    text = (f"// {given}: {result.best.cycles} modelled cycles, "
            f"`{result.schedule}` {result.given.cycles}\n")
    if result.best.consts:
        text += ("// with " + ", ".join(f"const {n} = {v} (was {was})"
                                        for n, v, was in result.best.consts) + "\n")
    text += result.schedule_text(name) + "\n"
    head = old if not old or old.endswith(b"\n") else old + b"\n"
    new = head + (b"\n" if head else b"") + text.encode("utf-8")
    try:  # the winner checked in the module already: a failure here is wspc's
        driver.check_text(new.decode("utf-8"), str(path))
    except WspError as err:
        raise InternalError("tune", f"the tuned schedule does not check: {err}") from None
    write_atomic(path, new)
    return new.decode("utf-8")
