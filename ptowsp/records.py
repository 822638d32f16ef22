"""`@record`: frozen, slotted dataclasses that are cheap to define.

`@dataclass(frozen=True, slots=True)` compiles six small functions per class with one `exec`
each; for the ~60 AST node classes that alone took ~60 ms of every `wspc` start. A `record` is
the same thing to its users (a real dataclass: `fields()`, `replace()`, `__match_args__`;
immutable; equality and hashing over the fields with `compare=True`; a dataclass-style repr),
but `__eq__`, `__hash__`, `__repr__` and the frozen `__setattr__` are shared functions, and the
`__init__` of every record defined so far is compiled in one `exec` the first time any record
is instantiated.
"""

from __future__ import annotations

from dataclasses import MISSING, FrozenInstanceError, dataclass, fields

_PENDING: list[type] = []
_SHARED = ("__eq__", "__hash__", "__repr__", "__setattr__", "__delattr__", "__getstate__",
           "__setstate__")


def record(cls: type) -> type:
    """Make `cls` a frozen, slotted dataclass (see the module docstring)."""
    cls = dataclass(slots=True, init=False, repr=False, eq=False)(cls)
    flds = fields(cls)
    cls._compare_ = tuple(f.name for f in flds if f.compare)
    cls._repr_ = tuple(f.name for f in flds if f.repr)
    cls._all_ = tuple(f.name for f in flds)
    for name in _SHARED:
        if name not in cls.__dict__ or (name == "__hash__" and cls.__dict__[name] is None):
            setattr(cls, name, _METHODS[name])
    if "__init__" not in cls.__dict__ or cls.__dict__["__init__"] is _pending_init:
        cls.__init__ = _pending_init
        _PENDING.append(cls)
    return cls


def _pending_init(self, *args, **kwargs) -> None:
    """Stands in until the batch is compiled, then hands over to the class's own __init__."""
    compile_pending()
    init = type(self).__init__
    if init is _pending_init:
        raise TypeError(f"{type(self).__name__} is not a record")
    init(self, *args, **kwargs)


def compile_pending() -> None:
    """Compile the `__init__` of every record defined so far, in one `exec`."""
    if not _PENDING:
        return
    pending = list(_PENDING)
    _PENDING.clear()
    env: dict = {"_set": object.__setattr__, "_MISSING": MISSING}
    source: list[str] = []
    for i, cls in enumerate(pending):
        params, kwonly, body = ["self"], [], []
        for f in fields(cls):
            if not f.init:
                continue
            if f.default is not MISSING:
                env[f"_d{i}_{f.name}"] = f.default
                param = f"{f.name}=_d{i}_{f.name}"
            elif f.default_factory is not MISSING:
                env[f"_f{i}_{f.name}"] = f.default_factory
                param = f"{f.name}=_MISSING"
                body.append(f"if {f.name} is _MISSING: {f.name} = _f{i}_{f.name}()")
            else:
                param = f.name
            (kwonly if f.kw_only else params).append(param)
            body.append(f"_set(self, {f.name!r}, {f.name})")
        signature = ", ".join(params + (["*"] + kwonly if kwonly else []))
        lines = "\n    ".join(body) or "pass"
        source.append(f"def _init_{i}({signature}):\n    {lines}\n")
    exec("\n".join(source), env)  # noqa: S102 - our own generated code
    for i, cls in enumerate(pending):
        init = env[f"_init_{i}"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        cls.__init__ = init


def _eq(self, other):
    if other.__class__ is not self.__class__:
        return NotImplemented
    for name in self._compare_:
        if getattr(self, name) != getattr(other, name):
            return False
    return True


def _hash(self):
    return hash(tuple(getattr(self, name) for name in self._compare_))


def _repr(self):
    inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._repr_)
    return f"{type(self).__qualname__}({inner})"


def _setattr(self, name, value):
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self, name):
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _getstate(self):
    return [getattr(self, name) for name in self._all_]


def _setstate(self, state):
    for name, value in zip(self._all_, state):
        object.__setattr__(self, name, value)


_METHODS = {"__eq__": _eq, "__hash__": _hash, "__repr__": _repr, "__setattr__": _setattr,
            "__delattr__": _delattr, "__getstate__": _getstate, "__setstate__": _setstate}
