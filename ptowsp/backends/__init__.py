"""Back ends: `TARGETS` (name -> target), each behind the `Target` protocol (`target.py`).

A target turns an optimised IR module into what runs or ships, in three steps the driver
(`ptowsp/driver.py`) calls one after another, so a caller can stop between them:

    emitted = target.emit(module, schedule, options)   # strings only: no file is touched
    artifact = target.build(emitted)                    # compiled (and cached), or the product
    runnable = target.open(artifact)                    # ready to run here, or the product

- `ref` (`backends/ref`): the NumPy interpreter of the IR, the oracle. It emits nothing;
  `open` gives the interpreter.
- `cpu_sim` (`backends/cpu`): C kernels and enumerators built through the cache with the C
  runtime; `open` loads the library with cffi. Its artifacts outlive the process: an
  artifact directory (`load`) and the index of compiled sources (`cached` / `remember`).
- `ascend_npu` (`backends/ascend`): a CANN project tree. It does not run here: `build` and
  `open` give the `Project` (files, warnings, `write(directory)`).

Targets are imported on first lookup, so `import ptowsp` (and every `wspc` start) pays for no
back end: `TARGETS` knows the names without loading anything. Nothing inside a back end imports
this registry (what they share is in `target.py`, `templates.py`, `externs.py`), so no back end
reaches another through it.
"""

from __future__ import annotations

from typing import Callable, Iterator, Mapping

from .target import Target, TargetError


def _ref() -> Target:
    from .ref import RefTarget

    return RefTarget()


def _cpu_sim() -> Target:
    from .cpu import CpuSimTarget

    return CpuSimTarget()


def _ascend_npu() -> Target:
    from .ascend import AscendTarget

    return AscendTarget()


class _Targets(Mapping):
    """name -> target, each imported and made the first time it is looked up."""

    def __init__(self, makers: dict[str, Callable[[], Target]]):
        self._makers = makers
        self._made: dict[str, Target] = {}

    def __getitem__(self, name: str) -> Target:
        if name not in self._made:
            self._made[name] = self._makers[name]()
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


TARGETS: Mapping[str, Target] = _Targets({"cpu_sim": _cpu_sim, "ref": _ref,
                                          "ascend_npu": _ascend_npu})


def target(name: str) -> Target:
    """The target called `name`; any other name is a `TargetError` listing the targets."""
    if name not in TARGETS:
        names = [repr(n) for n in TARGETS]
        raise TargetError(f"unknown target {name!r}: use {', '.join(names[:-1])} or {names[-1]}")
    return TARGETS[name]
