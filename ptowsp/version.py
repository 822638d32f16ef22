"""The version of wspc: the one place it is written (the package, the cache keys and the
emitted trees all read it here)."""

__version__ = "0.1.0"
