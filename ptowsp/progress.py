"""Progress on long work: one line on a terminal, updated in place, cleared at the end
(docs/tools.md, "Progress").

A stage that may take long (building the runtime, compiling a module's C, a run) wraps itself
in `phase(text, counter)`. Nothing is shown unless a front end called `enable(stream)` (the
`wspc` command does when stderr is a terminal and `--quiet` is not given), and then only once
the phase has lasted `threshold()` seconds (0.5; `WSPC_PROGRESS_AFTER` overrides it: 0 shows
every phase at once, which is how the tests see it without a clock). `counter()` adds a figure
that changes while the phase runs (a run's tasks done of those enumerated so far), polled
by a thread of this module every 0.1 s.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, TextIO

DEFAULT_AFTER = 0.5  # seconds a phase runs before it is shown
_state: dict = {"stream": None}
_stack: list = []  # the open phases, innermost last: (text, counter, start)
_lock = threading.Lock()


def enable(stream: Optional[TextIO]) -> None:
    """Show progress on `stream` from now on (None: stop showing it)."""
    _state["stream"] = stream


def threshold() -> float:
    """Seconds a phase runs before it is shown: `WSPC_PROGRESS_AFTER`, else 0.5."""
    try:
        return max(0.0, float(os.environ.get("WSPC_PROGRESS_AFTER", DEFAULT_AFTER)))
    except ValueError:
        return DEFAULT_AFTER


def _line() -> str:
    text, counter, start = _stack[-1]
    extra = ""
    if counter is not None:
        try:
            extra = f": {counter()}"
        except Exception:  # noqa: BLE001 - a figure that cannot be read now is left out
            extra = ""
    return f"wspc: {text}{extra} ({time.monotonic() - _stack[0][2]:.1f} s)"


def _show(stream: TextIO, shown: list) -> None:
    with _lock:
        if not _stack:
            return
        line = _line()
        stream.write("\r" + line[:200] + "\x1b[K")  # \x1b[K: the rest of a longer line cleared
        stream.flush()
        shown[0] = True


@contextmanager
def phase(text: str, counter: Optional[Callable[[], str]] = None) -> Iterator[None]:
    """Say `text` (and `counter()`) while the block runs, if it runs long enough."""
    stream = _state["stream"]
    if stream is None:
        yield
        return
    with _lock:
        _stack.append((text, counter, time.monotonic()))
        outer = len(_stack) == 1
    shown = _state.setdefault("shown", [False]) if not outer else [False]
    if outer:
        _state["shown"] = shown
    stop = threading.Event()
    after = threshold()
    if after == 0:
        _show(stream, shown)  # at once, before the work: what a test sees

    def loop() -> None:
        if stop.wait(after):
            return
        while True:
            _show(stream, shown)
            if stop.wait(0.1):
                return

    thread = threading.Thread(target=loop, name="wspc-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        with _lock:
            _stack.pop()
            if not _stack and shown[0]:  # the line cleared: the terminal is as before
                stream.write("\r\x1b[K")
                stream.flush()
