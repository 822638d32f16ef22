"""Back ends: ref (NumPy oracle), cpu (C + runtime), ascend (CANN project)."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=None)
def template_env(folder: str):
    """The Jinja2 environment of every back end's templates in `folder`: strict (an undefined
    name is an error), blocks trimmed, no escaping. Templates only lay text out; Python decides
    what goes in."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


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
