"""The `ref` back end: a NumPy interpreter of the IR, the semantic oracle for tests
(see `interp.py` for the semantics it defines)."""

from .interp import Backend, execute, run
from .runner import RunError, register_extern, unregister_extern

__all__ = ["run", "execute", "Backend", "RunError", "register_extern", "unregister_extern"]
