"""Snapshot what wspc shows users, to prove a refactor changed none of it.

    python tools/snapshot.py OUT_DIR      # one text file per (program, form)
    diff -r OLD_DIR NEW_DIR               # byte-identical, or the changes a commit must explain

For every `.wsp` file under examples/ and tests/ (valid and wrong programs alike) it records,
through the `wspc` command line run in-process, the exit status, stdout and stderr of: `check`;
`compile --emit ast`; `--emit ir` at -O0 and -O2; `--emit c` at -O0 and -O2; `--print-after all
--verify-each`; `compile --target ascend_npu` (every file of the tree); and `fmt --diff` (what
`wspc fmt` would change, which writes nothing). The checkout's
absolute path is replaced by `<ROOT>`, so snapshots of two checkouts compare. Nothing is built
or run: only the forms that text produces.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
FORMS = {
    "check": ["check", "{f}"],
    "ast": ["compile", "{f}", "--emit", "ast"],
    "ir0": ["compile", "{f}", "--emit", "ir", "-O0"],
    "ir2": ["compile", "{f}", "--emit", "ir"],
    "c0": ["compile", "{f}", "--emit", "c", "-O0"],
    "c2": ["compile", "{f}", "--emit", "c"],
    "passes": ["compile", "{f}", "--emit", "ir", "--print-after", "all", "--verify-each"],
    "ascend": ["compile", "{f}", "--target", "ascend_npu", "-o", "{tree}"],
    "fmt": ["fmt", "--diff", "{f}"],
}


def programs() -> list[Path]:
    found = sorted(ROOT.glob("examples/**/*.wsp")) + sorted(ROOT.glob("tests/**/*.wsp"))
    return [p.relative_to(ROOT) for p in found]


def main(out: Path) -> int:
    from ptowsp.cli import main as wspc

    os.chdir(ROOT)
    out.mkdir(parents=True, exist_ok=True)
    runner = CliRunner()
    scratch = Path(tempfile.mkdtemp(prefix="wspc-snapshot-"))
    try:
        for f in programs():
            for form, argv in FORMS.items():
                tree = scratch / "tree"
                args = [a.format(f=f, tree=tree) for a in argv]
                result = runner.invoke(wspc, args, catch_exceptions=True)
                text = f"$ wspc {' '.join(args)}\nexit {result.exit_code}\n" \
                       f"-- stdout\n{result.stdout}-- stderr\n{result.stderr}"
                if result.exception and not isinstance(result.exception, SystemExit):
                    text += f"-- exception\n{type(result.exception).__name__}: {result.exception}\n"
                if form == "ascend" and tree.is_dir():
                    for p in sorted(tree.rglob("*")):
                        if p.is_file():
                            text += f"-- file {p.relative_to(tree)}\n{p.read_text()}"
                    shutil.rmtree(tree)
                text = text.replace(str(scratch), "<TMP>").replace(str(ROOT), "<ROOT>")
                name = str(f).replace("/", "__") + f".{form}.txt"
                (out / name).write_text(text)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{len(programs())} programs x {len(FORMS)} forms -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]).resolve()))
