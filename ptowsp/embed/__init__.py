"""The PTO-WSP Python API of the seed documents (docs/python.md): `@kernel`, `@workload`, `P`,
`pto`, the CSP builders and the seeds' `Program`, traced into the same AST as `.wsp` text and
run through the same checker, driver and back ends. `pto_wsp` is its import alias."""
