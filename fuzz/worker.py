"""A long-lived `wspc` process for the fuzzer: runs command lines in-process, one per request.

Reads one JSON object per line on stdin, `{"argv": [...], "cwd": "..."}`, runs `wspc ARGV` in
`cwd` through click's test runner (the same code path as the command, without a Python start
per input), and writes one JSON line back: the exit status, stdout, stderr, and the traceback
of any exception that escaped the command (a bug: the command must turn everything into an
exit status). Arguments travel as text with surrogate escapes, so file names that are not UTF-8
reach wspc exactly as they would from a shell.

The parent (`harness.py`) enforces time limits and notices signals: a hang or a crash ends
this process, and the parent starts a new one. The address space is capped (WSPC_FUZZ_MEM_GB,
default 6) so that an allocation past the machine fails in this process, not in the machine.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import traceback


def main() -> int:
    gb = float(os.environ.get("WSPC_FUZZ_MEM_GB", "6"))
    limit = int(gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from click.testing import CliRunner

    from ptowsp.cli import main as wspc

    runner = CliRunner()
    out = sys.stdout
    for line in sys.stdin:
        req = json.loads(line)
        os.chdir(req["cwd"])
        result = runner.invoke(wspc, req["argv"], catch_exceptions=True, prog_name="wspc")
        escaped = None
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            escaped = "".join(traceback.format_exception(*result.exc_info))
        reply = {"exit": result.exit_code, "stdout": result.stdout, "stderr": result.stderr,
                 "escaped": escaped}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
