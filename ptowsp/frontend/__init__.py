"""Front end: `.wsp` text to a checked AST (parser, checker, diagnostics)."""
