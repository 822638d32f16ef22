"""The cpu_sim back end: IR -> C (kernels.py, enumerate.py), build and cache (build.py), run
(program.py). Kernel C is emitted by `kernels.emit_kernels`; its support code is
`wsp_kernels.h` and the file layouts are `templates/*.c.j2` (package data)."""
