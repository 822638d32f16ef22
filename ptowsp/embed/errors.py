"""The error classes of the PTO-WSP seed documents, on top of wspc's diagnostics.

Every user error of the Python embedding is a `WspError` (diagnostics at `file.py:line:col`
with the source line and a caret) and also one of the seeds' classes, so both

    except ptowsp.WspError as e: print(e.render())
    except CompileError as e:    print(e)            # str() is the same rendered text

catch it. `CompileError` and its subclasses are compile-time errors (found while tracing,
checking or lowering); `ExecutionError` and its subclasses happen while a program runs.
`from_wsp` turns a plain `WspError` (the checker's, the runtime's) into the right class.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from ..diagnostics import Diagnostic, WspError
from ..spans import Span
from .source import here, source_text


class PtoError(Exception):
    """Base of every error of the seeds' Python API."""


class _Rendered(WspError):
    """A `WspError` whose `str()` is the rendered diagnostics (caret and all).

    Made from diagnostics (wspc's errors), or, as the prototype's classes are made, from a
    message and the class's `_FIELDS` (`CompileError("bad tile", workload_name="w")`): one
    diagnostic at the line that made it, the fields set (each None unless given)."""

    _FIELDS: tuple = ()
    _DEFAULT = "error"

    def __init__(self, diagnostics: Any = None, *args: Any, **fields: Any):
        if diagnostics is not None and not isinstance(diagnostics, str):
            super().__init__(diagnostics, *args, **fields)  # (diagnostics, sources)
            return
        named = dict(zip(self._FIELDS, args))
        extra = [f for f in fields if f not in self._FIELDS or f in named]
        if len(args) > len(self._FIELDS) or extra:
            raise TypeError(f"{type(self).__name__}() takes a message and "
                            f"{', '.join(self._FIELDS) or 'nothing else'}")
        named.update(fields)
        span = here()
        text = source_text(span.file)
        super().__init__([Diagnostic(span, "embed", diagnostics or self._DEFAULT)],
                         {span.file: text} if text is not None else None)
        for f, v in named.items():
            setattr(self, f, v)

    def __str__(self) -> str:
        return self.render()


class CompileError(PtoError, _Rendered):
    """A workload or kernel that cannot be compiled (tracing, checking or lowering)."""

    _FIELDS = ("workload_name", "target")
    workload_name: Optional[str] = None
    target: Optional[str] = None


class TypeCheckError(CompileError):
    """A type or shape error: operands that do not broadcast, a view that does not fit a tile."""

    _FIELDS = ("expected", "actual")
    expected: Optional[str] = None
    actual: Optional[str] = None


class IRConversionError(CompileError):
    """A checked construct that lowering to the IR does not support."""


class KernelError(CompileError):
    """A kernel that cannot be built (its signature or body)."""


class ScheduleError(CompileError):
    """A schedule combinator or policy that is wrong."""

    _FIELDS = ("primitive", "target")
    primitive: Optional[str] = None


class ExecutionError(PtoError, _Rendered):
    """A run that failed: bad input data, a view out of range, a failing kernel."""

    _FIELDS = ("task_id", "kernel_name")
    task_id: Optional[int] = None
    kernel_name: Optional[str] = None


class ChannelError(ExecutionError):
    """A CSP pipeline that cannot make progress (deadlock) or misuses a channel."""


class ChannelClosed(ChannelError):
    """A channel used after it was closed; `channel_name` names it (the prototype's field)."""

    _FIELDS = ("channel_name",)
    _DEFAULT = "Operation on closed channel"
    channel_name: Optional[str] = None


class ChannelFull(ChannelError):
    """A send into a full channel that can never drain; `channel_name` and `capacity` say which
    and how deep (the prototype's fields)."""

    _FIELDS = ("channel_name", "capacity")
    _DEFAULT = "Channel is full"
    channel_name: Optional[str] = None
    capacity: Optional[int] = None


# diagnostic codes that say "type or shape" (TypeCheckError) or "schedule" (ScheduleError);
# a layout is part of a tensor's type (the seeds' "type-level refinement"), so the checker's
# layout, shard and placement errors are type errors too, as `LayoutIncompatibleError` is
_TYPE_WORDS = ("shape", "dtype", "type", "needs-", "not-a-tile", "not-scalar", "not-number",
               "not-bool", "matmul", "bool-", "mismatch", "bad-view", "store-value", "broadcast",
               "layout", "shard", "partial-", "replica-", "no-device", "mesh-axis")
_SCHEDULE_CODES = {"unknown-combinator", "unknown-policy", "bad-policy", "key-unbound",
                   "stream-by-without-streams", "duplicate-combinator", "missing-option",
                   "bad-option", "unknown-option", "duplicate-option", "axis-transform",
                   "positional-arg", "not-positive"}


def compile_class(diags: Iterable[Diagnostic]) -> type:
    """The seeds' class for compile-time diagnostics."""
    codes = [d.code for d in diags]
    if any(any(w in c for w in _TYPE_WORDS) for c in codes):
        return TypeCheckError
    if codes and all(c in _SCHEDULE_CODES for c in codes):
        return ScheduleError
    if codes and all(c == "unsupported" for c in codes):
        return IRConversionError
    return CompileError


def from_wsp(err: WspError, phase: str = "compile") -> PtoError:
    """The seeds' error for a `WspError` raised while compiling (`phase="compile"`) or running."""
    if isinstance(err, PtoError):
        return err
    if phase == "compile":
        cls = compile_class(err.diagnostics)
    elif any(d.code == "deadlock" for d in err.diagnostics):
        cls = ChannelError
    else:
        cls = ExecutionError
    return cls(err.diagnostics, err.sources)


def user_error(span: Span, message: str, help: Optional[str] = None,
               sources: Optional[Mapping[str, str]] = None, cls: type = CompileError,
               code: str = "embed") -> PtoError:
    """A `CompileError` (or `cls`) with one diagnostic at `span` in the user's Python file."""
    src = dict(sources or {})
    if span.file not in src:
        text = source_text(span.file)
        if text is not None:
            src[span.file] = text
    return cls([Diagnostic(span, code, message, help)], src)


__all__ = ["PtoError", "CompileError", "TypeCheckError", "IRConversionError", "KernelError",
           "ScheduleError", "ExecutionError", "ChannelError", "ChannelClosed", "ChannelFull",
           "from_wsp", "user_error", "compile_class"]
