"""Shared test machinery: golden files (`pytest --update-golden` rewrites them) and the build
cache of a module's cpu_sim programs."""

from __future__ import annotations

from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"


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
