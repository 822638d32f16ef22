"""The names C and C++ code cannot give to a variable of its own: keywords, the macros of the
headers a kernel's foreign body sees, and the names the implementation and wspc reserve.

An `extern c` body is C11 pasted into a function whose parameters are the kernel's, named as in
the `.wsp` file (the body uses them by name, so they cannot be renamed); an `extern ascend` body
is C++ (Ascend C), likewise. A parameter named `NULL` or `INFINITY` (a macro) or `int` (a
keyword) would break the generated code, so the checker reports such a name at the parameter
(language.md section 4), using `reserved_reason` below; the back ends use `C_KEYWORDS` for the
names they make themselves.

The macros are those of the C11 headers the `extern c` body sees (`math.h`, `stdint.h`,
`stdlib.h`, `string.h`, and `stddef.h` through them), with the POSIX and GNU additions a
`-std=gnu11` or `_GNU_SOURCE` build would add (`M_PI`, `unix`, ...), plus the C standard headers
an Ascend C body may see through `kernel_operator.h` (`limits.h`, `float.h`, `errno.h`,
`stdio.h`, `assert.h`, `stdbool.h`). `tests/backends/test_extern_names.py` asks the C compiler
for the macros it really defines and checks that every one is covered here.
"""

from __future__ import annotations

import re
from typing import Optional

C_KEYWORDS = frozenset(
    # C11
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic "
    "_Imaginary _Noreturn _Static_assert _Thread_local "
    # C23 (a newer compiler's default), and the spellings stdbool.h/stdalign.h/... define
    "alignas alignof bool constexpr false nullptr static_assert thread_local true typeof "
    "typeof_unqual noreturn complex imaginary".split()
)

CXX_KEYWORDS = frozenset(
    "alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t "
    "char16_t char32_t class compl concept const consteval constexpr constinit const_cast "
    "continue co_await co_return co_yield decltype default delete do double dynamic_cast else "
    "enum explicit export extern false float for friend goto if inline int long mutable "
    "namespace new noexcept not not_eq nullptr operator or or_eq private protected public "
    "register reinterpret_cast requires return short signed sizeof static static_assert "
    "static_cast struct switch template this thread_local throw true try typedef typeid "
    "typename union unsigned using virtual void volatile wchar_t while xor xor_eq".split()
)

# Object- and function-like macros of the standard headers (C11 and POSIX/GNU), by name.
STANDARD_MACROS = frozenset(
    # stddef.h, stdlib.h, string.h
    "NULL offsetof EXIT_FAILURE EXIT_SUCCESS RAND_MAX MB_CUR_MAX alloca strdupa strndupa "
    "WCONTINUED WEXITED WEXITSTATUS WIFCONTINUED WIFEXITED WIFSIGNALED WIFSTOPPED WNOHANG "
    "WNOWAIT WSTOPPED WSTOPSIG WTERMSIG WUNTRACED WCOREDUMP "
    "BIG_ENDIAN LITTLE_ENDIAN PDP_ENDIAN BYTE_ORDER NFDBITS FD_SETSIZE "
    # math.h
    "INFINITY NAN HUGE_VAL HUGE_VALF HUGE_VALL MAXFLOAT math_errhandling "
    "fpclassify isfinite isinf isnan isnormal signbit isgreater isgreaterequal isless "
    "islessequal islessgreater isunordered iscanonical iseqsig issignaling issubnormal iszero "
    # errno.h, stdio.h, assert.h, stdbool.h, stdarg.h, setjmp.h, limits.h
    "errno EDOM ERANGE EILSEQ EOF BUFSIZ FILENAME_MAX FOPEN_MAX L_tmpnam TMP_MAX SEEK_CUR "
    "SEEK_END SEEK_SET stdin stdout stderr assert va_arg va_copy va_end va_start setjmp "
    "CHAR_BIT MB_LEN_MAX "
    # the compiler's own in GNU modes
    "linux unix i386".split()
)

# Families of standard macros, by pattern (stdint.h's limits and constants, limits.h, float.h,
# math.h's classes and constants, endian.h's conversions).
_MACRO_PATTERNS = re.compile(
    r"(U?INT(_LEAST|_FAST)?(8|16|32|64)|U?INTMAX|U?INTPTR|PTRDIFF|SIZE|WCHAR|WINT|SIG_ATOMIC)"
    r"_(MAX|MIN|C|WIDTH)"
    r"|(S|U)?(CHAR|SHRT|INT|LONG|LLONG)_(MAX|MIN|WIDTH)"
    r"|(FLT|DBL|LDBL|DECIMAL)_[A-Z0-9_]+|FP_[A-Z0-9_]+|HUGE_VAL[A-Z0-9_]*|SNAN[A-Z0-9_]*"
    r"|MATH_ERR(NO|EXCEPT)|FD_(CLR|ISSET|SET|ZERO)"
    r"|M_(E|LOG2E|LOG10E|LN2|LN10|PI|PI_2|PI_4|1_PI|2_PI|2_SQRTPI|SQRT2|SQRT1_2)"
    r"(f|l|f32|f64|f128|f32x|f64x)?"
    r"|(be|le|h)(16|32|64)to(h|be|le)(16|32|64)?|hto(be|le)(16|32|64)"
)

# What an `extern ascend` body sees besides the standard: the Ascend C namespace and macros, and
# the ABI arrays the body may use by these names (templates/aicore/kernel_extern.h.j2).
ASCEND_NAMES = frozenset("AscendC GM_ADDR std tiles scalars".split())


def reserved_reason(name: str, language: str) -> Optional[str]:
    """Why `name` cannot name a variable in an `extern <language>` body ("c", "cpp" or "ascend"), or
    None when it can."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return "it is not a C identifier (letters, digits and `_`, ASCII only)"
    cxx = language in ("ascend", "cpp")
    if name in C_KEYWORDS or (cxx and name in CXX_KEYWORDS):
        return f"it is a {'C++' if cxx else 'C'} keyword"
    if name in STANDARD_MACROS or _MACRO_PATTERNS.fullmatch(name):
        return "it is a macro of the standard headers the body sees"
    if cxx and ("__" in name or re.match(r"_[A-Z]", name)):
        return "names containing `__` or starting with `_` and a capital letter are reserved for the C++ compiler"
    if re.match(r"_[A-Z_]", name):
        return "names starting with `__` or with `_` and a capital letter are reserved for the C compiler"
    if re.match(r"(wsp_|WSP_|Wsp)", name):
        return "names starting with `wsp_`, `WSP_` or `Wsp` are wspc's"
    if language == "ascend" and name in ASCEND_NAMES:
        return "the `extern ascend` body sees Ascend C's names, and the ABI's arrays as `tiles` and `scalars`"
    return None
