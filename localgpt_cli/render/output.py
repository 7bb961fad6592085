"""Which output mode a command runs in, and the stderr channel for diagnostics.

Decided once per process: `--json` gives NDJSON; otherwise a TTY gets rich text and a
pipe gets plain text with no ANSI codes. A terminal gets no control character from the
text itself (render/terminal.py): they are shown as `^[`, never obeyed. Warnings and
errors always go to stderr (as JSON lines in --json mode), so stdout carries only what a
script asked for.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import IO, Any

from localgpt_cli.errors import LocalGPTError
from localgpt_cli.render.terminal import guard, isatty, safe_console, unguarded


@dataclass
class Output:
    """The output mode and the streams of one invocation."""

    json: bool = False
    color: bool = True
    stdout: IO[str] = field(default_factory=lambda: sys.stdout)
    stderr: IO[str] = field(default_factory=lambda: sys.stderr)
    _console: Any = None
    _err_console: Any = None
    _writer: Any = None

    def __post_init__(self) -> None:
        # A terminal never receives a control character from a model, a file or the
        # history raw (render/terminal.py); a pipe gets the bytes.
        self.stdout = guard(self.stdout)
        self.stderr = guard(self.stderr)

    @property
    def tty(self) -> bool:
        return isatty(self.stdout)

    @property
    def pretty(self) -> bool:
        """Rich output: stdout is a terminal and no --json."""
        return not self.json and self.tty

    @property
    def use_color(self) -> bool:
        return self.color and "NO_COLOR" not in os.environ

    def console(self) -> Any:
        """The rich console on stdout (imported only when something is drawn)."""
        if self._console is None:
            self._console = safe_console(
                file=unguarded(self.stdout), no_color=not self.use_color, highlight=False,
                soft_wrap=False,
            )
        return self._console

    def err_console(self) -> Any:
        if self._err_console is None:
            self._err_console = safe_console(
                file=unguarded(self.stderr),
                no_color=not self.use_color,
                highlight=False,
                force_terminal=None if isatty(self.stderr) else False,
            )
        return self._err_console

    def record(self, obj: dict[str, Any]) -> None:
        """Write one NDJSON record to stdout."""
        if self._writer is None:
            from localgpt_cli.render.ndjson import NDJSONWriter

            stream = getattr(self.stdout, "buffer", None)
            self._writer = NDJSONWriter(stream) if stream is not None else _TextWriter(self)
        self._writer.write(obj)

    def warn(self, code: str, message: str) -> None:
        if self.json:
            from localgpt_cli.render.ndjson import dumps

            line = dumps({"type": "warning", "code": code, "message": message})
            self.stderr.write(line.decode())
        else:
            self.stderr.write(f"localgpt: warning: {message}\n")
        self.stderr.flush()

    def error(self, err: LocalGPTError) -> None:
        """Report an error: always one line on stderr, and a record on stdout with --json.

        stderr first: when stdout is a closed pipe, the person still reads the error."""
        self.stderr.write(f"localgpt: error: {err}\n")
        self.stderr.flush()
        if self.json:
            self.record({"type": "error", **err.to_payload()})

    def info(self, message: str) -> None:
        """A note for a person (stderr; nothing in --json mode)."""
        if not self.json:
            self.stderr.write(f"{message}\n")
            self.stderr.flush()


class _TextWriter:
    """NDJSON onto a text stream (CliRunner gives one without .buffer)."""

    def __init__(self, out: Output) -> None:
        self.out = out

    def write(self, obj: Any) -> None:
        from localgpt_cli.render.ndjson import dumps

        self.out.stdout.write(dumps(obj).decode())
        self.out.stdout.flush()
