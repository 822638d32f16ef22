// The VS Code client of wspc's language server: starts `wspc lsp` (the command and arguments
// from the `wsp.server.*` settings) over standard input and output for .wsp files. Plain
// JavaScript, so the extension needs no build step: `npm install` (for vscode-languageclient)
// and it runs.
"use strict";

const path = require("path");
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

function serverCommand(config) {
  let command = config.get("server.command", "wspc");
  const folder = vscode.workspace.workspaceFolders && vscode.workspace.workspaceFolders[0];
  // a relative path with a separator (`.venv/bin/wspc`) is the workspace's own install
  if (folder && command.includes("/") && !path.isAbsolute(command)) {
    command = path.join(folder.uri.fsPath, command);
  }
  return command;
}

function activate(context) {
  const config = vscode.workspace.getConfiguration("wsp");
  if (!config.get("server.enabled", true)) {
    return;
  }
  const server = {
    command: serverCommand(config),
    args: config.get("server.args", ["lsp"]),
    transport: TransportKind.stdio,
  };
  client = new LanguageClient(
    "wsp",
    "WSP",
    { run: server, debug: server },
    {
      documentSelector: [{ scheme: "file", language: "wsp" }, { scheme: "untitled", language: "wsp" }],
      synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher("**/*.wsp") },
    }
  );
  context.subscriptions.push(client);
  client.start().catch((err) => {
    vscode.window.showWarningMessage(
      `WSP: could not start \`${server.command} ${server.args.join(" ")}\` (${err.message}); ` +
        "highlighting still works. Set wsp.server.command to your wspc."
    );
  });
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
