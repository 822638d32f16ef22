"""wspc: a compiler toolchain for the WSP workload-schedule language (PTO-WSP v9).

    import ptowsp
    m = ptowsp.load("model.wsp")                  # or ptowsp.parse(text, "model.wsp")
    out = m.compile(target="cpu_sim").run(bind={"B": 4}, X=x)

The package is imported by the `wspc` command on every run, so it stays light: nothing here
imports numpy, cffi or Lark; each stage is imported where it is used.
"""

__version__ = "0.1.0"


def load(path: str):
    """Load and check the module in `path` (with its imports): a `ptowsp.runtime.Module`.

    Raises `ptowsp.WspError` (with `.diagnostics`) when the program has errors."""
    from .frontend.checker import check_file
    from .runtime import Module

    return Module(check_file(path))


def parse(text: str, filename: str = "<string>"):
    """Check module text (imports relative to `filename`): a `ptowsp.runtime.Module`."""
    from .frontend.checker import check_source
    from .runtime import Module

    return Module(check_source(text, filename))


def __getattr__(name: str):
    # the error classes, without importing the front end at `import ptowsp`
    if name in ("WspError", "InternalError", "Diagnostic"):
        from .frontend import diagnostics

        return getattr(diagnostics, name)
    raise AttributeError(f"module 'ptowsp' has no attribute {name!r}")
