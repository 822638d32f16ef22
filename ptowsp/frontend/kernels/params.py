"""Kernel parameters and extern bodies: tile dimensions, `Constexpr` dtypes, the defaults of
`Scalar` and `Constexpr` parameters, the languages of `extern` bodies, and the names their
parameters have there.
"""

from __future__ import annotations

from ... import sym
from ...cnames import reserved_reason
from ...diagnostics import Note, did_you_mean
from ...dtypes import INT_DTYPES, kind_of
from ...primitives import literal_fits, scalar
from .. import ast as A
from ..signatures import ParamSig, literal_of

EXTERN_LANGS = ("c", "cpp", "ascend")
HEADER_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./+")


class ParamChecks:
    """Part of `KernelChecker`: parameters and extern bodies."""

    def check_params(self) -> None:
        for ps, p in zip(self.sig.params, self.k.params):
            t = p.type
            if isinstance(t, A.TileParamType):
                if p.default is not None:
                    # decision: tile parameters take no default (tiles always come from the task's arguments)
                    self.error(
                        p.default.span,
                        "bad-default",
                        f"tile parameter `{ps.name}` cannot have a default",
                        "tiles come from the task's arguments; only `Scalar` and `Constexpr` "
                        "parameters take defaults",
                    )
                if t.pad is not None:
                    self._check_pad(ps, t)
                for dim, node in ((ps.tile.rows, t.tile.rows), (ps.tile.cols, t.tile.cols)):
                    v = sym.const_value(dim)
                    if v is not None and v <= 0:
                        self.error(
                            node.span, "bad-tile", f"tile dimensions must be positive, found {v}"
                        )
            elif isinstance(t, A.ConstexprParamType):
                # decision: `Constexpr` takes any integer dtype (i8 ... u64); its value is an exact integer either way
                if t.dtype not in INT_DTYPES:
                    self.error(
                        t.span,
                        "bad-constexpr",
                        f"`Constexpr` parameters are integers, found `{t.dtype}`",
                        "write `Constexpr[i32]`",
                    )
                self._check_default(
                    ps, p, t.dtype if t.dtype in INT_DTYPES else "i32", constexpr=True
                )
            else:
                self._check_default(ps, p, ps.dtype, constexpr=False)

    def _check_pad(self, ps: ParamSig, t: A.TileParamType) -> None:
        # decision: `pad` is a literal (or const) of the tile's kind, on a tile the kernel reads
        if t.mode == "Out":
            self.error(t.pad.span, "bad-pad", f"`Out` tile `{ps.name}` is never loaded, so it takes "
                       "no `pad`", "a store writes only the view; drop `pad = ...`")
            return
        lit = literal_of(t.pad, self.consts)
        if lit is None:
            self.error(t.pad.span, "bad-pad", f"the pad of `{ps.name}` must be a literal",
                       "write e.g. `pad = 0`, `pad = -inf` or `pad = 1.5`")
            return
        kind, value, text = lit
        target = kind_of(ps.dtype)
        if not (kind == target or (kind == "int" and target == "float")):
            self.error(t.pad.span, "bad-pad", f"`{ps.name}` holds {ps.dtype}, but its pad is "
                       f"{_literal_words(kind)} `{text}`", f"write e.g. `pad = {_example(ps.dtype)}`")
        elif kind == "int" and target == "int" and not literal_fits(value, ps.dtype):
            self.error(t.pad.span, "bad-pad", f"the pad `{text}` of `{ps.name}` does not fit in "
                       f"{ps.dtype}")

    def _check_default(self, ps: ParamSig, p: A.KernelParam, dtype: str, constexpr: bool) -> None:
        d = p.default
        if d is None:
            return
        what = "Constexpr" if constexpr else "Scalar"
        # decision: a Scalar/Constexpr default is a literal (a negative number included) or the name of a module const
        if isinstance(d, A.IntLit):
            kind, value, text = "int", d.value, str(d.value)
        elif isinstance(d, A.FloatLit):
            kind, value, text = "float", d.value, d.text or repr(d.value)
        elif isinstance(d, A.BoolLit):
            kind, value, text = "bool", d.value, "true" if d.value else "false"
        elif isinstance(d, A.Name) and d.id in self.consts:
            kind, value, text = "int", self.consts[d.id], d.id
        else:
            self.error(
                d.span,
                "bad-default",
                f"the default of `{ps.name}` must be a literal",
                f"write e.g. `{ps.name}: {what}[{dtype}] = {_example(dtype)}`",
            )
            return
        target = kind_of(dtype)
        if constexpr and kind != "int":
            self.error(
                d.span,
                "bad-default",
                f"the default of Constexpr parameter `{ps.name}` must be an "
                f"integer, found {_literal_words(kind)} `{text}`",
            )
            return
        # decision: bool Scalars take `true`/`false` only; integer Scalars take integer literals only; float Scalars take integer or float literals
        if not (kind == target or (kind == "int" and target == "float")):
            self.error(
                d.span,
                "bad-default",
                f"`{ps.name}` is {scalar(dtype)}, but its default is "
                f"{_literal_words(kind)} `{text}`",
                f"write e.g. `= {_example(dtype)}`",
            )
            return
        # decision: an integer default must be representable in the Scalar's dtype (`Scalar[u8] = 300` is an error)
        if kind == "int" and target == "int" and not literal_fits(value, dtype):
            self.error(
                d.span,
                "bad-default",
                f"the default `{text}` of `{ps.name}` does not fit in {dtype}",
            )

    def check_externs(self) -> None:
        seen: dict[str, A.ExternBody] = {}
        for e in self.k.externs:
            if e.lang not in EXTERN_LANGS:
                self.error(
                    e.span,
                    "extern-lang",
                    f"unknown extern language `{e.lang}`",
                    did_you_mean(e.lang, EXTERN_LANGS)
                    or "extern bodies are `extern c`, `extern cpp` and `extern ascend`",
                )
                continue
            if e.lang in seen:
                self.error(
                    e.span,
                    "extern-twice",
                    f"`extern {e.lang}` is given twice for kernel `{self.k.name.id}`",
                    "keep one body per language",
                    notes=(Note(seen[e.lang].span, "first given here"),),
                )
                continue
            seen[e.lang] = e
            self._check_includes(e)
            self._check_foreign_names(e.lang)

    def _check_includes(self, e: A.ExternBody) -> None:
        # decision: headers are for C++ bodies only (prototype kernels include C++ headers); a C
        # body keeps its fixed headers, an Ascend C body its project's
        for inc in e.includes:
            if inc.word != "include":
                self.error(inc.span, "extern-include",
                           f"expected `include \"HEADER\"` before the `extern {e.lang}` body, "
                           f"found `{inc.word}`", did_you_mean(inc.word, ("include",))
                           or 'name a header as `include "vec.hpp"`')
            elif e.lang != "cpp":
                self.error(inc.span, "extern-include",
                           f"`include` is for `extern cpp` bodies, not `extern {e.lang}`",
                           "write the body as `extern cpp` to include headers")
            elif not inc.header or not set(inc.header) <= HEADER_CHARS or inc.header.startswith("/") \
                    or ".." in inc.header.split("/"):
                # decision: a header is a relative path of plain characters (found on the include
                # directories); it is pasted into `#include "..."`, so no quote may end it early
                self.error(inc.span, "extern-include",
                           f"`{inc.header}` is not a header name wspc includes",
                           "name it relative to an include directory, with letters, digits and "
                           "`_-./+` (no `..`, not absolute)")

    def _check_foreign_names(self, lang: str) -> None:
        # decision: the body uses the parameters by their names, so they are not renamed; a
        # name the body's language or headers take (`NULL`, `int`, `class`) is an error at the
        # parameter (language.md section 4; the table is ptowsp/cnames.py)
        language = {"c": "C", "cpp": "C++"}.get(lang, "C++ (Ascend C)")
        for p in self.k.params:
            if isinstance(p.type, A.ConstexprParamType):
                continue  # a Constexpr is folded into the kernel; the body never sees it
            why = reserved_reason(p.name.id, lang)
            if why is not None:
                self.error(
                    p.name.span,
                    "extern-name",
                    f"`{p.name.id}` cannot name a parameter of a kernel with an `extern {lang}` "
                    f"body: {why}",
                    f"the {language} body uses the parameters by name: rename it",
                )


def _literal_words(kind: str) -> str:
    return {"int": "the integer", "float": "the float", "bool": "the bool"}[kind]


def _example(dtype: str) -> str:
    return {"bool": "false", "float": "0.0", "int": "0"}[kind_of(dtype)]
