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

from typing import Iterable, Mapping, Optional

from ..diagnostics import Diagnostic, WspError
from ..spans import Span
from .source import source_text


class PtoError(Exception):
    """Base of every error of the seeds' Python API."""


class _Rendered(WspError):
    """A `WspError` whose `str()` is the rendered diagnostics (caret and all)."""

    def __str__(self) -> str:
        return self.render()


class CompileError(PtoError, _Rendered):
    """A workload or kernel that cannot be compiled (tracing, checking or lowering)."""


class TypeCheckError(CompileError):
    """A type or shape error: operands that do not broadcast, a view that does not fit a tile."""


class IRConversionError(CompileError):
    """A checked construct that lowering to the IR does not support."""


class KernelError(CompileError):
    """A kernel that cannot be built (its signature or body)."""


class ScheduleError(CompileError):
    """A schedule combinator or policy that is wrong."""


class ExecutionError(PtoError, _Rendered):
    """A run that failed: bad input data, a view out of range, a failing kernel."""


class ChannelError(ExecutionError):
    """A CSP pipeline that cannot make progress (deadlock) or misuses a channel."""


class ChannelClosed(ChannelError):
    """A channel used after it was closed; `channel_name` names it (the prototype's field)."""

    channel_name: Optional[str] = None


class ChannelFull(ChannelError):
    """A send into a full channel that can never drain; `channel_name` and `capacity` say which
    and how deep (the prototype's fields)."""

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
