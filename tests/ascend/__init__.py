"""Tests of the ascend_npu target (docs/ascend.md)."""
