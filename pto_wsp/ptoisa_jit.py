"""`pto_wsp.ptoisa_jit`: the prototype's module of PTO-ISA kernels, `ptoisa` (the instructions)
and `@ptoisa_kernel`, which wspc lowers to its kernel IR (`ptowsp.embed.ptoisa`; docs/python.md,
"PTO-ISA kernels")."""

from ptowsp.embed.ptoisa import ptoisa, ptoisa_kernel

__all__ = ["ptoisa", "ptoisa_kernel"]
