"""Back ends: ref (NumPy oracle), cpu (C + runtime), ascend (CANN project)."""
