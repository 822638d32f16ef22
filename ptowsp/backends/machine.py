"""Machine descriptions: the NPU parameters the cycle model replays a cpu_sim run on.

A machine is a TOML file; `ptowsp/backends/machines/ascend910b.toml` is built in and documents every
key with its source. A user's file may set any subset of the keys: the others keep the built-in
values, so `clock_ghz = 1.5` alone is a complete machine. Mistakes in a file are user errors,
reported like every other wspc error (`FILE:LINE:COL: error: ...`, the line, a caret).

    m = load_machine(None)              # the built-in Ascend 910B
    m = load_machine("fast.toml")       # the built-in, with fast.toml's keys on top
    cm = m.to_c(ffi)                    # a `wsp_machine *` for wsp_sim_enable
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional

from ..diagnostics import Diagnostic, Diagnostics, InternalError, WspError, did_you_mean
from ..spans import Span

BUILTIN = "ascend910b.toml"
# decision: a path beside this module, not importlib.resources: the package is always installed
# as files (package data, see pyproject.toml), and importlib.resources costs ~12 ms of imports
BUILTIN_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "machines", BUILTIN)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Machine:
    """The cores, clock, bandwidth and dispatch latencies of one NPU (see ascend910b.toml)."""

    name: str
    clock_ghz: float
    dispatchers: int
    cube_cores: int
    vector_cores: int
    cube_macs_per_cycle: int
    vector_bytes_per_cycle: int
    hbm_gbps: float
    dispatch_ns: float
    completion_ns: float
    # where a tensor placed on chip (`location = l2 | l1 | ub`) moves: L2 shared by the cores of
    # a unit as HBM is; L1 and UB per core (bytes per cycle)
    l2_gbps: float = 6400
    l1_bytes_per_cycle: int = 128
    ub_bytes_per_cycle: int = 256
    # the cube's pipes (backends/pipes.py): f32 MACs per cycle, L0C -> out bytes per cycle
    cube_f32_macs_per_cycle: int = 2048
    fix_bytes_per_cycle: int = 128
    # the DMA's unit between global memory and a core's buffers: a strided view moves the blocks
    # its elements touch (backends/cpu/cost.py)
    dma_block_bytes: int = 32
    # the interconnect (its `[interconnect]` table): NPUs per server, the links between two NPUs
    # of a server and each NPU's link out of it (backends/cpu/comm.py costs collectives on them)
    devices_per_server: int = 8
    link_gbps: float = 56
    link_latency_ns: float = 2000
    network_gbps: float = 25
    network_latency_ns: float = 5000

    def cores(self, unit: int) -> int:
        """Cores of `unit` (0: vector, 1: cube, as WSP_UNIT_* in wsp_runtime.h)."""
        return self.cube_cores if unit == 1 else self.vector_cores

    def to_c(self, ffi, out=None):
        """Fill `out` (a `wsp_machine *`; a new one when None) for the C cycle model; return it.

        Only the fields the replay reads are set: the throughput keys are used by the cost model
        in Python (backends/cpu/cost.py), which hands C finished cycle counts."""
        if out is None:
            out = ffi.new("wsp_machine *")
        out.clock_ghz = float(self.clock_ghz)
        out.dispatchers = self.dispatchers
        out.cube_cores = self.cube_cores
        out.vector_cores = self.vector_cores
        out.devices = 1
        out.dispatch_ns = float(self.dispatch_ns)
        out.completion_ns = float(self.completion_ns)
        return out


# Each key's kind and bound. "count": an integer; "number": an integer or a float.
# decision: latencies may be 0 (a machine without dispatch overhead is a useful experiment);
# clock, bandwidth, cores, dispatchers and throughputs must be positive (they divide or count).
_KEYS: dict[str, tuple[str, str]] = {
    "name": ("text", ""),
    "clock_ghz": ("number", "positive"),
    "dispatchers": ("count", "positive"),
    "cube_cores": ("count", "positive"),
    "vector_cores": ("count", "positive"),
    "cube_macs_per_cycle": ("count", "positive"),
    "vector_bytes_per_cycle": ("count", "positive"),
    "hbm_gbps": ("number", "positive"),
    "dispatch_ns": ("number", "non-negative"),
    "completion_ns": ("number", "non-negative"),
    "l2_gbps": ("number", "positive"),
    "l1_bytes_per_cycle": ("count", "positive"),
    "ub_bytes_per_cycle": ("count", "positive"),
    "cube_f32_macs_per_cycle": ("count", "positive"),
    "fix_bytes_per_cycle": ("count", "positive"),
    "dma_block_bytes": ("count", "positive"),
}
# Tables of the file: their keys (named `table.key` in messages) are Machine fields too.
_TABLES: dict[str, dict[str, tuple[str, str]]] = {
    "interconnect": {
        "devices_per_server": ("count", "positive"),
        "link_gbps": ("number", "positive"),
        "link_latency_ns": ("number", "non-negative"),
        "network_gbps": ("number", "positive"),
        "network_latency_ns": ("number", "non-negative"),
    },
}
_FIELDS = set(_KEYS) | {k for keys in _TABLES.values() for k in keys}


def load_machine(path: Optional[str] = None) -> Machine:
    """The machine in the TOML file `path` over the built-in 910B; the built-in when None.

    Raises WspError (with the file's text as its source) for unreadable files, TOML syntax
    errors, unknown keys, wrong types and out-of-range values, all reported together."""
    base = _builtin_values()
    if path is None:
        return Machine(**base)
    text = _read(str(path))
    values = _parse(text, str(path))
    return Machine(**{**base, **values})


@lru_cache(maxsize=1)
def _builtin_values() -> dict[str, Any]:
    """The built-in file's values, checked once: a broken built-in is our bug, not the user's."""
    try:
        with open(BUILTIN_PATH, encoding="utf-8") as f:
            values = _parse(f.read(), BUILTIN_PATH)
    except (OSError, WspError) as err:
        raise InternalError("machine", f"the built-in {BUILTIN} is unusable: {err}") from None
    missing = sorted(_FIELDS - set(values))
    if missing:
        raise InternalError("machine", f"the built-in {BUILTIN} lacks {', '.join(missing)}")
    return values


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as err:
        reason = ("no such file" if isinstance(err, FileNotFoundError)
                  else "not UTF-8 text" if isinstance(err, UnicodeDecodeError)
                  else getattr(err, "strerror", None) or str(err))
        span = Span(path, 0, 0, 0, 0)
        raise WspError([Diagnostic(span, "io", f"cannot read machine file: {reason}")]) from None


def _parse(text: str, filename: str) -> dict[str, Any]:
    """Parse and check one machine file: the keys it sets, as Machine field values."""
    import tomllib  # here: only runs that load a machine pay for it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise WspError([_syntax_error(err, text, filename)], {filename: text}) from None
    diags = Diagnostics({filename: text})
    values = {}
    for key, value in data.items():
        if key in _TABLES:
            if not isinstance(value, dict):
                diags.error(_value_span(text, filename, key), "machine-value",
                            f"`{key}` must be a table (`[{key}]`), not {_describe(value)}")
                continue
            for sub, v in value.items():
                if sub not in _TABLES[key]:
                    diags.error(_key_span(text, filename, sub), "machine-key",
                                f"unknown machine key `{key}.{sub}`",
                                did_you_mean(sub, _TABLES[key]))
                    continue
                message, help = _check_value(sub, v, _TABLES[key][sub], f"{key}.{sub}")
                if message:
                    diags.error(_value_span(text, filename, sub), "machine-value", message, help)
                else:
                    values[sub] = v
            continue
        if key not in _KEYS:
            diags.error(_key_span(text, filename, key), "machine-key",
                        f"unknown machine key `{key}`", did_you_mean(key, list(_KEYS) + list(_TABLES)))
            continue
        message, help = _check_value(key, value)
        if message:
            diags.error(_value_span(text, filename, key), "machine-value", message, help)
        else:
            values[key] = value
    diags.raise_if_any()
    return values


_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_AT_END = re.compile(r"\s*\(at end of document\)\s*$")


def _syntax_error(err: Exception, text: str, filename: str) -> Diagnostic:
    """tomllib's message carries its position as text ("(at line L, column C)"): move it to the
    span, where every wspc error keeps it."""
    message = str(err)
    m = _AT.search(message)
    if m:
        line, col = int(m.group(1)), int(m.group(2))
        message = message[:m.start()]
    else:
        # decision: "(at end of document)" points after the last character of the file
        message = _AT_END.sub("", message)
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    return Diagnostic(Span(filename, line, col, line, col + 1), "machine-syntax",
                      f"invalid TOML: {message[:1].lower()}{message[1:]}")


def _check_value(key: str, value: Any, rule: Optional[tuple[str, str]] = None,
                 shown: Optional[str] = None) -> tuple[Optional[str], Optional[str]]:
    """(message, help) when `value` does not suit `key` (its `rule`: `_KEYS[key]` by default;
    named `shown` in messages, the key itself by default), else (None, None)."""
    kind, bound = rule or _KEYS[key]
    key = shown or key
    if kind == "text":
        if not isinstance(value, str):
            return f"`{key}` must be a string, not {_describe(value)}", None
        return None, None
    # bool is an int in Python: it must be refused before the number checks
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"`{key}` must be a number, not {_describe(value)}", None
    if kind == "count" and not isinstance(value, int):
        whole = isinstance(value, float) and math.isfinite(value) and value.is_integer()
        return (f"`{key}` must be an integer, not {_describe(value)}",
                f"write `{key} = {int(value)}`" if whole else None)
    if not math.isfinite(value):
        return f"`{key}` must be a finite number, not {value}", None
    if bound == "positive" and value <= 0:
        return f"`{key}` must be positive, not {value}", None
    if bound == "non-negative" and value < 0:
        return f"`{key}` must not be negative, not {value}", None
    if kind == "count" and value > _INT32_MAX:
        return f"`{key}` is too large: {value} (at most {_INT32_MAX})", None
    return None, None


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the float {value}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"a {type(value).__name__}"


def _key_match(text: str, key: str) -> Optional[re.Match]:
    """The first line setting `key` (`key = `, dotted `key.x = `, or a `[key]` table header).

    decision: a plain text scan, since tomllib keeps no positions; quoted keys are not found
    and fall back to a message without a line."""
    pattern = re.compile(rf"^[ \t]*(?:\[+[ \t]*)?({re.escape(key)})[ \t]*[=.\]]", re.M)
    return pattern.search(text)


def _span_at(text: str, filename: str, start: int, end: int) -> Span:
    line = text.count("\n", 0, start) + 1
    line_start = text.rfind("\n", 0, start) + 1
    return Span(filename, line, start - line_start + 1, line, end - line_start + 1)


def _key_span(text: str, filename: str, key: str) -> Span:
    m = _key_match(text, key)
    if m is None:
        return Span(filename, 0, 0, 0, 0)
    return _span_at(text, filename, m.start(1), m.end(1))


def _value_span(text: str, filename: str, key: str) -> Span:
    """The value after `key =` on its line (up to a comment), else the key itself."""
    m = _key_match(text, key)
    if m is None:
        return Span(filename, 0, 0, 0, 0)
    line_end = text.find("\n", m.end())
    line_end = len(text) if line_end < 0 else line_end
    rest = text[m.end():line_end]
    if text[m.end() - 1] != "=" or not rest.strip():
        return _span_at(text, filename, m.start(1), m.end(1))
    lead = len(rest) - len(rest.lstrip())
    value = rest.lstrip()
    if value[:1] in "\"'":
        close = value.find(value[0], 1)
        value = value[:close + 1] if close > 0 else value
    else:
        value = value.split("#", 1)[0]
    start = m.end() + lead
    return _span_at(text, filename, start, start + len(value.rstrip()))
