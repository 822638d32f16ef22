"""Jinja2 for the ascend_npu tree: templates only lay files out; Python decides their content
(as in backends/cpu). `render(name, **values)` renders `templates/<name>.j2`."""

from __future__ import annotations

from pathlib import Path

from .. import template_env

_HERE = Path(__file__).resolve().parent


def _env():
    return template_env(str(_HERE / "templates"))


def render(name: str, **values) -> str:
    """The text of template `name` (a path under templates/, without `.j2`)."""
    return _env().get_template(name + ".j2").render(**values)
