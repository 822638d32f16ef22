"""`wspc lsp` driven as an editor drives it: `python -m ptowsp lsp` in a subprocess, JSON-RPC
messages with Content-Length framing on its standard input and output, one session through
initialize, didOpen (an error: the range and message `wspc check` prints), didChange (fixed:
cleared), hover, definition across an import, completion, documentSymbol, shutdown and exit.

Waits are hang guards (a reader thread and a queue's timeout), never what is asserted.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.guard import GUARD

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "programs"
MAIN = "events_slots_inline.wsp"  # imports lib_shared.wsp, whose const TILES it uses


class Client:
    """A language client over a server process's pipes."""

    def __init__(self, cwd: Path):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-m", "ptowsp", "lsp"], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.messages: queue.Queue = queue.Queue()
        self.next_id = 0
        self.logged: list[str] = []  # window/logMessage: the server's own errors
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    self.messages.put(None)
                    return
                line = line.decode("ascii").strip()
                if not line:
                    break
                key, value = line.split(":", 1)
                headers[key.strip().lower()] = value.strip()
            self.messages.put(json.loads(out.read(int(headers["content-length"]))))

    def send(self, message: dict) -> None:
        body = json.dumps(dict(message, jsonrpc="2.0")).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict) -> None:
        self.send({"method": method, "params": params})

    def next_message(self) -> dict:
        try:
            message = self.messages.get(timeout=GUARD)  # a hang guard only
        except queue.Empty:
            pytest.fail(f"no message from the server after {GUARD} s")
        assert message is not None, "the server closed its output: " + self._stderr()
        if message.get("method") == "window/logMessage":
            self.logged.append(message["params"]["message"])
        return message

    def request(self, method: str, params) -> object:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self.next_message()
            if message.get("id") == self.next_id and "method" not in message:
                assert "error" not in message, message
                return message["result"]

    def diagnostics(self, uri: str) -> list[dict]:
        """The next diagnostics published for `uri`."""
        while True:
            message = self.next_message()
            if message.get("method") == "textDocument/publishDiagnostics" \
                    and message["params"]["uri"] == uri:
                return message["params"]["diagnostics"]

    def _stderr(self) -> str:
        self.proc.kill()
        return self.proc.stderr.read().decode(errors="replace")


def _position(text: str, needle: str, nth: int = 0, offset: int = 0) -> dict:
    """The LSP position of the `nth` occurrence of `needle` in `text` (ASCII text), plus `offset`."""
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    at += offset
    line = text.count("\n", 0, at)
    return {"line": line, "character": at - (text.rfind("\n", 0, at) + 1)}


@pytest.fixture
def session(tmp_path):
    for name in (MAIN, "lib_shared.wsp"):
        shutil.copy(PROGRAMS / name, tmp_path / name)
    client = Client(tmp_path)
    yield client, tmp_path
    if client.proc.poll() is None:
        client.proc.kill()
        client.proc.wait()


def test_a_session_as_an_editor_drives_it(session):
    client, folder = session
    path = folder / MAIN
    uri = path.as_uri()
    good = path.read_text()
    init = client.request("initialize", {"processId": None, "rootUri": folder.as_uri(),
                                         "capabilities": {}})
    caps = init["capabilities"]
    for cap in ("hoverProvider", "definitionProvider", "completionProvider",
                "documentSymbolProvider", "documentFormattingProvider"):
        assert caps.get(cap), cap
    assert init["serverInfo"]["name"] == "wspc"
    client.notify("initialized", {})

    # didOpen a text with an error: the diagnostic is the one `wspc check` prints for it
    bad = good.replace("store(y, full(4, 8, v, f32))", "store(y, fulll(4, 8, v, f32))")
    assert bad != good
    path.write_text(bad)
    check = subprocess.run([sys.executable, "-m", "ptowsp", "check", MAIN], cwd=folder,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                           text=True)
    assert check.returncode == 1
    head = re.match(r"[^:]+:(\d+):(\d+): error: (.*)", check.stderr)
    carets = re.search(r"^\s+\|\s*(\^+)$", check.stderr, re.M).group(1)
    helps = re.findall(r"^help: (.*)$", check.stderr, re.M)
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "wsp", "version": 1, "text": bad}})
    [diag] = client.diagnostics(uri)
    line, col = int(head.group(1)) - 1, int(head.group(2)) - 1
    assert diag["range"] == {"start": {"line": line, "character": col},
                             "end": {"line": line, "character": col + len(carets)}}
    assert diag["message"].split("\n") == [head.group(3)] + [f"help: {h}" for h in helps]
    assert diag["message"] == "unknown function `fulll`\nhelp: did you mean `full`?"
    assert diag["severity"] == 1 and diag["source"] == "wspc"
    path.write_text(good)

    # hover goes on answering in a module with errors: a tensor, and a type in a kernel that
    # checked (the error is in `fill`)
    for needle, offset, text in (("X[i]", 0, "X: f32[N, 4, 8]"),
                                 ("store(y, x)", 9, "x: [4, 8] f32 tile")):
        hovered = client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                        "position": _position(bad, needle, 0, offset)})
        assert text in hovered["contents"]["value"]

    # didChange to the fixed text: the diagnostics are cleared
    client.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": {"start": {"line": line, "character": col},
                                      "end": {"line": line, "character": col + 5}},
                            "text": "full"}]})
    assert client.diagnostics(uri) == []

    def hover(needle: str, nth: int = 0, offset: int = 0) -> str:
        result = client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                       "position": _position(good, needle, nth, offset)})
        return result["contents"]["value"] if result else ""

    # a kernel's signature, a tensor's dtype, shape and layout, a tile expression's shape
    assert "kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]])" in hover("copy[i]")
    tensor = hover("Y[i]")
    assert "dtype `f32`, shape `[N, 4, 8]`, layout `replicated`" in tensor
    call = hover("full(4")  # the primitive, and this call's type
    assert "full(rows, cols, value, dtype)" in call and "`full(4, 8, v, f32)`: [4, 8] f32 tile" in call
    assert "x: [4, 8] f32 tile" in hover("store(y, x)", offset=9)  # a use: its type
    assert "x: In[Tile[4, 8, f32]]" in hover("copy(x", offset=5)  # the parameter as declared
    assert "TILES" in hover("TILES")

    # definition across the import: TILES is declared in lib_shared.wsp
    where = client.request("textDocument/definition", {"textDocument": {"uri": uri},
                                                       "position": _position(good, "TILES")})
    lib = (folder / "lib_shared.wsp").read_text()
    assert where == {"uri": (folder / "lib_shared.wsp").as_uri(), "range": {
        "start": _position(lib, "TILES"), "end": _position(lib, "TILES", offset=5)}}
    # and in the file: a kernel, a loop variable
    where = client.request("textDocument/definition", {"textDocument": {"uri": uri},
                                                       "position": _position(good, "copy[i]")})
    assert where["uri"] == uri and where["range"]["start"] == _position(good, "copy(x")
    where = client.request("textDocument/definition", {"textDocument": {"uri": uri},
                                                       "position": _position(good, "[i](x", offset=1)})
    assert where["range"]["start"] == _position(good, "i in P(r)")

    # completion: the primitives, the module's names (an imported one too), the kernel's own
    items = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                       "position": _position(good, "store(y, x)")})
    labels = {i["label"] for i in items["items"]}
    assert {"load", "full", "rowmax", "exp", "matmul"} <= labels
    assert {"X", "Y", "copy", "fill", "part", "all", "main", "rows", "TILES", "x", "y"} <= labels
    # after `.` in a schedule: the combinators
    schedule = good.replace("schedule main = all()", "schedule main = all().")
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 3},
                                             "contentChanges": [{"text": schedule}]})
    client.diagnostics(uri)
    items = client.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                       "position": _position(schedule, "all().",
                                                                             offset=6)})
    assert {"dispatch", "streams", "split", "tile", "task_graph"} <= {i["label"] for i in items["items"]}
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 4},
                                             "contentChanges": [{"text": good}]})
    assert client.diagnostics(uri) == []

    # document symbols: kernels, workloads, schedules, tensors (and the rest), in order
    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert [(s["name"], s["detail"]) for s in symbols] == [
        ("N", "sym"), ("X", "tensor"), ("counts", "tensor"), ("Y", "tensor"), ("Z", "tensor"),
        ("ev", "event"), ("copy", "kernel"), ("fill", "kernel"), ("rows", "axis"),
        ("part", "workload"), ("all", "workload"), ("main", "schedule")]
    assert symbols[6]["selectionRange"]["start"] == _position(good, "copy(x")

    # formatting: the edits make the text `ptowsp.format_source`'s; none when it is formatted
    import ptowsp

    messy = good.replace("kernel copy(x: In[Tile[4, 8, f32]], y: Out[Tile[4, 8, f32]]) {",
                         "kernel   copy( x : In[Tile[4,8,f32]],y: Out[Tile[4, 8, f32]] )   {")
    assert messy != good
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 5},
                                             "contentChanges": [{"text": messy}]})
    assert client.diagnostics(uri) == []
    options = {"tabSize": 4, "insertSpaces": True}
    edits = client.request("textDocument/formatting", {"textDocument": {"uri": uri},
                                                       "options": options})
    assert _applied(messy, edits) == ptowsp.format_source(messy, str(path)) != messy
    formatted = ptowsp.format_source(good, str(path))
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 6},
                                             "contentChanges": [{"text": formatted}]})
    assert client.diagnostics(uri) == []
    assert client.request("textDocument/formatting", {"textDocument": {"uri": uri},
                                                      "options": options}) == []

    assert client.request("shutdown", None) is None
    client.notify("exit", None)
    assert client.proc.wait(timeout=GUARD) == 0  # a hang guard only
    assert not client.logged, client.logged


def _applied(text: str, edits: list[dict]) -> str:
    """`text` with LSP text edits applied (ASCII text: characters are UTF-16 units)."""
    lines = text.split("\n")

    def offset(p: dict) -> int:
        return sum(len(x) + 1 for x in lines[:p["line"]]) + p["character"]

    for e in sorted(edits, key=lambda e: offset(e["range"]["start"]), reverse=True):
        text = text[:offset(e["range"]["start"])] + e["newText"] + text[offset(e["range"]["end"]):]
    return text


def test_a_file_that_does_not_parse(session):
    client, folder = session
    uri = (folder / MAIN).as_uri()
    client.request("initialize", {"processId": None, "capabilities": {}})
    client.notify("initialized", {})
    text = "kernel k(x: In[Tile[4, 8, f32]]) {\n    let y = \n}\n"
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "wsp", "version": 1, "text": text}})
    [diag] = client.diagnostics(uri)
    assert diag["range"]["start"]["line"] == 2 and diag["severity"] == 1
    # nothing to say, said without an error
    at = {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 8}}
    assert client.request("textDocument/hover", at) is None
    assert client.request("textDocument/definition", at) is None
    assert "load" in {i["label"] for i in client.request("textDocument/completion", at)["items"]}
    assert client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}}) == []
    assert client.request("textDocument/formatting", {"textDocument": {"uri": uri}, "options": {
        "tabSize": 4, "insertSpaces": True}}) is None
    assert client.request("shutdown", None) is None
    client.notify("exit", None)
    assert client.proc.wait(timeout=GUARD) == 0
    assert not client.logged, client.logged


def test_proofs_kept_across_checks_change_no_answer():
    """The server keeps the checker's proofs from one check to the next: the diagnostics and
    the run-time checks of a module are those of a check from scratch."""
    from ptowsp import driver
    from ptowsp.diagnostics import WspError

    proofs: dict = {}
    for name in ("ragged_attention.wsp", "moe_sparse.wsp", "spec_schedules.wsp"):
        path = str(PROGRAMS / name)
        text = (PROGRAMS / name).read_text()
        fresh = driver.check_text(text, path)
        for _ in range(2):  # the second time every proof comes from the first
            env, diagnostics = driver.check_text_partial(text, path, proofs)
            assert diagnostics == [] and env.checks == fresh.checks
        broken = text.replace("store(", "stor(", 1)
        with pytest.raises(WspError) as err:
            driver.check_text(broken, path)
        assert driver.check_text_partial(broken, path, proofs)[1] == err.value.diagnostics
    assert proofs


def test_a_bug_in_a_handler_is_logged_and_answered_empty():
    from ptowsp.lsp import server

    logged = []

    class Stub:
        def log(self, message):
            logged.append(message)

    @server._guarded(list)
    def broken(ls, params):
        raise KeyError("nothing")

    assert broken(Stub(), None) == []
    assert "internal error in broken: KeyError" in logged[0]


def test_an_error_in_an_imported_file_is_shown_in_that_file(session):
    client, folder = session
    lib = folder / "lib_shared.wsp"
    lib.write_text(lib.read_text().replace("const TILES = 4", "const TILES = 4 +"))
    main = (folder / MAIN).as_uri()
    client.request("initialize", {"processId": None, "capabilities": {}})
    client.notify("initialized", {})
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": main, "languageId": "wsp", "version": 1, "text": (folder / MAIN).read_text()}})
    published = {}
    while len(published) < 2:
        message = client.next_message()
        if message.get("method") == "textDocument/publishDiagnostics":
            published[message["params"]["uri"]] = message["params"]["diagnostics"]
    [diag] = published[lib.as_uri()]
    assert diag["range"]["start"]["line"] == 1 and diag["source"] == "wspc"
    # the file fixed and saved: its diagnostics are cleared
    lib.write_text(lib.read_text().replace("const TILES = 4 +", "const TILES = 4"))
    client.notify("textDocument/didSave", {"textDocument": {"uri": main}})
    cleared = {}
    while len(cleared) < 2:
        message = client.next_message()
        if message.get("method") == "textDocument/publishDiagnostics":
            cleared[message["params"]["uri"]] = message["params"]["diagnostics"]
    assert cleared == {main: [], lib.as_uri(): []}
    assert client.request("shutdown", None) is None
    client.notify("exit", None)
    assert client.proc.wait(timeout=GUARD) == 0
    assert not client.logged, client.logged


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.wsp")) + [PROGRAMS / MAIN],
                         ids=lambda p: p.name)
def test_every_name_of_the_examples_has_an_answer(path: Path):
    """Hover, definition and completion at every name of every example: no exception, a hover
    on every use of a declared name, and a definition that is a declaration of that name."""
    from ptowsp.frontend import ast as A
    from ptowsp.lsp import analysis as An

    a = An.analyse(path.read_text(), str(path))
    assert a.main is not None
    assert (a.diagnostics != []) == (path.name == "errors_demo.wsp")  # its errors on purpose
    declared = {d.name.id for d in An.declarations(a.files)}
    for decl in a.main.decls:
        for node in decl.walk():
            if not isinstance(node, A.Name) or node.span.line <= 0:
                continue
            at = (node.span.line, node.span.col)
            found = An.hover(a, *at)
            where = An.definition(a, *at)
            assert An.completions(a, *at, None)
            if any(isinstance(n, A.Combinator) and n.name is node for n in decl.walk()):
                assert "a schedule combinator" in found[0]
            if node.id in declared and where is not None:
                assert found is not None, (node, at)
                assert An.source_of(a, where) == node.id, (node, at, where)
