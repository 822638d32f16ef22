"""The ascend_npu tree checked against CANN's real headers (docs/ascend.md, "What was verified
here"), found at run time (tests/ascend/cann.py; skipped with the reason when absent):

1. the host program (`host/main.asc`, both routes, with the expander on the CANN 8 one)
   compiles against the real `acl/acl.h` (`-fsyntax-only`: the library is not here);
2. every Ascend C name the emitted AI Core code uses, over every kernel of every example and
   test program at -O0 and -O2 and the kernels of every primitive (test_aicore.py's units and
   edge kernels), is declared by the real headers in the namespace the code names it in, and
   `GetTPipePtr` in the global one;
3. every declaration of the project's CPU Ascend C (ascendc_cpu/kernel_operator.h, which the
   kernels are compiled and run against in the other tests) that the emitted code can reach,
   free functions, the members it calls and the parameter structs' constructors, is one of the
   real declarations: the same namespace, name, template parameters, parameter types and
   defaults (cann_decls.py). So a call the stand-in accepts, the real headers accept;
4. no emitted AI Core source has a construct bisheng refuses (cann.lint_aicore: double, float
   <-> unsigned casts, the C++ runtime features the device lacks).

Why not compile the kernels against the real headers directly: the public copy of the Ascend C
headers has only `include/`; its declarations include `impl/` headers (the implementations,
and the base types: HardEvent, TPosition, pipe_t, ...) that are not public here, so a compile
needs a stand-in for a large part of the API. Checking the stand-in's declarations against the
real ones, and compiling the kernels against the stand-in, checks the same calls with nothing
invented: docs/ascend.md says what this leaves to a real installation (the enums of impl/,
listed in IMPL_ONLY, checked when the headers come with their impl/).
"""

from __future__ import annotations

import re
import subprocess

import pytest

import ptowsp
from ptowsp.backends.ascend import aicore, emit_project
from ptowsp.driver import choose_schedule
from ptowsp.ir import nodes as N
from ptowsp.ir.passes import optimize

from .cann import lint_aicore
from .cann_decls import Index, scan, scan_files
from .hostrun import LAUNCH
from .streams import CXX, HERE, ROOT

pytestmark = pytest.mark.cc

# the names the emitted code uses that asc-devkit declares in impl/ (not in the public
# include/): checked against a CANN installation's headers, which have impl/; by hand here
# against asc-devkit's impl/ at the commit of /work/shared/third_party (docs/ascend.md)
IMPL_ONLY = {"CMPMODE", "CacheLine", "DcciDst", "HardEvent", "RoundMode", "SELMODE", "TEventID",
             "TPosition", "ReduceType", "ReduceOrder"}
# the stand-in's classes, and the real classes declaring what the kernels call on them
CLASSES = {"LocalTensor": ("LocalTensor",), "GlobalTensor": ("GlobalTensor",),
           "TPipe": ("TPipe",), "TBuf": ("TBuf",), "TQue": ("TQue", "TQueBind"),
           "DataCopyParams": ("DataCopyParams",), "DataCopyExtParams": ("DataCopyExtParams",),
           "DataCopyPadExtParams": ("DataCopyPadExtParams",),
           "CopyRepeatParams": ("CopyRepeatParams",), "BrcbRepeatParams": ("BrcbRepeatParams",),
           # the sorts' (aicore/sorting.py)
           "MrgSort4Info": ("MrgSort4Info",), "MrgSortSrcList": ("MrgSortSrcList",),
           # the cube kernels' (aicore/cube.py, wsp_cube.h)
           "Nd2NzParams": ("Nd2NzParams",), "LoadData2DParams": ("LoadData2DParams",),
           "MmadParams": ("MmadParams",), "FixpipeParamsV220": ("FixpipeParamsV220",),
           "InitConstValueParams": ("InitConstValueParams",),
           "LoadData2dTransposeParams": ("LoadData2dTransposeParams",)}
HOST_PROGRAMS = ("examples/rmsnorm.wsp", "examples/moe.wsp", "examples/megakernel.wsp",
                 "examples/attention_varlen.wsp")


@pytest.fixture(scope="module")
def real(cann_headers) -> Index:
    files = sorted(cann_headers.ascendc.rglob("*.h"))
    if cann_headers.impl is not None:
        files += sorted(cann_headers.impl.rglob("*.h"))
    return scan_files(files)


@pytest.fixture(scope="module")
def stand_in() -> Index:
    """The CPU Ascend C as the compiler sees it (its macros expanded)."""
    done = subprocess.run([CXX, "-std=c++17", "-E", "-P", "-x", "c++", "-I",
                           str(HERE / "ascendc_cpu"), "-"], input='#include "kernel_operator.h"\n',
                          capture_output=True, text=True, check=True)
    return scan(done.stdout)


def _corpus() -> dict[str, str]:
    """Every emitted AI Core source: each program's kernels at -O0 and -O2 (test_aicore's
    units), the edge kernels of every primitive, a dispatcher, the shared header."""
    from . import test_aicore as T

    out = {}
    for name, m, _ in T.UNITS:
        for path, text in aicore.emit_aicore(m).items():
            out[f"{name}/{path}"] = text
    edges = T._edge_kernels() + [T._big_kernel()]
    m = N.Module("edges", (), (), tuple(edges), (), None)
    for path, text in aicore.emit_aicore(m).items():
        out[f"edges/{path}"] = text
    mod, _ = optimize(ptowsp.load(str(ROOT / "examples/megakernel.wsp")).ir, 2)
    tree = emit_project(mod, choose_schedule(mod, None)).files
    out["megakernel/aicore/dispatch.asc"] = tree["aicore/dispatch.asc"]
    # the cube path: a GEMM of f16 tiles (its kernel, wsp_cube.h, both dispatchers), and the
    # kernel of every layout and output dtype
    from .test_cube import GEMM16, program

    mod, _ = optimize(ptowsp.parse(GEMM16, "gemm16.wsp").ir, 2)
    for path, text in emit_project(mod, "main").files.items():
        if path.startswith("aicore/"):
            out[f"gemm16/{path}"] = text
    # a mixed kernel split over the AIC and the AIVs (swiglu_ffn's gate at -O1): its parts, its
    # MIX entries, the MIX dispatcher with its cross-core flags
    mod, _ = optimize(ptowsp.load(str(ROOT / "examples/swiglu_ffn.wsp")).ir, 1)
    for path, text in emit_project(mod, "main").files.items():
        if path.startswith("aicore/"):
            out[f"swiglu_mix/{path}"] = text
    assert "CrossCoreSetFlag" in out["swiglu_mix/aicore/kernel_gate.h"]
    # at -O2, gate and down fused: a chain cube -> vector -> cube (flags in both directions)
    mod, _ = optimize(ptowsp.load(str(ROOT / "examples/swiglu_ffn.wsp")).ir, 2)
    for path, text in emit_project(mod, "main").files.items():
        if path.startswith("aicore/"):
            out[f"swiglu_chain/{path}"] = text
    assert "CrossCoreSetFlag<2, PIPE_MTE3>(2)" in out["swiglu_chain/aicore/kernel_gate__down.h"]
    for dt, o in (("f16", "f32"), ("bf16", "bf16"), ("f16", "f16"), ("f32", "f32")):
        m = ptowsp.parse(program(40, 300, 24, dt, o), f"cube_{dt}_{o}.wsp").ir
        for path, text in aicore.emit_aicore(m).items():
            out[f"cube_{dt}_{o}/{path}"] = text
    # the sorts: Sort32 alone (rows of 8), Sort32 runs merged by MrgSort (rows of 70)
    from .test_sort32 import _kernel as sort_kernel

    m = ptowsp.parse("module sorts\n" + sort_kernel(0, 4, 8, "f32", 2)
                     + sort_kernel(1, 4, 70, "bf16", 5), "sorts.wsp").ir
    for path, text in aicore.emit_aicore(m).items():
        out[f"sorts/{path}"] = text
    return out


@pytest.fixture(scope="module")
def corpus() -> dict[str, str]:
    return _corpus()


def _code(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


# ---------------------------------------------------------------------------------------------
# 1. the host program against the real acl.h


@pytest.mark.parametrize("program", HOST_PROGRAMS)
def test_host_compiles_against_the_real_acl(cann_headers, tmp_path, program):
    mod, _ = optimize(ptowsp.load(str(ROOT / program)).ir, 2)
    tree = tmp_path / "tree"
    emit_project(mod, choose_schedule(mod, None)).write(tree)
    base = [CXX, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
            f"-I{cann_headers.acl}", f"-I{tree / 'include'}", f"-I{tree / 'host'}"]
    # CANN 8: the expander compiled into the host program
    for src in ("host/main.asc", "aicpu/expand.aicpu"):
        done = subprocess.run([*base, "-DWSP_HOST_EXPANDER=1", f"-I{tree / 'host/host_expander'}",
                               "-x", "c++", str(tree / src)], capture_output=True, text=True)
        assert done.returncode == 0, f"{src} (CANN 8 route):\n{done.stderr[-3000:]}"
    # CANN 9: the AICPU kernel launched with <<<...>>>, which the host compiler cannot read:
    # each launch checked as a call of its configuration (blocks, L2 control, an aclrtStream)
    main = (tree / "host/main.asc").read_text()
    launches = LAUNCH.findall(main)
    assert launches, "no <<<...>>> launch in host/main.asc"
    main = LAUNCH.sub(lambda m: f"wsp_launch_config({m.group(2)}, {m.group(3)}, {m.group(4)}), "
                                f"(void){m.group(1)}, (void)({m.group(5)});", main)
    (tree / "host/main_cann9.cpp").write_text(
        '#include "acl/acl.h"\n#define __global__\n#define __aicpu__\n'
        "static inline void wsp_launch_config(uint32_t, void *, aclrtStream) {}\n" + main)
    done = subprocess.run([*base, "-Wno-unused-value", str(tree / "host/main_cann9.cpp")],
                          capture_output=True, text=True)
    assert done.returncode == 0, f"host/main.asc (CANN 9 route):\n{done.stderr[-3000:]}"


def test_acl_calls_are_declared_as_used(cann_headers):
    """The ACL calls the fixes rely on, as the real acl_rt.h declares them."""
    text = (cann_headers.acl / "acl/acl_rt.h").read_text(errors="replace")
    assert "#define ACL_EVENT_SYNC 0x00000001U" in text
    assert re.search(r"aclrtCreateEventWithFlag\(aclrtEvent\s*\*\s*event,\s*uint32_t flag\)", text)
    assert re.search(r"aclrtResetEvent\(aclrtEvent event,\s*aclrtStream stream\)", text)


# ---------------------------------------------------------------------------------------------
# 2 and 3. the Ascend C names and declarations


def test_getTPipePtr_is_global(real, stand_in, corpus):
    assert real.functions("GetTPipePtr", ns=()), "the real GetTPipePtr is not global any more"
    assert not real.functions("GetTPipePtr")
    assert stand_in.functions("GetTPipePtr", ns=()) and not stand_in.functions("GetTPipePtr")
    for path, text in corpus.items():
        assert "AscendC::GetTPipePtr" not in _code(text), path


def test_every_ascendc_name_is_declared(real, cann_headers, corpus):
    used = set()
    for text in corpus.values():
        used |= set(re.findall(r"\bAscendC::(\w+)", _code(text)))
    declared = real.names()
    missing = sorted(u for u in used - declared if u not in IMPL_ONLY)
    assert not missing, f"used as AscendC::X but not declared by the real headers: {missing}"
    if cann_headers.impl is not None:  # a CANN installation: impl/ is there to check too
        assert not (used & IMPL_ONLY) - declared, sorted((used & IMPL_ONLY) - declared)
    # every enum member used is the real enum's, where the scanned headers declare the enum
    for text in corpus.values():
        for enum, member in re.findall(r"\bAscendC::(\w+)::(\w+)", _code(text)):
            members = real.enums.get(("AscendC", enum))
            if members is not None:
                assert member in members, f"AscendC::{enum}::{member}"


def _mismatches(real: Index, stand_in: Index, corpus: dict[str, str]) -> list[str]:
    code = "\n".join(_code(t) for t in corpus.values())
    used = set(re.findall(r"\bAscendC::(\w+)", code))
    methods = set(re.findall(r"\.\s*(?:template\s+)?([A-Za-z_]\w*)\s*(?:<[^;()]*>)?\s*\(", code))
    methods |= {"operator[]"} if re.search(r"\w\[[^\]]+\]\s*,", code) else set()
    out = []
    checked = 0
    for name in sorted(used):
        want = {d.signature() for d in real.functions(name)}
        for d in stand_in.functions(name):
            checked += 1
            if d.signature() not in want:
                out.append(f"AscendC::{name}: the stand-in's `{d.text}` is no real declaration")
    for cls, real_classes in CLASSES.items():
        if cls not in used:
            continue
        names = methods | {cls}  # the members called, and the constructors
        want: dict[str, set] = {}
        for d in real.decls:
            if d.cls in real_classes and d.ns[:1] == ("AscendC",):
                want.setdefault(d.name.replace(real_classes[0], cls), set()).add(d.signature())
        for d in stand_in.decls:
            if d.cls != cls or d.ns != ("AscendC",) or d.name not in names:
                continue
            if cls in ("LocalTensor", "GlobalTensor") and d.name == cls and not d.params:
                continue  # the default constructor: declared in impl's base on the device
            checked += 1
            if d.signature() not in want.get(d.name, set()):
                out.append(f"AscendC::{cls}::{d.name}: the stand-in's `{d.text}` is no real "
                           "declaration")
    assert checked > 40, f"only {checked} declarations compared: the scan found too little"
    return out


def test_stand_in_declarations_are_the_real_ones(real, stand_in, corpus):
    bad = _mismatches(real, stand_in, corpus)
    assert not bad, "\n".join(bad)


def test_a_wrong_stand_in_declaration_is_caught(real, stand_in, corpus):
    """The check is not vacuous: a stand-in declaring ReduceRepeat (which the row reductions
    call) with its mask as uint32_t, Mmad with its MmadParams by pointer, or GetTPipePtr inside
    AscendC (as it once did), is caught."""
    wrong = scan("namespace AscendC { template <typename T> class LocalTensor {};\n"
                 "template <ReduceType reduceType, typename T, typename U, bool isSetMask = true> "
                 "void ReduceRepeat(const LocalTensor<T> &d, const LocalTensor<U> &s, "
                 "const uint32_t mask, const int32_t repeatTime, const int32_t dstRepStride, "
                 "const int32_t srcBlkStride, const int32_t srcRepStride, "
                 "ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX); }")
    merged = Index(stand_in.decls + wrong.decls, stand_in.enums, stand_in.classes, stand_in.types)
    assert any("ReduceRepeat" in b for b in _mismatches(real, merged, corpus))
    # and on the cube side: Mmad taking its parameters by pointer
    wrong = scan("namespace AscendC { template <typename T> class LocalTensor {}; struct MmadParams;\n"
                 "template <typename T, typename U, typename S> void Mmad(const LocalTensor<T> &d, "
                 "const LocalTensor<U> &f, const LocalTensor<S> &g, MmadParams *p); }")
    merged = Index(stand_in.decls + wrong.decls, stand_in.enums, stand_in.classes, stand_in.types)
    assert any("Mmad" in b for b in _mismatches(real, merged, corpus))
    inside = scan("namespace AscendC { class TPipe; TPipe *GetTPipePtr(); }")
    assert inside.functions("GetTPipePtr") and not real.functions("GetTPipePtr")


# ---------------------------------------------------------------------------------------------
# 4. the lint


def test_emitted_aicore_code_passes_the_lint(corpus):
    bad = {path: lint_aicore(text) for path, text in corpus.items()}
    bad = {p: v for p, v in bad.items() if v}
    assert not bad, "\n".join(f"{p}: {v[:5]}" for p, v in bad.items())
    assert len(corpus) > 50


def test_the_lint_catches_what_bisheng_refuses():
    """The constructs the review found in earlier trees, each caught."""
    cases = {
        "__aicore__ inline double wsp_f(double d) { return d; }": "`double`",
        "const float k = (float)scalars[0].f * 0.5;": "double literal",
        "float x = 1.0f; uint32_t u = (uint32_t)x;": "float -> unsigned",
        "uint32_t n = 3; float f = (float)n;": "unsigned -> float",
        "float y = (float)(uint64_t)v;": "unsigned -> float",
        "int *p = new int[4];": "dynamic memory",
        "std::vector<int> v;": "standard library",
        "struct A { virtual void f(); };": "virtual",
    }
    for code, why in cases.items():
        found = lint_aicore(code)
        assert any(why in f for f in found), (code, found)
    assert lint_aicore("const float k = wsp_f32_from_bits((uint32_t)scalars[0].i) * 0.5f;") == []
    assert lint_aicore('// a comment with 0.5 and double\nconst char *s = "1.5";') == []


def test_the_emitted_tree_declares_its_kernel_type_and_store_barrier(corpus):
    """Fix 5 and 6 of issue 21, as the real headers spell them (KERNEL_TASK_TYPE_DEFAULT in the
    kernel body; AscendC::DataStoreBarrier of aicpu_api.h at the end of the AICPU kernel)."""
    dispatch = corpus["megakernel/aicore/dispatch.asc"]
    assert "KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);" in dispatch
    mod, _ = optimize(ptowsp.load(str(ROOT / "examples/rmsnorm.wsp")).ir, 2)
    expand = emit_project(mod, choose_schedule(mod, None)).files["aicpu/expand.aicpu"]
    body = expand[expand.index("uint32_t wsp_expand(void *args)"):]
    assert body.index("AscendC::DataStoreBarrier();") < body.index("return 0;")


def test_data_store_barrier_is_the_real_one(cann_headers):
    api = cann_headers.ascendc / "aicpu_api/aicpu_api.h"
    if not api.is_file():
        pytest.skip(f"no aicpu_api/aicpu_api.h under {cann_headers.ascendc}")
    idx = scan(api.read_text(errors="replace"))
    assert idx.functions("DataStoreBarrier"), "aicpu_api.h no longer declares DataStoreBarrier"



def test_the_mixed_kernels_calls_are_the_real_ones(real, stand_in):
    """What the split of a mixed kernel uses (tests/ascend/test_mixed.py; docs/ascend.md,
    "Mixed kernels: the split"), as the stand-in declares it, is the real declaration: the
    cross-core flags (template <uint8_t modeId, pipe_t pipe>, a uint16_t flag id) and the
    core's place in its group."""
    for name in ("CrossCoreSetFlag", "CrossCoreWaitFlag", "GetBlockIdx", "GetSubBlockIdx",
                 "GetTaskRatio"):
        want = {d.signature() for d in real.functions(name)}
        have = stand_in.functions(name)
        assert want and have, name
        for d in have:
            assert d.signature() in want, f"AscendC::{name}: the stand-in's `{d.text}`"
