"""What the REPL's line editor costs at start-up: importing `readline` (the standard
library's, GNU readline here) against `prompt_toolkit` (the editor the REPL uses), beside
`rich.prompt` (what the REPL read lines with before) and an empty interpreter.

Run: python -m tests.bench.line_editor [--runs 15] [--paste]
`--paste` instead types and pastes into each editor in tmux (`paste-buffer -p`, as the
REPL tests do) and prints what a program reading lines with it received: `input()` on
the terminal's own line discipline, the standard `readline` as CPython sets it up,
`readline` with bracketed paste turned on, and prompt_toolkit.
Only the REPL imports the editor (`localgpt --help` does not: tests/test_chat_process.py),
so this is paid once per interactive session, before its first prompt: the last two rows
time `localgpt chat` on a pseudo-terminal from start to its `>>>` prompt (a stand-in in
a child process answers /api/show), with the editor and with `TERM=dumb`, where the REPL
reads plain lines without it.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import pty
import select
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.common import ROOT, interleaved_medians, standin_process, wall

IMPORTS = {
    "python -c pass": "pass",
    "import readline": "import readline",
    "import rich.prompt": "import rich.prompt",
    "from prompt_toolkit import PromptSession": "from prompt_toolkit import PromptSession",
    "localgpt_cli.render.line_editor": "import localgpt_cli.render.line_editor as m; m.LineEditor",
}


READERS = {
    "input(), no editor (the REPL before)": "",
    "readline": "import readline",
    "readline + enable-bracketed-paste": "import readline; "
    "readline.parse_and_bind('set enable-bracketed-paste on')",
    "prompt_toolkit": "from prompt_toolkit import PromptSession; input = PromptSession().prompt",
}
LOOP = """
import sys
out = open(sys.argv[1], "w")
while True:
    try:
        line = input("> ")
    except EOFError:
        break
    out.write(repr(line) + "\\n")
    out.flush()
"""
TRACE = 'Traceback (most recent call last):\n  File "app.py", line 3\n    main()\nNameError: main'


def pasted(setup: str) -> str:
    """What a line-reading loop using `setup`'s editor received: a 4-line paste, a
    15,007-character paste, then `abc` Left Left `X`, each followed by Enter."""
    from tests.tmux import Tmux

    with tempfile.TemporaryDirectory() as tmp:
        got = Path(tmp) / "lines"
        term = Tmux(Path(tmp), argv=[sys.executable, "-c", setup + LOOP, str(got)])
        time.sleep(2)
        for action in (lambda: term.paste(TRACE), lambda: term.paste("x" * 15007),
                       lambda: (term.type("abc"), term.keys("Left", "Left"), term.type("X"))):
            action()
            time.sleep(1.5)
            term.keys("Enter")
            time.sleep(1)
        term.keys("C-d")
        term.wait()
        lines = [ast.literal_eval(line) for line in got.read_text().splitlines()]
    return "; ".join(f"{len(x)} chars" + (f" {x!r}" if len(x) < 12 else "") for x in lines)


def to_first_prompt(env: dict[str, str]) -> float:
    """Seconds from starting `localgpt chat` on a pseudo-terminal to its `>>>` prompt."""
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.chdir(ROOT)
        os.execve(sys.executable, [sys.executable, "-m", "localgpt_cli", "chat"], env)
    screen = b""
    try:
        while b">>>" not in screen and time.perf_counter() - start < 60:
            if select.select([fd], [], [], 0.05)[0]:
                screen += os.read(fd, 65536)
        return time.perf_counter() - start
    finally:
        os.write(fd, b"\x04")  # Ctrl-D ends the REPL
        os.waitpid(pid, 0)
        os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--paste", action="store_true")
    args = parser.parse_args()
    if args.paste:
        for name, setup in READERS.items():
            print(f"{name:36} {pasted(setup)}")
        return
    cases = {name: (lambda code=code: wall([sys.executable, "-c", code]))
             for name, code in IMPORTS.items()}  # fmt: skip
    with standin_process() as url, tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "OLLAMA_HOST": url, "LOCALGPT_HOME": home, "NO_COLOR": "1",
               "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}
        cases["chat to its first prompt (editor)"] = lambda: to_first_prompt(env)
        cases["chat to its first prompt (TERM=dumb)"] = lambda: to_first_prompt(
            {**env, "TERM": "dumb"})
        for fn in cases.values():  # warm the page cache once
            fn()
        medians = interleaved_medians(cases, args.runs)
    base = medians["python -c pass"]
    if args.json:
        print(json.dumps({k: {"median_s": v, "over_python_s": v - base}
                          for k, v in medians.items()}))
        return
    print(f"{'import':42} {'median ms':>10} {'+ms over python':>16}")
    for name, value in medians.items():
        print(f"{name:42} {value * 1000:10.1f} {(value - base) * 1000:16.1f}")


if __name__ == "__main__":
    main()
