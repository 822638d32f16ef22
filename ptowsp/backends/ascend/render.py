"""Jinja2 for the ascend_npu tree: templates only lay files out; Python decides their content
(as in backends/cpu). `render(template, **values)` renders `templates/<template>.j2`."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..templates import template_env

_HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=None)  # one environment: Jinja2 compiles each template once
def _env():
    return template_env(str(_HERE / "templates"))


def render(template: str, /, **values) -> str:
    """The text of `template` (a path under templates/, without `.j2`) with `values` (which may
    include one called `name`)."""
    return _env().get_template(template + ".j2").render(**values)
