"""Where CANN's real headers are, for the tests that check the ascend_npu tree against them
(test_real_headers.py), and the lint of emitted AI Core code.

The headers are found at run time, never copied into the project (their licence:
/work/shared/third_party/README.md):

- `$WSP_CANN_HEADERS`: a folder laid out as /work/shared/third_party is (`.ci/run` points it
  there when that folder exists): `acl/include/external/acl/acl.h` and
  `asc-devkit/include/kernel_operator.h` (with `asc-devkit/impl/` when it holds one);
- else `$ASCEND_HOME_PATH`, a real CANN installation: `include/acl/acl.h` and the Ascend C
  headers where the toolkit keeps them (`compiler/tikcpp/tikcfw`, `include/ascendc`, ...).

`headers()` gives `Headers(acl, ascendc, impl, origin)` or None; the `cann_headers` fixture
(conftest.py) skips with the reason when there are none.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# where a CANN installation keeps kernel_operator.h, relative to $ASCEND_HOME_PATH (CANN 9's
# asc-devkit layout first, then CANN 8's tikcfw)
ASCENDC_IN_INSTALL = ("include/ascendc", "asc-devkit/include", "compiler/asc/include",
                      "compiler/tikcpp/tikcfw", "tools/tikcpp/tikcfw")


@dataclass(frozen=True)
class Headers:
    acl: Path  # the folder holding acl/acl.h
    ascendc: Path  # the folder holding kernel_operator.h
    impl: Optional[Path]  # asc-devkit's impl/ (not in the public include/ copy), if present
    origin: str  # how they were found, for messages


def headers() -> Optional[Headers]:
    """The real headers, or None (see the module doc)."""
    root = os.environ.get("WSP_CANN_HEADERS")
    if root:
        r = Path(root)
        acl, asc = r / "acl/include/external", r / "asc-devkit/include"
        if (acl / "acl/acl.h").is_file() and (asc / "kernel_operator.h").is_file():
            impl = r / "asc-devkit/impl"
            return Headers(acl, asc, impl if impl.is_dir() else None, f"WSP_CANN_HEADERS={root}")
    home = os.environ.get("ASCEND_HOME_PATH")
    if home:
        h = Path(home)
        asc = next((h / d for d in ASCENDC_IN_INSTALL if (h / d / "kernel_operator.h").is_file()),
                   None)
        if (h / "include/acl/acl.h").is_file() and asc is not None:
            impl = next((p for p in (asc / "impl", asc.parent / "impl") if p.is_dir()), None)
            return Headers(h / "include", asc, impl, f"ASCEND_HOME_PATH={home}")
    return None


SKIP_REASON = ("CANN's real headers were not found: set WSP_CANN_HEADERS to a folder holding "
               "acl/include/external/acl/acl.h and asc-devkit/include/kernel_operator.h (.ci/run "
               "sets it to the shared third_party folder when that exists) or source a CANN "
               "installation's set_env.sh (ASCEND_HOME_PATH)")


# ---------------------------------------------------------------------------------------------
# the lint of AI Core code

# What bisheng refuses in AI Core code, with the source of each rule:
# - double (as a type, in a cast, as a literal without `f`) and casts between a float and an
#   unsigned integer: the review of issue 21 against bisheng's AI Core rules (the scalar unit
#   has no double; such casts are rejected in AI Core functions);
# - the C++ runtime features the device does not have: CANN's "C++ Standard Support" (Ascend C
#   programming guide, appendix): no virtual functions or inheritance, no dynamic malloc / new /
#   free, no STL, no runtime typeid, no file system I/O.
_FLOAT_TYPES = ("float", "half", "bfloat16_t")
_UNSIGNED = r"(?:uint8_t|uint16_t|uint32_t|uint64_t|unsigned(?:\s+(?:int|long|char|short))*)"
_FLOAT_LITERAL = re.compile(r"(?<![\w.])(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][+-]?\d+)?(?![\w.])")
_RULES = [
    (re.compile(r"\bdouble\b"), "`double` (the AI Core has no double)"),
    (re.compile(r"\bvirtual\b"), "a virtual function (not supported on the device)"),
    (re.compile(r"\b(?:malloc|calloc|realloc|free)\s*\(|\bnew\s+[A-Za-z_]|\bdelete\b"),
     "dynamic memory (no malloc, new or free on the device)"),
    (re.compile(r"\bstd::"), "the C++ standard library (no STL on the device)"),
    (re.compile(r"\btypeid\b|\bdynamic_cast\b"), "runtime type identification"),
    (re.compile(r"\b(?:fopen|fread|fwrite|fprintf|FILE)\b"), "file I/O (none on the device)"),
]


def _code(text: str) -> str:
    """`text` without comments, string literals and preprocessor lines."""
    text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return re.sub(r"(?m)^\s*#.*$", "", text)


def lint_aicore(text: str) -> list[str]:
    """The constructs of AI Core source `text` that bisheng refuses, as `line N: what: code`."""
    out = []
    code = _code(text)
    floats = set(re.findall(rf"\b(?:{'|'.join(_FLOAT_TYPES)})\s+([A-Za-z_]\w*)\s*[=;,)]", code))
    unsigned = set(re.findall(rf"\b{_UNSIGNED}\s+([A-Za-z_]\w*)\s*[=;,)]", code))
    float_tensors = set(re.findall(r"LocalTensor<(?:float|half|bfloat16_t)>\s*&?\s*([A-Za-z_]\w*)",
                                   code))
    for n, line in enumerate(code.split("\n"), 1):
        found = [why for rx, why in _RULES if rx.search(line)]
        for lit in _FLOAT_LITERAL.finditer(line):
            if line[lit.end():lit.end() + 1] not in ("f", "F"):
                found.append(f"a double literal `{lit.group()}` (a float literal needs `f`)")
        for m in re.finditer(rf"\(\s*{_UNSIGNED}\s*\)\s*([A-Za-z_][\w.]*)", line):
            operand = m.group(1)
            base = operand.split(".")[0]
            if (operand in floats or base in float_tensors or operand.startswith(
                    ("wsp_f32_from_bits", "wsp_round_", "wsp_i2f", "wsp_fabs", "wsp_mag_to_f32"))):
                found.append(f"a float -> unsigned cast of `{operand}`")
        for m in re.finditer(r"\(\s*(?:float|half|bfloat16_t)\s*\)\s*([A-Za-z_]\w*)", line):
            if m.group(1) in unsigned:
                found.append(f"an unsigned -> float cast of `{m.group(1)}`")
        if re.search(rf"\(\s*(?:float|half|bfloat16_t)\s*\)\s*\(\s*{_UNSIGNED}\s*\)", line):
            found.append("an unsigned -> float cast")
        out += [f"line {n}: {why}: {line.strip()}" for why in found]
    return out
