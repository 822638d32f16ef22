"""program.py declares to cffi only the part of wsp_runtime.h that Python calls: it must agree
with the header, or the stats read from C are garbage."""

from __future__ import annotations

import re
from pathlib import Path

import cffi

from ptowsp.backends.cpu import program

HEADER = Path(__file__).resolve().parents[2] / "runtime_c" / "wsp_runtime.h"


def _header_cdef() -> str:
    text = HEADER.read_text()
    return text[text.index("/* CDEF-BEGIN */") + 16:text.index("/* CDEF-END */")]


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"/\*.*?\*/", " ", s, flags=re.S)).strip()


def test_every_struct_program_py_defines_has_the_header_layout():
    full, mine = cffi.FFI(), cffi.FFI()
    full.cdef(_header_cdef())
    mine.cdef(program._CDEF)
    defined = re.findall(r"typedef struct (\w+) \{", program._CDEF)
    assert {"wsp_stats", "wsp_machine", "wsp_policy", "wsp_simsummary"} <= set(defined)
    for struct in defined:
        fields = [name for name, _ in full.typeof(struct).fields]
        assert [name for name, _ in mine.typeof(struct).fields] == fields, struct
        assert mine.sizeof(struct) == full.sizeof(struct), struct
        for name in fields:
            assert mine.offsetof(struct, name) == full.offsetof(struct, name), (struct, name)


def test_every_declared_function_is_declared_alike_in_the_header():
    header = _norm(_header_cdef())
    decls = [d for d in _norm(program._CDEF).split(";") if "(" in d and "typedef" not in d]
    assert len(decls) >= 8
    for d in decls:
        assert d.strip() + ";" in header, d
