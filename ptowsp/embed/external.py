"""`ExternalKernel(name, impl_path, inputs, outputs)`: the seeds' deprecated registration of a
kernel by its name, the path of its C++ body and its parameters' names, made a kernel whose
tile types come from its call site.

The registration names the parameters but gives no tile shapes or dtypes, which a kernel needs
(docs/python.md, "Rules of the embedding"). The call site has them: each argument is a tensor or
a view, whose extents and dtype are known when the workload is traced. So the first call
declares the kernel: `In[Tile[R, C, DT]]` for each of `inputs`, `Out[...]` for each of
`outputs`, from the argument's last two extents (one extent: `[1, N]`) and its tensor's dtype,
with the file at `impl_path` as its `extern cpp` body (read when the `ExternalKernel` is made,
as `@kernel(cpp_body_path=...)` reads it). Every later call must agree; a call with other
shapes or dtypes is a `KernelError` at that call, naming the first.
"""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence

from ..frontend import ast as A
from .errors import KernelError, user_error
from .kernel import BoundKernel, KernelRef
from .names import wsp_ident
from .source import here
from .values import Tensor, TensorView


def _stub():  # the function a KernelRef is made from; its body is the file's
    pass


class _ExternalRef(KernelRef):
    """The kernel an `ExternalKernel` declares at its first call: its parameters are given
    (mode, rows, cols, dtype), not read from annotations."""

    def __init__(self, name: str, impl_path: str, params: list, span: A.Span):
        self._given = params
        super().__init__(_stub, cpp_body_path=None, name=name)
        self._span = span
        self._cpp_body_path = impl_path

    def _read_params(self) -> list:
        triples = []
        for pname, mode, rows, cols, dtype in self._given:
            w = wsp_ident(pname)
            tile = A.TileType(A.IntLit(rows, span=self._span), A.IntLit(cols, span=self._span),
                              dtype, span=self._span)
            ptype = A.TileParamType(mode, tile, None, span=self._span)
            triples.append((pname, w, A.KernelParam(A.Name(w, span=self._span), ptype, None,
                                                    span=self._span)))
        return triples


class ExternalKernel:
    """`ExternalKernel(name=..., impl_path=..., inputs=[...], outputs=[...])`, called in a
    workload as a kernel (`k[b](Q=Q[b], O=O[b])`, or positionally: inputs, then outputs)."""

    def __init__(self, name: str, impl_path: str, inputs: Sequence[str] = (),
                 outputs: Sequence[str] = ()):
        self._span = here()
        if not isinstance(name, str) or not name:
            raise user_error(self._span, f"`ExternalKernel` needs a `name`, not {name!r}",
                             cls=KernelError)
        names = list(inputs) + list(outputs)
        if not names or not all(isinstance(n, str) and n for n in names) or \
                len(set(names)) != len(names):
            raise user_error(self._span, "`ExternalKernel` takes its parameters as distinct "
                             f"names in `inputs` and `outputs`, not {list(inputs)!r} and "
                             f"{list(outputs)!r}", "write `inputs=[\"Q\", \"K\"], "
                             "outputs=[\"O\"]`", cls=KernelError)
        self.name, self.impl_path = name, impl_path
        self.inputs, self.outputs = tuple(inputs), tuple(outputs)
        # read now, as `@kernel(cpp_body_path=...)` reads its file at the `def`
        try:
            with open(impl_path, encoding="utf-8") as fh:
                self._code = fh.read()
        except (OSError, UnicodeDecodeError, TypeError) as err:
            reason = getattr(err, "strerror", None) or str(err)
            raise user_error(self._span, f"`ExternalKernel` `{name}`: cannot read its "
                             f"`impl_path` {impl_path!r}: {reason}", "give the path of a UTF-8 "
                             "file holding the C++ body", cls=KernelError) from None
        self._kernel: Optional[_ExternalRef] = None
        self._first: Optional[A.Span] = None

    @property
    def kernel(self) -> Optional[KernelRef]:
        """The kernel its first call declared (None before any call)."""
        return self._kernel

    def __getitem__(self, coords: Any) -> "_ExternalCall":
        return _ExternalCall(self, coords if isinstance(coords, tuple) else (coords,))

    def __call__(self, *args: Any, **kwargs: Any):
        return _ExternalCall(self, None)(*args, **kwargs)

    def _declare(self, args: tuple, kwargs: dict, span: A.Span) -> KernelRef:
        names = self.inputs + self.outputs
        if len(args) > len(names):
            raise user_error(span, f"`{self.name}` takes {len(names)} arguments, {len(args)} "
                             "given positionally", cls=KernelError)
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise user_error(span, f"`{self.name}` has no parameter `{k}`; its parameters "
                                 f"are {', '.join(f'`{n}`' for n in names)}", cls=KernelError)
            given[k] = v
        params = []
        for n in names:
            if n not in given:
                raise user_error(span, f"`{self.name}`: argument `{n}` is missing",
                                 cls=KernelError)
            rows, cols, dt = _tile_of(self.name, n, given[n], span)
            params.append((n, "In" if n in self.inputs else "Out", rows, cols, dt))
        if self._kernel is None:
            self._kernel = _ExternalRef(self.name, self.impl_path, params, self._span)
            self._kernel._cpp_src = self._code
            # a source of the module: the compiler's errors are reported at its lines
            self._kernel._body_file = os.path.abspath(self.impl_path)
            self._first = span
        elif params != self._kernel._given:
            first = ", ".join(f"{n}: [{r}, {c}] {d}" for n, _, r, c, d in self._kernel._given)
            now = ", ".join(f"{n}: [{r}, {c}] {d}" for n, _, r, c, d in params)
            raise user_error(span, f"`{self.name}` is called with tiles ({now}) other than at "
                             f"its first call ({first}, line {self._first.line}): an "
                             "`ExternalKernel` takes its tile types from its first call",
                             "declare one kernel per shape with `@kernel(cpp_body_path=...)`",
                             cls=KernelError)
        return self._kernel

    def __repr__(self) -> str:
        return f"<ExternalKernel {self.name}>"


class _ExternalCall:
    def __init__(self, ext: ExternalKernel, coords: Optional[tuple]):
        self.ext, self.coords = ext, coords

    def __call__(self, *args: Any, **kwargs: Any):
        k = self.ext._declare(args, kwargs, here())
        return BoundKernel(k, self.coords)(*args, **kwargs)


def _tile_of(kernel: str, pname: str, arg: Any, span: A.Span) -> tuple:
    """(rows, cols, dtype) of the tile an argument of an `ExternalKernel` passes."""
    if isinstance(arg, Tensor):
        shape, dtype = tuple(arg.shape), arg.dtype
    elif isinstance(arg, TensorView):
        shape, dtype = arg.shape, arg.tensor.dtype
    else:
        raise user_error(span, f"`{kernel}`: argument `{pname}` is {type(arg).__name__}; an "
                         "`ExternalKernel` takes tensors and views, whose shapes give its tiles",
                         cls=KernelError)
    if len(shape) > 2 or not shape or any(not isinstance(d, int) for d in shape):
        raise user_error(span, f"`{kernel}`: argument `{pname}` has the shape "
                         f"{list(shape)}, which gives no tile (one or two dimensions known when "
                         "the workload is traced)", "index it down to a tile "
                         "(`X[b, h]`), or declare the kernel with `@kernel(cpp_body_path=...)`",
                         cls=KernelError)
    rows, cols = (1, shape[0]) if len(shape) == 1 else shape
    return rows, cols, getattr(dtype, "value", str(dtype))


__all__ = ["ExternalKernel"]
