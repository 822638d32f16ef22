"""The cpu_sim back end, and `CpuSimTarget`, its face to the driver.

IR -> C (`emit.py`: the kernels of `kernels.py` with the value code of `kernel_values.py`,
the enumerators of `enumerate.py` and `csp.py`) -> a library built through the cache with
the C runtime (`build.py`, `artifact.py`) -> loaded with cffi and run (`program.py`; output
buffers in `buffers.py`, the cycle model's costs in `cost.py`, traces in `trace.py`). Kernel C's
support code is `wsp_kernels.h` and the file layouts are `templates/*.c.j2` (package data).

The modules are imported when a target method first needs them: looking the target up costs
nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from ..target import KernelCode, target_options

if TYPE_CHECKING:
    from ...ir import nodes as N
    from .artifact import Built
    from .emit import ModuleC
    from .program import Backend


@dataclass(frozen=True)
class CpuOptions:
    """cpu_sim's settings: `workers`, the runs' default worker threads (None: the host's
    cores; `run(workers=...)` overrides it); `include_dirs`, the directories `extern cpp`
    bodies' headers are found in (each must exist)."""

    workers: Optional[int] = None
    include_dirs: tuple = ()

    def __post_init__(self):
        # decision: a missing include directory is the user's error, named, before anything is
        # built (the compiler would only say that a header is missing)
        dirs = (self.include_dirs,) if isinstance(self.include_dirs, (str, os.PathLike)) \
            else tuple(self.include_dirs or ())
        object.__setattr__(self, "include_dirs", tuple(os.fspath(d) for d in dirs))
        for d in self.include_dirs:
            if not os.path.isdir(d):
                from ...diagnostics import Diagnostic, WspError
                from ...spans import Span

                raise WspError([Diagnostic(Span(d, 0, 0, 0, 0), "io",
                                           f"include directory `{d}` does not exist"
                                           + (" (it is a file)" if os.path.exists(d) else ""),
                                           "give a directory holding the headers that `extern "
                                           "cpp` bodies include")])


@dataclass(frozen=True)
class Emitted:
    """What cpu_sim emits for a module: its C (`code.files`, `code.enumerators`)."""

    module: "N.Module"
    code: "ModuleC"
    options: CpuOptions
    warnings: tuple = ()

    @property
    def files(self) -> dict[str, str]:
        return self.code.files


class CpuSimTarget:
    """The `cpu_sim` target: C for every schedule of a module, one library, runs on the
    threaded runtime with the cycle model."""

    name = "cpu_sim"
    runs_here = True
    cycle_model = True
    one_schedule = False
    product = "a runnable artifact"

    def options(self, given: Mapping[str, Any]) -> CpuOptions:
        return target_options(self.name, CpuOptions, given)

    def emit(self, module: "N.Module", schedule: Optional[str], options: Mapping[str, Any]) -> Emitted:
        from .emit import emit_module

        opts = self.options(options)
        return Emitted(module, emit_module(module), opts)

    def kernel_code(self, module: "N.Module", kernel: str,
                    options: Mapping[str, Any]) -> KernelCode:
        from ...diagnostics import WspError
        from .emit import extern_errors
        from .kernels import emit_kernel

        self.options(options)
        errors = extern_errors(module)  # as `emit` reports them
        if errors:
            raise WspError(errors, dict(module.sources))
        k = module.kernel(kernel)
        c = emit_kernel(k, dict(module.sources))
        from .cpp_kernels import CPP_FILE, emit_cpp_kernels

        cpp = emit_cpp_kernels([k], dict(module.sources))  # an `extern cpp` body: its C++ too
        return KernelCode(c.symbol, c.source if cpp is None else f"{c.source}\n/* ==== {CPP_FILE} ==== */\n{cpp}")

    def build(self, emitted: Emitted) -> "Built":
        from .artifact import build_module

        return build_module(emitted.module, emitted.code, emitted.options.workers,
                            emitted.options.include_dirs)

    def open(self, artifact: "Built") -> "Backend":
        from .program import Backend

        return Backend(artifact)

    def load(self, directory: Path, options: Mapping[str, Any]) -> "Built":
        from .artifact import load_directory

        return load_directory(directory, self.options(options).workers)

    def cached(self, main: Path, opt_level: int, options: Mapping[str, Any],
               variant: str = "") -> Optional["Built"]:
        from .artifact import cached_build

        opts = self.options(options)
        if opts.include_dirs:
            # decision: the index of compiled sources hashes the .wsp files it read, not the
            # headers found on include directories, so a run naming them always rebuilds
            # (the build cache, keyed on the headers' text, still skips the compiler)
            return None
        return cached_build(main, opt_level, opts.workers, variant)

    def remember(self, main: Path, files: Sequence[str], artifact: "Built",
                 opt_level: int, variant: str = "") -> None:
        from .artifact import record_build

        record_build(main, files, artifact, opt_level, variant)


__all__ = ["CpuSimTarget", "CpuOptions", "Emitted"]
