"""wspc: a compiler toolchain for the WSP workload-schedule language (PTO-WSP v9).

    import ptowsp
    m = ptowsp.load("model.wsp")                  # or ptowsp.parse(text, "model.wsp")
    out = m.compile(target="cpu_sim").run(bind={"B": 4}, X=x)

The decorator API of the PTO-WSP seed documents (`@kernel`, `@workload`, `P`, `pto`, `Tensor`,
`DispatchPolicy`, ..., see docs/python.md; `ptowsp.embed.EXPORTS` lists them) is exported here
too, and by the alias package `pto_wsp`; it builds the same AST as `.wsp` text and goes through
the same checker.

The package is imported by the `wspc` command on every run, so it stays light: nothing here
imports numpy, cffi or Lark; each stage (and each name of the Python API) is imported where it
is first used.
"""

from . import embed as _embed  # its table of names only: the embedding loads on first use
from .version import __version__ as __version__


def load(path: str):
    """Load and check the module in `path` (with its imports): a `ptowsp.api.Module`.

    Raises `ptowsp.WspError` (with `.diagnostics`) when the program has errors."""
    from .api import Module
    from .driver import check_file

    return Module(check_file(path))


def parse(text: str, filename: str = "<string>"):
    """Check module text (imports relative to `filename`): a `ptowsp.api.Module`."""
    from .api import Module
    from .driver import check_text

    return Module(check_text(text, filename))


def tune(module, schedule=None, budget=None, seconds=None, bindings=None, inputs=None,
         seed=0, **options):
    """Search `module`'s schedules on the cycle model around `schedule`: a
    `ptowsp.tuning.TuneResult` (`best`, `given`, `ranked()`, `schedule_text(name)`;
    docs/python.md, "Tuning a schedule")."""
    from .tuning import tune as search

    return search(module, schedule, budget, seconds, bindings, inputs, seed, **options)


def format_source(text: str, filename: str = "<string>") -> str:
    """`text` in the canonical layout of `wspc fmt` (docs/tools.md), comments kept. Raises
    `ptowsp.WspError` with the parser's diagnostic when the text does not parse."""
    from .driver import format_text

    return format_text(text, filename)


_PASSES = ("PassManager", "Pass", "PrintPass", "FlattenCombinePass", "FunctionPass")

__all__ = ["load", "parse", "format_source", "tune", "WspError", "InternalError", "Diagnostic", *_embed.EXPORTS, *_PASSES]


def __getattr__(name: str):
    # the error classes and the embedding API, without importing the front end at `import ptowsp`
    if name in ("WspError", "InternalError", "Diagnostic"):
        from . import diagnostics

        return getattr(diagnostics, name)
    if name in _embed.EXPORTS:
        value = _embed.exported(name)
        globals()[name] = value
        return value
    if name in _PASSES:
        from . import passes

        return getattr(passes, name)
    raise AttributeError(f"module 'ptowsp' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
