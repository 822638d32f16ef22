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

Tile sizes are more dimensions (`tile_sizes.py`): a `const` of the module (of the main file or
an imported one) that sizes a kernel's tiles or is passed to a `Constexpr`, and an integer
literal a call passes to a `Constexpr`, takes other powers of two, in a copy of its file's text
with only that number changed. A value is kept only where the module means the same: every
tensor's shape unchanged (checked for each value before the search) and the outputs on `ref`
those of the file's sizes on the same random inputs (checked for each combination the search
reaches, `_Variants.meaning`); a combination that fails is a failed candidate. `--apply` writes
the winner's numbers where they are written, in whichever file (docs/tools.md, "Tile sizes").
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import time
from typing import Any, Callable, Mapping, Optional, Sequence

from .diagnostics import InternalError, WspError
from .progress import phase
from .tile_sizes import _Variants, check_rewritten, ir_defaults, rewritten, tile_consts

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
# Candidates and their results


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A schedule tried: its combinator chain, its modelled cycles (None when it failed), why
    it failed (the first diagnostic's message), and the tile sizes it changes: (name, value,
    the file's value) triples (`TileConst.name`), empty for the file's sizes."""

    chain: str
    cycles: Optional[int]
    error: Optional[str] = None
    consts: tuple = ()

    def label(self) -> str:
        """The chain, and the tile sizes changed (`[BLK = 128, attn_tile R (98:37) = 256]`)."""
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
    main: str = ""  # the main file's path (a tile size elsewhere is printed with its file)
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
        """The winner's tile sizes that differ from the file's: name -> value."""
        return {n: v for n, v, _ in self.best.consts}

    def changes(self) -> list:
        """The winner's tile sizes that differ from the file's: (TileConst, value) pairs."""
        sites = {c.name: c for c in self.tile_consts}
        return [(sites[n], v) for n, v, _ in self.best.consts]

    def const_lines(self) -> list:
        """The lines the winner's tile sizes change, as `TileConst.line` prints them."""
        return [c.line(v, self.main) for c, v in self.changes()]


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
        files, sources = (self.variants.files(changes) if changes else
                          (list(self.env.files), dict(self.env.sources)))
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


def tune(module, schedule: Optional[str] = None, budget: Optional[int] = None,
         seconds: Optional[float] = None, bindings: Optional[Mapping[str, int]] = None,
         inputs: Optional[Mapping[str, Any]] = None, seed: int = 0,
         opt_level: Optional[int] = None, machine: Any = None,
         mesh: Optional[Mapping[str, int]] = None, tile_sizes: bool = True) -> TuneResult:
    """Search schedules of `module` (a `ptowsp.api.Module`) around `schedule` (default: main or
    the only one) on the cycle model: `budget` candidates (default 48), or as many as fit in
    `seconds` (then the answer depends on the machine's speed). `bindings` binds syms,
    `inputs` gives arrays for tensors whose data decide the task space (random data stands
    in for those not given). With `tile_sizes`, the module's tile sizes (its consts that size
    kernel tiles, the literals its calls pass to `Constexpr` parameters: `tile_sizes.py`) are
    searched too, each value kept only where the module computes the same.
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
                      else None, seconds, seed, filled, tuple(consts), env.files[0].path,
                      changing, rejected)


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
        where = "file" if c.file == result.main else c.file
        lines.append(f"tile size `{c.name}` ({where}: {c.value}) searched: "
                     + ", ".join(map(str, c.options)) + (f" ({c.note})" if c.note else ""))
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
        lines += ["", "with the tile sizes (--apply changes these lines):", *result.const_lines()]
    return "\n".join(lines)


def apply(result: TuneResult, path, name: str, binds: Sequence[str] = ()) -> dict:
    """Add the winner to the file `path` as schedule `name`, after a comment saying where it
    came from, and write the winner's tile sizes where they are written: the numbers only, in
    the main file or in the imported file that declares the const (`tile_sizes.rewritten`:
    every other byte kept, or the layout `wspc fmt` gives a file it passed). The new texts are
    checked together first, then each file is replaced atomically (`files.write_atomic`), the
    imported ones before the main file. Returns the texts written (path -> text), in that
    order."""
    from .files import write_atomic

    how = f"budget {result.budget}" if result.deterministic else f"{result.seconds:g} s"
    given = " ".join(["wspc tune", *binds]) + f" ({how}, seed {result.seed})"
    text = (f"// {given}: {result.best.cycles} modelled cycles, "
            f"`{result.schedule}` {result.given.cycles}\n")
    if result.best.consts:
        text += ("// with " + ", ".join(
            f"{c.name} = {v} (was {c.value}" + ("" if c.file == str(path) else f", in {c.file}")
            + ")" for c, v in result.changes()) + "\n")
    text += result.schedule_text(name) + "\n"
    files = rewritten(str(path), result.changes(), text)
    new = {p: t for p, (_, t) in files.items()}
    try:  # the winner checked in the module already: a failure here is wspc's
        check_rewritten(str(path), new)
    except WspError as err:
        raise InternalError("tune", f"the tuned schedule does not check: {err}") from None
    order = [p for p in new if p != str(path)] + [str(path)]
    for p in order:
        write_atomic(p, new[p].encode("utf-8"))
    return {p: new[p] for p in order}
