"""`pto_wsp.csp`: the prototype's CSP module, with wspc's meaning (docs/python.md): channels,
events, processes, `send` / `consume`, `connect`, `replicate`, and events' `record`,
`synchronize`, `query`. `ProcessBuilder` is `Process` (`process(name)` returns one, with
`.consumes(...)`, `.produces(...)` and `.body(...)`)."""

from typing import TypeVar

from ptowsp.embed.csp import (
    Process,
    connect,
    consume,
    process,
    query,
    record,
    replicate,
    send,
    synchronize,
    try_send,
)
from ptowsp.embed.values import Channel, Event
from ptowsp.embed.workload import Workload

T = TypeVar("T")
ProcessBuilder = Process

__all__ = ["Channel", "Event", "process", "ProcessBuilder", "Process", "send", "try_send",
           "consume", "connect", "replicate", "record", "synchronize", "query", "Workload", "T"]
