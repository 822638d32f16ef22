"""Which values of a kernel are computed per chunk of rows: the rules are below both back ends
(`backends/vector_chunks.py`), so the cycle model's plan (`backends/ub_plan.py`) uses them too."""

from ...vector_chunks import (  # noqa: F401 (re-exported)
    COL_REDUCTIONS,
    ROW_REDUCTIONS,
    ColumnPass,
    accumulated_columns,
    chunking,
    column_passes,
    in_place_transposes,
    narrow,
    row_passes,
    streamed_operands,
)
