"""Hang guards: a call that could hang (a deadlock the code under test should have detected, a
wait that should have ended) runs in a thread and fails the test after a generous limit.

The limit only turns a hang into a failure; it is never the property a test checks, so it is
long enough for a loaded machine (tests never assert elapsed time: timing is in benchmarks/)."""

from __future__ import annotations

import threading

import pytest

GUARD = 120  # seconds


class Pending:
    """fn() started in a thread: a call that blocks until the test releases what it waits for.
    `result()` joins it under the hang guard and returns its value (or raises its exception).
    C calls through cffi release the GIL, so the test's thread goes on meanwhile."""

    def __init__(self, fn):
        self._result: list = []
        self._errors: list = []

        def body():
            try:
                self._result.append(fn())
            except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
                self._errors.append(e)

        self._thread = threading.Thread(target=body, daemon=True)
        self._thread.start()

    def result(self, seconds: float = GUARD):
        self._thread.join(seconds)
        if self._thread.is_alive():
            pytest.fail(f"no progress after {seconds} s (a hang guard: deadlock?)")
        if self._errors:
            raise self._errors[0]
        return self._result[0]


def call_with_timeout(fn, seconds: float = GUARD):
    """fn() under the hang guard: its value, or its exception, or a failure if it hangs."""
    return Pending(fn).result(seconds)


def wait_until(condition, what: str, polls: int = 2400) -> None:
    """Poll `condition()` every 50 ms until it holds, for another process to reach a state (a
    run under way); fail after `polls` polls (2 minutes) as a hang guard. It counts polls and
    never reads the clock: how long it took is never what a test checks."""
    pause = threading.Event()
    for _ in range(polls):
        if condition():
            return
        pause.wait(0.05)
    pytest.fail(f"{what}: not reached after {polls} polls (a hang guard)")
