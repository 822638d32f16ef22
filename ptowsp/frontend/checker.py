"""Check a `.wsp` module: load it and its imports, give every declaration its meaning, and run
the kernel and workload checkers. Every error is collected; one `WspError` is raised at the end.

Order of work: load files (imports resolved depth-first; a cycle or a clash is reported at the
`import`) → one module-wide namespace → consts folded → sym defaults, tensors, axes, channels →
kernel signatures and bodies (`kernels/`) → workloads and schedules (`workloads/`).
The result is the `ModuleEnv` (`env.py`) that lowering consumes.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from .. import sym
from ..diagnostics import (
    Diagnostic,
    Diagnostics,
    InternalError,
    Note,
    WspError,
    did_you_mean,
    printable,
)
from ..dtypes import INT_DTYPES
from ..limits import INT32_MAX, INT64_MAX, MAX_TILE_ELEMENTS, count_text, int_text
from . import ast as A
from .env import DECL_KINDS, DEFAULT_CHANNEL_DEPTH, AxisInfo, ChannelInfo, ModuleEnv, TensorInfo
from .kernels import check_kernel_body
from .mesh import check_layout, check_mesh, check_replicated_index, declared
from .nesting import nesting_errors
from .parser import parse
from .signatures import NotSymbolic, kernel_signature, to_sym
from .sources import SUFFIX, SourceError, check_source_path, read_source
from .workloads import check_workloads


def check_file(path: str) -> ModuleEnv:
    """Load and check the module in `path` (with its imports). The file is read only if it is
    a regular `.wsp` file of at most 16 MiB of UTF-8 (`sources.py`, language.md section 1)."""
    return check_source(read_main(path), str(path))


def read_main(path: str) -> str:
    """The text of the source file `path` (`sources.read_source`), or the `WspError` at the
    file that says why it is not read."""
    try:
        return read_source(path)
    except SourceError as err:
        span = A.Span(str(path), 0, 0, 0, 0)
        raise WspError([Diagnostic(span, "io", f"cannot read file: {err.reason}", err.help)]) from None


def check_readable(path: str) -> None:
    """Raise the `WspError` `check_file` would for a main file it may not read, without reading
    it (for a caller that reads the file some other way first, such as a cache lookup)."""
    try:
        check_source_path(path)
    except SourceError as err:
        span = A.Span(str(path), 0, 0, 0, 0)
        raise WspError([Diagnostic(span, "io", f"cannot read file: {err.reason}", err.help)]) from None


def check_source(text: str, filename: str = "<string>") -> ModuleEnv:
    """Check module text; imports are resolved relative to `filename`'s directory."""
    loader = _Loader()
    loader.load_main(text, filename)
    return check_files(loader.files, loader.sources, loader.diags, parsed=True)


def check_source_partial(text: str, filename: str, proofs: Optional[dict] = None
                         ) -> tuple[ModuleEnv, list[Diagnostic]]:
    """For an editor (`wspc lsp`): the module as far as its check got, and its errors (none:
    the module checks, and the environment is `check_source`'s). With errors, the environment
    holds what the declarations that were right say, and the files that parsed; the main file
    is missing from `files` when it does not parse. `proofs`: the workload checker's answers
    to keep from one check to the next (`check_workloads`)."""
    loader = _Loader()
    loader.load_main(text, filename)
    env = _checked(loader.files, loader.sources, loader.diags, parsed=True, proofs=proofs)
    try:
        loader.diags.raise_if_any()
    except WspError as err:  # sorted and deduplicated as `check_source` raises them
        return env, err.diagnostics
    return env, []


def check_files(files: list[A.SourceFile], sources: dict[str, str],
                diags: Optional[Diagnostics] = None, *, parsed: bool = False) -> ModuleEnv:
    """Check already-parsed files (the main file first) as one module. `parsed`: every file
    comes from `parse`, which held it to the nesting limits (an AST built otherwise, by the
    Python embedding, is held to them here)."""
    diags = diags if diags is not None else Diagnostics(sources)
    env = _checked(files, sources, diags, parsed=parsed)
    diags.raise_if_any()
    return env


def _checked(files: list[A.SourceFile], sources: dict[str, str], diags: Diagnostics, *,
             parsed: bool, proofs: Optional[dict] = None) -> ModuleEnv:
    """`check_files` without raising: the environment, and the errors left in `diags`."""
    diags.sources = sources
    too_deep = [] if parsed else nesting_errors(files)  # no recursive stage sees a deeper tree
    if too_deep:
        diags.extend(too_deep)
        diags.raise_if_any()
    main = files[0] if files else None
    env = ModuleEnv(name=_module_name(main), sources=sources, files=list(files))
    _DeclChecker(env, diags, proofs).run()
    return env


def _module_name(f: Optional[A.SourceFile]) -> str:
    """`module NAME`, or the file's name made an identifier (language.md section 1): the name
    reaches generated C, C++ and CMake."""
    if f is None or (f.path.startswith("<") and not f.module_name):
        return "module"  # text with no file (`ptowsp.parse(text)`)
    if f.module_name:
        return f.module_name
    name = re.sub(r"[^A-Za-z0-9_]", "_", Path(f.path).stem) or "module"
    return "_" + name if name[0].isdigit() else name


# ---------------------------------------------------------------------------------------------
# Loading and imports


class _Loader:
    """Parses the main file and, depth-first, every file it imports (each file once)."""

    def __init__(self) -> None:
        self.files: list[A.SourceFile] = []
        self.sources: dict[str, str] = {}
        self.diags = Diagnostics(self.sources)
        self.by_path: dict[Path, A.SourceFile] = {}
        self.stack: list[Path] = []

    def load_main(self, text: str, filename: str) -> None:
        self._load_text(text, filename, _resolved(filename))

    def _load_text(self, text: str, filename: str, key: Path) -> Optional[A.SourceFile]:
        self.sources[filename] = text
        try:
            sf = parse(text, filename)
        except WspError as err:
            self.diags.extend(err.diagnostics)
            return None
        self.by_path[key] = sf
        self.files.append(sf)
        self.stack.append(key)
        for d in sf.decls:
            if isinstance(d, A.Import):
                self._import(sf, d)
        self.stack.pop()
        return sf

    def _import(self, importer: A.SourceFile, imp: A.Import) -> None:
        base = _base(importer.path)
        problem = import_path_problem(imp.path)
        if problem is not None:
            self.diags.error(imp.span, "import-path", f"cannot import `{printable(imp.path)}`: {problem}",
                             "an import names a `.wsp` file by its path relative to the importing "
                             "file's folder (`../` may climb out of it)")
            return
        target = _resolved(str(base / imp.path))
        if target in self.stack:
            cycle = self.stack[self.stack.index(target):] + [target]
            chain = " -> ".join(_display(p) for p in cycle)
            self.diags.error(imp.span, "import-cycle", f"import cycle: {chain}",
                             "move the shared declarations into a file both can import")
            return
        if target in self.by_path:
            return  # already loaded (a diamond): one copy of each declaration
        try:
            # the path as written (its links followed by the reader), not `target`: a link
            # named `x.wsp` to a file named otherwise is refused
            text = read_source(base / imp.path)
        except SourceError as err:
            self.diags.error(imp.span, "import-missing",
                             f"cannot import `{printable(imp.path)}`: {err.reason}",
                             err.help or f"the path is relative to {printable(_display(base))}/")
            return
        self._load_text(text, _display(target), target)


def import_path_problem(path: str) -> Optional[str]:
    """Why the path of an `import` is not one (language.md section 1), or None."""
    if not path:
        return "the path is empty"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "the path contains a control character"
    if os.path.isabs(path):
        return "the path is absolute"
    if not path.endswith(SUFFIX):
        return f"only `{SUFFIX}` files can be imported"
    return None


def _base(importer: str) -> Path:
    """The folder an importing file's imports are relative to (`<string>`: the current one)."""
    return _resolved(importer).parent if importer != "<string>" else Path.cwd()


def _resolved(path: str) -> Path:
    """`path` absolute, its links followed where they lead somewhere (a link loop, a name no
    file can have: as it is; reading it then says what is wrong)."""
    try:
        return Path(path).resolve()
    except (OSError, ValueError, RuntimeError):  # RuntimeError: a link loop (Python < 3.13)
        return Path(os.path.abspath(path.replace("\0", "\\0")))


def import_target(importer: str, path: str) -> Optional[Path]:
    """The file an `import` of `path` in the file `importer` names, or None if it names none."""
    if import_path_problem(path) is not None:
        return None
    return _resolved(str(_base(importer) / path))


def _display(p: Path) -> str:
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:
        return str(p)


# ---------------------------------------------------------------------------------------------
# Declarations


class _DeclChecker:
    def __init__(self, env: ModuleEnv, diags: Diagnostics, proofs: Optional[dict] = None):
        self.env = env
        self.diags = diags
        self.proofs = proofs
        self.imported_by: dict[str, A.Import] = {}  # file path -> the import that brought it

    def run(self) -> None:
        self._module_decls()
        self._namespace()
        self._consts()
        self._syms()
        check_mesh(self.env, self.diags, self._resolver(allow_syms=True))
        self._tensors()
        self._axes()
        self._channels()
        self._kernels()
        check_workloads(self.env, self.diags, self.proofs)

    # -- `module NAME`: optional, first, once per file
    def _module_decls(self) -> None:
        for f in self.env.files:
            seen: Optional[A.ModuleDecl] = None
            for i, d in enumerate(f.decls):
                if not isinstance(d, A.ModuleDecl):
                    continue
                if seen is not None:
                    self.diags.error(d.span, "module-twice", "`module` is declared twice",
                                     notes=[Note(seen.span, "first declared here")])
                elif i != 0:
                    self.diags.error(d.span, "module-not-first", "`module` must be the first declaration",
                                     "move it to the top of the file")
                seen = seen or d

    # -- one module-wide namespace; clashes between files are reported at the import
    def _namespace(self) -> None:
        env = self.env
        # the import statement that brought each file in (the first one seen)
        for f in env.files:
            for d in f.decls:
                if isinstance(d, A.Import):
                    target = import_target(f.path, d.path)
                    if target is not None:
                        self.imported_by.setdefault(_display(target), d)
        for f in env.files:
            for d in declared(f.decls):
                if not isinstance(d, tuple(DECL_KINDS)):
                    continue
                name = d.name.id
                prev = env.names.get(name)
                if prev is None:
                    env.names[name] = d
                    continue
                if prev.span.file == d.span.file:
                    self.diags.error(d.name.span, "redeclared", f"`{name}` is already declared",
                                     "rename one of them",
                                     notes=[Note(prev.name.span, f"`{name}` first declared here")])
                else:
                    imp = self.imported_by.get(d.span.file)
                    where = imp.span if imp is not None else d.name.span
                    self.diags.error(where, "import-clash",
                                     f"`{name}` is declared both in {prev.span.file} and in {d.span.file}",
                                     "rename one of them",
                                     notes=[Note(prev.name.span, "declared here"),
                                            Note(d.name.span, "and here")])
        for name, d in env.names.items():
            kind = DECL_KINDS[type(d)]
            if kind == "sym":
                env.syms[name] = d
            elif kind == "kernel":
                env.kernels[name] = d
            elif kind == "workload":
                env.workloads[name] = d
            elif kind == "schedule":
                env.schedules[name] = d

    # -- consts: integers, in any order, cycles reported
    def _consts(self) -> None:
        decls = {n: d for n, d in self.env.names.items() if isinstance(d, A.ConstDecl)}
        state: dict[str, str] = {}

        def value(name: str, use: A.Name) -> sym.Expr:
            if name not in decls:
                kind = self.env.kind_of(name)
                if kind is None:
                    self.diags.error(use.span, "unknown-name", f"unknown name `{use.id}`",
                                     did_you_mean(use.id, self.env.names))
                else:
                    self.diags.error(use.span, "not-constant",
                                     f"`{use.id}` is a {kind}, not a compile-time integer",
                                     "consts may use literals and other consts")
                raise NotSymbolic()
            if state.get(name) == "busy":
                self.diags.error(use.span, "const-cycle", f"const `{name}` depends on itself")
                raise NotSymbolic()
            if name not in self.env.consts:
                state[name] = "busy"
                try:
                    e = to_sym(decls[name].value, lambda n: value(n.id, n), self.diags, "a const value")
                    v = sym.const_value(e)
                    if v is None:  # consts only reference consts, and sym folds constants
                        raise InternalError(
                            "check", f"const `{name}` folded to `{sym.to_str(e)}`, not an integer"
                        )
                    self.env.consts[name] = v
                finally:
                    state[name] = "done"
            return sym.const(self.env.consts[name])

        for name, d in decls.items():
            if name not in self.env.consts and state.get(name) != "done":
                try:
                    value(name, d.name)
                except NotSymbolic:
                    pass

    def _const_int(self, e: A.Expr, what: str) -> Optional[int]:
        try:
            v = sym.const_value(to_sym(e, self._resolver(allow_syms=False), self.diags, what))
        except NotSymbolic:
            return None
        return v

    def _resolver(self, allow_syms: bool):
        env = self.env

        def resolve(n: A.Name) -> sym.Expr:
            if n.id in env.consts:
                return sym.const(env.consts[n.id])
            kind = env.kind_of(n.id)
            if kind == "sym" and allow_syms:
                return sym.var(n.id)
            if kind == "const":  # a const whose value failed: already reported
                raise NotSymbolic()
            if kind is None:
                self.diags.error(n.span, "unknown-name", f"unknown name `{n.id}`",
                                 did_you_mean(n.id, env.names))
            else:
                allowed = "literals, consts and syms" if allow_syms else "literals and consts"
                self.diags.error(n.span, "not-integer", f"`{n.id}` is a {kind}; only {allowed} may appear here")
            raise NotSymbolic()

        return resolve

    # -- sym defaults: non-negative compile-time integers
    def _syms(self) -> None:
        for name, d in self.env.syms.items():
            v = None
            if d.default is not None:
                v = self._const_int(d.default, "a sym default")
                if v is not None and v < 0:
                    self.diags.error(d.default.span, "negative-sym", f"sym `{name}` defaults to {v}, "
                                     "but syms are non-negative")
                    v = None
                elif v is not None and v > INT64_MAX:
                    self.diags.error(d.default.span, "sym-too-large",
                                     f"sym `{name}` defaults to {int_text(v)}, more than a sym can "
                                     "be (2^63 - 1: the runtime computes in int64)")
                    v = None
            self.env.sym_defaults[name] = v

    # -- tensors: dtype known (parser), dims over literals, consts and syms
    def _tensors(self) -> None:
        resolve = self._resolver(allow_syms=True)
        for name, d in list(self.env.names.items()):
            if not isinstance(d, A.TensorDecl):
                continue
            dims, sound = [], True
            for e in d.type.dims:
                try:
                    s = to_sym(e, resolve, self.diags, "a tensor dimension")
                except NotSymbolic:
                    s, sound = sym.const(1), False
                v = sym.const_value(s)
                if v is not None and v < 0:
                    self.diags.error(e.span, "negative-dim", f"tensor dimension is negative ({int_text(v)})")
                elif v is None and sym.prove_ge(s, 0) is not True:
                    self.env.checks.append(_runtime(s, ">=", sym.const(0),
                                                    f"dimension of `{name}` must not be negative", e.span))
                dims.append(s)
            layout = check_layout(self.env, self.diags, d, tuple(dims))
            self.env.tensors[name] = TensorInfo(name, d.kind, d.type.dtype, tuple(dims), d, sound,
                                                layout)

    # -- axes
    def _axes(self) -> None:
        env = self.env
        decls = {n: d for n, d in env.names.items() if isinstance(d, A.AxisDecl)}
        state: dict[str, str] = {}

        def build(name: str) -> Optional[AxisInfo]:
            if name in env.axes:
                return env.axes[name]
            if state.get(name) == "busy":
                self.diags.error(decls[name].name.span, "axis-cycle", f"axis `{name}` is defined through itself")
                return None
            state[name] = "busy"
            info = self._axis(decls[name], build)
            state[name] = "done"
            if info is not None:
                env.axes[name] = info
            return info

        for name in decls:
            if state.get(name) != "done":
                build(name)

    def _extent_fits(self, extent: sym.Expr, at: A.Expr) -> sym.Expr:
        v = sym.const_value(extent)
        if v is not None and v > INT64_MAX:  # a loop counts in int64
            self.diags.error(at.span, "int64", f"axis extent is {int_text(v)}, more than a loop can "
                             "count (2^63 - 1: the runtime computes in int64)")
            raise NotSymbolic()
        return extent

    def _axis(self, d: A.AxisDecl, build) -> Optional[AxisInfo]:
        env, name, ax = self.env, d.name.id, d.axis
        resolve = self._resolver(allow_syms=True)
        try:
            if isinstance(ax, A.DenseAxis):
                v = self._const_int(ax.extent, "a `Dense` extent")
                if v is None:
                    return None
                if v < 0:
                    self.diags.error(ax.extent.span, "negative-extent", f"axis extent is negative ({int_text(v)})")
                    return None
                return AxisInfo(name, "dense", d, extent=self._extent_fits(sym.const(v), ax.extent))
            if isinstance(ax, A.DenseDynAxis):
                extent = to_sym(ax.extent, resolve, self.diags, "an axis extent")
                return AxisInfo(name, "densedyn", d, extent=self._extent_fits(extent, ax.extent))
            if isinstance(ax, (A.RaggedAxis, A.SparseAxis)):
                outer = self._outer_axis(ax.outer, build)
                if outer is None:
                    return None
                if isinstance(ax, A.SparseAxis):
                    indptr = self._index_tensor(ax.indptr, "indptr")
                    indices = self._index_tensor(ax.indices, "indices")
                    if indptr is None or indices is None:
                        return None
                    self._index_length(ax.indptr, "indptr", outer, 1, build)
                    return AxisInfo(name, "sparse", d, outer=outer, indptr=indptr, indices=indices)
                if isinstance(ax.lengths, A.Name) and env.kind_of(ax.lengths.id) == "tensor":
                    t = self._index_tensor(ax.lengths, "lengths")
                    if t is not None:
                        self._index_length(ax.lengths, "lengths", outer, 0, build)
                    return None if t is None else AxisInfo(name, "ragged", d, outer=outer, lengths_tensor=t)
                # an expression of `_` (the outer index); checked as a scalar expression later
                return AxisInfo(name, "ragged", d, outer=outer, lengths_expr=ax.lengths)
            if isinstance(ax, A.Name) and env.kind_of(ax.id) == "axis":
                target = build(ax.id)
                if target is None:
                    return None
                return AxisInfo(name, target.kind, d, target.extent, target.outer, target.lengths_tensor,
                                target.lengths_expr, target.indptr, target.indices)
            # an integer expression means DenseDyn(expr)
            return AxisInfo(name, "densedyn", d, extent=to_sym(ax, resolve, self.diags, "an axis extent"))
        except NotSymbolic:
            return None

    def _outer_axis(self, e: A.Expr, build) -> Optional[str]:
        if isinstance(e, A.Name) and self.env.kind_of(e.id) == "axis":
            info = build(e.id)
            if info is None:
                return None
            if info.kind in ("ragged", "sparse"):
                self.diags.error(e.span, "bad-outer-axis",
                                 f"the outer axis `{e.id}` is itself {info.kind}; nesting is not supported",
                                 "use a dense outer axis")
                return None
            return e.id
        if isinstance(e, A.Name) and self.env.kind_of(e.id) is None:
            self.diags.error(e.span, "unknown-name", f"unknown axis `{e.id}`",
                             did_you_mean(e.id, [n for n, d in self.env.names.items()
                                                 if isinstance(d, A.AxisDecl)]))
            return None
        self.diags.error(e.span, "bad-outer-axis", "the outer index space must be a named axis",
                         "declare it first: `axis batch = DenseDyn(B)`")
        return None

    def _index_length(self, e: A.Name, role: str, outer: str, extra: int, build) -> None:
        """`lengths` needs an element per outer index, `indptr` one more: an error when the
        tensor is provably shorter (a length that might be short is checked at each read)."""
        t = self.env.tensors[e.id]
        info = build(outer)
        if not t.sound or info is None or info.extent is None:
            return
        need = sym.add(info.extent, extra)
        if sym.prove_ge(t.dims[0], need) is False:
            # decision: a `lengths` (or `indptr`) tensor provably shorter than its outer axis needs (one more for `indptr`) is a compile error at the tensor's name in the axis
            self.diags.error(e.span, "bad-index-tensor",
                             f"`{role}` needs {sym.to_str(need)} elements for outer axis `{outer}`, "
                             f"but `{e.id}` has {sym.to_str(t.dims[0])}",
                             f"declare it as `{t.dtype}[{sym.to_str(need)}]`")

    def _index_tensor(self, e: A.Expr, role: str) -> Optional[str]:
        if not (isinstance(e, A.Name) and e.id in self.env.tensors):
            kind = self.env.kind_of(e.id) if isinstance(e, A.Name) else None
            if isinstance(e, A.Name) and kind is None:
                self.diags.error(e.span, "unknown-name", f"unknown tensor `{e.id}`",
                                 did_you_mean(e.id, self.env.tensors))
            else:
                self.diags.error(e.span, "bad-index-tensor", f"`{role}` must be an integer tensor")
            return None
        t = self.env.tensors[e.id]
        if t.dtype not in INT_DTYPES:
            self.diags.error(e.span, "bad-index-tensor",
                             f"`{role}` must be an integer tensor, but `{e.id}` is {t.dtype}",
                             "declare it as `i32[...]`")
            return None
        if len(t.dims) != 1:
            self.diags.error(e.span, "bad-index-tensor",
                             f"`{role}` must be a 1-D tensor, but `{e.id}` has {len(t.dims)} dimensions")
            return None
        check_replicated_index(self.env, self.diags, t, e)
        return e.id

    # -- channels and events
    def _channels(self) -> None:
        for name, d in self.env.names.items():
            if isinstance(d, A.EventDecl):
                self.env.channels[name] = ChannelInfo(name, None, 0, True, d)
            elif isinstance(d, A.ChannelDecl):
                elem, sound = None, True
                if d.elem is not None:
                    rows = self._const_int(d.elem.rows, "a tile dimension")
                    cols = self._const_int(d.elem.cols, "a tile dimension")
                    for v, e in ((rows, d.elem.rows), (cols, d.elem.cols)):
                        if v is not None and v <= 0:
                            self.diags.error(e.span, "bad-tile", f"tile dimensions must be positive, found {v}")
                    sound = rows is not None and cols is not None and rows > 0 and cols > 0
                    if sound and rows * cols > MAX_TILE_ELEMENTS:
                        self.diags.error(d.elem.span, "too-large", f"a channel item of {count_text(rows * cols)} "
                                         f"elements is more than a tile can hold ({MAX_TILE_ELEMENTS:,})")
                        sound = False
                    elem = (rows, cols, d.elem.dtype) if sound else (1, 1, d.elem.dtype)
                depth = DEFAULT_CHANNEL_DEPTH
                if d.depth is not None:
                    v = self._const_int(d.depth, "a channel depth")
                    if v is not None and v < 0:
                        self.diags.error(d.depth.span, "bad-depth", f"channel depth must be 0 or more, found {v}")
                    elif v is not None and v > INT32_MAX:  # the runtime's ring counts in int32
                        self.diags.error(d.depth.span, "bad-depth", f"channel depth must be at most "
                                         f"{INT32_MAX}, found {int_text(v)}")
                    elif v is not None:
                        depth = v
                self.env.channels[name] = ChannelInfo(name, elem, depth, False, d, sound)

    # -- kernels: signatures, then bodies
    def _kernels(self) -> None:
        for name, k in self.env.kernels.items():
            sig = kernel_signature(k, self.env.consts, self.diags)
            self.env.kernel_sigs[name] = sig
            seen: dict[str, A.KernelParam] = {}
            for p in k.params:
                if p.name.id in seen:
                    self.diags.error(p.name.span, "duplicate-param", f"parameter `{p.name.id}` is declared twice",
                                     notes=[Note(seen[p.name.id].name.span, "first declared here")])
                seen.setdefault(p.name.id, p)
            types = check_kernel_body(k, sig, self.env.consts, self.diags)
            if types is not None:
                self.env.kernel_types[name] = types


def _runtime(lhs: sym.Expr, op: str, rhs: sym.Expr, reason: str, span: A.Span):
    from .env import RuntimeCheck

    return RuntimeCheck(sym.Check(lhs, op, rhs, reason), span)


__all__ = ["check_file", "check_source", "check_source_partial", "check_files", "ModuleEnv"]
