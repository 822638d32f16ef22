"""Jinja2 for the ascend_npu tree: templates only lay files out; Python decides their content
(as in backends/cpu). `render(name, **values)` renders `templates/<name>.j2`."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def _env():
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render(name: str, **values) -> str:
    """The text of template `name` (a path under templates/, without `.j2`)."""
    return _env().get_template(name + ".j2").render(**values)
