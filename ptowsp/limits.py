"""The limits of a run, in one place (docs/running.md, "Limits"): the largest value a sym takes
(the runtime computes in int64), the most worker threads, and the memory a run may use (the
machine's, or a limit the user sets with `--max-memory SIZE` or `max_memory=`).

Importing it is cheap (the `wspc` command reads it to build its options).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple, Optional, Union

INT64_MAX = 2**63 - 1  # the largest sym value: the runtime's arithmetic is int64
INT32_MAX = 2**31 - 1  # the largest count of a schedule (the runtime's policy record)
# decision: a fixed number, not a multiple of the cores, so that a command line that works on
# one machine works on every machine; far more threads than any host's cores only thrash
MAX_WORKERS = 256
# the largest source file wspc reads (language.md section 1): far past any real module
MAX_SOURCE_BYTES = 16 << 20
# what one task passes its kernel (the runtime's `wsp_task`, runtime_c/wsp_runtime.h, and the
# Ascend plan's words): tiles (tile parameters, gather indices, CSP slot accesses), scalar
# parameters, and coordinates (the bracket list of a call)
MAX_TILES = 16
# the most elements one tile holds (rows x columns): a tile is one task's working set, held
# whole in memory (a partial view is padded to it); 2^24 is 64 MiB of f32, past any real tile
MAX_TILE_ELEMENTS = 1 << 24
# decision: the most terms, factors and atoms of an integer expression once expanded (a power
# counts as its factors): every size, bound and index the module computes stays a short C
# expression and a fast proof; a real one has a dozen
MAX_INT_EXPR = 256
MAX_SCALARS = 16
MAX_COORDS = 8

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
_SIZE = r"([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]?)(?:I?B)?"


def parse_size(text: str) -> int:
    """Bytes from `8G`, `512M`, `1.5GiB`, `4096` (binary units: K = 1024; `B`/`iB` may
    follow). A `ValueError` for anything else, or for no bytes at all."""
    import re
    from decimal import Decimal

    m = re.fullmatch(_SIZE, text.strip(), re.ASCII | re.IGNORECASE)
    if m is None:
        raise ValueError(f"`{text}` is not a size (such as 8G, 512M, 1.5GiB or 4096)")
    n = int(Decimal(m.group(1)) * _UNITS[m.group(2).upper()])
    if n <= 0:
        raise ValueError(f"`{text}` is no memory at all")
    if n > INT64_MAX:
        raise ValueError(f"`{text}` is more than the largest size wspc handles (2^63 - 1 bytes)")
    return n


def int_text(n: int) -> str:
    """An integer for messages, however large: exact up to 300 digits, else its magnitude
    (`about 2^14000`): Python refuses to print an int past 4,300 digits, and a constant folded
    from a hostile file (`128 * 128 * ...`) can be one."""
    if n.bit_length() <= 1000:
        return str(n)
    return f"{'-' if n < 0 else ''}about 2^{n.bit_length() - 1}"


def count_text(n: int) -> str:
    """A count for messages: `16,777,216`, or its magnitude past 300 digits (`int_text`)."""
    return f"{n:,}" if n.bit_length() <= 1000 else int_text(n)


def size_text(n: int) -> str:
    """Bytes for messages, in the largest binary unit that keeps a digit before the point:
    `1024.0 GiB`, `3.0 MiB`, `512 bytes` (past 2^1000 bytes, the magnitude: `int_text`)."""
    if n.bit_length() > 1000:
        return f"{int_text(n)} bytes"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and (unit != "TiB" or n >= 2**50):
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


class MemoryLimit(NamedTuple):
    """The bytes a run may use, and what set the limit (for messages)."""

    bytes: int
    what: str  # "the machine's memory (23.5 GiB)", "--max-memory 8G", "max_memory = 1.0 GiB"
    option: bool = False  # set by the user (else the machine's: raising it takes an option)


def memory_limit(max_memory: Union[None, int, str, MemoryLimit] = None) -> MemoryLimit:
    """The limit of a run: `max_memory` (bytes, or a size such as "8G") if given, else the
    machine's memory."""
    if isinstance(max_memory, MemoryLimit):
        return max_memory
    if max_memory is None:
        n, what = machine_memory()
        return MemoryLimit(n, f"{what} ({size_text(n)})")
    if isinstance(max_memory, str):
        n = parse_size(max_memory)
        return MemoryLimit(n, f"max_memory = {max_memory!r}", True)
    if isinstance(max_memory, bool) or not isinstance(max_memory, int) or \
            not 0 < max_memory <= INT64_MAX:
        raise ValueError(f"max_memory must be a number of bytes from 1 to 2^63 - 1, or a size "
                         f"such as '8G', not {max_memory!r}")
    return MemoryLimit(max_memory, f"max_memory = {size_text(max_memory)}", True)


@lru_cache(maxsize=1)  # asked on every run; it does not change while a process lives
def machine_memory() -> tuple[int, str]:
    """(bytes, what) of the memory this process can have: the least of the physical memory,
    its cgroup's memory limit (a container's) and its address-space limit (`ulimit -v`)."""
    found = []
    try:
        found.append((os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
                      "the machine's memory"))
    except (ValueError, OSError):
        pass
    cgroup = _cgroup_limit()
    if cgroup is not None:
        found.append((cgroup, "the memory limit of this process's cgroup"))
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY and soft > 0:
            found.append((soft, "the address-space limit (ulimit -v)"))
    except (ImportError, ValueError, OSError):
        pass
    if not found:  # no way to know: no limit but int64's
        return INT64_MAX, "the largest size wspc handles"
    return min(found)


def _cgroup_limit() -> Optional[int]:
    """The memory limit of this process's cgroup (v2 `memory.max`, v1
    `memory.limit_in_bytes`), or None when there is none."""
    candidates = []
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                candidates.append(Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.max")
            elif "memory" in controllers.split(","):
                candidates.append(Path("/sys/fs/cgroup/memory") / path.lstrip("/") /
                                  "memory.limit_in_bytes")
    except (OSError, ValueError):
        pass
    candidates += [Path("/sys/fs/cgroup/memory.max"),
                   Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")]
    limits = []
    for p in candidates:
        try:
            text = p.read_text().strip()
        except OSError:
            continue
        if text.isascii() and text.isdigit() and 0 < int(text) < 2**62:  # "max": none
            limits.append(int(text))
    return min(limits) if limits else None
