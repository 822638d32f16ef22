"""The IR every back end consumes: kernels as op DAGs over static tiles, workloads as a loop tree
of task generators, schedules as policy records, all in one `Module`.

Made by `lower/` from a checked `ModuleEnv`; nothing here knows about the surface syntax.
Kernels are specialised: each distinct set of `Constexpr` values gives its own `Kernel`, so every
tile shape here is a plain integer. Workload parameters are substituted: each `Schedule` holds
the whole loop tree it runs. Integer expressions (extents, coordinates, view offsets) are
`sym` expressions over syms and loop variables, evaluated at run time. CSP (channels,
pipes of processes, send / consume, record / synchronize / query) is described, as the contract
between lowering and the back ends, in the "CSP" section below.

Value semantics (shared by every back end; `backends/ref` is the executable definition):
- A kernel value has a dtype; `f16`/`bf16` values are *held in f32* and rounded to nearest even
  only by `convert`/`cast` to them and by stores, so chains of f16 arithmetic keep f32 precision.
- Integer arithmetic wraps (two's complement); integer `div` is floor division, and dividing by
  zero gives 0. Float division by zero follows IEEE.
- Operand dtypes are made explicit by lowering: every elementwise op's operands already have the
  op's dtype (a `convert` op is inserted where the checker promoted), except `matmul` (any
  numeric operands, f32 result), comparisons (operands share a dtype, result bool), `where`
  (condition bool) and `cast`/`convert` themselves.
- Shapes broadcast as NumPy in 2-D: an operand of shape [1, N], [M, 1], [1, 1] or a scalar
  (shape None) is repeated along its extent-1 dimensions.
"""

from __future__ import annotations

from typing import Optional, Union

from .. import sym
from ..records import record
from ..spans import NO_SPAN, Span
from .kernel_plan import KernelPlan

# ---------------------------------------------------------------------------------------------
# Kernels

@record
class Op:
    """One value of a kernel's DAG: `op` applied to the values `args` (indices of earlier ops).

    `op` names an op of the primitive table (`ptowsp.primitives.OPS`: its arity, shape and
    dtype rule, fusion category, plan kind and meaning). `shape` is `(rows, cols)` for a tile
    and None for a scalar; `attr` holds the op's constant data: the parameter name for
    `param`/`scalar_param`, the number for `literal`, nothing else.
    """

    op: str
    args: tuple[int, ...]
    shape: Optional[tuple[int, int]]
    dtype: str
    attr: Union[str, int, float, bool, None] = None


@record
class KParam:
    """A kernel parameter: a tile (`mode` In/Out/InOut, static shape) or a scalar. `pad` is
    what a load of a partial view puts where the view has no element (language.md section 4,
    "Partial tiles"): a number of the tile's kind, 0 unless the parameter says `pad = v`."""

    name: str
    kind: str  # "tile" or "scalar"
    dtype: str
    mode: Optional[str] = None
    rows: int = 0
    cols: int = 0
    pad: Union[int, float, bool] = 0


@record
class Kernel:
    """A specialised kernel: parameters, the op DAG in dependency order, and the stores.

    `stores` pairs an Out/InOut parameter with the op whose value it receives (converted to the
    parameter's dtype, broadcast to its shape). An extern kernel (`is_extern`) has its foreign
    bodies of language.md section 4, one per language (`extern_c`, `extern_cpp`, `extern_ascend`: the raw
    text, at least one given), and no ops; each back end runs the body in its language. `source` is the kernel's name in the program; `name` is
    unique per specialisation (`rows__R_4`) and safe as a C identifier suffix. A kernel made by
    task fusion (`ir/passes/fuse_tasks.py`) has source `a+b` and, in `fused`, one line per
    fusion that made it (the kernels, their categories, the intermediate, the rule).
    """

    name: str
    source: str
    params: tuple[KParam, ...]
    ops: tuple[Op, ...]
    stores: tuple[tuple[str, int], ...]
    extern_c: Optional[str] = None
    constexprs: tuple[tuple[str, int], ...] = ()
    span: Span = NO_SPAN
    # how the ops run (`ir/kernel_plan.py`; made by the `plan-kernels` pass, -O2 and up); None:
    # the back end's simplest form. A planned kernel's ops are the ones the plan schedules
    plan: Optional[KernelPlan] = None
    # why task fusion made this kernel (`ir/passes/fuse_tasks.py`); printed as `# fused: ...`
    fused: tuple[str, ...] = ()
    extern_ascend: Optional[str] = None  # the `extern ascend` body (Ascend C), as `extern_c`
    name_span: Span = NO_SPAN  # the kernel's name in its declaration (diagnostics' carets)
    # the `extern cpp` body (C++17, as `extern_c`) and the headers it includes (`include "h"`)
    extern_cpp: Optional[str] = None
    cpp_includes: tuple[str, ...] = ()
    # a collective's kernel (made by the device lowering, `ir/devices.py`): what it moves between
    # devices, for the cycle model's interconnect and the per-device runners; None for compute
    comm: Optional["Comm"] = None
    # `add_cycles(n)`: n more cycles per task in the cycle model, an expression of the
    # kernel's integer scalar parameters (evaluated per task from its arguments); None: none
    cycles: Optional[sym.Expr] = None

    @property
    def is_extern(self) -> bool:
        """An extern kernel: foreign bodies, no ops (opaque to every pass)."""
        return (self.extern_c is not None or self.extern_ascend is not None
                or self.extern_cpp is not None)


@record
class Comm:
    """What a collective kernel moves (docs/distributed.md, "The cycle model"): the collective's
    `kind` (one of `COLLECTIVE_KINDS` but `relayout`, which the lowering makes from the others),
    the mesh axis `over`, the number of devices in each group along it (`group`), `bytes` the
    bytes ONE task of the collective moves between devices (the source tiles it reads from
    other devices: `group - 1` tiles for a reduction, one or none for a copy; an expression of
    the task's variables), and the reduction `op` (None when the kind does not reduce). The
    tile tasks of one collective pipeline like HCCL's chunks (`ir/collective_tiles.py`)."""

    kind: str
    over: str
    group: int
    bytes: sym.Expr
    op: Optional[str] = None


# ---------------------------------------------------------------------------------------------
# Workloads: a loop tree of task generators


@record
class TileArg:
    """A tensor region bound to a tile parameter, and how the task accesses it.

    The region is the box `[offsets[d], offsets[d] + extents[d])` of every tensor dimension `d`
    (an indexed dimension has extent 1). The tile's rows run along tensor dimension `row_dim`
    and its columns along `col_dim` (None: a promoted 1). Usually `row_dim < col_dim`; a
    transposed view (`K[b, a : a + 64, :].T`, language.md section 6) has them the other way
    round (`transposed`): element (i, j) of the tile is element (j, i) of the untransposed
    view, and the box is the same elements. `mode` is "r", "w" or "rw".
    `checks` are the facts the checker could not prove (view bounds, extents); each must hold
    before the task may launch.

    `partial` (rows, cols): True where the view's extent is not proved to be the tile's, so it
    may be shorter (1 <= extent <= the tile's, a check when not proved). The task then reads
    and writes only the box: a load fills the rest of the tile with the parameter's `pad`, a
    store writes only the box, and `valid_rows`/`valid_cols` are the extents. `span` is the
    argument, for a target that reports a partial view it cannot run.

    `steps` (a strided view `X[r, 0:64:2]`, language.md section 6, "Strided views"): empty
    when every step is 1, else one positive int per tensor dimension. Then `extents[d]` counts
    the elements selected along `d`, `offsets[d] + i * steps[d]` for `i < extents[d]`, and the
    task reads and writes only those; its dependency box is their bounding box (`box_extents`),
    which over-approximates the strided set and never misses an element of it.
    """

    param: str
    tensor: str
    mode: str
    offsets: tuple[sym.Expr, ...]
    extents: tuple[sym.Expr, ...]
    row_dim: Optional[int]
    col_dim: Optional[int]
    checks: tuple["ViewCheck", ...] = ()
    gather: Optional["Gather"] = None  # a gather view (`Cos[pos[a : b], :]`): see `Gather`
    partial: tuple[bool, bool] = (False, False)
    span: Span = NO_SPAN
    steps: tuple[int, ...] = ()

    @property
    def is_partial(self) -> bool:
        return any(self.partial)

    def step(self, d: Optional[int]) -> int:
        """The step along tensor dimension `d` (1 for None, a promoted 1)."""
        return self.steps[d] if self.steps and d is not None else 1

    @property
    def box_extents(self) -> tuple[sym.Expr, ...]:
        """The dependency box's extents: `extents`, or for a strided view the bounding box of
        its elements, `(extents[d] - 1) * steps[d] + 1` (`steps` above)."""
        if not self.steps:
            return self.extents
        return tuple(e if k == 1 else sym.add(sym.mul(sym.sub(e, 1), k), 1)
                     for e, k in zip(self.extents, self.steps))

    @property
    def transposed(self) -> bool:
        """The tile's rows run along a later tensor dimension than its columns (a `.T` view;
        a 1-D view's `.T` is a column: `row_dim` set, `col_dim` None)."""
        if self.row_dim is None:
            return False
        return self.col_dim is None or self.row_dim > self.col_dim



@record
class Gather:
    """The rows of a gather view (`Cos[pos[t*16 : t*16 + 16], :]`, language.md section 6).

    Row i of the tile is row `rows[i]` of the tensor along the TileArg's `row_dim`; `rows` are
    the variables of the `Read`s of the index elements placed before the task, whose range
    checks are among the TileArg's `checks`. The TileArg's box spans the whole `row_dim`
    (dependencies are on every row, conservatively: a box cannot name scattered rows). The
    task also reads the index slice `index[offsets : offsets + extents]` (one extent is the
    tile's rows, the rest 1): a back end may read the indices from there when the task runs
    (cpu_sim does); every later writer of the slice waits for the task, so the values are the
    ones the `Read`s saw. The slice's extent is `count` rows (the tile's, unless partial).
    """

    rows: tuple[sym.Expr, ...]
    index: str
    offsets: tuple[sym.Expr, ...]
    extents: tuple[sym.Expr, ...]
    span: Span = NO_SPAN  # the gather view's argument, for a target that cannot run it
    # the rows gathered (the index slice's length, 1 <= count <= len(rows)); fewer than the
    # tile's make a partial tile (TileArg.partial[0]): rows[count:] repeat the last index read
    # (so every Read stays inside the slice) and are padded, never loaded
    count: Optional[sym.Expr] = None
    # the index of the box's first row among the values of `rows` (None: 0): tile row i is
    # row `rows[i] - base` of the box. The device lowering gives a gather of a sharded
    # dimension its shard's first row (`ir/devices.py`): the indices stay global, the tensor
    # holds the shard
    base: Optional[sym.Expr] = None


@record
class ViewCheck:
    """`check` must hold at run time; if not, `message` is reported at `span` (the argument or
    declaration to blame), with the task's coordinates and the values involved."""

    check: sym.Check
    message: str
    span: Span = NO_SPAN
    # what a failure found, when the check's two sides would not say it plainly (a shard
    # crossing's `offset % shard + extent`): `found` with `{0}`, `{1}`... replaced by the
    # values of `shown`, evaluated where the check is; empty: `found` and the sides' values
    found: str = ""
    shown: tuple[sym.Expr, ...] = ()


@record
class ScalarArg:
    """A scalar parameter's value: an integer expression, or a float/bool constant."""

    param: str
    value: Union[sym.Expr, float, bool]
    dtype: str


@record
class Access:
    """A box of a tensor that a task accesses without binding it to a kernel parameter (CSP).

    Dependencies are inferred on it exactly as on a `TileArg`'s box (`mode` "r": the task waits
    for earlier writers of an overlapping box; "w": also for earlier readers and writers), but
    no data reaches the kernel and the kernel writes nothing there. The box is
    `[offsets[d], offsets[d] + extents[d])` per dimension of `tensor`, inside it (a channel slot
    tensor's offsets are `item % slots`) but for a task handle's order tensor (below). Uses:
    - mode "r" on every task enumerated inside a `Consume` body (however deeply nested) that
      does not already read the item's slot box through a `TileArg`: the item is freed when
      every task of its body iteration has finished, so the next send into that slot waits
      for all of them (WAR);
    - mode "w" on the task of a `Send` to a token channel (no element type): the consumer's
      body tasks then wait for it (RAW on the token slot) and it waits for the body tasks of
      the item that used the slot before (WAR), exactly as for a data channel;
    - named edges (lower/edges.py): mode "w" of its coordinates' box on a task handle's order
      tensor by each task of the handle, mode "r" of the boxes an `after` names; these boxes
      are coordinates and may lie outside the tensor's one element (`is_edge_tensor`).
    """

    tensor: str
    mode: str
    offsets: tuple[sym.Expr, ...]
    extents: tuple[sym.Expr, ...]


def is_edge_tensor(name: str) -> bool:
    """Whether tensor `name` is a task handle's order tensor (`edge@SCHEDULE@HANDLE`,
    lower/edges.py): the boxes of its accesses are the coordinates of the handle's tasks, which
    an `after` names (docs/schedules.md, "Named edges"), and no kernel reads or writes it, so
    its boxes may lie outside its one element; back ends allocate nothing real for it, and the
    `deps = explicit` check takes a dependency through it as declared."""
    return name.startswith("edge@")


@record
class Task:
    """One task per enumeration: a kernel, its coordinates, and its arguments.

    `extra` are accesses without a tile (see `Access`): the back ends add them to the task's
    dependency boxes and pass nothing to the kernel. Empty outside CSP, the collectives' order
    (ir/collective_tiles.py) and named edges (`after`: boxes of a task handle's order tensor,
    `is_edge_tensor`)."""

    kernel: str
    coords: tuple[sym.Expr, ...]
    args: tuple[Union[TileArg, ScalarArg], ...]
    text: str  # the call as written, for messages and traces (`rmsnorm_tile[b, t]`)
    span: Span = NO_SPAN
    extra: tuple[Access, ...] = ()
    # the device the task runs on, row-major over the mesh axes (docs/distributed.md), set by the
    # device lowering (`ir/devices.py`); None in a program of one device
    device: Optional[sym.Expr] = None


@record
class Loop:
    """`for var in P(extent)` (kind "grid": iterations independent) or `P.seq` (kind "seq":
    iteration i+1 starts after every task of iteration i has finished)."""

    var: str
    extent: sym.Expr
    kind: str
    body: tuple["Stmt", ...]


@record
class Block:
    """`combine` (kind "combine": no order added) or `sequential` (each statement's tasks finish
    before the next statement's tasks start)."""

    kind: str
    body: tuple["Stmt", ...]


@record
class Read:
    """`var = tensor[index]`: one element of an integer tensor, read at this point of enumeration
    (language.md section 6, data-dependent task generation). Later expressions use `var`, a name
    unique in the schedule. The element is read only after every earlier-enumerated task that
    writes it has finished; `checks` (index bounds the checker could not prove) must hold before
    the read, else the run fails at their spans with the coordinates and values."""

    var: str
    tensor: str
    index: tuple[sym.Expr, ...]
    checks: tuple[ViewCheck, ...] = ()
    span: Span = NO_SPAN


@record
class Assert:
    """A run-time fact about values read so far (a ragged length is not negative, an indptr is
    monotone and within `indices`): when it fails, nothing further is enumerated and the run
    fails at the check's span with the coordinates and values."""

    check: ViewCheck


@record
class Cond:
    """A run-time predicate. `op` is a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`; `args` two
    integer expressions), `and` / `or` (two Conds), `not` (one Cond), `const` (one bool) or
    `query` (one str: the name of a channel or event, `query(ev)`).

    `query(X)` holds when every task in X's *pending set* has finished at the moment the
    predicate is evaluated (the one timing-dependent value of the language). The pending set
    is the marked set of X's latest `Mark` enumerated so far (see `Mark`) together with the
    tasks of every `Send` to X enumerated so far. With nothing pending it holds (a never
    recorded event has completed, as in CUDA). `ref` runs tasks as they are enumerated, so
    there it always holds."""

    op: str
    args: tuple


@record
class When:
    """`when P1 { .. } else when P2 { .. } otherwise { .. }`: the body of the first branch whose
    predicate holds, per enclosing iteration, else `otherwise` (possibly empty)."""

    branches: tuple[tuple[Cond, tuple["Stmt", ...]], ...]
    otherwise: tuple["Stmt", ...] = ()


@record
class SlotSet:
    """`slot_set(k, value)` (and the second half of `slot_load`): run-time slot `k` (0 <= k < 64)
    takes `value` from here on in enumeration order. `slot(k)` in an expression is the variable
    `slot_var(k)`."""

    slot: int
    value: sym.Expr
    span: Span = NO_SPAN


def slot_var(k: int) -> str:
    """The name expressions use for run-time slot `k` (never a valid source identifier)."""
    return f"slot#{k}"


def slot_index(name: str) -> Optional[int]:
    """k when `name` is slot_var(k), else None."""
    return int(name[5:]) if name.startswith("slot#") else None


NSLOTS = 64


# ---------------------------------------------------------------------------------------------
# CSP (language.md section 7): channels, pipes of processes, send / consume, record / synchronize
#
# The contract every back end implements (`backends/ref/interp.py` is the executable
# definition). CSP adds nothing to the task runtime: a channel's items live in a scratch tensor
# of slots and every ordering the language asks for is an inferred data dependency on those
# slots (`TileArg`s and `Access`es below), plus what the enumeration order adds. What is new is
# the *enumeration*: a schedule whose body holds a `Pipe` is enumerated by deterministic
# coroutines.
#
# Coroutines. The schedule body is coroutine 0 ("main"). Executing a `Pipe` opens its channels
# (`Pipe.channels`), appends one coroutine per process replica to the list of coroutines (the
# processes in order, the replicas of each by id), and blocks the coroutine that executed it
# until all of them have finished; the channels are then discarded. A coroutine inherits the
# variable bindings around the `Pipe` (loop, read and item variables) and binds its replica
# variable (`Process.id_var`); slots (`slot#k`) are shared by all coroutines.
#
# The scheduler, exactly (the C enumerator must reproduce it so that enumeration order, hence
# `t.index` numbering and the direction of every inferred dependency, is the same everywhere):
#
#     coroutines = [main]
#     while main has not finished:
#         progressed = False
#         i = 0
#         while i < len(coroutines):             # coroutines created during a pass run in it
#             c = coroutines[i]; i += 1
#             if c finished, or c is blocked and its condition still fails: continue
#             run c until it blocks (a condition that fails) or finishes; progressed = True
#         if not progressed: deadlock (report every blocked coroutine, see below)
#
# A coroutine that reaches a blocking statement whose condition already holds does not block.
# Blocking conditions (per channel *instance*: the opening of its pipe; `S = max(depth, 1)`
# slots; item k lives in slot `k % S`; item numbers count from 0 per instance):
# - `Send` of item k (k = number of items sent to this instance so far) proceeds when
#   item k - S has been *released* (or k < S) and, for depth 0 only, some coroutine is blocked
#   at a `Consume` of this instance waiting for item k (a rendezvous: the send waits for the
#   consumer). Then the item variable is bound to k, the task is enumerated, and item k counts
#   as sent. So depth D >= 1 keeps at most D items in flight (sent, not yet released), depth 0
#   at most one.
# - `Consume` by replica r of a process with N replicas takes items r, r + N, r + 2N, ... in
#   order (a cursor per coroutine and channel, kept across the coroutine's `Consume`
#   statements of that channel). Waiting for item k, it proceeds when item k has been sent
#   (binds the item variable to k and enumerates the body), or ends the `Consume` statement when
#   the channel is *closed* and fewer than k + 1 items were sent. When the body of item k has
#   been enumerated completely, item k is *released*.
# - A channel instance is closed when every coroutine of its pipe whose process sends to it
#   (`Process.sends`, which counts sends in nested pipes) has finished.
# - `Pipe`: blocked until every coroutine it created has finished.
# Nothing else blocks: `Mark`, `Sync`, `query` and element reads are not scheduling points.
# Opening a channel that is already open (the owning pipe running twice at once, e.g. inside a
# replicated process) is a run-time error at the second `Pipe`.
#
# Deadlock: a pass in which no coroutine can proceed. The run fails at the span of the first
# blocked `Send`/`Consume` (in coroutine order), naming every blocked process (and replica),
# the channel, the item and the depth, with a note at each other blocked statement.


@record
class Channel:
    """A declared channel or event (`is_event`: `event NAME`, a token channel of depth 0).

    `elem` is (rows, cols, dtype) of a data channel, None for a token channel or event. `slots`
    is the scratch tensor holding its items (None when no schedule sends or consumes it, e.g.
    an event used only by `record`/`synchronize`): a data channel's is `elem dtype[S, rows,
    cols]`, a token channel's `u8[S, 1, 1]`, with S = max(depth, 1); it is named
    `NAME@slots`, which no source name can be. The slot of item k is `slots[k % S]`.
    """

    name: str
    depth: int
    elem: Optional[tuple[int, int, str]]
    slots: Optional[str]
    is_event: bool = False
    span: Span = NO_SPAN
    # `NAME@marks: u8[MARKS]`, when some schedule records, synchronizes or queries it: a back end
    # may tag marked tasks with a read of element `generation % MARKS` (see `Mark`, cpu_sim)
    marks: Optional[str] = None

    @property
    def nslots(self) -> int:
        return max(self.depth, 1)

    def slot_box(self, item: str) -> tuple[tuple, tuple]:
        """The box of item `item`'s slot in `slots`: (offsets, extents), `[item % S, 0:rows,
        0:cols]` (a token channel's elements are 1 x 1)."""
        rows, cols = (self.elem[0], self.elem[1]) if self.elem is not None else (1, 1)
        return ((sym.mod(sym.var(item), self.nslots), sym.const(0), sym.const(0)),
                (sym.const(1), sym.const(rows), sym.const(cols)))


MARKS = 64  # elements of a `NAME@marks` tensor


def marks_name(channel: str) -> str:
    """The scratch tensor a back end may use to track the marked set of `channel`."""
    return f"{channel}@marks"


def slots_name(channel: str) -> str:
    """The scratch tensor of a channel's slots."""
    return f"{channel}@slots"


@record
class Send:
    """`send(channel, CALL)`: blocks as described above, then binds `item` (a variable unique
    along the path, never a source name) to the item number k and enumerates `task`. For a
    data channel the task has exactly one `TileArg` with mode "w" on the channel's slot tensor,
    box `[item % S, 0:rows, 0:cols]`; for a token channel an `Access` with mode "w" on
    `[item % S, 0, 0]`. Item k is available to its consumer once the task has finished (the
    consumer's tasks read the slot box: RAW). `span` is the channel name in the `send`."""

    channel: str
    item: str
    task: Task
    span: Span = NO_SPAN


@record
class Consume:
    """`consume(channel) as t { body }`: for each item k of this coroutine's share (see above),
    binds `item` (the source name `t`, renamed like a loop variable when it would shadow one;
    `t`, `t.index` and `t` as a coordinate all mean it) to k and enumerates `body`. A tile
    argument `t` is a `TileArg` with mode "r" on the slot box `[item % S, 0:rows, 0:cols]`;
    every task of the body that does not read that box gets an `Access` "r" on it, so item k
    is freed (the next send into its slot may start) only when all of them have finished.
    `span` is the channel name in the `consume`."""

    channel: str
    item: str
    body: tuple["Stmt", ...]
    span: Span = NO_SPAN


@record
class Process:
    """`process NAME { body }` or `process NAME * replicas { body }` inside a `Pipe`: one
    coroutine per replica. `id_var` (the name `NAME.id`, renamed if it would shadow a binding;
    None without `* N`) holds the replica number 0..replicas-1 in the body. `sends` are the
    channels the body sends to, nested pipes included (they decide when a channel closes)."""

    name: str
    replicas: int
    id_var: Optional[str]
    body: tuple["Stmt", ...]
    sends: tuple[str, ...] = ()
    span: Span = NO_SPAN


@record
class Pipe:
    """`pipe { process ... }`: runs its processes as coroutines and finishes when all have.
    `channels` are the channels this pipe *owns*: those consumed by its processes' own bodies
    (not by processes of pipes nested in them). Every execution of the pipe opens a fresh
    instance of each (item numbers from 0, open), discarded when the pipe finishes; items
    sent but never consumed are dropped. Every send to an owned channel is inside this pipe
    (the checker's rule)."""

    processes: tuple[Process, ...]
    channels: tuple[str, ...] = ()
    span: Span = NO_SPAN


@record
class Mark:
    """`STMT` followed by `record(e1)`, `record(e2)`, ...: `body` is STMT lowered; the tasks it
    enumerates (its processes' tasks included when it holds a `Pipe`) become the *marked set*
    of each event of `events`, replacing the previous one, when the body has been enumerated
    completely. Only order and `query` depend on it: `Sync` and `query` read the marked set.
    `span`: the first `record`."""

    events: tuple[str, ...]
    body: tuple["Stmt", ...]
    span: Span = NO_SPAN


@record
class Sync:
    """`synchronize(event)`: every task enumerated after this point by the statements that
    follow it in the same statement list (and inside them) starts after every task of the
    event's marked set as it is when the `Sync` is enumerated (empty if no `Mark` of it has
    been enumerated: then it waits for nothing). A back end may implement it by waiting, at the
    `Sync`, for the marked tasks to finish before enumerating further (more order, never less);
    it is not a coroutine switch. `span`: the event name."""

    event: str
    span: Span = NO_SPAN


CSP_STMTS = (Pipe, Process, Send, Consume, Mark, Sync)


# ---------------------------------------------------------------------------------------------
# Meshes, layouts and collectives (docs/distributed.md)
#
# A module may carry a `Mesh`: named axes of devices, the last varying fastest. Each tensor has
# a `Layout` (None: replicated on every axis). The driver lowers a module with a mesh to a
# single-device program before the optimiser (`ir/devices.py`: a device dimension on every
# tensor, `Task.device` on every task, each `Collective` tile tasks; `Module.devices` keeps the
# global shapes), so no back end sees a `Mesh`, a `Layout` or a `Collective`.


@record
class MeshAxis:
    """One mesh axis: its name and its size (a positive constant, or a sym bound at run time)."""

    name: str
    size: sym.Expr
    span: Span = NO_SPAN


@record
class Mesh:
    """The module's devices: `mesh dp = 2, tp = 4` is 8 devices numbered row-major."""

    axes: tuple[MeshAxis, ...]
    span: Span = NO_SPAN  # the `mesh` declaration: a target that cannot run it reports here

    def axis(self, name: str) -> MeshAxis:
        for a in self.axes:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def devices(self) -> sym.Expr:
        n: sym.Expr = sym.const(1)
        for a in self.axes:
            n = sym.mul(n, a.size)
        return n


@record
class Layout:
    """Where a tensor's elements live: per dimension the mesh axis sharding it in even blocks
    (None: replicated), and the axes over which each device holds a full-shape addend whose sum
    is the value (`partial`)."""

    dims: tuple[Optional[str], ...]
    partial: tuple[str, ...] = ()

    def text(self) -> str:
        body = ", ".join("R" if a is None else f"S({a})" for a in self.dims)
        return f"[{body}]" + (f" partial({', '.join(self.partial)})" if self.partial else "")


COLLECTIVE_KINDS = ("allreduce", "reduce_scatter", "allgather", "all_to_all", "relayout")


@record
class Collective:
    """A collective statement: `kind` one of `COLLECTIVE_KINDS`, reading the whole tensor
    `source` and writing the whole tensor `into` (same global shape and dtype, the layouts the
    checker matched to the kind). `over` is the mesh axis (None for `relayout`), `op` the
    reduction (`sum`, `max`, `min`; None when the kind does not reduce), `dim` the dimension a
    `reduce_scatter` scatters. As a task of the graph it runs on every device, after every
    writer of `source` and before every later reader or writer of `into`; the collectives of a
    run are ordered among themselves in program order (docs/distributed.md)."""

    kind: str
    source: str
    into: str
    over: Optional[str] = None
    op: Optional[str] = None
    dim: Optional[int] = None
    span: Span = NO_SPAN


Stmt = Union[Loop, Block, Task, Read, Assert, When, SlotSet, Pipe, Process, Send, Consume, Mark,
             Sync, Collective]


@record
class Placed:
    """A tensor of a program lowered to devices, as its caller sees it: its global dimensions
    and its layout (None: replicated), while its `TensorDecl` has the device dimension."""

    name: str
    dims: tuple[sym.Expr, ...]
    layout: Optional[Layout] = None


@record
class Devices:
    """What the device lowering (`ir/devices.py`) made of a mesh of more than one device: the
    axes and their sizes (compile-time integers, row-major, the last fastest) and every
    tensor's global shape and layout. Each `TensorDecl` of such a module is
    `dtype[devices, local dims...]`: the caller's global arrays are scattered into it by layout
    before a run and gathered from it after (`ir/device_arrays.py`)."""

    axes: tuple[tuple[str, int], ...]
    tensors: tuple[Placed, ...]
    span: Span = NO_SPAN  # the `mesh` declaration

    @property
    def count(self) -> int:
        n = 1
        for _, p in self.axes:
            n *= p
        return n

    def placed(self, name: str) -> Optional[Placed]:
        for t in self.tensors:
            if t.name == name:
                return t
        return None


# ---------------------------------------------------------------------------------------------
# Schedules and the module


@record
class Policy:
    """A schedule combinator's value, e.g. `Policy("round_robin", (4,))`, `Policy("affinity",
    (key,), n)`: the name, its integer/float arguments or key expressions, and a count."""

    name: str
    args: tuple[Union[sym.Expr, int, float], ...] = ()
    n: Optional[int] = None


@record
class Schedule:
    """What runs: the loop tree of a workload with its parameters substituted, and how."""

    name: str
    workload: str
    body: tuple[Stmt, ...]
    dispatch: Policy = Policy("round_robin", (1,))
    streams: int = 1
    stream_by: Optional[sym.Expr] = None
    timing: Policy = Policy("immediate")
    window: Optional[int] = None
    window_mode: str = "stall"
    # the task-graph knobs (docs/schedules.md, "The task graph"); the defaults are what a
    # schedule without them does: exact inference, per-worker queues with stealing, workers
    # that start with the first task, one pool, a trace only when a run asks for one
    deps: str = "infer_tensor_map_exact"        # "infer_bytes_overlap", "explicit", "hybrid"
    ready: Policy = Policy("work_steal")        # "fifo", "priority" (args: the key)
    start: Policy = Policy("threshold", (1,))   # "after_orchestration"
    pools: Policy = Policy("single")            # "by_exec_unit", "custom" (the key; n pools)
    trace: str = "none"                         # "cycles": every run records its trace
    # `trace = cycles(key)`: a task's cycles in the cycle model are the key's value (its
    # kernel's cost from the IR is not used); None: the kernels' costs
    trace_cost: Optional[sym.Expr] = None
    # the combinators the schedule wrote: without `dispatch` any host worker may run any task
    # (the model still deals round_robin(1)); without `streams` tasks are in no stream
    given: tuple[str, ...] = ()
    window_span: Span = NO_SPAN  # `.task_graph(...)` (or the schedule): a window abort is reported here
    # the body uses CSP (`visit.uses_csp(body)`): enumerated by coroutines (see "CSP" above);
    # a back end without the CSP enumerator rejects such a schedule (`lower.reject_csp`)
    uses_csp: bool = False
    # the axis transforms lowering applied to `body`, as written (`split(t, 4)`; ir/axes.py)
    transforms: tuple[str, ...] = ()
    # where each combinator in `given` is written (the first of a name), for diagnostics
    combinator_spans: tuple[tuple[str, Span], ...] = ()


@record
class SymDecl:
    """A run-time integer symbol and its default (None: must be bound)."""

    name: str
    default: Optional[int]
    span: Span = NO_SPAN


@record
class TensorDecl:
    """A tensor: `kind` input/output/inout/scratch, dtype, symbolic dims, declaration position."""

    name: str
    kind: str
    dtype: str
    dims: tuple[sym.Expr, ...]
    span: Span = NO_SPAN  # the declaration: bad bindings and bad data are reported here
    location: str = "global"  # placement hint: global, l2, l1, ub (the cost model's, Ascend's)
    layout: Optional[Layout] = None  # on the module's mesh; None: replicated (docs/distributed.md)


@record
class Module:
    """The whole program: symbols, tensors, specialised kernels and schedules.

    `default_schedule` is `main`, or the only schedule, or None when there is a choice to make.
    `checks` are module-level run-time facts (a dimension that must not be negative).
    """

    name: str
    syms: tuple[SymDecl, ...]
    tensors: tuple[TensorDecl, ...]
    kernels: tuple[Kernel, ...]
    schedules: tuple[Schedule, ...]
    default_schedule: Optional[str]
    checks: tuple[ViewCheck, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()  # (file, text) of every file, for run-time errors
    # every declared channel and event; the slot tensors of those used are scratch `tensors`
    channels: tuple[Channel, ...] = ()
    mesh: Optional[Mesh] = None  # the `mesh` declaration (docs/distributed.md); None: one device
    # a mesh of several devices after the device lowering (`ir/devices.py`): the tensors' global
    # shapes and layouts, for scattering inputs and gathering outputs; None otherwise
    devices: Optional[Devices] = None

    def channel(self, name: str) -> Channel:
        for c in self.channels:
            if c.name == name:
                return c
        raise KeyError(name)

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    def tensor(self, name: str) -> TensorDecl:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def schedule(self, name: str) -> Schedule:
        for s in self.schedules:
            if s.name == name:
                return s
        raise KeyError(name)
