"""`chat --schema SPEC --each [PROMPT]`: one structured answer per input line (or per
NUL-terminated record with `-0`) of stdin, one record per input, in order.

The shape is `search --queries`'s: every record names its input (`input_id`, the line
or record number), an answer is `{"type": "structured", "input_id", "value"}` and an
input whose answer never matched the schema (or whose model call failed) is an `error`
record in its place, so a script pairs inputs and outputs by position or by id and sees
every failure. The run goes on after a failure and exits 5 when any input failed.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import EXIT_PARTIAL, InvalidInput, LocalGPTError

if TYPE_CHECKING:
    from localgpt_cli.cli.turn import ChatTurns


class Collector:
    """A renderer that keeps what the record needs: the value or the error."""

    def __init__(self) -> None:
        self.value: Any = None
        self.error: dict[str, Any] | None = None

    def packet(self, p: Any) -> None:
        if p["type"] == "error" and self.error is None:
            self.error = p["payload"]
        elif p["type"] == "done" and "structured" in p["payload"]:
            self.value = p["payload"]["structured"]

    def close(self) -> None:
        pass

# What --each reads of stdin at most: inputs are questions, not an archive; a runaway
# pipe (`cat /dev/zero |`, a multi-GB log) is refused instead of filling the memory.
MAX_INPUT_BYTES = 64 * 2**20


def read_inputs(nul: bool) -> list[tuple[int, str]]:
    """(number, text) of every non-blank input on stdin: lines, or NUL-terminated records
    with -0 (text with newlines in it). Decoded as ingest decodes a file; secrets redacted
    before any model sees them."""
    from localgpt_cli.rag.decode import decode_text
    from localgpt_cli.rag.filetypes import SNIFF_BYTES, looks_binary
    from localgpt_cli.redact import redact

    stream = getattr(sys.stdin, "buffer", None)
    if stream is None or sys.stdin.isatty():
        raise InvalidInput("--each reads its inputs from stdin, and nothing is piped in.",
                           hint="Pipe one input per line: … | localgpt chat --schema S --each")
    data = stream.read(SNIFF_BYTES)  # `cat /dev/zero |` is refused, not read forever
    if not nul and looks_binary(data):
        raise InvalidInput("stdin: input 1 is binary, not text; nothing was sent.",
                           hint="Records separated by NUL need -0.")
    data += stream.read(MAX_INPUT_BYTES + 1 - len(data))
    if len(data) > MAX_INPUT_BYTES:
        raise InvalidInput(f"--each: stdin holds more than {MAX_INPUT_BYTES // 2**20} MiB of "
                           "inputs; nothing was sent.", hint="Split the inputs into runs.")
    pieces = data.split(b"\0") if nul else data.split(b"\n")
    inputs = []
    for number, piece in enumerate(pieces, start=1):
        if looks_binary(piece):
            raise InvalidInput(f"stdin: input {number} is binary, not text; nothing was sent.",
                               hint="Records separated by NUL need -0.")
        text = redact(decode_text(piece)[0])[0].strip()
        if text:
            inputs.append((number, text))
    if not inputs:
        raise InvalidInput("--each: stdin holds no input (one per line, or NUL-separated "
                           "with -0).")
    return inputs


def _request(turns: ChatTurns, prompt: str, text: str) -> Any:
    """One input's request: the input is the context and PROMPT the instruction, as with
    piped stdin; with -t, the template's prompt filled with this input as $input."""
    if turns.template is not None:
        from localgpt_cli.templates import fill

        prompt, piped = fill(turns.template, dict(turns.flags.params), prompt, text)
        return turns.request(prompt, piped)
    return turns.request(prompt, text) if prompt else turns.request(text)


def run_each(turns: ChatTurns, prompt: str, nul: bool) -> int:
    """Every input's turn in order, one record each; the exit code (5: some failed)."""
    output = turns.app.output
    failed = 0
    for number, text in read_inputs(nul):
        collector = Collector()
        try:
            outcome = turns.run(_request(turns, prompt, text), collector)
        except LocalGPTError as exc:  # refused before the model (the input is too long)
            collector.error, outcome = exc.to_payload(), None
        if collector.error is None and outcome is not None and outcome.code == 0:
            output.record({"type": "structured", "input_id": str(number),
                           "value": collector.value})  # fmt: skip
            continue
        failed += 1
        error = collector.error or {"code": "interrupted", "message": "interrupted",
                                    "retryable": False}  # fmt: skip
        output.record({"type": "error", "input_id": str(number), **error})
        if outcome is not None and outcome.code == 130:
            return outcome.code
    return EXIT_PARTIAL if failed else 0
