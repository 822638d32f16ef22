"""The runtime under ThreadSanitizer and AddressSanitizer+UndefinedBehaviorSanitizer: stress.c
(random programs with order scopes and windows, chains, abort mode, kernel failure then reuse,
free during a run, several runtimes on several threads) must run clean. Skipped when the
compiler cannot build and run a sanitized program here."""

from __future__ import annotations

import os
import subprocess

import pytest

from .conftest import HERE, RUNTIME_DIR, compiler, runtime_sources

pytestmark = [pytest.mark.cc, pytest.mark.slow]

SANITIZERS = {
    "thread": (["-fsanitize=thread"], {"TSAN_OPTIONS": "halt_on_error=1 exitcode=66"}),
    "address,undefined": (["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"],
                          {"ASAN_OPTIONS": "detect_leaks=1 abort_on_error=0 exitcode=66",
                           "UBSAN_OPTIONS": "print_stacktrace=1 halt_on_error=1"}),
}


def sanitizer_works(cc: str, flags: list[str], env: dict, tmp_path) -> bool:
    src = tmp_path / "probe.c"
    src.write_text("#include <pthread.h>\nstatic void *f(void *a) { return a; }\n"
                   "int main(void) { pthread_t t; pthread_create(&t, 0, f, 0);"
                   " return pthread_join(t, 0); }\n")
    exe = tmp_path / "probe"
    if subprocess.run([cc, *flags, "-pthread", str(src), "-o", str(exe)],
                      capture_output=True).returncode != 0:
        return False
    return subprocess.run([str(exe)], capture_output=True, env=env, timeout=60).returncode == 0


@pytest.mark.parametrize("name", list(SANITIZERS))
def test_stress_is_sanitizer_clean(tmp_path, name):
    cc = compiler()
    if cc is None:
        pytest.skip("no C compiler")
    flags, extra_env = SANITIZERS[name]
    env = {**os.environ, **extra_env}
    if not sanitizer_works(cc, flags, env, tmp_path):
        pytest.skip(f"-fsanitize={name} is not usable here")
    exe = tmp_path / "stress"
    cmd = [cc, "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-pthread", *flags,
           "-I", str(RUNTIME_DIR), *runtime_sources(), str(HERE / "harness.c"),
           str(HERE / "stress.c"), "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe), "1"], capture_output=True, text=True, env=env, timeout=900)
    assert run.returncode == 0, run.stderr[-6000:]
    assert "stress ok" in run.stdout
