"""`pto_wsp`: the PTO-WSP seed documents' package name, an alias of `ptowsp`.

    from pto_wsp import kernel, workload, P, pto, In, Out, Tile, Tensor, DType

Every name resolves to the same object as `ptowsp.NAME` (loaded on first use): the embedding's
names (`ptowsp.embed.EXPORTS`) and ptowsp's own, so seed programs run unchanged through wspc's
front end, checker, IR and back ends.
"""

import ptowsp as _ptowsp

__version__ = _ptowsp.__version__
__all__ = list(_ptowsp.__all__)


def __getattr__(name: str):
    try:
        return getattr(_ptowsp, name)
    except AttributeError:
        raise AttributeError(f"module 'pto_wsp' has no attribute {name!r}") from None


def __dir__():
    return sorted(set(globals()) | set(__all__))
