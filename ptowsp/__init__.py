"""wspc: a compiler toolchain for the WSP workload-schedule language (PTO-WSP v9).

    import ptowsp
    m = ptowsp.load("model.wsp")                  # or ptowsp.parse(text, "model.wsp")
    out = m.compile(target="cpu_sim").run(bind={"B": 4}, X=x)

The decorator API of the PTO-WSP seed documents (`@kernel`, `@workload`, `P`, `pto`, `Tensor`,
`DispatchPolicy`, ..., see docs/python.md) is exported here too, and by the alias package
`pto_wsp`; it builds the same AST as `.wsp` text and goes through the same checker.

The package is imported by the `wspc` command on every run, so it stays light: nothing here
imports numpy, cffi or Lark; each stage (and each name of the Python API) is imported where it
is first used.
"""

from .version import __version__


def load(path: str):
    """Load and check the module in `path` (with its imports): a `ptowsp.api.Module`.

    Raises `ptowsp.WspError` (with `.diagnostics`) when the program has errors."""
    from .api import Module
    from .frontend.checker import check_file

    return Module(check_file(path))


def parse(text: str, filename: str = "<string>"):
    """Check module text (imports relative to `filename`): a `ptowsp.api.Module`."""
    from .api import Module
    from .frontend.checker import check_source

    return Module(check_source(text, filename))


# The Python embedding API of the PTO-WSP seed documents (`docs/python.md`), loaded on first
# use: name -> module under ptowsp.embed (or ptowsp.passes). `pto_wsp` re-exports them.
_EMBED = {
    "workload": (
        "P", "workload", "Workload", "combine", "sequential", "cond", "slot_set_u64",
        "slot_load_u64", "DispatchPolicy", "TimingPolicy", "TaskWindow", "WindowMode", "to_wsp",
    ),
    "kernel": ("kernel", "jit_kernel", "pto", "tl", "KernelRef"),
    "values": (
        "In", "Out", "InOut", "Constexpr", "Tile", "Scalar", "Dense", "DenseDyn", "Ragged",
        "Sparse", "Tensor", "DType", "Location", "slot_u64", "slot_i64", "slot_bool",
        "symbol_u64", "ceildiv", "axis", "Channel", "Event",
    ),
    "csp": (
        "process", "send", "consume", "connect", "replicate", "record", "synchronize", "query",
        "for_each", "parallel_for", "task",
    ),
    "program": ("Program", "TraceLevel", "Task"),
    "errors": (
        "PtoError", "CompileError", "TypeCheckError", "IRConversionError", "ExecutionError",
        "KernelError", "ScheduleError", "ChannelError", "ChannelClosed", "ChannelFull",
    ),
    "unsupported": (
        "TensorLayout", "TensorShard", "TensorReplicate", "MemLayout", "relayout", "allreduce",
        "allgather", "reduce_scatter", "Deps", "DepsMode", "ReadyPolicy", "StartPolicy",
        "TracePolicy", "Pools", "ExternalKernel", "ptoisa_kernel", "Shard", "Replicate",
    ),
}
_EMBED_NAMES = {name: mod for mod, names in _EMBED.items() for name in names}
_PASSES = ("PassManager", "Pass", "PrintPass", "FlattenCombinePass", "FunctionPass")

__all__ = ["load", "parse", "WspError", "InternalError", "Diagnostic", *_EMBED_NAMES, *_PASSES]


def __getattr__(name: str):
    # the error classes and the embedding API, without importing the front end at `import ptowsp`
    if name in ("WspError", "InternalError", "Diagnostic"):
        from . import diagnostics

        return getattr(diagnostics, name)
    mod = _EMBED_NAMES.get(name)
    if mod is not None:
        import importlib

        value = getattr(importlib.import_module(f".embed.{mod}", __name__), name)
        globals()[name] = value
        return value
    if name in _PASSES:
        from . import passes

        return getattr(passes, name)
    raise AttributeError(f"module 'ptowsp' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
