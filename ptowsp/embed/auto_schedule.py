"""Schedule exploration on the cycle model: the prototype's `pto_wsp.auto_schedule` names
(`SearchSpace`, `AutoScheduler`, `ScheduleConfig`, `ExplorationResult`, `ExplorationSummary`,
`auto_schedule`) with wspc's meaning (docs/python.md, "Exploring schedules").

A `SearchSpace` is a product of option lists: stream counts (and `stream_by` keys), dispatch
policies, timing policies and task windows. `AutoScheduler(workload).explore(space, trials=N)`
applies each configuration it tries to the workload, compiles it for cpu_sim and replays it on
the cycle model (`Program.simulate`, on the data the workload's tensors hold), and picks the
fewest `total_cycles`. The prototype timed real runs; the model is deterministic, so the same
call always gives the same answer and one simulation per configuration is enough.
`find_best` and `auto_schedule` walk the space with `ptowsp.tuning.search`, the search of
`wspc tune` (every configuration in order when the budget covers the space, else a seeded
coordinate descent).
"""

from __future__ import annotations

import dataclasses
import enum
import random
import time
from typing import Any, Optional

from ..diagnostics import WspError
from ..frontend import ast as A
from ..tuning import search
from .errors import CompileError, ScheduleError, from_wsp, user_error
from .schedule import DispatchPolicy, Policy, TaskWindow, TimingPolicy, WindowMode
from .source import here
from .workload import Workload, WorkloadFunction

DISPATCH = ("round_robin", "work_steal", "affinity", "hash", "dispatch_by")
_KEYED = ("affinity", "hash", "dispatch_by")  # the policies that place tasks by a key
TIMING = ("immediate", "batched", "interleaved", "rate_limit")
WINDOW_MODES = ("stall", "abort")
# the combinators a configuration sets: the workload's own are replaced, its others kept
_SET = frozenset({"dispatch", "streams", "stream_by", "timing", "task_graph"})
# the cycle model's fields of a simulation that a result keeps (all deterministic)
_MODEL = ("critical_path_cycles", "serial_cycles", "simulated_us", "stolen", "utilisation",
          "dispatchers")


class DispatchOption(enum.Enum):
    """The prototype's dispatch options; `add_dispatch` takes them or their names."""
    ROUND_ROBIN = "round_robin"
    WORK_STEAL = "work_steal"
    AFFINITY = "affinity"


class TimingOption(enum.Enum):
    """The prototype's timing options; `add_timing` takes them or their names."""
    IMMEDIATE = "immediate"
    BATCHED = "batched"


def _positive(value: Any, what: str, span: A.Span, allow_none: bool = False) -> Optional[int]:
    """`value` as a positive int (None passes when `allow_none`), else a ScheduleError."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise user_error(span, f"{what} must be a positive integer, not {value!r}",
                         cls=ScheduleError)
    return int(value)


def _rate(value: Any, span: A.Span) -> float:
    """A `rate_limit` rate: a positive number of tasks per ms, else a ScheduleError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise user_error(span, "the `rate_limit` rate must be a positive number of tasks per "
                         f"ms, not {value!r}", cls=ScheduleError)
    return value


def _option(value: Any, kind: str, names: tuple, span: A.Span) -> str:
    """An option's name (`"round_robin"`, `DispatchOption.WORK_STEAL`, `WindowMode.STALL`)."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, str) and value.lower() in names:
        return value.lower()
    raise user_error(span, f"{value!r} is not a {kind} option",
                     "the options are " + ", ".join(f"`{n}`" for n in names), cls=ScheduleError)


def _nonempty(values: Any, what: str, span: A.Span) -> list:
    values = list(values) if isinstance(values, (list, tuple, range)) else [values]
    if not values:
        raise user_error(span, f"`{what}` needs at least one option: an empty list leaves no "
                         "configuration to explore", cls=ScheduleError)
    return values


def _key_text(key: Any) -> str:
    return key if isinstance(key, str) else "key"


@dataclasses.dataclass(frozen=True)
class ScheduleConfig:
    """One point of a search space. `streams=None` (the default) adds no `.streams` (tasks in
    no stream); `dispatch_key` is the key of `affinity` / `hash` (None: the workload's
    outermost loop variable); `window=None` adds no `.task_graph`."""

    streams: Optional[int] = None
    dispatch: str = "round_robin"
    dispatch_param: Optional[int] = 4
    timing: str = "immediate"
    timing_param: Any = None
    stream_by: Any = None
    dispatch_key: Any = None
    window: Optional[int] = None
    window_mode: str = "stall"

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __str__(self) -> str:
        """The schedule as `.wsp` combinators (a lambda key shows as `key`)."""
        keyed = self.dispatch in _KEYED
        args = [_key_text(self.dispatch_key)] if keyed and self.dispatch_key is not None else []
        if self.dispatch_param is not None:
            args.append(f"n = {self.dispatch_param}" if keyed else str(self.dispatch_param))
        out = f".dispatch({self.dispatch}({', '.join(args)}))"
        if self.streams is not None:
            out += f".streams({self.streams})"
            if self.stream_by is not None:
                out += f".stream_by({_key_text(self.stream_by)})"
        out += f".timing({self.timing}" + (
            f"({self.timing_param}))" if self.timing_param is not None else ")")
        if self.window is not None:
            out += f".task_graph(window = {self.window}, mode = {self.window_mode})"
        return out

    def apply(self, workload: Any) -> Workload:
        """`workload` scheduled by this configuration: its own dispatch, streams, stream_by,
        timing and task_graph combinators replaced, its axis transforms kept."""
        span = here()
        w = _as_workload(workload, span)
        base = w._with_none()
        base.combinators = tuple(c for c in w.combinators if c.name.id not in _SET)
        name = _option(self.dispatch, "dispatch", DISPATCH, span)
        timing = _option(self.timing, "timing", TIMING, span)
        for unused, why in ((self.stream_by is not None and self.streams is None,
                             "`stream_by` needs a stream count (`streams`)"),
                            (self.dispatch_key is not None and name not in _KEYED,
                             f"`dispatch_key` is for {', '.join(_KEYED)}, not `{name}`"),
                            (self.timing_param is not None and timing == "immediate",
                             "`timing_param` is for a timing policy with a parameter, not "
                             "`immediate`")):
            if unused:
                raise user_error(span, f"this configuration sets what it does not use: {why}",
                                 cls=ScheduleError)
        n = _positive(self.dispatch_param, "a dispatcher count", span, allow_none=True)
        if name in _KEYED:
            key = self.dispatch_key if self.dispatch_key is not None else _outer_variable(w, span)
            policy = getattr(DispatchPolicy, name)(key, n=n)
        else:
            policy = getattr(DispatchPolicy, name)(n)
        out = base.dispatch(policy)
        if self.streams is not None:
            out = out.streams(_positive(self.streams, "a stream count", span))
            if self.stream_by is not None:
                out = out.stream_by(self.stream_by)
        if timing == "immediate":
            out = out.timing(TimingPolicy.immediate)
        elif timing == "rate_limit":
            out = out.timing(TimingPolicy.rate_limit(_rate(self.timing_param, span)))
        else:
            out = out.timing(getattr(TimingPolicy, timing)(
                _positive(self.timing_param, f"the `{timing}` count", span)))
        if self.window is not None:
            mode = _option(self.window_mode, "task window mode", WINDOW_MODES, span)
            out = out.task_graph(window=TaskWindow(_positive(self.window, "a task window", span),
                                                   "tasks", mode))
        return out


def _as_workload(w: Any, span: A.Span) -> Workload:
    if isinstance(w, WorkloadFunction):  # an uncalled `@workload` of no arguments
        w = w()
    if not isinstance(w, Workload):
        raise user_error(span, f"schedules are explored for a workload, not {w!r}",
                         "pass a workload: `AutoScheduler(my_workload())`", cls=ScheduleError)
    return w


def _outer_variable(w: Workload, span: A.Span) -> str:
    """The prototype's default affinity key: the first loop's variable."""
    for top in w.stmts:
        for s in top.walk():
            if isinstance(s, A.ForLoop):
                return s.vars[0].id
    raise user_error(span, "`affinity` without a key places tasks by the workload's outermost "
                     "loop variable, and this workload has no loop",
                     "give the key: `add_dispatch([\"affinity\"], keys=[lambda t: ...])`",
                     cls=ScheduleError)


@dataclasses.dataclass
class ExplorationResult:
    """One configuration tried. `execute_time_ms` is the simulated time (`total_cycles` at the
    modelled machine's clock), `compile_time_ms` the real compile time (not compared: the
    only field that changes between runs); `model` the cycle model's other fields (running.md)."""

    config: ScheduleConfig
    execute_time_ms: float = 0.0
    compile_time_ms: float = dataclasses.field(default=0.0, compare=False)
    task_count: int = 0
    error: Optional[str] = None
    total_cycles: int = 0
    model: dict = dataclasses.field(default_factory=dict)

    @property
    def total_time_ms(self) -> float:
        return self.compile_time_ms + self.execute_time_ms

    @property
    def success(self) -> bool:
        return self.error is None


@dataclasses.dataclass
class ExplorationSummary:
    """All the results of an exploration (in the order tried), the best configuration, and
    the baseline's (`ScheduleConfig()`'s) cycles; `speedup` is baseline / best cycles."""

    results: list = dataclasses.field(default_factory=list)
    best_config: Optional[ScheduleConfig] = None
    best_time_ms: float = float("inf")
    baseline_time_ms: float = 0.0
    speedup: float = 1.0
    best_cycles: int = 0
    baseline_cycles: int = 0

    @property
    def best(self) -> Optional[ExplorationResult]:
        return next((r for r in self.results if r.config == self.best_config and r.success), None)

    def print_summary(self) -> None:
        ok = sum(1 for r in self.results if r.success)
        print("Scheduling exploration (cycle model)")
        print(f"Configurations tried: {len(self.results)} ({ok} simulated)")
        print(f"Baseline: {self.baseline_cycles} cycles ({self.baseline_time_ms:.3f} ms)")
        print(f"Best: {self.best_cycles} cycles ({self.best_time_ms:.3f} ms), "
              f"speedup {self.speedup:.2f}x")
        if self.best_config is not None:
            print(f"Best configuration: {self.best_config}")

    def top_configs(self, n: int = 5) -> list:
        """The `n` best (configuration, simulated ms), fewest cycles first (ties: order tried)."""
        ok = sorted((r for r in self.results if r.success), key=lambda r: r.total_cycles)
        return [(r.config, r.execute_time_ms) for r in ok[:n]]


class SearchSpace:
    """The configurations to explore: every combination of the option lists, numbered in the
    order `enumerate_configs()` gives (stream counts outermost, then stream_by keys, dispatch,
    timing, windows). Each `add_*` replaces that list and returns the space."""

    def __init__(self) -> None:
        self._streams: list = [None]
        self._stream_by: list = [None]
        self._dispatch: list = [("round_robin", 4, None)]
        self._timing: list = [("immediate", None)]
        self._windows: list = [(None, "stall")]

    def add_streams(self, values: Any) -> "SearchSpace":
        """Stream counts to try; None means no `.streams` (tasks in no stream)."""
        span = here()
        self._streams = [_positive(v, "a stream count", span, allow_none=True)
                         for v in _nonempty(values, "add_streams", span)]
        return self

    def add_stream_by(self, keys: Any) -> "SearchSpace":
        """`stream_by` keys (a loop variable's or axis's name, or a lambda over the task), tried
        with each stream count; None means no key (round robin over the streams)."""
        span = here()
        self._stream_by = _nonempty(keys, "add_stream_by", span)
        return self

    def add_dispatch(self, policies: Any, params: Any = None, keys: Any = None) -> "SearchSpace":
        """Dispatch policies: names (`"round_robin"`, `"work_steal"`, `"affinity"`, `"hash"`)
        or `DispatchOption`s, each with every dispatcher count of `params` (default [4]) and,
        for `affinity` / `hash`, every key of `keys` (default: the outermost loop variable); or
        `DispatchPolicy` objects, taken as they are."""
        span = here()
        counts = [_positive(p, "a dispatcher count", span, allow_none=True)
                  for p in _nonempty([4] if params is None else params, "add_dispatch", span)]
        key_list = _nonempty([None] if keys is None else keys, "add_dispatch", span)
        out = []
        for p in _nonempty(policies, "add_dispatch", span):
            if isinstance(p, Policy):
                name = _option(p.name, "dispatch", DISPATCH, span)
                out.append((name, p.args[0] if p.args else p.n, p.key))
                continue
            name = _option(p, "dispatch", DISPATCH, span)
            for n in counts:
                for k in (key_list if name in _KEYED else [None]):
                    out.append((name, n, k))
        self._dispatch = out
        return self

    def add_timing(self, policies: Any, params: Any = None) -> "SearchSpace":
        """Timing policies: names (`"immediate"`, `"batched"`, `"interleaved"`,
        `"rate_limit"`) or `TimingOption`s, each but `immediate` with every value of `params`;
        or `TimingPolicy` objects."""
        span = here()
        values = _nonempty([None] if params is None else params, "add_timing", span)
        out: list = []
        for p in _nonempty(policies, "add_timing", span):
            if isinstance(p, Policy):
                out.append((_option(p.name, "timing", TIMING, span), p.args[0] if p.args else None))
                continue
            name = _option(p, "timing", TIMING, span)
            if name == "immediate":
                out.append((name, None))
                continue
            for v in values:
                if name == "rate_limit":
                    _rate(v, span)
                else:
                    _positive(v, f"the `{name}` count", span)
                out.append((name, v))
        self._timing = list(dict.fromkeys(out))
        return self

    def add_task_window(self, sizes: Any, modes: Any = None) -> "SearchSpace":
        """Task window sizes (None: no `.task_graph`), each with every mode of `modes`
        (`"stall"`, `"abort"` or `WindowMode`s; default stall)."""
        span = here()
        sizes = [_positive(s, "a task window", span, allow_none=True)
                 for s in _nonempty(sizes, "add_task_window", span)]
        modes = [_option(m, "task window mode", WINDOW_MODES, span) for m in
                 _nonempty([WindowMode.STALL] if modes is None else modes, "add_task_window", span)]
        self._windows = list(dict.fromkeys((s, m) for s in sizes
                                           for m in (modes if s is not None else ["stall"])))
        return self

    def enumerate_configs(self) -> list:
        """Every configuration, in order. A `stream_by` key goes only with a stream count."""
        out = []
        for s in self._streams:
            for key in (self._stream_by if s is not None else [None]):
                for d, n, k in self._dispatch:
                    for t, tp in self._timing:
                        for win, mode in self._windows:
                            out.append(ScheduleConfig(s, d, n, t, tp, key, k, win, mode))
        return list(dict.fromkeys(out))

    @property
    def size(self) -> int:
        return len(self.enumerate_configs())

    def _dimensions(self) -> list:
        """The space as `tuning.search`'s product: (stream count, key) pairs, dispatch, timing,
        windows; its order of points is `enumerate_configs()`'s."""
        streams = [(s, key) for s in self._streams
                   for key in (self._stream_by if s is not None else [None])]
        return [streams, self._dispatch, self._timing, self._windows]

    def _config(self, dims: list, point: tuple) -> ScheduleConfig:
        (s, key), (d, n, k), (t, tp), (win, mode) = (dim[i] for dim, i in zip(dims, point))
        return ScheduleConfig(s, d, n, t, tp, key, k, win, mode)


class AutoScheduler:
    """Explores a workload's schedules on the cycle model. `symbols` binds run-time symbols
    (`symbol_u64(name)`) for the simulations, as `program.set_symbol_u64` does for a run;
    without it a symbol takes its default."""

    def __init__(self, workload: Any, symbols: Optional[dict] = None):
        span = here()
        self.workload = _as_workload(workload, span)
        self.symbols = {}
        for name, value in (symbols or {}).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise user_error(span, f"symbol `{name}` must be bound to a non-negative "
                                 f"integer, not {value!r}", cls=ScheduleError)
            self.symbols[str(name)] = int(value)

    def register_kernel(self, name: str, impl: Any) -> "AutoScheduler":
        raise user_error(here(), "`register_kernel` is not supported by wspc: kernels run the "
                         "code compiled from their `@kernel` bodies, and exploring a schedule "
                         "runs none (the cycle model times them)",
                         "drop the call", cls=CompileError)

    def _bind(self, prog: Any, span: A.Span) -> dict:
        """The symbols of a simulation: `symbols`, else the defaults; a name the workload does
        not have, or a symbol with neither, is an error at the explorer's line."""
        syms = prog._asm.syms
        for name in self.symbols:
            if name not in syms:
                known = ", ".join(f"`{n}`" for n in sorted(syms)) or "none"
                raise user_error(span, f"the workload has no symbol `{name}` (its symbols: "
                                 f"{known})", cls=ScheduleError)
        bind = {n: s.default for n, s in syms.items() if s.default is not None}
        bind.update(self.symbols)
        for name in syms:
            if name not in bind:
                raise user_error(span, f"symbol `{name}` has no default, and simulating needs "
                                 "its value", "bind it: `AutoScheduler(workload, symbols="
                                 f"{{\"{name}\": N}})`", cls=ScheduleError)
        return bind

    def _trial(self, config: ScheduleConfig, span: A.Span) -> tuple:
        """(the result of simulating `config`, the error it failed with or None)."""
        t0 = time.perf_counter()
        try:
            prog = config.apply(self.workload).compile(target="cpu_sim")
        except WspError as err:  # the seeds' classes are WspErrors
            return ExplorationResult(config, error=str(err)), err
        compile_ms = (time.perf_counter() - t0) * 1000
        bind = self._bind(prog, span)  # raised: wrong for every configuration
        try:
            stats = prog.simulate(bind=bind, **prog._asm.arrays())
        except WspError as err:
            failed = from_wsp(err, "run")
            return ExplorationResult(config, error=str(failed)), failed
        extra = stats.extra
        return ExplorationResult(config, float(extra.get("simulated_us", 0.0)) / 1000, compile_ms,
                                 stats.task_count, None, int(stats.total_cycles),
                                 {k: extra[k] for k in _MODEL if k in extra}), None

    def explore(self, space: SearchSpace, trials: Optional[int] = None, warmup: int = 1,
                verbose: bool = False, seed: int = 0, *, descent: bool = False) -> tuple:
        """(best configuration, `ExplorationSummary`). `trials` is how many configurations
        are tried (default: all); fewer than the space holds are `random.Random(seed).sample`
        of their numbers, tried in order, or with `descent` the points `tuning.search`'s
        seeded coordinate descent picks. `warmup` is checked and changes nothing (the model
        has no warm state)."""
        span = here()
        if not isinstance(space, SearchSpace):
            raise user_error(span, f"`explore` takes a `SearchSpace`, not {space!r}",
                             cls=ScheduleError)
        configs = space.enumerate_configs()
        if space._stream_by != [None] and all(c.streams is None for c in configs):
            raise user_error(span, "a `stream_by` key needs a stream count: the space has none",
                             "add them: `space.add_streams([2, 4])`", cls=ScheduleError)
        fewer = trials is not None and _positive(trials, "`trials`", span) < len(configs)
        if fewer and not descent:
            picked = sorted(random.Random(seed).sample(range(len(configs)), trials))
            configs = [configs[i] for i in picked]
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise user_error(span, f"`warmup` must be a non-negative integer, not {warmup!r}",
                             cls=ScheduleError)
        results: list = []
        errors: list = []
        done: dict = {}
        count = trials if fewer else len(configs)

        def tried(config: ScheduleConfig) -> ExplorationResult:
            if config not in done:
                r, err = self._trial(config, span)
                results.append(r)
                errors.append(err)
                done[config] = r
                if verbose:
                    print(f"  [{len(results)}/{count}] {config}: " +
                          (f"{r.total_cycles} cycles" if r.success else "failed"))
            return done[config]

        if descent:
            dims = space._dimensions()
            search([len(d) for d in dims],
                   lambda points: [r.total_cycles if r.success else None for r in
                                   (tried(space._config(dims, p)) for p in points)],
                   count, seed)
        else:
            for config in configs:
                tried(config)
        first_error = next((e for e in errors if e is not None), None)
        ok = [r for r in results if r.success]
        if not ok:  # nothing could be simulated: the first error, at its own line
            raise first_error
        best = min(ok, key=lambda r: r.total_cycles)  # the first of equals: the order tried
        base = next((r for r in results if r.config == ScheduleConfig()), None) \
            or self._trial(ScheduleConfig(), span)[0]
        speedup = base.total_cycles / best.total_cycles if base.success and best.total_cycles else 1.0
        return best.config, ExplorationSummary(results, best.config, best.execute_time_ms,
                                               base.execute_time_ms, speedup, best.total_cycles,
                                               base.total_cycles)

    def find_best(self, max_streams: int = 8, trials: Optional[int] = None) -> ScheduleConfig:
        """The best of a default space: no streams or 1, 2, 4, `max_streams` streams, times
        `round_robin(4)` and `work_steal(4)`, immediate timing; searched by `tuning.search`
        (all of it by default, else `trials` points of its coordinate descent)."""
        span = here()
        top = _positive(max_streams, "`max_streams`", span)
        space = SearchSpace().add_streams(
            [None, *sorted({s for s in (1, 2, 4, min(8, top)) if s <= top})])
        space.add_dispatch(["round_robin", "work_steal"], [4])
        return self.explore(space, trials=trials, descent=True)[0]


def auto_schedule(workload: Any, verbose: bool = False) -> Workload:
    """`workload` scheduled by `AutoScheduler(workload).find_best()`."""
    scheduler = AutoScheduler(workload)
    best = scheduler.find_best()
    if verbose:
        print(f"auto_schedule chose {best}")
    return best.apply(scheduler.workload)


__all__ = ["DispatchOption", "TimingOption", "ScheduleConfig", "ExplorationResult",
           "ExplorationSummary", "SearchSpace", "AutoScheduler", "auto_schedule"]
