"""Kernel bodies: `check.check_kernel_body`."""
