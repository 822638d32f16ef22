"""Extern kernels a target cannot run: those without a body in the target's language
(language.md section 4). Each target words the error; this finds the kernels."""

from __future__ import annotations


def kernels_missing_body(m, *langs: str) -> list:
    """The extern kernels of module `m` with no `extern <lang>` body for any of `langs`, once
    per source kernel, each with the span a diagnostic points at (the kernel's name where
    known)."""
    out, seen = [], set()
    for k in m.kernels:
        has = any(getattr(k, f"extern_{lang}") is not None for lang in langs)
        if not k.is_extern or has or k.source in seen:
            continue
        seen.add(k.source)
        out.append((k, k.name_span if k.name_span.line else k.span))
    return out
