"""Extern kernels a target cannot run: those without a body in the target's language
(language.md section 4). Each target words the error; this finds the kernels."""

from __future__ import annotations


def kernels_missing_body(m, lang: str) -> list:
    """The extern kernels of module `m` without an `extern <lang>` body, once per source
    kernel, each with the span a diagnostic points at (the kernel's name where known)."""
    out, seen = [], set()
    for k in m.kernels:
        body = k.extern_c if lang == "c" else k.extern_ascend
        if not k.is_extern or body is not None or k.source in seen:
            continue
        seen.add(k.source)
        out.append((k, k.name_span if k.name_span.line else k.span))
    return out
