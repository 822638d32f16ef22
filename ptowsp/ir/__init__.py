"""The IR every back end consumes (`nodes`), and what reads or rewrites it: `visit` (walks and
rewrites), `verify`, `printer`, `kernel_plan` (how a kernel's ops run), `axes` (axis
transforms), `independence` and the optimiser (`passes`)."""
