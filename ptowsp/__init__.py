"""wspc: a compiler toolchain for the WSP workload-schedule language (PTO-WSP v9).

The package is imported by the `wspc` command on every run, so it stays light: nothing here
imports numpy, cffi or Lark; each stage is imported where it is used.
"""

__version__ = "0.1.0"


def parse(text: str, filename: str = "<string>"):
    """Parse `.wsp` text into an AST `SourceFile` (syntax only; see `check`)."""
    from .frontend.parser import parse as _parse

    return _parse(text, filename)


def load(path: str):
    """Load, resolve imports of, and check a `.wsp` file; returns the checked module."""
    from .frontend.checker import check_file

    return check_file(path)
