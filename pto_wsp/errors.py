"""`pto_wsp.errors`: the prototype's error classes, which are wspc's (`ptowsp.embed.errors`):
each is also a `ptowsp.WspError` whose text is the rendered diagnostics."""

from ptowsp.embed.errors import (
    ChannelClosed,
    ChannelError,
    ChannelFull,
    CompileError,
    ExecutionError,
    IRConversionError,
    KernelError,
    PtoError,
    ScheduleError,
    TypeCheckError,
)

__all__ = ["PtoError", "CompileError", "TypeCheckError", "IRConversionError", "ExecutionError",
           "KernelError", "ScheduleError", "ChannelError", "ChannelClosed", "ChannelFull"]
