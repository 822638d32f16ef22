"""The Jinja2 environment every back end lays its templates out with."""

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
