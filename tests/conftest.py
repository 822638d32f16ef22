"""Shared test machinery: golden files (`pytest --update-golden` rewrites them), the build
cache of a module's cpu_sim programs, reproducible hypothesis runs, Python functions for `ref`'s
extern kernels, and a guard that fails a test which leaves global state changed behind it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

GOLDEN = Path(__file__).resolve().parent / "golden"

# Hypothesis: the same examples on every run and every machine (`derandomize`), so a failure in
# CI fails again on a developer's machine; `print_blob` prints what reproduces a failure; no
# deadline (a loaded machine must not turn a slow example into a failure: tests never assert
# time). Profiles made here are inherited by every `settings(...)` of the test modules, which
# are imported after this file. `pytest --hypothesis-profile explore` searches with fresh
# random examples instead (a finding becomes an explicit `@example` of the test).
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("explore", derandomize=False, print_blob=True, deadline=None)
settings.load_profile("ci")


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/* files")


@pytest.fixture
def golden(request):
    """`golden(name, text)` compares `text` with tests/golden/<name>."""

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if request.config.getoption("--update-golden"):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        if not path.exists():
            pytest.fail(f"golden file {path} is missing; run `pytest --update-golden` to create it")
        assert text == path.read_text(), f"output differs from {path} (pytest --update-golden rewrites it)"

    return check


@pytest.fixture(scope="module")
def wspc_cache(tmp_path_factory):
    """One C build cache for the module, at the path the other cpu_sim tests use (the runtime
    library is built once per session); the caller's WSPC_CACHE_DIR comes back after it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WSPC_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "wspc-cache"))
        yield


@pytest.fixture
def ref_extern():
    """ref_extern(name, fn): `ref` runs extern kernel `name` with `fn` for this test only (the
    registration is global: it is undone when the test ends, whatever happens)."""
    from ptowsp.backends.ref import register_extern, unregister_extern

    names: list[str] = []

    def register(name: str, fn) -> None:
        register_extern(name, fn)
        names.append(name)

    yield register
    for name in names:
        unregister_extern(name)


def _global_state() -> dict:
    """What a test must leave as it found it (each a value that compares by content)."""
    from ptowsp.backends import TARGETS
    from ptowsp.backends.ref import runner
    from ptowsp.ir.passes import PASSES

    return {
        "ref externs": dict(runner._EXTERNS),
        # (pytest names the running test and its phase in PYTEST_CURRENT_TEST)
        "environment": {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"},
        "working directory": os.getcwd(),
        "numpy error handling": np.geterr(),
        "sys.path": list(sys.path),
        "targets": sorted(TARGETS),
        "passes": list(PASSES),
        "hypothesis profile": settings._current_profile,
    }


def _changed(before: dict, after: dict) -> list[str]:
    out = []
    for key, was in before.items():
        now = after[key]
        if now == was:
            continue
        if isinstance(was, dict):
            diff = sorted({k for k in was.keys() | now.keys() if was.get(k) != now.get(k)})
            out.append(f"{key}: {', '.join(map(str, diff))}")
        else:
            out.append(f"{key}: {was!r} -> {now!r}")
    return out


def _state_kept(request):
    """Yield once; then fail `request`'s test or module if the global state changed meanwhile."""
    before = _global_state()
    yield
    changed = _changed(before, _global_state())
    if changed:
        pytest.fail(f"{request.node.nodeid} left global state changed: {'; '.join(changed)}",
                    pytrace=False)


@pytest.fixture(autouse=True)
def _no_leaked_state(request):
    """Fails a test that leaves global state changed (a registered extern, an environment
    variable, the working directory...): the next test would run in a world it did not ask
    for. Fixtures that restore what they change (monkeypatch, ref_extern) end before this
    check."""
    yield from _state_kept(request)


@pytest.fixture(autouse=True, scope="module")
def _no_leaked_module_state(request):
    """The same for a test module's own fixtures (module-scoped registrations and settings)."""
    yield from _state_kept(request)
