"""The fuzzing harness of `make fuzz` (see harness.py)."""
