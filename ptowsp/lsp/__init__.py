"""`wspc lsp`: a language server for `.wsp` files over standard input and output (docs/tools.md,
"wspc lsp"), built on pygls.

    analysis.py   one document: the checker's diagnostics, and hover, definition, completion
                  and symbols from its ASTs and checked module (no LSP types)
    server.py     the pygls server: documents, positions in the client's units, the handlers

It sits in the layer of the `wspc` command: it reads the front end through the driver.
"""


def serve() -> None:
    """Serve one client over standard input and output until it exits (pygls imported here:
    `wspc` itself never loads it)."""
    from .server import serve as run

    run()
