"""`wspc lsp`: the language server, on pygls, over standard input and output.

Each open document is analysed (analysis.py) when it is opened and on every change: the
checker's diagnostics are published for it (and for each imported file they fall in), and the
analysis answers hover, definition, completion and symbols until the next change; formatting
is `wspc fmt`'s. No debounce:
checking a 2,000-line module after an edit takes well under the 200 ms an editor can hide
(docs/tools.md, "wspc lsp"). A request the server cannot answer (a document that does not
parse, a position on nothing) gets an empty answer; a bug in the server is logged to the client
(window/logMessage) and the request answered empty, never an error that ends the session.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable, Optional, TypeVar

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from ..diagnostics import Diagnostic
from ..spans import Span
from ..version import __version__
from . import analysis as An

R = TypeVar("R")
MAX_PROOFS = 100_000  # a bound on their memory (a module asks hundreds): then they start again

# a declaration's kind (env.DECL_KINDS) as the symbol kind editors draw it with
_SYMBOL_KIND = {
    "kernel": T.SymbolKind.Function, "workload": T.SymbolKind.Module,
    "schedule": T.SymbolKind.Event, "tensor": T.SymbolKind.Variable, "sym": T.SymbolKind.TypeParameter,
    "const": T.SymbolKind.Constant, "axis": T.SymbolKind.Array, "channel": T.SymbolKind.Interface,
    "event": T.SymbolKind.Event, "mesh axis": T.SymbolKind.Field,
}
_COMPLETION_KIND = {
    "primitive": T.CompletionItemKind.Function, "combinator": T.CompletionItemKind.Method,
    "keyword": T.CompletionItemKind.Keyword, "local": T.CompletionItemKind.Variable,
    "kernel": T.CompletionItemKind.Function, "workload": T.CompletionItemKind.Module,
    "schedule": T.CompletionItemKind.Event, "tensor": T.CompletionItemKind.Variable,
    "const": T.CompletionItemKind.Constant, "sym": T.CompletionItemKind.TypeParameter,
}


class WspServer(LanguageServer):
    """The server and what it keeps per document: its last analysis, and the files other than
    itself it last published diagnostics for (cleared when they have none any more)."""

    def __init__(self) -> None:
        super().__init__("wspc", __version__, text_document_sync_kind=T.TextDocumentSyncKind.Incremental)
        self.analyses: dict[str, An.Analysis] = {}
        self.published: dict[str, set[str]] = {}
        # each document's last analysis in which it parsed: completion's names while it does not
        self.last_parsed: dict[str, An.Analysis] = {}
        # the checker's symbolic proofs, each keyed by all it depends on: kept across checks,
        # they are most of the time of checking a module again after an edit
        self.proofs: dict = {}

    def report_server_error(self, error: Exception, source) -> None:
        # pygls's default shows a message box; a log line is enough and does not interrupt
        self.log(f"wspc lsp: internal error: {type(error).__name__}: {error}")

    def log(self, message: str) -> None:
        self.window_log_message(T.LogMessageParams(type=T.MessageType.Error, message=message))


server = WspServer()


def _guarded(empty: Callable[[], R]):
    """A handler whose bug is logged to the client and answered with `empty()`."""

    def wrap(fn):
        @functools.wraps(fn)
        def handler(ls: WspServer, params):
            try:
                return fn(ls, params)
            except Exception as err:  # noqa: BLE001 - a bug must not end the editor's session
                import traceback

                ls.log(f"wspc lsp: internal error in {fn.__name__}: {type(err).__name__}: {err}\n"
                       + traceback.format_exc())
                return empty()

        return handler

    return wrap


# ---------------------------------------------------------------------------------------------
# Positions: the checker's 1-based code-point columns, the client's 0-based units


def _filename(uri: str) -> str:
    path = to_fs_path(uri)
    return path if path else uri


def _uri(filename: str, a: An.Analysis, uri: str) -> str:
    if filename == a.filename:
        return uri
    return from_fs_path(str(Path(filename).resolve())) or filename


def _lines(a: An.Analysis, filename: str) -> list[str]:
    return a.sources.get(filename, "").split("\n")


def _position(ls: WspServer, lines: list[str], line: int, col: int) -> T.Position:
    """A 1-based (line, column) of the checker as the client counts."""
    if line <= 0:
        return T.Position(0, 0)
    return ls.workspace.position_codec.position_to_client_units(
        lines, T.Position(line - 1, max(col - 1, 0)))


def _range(ls: WspServer, a: An.Analysis, span: Span) -> T.Range:
    lines = _lines(a, span.file)
    start = _position(ls, lines, span.line, span.col)
    if span.line <= 0:
        return T.Range(start, start)
    return T.Range(start, _position(ls, lines, span.end_line, span.end_col))


def _at(ls: WspServer, a: An.Analysis, position: T.Position) -> tuple[int, int]:
    """A client position in the document as the checker's 1-based (line, column)."""
    p = ls.workspace.position_codec.position_from_client_units(a.text.split("\n"), position)
    return p.line + 1, p.character + 1


# ---------------------------------------------------------------------------------------------
# Diagnostics


def _diagnostic(ls: WspServer, a: An.Analysis, uri: str, d: Diagnostic) -> T.Diagnostic:
    """The checker's diagnostic: its message, then its help line as `wspc check` prints it;
    its notes ("first declared here") as related locations."""
    message = d.message + (f"\nhelp: {d.help}" if d.help else "")
    related = [T.DiagnosticRelatedInformation(T.Location(_uri(n.span.file, a, uri), _range(ls, a, n.span)),
                                              n.message) for n in d.notes]
    severity = T.DiagnosticSeverity.Error if d.severity == "error" else T.DiagnosticSeverity.Warning
    return T.Diagnostic(range=_range(ls, a, d.span), message=message, severity=severity,
                        code=d.code, source="wspc", related_information=related or None)


def _refresh(ls: WspServer, uri: str) -> None:
    """Analyse the document again and publish its diagnostics (and clear those gone)."""
    doc = ls.workspace.get_text_document(uri)
    try:
        if len(ls.proofs) > MAX_PROOFS:
            ls.proofs.clear()
        a = An.analyse(doc.source, _filename(uri), ls.proofs)
    except Exception as err:  # noqa: BLE001 - InternalError or worse: logged, the session goes on
        ls.log(f"wspc lsp: internal error while checking {uri}: {type(err).__name__}: {err}")
        return
    ls.analyses[uri] = a
    if a.main is not None:
        ls.last_parsed[uri] = a
    by_uri: dict[str, list[T.Diagnostic]] = {uri: []}
    for d in a.diagnostics:
        target = _uri(d.span.file, a, uri)
        by_uri.setdefault(target, []).append(_diagnostic(ls, a, uri, d))
    others = set(by_uri) - {uri}
    for gone in ls.published.get(uri, set()) - others:
        by_uri[gone] = []
    ls.published[uri] = others
    for target, diags in by_uri.items():
        ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=target, diagnostics=diags,
                                                                        version=doc.version))


@server.feature(T.TEXT_DOCUMENT_DID_OPEN)
@_guarded(lambda: None)
def did_open(ls: WspServer, params: T.DidOpenTextDocumentParams) -> None:
    _refresh(ls, params.text_document.uri)


@server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
@_guarded(lambda: None)
def did_change(ls: WspServer, params: T.DidChangeTextDocumentParams) -> None:
    _refresh(ls, params.text_document.uri)


@server.feature(T.TEXT_DOCUMENT_DID_SAVE)
@_guarded(lambda: None)
def did_save(ls: WspServer, params: T.DidSaveTextDocumentParams) -> None:
    # a saved file may be imported by the other open documents: check them all again
    for uri in list(ls.analyses):
        _refresh(ls, uri)


@server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
@_guarded(lambda: None)
def did_close(ls: WspServer, params: T.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.analyses.pop(uri, None)
    ls.last_parsed.pop(uri, None)
    for target in ls.published.pop(uri, set()) | {uri}:
        ls.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=target, diagnostics=[]))


def _analysis(ls: WspServer, uri: str) -> Optional[An.Analysis]:
    a = ls.analyses.get(uri)
    if a is None or a.text != ls.workspace.get_text_document(uri).source:
        _refresh(ls, uri)
        a = ls.analyses.get(uri)
    return a


# ---------------------------------------------------------------------------------------------
# Requests


@server.feature(T.TEXT_DOCUMENT_HOVER)
@_guarded(lambda: None)
def hover(ls: WspServer, params: T.HoverParams) -> Optional[T.Hover]:
    a = _analysis(ls, params.text_document.uri)
    if a is None:
        return None
    found = An.hover(a, *_at(ls, a, params.position))
    if found is None:
        return None
    text, span = found
    return T.Hover(T.MarkupContent(T.MarkupKind.Markdown, text), _range(ls, a, span))


@server.feature(T.TEXT_DOCUMENT_DEFINITION)
@_guarded(lambda: None)
def definition(ls: WspServer, params: T.DefinitionParams) -> Optional[T.Location]:
    uri = params.text_document.uri
    a = _analysis(ls, uri)
    if a is None:
        return None
    span = An.definition(a, *_at(ls, a, params.position))
    if span is None:
        return None
    return T.Location(_uri(span.file, a, uri), _range(ls, a, span))


@server.feature(T.TEXT_DOCUMENT_COMPLETION, T.CompletionOptions(trigger_characters=["."]))
@_guarded(lambda: None)
def completion(ls: WspServer, params: T.CompletionParams) -> Optional[T.CompletionList]:
    a = _analysis(ls, params.text_document.uri)
    if a is None:
        return None
    line, col = _at(ls, a, params.position)
    text = a.text.split("\n")[line - 1] if line - 1 < len(a.text.split("\n")) else ""
    before = text[:col - 1]
    word = before[len(before.rstrip("_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")):]
    head = before[:len(before) - len(word)]
    after_dot = None
    if head.endswith("."):
        stem = head[:-1]
        after_dot = stem[len(stem.rstrip("_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ)")):]
    if a.main is None:  # the document does not parse (being typed): the names it last had
        a = ls.last_parsed.get(params.text_document.uri, a)
    items = An.completions(a, line, col, after_dot)
    return T.CompletionList(is_incomplete=False, items=[
        T.CompletionItem(label=i.label, kind=_COMPLETION_KIND.get(i.kind, T.CompletionItemKind.Reference),
                         detail=i.detail or i.kind) for i in items])


@server.feature(T.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
@_guarded(list)
def document_symbol(ls: WspServer, params: T.DocumentSymbolParams) -> list[T.DocumentSymbol]:
    a = _analysis(ls, params.text_document.uri)
    if a is None:
        return []
    return [T.DocumentSymbol(name=d.name.id, kind=_SYMBOL_KIND.get(kind, T.SymbolKind.Object),
                             range=_range(ls, a, d.span), selection_range=_range(ls, a, d.name.span),
                             detail=kind) for d, kind in An.symbols(a)]


@server.feature(T.TEXT_DOCUMENT_FORMATTING)
@_guarded(lambda: None)
def formatting(ls: WspServer, params: T.DocumentFormattingParams) -> Optional[list[T.TextEdit]]:
    """The document in `wspc fmt`'s layout (`ptowsp.format_source`), as one edit of the whole
    text; none when it is already; nothing when it does not parse (its error is shown)."""
    from ..diagnostics import WspError
    from ..driver import format_text

    uri = params.text_document.uri
    text = ls.workspace.get_text_document(uri).source
    try:
        formatted = format_text(text, _filename(uri))
    except WspError:
        return None
    if formatted == text:
        return []
    lines = text.split("\n")
    end = ls.workspace.position_codec.position_to_client_units(
        lines, T.Position(len(lines) - 1, len(lines[-1])))
    return [T.TextEdit(range=T.Range(T.Position(0, 0), end), new_text=formatted)]


def serve() -> None:
    """Serve one client over standard input and output until it says `exit`."""
    server.start_io()
