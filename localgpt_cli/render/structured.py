"""`chat --schema` packets -> what a script reads: the validated answer as one compact
JSON line on stdout and nothing else (no Markdown, no sources, no thinking on stdout,
whatever the terminal), so `| jq` never meets anything but the document.

When the answer never matched, stdout stays empty; stderr gets each raw answer the model
gave (shown, not obeyed: output.py's streams make control characters visible) and the
validation error, which is also the exit code's error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from localgpt_cli.kernel.packets import StreamPacket
from localgpt_cli.render.output import Output


class StructuredRenderer:
    """The renderer of a --schema turn without --json."""

    def __init__(self, output: Output, attempts: Callable[[], list[dict[str, Any]]]) -> None:
        self.out = output.stdout
        self.err = output.stderr
        self.attempts = attempts  # the turn's raw answers so far, and what was wrong

    def packet(self, p: StreamPacket) -> None:
        kind, payload = p["type"], p["payload"]
        if kind == "tool_result":
            from localgpt_cli.render.chat import tool_line

            mark = "" if payload["ok"] else " (failed)"
            self.err.write(f"{tool_line(payload['name'], {}, payload['result'])}{mark}\n")
        elif kind == "error":
            if payload["code"] == "schema_mismatch":
                self._raw_answers()
            self.err.write(f"localgpt: error: {payload['message']}\n")
        elif kind == "done" and "structured" in payload:
            from localgpt_cli.render.ndjson import dumps

            self.out.write(dumps(payload["structured"]).decode())
            self.out.flush()

    def _raw_answers(self) -> None:
        """Each raw answer and what the validator said of it, on stderr."""
        for number, attempt in enumerate(self.attempts(), start=1):
            self.err.write(f"localgpt: answer {number}, as the model wrote it:\n"
                           f"{attempt['raw'].rstrip()}\n")
            self.err.write(f"localgpt: answer {number}: {attempt['error']}\n")

    def close(self) -> None:
        self.out.flush()
        self.err.flush()
